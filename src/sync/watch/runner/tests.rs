//! The runner alone, on a paused clock: rounds are plain tasks ending in a
//! number, their news strings.

use super::*;
// The paused clock is tokio's: `std::time::Instant` goes on.
use tokio::time::Instant as Paused;

type TestRunner = Runner<u32, &'static str>;

/// The timers that fire in `within` from now, with when (whole seconds).
async fn timers_within(r: &mut TestRunner, within: Duration) -> Vec<(u64, Timer)> {
    let start = Paused::now();
    let mut fired = Vec::new();
    loop {
        let timer = r.clock.next(None).await;
        if start.elapsed() > within {
            return fired;
        }
        fired.push((start.elapsed().as_secs(), timer));
    }
}

/// The tick fires every second, probes and resyncs at their periods from
/// the clock's start (never at once), each in its turn when due together.
#[tokio::test(start_paused = true)]
async fn timers_fire_at_their_periods_from_the_clocks_start() {
    let mut r = TestRunner::new();
    r.clock
        .start(Duration::from_secs(10), Duration::from_secs(25))
        .await;
    let fired = timers_within(&mut r, Duration::from_secs(30)).await;
    let at = |t: Timer| -> Vec<u64> {
        (fired.iter())
            .filter(|(_, f)| *f == t)
            .map(|(s, _)| *s)
            .collect()
    };
    assert_eq!(at(Timer::Probe), [10, 20, 30]);
    assert_eq!(at(Timer::Resync), [25]);
    assert_eq!(at(Timer::Tick), (1..=30).collect::<Vec<_>>());
    let at_10: Vec<Timer> = (fired.iter())
        .filter(|(s, _)| *s == 10)
        .map(|(_, t)| *t)
        .collect();
    assert_eq!(
        at_10,
        [Timer::Probe, Timer::Tick],
        "a probe before the tick"
    );
}

/// The queue's retry wakes the loop at its instant, between ticks; before
/// the clock starts nothing fires.
#[tokio::test(start_paused = true)]
async fn a_retry_wakes_the_loop_at_its_instant() {
    let mut r = TestRunner::new();
    let retry = (Paused::now() + Duration::from_millis(300)).into_std();
    let before = tokio::time::timeout(Duration::from_secs(5), r.clock.next(Some(retry))).await;
    assert!(before.is_err(), "no timer before the clock starts");
    r.clock
        .start(Duration::from_secs(60), Duration::from_secs(60))
        .await;
    let start = Paused::now();
    let retry = (start + Duration::from_millis(300)).into_std();
    assert_eq!(r.clock.next(Some(retry)).await, Timer::Retry);
    assert_eq!(start.elapsed(), Duration::from_millis(300));
    assert_eq!(r.clock.next(None).await, Timer::Tick);
    assert_eq!(start.elapsed(), Duration::from_secs(1));
}

/// A round's news comes back as it goes, ahead of its end, and a round
/// that ended hands over what it told before.
#[tokio::test(start_paused = true)]
async fn a_rounds_news_comes_before_its_end() {
    let mut r = TestRunner::new();
    let news = r.rounds.sender();
    r.rounds.spawn(async move {
        news.send((1, "settled a")).unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        news.send((1, "settled b")).unwrap();
        7
    });
    let start = Paused::now();
    assert!(matches!(
        r.rounds.next().await,
        Some(FromRounds::News(1, "settled a"))
    ));
    assert!(matches!(
        r.rounds.next().await,
        Some(FromRounds::News(1, "settled b"))
    ));
    assert!(matches!(
        r.rounds.next().await,
        Some(FromRounds::Done(Ok(7)))
    ));
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert!(r.rounds.try_news().is_none());
    let idle = tokio::time::timeout(Duration::from_secs(60), r.rounds.next()).await;
    assert!(idle.is_err(), "no round, no news: it waits");
}

/// Suspended, every round in flight is cancelled and its news dropped;
/// no round starts until the lock is renewed, and a rebuild is due then.
#[tokio::test(start_paused = true)]
async fn a_suspension_cancels_rounds_and_holds_new_ones_back() {
    let mut r = TestRunner::new();
    let news = r.rounds.sender();
    r.rounds.spawn(async move {
        news.send((1, "settled a")).unwrap();
        pending::<()>().await;
        1
    });
    tokio::task::yield_now().await;
    r.suspend().await;
    assert!(r.suspended());
    assert!(r.rounds.try_news().is_none(), "its news dropped");
    assert!(r.rounds.join_next().await.is_none(), "no round in flight");
    assert_eq!(r.may_start(true), None, "no round starts while suspended");
    let now = Instant::now();
    assert!(!r.rebuild_is_due(now));
    assert!(r.resume(now));
    assert!(!r.resume(now), "resumed once");
    assert!(r.rebuild_is_due(now));
    r.rebuild_at(None);
    assert!(!r.rebuild_is_due(now));
    assert_eq!(r.may_start(true), Some(true), "a full round is due");
}

/// A full round is due at start and stays due until the loop has started
/// it; not before the host's watches have listed. Asked for twice, it is one.
#[test]
fn a_full_round_is_due_at_start_until_started() {
    let mut r = TestRunner::new();
    assert_eq!(r.may_start(false), None, "not before the host has listed");
    assert_eq!(r.may_start(true), Some(true));
    // Rounds run: the full round waits for them, still due.
    r.started(true);
    assert_eq!(r.may_start(true), Some(true));
    r.started(false);
    assert_eq!(r.may_start(true), Some(false));
    r.want_full(false);
    assert_eq!(r.may_start(true), Some(false), "no change, no full round");
    r.want_full(true);
    r.want_full(true);
    assert_eq!(r.may_start(true), Some(true));
    r.started(false);
    assert_eq!(r.may_start(true), Some(false), "one round for both");
}

/// Activity is taken once: the heap is trimmed after a probe only when
/// something ran since the last one.
#[test]
fn activity_is_taken_once() {
    let mut r = TestRunner::new();
    assert!(!r.take_active());
    r.was_active();
    r.was_active();
    assert!(r.take_active());
    assert!(!r.take_active());
}
