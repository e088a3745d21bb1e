//! How an engine tells its caller how far it got. The command decides how
//! to show it (a bar on a terminal, the watch's metrics); engines know no
//! terminal.

use crate::core::describe::FederatedRef;
use std::time::{Duration, Instant};

/// How many member requests a run will make (once per round: a run in
/// phases adds them up), then each one done.
pub trait Progress: Sync {
    fn requests(&self, more: u64);
    fn request_done(&self);
    /// A member object was created, updated or deleted, its request taking
    /// `took` (retries included): the watch's
    /// `dispatch_operation_duration_seconds`.
    fn member_write(&self, _effect: &crate::core::propagation::record::Effect, _took: Duration) {}
    /// Whether [`Self::object_settled`] is wanted (the watch): the pipeline
    /// then keeps a tally of each object's jobs.
    fn follows_objects(&self) -> bool {
        false
    }
    /// Every request of one federated object in this round was answered
    /// (its member writes and write-back, its orphans' too): the watch lets
    /// another round take one it did not write from then on, not from the
    /// round's end.
    fn object_settled(&self, _settled: &Settled) {}
}

/// What became of one federated object once its round is done with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settled {
    pub object: FederatedRef,
    /// Some request for it failed: retry after a backoff.
    pub failed: bool,
    /// A member copy was created, updated, unlabelled or deleted.
    pub changed: bool,
    /// It changed a member or wrote to the host.
    pub wrote: bool,
    /// When its last request was answered.
    pub at: Instant,
}
