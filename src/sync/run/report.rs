//! What a live reconcile did (or, dry, would do): per-member counts, its
//! changes and failures as data (`core::outcome`), and the lines worth
//! knowing. Printed by `kubefedctl reconcile` as a table, markdown or
//! JSON/YAML.

use crate::core::outcome::{Change, Failure};
use crate::core::propagation::rollout::RolloutStand;
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;

/// Per-member counts, for the summary.
#[derive(Serialize, Debug, Default, Clone, PartialEq, Eq)]
pub struct ClusterReport {
    pub ready: bool,
    pub created: usize,
    pub updated: usize,
    pub deleted: usize,
    pub unchanged: usize,
    pub failed: usize,
}

/// What a run did (or, dry, would do).
#[derive(Serialize, Debug, Default)]
pub struct Report {
    /// `--shard I/N` of this run, if sharded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    pub clusters: BTreeMap<String, ClusterReport>,
    /// Every failure (JSON: one line each, `cluster: Kind ns/name: why`).
    #[serde(serialize_with = "lines")]
    pub failures: Vec<Failure>,
    /// Dry run: the pending changes, host and members, in the order they
    /// were planned, member changes with their diffs (JSON: `plan`, one
    /// line each).
    #[serde(rename = "plan", serialize_with = "lines")]
    pub changes: Vec<Change>,
    /// Writes to the host (status, versions, finalizers, RSP results).
    pub host_writes: usize,
    /// Kubernetes Events written to the host (created or bumped).
    #[serde(skip_serializing_if = "is_zero")]
    pub events: usize,
    /// Deletions that wait for member copies still terminating: the
    /// federated object keeps its finalizer until they are gone
    /// (`--wait`, or the next run, completes them).
    pub pending: Vec<String>,
    /// Things worth knowing that are not failures.
    pub warnings: Vec<String>,
    /// Informational lines.
    pub notes: Vec<String>,
    /// The member objects this run placed (`--wait-ready`).
    #[serde(skip)]
    pub placed: Vec<PlacedObject>,
    /// Objects rolled out wave by wave (`live::rollout`), as they stand.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rollouts: Vec<RolloutLine>,
    /// Report-only objects' copies that differ from what a run would
    /// write (`core::propagation::drift`); nothing was written to them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<DriftLine>,
}

/// How one member's copy of a report-only object differs.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct DriftLine {
    pub cluster: String,
    /// `ConfigMap shop/web`.
    pub object: String,
    /// `missing`, `not placed...`, or `fields`.
    pub state: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<crate::core::propagation::drift::FieldDrift>,
}

impl DriftLine {
    /// The line: `member1: ConfigMap shop/web: /data/k: "x" here, "y" wanted`.
    pub fn line(&self) -> String {
        if self.fields.is_empty() {
            return format!("{}: {}: {}", self.cluster, self.object, self.state);
        }
        let fields: Vec<String> = self.fields.iter().map(field_text).collect();
        format!("{}: {}: {}", self.cluster, self.object, fields.join("; "))
    }
}

/// `/data/k: member "x", desired "y"` (a Secret's: the path only).
pub fn field_text(f: &crate::core::propagation::drift::FieldDrift) -> String {
    if f.hidden {
        return format!("{} (a Secret's value, hidden)", f.path);
    }
    let value = |v: &Option<serde_json::Value>| match v {
        Some(v) => serde_json::to_string(v).unwrap_or_default(),
        None => "(absent)".to_string(),
    };
    format!(
        "{}: member {}, desired {}",
        f.path,
        value(&f.member),
        value(&f.desired)
    )
}

/// Where one federated object's progressive rollout stands after a run.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct RolloutLine {
    /// `FederatedConfigMap shop/web`.
    pub object: String,
    /// The object as the watch's queue names it.
    #[serde(skip)]
    pub key: crate::core::describe::FederatedRef,
    pub state: RolloutStand,
    /// `wave 1: m1 (0/1 available)`, or the halt, or `complete`.
    pub detail: String,
    /// Members given the new version by this run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub wrote: Vec<String>,
    /// The waves as lines of text (`core::propagation::rollout::waves_text`).
    #[serde(skip)]
    pub waves_text: String,
    /// The waves as a markdown table, for `-o markdown`.
    #[serde(skip)]
    pub waves_markdown: String,
    /// When to look again (seconds since the epoch), when a time moves it on.
    #[serde(skip)]
    pub recheck_at: Option<i64>,
}

impl RolloutLine {
    /// `rollout of FederatedConfigMap shop/web: wave 1: ...`.
    pub fn line(&self) -> String {
        format!("rollout of {}: {}", self.object, self.detail)
    }

    /// What `kubefedctl rollout approve` takes for its object:
    /// `configmaps/web -n shop` (its FederatedTypeConfig's name).
    pub fn approve_args(&self) -> String {
        let k = &self.key.key;
        match k.namespace.is_empty() {
            true => format!("{}/{}", self.key.type_name, k.name),
            false => format!("{}/{} -n {}", self.key.type_name, k.name, k.namespace),
        }
    }
}

/// A member object a run placed (created, updated or found as wanted),
/// for `--wait-ready`.
#[derive(Clone, Debug)]
pub struct PlacedObject {
    pub cluster: String,
    pub target: kube::api::ApiResource,
    pub key: crate::core::describe::ObjectKey,
    /// Created or updated by this run (not merely found as wanted).
    pub written: bool,
    /// The federated object it is a copy of (its `Ready` condition).
    pub owner: std::sync::Arc<PlacedOwner>,
}

/// The federated object behind placed member objects, as `--wait-ready`
/// records its `Ready` condition.
#[derive(Debug)]
pub struct PlacedOwner {
    pub federated: kube::api::ApiResource,
    pub key: crate::core::describe::ObjectKey,
    /// Every placed member holds (or was sent) a copy.
    pub complete: bool,
    /// Every placed member was decided by this run (not so with
    /// `--cluster`): only then is its readiness known.
    pub judged: bool,
}

impl Report {
    pub fn pending_changes(&self) -> usize {
        self.clusters
            .values()
            .map(|c| c.created + c.updated + c.deleted)
            .sum()
    }

    /// A later round's placed member objects (`--wait-ready`) merged into
    /// this run's: each copy once, written when any round wrote it (a
    /// one-shot run's rounds while a rollout waits place the same copies).
    pub fn placed_once(&mut self, later: &mut Report) {
        let id = |p: &PlacedObject| (p.cluster.clone(), p.target.plural.clone(), p.key.clone());
        let mut at: std::collections::HashMap<_, usize> = (self.placed.iter().enumerate())
            .map(|(i, p)| (id(p), i))
            .collect();
        for p in later.placed.drain(..) {
            match at.get(&id(&p)) {
                Some(&i) => {
                    let written = self.placed[i].written || p.written;
                    self.placed[i] = PlacedObject { written, ..p };
                }
                None => {
                    at.insert(id(&p), self.placed.len());
                    self.placed.push(p);
                }
            }
        }
    }

    /// A later round's report added to this one, as one run's: counts
    /// summed, lines kept once.
    pub fn absorb(&mut self, later: Report) {
        for (cluster, c) in later.clusters {
            let mine = self.cluster(&cluster);
            mine.ready = c.ready;
            mine.created += c.created;
            mine.updated += c.updated;
            mine.deleted += c.deleted;
            mine.unchanged += c.unchanged;
            mine.failed += c.failed;
        }
        self.failures.extend(later.failures);
        self.changes.extend(later.changes);
        self.host_writes += later.host_writes;
        self.events += later.events;
        self.pending.extend(later.pending);
        for line in later.warnings {
            if !self.warnings.contains(&line) {
                self.warnings.push(line);
            }
        }
        for line in later.notes {
            if !self.notes.contains(&line) {
                self.notes.push(line);
            }
        }
        self.placed.extend(later.placed);
        for d in later.drift {
            if !self.drift.contains(&d) {
                self.drift.push(d);
            }
        }
        for r in later.rollouts {
            match self
                .rollouts
                .iter_mut()
                .find(|mine| mine.object == r.object)
            {
                Some(mine) => {
                    let mut wrote = std::mem::take(&mut mine.wrote);
                    wrote.extend(r.wrote.iter().cloned());
                    *mine = RolloutLine { wrote, ..r };
                }
                None => self.rollouts.push(r),
            }
        }
    }

    /// Whether some rollout waits for its members (the run goes on).
    pub fn rollouts_waiting(&self) -> bool {
        (self.rollouts.iter()).any(|r| r.state == RolloutStand::Waiting)
    }

    /// The counts of `cluster` (every touched member has an entry).
    pub fn cluster(&mut self, cluster: &str) -> &mut ClusterReport {
        self.clusters.entry(cluster.to_string()).or_default()
    }
}

/// A list of changes or failures as the lines they read as.
fn lines<S: Serializer, T: std::fmt::Display>(items: &[T], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(items.iter().map(ToString::to_string))
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
