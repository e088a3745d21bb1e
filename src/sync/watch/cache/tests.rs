//! The cache's fixtures, shared by its parts' tests (and `intake`'s).

use super::*;
use crate::core::run::scope::RunScope;
use crate::sync::watch::sources::{Change, Event};
use serde_json::json;

/// A round's scope before any member has listed: no member is touched.
pub(in crate::sync::watch) fn none_touched() -> RunScope {
    RunScope {
        clusters: Some(BTreeSet::new()),
        ..RunScope::default()
    }
}

pub(in crate::sync::watch) fn ftc(name: &str, kind: &str, plural: &str, group: &str) -> Value {
    json!({"apiVersion": "core.kubefed.io/v1beta1", "kind": "FederatedTypeConfig",
           "metadata": {"name": name, "namespace": "fed"},
           "spec": {"propagation": "Enabled",
                    "targetType": {"kind": kind, "pluralName": plural, "scope": "Namespaced", "version": "v1",
                                   "group": group},
                    "federatedType": {"group": "types.kubefed.io", "kind": format!("Federated{kind}"),
                                      "pluralName": format!("federated{plural}"), "scope": "Namespaced",
                                      "version": "v1beta1"}}})
}

pub(in crate::sync::watch) fn obj(kind: &str, ns: &str, name: &str, data: &str) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": ns}, "data": {"d": data}})
}

pub(in crate::sync::watch) fn ev(source: Source, change: Change) -> Event {
    Event { source, change }
}

pub(in crate::sync::watch) fn cache() -> Cache {
    let mut c = Cache::default();
    let types = [
        ftc("configmaps", "ConfigMap", "configmaps", ""),
        ftc("namespaces", "Namespace", "namespaces", ""),
    ];
    let mut ns = types[1].clone();
    ns["spec"]["targetType"]["scope"] = json!("Cluster");
    let d = c.apply(ev(
        Source::TypeConfigs,
        Change::replaced(vec![types[0].clone(), ns]),
    ));
    assert!(d.structure);
    c
}

pub(in crate::sync::watch) fn key(t: &str, ns: &str, name: &str) -> WorkKey {
    FederatedRef::new(t, ObjectKey::new(ns, name))
}
