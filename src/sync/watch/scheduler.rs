//! The round scheduler: which keys the next rounds take, and what becomes
//! of each key when its round is done with it. It owns the round
//! bookkeeping the loop once shared — the work queue, the full round's
//! slices, each round's keys not settled yet, and the changes held while a
//! round holds their object — and does no I/O: the controller asks it for
//! rounds to start, observes and runs them (`rounds`), and hands their news
//! back. Time is always passed in, so its tests run on instants of their
//! own, as kube-runtime's scheduler is tested on a paused clock.
//!
//! A full round covers every key, in slices of at most `--round-size` keys
//! (the namespaces' and CRDs' first, `first`); the first slice runs alone,
//! the others [`SLICES_IN_FLIGHT`] at a time, and queue rounds take the
//! ready keys no running slice holds between them.

use super::cache::{WorkKey, Written};
use crate::core::run::queue::WorkQueue;
use crate::sync::live::progress::Settled;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// Rounds at once. Each works on objects no other round holds; the bound
/// only keeps a storm of events from opening unbounded tasks.
pub(super) const ROUNDS_IN_FLIGHT: usize = 64;

/// Slices of a full round at once, after its first: one slice's last
/// writes overlap the next one's first, as they did in one round.
const SLICES_IN_FLIGHT: usize = 2;

/// One change the controller's own write may have made: the object and
/// the resourceVersion its event carried.
pub(super) type SeenWrite = (Written, u64);

/// The round bookkeeping of one term of leadership.
pub(super) struct Scheduler {
    queue: WorkQueue<WorkKey>,
    /// A full round under way (it runs alone, then in slices).
    full: Option<FullRound>,
    /// The rounds running, by number: their keys not settled yet.
    settling: HashMap<u64, Settling>,
    next_id: u64,
    /// Keys a round holds that a change of an object the controller
    /// writes touched meanwhile, since when: queued once no round holds
    /// them, unless each change was a round's own write, which its answer
    /// names ([`Scheduler::own_write_answered`]).
    held: HashMap<WorkKey, (Instant, Vec<SeenWrite>)>,
    /// `--round-size`.
    round_size: usize,
}

/// A round the scheduler started: the controller observes what it covers
/// and runs it as a task.
#[derive(Debug, PartialEq)]
pub(super) struct RoundStart {
    /// Its number, which its news and result carry back.
    pub id: u64,
    pub covers: Covers,
}

/// What a round covers.
#[derive(Debug, PartialEq)]
pub(super) enum Covers {
    /// Keys the queue had ready.
    Keys(BTreeSet<WorkKey>),
    /// The `nth` slice of a full round ([`Scheduler::slice_keys`]); the
    /// last one started also passes DNS; a `whole` round is observed whole.
    Slice { nth: usize, last: bool, whole: bool },
}

/// What [`Scheduler::next`] did.
#[derive(Debug, Default)]
pub(super) struct Next {
    /// Rounds to run, in order.
    pub starts: Vec<RoundStart>,
    /// A full round was planned (its first slice is in `starts`).
    pub planned_full: bool,
    /// A full round is still due: one asked for while rounds run.
    pub full_due: bool,
}

/// A round's keys by what became of them, from its outcome.
#[derive(Debug, Default)]
pub(super) struct RoundKeys {
    pub failed: BTreeSet<WorkKey>,
    pub changed: BTreeSet<WorkKey>,
    /// Changed a member or wrote to the host, and when its last request
    /// was answered: its next round waits a second from then.
    pub wrote: BTreeMap<WorkKey, Instant>,
}

/// What a key's settling tells the metrics.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Settles {
    /// From first marked to a round that changed a member, per key.
    pub latencies: Vec<Duration>,
    /// The full round ended with this round: the federation is in sync.
    pub full_done: bool,
}

/// A full round under way: its keys, cut into slices. The first slice,
/// and a full round small enough to be one round (`whole`), hold every key
/// while they run.
struct FullRound {
    /// The slices still to run, the next one last.
    left: Vec<BTreeSet<WorkKey>>,
    /// How many slices it has.
    slices: usize,
    /// The slices running, by their number, with their keys.
    running: BTreeMap<usize, BTreeSet<WorkKey>>,
    /// Few enough keys for one round: observed whole.
    whole: bool,
    /// How many of the queue's keys in flight the running slices took.
    taken: usize,
}

/// A round in flight: the queue's keys it took that it has not settled
/// yet, with when they were first marked, and those it settled (the rest
/// of its result leaves them alone).
#[derive(Default)]
struct Settling {
    /// The number of a full round's slice.
    slice: Option<usize>,
    taken: BTreeMap<WorkKey, Instant>,
    released: BTreeSet<WorkKey>,
}

impl Scheduler {
    pub(super) fn new(round_size: usize) -> Scheduler {
        Scheduler {
            queue: WorkQueue::default(),
            full: None,
            settling: HashMap::new(),
            next_id: 0,
            held: HashMap::new(),
            round_size: round_size.max(1),
        }
    }

    /// A change touched `k`: its next round decides it.
    pub(super) fn mark(&mut self, k: WorkKey, now: Instant) {
        self.queue.add(k, now);
    }

    /// A change of an object the controller writes touched `k`: held while
    /// a round holds `k` (it may be that round's own write), else queued.
    pub(super) fn mark_written(&mut self, k: WorkKey, seen: SeenWrite, now: Instant) {
        if self.held_by_round(&k) {
            let (_, changes) = self.held.entry(k).or_insert((now, Vec::new()));
            changes.push(seen);
        } else {
            self.queue.add(k, now);
        }
    }

    /// A round's write of `k` was answered: a change held for `k` that was
    /// this write is not news.
    pub(super) fn own_write_answered(&mut self, k: &WorkKey, seen: &SeenWrite) {
        if let Some((_, changes)) = self.held.get_mut(k) {
            changes.retain(|c| c != seen);
            if changes.is_empty() {
                self.held.remove(k);
            }
        }
    }

    /// Keys waiting for a round (in flight ones included).
    pub(super) fn depth(&self) -> usize {
        self.queue.len()
    }

    /// When a key waiting for its backoff or write interval is due.
    pub(super) fn next_retry(&self, now: Instant) -> Option<Instant> {
        self.queue.next_retry(now)
    }

    /// Rounds in flight.
    pub(super) fn running(&self) -> usize {
        self.settling.len()
    }

    /// Whether a round holds `k`: the queue's key in flight, or a running
    /// slice's.
    pub(super) fn held_by_round(&self, k: &WorkKey) -> bool {
        self.queue.is_in_flight(k) || self.full.as_ref().is_some_and(|f| f.holds(k))
    }

    /// The keys of the full round's running `nth` slice.
    pub(super) fn slice_keys(&self, nth: usize) -> Option<&BTreeSet<WorkKey>> {
        self.full.as_ref()?.running.get(&nth)
    }

    /// The rounds that may start now. A full round (`full_due`, or one
    /// asked for meanwhile) starts once no round runs, with `plan` giving
    /// its keys, and runs in slices with queue rounds between them.
    /// `first`: keys taken before others (`Controller::goes_first`).
    pub(super) fn next(
        &mut self,
        full_due: bool,
        now: Instant,
        first: impl Fn(&WorkKey) -> bool,
        plan: impl FnOnce() -> BTreeSet<WorkKey>,
    ) -> Next {
        let mut next = Next::default();
        if self.full.is_some() {
            while self.may_start_slice() {
                next.starts.extend(self.start_slice(now));
            }
            self.start_queue_rounds(now, &first, &mut next.starts);
            next.full_due = full_due;
            return next;
        }
        if full_due {
            if self.settling.is_empty() {
                self.plan_full_round(plan(), &first);
                next.planned_full = true;
                next.starts.extend(self.start_slice(now));
            } else {
                next.full_due = true;
            }
            return next;
        }
        self.start_queue_rounds(now, &first, &mut next.starts);
        next
    }

    /// Rounds over the keys the queue has ready, as many as the limits
    /// leave room for.
    fn start_queue_rounds(
        &mut self,
        now: Instant,
        first: &impl Fn(&WorkKey) -> bool,
        starts: &mut Vec<RoundStart>,
    ) {
        while self.settling.len() < ROUNDS_IN_FLIGHT
            && self.in_queue_rounds() < self.keys_in_flight()
            && self.queue.has_ready(now)
        {
            match self.start_round(now, first) {
                Some(start) => starts.push(start),
                None => break,
            }
        }
    }

    /// A full round's keys, in slices; those that go `first` in slices of
    /// their own, so that the first slice, which runs alone, is short.
    fn plan_full_round(&mut self, keys: BTreeSet<WorkKey>, first: &impl Fn(&WorkKey) -> bool) {
        let size = self.round_size;
        let whole = keys.len() <= size;
        let mut left: Vec<BTreeSet<WorkKey>> = Vec::new();
        if whole {
            left.push(BTreeSet::new());
        } else {
            let (ahead, rest): (Vec<WorkKey>, Vec<WorkKey>) = keys.into_iter().partition(first);
            let slices = ahead.chunks(size).chain(rest.chunks(size));
            left = slices.map(|s| s.iter().cloned().collect()).collect();
            left.reverse();
        }
        self.full = Some(FullRound {
            running: BTreeMap::new(),
            slices: left.len(),
            left,
            whole,
            taken: 0,
        });
    }

    /// Whether the full round's next slice may start: the first alone, the
    /// others [`SLICES_IN_FLIGHT`] at a time.
    fn may_start_slice(&self) -> bool {
        let Some(f) = &self.full else {
            return false;
        };
        let started = f.slices - f.left.len();
        let running = f.running.len();
        !f.left.is_empty() && (running == 0 || (started >= 2 && running < SLICES_IN_FLIGHT))
    }

    /// Starts the full round's next slice. It takes its keys that the
    /// queue has ready (a whole round: all of them): it decides them. A
    /// slice that queue rounds took every key of has nothing left to do;
    /// the last one always runs, for the listings and DNS it covers.
    fn start_slice(&mut self, now: Instant) -> Option<RoundStart> {
        let f = self.full.as_mut()?;
        let keys = loop {
            let keys = f.left.pop()?;
            if !keys.is_empty() || f.left.is_empty() {
                break keys;
            }
            let nth = f.slices - f.left.len();
            tracing::debug!(
                "full round, slice {nth} of {}: 0 object(s), rounds since took them",
                f.slices
            );
        };
        let last = f.left.is_empty();
        let nth = f.slices - f.left.len();
        if f.whole {
            tracing::debug!("full round");
        } else {
            let n = keys.len();
            tracing::debug!("full round, slice {nth} of {}: {n} object(s)", f.slices);
        }
        let taken = match f.whole {
            true => self.queue.take_ready(now),
            false => {
                (self.queue).take_ready_at_most(now, usize::MAX, |_| false, |k| !keys.contains(k))
            }
        };
        f.taken += taken.len();
        f.running.insert(nth, keys);
        let whole = f.whole;
        Some(self.started(Some(nth), taken, Covers::Slice { nth, last, whole }))
    }

    /// Keys in queue rounds at most: a round holds each of its objects
    /// parsed and each plan until it ends; one round over all 10,000
    /// objects of a large federation held hundreds of MB at once
    /// (docs/performance/memory.md). Two rounds' worth keep both cores busy;
    /// during a full round, whose slices hold two more, one round's worth.
    fn keys_in_flight(&self) -> usize {
        match self.full {
            Some(_) => self.round_size,
            None => 2 * self.round_size,
        }
    }

    /// The queue's keys in flight in queue rounds (not a full round's).
    fn in_queue_rounds(&self) -> usize {
        let slices = self.full.as_ref().map_or(0, |f| f.taken);
        self.queue.in_flight().saturating_sub(slices)
    }

    /// Starts a round over keys that are ready (in flight from now on), as
    /// many as the limits leave room for; `None` when none may be taken.
    fn start_round(
        &mut self,
        now: Instant,
        first: &impl Fn(&WorkKey) -> bool,
    ) -> Option<RoundStart> {
        let room = (self.keys_in_flight())
            .saturating_sub(self.in_queue_rounds())
            .min(self.round_size);
        let full = &self.full;
        let held = |k: &WorkKey| full.as_ref().is_some_and(|f| f.holds(k));
        let taken = self.queue.take_ready_at_most(now, room, first, held);
        if taken.is_empty() {
            return None;
        }
        let keys: BTreeSet<WorkKey> = taken.iter().map(|(k, _)| k.clone()).collect();
        if let Some(f) = &mut self.full {
            f.let_go(&keys);
        }
        tracing::debug!("round over {} object(s){}", keys.len(), few_named(&keys));
        Some(self.started(None, taken, Covers::Keys(keys)))
    }

    /// Numbers a round and keeps what it took until it settles them.
    fn started(
        &mut self,
        slice: Option<usize>,
        taken: Vec<(WorkKey, Instant)>,
        covers: Covers,
    ) -> RoundStart {
        self.next_id += 1;
        let id = self.next_id;
        let settling = Settling {
            slice,
            taken: taken.into_iter().collect(),
            released: BTreeSet::new(),
        };
        self.settling.insert(id, settling);
        RoundStart { id, covers }
    }

    /// Queues the keys whose changes were held while a round held them,
    /// now that none does (each was not that round's own write).
    pub(super) fn queue_held_changes(&mut self) {
        let free: Vec<WorkKey> = (self.held.keys())
            .filter(|k| !self.held_by_round(k))
            .cloned()
            .collect();
        for k in free {
            if let Some((since, _)) = self.held.remove(&k) {
                self.queue.add(k, since);
            }
        }
        super::memory::shrink_when_sparse(&mut self.held);
    }

    /// A round is done with an object that it did not write: the queue
    /// may give it to another round from now on, and a running slice no
    /// longer holds it. An object it wrote stays its own to its end, as
    /// before: letting written objects go too made the first sync at
    /// 10,000 × 10 twice as slow (docs/performance/faults.md,
    /// run 9), when the echoes of a round's writes were still news
    /// (before `Cache::hold_own_write`); not measured again since.
    pub(super) fn settled(&mut self, round: u64, settled: Settled, now: Instant) -> Settles {
        let mut out = Settles::default();
        let Some(r) = self.settling.get_mut(&round) else {
            return out;
        };
        if settled.wrote {
            return out;
        }
        let k = &settled.object;
        r.released.insert(k.clone());
        let since = r.taken.remove(k);
        let slice = r.slice;
        if let (Some(nth), Some(f)) = (slice, self.full.as_mut()) {
            if let Some(keys) = f.running.get_mut(&nth) {
                keys.remove(k);
            }
            if since.is_some() {
                f.taken = f.taken.saturating_sub(1);
            }
        }
        out.latencies
            .extend(self.settle_key(slice, since, settled, now));
        self.queue_held_changes();
        out
    }

    /// An object's key once its round is done with it: it succeeds or
    /// waits its backoff (`since`: when the queue first marked it, if the
    /// round took it from the queue), and its next round waits its write
    /// interval from its last answer. Returns its latency when it changed
    /// a member.
    fn settle_key(
        &mut self,
        slice: Option<usize>,
        since: Option<Instant>,
        settled: Settled,
        now: Instant,
    ) -> Option<Duration> {
        let k = settled.object;
        // A slice's writes come back as events on its keys: their next
        // round waits as a queue round's would (`queue::MIN_WRITE_INTERVAL`).
        if settled.wrote && (slice.is_some() || !settled.failed) {
            self.queue.wrote(k.clone(), settled.at);
        }
        match since {
            Some(since) if settled.failed => {
                self.queue.failed(k, since, now);
            }
            Some(since) => {
                self.queue.succeeded(&k);
                if settled.changed {
                    return Some(now.saturating_duration_since(since));
                }
            }
            // A full round's key that the queue had not marked is retried
            // after its backoff too when it fails, not at the next full round.
            None if slice.is_some() && settled.failed => {
                self.queue.failed(k, now, now);
            }
            None => {}
        }
        None
    }

    /// A round ended (`None`: it failed as a whole): the keys it did not
    /// settle as it went succeed, or wait their backoff.
    pub(super) fn finish(&mut self, id: u64, result: Option<&RoundKeys>, now: Instant) -> Settles {
        let Settling {
            slice,
            mut taken,
            released,
        } = self.settling.remove(&id).unwrap_or_default();
        let (slice_keys, full_done) = self.end_slice(slice, taken.len());
        let mut out = Settles {
            full_done,
            ..Settles::default()
        };
        let Some(r) = result else {
            for k in slice_keys.into_iter().filter(|k| !taken.contains_key(k)) {
                self.queue.failed(k, now, now);
            }
            for (k, since) in taken {
                self.queue.failed(k, since, now);
            }
            self.queue_held_changes();
            return out;
        };
        let with_outcome: BTreeSet<&WorkKey> = (r.failed.iter())
            .chain(&r.changed)
            .chain(r.wrote.keys())
            .filter(|k| !released.contains(*k))
            .collect();
        for k in with_outcome {
            let settled = Settled {
                object: k.clone(),
                failed: r.failed.contains(k),
                changed: r.changed.contains(k),
                wrote: r.wrote.contains_key(k),
                at: r.wrote.get(k).copied().unwrap_or(now),
            };
            let latency = self.settle_key(slice, taken.remove(k), settled, now);
            out.latencies.extend(latency);
        }
        for k in taken.into_keys() {
            self.queue.succeeded(&k);
        }
        self.queue_held_changes();
        out
    }

    /// A full round's slice ended (`slice`, with `taken` of the queue's
    /// keys not settled yet): its keys not settled yet, and whether the
    /// full round is over (it was the last).
    fn end_slice(&mut self, slice: Option<usize>, taken: usize) -> (BTreeSet<WorkKey>, bool) {
        let Some(nth) = slice else {
            return (BTreeSet::new(), false);
        };
        let Some(f) = self.full.as_mut() else {
            return (BTreeSet::new(), false);
        };
        f.taken = f.taken.saturating_sub(taken);
        let keys = f.running.remove(&nth).unwrap_or_default();
        let done = f.left.is_empty() && f.running.is_empty();
        if done {
            self.full = None;
        }
        (keys, done)
    }

    /// Every round was cancelled (the lock is not renewed): their keys
    /// wait in the queue again, and the full round is dropped (the next
    /// one is asked for when the lock is held again).
    pub(super) fn abandon(&mut self) {
        self.settling.clear();
        self.full = None;
        self.queue.abandon_in_flight();
        self.queue_held_changes();
    }
}

impl FullRound {
    /// Whether a running slice holds `k`. A whole round holds every key,
    /// and so does the first slice: it creates the namespaces and CRDs
    /// that the others' objects need (a queue round beside it would fail
    /// them until retried).
    fn holds(&self, k: &WorkKey) -> bool {
        let alone = self.whole || self.running.contains_key(&1);
        (alone && !self.running.is_empty()) || self.running.values().any(|s| s.contains(k))
    }

    /// A queue round took `keys`: the slices not started yet leave them.
    fn let_go(&mut self, keys: &BTreeSet<WorkKey>) {
        for slice in &mut self.left {
            slice.retain(|k| !keys.contains(k));
        }
    }
}

/// The objects of a small round, named for `-v 2` (a burst's rounds are
/// counted only).
fn few_named(keys: &BTreeSet<WorkKey>) -> String {
    if keys.len() > 3 {
        return String::new();
    }
    let named: Vec<String> = (keys.iter())
        .map(|k| {
            format!(
                "{} {}",
                k.type_name,
                crate::core::describe::qualified_key(&k.key)
            )
        })
        .collect();
    format!(": {}", named.join(", "))
}

#[cfg(test)]
mod tests;
