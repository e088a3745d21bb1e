//! Pull members (`join --mode pull`): a member the host neither reaches nor
//! holds a credential for. An agent in the member (`kubefedctl agent`)
//! reads its share from the host with an identity of its own and applies it
//! locally; it writes back only its own share: its KubeFedCluster's status
//! (the heartbeat) and one `PropagationReport` per federated object in a
//! namespace of the host that is its alone (`core::propagation::report`).
//!
//! KubeFed v0.10 has no pull mode. Its KubeFedCluster needs a `secretRef`;
//! a pull member's names a Secret that is never written, so KubeFed's own
//! cluster controller, if it takes over, finds no credential and records
//! `ConfigMalformed` (`pkg/controller/kubefedcluster/controller.go`), and
//! its sync controller `ClusterNotReady` for that member: convert or unjoin
//! pull members before a hand-over (docs/membership.md).

use serde_json::{Value, json};

use crate::cluster::health::Health;
use crate::cluster::membership::{
    self, CREATED_BY_JOIN_ANNOTATION, JoinNames, MemberEndpoint, Scope,
    namespace as member_namespace, rbac,
};
use crate::cluster::rbac::{
    MEMBER_CONTEXT_ANNOTATION, MEMBER_RBAC_ANNOTATION, MEMBER_SERVICE_ACCOUNT_ANNOTATION,
    MemberRbac,
};
use crate::cluster::token::{Lifetime, TOKEN_EXPIRES_ANNOTATION, TOKEN_TTL_ANNOTATION};
use crate::run::reconciler::{COMPONENT_LABEL, FederatedResource};

/// The annotation that makes a KubeFedCluster a pull member.
pub const MODE_ANNOTATION: &str = "kubefedctl.kubefed.io/mode";
/// Its value for a pull member (any other value, or none: push).
pub const PULL: &str = "pull";
/// The agent's ServiceAccount: on the host in its report namespace, and
/// in the member in the federation namespace.
pub const AGENT: &str = "kubefedctl-agent";
/// The member Secret holding the agent's host kubeconfig, and its key.
pub const HOST_SECRET: &str = "kubefedctl-agent-host";
pub const HOST_SECRET_KEY: &str = "kubeconfig";
/// Where the agent's pod mounts that Secret.
pub const HOST_KUBECONFIG_PATH: &str = "/etc/kubefedctl/host/kubeconfig";
/// The label on what join writes for a pull member, naming the member.
pub const CLUSTER_LABEL: &str = crate::propagation::report::CLUSTER_LABEL;

/// The lifetime of the agent's host token when `join --mode pull` is given
/// no `--token-ttl`: a day (the agent renews it at 80 %).
pub const DEFAULT_TOKEN_TTL_SECONDS: i64 = 24 * 3600;
/// The token `join --mode pull -o yaml` prints in the member Secret's
/// kubeconfig instead of a real one: a printed manifest holds no
/// credential; `kubefedctl rotate CLUSTER` writes one once both sides
/// are applied.
pub const TOKEN_PLACEHOLDER: &str = "REPLACE-ME-kubefedctl-rotate-writes-the-token";

/// The agent's RBAC names in the member. Its account is always
/// [`AGENT`], so the cluster-wide names carry the federation namespace (a
/// push member's carry the host's name in its account's): a member may
/// belong to federations of other namespaces, each with its agent. Two
/// federations of one namespace name (two hosts' defaults) cannot both
/// pull into one member: their agents would share a namespace.
pub fn member_names(kubefed_namespace: &str) -> JoinNames {
    JoinNames {
        service_account: AGENT.to_string(),
        role: format!("kubefed-controller-manager:{kubefed_namespace}:{AGENT}"),
        health_check: format!("kubefed-controller-manager:{kubefed_namespace}:healthcheck-{AGENT}"),
    }
}

/// Whether a KubeFedCluster's annotations make it a pull member.
pub fn is_pull(annotations: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    annotations
        .and_then(|a| a.get(MODE_ANNOTATION))
        .map(String::as_str)
        == Some(PULL)
}

/// [`is_pull`] of a KubeFedCluster as JSON.
pub fn is_pull_value(cluster: &Value) -> bool {
    cluster
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(MODE_ANNOTATION))
        == Some(&json!(PULL))
}

/// The host namespace a pull member's agent writes its reports to:
/// `<federation namespace>-pull-<cluster>`. RBAC cannot limit writes to a
/// member's entries of a shared object, nor `create` to names; it can
/// limit them to a namespace, as Karmada (`karmada-es-<cluster>`), OCM
/// (the cluster namespace) and KubeFleet (`fleet-member-<name>`) do.
pub fn report_namespace(kubefed_namespace: &str, cluster: &str) -> String {
    format!("{kubefed_namespace}-pull-{cluster}")
}

/// Why a report namespace cannot be named for `cluster` (a DNS label of
/// at most 63 characters), or `None`.
pub fn report_namespace_problem(kubefed_namespace: &str, cluster: &str) -> Option<String> {
    let ns = report_namespace(kubefed_namespace, cluster);
    let label_ok = ns.len() <= 63
        && ns
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !ns.ends_with('-');
    (!label_ok).then(|| {
        format!(
            "a pull member's report namespace {ns:?} must be a DNS label of at most 63 characters: choose a shorter cluster name"
        )
    })
}

/// The Secret name a pull member's KubeFedCluster refers to. KubeFed's
/// CRD requires a `secretRef`; no such Secret is ever written.
pub fn absent_secret_name(cluster: &str) -> String {
    format!("{cluster}-pull-no-credential")
}

/// The host-side RBAC names of one pull member's agent.
pub fn host_role_name(kubefed_namespace: &str, cluster: &str) -> String {
    format!("{AGENT}:{kubefed_namespace}:{cluster}")
}

/// How often an agent writes its KubeFedCluster's status (its heartbeat),
/// whatever its rounds do.
pub const HEARTBEAT_SECONDS: u64 = 20;
/// After how long without a heartbeat the host takes a pull member for not
/// ready: a few heartbeats missed, as KubeFleet's hub does.
pub const SILENT_AFTER_SECONDS: i64 = 90;

/// When an agent tries again after `failures` rounds in a row failed (the
/// host unreachable, say): its interval doubled each time, never more than
/// a minute (nor less than the interval), so that an outage costs a few
/// requests and the agent is back soon after the host.
pub fn round_backoff(interval: std::time::Duration, failures: u32) -> std::time::Duration {
    let cap = interval.max(std::time::Duration::from_secs(60));
    let factor = 1u32.checked_shl(failures.min(16)).unwrap_or(u32::MAX);
    interval.saturating_mul(factor).min(cap)
}

/// A pull member's health as the host sees it, from the status its agent
/// writes (`cluster_status`: the KubeFedCluster's `status`) at `now`
/// (Unix seconds): what the agent last probed in its member while it
/// beats, `Offline` once it is silent.
pub fn agent_health(cluster_status: Option<&Value>, now: i64) -> Health {
    let conditions = cluster_status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array);
    let last_beat = (conditions.into_iter().flatten())
        .filter_map(|c| c.get("lastProbeTime")?.as_str())
        .filter_map(crate::time::parse_rfc3339)
        .max();
    let Some(beat) = last_beat else {
        return Health::Offline {
            message: "pull member: its agent has not reported yet".into(),
        };
    };
    if now - beat > SILENT_AFTER_SECONDS {
        return Health::Offline {
            message: format!(
                "pull member: its agent has not reported since {}",
                crate::time::rfc3339(beat)
            ),
        };
    }
    let cond = |t: &str| {
        (conditions.into_iter().flatten())
            .find(|c| c.get("type").and_then(Value::as_str) == Some(t))
            .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
    };
    let message = |c: &Value| {
        c.get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    if cond("Ready").is_some() {
        let version = cluster_status
            .and_then(|s| s.get("kubernetesVersion"))
            .and_then(Value::as_str)
            .unwrap_or("");
        return Health::Ready {
            version: version.to_string(),
        };
    }
    if let Some(c) = cond("Offline") {
        return Health::Offline {
            message: message(c),
        };
    }
    Health::NotReady {
        message: "pull member: its agent finds its member not ready".into(),
    }
}

/// The KubeFedCluster status an agent writes at each heartbeat: what
/// `health::status_after_probe` writes on a change, else the status as it
/// was with each condition's `lastProbeTime` moved to `now` (a push
/// member's probe time alone is not worth a write; a heartbeat is one).
pub fn heartbeat_status(old: &Value, h: &Health, now: &str) -> Value {
    if let Some(changed) = crate::cluster::health::status_after_probe(old, h, now) {
        return changed;
    }
    let mut status = old.clone();
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conditions {
            c["lastProbeTime"] = json!(now);
        }
    }
    status
}

/// The agent's host token lifetime a pull member's KubeFedCluster
/// records (`TOKEN_TTL_ANNOTATION`, written also where no token was
/// issued yet, as `-o yaml` prints it), else the default.
pub fn token_ttl_of(cluster: &Value) -> i64 {
    cluster
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(TOKEN_TTL_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(|t| t.parse().ok())
        .unwrap_or(DEFAULT_TOKEN_TTL_SECONDS)
}

/// The annotations of a pull member's KubeFedCluster: the mode, the
/// member identity's RBAC mode, the kubeconfig context join reached the
/// member with (which `rotate` and `enable`/`disable` write the member
/// with: the host holds no credential for it), and the agent's host
/// token lifetime (its expiry once one was issued; `None`: a preview).
pub fn cluster_annotations(
    rbac: MemberRbac,
    context: &str,
    ttl_seconds: i64,
    issued: Option<Lifetime>,
) -> Value {
    let mut a = json!({
        MODE_ANNOTATION: PULL,
        MEMBER_RBAC_ANNOTATION: rbac.as_str(),
        MEMBER_SERVICE_ACCOUNT_ANNOTATION: AGENT,
        MEMBER_CONTEXT_ANNOTATION: context,
        TOKEN_TTL_ANNOTATION: ttl_seconds.to_string(),
    });
    if let Some(life) = issued {
        a[TOKEN_EXPIRES_ANNOTATION] = json!(crate::time::rfc3339(life.expires_at));
    }
    a
}

/// The KubeFedCluster of a pull member: its `apiEndpoint` and `caBundle`
/// are the member's as join's kubeconfig saw it (informational: the host
/// never connects), its `secretRef` names a Secret never written.
pub fn kubefed_cluster(
    cluster: &str,
    kubefed_namespace: &str,
    endpoint: &MemberEndpoint,
    annotations: Value,
) -> Value {
    let mut kfc = membership::kubefed_cluster(
        cluster,
        kubefed_namespace,
        &absent_secret_name(cluster),
        endpoint,
    );
    kfc["metadata"]["annotations"] = annotations;
    kfc
}

/// The main role's rules of a least-privilege agent in the member: those
/// of a push member's identity, plus the Lease the agents elect a leader
/// with and the host Secret by name (the agent writes its renewed token
/// there). `enable` and `disable` rewrite the role with these too.
pub fn member_role_rules(least: &[Value]) -> Vec<Value> {
    let mut rules = least.to_vec();
    rules.push(rule(
        "coordination.k8s.io",
        &["leases"],
        &["get", "create", "update", "patch"],
    ));
    rules.push(named_rule(
        "",
        &["secrets"],
        &[HOST_SECRET],
        &["get", "patch", "update"],
    ));
    rules
}

/// `kubeconfig` (the host Secret's, as [`host_kubeconfig`] wrote it or as
/// someone edited it) with the agent user's token replaced; `None` when
/// it has no user to hold one.
pub fn with_token(mut kubeconfig: Value, token: &str) -> Option<Value> {
    let users = kubeconfig.get_mut("users")?.as_array_mut()?;
    let current_user = users.iter().position(|u| u["name"] == AGENT).or_else(|| {
        // One user only: whatever it is called.
        (users.len() == 1).then_some(0)
    })?;
    users[current_user]["user"] = json!({"token": token});
    Some(kubeconfig)
}

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": [group], "resources": resources, "verbs": verbs})
}

fn named_rule(group: &str, resources: &[&str], names: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": [group], "resources": resources, "resourceNames": names, "verbs": verbs})
}

const READ: [&str; 3] = ["get", "list", "watch"];

/// Everything `join --mode pull` needs to know.
#[derive(Clone, Debug)]
pub struct PullMember<'a> {
    pub cluster: &'a str,
    /// The host's federation namespace (also the member's, where the agent runs).
    pub kubefed_namespace: &'a str,
    pub scope: Scope,
    /// The federated resources of every FederatedTypeConfig at join time.
    /// Their API groups are granted whole (`enable` of a type in another
    /// group needs `join --mode pull` again).
    pub types: Vec<FederatedResource>,
    /// The container image holding kubefedctl.
    pub image: &'a str,
    /// `--rbac least` in the member: the main role's rules; `None`: `*`.
    pub member_rules: Option<Vec<Value>>,
    /// `join --agent-objects-namespace`: the agent's `-n`, for a member
    /// other federations also use.
    pub objects_namespace: Option<&'a str>,
}

impl PullMember<'_> {
    fn labels(&self) -> Value {
        json!({"app.kubernetes.io/name": "kubefedctl", COMPONENT_LABEL: "agent",
               CLUSTER_LABEL: self.cluster})
    }

    fn meta(&self, api_version: &str, kind: &str, name: &str, ns: Option<&str>) -> Value {
        let mut metadata = json!({"name": name, "labels": self.labels()});
        if let Some(ns) = ns {
            metadata["namespace"] = json!(ns);
        }
        json!({"apiVersion": api_version, "kind": kind, "metadata": metadata})
    }

    pub fn report_namespace(&self) -> String {
        report_namespace(self.kubefed_namespace, self.cluster)
    }

    /// What the host gets, in creation order: the report namespace, the
    /// agent's ServiceAccount there, and its roles and bindings. No Secret.
    pub fn host_objects(&self) -> Vec<Value> {
        let rbac_v1 = "rbac.authorization.k8s.io/v1";
        let reports = self.report_namespace();
        let name = host_role_name(self.kubefed_namespace, self.cluster);
        let subjects = json!([{"kind": "ServiceAccount", "name": AGENT, "namespace": reports}]);
        let bind = |kind: &str, role_kind: &str, ns: Option<&str>| {
            let mut b = self.meta(rbac_v1, kind, &name, ns);
            b["roleRef"] =
                json!({"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name});
            b["subjects"] = subjects.clone();
            b
        };
        let mut ns = self.meta("v1", "Namespace", &reports, None);
        ns["metadata"]["annotations"] = json!({CREATED_BY_JOIN_ANNOTATION: "true"});
        let mut cluster_role = self.meta(rbac_v1, "ClusterRole", &name, None);
        cluster_role["rules"] = json!(self.object_rules());
        let mut federation_role = self.meta(rbac_v1, "Role", &name, Some(self.kubefed_namespace));
        federation_role["rules"] = json!(self.federation_rules());
        let mut report_role = self.meta(rbac_v1, "Role", &name, Some(&reports));
        report_role["rules"] = json!(self.report_rules());
        // A namespace-scoped federation's objects live in its namespace:
        // the object rules are bound there only.
        let object_binding = match self.scope {
            Scope::Cluster => bind("ClusterRoleBinding", "ClusterRole", None),
            Scope::Namespaced => bind("RoleBinding", "ClusterRole", Some(self.kubefed_namespace)),
        };
        let mut federation_binding = bind("RoleBinding", "Role", Some(self.kubefed_namespace));
        if self.scope == Scope::Namespaced {
            // Two RoleBindings in one namespace: the Role's gets a suffix.
            federation_binding["metadata"]["name"] = json!(format!("{name}:federation"));
        }
        vec![
            ns,
            self.meta("v1", "ServiceAccount", AGENT, Some(&reports)),
            cluster_role,
            federation_role,
            report_role,
            object_binding,
            federation_binding,
            bind("RoleBinding", "Role", Some(&reports)),
        ]
    }

    /// Read access to what the agent decides from: the federated objects
    /// (their groups whole), PropagatedVersions, RSPs and the host's
    /// namespaces (FederatedNamespaces are placed only where one exists).
    fn object_rules(&self) -> Vec<Value> {
        let mut groups: Vec<&str> = self.types.iter().map(|t| t.group.as_str()).collect();
        groups.push("types.kubefed.io");
        groups.sort();
        groups.dedup();
        let mut rules: Vec<Value> = groups.iter().map(|g| rule(g, &["*"], &READ)).collect();
        rules.push(rule(
            "core.kubefed.io",
            &["propagatedversions", "clusterpropagatedversions"],
            &READ,
        ));
        rules.push(rule(
            "scheduling.kubefed.io",
            &["replicaschedulingpreferences"],
            &READ,
        ));
        rules.push(rule("", &["namespaces"], &READ));
        rules
    }

    /// In the federation namespace: the type configs, the KubeFedConfig,
    /// and its own KubeFedCluster and that one's status (the heartbeat):
    /// by name, so no other member's endpoint or status is read or written.
    fn federation_rules(&self) -> Vec<Value> {
        let kfc = ["kubefedclusters"];
        vec![
            rule("core.kubefed.io", &["federatedtypeconfigs"], &READ),
            named_rule(
                "core.kubefed.io",
                &["kubefedconfigs"],
                &["kubefed"],
                &["get", "watch", "list"],
            ),
            named_rule("core.kubefed.io", &kfc, &[self.cluster], &READ),
            named_rule(
                "core.kubefed.io",
                &["kubefedclusters/status"],
                &[self.cluster],
                &["get", "patch", "update"],
            ),
        ]
    }

    /// In its report namespace: its reports, Events, and new tokens for
    /// itself (the agent renews its credential).
    fn report_rules(&self) -> Vec<Value> {
        vec![
            rule(
                crate::propagation::report::GROUP,
                &[crate::propagation::report::PLURAL],
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
            ),
            rule("", &["events"], &["create", "patch"]),
            named_rule("", &["serviceaccounts/token"], &[AGENT], &["create"]),
        ]
    }

    /// The member's RBAC names: [`member_names`].
    pub fn member_names(&self) -> JoinNames {
        member_names(self.kubefed_namespace)
    }

    /// What the member gets, in creation order: the federation namespace,
    /// the agent's ServiceAccount and RBAC (as a push member's identity,
    /// plus the member Lease the agents elect a leader with), the Secret
    /// with the host kubeconfig, and the agent's Deployment.
    pub fn member_objects(&self, host_kubeconfig: &str) -> Vec<Value> {
        let ns = self.kubefed_namespace;
        let names = self.member_names();
        let mut out = vec![member_namespace(ns)];
        let mut sa = self.meta("v1", "ServiceAccount", AGENT, Some(ns));
        sa["automountServiceAccountToken"] = json!(true);
        out.push(sa);
        let rules = self.member_rules.as_deref().map(member_role_rules);
        out.extend(rbac(&names, ns, self.scope, rules.as_deref()));
        let mut secret = self.meta("v1", "Secret", HOST_SECRET, Some(ns));
        secret["type"] = json!("Opaque");
        secret["stringData"] = json!({HOST_SECRET_KEY: host_kubeconfig});
        out.push(secret);
        out.push(self.deployment());
        out
    }

    /// One agent at a time (`Recreate`): a rollout never runs two.
    fn deployment(&self) -> Value {
        let ns = self.kubefed_namespace;
        let labels = self.labels();
        let mut d = self.meta("apps/v1", "Deployment", AGENT, Some(ns));
        let mut args = vec![
            "agent",
            "--cluster",
            self.cluster,
            "--kubefed-namespace",
            ns,
            "--host-kubeconfig",
            HOST_KUBECONFIG_PATH,
        ];
        if let Some(objects) = self.objects_namespace {
            args.extend(["-n", objects]);
        }
        d["spec"] = json!({
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": AGENT,
                    "terminationGracePeriodSeconds": 30,
                    "containers": [{
                        "name": "agent",
                        "image": self.image,
                        "command": ["kubefedctl"],
                        "args": args,
                        "volumeMounts": [{"name": "host", "mountPath": "/etc/kubefedctl/host", "readOnly": true}],
                        "resources": {"requests": {"cpu": "20m", "memory": "48Mi"},
                                      "limits": {"memory": "256Mi"}},
                        "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                                            "runAsNonRoot": true, "runAsUser": 65532},
                    }],
                    "volumes": [{"name": "host", "secret": {"secretName": HOST_SECRET}}],
                },
            },
        });
        d
    }
}

/// What `unjoin` removes of a pull member, each side in deletion order
/// (the agent first in the member; bindings before roles): both scopes'
/// objects, whatever the scope is now, as a push member's unjoin removes
/// both scopes' names. On the host, the report namespace comes last and
/// takes what is in it (the agent's account, its Role and binding, its
/// reports); the member's federation namespace is not listed (unjoin
/// deletes it only when join made it and it is empty).
pub fn removal(cluster: &str, kubefed_namespace: &str) -> (Vec<Value>, Vec<Value>) {
    let (mut host, mut member) = (Vec::new(), Vec::new());
    for scope in [Scope::Cluster, Scope::Namespaced] {
        let m = PullMember {
            cluster,
            kubefed_namespace,
            scope,
            types: Vec::new(),
            image: "",
            member_rules: None,
            objects_namespace: None,
        };
        let reports = m.report_namespace();
        host.extend(m.host_objects().into_iter().rev().filter(|o| {
            o["metadata"]["namespace"] != reports.as_str() && o["kind"] != "Namespace"
        }));
        member
            .extend((m.member_objects("").into_iter().rev()).filter(|o| o["kind"] != "Namespace"));
    }
    let key = |o: &Value| {
        (
            o["kind"].clone(),
            o["metadata"]["namespace"].clone(),
            o["metadata"]["name"].clone(),
        )
    };
    let dedup = |objects: &mut Vec<Value>| {
        let mut seen = Vec::new();
        objects.retain(|o| {
            let k = key(o);
            let new = !seen.contains(&k);
            seen.push(k);
            new
        });
        // Bindings before roles, whichever scope listed them first.
        objects.sort_by_key(|o| match o["kind"].as_str() {
            Some("Deployment") => 0,
            Some("Secret") => 1,
            Some("ClusterRoleBinding" | "RoleBinding") => 2,
            Some("ClusterRole" | "Role") => 3,
            _ => 4,
        });
    };
    dedup(&mut host);
    dedup(&mut member);
    let mut ns = json!({"apiVersion": "v1", "kind": "Namespace"});
    ns["metadata"] = json!({"name": report_namespace(kubefed_namespace, cluster)});
    host.push(ns);
    (host, member)
}

/// The kubeconfig the agent reaches the host with: one cluster, one user
/// (a token of the agent's host ServiceAccount), one context, current.
/// `ca`: base64 of the PEM CA bundle.
pub fn host_kubeconfig(server: &str, ca: Option<&str>, insecure: bool, token: &str) -> String {
    let mut cluster = json!({"server": server});
    if let Some(ca) = ca {
        cluster["certificate-authority-data"] = json!(ca);
    }
    if insecure {
        cluster["insecure-skip-tls-verify"] = json!(true);
    }
    let config = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "host", "cluster": cluster}],
        "users": [{"name": AGENT, "user": {"token": token}}],
        "contexts": [{"name": "host", "context": {"cluster": "host", "user": AGENT}}],
        "current-context": "host",
    });
    // JSON is YAML: kubeconfig loaders read it as is.
    serde_json::to_string_pretty(&config).expect("a kubeconfig serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(scope: Scope) -> PullMember<'static> {
        PullMember {
            cluster: "edge1",
            kubefed_namespace: "kube-federation-system",
            scope,
            types: vec![FederatedResource {
                group: "types.kubefed.io".into(),
                plural: "federatedconfigmaps".into(),
            }],
            image: "kubefedctl:test",
            member_rules: None,
            objects_namespace: None,
        }
    }

    fn rules_of<'v>(objects: &'v [Value], kind: &str, ns: Option<&str>) -> &'v Vec<Value> {
        let o = objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["namespace"].as_str() == ns)
            .unwrap_or_else(|| panic!("a {kind} in {ns:?}"));
        o["rules"].as_array().expect("rules")
    }

    #[test]
    fn a_pull_member_is_told_by_its_annotation() {
        let mut a = std::collections::BTreeMap::new();
        assert!(!is_pull(Some(&a)));
        a.insert(MODE_ANNOTATION.to_string(), "push".to_string());
        assert!(!is_pull(Some(&a)));
        a.insert(MODE_ANNOTATION.to_string(), PULL.to_string());
        assert!(is_pull(Some(&a)));
        assert!(is_pull_value(
            &json!({"metadata": {"annotations": {MODE_ANNOTATION: "pull"}}})
        ));
        assert!(!is_pull_value(&json!({"metadata": {}})));
    }

    #[test]
    fn report_namespaces_are_dns_labels() {
        assert_eq!(report_namespace("fed", "edge1"), "fed-pull-edge1");
        assert_eq!(report_namespace_problem("fed", "edge1"), None);
        let long = "c".repeat(60);
        assert!(
            report_namespace_problem("fed", &long)
                .unwrap()
                .contains("63")
        );
    }

    #[test]
    fn the_agent_may_write_only_its_own_share_on_the_host() {
        let objects = member(Scope::Cluster).host_objects();
        assert!(
            objects.iter().all(|o| o["kind"] != "Secret"),
            "no Secret on the host"
        );
        let reports = "kube-federation-system-pull-edge1";
        // Every write verb is in its report namespace or on its own
        // KubeFedCluster's status, by name.
        let writes = ["create", "update", "patch", "delete"];
        for o in objects.iter().filter(|o| o["rules"].is_array()) {
            for r in o["rules"].as_array().unwrap() {
                let writes_any = r["verbs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|v| writes.contains(&v.as_str().unwrap()));
                if !writes_any {
                    continue;
                }
                let in_reports = o["kind"] == "Role" && o["metadata"]["namespace"] == reports;
                let own_status = r["resources"] == json!(["kubefedclusters/status"])
                    && r["resourceNames"] == json!(["edge1"]);
                assert!(in_reports || own_status, "a write outside its share: {r}");
            }
        }
        // It reads no Secret anywhere.
        for o in objects.iter().filter(|o| o["rules"].is_array()) {
            for r in o["rules"].as_array().unwrap() {
                let res = r["resources"].as_array().unwrap();
                assert!(
                    !(res.contains(&json!("secrets"))
                        || res.contains(&json!("*")) && r["apiGroups"] == json!([""])),
                    "{r}"
                );
            }
        }
        let kfc = rules_of(&objects, "Role", Some("kube-federation-system"));
        assert!(
            kfc.iter()
                .any(|r| r["resources"] == json!(["kubefedclusters"])
                    && r["resourceNames"] == json!(["edge1"]))
        );
    }

    #[test]
    fn a_namespaced_federation_binds_the_object_rules_in_its_namespace() {
        let objects = member(Scope::Namespaced).host_objects();
        assert!(objects.iter().all(|o| o["kind"] != "ClusterRoleBinding"));
        let bindings: Vec<&Value> = objects
            .iter()
            .filter(|o| {
                o["kind"] == "RoleBinding" && o["metadata"]["namespace"] == "kube-federation-system"
            })
            .collect();
        assert_eq!(bindings.len(), 2);
        assert_ne!(
            bindings[0]["metadata"]["name"],
            bindings[1]["metadata"]["name"]
        );
    }

    #[test]
    fn the_member_gets_the_agent_and_its_host_kubeconfig() {
        let kc = host_kubeconfig("https://host:6443", Some("Q0E="), false, "tok");
        let objects = member(Scope::Cluster).member_objects(&kc);
        let secret = objects.iter().find(|o| o["kind"] == "Secret").unwrap();
        assert_eq!(secret["metadata"]["name"], HOST_SECRET);
        let parsed: Value =
            serde_json::from_str(secret["stringData"][HOST_SECRET_KEY].as_str().unwrap()).unwrap();
        assert_eq!(parsed["users"][0]["user"]["token"], "tok");
        assert_eq!(
            parsed["clusters"][0]["cluster"]["certificate-authority-data"],
            "Q0E="
        );
        let d = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
        assert_eq!(d["spec"]["strategy"]["type"], "Recreate");
        let args = &d["spec"]["template"]["spec"]["containers"][0]["args"];
        assert_eq!(args[0], "agent");
        assert_eq!(args[2], "edge1");
        assert_eq!(args.as_array().unwrap().len(), 7, "no -n unless asked");
        let scoped = PullMember {
            objects_namespace: Some("shop"),
            ..member(Scope::Cluster)
        };
        let objects = scoped.member_objects("{}");
        let d = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
        let args = d["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap();
        assert_eq!(args[args.len() - 2..], [json!("-n"), json!("shop")]);
        let binding = objects
            .iter()
            .find(|o| o["kind"] == "ClusterRoleBinding")
            .unwrap();
        assert_eq!(binding["subjects"][0]["name"], AGENT);
    }

    #[test]
    fn least_privilege_members_add_the_lease_and_the_host_secret_by_name() {
        let mut m = member(Scope::Cluster);
        m.member_rules = Some(vec![
            json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}),
        ]);
        let objects = m.member_objects("{}");
        let rules = rules_of(&objects, "ClusterRole", None);
        assert!(rules.iter().any(|r| r["resources"] == json!(["leases"])));
        assert!(
            rules
                .iter()
                .any(|r| r["resourceNames"] == json!([HOST_SECRET]))
        );
    }

    #[test]
    fn failed_rounds_back_off_to_a_minute() {
        let s = std::time::Duration::from_secs;
        let steps: Vec<u64> = (0..8).map(|n| round_backoff(s(5), n).as_secs()).collect();
        assert_eq!(steps, [5, 10, 20, 40, 60, 60, 60, 60]);
        assert_eq!(
            round_backoff(s(120), 3),
            s(120),
            "never less than the interval"
        );
        assert_eq!(round_backoff(s(1), 40), s(60));
    }

    #[test]
    fn unjoin_removes_both_scopes_objects_bindings_first_and_the_report_namespace_last() {
        let (host, member) = removal("edge1", "fed");
        let names: Vec<String> = host
            .iter()
            .map(|o| {
                format!(
                    "{}/{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["namespace"].as_str().unwrap_or("-"),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect();
        let role = "kubefedctl-agent:fed:edge1";
        assert_eq!(
            names,
            [
                format!("RoleBinding/fed/{role}"),
                format!("ClusterRoleBinding/-/{role}"),
                format!("RoleBinding/fed/{role}:federation"),
                format!("Role/fed/{role}"),
                format!("ClusterRole/-/{role}"),
                "Namespace/-/fed-pull-edge1".to_string(),
            ]
        );
        let kinds: Vec<&str> = member.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds[..2], ["Deployment", "Secret"]);
        assert_eq!(kinds.last(), Some(&"ServiceAccount"));
        assert!(!kinds.contains(&"Namespace"));
        let first_role = kinds.iter().position(|k| k.ends_with("Role")).unwrap();
        assert!(
            kinds[first_role..]
                .iter()
                .all(|k| !k.ends_with("RoleBinding")),
            "{kinds:?}"
        );
        // Both scopes' names: the namespaced scope's health ClusterRole too.
        assert!(member.iter().any(|o| o["metadata"]["name"]
            == "kubefed-controller-manager:fed:healthcheck-kubefedctl-agent"));
        // Cluster-wide names carry the federation namespace: another
        // federation's agent in the same member keeps its own.
        let (_, other) = removal("edge1", "fed2");
        let cluster_wide = |objects: &[Value]| -> Vec<String> {
            (objects.iter())
                .filter(|o| o["kind"].as_str().unwrap().starts_with("Cluster"))
                .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert!(
            cluster_wide(&member)
                .iter()
                .all(|n| !cluster_wide(&other).contains(n)),
            "{:?}",
            cluster_wide(&member)
        );
    }

    #[test]
    fn the_cluster_records_the_mode_the_context_and_the_token_lifetime() {
        let life = Lifetime {
            ttl_seconds: 3600,
            expires_at: 1_700_003_600,
        };
        let ep = MemberEndpoint {
            api_endpoint: "https://edge1:6443".into(),
            ca_bundle: Some("Q0E=".into()),
            ..Default::default()
        };
        let a = cluster_annotations(MemberRbac::Least, "edge1-ctx", 3600, Some(life));
        let kfc = kubefed_cluster("edge1", "fed", &ep, a);
        assert!(is_pull_value(&kfc));
        assert_eq!(
            kfc["spec"]["secretRef"]["name"],
            absent_secret_name("edge1")
        );
        assert_eq!(kfc["spec"]["caBundle"], "Q0E=");
        assert_eq!(Lifetime::of_cluster(&kfc), Some(life));
        assert_eq!(token_ttl_of(&kfc), 3600);
        assert_eq!(
            MemberRbac::of_cluster(&kfc),
            (MemberRbac::Least, Some(AGENT))
        );
        assert_eq!(
            kfc["metadata"]["annotations"][MEMBER_CONTEXT_ANNOTATION],
            "edge1-ctx"
        );
        // A preview: the lifetime, no expiry, so nothing reads as issued.
        let preview = json!({"metadata": {"annotations":
            cluster_annotations(MemberRbac::Admin, "c", 7200, None)}});
        assert_eq!(Lifetime::of_cluster(&preview), None);
        assert_eq!(token_ttl_of(&preview), 7200);
        assert_eq!(token_ttl_of(&json!({})), DEFAULT_TOKEN_TTL_SECONDS);
    }

    #[test]
    fn a_new_token_replaces_only_the_agent_users_token() {
        let kc: Value =
            serde_json::from_str(&host_kubeconfig("https://h", None, true, "old")).unwrap();
        let new = with_token(kc.clone(), "new").unwrap();
        assert_eq!(new["users"][0]["user"], json!({"token": "new"}));
        assert_eq!(new["clusters"], kc["clusters"]);
        let other = json!({"users": [{"name": "a"}, {"name": "b"}]});
        assert_eq!(with_token(other, "t"), None, "no user is the agent's");
        assert_eq!(with_token(json!({}), "t"), None);
    }

    #[test]
    fn a_heartbeat_moves_the_probe_time_and_keeps_the_transition() {
        let ready = Health::Ready {
            version: "v1.37.2".into(),
        };
        let first = heartbeat_status(&Value::Null, &ready, "2026-12-06T10:00:00Z");
        assert_eq!(first["conditions"][0]["type"], "Ready");
        let next = heartbeat_status(&first, &ready, "2026-12-06T10:00:20Z");
        assert_eq!(
            next["conditions"][0]["lastProbeTime"],
            "2026-12-06T10:00:20Z"
        );
        assert_eq!(
            next["conditions"][0]["lastTransitionTime"],
            "2026-12-06T10:00:00Z"
        );
        assert_eq!(
            agent_health(
                Some(&next),
                crate::time::parse_rfc3339("2026-12-06T10:01:00Z").unwrap()
            ),
            ready
        );
    }

    #[test]
    fn a_pull_members_health_is_its_agents_last_heartbeat() {
        let beat = |t: i64, ready: &str| {
            json!({"kubernetesVersion": "v1.37.2", "conditions": [{"type": "Ready", "status": ready,
                   "lastProbeTime": crate::time::rfc3339(t)}]})
        };
        assert!(
            matches!(agent_health(None, 100), Health::Offline { message } if message.contains("not reported yet"))
        );
        assert_eq!(
            agent_health(Some(&beat(1000, "True")), 1000 + SILENT_AFTER_SECONDS),
            Health::Ready {
                version: "v1.37.2".into()
            }
        );
        let silent = agent_health(Some(&beat(1000, "True")), 1001 + SILENT_AFTER_SECONDS);
        assert!(matches!(silent, Health::Offline { message } if message.contains("since")));
        assert!(matches!(
            agent_health(Some(&beat(1000, "False")), 1000),
            Health::NotReady { .. }
        ));
    }
}
