//! Triggers: one change of one source in, the federated objects it
//! touches out (`Dirt`). Each source is registered once, in `registry`
//! (a [`Trigger`]: how it is watched beside what its changes touch, as
//! kube-runtime's `Controller::watches(api, mapper)`); the rest is the
//! same for every source. A change is read first, by a pure function of
//! the cache as it was before the change ([`Cache::touched`], `&Cache`),
//! and applied after (`Cache::update`), so that what a change touches can
//! use what it replaces (a deleted object's last state, a label changed).
//! A change that may be the controller's own write is told apart
//! (`Dirt::written`) or dropped when a write's answer is held already
//! (`hold_own_write`). No I/O.

mod registry;

use super::{Cache, WorkKey};
use crate::core::describe::{FederatedRef, ObjectKey, key_of};
use crate::core::held::{Held, resource_version};
use crate::core::object_text::ObjectText;
use crate::sync::live::progress::{Answer, Answered};
use crate::sync::run::observe::ObservedType;
use crate::sync::watch::sources::{Change, Event, Source, Spec, WatchScope};
use std::collections::{BTreeMap, BTreeSet};

/// One source's registration: how it is watched and what its changes
/// touch, together. Every [`Source`] has exactly one (`registry`).
pub(super) struct Trigger {
    /// Whether a source is this trigger's.
    is: fn(&Source) -> bool,
    /// The sources it watches in the run's scope, and how (`specs` runs them).
    watches: fn(&WatchScope) -> Vec<(Source, Spec)>,
    /// Its objects are held by key as [`Held`]: a change arrives as
    /// `Change::Kept`, held once (`Source::hold`); otherwise as values
    /// (`Change::Applied`).
    by_key: bool,
    /// What a change touches, read from the cache as it is before the
    /// change: a pure function of the two.
    touched: fn(&Cache, &Source, &Change) -> Dirt,
    /// The cache updated with the change, once `touched` has read it.
    keep: fn(&mut Cache, &Source, Change),
}

/// The trigger `source` is registered by.
fn trigger(source: &Source) -> &'static Trigger {
    (registry::TRIGGERS.iter().find(|t| (t.is)(source)))
        .expect("every source is registered in cache::triggers::registry")
}

/// The watches every trigger asks for in `scope`.
pub fn watches(scope: &WatchScope) -> BTreeMap<Source, Spec> {
    (registry::TRIGGERS.iter())
        .flat_map(|t| (t.watches)(scope))
        .collect()
}

/// What a change touches.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Dirt {
    pub keys: BTreeSet<WorkKey>,
    /// FederatedTypeConfigs, KubeFedClusters' specs or the KubeFedConfig
    /// changed: the watches and members are rebuilt, everything re-decided.
    pub structure: bool,
    /// Members one of whose stores listed after it was not usable: once
    /// all of a member's have, everything is re-decided with it (one full
    /// round for its catch-up, not one per type: `intake`).
    pub listed: BTreeSet<String>,
    /// Objects that could not be read (named, with the field path): they
    /// are left out until they are fixed.
    pub warnings: Vec<String>,
    /// Keys touched by a change of one object the controller writes, with
    /// that object and its resourceVersion (not in `keys`): while a round
    /// holds the key, the change may be that round's own write, whose
    /// answer then names it ([`Cache::hold_own_write`]) and makes it no news.
    pub written: Vec<(WorkKey, Written, u64)>,
    /// Keys whose member copies changed in their status alone, where that
    /// is no news by itself (not in `keys`): news for an object whose
    /// progressive rollout waits for its members (`watch::rollouts`).
    pub status_only: BTreeSet<WorkKey>,
}

impl Dirt {
    /// A change of an object the controller writes: `key` moves from
    /// `keys` to `written` (perhaps the event of a round's own write, which
    /// the loop learns from the write's answer); untouched, nothing moves.
    fn maybe_own_write(&mut self, key: WorkKey, written: Written, rv: u64) {
        if self.keys.remove(&key) {
            self.written.push((key, written, rv));
        }
    }
}

#[cfg(test)]
impl Dirt {
    /// Every key it touches, `written`'s too (the tests' view: the loop
    /// takes `keys` and `written` apart).
    pub fn touched(&self) -> BTreeSet<WorkKey> {
        let written = self.written.iter().map(|(k, _, _)| k.clone());
        self.keys.iter().cloned().chain(written).collect()
    }
}

/// An object the controller writes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Written {
    /// A federated object of a type (FTC name).
    Federated(String, ObjectKey),
    /// A (Cluster)PropagatedVersion.
    Version(ObjectKey),
    /// A member copy: (cluster, FTC name, key).
    Member(String, String, ObjectKey),
}

impl Written {
    /// Whether it is held by `source`'s store.
    pub(super) fn of(&self, source: &Source) -> bool {
        match (self, source) {
            (Written::Federated(t, _), Source::Federated(s)) => t == s,
            (Written::Version(k), Source::Versions(cluster_scoped)) => {
                k.namespace.is_empty() == *cluster_scoped
            }
            (Written::Member(c, t, _), Source::Member(sc, st)) => c == sc && t == st,
            _ => false,
        }
    }
}

impl Cache {
    /// Holds an object as the controller's own write for `object` left it
    /// (the server's answer, `progress::Answer`): unless its event, or a
    /// later change, came first, or `object` is gone from the cache
    /// (deleted meanwhile: what it had is not brought back). Returns the
    /// object written and its resourceVersion: a change seen before with
    /// these was this write's own.
    pub fn hold_own_write(
        &mut self,
        object: &FederatedRef,
        answer: Answer,
    ) -> Option<(Written, u64)> {
        let Answer { of, key, held } = answer;
        let rv = held.version?;
        let written = match of {
            Answered::Federated => Written::Federated(object.type_name.to_string(), key),
            Answered::Version => Written::Version(key),
            Answered::Member(cluster) => {
                Written::Member(cluster, object.type_name.to_string(), key)
            }
        };
        let id = Some((written.clone(), rv));
        let Some(fed) = self.federated.get_mut(&*object.type_name) else {
            return id;
        };
        if !fed.objects.contains_key(&object.key) {
            return id;
        }
        let older = |held: Option<&Held>| held.and_then(|h| h.version) < Some(rv);
        match &written {
            Written::Federated(_, key) => {
                // Only over what its watch has brought (never a new one).
                if !fed.objects.get(key).is_some_and(|h| older(Some(h))) {
                    return id;
                }
                fed.objects.insert(key.clone(), held);
            }
            Written::Version(key) => {
                // Versions are held as text: parsed for their version (a
                // tenth of the answers).
                let version = |t: &ObjectText| resource_version(&t.value());
                if self.versions.get(key).and_then(version) >= Some(rv) {
                    return id;
                }
                self.versions.insert(key.clone(), held.text);
            }
            Written::Member(cluster, ftc, key) => {
                let store = self.members.get_mut(cluster).and_then(|s| s.get_mut(ftc));
                let Some(store) = store else {
                    return id;
                };
                if !older(store.objects.get(key)) {
                    return id;
                }
                store.objects.insert(key.clone(), held);
            }
        }
        let at = self.own_writes.entry(written).or_insert(rv);
        *at = (*at).max(rv);
        id
    }

    /// Whether `change` of `source` is older than the controller's own
    /// write of its object, held already: then it is dropped
    /// ([`Cache::release_own_write`] ends the hold otherwise).
    fn behind_own_write(&self, source: &Source, change: &Change) -> bool {
        if self.own_writes.is_empty() {
            return false;
        }
        let (key, event) = match change {
            Change::Applied(v) => (key_of(v), resource_version(v)),
            Change::Kept(key, held) => (key.clone(), held.version),
            _ => return false,
        };
        let held = written(source, key).and_then(|w| self.own_writes.get(&w));
        held.is_some_and(|&rv| event.is_some_and(|event| event < rv))
    }

    /// Ends the holds of own writes that `change` (not behind them)
    /// takes over: a change as new or newer, a deletion, a new list.
    fn release_own_write(&mut self, source: &Source, change: &Change) {
        if self.own_writes.is_empty() {
            return;
        }
        match change {
            Change::Applied(v) | Change::Deleted(v) => {
                if let Some(w) = written(source, key_of(v)) {
                    self.own_writes.remove(&w);
                }
            }
            Change::Kept(key, _) => {
                if let Some(w) = written(source, key.clone()) {
                    self.own_writes.remove(&w);
                }
            }
            Change::Replaced(_) => self.own_writes.retain(|w, _| !w.of(source)),
            Change::Failed { .. } => return,
        }
        crate::sync::watch::memory::shrink_when_sparse(&mut self.own_writes);
    }

    /// Takes in one change; says what it touches (read before the change
    /// is applied).
    pub fn apply(&mut self, event: Event) -> Dirt {
        let Event { source, change } = event;
        let change = self.as_held(&source, change);
        let dirt = self.touched(&source, &change);
        self.update(&source, change);
        dirt
    }

    /// A change as its source's trigger takes it: by key, held once (a
    /// member copy as its source holds it, `Source::hold`, or whole), or
    /// as a value.
    pub fn as_held(&self, source: &Source, change: Change) -> Change {
        let by_key = trigger(source).by_key;
        match change {
            Change::Applied(v) if by_key => {
                let held = match source {
                    Source::Member(_, t) if self.whole_copies.contains(t) => Held::whole(&v),
                    _ => source.hold(&v),
                };
                Change::Kept(key_of(&v), held)
            }
            Change::Kept(_, held) if !by_key => Change::Applied(held.text.value()),
            change => change,
        }
    }

    /// What `change` of `source` touches, read from the cache as it is
    /// before the change ([`Cache::as_held`]'s form): its trigger's keys,
    /// a failed watch's line, the controller's own writes told apart.
    /// Pure: the cache is updated after, by [`Cache::update`].
    pub fn touched(&self, source: &Source, change: &Change) -> Dirt {
        if self.behind_own_write(source, change) {
            return Dirt::default();
        }
        let mut dirt = (trigger(source).touched)(self, source, change);
        // A watch that failed before listing must not read as "nothing
        // there" (`listed`); a host watch's failure is worth a line.
        if let Change::Failed { message, .. } = change
            && !matches!(source, Source::Member(..))
        {
            dirt.warnings.push(format!("watching {source}: {message}"));
        }
        if let Some((key, written, rv)) = written_by(source, change) {
            dirt.maybe_own_write(key, written, rv);
        }
        dirt
    }

    /// Applies `change` of `source`, once [`Cache::touched`] has read it:
    /// its trigger's store, whether the source has listed (only a complete
    /// list makes it usable), the holds of own writes it ends. A change
    /// behind an own write held is dropped.
    fn update(&mut self, source: &Source, change: Change) {
        if matches!(change, Change::Replaced(_)) {
            self.listed.insert(source.clone());
        }
        if self.behind_own_write(source, &change) {
            return;
        }
        self.release_own_write(source, &change);
        (trigger(source).keep)(self, source, change);
    }

    /// Whether the federated objects of `t` record their member copies'
    /// status (remote status collection, a FederatedServiceStatus).
    fn reads_member_status(&self, t: &ObservedType) -> bool {
        self.settings.collects_remote_status(t.status_collection)
            || (self.settings).writes_service_status(t.service_status.is_some())
    }

    /// Whether a member copy the controller wrote is news all the same: its
    /// type records the copies' status, which the round that wrote it read
    /// from before its write (the copy's event started the next round,
    /// which records it, as KubeFed's informers start its).
    pub fn own_member_write_is_news(&self, ftc: &str) -> bool {
        (self.ftcs.get(ftc)).is_some_and(|f| self.reads_member_status(&ObservedType::of(f)))
    }
}

/// The object written that a change of `source` to `key` may be.
fn written(source: &Source, key: ObjectKey) -> Option<Written> {
    match source {
        Source::Federated(t) => Some(Written::Federated(t.clone(), key)),
        Source::Versions(_) => Some(Written::Version(key)),
        Source::Member(c, t) => Some(Written::Member(c.clone(), t.clone(), key)),
        _ => None,
    }
}

/// The federated object an applied change of a federated object touches,
/// the object written and its resourceVersion (a member copy's: its
/// trigger's, which knows its type).
fn written_by(source: &Source, change: &Change) -> Option<(WorkKey, Written, u64)> {
    let Source::Federated(t) = source else {
        return None;
    };
    let (key, rv) = match change {
        Change::Applied(v) => (key_of(v), resource_version(v)?),
        Change::Kept(key, held) => (key.clone(), held.version?),
        _ => return None,
    };
    let work = FederatedRef::new(t, key.clone());
    Some((work, Written::Federated(t.clone(), key), rv))
}

#[cfg(test)]
mod tests;
