//! What a live reconcile did (or, dry, would do): per-member counts and
//! the lines the user reads. Printed by `kubefedctl reconcile` as a table
//! or as JSON/YAML.

use serde::Serialize;
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
    /// `cluster: kind ns/name: message` for every failure.
    pub failures: Vec<String>,
    /// Dry run: one line per pending member change.
    pub plan: Vec<String>,
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
    #[serde(skip)]
    pub diffs: Vec<String>,
    /// Dry run: the pending member changes, one each (what `plan` says
    /// as lines), for `-o markdown`.
    #[serde(skip)]
    pub changes: Vec<PlannedChange>,
    /// The member objects this run placed (`--wait-ready`).
    #[serde(skip)]
    pub placed: Vec<PlacedObject>,
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
}

/// One member change a dry run would make.
#[derive(Clone, Debug, Default)]
pub struct PlannedChange {
    pub cluster: String,
    /// `create`, `update`, `delete`, `unlabel`.
    pub verb: String,
    /// `ConfigMap shop/web`.
    pub object: String,
    /// A unified diff (updates), Secret values masked.
    pub diff: Option<String>,
}

impl Report {
    pub fn pending_changes(&self) -> usize {
        self.clusters
            .values()
            .map(|c| c.created + c.updated + c.deleted)
            .sum()
    }

    /// The counts of `cluster` (every touched member has an entry).
    pub fn cluster(&mut self, cluster: &str) -> &mut ClusterReport {
        self.clusters.entry(cluster.to_string()).or_default()
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
