//! A round's use of the planner for one federated object (the one-shot
//! run's steps 1–4 of [`super`]): the record resumed, each placed member
//! observed, the plan, the writes begun in the record, and the decide
//! step's decisions gated so that only the planned members get the target.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::ledger::{ROLLOUT_STATUS_ANNOTATION, RolloutRecord, Target};
use super::plan::{Halt, MemberState, RolloutInput, RolloutPlan, RolloutState, plan};
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
    /// (`gen:`/`rv:`), when it holds one.
    pub copy: Option<(Readiness, String)>,
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
        now,
    });
    for m in &plan.write {
        record.writing(m, now);
    }
    if let Some(step) = plan.step {
        record.step = step;
    }
    Rolling {
        record,
        recorded,
        plan,
        unreadable,
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
                .propagated_versions(plan.pv_status.as_ref(), &plan.selected, false)
        })
    }

    /// After the member writes: the versions of the members that got the
    /// target (`written`: member, its new version).
    pub fn wrote<'a>(&mut self, written: impl IntoIterator<Item = (&'a str, &'a str)>) {
        for (member, version) in written {
            if self.record.members.contains_key(member) {
                self.record.wrote(member, version);
            }
        }
    }

    /// The decide step's decisions gated: a member the plan writes keeps
    /// its decision (one whose copy is already as wanted, decided
    /// unchanged, is recorded as written: no request would record it); a
    /// member on the target whose copy is still the one recorded is
    /// unchanged (its version recorded as such); every other placed
    /// member keeps the version it holds (no request). Removals and
    /// members outside the placement go on as decided.
    pub fn gate(&mut self, plan: &mut ObjectPlan, members: &[MemberCopy]) {
        let live: BTreeMap<&str, &str> = members
            .iter()
            .filter_map(|m| Some((m.name.as_str(), m.copy.as_ref()?.1.as_str())))
            .collect();
        let write: BTreeSet<&str> = self.plan.write.iter().map(String::as_str).collect();
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
                // On the target, changed since: written the target again.
                Some(_) => {}
                None => d.action = Action::Unchanged,
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
    use crate::propagation::action::Decision;
    use crate::propagation::rollout::plan::Step;

    fn policy() -> RolloutPolicy {
        RolloutPolicy::parse(r#"{"waves": [{"clusters": ["m1"]}], "minSuccessTime": "10s"}"#)
            .unwrap()
    }

    fn copy(name: &str, c: Option<(Readiness, &str)>) -> MemberCopy {
        MemberCopy {
            name: name.into(),
            labels: BTreeMap::new(),
            copy: c.map(|(r, v)| (r, v.to_string())),
        }
    }

    fn target(t: &str) -> Target {
        Target {
            template_version: t.into(),
            overrides_version: "o".into(),
        }
    }

    fn object_plan(clusters: &[&str]) -> ObjectPlan {
        let decisions = clusters
            .iter()
            .map(|c| Decision {
                cluster: c.to_string(),
                action: Action::Update {
                    object: json!({}),
                    adopt: false,
                },
                status: Some(ClusterStatus::Ok),
                message: None,
            })
            .collect();
        ObjectPlan {
            key: crate::describe::ObjectKey::new("ns", "x"),
            decisions,
            reason: crate::propagation::status::AggregateReason::Success,
            selected: clusters.iter().map(|c| c.to_string()).collect(),
            deletion: None,
            pv_name: "configmap-x".into(),
            pv_status: Some(json!({"templateVersion": "old", "overridesVersion": "o",
                "clusterVersions": [{"clusterName": "m1", "version": "rv:1"},
                                    {"clusterName": "m2", "version": "rv:2"}]})),
            unchanged_versions: BTreeMap::new(),
            finalizer: crate::propagation::decide::FinalizerStep::Keep,
            record: true,
            placement_error: None,
            failures: Vec::new(),
            notes: Vec::new(),
            warnings: Vec::new(),
        }
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

    #[test]
    fn an_unreadable_record_starts_over() {
        let pv = json!({"metadata": {"annotations": {ROLLOUT_STATUS_ANNOTATION: "{"}}});
        let r = start(&policy(), &target("a"), Some(&pv), &[copy("m1", None)], 0);
        assert!(r.unreadable.is_some());
        assert_eq!(r.plan.write, ["m1"]);
    }
}
