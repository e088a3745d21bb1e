//! The work queue of `reconcile --watch`: which federated objects to
//! re-decide next. Pure (time is passed in), so its rules are table tests.
//!
//! - A key marked again while it waits is queued once (de-duplication); it
//!   keeps the time it was first marked, which is where the propagation
//!   latency is measured from.
//! - A key whose last round failed waits before it is tried again:
//!   1 s, 2 s, 4 s ... up to 5 minutes (no hot loop while a member is down);
//!   a success forgets its failures. An event for a key in backoff does not
//!   cut its wait short (a broken object changed by someone is still broken;
//!   the full resync retries everything anyway).
//! - A key is worked on by one round at a time: taken keys are in flight
//!   until their round is done with them (`succeeded` or `failed`: at its
//!   end, or as soon as it decided a key it had nothing to write for); a key
//!   marked meanwhile waits for that (as client-go's workqueue holds a key
//!   that is dirty while processing), so concurrent rounds never decide
//!   the same object.
//! - A key whose round wrote something waits [`MIN_WRITE_INTERVAL`] before
//!   its next round: under churn (a member status changing many times a
//!   second), its writes are coalesced to at most one a second; the last
//!   change is still acted on, at the end of the interval.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// The first retry's delay.
pub const BASE_BACKOFF: Duration = Duration::from_secs(1);
/// The longest delay between retries.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// The least time between two rounds of one key that both write.
pub const MIN_WRITE_INTERVAL: Duration = Duration::from_secs(1);

/// Keys waiting to be processed, and the failures of those that failed.
#[derive(Debug)]
pub struct WorkQueue<K: Ord + Clone + std::hash::Hash> {
    /// Key → when it was first marked since it was last processed.
    pending: BTreeMap<K, Instant>,
    /// Key → (consecutive failures, not before).
    backoff: HashMap<K, (u32, Instant)>,
    /// Keys a round is working on → when they were first marked.
    in_flight: BTreeMap<K, Instant>,
    /// Keys whose last round wrote, within the last [`MIN_WRITE_INTERVAL`] → when.
    wrote: HashMap<K, Instant>,
}

impl<K: Ord + Clone + std::hash::Hash> Default for WorkQueue<K> {
    fn default() -> Self {
        WorkQueue {
            pending: BTreeMap::new(),
            backoff: HashMap::new(),
            in_flight: BTreeMap::new(),
            wrote: HashMap::new(),
        }
    }
}

impl<K: Ord + Clone + std::hash::Hash> WorkQueue<K> {
    /// Marks `key` (again) at `now`.
    pub fn add(&mut self, key: K, now: Instant) {
        self.pending.entry(key).or_insert(now);
    }

    /// How many keys wait (ready, in backoff, or marked while in flight).
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// How many keys rounds are working on.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Whether a round is working on `key`.
    pub fn is_in_flight(&self, key: &K) -> bool {
        self.in_flight.contains_key(key)
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Takes every key that may run at `now` (not in backoff, not in
    /// flight), with when it was first marked; they are in flight until
    /// [`Self::succeeded`], [`Self::failed`] or [`Self::abandon_in_flight`].
    pub fn take_ready(&mut self, now: Instant) -> Vec<(K, Instant)> {
        self.take_ready_at_most(now, usize::MAX, |_| false, |_| false)
    }

    /// [`Self::take_ready`], at most `limit` keys: those that go `first`,
    /// then the others, each in key order; the rest stay ready for the
    /// next take. (A namespace goes before what it holds.) Keys to `skip`
    /// stay ready for a later take: those a running slice of a full round
    /// holds (the queue does not track slices), or, for a slice taking its
    /// own, those outside it.
    pub fn take_ready_at_most(
        &mut self,
        now: Instant,
        limit: usize,
        first: impl Fn(&K) -> bool,
        skip: impl Fn(&K) -> bool,
    ) -> Vec<(K, Instant)> {
        self.wrote.retain(|_, at| *at + MIN_WRITE_INTERVAL > now);
        let (mut ready, later): (Vec<&K>, Vec<&K>) = (self.pending.keys())
            .filter(|k| self.is_ready(k, now) && !skip(k))
            .partition(|k| first(k));
        ready.extend(later);
        ready.truncate(limit);
        let ready: Vec<K> = ready.into_iter().cloned().collect();
        ready
            .into_iter()
            .map(|k| {
                let since = self.pending.remove(&k).expect("pending key");
                self.in_flight.insert(k.clone(), since);
                (k, since)
            })
            .collect()
    }

    fn is_ready(&self, k: &K, now: Instant) -> bool {
        !self.in_flight.contains_key(k) && self.not_before(k, now) <= now
    }

    /// When `k` may run next, its round aside: after its backoff and its
    /// write interval (`now` when neither holds it back).
    fn not_before(&self, k: &K, now: Instant) -> Instant {
        let backoff = self.backoff.get(k).map_or(now, |(_, at)| *at);
        let written = self.wrote.get(k).map_or(now, |at| *at + MIN_WRITE_INTERVAL);
        backoff.max(written)
    }

    /// Whether some key may run at `now`.
    pub fn has_ready(&self, now: Instant) -> bool {
        self.pending.keys().any(|k| self.is_ready(k, now))
    }

    /// When the next key in backoff may run (`None`: nothing waits, or
    /// something is ready now; keys in flight wait for their round).
    pub fn next_retry(&self, now: Instant) -> Option<Instant> {
        self.pending
            .keys()
            .filter(|k| !self.in_flight.contains_key(*k))
            .map(|k| self.not_before(k, now))
            .min()
            .filter(|at| *at > now)
    }

    /// `key` failed at `now`: it is queued again after its backoff. Returns
    /// the delay.
    pub fn failed(&mut self, key: K, first_marked: Instant, now: Instant) -> Duration {
        self.in_flight.remove(&key);
        let failures = self.backoff.get(&key).map_or(0, |(n, _)| *n) + 1;
        let delay = backoff(failures);
        self.backoff.insert(key.clone(), (failures, now + delay));
        let at = self.pending.entry(key).or_insert(first_marked);
        *at = (*at).min(first_marked);
        delay
    }

    /// `key` succeeded: its failures are forgotten.
    pub fn succeeded(&mut self, key: &K) {
        self.in_flight.remove(key);
        self.backoff.remove(key);
    }

    /// `key`'s round (which succeeded) wrote, its last write answered at
    /// `at`: its next round waits until [`MIN_WRITE_INTERVAL`] after.
    pub fn wrote(&mut self, key: K, at: Instant) {
        self.wrote.insert(key, at);
    }

    /// The rounds in flight were cancelled (the lock could not be renewed):
    /// their keys wait again, as first marked, with no backoff added.
    pub fn abandon_in_flight(&mut self) {
        for (k, since) in std::mem::take(&mut self.in_flight) {
            let at = self.pending.entry(k).or_insert(since);
            *at = (*at).min(since);
        }
    }

    /// Consecutive failures of `key`.
    pub fn failures(&self, key: &K) -> u32 {
        self.backoff.get(key).map_or(0, |(n, _)| *n)
    }
}

/// The delay after `failures` consecutive failures (1 s, doubling, capped).
pub fn backoff(failures: u32) -> Duration {
    doubling(BASE_BACKOFF, failures, MAX_BACKOFF)
}

/// `first` after the first failure, doubled after each one more, at most
/// `max` (and no overflow however many failures).
pub fn doubling(first: Duration, failures: u32, max: Duration) -> Duration {
    let doubled = first
        .checked_mul(
            1u32.checked_shl(failures.saturating_sub(1))
                .unwrap_or(u32::MAX),
        )
        .unwrap_or(max);
    doubled.min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_marked_twice_runs_once_and_keeps_its_first_time() {
        let t0 = Instant::now();
        let mut q = WorkQueue::default();
        q.add("a", t0);
        q.add("b", t0 + Duration::from_millis(5));
        q.add("a", t0 + Duration::from_millis(9));
        assert_eq!(q.len(), 2);
        let ready = q.take_ready(t0 + Duration::from_millis(10));
        assert_eq!(ready, [("a", t0), ("b", t0 + Duration::from_millis(5))]);
        assert!(q.is_empty());
        assert!(q.take_ready(t0 + Duration::from_secs(1)).is_empty());
    }

    #[test]
    fn failures_back_off_exponentially_and_a_success_forgets_them() {
        let table = [
            (1, 1),
            (2, 2),
            (3, 4),
            (4, 8),
            (9, 256),
            (10, 300),
            (64, 300),
            (u32::MAX, 300),
        ];
        for (failures, secs) in table {
            assert_eq!(backoff(failures), Duration::from_secs(secs), "{failures}");
        }
        let t0 = Instant::now();
        let mut q = WorkQueue::default();
        q.add("a", t0);
        let (k, first) = q.take_ready(t0).remove(0);
        assert_eq!(q.failed(k, first, t0), Duration::from_secs(1));
        // Waiting: not ready, and an event does not cut the wait short.
        q.add("a", t0 + Duration::from_millis(100));
        assert!(q.take_ready(t0 + Duration::from_millis(500)).is_empty());
        assert_eq!(q.next_retry(t0), Some(t0 + Duration::from_secs(1)));
        let again = q.take_ready(t0 + Duration::from_secs(1));
        assert_eq!(
            again,
            [("a", t0)],
            "latency still counts from the first mark"
        );
        assert_eq!(
            q.failed("a", t0, t0 + Duration::from_secs(1)),
            Duration::from_secs(2)
        );
        assert_eq!(q.failures(&"a"), 2);
        let _ = q.take_ready(t0 + Duration::from_secs(3));
        q.succeeded(&"a");
        assert_eq!(q.failures(&"a"), 0);
        q.add("a", t0 + Duration::from_secs(4));
        assert_eq!(
            q.take_ready(t0 + Duration::from_secs(4)).len(),
            1,
            "no wait once it succeeded"
        );
    }

    #[test]
    fn a_key_in_flight_is_not_taken_twice_and_runs_again_after_its_round() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(10);
        let mut q = WorkQueue::default();
        q.add("a", t0);
        q.add("b", t0);
        assert_eq!(q.take_ready(t0).len(), 2);
        assert_eq!((q.len(), q.in_flight()), (0, 2));
        assert!(q.is_in_flight(&"a"));
        q.add("a", t1);
        assert!(q.take_ready(t1).is_empty(), "a is still in flight");
        assert!(!q.has_ready(t1));
        assert_eq!(q.next_retry(t1), None, "it waits for its round, not a time");
        q.succeeded(&"a");
        assert!(!q.is_in_flight(&"a"));
        assert_eq!(
            q.take_ready(t1),
            [("a", t1)],
            "marked while in flight: runs again"
        );
        q.succeeded(&"a");
        // Cancelled rounds: their keys come back as first marked, no backoff.
        q.add("b", t1);
        q.abandon_in_flight();
        assert_eq!((q.len(), q.in_flight()), (1, 0));
        assert_eq!(q.failures(&"b"), 0);
        assert_eq!(q.take_ready(t1), [("b", t0)], "the earlier mark counts");
    }

    #[test]
    fn a_key_that_wrote_waits_a_second_and_its_marks_coalesce() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut q = WorkQueue::default();
        q.add("hot", t0);
        assert_eq!(q.take_ready(t0).len(), 1);
        q.succeeded(&"hot");
        q.wrote("hot", ms(10));
        // Marked ten times within the second: one round, at its end.
        for i in 1..=10 {
            q.add("hot", ms(50 * i));
            assert!(q.take_ready(ms(50 * i)).is_empty(), "mark {i}");
        }
        assert_eq!(q.next_retry(ms(500)), Some(ms(1010)));
        assert_eq!(q.take_ready(ms(1010)), [("hot", ms(50))]);
        // A round that wrote nothing holds nothing back.
        q.succeeded(&"hot");
        q.add("hot", ms(1020));
        assert_eq!(q.take_ready(ms(1020)).len(), 1);
        q.succeeded(&"hot");
        // Nor does a write long ago; and another key is never held back.
        q.wrote("hot", ms(1030));
        q.add("cold", ms(1040));
        assert_eq!(q.take_ready(ms(1040)), [("cold", ms(1040))]);
        q.add("hot", ms(2100));
        assert_eq!(q.take_ready(ms(2100)).len(), 1);
    }

    #[test]
    fn a_limited_take_leaves_the_rest_ready() {
        let t0 = Instant::now();
        let mut q = WorkQueue::default();
        for k in ["c", "a", "b"] {
            q.add(k, t0);
        }
        let none_first = |_: &&str| false;
        assert_eq!(
            q.take_ready_at_most(t0, 2, none_first, |_| false),
            [("a", t0), ("b", t0)]
        );
        assert_eq!((q.len(), q.in_flight()), (1, 2));
        assert!(q.has_ready(t0));
        assert_eq!(
            q.take_ready_at_most(t0, 2, none_first, |_| false),
            [("c", t0)]
        );

        for k in ["ns/z", "cm/a", "cm/b", "ns/y"] {
            q.add(k, t0);
        }
        let namespaces_first = |k: &&str| k.starts_with("ns/");
        assert_eq!(
            q.take_ready_at_most(t0, 3, namespaces_first, |_| false),
            [("ns/y", t0), ("ns/z", t0), ("cm/a", t0)]
        );
    }

    #[test]
    fn a_skipped_key_stays_ready_for_a_later_take() {
        let t0 = Instant::now();
        let mut q = WorkQueue::default();
        for k in ["a", "b", "c"] {
            q.add(k, t0);
        }
        let slice = |k: &&str| *k == "b";
        assert_eq!(
            q.take_ready_at_most(t0, 10, |_| false, slice),
            [("a", t0), ("c", t0)]
        );
        assert!(q.has_ready(t0), "b waits, ready, for its slice to end");
        assert_eq!((q.len(), q.in_flight()), (1, 2));
        assert!(q.take_ready_at_most(t0, 10, |_| false, slice).is_empty());
        assert_eq!(
            q.take_ready_at_most(t0, 10, |_| false, |_| false),
            [("b", t0)]
        );
    }

    #[test]
    fn one_key_in_backoff_does_not_hold_back_the_others() {
        let t0 = Instant::now();
        let mut q = WorkQueue::default();
        q.failed("down", t0, t0);
        q.add("up", t0);
        assert_eq!(q.take_ready(t0), [("up", t0)]);
        assert_eq!(q.next_retry(t0), Some(t0 + BASE_BACKOFF));
        q.succeeded(&"up");
        q.add("up", t0);
        assert_eq!(q.next_retry(t0), None, "something is ready now");
    }
}
