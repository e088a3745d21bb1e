//! What a member request does after an answer that is not a success: try
//! again after a delay, read the object and decide again, or give up with
//! the status KubeFed records for the cluster. The execute step
//! (`sync/execute.rs`) only makes the requests and sleeps.

use std::time::Duration;

use crate::propagation::action::ClusterStatus;

/// How a member request failed, as far as the decision goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// No answer within the request timeout.
    NoAnswer,
    /// 409: created or changed by someone else meanwhile.
    Conflict,
    /// 429 or 5xx; the server's `Retry-After` (0: none).
    Busy { retry_after_seconds: u32 },
    /// Any other API status: the request itself is refused.
    Refused,
    /// The connection failed (refused, reset, TLS).
    Transport,
}

/// What to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Sleep, then make the same request again.
    RetryAfter(Duration),
    /// Read the member object and let the core decide the update again.
    Reread,
    /// Stop; the cluster's status.
    GiveUp(ClusterStatus),
}

/// The request's context for the decision.
#[derive(Clone, Copy, Debug)]
pub struct Attempt {
    /// This attempt, from 1.
    pub number: u32,
    /// Attempts allowed (`--attempts`, first try included).
    pub allowed: u32,
    /// The status the action records when it fails (`CreationFailed`, ...).
    pub failed: ClusterStatus,
    /// A create or update of a federated object (a conflict can be decided again).
    pub can_redecide: bool,
    /// The watch: a member that does not answer is marked stalled at once
    /// instead of being tried again, so that its other requests end too.
    pub stall_on_timeout: bool,
}

/// The one retry rule: timeouts, 429/5xx and connection errors are tried
/// again with backoff until the attempts run out (a server's Retry-After
/// wins); a conflict on a create or update is decided again; anything else
/// gives up at once. Timeouts give up with the action's `*TimedOut` status,
/// as upstream's dispatcher records (`pkg/controller/sync/dispatch`).
pub fn next(failure: Failure, a: Attempt) -> Next {
    let last = a.number >= a.allowed;
    match failure {
        Failure::NoAnswer if last || a.stall_on_timeout => Next::GiveUp(timed_out(a.failed)),
        Failure::NoAnswer | Failure::Transport if !last => Next::RetryAfter(backoff(a.number, 0)),
        Failure::Busy {
            retry_after_seconds,
        } if !last => Next::RetryAfter(backoff(a.number, retry_after_seconds)),
        Failure::Conflict if a.can_redecide && !last => Next::Reread,
        _ => Next::GiveUp(a.failed),
    }
}

/// The `*TimedOut` status of an action's `*Failed` one.
pub fn timed_out(failed: ClusterStatus) -> ClusterStatus {
    match failed {
        ClusterStatus::CreationFailed => ClusterStatus::CreationTimedOut,
        ClusterStatus::DeletionFailed => ClusterStatus::DeletionTimedOut,
        ClusterStatus::LabelRemovalFailed => ClusterStatus::LabelRemovalTimedOut,
        _ => ClusterStatus::UpdateTimedOut,
    }
}

/// 100 ms, 200 ms, 400 ms ... capped at 5 s; a server's Retry-After wins,
/// capped at 30 s.
pub fn backoff(attempt: u32, retry_after_seconds: u32) -> Duration {
    if retry_after_seconds > 0 {
        return Duration::from_secs(u64::from(retry_after_seconds)).min(Duration::from_secs(30));
    }
    Duration::from_millis(100u64 << attempt.min(6)).min(Duration::from_secs(5))
}

/// Retries client-go makes when a server asks for one: `maxRetries` of
/// `rest.Request` (`k8s.io/client-go/rest/request.go`).
pub const SERVER_ASKED_RETRIES: u32 = 10;

/// client-go's `checkWait`: a 429 or 5xx answer that carries `Retry-After`
/// in whole seconds is the server asking to be asked again later (a busy
/// or starting API server, a custom resource whose storage is being
/// initialised). How long to wait before retry number `retries_done + 1`,
/// or `None` when the answer is final: other statuses, no or unreadable
/// `Retry-After`, or the retries spent. A wait is capped at 30 s, as
/// [`backoff`] caps it, so that no header can stall a command for long.
pub fn server_asked_wait(
    status: u16,
    retry_after: Option<&str>,
    retries_done: u32,
) -> Option<Duration> {
    if status != 429 && status < 500 {
        return None;
    }
    if retries_done >= SERVER_ASKED_RETRIES {
        return None;
    }
    let seconds: u64 = retry_after?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds).min(Duration::from_secs(30)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ClusterStatus::*;

    fn attempt(number: u32, failed: ClusterStatus) -> Attempt {
        Attempt {
            number,
            allowed: 3,
            failed,
            can_redecide: true,
            stall_on_timeout: false,
        }
    }

    #[test]
    fn a_server_asks_for_a_retry_as_client_go_reads_it() {
        let s = Duration::from_secs;
        let cases = [
            ("429 with Retry-After", 429, Some("1"), 0, Some(s(1))),
            ("starting server's 503", 503, Some("10"), 3, Some(s(10))),
            ("504 with Retry-After", 504, Some(" 2 "), 0, Some(s(2))),
            ("Retry-After 0: at once", 429, Some("0"), 0, Some(s(0))),
            ("capped at 30 s", 503, Some("3600"), 0, Some(s(30))),
            ("no Retry-After: final", 503, None, 0, None),
            (
                "an HTTP date is not read",
                429,
                Some("Wed, 21 Oct 2026 07:28:00 GMT"),
                0,
                None,
            ),
            ("a negative wait is not read", 429, Some("-1"), 0, None),
            ("409 is no busy server", 409, Some("1"), 0, None),
            ("404 either", 404, Some("1"), 0, None),
            ("the tenth retry", 429, Some("1"), 9, Some(s(1))),
            ("ten retries spent", 429, Some("1"), 10, None),
        ];
        for (what, status, header, done, want) in cases {
            assert_eq!(server_asked_wait(status, header, done), want, "{what}");
        }
    }

    #[test]
    fn what_follows_each_failure() {
        let ms = Duration::from_millis;
        let busy = |s| Failure::Busy {
            retry_after_seconds: s,
        };
        let cases = [
            (
                "timeout, attempts left",
                Failure::NoAnswer,
                attempt(1, CreationFailed),
                Next::RetryAfter(ms(200)),
            ),
            (
                "timeout, last attempt",
                Failure::NoAnswer,
                attempt(3, CreationFailed),
                Next::GiveUp(CreationTimedOut),
            ),
            (
                "timeout in a watch: stalled at once",
                Failure::NoAnswer,
                Attempt {
                    stall_on_timeout: true,
                    ..attempt(1, DeletionFailed)
                },
                Next::GiveUp(DeletionTimedOut),
            ),
            (
                "timeout of an unlabel",
                Failure::NoAnswer,
                attempt(3, LabelRemovalFailed),
                Next::GiveUp(LabelRemovalTimedOut),
            ),
            (
                "timeout of an update",
                Failure::NoAnswer,
                attempt(3, UpdateFailed),
                Next::GiveUp(UpdateTimedOut),
            ),
            (
                "503 without Retry-After",
                busy(0),
                attempt(2, UpdateFailed),
                Next::RetryAfter(ms(400)),
            ),
            (
                "429 with Retry-After",
                busy(2),
                attempt(1, UpdateFailed),
                Next::RetryAfter(Duration::from_secs(2)),
            ),
            (
                "Retry-After is capped",
                busy(600),
                attempt(1, UpdateFailed),
                Next::RetryAfter(Duration::from_secs(30)),
            ),
            (
                "busy on the last attempt",
                busy(1),
                attempt(3, UpdateFailed),
                Next::GiveUp(UpdateFailed),
            ),
            (
                "connection refused",
                Failure::Transport,
                attempt(1, CreationFailed),
                Next::RetryAfter(ms(200)),
            ),
            (
                "connection refused, last",
                Failure::Transport,
                attempt(3, CreationFailed),
                Next::GiveUp(CreationFailed),
            ),
            (
                "conflict on a create",
                Failure::Conflict,
                attempt(1, CreationFailed),
                Next::Reread,
            ),
            (
                "conflicts until the last attempt",
                Failure::Conflict,
                attempt(3, UpdateFailed),
                Next::GiveUp(UpdateFailed),
            ),
            (
                "conflict on a delete",
                Failure::Conflict,
                Attempt {
                    can_redecide: false,
                    ..attempt(1, DeletionFailed)
                },
                Next::GiveUp(DeletionFailed),
            ),
            (
                "403 is final",
                Failure::Refused,
                attempt(1, CreationFailed),
                Next::GiveUp(CreationFailed),
            ),
        ];
        for (name, failure, a, want) in cases {
            assert_eq!(next(failure, a), want, "{name}");
        }
    }

    #[test]
    fn backoff_doubles_to_five_seconds() {
        let got: Vec<u64> = (1..=8).map(|a| backoff(a, 0).as_millis() as u64).collect();
        assert_eq!(got, [200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
    }
}
