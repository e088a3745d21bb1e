//! A round's use of the planner for one federated object (the one-shot
//! run's steps 1–4 of [`super`]): the record resumed, each placed member
//! observed, the plan, the writes begun in the record, and the decide
//! step's decisions gated so that only the planned members get the target.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::approval::{APPROVALS_ANNOTATION, approved_waves, parse_approvals};
use super::ledger::{ROLLOUT_STATUS_ANNOTATION, Rollback, RolloutRecord, Target};
use super::plan::{
    Aborted, AwaitingApproval, Halt, MemberState, RolloutInput, RolloutPlan, RolloutState,
    assign_waves, plan,
};
use super::policy::RolloutPolicy;
use crate::propagation::action::{Action, ClusterStatus};
use crate::propagation::decide::ObjectPlan;
use crate::propagation::readiness::Readiness;
use crate::propagation::version::{overrides_version, template_version};

/// A placed member as a round observed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberCopy {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// Its copy's readiness (the `--wait-ready` rules) and member version
    /// (`gen:`/`rv:`), when it holds one; a pull member's as its agent
    /// reports it, only once it applied the target (`pull::pulled_copy`).
    pub copy: Option<(Readiness, String)>,
    /// A pull member: no run writes it, its agent does once the record
    /// admits it, and its copy of the target confirms the write.
    pub pulled: bool,
}

/// One object's rollout in this round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rolling {
    /// The record to keep: the planned writes begun (`writing`), the step.
    pub record: RolloutRecord,
    /// The annotation as it was read (`None`: none); written again only
    /// when the record says something else.
    pub recorded: Option<String>,
    pub plan: RolloutPlan,
    /// The record in the annotation could not be read: why (started over).
    pub unreadable: Option<String>,
    /// `--rollout-abort --previous FILE`: members back on the previous
    /// version in this round, with their member versions.
    pub back: BTreeMap<String, String>,
    /// The wave the record as read said the rollout awaits an approval
    /// for (an Event says it once, when it is news).
    pub awaited_before: Option<usize>,
    /// The approvals' annotation could not be read: why (none counts).
    pub unreadable_approvals: Option<String>,
}

/// The version `fed` asks for; `None` when its hashes cannot be computed
/// (decide reports that; nothing is rolled out).
pub fn target_of(fed: &Value) -> Option<Target> {
    Some(Target {
        template_version: template_version(fed).ok()?,
        overrides_version: overrides_version(fed).ok()?,
    })
}

/// Whether the (Cluster)PropagatedVersion `pv` records `target` with no
/// rollout in progress: the change is rolled out, written as without a
/// policy.
pub fn rolled_out(pv: Option<&Value>, target: &Target) -> bool {
    let Some(pv) = pv else { return false };
    Target::of_status(&pv["status"]).as_ref() == Some(target) && record_text(pv).is_none()
}

/// The rollout record's annotation on a (Cluster)PropagatedVersion.
pub fn record_text(pv: &Value) -> Option<&str> {
    pv["metadata"]["annotations"][ROLLOUT_STATUS_ANNOTATION].as_str()
}

/// The approvals' annotation on a (Cluster)PropagatedVersion.
pub fn approvals_of(pv: &Value) -> Option<&str> {
    pv["metadata"]["annotations"][APPROVALS_ANNOTATION].as_str()
}

/// Steps 1–3 and the first half of 4: the record for `target` resumed
/// from `pv`'s annotation, each member observed at `now`, the plan, and
/// the planned writes begun in the record (record it before writing).
pub fn start(
    policy: &RolloutPolicy,
    target: &Target,
    pv: Option<&Value>,
    members: &[MemberCopy],
    now: i64,
) -> Rolling {
    let recorded = pv.and_then(record_text).map(str::to_string);
    let (existing, unreadable) = match recorded.as_deref().map(RolloutRecord::parse) {
        Some(Ok(r)) => (Some(r), None),
        Some(Err(why)) => (None, Some(why)),
        None => (None, None),
    };
    let mut record = RolloutRecord::resume(existing, target);
    if record.aborted.is_some() {
        return aborted(policy, record, recorded, members);
    }
    let awaited_before = record.awaiting_approval;
    let (approvals, unreadable_approvals) = match pv.and_then(approvals_of).map(parse_approvals) {
        Some(Ok(list)) => (list, None),
        Some(Err(why)) => (Vec::new(), Some(why)),
        None => (Vec::new(), None),
    };
    let approved = approved_waves(&approvals, target);
    confirm_pulled(&mut record, members);
    let states: Vec<MemberState> = members
        .iter()
        .map(|m| {
            let readiness = m.copy.as_ref().map(|(r, _)| r);
            record.observe(&m.name, &m.labels, readiness, now)
        })
        .collect();
    let plan = plan(RolloutInput {
        policy,
        members: &states,
        from: record.step,
        approved: &approved,
        now,
    });
    for m in &plan.write {
        record.writing(m, now);
    }
    if let Some(step) = plan.step {
        record.step = step;
    }
    record.awaiting_approval = match &plan.state {
        RolloutState::AwaitingApproval(a) => Some(a.wave()),
        _ => None,
    };
    Rolling {
        record,
        recorded,
        plan,
        unreadable,
        back: BTreeMap::new(),
        awaited_before,
        unreadable_approvals,
    }
}

/// A pull member the record admitted whose agent reports the target
/// applied: its write is confirmed with the version it reports, as a push
/// member's is after the run's own write (`Rolling::wrote`).
fn confirm_pulled(record: &mut RolloutRecord, members: &[MemberCopy]) {
    for m in members.iter().filter(|m| m.pulled) {
        let Some((_, version)) = &m.copy else {
            continue;
        };
        let recorded = record.members.get(&m.name).map(|r| r.version.as_deref());
        if matches!(recorded, Some(v) if v != Some(version.as_str())) {
            record.wrote(&m.name, version);
        }
    }
}

/// A run of an aborted target: nothing is written, nothing recorded.
fn aborted(
    policy: &RolloutPolicy,
    record: RolloutRecord,
    recorded: Option<String>,
    members: &[MemberCopy],
) -> Rolling {
    let waves = assign_waves(policy, members.iter().map(|m| (m.name.as_str(), &m.labels)));
    let plan = RolloutPlan {
        waves,
        step: Some(record.step),
        write: Vec::new(),
        keep: members.iter().map(|m| m.name.clone()).collect(),
        state: RolloutState::Aborted(Aborted {
            at: record.aborted.as_ref().map_or(0, |a| a.at),
            left: record.members.keys().cloned().collect(),
        }),
    };
    Rolling {
        record,
        recorded,
        plan,
        unreadable: None,
        back: BTreeMap::new(),
        awaited_before: None,
        unreadable_approvals: None,
    }
}

/// `--rollout-abort --previous FILE` of one object, once [`abort`]
/// allowed it: `plan` is the decide step's for the previous version (its
/// template, placement and overrides), which the members that got the
/// target go back to while the host's object keeps asking for the target.
/// The record stays, marked aborted, so that runs of the target write
/// nothing. A member of the record the previous version does not place,
/// or whose copy is already the previous one, is out of it at once.
///
/// [`abort`]: super::ledger::abort
pub fn abort_to_previous(
    mut record: RolloutRecord,
    recorded: Option<String>,
    rollback: &Rollback,
    plan: &ObjectPlan,
    now: i64,
) -> Rolling {
    record.abort(&rollback.to, now);
    let mut back = BTreeMap::new();
    for d in &plan.decisions {
        if d.action == Action::Unchanged
            && let Some(v) = plan.unchanged_versions.get(&d.cluster)
            && record.members.remove(&d.cluster).is_some()
        {
            back.insert(d.cluster.clone(), v.clone());
        }
    }
    record.members.retain(|m, _| plan.selected.contains(m));
    let state = RolloutState::Aborted(Aborted {
        at: record.aborted.as_ref().map_or(now, |a| a.at),
        left: record.members.keys().cloned().collect(),
    });
    Rolling {
        plan: RolloutPlan::without_waves(state),
        record,
        recorded,
        unreadable: None,
        back,
        awaited_before: None,
        unreadable_approvals: None,
    }
}

/// `--rollout-abort` with `-f`, once [`abort`] allowed it: the host's
/// object asks for the previous version again, so its decisions stand as
/// decided, all at once, and the rollout is over (its record goes after
/// the write-back).
///
/// [`abort`]: super::ledger::abort
pub fn abort_at_once(record: RolloutRecord, recorded: Option<String>) -> Rolling {
    Rolling {
        record,
        recorded,
        plan: RolloutPlan::without_waves(RolloutState::Complete),
        unreadable: None,
        back: BTreeMap::new(),
        awaited_before: None,
        unreadable_approvals: None,
    }
}

impl Rolling {
    /// Whether the rollout is complete: the PropagatedVersion is written
    /// as without a policy, and the record goes.
    pub fn complete(&self) -> bool {
        self.plan.state == RolloutState::Complete
    }

    pub fn halt(&self) -> Option<&Halt> {
        match &self.plan.state {
            RolloutState::Halted(h) => Some(h),
            _ => None,
        }
    }

    /// The approval the rollout stopped for, when the record as read did
    /// not say so already (news: an Event says it once per wave).
    pub fn newly_awaiting(&self) -> Option<&AwaitingApproval> {
        match &self.plan.state {
            RolloutState::AwaitingApproval(a) if self.awaited_before != Some(a.wave()) => Some(a),
            _ => None,
        }
    }

    /// Whether its target was aborted (`--rollout-abort --previous FILE`).
    pub fn aborted(&self) -> bool {
        self.record.aborted.is_some()
    }

    /// The annotation to write now: `Some(None)` removes it, `None`: as it is.
    pub fn annotation(&self) -> Option<Option<String>> {
        let want = (!self.complete()).then(|| self.record.to_annotation());
        (want != self.recorded).then_some(want)
    }

    /// The PropagatedVersion `status` mid-rollout (`None` once complete:
    /// the record step writes it as without a policy).
    pub fn versions(&self, plan: &ObjectPlan) -> Option<Value> {
        (!self.complete()).then(|| {
            self.record
                .versions_with(plan.pv_status.as_ref(), &plan.selected, &self.back)
        })
    }

    /// The PropagatedVersion `status` after the member writes: members
    /// sent back to the previous version with their versions (`None`
    /// when none was: as recorded before the writes).
    pub fn versions_after(&self, plan: &ObjectPlan) -> Option<Value> {
        (!self.back.is_empty())
            .then(|| self.versions(plan))
            .flatten()
    }

    /// After the member writes: the versions of the members that got the
    /// target (`written`: member, its new version); once aborted, of the
    /// members sent back to the previous version, out of the record.
    pub fn wrote<'a>(&mut self, written: impl IntoIterator<Item = (&'a str, &'a str)>) {
        let aborted = self.aborted();
        for (member, version) in written {
            if !self.record.members.contains_key(member) {
                continue;
            }
            match aborted {
                true => {
                    self.record.members.remove(member);
                    self.back.insert(member.to_string(), version.to_string());
                }
                false => self.record.wrote(member, version),
            }
        }
        if let RolloutState::Aborted(a) = &mut self.plan.state {
            a.left = self.record.members.keys().cloned().collect();
        }
    }

    /// The decide step's decisions gated: a member the plan writes keeps
    /// its decision (one whose copy is already as wanted, decided
    /// unchanged, is recorded as written: no request would record it); a
    /// member on the target whose copy is still the one recorded is
    /// unchanged (its version recorded as such); every other placed
    /// member keeps the version it holds (no request), and once aborted
    /// every placed member does. Removals and members outside the
    /// placement go on as decided.
    pub fn gate(&mut self, plan: &mut ObjectPlan, members: &[MemberCopy]) {
        let live: BTreeMap<&str, &str> = members
            .iter()
            .filter_map(|m| Some((m.name.as_str(), m.copy.as_ref()?.1.as_str())))
            .collect();
        let write: BTreeSet<&str> = self.plan.write.iter().map(String::as_str).collect();
        let aborted = self.aborted();
        for d in &plan.decisions {
            if d.action == Action::Unchanged && write.contains(d.cluster.as_str()) {
                let version = plan.unchanged_versions.get(&d.cluster).map(String::as_str);
                if let Some(v) = version.or_else(|| live.get(d.cluster.as_str()).copied()) {
                    self.record.wrote(&d.cluster, v);
                }
            }
        }
        // A halt's failed members say so in the status the round writes
        // (not only in the one written after it: `halted_status`), so a
        // round deciding a halted object again writes nothing.
        let failed: BTreeSet<&str> = (self.halt().into_iter())
            .flat_map(|h| h.failures.iter().map(|f| f.member.as_str()))
            .collect();
        for d in &mut plan.decisions {
            if failed.contains(d.cluster.as_str()) && d.status == Some(ClusterStatus::Ok) {
                d.status = Some(ClusterStatus::RolloutHalted);
            }
        }
        for d in &mut plan.decisions {
            let placing = matches!(d.action, Action::Create(_) | Action::Update { .. });
            if !placing || !plan.selected.contains(&d.cluster) || write.contains(d.cluster.as_str())
            {
                continue;
            }
            let recorded = self.record.members.get(&d.cluster);
            match recorded.and_then(|m| m.version.as_deref()) {
                Some(v) if live.get(d.cluster.as_str()) == Some(&v) => {
                    plan.unchanged_versions
                        .insert(d.cluster.clone(), v.to_string());
                    d.action = Action::Unchanged;
                }
                // On the target, changed since: written the target again
                // (not once aborted).
                Some(_) if !aborted => {}
                _ => d.action = Action::Unchanged,
            }
        }
    }
}

/// The federated object's `status` with its `Ready` condition `False`,
/// reason `RolloutHalted`, and each failed member's entry of
/// `status.clusters` saying `RolloutHalted`; `None` when it says so already.
pub fn halted_status(status: &Value, halt: &Halt, now: &str) -> Option<Value> {
    let mut status = match status {
        Value::Object(_) => status.clone(),
        _ => json!({}),
    };
    let mut changed = false;
    let failed: BTreeSet<&str> = halt.failures.iter().map(|f| f.member.as_str()).collect();
    if let Some(clusters) = status.get_mut("clusters").and_then(Value::as_array_mut) {
        for c in clusters.iter_mut() {
            let name = c["name"].as_str().unwrap_or_default();
            if failed.contains(name) && c["status"] != "RolloutHalted" {
                c["status"] = json!("RolloutHalted");
                changed = true;
            }
        }
    }
    let conditions = status
        .as_object_mut()
        .expect("an object")
        .entry("conditions")
        .or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let list = conditions.as_array_mut().expect("an array");
    let ready = json!({"type": "Ready", "status": "False", "reason": "RolloutHalted",
        "lastUpdateTime": now, "lastTransitionTime": now});
    match list.iter_mut().find(|c| c["type"] == "Ready") {
        Some(c) if c["status"] == "False" && c["reason"] == "RolloutHalted" => {}
        Some(c) => {
            *c = ready;
            changed = true;
        }
        None => {
            list.push(ready);
            changed = true;
        }
    }
    changed.then_some(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::propagation::rollout::plan::Step;
    use crate::propagation::rollout::tests::{copy, object_plan, target};

    fn policy() -> RolloutPolicy {
        RolloutPolicy::parse(r#"{"waves": [{"clusters": ["m1"]}], "minSuccessTime": "10s"}"#)
            .unwrap()
    }

    #[test]
    fn the_canary_first_then_the_rest_after_its_soak() {
        let members = [
            copy("m1", Some((Readiness::Ready, "rv:1"))),
            copy("m2", Some((Readiness::Ready, "rv:2"))),
        ];
        let mut r = start(&policy(), &target("new"), None, &members, 100);
        assert_eq!(r.plan.write, ["m1"]);
        assert!(r.record.members["m1"].version.is_none());
        let mut p = object_plan(&["m1", "m2"]);
        r.gate(&mut p, &members);
        assert!(matches!(p.decisions[0].action, Action::Update { .. }));
        assert_eq!(p.decisions[1].action, Action::Unchanged);
        // Mid-rollout the PropagatedVersion keeps the old hashes and m2 alone.
        let v = r.versions(&p).unwrap();
        assert_eq!(v["templateVersion"], "old");
        assert_eq!(
            v["clusterVersions"],
            json!([{"clusterName": "m2", "version": "rv:2"}])
        );

        // Written, recorded; the next round sees it ready and soaking.
        r.wrote([("m1", "rv:10")]);
        let pv = json!({"metadata": {"annotations": {ROLLOUT_STATUS_ANNOTATION: r.record.to_annotation()}},
                        "status": v});
        let members = [
            copy("m1", Some((Readiness::Ready, "rv:10"))),
            copy("m2", Some((Readiness::Ready, "rv:2"))),
        ];
        let mut r2 = start(&policy(), &target("new"), Some(&pv), &members, 105);
        assert!(r2.plan.write.is_empty());
        let mut p = object_plan(&["m1", "m2"]);
        r2.gate(&mut p, &members);
        assert_eq!(p.decisions[0].action, Action::Unchanged);
        assert_eq!(p.unchanged_versions["m1"], "rv:10");
        assert_eq!(p.decisions[1].action, Action::Unchanged);
        assert!(r2.annotation().is_some(), "ready since 105 is recorded");
        let pv = json!({"metadata": {"annotations": {ROLLOUT_STATUS_ANNOTATION: r2.record.to_annotation()}},
                        "status": v});
        let r3 = start(&policy(), &target("new"), Some(&pv), &members, 116);
        assert_eq!(r3.plan.write, ["m2"]);
        assert_eq!(r3.record.step, Step { wave: 1, batch: 0 });
        assert!(!rolled_out(Some(&pv), &target("new")));
    }

    #[test]
    fn a_pull_member_is_admitted_confirmed_by_its_report_and_gated_on_its_readiness() {
        let m1 = copy("m1", Some((Readiness::Ready, "rv:10")));
        // The next round at `now`, resumed from `r`'s record, with edge's
        // copy as its agent reports it.
        let next = |r: &Rolling, edge: Option<(Readiness, &str)>, now| {
            let pv = json!({"metadata": {"annotations": {ROLLOUT_STATUS_ANNOTATION: r.record.to_annotation()}}});
            let edge = MemberCopy {
                pulled: true,
                ..copy("edge", edge)
            };
            start(
                &policy(),
                &target("new"),
                Some(&pv),
                &[m1.clone(), edge],
                now,
            )
        };
        let first = MemberCopy {
            pulled: true,
            ..copy("edge", None)
        };
        let mut r = start(&policy(), &target("new"), None, &[m1.clone(), first], 100);
        assert_eq!(r.plan.write, ["m1"]);
        assert!(!r.record.members.contains_key("edge"), "not admitted yet");
        r.wrote([("m1", "rv:10")]);
        let r = next(&r, None, 101);
        let r = next(&r, None, 112);
        assert_eq!(r.plan.write, ["edge"], "admitted once the canary soaked");
        let detail = super::super::rules::stand_over(&r.plan, None, &["edge".into()]).detail;
        assert!(
            detail.ends_with(": admitted edge (its agent applies)"),
            "{detail}"
        );
        assert_eq!(r.record.members["edge"].version, None);
        // Its agent applied the target: the report confirms the write.
        let pending = Readiness::Pending("0/1 available".into());
        let r = next(&r, Some((pending, "rv:9")), 113);
        assert_eq!(r.record.members["edge"].version.as_deref(), Some("rv:9"));
        assert!(r.plan.write.is_empty(), "confirmed: not written again");
        assert!(!r.complete());
        let r = next(&r, Some((Readiness::Ready, "rv:9")), 114);
        assert!(!r.complete(), "soaking");
        let r = next(&r, Some((Readiness::Ready, "rv:9")), 125);
        assert!(r.complete());
    }

    #[test]
    fn a_new_template_starts_over_and_a_halt_names_the_member() {
        let p =
            RolloutPolicy::parse(r#"{"waves": [{"clusters": ["m1"]}], "progressDeadline": "5s"}"#)
                .unwrap();
        let members = [copy("m1", None), copy("m2", None)];
        let mut r = start(&p, &target("a"), None, &members, 0);
        r.wrote([("m1", "rv:3")]);
        let pv = json!({"metadata": {"annotations": {ROLLOUT_STATUS_ANNOTATION: r.record.to_annotation()}}});
        let pending = [
            copy(
                "m1",
                Some((Readiness::Pending("0/1 available".into()), "rv:3")),
            ),
            copy("m2", None),
        ];
        let halted = start(&p, &target("a"), Some(&pv), &pending, 10);
        let halt = halted.halt().expect("halted");
        assert_eq!(halt.failures[0].member, "m1");
        assert!(halted.plan.write.is_empty());
        let status = halted_status(
            &json!({"clusters": [{"name": "m1"}, {"name": "m2"}]}),
            halt,
            "t",
        )
        .unwrap();
        assert_eq!(status["clusters"][0]["status"], "RolloutHalted");
        assert!(status["clusters"][1].get("status").is_none());
        assert_eq!(status["conditions"][0]["reason"], "RolloutHalted");
        assert_eq!(halted_status(&status, halt, "t2"), None);
        // The round's own status says so too: its failed member's entry.
        let mut halted = halted;
        let mut decided = object_plan(&["m1", "m2"]);
        decided.decisions[0].action = Action::Unchanged;
        halted.gate(&mut decided, &pending);
        let statuses: Vec<_> = decided.decisions.iter().map(|d| d.status).collect();
        assert_eq!(
            statuses,
            [Some(ClusterStatus::RolloutHalted), Some(ClusterStatus::Ok)]
        );
        assert_eq!(
            decided.decisions[1].action,
            Action::Unchanged,
            "m2 keeps its own"
        );
        let again = start(&p, &target("b"), Some(&pv), &pending, 10);
        assert_eq!(again.plan.write, ["m1"]);
        assert!(again.record.members["m1"].version.is_none());
    }

    #[test]
    fn a_planned_member_already_as_wanted_is_recorded_without_a_request() {
        let members = [copy("m1", Some((Readiness::Ready, "rv:1")))];
        let mut r = start(&policy(), &target("new"), None, &members, 0);
        let mut p = object_plan(&["m1"]);
        p.decisions[0].action = Action::Unchanged;
        p.unchanged_versions.insert("m1".into(), "rv:1".into());
        r.gate(&mut p, &members);
        assert_eq!(r.record.members["m1"].version.as_deref(), Some("rv:1"));
        // The next round sees it on the target: ready, then past its soak.
        let pv = json!({"metadata": {"annotations": {ROLLOUT_STATUS_ANNOTATION: r.record.to_annotation()}}});
        let next = start(&policy(), &target("new"), Some(&pv), &members, 5);
        assert!(next.plan.write.is_empty(), "{:?}", next.plan);
    }

    /// `--rollout-abort --previous FILE`: the members that got the target
    /// go back (recorded before the writes, out of the record after), the
    /// record stays marked aborted, and runs of the target write nothing;
    /// a new template starts over.
    #[test]
    fn an_aborted_target_is_written_no_more() {
        let mut record = RolloutRecord::resume(None, &target("new"));
        record.writing("m1", 0);
        record.wrote("m1", "rv:10");
        record.writing("m2", 0);
        let old = target("old");
        let rollback = crate::propagation::rollout::abort(Some(&record), Some(&old), Some(&old))
            .expect("the previous version is known");
        assert_eq!(rollback.members, ["m1", "m2"]);
        // The previous version decided: m1 goes back, m2's write never
        // happened (its copy is the previous one), m3 never got the target.
        let mut previous = object_plan(&["m1", "m2", "m3"]);
        for d in &mut previous.decisions[1..] {
            d.action = Action::Unchanged;
        }
        previous.unchanged_versions = BTreeMap::from([
            ("m2".to_string(), "rv:2".to_string()),
            ("m3".to_string(), "rv:3".to_string()),
        ]);
        previous.pv_status = Some(json!({"templateVersion": "old", "overridesVersion": "o",
            "clusterVersions": [{"clusterName": "m3", "version": "rv:3"}]}));
        let mut r = abort_to_previous(record, Some("as read".into()), &rollback, &previous, 50);
        assert!(r.aborted() && !r.complete() && r.halt().is_none());
        assert_eq!(r.record.members.keys().collect::<Vec<_>>(), ["m1"]);
        let before = r.versions(&previous).unwrap();
        assert_eq!(before["templateVersion"], "old");
        assert_eq!(
            before["clusterVersions"],
            json!([{"clusterName": "m2", "version": "rv:2"}, {"clusterName": "m3", "version": "rv:3"}])
        );
        let annotation = r.annotation().expect("recorded before the writes").unwrap();
        assert!(annotation.contains(r#""aborted":{"at":"#), "{annotation}");
        r.wrote([("m1", "rv:11"), ("m3", "rv:3")]);
        assert!(r.record.members.is_empty());
        let after = r.versions_after(&previous).expect("m1 went back");
        assert_eq!(
            after["clusterVersions"],
            json!([{"clusterName": "m1", "version": "rv:11"},
                   {"clusterName": "m2", "version": "rv:2"},
                   {"clusterName": "m3", "version": "rv:3"}])
        );
        let RolloutState::Aborted(a) = &r.plan.state else {
            panic!("{:?}", r.plan.state)
        };
        assert!(a.left.is_empty() && a.at == 50, "{a:?}");

        // The next run of the same target: nothing written, nothing
        // recorded, even for a member whose copy changed since.
        let pv = json!({"metadata": {"annotations": {ROLLOUT_STATUS_ANNOTATION: r.record.to_annotation()}},
                        "status": after});
        let now = [
            copy("m1", Some((Readiness::Ready, "rv:12"))),
            copy("m2", Some((Readiness::Ready, "rv:2"))),
            copy("m3", Some((Readiness::Ready, "rv:3"))),
        ];
        let mut again = start(&policy(), &target("new"), Some(&pv), &now, 100);
        assert!(again.plan.write.is_empty());
        assert!(matches!(again.plan.state, RolloutState::Aborted(_)));
        assert!(!rolled_out(Some(&pv), &target("new")));
        let mut p = object_plan(&["m1", "m2", "m3"]);
        p.pv_status = Some(pv["status"].clone());
        again.gate(&mut p, &now);
        assert!(p.decisions.iter().all(|d| d.action == Action::Unchanged));
        assert_eq!(again.annotation(), None);
        assert_eq!(again.versions(&p).as_ref(), p.pv_status.as_ref());
        assert_eq!(again.versions_after(&p), None);
        // A new template starts over from the first wave.
        let fresh = start(&policy(), &target("newer"), Some(&pv), &now, 100);
        assert_eq!(fresh.plan.write, ["m1"]);
        assert!(!fresh.aborted());
    }

    #[test]
    fn an_aborted_record_reads_back_and_older_records_still_read() {
        let mut r = RolloutRecord::resume(None, &target("new"));
        r.writing("m1", 0);
        r.abort(&target("old"), 60);
        r.abort(&target("old"), 90);
        let back = RolloutRecord::parse(&r.to_annotation()).unwrap();
        assert_eq!(back, r);
        assert_eq!(
            back.aborted.as_ref().unwrap().at,
            60,
            "the first abort's time"
        );
        assert_eq!(back.summary(), "aborted: m1 writing");
        let older = RolloutRecord::parse(r#"{"templateVersion":"t","overridesVersion":"o"}"#);
        assert_eq!(older.unwrap().aborted, None);
        let left = Aborted {
            at: 0,
            left: vec!["m1".into()],
        };
        assert!(
            left.to_string().contains("m1 still on this version"),
            "{left}"
        );
    }

    #[test]
    fn an_unreadable_record_starts_over() {
        let pv = json!({"metadata": {"annotations": {ROLLOUT_STATUS_ANNOTATION: "{"}}});
        let r = start(&policy(), &target("a"), Some(&pv), &[copy("m1", None)], 0);
        assert!(r.unreadable.is_some());
        assert_eq!(r.plan.write, ["m1"]);
    }
}
