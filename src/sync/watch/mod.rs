//! `reconcile --watch`: the one-shot engine as a controller. Watches keep a
//! cache of the host (types, federated objects, FederatedNamespaces, RSPs,
//! clusters, the KubeFedConfig, versions, namespaces) and of every ready
//! member's managed objects; each change marks the federated objects it
//! touches, and a round re-decides exactly those with the same decide,
//! execute and record steps as a one-shot run (`live::round`). Full rounds
//! run at start, every `--resync-period`, when types, clusters or the
//! KubeFedConfig change, and once a member back has listed again; members
//! are probed every `--probe-interval`.
//!
//! Leader election is the run lock: one instance holds the Lease and works,
//! others (`--leader-elect`) wait to take it over once it expires.
//!
//! Faults: rounds run as tasks of their own (several at once, never two on
//! one object), so a member that stops answering holds back only its own
//! requests; probes run beside the loop; a lock that cannot be renewed
//! cancels every round and pauses writing until it is renewed (or lost);
//! watches start over by themselves (`sources`).
//!
//! The files, as kube-runtime keeps its runner apart from the reconcile:
//! this one holds the options, the terms of leadership, the `Controller`
//! and its loop (what the lock's changes do, the failure lines printed
//! once per while); the loop hands each of its arms to one file.
//! `intake` takes the watches' events into the cache and the queue (and
//! waits for the first lists at start); `rebuild` builds members, their
//! health and the watches again when the structure changes; `specs` gives
//! the triggers the run's scope, runs the watches they ask for and says
//! whether they have listed; `runner` holds the
//! rounds in flight, the loop's timers and whether rounds may start (tested
//! on a paused clock); `rounds` starts rounds as tasks over an observation
//! and takes their results back into the queue; `health` probes
//! the members, counts the thresholds, notices stalls and writes the
//! KubeFedClusters' status; `type_status` writes the FederatedTypeConfigs'
//! status; `tokens` renews short-lived member tokens before they expire;
//! `memory` tunes glibc's malloc for a process that lives for days.
//! Beside them: `sources` (the watchers), `cache` (what they saw: its
//! store, the triggers, one registration per source of how it is watched
//! and which objects its changes touch, a round's observation),
//! `metrics` and `process` (what `/metrics` serves).

pub mod cache;
mod fleet;
mod health;
mod intake;
mod memory;
pub mod metrics;
pub mod process;
mod rebuild;
mod reported;
mod rollouts;
mod rounds;
mod runner;
mod scheduler;
pub mod sources;
mod specs;
mod tokens;
mod type_status;

use crate::clients::host::Host;
use crate::core::run::lease::RECONCILE_LEASE;
use crate::parallel::locked;
use crate::sync::live;
use crate::sync::lock::{self, LockState, RunLock};
use crate::terminal::signals::Signals;
use anyhow::{Result, bail};
use fleet::Fleet;
use intake::Intake;
use metrics::Metrics;
use reported::Reported;
use rollouts::Rollouts;
use rounds::{FromRound, RoundDone};
use runner::{FromRounds, Runner, Timer};
use scheduler::{ROUNDS_IN_FLIGHT, Scheduler};
use sources::Source;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::watch as state;

/// `reconcile --watch` and its flags.
pub struct WatchOptions {
    /// What each round does (selection, concurrency, attempts, timeouts).
    pub run: live::Options,
    /// The host, without a read timeout: watches are silent while nothing
    /// changes.
    pub watch_client: kube::Client,
    /// `--probe-interval`; `None`: the KubeFedConfig's.
    pub probe_interval: Option<Duration>,
    pub resync_period: Duration,
    /// `--round-size`: keys one round covers at most (`rounds`).
    pub round_size: usize,
    pub leader_elect: bool,
    pub lock_timeout: Duration,
    /// The KubeFedConfig's `leaderElect` (read at start).
    pub lock_timings: crate::core::run::lease::LeaseTimings,
    pub no_lock: bool,
    pub metrics_bind_address: Option<SocketAddr>,
    /// `-v 2`: one line per member change.
    pub verbosity: u8,
}

/// Runs until SIGTERM or Ctrl-C (then `Ok`), or until another instance
/// takes the lock over (then an error naming it; with `--leader-elect` this
/// instance stands by again instead).
pub async fn run(host: &Host, o: &WatchOptions, mut stop: Signals) -> Result<()> {
    memory::limit_malloc_arenas();
    let metrics = Arc::new(Metrics::default());
    metrics
        .max_rounds
        .store(ROUNDS_IN_FLIGHT as u64, Ordering::Relaxed);
    if let Some(addr) = o.metrics_bind_address {
        metrics::serve(addr, metrics.clone()).await?;
    }
    let shared = Shared {
        host: Arc::new(host.clone()),
        run: Arc::new(o.run.clone()),
    };
    loop {
        let lock = if o.no_lock {
            None
        } else {
            match wait_for_lock(host, o, &mut stop).await? {
                Some(lock) => Some(lock),
                None => return Ok(()),
            }
        };
        metrics.leader.store(true, Ordering::Relaxed);
        let shard = o.run.selection.scope.shard;
        tracing::info!(
            "watching the federation in {} (host {:?}){}",
            host.namespace,
            host.context,
            shard.map(|s| format!(", shard {s}")).unwrap_or_default()
        );
        let mut controller = Controller::new(shared.clone(), o, metrics.clone());
        let ended = controller.run(lock.as_ref(), &mut stop).await;
        // Stopping: the types are no longer propagated (a lost lock's new
        // holder says so itself).
        if !matches!(ended, Ok(Ended::Lost { .. })) {
            controller.write_type_statuses(false).await;
        }
        drop(controller);
        metrics.leader.store(false, Ordering::Relaxed);
        metrics.synced.store(false, Ordering::Relaxed);
        metrics.rounds_in_flight.store(0, Ordering::Relaxed);
        *locked(&metrics.lock_suspended_since) = None;
        match ended {
            Ok(Ended::Stopped) => {
                if let Some(lock) = lock {
                    lock.release().await?;
                }
                return Ok(());
            }
            Ok(Ended::Lost { holder }) if o.leader_elect => {
                tracing::warn!("lock: {holder} holds the federation lock now; standing by");
            }
            Ok(Ended::Lost { holder }) => bail!(
                "lost the federation lock to {holder}; stopping (with --leader-elect this instance would stand by)"
            ),
            Err(e) => {
                if let Some(lock) = lock {
                    let _ = lock.release().await;
                }
                return Err(e);
            }
        }
    }
}

/// Waits for the federation lock: for ever with `--leader-elect` (a
/// standby), else up to `--lock-timeout`; `None` when a signal ended the
/// wait.
async fn wait_for_lock(
    host: &Host,
    o: &WatchOptions,
    stop: &mut Signals,
) -> Result<Option<RunLock>> {
    // Each shard has a lock of its own, and a standby of its own.
    let lease = crate::core::run::shard::lease_of(o.run.selection.scope.shard, RECONCILE_LEASE);
    let wait = if o.leader_elect {
        tracing::info!(
            "waiting for the federation lock {}/{lease} (--leader-elect)",
            host.namespace
        );
        Duration::MAX
    } else {
        o.lock_timeout
    };
    tokio::select! {
        lock = lock::take(host, &lease, wait, o.lock_timings) => Ok(Some(lock?)),
        _ = stop.next() => {
            tracing::info!("stopped while waiting for the federation lock");
            Ok(None)
        }
    }
}

/// How a leadership term ended.
enum Ended {
    /// SIGTERM or Ctrl-C.
    Stopped,
    /// Another instance took the lock over.
    Lost { holder: String },
}

/// What rounds, as tasks of their own, share with the loop.
#[derive(Clone)]
struct Shared {
    host: Arc<Host>,
    run: Arc<live::Options>,
}

/// One term of leadership: the watches, their cache, the work queue,
/// the members and their health, the rounds in flight.
struct Controller<'a> {
    /// The host and the rounds' options, shared with the rounds' tasks.
    shared: Shared,
    o: &'a WatchOptions,
    metrics: Arc<Metrics>,
    /// The watches, their cache, the members catching up.
    intake: Intake,
    /// The round bookkeeping: the queue, full rounds, keys in flight.
    scheduler: Scheduler,
    /// The members, each with its health, and their probes.
    fleet: Fleet,
    /// The progressive rollouts waiting: what takes each again.
    rollouts: Rollouts,
    /// Failure lines printed, and when: a failure repeated by every retry
    /// is printed again only after a while.
    reported: Reported,
    /// The rounds in flight and what they tell as they go (objects they
    /// are done with, their writes' answers: `rounds::take_round_news`),
    /// the loop's timers, and whether rounds may start.
    runner: Runner<RoundDone, FromRound>,
}

impl<'a> Controller<'a> {
    /// A controller for one term of leadership: nothing watched yet.
    fn new(shared: Shared, o: &'a WatchOptions, metrics: Arc<Metrics>) -> Controller<'a> {
        let intake = Intake::new(
            metrics.clone(),
            o.run.selection.scope.shard,
            &shared.host.namespace,
        );
        Controller {
            shared,
            o,
            intake,
            metrics,
            scheduler: Scheduler::new(o.round_size),
            fleet: Fleet::default(),
            rollouts: Rollouts::default(),
            reported: Reported::default(),
            runner: Runner::new(),
        }
    }
}

impl Controller<'_> {
    async fn run(&mut self, lock: Option<&RunLock>, stop: &mut Signals) -> Result<Ended> {
        if !self.start_watching(stop).await? {
            return Ok(Ended::Stopped);
        }
        let mut lock_state = lock.map(RunLock::state);
        let health = self.intake.cache.settings.health.period;
        (self.runner)
            .clock
            .start(
                self.o.probe_interval.unwrap_or(health),
                self.o.resync_period,
            )
            .await;
        loop {
            self.metrics.beat();
            let retry = self.scheduler.next_retry(Instant::now());
            tokio::select! {
                biased;
                _ = stop.next() => {
                    self.finish_rounds().await;
                    return Ok(Ended::Stopped);
                }
                Some(now) = lock_changed(&mut lock_state) => match now {
                    LockState::Held => {
                        self.resume();
                        self.runner.want_full(true);
                    }
                    LockState::Suspended { since } => self.suspend(since).await,
                    LockState::Lost { holder } => {
                        self.suspend(Instant::now()).await;
                        return Ok(Ended::Lost { holder });
                    }
                },
                Some(from) = self.runner.rounds.next() => {
                    self.runner.was_active();
                    match from {
                        FromRounds::News(round, news) => self.take_round_news(round, news),
                        FromRounds::Done(Ok(done)) => self.finish(done),
                        FromRounds::Done(Err(_)) => {}
                    }
                }
                Some(event) = self.intake.next() => {
                    self.runner.was_active();
                    let structure = self.take_events(event).await;
                    self.runner.want_full(structure);
                }
                probed = self.fleet.probe_done() => {
                    self.probed(probed).await;
                    self.rotate_due_tokens().await;
                    if self.runner.take_active() {
                        memory::release_free_memory();
                    }
                }
                timer = self.runner.clock.next(retry) => self.timer(timer).await,
            }
            self.after_wake().await;
        }
    }

    /// One of the loop's timers fired.
    async fn timer(&mut self, timer: Timer) {
        match timer {
            Timer::Probe => self.start_probe(),
            Timer::Resync => {
                self.try_rebuild().await;
                self.runner.want_full(true);
            }
            Timer::Tick => {
                self.scheduler.queue_held_changes();
                let now = Instant::now();
                for key in self.rollouts.due(now) {
                    self.scheduler.mark(key, now);
                }
                if self.runner.rebuild_is_due(Instant::now()) {
                    self.try_rebuild().await;
                }
            }
            // The rounds it lets start start after the wake.
            Timer::Retry => {}
        }
    }

    /// After each wake of the loop: stalled members are taken as not
    /// ready, and the rounds that may run start (not while suspended, nor
    /// before the host's watches have listed).
    async fn after_wake(&mut self) {
        self.notice_stalled_members().await;
        self.metrics
            .queue_depth
            .store(self.scheduler.depth() as u64, Ordering::Relaxed);
        let synced = self.intake.cache.host_synced(&self.host_sources());
        if let Some(full) = self.runner.may_start(synced) {
            let still_due = self.next_round(full);
            self.runner.started(still_due);
        }
        self.metrics
            .rounds_in_flight
            .store(self.scheduler.running() as u64, Ordering::Relaxed);
    }

    /// The lock could not be renewed: every round in flight is cancelled
    /// (its objects wait again) and nothing is written until it is.
    async fn suspend(&mut self, since: Instant) {
        *locked(&self.metrics.lock_suspended_since) = Some(since);
        self.runner.suspend().await;
        self.scheduler.abandon();
        self.rollouts.abandon();
    }

    /// The lock is renewed after a suspension: every host watch lists again
    /// (what it missed while the host was away) and everything is
    /// re-decided. The members' watches go on: they missed nothing, and one
    /// that failed meanwhile restarts itself; listing them all again cost
    /// the catch-up after a host outage at 10,000 objects × 10 members the
    /// relist of 100,000 member copies.
    fn resume(&mut self) {
        if !self.runner.resume(Instant::now()) {
            return;
        }
        *locked(&self.metrics.lock_suspended_since) = None;
        // Started again at once (not at the rebuild, nor after their
        // backoff): until each has listed no round runs, and a host source
        // that is not running would count as synced.
        self.restart_sources(|s| !matches!(s, Source::Member(..)));
    }

    /// Prints a warning line, unless it was printed in the last 5 minutes.
    fn report_warning(&mut self, line: String) {
        if self.reported.is_news("warning", &line, Instant::now()) {
            tracing::warn!("{line}");
        }
    }

    /// Prints a failure line, unless it was printed in the last 5 minutes.
    fn report_failure(&mut self, line: String) {
        if self.reported.is_news("failure", &line, Instant::now()) {
            tracing::error!("{line}");
        }
    }
}

/// The lock's next state (never, without a lock or once it is settled).
async fn lock_changed(rx: &mut Option<state::Receiver<LockState>>) -> Option<LockState> {
    let Some(rx) = rx else {
        return std::future::pending().await;
    };
    if rx.changed().await.is_err() {
        return std::future::pending().await;
    }
    Some(rx.borrow_and_update().clone())
}
