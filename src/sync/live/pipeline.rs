//! The execute and record steps as one pipeline: each federated object goes
//! through finalizer → member requests → host write-back on its own, so
//! one object's write-back overlaps other objects' member requests instead
//! of all write-backs waiting for the whole member phase.
//!
//! Concurrency is bounded per lane: at most `--concurrency` requests in
//! flight per member, [`HOST_WRITES_IN_FLIGHT`] writes to the host. Objects
//! go in three stages so that namespaced objects never race their
//! namespace: namespaces created or updated, then everything else, then
//! namespaces being deleted somewhere.

use crate::clients::host::Host;
use crate::core::describe::{FederatedRef, ObjectKey, ObjectRef, describe, describe_key, key_of};
use crate::core::propagation::action::{Action, ClusterStatus};
use crate::core::propagation::decide::{FinalizerStep, ObjectPlan};
use crate::core::propagation::readiness::Readiness;
use crate::core::propagation::record::{self as decide_record, Done, Effect, MemberResult};
use crate::sync::live::execute::{Limits, apply_one};
use crate::sync::live::progress::{Answer, Settled};
use crate::sync::live::requests::{Clusters, HostRequests, MemberRequests};
use crate::sync::run::mode::HOST_WRITES_IN_FLIGHT;
use crate::sync::run::observe::{Observation, ObservedType};
use crate::sync::run::work::{Target, Work};
use futures::StreamExt;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Objects in the pipeline at once: enough to keep every lane busy, few
/// enough that memory stays flat however many objects there are.
const OBJECTS_IN_FLIGHT: usize = 256;

/// One federated object's way through the pipeline (or an orphan's request).
pub struct Job<'a> {
    /// Its type, as observed.
    pub ty: &'a ObservedType,
    pub target: Target<'a>,
    /// The federated object's plan (`None` for an orphan's unlabel).
    pub plan: Option<&'a ObjectPlan>,
    pub work: Vec<Work<'a>>,
}

/// The pipeline's stages, in the order they run: namespaced objects never
/// race their namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    /// Namespaces created or updated.
    Namespaces,
    /// Everything that is not a namespace.
    Contents,
    /// Namespaces being deleted somewhere.
    NamespaceDeletions,
}

impl Job<'_> {
    fn stage(&self) -> Stage {
        if !self.ty.ty.target.is_namespace() {
            return Stage::Contents;
        }
        let deletes = self
            .work
            .iter()
            .any(|w| matches!(w.decision.action, Action::Delete { .. }));
        if deletes {
            Stage::NamespaceDeletions
        } else {
            Stage::Namespaces
        }
    }
}

/// What became of one job.
pub struct Finished<'a> {
    pub ty: &'a ObservedType,
    pub target: Target<'a>,
    pub results: Vec<(Work<'a>, MemberResult)>,
    /// Host writes made (finalizer, status, versions, release).
    pub host_writes: usize,
    /// When its last request was answered: a watch's next round of the
    /// object waits a second from then, not from its round's end.
    pub settled: Instant,
    /// The finalizer could not be written: no member request was made.
    pub refused: Option<anyhow::Error>,
    pub write_failed: Option<anyhow::Error>,
    /// Deletions still waiting for member copies, as report lines.
    pub pending: Vec<String>,
    /// The Events upstream's sync controller would record for this object
    /// (when the pipeline records them).
    pub events: Vec<crate::core::events::record::Event>,
}

/// The lanes and what every job shares: requests go to the members
/// through `M` and to the host through `H` (`requests`).
pub struct Pipeline<'a, M: MemberRequests = Clusters, H: HostRequests = Host> {
    pub host: &'a H,
    pub members: &'a M,
    pub seen: &'a Observation,
    pub limits: Limits,
    /// `--wait`: until when to wait for member copies being deleted.
    pub wait_until: Option<Instant>,
    pub progress: &'a dyn crate::sync::live::progress::Progress,
    pub now: String,
    /// Derive each object's Events (`reconcile --events`, the default).
    pub record_events: bool,
    /// Objects mid-rollout: their PropagatedVersion is the rollout's
    /// record's (`live::rollout`), not written here.
    pub rolling: HashSet<FederatedRef>,
    /// Objects a round writes for after the pipeline (a rollout's record
    /// and end, `live::rollout::record_after`): not reported settled as
    /// their jobs end, so that the watch takes no other round over them
    /// before their record is written.
    pub holds: HashSet<FederatedRef>,
    /// A pull member's agent (`sync::agent`): each object's report of
    /// this member goes with its write-back (`WriteBack::report`).
    pub reports_for: Option<String>,
    /// The agent's objects under a progressive rollout, with the readiness
    /// of its member's copy as the round observed it: their reports say
    /// it (`Report::readiness`), and the host's rollout gates on it.
    pub report_readiness: HashMap<FederatedRef, Readiness>,
    host_lane: Semaphore,
    member_lanes: HashMap<String, MemberLane>,
    /// By type name: whether its member copies are held whole
    /// (`ObservedType::keeps_member_fields`), worked out once per round.
    whole_copies: HashMap<&'a str, bool>,
}

/// One member's requests: how many at once, and whether it stopped
/// answering (watch only; see `Member::stalled`).
struct MemberLane {
    lane: Semaphore,
    stalled: Option<std::sync::Arc<crate::clients::members::Stall>>,
}

impl<'a, M: MemberRequests, H: HostRequests> Pipeline<'a, M, H> {
    pub fn new(
        (host, members): (&'a H, &'a M),
        seen: &'a Observation,
        limits: Limits,
        wait_until: Option<Instant>,
        progress: &'a dyn crate::sync::live::progress::Progress,
    ) -> Pipeline<'a, M, H> {
        let member_lanes = (seen.members.iter())
            .map(|p| &p.member)
            .filter(|m| members.reaches(&m.name))
            .map(|m| {
                let lane = MemberLane {
                    lane: Semaphore::new(limits.concurrency.max(1)),
                    stalled: m.stalled.clone(),
                };
                (m.name.clone(), lane)
            })
            .collect();
        Pipeline {
            whole_copies: (seen.types.iter())
                .map(|t| (&*t.name, t.keeps_member_fields()))
                .collect(),
            host,
            members,
            seen,
            limits,
            wait_until,
            progress,
            now: crate::clock::now_rfc3339(),
            record_events: false,
            reports_for: None,
            report_readiness: HashMap::new(),
            rolling: HashSet::new(),
            holds: HashSet::new(),
            host_lane: Semaphore::new(HOST_WRITES_IN_FLIGHT),
            member_lanes,
        }
    }

    /// Runs every job, stage by stage; tells the progress each object it
    /// follows as soon as the object's last job is done.
    pub async fn run<'j>(&self, jobs: Vec<Job<'j>>) -> Vec<Finished<'j>> {
        let mut tally = (self.progress.follows_objects())
            .then(|| Tally::of(jobs.iter().filter(|j| self.settles_early(j))));
        let mut stages: BTreeMap<Stage, Vec<Job<'j>>> = BTreeMap::new();
        for job in jobs {
            stages.entry(job.stage()).or_default().push(job);
        }
        let mut out = Vec::new();
        for stage in stages.into_values() {
            // A loop rather than `buffer_unordered` over a closure: such a
            // closure trips rustc's higher-ranked lifetime check (rust-lang/
            // rust#102211) once a round is a task of its own.
            let mut jobs = stage.into_iter();
            let mut in_flight = futures::stream::FuturesUnordered::new();
            loop {
                while in_flight.len() < OBJECTS_IN_FLIGHT {
                    let Some(job) = jobs.next() else { break };
                    in_flight.push(self.run_job(job));
                }
                let Some(finished) = in_flight.next().await else {
                    break;
                };
                if let Some(settled) = tally.as_mut().and_then(|t| t.done(&finished)) {
                    self.progress.object_settled(settled);
                }
                out.push(finished);
            }
        }
        out
    }

    /// Whether an object's job may be reported settled as it ends: not
    /// when its round writes something for it after the pipeline, as the
    /// FederatedServiceStatus of a Service (`passes::service_status`), or a
    /// rollout's record (`holds`).
    fn settles_early(&self, job: &Job<'_>) -> bool {
        if (self.seen.settings).writes_service_status(job.ty.service_status.is_some()) {
            return false;
        }
        self.holds.is_empty() || {
            let object = object_ref(job.ty, job.target, job.work.first());
            !self.holds.contains(object.federated())
        }
    }

    async fn run_job<'j>(&self, job: Job<'j>) -> Finished<'j> {
        let mut done = self.settle(job).await;
        done.settled = Instant::now();
        done
    }

    /// One job's requests: the finalizer, its members', its write-back.
    async fn settle<'j>(&self, job: Job<'j>) -> Finished<'j> {
        let mut done = Finished {
            ty: job.ty,
            target: job.target,
            results: Vec::new(),
            host_writes: 0,
            settled: Instant::now(),
            refused: None,
            write_failed: None,
            pending: Vec::new(),
            events: Vec::new(),
        };
        let t = job.ty;
        let (Target::Object(fed), Some(plan)) = (job.target, job.plan) else {
            done.results = self.member_requests(job.work).await;
            return done;
        };
        let object = object_ref(t, job.target, None);
        // 1. The finalizer before any member write.
        let mut fed = Cow::Borrowed(fed);
        if plan.finalizer != FinalizerStep::Keep {
            let _lane = self.host_lane.acquire().await.expect("open");
            let step = plan.finalizer;
            match self.host.finalizer_first(&t.federated, &fed, step).await {
                Ok(Some(updated)) => {
                    done.host_writes += 1;
                    self.answered(&object, || Answer::federated(updated.clone()));
                    fed = Cow::Owned(updated);
                }
                Ok(None) => {}
                Err(e) => {
                    done.refused = Some(e);
                    return done;
                }
            }
        }
        // 2. Its member requests, all members at once.
        let mut results = self.member_requests(job.work).await;
        if let Some(deadline) = self.wait_until {
            self.wait_for_removal(&mut results, deadline).await;
        }
        // 3. Record, as soon as this object's members are settled.
        let by_cluster: BTreeMap<String, MemberResult> = results
            .iter()
            .map(|(w, r)| (w.decision.cluster.clone(), r.clone()))
            .collect();
        let seen = self.seen;
        // Remote status collection: each member copy's `.status`, as observed.
        let remote = (self.seen.settings)
            .collects_remote_status(t.status_collection)
            .then(|| remote_statuses(t, plan));
        let mut write = decide_record::plan_write_back_collecting(
            &fed,
            plan,
            &by_cluster,
            &seen.clusters,
            seen.scope.touched(),
            remote.as_ref(),
            &self.now,
        );
        self.leave_versions_to_rollout(object.federated(), &mut write);
        write.report = self.agent_report((&object, t), &fed, plan, &by_cluster);
        done.pending
            .extend(pending_lines(t, &fed, plan, &write.pending));
        if self.record_events {
            done.events = object_events(t, &fed, plan, &results, &write.pending);
        }
        if write != decide_record::WriteBack::default() {
            match self.write_back(&object, t, &fed, plan, write).await {
                Ok(n) => done.host_writes += n,
                Err(e) => done.write_failed = Some(e),
            }
        }
        done.results = results;
        done
    }

    /// A pull member's agent's report of its member (`reports_for`), with
    /// the copy's readiness for an object under a rollout.
    fn agent_report(
        &self,
        (object, t): (&ObjectRef, &ObservedType),
        fed: &Value,
        plan: &ObjectPlan,
        by_cluster: &BTreeMap<String, MemberResult>,
    ) -> Option<crate::core::propagation::report::Report> {
        let cluster = self.reports_for.as_ref()?;
        let fed_and_type = (fed, t.name.as_ref());
        let mut report =
            decide_record::member_report(fed_and_type, plan, by_cluster, cluster, &self.now)?;
        let observed = self.report_readiness.get(object.federated());
        report.readiness = observed.map(|r| readiness_after(r, by_cluster.get(cluster)));
        Some(report)
    }

    /// An object mid-rollout: its PropagatedVersion is the rollout's
    /// record's (`live::rollout`), not the write-back's.
    fn leave_versions_to_rollout(
        &self,
        object: &FederatedRef,
        write: &mut decide_record::WriteBack,
    ) {
        if self.rolling.contains(object) {
            write.versions = None;
            write.create_versions = false;
        }
    }

    /// An object's write-back in the host's lane; its answers to the
    /// progress that follows objects.
    async fn write_back(
        &self,
        object: &ObjectRef,
        t: &ObservedType,
        fed: &Value,
        plan: &ObjectPlan,
        write: decide_record::WriteBack,
    ) -> anyhow::Result<usize> {
        let _lane = self.host_lane.acquire().await.expect("open");
        let mut answers = Vec::new();
        let keep = self.progress.follows_objects().then_some(&mut answers);
        let written = (self.host)
            .write_back(&t.federated, fed, plan, write, keep)
            .await;
        for answer in answers {
            self.answered(object, || answer);
        }
        written
    }

    /// Requests of one job, each in its member's lane.
    async fn member_requests<'j>(&self, work: Vec<Work<'j>>) -> Vec<(Work<'j>, MemberResult)> {
        futures::future::join_all(work.into_iter().map(|w| self.member_request(w))).await
    }

    /// Tells the progress, when it follows objects, what one of `object`'s
    /// writes left (`Progress::answered`), as soon as it is answered.
    fn answered(&self, object: &ObjectRef, answer: impl FnOnce() -> Answer) {
        if self.progress.follows_objects() {
            self.progress.answered(object.federated(), answer());
        }
    }

    async fn member_request<'j>(&self, w: Work<'j>) -> (Work<'j>, MemberResult) {
        let result = match self.member_lanes.get(&w.decision.cluster) {
            Some(MemberLane { lane, stalled }) => {
                let _lane = lane.acquire().await.expect("open");
                let started = Instant::now();
                let labels = self.seen.labels_of(&w.decision.cluster);
                let (members, limits) = (self.members, self.limits);
                let result = apply_one(members, (&w, labels), limits, stalled.as_deref()).await;
                // A poll for a removal is no write.
                let polled = matches!(w.decision.action, Action::AwaitRemoval);
                if let (Ok((done, _)), false) = (&result, polled) {
                    self.progress.member_write(&done.effect, started.elapsed());
                }
                result
            }
            _ => Err((
                ClusterStatus::ClientRetrievalFailed,
                "no client for this member".into(),
            )),
        };
        self.progress.request_done();
        match result {
            Ok((done, answer)) => {
                if let (Some(copy), true) = (answer, self.progress.follows_objects()) {
                    let object = object_ref(w.ty, w.target, Some(&w));
                    let whole = (self.whole_copies.get(&*w.ty.name).copied())
                        .unwrap_or_else(|| w.ty.keeps_member_fields());
                    let answer = Answer::member(&w.decision.cluster, &copy, whole);
                    self.progress.answered(object.federated(), answer);
                }
                (w, Ok(done))
            }
            Err(e) => (w, Err(e)),
        }
    }

    /// `--wait`: polls member copies still terminating (one GET per copy per
    /// second) until they are gone or `deadline` passes.
    async fn wait_for_removal(&self, results: &mut [(Work<'_>, MemberResult)], deadline: Instant) {
        let still_there = |r: &MemberResult| {
            matches!(
                r,
                Ok(Done {
                    effect: Effect::Deleted { gone: false },
                    ..
                })
            )
        };
        while results.iter().any(|(_, r)| still_there(r)) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_secs(1)).await;
            for (w, r) in results.iter_mut().filter(|(_, r)| still_there(r)) {
                let poll = Work {
                    decision: crate::core::propagation::action::Decision {
                        action: Action::AwaitRemoval,
                        ..w.decision.clone()
                    },
                    ..w.clone()
                };
                if let (_, Ok(done)) = self.member_request(poll).await {
                    *r = Ok(done);
                }
            }
        }
    }
}

/// The observed `.status` of each member's copy of `plan`'s object.
fn remote_statuses(t: &ObservedType, plan: &ObjectPlan) -> BTreeMap<String, Value> {
    let key = crate::core::propagation::decide::member_key(&t.ty, &plan.key);
    plan.decisions
        .iter()
        .filter_map(|d| match t.members.get(&d.cluster)? {
            crate::core::propagation::decide::Listing::Listed(objs) => {
                let mut copy = objs.get(&key)?.value();
                let status = copy.get_mut("status")?.take();
                (!status.is_null()).then(|| (d.cluster.clone(), status))
            }
            _ => None,
        })
        .collect()
}

/// What upstream's sync controller records for one object's member
/// requests (`core::events`).
fn object_events(
    t: &ObservedType,
    fed: &Value,
    plan: &ObjectPlan,
    results: &[(Work<'_>, MemberResult)],
    pending: &[String],
) -> Vec<crate::core::events::record::Event> {
    use crate::core::events::record::{self as events, Attempt, ObjectRun};
    let kind = &t.ty.target.kind;
    let warnings = crate::core::propagation::desired::template_warnings(fed);
    let run = ObjectRun {
        fed,
        target_kind: kind,
        deleting: plan.deletion.is_some(),
        orphaning: plan.deletion.as_ref().is_some_and(|d| d.orphan),
        attempts: results
            .iter()
            .map(|(w, result)| {
                let ObjectKey {
                    namespace: ns,
                    name,
                } = w.key();
                Attempt {
                    cluster: &w.decision.cluster,
                    action: &w.decision.action,
                    target_name: events::qualified_name(&ns, &name),
                    result,
                }
            })
            .collect(),
        pending,
        template_warnings: &warnings,
    };
    events::object_events(&run)
}

/// The object a job is about: its federated object, or, for an orphan,
/// the federated object its member copy had (named from its first request).
pub fn object_ref(t: &ObservedType, target: Target<'_>, first: Option<&Work<'_>>) -> ObjectRef {
    match target.object() {
        Some(o) => ObjectRef::Federated(FederatedRef::sharing(&t.name, key_of(o))),
        None => {
            let member = first.map(Work::key).unwrap_or_default();
            let key = crate::core::propagation::decide::federated_key(&t.ty, &member);
            ObjectRef::Orphan(FederatedRef::sharing(&t.name, key))
        }
    }
}

/// What each member still holding a copy of a deleted object waits for:
/// the copy's deletion, or a pull member's agent's report of it.
fn pending_lines(
    t: &ObservedType,
    fed: &Value,
    plan: &ObjectPlan,
    pending: &[String],
) -> Vec<String> {
    let (copy, fed) = (
        describe_key(&t.ty.target.kind, &plan.key),
        describe(&t.federated.kind, fed),
    );
    (pending.iter())
        .map(|cluster| match plan.pulled.contains(cluster) {
            true => format!(
                "{cluster}: its agent has not reported {copy} removed yet; {fed} keeps its finalizer until it does (the next run after that completes the deletion)"
            ),
            false => format!(
                "{cluster}: {copy} is still being deleted; {fed} keeps its finalizer until it is gone (--wait waits; the next run completes the deletion)"
            ),
        })
        .collect()
}

impl Finished<'_> {
    /// What its requests did to the object: whether one failed, whether a
    /// member copy changed.
    pub fn failed_and_changed(&self) -> (bool, bool) {
        let mut failed = self.refused.is_some() || self.write_failed.is_some();
        let mut changed = false;
        for (w, result) in &self.results {
            match result {
                Err(_) => failed = true,
                Ok(done) => {
                    let polled = matches!(done.effect, Effect::Deleted { .. })
                        && w.decision.action == Action::AwaitRemoval;
                    changed |= !polled;
                }
            }
        }
        (failed, changed)
    }
}

/// The jobs of each object the progress follows that have not ended yet,
/// and what the ended ones did: an object is settled once all of its jobs
/// are (its own and its orphans' may be two).
struct Tally {
    open: HashMap<FederatedRef, (usize, Settled)>,
}

impl Tally {
    fn of<'j>(jobs: impl Iterator<Item = &'j Job<'j>>) -> Tally {
        let mut open: HashMap<FederatedRef, (usize, Settled)> = HashMap::new();
        for j in jobs {
            let object = object_ref(j.ty, j.target, j.work.first());
            let object = object.federated().clone();
            let entry = open.entry(object.clone()).or_insert_with(|| {
                let at = Instant::now();
                let settled = Settled {
                    object,
                    failed: false,
                    changed: false,
                    wrote: false,
                    at,
                };
                (0, settled)
            });
            entry.0 += 1;
        }
        Tally { open }
    }

    /// A job ended: the object's outcome once it was its last.
    fn done(&mut self, f: &Finished<'_>) -> Option<Settled> {
        let first = f.results.first().map(|(w, _)| w);
        let object = object_ref(f.ty, f.target, first);
        let (left, settled) = self.open.get_mut(object.federated())?;
        let (failed, changed) = f.failed_and_changed();
        settled.failed |= failed;
        settled.changed |= changed;
        settled.wrote |= changed || f.host_writes > 0;
        settled.at = settled.at.max(f.settled);
        *left -= 1;
        if *left > 0 {
            return None;
        }
        self.open.remove(object.federated()).map(|(_, s)| s)
    }
}

/// The readiness an agent reports of a copy it observed `observed`: a copy
/// it wrote this round is not observed yet (its next round says).
fn readiness_after(observed: &Readiness, result: Option<&MemberResult>) -> Readiness {
    match result {
        Some(Ok(Done {
            effect: Effect::Created | Effect::Updated,
            ..
        })) => Readiness::Pending("applied; its readiness is reported next round".into()),
        _ => observed.clone(),
    }
}

#[cfg(test)]
mod tests;
