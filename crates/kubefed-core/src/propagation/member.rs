//! What each member cluster gets for a federated object that is not being
//! deleted (upstream `syncToClusters` in `pkg/controller/sync/controller.go`,
//! `dispatch/managed.go`).
//!
//! The decisions mirror upstream's rules, including the surprising ones:
//! unmanaged objects outside the placement are never touched, spec drift
//! is noticed only through generation/resourceVersion, and an unready
//! cluster is left alone.

use std::cell::OnceCell;
use std::collections::BTreeSet;

use serde_json::Value;

use crate::propagation::action::{Action, ClusterStatus, Decision};
use crate::propagation::desired::{
    DesiredError, DesiredObjects, MANAGED_LABEL, TargetType, desired_for_cluster,
};
use crate::propagation::drift::{self, Drift};
use crate::propagation::federated::FederatedObject;
use crate::propagation::foreign;
use crate::propagation::overrides::{MemberCluster, SELECTED_OVERRIDES_ANNOTATION};
use crate::propagation::strategy::{Strategy, TakeOver};
use crate::propagation::version::{member_version, recorded_version};

/// A member cluster's view for one federated object.
#[derive(Clone, Debug)]
pub struct MemberState<'a> {
    pub cluster: &'a str,
    /// Its KubeFedCluster's labels (overrides may choose clusters by label).
    pub labels: &'a std::collections::BTreeMap<String, String>,
    pub ready: bool,
    /// The member object with the target's name, labelled or not (`None`
    /// when absent). Upstream only *sees* labelled ones; unlabelled ones
    /// are found when a create hits AlreadyExists.
    pub live: Option<Value>,
    /// Ready, but this type's objects could not be observed there (the
    /// member does not serve the type, or its list failed): why.
    pub unobserved: Option<&'a str>,
    /// Namespace type only: `live` is the host cluster's own namespace
    /// (same UID), which is never deleted, only unlabelled.
    pub is_host_namespace: bool,
}

impl<'a> MemberState<'a> {
    /// The member as its overrides are chosen.
    pub fn member_cluster(&self) -> MemberCluster<'a> {
        MemberCluster {
            name: self.cluster,
            labels: self.labels,
        }
    }
}

/// Settings of the control plane that change decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncSettings {
    /// `KubeFedConfig.spec.syncController.adoptResources == Enabled`.
    pub adopt_resources: bool,
    /// `reconcile --force-conflicts`: where a kept field of another
    /// manager conflicts with the template, the template's value is written.
    pub force_conflicts: bool,
    /// `reconcile --report-only`: every object is report-only
    /// ([`Strategy`]), whatever its annotations say.
    pub report_only: bool,
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

pub(crate) fn terminating(obj: &Value) -> bool {
    obj.get("metadata")
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|t| !t.is_null())
}

/// Decisions for a federated object that is *not* being deleted
/// (upstream `syncToClusters` in `pkg/controller/sync/controller.go`).
/// `selected` is the computed placement; `versions` is the
/// PropagatedVersion's `status` (if any).
pub fn sync_decisions(
    fed: FederatedObject,
    target: &TargetType,
    selected: &BTreeSet<String>,
    members: &[MemberState],
    versions: Option<&Value>,
    settings: SyncSettings,
    strategy: Strategy,
) -> Vec<Decision> {
    let sync = SyncInputs::new(fed, target, versions, settings, strategy);
    members
        .iter()
        .map(|m| sync.decide(m, selected.contains(m.cluster)))
        .collect()
}

/// What every member's sync decision shares, so the object is hashed and rendered once.
struct SyncInputs<'a> {
    fed: FederatedObject<'a>,
    target: &'a TargetType,
    versions: Option<&'a Value>,
    settings: SyncSettings,
    strategy: Strategy,
    // Hashed and rendered only when needed: an offline render has no live
    // objects, and most clusters share one desired object.
    hashes: OnceCell<(String, String)>,
    desired_objects: OnceCell<Result<DesiredObjects, DesiredError>>,
}

impl<'a> SyncInputs<'a> {
    /// The inputs, with nothing hashed or rendered yet.
    fn new(
        fed: FederatedObject<'a>,
        target: &'a TargetType,
        versions: Option<&'a Value>,
        settings: SyncSettings,
        strategy: Strategy,
    ) -> SyncInputs<'a> {
        SyncInputs {
            fed,
            target,
            versions,
            settings,
            strategy,
            hashes: OnceCell::new(),
            desired_objects: OnceCell::new(),
        }
    }

    /// The template and overrides versions, hashed on first use only.
    fn hashes(&self) -> &(String, String) {
        self.hashes.get_or_init(|| {
            (
                crate::propagation::version::template_version(self.fed.value()).unwrap_or_default(),
                crate::propagation::version::overrides_version(self.fed.value())
                    .unwrap_or_default(),
            )
        })
    }

    /// The desired objects of every cluster, rendered on first use only.
    fn desired_objects(&self) -> &Result<DesiredObjects, DesiredError> {
        self.desired_objects
            .get_or_init(|| DesiredObjects::new(self.fed.value(), self.target))
    }

    /// One member's decision: the steps of upstream's per-cluster sync, in order.
    fn decide(&self, m: &MemberState, is_selected: bool) -> Decision {
        if let Some(d) = unreachable_decision(m, is_selected) {
            return d;
        }
        // Upstream's cache only holds labelled objects (label "true").
        let managed = m
            .live
            .as_ref()
            .filter(|o| managed_label(o) == ManagedLabel::True);
        if self.strategy.reports_only() {
            return self.report_decision(m, managed, is_selected);
        }
        if !is_selected {
            return unplaced_decision(m, managed);
        }
        let Some(live) = &m.live else {
            return self.create_decision(m);
        };
        let adopt = managed.is_none();
        if let Some(d) = self.unmanageable_decision(m, live, adopt) {
            return d;
        }
        let mut d = self.update_decision(m, live, adopt);
        if terminating(live) && d.status == Some(ClusterStatus::Ok) {
            // Not upstream's (`syncToClusters` in `pkg/controller/sync/
            // controller.go` records a placed copy that is being deleted
            // as OK): that copy goes, and a later run creates it again, so
            // the member does not hold the object and `Propagation` must
            // not say it does (docs/kubefed-differences.md).
            d.status = Some(ClusterStatus::WaitingForRemoval);
        }
        d
    }

    /// A placed member without the object: create it, unless its desired object cannot be computed.
    fn create_decision(&self, m: &MemberState) -> Decision {
        let created = self
            .desired_objects()
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|d| d.for_cluster_shared(m.member_cluster()));
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
        if adopt && self.strategy.take_over == TakeOver::Never && !m.is_host_namespace {
            return Some(decision(
                m,
                Action::Skip,
                Some(ClusterStatus::AlreadyExists),
                Some(format!(
                    "Failed to create {} {:?} in cluster {:?}: Resource pre-exist in cluster",
                    self.target.kind,
                    crate::describe::qualified_key(&self.fed.key()),
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
        let kept = self.kept_desired(m.member_cluster(), live);
        let (desired, conflicts) = match kept {
            Ok(kept) => kept,
            Err((status, message)) => {
                return decision(m, Action::Skip, Some(status), Some(message));
            }
        };
        if adopt
            && !m.is_host_namespace
            && let Err(why) = self.may_take_over(&desired, live)
        {
            return decision(
                m,
                Action::Skip,
                Some(ClusterStatus::AlreadyExists),
                Some(why),
            );
        }
        let (template_version, overrides_version) = self.hashes();
        let recorded = recorded_version(
            self.versions,
            template_version,
            overrides_version,
            m.cluster,
        );
        let current = member_version(live);
        let needs_update = recorded.as_deref() != Some(current.as_str())
            || (current.starts_with("gen:") && !metadata_equivalent(&desired, live))
            || selection_changed(&desired, live);
        let action = match needs_update {
            true => Action::Update {
                object: desired,
                adopt,
            },
            false => Action::Unchanged,
        };
        decision(m, action, Some(ClusterStatus::Ok), conflicts)
    }

    /// Report-only: no request; how the copy differs from what a run would
    /// write (the same desired object, retain rules included).
    fn report_decision(
        &self,
        m: &MemberState,
        managed: Option<&Value>,
        is_selected: bool,
    ) -> Decision {
        let drifted = |d: Drift| {
            let status = if d.is_in_sync() {
                ClusterStatus::Ok
            } else {
                ClusterStatus::Drifted
            };
            decision(m, Action::Report(d), Some(status), None)
        };
        if !is_selected {
            return match managed {
                Some(o) if !terminating(o) => drifted(Drift::Unplaced),
                _ => decision(m, Action::Nothing, None, None),
            };
        }
        let Some(live) = &m.live else {
            return drifted(Drift::Missing);
        };
        let kept = self.kept_desired(m.member_cluster(), live);
        match kept {
            Ok((desired, _)) => drifted(Drift::Fields(drift::differences(
                &desired,
                live,
                &self.target.kind,
            ))),
            Err((status, message)) => decision(m, Action::Skip, Some(status), Some(message)),
        }
    }

    /// Whether a copy not managed yet may be taken over (the take-over
    /// policy, [`Strategy`]); why not, naming the differing paths.
    fn may_take_over(&self, desired: &Value, live: &Value) -> Result<(), String> {
        take_over_refusal(self.strategy.take_over, desired, live, &self.target.kind).map_or(
            Ok(()),
            |why| {
                Err(format!(
                    "{} {}: {why}",
                    self.target.kind,
                    crate::describe::qualified_key(&self.fed.key())
                ))
            },
        )
    }

    /// What a write to `live` in `cluster` would hold: the desired object
    /// over the live copy (upstream's retain rules), with the fields of
    /// other managers kept ([`Self::keep_theirs`]); the conflicts as one line.
    fn kept_desired(
        &self,
        cluster: MemberCluster,
        live: &Value,
    ) -> Result<(Value, Option<String>), (ClusterStatus, String)> {
        desired_for_cluster(self.fed.value(), self.target, cluster, Some(live))
            .map_err(|e| (ClusterStatus::from_desired_error(&e), e.to_string()))
            .and_then(|d| self.keep_theirs(d, live))
    }

    /// `desired` with the fields of other managers kept, as the object's
    /// and its type's policy say (`foreign`); the conflicts as one line.
    fn keep_theirs(
        &self,
        mut desired: Value,
        live: &Value,
    ) -> Result<(Value, Option<String>), (ClusterStatus, String)> {
        let policy =
            foreign::Policy::of(&self.target.type_annotations, self.fed.value()).map_err(|e| {
                (
                    ClusterStatus::ApplyOverridesFailed,
                    format!("{}: {e}", self.fed.describe()),
                )
            })?;
        if !policy.is_active() {
            return Ok((desired, None));
        }
        let force = self.settings.force_conflicts;
        let conflicts = foreign::keep_theirs(&mut desired, live, &policy, force);
        Ok((desired, foreign::conflicts_line(&conflicts, force)))
    }
}

/// Overrides chosen by label no longer those the member got: its labels
/// (or the selectors) changed since, which the PropagatedVersion, one
/// overrides version for all members as KubeFed records it, cannot tell.
fn selection_changed(desired: &Value, live: &Value) -> bool {
    let digest = |o: &Value| {
        o.pointer("/metadata/annotations")
            .and_then(|a| a.get(SELECTED_OVERRIDES_ANNOTATION))
            .cloned()
    };
    digest(desired) != digest(live)
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
    cluster: MemberCluster,
    live: &Value,
    settings: SyncSettings,
) -> Result<Action, (ClusterStatus, String)> {
    let strategy = Strategy::of(
        &target.type_annotations,
        fed,
        settings.adopt_resources,
        settings.report_only,
    )
    .map_err(|e| (ClusterStatus::ApplyOverridesFailed, e))?;
    let label = managed_label(live);
    if label == ManagedLabel::False {
        return Err((
            ClusterStatus::ManagedLabelFalse,
            "the member object has label kubefed.io/managed: false".into(),
        ));
    }
    let adopt = label == ManagedLabel::Absent;
    if adopt && strategy.take_over == TakeOver::Never {
        return Err((
            ClusterStatus::AlreadyExists,
            "the object exists in the member and adoption is disabled (take-over: Never)".into(),
        ));
    }
    let sync = SyncInputs::new(FederatedObject::new(fed), target, None, settings, strategy);
    let (object, _) = sync.kept_desired(cluster, live)?;
    if adopt {
        sync.may_take_over(&object, live)
            .map_err(|why| (ClusterStatus::AlreadyExists, why))?;
    }
    Ok(Action::Update { object, adopt })
}

/// Why a copy not managed yet is not taken over under `policy` (`None`:
/// it is): `IfNoDiff` refuses one whose fields differ from `desired`
/// (the paths, as [`drift::differences`] finds them).
pub fn take_over_refusal(
    policy: TakeOver,
    desired: &Value,
    live: &Value,
    kind: &str,
) -> Option<String> {
    match policy {
        TakeOver::Always => None,
        TakeOver::Never => {
            Some("exists in the member and is not taken over (take-over: Never)".into())
        }
        TakeOver::IfNoDiff => {
            let differs = drift::differences(desired, live, kind);
            (!differs.is_empty()).then(|| {
                let paths: Vec<&str> = differs.iter().map(|d| d.path.as_str()).collect();
                format!(
                    "exists in the member and differs at {}: left as it is (take-over: IfNoDiff)",
                    paths.join(", ")
                )
            })
        }
    }
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
    let fed = FederatedObject::new(fed);
    fed.name().is_some() && fed.name() == fed.namespace()
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

/// Per-member values (`${MEMBER_LABEL:key}`, `propagation::member_values`)
/// that fail for any placed member in `clusters` (every registered one, not
/// only those the run touches) fail the whole object: each member's write
/// of it becomes a skip with that failure (`ApplyOverridesFailed`), so no
/// member gets a copy that its siblings cannot get. KubeFed's controller
/// fails one member at a time (`syncToClusters` in
/// `pkg/controller/sync/controller.go`), but it has no such values.
pub fn hold_on_member_value_failure(
    fed: &Value,
    placed: &BTreeSet<String>,
    clusters: &[crate::propagation::placement::Cluster],
    decisions: &mut [Decision],
) {
    let Ok(parsed) = crate::propagation::overrides::overrides_by_cluster(fed) else {
        return; // every member's decision already says why
    };
    if !parsed.member_values {
        return;
    }
    let failure = clusters
        .iter()
        .filter(|c| placed.contains(&c.name))
        .find_map(|c| {
            let at = MemberCluster {
                name: &c.name,
                labels: &c.labels,
            };
            parsed.expanded_for_cluster(at).err()
        });
    let Some(source) = failure else {
        return;
    };
    let why = DesiredError::Overrides {
        object: crate::describe::describe_federated(fed),
        source,
    }
    .to_string();
    for d in decisions.iter_mut() {
        if d.action.failure_status().is_some() {
            d.action = Action::Skip;
            d.status = Some(ClusterStatus::ApplyOverridesFailed);
            d.message = Some(format!("not written: {why}"));
        }
    }
}
