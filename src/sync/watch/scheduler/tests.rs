//! The scheduler alone: which rounds start, over which keys, and what
//! becomes of each key, on instants of the tests' own (no server, no
//! clock: a second later is `t(1)`).

use super::*;
use crate::core::describe::ObjectKey;
use crate::core::run::queue::{BASE_BACKOFF, MIN_WRITE_INTERVAL};
use std::sync::LazyLock;

static T0: LazyLock<Instant> = LazyLock::new(Instant::now);

/// `secs` seconds into the test.
fn t(secs: u64) -> Instant {
    *T0 + Duration::from_secs(secs)
}

fn cm(name: &str) -> WorkKey {
    WorkKey::new("configmaps", ObjectKey::new("shop", name))
}

fn ns(name: &str) -> WorkKey {
    WorkKey::new("namespaces", ObjectKey::new(name, name))
}

/// Namespaces go before what they hold.
fn namespaces_first(k: &WorkKey) -> bool {
    &*k.type_name == "namespaces"
}

/// The next rounds at `now`, no full round due (a plan would be a bug).
fn queue_rounds(s: &mut Scheduler, now: Instant) -> Vec<RoundStart> {
    let next = s.next(false, now, namespaces_first, || unreachable!());
    assert!(!next.planned_full && !next.full_due);
    next.starts
}

/// The keys a queue round covers.
fn keys(start: &RoundStart) -> Vec<WorkKey> {
    match &start.covers {
        Covers::Keys(keys) => keys.iter().cloned().collect(),
        Covers::Slice { nth, .. } => panic!("slice {nth} where a queue round was expected"),
    }
}

/// What a round's task reports for one key it decided.
fn settled(k: &WorkKey, outcome: Outcome, at: Instant) -> Settled {
    Settled {
        object: k.clone(),
        failed: outcome == Outcome::Failed,
        changed: outcome == Outcome::Changed,
        wrote: outcome == Outcome::Changed,
        at,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Outcome {
    /// Nothing to write.
    InSync,
    /// Wrote to a member.
    Changed,
    /// A request for it failed.
    Failed,
}

/// A round's result over `keys`, each with its outcome.
fn result(keys: &[(&WorkKey, Outcome)], at: Instant) -> RoundKeys {
    let mut r = RoundKeys::default();
    for (k, outcome) in keys {
        match outcome {
            Outcome::InSync => {}
            Outcome::Changed => {
                r.changed.insert((*k).clone());
                r.wrote.insert((*k).clone(), at);
            }
            Outcome::Failed => {
                r.failed.insert((*k).clone());
            }
        }
    }
    r
}

#[test]
fn a_marked_key_is_taken_by_one_round_and_not_again_while_it_runs() {
    let mut s = Scheduler::new(10);
    s.mark(cm("a"), t(0));
    s.mark(cm("a"), t(0));
    let starts = queue_rounds(&mut s, t(0));
    assert_eq!(starts.len(), 1);
    assert_eq!(keys(&starts[0]), [cm("a")]);
    assert!(s.held_by_round(&cm("a")));
    // Marked again while its round runs: it waits for that round.
    s.mark(cm("a"), t(1));
    assert!(queue_rounds(&mut s, t(1)).is_empty());
    s.finish(starts[0].id, Some(&RoundKeys::default()), t(2));
    assert!(!s.held_by_round(&cm("a")));
    assert_eq!(keys(&queue_rounds(&mut s, t(2))[0]), [cm("a")]);
}

/// `--round-size` cuts a burst into rounds; two rounds' worth of keys are
/// in flight at most, and the rest waits for one to end.
#[test]
fn a_burst_is_cut_into_rounds_of_round_size_two_at_a_time() {
    let mut s = Scheduler::new(2);
    for name in ["a", "b", "c", "d", "e"] {
        s.mark(cm(name), t(0));
    }
    let starts = queue_rounds(&mut s, t(0));
    let taken: Vec<Vec<WorkKey>> = starts.iter().map(keys).collect();
    assert_eq!(taken, [vec![cm("a"), cm("b")], vec![cm("c"), cm("d")]]);
    assert_eq!(s.running(), 2);
    assert!(queue_rounds(&mut s, t(0)).is_empty());
    s.finish(starts[0].id, Some(&RoundKeys::default()), t(1));
    assert_eq!(keys(&queue_rounds(&mut s, t(1))[0]), [cm("e")]);
}

#[test]
fn namespaces_are_taken_before_what_they_hold() {
    let mut s = Scheduler::new(2);
    s.mark(cm("a"), t(0));
    s.mark(cm("b"), t(0));
    s.mark(ns("shop"), t(0));
    let starts = queue_rounds(&mut s, t(0));
    // Each round's keys in key order; the namespace is in the first.
    assert_eq!(keys(&starts[0]), [cm("a"), ns("shop")]);
    assert_eq!(keys(&starts[1]), [cm("b")]);
}

/// A failed key waits its backoff (a member that is down is not asked in
/// a hot loop); one whose round wrote waits the write interval, so churn
/// is coalesced; the latency of a change is counted from its first mark.
#[test]
fn a_failed_key_waits_its_backoff_and_a_written_one_the_write_interval() {
    let mut s = Scheduler::new(10);
    s.mark(cm("broken"), t(0));
    s.mark(cm("changed"), t(0));
    let round = queue_rounds(&mut s, t(1)).remove(0);
    let outcome = [
        (&cm("broken"), Outcome::Failed),
        (&cm("changed"), Outcome::Changed),
    ];
    let settles = s.finish(round.id, Some(&result(&outcome, t(3))), t(3));
    assert_eq!(settles.latencies, [Duration::from_secs(3)]);
    s.mark(cm("changed"), t(3));
    assert!(queue_rounds(&mut s, t(3)).is_empty());
    assert_eq!(s.next_retry(t(3)), Some(t(3) + MIN_WRITE_INTERVAL));
    let later = queue_rounds(&mut s, t(3) + MIN_WRITE_INTERVAL);
    assert_eq!(keys(&later[0]), [cm("broken"), cm("changed")]);
    assert_eq!(t(3) + BASE_BACKOFF, t(3) + MIN_WRITE_INTERVAL);
}

/// A round lets an object it had nothing to write for go as soon as it has
/// decided it: a change made meanwhile is taken by another round at once,
/// and the first round's end leaves it alone.
#[test]
fn a_key_settled_early_is_free_for_the_next_round_before_its_round_ends() {
    let mut s = Scheduler::new(10);
    s.mark(cm("a"), t(0));
    s.mark(cm("slow"), t(0));
    let first = queue_rounds(&mut s, t(0)).remove(0);
    s.settled(first.id, settled(&cm("a"), Outcome::InSync, t(1)), t(1));
    s.mark(cm("a"), t(2));
    let second = queue_rounds(&mut s, t(2)).remove(0);
    assert_eq!(keys(&second), [cm("a")]);
    // The first round ends, with a's outcome as it had it: a is the second's.
    let outcome = [(&cm("a"), Outcome::Failed)];
    s.finish(first.id, Some(&result(&outcome, t(3))), t(3));
    assert!(s.held_by_round(&cm("a")));
    assert!(!s.held_by_round(&cm("slow")));
}

/// An object the round wrote stays its own until it ends.
#[test]
fn a_key_a_round_wrote_stays_held_until_the_round_ends() {
    let mut s = Scheduler::new(10);
    s.mark(cm("a"), t(0));
    let round = queue_rounds(&mut s, t(0)).remove(0);
    s.settled(round.id, settled(&cm("a"), Outcome::Changed, t(1)), t(1));
    assert!(s.held_by_round(&cm("a")));
}

/// A change of an object the controller writes, seen while a round holds
/// it, is queued after that round unless its answer shows it was the
/// round's own write.
#[test]
fn a_held_change_is_queued_after_its_round_unless_it_was_the_rounds_own_write() {
    let own = (Written::Version(ObjectKey::new("shop", "configmap-a")), 7);
    let other = (Written::Version(ObjectKey::new("shop", "configmap-b")), 9);
    let mut s = Scheduler::new(10);
    s.mark(cm("a"), t(0));
    s.mark(cm("b"), t(0));
    let round = queue_rounds(&mut s, t(0)).remove(0);
    s.mark_written(cm("a"), own.clone(), t(1));
    s.mark_written(cm("b"), other, t(1));
    s.own_write_answered(&cm("a"), &own);
    s.finish(round.id, Some(&RoundKeys::default()), t(2));
    let next = queue_rounds(&mut s, t(2));
    assert_eq!(keys(&next[0]), [cm("b")]);
    // Not held by any round: a change is queued at once.
    s.mark_written(
        cm("c"),
        (Written::Version(ObjectKey::new("shop", "c")), 1),
        t(3),
    );
    assert_eq!(keys(&queue_rounds(&mut s, t(3))[0]), [cm("c")]);
}

/// A round that fails as a whole (the host did not answer) backs off every
/// key it took.
#[test]
fn a_round_that_fails_as_a_whole_backs_off_every_key() {
    let mut s = Scheduler::new(10);
    s.mark(cm("a"), t(0));
    s.mark(cm("b"), t(0));
    let round = queue_rounds(&mut s, t(0)).remove(0);
    s.finish(round.id, None, t(1));
    assert!(queue_rounds(&mut s, t(1)).is_empty());
    assert_eq!(s.next_retry(t(1)), Some(t(1) + BASE_BACKOFF));
    assert_eq!(keys(&queue_rounds(&mut s, t(2))[0]), [cm("a"), cm("b")]);
}

/// A full round asked for while rounds run starts after them, alone.
#[test]
fn a_full_round_waits_for_the_rounds_in_flight() {
    let mut s = Scheduler::new(10);
    s.mark(cm("a"), t(0));
    let round = queue_rounds(&mut s, t(0)).remove(0);
    let next = s.next(true, t(1), namespaces_first, || unreachable!());
    assert!(next.full_due && next.starts.is_empty());
    s.finish(round.id, Some(&RoundKeys::default()), t(2));
    let next = s.next(true, t(2), namespaces_first, || [cm("a"), cm("b")].into());
    assert!(next.planned_full && !next.full_due);
    let whole = Covers::Slice {
        nth: 1,
        last: true,
        whole: true,
    };
    assert_eq!(next.starts[0].covers, whole);
    // A whole round holds every key: a change waits for it.
    s.mark(cm("z"), t(3));
    assert!(s.held_by_round(&cm("z")));
    assert!(queue_rounds(&mut s, t(3)).is_empty());
    let settles = s.finish(next.starts[0].id, Some(&RoundKeys::default()), t(4));
    assert!(settles.full_done);
    assert_eq!(keys(&queue_rounds(&mut s, t(4))[0]), [cm("z")]);
}

/// A full round over more than `--round-size` keys runs in slices,
/// namespaces first, in slices of their own (`[shop] [a b] [c d] [e]`): the first alone, then two at a time, with queue
/// rounds between them for the keys no running slice holds; a key a queue
/// round took leaves the slices not started yet.
#[test]
fn a_large_full_round_runs_in_slices_with_queue_rounds_between() {
    let mut s = Scheduler::new(2);
    let all = [cm("a"), cm("b"), cm("c"), cm("d"), cm("e"), ns("shop")].into();
    let next = s.next(true, t(0), namespaces_first, || all);
    let slice = |nth, last| Covers::Slice {
        nth,
        last,
        whole: false,
    };
    assert_eq!(next.starts.len(), 1);
    assert_eq!(next.starts[0].covers, slice(1, false));
    let first: Vec<WorkKey> = s.slice_keys(1).unwrap().iter().cloned().collect();
    assert_eq!(first, [ns("shop")]);
    // The first slice runs alone and holds every key.
    s.mark(cm("e"), t(1));
    assert!(
        s.next(false, t(1), namespaces_first, || unreachable!())
            .starts
            .is_empty()
    );
    s.finish(next.starts[0].id, Some(&RoundKeys::default()), t(2));
    // Then two slices at once, and a queue round for e beside them.
    let next = s.next(false, t(2), namespaces_first, || unreachable!());
    let covers: Vec<&Covers> = next.starts.iter().map(|r| &r.covers).collect();
    assert_eq!(covers[..2], [&slice(2, false), &slice(3, false)]);
    assert_eq!(keys(&next.starts[2]), [cm("e")]);
    // e left the last slice, which still runs (for DNS and listings).
    s.finish(next.starts[0].id, Some(&RoundKeys::default()), t(3));
    let last = s.next(false, t(3), namespaces_first, || unreachable!());
    assert_eq!(last.starts[0].covers, slice(4, true));
    assert!(s.slice_keys(4).unwrap().is_empty());
    let ids: Vec<u64> = [&next.starts[1], &next.starts[2], &last.starts[0]]
        .iter()
        .map(|r| r.id)
        .collect();
    let done: Vec<bool> = (ids.iter())
        .map(|id| s.finish(*id, Some(&RoundKeys::default()), t(4)).full_done)
        .collect();
    assert_eq!(done, [false, false, true]);
}

/// The lock is not renewed: every round is cancelled, its keys wait
/// again as first marked (no backoff), and the full round is dropped.
#[test]
fn abandoned_rounds_give_their_keys_back() {
    let mut s = Scheduler::new(10);
    s.mark(cm("a"), t(0));
    let _ = queue_rounds(&mut s, t(0));
    let _ = s.next(true, t(0), namespaces_first, || unreachable!());
    s.abandon();
    assert_eq!(s.running(), 0);
    assert!(!s.held_by_round(&cm("a")));
    let next = s.next(true, t(1), namespaces_first, || [cm("a")].into());
    assert!(next.planned_full);
    // The full round took a as first marked: its latency counts from t(0).
    let outcome = [(&cm("a"), Outcome::Changed)];
    let settles = s.finish(next.starts[0].id, Some(&result(&outcome, t(4))), t(4));
    assert_eq!(settles.latencies, [Duration::from_secs(4)]);
    assert!(settles.full_done);
}
