//! Short-lived member credentials (`join --token-ttl`): a bound token from
//! the member's TokenRequest API (`serviceaccounts/token`) instead of a
//! token Secret that never expires, rotated before it does (`kubefedctl
//! rotate`, and the watch by itself). The KubeFedCluster records the
//! lifetime, so that whoever rotates next knows when and for how long;
//! the host Secret keeps KubeFed's `token` key, so KubeFed's controller
//! reads a rotated token as it reads any.

use serde_json::{Value, json};

use crate::cluster::membership::JoinNames;
use crate::cluster::rbac::MEMBER_SERVICE_ACCOUNT_ANNOTATION;

/// On a KubeFedCluster: the token's lifetime in seconds.
pub const TOKEN_TTL_ANNOTATION: &str = "kubefedctl.kubefed.io/token-ttl-seconds";
/// On a KubeFedCluster: when the stored token expires (RFC 3339).
pub const TOKEN_EXPIRES_ANNOTATION: &str = "kubefedctl.kubefed.io/token-expires-at";
/// The shortest lifetime an API server issues (`expirationSeconds` ≥ 600).
pub const MIN_TTL_SECONDS: i64 = 600;

/// A `--token-ttl` shorter than the API server issues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("--token-ttl {0}s is shorter than API servers issue (10m)")]
pub struct TtlTooShort(pub i64);

/// Checks a `--token-ttl`, in seconds.
pub fn check_ttl(seconds: i64) -> Result<i64, TtlTooShort> {
    if seconds < MIN_TTL_SECONDS {
        return Err(TtlTooShort(seconds));
    }
    Ok(seconds)
}

/// The lifetime of a member's stored token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetime {
    pub ttl_seconds: i64,
    /// Seconds since the epoch.
    pub expires_at: i64,
}

impl Lifetime {
    /// From a KubeFedCluster's annotations; `None` for a token that never
    /// expires (a join without `--token-ttl`, or KubeFed's).
    pub fn of_cluster(cluster: &Value) -> Option<Lifetime> {
        let a = &cluster["metadata"]["annotations"];
        Some(Lifetime {
            ttl_seconds: a[TOKEN_TTL_ANNOTATION].as_str()?.parse().ok()?,
            expires_at: crate::time::parse_rfc3339(a[TOKEN_EXPIRES_ANNOTATION].as_str()?)?,
        })
    }

    /// Whether a new token is due: once 80 % of the lifetime has passed,
    /// so that the old token is still valid while the new one spreads.
    pub fn rotation_due(&self, now: i64) -> bool {
        now >= self.expires_at - self.ttl_seconds / 5
    }

    /// Whether a new token is due when it must be renewed `before`
    /// seconds ahead of its expiry (`None`: a fifth of its lifetime, as
    /// [`Lifetime::rotation_due`]); `kubefedctl agent --renew-before`, as
    /// cert-manager's `renewBefore`.
    pub fn renewal_due(&self, now: i64, before: Option<i64>) -> bool {
        now >= self.expires_at - before.unwrap_or(self.ttl_seconds / 5)
    }

    /// Seconds until a new token is due (0: now).
    pub fn due_in(&self, now: i64) -> i64 {
        (self.expires_at - self.ttl_seconds / 5 - now).max(0)
    }

    /// The KubeFedCluster annotations that record it, with the member's
    /// service account (which issues the next token).
    pub fn annotations(&self, service_account: &str) -> Value {
        json!({
            TOKEN_TTL_ANNOTATION: self.ttl_seconds.to_string(),
            TOKEN_EXPIRES_ANNOTATION: crate::time::rfc3339(self.expires_at),
            MEMBER_SERVICE_ACCOUNT_ANNOTATION: service_account,
        })
    }
}

/// The lifetime annotations a join writes on its KubeFedCluster, beside
/// the others: the token's it issued (`--token-ttl`, `issued`; `None` in
/// a preview, which issues none), or, when a member whose token expired
/// (`previous`) goes back to a token that never expires, emptied ones, so
/// that nothing is left to rotate. `None`: nothing to write.
pub fn join_annotations(
    ttl_asked: bool,
    issued: Option<Lifetime>,
    previous: Option<&Value>,
    service_account: &str,
) -> Option<Value> {
    match (ttl_asked, issued) {
        (true, Some(life)) => Some(life.annotations(service_account)),
        (true, None) => None,
        (false, _) if previous.and_then(Lifetime::of_cluster).is_some() => Some(json!({
            TOKEN_TTL_ANNOTATION: "",
            TOKEN_EXPIRES_ANNOTATION: "",
        })),
        (false, _) => None,
    }
}

/// The TokenRequest body (the API server's own audience).
pub fn token_request(ttl_seconds: i64) -> Value {
    json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": ttl_seconds}
    })
}

/// The Role and RoleBinding in the member's federation namespace that let
/// its identity request tokens for itself, and nothing else: the watch and
/// `rotate` renew the credential with the credential.
pub fn token_rbac(names: &JoinNames, ns: &str) -> Vec<Value> {
    let name = token_role_name(names);
    vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": ns},
            "rules": [{"apiGroups": [""], "resources": ["serviceaccounts/token"],
                       "resourceNames": [names.service_account], "verbs": ["create"]}]
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": names.service_account, "namespace": ns}]
        }),
    ]
}

/// The token Role's (and binding's) name.
pub fn token_role_name(names: &JoinNames) -> String {
    format!("{}:token", names.role)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lifetime_is_recorded_read_back_and_due_at_four_fifths() {
        let life = Lifetime {
            ttl_seconds: 3600,
            expires_at: 1_700_003_600,
        };
        let kfc = json!({"metadata": {"annotations": life.annotations("m1-host")}});
        assert_eq!(Lifetime::of_cluster(&kfc), Some(life));
        assert_eq!(
            kfc["metadata"]["annotations"][MEMBER_SERVICE_ACCOUNT_ANNOTATION],
            "m1-host"
        );
        let issued = 1_700_000_000;
        assert!(!life.rotation_due(issued));
        assert!(!life.rotation_due(issued + 2879));
        assert!(life.rotation_due(issued + 2880), "at 80 %");
        assert_eq!(life.due_in(issued), 2880);
        assert!(!life.renewal_due(issued + 2879, None));
        assert!(life.renewal_due(issued + 2880, None));
        assert!(!life.renewal_due(issued + 3299, Some(300)), "5 min before");
        assert!(life.renewal_due(issued + 3300, Some(300)));
        assert_eq!(life.due_in(issued + 4000), 0);
        assert_eq!(
            Lifetime::of_cluster(&json!({"metadata": {}})),
            None,
            "KubeFed's token"
        );
    }

    #[test]
    fn a_join_records_the_issued_lifetime_or_clears_one_it_gives_up() {
        let life = Lifetime {
            ttl_seconds: 600,
            expires_at: 1_700_000_600,
        };
        let short = json!({"metadata": {"annotations": life.annotations("m1-host")}});
        let recorded = join_annotations(true, Some(life), None, "m1-host").unwrap();
        assert_eq!(
            Lifetime::of_cluster(&json!({"metadata": {"annotations": recorded}})),
            Some(life)
        );
        assert_eq!(
            join_annotations(true, None, Some(&short), "m1-host"),
            None,
            "a preview"
        );
        let cleared = join_annotations(false, None, Some(&short), "m1-host").unwrap();
        assert_eq!(
            Lifetime::of_cluster(&json!({"metadata": {"annotations": cleared}})),
            None
        );
        assert_eq!(
            join_annotations(false, None, Some(&json!({})), "m1-host"),
            None
        );
    }

    #[test]
    fn ttls_below_ten_minutes_are_refused_and_the_token_role_names_its_account() {
        assert_eq!(check_ttl(599), Err(TtlTooShort(599)));
        assert_eq!(check_ttl(600), Ok(600));
        assert_eq!(token_request(600)["spec"]["expirationSeconds"], 600);
        let names = JoinNames::new("m1", "host", "fed");
        let rbac = token_rbac(&names, "fed");
        assert_eq!(rbac[0]["rules"][0]["resourceNames"], json!(["m1-host"]));
        assert_eq!(rbac[1]["roleRef"]["name"], token_role_name(&names));
        assert_eq!(
            token_role_name(&names),
            "kubefed-controller-manager:m1-host:token"
        );
    }
}
