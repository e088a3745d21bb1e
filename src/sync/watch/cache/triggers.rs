//! Triggers: one change of one source in, the federated objects it
//! touches out (`Dirt`), the store updated on the way. Each source has
//! one mapper (`Cache::apply_change`); a change that may be the
//! controller's own write is told apart (`Dirt::written`) or dropped when
//! a write's answer is held already (`hold_own_write`). No I/O.

use super::store::{StoreState, apply_by_name, apply_keyed, apply_store, apply_typed, name_of};
use super::{Cache, WorkKey};
use crate::api::core::FederatedTypeConfig;
use crate::core::describe::{FederatedRef, ObjectKey, key_of};
use crate::core::held::{Held, resource_version};
use crate::core::object_text::ObjectText;
use crate::core::propagation::decide::federated_key;
use crate::sync::live::progress::{Answer, Answered};
use crate::sync::run::observe::ObservedType;
use crate::sync::watch::sources::{Change, Event, Source, values};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};

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
    /// write of its object, held already: then it is dropped. A change as
    /// new or newer ends the hold (as does a deletion or a new list).
    fn behind_own_write(&mut self, source: &Source, change: &Change) -> bool {
        if self.own_writes.is_empty() {
            return false;
        }
        let written = |key: ObjectKey| match source {
            Source::Federated(t) => Some(Written::Federated(t.clone(), key)),
            Source::Versions(_) => Some(Written::Version(key)),
            Source::Member(c, t) => Some(Written::Member(c.clone(), t.clone(), key)),
            _ => None,
        };
        let (w, event) = match change {
            Change::Applied(v) => (written(key_of(v)), resource_version(v)),
            Change::Kept(key, held) => (written(key.clone()), held.version),
            Change::Deleted(v) => {
                if let Some(w) = written(key_of(v)) {
                    self.own_writes.remove(&w);
                }
                return false;
            }
            Change::Replaced(_) => {
                self.own_writes.retain(|w, _| !w.of(source));
                crate::sync::watch::memory::shrink_when_sparse(&mut self.own_writes);
                return false;
            }
            Change::Failed { .. } => return false,
        };
        let Some(w) = w else {
            return false;
        };
        let Some(&rv) = self.own_writes.get(&w) else {
            return false;
        };
        if event.is_some_and(|event| event < rv) {
            return true;
        }
        self.own_writes.remove(&w);
        crate::sync::watch::memory::shrink_when_sparse(&mut self.own_writes);
        false
    }

    /// Takes in one change; says what it touches.
    pub fn apply(&mut self, event: Event) -> Dirt {
        let Event { source, change } = event;
        // A member copy is held as its source holds it (`Source::hold`);
        // a host source's objects are read as values (typed, by name).
        let change = match change {
            Change::Applied(v) if matches!(source, Source::Member(..)) => {
                let held = match &source {
                    Source::Member(_, t) if self.whole_copies.contains(t) => Held::whole(&v),
                    _ => source.hold(&v),
                };
                Change::Kept(key_of(&v), held)
            }
            Change::Kept(_, held) if !matches!(source, Source::Member(..)) => {
                Change::Applied(held.text.value())
            }
            change => change,
        };
        // Only a complete list makes a source usable: a watch that failed
        // before listing must not read as "nothing there" (every member
        // copy would look orphaned).
        let mut failure = None;
        match &change {
            Change::Replaced(_) => {
                self.listed.insert(source.clone());
            }
            Change::Failed { message, .. } if !matches!(source, Source::Member(..)) => {
                failure = Some(format!("watching {source}: {message}"));
            }
            _ => {}
        }
        let written = self.written_by(&source, &change);
        let mut dirt = self.apply_change(&source, change);
        dirt.warnings.extend(failure);
        if let Some((key, written, rv)) = written {
            dirt.maybe_own_write(key, written, rv);
        }
        dirt
    }

    /// The federated object an applied change of a federated object
    /// touches, the object written and its resourceVersion.
    fn written_by(&self, source: &Source, change: &Change) -> Option<(WorkKey, Written, u64)> {
        match (source, change) {
            (Source::Federated(t), Change::Applied(v)) => {
                let key = key_of(v);
                let work = FederatedRef::new(t, key.clone());
                Some((
                    work,
                    Written::Federated(t.clone(), key),
                    resource_version(v)?,
                ))
            }
            // A member copy's: `apply_member`, which knows its type.
            _ => None,
        }
    }

    /// One change of one source → the cache updated, and what it touches.
    fn apply_change(&mut self, source: &Source, change: Change) -> Dirt {
        match source {
            Source::Config => self.apply_config(change),
            Source::TypeConfigs => self.apply_type_configs(change),
            Source::Clusters => self.apply_clusters(change),
            Source::Schedulings => self.apply_schedulings(change),
            Source::Versions(cluster_scoped) => self.apply_versions(*cluster_scoped, change),
            Source::Namespaces => self.apply_namespaces(change),
            Source::Federated(ftc) => self.apply_federated(ftc, change),
            Source::Member(cluster, ftc) => self.apply_member(cluster, ftc, change),
        }
    }

    /// The KubeFedConfig: new settings re-plan everything.
    fn apply_config(&mut self, change: Change) -> Dirt {
        let mut warnings = Vec::new();
        let config = match change {
            Change::Applied(v) => Some(v),
            Change::Replaced(vs) => values(vs).next(),
            Change::Deleted(_) => None,
            Change::Failed { .. } | Change::Kept(..) => return Dirt::default(),
        };
        let before = self.settings;
        match crate::clients::host::settings_of(host_namespace_of(&config), config.as_ref()) {
            Ok(settings) => self.settings = settings,
            // Upstream would not start; a running watch keeps what it had.
            Err(e) => warnings.push(format!("{e:#}; the previous settings stay")),
        }
        let changed = self.settings != before;
        Dirt {
            structure: changed,
            warnings,
            ..Dirt::default()
        }
    }

    /// FederatedTypeConfigs: a changed spec re-plans everything.
    fn apply_type_configs(&mut self, change: Change) -> Dirt {
        let before = self.ftcs.clone();
        let warnings = apply_typed(&mut self.ftcs, change);
        Dirt {
            structure: specs(&before) != specs(&self.ftcs),
            warnings,
            ..Dirt::default()
        }
    }

    /// KubeFedClusters: a changed spec or labels re-plans everything.
    fn apply_clusters(&mut self, change: Change) -> Dirt {
        let essence = |m: &BTreeMap<String, Value>| -> Vec<(String, Value, Value)> {
            m.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v["spec"].clone(),
                        v["metadata"]["labels"].clone(),
                    )
                })
                .collect()
        };
        let before = essence(&self.clusters);
        apply_by_name(&mut self.clusters, change);
        // Status writes (ours, after each probe) are no news.
        Dirt {
            structure: before != essence(&self.clusters),
            ..Dirt::default()
        }
    }

    /// RSPs touch the objects they schedule.
    fn apply_schedulings(&mut self, change: Change) -> Dirt {
        let touched = apply_keyed(&mut self.schedulings, change);
        let mut dirt = Dirt::default();
        for key in touched {
            // The RSP's target kind names the type it schedules.
            let kind = self
                .schedulings
                .get(&key)
                .map(|r| r.text.value())
                .and_then(|r| r["spec"]["targetKind"].as_str().map(str::to_string));
            for (name, t) in self.types() {
                if kind.is_none() || Some(&t.federated.kind) == kind.as_ref() {
                    dirt.keys.insert(FederatedRef::new(&name, key.clone()));
                }
            }
        }
        dirt
    }

    /// (Cluster)PropagatedVersions.
    fn apply_versions(&mut self, cluster_scoped: bool, change: Change) -> Dirt {
        if self.behind_own_write(&Source::Versions(cluster_scoped), &change) {
            return Dirt::default();
        }
        // Our own write-backs: what the next round compares against,
        // never a reason for one.
        match change {
            Change::Applied(v) => {
                self.versions.insert(key_of(&v), ObjectText::of(&v));
            }
            Change::Deleted(v) => {
                self.versions.remove(&key_of(&v));
            }
            Change::Replaced(vs) => {
                self.versions
                    .retain(|k, _| k.namespace.is_empty() != cluster_scoped);
                self.versions
                    .extend(vs.into_iter().map(|(k, held)| (k, held.text)));
            }
            Change::Failed { .. } | Change::Kept(..) => {}
        }
        Dirt::default()
    }

    /// The host's namespaces touch their FederatedNamespaces.
    fn apply_namespaces(&mut self, change: Change) -> Dirt {
        let uid = |v: &Value| v["metadata"]["uid"].as_str().unwrap_or("").to_string();
        let touched: Vec<String> = match change {
            Change::Applied(v) => {
                let name = name_of(&v);
                let changed = self.namespaces.get(&name) != Some(&uid(&v));
                self.namespaces.insert(name.clone(), uid(&v));
                if changed { vec![name] } else { Vec::new() }
            }
            Change::Deleted(v) => {
                let name = name_of(&v);
                self.namespaces.remove(&name);
                vec![name]
            }
            Change::Replaced(vs) => {
                let new: HashMap<String, String> =
                    values(vs).map(|v| (name_of(&v), uid(&v))).collect();
                let mut touched: Vec<String> = self
                    .namespaces
                    .iter()
                    .filter(|(n, u)| new.get(*n) != Some(*u))
                    .map(|(n, _)| n.clone())
                    .collect();
                touched.extend(
                    new.keys()
                        .filter(|n| !self.namespaces.contains_key(*n))
                        .cloned(),
                );
                self.namespaces = new;
                touched
            }
            Change::Failed { .. } | Change::Kept(..) => Vec::new(),
        };
        let mut dirt = Dirt::default();
        let Some(ns_type) = self.namespaces_type() else {
            return dirt;
        };
        // Only a namespace whose FederatedNamespace is held: the host's
        // Namespaces are watched cluster-wide, and every other one (outside
        // `-n`, another shard's, one nothing federates) used to start a
        // round over a key no FederatedNamespace of the watch's has. Its
        // member copies' events and its FederatedNamespace's own touch it.
        let held = self.federated.get(&ns_type);
        for name in touched {
            let key = ObjectKey::new(name.clone(), name);
            if held.is_some_and(|s| s.objects.contains_key(&key)) {
                dirt.keys.insert(FederatedRef::new(&ns_type, key));
            }
        }
        dirt
    }

    /// Federated objects touch themselves (a FederatedNamespace: everything in it).
    fn apply_federated(&mut self, ftc: &str, change: Change) -> Dirt {
        if self.behind_own_write(&Source::Federated(ftc.to_string()), &change) {
            return Dirt::default();
        }
        let store = self.federated.entry(ftc.to_string()).or_default();
        // Status updates are our own write-backs: no news.
        let (touched, _) = apply_store(store, change);
        let mut dirt = Dirt::default();
        let is_namespaces = self.namespaces_type().as_deref() == Some(ftc);
        for key in touched {
            if is_namespaces {
                // A FederatedNamespace places everything in it.
                for (t, s) in &self.federated {
                    for k in s.objects.keys().filter(|k| k.namespace == key.namespace) {
                        dirt.keys.insert(FederatedRef::new(t, k.clone()));
                    }
                }
            }
            dirt.keys.insert(FederatedRef::new(ftc, key));
        }
        dirt
    }

    /// A member's objects touch their federated objects.
    fn apply_member(&mut self, cluster: &str, ftc: &str, change: Change) -> Dirt {
        let source = Source::Member(cluster.to_string(), ftc.to_string());
        if self.behind_own_write(&source, &change) {
            return Dirt::default();
        }
        let stores = self.members.entry(cluster.to_string()).or_default();
        let store = stores.entry(ftc.to_string()).or_default();
        let was_usable = store.state == StoreState::Listed;
        let replaced = matches!(change, Change::Replaced(_));
        // A copy the controller may have written itself (`Dirt::written`).
        let kept = match &change {
            Change::Kept(key, held) => held.version.map(|rv| (key.clone(), rv)),
            _ => None,
        };
        let (touched, status_only) = apply_store(store, change);
        if replaced && !was_usable {
            // Rounds left this member out until now.
            return Dirt {
                listed: [cluster.to_string()].into(),
                ..Dirt::default()
            };
        }
        let Some(t) = self.ftcs.get(ftc).map(ObservedType::of) else {
            return Dirt::default();
        };
        let mut dirt = Dirt::default();
        for key in touched {
            dirt.keys
                .insert(FederatedRef::new(ftc, federated_key(&t.ty, &key)));
        }
        // A member's status is news only where an RSP schedules the
        // object: its replicas follow the members' ready ones (as
        // upstream's RSP controller, which watches member status).
        // Where the type's status is collected, a member's status is news too.
        let collected = self.reads_member_status(&t);
        for key in status_only {
            let fed_key = federated_key(&t.ty, &key);
            let work = FederatedRef::new(ftc, fed_key);
            if collected || self.schedulings.contains_key(&work.key) {
                dirt.keys.insert(work);
            } else {
                dirt.status_only.insert(work);
            }
        }
        if !(self.member_store(cluster, ftc)).is_some_and(|s| s.state == StoreState::Listed) {
            // Failing now: every object of the type shows it there.
            dirt.keys.extend(self.type_keys(ftc));
        }
        if let Some((key, rv)) = kept {
            let work = FederatedRef::new(ftc, federated_key(&t.ty, &key));
            let written = Written::Member(cluster.to_string(), ftc.to_string(), key);
            dirt.maybe_own_write(work, written, rv);
        }
        dirt
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

fn host_namespace_of(config: &Option<Value>) -> &str {
    config
        .as_ref()
        .and_then(|c| c["metadata"]["namespace"].as_str())
        .unwrap_or("")
}

fn specs(m: &BTreeMap<String, FederatedTypeConfig>) -> Vec<(String, Value)> {
    m.iter()
        .map(|(k, f)| (k.clone(), serde_json::to_value(&f.spec).unwrap_or_default()))
        .collect()
}

#[cfg(test)]
mod tests;
