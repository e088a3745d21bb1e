//! What joining a member cluster writes, as KubeFed v0.10's join writes it:
//! names, the member's service account, token secret and RBAC, and the
//! host's credentials secret and `KubeFedCluster`.

use serde_json::{Value, json};

/// Scope of a federation control plane (`KubeFedConfig.spec.scope`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Federate across all namespaces (cluster-wide RBAC in members).
    Cluster,
    /// Federate only the kubefed namespace (namespace RBAC in members).
    Namespaced,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Cluster => "Cluster",
            Scope::Namespaced => "Namespaced",
        }
    }

    pub fn parse(text: &str) -> Option<Scope> {
        match text {
            "Cluster" => Some(Scope::Cluster),
            "Namespaced" => Some(Scope::Namespaced),
            _ => None,
        }
    }
}

/// Annotation join puts on a kubefed namespace it created in a member, so
/// that unjoin removes only namespaces that join made.
pub const CREATED_BY_JOIN_ANNOTATION: &str = "kubefedctl.kubefed.io/created-by-join";

/// The names join uses in a member, all derived from the cluster and host names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinNames {
    /// `<cluster>-<host>`: service account and its token secret.
    pub service_account: String,
    /// `kubefed-controller-manager:<sa>`: (cluster) role and binding.
    pub role: String,
    /// `kubefed-controller-manager:<ns>:healthcheck-<sa>` (namespaced scope).
    pub health_check: String,
}

impl JoinNames {
    pub fn new(cluster: &str, host_name: &str, kubefed_namespace: &str) -> JoinNames {
        JoinNames::of_service_account(&format!("{cluster}-{host_name}"), kubefed_namespace)
    }

    /// The names of a join whose service account is `sa` (as a
    /// least-privilege KubeFedCluster records it).
    pub fn of_service_account(sa: &str, kubefed_namespace: &str) -> JoinNames {
        JoinNames {
            role: format!("kubefed-controller-manager:{sa}"),
            health_check: format!(
                "kubefed-controller-manager:{kubefed_namespace}:healthcheck-{sa}"
            ),
            service_account: sa.to_string(),
        }
    }
}

pub fn namespace(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "annotations": {CREATED_BY_JOIN_ANNOTATION: "true"}}
    })
}

/// The member's ServiceAccount. KubeFed's join annotates it
/// `kubernetes.io/enforce-mountable-secrets` (`pkg/kubefedctl/join.go`);
/// the annotation is deprecated since Kubernetes 1.32, whose servers answer
/// it with a `Warning:`, so it is left out on members of 1.32 and later
/// (`member_minor`: the member's minor version, `None` when unknown). It
/// only limits which Secrets Pods of the account may mount, and no Pod
/// runs as this account.
pub fn service_account(names: &JoinNames, ns: &str, member_minor: Option<u32>) -> Value {
    let mut sa = json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": names.service_account, "namespace": ns},
        "automountServiceAccountToken": false
    });
    if member_minor.is_none_or(|m| m < MOUNTABLE_SECRETS_DEPRECATED) {
        sa["metadata"]["annotations"] = json!({"kubernetes.io/enforce-mountable-secrets": "true"});
    }
    sa
}

/// The minor release that deprecated `kubernetes.io/enforce-mountable-secrets`.
pub const MOUNTABLE_SECRETS_DEPRECATED: u32 = 32;

/// The minor version of a server's `/version` (`"37"`, or `"20+"` as some
/// distributions write it).
pub fn minor_version(minor: &str) -> Option<u32> {
    let digits: String = minor.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The token secret the token controller fills (Kubernetes ≥ 1.24 no longer
/// makes one by itself).
pub fn token_secret(names: &JoinNames, ns: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {
            "name": names.service_account, "namespace": ns,
            "annotations": {"kubernetes.io/service-account.name": names.service_account}
        },
        "type": "kubernetes.io/service-account-token"
    })
}

fn subject(names: &JoinNames, ns: &str) -> Value {
    json!([{"kind": "ServiceAccount", "name": names.service_account, "namespace": ns}])
}

/// The cluster-health path: the health endpoints (and `/version`), and
/// Nodes listed for the zones and region DNS records carry.
pub fn health_rules() -> [Value; 2] {
    [
        json!({"nonResourceURLs": ["/healthz", "/readyz", "/livez", "/version"], "verbs": ["get"]}),
        json!({"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}),
    ]
}

/// RBAC objects in the member, in creation order (roles before bindings).
/// `least`: the main role's rules of a least-privilege identity
/// (`cluster::rbac::least_rules`); `None`: KubeFed's `*`.
pub fn rbac(names: &JoinNames, ns: &str, scope: Scope, least: Option<&[Value]>) -> Vec<Value> {
    let rbac = "rbac.authorization.k8s.io/v1";
    let all = json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]);
    let main_rules = |admin: Value| least.map_or(admin, |rules| json!(rules));
    match scope {
        Scope::Cluster => vec![
            json!({
                "apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": names.role},
                "rules": main_rules(json!([
                    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                    {"nonResourceURLs": ["*"], "verbs": ["get"]}
                ]))
            }),
            json!({
                "apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": names.role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": names.role},
                "subjects": subject(names, ns)
            }),
        ],
        Scope::Namespaced => vec![
            json!({
                "apiVersion": rbac, "kind": "Role",
                "metadata": {"name": names.role, "namespace": ns}, "rules": main_rules(all)
            }),
            json!({
                "apiVersion": rbac, "kind": "RoleBinding",
                "metadata": {"name": names.role, "namespace": ns},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": names.role},
                "subjects": subject(names, ns)
            }),
            // Upstream spells the verb "Get", which RBAC never matches; "get" works.
            json!({
                "apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": names.health_check},
                "rules": health_rules()
            }),
            json!({
                "apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": names.health_check},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": names.health_check},
                "subjects": subject(names, ns)
            }),
        ],
    }
}

/// The host's copy of the member's credentials. `data` values are base64,
/// as in the member's token secret they come from.
pub fn host_secret(name: Option<&str>, cluster: &str, ns: &str, data: &Value) -> Value {
    let mut meta = json!({"namespace": ns});
    match name {
        Some(n) => meta["name"] = json!(n),
        None => meta["generateName"] = json!(format!("{cluster}-")),
    }
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "data": data})
}

/// Where and how to reach a member.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberEndpoint {
    pub api_endpoint: String,
    /// base64 of the PEM CA bundle.
    pub ca_bundle: Option<String>,
    pub insecure_skip_tls_verify: bool,
    pub proxy_url: Option<String>,
}

pub fn kubefed_cluster(name: &str, ns: &str, secret: &str, ep: &MemberEndpoint) -> Value {
    let mut spec = json!({"apiEndpoint": ep.api_endpoint, "secretRef": {"name": secret}});
    if let Some(ca) = &ep.ca_bundle {
        spec["caBundle"] = json!(ca);
    }
    if ep.insecure_skip_tls_verify {
        spec["disabledTLSValidations"] = json!(["*"]);
    }
    if let Some(p) = &ep.proxy_url {
        spec["proxyURL"] = json!(p);
    }
    json!({
        "apiVersion": "core.kubefed.io/v1beta1", "kind": "KubeFedCluster",
        "metadata": {"name": name, "namespace": ns}, "spec": spec
    })
}

/// True when `server` names this machine only: a controller running in the
/// host cluster could not reach it.
pub fn is_loopback_endpoint(server: &str) -> bool {
    let rest = server.split("://").nth(1).unwrap_or(server);
    let authority = rest.split('/').next().unwrap_or("");
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    host == "localhost"
        || host.ends_with(".localhost")
        || host == "::1"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_upstream() {
        let n = JoinNames::new("cluster2", "cluster1", "kube-federation-system");
        assert_eq!(n.service_account, "cluster2-cluster1");
        assert_eq!(n.role, "kubefed-controller-manager:cluster2-cluster1");
        assert_eq!(
            n.health_check,
            "kubefed-controller-manager:kube-federation-system:healthcheck-cluster2-cluster1"
        );
    }

    #[test]
    fn rbac_per_scope() {
        let n = JoinNames::new("m", "h", "fed");
        let cluster = rbac(&n, "fed", Scope::Cluster, None);
        let kinds: Vec<&str> = cluster
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["ClusterRole", "ClusterRoleBinding"]);
        assert_eq!(cluster[0]["rules"][0]["verbs"], json!(["*"]));
        assert_eq!(cluster[1]["subjects"][0]["namespace"], "fed");
        let ns = rbac(&n, "fed", Scope::Namespaced, None);
        let kinds: Vec<&str> = ns.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"]
        );
        assert_eq!(ns[0]["metadata"]["namespace"], "fed");
        assert_eq!(ns[2]["metadata"]["name"], n.health_check);
        assert_eq!(
            ns[2]["rules"][0]["verbs"],
            json!(["get"]),
            "not upstream's inert \"Get\""
        );
        let least = [json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]})];
        let cluster = rbac(&n, "fed", Scope::Cluster, Some(&least));
        assert_eq!(cluster[0]["rules"], json!(least), "the least rules, alone");
        let ns = rbac(&n, "fed", Scope::Namespaced, Some(&least));
        assert_eq!(ns[0]["rules"], json!(least));
        assert_eq!(
            ns[2]["rules"][1]["resources"],
            json!(["nodes"]),
            "health as for admin"
        );
    }

    #[test]
    fn kubefed_cluster_fields() {
        let ep = MemberEndpoint {
            api_endpoint: "https://10.0.0.1:6443".into(),
            ca_bundle: Some("Q0E=".into()),
            insecure_skip_tls_verify: true,
            proxy_url: Some("http://proxy:3128".into()),
        };
        let kfc = kubefed_cluster("m", "fed", "m-abcde", &ep);
        assert_eq!(kfc["spec"]["apiEndpoint"], "https://10.0.0.1:6443");
        assert_eq!(kfc["spec"]["caBundle"], "Q0E=");
        assert_eq!(kfc["spec"]["secretRef"]["name"], "m-abcde");
        assert_eq!(kfc["spec"]["disabledTLSValidations"], json!(["*"]));
        assert_eq!(kfc["spec"]["proxyURL"], "http://proxy:3128");
        let plain = kubefed_cluster("m", "fed", "s", &MemberEndpoint::default());
        assert!(plain["spec"].get("disabledTLSValidations").is_none());
        assert!(plain["spec"].get("caBundle").is_none());
    }

    #[test]
    fn host_secret_names_or_generates() {
        let data = json!({"token": "dA=="});
        assert_eq!(
            host_secret(Some("s"), "m", "fed", &data)["metadata"]["name"],
            "s"
        );
        let g = host_secret(None, "m", "fed", &data);
        assert_eq!(g["metadata"]["generateName"], "m-");
        assert!(g["metadata"].get("name").is_none());
    }

    #[test]
    fn loopback_endpoints() {
        for s in [
            "https://127.0.0.1:6443",
            "https://localhost",
            "https://[::1]:443",
            "127.0.0.5:1",
            "https://api.localhost/",
        ] {
            assert!(is_loopback_endpoint(s), "{s}");
        }
        for s in [
            "https://10.0.0.1:6443",
            "https://k8s.example.com",
            "https://[fd00::1]:6443",
        ] {
            assert!(!is_loopback_endpoint(s), "{s}");
        }
    }

    #[test]
    fn the_deprecated_mountable_secrets_annotation_stays_off_new_members() {
        let n = JoinNames::new("m", "host", "kube-federation-system");
        let annotated = |minor| {
            service_account(&n, "kube-federation-system", minor)["metadata"]["annotations"]["kubernetes.io/enforce-mountable-secrets"]
                == "true"
        };
        assert!(annotated(Some(20)) && annotated(Some(31)) && annotated(None));
        assert!(!annotated(Some(32)) && !annotated(Some(37)));
        assert_eq!(minor_version("37"), Some(37));
        assert_eq!(minor_version("20+"), Some(20));
        assert_eq!(minor_version(""), None);
    }
}
