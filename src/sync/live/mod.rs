//! Live one-shot reconcile against the host and its members, in four steps:
//!
//! 1. **observe** ([`observe`]): read the host and list the members, once;
//! 2. **decide** (`core::propagation::decide`, pure): what every member should get, and
//!    whether the sync finalizer must go on first;
//! 3. **execute** ([`execute`], run by the [`pipeline`]): the sync finalizer
//!    first, then the member requests, bounded and retried;
//! 4. **record** (`core::propagation::record` decides, [`record`] writes): status,
//!    PropagatedVersions and the finalizer's release, as KubeFed writes
//!    them, so a KubeFed controller can take over.
//!
//! The passes (`sync::passes`) run around them: RSP between observe and
//! decide, as it rewrites placement and overrides; DNS, service statuses and
//! Events after. What a run did is a [`report`]; how far it got goes to a
//! [`progress`]; `--wait-ready` is [`ready`]. A run with nothing to do
//! writes nothing.

pub mod agent;
pub mod crd_first;
pub mod execute;
pub mod permissions;
pub mod pipeline;
pub mod progress;
pub mod ready;
pub mod record;
pub mod requests;
pub mod rollback;
pub mod rollout;

use crate::clients::host::Host;
use crate::clients::members::{Health, ProbedMember};
use crate::core::describe::{FederatedRef, ObjectKey, ObjectRef, describe, describe_key, key_of};
use crate::core::outcome::{Change, Failure, Place};
use crate::core::propagation::action::{self, Action, ClusterStatus};
use crate::core::propagation::decide::{self, Federation, ObjectPlan, TypeDecisions};
use crate::core::propagation::report::Pulled;
use crate::sync::run::mode::{HostWriter, PlanMode};
use crate::sync::run::observe::{self, Observation, ObservedType, Selection};
use crate::sync::run::report::Report;
use crate::sync::run::work::{Target, Work};
use anyhow::Result;
use execute::Limits;
use pipeline::{Finished, Job, Pipeline};
use progress::Progress;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// What to reconcile and how.
#[derive(Clone, Debug)]
pub struct Options {
    pub selection: Selection,
    /// `reconcile -f --dry-run`: a change whose objects take the place of
    /// the host's in the observation.
    pub proposal: Option<std::sync::Arc<crate::sync::review::files::Proposal>>,
    /// Write, or plan (and how).
    pub mode: PlanMode,
    /// Requests in flight per member.
    pub concurrency: usize,
    /// Attempts per request (first try included).
    pub attempts: u32,
    /// `--wait`: how long to wait for member copies still terminating.
    pub wait: Option<Duration>,
    /// Kubernetes Events to the host (`--events`, the default; never in a
    /// dry run): one correlator for the process, so a watch's repeated
    /// Events bump `count`.
    pub events: Option<std::sync::Arc<crate::sync::passes::events::Recorder>>,
    /// `--wait-ready` follows the run: the report lists the member objects
    /// it placed (`Report::placed`; one entry per object and member, kept
    /// only when someone waits for them).
    pub wait_ready: bool,
    /// `--force-conflicts`: where a member field another manager owns
    /// conflicts with the template, the template's value is written.
    pub force_conflicts: bool,
    /// `--report-only`: every object report-only (`core::propagation::strategy`).
    pub report_only: bool,
    /// Progressive rollouts (`rollout`).
    pub rollout: rollout::RolloutOptions,
}

/// Runs one reconcile pass. Errors before any write are returned as `Err`;
/// failures while applying are in the report.
/// With rollouts waiting for their members, rounds follow until each is
/// complete or halted, or the rollouts' wait is over (`rollout::go_on`).
pub async fn reconcile(host: &Host, o: &Options, progress: &dyn Progress) -> Result<Report> {
    let started = Instant::now();
    let mut report = one_round(host, o, progress).await?;
    let mut said = BTreeMap::new();
    rollout::log(&report, &mut said);
    while let Some(pause) =
        rollout::go_on(&report, o, (started.elapsed(), crate::clock::now_unix()))
    {
        tokio::time::sleep(pause).await;
        let mut later = one_round(host, &rollout::later_round(o, &report), progress).await?;
        later.clusters.values_mut().for_each(|c| c.unchanged = 0);
        later.failures.retain(|f| !report.failures.contains(f));
        rollout::log(&later, &mut said);
        report.placed_once(&mut later);
        report.absorb(later);
    }
    Ok(report)
}

async fn one_round(host: &Host, o: &Options, progress: &dyn Progress) -> Result<Report> {
    let mut seen = observation(host, o).await?;
    let outcome = round_in_order(host, &mut seen, o, Passes::ALL, progress).await?;
    crate::parallel::drop_in_background((seen, outcome.objects));
    Ok(outcome.report)
}

/// What a one-shot run works from: the observation, with a `-f --dry-run`
/// proposal laid over the host's objects, then the pods of its RSPs (a
/// proposed RSP needs them as much as a stored one).
async fn observation(host: &Host, o: &Options) -> Result<Observation> {
    let mut seen = observe::observe(host, &o.selection).await?;
    if let Some(p) = &o.proposal {
        seen.host_plan =
            crate::sync::review::files::overlay(&mut seen, p, &crate::clock::now_rfc3339())?;
    }
    observe::read_rsp_pods(&mut seen, o.selection.timeout).await;
    Ok(seen)
}

/// The passes of a round beyond the federated objects.
#[derive(Clone, Copy, Debug)]
pub struct Passes {
    /// Write the KubeFedClusters' health (the watch loop writes it itself,
    /// after each probe).
    pub cluster_health: bool,
    /// The multi-cluster DNS pass (the watch loop runs it on full resyncs).
    pub dns: bool,
    /// Ask each member with planned changes what it may do, before any
    /// write (`permissions`); the watch reports refusals as they come.
    pub permissions: bool,
}

impl Passes {
    pub const ALL: Passes = Passes {
        cluster_health: true,
        dns: true,
        permissions: true,
    };
}

/// What became of one federated object (or orphan) in a round.
#[derive(Clone, Debug)]
pub struct ObjectOutcome {
    pub object: ObjectRef,
    /// Some member request or host write failed: retry after a backoff.
    pub failed: bool,
    /// Each member change made (`member1: created ConfigMap shop/web`).
    pub changes: Vec<Change>,
    /// Host writes made for it (status, PropagatedVersion, finalizer).
    pub host_writes: usize,
    /// When its last request was answered.
    pub settled: std::time::Instant,
}

/// A round's report and what became of each object.
pub struct RoundOutcome {
    pub report: Report,
    pub objects: Vec<ObjectOutcome>,
    /// (member, type name): types a member began to serve during the
    /// round, their CRD awaited (`crd_first`); the watch lists them again.
    pub served: Vec<(String, String)>,
}

/// [`round`], in two phases when a federated CRD defines another of the
/// round's types (`crd_first`): the one-shot run and every watch round.
pub async fn round_in_order(
    host: &Host,
    seen: &mut Observation,
    o: &Options,
    passes: Passes,
    progress: &dyn Progress,
) -> Result<RoundOutcome> {
    match crd_first::phases(seen) {
        Some(phases) => crd_first::round_in_phases(host, seen, o, passes, phases, progress).await,
        None => round(host, seen, o, passes, progress).await,
    }
}

/// The run's own settings over the KubeFedConfig's; a host whose
/// KubeFedConfig disables pushing is refused.
fn run_settings(host: &Host, seen: &mut Observation, o: &Options) -> Result<()> {
    if !seen.settings.push_reconciler {
        anyhow::bail!(
            "KubeFedConfig {}/{}: the PushReconciler feature gate is Disabled: nothing is propagated",
            host.namespace,
            crate::api::KUBEFED_CONFIG_NAME
        );
    }
    seen.settings.sync.force_conflicts = o.force_conflicts;
    seen.settings.sync.report_only = o.report_only;
    Ok(())
}

/// Decides, executes and records over what `seen` holds: the one-shot run
/// over everything it observed, or a watch round over the objects an event
/// touched.
pub async fn round(
    host: &Host,
    seen: &mut Observation,
    o: &Options,
    passes: Passes,
    progress: &dyn Progress,
) -> Result<RoundOutcome> {
    run_settings(host, seen, o)?;
    let mut report = Report {
        shard: seen.scope.shard.map(|s| s.to_string()),
        ..Report::default()
    };
    let mut objects = Vec::new();
    let writer = HostWriter::new(host, o.mode);
    if o.mode.plans() {
        report.changes.extend(seen.host_plan.iter().cloned());
    }
    report_clusters(seen, &mut report);
    let mut events = Vec::new();
    if !o.mode.plans() && passes.cluster_health && seen.scope.writes_cluster_state() {
        report.host_writes += record::write_cluster_health(host, &seen.members).await?;
        report.host_writes += crate::inventory::write_statuses(host, &seen.members, true).await;
        events.extend(cluster_events(&seen.members));
    }
    report.host_writes +=
        crate::sync::passes::rsp::schedule_replicas(writer, seen, &mut report).await?;

    let mut decided = decide_all(host, seen);
    let now = crate::clock::now_unix();
    let mut rollouts = rollout::gate(seen, &mut decided, &o.rollout, &mut report, now);
    report_decisions(&decided, o.wait_ready, &mut report);
    let mut jobs = jobs(&decided, o.wait.is_some(), &mut report);
    if passes.permissions {
        permissions::check(seen, &mut jobs, o.selection.timeout, &mut report).await;
    }
    if o.mode.plans() {
        resolve_creates(seen, &mut jobs, o, &mut report).await;
        dry_run_plan(&jobs, &mut report);
        rollout::plan_lines(&rollouts, &mut report);
        if o.mode.validates() {
            let (concurrency, timeout) = (o.concurrency, o.selection.timeout);
            let work = jobs.iter().flat_map(|j| &j.work);
            crate::sync::review::validate::validate(seen, work, concurrency, timeout, &mut report)
                .await;
        }
    } else {
        let written = Written {
            host,
            seen,
            o,
            decided: &decided,
            progress,
        };
        objects = written
            .execute(jobs, &mut rollouts, &mut report, &mut events)
            .await;
    }
    if let (Some(recorder), false) = (&o.events, o.mode.plans() || events.is_empty()) {
        let recorded = recorder.record(host, events).await;
        report.events += recorded.writes;
        report.warnings.extend(recorded.warnings);
    }
    crate::parallel::drop_in_background(Decided::into_decisions(decided));
    crate::sync::passes::service_status::write_all(writer, seen, &mut report).await;
    if passes.dns {
        dns(host, seen, o, &mut report).await?;
    }
    Ok(RoundOutcome {
        report,
        objects,
        served: Vec::new(),
    })
}

/// A round that writes: what its execute and record steps share.
struct Written<'r> {
    host: &'r Host,
    seen: &'r Observation,
    o: &'r Options,
    decided: &'r [Decided<'r>],
    progress: &'r dyn Progress,
}

impl Written<'_> {
    /// The rollouts' records before the member writes, the pipeline, the
    /// records after; what became of each object.
    async fn execute(
        &self,
        mut jobs: Vec<Job<'_>>,
        rollouts: &mut [rollout::ObjectRollout<'_>],
        report: &mut Report,
        events: &mut Vec<crate::core::events::record::Event>,
    ) -> Vec<ObjectOutcome> {
        let (host, seen, decided) = (self.host, self.seen, self.decided);
        rollout::record_before(host, decided, rollouts, &mut jobs, report).await;
        let rolling = rollout::in_progress(rollouts);
        let holds = rollout::objects(rollouts);
        let mut finished =
            run_pipeline(host, seen, self.o, jobs, self.progress, (rolling, holds)).await;
        events.extend(
            finished
                .iter_mut()
                .flat_map(|f| std::mem::take(&mut f.events)),
        );
        let now = crate::clock::now_unix();
        rollout::record_after(host, (decided, &finished), rollouts, (report, events), now).await;
        account(finished, report)
    }
}

/// What the decide step found worth saying: failures, notes, the member
/// objects placed (when `placed`: for `--wait-ready`) and the templates'
/// warnings.
fn report_decisions(decided: &[Decided<'_>], placed: bool, report: &mut Report) {
    for d in decided {
        let t = d.ty;
        report.failures.extend(d.decisions.failures.iter().cloned());
        for (fed, p) in d.objects() {
            report.failures.extend(p.failures.iter().cloned());
            report.notes.extend(p.notes.iter().cloned());
            report.warnings.extend(p.warnings.iter().cloned());
            if placed {
                report.placed.extend(placed_objects(t, p));
            }
            for w in crate::core::propagation::desired::template_warnings(fed) {
                let what = describe(&t.federated.kind, fed);
                report.warnings.push(format!("{what}: {}", w.message()));
            }
        }
    }
}

/// The execute and record steps: the jobs through the pipeline, within
/// the run's limits.
async fn run_pipeline<'j>(
    host: &Host,
    seen: &Observation,
    o: &Options,
    jobs: Vec<Job<'j>>,
    progress: &dyn Progress,
    (rolling, holds): (
        std::collections::HashSet<FederatedRef>,
        std::collections::HashSet<FederatedRef>,
    ),
) -> Vec<Finished<'j>> {
    progress.requests(jobs.iter().map(|j| j.work.len() as u64).sum());
    let limits = limits(o, seen);
    let wait_until = o.wait.map(|w| Instant::now() + w);
    let clusters = requests::Clusters::of(&seen.members);
    let mut pipeline = Pipeline::new((host, &clusters), seen, limits, wait_until, progress);
    pipeline.record_events = o.events.is_some();
    pipeline.rolling = rolling;
    pipeline.holds = holds;
    pipeline.run(jobs).await
}

/// The pipeline's limits: the run's options over the KubeFedConfig's settings.
fn limits(o: &Options, seen: &Observation) -> Limits {
    Limits {
        concurrency: o.concurrency,
        timeout: o.selection.timeout,
        attempts: o.attempts,
        settings: seen.settings.sync,
    }
}

/// One member's verdict on one federated object (`status --live`).
#[derive(Clone, Debug, PartialEq)]
pub struct MemberVerdict {
    pub cluster: String,
    pub verdict: &'static str,
    /// With `report_only` (`status --drift`): how the copy differs, and
    /// since when each path has been seen to (a report-only object's
    /// runs record it; `core::propagation::drift::DRIFT_ANNOTATION`).
    pub drift: Option<(
        crate::core::propagation::drift::Drift,
        std::collections::BTreeMap<String, String>,
    )>,
}

/// The decide step's view of a dry run, per federated object (by federated
/// kind and key): what a run would do in each member, read as a verdict
/// (`core::propagation::action::live_verdict`). The same observation (lists, not one GET
/// per object and member), RSP scheduling and FederatedNamespace narrowing
/// as `reconcile --dry-run`, so the two never disagree; only the creates
/// are read once more, to tell `missing` from `unmanaged`.
pub async fn member_view(
    host: &Host,
    o: &Options,
) -> Result<BTreeMap<(String, ObjectKey), Vec<MemberVerdict>>> {
    let mut seen = observation(host, o).await?;
    let mut report = Report::default();
    // A view: planned, whatever `o` says.
    let writer = HostWriter::new(host, PlanMode::PLAN);
    crate::sync::passes::rsp::schedule_replicas(writer, &mut seen, &mut report).await?;
    let decided = decide_all(host, &seen);
    // `status --drift`: every object compared field by field besides.
    let mut drifts = match o.report_only {
        true => drift_all(host, &seen),
        false => HashMap::new(),
    };
    let mut view = BTreeMap::new();
    for d in &decided {
        let t = d.ty;
        for p in &d.decisions.objects {
            let mut drift_of = drifts
                .remove(&(t.federated.kind.clone(), p.key.clone()))
                .unwrap_or_default();
            let mut verdicts = Vec::new();
            let mut since = crate::core::propagation::drift::first_seen(p.drift_record.as_deref());
            for dec in &p.decisions {
                let Some(mut verdict) = action::live_verdict(&dec.action, dec.status) else {
                    continue;
                };
                if let Action::Create(obj) = &dec.action
                    && member_object(&seen, t, &dec.cluster, key_of(obj), o)
                        .await
                        .is_some()
                {
                    verdict = "unmanaged";
                }
                let drift = match &dec.action {
                    Action::Report(d) => Some(d.clone()),
                    _ => drift_of.remove(&dec.cluster),
                }
                .map(|d| (d, since.remove(&dec.cluster).unwrap_or_default()));
                verdicts.push(MemberVerdict {
                    cluster: dec.cluster.clone(),
                    verdict,
                    drift,
                });
            }
            verdicts.sort_by(|a, b| a.cluster.cmp(&b.cluster));
            view.insert((t.federated.kind.clone(), p.key.clone()), verdicts);
        }
    }
    let decided = Decided::into_decisions(decided);
    crate::parallel::drop_in_background((seen, decided));
    Ok(view)
}

/// How each member's copy of each object differs from what a run would
/// write (`status --drift`): the decide step once more with every object
/// report-only, so that the verdicts stay `reconcile --dry-run`'s.
fn drift_all(
    host: &Host,
    seen: &Observation,
) -> HashMap<(String, ObjectKey), BTreeMap<String, crate::core::propagation::drift::Drift>> {
    let mut federation = federation(&host.namespace, seen);
    federation.settings.report_only = true;
    let mut out = HashMap::new();
    for d in decide_as(&federation, seen) {
        for p in &d.decisions.objects {
            let drifts = (p.decisions.iter())
                .filter_map(|dec| match &dec.action {
                    Action::Report(r) => Some((dec.cluster.clone(), r.clone())),
                    _ => None,
                })
                .collect();
            out.insert((d.ty.federated.kind.clone(), p.key.clone()), drifts);
        }
    }
    out
}

/// The one object a create would meet in `cluster` (one GET; `None` when
/// absent or unreadable): members are listed by the managed label only, so
/// a same-named unmanaged object is not in the observation.
async fn member_object(
    seen: &Observation,
    t: &observe::ObservedType,
    cluster: &str,
    ObjectKey {
        namespace: ns,
        name,
    }: ObjectKey,
    o: &Options,
) -> Option<serde_json::Value> {
    let client = (seen.member(cluster)).and_then(|m| m.client.clone().ok())?;
    let api = crate::apply::dynamic_api(&client, Some(&ns), &t.target);
    let live = tokio::time::timeout(o.selection.timeout, api.get_opt(&name))
        .await
        .ok()?
        .ok()??;
    serde_json::to_value(live).ok()
}

/// The Warnings upstream's cluster controller records after a probe.
pub fn cluster_events(members: &[ProbedMember]) -> Vec<crate::core::events::record::Event> {
    members
        .iter()
        .filter_map(
            |ProbedMember {
                 member: m,
                 health: h,
             }| {
                let mut cluster = serde_json::to_value(&m.cluster).ok()?;
                cluster["apiVersion"] = "core.kubefed.io/v1beta1".into();
                cluster["kind"] = "KubeFedCluster".into();
                crate::core::events::record::cluster_event(&cluster, h)
            },
        )
        .collect()
}

/// Every touched member in the summary, and a line for each not ready.
fn report_clusters(seen: &Observation, report: &mut Report) {
    for ProbedMember {
        member: m,
        health: h,
    } in &seen.members
    {
        if !seen.touches(&m.name) {
            continue;
        }
        report.cluster(&m.name).ready = h.is_ready();
        let why = match h {
            Health::Ready { .. } => continue,
            Health::NotReady { message }
            | Health::Offline { message }
            | Health::ConfigMalformed { message } => message,
        };
        report.failures.push(Failure::at(
            Place::member(&m.name),
            format!("cluster not ready ({why}); its objects are marked ClusterNotReady"),
        ));
    }
    for p in seen.members.iter().filter(|p| p.member.pull) {
        let state = match &p.health {
            Health::Ready { .. } => String::new(),
            Health::NotReady { message }
            | Health::Offline { message }
            | Health::ConfigMalformed { message } => format!(" ({message})"),
        };
        let name = p.name();
        report
            .notes
            .push(format!("{name}: pull member, left to its agent{state}"));
    }
    let namespaced = seen.types.iter().any(|t| t.ty.namespaced);
    let namespaces = seen.types.iter().any(|t| t.ty.target.is_namespace());
    if seen.settings.scope == crate::core::cluster::membership::Scope::Cluster
        && namespaced
        && !namespaces
    {
        report.warnings.push(
            "namespaced objects are placed only in namespaces a FederatedNamespace places, and the namespaces type is not enabled (kubefedctl enable namespaces)".into(),
        );
    }
}

/// The member objects a plan places: created, updated, or already as wanted.
fn placed_objects<'p>(
    t: &'p observe::ObservedType,
    p: &'p ObjectPlan,
) -> impl Iterator<Item = crate::sync::run::report::PlacedObject> + 'p {
    let key = decide::member_key(&t.ty, &p.key);
    let placing = |d: &crate::core::propagation::action::Decision| match d.action {
        Action::Create(_) | Action::Update { .. } => Some(true),
        Action::Unchanged => Some(false),
        _ => None,
    };
    let decision = |c: &String| p.decisions.iter().find(|d| &d.cluster == c);
    let owner = std::sync::Arc::new(crate::sync::run::report::PlacedOwner {
        federated: t.federated.clone(),
        key: p.key.clone(),
        complete: (p.selected.iter()).all(|c| decision(c).and_then(placing).is_some()),
        judged: p.selected.iter().all(|c| decision(c).is_some()),
    });
    p.decisions.iter().filter_map(move |d| {
        Some(crate::sync::run::report::PlacedObject {
            cluster: d.cluster.clone(),
            target: t.target.clone(),
            key: key.clone(),
            written: placing(d)?,
            owner: owner.clone(),
        })
    })
}

/// One type's plans beside the observed type they were decided from:
/// read together, never paired up by position with `seen.types`.
pub struct Decided<'s> {
    pub ty: &'s ObservedType,
    pub decisions: TypeDecisions,
}

impl<'s> Decided<'s> {
    /// Each federated object with its plan (decide makes
    /// `TypeDecisions::objects` in the order of the type's objects).
    pub fn objects(&self) -> impl Iterator<Item = (&'s serde_json::Value, &ObjectPlan)> {
        self.ty.objects.iter().zip(&self.decisions.objects)
    }

    /// [`Decided::objects`], the plans to change.
    pub fn objects_mut(
        &mut self,
    ) -> impl Iterator<Item = (&'s serde_json::Value, &mut ObjectPlan)> {
        self.ty.objects.iter().zip(&mut self.decisions.objects)
    }

    /// The plans alone, to be freed off a round's path
    /// (`parallel::drop_in_background` takes no borrow).
    fn into_decisions(decided: Vec<Decided<'_>>) -> Vec<TypeDecisions> {
        decided.into_iter().map(|d| d.decisions).collect()
    }
}

/// The decide step over every type, with each object's pull members as
/// their agents reported them (`core::propagation::report::Pulled`).
fn decide_all<'s>(host: &Host, seen: &'s Observation) -> Vec<Decided<'s>> {
    let mut decided = decide_as(&federation(&host.namespace, seen), seen);
    let pull = seen.pull_members();
    if !pull.is_empty() {
        for d in &mut decided {
            let type_name = d.ty.name.clone();
            for (fed, plan) in d.objects_mut() {
                plan.pulled = Pulled::of(fed, &type_name, &pull, &seen.reports);
            }
        }
    }
    decided
}

/// [`decide_all`] as `federation` sees the federation (`status --drift`:
/// every object report-only).
fn decide_as<'s>(federation: &Federation, seen: &'s Observation) -> Vec<Decided<'s>> {
    seen.types
        .iter()
        .map(|t| {
            let only = t.only.as_ref();
            // Each object's plan depends on that object alone: on all cores.
            let plans = crate::parallel::map(&t.objects, |o| {
                decide::decide_object(federation, &t.ty, o, &t.members)
            });
            let decisions =
                decide::complete_type(federation, &t.ty, &t.objects, &t.members, only, plans);
            Decided { ty: t, decisions }
        })
        .collect()
}

/// The federation as decide sees it over `seen` (`kubefed_namespace`:
/// the host's federation namespace).
pub fn federation<'a>(kubefed_namespace: &'a str, seen: &'a Observation) -> Federation<'a> {
    Federation {
        kubefed_namespace,
        scope: seen.settings.scope,
        settings: seen.settings.sync,
        clusters: &seen.clusters,
        run: &seen.scope,
        fed_namespaces: &seen.fed_namespaces,
        host_namespaces: &seen.host_namespaces,
        versions: &seen.versions,
    }
}

/// A dry run's creates, checked one GET each: members are listed by the
/// managed label only, so a same-named unmanaged object is not in the
/// observation. A real run learns of it from the create's 409 (upstream
/// `pkg/controller/sync/dispatch/managed.go`: Create → AlreadyExists → Get);
/// a plan must say what that run would do: adopt it (an update), or fail
/// with `AlreadyExists` / `ManagedLabelFalse`.
async fn resolve_creates(
    seen: &Observation,
    jobs: &mut [Job<'_>],
    o: &Options,
    report: &mut Report,
) {
    use futures::StreamExt;
    let creates: Vec<(usize, usize)> = jobs
        .iter()
        .enumerate()
        .flat_map(|(j, job)| {
            job.work
                .iter()
                .enumerate()
                .filter(|(_, w)| matches!(w.decision.action, Action::Create(_)))
                .map(move |(i, _)| (j, i))
        })
        .collect();
    if creates.is_empty() {
        return;
    }
    let found: Vec<((usize, usize), Option<serde_json::Value>)> = {
        let jobs = &*jobs;
        futures::stream::iter(creates)
            .map(|(j, i)| async move {
                let w = &jobs[j].work[i];
                let live = member_object(seen, w.ty, &w.decision.cluster, w.key(), o).await;
                ((j, i), live)
            })
            .buffer_unordered(o.concurrency.max(1))
            .collect()
            .await
    };
    let mut dropped: Vec<(usize, usize)> = Vec::new();
    for ((j, i), live) in found {
        let Some(live) = live else { continue };
        let w = &mut jobs[j].work[i];
        let t = w.ty;
        let Some(fed) = w.target.object() else {
            continue;
        };
        let cluster = crate::core::propagation::overrides::MemberCluster {
            name: &w.decision.cluster,
            labels: seen.labels_of(&w.decision.cluster),
        };
        match crate::core::propagation::member::after_conflict(
            fed,
            &t.ty.target,
            cluster,
            &live,
            seen.settings.sync,
        ) {
            Ok(action) => {
                w.decision.action = action;
                w.live = Some(live);
            }
            Err((_, why)) => {
                report.cluster(&w.decision.cluster).failed += 1;
                report.failures.push(Failure::of(
                    Place::member(&w.decision.cluster),
                    describe_key(&t.ty.target.kind, &w.key()),
                    why,
                ));
                dropped.push((j, i));
            }
        }
    }
    dropped.sort_unstable();
    for (j, i) in dropped.into_iter().rev() {
        jobs[j].work.remove(i);
    }
}

/// Member changes a dry run would make, with diffs.
fn dry_run_plan(jobs: &[Job<'_>], report: &mut Report) {
    for w in jobs.iter().flat_map(|j| &j.work) {
        let kind = &w.ty.ty.target.kind;
        let action = &w.decision.action;
        let desired = match action {
            Action::Create(obj) => Some(obj.as_ref()),
            Action::Update { object, .. } => Some(object),
            _ => None,
        };
        let r = report.cluster(&w.decision.cluster);
        match action {
            Action::Create(_) => r.created += 1,
            Action::Update { .. } => r.updated += 1,
            Action::Delete { .. } => r.deleted += 1,
            _ => {}
        }
        // A copy not managed yet that the take-over policy lets the run
        // have (`core::propagation::strategy`).
        let verb = match action {
            Action::Update { adopt: true, .. } => "take over",
            _ => action.verb(),
        };
        let object = describe_key(kind, &w.key());
        // A listed object carries no kind (its list does): give it its
        // own, so that a diff shows no kind change and a deletion names it.
        let live = w.live.as_ref().map(|l| {
            let mut l = l.clone();
            if l.get("kind").is_none_or(serde_json::Value::is_null) {
                l["kind"] = kind.as_str().into();
            }
            l
        });
        // Secret values never reach a plan (kubectl diff's rule). A created
        // object shows whole, and so does a deleted one.
        let diff = match (&live, desired, action) {
            (Some(live), Some(desired), _) => {
                let (live, desired) = crate::core::secrets::mask_pair(live, desired);
                Some((describe(kind, &desired), Some(live), Some(desired)))
            }
            (None, Some(desired), _) => Some((
                describe(kind, desired),
                None,
                Some(crate::core::secrets::mask(desired)),
            )),
            (Some(live), None, Action::Delete { .. }) => Some((
                describe(kind, live),
                Some(crate::core::secrets::mask(live)),
                None,
            )),
            _ => None,
        }
        .map(|(what, live, desired)| {
            crate::sync::review::diff::unified(
                &what,
                &w.decision.cluster,
                live.as_ref(),
                desired.as_ref(),
            )
        });
        report.changes.push(Change {
            diff,
            ..Change::new(Place::member(&w.decision.cluster), verb, object)
        });
    }
}

/// One job per federated object (and per orphan), with the member requests
/// its decisions need; what needs no request is counted here.
fn jobs<'d>(decided: &'d [Decided<'_>], wait: bool, report: &mut Report) -> Vec<Job<'d>> {
    let mut jobs = Vec::new();
    for d in decided {
        let t = d.ty;
        for (fed, p) in d.objects() {
            let mut work = Vec::new();
            for dec in &p.decisions {
                match (&dec.action, dec.status) {
                    (Action::Unchanged, _) => report.cluster(&dec.cluster).unchanged += 1,
                    (Action::Report(drift), _) => report_drift(report, t, p, &dec.cluster, drift),
                    (Action::Skip, Some(ClusterStatus::ClusterNotReady)) => {}
                    (Action::Skip, _) => report.cluster(&dec.cluster).failed += 1,
                    (Action::Nothing, _) => {}
                    (Action::AwaitRemoval, _) if !wait => {}
                    _ => work.push(Work {
                        ty: t,
                        target: Target::Object(fed),
                        decision: dec.clone(),
                        live: live_copy(t, &dec.cluster, p),
                    }),
                }
            }
            jobs.push(Job {
                ty: t,
                target: Target::Object(fed),
                plan: Some(p),
                work,
            });
        }
        for orphan in &d.decisions.orphans {
            jobs.push(Job {
                ty: t,
                target: Target::Orphan,
                plan: None,
                work: vec![Work {
                    ty: t,
                    target: Target::Orphan,
                    decision: orphan.decision.clone(),
                    live: Some(orphan.live.clone()),
                }],
            });
        }
    }
    jobs
}

/// A report-only object's copy in `cluster`: counted unchanged when in
/// sync, else a drift line (nothing is written either way).
fn report_drift(
    report: &mut Report,
    t: &observe::ObservedType,
    p: &ObjectPlan,
    cluster: &str,
    drift: &crate::core::propagation::drift::Drift,
) {
    use crate::core::propagation::drift::Drift;
    if drift.is_in_sync() {
        report.cluster(cluster).unchanged += 1;
        return;
    }
    let (state, fields) = match drift {
        Drift::Missing => ("missing", Vec::new()),
        Drift::Unplaced => ("not placed, a managed copy is there", Vec::new()),
        Drift::Fields(f) => ("differs", f.clone()),
    };
    report.drift.push(crate::sync::run::report::DriftLine {
        cluster: cluster.to_string(),
        object: describe_key(&t.ty.target.kind, &decide::member_key(&t.ty, &p.key)),
        state,
        fields,
    });
}

/// The member's copy of a federated object, as listed.
fn live_copy(
    t: &observe::ObservedType,
    cluster: &str,
    p: &ObjectPlan,
) -> Option<serde_json::Value> {
    let key = decide::member_key(&t.ty, &p.key);
    match t.members.get(cluster)? {
        decide::Listing::Listed(objs) => objs.get(&key).map(|o| o.value()),
        _ => None,
    }
}

/// Counts what the pipeline did per member, and its failures and pending
/// deletions, into the report; returns what became of each object.
fn account(finished: Vec<Finished<'_>>, report: &mut Report) -> Vec<ObjectOutcome> {
    use crate::core::propagation::record::Effect;
    let mut outcomes = Vec::new();
    for f in finished {
        report.host_writes += f.host_writes;
        let t = f.ty;
        let fed_kind = &t.federated.kind;
        let subject = f.target.object();
        let what = subject.map(|o| describe(fed_kind, o)).unwrap_or_default();
        let first = f.results.first().map(|(w, _)| w);
        let object = pipeline::object_ref(t, f.target, first);
        let mut outcome = ObjectOutcome {
            object,
            failed: f.refused.is_some() || f.write_failed.is_some(),
            changes: Vec::new(),
            host_writes: f.host_writes,
            settled: f.settled,
        };
        for e in f.refused.iter().chain(&f.write_failed) {
            report
                .failures
                .push(Failure::of(Place::Host, &what, crate::error::one_line(e)));
        }
        report.pending.extend(f.pending);
        for (w, result) in &f.results {
            let r = report.cluster(&w.decision.cluster);
            let verb = match result {
                Ok(done) => match done.effect {
                    Effect::Created => {
                        r.created += 1;
                        "created"
                    }
                    Effect::Updated => {
                        r.updated += 1;
                        "updated"
                    }
                    Effect::Unlabelled => {
                        r.updated += 1;
                        "unlabelled"
                    }
                    Effect::Deleted { .. } if w.decision.action == Action::AwaitRemoval => continue,
                    Effect::Deleted { .. } => {
                        r.deleted += 1;
                        "deleted"
                    }
                },
                Err((_, msg)) => {
                    r.failed += 1;
                    outcome.failed = true;
                    report.failures.push(Failure::of(
                        Place::member(&w.decision.cluster),
                        describe_key(&t.ty.target.kind, &w.key()),
                        msg,
                    ));
                    continue;
                }
            };
            outcome.changes.push(Change::new(
                Place::member(&w.decision.cluster),
                verb,
                describe_key(&t.ty.target.kind, &w.key()),
            ));
        }
        outcomes.push(outcome);
    }
    outcomes
}

/// The multi-cluster DNS pass, when the host has the DNS API.
async fn dns(host: &Host, seen: &Observation, o: &Options, report: &mut Report) -> Result<()> {
    if seen.dns_installed {
        crate::sync::passes::dns::dns_pass(HostWriter::new(host, o.mode), seen, report).await
    } else {
        // Most federations never want DNS: said at -v 2, not on every run
        // (`status dns` says it where it matters).
        tracing::debug!(
            "multi-cluster DNS is not installed in the host (kubefedctl init --with-dns): DNS records skipped"
        );
        Ok(())
    }
}
