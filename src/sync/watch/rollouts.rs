//! The watch's progressive rollouts (issue #57): the objects whose rollout
//! a round left waiting, and what takes each again. A wave's readiness is
//! watched, not polled: a member copy's status change is news for an
//! object only while its rollout waits ([`Rollouts::waits_for`]; other
//! objects' copies' status is no news, as before), and a soak's end or a
//! progress deadline is a time of its own ([`Rollouts::due`]), and so is
//! the round after one that wrote a wave (its writes' events are its own,
//! no news: the copies they made are read by the next round). Objects
//! without a policy, and those rolled out, are not here: nothing holds
//! them back. No I/O; time is passed in, as in `scheduler`.

use super::cache::WorkKey;
use crate::core::propagation::rollout::RolloutStand;
use crate::sync::run::report::RolloutLine;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// The rollouts the watch follows.
#[derive(Default)]
pub(super) struct Rollouts {
    /// Each object whose rollout a round reported, by key.
    known: BTreeMap<WorkKey, Known>,
    /// The rounds running, by number: the known objects each covers (a
    /// round that covers one and says nothing of it found it rolled out,
    /// without a policy, or gone).
    covers: HashMap<u64, BTreeSet<WorkKey>>,
}

/// Where one object's rollout stood after its last round.
struct Known {
    state: RolloutStand,
    /// What was said of it last (the log says each change once).
    detail: String,
    /// When to take it again, when a time moves it on.
    recheck: Option<Instant>,
}

impl Rollouts {
    /// Whether `key`'s rollout waits for its members: their copies'
    /// status changes are news for it.
    pub(super) fn waits_for(&self, key: &WorkKey) -> bool {
        self.known
            .get(key)
            .is_some_and(|k| k.state == RolloutStand::Waiting)
    }

    /// A round starts over the keys `covers` says it holds (`None`: every
    /// key).
    pub(super) fn round_started(&mut self, id: u64, covers: Option<&dyn Fn(&WorkKey) -> bool>) {
        let covered: BTreeSet<WorkKey> = (self.known.keys())
            .filter(|k| covers.is_none_or(|c| c(k)))
            .cloned()
            .collect();
        if !covered.is_empty() {
            self.covers.insert(id, covered);
        }
    }

    /// A round ended (`lines`: its rollouts; `None`: it failed as a
    /// whole, and what it covered stays as it was). `now` and `unix_now`
    /// are the same moment, on the clock of the loop and of the record.
    /// Returns what is news for the log: each rollout whose line changed.
    pub(super) fn round_done<'a>(
        &mut self,
        id: u64,
        lines: Option<&'a [RolloutLine]>,
        now: Instant,
        unix_now: i64,
    ) -> Vec<&'a RolloutLine> {
        let covered = self.covers.remove(&id).unwrap_or_default();
        let Some(lines) = lines else {
            return Vec::new();
        };
        let mut news = Vec::new();
        let mut said = BTreeSet::new();
        for line in lines {
            said.insert(&line.key);
            let recheck = match line.state {
                // Its own writes start no round (their events are the
                // round's own): the next one reads the copies it wrote.
                RolloutStand::Waiting if !line.wrote.is_empty() => Some(now),
                RolloutStand::Waiting => line
                    .recheck_at
                    .map(|at| now + Duration::from_secs(at.saturating_sub(unix_now).max(0) as u64)),
                _ => None,
            };
            let before = self.known.insert(
                line.key.clone(),
                Known {
                    state: line.state,
                    detail: line.detail.clone(),
                    recheck,
                },
            );
            if before.is_none_or(|b| b.detail != line.detail || b.state != line.state) {
                news.push(line);
            }
        }
        for k in covered.iter().filter(|k| !said.contains(k)) {
            self.known.remove(k);
        }
        news
    }

    /// The rollouts whose time has come (a soak over, a deadline passed):
    /// taken again now, each once until its next round says when.
    pub(super) fn due(&mut self, now: Instant) -> Vec<WorkKey> {
        let mut due = Vec::new();
        for (key, k) in &mut self.known {
            if k.recheck.is_some_and(|at| at <= now) {
                k.recheck = None;
                due.push(key.clone());
            }
        }
        due
    }

    /// Every round was cancelled (the lock is not renewed).
    pub(super) fn abandon(&mut self) {
        self.covers.clear();
    }
}

/// A rollout's line in the watch's log: a halt as a warning.
pub(super) fn log(line: &RolloutLine) {
    match line.state {
        RolloutStand::Halted => tracing::warn!("halted: {}", line.line()),
        _ => tracing::info!("{}", line.line()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::describe::ObjectKey;

    fn key(name: &str) -> WorkKey {
        WorkKey::new("configmaps", ObjectKey::new("shop", name))
    }

    fn line(name: &str, state: RolloutStand, detail: &str, recheck_at: Option<i64>) -> RolloutLine {
        RolloutLine {
            object: format!("FederatedConfigMap shop/{name}"),
            key: key(name),
            state,
            detail: detail.into(),
            wrote: Vec::new(),
            waves_text: String::new(),
            waves_markdown: String::new(),
            recheck_at,
        }
    }

    #[test]
    fn a_waiting_rollout_is_taken_again_at_its_time_and_on_its_members_status() {
        let t0 = Instant::now();
        let mut r = Rollouts::default();
        assert!(!r.waits_for(&key("a")));
        r.round_started(1, None);
        let lines = [
            line("a", RolloutStand::Waiting, "wave 1: wrote m1", Some(1010)),
            line("b", RolloutStand::Waiting, "wave 1: waiting for m1", None),
        ];
        let news = r.round_done(1, Some(&lines), t0, 1000);
        assert_eq!(news.len(), 2, "a first line is news");
        assert!(r.waits_for(&key("a")) && r.waits_for(&key("b")));
        assert!(
            !r.waits_for(&key("c")),
            "no rollout: its copies' status is no news"
        );
        assert!(r.due(t0 + Duration::from_secs(9)).is_empty());
        assert_eq!(r.due(t0 + Duration::from_secs(10)), [key("a")]);
        assert!(
            r.due(t0 + Duration::from_secs(60)).is_empty(),
            "once, until its next round says when"
        );
        // A round that wrote a wave is followed by one that reads it.
        r.round_started(4, Some(&|k: &WorkKey| *k == key("b")));
        let mut wrote = line("b", RolloutStand::Waiting, "wave 1: wrote m1", None);
        wrote.wrote = vec!["m1".into()];
        r.round_done(4, Some(std::slice::from_ref(&wrote)), t0, 1000);
        assert_eq!(r.due(t0), [key("b")]);
        // The same line again is no news; a changed one is.
        r.round_started(2, Some(&|k: &WorkKey| *k == key("a")));
        let again = [line("a", RolloutStand::Waiting, "wave 1: wrote m1", None)];
        assert!(r.round_done(2, Some(&again), t0, 1000).is_empty());
        r.round_started(3, Some(&|k: &WorkKey| *k == key("a")));
        let next = [line("a", RolloutStand::Waiting, "wave 2: wrote m2", None)];
        assert_eq!(r.round_done(3, Some(&next), t0, 1000).len(), 1);
    }

    #[test]
    fn a_halted_or_complete_rollout_waits_for_nothing_and_a_silent_round_forgets_it() {
        let t0 = Instant::now();
        let mut r = Rollouts::default();
        r.round_started(1, None);
        let lines = [
            line("a", RolloutStand::Waiting, "wave 1", Some(1005)),
            line("b", RolloutStand::Waiting, "wave 1", None),
            line("c", RolloutStand::Waiting, "wave 1", None),
        ];
        r.round_done(1, Some(&lines), t0, 1000);
        // A round over a and b: a halts, b says nothing (rolled out, or
        // its policy removed); c, not covered, still waits.
        r.round_started(2, Some(&|k: &WorkKey| *k != key("c")));
        let halted = [line(
            "a",
            RolloutStand::Halted,
            "halted in wave 1: m1",
            Some(1005),
        )];
        let news = r.round_done(2, Some(&halted), t0, 1000);
        assert_eq!(news[0].state, RolloutStand::Halted);
        assert!(!r.waits_for(&key("a")), "a halt waits for a new template");
        assert!(
            r.due(t0 + Duration::from_secs(10)).is_empty(),
            "nor for a time"
        );
        assert!(!r.waits_for(&key("b")));
        assert!(r.waits_for(&key("c")));
        // The halt said again is no news (every resync decides it again).
        r.round_started(3, None);
        let news = r.round_done(3, Some(&halted), t0, 1000);
        assert!(news.is_empty());
        assert!(
            !r.waits_for(&key("c")),
            "a round over everything said nothing of c"
        );
    }

    #[test]
    fn a_failed_or_cancelled_round_leaves_its_rollouts_as_they_were() {
        let t0 = Instant::now();
        let mut r = Rollouts::default();
        r.round_started(1, None);
        r.round_done(
            1,
            Some(&[line("a", RolloutStand::Waiting, "wave 1", None)]),
            t0,
            0,
        );
        r.round_started(2, None);
        assert!(r.round_done(2, None, t0, 0).is_empty());
        assert!(r.waits_for(&key("a")));
        r.round_started(3, None);
        r.abandon();
        r.round_done(3, Some(&[]), t0, 0);
        assert!(
            r.waits_for(&key("a")),
            "its covers went with the cancelled round"
        );
    }
}
