//! A member's health as KubeFed's cluster controller records it
//! (`pkg/controller/kubefedcluster/clusterclient.go`,
//! `controller.go`): a probe result → the KubeFedCluster's conditions, and
//! whether the status is worth a write.

use serde_json::{Value, json};

/// What a probe found, in KubeFed's terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    /// `/healthz` said ok; the server's version.
    Ready { version: String },
    /// Reachable, but `/healthz` did not say ok.
    NotReady { message: String },
    /// Not reachable.
    Offline { message: String },
    /// No client could be built from the KubeFedCluster and its Secret.
    ConfigMalformed { message: String },
}

/// How a probe's message begins when the member answered 401.
pub const CREDENTIALS_REFUSED: &str = "the member refused its credentials";

/// The label `LegacyServiceAccountTokenCleanUp` (GA in 1.30) puts on a
/// token Secret listed in its ServiceAccount's `.secrets` after a year
/// unused; the API server refuses its token from then on, and deletes the
/// Secret a year later. Members joined years ago by KubeFed's kubefedctl
/// hold such Secrets.
pub const LEGACY_TOKEN_INVALID_LABEL: &str = "kubernetes.io/legacy-token-invalid-since";

/// What `status` says of a member whose join token Secret carries
/// [`LEGACY_TOKEN_INVALID_LABEL`], and what to run.
pub fn legacy_token_invalid(cluster: &str, secret: &str, since: &str) -> String {
    format!(
        "its token Secret {secret} in {cluster} is labelled {LEGACY_TOKEN_INVALID_LABEL}={since}: Kubernetes invalidated the token after a year unused (LegacyServiceAccountTokenCleanUp); run kubefedctl join {cluster} --error-on-existing=false for a new one"
    )
}

impl Health {
    pub fn is_ready(&self) -> bool {
        matches!(self, Health::Ready { .. })
    }

    /// The member answered 401: the token in the KubeFedCluster's Secret
    /// was revoked (and perhaps replaced there by a new one).
    pub fn credentials_refused(&self) -> bool {
        matches!(self, Health::NotReady { message } if message.starts_with(CREDENTIALS_REFUSED))
    }
}

/// A member's readiness after a probe, as upstream's cluster controller
/// decides it (`pkg/controller/kubefedcluster/controller.go`,
/// `thresholdAdjustedClusterStatus`): a probe that disagrees with the
/// current readiness changes it only after `failure_threshold` (ready →
/// not) or `success_threshold` (not → ready) such probes in a row. `streak`
/// counts them; the result is the health to keep and the new streak.
pub fn after_probe(
    current: &Health,
    probe: Health,
    streak: u32,
    failure_threshold: u32,
    success_threshold: u32,
) -> (Health, u32) {
    if current.is_ready() == probe.is_ready() {
        return (probe, 0);
    }
    let needed = if current.is_ready() {
        failure_threshold
    } else {
        success_threshold
    };
    if streak + 1 >= needed.max(1) {
        (probe, 0)
    } else {
        (current.clone(), streak + 1)
    }
}

/// KubeFed's conditions for a probe result, probed at `now`.
pub fn conditions(h: &Health, now: &str) -> Vec<Value> {
    let c = |t: &str, s: &str, reason: &str, msg: &str| json!({"type": t, "status": s, "reason": reason, "message": msg, "lastProbeTime": now, "lastTransitionTime": now});
    match h {
        Health::Ready { .. } => vec![c(
            "Ready",
            "True",
            "ClusterReady",
            "/healthz responded with ok",
        )],
        // Upstream's message is "/healthz responded without ok"; ours says
        // more where we know more (e.g. credentials refused).
        Health::NotReady { message } => vec![
            c("Ready", "False", "ClusterNotReady", message),
            c(
                "Offline",
                "False",
                "ClusterReachable",
                "cluster is reachable",
            ),
        ],
        Health::Offline { message } => vec![c("Offline", "True", "ClusterNotReachable", message)],
        Health::ConfigMalformed { .. } => vec![c(
            "ConfigMalformed",
            "True",
            "ClusterConfigMalformed",
            "cluster's configuration may be malformed",
        )],
    }
}

/// The KubeFedCluster status to write after a probe, or `None` when its
/// readiness (condition types, statuses, reasons) and version did not
/// change: a probe time alone is not worth a write. Transition times are
/// kept while a condition holds; zones and region are kept as they are.
pub fn status_after_probe(old: &Value, h: &Health, now: &str) -> Option<Value> {
    let essence = |conds: &Value| -> Vec<(String, String, String)> {
        conds
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let f = |k: &str| c[k].as_str().unwrap_or("").to_string();
                (f("type"), f("status"), f("reason"))
            })
            .collect()
    };
    let mut conditions = conditions(h, now);
    for c in conditions.iter_mut() {
        if let Some(prev) = old["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["type"] == c["type"] && p["status"] == c["status"])
        {
            c["lastTransitionTime"] = prev["lastTransitionTime"].clone();
        }
    }
    let version = match h {
        Health::Ready { version } if !version.is_empty() => json!(version),
        _ => old["kubernetesVersion"].clone(),
    };
    if essence(&old["conditions"]) == essence(&json!(conditions))
        && old["kubernetesVersion"] == version
    {
        return None;
    }
    let mut status = json!({"conditions": conditions});
    if !version.is_null() {
        status["kubernetesVersion"] = version;
    }
    for k in ["zones", "region"] {
        if !old[k].is_null() {
            status[k] = old[k].clone();
        }
    }
    Some(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_changes_after_the_thresholds_in_a_row() {
        let up = Health::Ready {
            version: "v1".into(),
        };
        let down = || Health::Offline {
            message: "refused".into(),
        };
        // Ready, failure threshold 3: two failures keep it ready, the third turns it.
        let (h, s) = after_probe(&up, down(), 0, 3, 1);
        assert!(h.is_ready() && s == 1);
        let (h, s) = after_probe(&h, down(), s, 3, 1);
        assert!(h.is_ready() && s == 2);
        let (h, s) = after_probe(&h, down(), s, 3, 1);
        assert!(!h.is_ready() && s == 0);
        // An answered probe in between starts the count again.
        let (h, s) = after_probe(&up, down(), 0, 3, 1);
        let (h, s) = after_probe(&h, up.clone(), s, 3, 1);
        assert!(h.is_ready() && s == 0);
        // Not ready, success threshold 2.
        let (h, s) = after_probe(&down(), up.clone(), 0, 3, 2);
        assert!(!h.is_ready() && s == 1);
        let (h, _) = after_probe(&h, up.clone(), s, 3, 2);
        assert!(h.is_ready());
        // Threshold 1 (and 0, read as 1): at once.
        assert!(!after_probe(&up, down(), 0, 1, 1).0.is_ready());
        assert!(!after_probe(&up, down(), 0, 0, 1).0.is_ready());
    }

    const T0: &str = "2026-01-01T00:00:00Z";
    const T1: &str = "2026-01-01T00:01:00Z";

    fn ready(v: &str) -> Health {
        Health::Ready { version: v.into() }
    }

    #[test]
    fn a_status_is_written_only_when_readiness_or_version_changes() {
        let first = status_after_probe(&Value::Null, &ready("v1.20.2"), T0).unwrap();
        assert_eq!(first["conditions"][0]["type"], "Ready");
        assert_eq!(first["conditions"][0]["reason"], "ClusterReady");
        assert_eq!(first["kubernetesVersion"], "v1.20.2");

        let cases: [(&str, Health, bool); 5] = [
            ("same readiness, later probe", ready("v1.20.2"), false),
            (
                "same readiness, version unknown this time",
                ready(""),
                false,
            ),
            ("upgraded", ready("v1.21.0"), true),
            (
                "not ready",
                Health::NotReady {
                    message: "/healthz responded without ok".into(),
                },
                true,
            ),
            (
                "offline",
                Health::Offline {
                    message: "connection refused".into(),
                },
                true,
            ),
        ];
        for (name, h, writes) in cases {
            assert_eq!(
                status_after_probe(&first, &h, T1).is_some(),
                writes,
                "{name}"
            );
        }
    }

    #[test]
    fn transition_times_hold_while_a_condition_holds() {
        let mut old = status_after_probe(&Value::Null, &ready("v1"), T0).unwrap();
        old["region"] = json!("eu");
        let off = Health::Offline {
            message: "refused".into(),
        };
        let offline = status_after_probe(&old, &off, T1).unwrap();
        assert_eq!(offline["conditions"][0]["type"], "Offline");
        assert_eq!(offline["conditions"][0]["lastTransitionTime"], T1);
        assert_eq!(
            offline["kubernetesVersion"], "v1",
            "the last version known stays"
        );
        assert_eq!(offline["region"], "eu");
        let not_ready = Health::NotReady {
            message: "no".into(),
        };
        let mut nr = status_after_probe(&offline, &not_ready, T1).unwrap();
        nr["conditions"][0]["lastTransitionTime"] = json!(T0);
        let later = conditions(&not_ready, "2026-01-01T00:02:00Z");
        assert_eq!(later.len(), 2, "NotReady says it is reachable");
        assert_eq!(status_after_probe(&nr, &not_ready, T1), None);
        let malformed = Health::ConfigMalformed {
            message: "no secret".into(),
        };
        let m = status_after_probe(&nr, &malformed, T1).unwrap();
        assert_eq!(m["conditions"][0]["reason"], "ClusterConfigMalformed");
    }
}
