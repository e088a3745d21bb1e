//! The live engine's seam: every request a round makes once it has decided
//! goes through [`MemberRequests`] (a member's objects) or
//! [`HostRequests`] (the host's federated objects). [`Clusters`] and the
//! [`Host`] talk to the API servers; the pipeline's unit tests script
//! both, so that settling, retries, stages and partial failures are tested
//! without a server. One request each: retries are `execute::apply_one`'s.

use crate::apply::dynamic_api;
use crate::clients::host::Host;
use crate::clients::members::ProbedMember;
use crate::core::describe::ObjectKey;
use crate::core::propagation::action::Action;
use crate::core::propagation::decide::{FinalizerStep, ObjectPlan};
use crate::core::propagation::desired::MANAGED_LABEL;
use crate::core::propagation::foreign;
use crate::core::propagation::record::{Done, Effect, WriteBack};
use crate::core::propagation::version::member_version;
use crate::sync::live::progress::Answer;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::future::Future;

/// A member request's answer: what it did, and the object the server
/// answered a create or update with.
pub type Answered = (Done, Option<Value>);

/// Requests to the members' objects.
pub trait MemberRequests: Sync {
    /// Whether requests can go to `cluster` at all (it has a client).
    fn reaches(&self, cluster: &str) -> bool;

    /// One request for `action` on the member object `key` of `target`.
    fn act(
        &self,
        cluster: &str,
        target: &ApiResource,
        key: &ObjectKey,
        action: &Action,
    ) -> impl Future<Output = Result<Answered, kube::Error>> + Send;

    /// The member object as it is now (after a conflict).
    fn get(
        &self,
        cluster: &str,
        target: &ApiResource,
        key: &ObjectKey,
    ) -> impl Future<Output = Result<Option<Value>, kube::Error>> + Send;
}

/// Writes to the host's federated objects (`live::record` makes them).
pub trait HostRequests: Sync {
    /// The sync finalizer, before any member write (`None`: nothing written).
    fn finalizer_first(
        &self,
        federated: &ApiResource,
        fed: &Value,
        step: FinalizerStep,
    ) -> impl Future<Output = anyhow::Result<Option<Value>>> + Send;

    /// An object's status, PropagatedVersion and finalizer release; the
    /// writes made.
    fn write_back(
        &self,
        federated: &ApiResource,
        fed: &Value,
        plan: &ObjectPlan,
        write: WriteBack,
        answers: Option<&mut Vec<Answer>>,
    ) -> impl Future<Output = anyhow::Result<usize>> + Send;
}

impl HostRequests for Host {
    fn finalizer_first(
        &self,
        federated: &ApiResource,
        fed: &Value,
        step: FinalizerStep,
    ) -> impl Future<Output = anyhow::Result<Option<Value>>> + Send {
        super::record::finalizer_first(self, federated, fed, step)
    }

    fn write_back(
        &self,
        federated: &ApiResource,
        fed: &Value,
        plan: &ObjectPlan,
        write: WriteBack,
        answers: Option<&mut Vec<Answer>>,
    ) -> impl Future<Output = anyhow::Result<usize>> + Send {
        super::record::write_back(self, federated, fed, plan, write, answers)
    }
}

/// The members' API servers, by name: those with a client.
pub struct Clusters {
    clients: HashMap<String, kube::Client>,
}

impl Clusters {
    pub fn of(members: &[ProbedMember]) -> Clusters {
        let clients = (members.iter())
            .filter_map(|p| Some((p.member.name.clone(), p.member.client.clone().ok()?)))
            .collect();
        Clusters { clients }
    }

    /// One member's client alone (`unjoin --cleanup`).
    pub fn one(cluster: &str, client: kube::Client) -> Clusters {
        Clusters {
            clients: [(cluster.to_string(), client)].into(),
        }
    }

    fn api(&self, cluster: &str, target: &ApiResource, key: &ObjectKey) -> Api<DynamicObject> {
        let client = &self.clients[cluster];
        dynamic_api(client, Some(&key.namespace), target)
    }
}

impl MemberRequests for Clusters {
    fn reaches(&self, cluster: &str) -> bool {
        self.clients.contains_key(cluster)
    }

    async fn act(
        &self,
        cluster: &str,
        target: &ApiResource,
        key: &ObjectKey,
        action: &Action,
    ) -> Result<Answered, kube::Error> {
        run_action(&self.api(cluster, target, key), &key.name, action).await
    }

    async fn get(
        &self,
        cluster: &str,
        target: &ApiResource,
        key: &ObjectKey,
    ) -> Result<Option<Value>, kube::Error> {
        let live = self.api(cluster, target, key).get_opt(&key.name).await?;
        Ok(live.map(|l| serde_json::to_value(l).expect("objects serialize")))
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
) -> Result<Answered, kube::Error> {
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
        Action::Unchanged | Action::Nothing | Action::Skip | Action::Report(_) => {
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
