//! Progressive rollouts in a one-shot round (issue #57): the core decides
//! (`core::propagation::rollout`: the policy, the planner, the record, the
//! gate); this reads what it needs from the observation, records before
//! and after the member writes, and reports. Objects without a policy, or
//! whose PropagatedVersion records their version, are not touched.

use crate::clients::host::Host;
use crate::core::describe::describe;
use crate::core::events::record::{Event, EventType, InvolvedObject, sync_component};
use crate::core::outcome::Failure;
use crate::core::propagation::action::Action;
use crate::core::propagation::decide::{self, FinalizerStep, Listing, ObjectPlan, TypeDecisions};
use crate::core::propagation::readiness::readiness;
use crate::core::propagation::rollout::{
    self as core_rollout, MemberCopy, Rolling, RolloutPolicy, RolloutState,
};
use crate::core::propagation::version::member_version;
use crate::sync::live::execute::Target;
use crate::sync::live::observe::{Observation, ObservedType};
use crate::sync::live::pipeline::{Finished, Job};
use crate::sync::live::report::{Report, RolloutLine, RolloutStand};
use std::collections::HashSet;

/// One object rolled out wave by wave in this round.
pub struct ObjectRollout {
    pub type_index: usize,
    pub object_index: usize,
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
pub fn gate(
    seen: &Observation,
    decided: &mut [TypeDecisions],
    o: &RolloutOptions,
    report: &mut Report,
) -> Vec<ObjectRollout> {
    let now = crate::clock::now_unix();
    let mut out = Vec::new();
    if !o.enabled {
        return out;
    }
    let run = o.policy.as_ref();
    for (ti, d) in decided.iter_mut().enumerate() {
        let t = &seen.types[ti];
        for (oi, p) in d.objects.iter_mut().enumerate() {
            let fed = &t.objects[oi];
            if p.deletion.is_some() || !p.record {
                continue;
            }
            let policy = match RolloutPolicy::of_object(fed) {
                Ok(own) => own,
                Err(e) => {
                    report.failures.push(Failure::of_federated(
                        describe(&t.federated.kind, fed),
                        format!(
                            "annotation {}: {}",
                            core_rollout::ROLLOUT_ANNOTATION,
                            e.problem
                        ),
                    ));
                    write_nothing(p);
                    continue;
                }
            };
            let Some(policy) = policy.as_ref().or(run).filter(|x| !x.is_all_at_once()) else {
                continue;
            };
            let Some(target) = core_rollout::target_of(fed) else {
                continue;
            };
            let pv = seen.versions.get(&crate::core::describe::ObjectKey::new(
                p.key.namespace.clone(),
                p.pv_name.clone(),
            ));
            if o.abort && pv.and_then(core_rollout::record_text).is_some() {
                let what = describe(&t.federated.kind, fed);
                out.extend(match &o.previous {
                    Some(previous) => abort_previous(seen, t, p, pv, previous, (ti, oi), report),
                    None => abort_one(p, pv, &target, (ti, oi), &what, report),
                });
                continue;
            }
            if core_rollout::rolled_out(pv, &target) {
                continue;
            }
            let members = member_copies(seen, t, p);
            let mut rolling = core_rollout::gate::start(policy, &target, pv, &members, now);
            if let Some(why) = &rolling.unreadable {
                let what = describe(&t.federated.kind, fed);
                report
                    .warnings
                    .push(format!("{what}: {why}; its rollout starts over"));
            }
            rolling.gate(p, &members);
            out.push(ObjectRollout {
                type_index: ti,
                object_index: oi,
                rolling,
                refused: false,
                wrote: Vec::new(),
                aborted: None,
            });
        }
    }
    if let Some(previous) = &o.previous {
        report.notes.extend(previous.unused(seen));
    }
    out
}

/// `--rollout-abort` of one object with a rollout record: when the core's
/// `abort` allows it (the version the object asks for now is the one its
/// PropagatedVersion records), its decisions stand as decided, all at
/// once: the members that got the aborted version go back, the others
/// are unchanged, and the record goes after the write-back. Otherwise a
/// failure naming why, and nothing of the object is written.
fn abort_one(
    p: &mut ObjectPlan,
    pv: Option<&serde_json::Value>,
    target: &core_rollout::Target,
    (type_index, object_index): (usize, usize),
    what: &str,
    report: &mut Report,
) -> Option<ObjectRollout> {
    let text = pv.and_then(core_rollout::record_text)?;
    let record = core_rollout::RolloutRecord::parse(text).ok();
    let recorded = pv.and_then(|v| core_rollout::Target::of_status(&v["status"]));
    match core_rollout::abort(record.as_ref(), recorded.as_ref(), Some(target)) {
        Ok(rollback) => Some(ObjectRollout {
            type_index,
            object_index,
            rolling: Rolling {
                record: record.unwrap_or_default(),
                recorded: Some(text.to_string()),
                plan: core_rollout::RolloutPlan {
                    waves: Vec::new(),
                    step: None,
                    write: Vec::new(),
                    keep: Vec::new(),
                    state: RolloutState::Complete,
                },
                unreadable: None,
                back: Default::default(),
            },
            refused: false,
            wrote: Vec::new(),
            aborted: Some(rollback.members),
        }),
        Err(why) => {
            let why = format!("--rollout-abort: {why}; nothing of it is written");
            report.failures.push(Failure::of_federated(what, why));
            write_nothing(p);
            None
        }
    }
}

/// `--rollout-abort --previous FILE` of one object with a rollout record:
/// when the file's version of it hashes to what its PropagatedVersion
/// records (the core's `abort`), its decisions are the file's version's
/// (`rollback::decide`), the host's object untouched: the members that got
/// the aborted version go back, and the record stays, marked aborted, so
/// that runs of the host's version write nothing. Otherwise a failure
/// naming why, and nothing of the object is written.
fn abort_previous(
    seen: &Observation,
    t: &ObservedType,
    p: &mut ObjectPlan,
    pv: Option<&serde_json::Value>,
    previous: &crate::sync::live::rollback::Previous,
    (type_index, object_index): (usize, usize),
    report: &mut Report,
) -> Option<ObjectRollout> {
    let fed = &t.objects[object_index];
    let text = pv.and_then(core_rollout::record_text)?;
    let record = core_rollout::RolloutRecord::parse(text).ok();
    let recorded = pv.and_then(|v| core_rollout::Target::of_status(&v["status"]));
    let file = previous.of(t, fed);
    let given = file.and_then(|f| core_rollout::target_of(&f.object));
    match core_rollout::abort(record.as_ref(), recorded.as_ref(), given.as_ref()) {
        Ok(rollback) => {
            let file = &file.expect("a given version").object;
            *p = crate::sync::live::rollback::decide(seen, t, fed, previous, file);
            let record = record.unwrap_or_default();
            let now = crate::clock::now_unix();
            let text = Some(text.to_string());
            let rolling = core_rollout::abort_to_previous(record, text, &rollback, p, now);
            Some(ObjectRollout {
                type_index,
                object_index,
                rolling,
                refused: false,
                wrote: Vec::new(),
                aborted: Some(rollback.members),
            })
        }
        Err(why) => {
            let source = file.map(|f| format!(" {}", f.source)).unwrap_or_default();
            let why =
                format!("--rollout-abort --previous{source}: {why}; nothing of it is written");
            let what = describe(&t.federated.kind, fed);
            report.failures.push(Failure::of_federated(what, why));
            write_nothing(p);
            None
        }
    }
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

/// The objects mid-rollout: the pipeline leaves their PropagatedVersion
/// to the rollout's record.
pub fn in_progress(rollouts: &[ObjectRollout]) -> HashSet<(usize, usize)> {
    (rollouts.iter())
        .filter(|r| !r.rolling.complete() && !r.refused)
        .map(|r| (r.type_index, r.object_index))
        .collect()
}

/// Before the member writes: each record that changed (writes begun, a
/// readiness noted) and the PropagatedVersion mid-rollout. An object whose
/// record cannot be written gets no member write.
pub async fn record_before(
    host: &Host,
    seen: &Observation,
    decided: &[TypeDecisions],
    rollouts: &mut [ObjectRollout],
    jobs: &mut [Job<'_>],
    report: &mut Report,
) {
    for r in rollouts.iter_mut() {
        let t = &seen.types[r.type_index];
        let (fed, p) = (
            &t.objects[r.object_index],
            &decided[r.type_index].objects[r.object_index],
        );
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
                let at = Target::Object(r.object_index);
                for j in jobs.iter_mut() {
                    if j.type_index == r.type_index && j.target == at {
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
    seen: &Observation,
    decided: &[TypeDecisions],
    rollouts: &mut [ObjectRollout],
    finished: &[Finished],
    report: &mut Report,
    events: &mut Vec<Event>,
) {
    for r in rollouts.iter_mut() {
        let t = &seen.types[r.type_index];
        let (fed, p) = (
            &t.objects[r.object_index],
            &decided[r.type_index].objects[r.object_index],
        );
        let what = describe(&t.federated.kind, fed);
        let done = finished
            .iter()
            .find(|f| f.type_index == r.type_index && f.target == Target::Object(r.object_index));
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
        ended(host, t, &p.key, r, report).await;
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
async fn ended(
    host: &Host,
    t: &ObservedType,
    key: &crate::core::describe::ObjectKey,
    r: &ObjectRollout,
    report: &mut Report,
) {
    use crate::core::propagation::status::{ReadyState, with_ready};
    let now = crate::clock::now_rfc3339();
    if r.aborted.is_some() {
        return;
    }
    let written = match (r.rolling.halt(), r.rolling.complete()) {
        (Some(halt), _) => {
            let edit = |s: &serde_json::Value| core_rollout::halted_status(s, halt, &now);
            crate::sync::live::record::write_rollout_status(host, &t.federated, key, edit).await
        }
        (None, true) => {
            let edit = |s: &serde_json::Value| with_ready(s, ReadyState::Ready, &now);
            crate::sync::live::record::write_rollout_status(host, &t.federated, key, edit).await
        }
        _ => return,
    };
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
fn written(f: &Finished, write: &[String]) -> Vec<String> {
    (f.results.iter())
        .filter(|(w, res)| res.is_ok() && write.contains(&w.decision.cluster))
        .filter(|(w, _)| matches!(w.decision.action, Action::Create(_) | Action::Update { .. }))
        .map(|(w, _)| w.decision.cluster.clone())
        .collect()
}

/// Where one object's rollout stands, as the report says it.
pub fn line(object: String, r: &ObjectRollout) -> RolloutLine {
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
pub fn plan_lines(seen: &Observation, rollouts: &[ObjectRollout], report: &mut Report) {
    for r in rollouts {
        let t = &seen.types[r.type_index];
        let what = describe(&t.federated.kind, &t.objects[r.object_index]);
        report.rollouts.push(line(what, r));
    }
}

/// How a one-shot run rolls out.
#[derive(Clone, Debug, Default)]
pub struct RolloutOptions {
    /// Roll out wave by wave (the one-shot run; the watch does not yet).
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
