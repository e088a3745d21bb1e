//! `unjoin --cleanup` (KubeFed never had it): what leaves the member with
//! the cluster, and what the host stops saying about it. The member's
//! labelled objects get what the sync controller gives a copy whose
//! federated object goes (deleted, or unlabelled on `kubefed.io/orphan`),
//! or, with no federated object, what its orphan cleanup gives them
//! (unlabelled); namespaces go last. In the host, the cluster's entries
//! leave the federated objects' `status.clusters` and the
//! PropagatedVersions' `status.clusterVersions`, written as KubeFed's Go
//! types would (an empty list is left out).

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use crate::describe::{ObjectKey, describe_key, key_of};
use crate::propagation::action::Action;
use crate::propagation::decide::{FederatedType, federated_key, in_reach};
use crate::propagation::deletion::{self, DeleteOptionsError};
use crate::propagation::federated::FederatedObject;
use crate::propagation::member::{ManagedLabel, MemberState, is_system_namespace, managed_label};
use crate::propagation::version::propagated_version_name;

/// unjoin's deletions choose no override.
static NO_LABELS: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();

/// What the federation is and holds, as the member cleanup needs it.
#[derive(Clone, Copy, Debug)]
pub struct Reach<'a> {
    pub kubefed_namespace: &'a str,
    /// A namespace-scoped federation's own namespace; `None`: everywhere.
    pub objects_namespace: Option<&'a str>,
    /// The host's namespaces by name → UID (a host joined to itself keeps
    /// its own namespaces: they are unlabelled, never deleted).
    pub host_namespaces: &'a HashMap<String, String>,
}

/// Why a member object is dealt with as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Its federated object is here: deleted, as when that object goes.
    Federated,
    /// Its federated object says `kubefed.io/orphan: "true"`.
    Orphaning,
    /// The host's own namespace (a host joined to itself).
    HostNamespace,
    /// No federated object accounts for it: unlabelled, as the reconcile's
    /// orphan cleanup does.
    NoFederatedObject,
}

impl Reason {
    /// A few words for listings.
    pub fn note(self) -> &'static str {
        match self {
            Reason::Federated => "",
            Reason::Orphaning => "its federated object orphans it",
            Reason::HostNamespace => "the host's own namespace",
            Reason::NoFederatedObject => "no federated object",
        }
    }
}

/// One member request of the cleanup.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The member object's key.
    pub key: ObjectKey,
    /// [`Action::Delete`] or [`Action::RemoveManagedLabel`].
    pub action: Action,
    pub reason: Reason,
}

/// One enabled type's steps in the member.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeSteps {
    /// The FederatedTypeConfig's name.
    pub type_name: String,
    /// Its target is Namespace: done after every other type.
    pub namespaces: bool,
    pub steps: Vec<Step>,
}

/// A federated object with a `kubefed.io/deleteoption` that is not JSON.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {error}")]
pub struct CleanupError {
    pub what: String,
    pub error: DeleteOptionsError,
}

/// The steps for one type: `labelled` are the member's objects of the
/// type labelled `kubefed.io/managed=true`, `federated` this federation's
/// federated objects of the type. System namespaces, objects out of the
/// federation's reach and objects already being deleted are left alone.
pub fn member_steps(
    type_name: &str,
    t: &FederatedType,
    labelled: &[Value],
    federated: &[Value],
    reach: Reach,
) -> Result<TypeSteps, CleanupError> {
    let by_key: HashMap<ObjectKey, &Value> = federated.iter().map(|f| (key_of(f), f)).collect();
    let is_namespace = t.target.is_namespace();
    let mut steps = Vec::new();
    let mut keyed: Vec<(ObjectKey, &Value)> = labelled.iter().map(|o| (key_of(o), o)).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    for (key, obj) in keyed {
        if managed_label(obj) != ManagedLabel::True
            || !in_reach(t, &key, reach.objects_namespace)
            || (is_namespace && is_system_namespace(&key.name, reach.kubefed_namespace))
        {
            continue;
        }
        let host_namespace = is_namespace
            && reach.host_namespaces.get(&key.name).is_some_and(|uid| {
                obj.pointer("/metadata/uid").and_then(Value::as_str) == Some(uid)
            });
        let step = match by_key.get(&federated_key(t, &key)) {
            Some(fed) => federated_step(t, fed, obj, host_namespace)?,
            None => orphan_step(obj, host_namespace),
        };
        if let Some((action, reason)) = step {
            steps.push(Step {
                key: key.clone(),
                action,
                reason,
            });
        }
    }
    Ok(TypeSteps {
        type_name: type_name.to_string(),
        namespaces: is_namespace,
        steps,
    })
}

/// A copy whose federated object is here: what its deletion would do,
/// without waiting for a copy already terminating.
fn federated_step(
    t: &FederatedType,
    fed: &Value,
    obj: &Value,
    host_namespace: bool,
) -> Result<Option<(Action, Reason)>, CleanupError> {
    let fed = FederatedObject::new(fed);
    let orphan = deletion::is_orphaning(fed);
    let options = if orphan {
        None
    } else {
        deletion::delete_options(fed).map_err(|error| CleanupError {
            what: describe_key(&t.federated_kind, &fed.key()),
            error,
        })?
    };
    let reason = match (orphan, host_namespace) {
        (true, _) => Reason::Orphaning,
        (false, true) => Reason::HostNamespace,
        (false, false) => Reason::Federated,
    };
    Ok(
        match deletion::removal(orphan, options.as_ref(), obj, host_namespace) {
            Some(action @ (Action::Delete { .. } | Action::RemoveManagedLabel)) => {
                Some((action, reason))
            }
            _ => None,
        },
    )
}

/// A labelled copy no federated object accounts for: the orphan cleanup's
/// decision (unlabel).
fn orphan_step(obj: &Value, host_namespace: bool) -> Option<(Action, Reason)> {
    let state = MemberState {
        labels: &NO_LABELS,
        cluster: "",
        ready: true,
        live: Some(obj.clone()),
        unobserved: None,
        is_host_namespace: host_namespace,
    };
    let (decisions, _) = deletion::orphan_cleanup_decisions(&[state]);
    decisions
        .into_iter()
        .next()
        .map(|d| (d.action, Reason::NoFederatedObject))
}

/// The order the member requests are made in, as a sort's comparison:
/// every type but namespaces (by type name), then namespaces, so that an
/// object is dealt with before its namespace goes.
pub fn order(a: &TypeSteps, b: &TypeSteps) -> std::cmp::Ordering {
    (a.namespaces, &a.type_name).cmp(&(b.namespaces, &b.type_name))
}

/// The (Cluster)PropagatedVersion keys of these federated objects of a
/// type (`""` namespace for cluster-scoped ones, ClusterPropagatedVersions).
pub fn version_keys(t: &FederatedType, federated: &[Value]) -> BTreeSet<ObjectKey> {
    federated
        .iter()
        .map(|f| {
            let ObjectKey { namespace, name } = key_of(f);
            ObjectKey::new(namespace, propagated_version_name(&t.target.kind, &name))
        })
        .collect()
}

/// A federated object's `status` without `cluster`'s entry in
/// `clusters`; `None` when it has no such entry (nothing to write).
pub fn status_without(status: &Value, cluster: &str) -> Option<Value> {
    without_entry(status, "clusters", "name", cluster)
}

/// A PropagatedVersion's `status` without `cluster`'s entry in
/// `clusterVersions`; `None` when it has none.
pub fn versions_without(status: &Value, cluster: &str) -> Option<Value> {
    without_entry(status, "clusterVersions", "clusterName", cluster)
}

/// `status` with the entries of `list` whose `field` is `cluster` taken
/// out, the list left out when empty (Go's `omitempty`, as KubeFed's
/// types say); `None` when there were none.
fn without_entry(status: &Value, list: &str, field: &str, cluster: &str) -> Option<Value> {
    let entries = status.get(list)?.as_array()?;
    let named = |e: &Value| e.get(field).and_then(Value::as_str) == Some(cluster);
    if !entries.iter().any(named) {
        return None;
    }
    let kept: Vec<Value> = entries.iter().filter(|e| !named(e)).cloned().collect();
    let mut out = status.clone();
    let map = out.as_object_mut()?;
    if kept.is_empty() {
        map.remove(list);
    } else {
        map.insert(list.to_string(), Value::Array(kept));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::propagation::decide::test_types::{configmaps, namespaces};
    use serde_json::json;

    fn member(ns: &str, name: &str, labels: Value) -> Value {
        let mut meta = json!({"name": name, "labels": labels, "uid": format!("m-{name}")});
        if !ns.is_empty() {
            meta["namespace"] = json!(ns);
        }
        json!({"metadata": meta})
    }

    fn managed(ns: &str, name: &str) -> Value {
        member(ns, name, json!({"kubefed.io/managed": "true"}))
    }

    fn federated(ns: &str, name: &str, annotations: Value) -> Value {
        json!({"metadata": {"namespace": ns, "name": name, "annotations": annotations}})
    }

    fn reach(host: &HashMap<String, String>) -> Reach<'_> {
        Reach {
            kubefed_namespace: "kube-federation-system",
            objects_namespace: None,
            host_namespaces: host,
        }
    }

    fn actions(t: &TypeSteps) -> Vec<(String, &'static str, Reason)> {
        t.steps
            .iter()
            .map(|s| (s.key.name.clone(), s.action.verb(), s.reason))
            .collect()
    }

    #[test]
    fn copies_are_deleted_orphans_unlabelled_and_strangers_left_alone() {
        let host = HashMap::new();
        let mut terminating = managed("shop", "going");
        terminating["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        let labelled = [
            managed("shop", "plain"),
            managed("shop", "kept"),
            managed("shop", "stray"),
            member("shop", "false", json!({"kubefed.io/managed": "false"})),
            terminating,
        ];
        let fed = [
            federated("shop", "plain", json!({})),
            federated("shop", "kept", json!({"kubefed.io/orphan": "true"})),
            federated("shop", "going", json!({})),
        ];
        let t = member_steps("configmaps", &configmaps(), &labelled, &fed, reach(&host)).unwrap();
        assert_eq!(
            actions(&t),
            [
                ("kept".into(), "unlabel", Reason::Orphaning),
                ("plain".into(), "delete", Reason::Federated),
                ("stray".into(), "unlabel", Reason::NoFederatedObject),
            ]
        );
        assert!(!t.namespaces);
    }

    #[test]
    fn delete_options_are_the_reconciles_and_a_bad_one_names_its_object() {
        let host = HashMap::new();
        let labelled = [managed("shop", "a")];
        let fed = [federated(
            "shop",
            "a",
            json!({"kubefed.io/deleteoption": "{\"propagationPolicy\": \"Orphan\"}"}),
        )];
        let t = member_steps("configmaps", &configmaps(), &labelled, &fed, reach(&host)).unwrap();
        assert_eq!(
            t.steps[0].action,
            Action::Delete {
                options: Some(json!({"propagationPolicy": "Orphan"}))
            }
        );
        let bad = [federated(
            "shop",
            "a",
            json!({"kubefed.io/deleteoption": "nope"}),
        )];
        let e = member_steps("configmaps", &configmaps(), &labelled, &bad, reach(&host))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "FederatedConfigMap shop/a: could not deserialize delete options from annotation value 'nope'"
        );
    }

    #[test]
    fn system_and_host_namespaces_are_never_deleted() {
        let host: HashMap<String, String> = [("shared".to_string(), "m-shared".to_string())].into();
        let labelled = [
            managed("", "kube-system"),
            managed("", "default"),
            managed("", "kube-federation-system"),
            managed("", "shared"),
            managed("", "shop"),
        ];
        let fed = [
            federated("shared", "shared", json!({})),
            federated("shop", "shop", json!({})),
        ];
        let t = member_steps("namespaces", &namespaces(), &labelled, &fed, reach(&host)).unwrap();
        assert_eq!(
            actions(&t),
            [
                ("shared".into(), "unlabel", Reason::HostNamespace),
                ("shop".into(), "delete", Reason::Federated),
            ]
        );
        assert!(t.namespaces);
    }

    #[test]
    fn a_namespace_scoped_federation_reaches_its_own_namespace_only() {
        let host = HashMap::new();
        let r = Reach {
            objects_namespace: Some("fed"),
            ..reach(&host)
        };
        let cms = [managed("fed", "a"), managed("other", "b")];
        let t = member_steps("configmaps", &configmaps(), &cms, &[], r).unwrap();
        assert_eq!(
            actions(&t),
            [("a".into(), "unlabel", Reason::NoFederatedObject)]
        );
        let nss = [managed("", "fed"), managed("", "other")];
        let fed = [
            federated("fed", "fed", json!({})),
            federated("other", "other", json!({})),
        ];
        let r = Reach {
            kubefed_namespace: "elsewhere",
            ..r
        };
        let t = member_steps("namespaces", &namespaces(), &nss, &fed, r).unwrap();
        assert_eq!(actions(&t), [("fed".into(), "delete", Reason::Federated)]);
    }

    #[test]
    fn namespaces_come_last() {
        let steps = |name: &str, namespaces| TypeSteps {
            type_name: name.into(),
            namespaces,
            steps: Vec::new(),
        };
        let mut ordered = [
            steps("namespaces", true),
            steps("secrets", false),
            steps("clusterroles.rbac.authorization.k8s.io", false),
        ];
        ordered.sort_by(order);
        let names: Vec<&str> = ordered.iter().map(|t| t.type_name.as_str()).collect();
        assert_eq!(
            names,
            [
                "clusterroles.rbac.authorization.k8s.io",
                "secrets",
                "namespaces"
            ]
        );
    }

    #[test]
    fn the_clusters_entries_go_and_an_empty_list_is_left_out() {
        let status = json!({"observedGeneration": 2, "conditions": [{"type": "Propagation"}],
            "clusters": [{"name": "a"}, {"name": "b", "status": "CreationFailed"}]});
        assert_eq!(
            status_without(&status, "b"),
            Some(
                json!({"observedGeneration": 2, "conditions": [{"type": "Propagation"}],
                "clusters": [{"name": "a"}]})
            )
        );
        assert_eq!(status_without(&status, "c"), None);
        assert_eq!(
            status_without(&json!({"clusters": [{"name": "a"}]}), "a"),
            Some(json!({}))
        );
        assert_eq!(status_without(&json!({}), "a"), None);
        let versions = json!({"templateVersion": "t", "overridesVersion": "o",
            "clusterVersions": [{"clusterName": "a", "version": "1"}, {"clusterName": "b", "version": "2"}]});
        assert_eq!(
            versions_without(&versions, "a"),
            Some(json!({"templateVersion": "t", "overridesVersion": "o",
                "clusterVersions": [{"clusterName": "b", "version": "2"}]}))
        );
        assert_eq!(
            versions_without(
                &json!({"templateVersion": "t", "overridesVersion": "o",
                    "clusterVersions": [{"clusterName": "a", "version": "1"}]}),
                "a"
            ),
            Some(json!({"templateVersion": "t", "overridesVersion": "o"}))
        );
    }

    #[test]
    fn version_keys_follow_the_reconciles_names() {
        let keys = version_keys(&configmaps(), &[federated("shop", "a", json!({}))]);
        assert_eq!(
            keys.into_iter().collect::<Vec<_>>(),
            [ObjectKey::new("shop", "configmap-a")]
        );
        let keys = version_keys(&namespaces(), &[federated("shop", "shop", json!({}))]);
        assert_eq!(
            keys.into_iter().collect::<Vec<_>>(),
            [ObjectKey::new("shop", "namespace-shop")]
        );
    }
}
