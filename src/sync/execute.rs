//! One member request of the execute step, with retries (429 after
//! Retry-After, 5xx, timeouts, connection errors) and a re-read on
//! conflict that lets the core decide the update again. The pipeline
//! (`pipeline.rs`) decides when and how many at once.

use crate::apply::api_error_line;
use crate::core::decide::{ObjectKey, describe, key_of};
use crate::core::desired::MANAGED_LABEL;
use crate::core::plan::{self, Action, ClusterStatus, Decision, SyncSettings};
use crate::core::record::{Done, Effect, MemberResult};
use crate::core::version::member_version;
use crate::members::Stall;
use crate::sync::observe::ObservedType;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
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

/// One member request to make.
#[derive(Clone, Debug)]
pub struct Work {
    pub type_index: usize,
    /// The federated object's index in its type; `None` for an orphan.
    pub object: Option<usize>,
    pub decision: Decision,
    /// The member object as listed (absent for creates).
    pub live: Option<Value>,
}

impl Work {
    /// The member object's key.
    pub fn key(&self) -> ObjectKey {
        match (&self.live, &self.decision.action) {
            (Some(live), _) => key_of(live),
            (None, Action::Create(obj)) => key_of(obj),
            _ => ObjectKey::default(),
        }
    }

    /// `Kind ns/name` of the member object.
    pub fn describe(&self, kind: &str) -> String {
        match (&self.live, &self.decision.action) {
            (Some(live), _) => describe(kind, live),
            (None, Action::Create(obj)) => describe(kind, obj),
            (None, Action::Update { object, .. }) => describe(kind, object),
            _ => kind.to_string(),
        }
    }
}

/// One request with retries: 429 (after Retry-After), 5xx, timeouts and
/// connection errors are retried with backoff; a conflict re-reads the
/// member object and lets the core decide the update again. `stalled`
/// (the watch's): a timeout marks the member as not answering, and while it
/// is marked every attempt gives up at once with a timed-out status.
pub async fn apply_one(
    client: &kube::Client,
    t: &ObservedType,
    w: &Work,
    limits: Limits,
    stalled: Option<&Stall>,
) -> MemberResult {
    let (ns, name) = w.key();
    let api = crate::apply::dynamic_api(client, Some(&ns), &t.target);
    let failed = w
        .decision
        .action
        .failure_status()
        .unwrap_or(ClusterStatus::UpdateFailed);
    let mut action = w.decision.action.clone();
    let timed_out = match failed {
        ClusterStatus::CreationFailed => ClusterStatus::CreationTimedOut,
        ClusterStatus::DeletionFailed => ClusterStatus::DeletionTimedOut,
        ClusterStatus::LabelRemovalFailed => ClusterStatus::LabelRemovalTimedOut,
        _ => ClusterStatus::UpdateTimedOut,
    };
    let gave_up = || {
        Err((
            timed_out,
            "the member stopped answering; not tried until a probe is answered".to_string(),
        ))
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        if stalled.is_some_and(Stall::is_set) {
            return gave_up();
        }
        let request = tokio::time::timeout(limits.timeout, run_action(&api, &name, &action));
        let answer = match stalled {
            // A member found frozen meanwhile ends this request at once.
            Some(s) => tokio::select! {
                answer = request => answer,
                () = s.wait() => return gave_up(),
            },
            None => request.await,
        };
        let err = match answer {
            Ok(Ok(done)) => return Ok(done),
            Ok(Err(e)) => e,
            Err(_) if attempt >= limits.attempts || stalled.is_some() => {
                if let Some(s) = stalled {
                    s.set();
                }
                return Err((timed_out, format!("no answer within {:?}", limits.timeout)));
            }
            Err(_) => {
                backoff(attempt, None).await;
                continue;
            }
        };
        match err {
            kube::Error::Api(s) if s.code == 409 => {
                // Created meanwhile, or changed meanwhile: read it and decide again.
                let creating_or_updating =
                    matches!(w.decision.action, Action::Create(_) | Action::Update { .. });
                let (Some(fed), true) = (w.object.map(|i| &t.objects[i]), creating_or_updating)
                else {
                    return Err((failed, s.message.clone()));
                };
                let live = match api.get_opt(&name).await {
                    Ok(Some(l)) => serde_json::to_value(l).expect("objects serialize"),
                    Ok(None) => {
                        return Err((failed, format!("conflict, then gone: {}", s.message)));
                    }
                    Err(e) => return Err((ClusterStatus::RetrievalFailed, api_error_line(e))),
                };
                action = plan::after_conflict(
                    fed,
                    &t.t.target,
                    &w.decision.cluster,
                    &live,
                    limits.settings,
                )?;
            }
            kube::Error::Api(s) if s.code == 429 || s.code >= 500 => {
                if attempt >= limits.attempts {
                    return Err((failed, api_error_line(kube::Error::Api(s))));
                }
                let retry_after = s
                    .details
                    .as_ref()
                    .map(|d| d.retry_after_seconds)
                    .filter(|s| *s > 0)
                    .map(|s| Duration::from_secs(u64::from(s)));
                backoff(attempt, retry_after).await;
                continue;
            }
            kube::Error::Api(s) => return Err((failed, api_error_line(kube::Error::Api(s)))),
            other => {
                if attempt >= limits.attempts {
                    return Err((failed, crate::error::source_chain(&other)));
                }
                backoff(attempt, None).await;
                continue;
            }
        }
        if attempt >= limits.attempts {
            return Err((failed, "gave up after conflicts".into()));
        }
    }
}

fn body(obj: &Value) -> DynamicObject {
    serde_json::from_value(obj.clone()).expect("desired objects are objects")
}

async fn run_action(
    api: &Api<DynamicObject>,
    name: &str,
    action: &Action,
) -> Result<Done, kube::Error> {
    let version = |o: DynamicObject| {
        Some(member_version(
            &serde_json::to_value(o).expect("objects serialize"),
        ))
    };
    let done = |effect| Done {
        effect,
        version: None,
    };
    match action {
        Action::Create(obj) => {
            let created = api.create(&PostParams::default(), &body(obj)).await?;
            Ok(Done {
                effect: Effect::Created,
                version: version(created),
            })
        }
        Action::Update { object, .. } => {
            let updated = api
                .replace(name, &PostParams::default(), &body(object))
                .await?;
            Ok(Done {
                effect: Effect::Updated,
                version: version(updated),
            })
        }
        Action::Delete { options } => {
            let dp = delete_params(options.as_ref());
            match api.delete(name, &dp).await {
                // The server answers with the object while it still exists
                // (finalizers, graceful deletion), with a Status once gone.
                Ok(either) => Ok(done(Effect::Deleted {
                    gone: either.is_right()
                        || either
                            .left()
                            .is_some_and(|o| o.metadata.deletion_timestamp.is_none()),
                })),
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    Ok(done(Effect::Deleted { gone: true }))
                }
                Err(e) => Err(e),
            }
        }
        Action::RemoveManagedLabel => {
            let patch = json!({"metadata": {"labels": {MANAGED_LABEL: null}}});
            match api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => Ok(done(Effect::Unlabelled)),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(done(Effect::Unlabelled)),
                Err(e) => Err(e),
            }
        }
        Action::AwaitRemoval => match api.get_opt(name).await? {
            None => Ok(done(Effect::Deleted { gone: true })),
            Some(_) => Ok(done(Effect::Deleted { gone: false })),
        },
        Action::Unchanged | Action::Nothing | Action::Skip => {
            unreachable!("no request is made for {action:?}")
        }
    }
}

fn delete_params(options: Option<&Value>) -> DeleteParams {
    let mut dp = DeleteParams::background();
    if let Some(opts) = options {
        if let Some(p) = opts["propagationPolicy"].as_str() {
            dp.propagation_policy = match p {
                "Orphan" => Some(kube::api::PropagationPolicy::Orphan),
                "Foreground" => Some(kube::api::PropagationPolicy::Foreground),
                _ => Some(kube::api::PropagationPolicy::Background),
            };
        }
        dp.grace_period_seconds = opts["gracePeriodSeconds"].as_u64().map(|g| g as u32);
    }
    dp
}

/// 100 ms, 200 ms, 400 ms ... capped at 5 s; a server's Retry-After wins.
async fn backoff(attempt: u32, retry_after: Option<Duration>) {
    let exp = Duration::from_millis(100u64 << attempt.min(6)).min(Duration::from_secs(5));
    tokio::time::sleep(retry_after.map_or(exp, |r| r.min(Duration::from_secs(30)))).await;
}
