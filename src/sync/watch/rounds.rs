//! Rounds, the watch's reconcile: each starts as a task of its own over
//! the keys the queue has ready (or over everything, a full round), with
//! an observation built from the cache, and its result comes back into the
//! loop: keys succeed or wait their backoff, and the metrics count it. A
//! round covers at most `--round-size` keys: a burst is taken in several
//! rounds, and a full round over more runs as slices, one after another,
//! with queue rounds between them for the keys no running slice holds.
//! A round lets each object it did not write go as soon as it has decided
//! it (`Progress::object_settled`, then `Controller::settled`), not at its
//! end: a change made meanwhile to an object that needed nothing waits for
//! no slice or round. What each of its writes left goes into the cache as
//! soon as it is answered (`Cache::hold_own_write`), ahead of its event.
//! Kept apart from the loop (`mod.rs`) as kube-runtime keeps its runner
//! and scheduler apart from the reconcile.

use super::Controller;
use super::cache::{Cover, Texts, WorkKey};
use super::metrics::Metrics;
use super::sources::Source;
use crate::core::run::scope::RunScope;
use crate::parallel::locked;
use crate::sync::live::observe::{self, Observation};
use crate::sync::live::progress::{Answer, Answered, Settled};
use crate::sync::live::{self, Passes, RoundOutcome};
use anyhow::Result;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Rounds at once. Each works on objects no other round holds; the bound
/// only keeps a storm of events from opening unbounded tasks.
pub(super) const ROUNDS_IN_FLIGHT: usize = 64;

/// Slices of a full round at once, after its first: one slice's last
/// writes overlap the next one's first, as they did in one round.
const SLICES_IN_FLIGHT: usize = 2;

/// A full round under way: its keys, cut into slices of at most
/// `--round-size` keys, the namespaces' and CRDs' first
/// ([`Controller::goes_first`]). The first slice runs by itself, then
/// [`SLICES_IN_FLIGHT`] at a time. Each slice is observed when it starts,
/// so it sees the cache as it is then, and takes its keys the queue has
/// ready. Meanwhile queue rounds take the ready keys that no running slice
/// holds; a key they take leaves the slices not started yet (it is decided
/// now, from the same cache). The first slice, and a full round small
/// enough to be one round (`whole`), hold every key while they run.
pub(super) struct FullRound {
    /// The slices still to run, the next one last.
    left: Vec<BTreeSet<WorkKey>>,
    /// How many slices it has.
    slices: usize,
    /// The slices running, by their number, with their keys.
    running: BTreeMap<usize, BTreeSet<WorkKey>>,
    /// Few enough keys for one round: observed whole (`Cover::Everything`).
    whole: bool,
    /// How many of the queue's keys in flight the running slices took.
    taken: usize,
}

/// What a round covers.
enum Round {
    /// Keys the queue had ready.
    Keys,
    /// The `nth` slice of a full round; the last one started also passes DNS.
    Slice { nth: usize, last: bool },
}

/// What a round tells the loop as it goes: each member write's time (to
/// the metrics), each object it is done with (to the loop, by `settled`).
struct RoundProgress<'a> {
    metrics: &'a Metrics,
    round: u64,
    settled: &'a SettledSender,
}

/// What a round tells the loop as it goes: (round, news).
pub(super) type SettledSender = tokio::sync::mpsc::UnboundedSender<(u64, FromRound)>;

/// A round's news for the loop, as it goes.
pub(super) enum FromRound {
    /// It is done with an object.
    Settled(Settled),
    /// One of its writes for an object was answered: the cache holds the
    /// answer at once (`Cache::hold_own_write`).
    Answered(crate::core::describe::FederatedRef, Answer),
}

impl crate::sync::live::progress::Progress for RoundProgress<'_> {
    fn requests(&self, _: u64) {}
    fn request_done(&self) {}
    fn member_write(&self, effect: &crate::core::propagation::record::Effect, took: Duration) {
        self.metrics.member_write(effect, took);
    }
    fn follows_objects(&self) -> bool {
        true
    }
    fn object_settled(&self, settled: Settled) {
        // The loop is gone only when the controller is.
        let _ = self.settled.send((self.round, FromRound::Settled(settled)));
    }
    fn answered(&self, object: &crate::core::describe::FederatedRef, answer: Answer) {
        let news = FromRound::Answered(object.clone(), answer);
        let _ = self.settled.send((self.round, news));
    }
}

/// A round's result, back in the loop.
pub(super) struct RoundDone {
    /// Its number (`Controller::settling`).
    id: u64,
    result: Result<RoundResult>,
}

/// A round in flight, as the loop keeps it: the queue's keys it took that
/// it has not settled yet, with when they were first marked, and those it
/// settled (the rest of its result leaves them alone).
#[derive(Default)]
pub(super) struct Settling {
    /// The number of a full round's slice.
    slice: Option<usize>,
    taken: BTreeMap<WorkKey, Instant>,
    released: BTreeSet<WorkKey>,
}

struct RoundResult {
    outcome: RoundOutcome,
    failed: BTreeSet<WorkKey>,
    changed: BTreeSet<WorkKey>,
    /// Changed a member or wrote to the host, and when its last request
    /// was answered: its next round waits a second from then.
    wrote: BTreeMap<WorkKey, Instant>,
}

impl Controller<'_> {
    /// Stopping: the rounds in flight complete.
    pub(super) async fn finish_rounds(&mut self) {
        tracing::info!("stopping: the rounds in flight complete; releasing the federation lock");
        while let Some(done) = self.rounds.join_next().await {
            if let Ok(done) = done {
                self.finish(done);
            }
        }
    }

    /// Starts the next rounds that may run; returns whether a full round
    /// is still due. A full round starts after the rounds in flight, and
    /// runs in slices with queue rounds between them; one asked for
    /// meanwhile runs after it.
    pub(super) fn next_round(&mut self, full: bool) -> bool {
        if self.full.is_some() {
            while self.may_start_slice() {
                self.start_slice();
            }
            self.start_queue_rounds();
            return full;
        }
        if full {
            if self.rounds.is_empty() {
                self.plan_full_round();
                self.start_slice();
                return false;
            }
            return true;
        }
        self.start_queue_rounds();
        false
    }

    /// Rounds over the keys the queue has ready, as many as the limits
    /// leave room for.
    fn start_queue_rounds(&mut self) {
        while self.rounds.len() < ROUNDS_IN_FLIGHT
            && self.in_queue_rounds() < self.keys_in_flight()
            && self.queue.has_ready(Instant::now())
            && self.start_round()
        {}
    }

    /// A full round's keys, in slices: every federated object and every
    /// member copy's (`Cache::full_round_keys`). The namespaces' and CRDs'
    /// come first, in slices of their own, so that the first slice, which
    /// runs alone, is short.
    fn plan_full_round(&mut self) {
        self.metrics.full_rounds.fetch_add(1, Ordering::Relaxed);
        // The members that have listed are caught up by this round.
        self.caught_up();
        let scope = &self.o.run.selection.scope;
        let keys = self.cache.full_round_keys(&self.host.namespace, scope);
        let size = self.o.round_size;
        let whole = keys.len() <= size;
        let mut left: Vec<BTreeSet<WorkKey>> = Vec::new();
        if whole {
            left.push(BTreeSet::new());
        } else {
            let (first, rest): (Vec<WorkKey>, Vec<WorkKey>) =
                keys.into_iter().partition(self.goes_first());
            let slices = first.chunks(size).chain(rest.chunks(size));
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

    /// Whether a key is taken before others: a namespace's (its copies
    /// must exist before what they hold can be created) and a CRD's (its
    /// type must be served before its objects: `live::crd_first`). One
    /// round over both orders them itself; rounds of a burst and the
    /// slices of a full round would otherwise fail the rest until retried.
    fn goes_first(&self) -> impl Fn(&WorkKey) -> bool + use<> {
        let first: BTreeSet<String> = (self.cache.types().into_iter())
            .filter(|(_, t)| {
                t.ty.target.is_namespace() || live::crd_first::target(t).defines_types()
            })
            .map(|(name, _)| name)
            .collect();
        move |k: &WorkKey| first.contains(&k.type_name)
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

    /// Starts the full round's next slice (the last one also passes DNS).
    /// It takes its keys that the queue has ready (a whole round: all of
    /// them): it decides them. A slice that queue rounds took every key of
    /// has nothing left to do; the last one always runs, for the listings
    /// and DNS it covers.
    fn start_slice(&mut self) {
        let Some(f) = &mut self.full else {
            return;
        };
        let keys = loop {
            let Some(keys) = f.left.pop() else {
                return;
            };
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
        let now = Instant::now();
        let taken = match f.whole {
            true => self.queue.take_ready(now),
            false => {
                (self.queue).take_ready_at_most(now, usize::MAX, |_| false, |k| !keys.contains(k))
            }
        };
        let whole = f.whole;
        f.taken += taken.len();
        f.running.insert(nth, keys);
        let Some(keys) = self.full.as_ref().map(|f| &f.running[&nth]) else {
            return;
        };
        let cover = match (whole, last) {
            (true, _) => Cover::Everything,
            (false, true) => Cover::LastSlice(keys),
            (false, false) => Cover::Keys(keys),
        };
        let seen = self.observe(cover);
        self.spawn_round(seen, taken, Round::Slice { nth, last });
    }

    /// The members a round may touch: the unready (their objects show
    /// ClusterNotReady) and the ready whose watches have listed.
    fn touched(&self) -> BTreeSet<String> {
        let types = self.types();
        self.members
            .iter()
            .zip(&self.health)
            .filter(|(m, _)| self.touchable(&m.name))
            .filter(|(m, h)| !h.is_ready() || self.cache.member_synced(&m.name, &types))
            .map(|(m, _)| m.name.clone())
            .collect()
    }

    /// What a round covers, from the cache: its round parses the texts
    /// ([`parse_observed`]), so that the loop only copies references.
    fn observe(&self, cover: Cover) -> Observed {
        let scope = RunScope {
            clusters: Some(self.touched()),
            ..self.o.run.selection.scope.clone()
        };
        self.cache.observe_texts(
            &self.host.namespace,
            scope,
            &self.types(),
            (&self.members, &self.health),
            cover,
        )
    }

    /// Keys in queue rounds at most: a round holds each of its objects
    /// parsed (the federated object, its version, its members' copies) and
    /// each plan until it ends; one round over all 10,000 objects of a
    /// large federation held hundreds of MB at once (docs/performance.md).
    /// Two rounds' worth keep both cores busy; during a full round, whose
    /// slices hold two more, one round's worth.
    fn keys_in_flight(&self) -> usize {
        match self.full {
            Some(_) => self.o.round_size,
            None => 2 * self.o.round_size,
        }
    }

    /// The queue's keys in flight in queue rounds (not a full round's).
    fn in_queue_rounds(&self) -> usize {
        let slices = self.full.as_ref().map_or(0, |f| f.taken);
        self.queue.in_flight().saturating_sub(slices)
    }

    /// Starts a round over keys that are ready (in flight from now on), as
    /// many as the limits leave room for; false when none may be taken.
    fn start_round(&mut self) -> bool {
        let room = (self.keys_in_flight())
            .saturating_sub(self.in_queue_rounds())
            .min(self.o.round_size);
        let first = self.goes_first();
        let full = &self.full;
        let held = |k: &WorkKey| full.as_ref().is_some_and(|f| f.holds(k));
        let taken = self
            .queue
            .take_ready_at_most(Instant::now(), room, first, held);
        if taken.is_empty() {
            return false;
        }
        let keys: BTreeSet<WorkKey> = taken.iter().map(|(k, _)| k.clone()).collect();
        if let Some(f) = &mut self.full {
            f.let_go(&keys);
        }
        tracing::debug!("round over {} object(s){}", keys.len(), few_named(&keys));
        let seen = self.observe(Cover::Keys(&keys));
        self.spawn_round(seen, taken, Round::Keys);
        true
    }

    /// Runs a round as a task of its own.
    fn spawn_round(&mut self, seen: Observed, taken: Vec<(WorkKey, Instant)>, round: Round) {
        let slice = match round {
            Round::Slice { nth, .. } => Some(nth),
            Round::Keys => None,
        };
        self.next_round_id += 1;
        let id = self.next_round_id;
        let settling = Settling {
            slice,
            taken: taken.into_iter().collect(),
            released: BTreeSet::new(),
        };
        self.settling.insert(id, settling);
        let settled = self.settled_tx.clone();
        let dns = matches!(round, Round::Slice { last: true, .. });
        let passes = Passes {
            cluster_health: false,
            dns,
            permissions: false,
        };
        self.metrics
            .rounds_in_flight
            .fetch_add(1, Ordering::Relaxed);
        let shared = self.shared.clone();
        let metrics = self.metrics.clone();
        self.rounds.spawn(async move {
            let started = Instant::now();
            let mut seen = parse_observed(seen, &shared.run);
            let timeout = shared.run.selection.timeout;
            let result = async {
                observe::finish_from_cache(&shared.host, &mut seen, timeout, dns).await?;
                let progress = RoundProgress {
                    metrics: &metrics,
                    round: id,
                    settled: &settled,
                };
                live::round_in_order(&shared.host, &mut seen, &shared.run, passes, &progress).await
            }
            .await
            .map(|outcome| {
                let (failed, changed, wrote) = outcome_keys(&outcome);
                RoundResult {
                    outcome,
                    failed,
                    changed,
                    wrote,
                }
            });
            crate::parallel::drop_in_background(seen);
            let took = started.elapsed();
            locked(&metrics.round_time.0).observe(took);
            locked(&metrics.round_time_upstream.0).observe(took);
            RoundDone { id, result }
        });
    }

    /// What a round tells as it goes, in the loop.
    pub(super) fn take_round_news(&mut self, round: u64, news: FromRound) {
        match news {
            FromRound::Settled(settled) => self.settled(round, settled),
            FromRound::Answered(object, answer) => {
                let member = matches!(answer.of, Answered::Member(_));
                if member && self.cache.own_member_write_is_news(&object.type_name) {
                    // Its next round records the copy's status.
                    self.queue.add(object.clone(), Instant::now());
                }
                let Some(id) = self.cache.hold_own_write(&object, answer) else {
                    return;
                };
                // A change seen while the round held it was this write.
                if let Some((_, changes)) = self.held_changes.get_mut(&object) {
                    changes.retain(|c| c != &id);
                    if changes.is_empty() {
                        self.held_changes.remove(&object);
                    }
                }
            }
        }
    }

    /// Whether a round holds `k`: the queue's key in flight, or a running
    /// slice's.
    pub(super) fn held_by_round(&self, k: &WorkKey) -> bool {
        self.queue.is_in_flight(k) || self.full.as_ref().is_some_and(|f| f.holds(k))
    }

    /// Queues the keys whose changes were held while a round held them,
    /// now that none does (each was not that round's own write).
    pub(super) fn queue_held_changes(&mut self) {
        let free: Vec<WorkKey> = (self.held_changes.keys())
            .filter(|k| !self.held_by_round(k))
            .cloned()
            .collect();
        for k in free {
            if let Some((since, _)) = self.held_changes.remove(&k) {
                self.queue.add(k, since);
            }
        }
        super::memory::shrink_when_sparse(&mut self.held_changes);
    }

    /// A round is done with an object that it did not write: the queue
    /// may give it to another round from now on, and a running slice no
    /// longer holds it. An object it wrote stays its own to its end, as
    /// before: letting written objects go too made the first sync at
    /// 10,000 × 10 twice as slow (docs/performance.md, *Faults at 10,000 ×
    /// 10*, run 9), when the echoes of a round's writes were still news
    /// (before `Cache::hold_own_write`); not measured again since.
    fn settled(&mut self, round: u64, settled: Settled) {
        let Some(r) = self.settling.get_mut(&round) else {
            return;
        };
        if settled.wrote {
            return;
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
        self.settle_key(slice, since, settled);
        self.queue_held_changes();
    }

    /// An object's key once its round is done with it: it succeeds or
    /// waits its backoff (`since`: when the queue first marked it, if the
    /// round took it from the queue), and its next round waits its write
    /// interval from its last answer.
    fn settle_key(&mut self, slice: Option<usize>, since: Option<Instant>, settled: Settled) {
        let now = Instant::now();
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
                    locked(&self.metrics.latency).observe(now.saturating_duration_since(since));
                }
            }
            // A full round's key that the queue had not marked is retried
            // after its backoff too when it fails, not at the next full round.
            None if slice.is_some() && settled.failed => {
                self.queue.failed(k, now, now);
            }
            None => {}
        }
    }

    /// A round ended: the keys it did not settle as it went succeed, or
    /// wait their backoff.
    pub(super) fn finish(&mut self, done: RoundDone) {
        // What it settled comes first (sent before it ended).
        while let Ok((round, news)) = self.settled_rx.try_recv() {
            self.take_round_news(round, news);
        }
        self.metrics.rounds.fetch_add(1, Ordering::Relaxed);
        self.metrics
            .rounds_in_flight
            .fetch_sub(1, Ordering::Relaxed);
        let Settling {
            slice,
            mut taken,
            released,
        } = self.settling.remove(&done.id).unwrap_or_default();
        let slice_keys = self.end_slice(slice, taken.len());
        let mut r = match done.result {
            Ok(r) => r,
            Err(e) => {
                let now = Instant::now();
                self.metrics.failures.fetch_add(1, Ordering::Relaxed);
                self.report_failure(crate::error::one_line(&e));
                for k in slice_keys.into_iter().filter(|k| !taken.contains_key(k)) {
                    self.queue.failed(k, now, now);
                }
                for (k, since) in taken {
                    self.queue.failed(k, since, now);
                }
                self.queue_held_changes();
                return;
            }
        };
        // A type its CRD made served in a member: its watch there lists now,
        // not after its backoff (`live::crd_first`).
        let served = std::mem::take(&mut r.outcome.served);
        if !served.is_empty() {
            self.restart_sources(|s| {
                matches!(s, Source::Member(c, t) if served.iter().any(|(sc, st)| sc == c && st == t))
            });
        }
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
                at: r.wrote.get(k).copied().unwrap_or_else(Instant::now),
            };
            self.settle_key(slice, taken.remove(k), settled);
        }
        for k in taken.into_keys() {
            self.queue.succeeded(&k);
        }
        self.queue_held_changes();
        self.report_outcome(&r.outcome);
    }

    /// A full round's slice ended (`slice`, with `taken` of the queue's
    /// keys not settled yet): its keys not settled yet; the full round is
    /// over once it was the last.
    fn end_slice(&mut self, slice: Option<usize>, taken: usize) -> BTreeSet<WorkKey> {
        let Some(nth) = slice else {
            return BTreeSet::new();
        };
        let Some(f) = self.full.as_mut() else {
            return BTreeSet::new();
        };
        f.taken = f.taken.saturating_sub(taken);
        let keys = f.running.remove(&nth).unwrap_or_default();
        if f.left.is_empty() && f.running.is_empty() {
            self.full = None;
            self.metrics.synced.store(true, Ordering::Relaxed);
        }
        keys
    }

    /// A round's changes, failures and warnings into the log (a failure or
    /// warning once in 5 minutes), its counts into the metrics.
    fn report_outcome(&mut self, outcome: &RoundOutcome) {
        for o in &outcome.objects {
            for c in &o.changes {
                tracing::debug!("{c}");
            }
        }
        let failed = outcome.objects.iter().filter(|o| o.failed).count();
        self.metrics
            .objects_reconciled
            .fetch_add(outcome.objects.len() as u64, Ordering::Relaxed);
        self.metrics
            .objects_failed
            .fetch_add(failed as u64, Ordering::Relaxed);
        let report = &outcome.report;
        self.metrics
            .failures
            .fetch_add(report.failures.len() as u64, Ordering::Relaxed);
        for f in &report.failures {
            self.report_failure(f.to_string());
        }
        for w in report.warnings.clone() {
            self.report_warning(w);
        }
        let mut counts = locked(&self.metrics.members);
        for m in &self.members {
            let c = counts.entry(m.name.clone()).or_default();
            c.requests = m.requests.load(Ordering::Relaxed);
            if let Some(r) = report.clusters.get(&m.name) {
                c.writes += (r.created + r.updated + r.deleted) as u64;
                c.failures += r.failed as u64;
            }
        }
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

/// An observation from the cache, its federated objects and versions
/// still texts.
type Observed = (Observation, Texts);

/// A round's observation parsed, in the round's task.
fn parse_observed((mut seen, texts): Observed, run: &live::Options) -> Observation {
    texts.parse_into(&mut seen);
    // FederatedNamespaces are watched whatever -l says (they place
    // everything in them); -l still chooses which of them a round decides.
    if let Some(sel) = &run.selection.scope.selector {
        // Checked by reconcile's validate step: it parses.
        let _ = observe::retain_selected_namespaces(&mut seen.types, sel);
    }
    seen
}

/// The keys of a round's outcome that failed, those that changed a member,
/// and those that wrote anywhere, with when their last request was
/// answered: an outcome names its object as the queue does.
fn outcome_keys(
    outcome: &RoundOutcome,
) -> (
    BTreeSet<WorkKey>,
    BTreeSet<WorkKey>,
    BTreeMap<WorkKey, Instant>,
) {
    let mut failed = BTreeSet::new();
    let mut changed = BTreeSet::new();
    let mut wrote = BTreeMap::new();
    for o in &outcome.objects {
        let k = o.object.federated();
        if o.failed {
            failed.insert(k.clone());
        }
        if !o.changes.is_empty() {
            changed.insert(k.clone());
        }
        if !o.changes.is_empty() || o.host_writes > 0 {
            // An object in two outcomes (its own and an orphan's): the later.
            let at = wrote.entry(k.clone()).or_insert(o.settled);
            *at = (*at).max(o.settled);
        }
    }
    (failed, changed, wrote)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::describe::ObjectRef;
    use crate::core::outcome::{Change, Place};
    use crate::sync::live::ObjectOutcome;

    fn key(name: &str) -> WorkKey {
        WorkKey::new("configmaps", ("shop".into(), name.into()))
    }

    fn outcome(object: ObjectRef, changed: bool, host_writes: usize, at: Instant) -> ObjectOutcome {
        let change = Change {
            place: Place::Member("m1".into()),
            verb: "update".into(),
            object: "ConfigMap shop/x".into(),
            reason: None,
            diff: None,
        };
        ObjectOutcome {
            object,
            failed: !changed && host_writes == 0,
            changes: if changed { vec![change] } else { vec![] },
            host_writes,
            settled: at,
        }
    }

    /// Each object's write interval counts from its own last answer (the
    /// later one when its orphan's outcome is in the round too), not from
    /// the round's end.
    #[test]
    fn an_objects_write_interval_starts_at_its_last_answer() {
        let t0 = Instant::now();
        let (t1, t2, t3) = (
            t0 + Duration::from_millis(100),
            t0 + Duration::from_millis(900),
            t0 + Duration::from_millis(2500),
        );
        let round = RoundOutcome {
            report: Default::default(),
            objects: vec![
                outcome(ObjectRef::Federated(key("a")), true, 1, t1),
                outcome(ObjectRef::Federated(key("b")), false, 1, t2),
                outcome(ObjectRef::Federated(key("c")), false, 0, t3),
                outcome(ObjectRef::Orphan(key("a")), true, 0, t3),
            ],
            served: vec![],
        };
        let (failed, changed, wrote) = outcome_keys(&round);
        assert_eq!(failed, [key("c")].into());
        assert_eq!(changed, [key("a")].into());
        assert_eq!(wrote, [(key("a"), t3), (key("b"), t2)].into());
    }
}
