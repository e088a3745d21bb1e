//! Progressive rollouts in a one-shot round (issue #57): the core decides
//! (`core::propagation::rollout`: the policy, the planner, the record, the
//! gate); this reads what it needs from the observation, records before
//! and after the member writes, and reports. Objects without a policy, or
//! whose PropagatedVersion records their version, are not touched.

use crate::clients::host::Host;
use crate::core::describe::{FederatedRef, KeyParts, ObjectKey, describe, key_of};
use crate::core::events::record::{Event, EventType, InvolvedObject, sync_component};
use crate::core::outcome::Failure;
use crate::core::propagation::action::Action;
use crate::core::propagation::decide::{self, FinalizerStep, Listing, ObjectPlan};
use crate::core::propagation::readiness::readiness;
use crate::core::propagation::rollout::{
    self as core_rollout, MemberCopy, Rolling, RolloutPolicy, RolloutState,
};
use crate::core::propagation::version::member_version;
use crate::sync::live::Decided;
use crate::sync::live::observe::{Observation, ObservedType};
use crate::sync::live::pipeline::{Finished, Job};
use crate::sync::live::report::{Report, RolloutLine, RolloutStand};
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
}

/// The round's rollouts (none unless `o.enabled`): each object with a policy (its annotation, else
/// `run`'s) whose version is not rolled out yet, its decisions gated. A
/// malformed annotation is a failure naming the object and the field, and
/// nothing of that object is written.
pub fn gate<'s>(
    seen: &Observation,
    decided: &mut [Decided<'s>],
    o: &RolloutOptions,
    report: &mut Report,
) -> Vec<ObjectRollout<'s>> {
    let now = crate::clock::now_unix();
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
            let policy = match RolloutPolicy::of_object(fed) {
                Ok(own) => own,
                Err(e) => {
                    let annotation = core_rollout::ROLLOUT_ANNOTATION;
                    let why = format!("annotation {annotation}: {}", e.problem);
                    refuse((t, fed), p, why, report);
                    continue;
                }
            };
            let Some(policy) = policy.as_ref().or(run).filter(|x| !x.is_all_at_once()) else {
                continue;
            };
            let Some(target) = core_rollout::target_of(fed) else {
                continue;
            };
            let pv = seen.versions.get(&p.pv_key() as &dyn KeyParts);
            if let Some(recorded) = o.abort.then(|| Recorded::of(pv)).flatten() {
                out.extend(match &o.previous {
                    Some(previous) => abort_previous(seen, (t, fed), p, recorded, previous, report),
                    None => abort_one((t, fed), p, recorded, &target, report),
                });
                continue;
            }
            if core_rollout::rolled_out(pv, &target) {
                continue;
            }
            let rolling = (policy, &target, pv, now);
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
/// `None` when the run may not take it a step (`out_of_reach`: a failure,
/// and nothing of it is written).
fn start_one<'s>(
    seen: &Observation,
    (t, fed): (&'s ObservedType, &'s Value),
    p: &mut ObjectPlan,
    (policy, target, pv, now): (&RolloutPolicy, &core_rollout::Target, Option<&Value>, i64),
    report: &mut Report,
) -> Option<ObjectRollout<'s>> {
    if let Some(why) = out_of_reach(seen, p) {
        refuse((t, fed), p, why, report);
        return None;
    }
    let members = member_copies(seen, t, p);
    let mut rolling = core_rollout::gate::start(policy, target, pv, &members, now);
    if let Some(why) = &rolling.unreadable {
        let what = describe(&t.federated.kind, fed);
        report
            .warnings
            .push(format!("{what}: {why}; its rollout starts over"));
    }
    rolling.gate(p, &members);
    Some(ObjectRollout::new((t, fed), rolling, None))
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

/// Why a run may not take a rollout a step: some of the members the
/// object is placed on are not the run's to write (`--cluster`, or in the
/// watch members whose watches have not listed yet). The planner would
/// count them written when their step came, and their deadline would
/// halt the rollout for a write never made.
fn out_of_reach(seen: &Observation, p: &ObjectPlan) -> Option<String> {
    let outside: Vec<&str> = (p.selected.iter())
        .filter(|c| !seen.scope.touches(c))
        .map(String::as_str)
        .collect();
    (!outside.is_empty()).then(|| {
        format!(
            "its rollout goes on only in a run that may write to every member it is placed on, and this one may not write to {} (--cluster); nothing of it is written",
            outside.join(", ")
        )
    })
}

/// `--rollout-abort --previous FILE` of one object with a rollout record:
/// when the file's version of it hashes to what its PropagatedVersion
/// records (the core's `abort`), its decisions are the file's version's
/// (`rollback::decide`), the host's object untouched: the members that got
/// the aborted version go back, and the record stays, marked aborted, so
/// that runs of the host's version write nothing. Otherwise a failure
/// naming why, and nothing of the object is written.
fn abort_previous<'s>(
    seen: &Observation,
    (t, fed): (&'s ObservedType, &'s Value),
    p: &mut ObjectPlan,
    recorded: Recorded<'_>,
    previous: &crate::sync::live::rollback::Previous,
    report: &mut Report,
) -> Option<ObjectRollout<'s>> {
    let file = previous.of(t, fed);
    let given = file.and_then(|f| core_rollout::target_of(&f.object));
    match recorded.abort(given.as_ref()) {
        Ok(rollback) => {
            let file = &file.expect("a given version").object;
            *p = crate::sync::live::rollback::decide(seen, t, fed, previous, file);
            let record = recorded.record.unwrap_or_default();
            let now = crate::clock::now_unix();
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
    write_nothing(p);
}

/// Nothing of this object is written: no member request, no status, no
/// PropagatedVersion, no finalizer.
fn write_nothing(p: &mut ObjectPlan) {
    p.decisions.clear();
    p.record = false;
    p.finalizer = FinalizerStep::Keep;
}

/// Each placed member with its labels and, when it holds a copy, the
/// copy's readiness (`--wait-ready`'s rules) and member version.
fn member_copies(seen: &Observation, t: &ObservedType, p: &ObjectPlan) -> Vec<MemberCopy> {
    let key = decide::member_key(&t.ty, &p.key);
    p.selected
        .iter()
        .map(|c| {
            let copy = match t.members.get(c) {
                Some(Listing::Listed(objs)) => objs.get(&key).map(|o| {
                    let v = o.value();
                    (
                        readiness(&t.target.group, &t.target.kind, &v),
                        member_version(&v),
                    )
                }),
                _ => None,
            };
            MemberCopy {
                name: c.clone(),
                labels: seen.labels_of(c).clone(),
                copy,
            }
        })
        .collect()
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
        if r.rolling.complete() {
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
/// status and as an Event. Each object's rollout as a report line.
pub async fn record_after(
    host: &Host,
    decided: &[Decided<'_>],
    rollouts: &mut [ObjectRollout<'_>],
    finished: &[Finished<'_>],
    report: &mut Report,
    events: &mut Vec<Event>,
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
        // A record not written before gets nothing after; a complete one
        // goes once its PropagatedVersion is written.
        let as_is = r.refused || (r.rolling.complete() && failed);
        if !as_is {
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
        ended(host, t, &p.key, r, observed, report).await;
        if let Some(halt) = r.rolling.halt() {
            events.push(Event {
                involved: InvolvedObject::of(fed),
                event_type: EventType::Warning,
                reason: "RolloutHalted".into(),
                message: halt.to_string(),
                component: sync_component(&t.federated.kind),
            });
        }
        report.rollouts.push(line(what, r));
    }
}

/// A halted rollout on its object's status (`Ready` `False`, reason
/// `RolloutHalted`, the failed members' entries); a completed one's
/// `Ready` `True` (each member was ready for `minSuccessTime`).
/// `observed`: the object's status as the round observed it, when nothing
/// of the round wrote it since; when that says so already, nothing is
/// read or written (a halted object decided again, as every resync of the
/// watch does, costs no request).
async fn ended(
    host: &Host,
    t: &ObservedType,
    key: &ObjectKey,
    r: &ObjectRollout<'_>,
    observed: Option<&serde_json::Value>,
    report: &mut Report,
) {
    use crate::core::propagation::status::{ReadyState, with_ready};
    let now = crate::clock::now_rfc3339();
    if r.aborted.is_some() {
        return;
    }
    type Edit<'a> = Box<dyn Fn(&serde_json::Value) -> Option<serde_json::Value> + Send + Sync + 'a>;
    let edit: Edit = match (r.rolling.halt(), r.rolling.complete()) {
        (Some(halt), _) => Box::new(|s| core_rollout::halted_status(s, halt, &now)),
        (None, true) => Box::new(|s| with_ready(s, ReadyState::Ready, &now)),
        _ => return,
    };
    if observed.is_some_and(|s| edit(s).is_none()) {
        return;
    }
    let written =
        crate::sync::live::record::write_rollout_status(host, &t.federated, key, edit).await;
    match written {
        Ok(wrote) => report.host_writes += usize::from(wrote),
        Err(e) => report.warnings.push(format!(
            "{}: the rollout's end is not on its status: {}",
            crate::core::describe::describe_key(&t.federated.kind, key),
            crate::error::one_line(&e)
        )),
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
    let (state, detail, recheck_at) = match &plan.state {
        RolloutState::Complete if r.aborted.is_some() => {
            let members = r.aborted.as_deref().unwrap_or_default().join(", ");
            let detail = format!("aborted: {members} back to the recorded version");
            (RolloutStand::Aborted, detail, None)
        }
        RolloutState::Complete => (RolloutStand::Complete, "complete".to_string(), None),
        RolloutState::Aborted(a) if r.aborted.is_some() => {
            (RolloutStand::Aborted, aborted_now(r, a), None)
        }
        // A run of an aborted version: it writes nothing, as a halt.
        RolloutState::Aborted(a) => (RolloutStand::Halted, a.to_string(), None),
        RolloutState::Halted(h) => (RolloutStand::Halted, h.to_string(), None),
        RolloutState::Waiting(w) => {
            let members: Vec<String> = (w.members.iter())
                .map(|(m, why)| format!("{m} ({why})"))
                .collect();
            let mut detail = w.wave_label.clone();
            if !plan.write.is_empty() {
                detail.push_str(&format!(": wrote {}", plan.write.join(", ")));
            }
            if !members.is_empty() {
                detail.push_str(&format!(": waiting for {}", members.join(", ")));
            }
            (RolloutStand::Waiting, detail, w.recheck_at)
        }
    };
    RolloutLine {
        waves_text: core_rollout::waves_text(plan),
        waves_markdown: core_rollout::waves_markdown(&object, plan),
        object,
        key: r.object(),
        state,
        detail,
        wrote: r.wrote.clone(),
        recheck_at,
    }
}

/// `--rollout-abort --previous FILE`'s line: who went back, who did not.
fn aborted_now(r: &ObjectRollout, a: &core_rollout::Aborted) -> String {
    let back: Vec<&str> = (r.aborted.iter().flatten())
        .filter(|m| !a.left.contains(m))
        .map(String::as_str)
        .collect();
    let mut detail = format!("aborted: {} back to the previous version", back.join(", "));
    if !a.left.is_empty() {
        detail.push_str(&format!("; {} still on this version", a.left.join(", ")));
    }
    detail.push_str("; the federated object still asks for this version: runs of it write nothing until its template changes");
    detail
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

/// How often a waiting rollout's members are looked at again.
const POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether the run goes on with another round, and after how long: while
/// a rollout waits for its members and the run's wait is not over.
pub fn go_on(
    report: &Report,
    o: &crate::sync::live::Options,
    started: std::time::Instant,
) -> Option<std::time::Duration> {
    if o.mode.plans() || !o.rollout.enabled || !report.rollouts_waiting() {
        return None;
    }
    if started.elapsed() + POLL > o.rollout.wait {
        return None;
    }
    let now = crate::clock::now_unix();
    let soon = (report.rollouts.iter())
        .filter(|r| r.state == RolloutStand::Waiting)
        .filter_map(|r| r.recheck_at)
        .any(|at| at <= now + 1);
    Some(if soon {
        std::time::Duration::from_secs(1)
    } else {
        POLL
    })
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

/// A later round's placed member objects (`--wait-ready`) merged into the
/// run's: each copy once, written when any round wrote it.
pub fn placed_once(run: &mut Report, later: &mut Report) {
    let id = |p: &crate::sync::live::report::PlacedObject| {
        (p.cluster.clone(), p.target.plural.clone(), p.key.clone())
    };
    let mut at: std::collections::HashMap<_, usize> = (run.placed.iter().enumerate())
        .map(|(i, p)| (id(p), i))
        .collect();
    for p in later.placed.drain(..) {
        match at.get(&id(&p)) {
            Some(&i) => {
                let written = run.placed[i].written || p.written;
                run.placed[i] = crate::sync::live::report::PlacedObject { written, ..p };
            }
            None => {
                at.insert(id(&p), run.placed.len());
                run.placed.push(p);
            }
        }
    }
}
