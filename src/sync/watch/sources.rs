//! The watches of `reconcile --watch`: one kube-runtime watcher per source
//! (a host resource, a federated type, a member's managed objects of a
//! type), each a task that turns the watcher's events into [`Event`]s on one
//! channel. A (re)list arrives whole, as [`Change::Replaced`], so the cache
//! never holds a half-listed source. The list is held as text as it
//! arrives (a whole type in a member can be tens of thousands of objects,
//! and every watch lists at once when the controller starts), and a shard
//! drops what it does not own before anything is kept.
//!
//! A watch that fails (connection refused, an API server restarted, a
//! `410 Gone` after etcd compaction, credentials refused) starts over with
//! a fresh list after a backoff, as kube-runtime's own watcher re-lists on
//! a desync: the list that follows says exactly what was missed, and a
//! source counts as up again only once it has listed. Each restart is
//! counted, and how long a source has been down is what `/readyz` shows.

use super::metrics::Metrics;
use crate::apply::api_error_line;
use crate::core::describe::{ObjectKey, key_of};
use crate::core::held::Held;
use crate::core::run::shard::Shard;
use crate::sync::run::observe::ObservedType;
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher::{self, watcher};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

/// What a watch is of.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// The KubeFedConfig.
    Config,
    /// FederatedTypeConfigs.
    TypeConfigs,
    /// KubeFedClusters.
    Clusters,
    /// ReplicaSchedulingPreferences.
    Schedulings,
    /// PropagatedVersions and ClusterPropagatedVersions (`true`: cluster).
    Versions(bool),
    /// The host's Namespaces.
    Namespaces,
    /// The federated objects of a type (its FederatedTypeConfig's name).
    Federated(String),
    /// A member's managed objects of a type: (cluster, FTC name).
    Member(String, String),
    /// The pull members' agents' PropagationReports (only while a pull
    /// member is joined).
    Reports,
}

impl Source {
    /// Whether `--shard I/N` splits this source's objects between shards
    /// (federated objects, member copies and RSPs); every shard needs all
    /// of the others.
    fn partitioned(&self) -> bool {
        matches!(
            self,
            Source::Federated(_) | Source::Member(..) | Source::Schedulings
        )
    }

    /// How the cache holds this source's objects: a member copy as the
    /// view decide reads (`core::held`), anything else whole.
    pub fn hold(&self, v: &Value) -> Held {
        match self {
            Source::Member(..) => Held::member_copy(v),
            _ => Held::whole(v),
        }
    }

    /// Where the source is: `host`, or the member's name.
    pub fn cluster(&self) -> &str {
        match self {
            Source::Member(c, _) => c,
            _ => "host",
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Config => write!(f, "the KubeFedConfig"),
            Source::TypeConfigs => write!(f, "FederatedTypeConfigs"),
            Source::Clusters => write!(f, "KubeFedClusters"),
            Source::Schedulings => write!(f, "ReplicaSchedulingPreferences"),
            Source::Versions(false) => write!(f, "PropagatedVersions"),
            Source::Versions(true) => write!(f, "ClusterPropagatedVersions"),
            Source::Namespaces => write!(f, "the host's Namespaces"),
            Source::Federated(t) => write!(f, "the federated objects of {t}"),
            Source::Member(c, t) => write!(f, "{t} in {c}"),
            Source::Reports => write!(f, "the pull members' PropagationReports"),
        }
    }
}

/// A change a watch saw.
#[derive(Debug)]
pub enum Change {
    Applied(Value),
    /// A member copy applied, already held as the cache holds it: made in
    /// the watch's own task, so that the events waiting for the controller
    /// (a first sync's creates come back as tens of thousands) are small
    /// views, not parsed objects. Member sources only (the cache reads any
    /// other source's as `Applied`).
    Kept(ObjectKey, Held),
    Deleted(Value),
    /// A complete (re)list: what the source holds now, by key, as the
    /// cache holds it ([`Source::hold`]).
    Replaced(Vec<(ObjectKey, Held)>),
    /// The watch failed (it retries with backoff); `not_served`: a 404.
    Failed {
        not_served: bool,
        message: String,
    },
}

impl Change {
    /// A complete list of these objects, held whole.
    pub fn replaced(objects: Vec<Value>) -> Change {
        Change::Replaced(
            objects
                .iter()
                .map(|o| (key_of(o), Held::whole(o)))
                .collect(),
        )
    }
}

/// The objects of a list, parsed again (for the few, small host sources
/// that are kept as typed objects or values).
pub fn values(listed: Vec<(ObjectKey, Held)>) -> impl Iterator<Item = Value> {
    listed.into_iter().map(|(_, o)| o.text.value())
}

#[derive(Debug)]
pub struct Event {
    pub source: Source,
    pub change: Change,
}

/// How to watch a source, and what it was started from (a different
/// fingerprint restarts it).
#[derive(Clone)]
pub struct Spec {
    pub api: Api<DynamicObject>,
    pub config: watcher::Config,
    /// `apiVersion` and `kind` for objects listed without them.
    pub api_version: String,
    pub kind: String,
    pub fingerprint: String,
    /// Member copies held whole, `managedFields` included, not as the view
    /// decide otherwise reads: their type or objects keep fields of the
    /// copies (`core::propagation::foreign`).
    pub whole: bool,
}

impl Spec {
    /// A watch of `resource` through `client`, in `namespace` (`None`:
    /// every namespace, or a cluster-scoped resource).
    pub fn new(
        client: &kube::Client,
        resource: &ApiResource,
        namespace: Option<&str>,
        config: watcher::Config,
    ) -> Spec {
        Spec {
            api: crate::apply::dynamic_api(client, namespace, resource),
            config,
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
            fingerprint: namespace.unwrap_or("").to_string(),
            whole: false,
        }
    }
}

/// What the run's scope asks of the watches: what each trigger's
/// `watches` reads to say which sources it watches and how
/// (`cache::triggers::registry`). Built by `specs` from the controller.
pub struct WatchScope<'a> {
    /// The host, as the watches read it.
    pub host: &'a kube::Client,
    /// The federation's namespace (the KubeFedConfig, the types, the clusters).
    pub federation_namespace: &'a str,
    /// Where federated objects are watched (`None`: every namespace).
    pub namespace: Option<String>,
    /// `-l`: the federated objects' label selector.
    pub selector: Option<&'a str>,
    /// The enabled types the run covers (`--type`), by FTC name.
    pub types: Vec<(String, ObservedType)>,
    /// The members whose copies are watched: ready to be watched, and
    /// touched (`--cluster`). Empty while the host's watches list first.
    pub members: Vec<WatchedMember<'a>>,
    /// Types whose member copies are held whole (`Cache::whole_copies`).
    pub whole_copies: &'a BTreeSet<String>,
    /// A pull member is joined: its agent's reports are watched.
    pub pull_members: bool,
}

/// A member whose copies are watched.
pub struct WatchedMember<'a> {
    pub name: &'a str,
    pub client: &'a kube::Client,
    /// What its client was built from: a new one restarts its watches.
    pub fingerprint: &'a str,
}

/// The running watches.
pub struct Sources {
    tx: UnboundedSender<Event>,
    running: BTreeMap<Source, Running>,
    metrics: Arc<Metrics>,
    /// `--shard I/N`: only this shard's objects of partitioned sources are
    /// passed on; the rest are dropped as they arrive.
    shard: Option<Shard>,
}

/// A started watch: what it was started from, its name, its task.
struct Running {
    fingerprint: String,
    label: String,
    task: JoinHandle<()>,
}

impl Sources {
    pub fn new(tx: UnboundedSender<Event>, metrics: Arc<Metrics>, shard: Option<Shard>) -> Sources {
        Sources {
            tx,
            running: BTreeMap::new(),
            metrics,
            shard,
        }
    }

    /// How a source is named in `/readyz` and the restart counter:
    /// `host: FederatedConfigMap`, `member1: ConfigMap`.
    fn label(source: &Source, spec: &Spec) -> String {
        format!("{}: {}", source.cluster(), spec.kind)
    }

    /// Runs exactly `wanted`: stops the others, starts the missing ones and
    /// restarts those whose fingerprint changed. Returns the started ones.
    pub fn sync(&mut self, wanted: BTreeMap<Source, Spec>) -> Vec<Source> {
        let metrics = &self.metrics;
        self.running.retain(|source, r| {
            let keep = wanted
                .get(source)
                .is_some_and(|w| w.fingerprint == r.fingerprint);
            if !keep {
                r.task.abort();
                metrics.watch_stopped(&r.label);
            }
            keep
        });
        let mut started = Vec::new();
        for (source, spec) in wanted {
            if self.running.contains_key(&source) {
                continue;
            }
            let fingerprint = spec.fingerprint.clone();
            let label = Self::label(&source, &spec);
            let watch = Watch {
                label: label.clone(),
                shard: self.shard.filter(|_| source.partitioned()),
                source: source.clone(),
                spec,
                tx: self.tx.clone(),
                metrics: self.metrics.clone(),
            };
            let task = tokio::spawn(watch.run());
            self.running.insert(
                source.clone(),
                Running {
                    fingerprint,
                    label,
                    task,
                },
            );
            started.push(source);
        }
        started
    }

    /// Restarts the watches `which` selects (a member back from an outage
    /// lists again at once, not after the watcher's backoff).
    pub fn restart(&mut self, which: impl Fn(&Source) -> bool) -> Vec<Source> {
        let stale: Vec<Source> = self.running.keys().filter(|s| which(s)).cloned().collect();
        for s in &stale {
            if let Some(r) = self.running.remove(s) {
                r.task.abort();
                self.metrics.watch_stopped(&r.label);
            }
        }
        stale
    }

    pub fn running(&self) -> impl Iterator<Item = &Source> {
        self.running.keys()
    }
}

impl Drop for Sources {
    fn drop(&mut self) {
        for r in self.running.values() {
            r.task.abort();
            self.metrics.watch_stopped(&r.label);
        }
    }
}

/// The first restart's delay; doubled per failure in a row, up to
/// [`MAX_RESTART_DELAY`] (kube-runtime's default backoff is the same shape).
const FIRST_RESTART_DELAY: Duration = Duration::from_secs(1);
const MAX_RESTART_DELAY: Duration = Duration::from_secs(30);

/// One source's watch task.
struct Watch {
    source: Source,
    /// The shard whose objects alone are passed on (partitioned sources).
    shard: Option<Shard>,
    label: String,
    spec: Spec,
    tx: UnboundedSender<Event>,
    metrics: Arc<Metrics>,
}

impl Watch {
    /// Watches until aborted, starting over after every failure.
    async fn run(self) {
        let mut failures = 0u32;
        loop {
            let Some(error) = self.watch_once(&mut failures).await else {
                return;
            };
            // A 410 is a plain re-list (the history the watch resumed from
            // was compacted); anything else is reported and waits.
            let gone = matches!(&error, watcher::Error::WatchError(s) if s.code == 410)
                || matches!(&error, watcher::Error::WatchFailed(kube::Error::Api(s)) if s.code == 410);
            self.metrics.watch_restarted(&self.label, !gone);
            if gone {
                tracing::debug!(
                    "{}: watch history compacted (410); listing again",
                    self.label
                );
                continue;
            }
            failures += 1;
            // The first failure in a row is news (the cache marks the
            // source, a line says why); the retries that follow are not.
            if failures == 1 {
                let event = Event {
                    source: self.source.clone(),
                    change: failed(error),
                };
                if self.tx.send(event).is_err() {
                    return;
                }
            }
            tokio::time::sleep(restart_delay(failures)).await;
        }
    }

    /// One watcher from a fresh list until it fails; `None`: the controller
    /// is gone (or the stream ended, which a watcher never does).
    async fn watch_once(&self, failures: &mut u32) -> Option<watcher::Error> {
        let mut stream = watcher(self.spec.api.clone(), self.spec.config.clone()).boxed();
        let mut listing: Vec<(ObjectKey, Held)> = Vec::new();
        while let Some(item) = stream.next().await {
            let change = match item {
                Ok(watcher::Event::Init) => {
                    listing.clear();
                    continue;
                }
                Ok(watcher::Event::InitApply(o)) => {
                    if self.owns(&o) {
                        // Held as the cache holds it at once (the same as an
                        // applied object's, so the cache compares them as text).
                        let key = object_key(&o);
                        listing.push((key, self.hold(&self.typed(o))));
                    }
                    continue;
                }
                Ok(watcher::Event::InitDone) => {
                    *failures = 0;
                    self.metrics.watch_listed(&self.label);
                    listing.shrink_to_fit();
                    Change::Replaced(std::mem::take(&mut listing))
                }
                Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o)) if !self.owns(&o) => {
                    continue;
                }
                Ok(watcher::Event::Apply(o)) if matches!(self.source, Source::Member(..)) => {
                    let key = object_key(&o);
                    Change::Kept(key, self.hold(&self.typed(o)))
                }
                Ok(watcher::Event::Apply(o)) => Change::Applied(self.typed(o)),
                Ok(watcher::Event::Delete(o)) => Change::Deleted(self.typed(o)),
                Err(e) => return Some(e),
            };
            let event = Event {
                source: self.source.clone(),
                change,
            };
            if self.tx.send(event).is_err() {
                return None;
            }
        }
        None
    }

    /// Whether this watch's shard owns `o` (always, unsharded). A member
    /// copy's key names its shard as its federated object's does
    /// (`core::run::shard`).
    fn owns(&self, o: &DynamicObject) -> bool {
        self.shard.is_none_or(|s| s.owns(&object_key(o)))
    }

    /// An object as the cache holds this source's (whole, for a member
    /// source whose copies are kept whole).
    fn hold(&self, v: &Value) -> Held {
        match self.spec.whole {
            true => Held::whole(v),
            false => self.source.hold(v),
        }
    }

    fn typed(&self, mut o: DynamicObject) -> Value {
        // The API server keeps managedFields itself (an update without them
        // leaves them as they are) and only the copies of a type that keeps
        // other managers' fields need them: not holding them is most of a
        // Deployment's size in the cache.
        if !self.spec.whole {
            o.metadata.managed_fields = None;
        }
        let mut v = serde_json::to_value(o).unwrap_or_default();
        if v.get("apiVersion").is_none() {
            v["apiVersion"] = Value::String(self.spec.api_version.clone());
        }
        if v.get("kind").is_none() {
            v["kind"] = Value::String(self.spec.kind.clone());
        }
        v
    }
}

/// The key, as `key_of` reads it from JSON.
fn object_key(o: &DynamicObject) -> ObjectKey {
    ObjectKey::new(
        o.metadata.namespace.clone().unwrap_or_default(),
        o.metadata.name.clone().unwrap_or_default(),
    )
}

/// The wait before the `failures`-th restart in a row.
fn restart_delay(failures: u32) -> Duration {
    crate::core::run::queue::doubling(FIRST_RESTART_DELAY, failures, MAX_RESTART_DELAY)
}

fn failed(e: watcher::Error) -> Change {
    let api = match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => e,
        other => {
            return Change::Failed {
                not_served: false,
                message: other.to_string(),
            };
        }
    };
    let not_served = matches!(&api, kube::Error::Api(s) if s.code == 404);
    Change::Failed {
        not_served,
        message: api_error_line(api),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_back_off_and_are_capped() {
        assert_eq!(restart_delay(1), Duration::from_secs(1));
        assert_eq!(restart_delay(2), Duration::from_secs(2));
        assert_eq!(restart_delay(5), Duration::from_secs(16));
        assert_eq!(restart_delay(6), MAX_RESTART_DELAY);
        assert_eq!(restart_delay(u32::MAX), MAX_RESTART_DELAY);
    }

    #[test]
    fn sources_name_their_cluster() {
        assert_eq!(Source::Federated("configmaps".into()).cluster(), "host");
        assert_eq!(
            Source::Member("m1".into(), "configmaps".into()).cluster(),
            "m1"
        );
    }
}
