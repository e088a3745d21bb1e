//! The rules a round follows around [`gate`](super::gate) for one object:
//! which policy applies, whether the run may take the rollout a step at
//! all, what it may write once gated, where the rollout stands for the
//! report, and when a one-shot run looks again. Kept here, with `now`
//! passed in, so that they are table-tested without a server or a clock;
//! the engine (`sync::live::rollout`) only reads, writes and waits.

use std::borrow::Cow;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::gate::{Rolling, halted_status};
use super::plan::{Aborted, Halt, RolloutPlan, RolloutState};
use super::policy::{ROLLOUT_ANNOTATION, RolloutPolicy};
use crate::propagation::decide::{FinalizerStep, ObjectPlan};
use crate::propagation::status::{ReadyState, with_ready};
use crate::run::scope::RunScope;

/// The policy that applies to `fed`: its own annotation's, else the run's
/// (`--rollout`). `Ok(None)`: neither gates anything (no policy, or an
/// all-at-once one, the object's overriding the run's), and the object is
/// written as without a policy. `Err`: its annotation cannot be read, why
/// (a failure naming the object, and nothing of it written: a guess at
/// what the author meant could write every member at once).
pub fn policy_of<'p>(
    fed: &Value,
    run: Option<&'p RolloutPolicy>,
) -> Result<Option<Cow<'p, RolloutPolicy>>, String> {
    let own = RolloutPolicy::of_object(fed)
        .map_err(|e| format!("annotation {ROLLOUT_ANNOTATION}: {}", e.problem))?;
    let policy = match own {
        Some(own) => Cow::Owned(own),
        None => match run {
            Some(run) => Cow::Borrowed(run),
            None => return Ok(None),
        },
    };
    Ok((!policy.is_all_at_once()).then_some(policy))
}

/// Why a run may not take a rollout a step, naming the members it is
/// placed on that the run may not write (`--cluster`, or in the watch
/// members whose watches have not listed yet). The planner would count
/// them written when their step came, and their deadline would halt the
/// rollout for a write never made; `None`: the run reaches them all.
pub fn out_of_reach<'a>(
    selected: impl IntoIterator<Item = &'a String>,
    scope: &RunScope,
) -> Option<String> {
    let outside: Vec<&str> = (selected.into_iter())
        .filter(|c| !scope.touches(c))
        .map(String::as_str)
        .collect();
    (!outside.is_empty()).then(|| {
        format!(
            "its rollout goes on only in a run that may write to every member it is placed on, and this one may not write to {} (--cluster); nothing of it is written",
            outside.join(", ")
        )
    })
}

/// Nothing of this object is written: no member request, no status, no
/// PropagatedVersion, no finalizer (a refused object is left as it is for
/// a run that may take it).
pub fn write_nothing(p: &mut ObjectPlan) {
    p.decisions.clear();
    p.record = false;
    p.finalizer = FinalizerStep::Keep;
}

/// How a rollout's object's status ends a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End<'r> {
    /// `Ready` `False`, reason `RolloutHalted`, the failed members' entries.
    Halted(&'r Halt),
    /// `Ready` `True`: each member was ready for `minSuccessTime`.
    Ready,
}

impl End<'_> {
    /// `status` as this end has it at `now`; `None` when it says so
    /// already (nothing to write: a halted object decided again, as every
    /// resync of the watch does, costs no request).
    pub fn status(&self, status: &Value, now: &str) -> Option<Value> {
        match self {
            End::Halted(halt) => halted_status(status, halt, now),
            End::Ready => with_ready(status, ReadyState::Ready, now),
        }
    }
}

impl Rolling {
    /// Whether the record (and the PropagatedVersion mid-rollout) is
    /// written before the member writes: not once complete, when the
    /// pipeline writes the PropagatedVersion as without a policy.
    pub fn records_before(&self) -> bool {
        !self.complete()
    }

    /// Whether the record is written after the member writes: not when it
    /// could not be written before (`refused`: no member was written
    /// either), nor for a complete rollout whose member writes failed (its
    /// record goes only once its PropagatedVersion is written).
    pub fn records_after(&self, refused: bool, writes_failed: bool) -> bool {
        !(refused || (self.complete() && writes_failed))
    }

    /// How the object's status ends the round: a halt, or complete; none
    /// while it waits, and none when this run aborts it (`aborting`: the
    /// members go back, and the version the status would speak of is not
    /// the one they hold).
    pub fn end(&self, aborting: bool) -> Option<End<'_>> {
        if aborting {
            return None;
        }
        match (self.halt(), self.complete()) {
            (Some(halt), _) => Some(End::Halted(halt)),
            (None, true) => Some(End::Ready),
            _ => None,
        }
    }
}

/// A rollout's state after a run.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RolloutStand {
    Waiting,
    /// Stopped before a wave that asks for an approval not given for this
    /// version (`kubefedctl rollout approve`).
    #[serde(rename = "awaitingApproval")]
    AwaitingApproval,
    Halted,
    Complete,
    /// `--rollout-abort`: its members went back to the recorded version.
    Aborted,
}

/// Where one object's rollout stands, as a report says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stand {
    pub state: RolloutStand,
    /// `wave 1: m1 (0/1 available)`, or the halt, or `complete`.
    pub detail: String,
    /// When to look again (seconds since the epoch), when a time moves it on.
    pub recheck_at: Option<i64>,
}

/// Where `plan` leaves its object; `aborting`: the members this run sends
/// back (`--rollout-abort`). A run of a target aborted before writes
/// nothing and says so as a halt: waiting would promise a step that never
/// comes.
pub fn stand(plan: &RolloutPlan, aborting: Option<&[String]>) -> Stand {
    stand_over(plan, aborting, &[])
}

/// [`stand`] of a rollout over the pull members `pulled`: those the plan
/// writes are said to be admitted (their agents apply), not written.
pub fn stand_over(plan: &RolloutPlan, aborting: Option<&[String]>, pulled: &[String]) -> Stand {
    let (state, detail, recheck_at) = match &plan.state {
        RolloutState::Complete if aborting.is_some() => {
            let members = aborting.unwrap_or_default().join(", ");
            let detail = format!("aborted: {members} back to the recorded version");
            (RolloutStand::Aborted, detail, None)
        }
        RolloutState::Complete => (RolloutStand::Complete, "complete".to_string(), None),
        RolloutState::Aborted(a) if aborting.is_some() => {
            let detail = aborted_now(aborting.unwrap_or_default(), a);
            (RolloutStand::Aborted, detail, None)
        }
        RolloutState::Aborted(a) => (RolloutStand::Halted, a.to_string(), None),
        RolloutState::Halted(h) => (RolloutStand::Halted, h.to_string(), None),
        RolloutState::AwaitingApproval(a) => {
            let mut detail = a.to_string();
            detail.push_str(&writes(&plan.write, pulled));
            (RolloutStand::AwaitingApproval, detail, None)
        }
        RolloutState::Waiting(w) => {
            let members: Vec<String> = (w.members.iter())
                .map(|(m, why)| format!("{m} ({why})"))
                .collect();
            let mut detail = w.wave_label.clone();
            detail.push_str(&writes(&plan.write, pulled));
            if !members.is_empty() {
                detail.push_str(&format!(": waiting for {}", members.join(", ")));
            }
            (RolloutStand::Waiting, detail, w.recheck_at)
        }
    };
    Stand {
        state,
        detail,
        recheck_at,
    }
}

/// `: wrote m1; admitted edge (its agent applies)`, or nothing.
fn writes(write: &[String], pulled: &[String]) -> String {
    let (admitted, wrote): (Vec<&String>, Vec<&String>) =
        write.iter().partition(|m| pulled.contains(m));
    let join = |v: &[&String]| v.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", ");
    let mut parts = Vec::new();
    if !wrote.is_empty() {
        parts.push(format!("wrote {}", join(&wrote)));
    }
    if !admitted.is_empty() {
        parts.push(format!("admitted {} (its agent applies)", join(&admitted)));
    }
    if parts.is_empty() {
        return String::new();
    }
    format!(": {}", parts.join("; "))
}

/// `--rollout-abort --previous FILE`'s detail: who went back, who did not.
fn aborted_now(aborting: &[String], a: &Aborted) -> String {
    let back: Vec<&str> = (aborting.iter())
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

/// How often a one-shot run looks again at a waiting rollout's members.
pub const POLL: Duration = Duration::from_secs(2);

/// After how long a one-shot run with rollouts waiting takes another
/// round: in a second when one's time comes by then (a soak ends, a
/// deadline passes), else after [`POLL`]; `None` when the run's `wait`
/// would be over before the next look (the next run resumes).
pub fn next_round(
    elapsed: Duration,
    wait: Duration,
    recheck_at: impl IntoIterator<Item = i64>,
    now: i64,
) -> Option<Duration> {
    if elapsed + POLL > wait {
        return None;
    }
    let soon = recheck_at.into_iter().any(|at| at <= now + 1);
    Some(if soon { Duration::from_secs(1) } else { POLL })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;

    use super::*;
    use crate::propagation::action::Action;
    use crate::propagation::readiness::Readiness;
    use crate::propagation::rollout::gate::{MemberCopy, abort_to_previous, start};
    use crate::propagation::rollout::ledger::{ROLLOUT_STATUS_ANNOTATION, RolloutRecord, abort};
    use crate::propagation::rollout::tests::{copy, names, object_plan, target};

    const CANARY: &str = r#"{"waves": [{"clusters": ["m1"]}], "minSuccessTime": "10s"}"#;

    fn annotated(policy: Option<&str>) -> Value {
        match policy {
            Some(p) => json!({"kind": "FederatedConfigMap",
                "metadata": {"namespace": "ns", "name": "x",
                             "annotations": {ROLLOUT_ANNOTATION: p}}}),
            None => json!({"kind": "FederatedConfigMap",
                           "metadata": {"namespace": "ns", "name": "x"}}),
        }
    }

    #[test]
    fn the_objects_policy_wins_over_the_runs() {
        let canary = RolloutPolicy::parse(CANARY).unwrap();
        let slow = RolloutPolicy::parse(r#"{"maxConcurrency": 1}"#).unwrap();
        let all = RolloutPolicy::all_at_once();
        // (object's annotation, run's --rollout, the policy that applies:
        // Some(true) the canary, Some(false) the slow one, None none).
        type Case<'a> = (
            &'a str,
            Option<&'a str>,
            Option<&'a RolloutPolicy>,
            Option<bool>,
        );
        let cases: &[Case] = &[
            ("neither", None, None, None),
            ("the run's alone", None, Some(&slow), Some(false)),
            ("the object's alone", Some(CANARY), None, Some(true)),
            (
                "the object's over the run's",
                Some(CANARY),
                Some(&slow),
                Some(true),
            ),
            (
                "the object's all at once over the run's",
                Some("{}"),
                Some(&slow),
                None,
            ),
            ("the run's all at once", None, Some(&all), None),
        ];
        for (name, own, run, want) in cases {
            let got = policy_of(&annotated(*own), *run).unwrap();
            let got = got.map(|p| *p == canary);
            assert_eq!(got, *want, "{name}");
        }
    }

    #[test]
    fn a_malformed_annotation_is_refused_naming_the_annotation() {
        let slow = RolloutPolicy::parse(r#"{"maxConcurrency": 1}"#).unwrap();
        let cases = [
            ("not JSON", "{", "not JSON"),
            ("a bad field", r#"{"waves": 1}"#, "waves"),
        ];
        for (name, text, says) in cases {
            let why = policy_of(&annotated(Some(text)), Some(&slow)).unwrap_err();
            assert!(
                why.starts_with(&format!("annotation {ROLLOUT_ANNOTATION}: ")),
                "{name}: {why}"
            );
            assert!(why.contains(says), "{name}: {why}");
        }
    }

    #[test]
    fn members_out_of_reach_refuse_the_rollout_naming_them() {
        let scope = |clusters: Option<&[&str]>| RunScope {
            clusters: clusters.map(|c| c.iter().map(|s| s.to_string()).collect()),
            ..RunScope::default()
        };
        // (case, placed members, the run's members, the members named).
        type Case<'a> = (
            &'a str,
            &'a [&'a str],
            Option<&'a [&'a str]>,
            Option<&'a str>,
        );
        let cases: &[Case] = &[
            ("every member", &["m1", "m2"], None, None),
            (
                "all placed ones",
                &["m1", "m2"],
                Some(&["m1", "m2", "m3"]),
                None,
            ),
            ("one outside", &["m1", "m2"], Some(&["m1"]), Some("m2")),
            (
                "two outside",
                &["m1", "m2", "m3"],
                Some(&["m2"]),
                Some("m1, m3"),
            ),
            ("placed nowhere", &[], Some(&["m1"]), None),
        ];
        for (name, placed, run, named) in cases {
            let selected: BTreeSet<String> = names(placed).into_iter().collect();
            let why = out_of_reach(&selected, &scope(*run));
            match (named, &why) {
                (None, None) => {}
                (Some(named), Some(why)) => {
                    assert!(
                        why.contains(&format!("may not write to {named} ")),
                        "{name}: {why}"
                    );
                    assert!(why.ends_with("nothing of it is written"), "{name}: {why}");
                }
                _ => panic!("{name}: {why:?}"),
            }
        }
    }

    /// A PropagatedVersion holding `record`.
    fn pv(record: &RolloutRecord) -> Value {
        json!({"metadata": {"annotations": {ROLLOUT_STATUS_ANNOTATION: record.to_annotation()}}})
    }

    /// A record of the target `new` in which `m1` got it at 0 (version
    /// `rv:10`) and, when `both`, `m2` too (`rv:20`).
    fn wrote(both: bool) -> RolloutRecord {
        let mut r = RolloutRecord::resume(None, &target("new"));
        r.writing("m1", 0);
        r.wrote("m1", "rv:10");
        if both {
            r.writing("m2", 0);
            r.wrote("m2", "rv:20");
        }
        r
    }

    /// One object's rollout by where its waves stand, gated, and what the
    /// round may write of it: the members still written, the record
    /// before and after (after failed member writes), the status's end,
    /// and the report's stand.
    #[test]
    fn what_may_be_written_by_where_the_waves_stand() {
        struct Case {
            name: &'static str,
            policy: &'static str,
            pv: Option<Value>,
            members: Vec<MemberCopy>,
            now: i64,
            written: &'static [&'static str],
            before: bool,
            after_failed: bool,
            end: Option<&'static str>,
            stand: RolloutStand,
        }
        let ready = || Readiness::Ready;
        let pending = || Readiness::Pending("0/1 available".into());
        let mut aborted = wrote(false);
        aborted.abort(&target("old"), 5);
        let cases = [
            Case {
                name: "the first wave",
                policy: CANARY,
                pv: None,
                members: vec![
                    copy("m1", Some((ready(), "rv:1"))),
                    copy("m2", Some((ready(), "rv:2"))),
                ],
                now: 100,
                written: &["m1"],
                before: true,
                after_failed: true,
                end: None,
                stand: RolloutStand::Waiting,
            },
            Case {
                name: "the canary soaking",
                policy: CANARY,
                pv: Some(pv(&wrote(false))),
                members: vec![
                    copy("m1", Some((ready(), "rv:10"))),
                    copy("m2", Some((ready(), "rv:2"))),
                ],
                now: 5,
                written: &[],
                before: true,
                after_failed: true,
                end: None,
                stand: RolloutStand::Waiting,
            },
            Case {
                name: "the deadline passed",
                policy: r#"{"waves": [{"clusters": ["m1"]}], "progressDeadline": "5s"}"#,
                pv: Some(pv(&wrote(false))),
                members: vec![
                    copy("m1", Some((pending(), "rv:10"))),
                    copy("m2", Some((ready(), "rv:2"))),
                ],
                now: 10,
                written: &[],
                before: true,
                after_failed: true,
                end: Some("halted"),
                stand: RolloutStand::Halted,
            },
            Case {
                name: "a target aborted before",
                policy: CANARY,
                pv: Some(pv(&aborted)),
                members: vec![
                    copy("m1", Some((ready(), "rv:11"))),
                    copy("m2", Some((ready(), "rv:2"))),
                ],
                now: 100,
                written: &[],
                before: true,
                after_failed: true,
                end: None,
                stand: RolloutStand::Halted,
            },
            Case {
                name: "complete",
                policy: r#"{"waves": [{"clusters": ["m1"]}]}"#,
                pv: Some(pv(&wrote(true))),
                members: vec![
                    copy("m1", Some((ready(), "rv:10"))),
                    copy("m2", Some((ready(), "rv:20"))),
                ],
                now: 100,
                written: &[],
                before: false,
                after_failed: false,
                end: Some("ready"),
                stand: RolloutStand::Complete,
            },
        ];
        for c in cases {
            let policy = RolloutPolicy::parse(c.policy).unwrap();
            let mut r = start(&policy, &target("new"), c.pv.as_ref(), &c.members, c.now);
            let mut p = object_plan(&["m1", "m2"]);
            r.gate(&mut p, &c.members);
            let placing: Vec<&str> = (p.decisions.iter())
                .filter(|d| matches!(d.action, Action::Update { .. }))
                .map(|d| d.cluster.as_str())
                .collect();
            let name = c.name;
            assert_eq!(placing, c.written, "{name}: members written");
            assert_eq!(r.records_before(), c.before, "{name}: record before");
            assert!(r.records_after(false, false), "{name}: record after");
            assert!(!r.records_after(true, false), "{name}: refused before");
            assert_eq!(r.records_after(false, true), c.after_failed, "{name}");
            let end = r.end(false).map(|e| match e {
                End::Halted(_) => "halted",
                End::Ready => "ready",
            });
            assert_eq!(end, c.end, "{name}: end");
            assert_eq!(r.end(true), None, "{name}: aborting ends nothing");
            assert_eq!(stand(&r.plan, None).state, c.stand, "{name}: stand");
        }
    }

    #[test]
    fn an_abort_stands_as_aborted_naming_who_went_back() {
        let record = wrote(true);
        let old = target("old");
        let rollback = abort(Some(&record), Some(&old), Some(&old)).unwrap();
        let mut p = object_plan(&["m1", "m2"]);
        p.decisions[1].action = Action::Unchanged;
        p.unchanged_versions.insert("m2".into(), "rv:2".into());
        let r = abort_to_previous(record, None, &rollback, &p, 50);
        let s = stand(&r.plan, Some(&rollback.members));
        assert_eq!(s.state, RolloutStand::Aborted);
        assert!(
            s.detail
                .starts_with("aborted: m2 back to the previous version; m1 still on this version"),
            "{}",
            s.detail
        );
        let at_once = stand(
            &RolloutPlan::without_waves(RolloutState::Complete),
            Some(&names(&["m1"])),
        );
        assert_eq!(at_once.detail, "aborted: m1 back to the recorded version");
        assert_eq!(r.end(true), None);
    }

    #[test]
    fn a_halts_status_is_written_once() {
        let policy =
            RolloutPolicy::parse(r#"{"waves": [{"clusters": ["m1"]}], "progressDeadline": "5s"}"#)
                .unwrap();
        let members = [copy(
            "m1",
            Some((Readiness::Pending("0/1".into()), "rv:10")),
        )];
        let r = start(
            &policy,
            &target("new"),
            Some(&pv(&wrote(false))),
            &members,
            10,
        );
        let end = r.end(false).expect("halted");
        let status = end
            .status(&json!({"clusters": [{"name": "m1"}]}), "t")
            .unwrap();
        assert_eq!(status["conditions"][0]["reason"], "RolloutHalted");
        assert_eq!(end.status(&status, "t2"), None);
        let ready = End::Ready.status(&json!({}), "t").unwrap();
        assert_eq!(ready["conditions"][0]["status"], "True");
    }

    #[test]
    fn a_run_looks_again_sooner_when_a_time_comes() {
        let s = Duration::from_secs;
        // (case, elapsed, wait, recheck times, the pause).
        type Case<'a> = (&'a str, u64, u64, &'a [i64], Option<u64>);
        let cases: &[Case] = &[
            ("only readiness moves it", 0, 60, &[], Some(2)),
            ("a soak ends later", 0, 60, &[110], Some(2)),
            ("a soak ends within a second", 0, 60, &[101], Some(1)),
            ("a deadline passed", 0, 60, &[90, 200], Some(1)),
            (
                "the wait is over before the next look",
                59,
                60,
                &[101],
                None,
            ),
            ("no wait", 0, 0, &[], None),
        ];
        for (name, elapsed, wait, at, pause) in cases {
            let got = next_round(s(*elapsed), s(*wait), at.iter().copied(), 100);
            assert_eq!(got, pause.map(s), "{name}");
        }
    }
}
