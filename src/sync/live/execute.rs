//! One member request of the execute step, with retries (429 after
//! Retry-After, 5xx, timeouts, connection errors) and a re-read on
//! conflict that lets the core decide the update again. The pipeline
//! (`pipeline.rs`) decides when and how many at once.

use crate::apply::api_error_line;
use crate::clients::members::Stall;
use crate::core::describe::{ObjectKey, key_of};
use crate::core::propagation::action::{Action, ClusterStatus, Decision};
use crate::core::propagation::desired::MANAGED_LABEL;
use crate::core::propagation::foreign;
use crate::core::propagation::member::{self, SyncSettings};
use crate::core::propagation::overrides::MemberCluster;
use crate::core::propagation::record::{Done, Effect};
use crate::core::propagation::retry::{self, Attempt, Failure, Next};
use crate::core::propagation::version::member_version;
use crate::sync::live::observe::ObservedType;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
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

/// What a request or a pipeline job is for, within its observed type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The federated object at this index of the type's objects.
    Object(usize),
    /// Member copies whose federated object is gone.
    Orphan,
}

impl Target {
    /// The federated object, if there is one.
    pub fn object<'o>(&self, t: &'o ObservedType) -> Option<&'o Value> {
        match *self {
            Target::Object(i) => Some(&t.objects[i]),
            Target::Orphan => None,
        }
    }
}

/// One member request to make.
#[derive(Clone, Debug)]
pub struct Work {
    pub type_index: usize,
    pub target: Target,
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
            (None, Action::Update { object, .. }) => key_of(object),
            _ => ObjectKey::default(),
        }
    }
}

/// One request with retries: 429 (after Retry-After), 5xx, timeouts and
/// connection errors are retried with backoff; a conflict re-reads the
/// member object and lets the core decide the update again. `stalled`
/// (the watch's): a timeout marks the member as not answering, and while it
/// is marked every attempt gives up at once with a timed-out status. With
/// the member copy as the server answered a create or update (the watch
/// holds it at once: `progress::Answer`).
pub async fn apply_one(
    client: &kube::Client,
    t: &ObservedType,
    (w, labels): (&Work, &BTreeMap<String, String>),
    limits: Limits,
    stalled: Option<&Stall>,
) -> Result<(Done, Option<Value>), (ClusterStatus, String)> {
    let ObjectKey {
        namespace: ns,
        name,
    } = w.key();
    let api = crate::apply::dynamic_api(client, Some(&ns), &t.target);
    let failed = w
        .decision
        .action
        .failure_status()
        .unwrap_or(ClusterStatus::UpdateFailed);
    let mut action = w.decision.action.clone();
    let fed = w.target.object(t);
    let stall_message = "the member stopped answering; not tried until a probe is answered";
    let mut number = 0;
    loop {
        number += 1;
        if stalled.is_some_and(Stall::is_set) {
            return Err((retry::timed_out(failed), stall_message.to_string()));
        }
        let request = tokio::time::timeout(limits.timeout, run_action(&api, &name, &action));
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
            Next::Reread => action = redecide(&api, &name, t, (w, labels), limits, message).await?,
        }
    }
}

/// After a conflict: the member object as it is now, and the action it
/// needs, decided again (it was created or changed meanwhile).
async fn redecide(
    api: &kube::Api<kube::api::DynamicObject>,
    name: &str,
    t: &ObservedType,
    (w, labels): (&Work, &BTreeMap<String, String>),
    limits: Limits,
    message: String,
) -> Result<Action, (ClusterStatus, String)> {
    let failed = w
        .decision
        .action
        .failure_status()
        .unwrap_or(ClusterStatus::UpdateFailed);
    let fed = w
        .target
        .object(t)
        .expect("only federated objects are decided again");
    let live = match api.get_opt(name).await {
        Ok(Some(l)) => serde_json::to_value(l).expect("objects serialize"),
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

/// The request body of a desired object. A template whose metadata is not
/// Kubernetes metadata (`annotations: 5`) is refused here, before any
/// request, as the API server would refuse it.
fn body(obj: &Value) -> Result<DynamicObject, kube::Error> {
    serde_json::from_value(obj.clone()).map_err(kube::Error::SerdeError)
}

/// A request's effect, and the object the server answered a create or
/// update with.
async fn run_action(
    api: &Api<DynamicObject>,
    name: &str,
    action: &Action,
) -> Result<(Done, Option<Value>), kube::Error> {
    let answered = |effect, o: DynamicObject| {
        let v = serde_json::to_value(o).expect("objects serialize");
        let done = Done {
            effect,
            version: Some(member_version(&v)),
        };
        (done, Some(v))
    };
    let done = |effect| {
        let done = Done {
            effect,
            version: None,
        };
        (done, None)
    };
    // Named, so that the fields the federation writes are told from
    // those other managers own (`core::propagation::foreign`).
    let params = PostParams {
        field_manager: Some(foreign::FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    match action {
        Action::Create(obj) => {
            let created = api.create(&params, &body(obj)?).await?;
            Ok(answered(Effect::Created, created))
        }
        Action::Update { object, .. } => {
            let updated = api.replace(name, &params, &body(object)?).await?;
            Ok(answered(Effect::Updated, updated))
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
