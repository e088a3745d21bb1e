//! The built-in Kubernetes types, for offline work: a file says only
//! `apiVersion` and `kind`, and a namespaced object may omit its namespace
//! (KubeFed guessed scope from `metadata.namespace`, which is then wrong).

/// A built-in type: plural and scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuiltinType {
    pub group: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
}

const fn t(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> BuiltinType {
    BuiltinType {
        group,
        kind,
        plural,
        namespaced,
    }
}

const TYPES: &[BuiltinType] = &[
    t("", "ConfigMap", "configmaps", true),
    t("", "Endpoints", "endpoints", true),
    t("", "LimitRange", "limitranges", true),
    t("", "Namespace", "namespaces", false),
    t("", "PersistentVolume", "persistentvolumes", false),
    t("", "PersistentVolumeClaim", "persistentvolumeclaims", true),
    t("", "Pod", "pods", true),
    t("", "ResourceQuota", "resourcequotas", true),
    t("", "Secret", "secrets", true),
    t("", "Service", "services", true),
    t("", "ServiceAccount", "serviceaccounts", true),
    t("apps", "DaemonSet", "daemonsets", true),
    t("apps", "Deployment", "deployments", true),
    t("apps", "ReplicaSet", "replicasets", true),
    t("apps", "StatefulSet", "statefulsets", true),
    t(
        "autoscaling",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        true,
    ),
    t("batch", "CronJob", "cronjobs", true),
    t("batch", "Job", "jobs", true),
    t("extensions", "Ingress", "ingresses", true),
    t("networking.k8s.io", "Ingress", "ingresses", true),
    t("networking.k8s.io", "IngressClass", "ingressclasses", false),
    t(
        "networking.k8s.io",
        "NetworkPolicy",
        "networkpolicies",
        true,
    ),
    t(
        "policy",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    t(
        "rbac.authorization.k8s.io",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    t(
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    t("rbac.authorization.k8s.io", "Role", "roles", true),
    t(
        "rbac.authorization.k8s.io",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    t(
        "scheduling.k8s.io",
        "PriorityClass",
        "priorityclasses",
        false,
    ),
    t("storage.k8s.io", "StorageClass", "storageclasses", false),
    t(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
];

/// The built-in type for `apiVersion` and `kind`, if it is one.
pub fn builtin(api_version: &str, kind: &str) -> Option<BuiltinType> {
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    TYPES
        .iter()
        .copied()
        .find(|t| t.kind == kind && t.group == group)
}

/// The plural of a kind when no API server can be asked: the built-in
/// table's, else Kubernetes' naive one. Live runs take plurals from
/// discovery or the FederatedTypeConfig instead.
pub fn plural_of(kind: &str) -> String {
    builtin_by_kind(kind).map_or_else(|| guess_plural(kind), |t| t.plural.to_string())
}

/// Kubernetes' naive plural of a kind (for types not in the table).
pub fn guess_plural(kind: &str) -> String {
    let k = kind.to_lowercase();
    if k.ends_with('s') || k.ends_with('x') || k.ends_with("ch") || k.ends_with("sh") {
        format!("{k}es")
    } else if let Some(stem) = k
        .strip_suffix('y')
        .filter(|s| !s.ends_with(['a', 'e', 'o', 'u']))
    {
        format!("{stem}ies")
    } else {
        format!("{k}s")
    }
}

/// The built-in type of a kind, preferring current groups over
/// `extensions` (a federated kind names only its target's kind).
pub fn builtin_by_kind(kind: &str) -> Option<BuiltinType> {
    TYPES
        .iter()
        .copied()
        .filter(|t| t.kind == kind)
        .min_by_key(|t| t.group == "extensions")
}

/// The version a built-in group serves today.
pub fn builtin_version(group: &str) -> &'static str {
    match group {
        "autoscaling" => "v2",
        "extensions" => "v1beta1",
        _ => "v1",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knows_scopes_without_a_namespace_in_sight() {
        assert!(builtin("apps/v1", "Deployment").unwrap().namespaced);
        assert!(!builtin("v1", "Namespace").unwrap().namespaced);
        assert!(
            !builtin("rbac.authorization.k8s.io/v1", "ClusterRole")
                .unwrap()
                .namespaced
        );
        assert_eq!(
            builtin("networking.k8s.io/v1", "Ingress").unwrap().plural,
            "ingresses"
        );
        assert!(
            builtin("example.com/v1", "Deployment").is_none(),
            "group matters"
        );
    }

    #[test]
    fn guesses_plurals_like_kubernetes() {
        assert_eq!(guess_plural("EtcdCluster"), "etcdclusters");
        assert_eq!(plural_of("Ingress"), "ingresses");
        assert_eq!(plural_of("NetworkPolicy"), "networkpolicies");
        assert_eq!(plural_of("ServiceDNSRecord"), "servicednsrecords");
        assert_eq!(guess_plural("Policy"), "policies");
        assert_eq!(guess_plural("Gateway"), "gateways");
        assert_eq!(guess_plural("Mailbox"), "mailboxes");
        assert_eq!(guess_plural("Class"), "classes");
    }
}
