//! The loop's runner, as kube-runtime keeps its `runner.rs` apart from the
//! reconcile: the rounds in flight as tasks and their news, the loop's
//! timers (probes, resyncs, the second's tick, the queue's next retry),
//! whether a full round is due, and whether rounds may start at all (not
//! while the lock is suspended). It knows nothing of what a round does
//! (`rounds`) nor which rounds start (`scheduler`), so that it is tested
//! alone on a paused clock.

use std::future::{Future, pending};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::task::{JoinError, JoinSet};
use tokio::time::{Interval, MissedTickBehavior};

/// What a round tells the loop as it goes: (round, news).
pub(super) type NewsSender<N> = UnboundedSender<(u64, N)>;

/// Rounds in flight, each a task ending in a `D`, telling `N`s as it goes.
pub(super) struct Rounds<D, N> {
    tasks: JoinSet<D>,
    news_tx: NewsSender<N>,
    news_rx: UnboundedReceiver<(u64, N)>,
}

/// What the rounds in flight brought the loop.
pub(super) enum FromRounds<D, N> {
    /// A round's news, as it went: (round, news).
    News(u64, N),
    /// A round ended (or its task failed).
    Done(Result<D, JoinError>),
}

impl<D: Send + 'static, N> Rounds<D, N> {
    fn new() -> Rounds<D, N> {
        let (news_tx, news_rx) = unbounded_channel();
        Rounds {
            tasks: JoinSet::new(),
            news_tx,
            news_rx,
        }
    }

    /// Where a round tells its news.
    pub(super) fn sender(&self) -> NewsSender<N> {
        self.news_tx.clone()
    }

    /// Runs a round as a task of its own.
    pub(super) fn spawn(&mut self, round: impl Future<Output = D> + Send + 'static) {
        self.tasks.spawn(round);
    }

    /// The next news, or else the next round's end: a round's news is
    /// sent before it ends, so it is taken first.
    pub(super) async fn next(&mut self) -> Option<FromRounds<D, N>> {
        tokio::select! {
            biased;
            Some((round, news)) = self.news_rx.recv() => Some(FromRounds::News(round, news)),
            Some(done) = self.tasks.join_next(), if !self.tasks.is_empty() => {
                Some(FromRounds::Done(done))
            }
            else => None,
        }
    }

    /// News already sent (a round that ended told it before).
    pub(super) fn try_news(&mut self) -> Option<(u64, N)> {
        self.news_rx.try_recv().ok()
    }

    /// The next round to end, waited for; `None` when none runs.
    pub(super) async fn join_next(&mut self) -> Option<Result<D, JoinError>> {
        self.tasks.join_next().await
    }

    /// Every round cancelled, and what they told dropped.
    async fn abort_all(&mut self) {
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        while self.news_rx.try_recv().is_ok() {}
    }
}

/// A timer of the loop that fired, or the queue's retry that is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timer {
    /// Probe the members (`--probe-interval`).
    Probe,
    /// Rebuild and re-decide everything (`--resync-period`).
    Resync,
    /// Every second: held changes, rollouts due, a rebuild due.
    Tick,
    /// The queue's next retry is due.
    Retry,
}

/// The loop's timers, started once the first lists are in (`Clock::start`):
/// a missed tick is delayed, not made up for.
#[derive(Default)]
pub(super) struct Clock(Option<Timers>);

struct Timers {
    probe: Interval,
    resync: Interval,
    tick: Interval,
}

impl Clock {
    /// The timers start: the first probe and resync one period from now.
    pub(super) async fn start(&mut self, probe: Duration, resync: Duration) {
        self.0 = Some(Timers {
            probe: interval(probe).await,
            resync: interval(resync).await,
            tick: interval(Duration::from_secs(1)).await,
        });
    }

    /// The next timer to fire, or the retry at `retry` (never before the
    /// clock started). Taken in this order when several are due at once.
    pub(super) async fn next(&mut self, retry: Option<Instant>) -> Timer {
        let Some(t) = &mut self.0 else {
            return pending().await;
        };
        let retry = async {
            match retry {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = t.probe.tick() => Timer::Probe,
            _ = t.resync.tick() => Timer::Resync,
            _ = t.tick.tick() => Timer::Tick,
            _ = retry => Timer::Retry,
        }
    }
}

/// A timer whose first tick is now (taken), and that delays missed ticks.
async fn interval(every: Duration) -> Interval {
    let mut t = tokio::time::interval(every);
    t.set_missed_tick_behavior(MissedTickBehavior::Delay);
    t.tick().await;
    t
}

/// The rounds in flight, the loop's timers and when rounds may start.
pub(super) struct Runner<D, N> {
    pub rounds: Rounds<D, N>,
    pub clock: Clock,
    /// A full round is due: at start, after a resync, a structural
    /// change or the lock renewed.
    full: bool,
    /// Events or rounds ran since the heap was last trimmed.
    active: bool,
    /// The lock is not renewed: no round, no write.
    suspended: bool,
    /// A rebuild failed (or was put off while suspended): when to try again.
    rebuild_due: Option<Instant>,
}

impl<D: Send + 'static, N> Runner<D, N> {
    pub(super) fn new() -> Runner<D, N> {
        Runner {
            rounds: Rounds::new(),
            clock: Clock::default(),
            full: true,
            active: false,
            suspended: false,
            rebuild_due: None,
        }
    }

    /// A full round is wanted (`true`) or asked for again (`false` changes
    /// nothing): one asked for while one is due is the same round.
    pub(super) fn want_full(&mut self, wanted: bool) {
        self.full |= wanted;
    }

    /// Whether rounds may start now (the lock held, the host's watches
    /// listed: `host_synced`) and, if so, whether a full round is due.
    pub(super) fn may_start(&self, host_synced: bool) -> Option<bool> {
        (!self.suspended && host_synced).then_some(self.full)
    }

    /// The loop started the rounds it could: whether a full round is still
    /// due (one asked for while rounds run waits for them).
    pub(super) fn started(&mut self, full_still_due: bool) {
        self.full = full_still_due;
    }

    /// Events or rounds ran.
    pub(super) fn was_active(&mut self) {
        self.active = true;
    }

    /// Whether events or rounds ran since it was last asked: then the heap
    /// is worth trimming.
    pub(super) fn take_active(&mut self) -> bool {
        std::mem::take(&mut self.active)
    }

    pub(super) fn suspended(&self) -> bool {
        self.suspended
    }

    /// The lock could not be renewed: every round in flight is cancelled,
    /// what they told dropped, and none starts until it is.
    pub(super) async fn suspend(&mut self) {
        self.suspended = true;
        self.rounds.abort_all().await;
    }

    /// The lock is renewed: rounds may start, a rebuild is due now and a
    /// full round after it. Returns whether it was suspended.
    pub(super) fn resume(&mut self, now: Instant) -> bool {
        if !self.suspended {
            return false;
        }
        self.suspended = false;
        self.rebuild_due = Some(now);
        true
    }

    /// A rebuild is to be tried at `at` (`None`: none is due).
    pub(super) fn rebuild_at(&mut self, at: Option<Instant>) {
        self.rebuild_due = at;
    }

    /// Whether a rebuild is due at `now`.
    pub(super) fn rebuild_is_due(&self, now: Instant) -> bool {
        self.rebuild_due.is_some_and(|at| at <= now)
    }
}

#[cfg(test)]
mod tests;
