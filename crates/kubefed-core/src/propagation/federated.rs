//! A federated object as the sync controller reads it: one accessor per
//! field decide, placement, overrides, deletion and record look at, so
//! that a field's path is spelled once (KubeFed's `FederatedResource`).
//!
//! A borrow of the object's JSON, not a parse of it: the watch decides
//! every object of a full round, and most fields are read once or not at
//! all. Member copies stay plain JSON.

use serde_json::Value;

use crate::describe::{ObjectKey, describe_federated, key_of};

/// A view of one federated object (`FederatedDeployment`, ...).
#[derive(Clone, Copy, Debug)]
pub struct FederatedObject<'a> {
    obj: &'a Value,
}

impl<'a> FederatedObject<'a> {
    pub fn new(obj: &'a Value) -> FederatedObject<'a> {
        FederatedObject { obj }
    }

    /// The object itself, for what reads it whole (hashes, rendering).
    pub fn value(self) -> &'a Value {
        self.obj
    }

    pub fn key(self) -> ObjectKey {
        key_of(self.obj)
    }

    /// `Kind "ns/name"`, as errors about its content name it.
    pub fn describe(self) -> String {
        describe_federated(self.obj)
    }

    pub fn kind(self) -> Option<&'a str> {
        self.obj.get("kind").and_then(Value::as_str)
    }

    pub fn api_version(self) -> Option<&'a str> {
        self.obj.get("apiVersion").and_then(Value::as_str)
    }

    fn metadata(self, field: &str) -> Option<&'a Value> {
        self.obj.get("metadata").and_then(|m| m.get(field))
    }

    pub fn name(self) -> Option<&'a str> {
        self.metadata("name").and_then(Value::as_str)
    }

    pub fn namespace(self) -> Option<&'a str> {
        self.metadata("namespace").and_then(Value::as_str)
    }

    /// `metadata.generation`, 0 when absent.
    pub fn generation(self) -> i64 {
        self.metadata("generation")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    }

    /// A `deletionTimestamp` is set (not null).
    pub fn being_deleted(self) -> bool {
        self.metadata("deletionTimestamp")
            .is_some_and(|t| !t.is_null())
    }

    pub fn has_finalizer(self, finalizer: &str) -> bool {
        self.metadata("finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| x.as_str() == Some(finalizer)))
    }

    /// An annotation's value, when it is a string.
    pub fn annotation(self, key: &str) -> Option<&'a str> {
        self.metadata("annotations")
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
    }

    /// `spec`, whatever it holds.
    pub fn spec(self) -> Option<&'a Value> {
        self.obj.get("spec")
    }

    fn spec_field(self, field: &str) -> Option<&'a Value> {
        self.spec().and_then(|s| s.get(field))
    }

    /// `spec.template`, whatever it holds.
    pub fn template(self) -> Option<&'a Value> {
        self.spec_field("template")
    }

    /// `spec.placement.clusters`, unless absent or null.
    pub fn placement_clusters(self) -> Option<&'a Value> {
        self.placement("clusters")
    }

    /// `spec.placement.clusterSelector`, unless absent or null.
    pub fn cluster_selector(self) -> Option<&'a Value> {
        self.placement("clusterSelector")
    }

    fn placement(self, field: &str) -> Option<&'a Value> {
        self.spec_field("placement")
            .and_then(|p| p.get(field))
            .filter(|v| !v.is_null())
    }

    /// `spec.overrides`, whatever it holds.
    pub fn overrides(self) -> Option<&'a Value> {
        self.spec_field("overrides")
    }

    /// `spec.retainReplicas`, whatever it holds.
    pub fn retain_replicas(self) -> Option<&'a Value> {
        self.spec_field("retainReplicas")
    }

    /// `status`, whatever it holds.
    pub fn status(self) -> Option<&'a Value> {
        self.obj.get("status")
    }

    /// The entries of `status.clusters` (none when it is not a list).
    pub fn status_clusters(self) -> impl Iterator<Item = &'a Value> {
        self.status()
            .and_then(|s| s.get("clusters"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_read_as_their_paths_say() {
        let obj = json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedConfigMap",
            "metadata": {"name": "a", "namespace": "shop", "generation": 3,
                "deletionTimestamp": "t", "finalizers": ["kubefed.io/sync-controller"],
                "annotations": {"kubefed.io/orphan": "true", "n": 1}},
            "spec": {"template": {"data": {}}, "overrides": [], "retainReplicas": true,
                "placement": {"clusters": null, "clusterSelector": {}}},
            "status": {"clusters": [{"name": "m1"}]}});
        let f = FederatedObject::new(&obj);
        assert_eq!(f.key(), ObjectKey::new("shop", "a"));
        assert_eq!(
            (f.kind(), f.api_version()),
            (Some("FederatedConfigMap"), Some("types.kubefed.io/v1beta1"))
        );
        assert_eq!(
            (f.name(), f.namespace(), f.generation()),
            (Some("a"), Some("shop"), 3)
        );
        assert!(f.being_deleted());
        assert!(f.has_finalizer("kubefed.io/sync-controller") && !f.has_finalizer("x"));
        assert_eq!(f.annotation("kubefed.io/orphan"), Some("true"));
        assert_eq!(f.annotation("n"), None, "not a string");
        assert_eq!(f.template(), Some(&json!({"data": {}})));
        assert_eq!(f.placement_clusters(), None, "null is absent");
        assert_eq!(f.cluster_selector(), Some(&json!({})));
        assert_eq!(f.overrides(), Some(&json!([])));
        assert_eq!(f.retain_replicas(), Some(&json!(true)));
        assert_eq!(f.status_clusters().count(), 1);
    }

    #[test]
    fn an_empty_object_has_nothing() {
        let obj = json!({"metadata": {"deletionTimestamp": null}, "spec": [], "status": {"clusters": {}}});
        let f = FederatedObject::new(&obj);
        assert_eq!(f.key(), ObjectKey::default());
        assert_eq!((f.kind(), f.name(), f.generation()), (None, None, 0));
        assert!(!f.being_deleted());
        assert!(!f.has_finalizer("kubefed.io/sync-controller"));
        assert_eq!(
            (f.template(), f.overrides(), f.cluster_selector()),
            (None, None, None)
        );
        assert_eq!(f.status_clusters().count(), 0);
    }
}
