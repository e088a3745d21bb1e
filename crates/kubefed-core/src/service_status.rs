//! KubeFed's status controller (`pkg/controller/status/controller.go`):
//! for the `services` FederatedTypeConfig with `statusCollection: Enabled`
//! and a `statusType` (`FederatedServiceStatus`), one status object per
//! federated Service, named as it, owned by it (so the host's garbage
//! collector removes it with it), listing each ready member's Service
//! `.status` under `clusterStatus`, sorted by cluster name.
//! Upstream runs it only while the `RawResourceStatusCollection` feature
//! gate is off (`Settings::writes_service_status`).

use serde_json::{Map, Value, json};

/// Whether a FederatedTypeConfig is one upstream's status controller can
/// run for: its name is `services`, status is collected, and it names a
/// status type.
pub fn applies(ftc_name: &str, status_collection: bool, has_status_type: bool) -> bool {
    ftc_name == "services" && status_collection && has_status_type
}

/// The status object a federated Service `fed` should have: `api_version`
/// and `kind` of the status type; `clusters` each ready member with its
/// copy's `.status` if it has one.
pub fn desired(
    fed: &Value,
    api_version: &str,
    kind: &str,
    clusters: &[(String, Option<&Value>)],
) -> Value {
    let meta = &fed["metadata"];
    let mut sorted: Vec<&(String, Option<&Value>)> = clusters.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let entries: Vec<Value> = sorted
        .into_iter()
        .map(|(name, copy)| {
            let mut entry = Map::new();
            entry.insert("clusterName".into(), json!(name));
            // Go's `omitempty` leaves out a nil or empty map.
            if let Some(status) = copy
                .map(|c| &c["status"])
                .filter(|s| s.as_object().is_some_and(|m| !m.is_empty()))
            {
                entry.insert("status".into(), status.clone());
            }
            Value::Object(entry)
        })
        .collect();
    let mut obj = json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "ownerReferences": [{
                "apiVersion": fed["apiVersion"],
                "kind": fed["kind"],
                "name": meta["name"],
                "uid": meta["uid"],
            }],
        },
    });
    if !entries.is_empty() {
        obj["clusterStatus"] = Value::Array(entries);
    }
    obj
}

/// What to write to make `existing` (None: absent) say what `desired` says.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    Create(Value),
    /// The existing object with `clusterStatus` replaced (a PUT).
    Update(Value),
}

/// Upstream creates a missing object and updates one whose `clusterStatus`
/// differs; nothing else of an existing object is touched.
pub fn write(existing: Option<&Value>, desired: Value) -> Option<Write> {
    let Some(existing) = existing else {
        return Some(Write::Create(desired));
    };
    let want = desired.get("clusterStatus");
    if existing.get("clusterStatus") == want {
        return None;
    }
    let mut updated = existing.clone();
    updated["clusterStatus"] = want.cloned().unwrap_or_else(|| json!([]));
    Some(Write::Update(updated))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fed() -> Value {
        json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedService",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u-1"}})
    }

    #[test]
    fn only_services_with_collection_and_a_status_type() {
        assert!(applies("services", true, true));
        assert!(!applies("services", false, true));
        assert!(!applies("services", true, false));
        assert!(!applies("deployments.apps", true, true));
    }

    #[test]
    fn one_entry_per_ready_member_sorted_with_its_status() {
        let lb = json!({"status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}});
        let empty = json!({"status": {}});
        let got = desired(
            &fed(),
            "core.kubefed.io/v1alpha1",
            "FederatedServiceStatus",
            &[
                ("m2".into(), Some(&lb)),
                ("m1".into(), None),
                ("m3".into(), Some(&empty)),
            ],
        );
        assert_eq!(
            got,
            json!({"apiVersion": "core.kubefed.io/v1alpha1", "kind": "FederatedServiceStatus",
                "metadata": {"name": "web", "namespace": "shop", "ownerReferences": [
                    {"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedService", "name": "web", "uid": "u-1"}]},
                "clusterStatus": [
                    {"clusterName": "m1"},
                    {"clusterName": "m2", "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}},
                    {"clusterName": "m3"}]})
        );
        let none = desired(&fed(), "v", "K", &[]);
        assert!(none.get("clusterStatus").is_none(), "omitempty");
    }

    #[test]
    fn created_when_missing_updated_when_the_clusters_differ() {
        let want = desired(&fed(), "v", "K", &[("m1".into(), None)]);
        assert_eq!(write(None, want.clone()), Some(Write::Create(want.clone())));
        let mut existing = want.clone();
        existing["metadata"]["resourceVersion"] = json!("7");
        assert_eq!(write(Some(&existing), want.clone()), None);
        let emptied = desired(&fed(), "v", "K", &[]);
        let Some(Write::Update(updated)) = write(Some(&existing), emptied) else {
            panic!("an update")
        };
        assert_eq!(updated["clusterStatus"], json!([]));
        assert_eq!(
            updated["metadata"]["resourceVersion"], "7",
            "the existing object, changed"
        );
    }
}
