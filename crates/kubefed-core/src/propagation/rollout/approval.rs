//! Approval gates (kubefedctl issue #67): a wave whose policy says
//! `"approval": true` is not started until someone approves it with
//! `kubefedctl rollout approve` for the version being rolled out, as
//! KubeFleet's approval tasks between the stages of an update run.
//!
//! Approvals live in an annotation of their own on the object's
//! (Cluster)PropagatedVersion, [`APPROVALS_ANNOTATION`], beside the
//! rollout's record: runs write the record whole (a merge patch of its
//! text), so an approval given while a run holds the record would be lost
//! if it were inside it; runs only read approvals (and drop them with
//! the record once the rollout is complete). Each approval names the
//! template and overrides hashes it was given for: a new version needs a
//! new approval.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::ledger::{RolloutRecord, Target, instant};
use super::policy::RolloutPolicy;

/// The annotation of the (Cluster)PropagatedVersion that holds the
/// approvals given for its object's rollouts (JSON, a list).
pub const APPROVALS_ANNOTATION: &str = "kubefedctl.kubefed.io/rollout-approvals";

/// One wave approved for one version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// The wave as messages number it (`1`: the policy's `waves[0]`).
    pub wave: usize,
    /// The version it was given for.
    #[serde(flatten)]
    pub target: Target,
    /// Who approved it: the user name the API server reported.
    pub by: String,
    /// When (RFC 3339).
    #[serde(with = "instant")]
    pub at: i64,
    /// Set when the API server could not say who asked (it serves no
    /// SelfSubjectReview, before Kubernetes 1.27): where `by` came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconfirmed: Option<String>,
}

/// Who asks for an approval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    /// `None`: the API server said so (SelfSubjectReview); else where the
    /// name came from, the server not confirming it.
    pub unconfirmed: Option<String>,
}

/// The approvals in an annotation's value.
pub fn parse_approvals(text: &str) -> Result<Vec<Approval>, String> {
    serde_json::from_str(text).map_err(|e| format!("annotation {APPROVALS_ANNOTATION}: {e}"))
}

/// The annotation's value (compact JSON).
pub fn approvals_text(list: &[Approval]) -> String {
    serde_json::to_string(list).unwrap_or_default()
}

/// The waves approved for `target`, as indexes in the policy's `waves`
/// (what the planner takes).
pub fn approved_waves(list: &[Approval], target: &Target) -> BTreeSet<usize> {
    (list.iter())
        .filter(|a| a.target == *target && a.wave > 0)
        .map(|a| a.wave - 1)
        .collect()
}

/// What `rollout approve` is given for one object.
#[derive(Clone, Copy, Debug)]
pub struct ApproveRequest<'a> {
    /// The object's own policy (its annotation); `None`: a run's
    /// `--rollout` policy applies, which only the record speaks for.
    pub policy: Option<&'a RolloutPolicy>,
    /// The rollout's record, when its PropagatedVersion holds one.
    pub record: Option<&'a RolloutRecord>,
    /// The version the object asks for now.
    pub target: &'a Target,
    /// `--wave N`; `None`: the wave the rollout awaits.
    pub wave: Option<usize>,
    /// The approvals given before.
    pub existing: &'a [Approval],
}

/// What an approval does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Approved {
    /// The approvals to record: `existing`'s of this version, and this one.
    New { wave: usize, list: Vec<Approval> },
    /// That wave of this version was approved already: nothing to write.
    Already(Approval),
}

/// Why an approval is refused (nothing is written).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ApproveError {
    #[error("no rollout in progress (its PropagatedVersion holds no record)")]
    NoRollout,
    #[error(
        "the rollout in progress is of another version ({}/{}) than the object asks for now ({}/{}); the next run starts that one over",
        .recorded.template_version, .recorded.overrides_version,
        .now.template_version, .now.overrides_version
    )]
    OtherVersion { recorded: Target, now: Target },
    #[error("its rollout was aborted (--rollout-abort --previous): change the template to go on")]
    Aborted,
    #[error(
        "its rollout awaits no approval (it is at wave {at}); give --wave N to approve a later wave"
    )]
    NotAwaiting { at: usize },
    #[error(
        "--wave {wave}: out of range: its rollout has {waves} wave(s) (annotation kubefedctl.kubefed.io/rollout: waves)"
    )]
    OutOfRange { wave: usize, waves: usize },
    #[error("--wave {wave}: that wave has no approval gate (annotation kubefedctl.kubefed.io/rollout: waves[{}].approval is not true)", .wave - 1)]
    NoGate { wave: usize },
    #[error("--wave {wave}: the object has no annotation kubefedctl.kubefed.io/rollout (a run's --rollout policy applies): only the wave its rollout awaits{} can be approved", .awaiting.map(|w| format!(" ({w})")).unwrap_or_default())]
    NotTheAwaited {
        wave: usize,
        awaiting: Option<usize>,
    },
    #[error("--wave {wave}: its rollout is past that wave (at wave {at})")]
    Passed { wave: usize, at: usize },
}

impl ApproveError {
    /// Whether `--wave` was given a value the object cannot take: a usage
    /// error (exit 2); the others are the object's (exit 3).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            ApproveError::OutOfRange { .. }
                | ApproveError::NoGate { .. }
                | ApproveError::NotTheAwaited { .. }
        )
    }
}

/// `rollout approve` of one object by `who` at `now`: the wave the record
/// awaits (or `--wave N`, which must be a gated wave of the object's
/// policy not passed yet) approved for the version in progress, which
/// must be the one the object asks for now. Approvals of other versions
/// are dropped.
pub fn approve(r: ApproveRequest, who: &Identity, now: i64) -> Result<Approved, ApproveError> {
    let record = r.record.ok_or(ApproveError::NoRollout)?;
    if record.target != *r.target {
        return Err(ApproveError::OtherVersion {
            recorded: record.target.clone(),
            now: r.target.clone(),
        });
    }
    if record.aborted.is_some() {
        return Err(ApproveError::Aborted);
    }
    let at = record.step.wave + 1;
    let wave = match (r.wave, r.policy) {
        (None, _) => record
            .awaiting_approval
            .ok_or(ApproveError::NotAwaiting { at })?,
        (Some(wave), None) if Some(wave) != record.awaiting_approval => {
            return Err(ApproveError::NotTheAwaited {
                wave,
                awaiting: record.awaiting_approval,
            });
        }
        (Some(wave), None) => wave,
        (Some(wave), Some(policy)) => {
            let waves = policy.waves.len();
            if wave == 0 || wave > waves {
                return Err(ApproveError::OutOfRange { wave, waves });
            }
            if !policy.approvals.contains(&(wave - 1)) {
                return Err(ApproveError::NoGate { wave });
            }
            wave
        }
    };
    let mut list: Vec<Approval> = (r.existing.iter())
        .filter(|a| a.target == *r.target)
        .cloned()
        .collect();
    if let Some(given) = list.iter().find(|a| a.wave == wave) {
        return Ok(Approved::Already(given.clone()));
    }
    if wave < at || (wave == at && record.awaiting_approval != Some(wave)) {
        return Err(ApproveError::Passed { wave, at });
    }
    list.push(Approval {
        wave,
        target: r.target.clone(),
        by: who.user.clone(),
        at: now,
        unconfirmed: who.unconfirmed.clone(),
    });
    list.sort_by_key(|a| a.wave);
    Ok(Approved::New { wave, list })
}

impl std::fmt::Display for Approval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "wave {} approved by {} at {}",
            self.wave,
            self.by,
            crate::time::rfc3339(self.at)
        )?;
        if let Some(from) = &self.unconfirmed {
            write!(f, " (not confirmed by the API server: {from})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::propagation::action::Action;
    use crate::propagation::readiness::Readiness;
    use crate::propagation::rollout::gate::start;
    use crate::propagation::rollout::ledger::ROLLOUT_STATUS_ANNOTATION;
    use crate::propagation::rollout::plan::{RolloutState, Step};
    use crate::propagation::rollout::rules::{RolloutStand, stand};
    use crate::propagation::rollout::tests::{copy, object_plan, target};
    use crate::propagation::rollout::{PolicyError, waves_text};

    /// The canary, then `m2` behind an approval, then `m3` behind another.
    const GATED: &str = r#"{"waves": [{"clusters": ["m1"]},
        {"clusters": ["m2"], "approval": true}, {"clusters": ["m3"], "approval": true}]}"#;

    fn gated() -> RolloutPolicy {
        RolloutPolicy::parse(GATED).unwrap()
    }

    fn alice() -> Identity {
        Identity {
            user: "alice".into(),
            unconfirmed: None,
        }
    }

    fn approval(wave: usize, t: &str) -> Approval {
        Approval {
            wave,
            target: target(t),
            by: "bob".into(),
            at: 10,
            unconfirmed: None,
        }
    }

    /// A PropagatedVersion holding `record` and `approvals`.
    fn pv(record: &RolloutRecord, approvals: &[Approval]) -> Value {
        json!({"metadata": {"annotations": {
            ROLLOUT_STATUS_ANNOTATION: record.to_annotation(),
            APPROVALS_ANNOTATION: approvals_text(approvals)}}})
    }

    fn ready(names: &[&str]) -> Vec<crate::propagation::rollout::MemberCopy> {
        (names.iter())
            .map(|n| copy(n, Some((Readiness::Ready, "rv:1"))))
            .collect()
    }

    #[test]
    fn a_wave_may_ask_for_an_approval_and_a_bad_one_names_its_field() {
        assert_eq!(gated().approvals, BTreeSet::from([1, 2]));
        let none = RolloutPolicy::parse(r#"{"waves": [{"clusters": ["m1"], "approval": false}]}"#);
        assert!(none.unwrap().approvals.is_empty());
        let cases = [
            (
                r#"{"waves": [{"clusters": ["m1"], "approval": "yes"}]}"#,
                "waves[0].approval is not a boolean",
            ),
            (
                r#"{"waves": [{"clusters": ["m1"], "aproval": true}]}"#,
                "known: clusters, clusterSelector, approval",
            ),
        ];
        for (text, says) in cases {
            let e = RolloutPolicy::parse(text).unwrap_err();
            assert!(matches!(e, PolicyError::Field(_)), "{e}");
            assert!(e.to_string().contains(says), "{text}: {e}");
        }
    }

    /// The rollout stops before a gated wave, the record says so, an
    /// approval for another version does not count, one for this version
    /// lets the wave go, and the next gate stops it again.
    #[test]
    fn the_rollout_stops_before_a_gated_wave_until_it_is_approved_for_its_version() {
        let members = ready(&["m1", "m2", "m3"]);
        let first = start(&gated(), &target("new"), None, &members, 0);
        assert_eq!(first.plan.write, ["m1"]);
        assert_eq!(first.record.awaiting_approval, None);
        // The canary is on the target and ready: the next wave is gated.
        let mut record = first.record.clone();
        record.wrote("m1", "rv:1");
        let r = start(
            &gated(),
            &target("new"),
            Some(&pv(&record, &[])),
            &members,
            5,
        );
        let RolloutState::AwaitingApproval(a) = &r.plan.state else {
            panic!("{:?}", r.plan.state)
        };
        assert_eq!((a.wave(), a.step), (2, Step { wave: 1, batch: 0 }));
        assert!(r.plan.write.is_empty(), "{:?}", r.plan);
        assert_eq!(r.record.awaiting_approval, Some(2));
        assert_eq!(r.record.summary(), "awaiting approval: wave 2: m1 ready");
        assert!(r.newly_awaiting().is_some(), "news once");
        assert!(r.annotation().is_some(), "recorded");
        let s = stand(&r.plan, None);
        assert_eq!(
            (s.state, s.detail.as_str()),
            (RolloutStand::AwaitingApproval, "awaiting approval: wave 2")
        );
        assert_eq!(
            waves_text(&r.plan),
            "wave 1 batch 1: m1 (done)\nwave 2 batch 1: m2 (after approval)\nwave 3 batch 1: m3 (later)\n"
        );
        let mut p = object_plan(&["m1", "m2", "m3"]);
        let mut gated_now = r.clone();
        gated_now.gate(&mut p, &members);
        assert!(
            p.decisions.iter().all(|d| d.action == Action::Unchanged),
            "{:?}",
            p.decisions
        );

        // Decided again: not news; an approval of another version counts for nothing.
        let again = start(
            &gated(),
            &target("new"),
            Some(&pv(&r.record, &[approval(2, "old")])),
            &members,
            6,
        );
        assert!(again.newly_awaiting().is_none());
        assert!(matches!(
            again.plan.state,
            RolloutState::AwaitingApproval(_)
        ));
        assert_eq!(again.annotation(), None, "nothing new to record");

        // Approved for this version: wave 2 goes; wave 3 waits for its own.
        let approved = start(
            &gated(),
            &target("new"),
            Some(&pv(&r.record, &[approval(2, "new")])),
            &members,
            7,
        );
        assert_eq!(approved.plan.write, ["m2"]);
        assert_eq!(approved.record.awaiting_approval, None);
        assert_eq!(approved.record.summary(), "wave 2: m1 ready, m2 writing");
        let mut record = approved.record.clone();
        record.wrote("m2", "rv:2");
        let next = start(
            &gated(),
            &target("new"),
            Some(&pv(&record, &[approval(2, "new")])),
            &members,
            8,
        );
        assert_eq!(next.record.awaiting_approval, Some(3));
        // Wave 3 approved ahead of time: it goes on to the end.
        let both = [approval(2, "new"), approval(3, "new")];
        let done = start(
            &gated(),
            &target("new"),
            Some(&pv(&record, &both)),
            &members,
            8,
        );
        assert_eq!(done.plan.write, ["m3"]);
        // A new template starts over and needs its approvals again.
        let fresh = start(
            &gated(),
            &target("newer"),
            Some(&pv(&record, &both)),
            &members,
            9,
        );
        assert_eq!(fresh.plan.write, ["m1"]);
        let mut record = fresh.record;
        record.wrote("m1", "rv:9");
        let stops = start(
            &gated(),
            &target("newer"),
            Some(&pv(&record, &both)),
            &members,
            10,
        );
        assert_eq!(stops.record.awaiting_approval, Some(2));
    }

    #[test]
    fn an_unreadable_approvals_annotation_counts_for_nothing_and_says_why() {
        let mut record = RolloutRecord::resume(None, &target("new"));
        record.writing("m1", 0);
        record.wrote("m1", "rv:1");
        let mut v = pv(&record, &[]);
        v["metadata"]["annotations"][APPROVALS_ANNOTATION] = json!("[");
        let r = start(&gated(), &target("new"), Some(&v), &ready(&["m1", "m2"]), 5);
        assert!(matches!(r.plan.state, RolloutState::AwaitingApproval(_)));
        let why = r.unreadable_approvals.expect("said");
        assert!(
            why.starts_with(&format!("annotation {APPROVALS_ANNOTATION}: ")),
            "{why}"
        );
    }

    /// `rollout approve`'s decision, case by case.
    #[test]
    fn an_approval_is_for_a_waiting_rollout_of_the_current_version() {
        let awaiting = |wave: usize| {
            let mut r = RolloutRecord::resume(None, &target("new"));
            r.step = Step {
                wave: wave - 1,
                batch: 0,
            };
            r.awaiting_approval = Some(wave);
            r
        };
        let mut at_wave_1 = RolloutRecord::resume(None, &target("new"));
        at_wave_1.writing("m1", 0);
        let mut aborted = awaiting(2);
        aborted.abort(&target("old"), 0);
        let policy = gated();
        let old = [approval(2, "old")];
        let given = [approval(2, "new")];
        // (case, the object's policy, record, --wave, approvals before, the result).
        type Case<'a> = (
            &'a str,
            Option<&'a RolloutPolicy>,
            Option<RolloutRecord>,
            Option<usize>,
            &'a [Approval],
            Result<usize, &'a str>,
        );
        let cases: Vec<Case> = vec![
            (
                "the awaited wave",
                Some(&policy),
                Some(awaiting(2)),
                None,
                &old,
                Ok(2),
            ),
            (
                "the awaited wave named",
                Some(&policy),
                Some(awaiting(2)),
                Some(2),
                &[],
                Ok(2),
            ),
            (
                "a later gated wave ahead of time",
                Some(&policy),
                Some(at_wave_1.clone()),
                Some(3),
                &[],
                Ok(3),
            ),
            (
                "the run's policy: the awaited wave",
                None,
                Some(awaiting(2)),
                None,
                &[],
                Ok(2),
            ),
            (
                "no rollout",
                Some(&policy),
                None,
                None,
                &[],
                Err("no rollout in progress"),
            ),
            (
                "another version",
                Some(&policy),
                Some(RolloutRecord::resume(None, &target("older"))),
                None,
                &[],
                Err("another version"),
            ),
            (
                "aborted",
                Some(&policy),
                Some(aborted),
                None,
                &[],
                Err("aborted"),
            ),
            (
                "nothing awaited",
                Some(&policy),
                Some(at_wave_1.clone()),
                None,
                &[],
                Err("awaits no approval (it is at wave 1)"),
            ),
            (
                "out of range",
                Some(&policy),
                Some(awaiting(2)),
                Some(4),
                &[],
                Err("--wave 4: out of range: its rollout has 3 wave(s)"),
            ),
            (
                "wave 0",
                Some(&policy),
                Some(awaiting(2)),
                Some(0),
                &[],
                Err("--wave 0: out of range"),
            ),
            (
                "no gate",
                Some(&policy),
                Some(awaiting(2)),
                Some(1),
                &[],
                Err("waves[0].approval is not true"),
            ),
            (
                "passed",
                Some(&policy),
                Some(awaiting(3)),
                Some(2),
                &[],
                Err("past that wave (at wave 3)"),
            ),
            (
                "the run's policy: another wave",
                None,
                Some(awaiting(2)),
                Some(3),
                &[],
                Err("only the wave its rollout awaits (2)"),
            ),
        ];
        for (name, policy, record, wave, existing, want) in cases {
            let r = ApproveRequest {
                policy,
                record: record.as_ref(),
                target: &target("new"),
                wave,
                existing,
            };
            match (approve(r, &alice(), 100), want) {
                (Ok(Approved::New { wave, list }), Ok(w)) => {
                    assert_eq!(wave, w, "{name}");
                    assert!(
                        list.iter().all(|a| a.target == target("new")),
                        "{name}: {list:?}"
                    );
                    let mine = list.iter().find(|a| a.wave == w).expect(name);
                    assert_eq!((mine.by.as_str(), mine.at), ("alice", 100), "{name}");
                }
                (Err(e), Err(says)) => {
                    assert!(e.to_string().contains(says), "{name}: {e}");
                    let usage = name.contains("range")
                        || name.contains("wave 0")
                        || name.contains("gate")
                        || name.contains("another wave");
                    assert_eq!(e.is_usage(), usage, "{name}: {e}");
                }
                (got, want) => panic!("{name}: {got:?}, want {want:?}"),
            }
        }
        // Twice: the first stands, nothing to write.
        let r = ApproveRequest {
            policy: Some(&policy),
            record: Some(&awaiting(2)),
            target: &target("new"),
            wave: None,
            existing: &given,
        };
        assert_eq!(
            approve(r, &alice(), 200),
            Ok(Approved::Already(given[0].clone()))
        );
    }

    #[test]
    fn approvals_read_back_and_an_unconfirmed_one_says_where_its_name_came_from() {
        let mut a = approval(2, "new");
        a.unconfirmed = Some("the kubeconfig's client certificate".into());
        let text = approvals_text(std::slice::from_ref(&a));
        assert!(text.contains(r#""templateVersion":"new""#), "{text}");
        assert_eq!(parse_approvals(&text).unwrap(), [a.clone()]);
        assert_eq!(
            a.to_string(),
            "wave 2 approved by bob at 1970-01-01T00:00:10Z (not confirmed by the API server: the kubeconfig's client certificate)"
        );
        assert_eq!(
            approved_waves(&[a, approval(3, "old")], &target("new")),
            BTreeSet::from([1])
        );
    }
}
