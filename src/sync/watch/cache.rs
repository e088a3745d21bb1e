//! What the watches of `reconcile --watch` have seen, and which federated
//! objects each change touches. A round's [`Observation`] is built from
//! here, with no request: the same input the one-shot run reads with lists.

use super::sources::{Change, Event, Source, values};
use crate::api::core::FederatedTypeConfig;
use crate::clients::members::ProbedMember;
use crate::core::describe::FederatedRef;
use crate::core::describe::{ObjectKey, key_of};
use crate::core::held::{Held, resource_version};
use crate::core::object_text::ObjectText;
use crate::core::propagation::decide::{Listing, federated_key, in_reach, member_key};
use crate::core::run::scope::RunScope;
use crate::core::run::settings::Settings;
use crate::core::run::shard;
use crate::sync::live::progress::{Answer, Answered};
use crate::sync::run::observe::{self, Observation, ObservedType};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// (FederatedTypeConfig name, federated object key).
/// The queue's key: the federated object a change touches.
pub type WorkKey = FederatedRef;

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

/// What a round's observation covers.
#[derive(Clone, Copy, Debug)]
pub enum Cover<'a> {
    /// Every object: a full round small enough to be one round.
    Everything,
    /// These keys only: a round over marked keys, or a slice of a full round.
    Keys(&'a BTreeSet<WorkKey>),
    /// The last slice of a full round: its keys, and every type's failing
    /// member listings.
    LastSlice(&'a BTreeSet<WorkKey>),
}

impl<'a> Cover<'a> {
    fn keys(self) -> Option<&'a BTreeSet<WorkKey>> {
        match self {
            Cover::Everything => None,
            Cover::Keys(k) | Cover::LastSlice(k) => Some(k),
        }
    }
}

#[derive(Default)]
pub struct Cache {
    /// What the KubeFedConfig says (the last valid one).
    pub settings: Settings,
    pub ftcs: BTreeMap<String, FederatedTypeConfig>,
    pub clusters: BTreeMap<String, Value>,
    pub schedulings: BTreeMap<ObjectKey, Held>,
    pub versions: HashMap<ObjectKey, ObjectText>,
    pub namespaces: HashMap<String, String>,
    pub federated: BTreeMap<String, Store>,
    /// Cluster → FTC name → the member's managed objects of that type
    /// (nested, so that a lookup by `&str` allocates nothing).
    pub members: BTreeMap<String, BTreeMap<String, Store>>,
    /// Host sources that have been listed.
    listed: BTreeSet<Source>,
    /// Types whose member copies are held whole ([`Cache::keeps_member_fields`]),
    /// as of the last rebuild.
    pub whole_copies: BTreeSet<String>,
    /// Host objects held as this controller's writes left them, ahead of
    /// those writes' events → the resourceVersion written. An event older
    /// than that is dropped (`behind_own_write`); the first one as new or
    /// newer takes over.
    own_writes: HashMap<Written, u64>,
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
    fn of(&self, source: &Source) -> bool {
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
    /// The enabled types (FTC name → type), sorted by name.
    pub fn types(&self) -> Vec<(String, ObservedType)> {
        self.ftcs
            .iter()
            .filter(|(_, f)| f.spec.is_enabled())
            .map(|(name, f)| (name.clone(), ObservedType::of(f)))
            .collect()
    }

    /// The FTC of the namespaces type, if enabled.
    fn namespaces_type(&self) -> Option<String> {
        self.types()
            .into_iter()
            .find(|(_, t)| t.ty.target.is_namespace())
            .map(|(n, _)| n)
    }

    /// Whether every host source in `wanted` has been listed: no round runs
    /// before, or it would take a missing federated object for a deleted one.
    pub fn host_synced(&self, wanted: &[Source]) -> bool {
        wanted.iter().all(|s| self.listed.contains(s))
    }

    /// A member can be touched once every type's store is listed (or
    /// known not to be served).
    pub fn member_synced(&self, cluster: &str, types: &[String]) -> bool {
        types.iter().all(|t| {
            self.member_store(cluster, t)
                .is_some_and(|s| s.state != StoreState::Syncing)
        })
    }

    /// A member's store of a type's managed objects.
    pub fn member_store(&self, cluster: &str, ftc: &str) -> Option<&Store> {
        self.members.get(cluster)?.get(ftc)
    }

    /// Every key a full round covers: each federated object's, and each
    /// its members' copies name within the run's reach (`-n`, its shard;
    /// the orphans are looked for among them, and none with `-l`).
    pub fn full_round_keys(&self, host_namespace: &str, scope: &RunScope) -> BTreeSet<WorkKey> {
        let mut keys: BTreeSet<WorkKey> = self
            .federated
            .iter()
            .flat_map(|(t, s)| {
                let t = std::sync::Arc::from(t.as_str());
                s.objects
                    .keys()
                    .map(move |k| FederatedRef::sharing(&t, k.clone()))
            })
            .collect();
        if scope.selector.is_some() {
            return keys;
        }
        let namespace =
            (self.settings).objects_namespace(host_namespace, scope.namespace.as_deref());
        for (ftc, s) in self.members.values().flatten() {
            let Some(t) = self.ftcs.get(ftc).map(ObservedType::of) else {
                continue;
            };
            keys.extend(
                (s.objects.keys())
                    .filter(|k| in_reach(&t.ty, k, namespace.as_deref()))
                    .map(|k| federated_key(&t.ty, k))
                    .filter(|k| shard::owned(scope.shard, k))
                    .map(|k| FederatedRef::sharing(&t.name, k)),
            );
        }
        keys
    }

    /// Drops what a source saw: it is being (re)started and is not usable
    /// until it lists again (a type disabled and enabled again must not
    /// act on the objects seen before).
    pub fn forget(&mut self, source: &Source) {
        self.listed.remove(source);
        self.own_writes.retain(|w, _| !w.of(source));
        super::memory::shrink_when_sparse(&mut self.own_writes);
        match source {
            Source::Federated(t) => {
                self.federated.remove(t);
            }
            Source::Member(c, t) => {
                if let Some(stores) = self.members.get_mut(c) {
                    stores.remove(t);
                    if stores.is_empty() {
                        self.members.remove(c);
                    }
                }
            }
            _ => {}
        }
    }

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
                super::memory::shrink_when_sparse(&mut self.own_writes);
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
        super::memory::shrink_when_sparse(&mut self.own_writes);
        false
    }

    /// Whether the type (its FederatedTypeConfig) or one of its federated
    /// objects keeps fields of the member copies: they are held whole
    /// (`core::propagation::foreign`). It reads every federated object of
    /// the type: asked at rebuilds only ([`Cache::whole_copies`]), so an
    /// object that starts keeping them is followed from the next one.
    pub fn keeps_member_fields(&self, ftc: &str) -> bool {
        use crate::core::propagation::foreign::wants_whole_copies;
        let typed = self.ftcs.get(ftc).is_some_and(|f| {
            wants_whole_copies(&serde_json::to_value(&f.metadata.annotations).unwrap_or_default())
        });
        typed
            || self.federated.get(ftc).is_some_and(|store| {
                // Only an object whose text names the annotations is parsed.
                store.objects.values().any(|h| {
                    h.text.as_str().contains("kubefedctl.kubefed.io/retain")
                        && wants_whole_copies(&h.text.value()["metadata"]["annotations"])
                })
            })
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

    fn type_keys(&self, ftc: &str) -> Vec<WorkKey> {
        self.federated
            .get(ftc)
            .map(|s| {
                let ftc = std::sync::Arc::from(ftc);
                s.objects
                    .keys()
                    .map(|k| FederatedRef::sharing(&ftc, k.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// [`Self::observe_texts`], parsed at once.
    #[cfg(test)]
    pub fn observe(
        &self,
        host_namespace: &str,
        scope: RunScope,
        types: &[String],
        members: &[ProbedMember],
        cover: Cover,
    ) -> Observation {
        let (mut seen, texts) = self.observe_texts(host_namespace, scope, types, members, cover);
        texts.parse_into(&mut seen);
        seen
    }

    /// The observation of a round over `types` (FTC names): every object,
    /// or some keys only (`cover`). `scope` is the run's, its
    /// `clusters` the members the round may write to. The federated
    /// objects and their versions come as texts, for the round to parse.
    pub fn observe_texts(
        &self,
        host_namespace: &str,
        scope: RunScope,
        types: &[String],
        members: &[ProbedMember],
        cover: Cover,
    ) -> (Observation, Texts) {
        let keys = cover.keys();
        let settings = self.settings;
        let namespace = settings.objects_namespace(host_namespace, scope.namespace.as_deref());
        let touched = scope.clusters.clone().unwrap_or_default();
        let ready: BTreeSet<&str> = (members.iter())
            .filter(|p| p.is_ready())
            .map(|p| p.name())
            .collect();
        let wanted_types = types;
        let mut types = Vec::new();
        let mut texts = Texts::default();
        for (name, mut t) in self.types() {
            if !wanted_types.contains(&name) {
                continue;
            }
            let wanted: BTreeSet<ObjectKey> = match keys {
                Some(keys) => keys
                    .iter()
                    .filter(|r| *r.type_name == *name)
                    .map(|r| r.key.clone())
                    .collect(),
                None => BTreeSet::new(),
            };
            let only = keys.is_some().then_some(&wanted);
            texts
                .objects
                .push(self.fill_type(&name, &mut t, only, &ready, &touched));
            if matches!(cover, Cover::LastSlice(_)) && wanted.is_empty() {
                self.fill_failing_listings(&name, &mut t, &ready, &touched);
            }
            t.only = keys.is_some().then_some(wanted);
            types.push(t);
        }
        let fed_namespaces = self.fed_namespaces();
        texts.versions = match keys {
            None => (self.versions.iter())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            Some(_) => self.versions_of(&types),
        };
        let rsps = self.rsps_in(namespace.as_deref());
        let mut seen = Observation::new(settings, members.to_vec(), scope, namespace);
        seen.types = types;
        seen.fed_namespaces = fed_namespaces;
        seen.host_namespaces = self.namespaces.clone();
        seen.rsps = rsps;
        // What the cache does not hold (the RSPs' pods, whether the host
        // has the DNS API) is read by the round's own observe step
        // (`observe::finish_from_cache`).
        (seen, texts)
    }
}

/// The texts of an observation that its round parses, off the watch's
/// loop: each type's federated objects and their PropagatedVersions. A
/// slice of 1,000 FederatedDeployments is 1,000 objects of each to parse.
#[derive(Default)]
pub struct Texts {
    /// Aligned with the observation's types.
    objects: Vec<Vec<ObjectText>>,
    versions: Vec<(ObjectKey, ObjectText)>,
}

impl Texts {
    pub fn parse_into(self, seen: &mut Observation) {
        for (t, texts) in seen.types.iter_mut().zip(self.objects) {
            t.objects = texts.iter().map(ObjectText::value).collect();
        }
        seen.versions = (self.versions.into_iter())
            .map(|(k, v)| (k, v.value()))
            .collect();
    }
}

impl Cache {
    /// One type of a round's observation: the listings of the ready
    /// members the round touches, and the texts of its federated objects
    /// (`only` those keys, when the round covers some). A round over other
    /// types' objects (`only` empty) needs none of this type's listings.
    fn fill_type(
        &self,
        name: &str,
        t: &mut ObservedType,
        only: Option<&BTreeSet<ObjectKey>>,
        ready: &BTreeSet<&str>,
        touched: &BTreeSet<String>,
    ) -> Vec<ObjectText> {
        let objects = match (self.federated.get(name), only) {
            (None, _) => Vec::new(),
            (Some(store), None) => (store.objects.values()).map(|v| v.text.clone()).collect(),
            (Some(store), Some(only)) => (only.iter())
                .filter_map(|k| store.objects.get(k))
                .map(|v| v.text.clone())
                .collect(),
        };
        if only.is_some_and(BTreeSet::is_empty) {
            return objects;
        }
        for cluster in ready.iter().filter(|c| touched.contains(**c)) {
            let Some(s) = self.member_store(cluster, name) else {
                continue;
            };
            if let Some(listing) = member_listing(s, t, only) {
                t.members.insert(cluster.to_string(), listing);
            }
        }
        objects
    }

    /// The members where a type is not served or its watch fails, each
    /// without objects: the last slice of a full round says so for the
    /// types it covers no key of (and for those with no object at all, no
    /// slice would).
    fn fill_failing_listings(
        &self,
        name: &str,
        t: &mut ObservedType,
        ready: &BTreeSet<&str>,
        touched: &BTreeSet<String>,
    ) {
        for cluster in ready.iter().filter(|c| touched.contains(**c)) {
            let Some(s) = self.member_store(cluster, name) else {
                continue;
            };
            if matches!(s.state, StoreState::Listed) {
                continue;
            }
            if let Some(listing) = member_listing(s, t, Some(&BTreeSet::new())) {
                t.members.insert(cluster.to_string(), listing);
            }
        }
    }

    /// Every FederatedNamespace, whatever a round covers: placement of
    /// any object reads its namespace's.
    fn fed_namespaces(&self) -> BTreeMap<String, Value> {
        observe::federated_namespaces(
            &self
                .types()
                .into_iter()
                .filter(|(_, t)| t.ty.target.is_namespace())
                .map(|(name, mut t)| {
                    t.objects = self
                        .federated
                        .get(&name)
                        .map(|s| s.objects.values().map(|o| o.text.value()).collect())
                        .unwrap_or_default();
                    t
                })
                .collect::<Vec<_>>(),
        )
    }

    /// The PropagatedVersions of a partial round's keys only, looked up as
    /// decide does.
    fn versions_of(&self, types: &[ObservedType]) -> Vec<(ObjectKey, ObjectText)> {
        types
            .iter()
            .flat_map(|t| {
                t.only.iter().flatten().filter_map(
                    |ObjectKey {
                         namespace: ns,
                         name,
                     }| {
                        let k = ObjectKey::new(
                            ns.clone(),
                            crate::core::propagation::version::propagated_version_name(
                                &t.ty.target.kind,
                                name,
                            ),
                        );
                        self.versions.get(&k).map(|v| (k, v.clone()))
                    },
                )
            })
            .collect()
    }

    /// The RSPs of the observed namespace (all, when cluster-wide).
    fn rsps_in(&self, namespace: Option<&str>) -> Vec<Value> {
        self.schedulings
            .iter()
            .filter(|(k, _)| namespace.is_none_or(|ns| ns == k.namespace))
            .map(|(_, v)| v.text.value())
            .collect()
    }
}

/// A ready member's objects of a type as a round needs them: a partial
/// round (`only` its keys) decides and looks for orphans among its keys
/// only, so it needs their member copies, not the whole listing. `None`
/// while the member's watch has not listed.
fn member_listing(
    s: &Store,
    t: &ObservedType,
    only: Option<&BTreeSet<ObjectKey>>,
) -> Option<Listing> {
    Some(match &s.state {
        StoreState::Listed => Listing::Listed(match only {
            None => (s.objects.iter())
                .map(|(k, v)| (k.clone(), v.text.clone()))
                .collect(),
            // Each key is looked up: a scan made a slice of 1,000 keys go
            // over all 10,000 copies of each member, in the watch's loop.
            Some(only) => (only.iter())
                .filter_map(|key| {
                    let at = member_key(&t.ty, key);
                    let held = s.objects.get(&at)?;
                    (federated_key(&t.ty, &at) == *key).then(|| (at, held.text.clone()))
                })
                .collect(),
        }),
        StoreState::NotServed(_) => Listing::NotServed(Vec::new()),
        StoreState::Failed(why) => Listing::Failed(why.clone()),
        StoreState::Syncing => return None,
    })
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

fn name_of(v: &Value) -> String {
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
fn apply_typed<T: serde::de::DeserializeOwned>(
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

fn apply_by_name(map: &mut BTreeMap<String, Value>, change: Change) {
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
fn apply_keyed(map: &mut BTreeMap<ObjectKey, Held>, change: Change) -> Vec<ObjectKey> {
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
fn apply_store(store: &mut Store, change: Change) -> (Vec<ObjectKey>, Vec<ObjectKey>) {
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
pub(super) mod tests {
    use super::*;

    /// A round's scope before any member has listed: no member is touched.
    fn none_touched() -> RunScope {
        RunScope {
            clusters: Some(BTreeSet::new()),
            ..RunScope::default()
        }
    }
    use serde_json::json;

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

    fn cache() -> Cache {
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

    #[test]
    fn a_malformed_kubefedconfig_leaves_the_last_settings() {
        let mut c = cache();
        let config = |spec: Value| {
            json!({"apiVersion": "core.kubefed.io/v1beta1", "kind": "KubeFedConfig",
                "metadata": {"name": "kubefed", "namespace": "fed"}, "spec": spec})
        };
        let d = c.apply(ev(
            Source::Config,
            Change::Applied(config(json!({"scope": "Namespaced"}))),
        ));
        assert!(d.structure, "a new scope re-plans everything");
        assert_eq!(
            c.settings.scope,
            crate::core::cluster::membership::Scope::Namespaced
        );
        let d = c.apply(ev(
            Source::Config,
            Change::Applied(config(json!({"scope": "Sideways"}))),
        ));
        assert!(!d.structure);
        assert_eq!(
            d.warnings,
            [
                "KubeFedConfig fed/kubefed: spec.scope: must be Cluster or Namespaced, not \"Sideways\"; the previous settings stay"
            ]
        );
        assert_eq!(
            c.settings.scope,
            crate::core::cluster::membership::Scope::Namespaced
        );
        let d = c.apply(ev(Source::Config, Change::Deleted(config(json!({})))));
        assert!(d.structure);
        assert_eq!(c.settings, Settings::default());
    }

    #[test]
    fn changes_touch_their_federated_objects() {
        let mut c = cache();
        let cms = Source::Federated("configmaps".into());
        let d = c.apply(ev(
            cms.clone(),
            Change::replaced(vec![obj("FederatedConfigMap", "shop", "a", "1")]),
        ));
        assert_eq!(d.keys, [key("configmaps", "shop", "a")].into());
        // The same object again: nothing to do.
        let d = c.apply(ev(
            cms.clone(),
            Change::Applied(obj("FederatedConfigMap", "shop", "a", "1")),
        ));
        assert!(d.keys.is_empty());
        let d = c.apply(ev(
            cms,
            Change::Applied(obj("FederatedConfigMap", "shop", "a", "2")),
        ));
        assert_eq!(d.keys, [key("configmaps", "shop", "a")].into());

        // A member's copy (drift) touches its federated object; the first
        // listing of a member's type names the member (caught up once all
        // of its types have listed).
        let m = Source::Member("m1".into(), "configmaps".into());
        let d = c.apply(ev(
            m.clone(),
            Change::replaced(vec![obj("ConfigMap", "shop", "a", "1")]),
        ));
        assert_eq!(d.listed, ["m1".to_string()].into());
        let d = c.apply(ev(
            m,
            Change::Applied(obj("ConfigMap", "shop", "a", "hand-edited")),
        ));
        assert_eq!(d.keys, [key("configmaps", "shop", "a")].into());

        // A member Namespace belongs to its FederatedNamespace; a
        // FederatedNamespace touches everything in its namespace.
        let mut member_ns = obj("Namespace", "", "shop", "");
        member_ns["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("namespace");
        let mns = Source::Member("m1".into(), "namespaces".into());
        c.apply(ev(mns.clone(), Change::replaced(vec![])));
        let d = c.apply(ev(mns, Change::Applied(member_ns)));
        assert_eq!(d.keys, [key("namespaces", "shop", "shop")].into());
        let d = c.apply(ev(
            Source::Federated("namespaces".into()),
            Change::replaced(vec![obj("FederatedNamespace", "shop", "shop", "")]),
        ));
        assert_eq!(
            d.keys,
            [
                key("configmaps", "shop", "a"),
                key("namespaces", "shop", "shop")
            ]
            .into()
        );
    }

    #[test]
    fn a_malformed_type_config_is_named_with_its_field_and_left_out() {
        let mut c = cache();
        let mut bad = ftc("secrets", "Secret", "secrets", "");
        bad["spec"]["federatedType"]["pluralName"] = json!(5);
        let d = c.apply(ev(Source::TypeConfigs, Change::Applied(bad)));
        assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
        assert!(
            d.warnings[0].starts_with(
                "FederatedTypeConfig \"fed/secrets\": spec.federatedType.pluralName: invalid type"
            ),
            "{}",
            d.warnings[0]
        );
        assert!(!c.ftcs.contains_key("secrets"));
        assert_eq!(c.ftcs.len(), 2, "the others stay");
    }

    #[test]
    fn a_watch_that_failed_before_listing_is_not_synced() {
        let mut c = cache();
        let cms = Source::Federated("configmaps".into());
        let failed = || Change::Failed {
            not_served: false,
            message: "500 Internal Server Error".into(),
        };
        let d = c.apply(ev(cms.clone(), failed()));
        assert!(
            !c.host_synced(std::slice::from_ref(&cms)),
            "no round may take it for empty"
        );
        assert_eq!(
            d.warnings,
            ["watching the federated objects of configmaps: 500 Internal Server Error"]
        );
        c.apply(ev(
            cms.clone(),
            Change::replaced(vec![obj("FederatedConfigMap", "shop", "a", "1")]),
        ));
        assert!(c.host_synced(std::slice::from_ref(&cms)));
        // Failing later keeps what was listed until the watch lists again.
        c.apply(ev(cms.clone(), failed()));
        assert!(c.host_synced(std::slice::from_ref(&cms)));
        assert_eq!(c.full_round_keys("fed", &RunScope::default()).len(), 1);
    }

    #[test]
    fn a_restarted_source_is_not_synced_and_forgets_what_it_saw() {
        let mut c = cache();
        let cms = Source::Federated("configmaps".into());
        c.apply(ev(
            cms.clone(),
            Change::replaced(vec![obj("FederatedConfigMap", "shop", "a", "1")]),
        ));
        assert!(c.host_synced(std::slice::from_ref(&cms)));
        c.forget(&cms);
        assert!(!c.host_synced(std::slice::from_ref(&cms)));
        assert!(
            c.full_round_keys("fed", &RunScope::default()).is_empty(),
            "objects seen before the restart are gone"
        );
        c.apply(ev(cms.clone(), Change::replaced(vec![])));
        assert!(c.host_synced(std::slice::from_ref(&cms)));
    }

    #[test]
    fn our_own_write_backs_and_status_only_changes_are_no_news() {
        let mut c = cache();
        let kfc = json!({"metadata": {"name": "m1"}, "spec": {"apiEndpoint": "https://a"}, "status": {"conditions": []}});
        assert!(
            c.apply(ev(Source::Clusters, Change::replaced(vec![kfc.clone()])))
                .structure
        );
        let mut status_only = kfc.clone();
        status_only["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
        assert_eq!(
            c.apply(ev(Source::Clusters, Change::Applied(status_only))),
            Dirt::default()
        );
        let mut relabelled = kfc;
        relabelled["metadata"]["labels"] = json!({"region": "eu"});
        assert!(
            c.apply(ev(Source::Clusters, Change::Applied(relabelled)))
                .structure
        );

        let pv = json!({"metadata": {"name": "configmap-a", "namespace": "shop"}, "status": {}});
        assert_eq!(
            c.apply(ev(Source::Versions(false), Change::replaced(vec![pv]))),
            Dirt::default()
        );
        assert_eq!(c.versions.len(), 1);
        assert_eq!(
            c.apply(ev(Source::Versions(true), Change::replaced(vec![]))),
            Dirt::default()
        );
        assert_eq!(
            c.versions.len(),
            1,
            "a cluster-scoped relist keeps the namespaced versions"
        );

        // Federated objects and member copies: a status update (ours on
        // the host, a controller's in a member) is no news; the rest is.
        let fed = Source::Federated("configmaps".into());
        let a = obj("FederatedConfigMap", "shop", "a", "1");
        c.apply(ev(fed.clone(), Change::replaced(vec![a.clone()])));
        let mut written_back = a.clone();
        written_back["status"] = json!({"clusters": [{"name": "m1"}]});
        written_back["metadata"]["resourceVersion"] = json!("7");
        assert!(
            c.apply(ev(fed.clone(), Change::Applied(written_back.clone())))
                .keys
                .is_empty()
        );
        let seen = c.observe(
            "fed",
            none_touched(),
            &["configmaps".into()],
            &[],
            Cover::Everything,
        );
        assert_eq!(
            seen.types[0].objects[0], written_back,
            "the cache holds the latest copy"
        );
        let mut edited = written_back;
        edited["metadata"]["labels"] = json!({"team": "x"});
        assert_eq!(
            c.apply(ev(fed.clone(), Change::Applied(edited))).touched(),
            [key("configmaps", "shop", "a")].into()
        );
        let member = Source::Member("m1".into(), "configmaps".into());
        let copy = obj("ConfigMap", "shop", "a", "1");
        c.apply(ev(member.clone(), Change::replaced(vec![copy.clone()])));
        let mut status = copy.clone();
        status["status"] = json!({"observedGeneration": 2});
        let dirt = c.apply(ev(member.clone(), Change::Applied(status.clone())));
        assert!(dirt.keys.is_empty());
        // Said apart: news for an object whose rollout waits (`rollouts`).
        assert_eq!(dirt.status_only, [key("configmaps", "shop", "a")].into());
        // Unless an RSP schedules it: its replicas follow the members'.
        let rsp = json!({"apiVersion": "scheduling.kubefed.io/v1alpha1", "kind": "ReplicaSchedulingPreference",
                         "metadata": {"name": "a", "namespace": "shop"},
                         "spec": {"targetKind": "FederatedConfigMap", "totalReplicas": 3}});
        c.apply(ev(Source::Schedulings, Change::replaced(vec![rsp])));
        status["status"] = json!({"readyReplicas": 1});
        assert_eq!(
            c.apply(ev(member.clone(), Change::Applied(status))).keys,
            [key("configmaps", "shop", "a")].into()
        );
        // A member copy is held as the view decide reads, without its
        // data; an edit of the data by hand is news all the same.
        let mut drifted = copy;
        drifted["data"]["d"] = json!("by hand");
        assert_eq!(
            c.apply(ev(member.clone(), Change::Applied(drifted.clone())))
                .keys,
            [key("configmaps", "shop", "a")].into()
        );
        // As a member watch sends them: held in its own task.
        let kept = |v: &Value| Change::Kept(key_of(v), member.hold(v));
        assert!(c.apply(ev(member.clone(), kept(&drifted))).keys.is_empty());
        let mut edited_again = drifted.clone();
        edited_again["data"]["d"] = json!("by hand, again");
        assert_eq!(
            c.apply(ev(member.clone(), kept(&edited_again))).keys,
            [key("configmaps", "shop", "a")].into()
        );
        c.apply(ev(member.clone(), kept(&drifted)));
        let held = &c.members["m1"]["configmaps"].objects[&ObjectKey::new("shop", "a")];
        assert_eq!(
            held.text.value(),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "a", "namespace": "shop"}})
        );
    }

    /// A busy host's watch brings a round's own writes back late: the
    /// cache holds them from the round's answers, and their older events
    /// (the finalizer's before the status's) do not take it back.
    #[test]
    fn own_writes_are_held_ahead_of_their_late_events() {
        let mut c = cache();
        let fed = Source::Federated("configmaps".into());
        let at = |v: &Value, rv: &str| {
            let mut v = v.clone();
            v["metadata"]["resourceVersion"] = json!(rv);
            v
        };
        let a = at(&obj("FederatedConfigMap", "shop", "a", "1"), "10");
        c.apply(ev(fed.clone(), Change::replaced(vec![a.clone()])));
        c.apply(ev(Source::Versions(false), Change::replaced(vec![])));
        let held = |c: &Cache| {
            c.federated["configmaps"].objects[&ObjectKey::new("shop", "a")]
                .text
                .value()
        };
        // The round added the finalizer (11), wrote the status (12) and the
        // version (5, another object's count).
        let mut finalized = at(&a, "11");
        finalized["metadata"]["finalizers"] = json!(["kubefed.io/sync-controller"]);
        let mut statused = at(&finalized, "12");
        statused["status"] = json!({"clusters": [{"name": "m1"}]});
        statused["metadata"]["managedFields"] = json!([{"manager": "kubefedctl"}]);
        let pv = json!({"metadata": {"name": "configmap-a", "namespace": "shop", "resourceVersion": "5"}, "status": {"clusterVersions": []}});
        let (obj_a, obj_b) = (
            key("configmaps", "shop", "a"),
            key("configmaps", "shop", "b"),
        );
        for answer in [
            Answer::federated(finalized.clone()),
            Answer::federated(statused.clone()),
            Answer::version(pv.clone()),
        ] {
            c.hold_own_write(&obj_a, answer);
        }
        statused["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        assert_eq!(held(&c), statused, "held as its watch holds it");
        assert_eq!(
            c.versions[&ObjectKey::new("shop", "configmap-a")].value(),
            pv
        );
        // The finalizer's event, late: dropped, and no news.
        assert_eq!(
            c.apply(ev(fed.clone(), Change::Applied(finalized.clone()))),
            Dirt::default()
        );
        assert_eq!(held(&c), statused);
        // The status's event: the same object, no news; the hold ends.
        assert_eq!(
            c.apply(ev(fed.clone(), Change::Applied(statused.clone()))),
            Dirt::default()
        );
        assert_eq!(c.own_writes.len(), 1, "the version's event is to come");
        let versions = Source::Versions(false);
        assert_eq!(
            c.apply(ev(versions.clone(), Change::Applied(pv.clone()))),
            Dirt::default()
        );
        assert!(c.own_writes.is_empty());
        // A member copy created: held as its member's watch holds it; its
        // event is no news, nor is an older one (a round's update before).
        let member = Source::Member("m1".into(), "configmaps".into());
        c.apply(ev(member.clone(), Change::replaced(vec![])));
        let copy = at(&obj("ConfigMap", "shop", "a", "1"), "3");
        let answer = Answer::member("m1", &copy, false);
        c.hold_own_write(&obj_a, answer);
        let kept = |v: &Value| Change::Kept(key_of(v), member.hold(v));
        assert_eq!(
            c.apply(ev(member.clone(), kept(&at(&copy, "2")))),
            Dirt::default()
        );
        assert_eq!(c.own_writes.len(), 1);
        assert_eq!(c.apply(ev(member.clone(), kept(&copy))), Dirt::default());
        assert!(c.own_writes.is_empty());
        let mut by_hand = at(&copy, "4");
        by_hand["data"]["d"] = json!("by hand");
        assert_eq!(
            c.apply(ev(member.clone(), kept(&by_hand))).touched(),
            [obj_a.clone()].into(),
            "a change by someone else is news"
        );
        // A round's write whose event comes before its answer: the event
        // is news, named by the object written and its version, which the
        // answer names too (the loop then drops that news: `rounds`).
        let mut rewritten = at(&copy, "5");
        rewritten["data"]["d"] = json!("put back");
        let dirt = c.apply(ev(member.clone(), kept(&rewritten)));
        let answer = Answer::member("m1", &rewritten, false);
        let (written, rv) = c.hold_own_write(&obj_a, answer).unwrap();
        assert_eq!(dirt.written, [(obj_a.clone(), written, rv)]);
        assert!(dirt.keys.is_empty() && c.own_writes.is_empty());
        // A change after it is news as ever, and an answer older than what
        // is held changes nothing.
        let mut edited = at(&statused, "13");
        edited["metadata"]["labels"] = json!({"team": "x"});
        assert_eq!(
            c.apply(ev(fed.clone(), Change::Applied(edited.clone())))
                .written,
            [(
                obj_a.clone(),
                Written::Federated("configmaps".into(), ObjectKey::new("shop", "a")),
                13
            )]
        );
        c.hold_own_write(&obj_a, Answer::federated(statused.clone()));
        assert_eq!(held(&c), edited);
        assert!(c.own_writes.is_empty());
        // A version whose federated object is gone is not brought back,
        // and a new list ends every hold of its store.
        c.apply(ev(fed.clone(), Change::Deleted(edited)));
        c.apply(ev(versions, Change::Deleted(pv.clone())));
        c.hold_own_write(&obj_a, Answer::version(at(&pv, "6")));
        assert!(c.versions.is_empty());
        let b = at(&obj("FederatedConfigMap", "shop", "b", "1"), "20");
        c.apply(ev(fed.clone(), Change::Applied(b.clone())));
        c.hold_own_write(&obj_b, Answer::federated(at(&b, "21")));
        assert_eq!(c.own_writes.len(), 1);
        c.apply(ev(fed, Change::replaced(vec![b])));
        assert!(c.own_writes.is_empty());
    }

    /// The host's Namespaces touch only the FederatedNamespaces the watch
    /// holds: one outside its reach (`-n`, a shard) or federated by nothing
    /// starts no round.
    #[test]
    fn a_host_namespace_touches_only_a_held_federated_namespace() {
        let mut c = cache();
        let fed_ns = Source::Federated("namespaces".into());
        let shop = obj("FederatedNamespace", "shop", "shop", "");
        c.apply(ev(fed_ns.clone(), Change::replaced(vec![shop.clone()])));
        let ns = |name: &str, uid: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "uid": uid}});
        let d = c.apply(ev(
            Source::Namespaces,
            Change::replaced(vec![ns("shop", "1"), ns("other", "2")]),
        ));
        assert_eq!(d.keys, [key("namespaces", "shop", "shop")].into());
        assert_eq!(c.namespaces.len(), 2, "every namespace is still known");
        let d = c.apply(ev(Source::Namespaces, Change::Applied(ns("new", "3"))));
        assert!(d.keys.is_empty(), "{:?}", d.keys);
        let d = c.apply(ev(Source::Namespaces, Change::Deleted(ns("other", "2"))));
        assert!(d.keys.is_empty(), "{:?}", d.keys);
        let d = c.apply(ev(Source::Namespaces, Change::Applied(ns("shop", "4"))));
        assert_eq!(d.keys, [key("namespaces", "shop", "shop")].into());
        c.apply(ev(fed_ns, Change::Deleted(shop)));
        let d = c.apply(ev(Source::Namespaces, Change::Deleted(ns("shop", "4"))));
        assert!(d.keys.is_empty(), "{:?}", d.keys);
    }

    #[test]
    fn a_round_observes_only_its_keys_and_only_listed_members() {
        let mut c = cache();
        c.apply(ev(
            Source::Federated("configmaps".into()),
            Change::replaced(vec![
                obj("FederatedConfigMap", "shop", "a", "1"),
                obj("FederatedConfigMap", "shop", "b", "1"),
            ]),
        ));
        c.apply(ev(
            Source::Member("m1".into(), "configmaps".into()),
            Change::Failed {
                not_served: true,
                message: "404".into(),
            },
        ));
        let pv = |name: &str| {
            json!({"apiVersion": "core.kubefed.io/v1alpha1", "kind": "PropagatedVersion",
                   "metadata": {"name": name, "namespace": "shop"}, "status": {}})
        };
        c.apply(ev(
            Source::Versions(false),
            Change::replaced(vec![pv("configmap-a"), pv("configmap-b")]),
        ));
        let keys: BTreeSet<WorkKey> = [key("configmaps", "shop", "b")].into();
        let types = ["configmaps".to_string(), "namespaces".to_string()];
        let seen = c.observe("fed", none_touched(), &types, &[], Cover::Keys(&keys));
        let cms = &seen.types[0];
        assert_eq!(cms.objects.len(), 1);
        assert_eq!(cms.objects[0]["metadata"]["name"], "b");
        assert_eq!(
            *seen.types[0].only.as_ref().unwrap(),
            [ObjectKey::new("shop", "b")].into()
        );
        assert_eq!(
            seen.versions.keys().collect::<Vec<_>>(),
            [&ObjectKey::new("shop", "configmap-b")],
            "the versions of the round's keys only"
        );
        let all = c.observe("fed", none_touched(), &types, &[], Cover::Everything);
        assert_eq!(all.types[0].objects.len(), 2);
        assert_eq!(all.versions.len(), 2);
        assert!(all.types.iter().all(|t| t.only.is_none()));
        assert!(!c.member_synced("m2", &["configmaps".into()]));
        assert!(
            c.member_synced("m1", &["configmaps".into()]),
            "not served counts as known"
        );
    }

    /// A member named `name`, ready, with no client (none is used).
    fn member(name: &str) -> ProbedMember {
        ProbedMember {
            member: crate::clients::members::Member::without_client(name),
            health: crate::clients::members::Health::Ready {
                version: "v1.37.2".into(),
            },
        }
    }

    /// `c`'s observation of both types for a round that touches m1, ready.
    fn observe_touching_m1(c: &Cache, cover: Cover) -> Observation {
        let m1 = member("m1");
        let members = std::slice::from_ref(&m1);
        let touched = RunScope {
            clusters: Some(["m1".to_string()].into()),
            ..RunScope::default()
        };
        let types = ["configmaps".to_string(), "namespaces".to_string()];
        c.observe("fed", touched, &types, members, cover)
    }

    #[test]
    fn a_full_round_in_slices_covers_orphans_and_every_failing_listing() {
        let mut c = cache();
        c.apply(ev(
            Source::Federated("configmaps".into()),
            Change::replaced(vec![obj("FederatedConfigMap", "shop", "a", "1")]),
        ));
        c.apply(ev(
            Source::Member("m1".into(), "configmaps".into()),
            Change::replaced(vec![
                obj("ConfigMap", "shop", "a", "1"),
                obj("ConfigMap", "shop", "gone", "1"),
            ]),
        ));
        c.apply(ev(
            Source::Member("m1".into(), "namespaces".into()),
            Change::Failed {
                not_served: false,
                message: "500".into(),
            },
        ));
        assert_eq!(
            c.full_round_keys("fed", &RunScope::default()),
            [
                key("configmaps", "shop", "a"),
                key("configmaps", "shop", "gone")
            ]
            .into(),
            "a member copy without its federated object is looked at too"
        );
        let elsewhere = RunScope {
            namespace: Some("other".into()),
            ..RunScope::default()
        };
        assert_eq!(
            c.full_round_keys("fed", &elsewhere),
            [key("configmaps", "shop", "a")].into(),
            "member copies outside -n are left out (the federated objects are watched in it)"
        );

        let slice: BTreeSet<WorkKey> = [key("configmaps", "shop", "gone")].into();
        let middle = observe_touching_m1(&c, Cover::Keys(&slice));
        let last = observe_touching_m1(&c, Cover::LastSlice(&slice));
        for seen in [&middle, &last] {
            let Listing::Listed(copies) = &seen.types[0].members["m1"] else {
                panic!("configmaps are listed in m1");
            };
            assert_eq!(
                copies.keys().collect::<Vec<_>>(),
                [&ObjectKey::new("shop", "gone")],
                "only the slice's copies"
            );
        }
        assert!(
            middle.types[1].members.is_empty(),
            "a slice without namespaces leaves their listings to the last"
        );
        assert!(
            matches!(&last.types[1].members["m1"], Listing::Failed(why) if why == "500"),
            "the last slice says where a type with no object fails: {:?}",
            last.types[1].members
        );
    }

    /// A round over some keys looks each up in a member's copies: a
    /// Namespace by its own key, nothing for a key whose federated object
    /// would have another name.
    #[test]
    fn a_round_over_keys_lists_only_its_copies_of_either_scope() {
        let mut c = cache();
        let namespace = |name: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        c.apply(ev(
            Source::Member("m1".into(), "configmaps".into()),
            Change::replaced(vec![
                obj("ConfigMap", "shop", "a", "1"),
                obj("ConfigMap", "shop", "b", "1"),
                obj("ConfigMap", "mall", "a", "1"),
            ]),
        ));
        c.apply(ev(
            Source::Member("m1".into(), "namespaces".into()),
            Change::replaced(vec![namespace("shop"), namespace("mall")]),
        ));
        let keys: BTreeSet<WorkKey> = [
            key("configmaps", "shop", "a"),
            key("configmaps", "shop", "missing"),
            key("namespaces", "shop", "shop"),
            // Not a FederatedNamespace's key (its name is its namespace's).
            key("namespaces", "mall", "shop"),
        ]
        .into();
        let seen = observe_touching_m1(&c, Cover::Keys(&keys));
        let listed = |t: usize| {
            let Listing::Listed(copies) = &seen.types[t].members["m1"] else {
                panic!("type {t} is listed in m1");
            };
            copies.keys().cloned().collect::<BTreeSet<_>>()
        };
        let k = |ns: &str, name: &str| ObjectKey::new(ns, name);
        assert_eq!(listed(0), [k("shop", "a")].into());
        assert_eq!(
            listed(1),
            [k("", "shop")].into(),
            "a Namespace by its own key"
        );
    }
}
