//! The watches of `reconcile --watch`: one kube-runtime watcher per source
//! (a host resource, a federated type, a member's managed objects of a
//! type), each a task that turns the watcher's events into [`Event`]s on one
//! channel. A (re)list arrives whole, as [`Change::Replaced`], so the cache
//! never holds a half-listed source.

use crate::apply::api_error_line;
use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use serde_json::Value;
use std::collections::BTreeMap;
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
        }
    }
}

/// A change a watch saw.
#[derive(Debug)]
pub enum Change {
    Applied(Value),
    Deleted(Value),
    /// A complete (re)list: what the source holds now.
    Replaced(Vec<Value>),
    /// The watch failed (it retries with backoff); `not_served`: a 404.
    Failed {
        not_served: bool,
        message: String,
    },
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
}

/// The running watches.
pub struct Sources {
    tx: UnboundedSender<Event>,
    running: BTreeMap<Source, (String, JoinHandle<()>)>,
}

impl Sources {
    pub fn new(tx: UnboundedSender<Event>) -> Sources {
        Sources {
            tx,
            running: BTreeMap::new(),
        }
    }

    /// Runs exactly `wanted`: stops the others, starts the missing ones and
    /// restarts those whose fingerprint changed. Returns the started ones.
    pub fn sync(&mut self, wanted: BTreeMap<Source, Spec>) -> Vec<Source> {
        self.running.retain(|source, (fingerprint, task)| {
            let keep = wanted
                .get(source)
                .is_some_and(|w| &w.fingerprint == fingerprint);
            if !keep {
                task.abort();
            }
            keep
        });
        let mut started = Vec::new();
        for (source, spec) in wanted {
            if self.running.contains_key(&source) {
                continue;
            }
            let fingerprint = spec.fingerprint.clone();
            let task = tokio::spawn(run(source.clone(), spec, self.tx.clone()));
            self.running.insert(source.clone(), (fingerprint, task));
            started.push(source);
        }
        started
    }

    /// Restarts the watches `which` selects (a member back from an outage
    /// lists again at once, not after the watcher's backoff).
    pub fn restart(&mut self, which: impl Fn(&Source) -> bool) -> Vec<Source> {
        let stale: Vec<Source> = self.running.keys().filter(|s| which(s)).cloned().collect();
        for s in &stale {
            if let Some((_, task)) = self.running.remove(s) {
                task.abort();
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
        for (_, task) in self.running.values() {
            task.abort();
        }
    }
}

/// One watch, until aborted.
async fn run(source: Source, spec: Spec, tx: UnboundedSender<Event>) {
    let mut stream = watcher(spec.api, spec.config).default_backoff().boxed();
    let mut listing: Vec<Value> = Vec::new();
    let typed = |mut o: DynamicObject| {
        // The API server keeps managedFields itself (an update without them
        // leaves them as they are) and no decision reads them: not holding
        // them is most of a Deployment's size in the cache.
        o.metadata.managed_fields = None;
        let mut v = serde_json::to_value(o).unwrap_or_default();
        if v.get("apiVersion").is_none() {
            v["apiVersion"] = Value::String(spec.api_version.clone());
        }
        if v.get("kind").is_none() {
            v["kind"] = Value::String(spec.kind.clone());
        }
        v
    };
    while let Some(item) = stream.next().await {
        let change = match item {
            Ok(watcher::Event::Init) => {
                listing.clear();
                continue;
            }
            Ok(watcher::Event::InitApply(o)) => {
                listing.push(typed(o));
                continue;
            }
            Ok(watcher::Event::InitDone) => Change::Replaced(std::mem::take(&mut listing)),
            Ok(watcher::Event::Apply(o)) => Change::Applied(typed(o)),
            Ok(watcher::Event::Delete(o)) => Change::Deleted(typed(o)),
            Err(e) => failed(e),
        };
        let event = Event {
            source: source.clone(),
            change,
        };
        if tx.send(event).is_err() {
            return;
        }
    }
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
