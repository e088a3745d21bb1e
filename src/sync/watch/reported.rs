//! Failure and warning lines printed once per while: a failure that every
//! retry repeats (a member down, a refused write) is printed again only
//! after [`REPEAT_AFTER`], so that a watch that runs for days keeps a log
//! one can read. Time is passed in.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a line printed is not printed again.
pub(super) const REPEAT_AFTER: Duration = Duration::from_secs(300);

/// Lines older than this are forgotten (the map stays small).
const FORGET_AFTER: Duration = Duration::from_secs(600);

/// The lines printed, and when.
#[derive(Default)]
pub(super) struct Reported {
    printed: HashMap<String, Instant>,
}

impl Reported {
    /// Whether `line` is to be printed at `now`: not when it was within
    /// [`REPEAT_AFTER`]. A failure and a warning of the same text are two
    /// lines (`kind` tells them apart).
    pub(super) fn is_news(&mut self, kind: &str, line: &str, now: Instant) -> bool {
        let key = format!("{kind}: {line}");
        let repeat =
            (self.printed.get(&key)).is_some_and(|at| now.duration_since(*at) < REPEAT_AFTER);
        if !repeat {
            self.printed.insert(key, now);
        }
        self.printed
            .retain(|_, at| now.duration_since(*at) < FORGET_AFTER);
        !repeat
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_printed_again_only_after_a_while() {
        let t0 = Instant::now();
        let mut r = Reported::default();
        assert!(r.is_news("failure", "m1: refused", t0));
        assert!(!r.is_news("failure", "m1: refused", t0 + Duration::from_secs(299)));
        assert!(r.is_news("warning", "m1: refused", t0 + Duration::from_secs(1)));
        assert!(r.is_news("failure", "m2: refused", t0 + Duration::from_secs(2)));
        assert!(r.is_news("failure", "m1: refused", t0 + REPEAT_AFTER));
        // Forgotten lines do not keep the map growing.
        assert!(r.is_news("failure", "m3", t0 + FORGET_AFTER + REPEAT_AFTER));
        assert_eq!(r.printed.len(), 1);
    }
}
