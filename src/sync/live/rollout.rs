//! Progressive rollouts in a one-shot round (issue #57): the core decides
//! (`core::propagation::rollout`: the policy that applies, who is out of
//! reach, the planner, the record, the gate, what may be written, where a
//! rollout stands); this reads what it needs from the observation, records
//! before and after the member writes, reports, and waits. The clock is
//! read by the caller and passed in. Objects without a policy, or whose
//! PropagatedVersion records their version, are not touched.

use crate::clients::host::Host;
use crate::core::describe::{FederatedRef, KeyParts, ObjectKey, describe, key_of};
use crate::core::events::record::{Event, EventType, InvolvedObject, sync_component};
use crate::core::outcome::Failure;
use crate::core::propagation::action::Action;
use crate::core::propagation::decide::{self, Listing, ObjectPlan};
use crate::core::propagation::readiness::readiness;
use crate::core::propagation::rollout::{
    self as core_rollout, MemberCopy, Rolling, RolloutPolicy, RolloutStand,
};
use crate::core::propagation::version::member_version;
use crate::sync::live::Decided;
use crate::sync::live::pipeline::{Finished, Job};
use crate::sync::run::observe::{Observation, ObservedType};
use crate::sync::run::report::{Report, RolloutLine};
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// One object rolled out wave by wave in this round.
pub struct ObjectRollout<'s> {
    /// Its type, as observed.
    pub ty: &'s ObservedType,
    /// The federated object, as observed.
    pub fed: &'s Value,
    pub rolling: Rolling,
    /// Its record could not be written before the member writes: none
    /// were made.
    pub refused: bool,
    /// Members given the target by this round.
    pub wrote: Vec<String>,
    /// `--rollout-abort`: the members sent back to the recorded version.
    pub aborted: Option<Vec<String>>,
    /// Its pull members: admitted by the record, applied by their agents.
    pub pulled: Vec<String>,
}

/// The round's rollouts at `now` (none unless `o.enabled`): each object
/// with a policy (`core_rollout::policy_of`) whose version is not rolled
/// out yet, its decisions gated. A malformed annotation is a failure
/// naming the object and the field, and nothing of that object is written.
pub fn gate<'s>(
    seen: &Observation,
    decided: &mut [Decided<'s>],
    o: &RolloutOptions,
    report: &mut Report,
    now: i64,
) -> Vec<ObjectRollout<'s>> {
    let mut out = Vec::new();
    if !o.enabled {
        return out;
    }
    let run = o.policy.as_ref();
    for d in decided.iter_mut() {
        let t = d.ty;
        for (fed, p) in d.objects_mut() {
            if p.deletion.is_some() || !p.record {
                continue;
            }
            let policy = match core_rollout::policy_of(fed, run) {
                Ok(Some(policy)) => policy,
                Ok(None) => continue,
                Err(why) => {
                    refuse((t, fed), p, why, report);
                    continue;
                }
            };
            let Some(target) = core_rollout::target_of(fed) else {
                continue;
            };
            let pv = seen.versions.get(&p.pv_key() as &dyn KeyParts);
            if let Some(recorded) = o.abort.then(|| Recorded::of(pv)).flatten() {
                out.extend(match &o.previous {
                    Some(previous) => {
                        let abort = (recorded, &**previous, now);
                        abort_previous(seen, (t, fed), p, abort, report)
                    }
                    None => abort_one((t, fed), p, recorded, &target, report),
                });
                continue;
            }
            if core_rollout::rolled_out(pv, &target) {
                continue;
            }
            let rolling = (&*policy, &target, pv, now);
            out.extend(start_one(seen, (t, fed), p, rolling, report));
        }
    }
    if let Some(previous) = &o.previous {
        report.notes.extend(previous.unused(seen));
    }
    out
}

/// One object's rollout in this round: its record resumed, its members
/// observed, its decisions gated (`core::propagation::rollout::gate`);
/// `None` when the run may not take it a step (`core_rollout::out_of_reach`:
/// a failure, and nothing of it is written).
fn start_one<'s>(
    seen: &Observation,
    (t, fed): (&'s ObservedType, &'s Value),
    p: &mut ObjectPlan,
    (policy, target, pv, now): (&RolloutPolicy, &core_rollout::Target, Option<&Value>, i64),
    report: &mut Report,
) -> Option<ObjectRollout<'s>> {
    // A pull member is in reach through its agent: the record admits it.
    let pushed = p.selected.iter().filter(|c| !p.pulled.contains(c));
    if let Some(why) = core_rollout::out_of_reach(pushed, &seen.scope) {
        refuse((t, fed), p, why, report);
        return None;
    }
    let members = member_copies(seen, (t, fed), p);
    let mut rolling = core_rollout::gate::start(policy, target, pv, &members, now);
    if let Some(why) = &rolling.unreadable {
        let what = describe(&t.federated.kind, fed);
        report
            .warnings
            .push(format!("{what}: {why}; its rollout starts over"));
    }
    if let Some(why) = &rolling.unreadable_approvals {
        let what = describe(&t.federated.kind, fed);
        report.warnings.push(format!(
            "{what}: {why}; no approval counts (kubefedctl rollout approve records them again)"
        ));
    }
    rolling.gate(p, &members);
    let mut r = ObjectRollout::new((t, fed), rolling, None);
    r.pulled = members
        .into_iter()
        .filter(|m| m.pulled)
        .map(|m| m.name)
        .collect();
    Some(r)
}

/// A rollout record as a PropagatedVersion holds it, for an abort: its
/// text, parsed (`None`: unreadable), and the version it records.
struct Recorded<'v> {
    text: &'v str,
    record: Option<core_rollout::RolloutRecord>,
    version: Option<core_rollout::Target>,
}

impl<'v> Recorded<'v> {
    /// `None` when `pv` holds no rollout record: nothing to abort.
    fn of(pv: Option<&'v Value>) -> Option<Recorded<'v>> {
        let text = pv.and_then(core_rollout::record_text)?;
        Some(Recorded {
            text,
            record: core_rollout::RolloutRecord::parse(text).ok(),
            version: pv.and_then(|v| core_rollout::Target::of_status(&v["status"])),
        })
    }

    /// What `core_rollout::abort` says of going back to `previous`.
    fn abort(
        &self,
        previous: Option<&core_rollout::Target>,
    ) -> Result<core_rollout::Rollback, core_rollout::AbortError> {
        core_rollout::abort(self.record.as_ref(), self.version.as_ref(), previous)
    }
}

/// `--rollout-abort` of one object with a rollout record: when the core's
/// `abort` allows it (the version the object asks for now is the one its
/// PropagatedVersion records), its decisions stand as decided, all at
/// once: the members that got the aborted version go back, the others
/// are unchanged, and the record goes after the write-back. Otherwise a
/// failure naming why, and nothing of the object is written.
fn abort_one<'s>(
    object: (&'s ObservedType, &'s Value),
    p: &mut ObjectPlan,
    recorded: Recorded<'_>,
    target: &core_rollout::Target,
    report: &mut Report,
) -> Option<ObjectRollout<'s>> {
    match recorded.abort(Some(target)) {
        Ok(rollback) => {
            let text = Some(recorded.text.to_string());
            let record = recorded.record.unwrap_or_default();
            let rolling = core_rollout::abort_at_once(record, text);
            Some(ObjectRollout::new(object, rolling, Some(rollback.members)))
        }
        Err(why) => {
            let why = format!("--rollout-abort: {why}; nothing of it is written");
            refuse(object, p, why, report);
            None
        }
    }
}

/// `--rollout-abort --previous FILE` of one object with a rollout record,
/// at `now`: when the file's version of it hashes to what its PropagatedVersion
/// records (the core's `abort`), its decisions are the file's version's
/// (`rollback::decide`), the host's object untouched: the members that got
/// the aborted version go back, and the record stays, marked aborted, so
/// that runs of the host's version write nothing. Otherwise a failure
/// naming why, and nothing of the object is written.
fn abort_previous<'s>(
    seen: &Observation,
    (t, fed): (&'s ObservedType, &'s Value),
    p: &mut ObjectPlan,
    (recorded, previous, now): (Recorded<'_>, &crate::sync::live::rollback::Previous, i64),
    report: &mut Report,
) -> Option<ObjectRollout<'s>> {
    let file = previous.of(t, fed);
    let given = file.and_then(|f| core_rollout::target_of(&f.object));
    match recorded.abort(given.as_ref()) {
        Ok(rollback) => {
            let file = &file.expect("a given version").object;
            *p = crate::sync::live::rollback::decide(seen, t, fed, previous, file);
            let record = recorded.record.unwrap_or_default();
            let text = Some(recorded.text.to_string());
            let rolling = core_rollout::abort_to_previous(record, text, &rollback, p, now);
            Some(ObjectRollout::new(
                (t, fed),
                rolling,
                Some(rollback.members),
            ))
        }
        Err(why) => {
            let source = file.map(|f| format!(" {}", f.source)).unwrap_or_default();
            let why =
                format!("--rollout-abort --previous{source}: {why}; nothing of it is written");
            refuse((t, fed), p, why, report);
            None
        }
    }
}

/// A failure naming the object and `why`, and nothing of it written.
fn refuse((t, fed): (&ObservedType, &Value), p: &mut ObjectPlan, why: String, report: &mut Report) {
    let what = describe(&t.federated.kind, fed);
    report.failures.push(Failure::of_federated(what, why));
    core_rollout::write_nothing(p);
}

/// Each placed member with its labels and, when it holds a copy, the
/// copy's readiness (`--wait-ready`'s rules) and member version; a pull
/// member's as its agent reports it (`core_rollout::pull::pulled_copy`).
fn member_copies(
    seen: &Observation,
    (t, fed): (&ObservedType, &Value),
    p: &ObjectPlan,
) -> Vec<MemberCopy> {
    p.selected
        .iter()
        .map(|c| {
            let pulled = p.pulled.members.get(c);
            let copy = match pulled {
                Some(state) => core_rollout::pull::pulled_copy(state, fed),
                None => copy_of(t, &p.key, c),
            };
            MemberCopy {
                name: c.clone(),
                labels: seen.labels_of(c).clone(),
                copy,
                pulled: pulled.is_some(),
            }
        })
        .collect()
}

/// The copy of the federated object `key` that `cluster` holds, as
/// observed: its readiness (`--wait-ready`'s rules) and member version.
pub fn copy_of(
    t: &ObservedType,
    key: &ObjectKey,
    cluster: &str,
) -> Option<(crate::core::propagation::readiness::Readiness, String)> {
    let Some(Listing::Listed(objs)) = t.members.get(cluster) else {
        return None;
    };
    let o = objs.get(&decide::member_key(&t.ty, key))?;
    let v = o.value();
    Some((
        readiness(&t.target.group, &t.target.kind, &v),
        member_version(&v),
    ))
}

impl<'s> ObjectRollout<'s> {
    /// `object`'s rollout in this round, nothing written yet; `aborted`:
    /// the members an abort sends back.
    fn new(
        (ty, fed): (&'s ObservedType, &'s Value),
        rolling: Rolling,
        aborted: Option<Vec<String>>,
    ) -> ObjectRollout<'s> {
        ObjectRollout {
            ty,
            fed,
            rolling,
            refused: false,
            wrote: Vec::new(),
            aborted,
            pulled: Vec::new(),
        }
    }

    /// The object, as the pipeline and the watch name it.
    pub fn object(&self) -> FederatedRef {
        FederatedRef::sharing(&self.ty.name, key_of(self.fed))
    }
}

/// Each object's plan by its type's name and key, for the rollouts to
/// find theirs, gated in place, with one look-up each (none to find
/// without rollouts).
fn plans<'d>(
    decided: &'d [Decided<'_>],
    rollouts: &[ObjectRollout<'_>],
) -> HashMap<(&'d str, &'d ObjectKey), &'d ObjectPlan> {
    if rollouts.is_empty() {
        return HashMap::new();
    }
    (decided.iter())
        .flat_map(|d| (d.decisions.objects.iter()).map(move |p| ((&*d.ty.name, &p.key), p)))
        .collect()
}

/// The plan of `r`'s object, among [`plans`].
fn plan_of<'d>(
    plans: &HashMap<(&'d str, &'d ObjectKey), &'d ObjectPlan>,
    r: &ObjectRollout<'_>,
) -> &'d ObjectPlan {
    plans[&(&*r.ty.name, &key_of(r.fed))]
}

/// The objects mid-rollout: the pipeline leaves their PropagatedVersion
/// to the rollout's record.
pub fn in_progress(rollouts: &[ObjectRollout<'_>]) -> HashSet<FederatedRef> {
    (rollouts.iter())
        .filter(|r| !r.rolling.complete() && !r.refused)
        .map(ObjectRollout::object)
        .collect()
}

/// The objects with a rollout in this round whose record is written
/// after the member writes (`record_after`): the pipeline does not let
/// them go early (`Pipeline::holds`).
pub fn objects(rollouts: &[ObjectRollout<'_>]) -> HashSet<FederatedRef> {
    (rollouts.iter())
        .filter(|r| !r.refused)
        .map(ObjectRollout::object)
        .collect()
}

/// Before the member writes: each record that changed (writes begun, a
/// readiness noted) and the PropagatedVersion mid-rollout. An object whose
/// record cannot be written gets no member write.
pub async fn record_before(
    host: &Host,
    decided: &[Decided<'_>],
    rollouts: &mut [ObjectRollout<'_>],
    jobs: &mut [Job<'_>],
    report: &mut Report,
) {
    let plans = plans(decided, rollouts);
    for r in rollouts.iter_mut() {
        let t = r.ty;
        let (fed, p) = (r.fed, plan_of(&plans, r));
        if !r.rolling.records_before() {
            continue;
        }
        let status = r.rolling.versions(p);
        let annotation = r.rolling.annotation();
        match crate::sync::live::record::write_rollout_record(
            host,
            &t.federated,
            fed,
            p,
            status,
            annotation,
        )
        .await
        {
            Ok(n) => {
                report.host_writes += n;
                r.rolling.recorded = Some(r.rolling.record.to_annotation());
            }
            Err(e) => {
                r.refused = true;
                report.failures.push(Failure::of_federated(
                    describe(&t.federated.kind, fed),
                    format!("{}; no member written", crate::error::one_line(&e)),
                ));
                for j in jobs.iter_mut() {
                    if j.target.is(fed) {
                        j.work.clear();
                    }
                }
            }
        }
    }
}

/// After the member writes: each written member's version in the record,
/// recorded; a complete rollout's record removed (its PropagatedVersion
/// written by the pipeline, as without a policy); a halt on the object's
/// status (as of `now`) and as an Event. Each object's rollout as a
/// report line.
pub async fn record_after(
    host: &Host,
    (decided, finished): (&[Decided<'_>], &[Finished<'_>]),
    rollouts: &mut [ObjectRollout<'_>],
    (report, events): (&mut Report, &mut Vec<Event>),
    now: i64,
) {
    let plans = plans(decided, rollouts);
    for r in rollouts.iter_mut() {
        let t = r.ty;
        let (fed, p) = (r.fed, plan_of(&plans, r));
        let what = describe(&t.federated.kind, fed);
        let done = finished.iter().find(|f| f.target.is(fed));
        let failed = done.is_none_or(|f| f.write_failed.is_some() || f.refused.is_some());
        if let Some(f) = done {
            r.wrote = written(f, &r.rolling.plan.write);
            let versions: Vec<(String, String)> = (f.results.iter())
                .filter_map(|(w, res)| {
                    let v = res.as_ref().ok()?.version.clone()?;
                    Some((w.decision.cluster.clone(), v))
                })
                .collect();
            r.rolling
                .wrote(versions.iter().map(|(c, v)| (c.as_str(), v.as_str())));
        }
        if r.rolling.records_after(r.refused, failed) {
            let annotation = r.rolling.annotation();
            let written = crate::sync::live::record::write_rollout_record(
                host,
                &t.federated,
                fed,
                p,
                r.rolling.versions_after(p),
                annotation,
            )
            .await;
            match written {
                Ok(n) => report.host_writes += n,
                Err(e) => report.failures.push(Failure::of_federated(
                    what.clone(),
                    crate::error::one_line(&e),
                )),
            }
        }
        // Unless the pipeline wrote something for it, its status is as observed.
        let untouched = done.is_none_or(|f| f.host_writes == 0);
        let observed = untouched.then_some(&fed["status"]);
        let newly = ended(host, (t, &p.key), r, (observed, now), report).await;
        // Once per halt: a halted object decided again (every resync of the
        // watch) finds its status saying so already, and records no Event.
        if let (Some(halt), true) = (r.rolling.halt(), newly) {
            events.push(Event {
                involved: InvolvedObject::of(fed),
                event_type: EventType::Warning,
                reason: "RolloutHalted".into(),
                message: halt.to_string(),
                component: sync_component(&t.federated.kind),
            });
        }
        let line = line(what, r);
        // Once per wave and version: the record says it awaits from now on.
        if let (Some(awaiting), false) = (r.rolling.newly_awaiting(), r.refused) {
            events.push(Event {
                involved: InvolvedObject::of(fed),
                event_type: EventType::Normal,
                reason: "RolloutAwaitingApproval".into(),
                message: format!(
                    "rollout {awaiting}: kubefedctl rollout approve {}",
                    line.approve_args()
                ),
                component: sync_component(&t.federated.kind),
            });
        }
        report.rollouts.push(line);
    }
}

/// How the rollout ends the round on its object's status
/// (`core_rollout::End`: a halt, or complete), written as of `now`.
/// `observed`: the object's status as the round observed it, when nothing
/// of the round wrote it since; when that says so already, nothing is
/// read or written. Whether the end is news: the status said otherwise
/// (or could not be read or written, so that nothing is lost).
async fn ended(
    host: &Host,
    (t, key): (&ObservedType, &ObjectKey),
    r: &ObjectRollout<'_>,
    (observed, now): (Option<&serde_json::Value>, i64),
    report: &mut Report,
) -> bool {
    let Some(end) = r.rolling.end(r.aborted.is_some()) else {
        return false;
    };
    let now = crate::core::time::rfc3339(now);
    let edit = |s: &serde_json::Value| end.status(s, &now);
    if observed.is_some_and(|s| edit(s).is_none()) {
        return false;
    }
    let written =
        crate::sync::live::record::write_rollout_status(host, &t.federated, key, edit).await;
    match written {
        Ok(wrote) => {
            report.host_writes += usize::from(wrote);
            wrote
        }
        Err(e) => {
            report.warnings.push(format!(
                "{}: the rollout's end is not on its status: {}",
                crate::core::describe::describe_key(&t.federated.kind, key),
                crate::error::one_line(&e)
            ));
            true
        }
    }
}

/// The members of `write` whose request succeeded.
fn written(f: &Finished<'_>, write: &[String]) -> Vec<String> {
    (f.results.iter())
        .filter(|(w, res)| res.is_ok() && write.contains(&w.decision.cluster))
        .filter(|(w, _)| matches!(w.decision.action, Action::Create(_) | Action::Update { .. }))
        .map(|(w, _)| w.decision.cluster.clone())
        .collect()
}

/// Where one object's rollout stands, as the report says it.
pub fn line(object: String, r: &ObjectRollout<'_>) -> RolloutLine {
    let plan = &r.rolling.plan;
    let stand = core_rollout::stand_over(plan, r.aborted.as_deref(), &r.pulled);
    RolloutLine {
        waves_text: core_rollout::waves_text(plan),
        waves_markdown: core_rollout::waves_markdown(&object, plan),
        object,
        key: r.object(),
        state: stand.state,
        detail: stand.detail,
        wrote: r.wrote.clone(),
        recheck_at: stand.recheck_at,
    }
}

/// A dry run's rollouts: each object's line, nothing recorded.
pub fn plan_lines(rollouts: &[ObjectRollout<'_>], report: &mut Report) {
    for r in rollouts {
        let what = describe(&r.ty.federated.kind, r.fed);
        report.rollouts.push(line(what, r));
    }
}

/// How a one-shot run rolls out.
#[derive(Clone, Debug, Default)]
pub struct RolloutOptions {
    /// Roll out wave by wave: one-shot runs go on with rounds while a
    /// rollout waits (`go_on`); the watch takes each waiting object again
    /// when its members' readiness changes or its time comes
    /// (`sync::watch::rollouts`).
    pub enabled: bool,
    /// `--rollout`: the policy of objects without an annotation.
    pub policy: Option<RolloutPolicy>,
    /// `--rollout-abort`: each object with a rollout in progress goes back
    /// at once to the version its PropagatedVersion records, which `-f`
    /// gave (`core::propagation::rollout::abort`).
    pub abort: bool,
    /// `--rollout-abort --previous FILE`: that version, not applied to the
    /// host, is what the members go back to (`rollback`).
    pub previous: Option<std::sync::Arc<crate::sync::live::rollback::Previous>>,
    /// How long a run goes on waiting for waves, in all: then it stops,
    /// the rollout waiting, and the next run resumes it.
    pub wait: std::time::Duration,
}

/// Whether the run goes on with another round, and after how long
/// (`core_rollout::next_round`, `elapsed` since it started, at `now`):
/// while a rollout waits for its members and the run's wait is not over.
pub fn go_on(
    report: &Report,
    o: &crate::sync::live::Options,
    (elapsed, now): (std::time::Duration, i64),
) -> Option<std::time::Duration> {
    if o.mode.plans() || !o.rollout.enabled || !report.rollouts_waiting() {
        return None;
    }
    let recheck_at = (report.rollouts.iter())
        .filter(|r| r.state == RolloutStand::Waiting)
        .filter_map(|r| r.recheck_at);
    core_rollout::next_round(elapsed, o.rollout.wait, recheck_at, now)
}

/// A later round of a one-shot run (`go_on`) covers only the types of
/// the rollouts still waiting: the others were done by the first round,
/// and are neither read nor decided again.
pub fn later_round(o: &crate::sync::live::Options, report: &Report) -> crate::sync::live::Options {
    let mut types: Vec<String> = (report.rollouts.iter())
        .filter(|r| r.state == RolloutStand::Waiting)
        .map(|r| r.key.type_name.to_string())
        .collect();
    types.sort();
    types.dedup();
    let mut later = o.clone();
    later.selection.scope.types = types;
    later
}

/// Each rollout's line on stderr when it says something new (`said`:
/// what was said of each object).
pub fn log(report: &Report, said: &mut std::collections::BTreeMap<String, String>) {
    for r in &report.rollouts {
        if said.get(&r.object) != Some(&r.detail) {
            tracing::info!("{}", r.line());
            said.insert(r.object.clone(), r.detail.clone());
        }
    }
}
