//! Rounds, the watch's reconcile: each starts as a task of its own over
//! the keys the queue has ready (or over everything, a full round), with
//! an observation built from the cache, and its result comes back into the
//! loop: keys succeed or wait their backoff, and the metrics count it. A
//! round covers at most `--round-size` keys: a burst is taken in several
//! rounds, and a full round over more runs as slices, one after another,
//! with queue rounds between them for the keys no running slice holds (a
//! change made during a full round waits for no more than its own slice).
//! Kept apart from the loop (`mod.rs`) as kube-runtime keeps its runner
//! and scheduler apart from the reconcile.

use super::Controller;
use super::cache::{Cover, Texts, WorkKey};
use super::metrics::Metrics;
use super::sources::Source;
use crate::core::run::scope::RunScope;
use crate::parallel::locked;
use crate::sync::live::observe::{self, Observation};
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

/// What a round tells the metrics as it goes: each member write's time.
struct RoundProgress<'a>(&'a Metrics);

impl crate::sync::live::progress::Progress for RoundProgress<'_> {
    fn requests(&self, _: u64) {}
    fn request_done(&self) {}
    fn member_write(&self, effect: &crate::core::propagation::record::Effect, took: Duration) {
        self.0.member_write(effect, took);
    }
}

/// A round's result, back in the loop.
pub(super) struct RoundDone {
    /// The number of a full round's slice.
    slice: Option<usize>,
    taken: Vec<(WorkKey, Instant)>,
    result: Result<RoundResult>,
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
        tracing::debug!("round over {} object(s)", keys.len());
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
                let progress = RoundProgress(&metrics);
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
            RoundDone {
                slice,
                taken,
                result,
            }
        });
    }

    /// A round ended: its keys succeed, or wait their backoff.
    pub(super) fn finish(&mut self, done: RoundDone) {
        let now = Instant::now();
        self.metrics.rounds.fetch_add(1, Ordering::Relaxed);
        self.metrics
            .rounds_in_flight
            .fetch_sub(1, Ordering::Relaxed);
        let slice_keys = (done.slice)
            .and_then(|nth| {
                let f = self.full.as_mut()?;
                f.taken = f.taken.saturating_sub(done.taken.len());
                f.running.remove(&nth)
            })
            .unwrap_or_default();
        let full_done = done.slice.is_some()
            && (self.full.as_ref()).is_some_and(|f| f.left.is_empty() && f.running.is_empty());
        if full_done {
            self.full = None;
            self.metrics.synced.store(true, Ordering::Relaxed);
        }
        // A full round's keys that the queue had not marked are retried
        // after their backoff too when they fail, not at the next full round.
        let marked: BTreeSet<&WorkKey> = done.taken.iter().map(|(k, _)| k).collect();
        let unmarked = |failed: &BTreeSet<WorkKey>| -> Vec<WorkKey> {
            let unmarked = failed.iter().filter(|k| !marked.contains(k));
            unmarked.cloned().collect()
        };
        let mut r = match done.result {
            Ok(r) => r,
            Err(e) => {
                self.metrics.failures.fetch_add(1, Ordering::Relaxed);
                self.report_failure(crate::error::one_line(&e));
                for k in unmarked(&slice_keys) {
                    self.queue.failed(k, now, now);
                }
                for (k, since) in done.taken {
                    self.queue.failed(k, since, now);
                }
                return;
            }
        };
        if done.slice.is_some() {
            for k in unmarked(&r.failed) {
                self.queue.failed(k, now, now);
            }
        }
        // A type its CRD made served in a member: its watch there lists now,
        // not after its backoff (`live::crd_first`).
        let served = std::mem::take(&mut r.outcome.served);
        if !served.is_empty() {
            self.restart_sources(|s| {
                matches!(s, Source::Member(c, t) if served.iter().any(|(sc, st)| sc == c && st == t))
            });
        }
        if done.slice.is_some() {
            // Its writes come back as events on its keys: their next round
            // waits as a queue round's would (`queue::MIN_WRITE_INTERVAL`),
            // whether between the full round's slices or after them. The
            // second counts from each object's last answer, not from the
            // slice's end: a slice of 1,000 objects runs for seconds, and
            // the echoes of its first writes are cached long before it
            // ends (a change made meanwhile waited a second more).
            for (k, at) in &r.wrote {
                self.queue.wrote(k.clone(), *at);
            }
        }
        for (k, since) in done.taken {
            if r.failed.contains(&k) {
                self.queue.failed(k, since, now);
            } else {
                self.queue.succeeded(&k);
                if let Some(at) = r.wrote.get(&k) {
                    self.queue.wrote(k.clone(), *at);
                }
                if r.changed.contains(&k) {
                    locked(&self.metrics.latency).observe(now.saturating_duration_since(since));
                }
            }
        }
        self.report_outcome(&r.outcome);
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
