//! What to do in each member cluster for one federated object, and the
//! status KubeFed's sync controller would write for it (upstream
//! `pkg/controller/sync/controller.go`, `dispatch/managed.go`,
//! `status/status.go`).
//!
//! The decisions mirror upstream's rules, including the surprising ones:
//! unmanaged objects outside the placement are never touched, spec drift
//! is noticed only through generation/resourceVersion, an unready cluster
//! is left alone, and deletion waits for every placed cluster.

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use std::sync::Arc;

use super::desired::{
    DesiredError, DesiredObjects, MANAGED_LABEL, TargetType, desired_for_cluster,
};
use super::version::{floats_only, member_version, recorded_version};

/// Annotation on a federated object asking deletion to keep member objects.
pub const ORPHAN_ANNOTATION: &str = "kubefed.io/orphan";
/// Annotation with the DeleteOptions used for member deletes.
pub const DELETE_OPTION_ANNOTATION: &str = "kubefed.io/deleteoption";
/// Finalizer the sync controller keeps on federated objects.
pub const SYNC_FINALIZER: &str = "kubefed.io/sync-controller";

/// Per-cluster propagation status (upstream `pkg/controller/sync/status`);
/// `Ok` is written as "no status".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClusterStatus {
    Ok,
    ClusterNotReady,
    CachedRetrievalFailed,
    ComputeResourceFailed,
    ApplyOverridesFailed,
    CreationFailed,
    UpdateFailed,
    DeletionFailed,
    LabelRemovalFailed,
    RetrievalFailed,
    AlreadyExists,
    FieldRetentionFailed,
    VersionRetrievalFailed,
    ClientRetrievalFailed,
    ManagedLabelFalse,
    WaitingForRemoval,
    CreationTimedOut,
    UpdateTimedOut,
    DeletionTimedOut,
    LabelRemovalTimedOut,
}

impl ClusterStatus {
    /// The string upstream writes (`""` for OK).
    pub fn as_str(self) -> &'static str {
        use ClusterStatus::*;
        match self {
            Ok => "",
            ClusterNotReady => "ClusterNotReady",
            CachedRetrievalFailed => "CachedRetrievalFailed",
            ComputeResourceFailed => "ComputeResourceFailed",
            ApplyOverridesFailed => "ApplyOverridesFailed",
            CreationFailed => "CreationFailed",
            UpdateFailed => "UpdateFailed",
            DeletionFailed => "DeletionFailed",
            LabelRemovalFailed => "LabelRemovalFailed",
            RetrievalFailed => "RetrievalFailed",
            AlreadyExists => "AlreadyExists",
            FieldRetentionFailed => "FieldRetentionFailed",
            VersionRetrievalFailed => "VersionRetrievalFailed",
            ClientRetrievalFailed => "ClientRetrievalFailed",
            ManagedLabelFalse => "ManagedLabelFalse",
            WaitingForRemoval => "WaitingForRemoval",
            CreationTimedOut => "CreationTimedOut",
            UpdateTimedOut => "UpdateTimedOut",
            DeletionTimedOut => "DeletionTimedOut",
            LabelRemovalTimedOut => "LabelRemovalTimedOut",
        }
    }

    /// The status for a string upstream writes (`""` → `Ok`).
    pub fn parse(text: &str) -> Option<ClusterStatus> {
        use ClusterStatus::*;
        [
            Ok,
            ClusterNotReady,
            CachedRetrievalFailed,
            ComputeResourceFailed,
            ApplyOverridesFailed,
            CreationFailed,
            UpdateFailed,
            DeletionFailed,
            LabelRemovalFailed,
            RetrievalFailed,
            AlreadyExists,
            FieldRetentionFailed,
            VersionRetrievalFailed,
            ClientRetrievalFailed,
            ManagedLabelFalse,
            WaitingForRemoval,
            CreationTimedOut,
            UpdateTimedOut,
            DeletionTimedOut,
            LabelRemovalTimedOut,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }

    /// Statuses upstream retries with backoff.
    pub fn is_recoverable(self) -> bool {
        use ClusterStatus::*;
        matches!(
            self,
            CreationFailed
                | UpdateFailed
                | DeletionFailed
                | LabelRemovalFailed
                | RetrievalFailed
                | ClientRetrievalFailed
                | CreationTimedOut
                | UpdateTimedOut
                | DeletionTimedOut
                | LabelRemovalTimedOut
        )
    }

    fn from_desired_error(e: &DesiredError) -> ClusterStatus {
        match e.status() {
            "ComputeResourceFailed" => ClusterStatus::ComputeResourceFailed,
            "FieldRetentionFailed" => ClusterStatus::FieldRetentionFailed,
            _ => ClusterStatus::ApplyOverridesFailed,
        }
    }
}

/// What the engine should do in one cluster.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// POST this object (clusters without overrides share one).
    Create(Arc<Value>),
    /// PUT this object (it carries the live resourceVersion); `adopt` when
    /// the live object was not yet labelled managed.
    Update { object: Value, adopt: bool },
    /// DELETE the member object, with these DeleteOptions (JSON) if any.
    Delete { options: Option<Value> },
    /// Merge-patch away the `kubefed.io/managed` label (orphaning, host
    /// namespace, objects whose federated object is gone).
    RemoveManagedLabel,
    /// Deletion of the federated object: the member copy is already
    /// terminating. No request; the deletion completes when it is gone
    /// (`--wait` polls for that).
    AwaitRemoval,
    /// Already as desired: no request.
    Unchanged,
    /// Nothing to do and nothing to record (e.g. unplaced, absent).
    Nothing,
    /// No request, with the status in the decision (not ready, not
    /// adoptable, desired object not computable, ...).
    Skip,
}

impl Action {
    /// The action as one word, as plans and tables print it: `create`,
    /// `update`, `delete`, `unlabel`, `await`, `unchanged`, `nothing`,
    /// `skip`.
    pub fn verb(&self) -> &'static str {
        match self {
            Action::Create(_) => "create",
            Action::Update { .. } => "update",
            Action::Delete { .. } => "delete",
            Action::RemoveManagedLabel => "unlabel",
            Action::AwaitRemoval => "await",
            Action::Unchanged => "unchanged",
            Action::Nothing => "nothing",
            Action::Skip => "skip",
        }
    }

    /// Status upstream records when this action's request fails.
    pub fn failure_status(&self) -> Option<ClusterStatus> {
        match self {
            Action::Create(_) => Some(ClusterStatus::CreationFailed),
            Action::Update { .. } => Some(ClusterStatus::UpdateFailed),
            Action::Delete { .. } => Some(ClusterStatus::DeletionFailed),
            Action::RemoveManagedLabel => Some(ClusterStatus::LabelRemovalFailed),
            _ => None,
        }
    }
}

/// One cluster's decision. `status` is what upstream records when the
/// action succeeds (`None` = no `status.clusters` entry).
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub cluster: String,
    pub action: Action,
    pub status: Option<ClusterStatus>,
    /// Why, for `Skip` with an error (names object, cluster, path).
    pub message: Option<String>,
}

/// A member cluster's view for one federated object.
#[derive(Clone, Debug)]
pub struct MemberState<'a> {
    pub cluster: &'a str,
    pub ready: bool,
    /// The member object with the target's name, labelled or not (`None`
    /// when absent). Upstream only *sees* labelled ones; unlabelled ones
    /// are found when a create hits AlreadyExists.
    pub live: Option<&'a Value>,
    /// Ready, but this type's objects could not be observed there (the
    /// member does not serve the type, or its list failed): why.
    pub unobserved: Option<&'a str>,
    /// Namespace type only: `live` is the host cluster's own namespace
    /// (same UID), which is never deleted, only unlabelled.
    pub is_host_namespace: bool,
}

/// Settings of the control plane that change decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncSettings {
    /// `KubeFedConfig.spec.syncController.adoptResources == Enabled`.
    pub adopt_resources: bool,
}

/// How a member object is labelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ManagedLabel {
    True,
    False,
    Absent,
}

/// `kubefed.io/managed` of a member object (`"true"` / `"false"` / other).
pub fn managed_label(obj: &Value) -> ManagedLabel {
    match obj
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(|l| l.get(MANAGED_LABEL))
        .and_then(Value::as_str)
    {
        Some("true") => ManagedLabel::True,
        Some("false") => ManagedLabel::False,
        _ => ManagedLabel::Absent,
    }
}

fn terminating(obj: &Value) -> bool {
    obj.get("metadata")
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|t| !t.is_null())
}

/// Decisions for a federated object that is *not* being deleted
/// (upstream `syncToClusters` in `pkg/controller/sync/controller.go`).
/// `selected` is the computed placement; `versions` is the
/// PropagatedVersion's `status` (if any).
pub fn sync_decisions(
    fed: &Value,
    target: &TargetType,
    selected: &BTreeSet<String>,
    members: &[MemberState],
    versions: Option<&Value>,
    settings: SyncSettings,
) -> Vec<Decision> {
    let sync = SyncInputs::new(fed, target, versions, settings);
    members
        .iter()
        .map(|m| sync.decide(m, selected.contains(m.cluster)))
        .collect()
}

/// What every member's sync decision shares, so the object is hashed and rendered once.
struct SyncInputs<'a> {
    fed: &'a Value,
    target: &'a TargetType,
    versions: Option<&'a Value>,
    settings: SyncSettings,
    // Hashed and rendered only when needed: an offline render has no live
    // objects, and most clusters share one desired object.
    hashes: OnceCell<(String, String)>,
    desired_objects: OnceCell<Result<DesiredObjects, DesiredError>>,
}

impl<'a> SyncInputs<'a> {
    /// The inputs, with nothing hashed or rendered yet.
    fn new(
        fed: &'a Value,
        target: &'a TargetType,
        versions: Option<&'a Value>,
        settings: SyncSettings,
    ) -> SyncInputs<'a> {
        SyncInputs {
            fed,
            target,
            versions,
            settings,
            hashes: OnceCell::new(),
            desired_objects: OnceCell::new(),
        }
    }

    /// The template and overrides versions, hashed on first use only.
    fn hashes(&self) -> &(String, String) {
        self.hashes.get_or_init(|| {
            (
                super::version::template_version(self.fed).unwrap_or_default(),
                super::version::overrides_version(self.fed).unwrap_or_default(),
            )
        })
    }

    /// The desired objects of every cluster, rendered on first use only.
    fn desired_objects(&self) -> &Result<DesiredObjects, DesiredError> {
        self.desired_objects
            .get_or_init(|| DesiredObjects::new(self.fed, self.target))
    }

    /// One member's decision: the steps of upstream's per-cluster sync, in order.
    fn decide(&self, m: &MemberState, is_selected: bool) -> Decision {
        if let Some(d) = unreachable_decision(m, is_selected) {
            return d;
        }
        // Upstream's cache only holds labelled objects (label "true").
        let managed = m.live.filter(|o| managed_label(o) == ManagedLabel::True);
        if !is_selected {
            return unplaced_decision(m, managed);
        }
        let Some(live) = m.live else {
            return self.create_decision(m);
        };
        let adopt = managed.is_none();
        if let Some(d) = self.unmanageable_decision(m, live, adopt) {
            return d;
        }
        self.update_decision(m, live, adopt)
    }

    /// A placed member without the object: create it, unless its desired object cannot be computed.
    fn create_decision(&self, m: &MemberState) -> Decision {
        let created = self
            .desired_objects()
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|d| d.for_cluster_shared(m.cluster));
        match created {
            Ok(obj) => decision(m, Action::Create(obj), Some(ClusterStatus::Ok), None),
            Err(e) => decision(
                m,
                Action::Skip,
                Some(ClusterStatus::from_desired_error(&e)),
                Some(e.to_string()),
            ),
        }
    }

    /// A live copy the federation may not take over (adoption off, or labelled managed "false").
    fn unmanageable_decision(
        &self,
        m: &MemberState,
        live: &Value,
        adopt: bool,
    ) -> Option<Decision> {
        if adopt && !self.settings.adopt_resources && !m.is_host_namespace {
            return Some(decision(
                m,
                Action::Skip,
                Some(ClusterStatus::AlreadyExists),
                Some(format!(
                    "Failed to create {} {:?} in cluster {:?}: Resource pre-exist in cluster",
                    self.target.kind,
                    super::describe::qualified(self.fed),
                    m.cluster
                )),
            ));
        }
        if managed_label(live) == ManagedLabel::False {
            return Some(decision(
                m,
                Action::Skip,
                Some(ClusterStatus::ManagedLabelFalse),
                Some(
                    "Unable to manage the object which has label kubefed.io/managed: false".into(),
                ),
            ));
        }
        None
    }

    /// A manageable live copy: update it when its version or metadata drifted, else unchanged.
    fn update_decision(&self, m: &MemberState, live: &Value, adopt: bool) -> Decision {
        let desired = match desired_for_cluster(self.fed, self.target, m.cluster, Some(live)) {
            Ok(d) => d,
            Err(e) => {
                return decision(
                    m,
                    Action::Skip,
                    Some(ClusterStatus::from_desired_error(&e)),
                    Some(e.to_string()),
                );
            }
        };
        let (template_version, overrides_version) = self.hashes();
        let recorded = recorded_version(
            self.versions,
            template_version,
            overrides_version,
            m.cluster,
        );
        let current = member_version(live);
        let needs_update = recorded.as_deref() != Some(current.as_str())
            || (current.starts_with("gen:") && !metadata_equivalent(&desired, live));
        if needs_update {
            decision(
                m,
                Action::Update {
                    object: desired,
                    adopt,
                },
                Some(ClusterStatus::Ok),
                None,
            )
        } else {
            decision(m, Action::Unchanged, Some(ClusterStatus::Ok), None)
        }
    }
}

/// The decision for member `m`, as every sync step phrases its outcome.
fn decision(
    m: &MemberState,
    action: Action,
    status: Option<ClusterStatus>,
    message: Option<String>,
) -> Decision {
    Decision {
        cluster: m.cluster.to_string(),
        action,
        status,
        message,
    }
}

/// A member that is not ready, or whose objects could not be observed: skipped when placed.
fn unreachable_decision(m: &MemberState, is_selected: bool) -> Option<Decision> {
    if !m.ready {
        return Some(if is_selected {
            decision(
                m,
                Action::Skip,
                Some(ClusterStatus::ClusterNotReady),
                Some("Cluster not ready".into()),
            )
        } else {
            decision(m, Action::Nothing, None, None)
        });
    }
    if let Some(why) = m.unobserved {
        // Upstream: the member's informer cannot list the type.
        return Some(if is_selected {
            decision(
                m,
                Action::Skip,
                Some(ClusterStatus::CachedRetrievalFailed),
                Some(why.to_string()),
            )
        } else {
            decision(m, Action::Nothing, None, None)
        });
    }
    None
}

/// A member outside the placement: its managed copy is deleted (the host's namespace unlabelled).
fn unplaced_decision(m: &MemberState, managed: Option<&Value>) -> Decision {
    match managed {
        None => decision(m, Action::Nothing, None, None),
        Some(o) if terminating(o) => decision(
            m,
            Action::Nothing,
            Some(ClusterStatus::WaitingForRemoval),
            None,
        ),
        Some(_) if m.is_host_namespace => decision(m, Action::RemoveManagedLabel, None, None),
        Some(_) => decision(
            m,
            Action::Delete { options: None },
            Some(ClusterStatus::WaitingForRemoval),
            None,
        ),
    }
}

/// A create or update met a conflict and the member object was read again
/// (upstream `dispatch/managed.go`, create → AlreadyExists → adopt): the
/// update to make now, or why the object cannot be managed.
pub fn after_conflict(
    fed: &Value,
    target: &TargetType,
    cluster: &str,
    live: &Value,
    settings: SyncSettings,
) -> Result<Action, (ClusterStatus, String)> {
    let label = managed_label(live);
    if label == ManagedLabel::False {
        return Err((
            ClusterStatus::ManagedLabelFalse,
            "the member object has label kubefed.io/managed: false".into(),
        ));
    }
    if label == ManagedLabel::Absent && !settings.adopt_resources {
        return Err((
            ClusterStatus::AlreadyExists,
            "the object exists in the member and adoption is disabled".into(),
        ));
    }
    desired_for_cluster(fed, target, cluster, Some(live))
        .map(|object| Action::Update {
            object,
            adopt: label == ManagedLabel::Absent,
        })
        .map_err(|e| (ClusterStatus::from_desired_error(&e), e.to_string()))
}

/// Namespaces the FederatedNamespace sync controller never propagates nor
/// unlabels: `kube-system`, `kube-public`, `default` and the kubefed
/// namespace (a FederatedNamespace for them still places their contents).
pub fn is_system_namespace(name: &str, kubefed_namespace: &str) -> bool {
    matches!(name, "kube-system" | "kube-public" | "default") || name == kubefed_namespace
}

/// A FederatedNamespace must be `<ns>/<ns>`; otherwise upstream emits a
/// Warning `InvalidName` and does nothing for it.
pub fn federated_namespace_name_is_valid(fed: &Value) -> bool {
    let meta = fed.get("metadata");
    let get = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str);
    get("name").is_some() && get("name") == get("namespace")
}

/// Upstream's `ObjectMetaEquivalent`: name, namespace, labels and
/// annotations equal, with nil and empty maps equal (uid, resourceVersion
/// and the rest ignored).
pub fn metadata_equivalent(a: &Value, b: &Value) -> bool {
    let meta = |o: &Value, k: &str| o.get("metadata").and_then(|m| m.get(k)).cloned();
    let str_field = |o: &Value, k: &str| {
        meta(o, k)
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let map_field = |o: &Value, k: &str| match meta(o, k) {
        Some(Value::Object(m)) if !m.is_empty() => Some(Value::Object(m)),
        _ => None,
    };
    str_field(a, "name") == str_field(b, "name")
        && str_field(a, "namespace") == str_field(b, "namespace")
        && map_field(a, "labels") == map_field(b, "labels")
        && map_field(a, "annotations") == map_field(b, "annotations")
}

/// Outcome of planning the deletion of a federated object (upstream
/// `ensureDeletion` / `ensureRemovedOrUnmanaged`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeletionPlan {
    /// The object carries the sync finalizer (without it: nothing to do).
    pub has_finalizer: bool,
    /// `kubefed.io/orphan: "true"`: member copies lose the label, nothing
    /// is deleted.
    pub orphan: bool,
    pub decisions: Vec<Decision>,
    /// Placed clusters that are not ready: deletion is blocked (error
    /// "the following clusters were not ready: a, b").
    pub not_ready: Vec<String>,
    /// Placed ready clusters whose objects of this type could not be
    /// listed: blocked as well, nothing is known of their copies.
    pub unobserved: Vec<String>,
    /// Release the sync finalizer now: nothing is left in any member and
    /// nothing blocks (no member request needed).
    pub remove_finalizer: bool,
    /// Clusters still holding the object (event `WaitForRemovalInCluster`).
    pub remaining: Vec<String>,
}

impl DeletionPlan {
    /// Clusters whose state keeps the finalizer whatever this run does.
    /// Orphaning is not held up by unready clusters: their labelled copies
    /// are unlabelled by the orphan cleanup once they are back.
    pub fn blocked_by(&self) -> Vec<String> {
        let mut out = self.unobserved.clone();
        if !self.orphan {
            out.extend(self.not_ready.iter().cloned());
        }
        out.sort();
        out
    }
}

/// Whether the federated object asks for orphaning (`kubefed.io/orphan: "true"` exactly).
pub fn is_orphaning(fed: &Value) -> bool {
    fed.get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(ORPHAN_ANNOTATION))
        .and_then(Value::as_str)
        == Some("true")
}

/// DeleteOptions from `kubefed.io/deleteoption` (only `propagationPolicy`,
/// `gracePeriodSeconds`, `preconditions` kept), `None` when absent.
pub fn delete_options(fed: &Value) -> Result<Option<Value>, String> {
    let Some(text) = fed
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(DELETE_OPTION_ANNOTATION))
        .and_then(Value::as_str)
    else {
        return Ok(None);
    };
    let parsed: Value = serde_json::from_str(text)
        .ok()
        .filter(Value::is_object)
        .ok_or_else(|| {
            format!("could not deserialize delete options from annotation value '{text}'")
        })?;
    let mut out = serde_json::Map::new();
    for key in ["propagationPolicy", "gracePeriodSeconds", "preconditions"] {
        if let Some(v) = parsed.get(key).filter(|v| !v.is_null()) {
            out.insert(key.to_string(), v.clone());
        }
    }
    Ok(Some(Value::Object(out)))
}

fn has_finalizer(fed: &Value) -> bool {
    fed.get("metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|x| x.as_str() == Some(SYNC_FINALIZER)))
}

/// Decisions for a federated object with a deletionTimestamp, over the
/// clusters of its current placement (others are not examined).
///
/// Unlike upstream, the finalizer is never removed before the member
/// copies are dealt with, orphaning included: a one-shot run can be killed
/// between two requests, and a federated object that is gone can no longer
/// say what to delete. The record step releases it once every copy is
/// confirmed deleted or unlabelled ([`crate::core::record`]).
pub fn deletion_decisions(
    fed: &Value,
    placed: &BTreeSet<String>,
    members: &[MemberState],
) -> Result<DeletionPlan, String> {
    let mut plan = DeletionPlan::default();
    if !has_finalizer(fed) {
        return Ok(plan);
    }
    plan.has_finalizer = true;
    let orphan = is_orphaning(fed);
    plan.orphan = orphan;
    let options = if orphan { None } else { delete_options(fed)? };
    for m in members.iter().filter(|m| placed.contains(m.cluster)) {
        if !m.ready {
            plan.not_ready.push(m.cluster.to_string());
            continue;
        }
        if m.unobserved.is_some() {
            plan.unobserved.push(m.cluster.to_string());
            continue;
        }
        let managed = m.live.filter(|o| managed_label(o) == ManagedLabel::True);
        let Some(obj) = managed else { continue };
        let action = if orphan {
            if terminating(obj) {
                continue;
            }
            Action::RemoveManagedLabel
        } else {
            if m.is_host_namespace && terminating(obj) {
                continue;
            }
            plan.remaining.push(m.cluster.to_string());
            if terminating(obj) {
                Action::AwaitRemoval
            } else if m.is_host_namespace {
                Action::RemoveManagedLabel
            } else {
                Action::Delete {
                    options: options.clone(),
                }
            }
        };
        plan.decisions.push(Decision {
            cluster: m.cluster.to_string(),
            action,
            status: None,
            message: None,
        });
    }
    plan.remove_finalizer = plan.decisions.is_empty() && plan.blocked_by().is_empty();
    Ok(plan)
}

/// Labelled member objects whose federated object is gone ("possible
/// orphans"): unlabel them in every ready cluster. Returns the decisions
/// and the unready clusters (an error upstream, retried).
pub fn orphan_cleanup_decisions(members: &[MemberState]) -> (Vec<Decision>, Vec<String>) {
    let mut decisions = Vec::new();
    let mut not_ready = Vec::new();
    for m in members {
        if !m.ready {
            not_ready.push(m.cluster.to_string());
            continue;
        }
        if m.unobserved.is_some() {
            continue;
        }
        if let Some(o) = m.live
            && managed_label(o) == ManagedLabel::True
            && !terminating(o)
        {
            decisions.push(Decision {
                cluster: m.cluster.to_string(),
                action: Action::RemoveManagedLabel,
                status: None,
                message: None,
            });
        }
    }
    (decisions, not_ready)
}

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
/// a create/update succeeded in this pass (only counts with remote status).
pub fn federated_status(
    fed: &Value,
    reason: AggregateReason,
    outcomes: &[ClusterOutcome],
    remote_status_collection: bool,
    resources_updated: bool,
    now: &str,
) -> StatusUpdate {
    let old = fed.get("status").cloned().unwrap_or(json!({}));
    let generation = fed
        .get("metadata")
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
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

    let (conditions, update_required) =
        propagation_conditions(&old, reason, changes_propagated, now);

    let final_clusters = if clusters_changed {
        clusters
    } else {
        old_clusters
    };
    StatusUpdate {
        status: status_value(generation, conditions, final_clusters),
        changed: generation_updated || update_required,
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
        .position(|c| c.get("type").and_then(Value::as_str) == Some("Propagation"));
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
    cond.insert("type".into(), json!("Propagation"));
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

/// What `status --live` says of one member for one federated object: the
/// decide step's decision read as a verdict, so that `status --live` and
/// `reconcile --dry-run` can never disagree. Only `in-sync` is healthy;
/// `None`: nothing there and nothing to do (not placed).
pub fn live_verdict(action: &Action, status: Option<ClusterStatus>) -> Option<&'static str> {
    Some(match action {
        Action::Unchanged => "in-sync",
        // A create that would meet a same-named unmanaged object is
        // `unmanaged` once that object is read (members are listed by the
        // managed label only).
        Action::Create(_) => "missing",
        Action::Update { adopt: true, .. } => "unmanaged",
        Action::Update { adopt: false, .. } => "drifted",
        Action::Delete { .. } => "unplaced",
        Action::RemoveManagedLabel => "orphaning",
        Action::AwaitRemoval => "terminating",
        Action::Nothing => return None,
        Action::Skip => match status {
            Some(ClusterStatus::ClusterNotReady)
            | Some(ClusterStatus::CachedRetrievalFailed)
            | Some(ClusterStatus::ClientRetrievalFailed) => "unreachable",
            Some(ClusterStatus::AlreadyExists) | Some(ClusterStatus::ManagedLabelFalse) => {
                "unmanaged"
            }
            _ => "invalid",
        },
    })
}

#[cfg(test)]
mod parse_tests {
    use super::ClusterStatus;

    #[test]
    fn statuses_round_trip() {
        for s in [
            "",
            "ClusterNotReady",
            "CreationFailed",
            "ManagedLabelFalse",
            "LabelRemovalTimedOut",
        ] {
            assert_eq!(ClusterStatus::parse(s).unwrap().as_str(), s);
        }
        assert_eq!(ClusterStatus::parse("Bogus"), None);
    }

    #[test]
    fn live_verdicts_read_the_decisions() {
        use super::{Action, live_verdict};
        use ClusterStatus::*;
        let obj = serde_json::json!({});
        let table: [(Action, Option<ClusterStatus>, Option<&str>); 12] = [
            (Action::Unchanged, None, Some("in-sync")),
            (Action::Create(obj.clone().into()), None, Some("missing")),
            (
                Action::Update {
                    object: obj.clone(),
                    adopt: false,
                },
                None,
                Some("drifted"),
            ),
            (
                Action::Update {
                    object: obj.clone(),
                    adopt: true,
                },
                None,
                Some("unmanaged"),
            ),
            (Action::Delete { options: None }, None, Some("unplaced")),
            (Action::RemoveManagedLabel, None, Some("orphaning")),
            (
                Action::AwaitRemoval,
                Some(WaitingForRemoval),
                Some("terminating"),
            ),
            (Action::Nothing, None, None),
            (Action::Skip, Some(ClusterNotReady), Some("unreachable")),
            (
                Action::Skip,
                Some(CachedRetrievalFailed),
                Some("unreachable"),
            ),
            (Action::Skip, Some(ManagedLabelFalse), Some("unmanaged")),
            (Action::Skip, Some(ApplyOverridesFailed), Some("invalid")),
        ];
        for (action, status, want) in table {
            assert_eq!(live_verdict(&action, status), want, "{action:?} {status:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::version::{overrides_version, template_version};

    fn target() -> TargetType {
        TargetType::new("", "v1", "ConfigMap")
    }

    fn fed() -> Value {
        json!({"kind": "FederatedConfigMap", "metadata": {"name": "cm", "namespace": "ns", "generation": 2,
                "finalizers": [SYNC_FINALIZER]},
               "spec": {"template": {"data": {"k": "v"}}}})
    }

    fn live(rv: &str, label: Option<&str>) -> Value {
        let mut o = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "ns", "resourceVersion": rv, "labels": {}}, "data": {"k": "v"}});
        if let Some(l) = label {
            o["metadata"]["labels"][MANAGED_LABEL] = json!(l);
        }
        o
    }

    fn versions_for(fed: &Value, cluster: &str, version: &str) -> Value {
        json!({"templateVersion": template_version(fed).unwrap(), "overridesVersion": overrides_version(fed).unwrap(),
               "clusterVersions": [{"clusterName": cluster, "version": version}]})
    }

    fn set(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn member<'a>(cluster: &'a str, ready: bool, live: Option<&'a Value>) -> MemberState<'a> {
        MemberState {
            cluster,
            ready,
            live,
            is_host_namespace: false,
            unobserved: None,
        }
    }

    const ADOPT: SyncSettings = SyncSettings {
        adopt_resources: true,
    };
    const NO_ADOPT: SyncSettings = SyncSettings {
        adopt_resources: false,
    };

    fn one(
        selected: bool,
        m: MemberState,
        versions: Option<&Value>,
        settings: SyncSettings,
    ) -> Decision {
        let sel = if selected {
            set(&[m.cluster])
        } else {
            set(&[])
        };
        sync_decisions(&fed(), &target(), &sel, &[m], versions, settings).remove(0)
    }

    #[test]
    fn sync_decision_table() {
        let managed = live("5", Some("true"));
        let unlabelled = live("5", None);
        let label_false = live("5", Some("false"));
        let mut terminating = live("5", Some("true"));
        terminating["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        let matching = versions_for(&fed(), "c1", "rv:5");
        let stale = versions_for(&fed(), "c1", "rv:4");
        type Row<'a> = (
            &'a str,
            bool,
            bool,
            Option<&'a Value>,
            Option<&'a Value>,
            SyncSettings,
            &'a str,
            Option<ClusterStatus>,
        );
        let rows: Vec<Row> = vec![
            (
                "unready selected",
                true,
                false,
                None,
                None,
                ADOPT,
                "skip",
                Some(ClusterStatus::ClusterNotReady),
            ),
            (
                "unready unselected",
                false,
                false,
                Some(&managed),
                None,
                ADOPT,
                "nothing",
                None,
            ),
            (
                "unselected absent",
                false,
                true,
                None,
                None,
                ADOPT,
                "nothing",
                None,
            ),
            (
                "unselected unmanaged is never touched",
                false,
                true,
                Some(&unlabelled),
                None,
                ADOPT,
                "nothing",
                None,
            ),
            (
                "unselected managed",
                false,
                true,
                Some(&managed),
                None,
                ADOPT,
                "delete",
                Some(ClusterStatus::WaitingForRemoval),
            ),
            (
                "unselected terminating",
                false,
                true,
                Some(&terminating),
                None,
                ADOPT,
                "nothing",
                Some(ClusterStatus::WaitingForRemoval),
            ),
            (
                "selected absent",
                true,
                true,
                None,
                None,
                ADOPT,
                "create",
                Some(ClusterStatus::Ok),
            ),
            (
                "adoption disabled",
                true,
                true,
                Some(&unlabelled),
                None,
                NO_ADOPT,
                "skip",
                Some(ClusterStatus::AlreadyExists),
            ),
            (
                "adoption enabled",
                true,
                true,
                Some(&unlabelled),
                None,
                ADOPT,
                "adopt",
                Some(ClusterStatus::Ok),
            ),
            (
                "label false",
                true,
                true,
                Some(&label_false),
                None,
                ADOPT,
                "skip",
                Some(ClusterStatus::ManagedLabelFalse),
            ),
            (
                "no recorded version",
                true,
                true,
                Some(&managed),
                None,
                ADOPT,
                "update",
                Some(ClusterStatus::Ok),
            ),
            (
                "stale version",
                true,
                true,
                Some(&managed),
                Some(&stale),
                ADOPT,
                "update",
                Some(ClusterStatus::Ok),
            ),
            (
                "matching version",
                true,
                true,
                Some(&managed),
                Some(&matching),
                ADOPT,
                "unchanged",
                Some(ClusterStatus::Ok),
            ),
        ];
        for (name, selected, ready, live, versions, settings, want_action, want_status) in rows {
            let d = one(selected, member("c1", ready, live), versions, settings);
            let action = match &d.action {
                Action::Update { adopt: true, .. } => "adopt",
                other => other.verb(),
            };
            assert_eq!(action, want_action, "{name}");
            assert_eq!(d.status, want_status, "{name}");
        }
    }

    #[test]
    fn generation_tracked_objects_also_compare_metadata() {
        let deploy = TargetType::new("apps", "v1", "Deployment");
        let fed_d = json!({"metadata": {"name": "d", "namespace": "ns"}, "spec": {"template": {"metadata": {"labels": {"a": "1"}}}}});
        let mut obj = json!({"metadata": {"name": "d", "namespace": "ns", "generation": 3, "resourceVersion": "7",
            "labels": {"a": "1", MANAGED_LABEL: "true"}}});
        let versions = versions_for(&fed_d, "c1", "gen:3");
        let decide = |o: &Value| {
            sync_decisions(
                &fed_d,
                &deploy,
                &set(&["c1"]),
                &[member("c1", true, Some(o))],
                Some(&versions),
                ADOPT,
            )
            .remove(0)
            .action
        };
        assert_eq!(decide(&obj), Action::Unchanged);
        obj["metadata"]["labels"]["extra"] = json!("x");
        assert!(
            matches!(decide(&obj), Action::Update { adopt: false, .. }),
            "label drift on gen: objects"
        );
        // rv: objects are never re-compared
        let cm_fed = fed();
        let mut cm = live("5", Some("true"));
        cm["metadata"]["labels"]["extra"] = json!("x");
        let v = versions_for(&cm_fed, "c1", "rv:5");
        let d = sync_decisions(
            &cm_fed,
            &target(),
            &set(&["c1"]),
            &[member("c1", true, Some(&cm))],
            Some(&v),
            ADOPT,
        );
        assert_eq!(d[0].action, Action::Unchanged);
    }

    #[test]
    fn host_namespace_is_unlabelled_never_deleted_and_adopted_even_without_adoption() {
        let ns_target = TargetType::new("", "v1", "Namespace");
        let fed_ns = json!({"kind": "FederatedNamespace", "metadata": {"name": "demo", "namespace": "demo"}});
        let mut host = json!({"metadata": {"name": "demo", "uid": "h", "resourceVersion": "3", "labels": {MANAGED_LABEL: "true"}}});
        let m = MemberState {
            cluster: "host",
            ready: true,
            live: Some(&host),
            is_host_namespace: true,
            unobserved: None,
        };
        let d = sync_decisions(&fed_ns, &ns_target, &set(&[]), &[m], None, NO_ADOPT);
        assert_eq!(d[0].action, Action::RemoveManagedLabel);
        assert_eq!(d[0].status, None);
        host["metadata"]["labels"] = json!({});
        let m = MemberState {
            cluster: "host",
            ready: true,
            live: Some(&host),
            is_host_namespace: true,
            unobserved: None,
        };
        let d = sync_decisions(&fed_ns, &ns_target, &set(&["host"]), &[m], None, NO_ADOPT);
        assert!(matches!(d[0].action, Action::Update { adopt: true, .. }));
    }

    #[test]
    fn desired_errors_become_statuses() {
        let mut bad = fed();
        bad["spec"]["overrides"] =
            json!([{"clusterName": "c1", "clusterOverrides": [{"path": "/metadata/name"}]}]);
        let d = sync_decisions(
            &bad,
            &target(),
            &set(&["c1"]),
            &[member("c1", true, None)],
            None,
            ADOPT,
        );
        assert_eq!(d[0].action, Action::Skip);
        assert_eq!(d[0].status, Some(ClusterStatus::ApplyOverridesFailed));
        assert!(d[0].message.as_deref().unwrap().contains("/metadata/name"));
    }

    #[test]
    fn deletion_and_orphaning() {
        let managed = live("5", Some("true"));
        let mut terminating = managed.clone();
        terminating["metadata"]["deletionTimestamp"] = json!("t");
        let mut deleting = fed();
        deleting["metadata"]["deletionTimestamp"] = json!("t");
        deleting["metadata"]["annotations"] = json!({DELETE_OPTION_ANNOTATION: "{\"propagationPolicy\":\"Orphan\",\"dryRun\":[\"All\"]}"});
        let members = [
            member("a", true, Some(&managed)),
            member("b", true, Some(&terminating)),
            member("c", true, None),
            member("d", false, Some(&managed)),
            member("outside", true, Some(&managed)),
        ];
        let placed = set(&["a", "b", "c", "d"]);
        let plan = deletion_decisions(&deleting, &placed, &members).unwrap();
        assert_eq!(plan.decisions.len(), 2);
        assert_eq!(plan.decisions[0].cluster, "a");
        assert_eq!(
            plan.decisions[0].action,
            Action::Delete {
                options: Some(json!({"propagationPolicy": "Orphan"}))
            }
        );
        assert_eq!(
            (
                plan.decisions[1].cluster.as_str(),
                &plan.decisions[1].action
            ),
            ("b", &Action::AwaitRemoval),
            "a terminating copy is waited for, not deleted again"
        );
        assert_eq!(plan.remaining, vec!["a", "b"]);
        assert_eq!(plan.not_ready, vec!["d"]);
        assert!(!plan.remove_finalizer);

        let gone = [member("a", true, None), member("c", true, None)];
        assert!(
            deletion_decisions(&deleting, &set(&["a", "c"]), &gone)
                .unwrap()
                .remove_finalizer
        );

        let mut orphaning = deleting.clone();
        orphaning["metadata"]["annotations"] = json!({ORPHAN_ANNOTATION: "true"});
        let plan = deletion_decisions(&orphaning, &placed, &members).unwrap();
        assert!(
            !plan.remove_finalizer,
            "orphaning keeps the finalizer until the labels are gone"
        );
        assert!(plan.blocked_by().is_empty(), "unready d is cleaned later");
        assert_eq!(
            plan.decisions
                .iter()
                .map(|d| d.cluster.as_str())
                .collect::<Vec<_>>(),
            vec!["a"]
        );
        assert_eq!(plan.decisions[0].action, Action::RemoveManagedLabel);
        assert_eq!(plan.not_ready, vec!["d"]);

        let mut no_finalizer = deleting.clone();
        no_finalizer["metadata"]["finalizers"] = json!([]);
        let plan = deletion_decisions(&no_finalizer, &placed, &members).unwrap();
        assert!(plan.decisions.is_empty() && !plan.remove_finalizer && !plan.has_finalizer);

        let unlisted = [MemberState {
            unobserved: Some("list failed"),
            ..member("a", true, None)
        }];
        let plan = deletion_decisions(&deleting, &set(&["a"]), &unlisted).unwrap();
        assert_eq!(plan.unobserved, vec!["a"]);
        assert!(!plan.remove_finalizer, "nothing is known of a's copy");

        let mut bad = deleting.clone();
        bad["metadata"]["annotations"] = json!({DELETE_OPTION_ANNOTATION: "nope"});
        assert!(
            deletion_decisions(&bad, &placed, &members)
                .unwrap_err()
                .contains("'nope'")
        );
        let mut orphan_wrong_value = deleting.clone();
        orphan_wrong_value["metadata"]["annotations"] = json!({ORPHAN_ANNOTATION: "True"});
        assert!(!is_orphaning(&orphan_wrong_value));
    }

    // Upstream util/deletionannotation_test.go.
    #[test]
    fn delete_option_annotation_cases() {
        let with = |v: &str| json!({"metadata": {"annotations": {DELETE_OPTION_ANNOTATION: v}}});
        assert_eq!(delete_options(&json!({})).unwrap(), None);
        assert_eq!(
            delete_options(&with(r#"{"propagationPolicy":"Orphan"}"#)).unwrap(),
            Some(json!({"propagationPolicy": "Orphan"}))
        );
        assert_eq!(
            delete_options(&with(r#"{"gracePeriodSeconds":5}"#)).unwrap(),
            Some(json!({"gracePeriodSeconds": 5}))
        );
        assert_eq!(
            delete_options(&with(
                r#"{"propagationPolicy":"Orphan","gracePeriodSeconds":5}"#
            ))
            .unwrap(),
            Some(json!({"propagationPolicy": "Orphan", "gracePeriodSeconds": 5}))
        );
    }

    #[test]
    fn orphan_cleanup_unlabels_managed_objects() {
        let managed = live("1", Some("true"));
        let unlabelled = live("1", None);
        let (d, not_ready) = orphan_cleanup_decisions(&[
            member("a", true, Some(&managed)),
            member("b", true, Some(&unlabelled)),
            member("c", false, Some(&managed)),
        ]);
        assert_eq!(d.len(), 1);
        assert_eq!(
            (d[0].cluster.as_str(), &d[0].action),
            ("a", &Action::RemoveManagedLabel)
        );
        assert_eq!(not_ready, vec!["c"]);
    }

    fn outcome(c: &str, s: ClusterStatus) -> ClusterOutcome {
        ClusterOutcome {
            cluster: c.into(),
            status: s,
            remote_status: None,
        }
    }

    #[test]
    fn status_is_built_sorted_with_the_right_reason() {
        let f = fed();
        let up = federated_status(
            &f,
            AggregateReason::Success,
            &[
                outcome("b", ClusterStatus::ClusterNotReady),
                outcome("a", ClusterStatus::Ok),
            ],
            false,
            false,
            "T1",
        );
        assert!(up.changed);
        assert_eq!(up.status["observedGeneration"], 2);
        assert_eq!(
            up.status["clusters"],
            json!([{"name": "a"}, {"name": "b", "status": "ClusterNotReady"}])
        );
        assert_eq!(
            up.status["conditions"],
            json!([{"type": "Propagation", "status": "False", "reason": "CheckClusters",
                    "lastTransitionTime": "T1", "lastUpdateTime": "T1"}])
        );
        let ok = federated_status(
            &f,
            AggregateReason::Success,
            &[outcome("a", ClusterStatus::Ok)],
            false,
            false,
            "T1",
        );
        assert_eq!(ok.status["conditions"][0]["status"], "True");
        assert!(ok.status["conditions"][0].get("reason").is_none());
        let nnf = federated_status(
            &f,
            AggregateReason::NamespaceNotFederated,
            &[],
            false,
            false,
            "T1",
        );
        assert_eq!(
            nnf.status["conditions"][0]["reason"],
            "NamespaceNotFederated"
        );
    }

    // Upstream sync/status/status_test.go truth table (existing status: one
    // cluster "cluster1" OK, condition True).
    #[test]
    fn status_changed_truth_table() {
        let mut f = fed();
        f["metadata"]["generation"] = json!(1);
        f["status"] = json!({"observedGeneration": 1, "clusters": [{"name": "cluster1"}],
            "conditions": [{"type": "Propagation", "status": "True", "lastTransitionTime": "T0", "lastUpdateTime": "T0"}]});
        let run = |outcomes: &[ClusterOutcome], reason, remote: bool, f: &Value| {
            federated_status(f, reason, outcomes, remote, false, "T1").changed
        };
        let ok = outcome("cluster1", ClusterStatus::Ok);
        assert!(run(
            &[outcome("cluster1", ClusterStatus::ClusterNotReady)],
            AggregateReason::Success,
            false,
            &f
        ));
        assert!(run(&[], AggregateReason::Success, false, &f));
        assert!(
            run(
                std::slice::from_ref(&ok),
                AggregateReason::Success,
                true,
                &f
            ),
            "no remote status with collection on"
        );
        assert!(!run(
            std::slice::from_ref(&ok),
            AggregateReason::Success,
            false,
            &f
        ));
        assert!(run(
            &[ok.clone(), outcome("cluster2", ClusterStatus::Ok)],
            AggregateReason::Success,
            false,
            &f
        ));
        assert!(run(
            std::slice::from_ref(&ok),
            AggregateReason::NamespaceNotFederated,
            false,
            &f
        ));
        let mut g = f.clone();
        g["status"]["observedGeneration"] = json!(0);
        let up = federated_status(
            &g,
            AggregateReason::Success,
            std::slice::from_ref(&ok),
            false,
            false,
            "T1",
        );
        assert!(up.changed, "generation 0 → 1");
        assert_eq!(
            up.status["conditions"][0]["lastUpdateTime"], "T0",
            "generation alone keeps timestamps"
        );
        // remote status: same → unchanged, different → changed
        let mut r = f.clone();
        r["status"]["clusters"] = json!([{"name": "cluster1", "remoteStatus": {"replicas": 1}}]);
        let with_rs = |v: Value| ClusterOutcome {
            cluster: "cluster1".into(),
            status: ClusterStatus::Ok,
            remote_status: Some(v),
        };
        assert!(!run(
            &[with_rs(json!({"replicas": 1}))],
            AggregateReason::Success,
            true,
            &r
        ));
        assert!(run(
            &[with_rs(json!({"replicas": 2}))],
            AggregateReason::Success,
            true,
            &r
        ));
    }

    #[test]
    fn status_keeps_other_conditions_and_omits_empty_fields() {
        let mut f = fed();
        f["metadata"]["generation"] = json!(0);
        f["status"] = json!({"conditions": [{"type": "Other", "status": "True"},
            {"type": "Propagation", "status": "True", "lastTransitionTime": "T0", "lastUpdateTime": "T0"}],
            "clusters": [{"name": "a", "remoteStatus": {"n": 1.0}}]});
        let up = federated_status(&f, AggregateReason::Success, &[], false, false, "T1");
        assert!(up.status.get("observedGeneration").is_none());
        assert!(up.status.get("clusters").is_none(), "clusters dropped");
        assert_eq!(up.status["conditions"][0]["type"], "Other");
        assert_eq!(up.status["conditions"][1]["lastTransitionTime"], "T0");
        assert_eq!(
            up.status["conditions"][1]["lastUpdateTime"], "T1",
            "clusters changed"
        );
        // remote status numbers compare as float64
        let same = ClusterOutcome {
            cluster: "a".into(),
            status: ClusterStatus::Ok,
            remote_status: Some(json!({"n": 1})),
        };
        let up = federated_status(
            &f,
            AggregateReason::Success,
            std::slice::from_ref(&same),
            true,
            false,
            "T1",
        );
        assert!(!up.changed, "{:?}", up.status);
        // updated resources count only with remote statuses collected
        assert!(federated_status(&f, AggregateReason::Success, &[same], true, true, "T1").changed);
        let plain = ClusterOutcome {
            cluster: "a".into(),
            status: ClusterStatus::Ok,
            remote_status: None,
        };
        let mut g = f.clone();
        g["status"]["clusters"] = json!([{"name": "a"}]);
        assert!(
            !federated_status(&g, AggregateReason::Success, &[plain], false, true, "T1").changed
        );
    }

    #[test]
    fn namespace_rules() {
        for ns in [
            "kube-system",
            "kube-public",
            "default",
            "kube-federation-system",
        ] {
            assert!(is_system_namespace(ns, "kube-federation-system"), "{ns}");
        }
        assert!(!is_system_namespace("demo", "kube-federation-system"));
        assert!(federated_namespace_name_is_valid(
            &json!({"metadata": {"name": "a", "namespace": "a"}})
        ));
        assert!(!federated_namespace_name_is_valid(
            &json!({"metadata": {"name": "a", "namespace": "b"}})
        ));
    }

    #[test]
    fn recoverable_statuses() {
        assert!(ClusterStatus::CreationFailed.is_recoverable());
        assert!(ClusterStatus::DeletionTimedOut.is_recoverable());
        assert!(!ClusterStatus::AlreadyExists.is_recoverable());
        assert!(!ClusterStatus::ClusterNotReady.is_recoverable());
        assert_eq!(ClusterStatus::Ok.as_str(), "");
        assert_eq!(
            Action::Delete { options: None }.failure_status(),
            Some(ClusterStatus::DeletionFailed)
        );
        let outs = outcomes_on_success(&[
            Decision {
                cluster: "a".into(),
                action: Action::Nothing,
                status: None,
                message: None,
            },
            Decision {
                cluster: "b".into(),
                action: Action::Unchanged,
                status: Some(ClusterStatus::Ok),
                message: None,
            },
        ]);
        assert_eq!(outs, vec![outcome("b", ClusterStatus::Ok)]);
    }
}
