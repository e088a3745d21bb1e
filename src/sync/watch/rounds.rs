//! Rounds, the watch's reconcile: the scheduler (`scheduler`) says which
//! rounds start and over which keys; each runs as a task of its own, with
//! an observation built from the cache, and its news and result come back
//! into the loop and go to the scheduler (keys succeed or wait their
//! backoff) and the metrics. A round lets each object it did not write go
//! as soon as it has decided it (`Progress::object_settled`, then
//! `Scheduler::settled`), not at its end: a change made meanwhile to an
//! object that needed nothing waits for no slice or round. What each of
//! its writes left goes into the cache as soon as it is answered
//! (`Cache::hold_own_write`), ahead of its event. The tasks, their news
//! and the loop's timers are the runner's (`runner`); this is what a round
//! does and what the loop makes of its result.

use super::Controller;
use super::cache::{Cover, Texts, WorkKey};
use super::metrics::Metrics;
use super::scheduler::{Covers, RoundKeys, RoundStart, Settles};
use super::sources::Source;
use crate::core::run::scope::RunScope;
use crate::parallel::locked;
use crate::sync::live::progress::{Answer, Answered, Settled};
use crate::sync::live::{self, Passes, RoundOutcome};
use crate::sync::run::observe::{self, Observation};
use anyhow::Result;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What a round tells the loop as it goes: each member write's time (to
/// the metrics), each object it is done with (to the loop, by `settled`).
struct RoundProgress<'a> {
    metrics: &'a Metrics,
    round: u64,
    settled: &'a SettledSender,
}

/// What a round tells the loop as it goes: (round, news).
type SettledSender = super::runner::NewsSender<FromRound>;

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

struct RoundResult {
    outcome: RoundOutcome,
    keys: RoundKeys,
}

impl Controller<'_> {
    /// Stopping: the rounds in flight complete.
    pub(super) async fn finish_rounds(&mut self) {
        tracing::info!("stopping: the rounds in flight complete; releasing the federation lock");
        while let Some(done) = self.runner.rounds.join_next().await {
            if let Ok(done) = done {
                self.finish(done);
            }
        }
    }

    /// Starts the next rounds the scheduler lets run; returns whether a
    /// full round is still due (one asked for while rounds run).
    pub(super) fn next_round(&mut self, full: bool) -> bool {
        let first = self.goes_first();
        let (cache, host, scope) = (
            &self.intake.cache,
            &self.shared.host,
            &self.o.run.selection.scope,
        );
        let plan = || cache.full_round_keys(&host.namespace, scope);
        let next = self.scheduler.next(full, Instant::now(), first, plan);
        if next.planned_full {
            self.metrics.full_rounds.fetch_add(1, Ordering::Relaxed);
            // The members that have listed are caught up by this round.
            self.caught_up();
        }
        for start in next.starts {
            self.spawn_round(start);
        }
        next.full_due
    }

    /// Whether a key is taken before others: a namespace's (its copies
    /// must exist before what they hold can be created) and a CRD's (its
    /// type must be served before its objects: `live::crd_first`). One
    /// round over both orders them itself; rounds of a burst and the
    /// slices of a full round would otherwise fail the rest until retried.
    fn goes_first(&self) -> impl Fn(&WorkKey) -> bool + use<> {
        let first: BTreeSet<String> = (self.intake.cache.types().into_iter())
            .filter(|(_, t)| {
                t.ty.target.is_namespace() || live::crd_first::target(t).defines_types()
            })
            .map(|(name, _)| name)
            .collect();
        move |k: &WorkKey| first.contains(&*k.type_name)
    }

    /// The members a round may touch: the unready (their objects show
    /// ClusterNotReady) and the ready whose watches have listed; never a
    /// pull member, which its agent applies.
    fn touched(&self) -> BTreeSet<String> {
        let types = self.types();
        (self.fleet.members().iter())
            .filter(|p| !p.member.pull && self.touchable(p.name()))
            .filter(|p| !p.is_ready() || self.intake.cache.member_synced(p.name(), &types))
            .map(|p| p.name().to_string())
            .collect()
    }

    /// What a round covers, from the cache: its round parses the texts
    /// ([`parse_observed`]), so that the loop only copies references.
    fn observe(&self, cover: Cover) -> Observed {
        let scope = RunScope {
            clusters: Some(self.touched()),
            ..self.o.run.selection.scope.clone()
        };
        self.intake.cache.observe_texts(
            &self.shared.host.namespace,
            scope,
            &self.types(),
            self.fleet.members(),
            cover,
        )
    }

    /// Runs a round the scheduler started as a task of its own, over an
    /// observation of what it covers.
    fn spawn_round(&mut self, start: RoundStart) {
        let id = start.id;
        let (seen, dns) = match &start.covers {
            Covers::Keys(keys) => {
                let covers: &dyn Fn(&WorkKey) -> bool = &|k| keys.contains(k);
                self.rollouts.round_started(id, Some(covers));
                (self.observe(Cover::Keys(keys)), false)
            }
            Covers::Slice { nth, last, whole } => {
                let empty = BTreeSet::new();
                let keys = self.scheduler.slice_keys(*nth).unwrap_or(&empty);
                let covers: &dyn Fn(&WorkKey) -> bool = &|k| keys.contains(k);
                let cover = match (whole, last) {
                    (true, _) => Cover::Everything,
                    (false, true) => Cover::LastSlice(keys),
                    (false, false) => Cover::Keys(keys),
                };
                let whole = matches!(cover, Cover::Everything);
                (self.rollouts).round_started(id, (!whole).then_some(covers));
                (self.observe(cover), *last)
            }
        };
        let settled = self.runner.rounds.sender();
        let passes = Passes {
            cluster_health: false,
            dns,
            permissions: false,
        };
        let shared = self.shared.clone();
        let metrics = self.metrics.clone();
        self.runner.rounds.spawn(async move {
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
            .map(|outcome| RoundResult {
                keys: outcome_keys(&outcome),
                outcome,
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
            FromRound::Settled(settled) => {
                let settles = self.scheduler.settled(round, settled, Instant::now());
                self.observe_settles(settles);
            }
            FromRound::Answered(object, answer) => {
                let member = matches!(answer.of, Answered::Member(_));
                if member
                    && self
                        .intake
                        .cache
                        .own_member_write_is_news(&object.type_name)
                {
                    // Its next round records the copy's status.
                    self.scheduler.mark(object.clone(), Instant::now());
                }
                if let Some(seen) = self.intake.cache.hold_own_write(&object, answer) {
                    // A change seen while the round held it was this write.
                    self.scheduler.own_write_answered(&object, &seen);
                }
            }
        }
    }

    /// Keys settled: their latencies, and whether the federation is in sync.
    fn observe_settles(&self, settles: Settles) {
        if !settles.latencies.is_empty() {
            let mut latency = locked(&self.metrics.latency);
            for took in settles.latencies {
                latency.observe(took);
            }
        }
        if settles.full_done {
            self.metrics.synced.store(true, Ordering::Relaxed);
        }
    }

    /// A round ended: the keys it did not settle as it went succeed, or
    /// wait their backoff.
    pub(super) fn finish(&mut self, done: RoundDone) {
        // What it settled comes first (sent before it ended).
        while let Some((round, news)) = self.runner.rounds.try_news() {
            self.take_round_news(round, news);
        }
        self.metrics.rounds.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut r = match done.result {
            Ok(r) => r,
            Err(e) => {
                self.metrics.failures.fetch_add(1, Ordering::Relaxed);
                self.report_failure(crate::error::one_line(&e));
                self.rollouts.round_done(done.id, None, now, 0);
                let settles = self.scheduler.finish(done.id, None, now);
                self.observe_settles(settles);
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
        let settles = self.scheduler.finish(done.id, Some(&r.keys), now);
        self.observe_settles(settles);
        let lines = Some(r.outcome.report.rollouts.as_slice());
        let unix_now = crate::clock::now_unix();
        for line in self.rollouts.round_done(done.id, lines, now, unix_now) {
            super::rollouts::log(line);
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
        for m in self.fleet.iter() {
            let c = counts.entry(m.name.clone()).or_default();
            c.requests = m.requests.load(Ordering::Relaxed);
            if let Some(r) = report.clusters.get(&m.name) {
                c.writes += (r.created + r.updated + r.deleted) as u64;
                c.failures += r.failed as u64;
            }
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
fn outcome_keys(outcome: &RoundOutcome) -> RoundKeys {
    let mut keys = RoundKeys::default();
    for o in &outcome.objects {
        let k = o.object.federated();
        if o.failed {
            keys.failed.insert(k.clone());
        }
        if !o.changes.is_empty() {
            keys.changed.insert(k.clone());
        }
        if !o.changes.is_empty() || o.host_writes > 0 {
            // An object in two outcomes (its own and an orphan's): the later.
            let at = keys.wrote.entry(k.clone()).or_insert(o.settled);
            *at = (*at).max(o.settled);
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::describe::{ObjectKey, ObjectRef};
    use crate::core::outcome::{Change, Place};
    use crate::sync::live::ObjectOutcome;

    fn key(name: &str) -> WorkKey {
        WorkKey::new("configmaps", ObjectKey::new("shop", name))
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
        let keys = outcome_keys(&round);
        assert_eq!(keys.failed, [key("c")].into());
        assert_eq!(keys.changed, [key("a")].into());
        assert_eq!(keys.wrote, [(key("a"), t3), (key("b"), t2)].into());
    }
}
