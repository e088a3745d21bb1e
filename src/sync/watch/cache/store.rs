//! The objects each watch holds, keyed, as kube-runtime's reflector
//! store: which keys a change would change, read before it is applied (in
//! more than their status, or in their status alone: `core::held` tells
//! them apart), and the change applied. No I/O: what a change means for
//! the federation is `triggers`'.

use crate::core::describe::{ObjectKey, key_of};
use crate::core::held::Held;
use crate::sync::watch::sources::{Change, values};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

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
fn parse<T: serde::de::DeserializeOwned>(v: &Value, warnings: &mut Vec<String>) -> Option<T> {
    let what = crate::core::describe::quoted(v, "object");
    match crate::core::describe::typed::<T>(v, "") {
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
    change: &Change,
) -> Vec<String> {
    let mut warnings = Vec::new();
    match change {
        Change::Applied(v) => {
            let name = name_of(v);
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
            map.remove(&name_of(v));
        }
        Change::Replaced(vs) => {
            *map = (vs.iter().map(|(_, held)| held.text.value()))
                .filter_map(|v| Some((name_of(&v), parse(&v, &mut warnings)?)))
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

/// What a change would do to objects held by key, read before it is
/// applied: the keys whose object it adds, removes or changes in more
/// than its status (see `core::held`), and those whose status alone it
/// changes. Pure: [`apply_keyed`] applies it.
pub(super) fn news(
    map: &BTreeMap<ObjectKey, Held>,
    change: &Change,
) -> (Vec<ObjectKey>, Vec<ObjectKey>) {
    let mut news = Vec::new();
    let mut status_only = Vec::new();
    let mut compare = |key: &ObjectKey, new: &Held| match map
        .get(key)
        .map_or(Some(true), |old| new.change_from(old))
    {
        Some(true) => news.push(key.clone()),
        Some(false) => status_only.push(key.clone()),
        None => {}
    };
    match change {
        Change::Applied(v) => compare(&key_of(v), &Held::whole(v)),
        Change::Kept(key, held) => compare(key, held),
        Change::Deleted(v) => news.push(key_of(v)),
        Change::Replaced(vs) => {
            for (key, held) in vs {
                compare(key, held);
            }
            let listed: BTreeSet<&ObjectKey> = vs.iter().map(|(k, _)| k).collect();
            news.extend(map.keys().filter(|k| !listed.contains(k)).cloned());
        }
        Change::Failed { .. } => {}
    }
    (news, status_only)
}

/// Applies a change to objects by key (an applied host object held whole,
/// a member copy as it was kept).
pub(super) fn apply_keyed(map: &mut BTreeMap<ObjectKey, Held>, change: Change) {
    match change {
        Change::Applied(v) => {
            map.insert(key_of(&v), Held::whole(&v));
        }
        Change::Kept(key, held) => {
            map.insert(key, held);
        }
        Change::Deleted(v) => {
            map.remove(&key_of(&v));
        }
        Change::Replaced(vs) => *map = vs.into_iter().collect(),
        Change::Failed { .. } => {}
    }
}

impl Store {
    /// [`news`] of its objects.
    pub(super) fn news(&self, change: &Change) -> (Vec<ObjectKey>, Vec<ObjectKey>) {
        news(&self.objects, change)
    }

    /// Whether it is usable once `change` is applied: listed, and not
    /// failing since.
    pub(super) fn listed_after(&self, change: &Change) -> bool {
        match change {
            Change::Replaced(_) => true,
            Change::Failed { .. } => false,
            _ => self.state == StoreState::Listed,
        }
    }

    /// Applies a change: its objects, and its state (listed by a list,
    /// failing by a failure, which keeps what was held until a new list).
    pub(super) fn apply(&mut self, change: Change) {
        match change {
            Change::Failed {
                not_served,
                message,
            } => {
                self.state = if not_served {
                    StoreState::NotServed(message)
                } else {
                    StoreState::Failed(message)
                };
            }
            change => {
                if matches!(change, Change::Replaced(_)) {
                    self.state = StoreState::Listed;
                }
                apply_keyed(&mut self.objects, change);
            }
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
        let a = Change::replaced(vec![obj("ConfigMap", "shop", "a", "1")]);
        assert!(s.listed_after(&a));
        assert_eq!(s.news(&a).0, [ObjectKey::new("shop", "a")]);
        s.apply(a);
        assert_eq!(s.state, StoreState::Listed);
        let failed = |not_served| Change::Failed {
            not_served,
            message: "404".into(),
        };
        assert_eq!(s.news(&failed(true)), (vec![], vec![]));
        assert!(!s.listed_after(&failed(true)));
        s.apply(failed(true));
        assert_eq!(s.state, StoreState::NotServed("404".into()));
        s.apply(failed(false));
        assert_eq!(s.state, StoreState::Failed("404".into()));
        assert_eq!(s.objects.len(), 1, "what it held stays until a new list");
    }

    /// A change of the status alone is told apart from news; an unchanged
    /// object is neither, a deleted one is news. What a change does is
    /// read before it is applied.
    #[test]
    fn a_status_change_is_told_apart_from_news() {
        let mut map = BTreeMap::new();
        let a = obj("ConfigMap", "shop", "a", "1");
        let k = ObjectKey::new("shop", "a");
        let mut step = |change: Change| {
            let said = news(&map, &change);
            apply_keyed(&mut map, change);
            said
        };
        let applied = |v: &Value| Change::Applied(v.clone());
        assert_eq!(step(applied(&a)), (vec![k.clone()], vec![]));
        assert_eq!(step(applied(&a)), (vec![], vec![]));
        let mut statused = a.clone();
        statused["status"] = json!({"ready": true});
        assert_eq!(step(applied(&statused)), (vec![], vec![k.clone()]));
        let mut edited = statused.clone();
        edited["data"]["d"] = json!("2");
        assert_eq!(step(applied(&edited)).0, std::slice::from_ref(&k));
        let b = obj("ConfigMap", "shop", "b", "1");
        let kb = ObjectKey::new("shop", "b");
        assert_eq!(
            step(Change::replaced(vec![edited.clone(), b])),
            (vec![kb.clone()], vec![]),
            "a list: what it adds; the unchanged is no news"
        );
        assert_eq!(step(Change::replaced(vec![edited.clone()])).0, [kb]);
        assert_eq!(step(Change::Deleted(edited)).0, [k]);
        assert!(map.is_empty());
    }
}
