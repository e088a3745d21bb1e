//! How much the host may do in a member: KubeFed's `*` on everything
//! (`--rbac admin`, what KubeFed's `kubefedctl join` writes,
//! `pkg/kubefedctl/join.go`), or only what the federation's own paths use
//! (`--rbac least`): the sync, status and orphaning verbs on the resources
//! of the enabled types, reading Namespaces, the health endpoints and
//! Nodes, and, where the host has them, what RSP scheduling and
//! multi-cluster DNS read.

use serde_json::{Value, json};
use std::collections::BTreeMap;

use crate::cluster::membership::{Scope, health_rules};

/// What a member's identity may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberRbac {
    /// Only what the federation uses, kept in step with the enabled types.
    Least,
    /// `*` on every resource, as KubeFed's join (for a hand-over to KubeFed).
    Admin,
}

impl MemberRbac {
    pub fn as_str(self) -> &'static str {
        match self {
            MemberRbac::Least => "least",
            MemberRbac::Admin => "admin",
        }
    }

    /// A KubeFedCluster's mode and its member's service account, from its
    /// annotations (absent: `admin`, as every member KubeFed's join made).
    pub fn of_cluster(cluster: &Value) -> (MemberRbac, Option<&str>) {
        let annotations = &cluster["metadata"]["annotations"];
        let sa = annotations[MEMBER_SERVICE_ACCOUNT_ANNOTATION].as_str();
        match annotations[MEMBER_RBAC_ANNOTATION].as_str() {
            Some("least") => (MemberRbac::Least, sa),
            _ => (MemberRbac::Admin, sa),
        }
    }

    /// The annotations `join` writes on a KubeFedCluster: none for `admin`
    /// on a new join (KubeFed's objects, byte for byte); for `least`, the
    /// mode, the member's service account, whose role `enable` and
    /// `disable` keep in step, and the kubeconfig context join reached the
    /// member with, which they write it with (the member identity may not
    /// change its own role). `previous`: a re-join's current mode.
    pub fn cluster_annotations(
        self,
        service_account: &str,
        context: &str,
        previous: Option<MemberRbac>,
    ) -> Option<Value> {
        match (self, previous) {
            (MemberRbac::Least, _) => Some(json!({
                MEMBER_RBAC_ANNOTATION: "least",
                MEMBER_SERVICE_ACCOUNT_ANNOTATION: service_account,
                MEMBER_CONTEXT_ANNOTATION: context,
            })),
            (MemberRbac::Admin, Some(MemberRbac::Least)) => {
                Some(json!({MEMBER_RBAC_ANNOTATION: "admin"}))
            }
            (MemberRbac::Admin, _) => None,
        }
    }
}

/// On a KubeFedCluster: its member's identity has least privilege, so
/// `enable` and `disable` keep its rules in step with the types. KubeFed's
/// controllers ignore it.
pub const MEMBER_RBAC_ANNOTATION: &str = "kubefedctl.kubefed.io/member-rbac";
/// On a least-privilege KubeFedCluster: the kubeconfig context `join`
/// reached the member with.
pub const MEMBER_CONTEXT_ANNOTATION: &str = "kubefedctl.kubefed.io/member-context";
/// On a least-privilege KubeFedCluster: the member's service account
/// (`<cluster>-<host>`), which names its roles.
pub const MEMBER_SERVICE_ACCOUNT_ANNOTATION: &str = "kubefedctl.kubefed.io/member-service-account";

/// The verbs the sync (create, replace, delete, the merge patch that
/// unlabels, the read after a conflict), the watch (list, watch), `status
/// --live` (get) and orphaning use on a federated type's target.
pub const SYNC_VERBS: [&str; 7] = [
    "get", "list", "watch", "create", "update", "patch", "delete",
];

/// A resource the federation propagates: an enabled type's target.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SyncedResource {
    /// `""` for the core group.
    pub group: String,
    pub plural: String,
    pub namespaced: bool,
}

/// What else of the host decides the rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostFeatures {
    /// Multi-cluster DNS is installed (`init --with-dns`): the DNS pass
    /// reads members' Services, Ingresses, EndpointSlices (v1 Endpoints on
    /// 1.20) and Nodes.
    pub dns: bool,
}

/// The rules of a least-privilege member identity: in a cluster-scoped
/// federation a ClusterRole's (every synced resource, Namespaces read, the
/// health endpoints, Nodes list); in a namespace-scoped one the Role's in
/// the federation namespace (its namespaced resources; the health
/// ClusterRole is as for `admin`).
pub fn least_rules(resources: &[SyncedResource], scope: Scope, host: HostFeatures) -> Vec<Value> {
    let mut by_group: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for r in resources {
        if scope == Scope::Namespaced && !r.namespaced {
            continue;
        }
        by_group.entry(&r.group).or_default().push(&r.plural);
    }
    let mut rules: Vec<Value> = by_group
        .into_iter()
        .map(|(group, mut plurals)| {
            plurals.sort_unstable();
            plurals.dedup();
            json!({"apiGroups": [group], "resources": plurals, "verbs": SYNC_VERBS})
        })
        .collect();
    // Writing a role, or a binding to one, takes holding what it grants:
    // federating RBAC objects takes `escalate` and `bind`, which is power
    // over the whole member (docs/security.md says so).
    let federates_rbac = resources.iter().any(|r| {
        r.group == "rbac.authorization.k8s.io" && (scope == Scope::Cluster || r.namespaced)
    });
    if federates_rbac {
        rules.push(json!({
            "apiGroups": ["rbac.authorization.k8s.io"],
            "resources": ["clusterroles", "roles"],
            "verbs": ["bind", "escalate"]
        }));
    }
    // RSP scheduling counts the pods of member Deployments and ReplicaSets.
    let schedules = resources
        .iter()
        .any(|r| r.group == "apps" && (r.plural == "deployments" || r.plural == "replicasets"));
    if schedules {
        rules.push(json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}));
    }
    if host.dns {
        rules.push(json!({"apiGroups": [""], "resources": ["services", "endpoints"], "verbs": ["get", "list"]}));
        rules.push(json!({"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get", "list"]}));
        rules.push(json!({"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list"]}));
    }
    if scope == Scope::Cluster {
        rules.push(json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}));
        rules.extend(health_rules());
    }
    rules
}

/// The first (group, resource, verb) of `needed` that `rules` do not
/// grant, as RBAC matches them (`*` matches anything).
pub fn missing<'a>(
    rules: &[Value],
    needed: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
) -> Option<(&'a str, &'a str, &'a str)> {
    let has = |list: &Value, item: &str| {
        list.as_array()
            .is_some_and(|l| l.iter().any(|v| v == "*" || v == item))
    };
    needed.into_iter().find(|(group, resource, verb)| {
        !rules.iter().any(|r| {
            has(&r["apiGroups"], group) && has(&r["resources"], resource) && has(&r["verbs"], verb)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(group: &str, plural: &str, namespaced: bool) -> SyncedResource {
        SyncedResource {
            group: group.into(),
            plural: plural.into(),
            namespaced,
        }
    }

    #[test]
    fn least_rules_grant_the_sync_verbs_on_the_types_and_nothing_wildcard() {
        let types = [
            r("", "configmaps", true),
            r("apps", "deployments", true),
            r("", "namespaces", false),
            r("rbac.authorization.k8s.io", "clusterroles", false),
            r("", "secrets", true),
        ];
        let rules = least_rules(&types, Scope::Cluster, HostFeatures::default());
        let text = serde_json::to_string(&rules).unwrap();
        assert!(!text.contains('*'), "no wildcard: {text}");
        assert_eq!(
            rules[0],
            json!({"apiGroups": [""], "resources": ["configmaps", "namespaces", "secrets"], "verbs": SYNC_VERBS})
        );
        for needed in [
            ("apps", "deployments", "create"),
            ("", "configmaps", "patch"),
            ("", "pods", "list"),
            ("", "namespaces", "watch"),
            ("", "nodes", "list"),
            ("rbac.authorization.k8s.io", "clusterroles", "delete"),
        ] {
            assert_eq!(missing(&rules, [needed]), None, "{needed:?}");
        }
        for refused in [
            ("", "pods", "create"),
            ("", "pods/exec", "create"),
            ("rbac.authorization.k8s.io", "clusterrolebindings", "create"),
            ("apps", "statefulsets", "get"),
            ("", "services", "get"),
        ] {
            assert_eq!(missing(&rules, [refused]), Some(refused), "{refused:?}");
        }
        assert_eq!(
            missing(
                &rules,
                [("rbac.authorization.k8s.io", "clusterroles", "escalate")]
            ),
            None,
            "federated ClusterRoles may grant what the identity does not hold"
        );
        let no_secrets = least_rules(&types[..2], Scope::Cluster, HostFeatures::default());
        assert!(
            missing(
                &no_secrets,
                [("rbac.authorization.k8s.io", "roles", "bind")]
            )
            .is_some(),
            "no RBAC type, no bind"
        );
        assert_eq!(
            missing(&no_secrets, [("", "secrets", "get")]),
            Some(("", "secrets", "get")),
            "Secrets only when they are federated"
        );
    }

    #[test]
    fn a_namespaced_federation_gets_its_namespaced_types_and_dns_reads_when_installed() {
        let types = [r("", "configmaps", true), r("", "namespaces", false)];
        let rules = least_rules(&types, Scope::Namespaced, HostFeatures { dns: true });
        assert_eq!(missing(&rules, [("", "configmaps", "update")]), None);
        assert!(missing(&rules, [("", "namespaces", "get")]).is_some());
        assert!(
            missing(&rules, [("", "nodes", "list")]).is_some(),
            "in the health ClusterRole"
        );
        assert_eq!(
            missing(&rules, [("discovery.k8s.io", "endpointslices", "list")]),
            None
        );
        assert!(
            missing(&rules, [("", "pods", "list")]).is_some(),
            "no RSP target"
        );
    }

    #[test]
    fn the_mode_is_read_from_the_kubefedcluster() {
        let annotations = MemberRbac::Least.cluster_annotations("m1-host", "member1", None);
        let least = json!({"metadata": {"annotations": annotations}});
        assert_eq!(
            MemberRbac::of_cluster(&least),
            (MemberRbac::Least, Some("m1-host"))
        );
        assert_eq!(
            MemberRbac::of_cluster(&json!({"metadata": {}})),
            (MemberRbac::Admin, None)
        );
        assert_eq!(
            MemberRbac::Admin.cluster_annotations("m1-host", "member1", None),
            None,
            "KubeFed's"
        );
        let back =
            MemberRbac::Admin.cluster_annotations("m1-host", "member1", Some(MemberRbac::Least));
        assert_eq!(
            least["metadata"]["annotations"][MEMBER_CONTEXT_ANNOTATION],
            "member1"
        );
        let back = json!({"metadata": {"annotations": back}});
        assert_eq!(MemberRbac::of_cluster(&back).0, MemberRbac::Admin);
        let admin = [json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]})];
        assert_eq!(missing(&admin, [("x", "y", "z")]), None);
    }
}
