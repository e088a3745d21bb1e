//! The rollout policy, wave assignment, planner, record and rendering
//! against OCM's rollout cases where they apply. OCM's cases are those of
//! `open-cluster-management.io/api` `cluster/v1alpha1/helpers_test.go` at
//! f6404f30 (the helpers moved to `sdk-go` afterwards), cited by test
//! function and case name.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::propagation::action::{Action, ClusterStatus, Decision};
use crate::propagation::decide::ObjectPlan;
use crate::propagation::readiness::Readiness;

/// A fake now: the core has no clock.
const NOW: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

fn policy(v: Value) -> RolloutPolicy {
    RolloutPolicy::from_value(&v).unwrap_or_else(|e| panic!("{v}: {e}"))
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(super) fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// A placed member as a round observes it: its copy's readiness and
/// member version, if it holds one (`gate` and `rules`).
pub(super) fn copy(name: &str, c: Option<(Readiness, &str)>) -> MemberCopy {
    MemberCopy {
        name: name.into(),
        labels: BTreeMap::new(),
        copy: c.map(|(r, v)| (r, v.to_string())),
        pulled: false,
    }
}

/// A target of template `t`.
pub(super) fn target(t: &str) -> Target {
    Target {
        template_version: t.into(),
        overrides_version: "o".into(),
    }
}

/// The decide step's plan: an update of `x` for each of `clusters`.
pub(super) fn object_plan(clusters: &[&str]) -> ObjectPlan {
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
        report_only: false,
        drift_record: None,
        pulled: Default::default(),
    }
}

/// A member as the planner sees it; `prod` puts it in the canary
/// policy's second wave.
struct M {
    name: &'static str,
    prod: bool,
    target: Option<OnTarget>,
}

impl M {
    fn old(name: &'static str, prod: bool) -> M {
        M {
            name,
            prod,
            target: None,
        }
    }

    fn pending(name: &'static str, prod: bool, since: i64) -> M {
        M::on(name, prod, since, Health::Pending("0/3 available".into()))
    }

    fn ready(name: &'static str, prod: bool, since: i64, ready_since: i64) -> M {
        M::on(name, prod, since, Health::Ready { since: ready_since })
    }

    fn failed(name: &'static str, prod: bool, since: i64) -> M {
        M::on(
            name,
            prod,
            since,
            Health::Failed("failed (BackoffLimitExceeded)".into()),
        )
    }

    fn on(name: &'static str, prod: bool, since: i64, health: Health) -> M {
        M {
            name,
            prod,
            target: Some(OnTarget { since, health }),
        }
    }

    fn state(&self) -> MemberState {
        MemberState {
            name: self.name.to_string(),
            labels: if self.prod {
                labels(&[("tier", "prod")])
            } else {
                BTreeMap::new()
            },
            target: self.target.clone(),
        }
    }
}

/// The canary policy of the issue: m1 first, then the prod members, then the rest.
fn canary() -> Value {
    json!({"waves": [{"clusters": ["m1"]}, {"clusterSelector": {"matchLabels": {"tier": "prod"}}}],
           "progressDeadline": "10m", "minSuccessTime": "1m", "maxFailures": 0})
}

/// What the plan's state must be.
#[derive(Debug)]
enum Want {
    Waiting {
        wave: usize,
        batch: usize,
        recheck_at: Option<i64>,
    },
    Halted {
        wave_label: &'static str,
        members: &'static [&'static str],
    },
    Complete,
}

struct PlanCase {
    name: &'static str,
    policy: Value,
    members: Vec<M>,
    from: Step,
    write: &'static [&'static str],
    keep: &'static [&'static str],
    want: Want,
}

fn step(wave: usize, batch: usize) -> Step {
    Step { wave, batch }
}

fn check(c: &PlanCase) {
    let p = policy(c.policy.clone());
    let members: Vec<MemberState> = c.members.iter().map(M::state).collect();
    let got = plan(RolloutInput {
        policy: &p,
        members: &members,
        from: c.from,
        approved: &BTreeSet::new(),
        now: NOW,
    });
    assert_eq!(got.write, names(c.write), "{}: write", c.name);
    assert_eq!(got.keep, names(c.keep), "{}: keep", c.name);
    match (&c.want, &got.state) {
        (
            Want::Waiting {
                wave,
                batch,
                recheck_at,
            },
            RolloutState::Waiting(w),
        ) => {
            assert_eq!(w.step, step(*wave, *batch), "{}: step", c.name);
            assert_eq!(got.step, Some(w.step), "{}: recorded step", c.name);
            assert_eq!(w.recheck_at, *recheck_at, "{}: recheck", c.name);
        }
        (
            Want::Halted {
                wave_label,
                members,
            },
            RolloutState::Halted(h),
        ) => {
            assert_eq!(h.wave_label, *wave_label, "{}", c.name);
            let failed: Vec<&str> = h.failures.iter().map(|f| f.member.as_str()).collect();
            assert_eq!(failed, *members, "{}: failed members", c.name);
        }
        (Want::Complete, RolloutState::Complete) => assert_eq!(got.step, None, "{}", c.name),
        (want, got) => panic!("{}: want {want:?}, got {got:?}", c.name),
    }
}

#[test]
fn the_default_policy_writes_every_member_at_once() {
    let cases = [
        // OCM TestGetRolloutCluster_All "test rollout all with timeout 90s
        // without workload created": every cluster is to apply.
        PlanCase {
            name: "all at once, nothing written yet",
            policy: json!({}),
            members: vec![M::old("m3", false), M::old("m1", true), M::old("m2", false)],
            from: Step::default(),
            write: &["m1", "m2", "m3"],
            keep: &[],
            want: Want::Waiting {
                wave: 0,
                batch: 0,
                recheck_at: None,
            },
        },
        PlanCase {
            name: "all at once, all ready",
            policy: json!({}),
            members: vec![
                M::ready("m1", false, NOW - 9, NOW - 5),
                M::ready("m2", false, NOW - 9, NOW),
            ],
            from: Step::default(),
            write: &[],
            keep: &[],
            want: Want::Complete,
        },
    ];
    for c in &cases {
        check(c);
    }
    assert!(RolloutPolicy::all_at_once().is_all_at_once());
    assert!(!policy(canary()).is_all_at_once());
}

#[test]
fn a_canary_goes_first_and_each_wave_waits_for_the_last() {
    let cases = [
        PlanCase {
            name: "new target: the canary only",
            policy: canary(),
            members: vec![
                M::old("m1", false),
                M::old("m2", true),
                M::old("m3", true),
                M::old("m4", false),
            ],
            from: Step::default(),
            write: &["m1"],
            keep: &["m2", "m3", "m4"],
            want: Want::Waiting {
                wave: 0,
                batch: 0,
                recheck_at: Some(NOW + 600),
            },
        },
        // OCM TestDetermineRolloutStatus "Progressing status within the
        // timeout duration": still rolling, look again at its deadline.
        PlanCase {
            name: "canary written, not ready yet",
            policy: canary(),
            members: vec![
                M::pending("m1", false, NOW - 60),
                M::old("m2", true),
                M::old("m3", true),
            ],
            from: Step::default(),
            write: &[],
            keep: &["m2", "m3"],
            want: Want::Waiting {
                wave: 0,
                batch: 0,
                recheck_at: Some(NOW - 60 + 600),
            },
        },
        // OCM TestDetermineRolloutStatus "Succeeded status within the
        // minSuccessTime": succeeded but still soaking.
        PlanCase {
            name: "canary ready for 30s of minSuccessTime 1m",
            policy: canary(),
            members: vec![
                M::ready("m1", false, NOW - 90, NOW - 30),
                M::old("m2", true),
            ],
            from: Step::default(),
            write: &[],
            keep: &["m2"],
            want: Want::Waiting {
                wave: 0,
                batch: 0,
                recheck_at: Some(NOW + 30),
            },
        },
        // OCM TestGetRolloutCluster_ProgressivePerGroup "test
        // progressivePerGroup rollout with timeout 90s and first group
        // timeOut, second group succeeded" (here: succeeded): the next group.
        PlanCase {
            name: "canary soaked: the prod wave",
            policy: canary(),
            members: vec![
                M::ready("m1", false, NOW - 120, NOW - 60),
                M::old("m2", true),
                M::old("m3", true),
                M::old("m4", false),
            ],
            from: Step::default(),
            write: &["m2", "m3"],
            keep: &["m4"],
            want: Want::Waiting {
                wave: 1,
                batch: 0,
                recheck_at: Some(NOW + 600),
            },
        },
        PlanCase {
            name: "members in no wave go last",
            policy: canary(),
            members: vec![
                M::ready("m1", false, NOW - 900, NOW - 800),
                M::ready("m2", true, NOW - 300, NOW - 100),
                M::ready("m3", true, NOW - 300, NOW - 200),
                M::old("m4", false),
            ],
            from: step(1, 0),
            write: &["m4"],
            keep: &[],
            want: Want::Waiting {
                wave: 2,
                batch: 0,
                recheck_at: Some(NOW + 600),
            },
        },
        PlanCase {
            name: "every wave soaked: complete",
            policy: canary(),
            members: vec![
                M::ready("m1", false, NOW - 900, NOW - 800),
                M::ready("m2", true, NOW - 300, NOW - 100),
                M::ready("m4", false, NOW - 90, NOW - 60),
            ],
            from: step(2, 0),
            write: &[],
            keep: &[],
            want: Want::Complete,
        },
    ];
    for c in &cases {
        check(c);
    }
}

#[test]
fn failures_halt_a_wave_beyond_max_failures() {
    let with = |extra: Value| {
        let mut p = canary();
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    let cases = [
        // OCM TestDetermineRolloutStatus "Failed status outside of the
        // timeout duration" and TestGetRolloutCluster_ProgressivePerGroup
        // "... first group timeOut, maxFailures 2" (here maxFailures 0):
        // not ready by the deadline is a failure, and the next wave waits.
        PlanCase {
            name: "progressDeadline exceeded on the canary",
            policy: canary(),
            members: vec![
                M::pending("m1", false, NOW - 600),
                M::old("m2", true),
                M::old("m3", true),
            ],
            from: Step::default(),
            write: &[],
            keep: &["m2", "m3"],
            want: Want::Halted {
                wave_label: "wave 1",
                members: &["m1"],
            },
        },
        PlanCase {
            name: "a failed Job halts at once (OCM waits for its timeout)",
            policy: canary(),
            members: vec![M::failed("m1", false, NOW - 5), M::old("m2", true)],
            from: Step::default(),
            write: &[],
            keep: &["m2"],
            want: Want::Halted {
                wave_label: "wave 1",
                members: &["m1"],
            },
        },
        // OCM TestGetRolloutCluster_ProgressivePerGroup "test
        // progressivePerGroup rollout with timeout None, first group 1
        // cluster is failing and maxFailures is 2": the rollout goes on.
        PlanCase {
            name: "maxFailures 1 tolerates one failure in the prod wave",
            policy: with(json!({"maxFailures": 1})),
            members: vec![
                M::ready("m1", false, NOW - 900, NOW - 800),
                M::failed("m2", true, NOW - 300),
                M::ready("m3", true, NOW - 300, NOW - 200),
                M::old("m4", false),
            ],
            from: step(1, 0),
            write: &["m4"],
            keep: &[],
            want: Want::Waiting {
                wave: 2,
                batch: 0,
                recheck_at: Some(NOW + 600),
            },
        },
        PlanCase {
            name: "maxFailures 1, two failures: halted naming both",
            policy: with(json!({"maxFailures": 1})),
            members: vec![
                M::ready("m1", false, NOW - 900, NOW - 800),
                M::failed("m2", true, NOW - 300),
                M::pending("m3", true, NOW - 600),
                M::old("m4", false),
            ],
            from: step(1, 0),
            write: &[],
            keep: &["m4"],
            want: Want::Halted {
                wave_label: "wave 2",
                members: &["m2", "m3"],
            },
        },
        // OCM TestGetRolloutCluster_ProgressivePerGroup "test
        // progressivePerGroup rollout with timeout None, first group 2
        // clusters are failing 2 and maxFailures is 30%": 30% of 3 is 1.
        PlanCase {
            name: "maxFailures 30% of a wave of 3, two failures",
            policy: with(json!({"maxFailures": "30%"})),
            members: vec![
                M::ready("m1", false, NOW - 900, NOW - 800),
                M::failed("m2", true, NOW - 300),
                M::failed("m3", true, NOW - 300),
                M::ready("m5", true, NOW - 300, NOW - 200),
            ],
            from: step(1, 0),
            write: &[],
            keep: &[],
            want: Want::Halted {
                wave_label: "wave 2",
                members: &["m2", "m3"],
            },
        },
        // OCM's determineRolloutStatus: "If timeout is set to 0, the
        // function append the clusterStatus to the timeOut clusters".
        PlanCase {
            name: "progressDeadline 0: any pending member is a failure",
            policy: with(json!({"progressDeadline": "0"})),
            members: vec![M::pending("m1", false, NOW)],
            from: Step::default(),
            write: &[],
            keep: &[],
            want: Want::Halted {
                wave_label: "wave 1",
                members: &["m1"],
            },
        },
        PlanCase {
            name: "progressDeadline None: wait as long as it takes",
            policy: with(json!({"progressDeadline": "None"})),
            members: vec![M::pending("m1", false, NOW - 86_400), M::old("m2", true)],
            from: Step::default(),
            write: &[],
            keep: &["m2"],
            want: Want::Waiting {
                wave: 0,
                batch: 0,
                recheck_at: None,
            },
        },
    ];
    for c in &cases {
        check(c);
    }
}

#[test]
fn max_concurrency_cuts_a_wave_into_batches() {
    let half = json!({"maxConcurrency": "50%", "progressDeadline": "None"});
    let cases = [
        // OCM TestGetRolloutCluster_Progressive "test progressive rollout
        // with timeout None, MaxConcurrency 50%, MaxFailures 100%": half
        // the clusters at a time (OCM's window; here a fixed batch).
        PlanCase {
            name: "50% of four: the first two by name",
            policy: half.clone(),
            members: vec![
                M::old("d", false),
                M::old("c", false),
                M::old("b", false),
                M::old("a", false),
            ],
            from: Step::default(),
            write: &["a", "b"],
            keep: &["c", "d"],
            want: Want::Waiting {
                wave: 0,
                batch: 0,
                recheck_at: None,
            },
        },
        PlanCase {
            name: "50% of four: the second batch once the first is ready",
            policy: half.clone(),
            members: vec![
                M::ready("a", false, NOW - 9, NOW - 5),
                M::ready("b", false, NOW - 9, NOW - 5),
                M::old("c", false),
                M::old("d", false),
            ],
            from: Step::default(),
            write: &["c", "d"],
            keep: &[],
            want: Want::Waiting {
                wave: 0,
                batch: 1,
                recheck_at: None,
            },
        },
        PlanCase {
            name: "50% of three rounds up (OCM's math.Ceil): batches of 2 and 1",
            policy: half.clone(),
            members: vec![M::old("a", false), M::old("b", false), M::old("c", false)],
            from: Step::default(),
            write: &["a", "b"],
            keep: &["c"],
            want: Want::Waiting {
                wave: 0,
                batch: 0,
                recheck_at: None,
            },
        },
        PlanCase {
            name: "a pending member of the first batch holds the second back",
            policy: half,
            members: vec![
                M::ready("a", false, NOW - 9, NOW - 5),
                M::pending("b", false, NOW - 9),
                M::old("c", false),
                M::old("d", false),
            ],
            from: Step::default(),
            write: &[],
            keep: &["c", "d"],
            want: Want::Waiting {
                wave: 0,
                batch: 0,
                recheck_at: None,
            },
        },
    ];
    for c in &cases {
        check(c);
    }
}

#[test]
fn runs_resume_and_new_members_catch_up() {
    let cases = [
        // A run killed after the canary soaked, before writing wave 2:
        // the record's step and times carry the next run on.
        PlanCase {
            name: "resumed between waves",
            policy: canary(),
            members: vec![
                M::ready("m1", false, NOW - 3600, NOW - 3000),
                M::old("m2", true),
                M::old("m3", true),
            ],
            from: Step::default(),
            write: &["m2", "m3"],
            keep: &[],
            want: Want::Waiting {
                wave: 1,
                batch: 0,
                recheck_at: Some(NOW + 600),
            },
        },
        // OCM TestGetRolloutCluster_ClusterAdded "test progressivePerGroup
        // rollout with timeout 90s and cluster added after rollout start.":
        // a member new to a passed wave gets the target, the current wave
        // goes on waiting.
        PlanCase {
            name: "a member joins the completed canary wave",
            policy: json!({"waves": [{"clusters": ["m1", "m5"]}, {"clusterSelector": {"matchLabels": {"tier": "prod"}}}],
                           "progressDeadline": "10m"}),
            members: vec![
                M::ready("m1", false, NOW - 900, NOW - 800),
                M::pending("m2", true, NOW - 60),
                M::old("m5", false),
                M::old("m4", false),
            ],
            from: step(1, 0),
            write: &["m5"],
            keep: &["m4"],
            want: Want::Waiting {
                wave: 1,
                batch: 0,
                recheck_at: Some(NOW + 540),
            },
        },
        // A passed wave is not gated again: its canary going unready later
        // does not move the rollout back.
        PlanCase {
            name: "a passed wave is not gated again",
            policy: canary(),
            members: vec![
                M::pending("m1", false, NOW - 9000),
                M::ready("m2", true, NOW - 300, NOW - 200),
            ],
            from: step(1, 0),
            write: &[],
            keep: &[],
            want: Want::Complete,
        },
        PlanCase {
            name: "empty waves are skipped",
            policy: json!({"waves": [{"clusters": ["gone"]}, {"clusters": ["m1"]}]}),
            members: vec![M::old("m1", false), M::old("m2", false)],
            from: Step::default(),
            write: &["m1"],
            keep: &["m2"],
            want: Want::Waiting {
                wave: 1,
                batch: 0,
                recheck_at: None,
            },
        },
    ];
    for c in &cases {
        check(c);
    }
}

/// The record through a kill: written, parsed back by the next run, and a
/// new target starting over from the first wave.
#[test]
fn the_record_carries_a_rollout_across_runs() {
    let v1 = Target {
        template_version: "t1".into(),
        overrides_version: "o1".into(),
    };
    let v2 = Target {
        template_version: "t2".into(),
        overrides_version: "o1".into(),
    };
    let p = policy(canary());
    let prod = labels(&[("tier", "prod")]);
    let none = BTreeMap::new();
    // Run 1 writes the canary and is killed after recording it.
    let mut record = RolloutRecord::resume(None, &v1);
    record.writing("m1", NOW - 300);
    record.wrote("m1", "gen:2");
    record.observe("m1", &none, Some(&Readiness::Ready), NOW - 200);
    let text = record.to_annotation();
    assert_eq!(
        text,
        r#"{"templateVersion":"t1","overridesVersion":"o1","step":{"wave":0,"batch":0},"members":{"m1":{"since":"2025-12-31T23:55:00Z","version":"gen:2","readySince":"2025-12-31T23:56:40Z"}}}"#
    );
    // Run 2 reads it back: the canary has been ready for 200s: wave 2.
    let mut record = RolloutRecord::resume(Some(RolloutRecord::parse(&text).unwrap()), &v1);
    let members = [
        record.observe("m1", &none, Some(&Readiness::Ready), NOW),
        record.observe("m2", &prod, None, NOW),
    ];
    assert_eq!(
        members[0].target,
        Some(OnTarget {
            since: NOW - 300,
            health: Health::Ready { since: NOW - 200 }
        })
    );
    let decided = plan(RolloutInput {
        policy: &p,
        members: &members,
        from: record.step,
        approved: &BTreeSet::new(),
        now: NOW,
    });
    assert_eq!(decided.write, names(&["m2"]));
    // A write begun and never confirmed is written again, its deadline
    // from the first try.
    record.writing("m2", NOW);
    record.writing("m2", NOW + 50);
    assert_eq!(record.observe("m2", &prod, None, NOW + 60).target, None);
    assert_eq!(record.members["m2"].since, NOW);
    // A new template mid-rollout starts over from the first wave.
    let restarted = RolloutRecord::resume(Some(record), &v2);
    assert_eq!(restarted.step, Step::default());
    assert!(restarted.members.is_empty());
    let bad = RolloutRecord::parse(
        r#"{"templateVersion":"t","overridesVersion":"o","members":{"m1":{"since":"yesterday"}}}"#,
    );
    assert!(bad.unwrap_err().starts_with(
        "annotation kubefedctl.kubefed.io/rollout-status: \"yesterday\" is not an RFC 3339 time"
    ),);
}

#[test]
fn readiness_observed_keeps_and_loses_its_ready_time() {
    let mut record = RolloutRecord::default();
    record.writing("m1", NOW - 100);
    record.wrote("m1", "rv:7");
    let none = BTreeMap::new();
    struct Row {
        at: i64,
        seen: Option<Readiness>,
        want: Health,
    }
    let rows = [
        Row {
            at: NOW - 50,
            seen: Some(Readiness::Ready),
            want: Health::Ready { since: NOW - 50 },
        },
        Row {
            at: NOW,
            seen: Some(Readiness::Ready),
            want: Health::Ready { since: NOW - 50 },
        },
        Row {
            at: NOW + 10,
            seen: Some(Readiness::Pending("1/2 available".into())),
            want: Health::Pending("1/2 available".into()),
        },
        Row {
            at: NOW + 20,
            seen: Some(Readiness::Ready),
            want: Health::Ready { since: NOW + 20 },
        },
        Row {
            at: NOW + 30,
            seen: None,
            want: Health::Pending("not observed".into()),
        },
        Row {
            at: NOW + 40,
            seen: Some(Readiness::Failed("failed (DeadlineExceeded)".into())),
            want: Health::Failed("failed (DeadlineExceeded)".into()),
        },
    ];
    for r in rows {
        let got = record.observe("m1", &none, r.seen.as_ref(), r.at);
        assert_eq!(
            got.target.map(|t| t.health),
            Some(r.want),
            "at {}",
            r.at - NOW
        );
    }
}

#[test]
fn the_propagated_version_stays_exact_for_kubefed() {
    let mut record = RolloutRecord::resume(
        None,
        &Target {
            template_version: "t2".into(),
            overrides_version: "o2".into(),
        },
    );
    record.writing("m1", NOW);
    record.wrote("m1", "gen:5");
    let existing = json!({"templateVersion": "t1", "overridesVersion": "o1", "clusterVersions": [
        {"clusterName": "m1", "version": "gen:4"}, {"clusterName": "m2", "version": "gen:9"},
        {"clusterName": "m3", "version": "rv:12"}]});
    let selected: BTreeSet<String> = ["m1", "m2", "m3"].iter().map(|s| s.to_string()).collect();
    // Mid-rollout: the previous hashes, later waves' entries, not the canary's.
    assert_eq!(
        record.propagated_versions(Some(&existing), &selected, false),
        json!({"templateVersion": "t1", "overridesVersion": "o1", "clusterVersions": [
            {"clusterName": "m2", "version": "gen:9"}, {"clusterName": "m3", "version": "rv:12"}]})
    );
    record.writing("m2", NOW + 100);
    record.wrote("m2", "gen:10");
    record.writing("m3", NOW + 100);
    record.wrote("m3", "rv:20");
    assert_eq!(
        record.propagated_versions(Some(&existing), &selected, true),
        json!({"templateVersion": "t2", "overridesVersion": "o2", "clusterVersions": [
            {"clusterName": "m1", "version": "gen:5"}, {"clusterName": "m2", "version": "gen:10"},
            {"clusterName": "m3", "version": "rv:20"}]})
    );
}

#[test]
fn abort_rolls_back_only_to_a_known_template() {
    let old = Target {
        template_version: "t1".into(),
        overrides_version: "o1".into(),
    };
    let other = Target {
        template_version: "t0".into(),
        overrides_version: "o1".into(),
    };
    let mut record = RolloutRecord::resume(None, &Target::default());
    record.writing("m2", NOW);
    record.writing("m1", NOW);
    record.wrote("m1", "gen:3");
    struct Row {
        name: &'static str,
        record: Option<RolloutRecord>,
        recorded: Option<Target>,
        previous: Option<Target>,
        want: Result<Rollback, &'static str>,
    }
    let rows = [
        Row {
            name: "template known",
            record: Some(record.clone()),
            recorded: Some(old.clone()),
            previous: Some(old.clone()),
            want: Ok(Rollback {
                to: old.clone(),
                members: names(&["m1", "m2"]),
            }),
        },
        Row {
            name: "previous template unknown",
            record: Some(record.clone()),
            recorded: Some(old.clone()),
            previous: None,
            want: Err(
                "previous template unknown: the PropagatedVersion records template t1; give it with -f or --previous FILE",
            ),
        },
        Row {
            name: "another template given",
            record: Some(record.clone()),
            recorded: Some(old.clone()),
            previous: Some(other),
            want: Err(
                "previous template unknown: the given template hashes to t0/o1, the PropagatedVersion records t1/o1",
            ),
        },
        Row {
            name: "a new object has no previous version",
            record: Some(record),
            recorded: None,
            previous: Some(old.clone()),
            want: Err("no previous version is recorded: the members that got this one keep it"),
        },
        Row {
            name: "nothing in progress",
            record: None,
            recorded: Some(old.clone()),
            previous: Some(old),
            want: Err("no rollout in progress"),
        },
    ];
    for r in rows {
        let got = abort(r.record.as_ref(), r.recorded.as_ref(), r.previous.as_ref());
        assert_eq!(
            got.map_err(|e| e.to_string()),
            r.want.map_err(str::to_string),
            "{}",
            r.name
        );
    }
}

#[test]
fn waves_are_assigned_first_match_and_the_rest_last() {
    struct Row {
        name: &'static str,
        policy: Value,
        /// The planned waves as (policy index, batches).
        want: Vec<(usize, Vec<Vec<&'static str>>)>,
    }
    let members = [
        ("e", labels(&[])),
        ("b", labels(&[("tier", "prod")])),
        ("a", labels(&[("tier", "prod")])),
        ("c", labels(&[("tier", "prod"), ("canary", "yes")])),
        ("d", labels(&[])),
    ];
    let rows = [
        Row {
            name: "no waves: one wave of all",
            policy: json!({}),
            want: vec![(0, vec![vec!["a", "b", "c", "d", "e"]])],
        },
        Row {
            name: "a member in two waves goes in the first",
            policy: json!({"waves": [{"clusterSelector": {"matchLabels": {"canary": "yes"}}}, {"clusterSelector": {"matchLabels": {"tier": "prod"}}}]}),
            want: vec![
                (0, vec![vec!["c"]]),
                (1, vec![vec!["a", "b"]]),
                (2, vec![vec!["d", "e"]]),
            ],
        },
        Row {
            name: "an empty wave is skipped, names not placed are ignored",
            policy: json!({"waves": [{"clusters": ["zz"]}, {"clusters": ["e", "zz"]}]}),
            want: vec![(1, vec![vec!["e"]]), (2, vec![vec!["a", "b", "c", "d"]])],
        },
        // OCM TestCalculateRolloutSize: a count, a percentage rounded up,
        // 0 and out of range fall back to the whole group.
        Row {
            name: "maxConcurrency 2",
            policy: json!({"maxConcurrency": 2}),
            want: vec![(0, vec![vec!["a", "b"], vec!["c", "d"], vec!["e"]])],
        },
        Row {
            name: "maxConcurrency 30% of 5 is 2",
            policy: json!({"maxConcurrency": "30%"}),
            want: vec![(0, vec![vec!["a", "b"], vec!["c", "d"], vec!["e"]])],
        },
        Row {
            name: "maxConcurrency 0 is the whole wave",
            policy: json!({"maxConcurrency": 0}),
            want: vec![(0, vec![vec!["a", "b", "c", "d", "e"]])],
        },
        Row {
            name: "maxConcurrency above the wave is the whole wave",
            policy: json!({"maxConcurrency": 9}),
            want: vec![(0, vec![vec!["a", "b", "c", "d", "e"]])],
        },
        Row {
            name: "maxConcurrency counts per wave",
            policy: json!({"waves": [{"clusters": ["a"]}], "maxConcurrency": "50%"}),
            want: vec![
                (0, vec![vec!["a"]]),
                (1, vec![vec!["b", "c"], vec!["d", "e"]]),
            ],
        },
    ];
    for r in rows {
        let got = assign_waves(&policy(r.policy), members.iter().map(|(n, l)| (*n, l)));
        let got: Vec<(usize, Vec<Vec<String>>)> =
            got.into_iter().map(|w| (w.wave, w.batches)).collect();
        let want: Vec<(usize, Vec<Vec<String>>)> = r
            .want
            .into_iter()
            .map(|(i, bs)| (i, bs.into_iter().map(|b| names(&b)).collect()))
            .collect();
        assert_eq!(got, want, "{}", r.name);
    }
}

#[test]
fn policies_read_as_written() {
    let p = policy(
        json!({"waves": [{"clusters": ["m1"]}, {"clusterSelector": {"matchLabels": {"tier": "prod"}}}],
        "progressDeadline": "1h30m", "minSuccessTime": "90s", "maxFailures": "10%", "maxConcurrency": 3}),
    );
    assert_eq!(p.waves.len(), 2);
    assert_eq!(p.waves[0], Wave::Clusters(names(&["m1"])));
    assert_eq!(
        p.waves[1].describe(),
        r#"clusterSelector {"matchLabels":{"tier":"prod"}}"#
    );
    assert_eq!(p.progress_deadline, Some(Duration::from_secs(5400)));
    assert_eq!(p.min_success_time, Duration::from_secs(90));
    assert_eq!(p.max_failures, IntOrPercent::Percent(10));
    assert_eq!(p.max_concurrency, Some(IntOrPercent::Count(3)));
    // OCM TestParseTimeout: "None" and absent are no deadline; OCM's
    // units h, m, s (Go's ms too); "0" is zero, as Go's ParseDuration.
    struct Row {
        text: &'static str,
        want: Option<Duration>,
    }
    for r in [
        Row {
            text: "2h",
            want: Some(Duration::from_secs(7200)),
        },
        Row {
            text: "30m",
            want: Some(Duration::from_secs(1800)),
        },
        Row {
            text: "10s",
            want: Some(Duration::from_secs(10)),
        },
        Row {
            text: "None",
            want: None,
        },
        Row {
            text: "0",
            want: Some(Duration::ZERO),
        },
    ] {
        assert_eq!(
            policy(json!({"progressDeadline": r.text})).progress_deadline,
            r.want,
            "{}",
            r.text
        );
    }
    assert_eq!(policy(json!({})), RolloutPolicy::all_at_once());
    // OCM TestCalculateRolloutSize, of 100 members.
    for (value, want) in [
        (IntOrPercent::Count(50), 50),
        (IntOrPercent::Percent(30), 30),
        (IntOrPercent::Count(101), 100),
        (IntOrPercent::Percent(1), 1),
    ] {
        assert_eq!(value.of(100), want, "{value}");
    }
    assert_eq!(IntOrPercent::Percent(50).of(3), 2, "rounded up");
}

#[test]
fn malformed_policies_name_the_field() {
    struct Row {
        policy: &'static str,
        error: &'static str,
    }
    let rows = [
        Row {
            policy: r#"{"waves": [{"clusters": ["m1"]}, {"clusterSelector": {"matchLabels": "tier=prod"}}]}"#,
            error: "waves[1].clusterSelector.matchLabels is not an object",
        },
        Row {
            policy: r#"{"waves": [{"clusterSelector": {"matchLabels": {"tier": 1}}}]}"#,
            error: "waves[0].clusterSelector.matchLabels[tier] is not a string",
        },
        Row {
            policy: r#"{"waves": [{"clusterSelector": {"matchExpressions": [{"key": "tier", "operator": "Near"}]}}]}"#,
            error: r#"waves[0].clusterSelector.matchExpressions[0]: "Near" is not a valid label selector operator"#,
        },
        Row {
            policy: r#"{"waves": [{"clusterSelector": {"matchLabels": {"bad key": "x"}}}]}"#,
            error: r#"waves[0].clusterSelector: invalid label key "bad key": must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"#,
        },
        Row {
            policy: r#"{"waves": [{"clusters": ["m1"], "clusterSelector": {}}]}"#,
            error: "waves[0]: exactly one of clusters and clusterSelector is required",
        },
        Row {
            policy: r#"{"waves": [{}]}"#,
            error: "waves[0]: exactly one of clusters and clusterSelector is required",
        },
        Row {
            policy: r#"{"waves": [{"clusters": ["m1"], "name": "canary"}]}"#,
            error: r#"waves[0]: unknown field "name" (known: clusters, clusterSelector, approval)"#,
        },
        Row {
            policy: r#"{"waves": [{"clusters": ["m1", 2]}]}"#,
            error: "waves[0].clusters[1] is not a cluster name",
        },
        Row {
            policy: r#"{"waves": [{"clusters": "m1"}]}"#,
            error: "waves[0].clusters is not a list",
        },
        Row {
            policy: r#"{"waves": {"clusters": ["m1"]}}"#,
            error: "waves is not a list",
        },
        Row {
            policy: r#"{"waves": ["m1"]}"#,
            error: "waves[0] is not an object",
        },
        Row {
            policy: r#"{"progressDeadline": "10x"}"#,
            error: r#"progressDeadline: "10x" is not a duration"#,
        },
        Row {
            policy: r#"{"progressDeadline": "10"}"#,
            error: r#"progressDeadline: "10" is not a duration"#,
        },
        Row {
            policy: r#"{"progressDeadline": "2d"}"#,
            error: r#"progressDeadline: "2d" is not a duration"#,
        },
        Row {
            policy: r#"{"minSuccessTime": "None"}"#,
            error: r#"minSuccessTime: "None" is not a duration"#,
        },
        Row {
            policy: r#"{"minSuccessTime": 60}"#,
            error: "minSuccessTime: 60 is not a duration",
        },
        Row {
            policy: r#"{"maxFailures": "150%"}"#,
            error: r#"maxFailures: "150%" is not a count or a percentage from 0% to 100%"#,
        },
        Row {
            policy: r#"{"maxFailures": -1}"#,
            error: "maxFailures: -1 is not a count or a percentage from 0% to 100%",
        },
        // OCM TestCalculateRolloutSize "maxConcurrency type is string
        // without percentage": a string must be a percentage.
        Row {
            policy: r#"{"maxConcurrency": "3"}"#,
            error: r#"maxConcurrency: "3" is not a count or a percentage from 0% to 100%"#,
        },
        Row {
            policy: r#"{"maxConcurrency": "invalid"}"#,
            error: r#"maxConcurrency: "invalid" is not a count or a percentage from 0% to 100%"#,
        },
        Row {
            policy: r#"{"maxUnavailable": 1}"#,
            error: r#"unknown field "maxUnavailable" (known: waves, progressDeadline, minSuccessTime, maxFailures, maxConcurrency)"#,
        },
        Row {
            policy: "[]",
            error: "not an object",
        },
        Row {
            policy: "{waves",
            error: "not JSON: key must be a string at line 1 column 2",
        },
    ];
    for r in rows {
        let got = RolloutPolicy::parse(r.policy)
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert_eq!(got, Err(r.error.to_string()), "{}", r.policy);
    }
    let fed = json!({"kind": "FederatedDeployment", "metadata": {"name": "web", "namespace": "shop",
        "annotations": {ROLLOUT_ANNOTATION: r#"{"progressDeadline": "10x"}"#}}});
    assert_eq!(
        RolloutPolicy::of_object(&fed).unwrap_err().to_string(),
        r#"FederatedDeployment "shop/web": annotation kubefedctl.kubefed.io/rollout: progressDeadline: "10x" is not a duration"#
    );
    assert_eq!(RolloutPolicy::of_object(&json!({"metadata": {}})), Ok(None));
}

#[test]
fn plans_render_their_waves() {
    let p = policy(
        json!({"waves": [{"clusters": ["m1"]}, {"clusterSelector": {"matchLabels": {"tier": "prod"}}}],
        "maxConcurrency": 1, "progressDeadline": "10m"}),
    );
    let members: Vec<MemberState> = [
        M::ready("m1", false, NOW - 900, NOW - 800),
        M::pending("m2", true, NOW - 700),
        M::old("m3", true),
        M::old("m4", false),
    ]
    .iter()
    .map(M::state)
    .collect();
    let input = RolloutInput {
        policy: &p,
        members: &members,
        from: step(1, 0),
        approved: &BTreeSet::new(),
        now: NOW,
    };
    let halted = plan(input);
    assert_eq!(
        waves_markdown("FederatedDeployment shop/web", &halted),
        "#### rollout of `FederatedDeployment shop/web`\n\n\
         | wave | batch | members | when |\n|---|---|---|---|\n\
         | wave 1 | 1 | `m1` | done |\n\
         | wave 2 | 1 | `m2` | halted |\n\
         | wave 2 | 2 | `m3` | later |\n\
         | wave 3 (members in no wave) | 1 | `m4` | later |\n\
         \nrollout halted in wave 2: m2 (not ready within the progress deadline: 0/3 available) (tolerated: 0)\n"
    );
    let fresh: Vec<MemberState> = ["m1", "m2", "m3", "m4"]
        .iter()
        .map(|n| M::old(n, *n == "m2" || *n == "m3").state())
        .collect();
    let dry = plan(RolloutInput {
        members: &fresh,
        from: Step::default(),
        ..input
    });
    assert_eq!(
        waves_text(&dry),
        "wave 1 batch 1: m1 (now)\nwave 2 batch 1: m2 (later)\nwave 2 batch 2: m3 (later)\n\
         wave 3 (members in no wave) batch 1: m4 (later)\n"
    );
}
