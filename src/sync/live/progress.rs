//! How an engine tells its caller how far it got. The command decides how
//! to show it (a bar on a terminal, the watch's metrics); engines know no
//! terminal.

use std::time::Duration;

/// How many member requests a run will make (once per round: a run in
/// phases adds them up), then each one done.
pub trait Progress: Sync {
    fn requests(&self, more: u64);
    fn request_done(&self);
    /// A member object was created, updated or deleted, its request taking
    /// `took` (retries included): the watch's
    /// `dispatch_operation_duration_seconds`.
    fn member_write(&self, _effect: &crate::core::propagation::record::Effect, _took: Duration) {}
}
