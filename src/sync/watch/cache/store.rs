//! The objects each watch holds, keyed, as kube-runtime's reflector
//! store: a change applied, and which keys it changed (in more than their
//! status, or in their status alone: `core::held` tells them apart). No
//! I/O: what a change means for the federation is `triggers`'.

use crate::core::describe::{ObjectKey, key_of};
use crate::core::held::Held;
use crate::sync::watch::sources::{Change, values};
use serde_json::Value;
use std::collections::BTreeMap;

/// A watched set of objects.
#[derive(Clone, Debug, Default)]
pub struct Store {
    pub objects: BTreeMap<ObjectKey, Held>,
    pub state: StoreState,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum StoreState {
    /// Not listed yet.
    #[default]
    Syncing,
    Listed,
    /// The source does not exist there (404), or its watch failed.
    NotServed(String),
    Failed(String),
}

pub(super) fn name_of(v: &Value) -> String {
    v["metadata"]["name"].as_str().unwrap_or("").to_string()
}

/// A typed object, or a warning naming it and the field that is wrong.
fn parse<T: serde::de::DeserializeOwned>(v: Value, warnings: &mut Vec<String>) -> Option<T> {
    let what = crate::core::describe::quoted(&v, "object");
    match crate::core::describe::typed::<T>(&v, "") {
        Ok(t) => Some(t),
        Err(e) => {
            warnings.push(format!("{what}: {e}; ignored until it is fixed"));
            None
        }
    }
}

/// Applies a change to typed objects by name; returns warnings for those
/// that cannot be read (a malformed object is ignored, as if absent).
pub(super) fn apply_typed<T: serde::de::DeserializeOwned>(
    map: &mut BTreeMap<String, T>,
    change: Change,
) -> Vec<String> {
    let mut warnings = Vec::new();
    match change {
        Change::Applied(v) => {
            let name = name_of(&v);
            match parse(v, &mut warnings) {
                Some(t) => {
                    map.insert(name, t);
                }
                None => {
                    map.remove(&name);
                }
            }
        }
        Change::Deleted(v) => {
            map.remove(&name_of(&v));
        }
        Change::Replaced(vs) => {
            *map = values(vs)
                .filter_map(|v| Some((name_of(&v), parse(v, &mut warnings)?)))
                .collect();
        }
        Change::Failed { .. } | Change::Kept(..) => {}
    }
    warnings
}

pub(super) fn apply_by_name(map: &mut BTreeMap<String, Value>, change: Change) {
    match change {
        Change::Applied(v) => {
            map.insert(name_of(&v), v);
        }
        Change::Deleted(v) => {
            map.remove(&name_of(&v));
        }
        Change::Replaced(vs) => *map = values(vs).map(|v| (name_of(&v), v)).collect(),
        Change::Failed { .. } | Change::Kept(..) => {}
    }
}

/// Applies a change to objects by key (an applied host object held whole,
/// a member copy as it was kept); returns the keys whose object was added,
/// removed or changed in more than its status (see `core::held`).
pub(super) fn apply_keyed(map: &mut BTreeMap<ObjectKey, Held>, change: Change) -> Vec<ObjectKey> {
    apply_keyed_status(map, change).0
}

/// [`apply_keyed`], also returning the keys whose status alone changed.
fn apply_keyed_status(
    map: &mut BTreeMap<ObjectKey, Held>,
    change: Change,
) -> (Vec<ObjectKey>, Vec<ObjectKey>) {
    let mut news = Vec::new();
    let mut status_only = Vec::new();
    let mut compare = |key: &ObjectKey, old: Option<&Held>, new: &Held| match old
        .map_or(Some(true), |old| new.change_from(old))
    {
        Some(true) => news.push(key.clone()),
        Some(false) => status_only.push(key.clone()),
        None => {}
    };
    match change {
        Change::Applied(v) => {
            let key = key_of(&v);
            let held = Held::whole(&v);
            compare(&key, map.get(&key), &held);
            map.insert(key, held);
        }
        Change::Deleted(v) => {
            let key = key_of(&v);
            map.remove(&key);
            news.push(key);
        }
        Change::Replaced(vs) => {
            let mut new = BTreeMap::new();
            for (key, held) in vs {
                compare(&key, map.get(&key), &held);
                new.insert(key, held);
            }
            news.extend(map.keys().filter(|k| !new.contains_key(*k)).cloned());
            *map = new;
        }
        Change::Kept(key, held) => {
            compare(&key, map.get(&key), &held);
            map.insert(key, held);
        }
        Change::Failed { .. } => {}
    }
    (news, status_only)
}

/// Applies a change to a store: the keys with news, and those whose status
/// alone changed.
pub(super) fn apply_store(store: &mut Store, change: Change) -> (Vec<ObjectKey>, Vec<ObjectKey>) {
    match change {
        Change::Failed {
            not_served,
            message,
        } => {
            store.state = if not_served {
                StoreState::NotServed(message)
            } else {
                StoreState::Failed(message)
            };
            (Vec::new(), Vec::new())
        }
        change => {
            let replaced = matches!(change, Change::Replaced(_));
            let touched = apply_keyed_status(&mut store.objects, change);
            if replaced {
                store.state = StoreState::Listed;
            }
            touched
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::watch::cache::tests::obj;
    use serde_json::json;

    /// A store is usable from its first complete list on; a failure says
    /// whether the source is served there.
    #[test]
    fn a_store_is_listed_by_a_list_and_says_why_it_fails() {
        let mut s = Store::default();
        assert_eq!(s.state, StoreState::Syncing);
        let a = obj("ConfigMap", "shop", "a", "1");
        let (news, _) = apply_store(&mut s, Change::replaced(vec![a]));
        assert_eq!(news, [ObjectKey::new("shop", "a")]);
        assert_eq!(s.state, StoreState::Listed);
        let failed = |not_served| Change::Failed {
            not_served,
            message: "404".into(),
        };
        assert_eq!(apply_store(&mut s, failed(true)), (vec![], vec![]));
        assert_eq!(s.state, StoreState::NotServed("404".into()));
        apply_store(&mut s, failed(false));
        assert_eq!(s.state, StoreState::Failed("404".into()));
        assert_eq!(s.objects.len(), 1, "what it held stays until a new list");
    }

    /// A change of the status alone is told apart from news; an unchanged
    /// object is neither, a deleted one is news.
    #[test]
    fn a_status_change_is_told_apart_from_news() {
        let mut map = BTreeMap::new();
        let a = obj("ConfigMap", "shop", "a", "1");
        let k = ObjectKey::new("shop", "a");
        let applied = |v: &Value| Change::Applied(v.clone());
        assert_eq!(
            apply_keyed_status(&mut map, applied(&a)),
            (vec![k.clone()], vec![])
        );
        assert_eq!(apply_keyed_status(&mut map, applied(&a)), (vec![], vec![]));
        let mut statused = a.clone();
        statused["status"] = json!({"ready": true});
        assert_eq!(
            apply_keyed_status(&mut map, applied(&statused)),
            (vec![], vec![k.clone()])
        );
        let mut edited = statused.clone();
        edited["data"]["d"] = json!("2");
        assert_eq!(
            apply_keyed(&mut map, applied(&edited)),
            std::slice::from_ref(&k)
        );
        assert_eq!(apply_keyed(&mut map, Change::Deleted(edited)), [k]);
        assert!(map.is_empty());
    }
}
