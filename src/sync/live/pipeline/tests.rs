//! The pipeline and its requests alone: a scripted seam (`requests`)
//! answers each request as a test says, and logs them in order; the clock
//! is paused, so retries and timeouts take no time. No server anywhere.

use super::*;
use crate::clients::members::{Health, Member, ProbedMember, Stall};
use crate::core::describe::ObjectKey;
use crate::core::propagation::action::Decision;
use crate::core::propagation::decide::FinalizerStep;
use crate::core::propagation::member::SyncSettings;
use crate::core::propagation::status::AggregateReason;
use crate::core::run::scope::RunScope;
use crate::core::run::settings::Settings;
use crate::sync::live::requests::Answered;
use crate::sync::run::observe::ObservedType;
use kube::api::ApiResource;
use serde_json::json;
use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

/// How the scripted member answers one request.
#[derive(Clone, Debug)]
enum Reply {
    Ok,
    /// An API status: code, Retry-After seconds.
    Status(u16, u32),
    /// No answer at all (the request's timeout ends it).
    Silence,
}

/// Members and a host that answer as scripted and log every request.
#[derive(Default)]
struct Scripted {
    reach: BTreeSet<String>,
    /// Per (cluster, object name): the next answers; none left: `Ok`.
    replies: Mutex<HashMap<(String, String), VecDeque<Reply>>>,
    /// Every request, as `cluster verb name`, in the order made.
    log: Mutex<Vec<String>>,
    /// The host refuses the finalizer.
    refuse_finalizer: bool,
}

impl Scripted {
    fn reaching(clusters: &[&str]) -> Scripted {
        Scripted {
            reach: clusters.iter().map(|c| c.to_string()).collect(),
            ..Scripted::default()
        }
    }

    fn answer(self, cluster: &str, name: &str, replies: &[Reply]) -> Scripted {
        let key = (cluster.to_string(), name.to_string());
        self.replies
            .lock()
            .unwrap()
            .insert(key, replies.iter().cloned().collect());
        self
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

fn status(code: u16, retry_after_seconds: u32) -> kube::Error {
    let mut s = kube::core::Status::failure("scripted", "Scripted").with_code(code);
    if retry_after_seconds > 0 {
        let details = json!({"retryAfterSeconds": retry_after_seconds});
        s.details = Some(serde_json::from_value(details).expect("valid details"));
    }
    kube::Error::Api(s.boxed())
}

impl MemberRequests for Scripted {
    fn reaches(&self, cluster: &str) -> bool {
        self.reach.contains(cluster)
    }

    async fn act(
        &self,
        cluster: &str,
        _: &ApiResource,
        key: &ObjectKey,
        action: &Action,
    ) -> Result<Answered, kube::Error> {
        let verb = match action {
            Action::Create(_) => "create",
            Action::Update { .. } => "update",
            Action::Delete { .. } => "delete",
            Action::RemoveManagedLabel => "unlabel",
            _ => "other",
        };
        self.log
            .lock()
            .unwrap()
            .push(format!("{cluster} {verb} {}", key.name));
        let reply = (self.replies.lock().unwrap())
            .get_mut(&(cluster.to_string(), key.name.clone()))
            .and_then(VecDeque::pop_front)
            .unwrap_or(Reply::Ok);
        let effect = match action {
            Action::Delete { .. } => Effect::Deleted { gone: true },
            Action::Create(_) => Effect::Created,
            Action::Update { .. } => Effect::Updated,
            _ => Effect::Unlabelled,
        };
        match reply {
            Reply::Ok => Ok((
                Done {
                    effect,
                    version: None,
                },
                None,
            )),
            Reply::Status(code, after) => Err(status(code, after)),
            Reply::Silence => std::future::pending().await,
        }
    }

    async fn get(
        &self,
        _: &str,
        _: &ApiResource,
        _: &ObjectKey,
    ) -> Result<Option<Value>, kube::Error> {
        Ok(None)
    }
}

impl HostRequests for Scripted {
    async fn finalizer_first(
        &self,
        _: &ApiResource,
        fed: &Value,
        _: FinalizerStep,
    ) -> anyhow::Result<Option<Value>> {
        self.log.lock().unwrap().push("host finalizer".into());
        match self.refuse_finalizer {
            true => anyhow::bail!("scripted: 409 the object was changed"),
            false => Ok(Some(fed.clone())),
        }
    }

    async fn write_back(
        &self,
        _: &ApiResource,
        _: &Value,
        _: &ObjectPlan,
        write: decide_record::WriteBack,
        _: Option<&mut Vec<Answer>>,
    ) -> anyhow::Result<usize> {
        let versions = match write.versions {
            Some(_) => " with versions",
            None => "",
        };
        (self.log.lock().unwrap()).push(format!("host write-back{versions}"));
        Ok(1)
    }
}

/// A run's progress that follows nothing.
struct Quiet;

impl crate::sync::live::progress::Progress for Quiet {
    fn requests(&self, _: u64) {}
    fn request_done(&self) {}
}

fn ftc(kind: &str, plural: &str, scope: &str) -> ObservedType {
    let ftc = json!({"apiVersion": "core.kubefed.io/v1beta1", "kind": "FederatedTypeConfig",
        "metadata": {"name": plural, "namespace": "fed"},
        "spec": {"propagation": "Enabled",
                 "targetType": {"kind": kind, "pluralName": plural, "scope": scope, "version": "v1"},
                 "federatedType": {"group": "types.kubefed.io", "kind": format!("Federated{kind}"),
                                   "pluralName": format!("federated{plural}"), "scope": "Namespaced",
                                   "version": "v1beta1"}}});
    ObservedType::of(&serde_json::from_value(ftc).unwrap())
}

/// Types 0 (configmaps) and 1 (namespaces); members m1, m2 (m2 with a
/// stall, as the watch's members have); one FederatedConfigMap `web`.
fn observation(stall: Option<Arc<Stall>>) -> Observation {
    let ready = |name: &str| ProbedMember {
        member: Member::without_client(name),
        health: Health::Ready {
            version: "v1.37.2".into(),
        },
    };
    let mut m2 = ready("m2");
    m2.member.stalled = stall;
    let mut seen = Observation::new(
        Settings::default(),
        vec![ready("m1"), m2],
        RunScope::default(),
        Some("shop".into()),
    );
    let mut configmaps = ftc("ConfigMap", "configmaps", "Namespaced");
    configmaps.objects.push(json!({
        "apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedConfigMap",
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "1"},
        "spec": {"template": {"data": {"a": "1"}}, "placement": {"clusters": [{"name": "m1"}]}}}));
    seen.types = vec![configmaps, ftc("Namespace", "namespaces", "Cluster")];
    seen
}

fn limits(attempts: u32) -> Limits {
    Limits {
        concurrency: 4,
        timeout: Duration::from_secs(10),
        attempts,
        settings: SyncSettings {
            adopt_resources: false,
            force_conflicts: false,
            report_only: false,
        },
    }
}

/// The observation's type named `name`.
fn ty<'s>(seen: &'s Observation, name: &str) -> &'s ObservedType {
    (seen.types.iter())
        .find(|t| &*t.name == name)
        .expect("observed")
}

/// One request for `name` in `cluster` of type `t`.
fn work<'s>(t: &'s ObservedType, cluster: &str, name: &str, action: Action) -> Work<'s> {
    let ns = if t.ty.namespaced { "shop" } else { "" };
    Work {
        ty: t,
        target: Target::Orphan,
        decision: Decision {
            cluster: cluster.into(),
            action,
            status: None,
            message: None,
        },
        live: Some(json!({"metadata": {"name": name, "namespace": ns}})),
    }
}

fn delete() -> Action {
    Action::Delete { options: None }
}

fn orphan_job(works: Vec<Work<'_>>) -> Job<'_> {
    Job {
        ty: works[0].ty,
        target: Target::Orphan,
        plan: None,
        work: works,
    }
}

async fn run<'s>(
    requests: &Scripted,
    seen: &Observation,
    jobs: Vec<Job<'s>>,
    attempts: u32,
) -> Vec<Finished<'s>> {
    let pipeline = Pipeline::new((requests, requests), seen, limits(attempts), None, &Quiet);
    pipeline.run(jobs).await
}

/// 429 and 5xx are retried after the server's Retry-After (the clock is
/// paused: the wait is exact); a refusal is not retried.
#[tokio::test(start_paused = true)]
async fn a_busy_member_is_retried_after_its_retry_after_and_a_refusal_is_not() {
    let seen = observation(None);
    let requests = Scripted::reaching(&["m1", "m2"])
        .answer("m1", "a", &[Reply::Status(429, 2), Reply::Status(503, 1)])
        .answer("m2", "a", &[Reply::Status(403, 0)]);
    let job = orphan_job(vec![
        work(
            ty(&seen, "configmaps"),
            "m1",
            "a",
            Action::RemoveManagedLabel,
        ),
        work(
            ty(&seen, "configmaps"),
            "m2",
            "a",
            Action::RemoveManagedLabel,
        ),
    ]);
    let started = tokio::time::Instant::now();
    let finished = run(&requests, &seen, vec![job], 5).await;
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    let results = &finished[0].results;
    assert!(results[0].1.is_ok());
    let Err((status, message)) = &results[1].1 else {
        panic!("m2 refused");
    };
    assert_eq!(*status, ClusterStatus::LabelRemovalFailed);
    assert!(message.contains("scripted"), "{message}");
    let tries = |c: &str| requests.log().iter().filter(|l| l.starts_with(c)).count();
    assert_eq!((tries("m1"), tries("m2")), (3, 1));
    assert_eq!(finished[0].failed_and_changed(), (true, true));
}

/// Attempts are bounded, the first included.
#[tokio::test(start_paused = true)]
async fn a_member_that_keeps_failing_is_asked_attempts_times() {
    let seen = observation(None);
    let requests = Scripted::reaching(&["m1"]).answer("m1", "a", &vec![Reply::Status(500, 0); 9]);
    let job = orphan_job(vec![work(ty(&seen, "configmaps"), "m1", "a", delete())]);
    let finished = run(&requests, &seen, vec![job], 3).await;
    assert_eq!(requests.log().len(), 3);
    assert!(matches!(
        &finished[0].results[0].1,
        Err((ClusterStatus::DeletionFailed, _))
    ));
}

/// A member without a client fails its requests without one being made.
#[tokio::test(start_paused = true)]
async fn a_member_out_of_reach_fails_without_a_request() {
    let seen = observation(None);
    let requests = Scripted::reaching(&["m1"]);
    let job = orphan_job(vec![
        work(ty(&seen, "configmaps"), "m2", "a", delete()),
        work(ty(&seen, "configmaps"), "m1", "a", delete()),
    ]);
    let finished = run(&requests, &seen, vec![job], 3).await;
    assert_eq!(requests.log(), ["m1 delete a"]);
    assert!(matches!(
        &finished[0].results[0].1,
        Err((ClusterStatus::ClientRetrievalFailed, _))
    ));
}

/// The watch's members: a request with no answer within the timeout marks
/// its member as stalled, and the member's next requests give up at once
/// (timed out) instead of each waiting out its own timeout.
#[tokio::test(start_paused = true)]
async fn a_silent_member_is_marked_stalled_and_its_next_requests_give_up_at_once() {
    let stall = Arc::new(Stall::default());
    let seen = observation(Some(stall.clone()));
    let requests = Scripted::reaching(&["m1", "m2"]).answer("m2", "a", &[Reply::Silence]);
    let first = orphan_job(vec![work(ty(&seen, "configmaps"), "m2", "a", delete())]);
    let started = tokio::time::Instant::now();
    let finished = run(&requests, &seen, vec![first], 3).await;
    assert_eq!(started.elapsed(), limits(3).timeout);
    assert!(stall.is_set());
    assert!(matches!(
        &finished[0].results[0].1,
        Err((ClusterStatus::DeletionTimedOut, _))
    ));
    let next = orphan_job(vec![work(ty(&seen, "configmaps"), "m2", "b", delete())]);
    let finished = run(&requests, &seen, vec![next], 3).await;
    assert_eq!(requests.log(), ["m2 delete a"]);
    assert!(matches!(
        &finished[0].results[0].1,
        Err((ClusterStatus::DeletionTimedOut, m)) if m.contains("stopped answering")
    ));
}

/// Namespaces created first, their contents next, namespaces being deleted
/// last: a namespaced object never races its namespace.
#[tokio::test(start_paused = true)]
async fn stages_run_namespaces_then_contents_then_namespace_deletions() {
    let seen = observation(None);
    let requests = Scripted::reaching(&["m1"]);
    let create_ns = Action::Create(Arc::new(json!({"metadata": {"name": "new"}})));
    let jobs = vec![
        orphan_job(vec![work(ty(&seen, "namespaces"), "m1", "old", delete())]),
        orphan_job(vec![work(ty(&seen, "configmaps"), "m1", "a", delete())]),
        orphan_job(vec![work(ty(&seen, "namespaces"), "m1", "new", create_ns)]),
        orphan_job(vec![work(
            ty(&seen, "configmaps"),
            "m1",
            "b",
            Action::RemoveManagedLabel,
        )]),
    ];
    run(&requests, &seen, jobs, 3).await;
    let log = requests.log();
    assert_eq!(log.first().map(String::as_str), Some("m1 create new"));
    assert_eq!(log.last().map(String::as_str), Some("m1 delete old"));
    assert_eq!(log.len(), 4);
}

/// The job of the FederatedConfigMap `web`: a delete in m1.
fn object_job<'s>(seen: &'s Observation, plan: &'s ObjectPlan) -> Job<'s> {
    let t = ty(seen, "configmaps");
    Job {
        ty: t,
        target: Target::Object(&t.objects[0]),
        plan: Some(plan),
        work: vec![Work {
            target: Target::Object(&t.objects[0]),
            ..work(t, "m1", "web", delete())
        }],
    }
}

fn plan_of(seen: &Observation, finalizer: FinalizerStep) -> ObjectPlan {
    ObjectPlan {
        key: key_of(&ty(seen, "configmaps").objects[0]),
        decisions: Vec::new(),
        reason: AggregateReason::Success,
        selected: ["m1".to_string()].into(),
        deletion: None,
        pv_name: "configmap-web".into(),
        pv_status: None,
        unchanged_versions: BTreeMap::new(),
        finalizer,
        record: true,
        placement_error: None,
        failures: Vec::new(),
        notes: Vec::new(),
        warnings: Vec::new(),
        report_only: false,
        drift_record: None,
        pulled: Default::default(),
    }
}

/// The finalizer goes on before any member write: when the host refuses
/// it, no member request is made (a run killed after member writes must
/// still leave the object's deletion to a later run).
#[tokio::test(start_paused = true)]
async fn no_member_request_is_made_when_the_finalizer_is_refused() {
    let seen = observation(None);
    let plan = plan_of(&seen, FinalizerStep::AddFirst);
    let job = |plan| object_job(&seen, plan);
    let refusing = Scripted {
        refuse_finalizer: true,
        ..Scripted::reaching(&["m1"])
    };
    let finished = run(&refusing, &seen, vec![job(&plan)], 3).await;
    assert_eq!(refusing.log(), ["host finalizer"]);
    assert!(finished[0].refused.is_some() && finished[0].results.is_empty());
    // Accepted: finalizer, then the member, then the write-back.
    let accepting = Scripted::reaching(&["m1"]);
    let finished = run(&accepting, &seen, vec![job(&plan)], 3).await;
    let log = accepting.log();
    assert_eq!(log[..2], ["host finalizer", "m1 delete web"]);
    assert_eq!(
        finished[0].host_writes,
        1 + log
            .iter()
            .filter(|l| l.starts_with("host write-back"))
            .count()
    );
}

/// An object mid-rollout (`Pipeline::rolling`, by its key) gets its
/// write-back without the PropagatedVersion, which is its rollout's
/// record's; any other object's carries it.
#[tokio::test(start_paused = true)]
async fn an_object_mid_rollout_is_written_back_without_its_versions() {
    let seen = observation(None);
    let plan = plan_of(&seen, FinalizerStep::Keep);
    let requests = Scripted::reaching(&["m1"]);
    let pipeline = Pipeline::new((&requests, &requests), &seen, limits(3), None, &Quiet);
    pipeline.run(vec![object_job(&seen, &plan)]).await;
    assert_eq!(
        requests.log(),
        ["m1 delete web", "host write-back with versions"]
    );
    let requests = Scripted::reaching(&["m1"]);
    let mut pipeline = Pipeline::new((&requests, &requests), &seen, limits(3), None, &Quiet);
    pipeline.rolling = [FederatedRef::new(
        "configmaps",
        ObjectKey::new("shop", "web"),
    )]
    .into();
    pipeline.run(vec![object_job(&seen, &plan)]).await;
    assert_eq!(requests.log(), ["m1 delete web", "host write-back"]);
}
