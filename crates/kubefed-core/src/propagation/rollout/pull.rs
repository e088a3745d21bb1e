//! Progressive rollouts over pull members (`cluster::pull`, issue #68).
//! The host's runs keep the rollout as they do for push members: the
//! planner, the approvals and the record are theirs alone. A pull member
//! takes part through its agent's reports: a report current for the
//! target is the write confirmed, and its readiness gates the next wave
//! ([`pulled_copy`]). The record is the admission: the agent applies the
//! target to its member only once the record names it ([`admission`]),
//! and otherwise leaves its copy as it is ([`hold`]), as the host's gate
//! leaves a push member that is not in the current wave.

use serde_json::Value;

use super::gate::{record_text, rolled_out, target_of};
use super::ledger::RolloutRecord;
use super::rules::policy_of;
use crate::propagation::action::Action;
use crate::propagation::decide::ObjectPlan;
use crate::propagation::readiness::Readiness;
use crate::propagation::report::PullState;

/// What a pull member's agent does with an object this round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Apply what the object asks for, as without a rollout.
    Apply,
    /// Apply it, and report the copy's readiness: the host's rollout
    /// gates its next wave on it.
    ApplyReporting,
    /// Leave the member's copy as it is, why (a line of the agent's log).
    Hold(String),
}

/// Whether the agent of `cluster` may apply `fed` as it is now, by the
/// host's (Cluster)PropagatedVersion `pv` (its status and the record in
/// its annotation): with no policy and no record, yes; with a record of
/// this version, only once it names `cluster`; with a policy and no record
/// of this version, only once the host recorded the version rolled out.
/// An object being deleted goes on as decided.
pub fn admission(fed: &Value, pv: Option<&Value>, cluster: &str) -> Admission {
    if fed.pointer("/metadata/deletionTimestamp").is_some() {
        return Admission::Apply;
    }
    let policy = match policy_of(fed, None) {
        Ok(p) => p.is_some(),
        Err(why) => return Admission::Hold(format!("{why}; its rollout waits for a fix")),
    };
    let Some(target) = target_of(fed) else {
        return Admission::Apply;
    };
    match pv.and_then(record_text).map(RolloutRecord::parse) {
        Some(Err(why)) => Admission::Hold(format!(
            "{why}; the host's next run starts its rollout over"
        )),
        Some(Ok(r)) if r.target != target => {
            Admission::Hold("the host has not started the rollout of this version yet".into())
        }
        Some(Ok(r)) if r.aborted.is_some() => {
            Admission::Hold("its rollout was aborted (--rollout-abort --previous)".into())
        }
        Some(Ok(r)) if r.members.contains_key(cluster) => Admission::ApplyReporting,
        Some(Ok(_)) => Admission::Hold(format!("waiting for {cluster}'s wave")),
        None if policy && !rolled_out(pv, &target) => {
            Admission::Hold("the host has not started the rollout of this version yet".into())
        }
        None if policy => Admission::ApplyReporting,
        None => Admission::Apply,
    }
}

/// Holds `cluster`'s copy of an object as it is: its create or update
/// becomes no request, and no report is written (the one the host has
/// still says what the member holds). Removals go on: a member the
/// object no longer selects is not part of its rollout. Returns whether
/// anything was held.
pub fn hold(plan: &mut ObjectPlan, cluster: &str) -> bool {
    let mut held = false;
    for d in plan.decisions.iter_mut().filter(|d| d.cluster == cluster) {
        if matches!(d.action, Action::Create(_) | Action::Update { .. }) {
            d.action = Action::Unchanged;
            held = true;
        }
    }
    if held {
        plan.record = false;
    }
    held
}

/// A pull member's copy of `fed` as its agent reports it, for the host's
/// rollout: its readiness and member version when the report is of `fed`
/// as it is now (the target applied); `None` otherwise (not applied yet,
/// a silent agent: not observed).
pub fn pulled_copy(state: &PullState, fed: &Value) -> Option<(Readiness, String)> {
    let PullState::Reported(r) = state else {
        return None;
    };
    if r.removed || !r.is_current_for(fed) {
        return None;
    }
    let readiness = r.readiness.clone().unwrap_or_else(|| {
        Readiness::Pending("its agent reports no readiness (an older agent)".into())
    });
    Some((readiness, r.version.clone()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::describe::ObjectKey;
    use crate::propagation::action::ClusterStatus;
    use crate::propagation::report::Report;
    use crate::propagation::rollout::ledger::ROLLOUT_STATUS_ANNOTATION;
    use crate::propagation::rollout::policy::ROLLOUT_ANNOTATION;
    use crate::propagation::rollout::tests::object_plan;
    use crate::propagation::version::{overrides_version, template_version};
    use serde_json::json;

    fn fed(data: &str, policy: bool) -> Value {
        let mut f = json!({"kind": "FederatedConfigMap",
               "metadata": {"name": "web", "namespace": "shop", "uid": "u1"},
               "spec": {"template": {"data": {"k": data}},
                        "placement": {"clusters": [{"name": "m1"}, {"name": "edge"}]}}});
        if policy {
            f["metadata"]["annotations"] =
                json!({ROLLOUT_ANNOTATION: r#"{"waves": [{"clusters": ["m1"]}]}"#});
        }
        f
    }

    /// A PropagatedVersion recording `recorded`'s hashes and, when given,
    /// a rollout record of `rolling` admitting `members`.
    fn pv(recorded: &Value, rolling: Option<(&Value, &[&str])>) -> Value {
        let mut pv = json!({"metadata": {"name": "configmap-web"}, "status": {
            "templateVersion": template_version(recorded).unwrap(),
            "overridesVersion": overrides_version(recorded).unwrap()}});
        if let Some((target, members)) = rolling {
            let mut record = RolloutRecord::resume(None, &target_of(target).unwrap());
            for m in members {
                record.writing(m, 100);
            }
            pv["metadata"]["annotations"] =
                json!({ROLLOUT_STATUS_ANNOTATION: record.to_annotation()});
        }
        pv
    }

    #[test]
    fn without_a_policy_or_a_record_the_agent_applies() {
        let f = fed("v2", false);
        assert_eq!(admission(&f, None, "edge"), Admission::Apply);
        assert_eq!(
            admission(&f, Some(&pv(&fed("v1", false), None)), "edge"),
            Admission::Apply
        );
    }

    #[test]
    fn a_new_version_under_a_policy_waits_for_the_host_to_admit_the_member() {
        let (old, new) = (fed("v1", true), fed("v2", true));
        let hold = |a: Admission| matches!(a, Admission::Hold(_));
        assert!(hold(admission(&new, None, "edge")), "no record yet");
        assert!(hold(admission(&new, Some(&pv(&old, None)), "edge")));
        let first_wave = pv(&old, Some((&new, &["m1"])));
        assert_eq!(
            admission(&new, Some(&first_wave), "edge"),
            Admission::Hold("waiting for edge's wave".into())
        );
        let second_wave = pv(&old, Some((&new, &["m1", "edge"])));
        assert_eq!(
            admission(&new, Some(&second_wave), "edge"),
            Admission::ApplyReporting
        );
        let newer = fed("v3", true);
        assert!(
            hold(admission(&newer, Some(&second_wave), "edge")),
            "a record of an earlier version admits nothing of this one"
        );
        assert_eq!(
            admission(&new, Some(&pv(&new, None)), "edge"),
            Admission::ApplyReporting,
            "rolled out"
        );
    }

    #[test]
    fn an_aborted_or_unreadable_record_or_policy_holds_and_a_deletion_goes_on() {
        let (old, new) = (fed("v1", true), fed("v2", true));
        let mut aborted = pv(&old, Some((&new, &["edge"])));
        let text = aborted["metadata"]["annotations"][ROLLOUT_STATUS_ANNOTATION]
            .as_str()
            .unwrap();
        let mut record = RolloutRecord::parse(text).unwrap();
        record.abort(&target_of(&old).unwrap(), 200);
        aborted["metadata"]["annotations"][ROLLOUT_STATUS_ANNOTATION] =
            json!(record.to_annotation());
        assert!(matches!(
            admission(&new, Some(&aborted), "edge"),
            Admission::Hold(why) if why.contains("aborted")
        ));
        let mut garbled = pv(&old, None);
        garbled["metadata"]["annotations"] = json!({ROLLOUT_STATUS_ANNOTATION: "{"});
        assert!(matches!(
            admission(&new, Some(&garbled), "edge"),
            Admission::Hold(why) if why.contains("starts its rollout over")
        ));
        let mut bad = new.clone();
        bad["metadata"]["annotations"][ROLLOUT_ANNOTATION] = json!("{");
        assert!(matches!(
            admission(&bad, None, "edge"),
            Admission::Hold(why) if why.contains(ROLLOUT_ANNOTATION)
        ));
        let mut deleted = new.clone();
        deleted["metadata"]["deletionTimestamp"] = json!("2026-12-06T10:00:00Z");
        assert_eq!(admission(&deleted, None, "edge"), Admission::Apply);
    }

    #[test]
    fn a_held_member_gets_no_request_and_no_report_but_removals_go_on() {
        let mut p = object_plan(&["edge", "m1"]);
        assert!(hold(&mut p, "edge"));
        assert_eq!(p.decisions[0].action, Action::Unchanged);
        assert!(
            matches!(p.decisions[1].action, Action::Update { .. }),
            "another member's decision is not the agent's"
        );
        assert!(!p.record, "no report");
        let mut removal = object_plan(&[]);
        removal
            .decisions
            .push(crate::propagation::action::Decision {
                cluster: "edge".into(),
                action: Action::Delete { options: None },
                status: None,
                message: None,
            });
        assert!(!hold(&mut removal, "edge"));
        assert!(matches!(removal.decisions[0].action, Action::Delete { .. }));
        assert!(removal.record);
    }

    #[test]
    fn a_current_report_is_the_copy_the_host_gates_on() {
        let f = fed("v2", true);
        let report = |of: &Value, readiness: Option<Readiness>| Report {
            cluster: "edge".into(),
            type_name: "configmaps".into(),
            key: ObjectKey::new("shop", "web"),
            uid: "u1".into(),
            template_version: template_version(of).unwrap(),
            overrides_version: overrides_version(of).unwrap(),
            status: ClusterStatus::Ok,
            version: Some("rv:9".into()),
            removed: false,
            readiness,
            reported_at: String::new(),
        };
        let state = |r: Report| PullState::Reported(Box::new(r));
        assert_eq!(
            pulled_copy(&state(report(&f, Some(Readiness::Ready))), &f),
            Some((Readiness::Ready, "rv:9".to_string()))
        );
        assert_eq!(
            pulled_copy(&state(report(&fed("v1", true), Some(Readiness::Ready))), &f),
            None,
            "the previous version"
        );
        assert!(matches!(
            pulled_copy(&state(report(&f, None)), &f),
            Some((Readiness::Pending(_), _))
        ));
        assert_eq!(pulled_copy(&PullState::Silent, &f), None);
        assert_eq!(pulled_copy(&PullState::NotReported, &f), None);
    }
}
