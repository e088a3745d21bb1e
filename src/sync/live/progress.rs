//! How an engine tells its caller how far it got. The command decides how
//! to show it (a bar on a terminal, the watch's metrics); engines know no
//! terminal.

use crate::core::describe::{FederatedRef, ObjectKey, key_of};
use crate::core::held::Held;
use serde_json::Value;
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
    fn object_settled(&self, _settled: Settled) {}
    /// One of a federated object's writes was answered with `answer`
    /// (when [`Self::follows_objects`]): the watch holds it at once.
    fn answered(&self, _object: &FederatedRef, _answer: Answer) {}
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

/// An object as one of a round's own writes left it: the server's answer.
/// The watch holds it at once, ahead of the write's event: a busy host's
/// watch can bring that event seconds later, and a round deciding the
/// object meanwhile would write again from the version before (a finalizer
/// added twice, answered 409; member copies updated again for want of their
/// PropagatedVersion), and the event itself, once it comes, is no news.
/// KubeFed's sync controller keeps its versions so
/// (`pkg/controller/sync/version/manager.go` stores each version it
/// writes).
///
/// Built where the write was answered (the round's task), as the cache
/// holds it: a member copy as its view (`core::held`), so that what travels
/// to the watch's loop is small and the loop only compares versions. The
/// first sync at 10,000 × 10 answers some 130,000 writes; sent whole, they
/// took the watch's peak to 543 MiB (docs/performance/faults.md, run 15).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// Which object was written.
    pub of: Answered,
    /// Its namespace and name.
    pub key: ObjectKey,
    /// It as answered, held as its watch holds it.
    pub held: Held,
}

/// Which object a write answered: the federated object, its version, or a
/// member copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answered {
    /// The federated object: its finalizer added, its status written.
    Federated,
    /// Its PropagatedVersion or ClusterPropagatedVersion.
    Version,
    /// Its copy in this member, created or updated.
    Member(String),
}

impl Answer {
    /// The federated object as a write answered it.
    pub fn federated(v: Value) -> Answer {
        Answer::host(Answered::Federated, v)
    }

    /// Its (Cluster)PropagatedVersion as a write answered it.
    pub fn version(v: Value) -> Answer {
        Answer::host(Answered::Version, v)
    }

    /// A member copy as a create or update answered it: as the view decide
    /// reads, or `whole` when its type or object keeps fields other
    /// managers own (`core::propagation::foreign`).
    pub fn member(cluster: &str, v: &Value, whole: bool) -> Answer {
        Answer {
            of: Answered::Member(cluster.to_string()),
            key: key_of(v),
            held: match whole {
                true => Held::whole(v),
                false => Held::member_copy(v),
            },
        }
    }

    /// A host object, without managedFields as its watch holds it.
    fn host(of: Answered, mut v: Value) -> Answer {
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        Answer {
            of,
            key: key_of(&v),
            held: Held::whole(&v),
        }
    }
}
