//! One member cluster's decision for one federated object: the request
//! ([`Action`]), the per-cluster status upstream records when it succeeds
//! ([`ClusterStatus`], `pkg/controller/sync/status`), and what `status
//! --live` says of a member.

use std::sync::Arc;

use serde_json::Value;

use crate::propagation::desired::DesiredError;
use crate::propagation::drift::Drift;

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
    /// Ours, not upstream's: the member's copy failed a progressive
    /// rollout's gate (`rollout::gate`); KubeFed's controller taking over
    /// writes its own status in its place.
    RolloutHalted,
    /// Ours, not upstream's: a report-only object's copy differs from what
    /// a run would write (`kubefedctl.kubefed.io/apply: ReportDiff`,
    /// `reconcile --report-only`), and nothing was written. KubeFed's
    /// controller taking over writes its own status in its place.
    Drifted,
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
            RolloutHalted => "RolloutHalted",
            Drifted => "Drifted",
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
            RolloutHalted,
            Drifted,
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

    pub(crate) fn from_desired_error(e: &DesiredError) -> ClusterStatus {
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
    /// Report-only (`kubefedctl.kubefed.io/apply: ReportDiff`): no
    /// request; how the copy differs from what would be written.
    Report(Drift),
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
            Action::Report(_) => "report",
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

/// What `status --live` says of one member for one federated object: the
/// decide step's decision read as a verdict, so that `status --live` and
/// `reconcile --dry-run` can never disagree. Only `in-sync` is healthy;
/// `None`: nothing there and nothing to do (not placed).
pub fn live_verdict(action: &Action, status: Option<ClusterStatus>) -> Option<&'static str> {
    Some(match action {
        // A placed copy that is being deleted (and will be created again).
        Action::Unchanged | Action::Update { .. }
            if status == Some(ClusterStatus::WaitingForRemoval) =>
        {
            "terminating"
        }
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
        Action::Report(d) if d.is_in_sync() => "in-sync",
        Action::Report(Drift::Missing) => "missing",
        Action::Report(Drift::Unplaced) => "unplaced",
        Action::Report(Drift::Fields(_)) => "drifted",
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
        let table: [(Action, Option<ClusterStatus>, Option<&str>); 13] = [
            (Action::Unchanged, None, Some("in-sync")),
            (
                Action::Unchanged,
                Some(WaitingForRemoval),
                Some("terminating"),
            ),
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
