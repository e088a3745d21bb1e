//! `reconcile -f PATH`: the federated objects of a change under review take
//! the place of the host's for one run, so that a plan shows what applying
//! them would do (and not what the host holds today).

use serde_json::Value;
use std::collections::{BTreeSet, HashMap, HashSet};

use crate::describe::{ObjectKey, key_of};
use crate::propagation::compare::is_subset;

/// What the files do to one host object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proposed {
    /// Not on the host yet.
    Create,
    /// On the host, and the files say something new.
    Update,
    /// On the host, already saying everything the files say.
    Unchanged,
    /// On the host, absent from the files, and `--prune` selects it.
    Prune,
}

/// The parts of a federated object a file sets (what server-side apply
/// would change): labels, annotations and spec.
fn applied_part(obj: &Value) -> Value {
    serde_json::json!({
        "metadata": {
            "labels": obj["metadata"]["labels"],
            "annotations": obj["metadata"]["annotations"],
        },
        "spec": obj["spec"],
    })
}

/// One type's host objects with the files' in their place: a file object
/// the host has keeps the host's identity, finalizers and status and takes
/// the file's labels, annotations and spec; one the host lacks is added as
/// the file has it; with `prune` (the namespaces to prune in: those the
/// files name, as `kubectl apply --prune` prunes), a host object the files
/// lack is marked deleted at `now` (its members' copies go as a deletion
/// would take them).
/// Returns the objects and what became of each key, in the host's order
/// then the files'.
pub fn overlay(
    host: Vec<Value>,
    files: &[Value],
    prune: Option<&BTreeSet<String>>,
    now: &str,
) -> (Vec<Value>, Vec<(ObjectKey, Proposed)>) {
    let mut out = Vec::with_capacity(host.len() + files.len());
    let mut what = Vec::new();
    // By key: a change of thousands of objects is not quadratic.
    let by_key: HashMap<ObjectKey, &Value> = files.iter().map(|f| (key_of(f), f)).collect();
    let mut on_host = HashSet::new();
    for mut h in host {
        let key = key_of(&h);
        on_host.insert(key.clone());
        match by_key.get(&key).copied() {
            Some(f) if is_subset(&applied_part(f), &applied_part(&h)) => {
                what.push((key, Proposed::Unchanged));
            }
            Some(f) => {
                for part in ["labels", "annotations"] {
                    if !f["metadata"][part].is_null() {
                        h["metadata"][part] = f["metadata"][part].clone();
                    }
                }
                h["spec"] = f["spec"].clone();
                what.push((key, Proposed::Update));
            }
            None if prune.is_some_and(|ns| ns.contains(&key.namespace))
                && h["metadata"]["deletionTimestamp"].is_null() =>
            {
                h["metadata"]["deletionTimestamp"] = now.into();
                what.push((key, Proposed::Prune));
            }
            None => {}
        }
        out.push(h);
    }
    for f in files {
        let key = key_of(f);
        if !on_host.contains(&key) {
            out.push(f.clone());
            what.push((key, Proposed::Create));
        }
    }
    (out, what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fed(name: &str, data: &str) -> Value {
        json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedConfigMap",
            "metadata": {"name": name, "namespace": "shop", "labels": {"app": "shop"}},
            "spec": {"template": {"data": {"a": data}}, "placement": {"clusterSelector": {}}}})
    }

    fn on_host(name: &str, data: &str) -> Value {
        let mut h = fed(name, data);
        h["metadata"]["uid"] = json!(format!("uid-{name}"));
        h["metadata"]["finalizers"] = json!(["kubefed.io/sync-controller"]);
        h["status"] = json!({"clusters": []});
        h
    }

    #[test]
    fn files_take_the_place_of_the_hosts_objects() {
        let host = vec![
            on_host("same", "1"),
            on_host("changed", "1"),
            on_host("dropped", "1"),
        ];
        let files = [fed("same", "1"), fed("changed", "2"), fed("new", "1")];
        let (objects, what) = overlay(host.clone(), &files, None, "2026-01-01T00:00:00Z");
        let key = |n: &str| ObjectKey::new("shop", n);
        assert_eq!(
            what,
            [
                (key("same"), Proposed::Unchanged),
                (key("changed"), Proposed::Update),
                (key("new"), Proposed::Create),
            ]
        );
        assert_eq!(objects.len(), 4, "without --prune the dropped one stays");
        let changed = &objects[1];
        assert_eq!(changed["spec"]["template"]["data"]["a"], "2");
        assert_eq!(
            changed["metadata"]["uid"], "uid-changed",
            "the host's identity stays"
        );
        assert_eq!(
            changed["metadata"]["finalizers"],
            host[1]["metadata"]["finalizers"]
        );
        assert_eq!(objects[2], host[2]);
        assert_eq!(objects[3], files[2]);

        let shop: BTreeSet<String> = ["shop".to_string()].into();
        let (objects, what) = overlay(host.clone(), &files, Some(&shop), "2026-01-01T00:00:00Z");
        assert_eq!(what[2], (key("dropped"), Proposed::Prune));
        assert_eq!(
            objects[2]["metadata"]["deletionTimestamp"],
            "2026-01-01T00:00:00Z"
        );
        // Only in the namespaces the files name.
        let elsewhere: BTreeSet<String> = ["other".to_string()].into();
        let (_, what) = overlay(host, &files, Some(&elsewhere), "2026-01-01T00:00:00Z");
        assert!(what.iter().all(|(_, p)| *p != Proposed::Prune));
    }

    #[test]
    fn an_object_already_being_deleted_is_not_pruned_again() {
        let mut going = on_host("going", "1");
        going["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
        let shop: BTreeSet<String> = ["shop".to_string()].into();
        let (objects, what) = overlay(
            vec![going.clone()],
            &[],
            Some(&shop),
            "2026-01-01T00:00:00Z",
        );
        assert!(what.is_empty());
        assert_eq!(objects, [going]);
    }
}
