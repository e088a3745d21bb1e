//! Deleting a federated object (upstream `pkg/controller/sync/controller.go`,
//! `ensureDeletion`): its members' objects are deleted, or orphaned on
//! `kubefed.io/orphan`, and deletion waits for every placed cluster.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::propagation::action::{Action, Decision};
use crate::propagation::federated::FederatedObject;
use crate::propagation::member::{ManagedLabel, MemberState, managed_label, terminating};

/// Annotation on a federated object asking deletion to keep member objects.
pub const ORPHAN_ANNOTATION: &str = "kubefed.io/orphan";
/// Annotation with the DeleteOptions used for member deletes.
pub const DELETE_OPTION_ANNOTATION: &str = "kubefed.io/deleteoption";
/// Finalizer the sync controller keeps on federated objects.
pub const SYNC_FINALIZER: &str = "kubefed.io/sync-controller";

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
pub fn is_orphaning(fed: FederatedObject) -> bool {
    fed.annotation(ORPHAN_ANNOTATION) == Some("true")
}

/// A `kubefed.io/deleteoption` annotation that is not a JSON object
/// (upstream's message, `pkg/controller/sync/controller.go`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("could not deserialize delete options from annotation value '{text}'")]
pub struct DeleteOptionsError {
    pub text: String,
}

/// DeleteOptions from `kubefed.io/deleteoption` (only `propagationPolicy`,
/// `gracePeriodSeconds`, `preconditions` kept), `None` when absent.
pub fn delete_options(fed: FederatedObject) -> Result<Option<Value>, DeleteOptionsError> {
    let Some(text) = fed.annotation(DELETE_OPTION_ANNOTATION) else {
        return Ok(None);
    };
    let parsed: Value = serde_json::from_str(text)
        .ok()
        .filter(Value::is_object)
        .ok_or_else(|| DeleteOptionsError {
            text: text.to_string(),
        })?;
    let mut out = serde_json::Map::new();
    for key in ["propagationPolicy", "gracePeriodSeconds", "preconditions"] {
        if let Some(v) = parsed.get(key).filter(|v| !v.is_null()) {
            out.insert(key.to_string(), v.clone());
        }
    }
    Ok(Some(Value::Object(out)))
}

/// Decisions for a federated object with a deletionTimestamp, over the
/// clusters of its current placement (others are not examined).
///
/// Unlike upstream, the finalizer is never removed before the member
/// copies are dealt with, orphaning included: a one-shot run can be killed
/// between two requests, and a federated object that is gone can no longer
/// say what to delete. The record step releases it once every copy is
/// confirmed deleted or unlabelled ([`crate::propagation::record`]).
pub fn deletion_decisions(
    fed: FederatedObject,
    placed: &BTreeSet<String>,
    members: &[MemberState],
) -> Result<DeletionPlan, DeleteOptionsError> {
    let mut plan = DeletionPlan::default();
    if !fed.has_finalizer(SYNC_FINALIZER) {
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
        let managed = m
            .live
            .as_ref()
            .filter(|o| managed_label(o) == ManagedLabel::True);
        let Some(obj) = managed else { continue };
        let Some(action) = removal(orphan, options.as_ref(), obj, m.is_host_namespace) else {
            continue;
        };
        if !orphan {
            plan.remaining.push(m.cluster.to_string());
        }
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

/// What a labelled member copy of a federated object that is going needs
/// (`unjoin --cleanup` asks too): unlabelled when orphaning or the host's
/// own namespace, deleted with `options` otherwise, awaited once it is
/// terminating; `None` when nothing is left to do.
pub fn removal(
    orphan: bool,
    options: Option<&Value>,
    obj: &Value,
    is_host_namespace: bool,
) -> Option<Action> {
    if terminating(obj) {
        return (!orphan && !is_host_namespace).then_some(Action::AwaitRemoval);
    }
    Some(if orphan || is_host_namespace {
        Action::RemoveManagedLabel
    } else {
        Action::Delete {
            options: options.cloned(),
        }
    })
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
        if let Some(o) = &m.live
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
