//! The status KubeFed's sync controller writes on a federated object
//! (upstream `pkg/controller/sync/status/status.go`): the Propagation
//! condition and the per-cluster entries.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::propagation::action::{ClusterStatus, Decision};
use crate::propagation::federated::FederatedObject;
use crate::propagation::readiness::Readiness;
use crate::propagation::version::floats_only;

/// The condition KubeFed's sync controller writes.
pub const PROPAGATION: &str = "Propagation";
/// The condition `reconcile --wait-ready` adds: whether every placed
/// member's copy is ready. Not KubeFed's (see [`ReadyState`]).
pub const READY: &str = "Ready";

/// Aggregate reason of the Propagation condition (`""` = success).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggregateReason {
    Success,
    CheckClusters,
    ClusterRetrievalFailed,
    ComputePlacementFailed,
    NamespaceNotFederated,
}

impl AggregateReason {
    pub fn as_str(self) -> &'static str {
        match self {
            AggregateReason::Success => "",
            AggregateReason::CheckClusters => "CheckClusters",
            AggregateReason::ClusterRetrievalFailed => "ClusterRetrievalFailed",
            AggregateReason::ComputePlacementFailed => "ComputePlacementFailed",
            AggregateReason::NamespaceNotFederated => "NamespaceNotFederated",
        }
    }
}

/// What happened in one cluster this pass, for the status.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterOutcome {
    pub cluster: String,
    pub status: ClusterStatus,
    /// Member `.status` when remote status collection is on.
    pub remote_status: Option<Value>,
}

/// The federated object's new `status` and whether it must be written.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusUpdate {
    pub status: Value,
    pub changed: bool,
}

/// Upstream's status update (`pkg/controller/sync/status/status.go`): `observedGeneration`, the Propagation
/// condition (`CheckClusters` when a cluster is not OK, or lacks a remote
/// status while `remote_status_collection`), `clusters[]` sorted by name.
/// Empty fields are omitted as Go's `omitempty` does. `now` is an RFC 3339
/// timestamp from the caller (the core has no clock). `resources_updated`:
/// a create/update succeeded in this pass (upstream counts it only with
/// remote status; it also turns a `Ready` condition to `Unknown`, as a new
/// generation does: see [`ReadyState`]).
pub fn federated_status(
    fed: &Value,
    reason: AggregateReason,
    outcomes: &[ClusterOutcome],
    remote_status_collection: bool,
    resources_updated: bool,
    now: &str,
) -> StatusUpdate {
    let fed = FederatedObject::new(fed);
    let old = fed.status().cloned().unwrap_or(json!({}));
    let generation = fed.generation();
    let generation_updated = old
        .get("observedGeneration")
        .and_then(Value::as_i64)
        .unwrap_or(0)
        != generation;

    let reason = aggregate_reason(reason, outcomes, remote_status_collection);

    let clusters = cluster_entries(outcomes, remote_status_collection);
    let old_clusters = old
        .get("clusters")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let clusters_changed = clusters_differ(&old_clusters, &clusters);
    let remote_collected =
        remote_status_collection && outcomes.iter().any(|o| o.remote_status.is_some());
    let changes_propagated =
        clusters_changed || (!outcomes.is_empty() && remote_collected && resources_updated);

    let (mut conditions, update_required) =
        propagation_conditions(&old, reason, changes_propagated, now);
    // Not upstream's: a `Ready` condition that `--wait-ready` wrote says
    // nothing of copies changed since, or of a newer generation.
    let ready_stale = (generation_updated || resources_updated)
        && set_condition(&mut conditions, READY, "Unknown", NOT_CHECKED, now);

    let final_clusters = if clusters_changed {
        clusters
    } else {
        old_clusters
    };
    StatusUpdate {
        status: status_value(generation, conditions, final_clusters),
        changed: generation_updated || update_required || ready_stale,
    }
}

/// `CheckClusters` instead of success when a cluster is not OK or lacks its remote status.
fn aggregate_reason(
    reason: AggregateReason,
    outcomes: &[ClusterOutcome],
    remote_status_collection: bool,
) -> AggregateReason {
    if reason == AggregateReason::Success
        && outcomes.iter().any(|o| {
            o.status != ClusterStatus::Ok || (remote_status_collection && o.remote_status.is_none())
        })
    {
        return AggregateReason::CheckClusters;
    }
    reason
}

/// The `clusters[]` entries of this pass: one per cluster, sorted by name, empty fields omitted.
fn cluster_entries(outcomes: &[ClusterOutcome], remote_status_collection: bool) -> Vec<Value> {
    let mut sorted: Vec<&ClusterOutcome> = outcomes.iter().collect();
    sorted.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    sorted.dedup_by(|a, b| a.cluster == b.cluster);
    sorted
        .iter()
        .map(|o| {
            let mut entry = json!({"name": o.cluster});
            if o.status != ClusterStatus::Ok {
                entry["status"] = json!(o.status.as_str());
            }
            if remote_status_collection
                && let Some(rs) = o.remote_status.as_ref().filter(|r| !r.is_null())
            {
                entry["remoteStatus"] = rs.clone();
            }
            entry
        })
        .collect()
}

/// Whether `clusters[]` changed, as upstream's DeepEqual would judge it.
fn clusters_differ(old: &[Value], new: &[Value]) -> bool {
    // Compared as sets, numbers as float64 (upstream round-trips remote
    // statuses through JSON before its DeepEqual).
    let as_set = |list: &[Value]| -> BTreeMap<String, Value> {
        list.iter()
            .map(|e| {
                let name = e.get("name").and_then(Value::as_str).unwrap_or("");
                (name.to_string(), floats_only(e))
            })
            .collect()
    };
    as_set(old) != as_set(new)
}

/// The conditions with Propagation brought up to date, and whether an update is required.
fn propagation_conditions(
    old: &Value,
    reason: AggregateReason,
    changes_propagated: bool,
    now: &str,
) -> (Vec<Value>, bool) {
    let new_status = if reason == AggregateReason::Success {
        "True"
    } else {
        "False"
    };
    let mut conditions = old
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let position = conditions
        .iter()
        .position(|c| c.get("type").and_then(Value::as_str) == Some(PROPAGATION));
    let old_cond = position.map(|i| conditions[i].clone());
    let old_get = |k: &str| condition_field(old_cond.as_ref(), k);
    let transition = old_cond.is_none()
        || old_get("status") != new_status
        || old_get("reason") != reason.as_str();
    let update_required = changes_propagated || transition;
    let cond = propagation_condition(
        old_cond.as_ref(),
        new_status,
        reason,
        transition,
        update_required,
        now,
    );
    match position {
        Some(i) => conditions[i] = cond,
        None => conditions.push(cond),
    }
    (conditions, update_required)
}

/// A string field of the old Propagation condition (`""` when absent), as Go reads a zero value.
fn condition_field(cond: Option<&Value>, k: &str) -> String {
    cond.and_then(|c| c.get(k))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// The new Propagation condition: status and times kept from `old_cond` unless they moved.
fn propagation_condition(
    old_cond: Option<&Value>,
    new_status: &str,
    reason: AggregateReason,
    transition: bool,
    update_required: bool,
    now: &str,
) -> Value {
    let old_get = |k: &str| condition_field(old_cond, k);
    let mut cond = serde_json::Map::new();
    cond.insert("type".into(), json!(PROPAGATION));
    cond.insert(
        "status".into(),
        json!(if transition {
            new_status.to_string()
        } else {
            old_get("status")
        }),
    );
    let times = [
        ("lastUpdateTime", update_required),
        ("lastTransitionTime", transition),
    ];
    for (key, bump) in times {
        let value = if bump { now.to_string() } else { old_get(key) };
        if !value.is_empty() {
            cond.insert(key.into(), json!(value));
        }
    }
    if !reason.as_str().is_empty() {
        cond.insert("reason".into(), json!(reason.as_str()));
    }
    Value::Object(cond)
}

/// What `reconcile --wait-ready` found of a federated object's member
/// copies, as its `Ready` condition says it (`status`, `reason`).
///
/// KubeFed v0.10 writes no such condition (upstream
/// `pkg/controller/sync/status/status.go` knows only `Propagation`): it is
/// ours, written only when `--wait-ready` asks for it, for kstatus, Flux
/// and Argo CD, which read `Ready`. It fits KubeFed's federated CRDs (a
/// condition's `type` is any string there) and has no `message`, which
/// their schema would prune; KubeFed's controller keeps it as it is
/// (docs/kubefed-differences.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadyState {
    /// Every placed member holds a ready copy.
    Ready,
    /// Some copy is not ready yet, or is missing.
    NotReady,
    /// Some copy will not become ready by waiting (a failed Job, a
    /// Deployment past its progress deadline, Pods PodSecurity refuses).
    Failed,
}

/// `Ready: Unknown`'s reason: copies changed since readiness was checked.
pub const NOT_CHECKED: &str = "NotChecked";

impl ReadyState {
    /// The condition's `status` and `reason`.
    pub fn condition(self) -> (&'static str, &'static str) {
        match self {
            ReadyState::Ready => ("True", "MembersReady"),
            ReadyState::NotReady => ("False", "MembersNotReady"),
            ReadyState::Failed => ("False", "MembersFailed"),
        }
    }
}

/// One federated object's readiness from its placed copies' (`complete`:
/// every placed member holds a copy): failed over not ready over ready.
pub fn federated_readiness<'a>(
    copies: impl IntoIterator<Item = &'a Readiness>,
    complete: bool,
) -> ReadyState {
    let mut state = if complete {
        ReadyState::Ready
    } else {
        ReadyState::NotReady
    };
    for r in copies {
        match r {
            Readiness::Failed(_) => return ReadyState::Failed,
            Readiness::Pending(_) => state = ReadyState::NotReady,
            Readiness::Ready => {}
        }
    }
    state
}

/// `status` with its `Ready` condition set to `state`; `None` when it
/// already says so (its times then stay, so a run that finds nothing new
/// writes nothing).
pub fn with_ready(status: &Value, state: ReadyState, now: &str) -> Option<Value> {
    let mut conditions = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let (value, reason) = state.condition();
    if !set_or_add_condition(&mut conditions, READY, value, reason, now) {
        return None;
    }
    let mut status = match status {
        Value::Object(_) => status.clone(),
        _ => json!({}),
    };
    status["conditions"] = Value::Array(conditions);
    Some(status)
}

/// Sets an existing condition `kind` to `value`/`reason`, both times
/// bumped; `false` when absent or already so.
fn set_condition(
    conditions: &mut [Value],
    kind: &str,
    value: &str,
    reason: &str,
    now: &str,
) -> bool {
    let Some(c) = conditions.iter_mut().find(|c| c["type"] == kind) else {
        return false;
    };
    if c["status"] == value && c["reason"] == reason {
        return false;
    }
    *c = json!({"type": kind, "status": value, "reason": reason,
                "lastUpdateTime": now, "lastTransitionTime": now});
    true
}

/// [`set_condition`], adding the condition when absent.
fn set_or_add_condition(
    conditions: &mut Vec<Value>,
    kind: &str,
    value: &str,
    reason: &str,
    now: &str,
) -> bool {
    if !conditions.iter().any(|c| c["type"] == kind) {
        conditions.push(json!({"type": kind, "status": value, "reason": reason,
                               "lastUpdateTime": now, "lastTransitionTime": now}));
        return true;
    }
    set_condition(conditions, kind, value, reason, now)
}

/// The federated object's new `status`, fields omitted when empty as Go's `omitempty` does.
fn status_value(generation: i64, conditions: Vec<Value>, clusters: Vec<Value>) -> Value {
    let mut status = serde_json::Map::new();
    if generation != 0 {
        status.insert("observedGeneration".into(), json!(generation));
    }
    status.insert("conditions".into(), Value::Array(conditions));
    if !clusters.is_empty() {
        status.insert("clusters".into(), Value::Array(clusters));
    }
    Value::Object(status)
}

/// Cluster outcomes from decisions whose actions all succeeded (the
/// engine replaces statuses of failed requests with `failure_status`).
pub fn outcomes_on_success(decisions: &[Decision]) -> Vec<ClusterOutcome> {
    decisions
        .iter()
        .filter_map(|d| {
            d.status.map(|status| ClusterOutcome {
                cluster: d.cluster.clone(),
                status,
                remote_status: None,
            })
        })
        .collect()
}
