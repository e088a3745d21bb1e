//! One member request of the execute step, with retries (429 after
//! Retry-After, 5xx, timeouts, connection errors) and a re-read on
//! conflict that lets the core decide the update again. The request itself
//! goes through `requests::MemberRequests`; the pipeline (`pipeline.rs`)
//! decides when and how many at once.

use crate::apply::api_error_line;
use crate::clients::members::Stall;
use crate::core::propagation::action::{Action, ClusterStatus};
use crate::core::propagation::member::{self, SyncSettings};
use crate::core::propagation::overrides::MemberCluster;
use crate::core::propagation::retry::{self, Attempt, Failure, Next};
use crate::sync::live::requests::{Answered, MemberRequests};
use crate::sync::run::work::Work;
use std::collections::BTreeMap;
use std::time::Duration;

/// How member requests are made.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Requests in flight per member.
    pub concurrency: usize,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Attempts per request (first try included).
    pub attempts: u32,
    pub settings: SyncSettings,
}

/// One request with retries: 429 (after Retry-After), 5xx, timeouts and
/// connection errors are retried with backoff; a conflict re-reads the
/// member object and lets the core decide the update again. `stalled`
/// (the watch's): a timeout marks the member as not answering, and while it
/// is marked every attempt gives up at once with a timed-out status. With
/// the member copy as the server answered a create or update (the watch
/// holds it at once: `progress::Answer`).
pub async fn apply_one(
    requests: &impl MemberRequests,
    (w, labels): (&Work<'_>, &BTreeMap<String, String>),
    limits: Limits,
    stalled: Option<&Stall>,
) -> Result<Answered, (ClusterStatus, String)> {
    let t = w.ty;
    let key = w.key();
    let cluster = w.decision.cluster.as_str();
    let failed = w
        .decision
        .action
        .failure_status()
        .unwrap_or(ClusterStatus::UpdateFailed);
    let mut action = w.decision.action.clone();
    let fed = w.target.object();
    let stall_message = "the member stopped answering; not tried until a probe is answered";
    let mut number = 0;
    loop {
        number += 1;
        if stalled.is_some_and(Stall::is_set) {
            return Err((retry::timed_out(failed), stall_message.to_string()));
        }
        let request = requests.act(cluster, &t.target, &key, &action);
        let request = tokio::time::timeout(limits.timeout, request);
        let answer = match stalled {
            // A member found frozen meanwhile ends this request at once.
            Some(s) => tokio::select! {
                answer = request => answer,
                () = s.wait() => return Err((retry::timed_out(failed), stall_message.to_string())),
            },
            None => request.await,
        };
        let (failure, message) = match answer {
            Ok(Ok(done)) => return Ok(done),
            Ok(Err(e)) => classify(e),
            Err(_) => (
                Failure::NoAnswer,
                format!("no answer within {:?}", limits.timeout),
            ),
        };
        let attempt = Attempt {
            number,
            allowed: limits.attempts,
            failed,
            can_redecide: fed.is_some()
                && matches!(w.decision.action, Action::Create(_) | Action::Update { .. }),
            stall_on_timeout: stalled.is_some(),
        };
        match retry::next(failure, attempt) {
            Next::RetryAfter(delay) => tokio::time::sleep(delay).await,
            Next::GiveUp(status) => {
                if let (Some(s), Failure::NoAnswer) = (stalled, failure) {
                    s.set();
                }
                let message = match failure {
                    Failure::Conflict if attempt.can_redecide => {
                        format!("gave up after conflicts: {message}")
                    }
                    _ => message,
                };
                return Err((status, message));
            }
            Next::Reread => {
                action = redecide(requests, (w, labels), limits, message).await?;
            }
        }
    }
}

/// After a conflict: the member object as it is now, and the action it
/// needs, decided again (it was created or changed meanwhile).
async fn redecide(
    requests: &impl MemberRequests,
    (w, labels): (&Work<'_>, &BTreeMap<String, String>),
    limits: Limits,
    message: String,
) -> Result<Action, (ClusterStatus, String)> {
    let t = w.ty;
    let failed = w
        .decision
        .action
        .failure_status()
        .unwrap_or(ClusterStatus::UpdateFailed);
    let fed = w
        .target
        .object()
        .expect("only federated objects are decided again");
    let live = match requests.get(&w.decision.cluster, &t.target, &w.key()).await {
        Ok(Some(l)) => l,
        Ok(None) => return Err((failed, format!("conflict, then gone: {message}"))),
        Err(e) => return Err((ClusterStatus::RetrievalFailed, api_error_line(e))),
    };
    let cluster = MemberCluster {
        name: &w.decision.cluster,
        labels,
    };
    member::after_conflict(fed, &t.ty.target, cluster, &live, limits.settings)
}

/// A failed request as the retry rule sees it, and its message.
fn classify(e: kube::Error) -> (Failure, String) {
    match e {
        kube::Error::Api(s) if s.code == 409 => (Failure::Conflict, s.message.clone()),
        kube::Error::Api(s) if s.code == 429 || s.code >= 500 => {
            let retry_after_seconds = s.details.as_ref().map_or(0, |d| d.retry_after_seconds);
            (
                Failure::Busy {
                    retry_after_seconds,
                },
                api_error_line(kube::Error::Api(s)),
            )
        }
        kube::Error::Api(s) => (Failure::Refused, api_error_line(kube::Error::Api(s))),
        // Our own body could not be made: asking again changes nothing.
        kube::Error::SerdeError(e) => (Failure::Refused, format!("not a valid object: {e}")),
        other => (Failure::Transport, crate::error::source_chain(&other)),
    }
}
