//! The decide step under each take-over and apply strategy
//! (`strategy`): what a member gets, and what is left alone.

use super::action::{Action, ClusterStatus};
use super::desired::{MANAGED_LABEL, TargetType};
use super::drift::Drift;
use super::federated::FederatedObject;
use super::member::{MemberState, SyncSettings, after_conflict, sync_decisions};
use super::overrides::MemberCluster;
use super::strategy::{APPLY_ANNOTATION, Strategy, TAKE_OVER_ANNOTATION};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();
const SETTINGS: SyncSettings = SyncSettings {
    adopt_resources: true,
    force_conflicts: false,
    report_only: false,
};

fn fed(annotations: Value) -> Value {
    json!({"kind": "FederatedConfigMap", "metadata": {"name": "cm", "namespace": "ns", "annotations": annotations},
           "spec": {"template": {"data": {"k": "v"}}}})
}

fn copy(data: Value, managed: bool) -> Value {
    let mut o = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns",
        "resourceVersion": "5", "labels": {"team": "a"}}, "data": data});
    if managed {
        o["metadata"]["labels"][MANAGED_LABEL] = json!("true");
    }
    o
}

fn target() -> TargetType {
    TargetType::new("", "v1", "ConfigMap")
}

fn conflict(fed: &Value, live: &Value) -> Result<Action, (ClusterStatus, String)> {
    after_conflict(fed, &target(), MemberCluster::named("m1"), live, SETTINGS)
}

fn decide(fed: &Value, live: Option<Value>, placed: bool) -> (Action, Option<ClusterStatus>) {
    let m = MemberState {
        cluster: "m1",
        labels: &NO_LABELS,
        ready: true,
        live,
        is_host_namespace: false,
        unobserved: None,
    };
    let selected: BTreeSet<String> = placed.then(|| "m1".to_string()).into_iter().collect();
    let strategy = Strategy::of(&Value::Null, fed, true, false).unwrap();
    let d = sync_decisions(
        FederatedObject::new(fed),
        &target(),
        &selected,
        &[m],
        None,
        SETTINGS,
        strategy,
    );
    (d[0].action.clone(), d[0].status)
}

#[test]
fn if_no_diff_takes_over_an_equal_copy_and_refuses_a_different_one_naming_paths() {
    let f = fed(json!({TAKE_OVER_ANNOTATION: "IfNoDiff"}));
    let equal = copy(json!({"k": "v", "extra": "kept"}), false);
    assert!(matches!(
        conflict(&f, &equal),
        Ok(Action::Update { adopt: true, .. })
    ));
    let (status, why) = conflict(&f, &copy(json!({"k": "other"}), false)).unwrap_err();
    assert_eq!(status, ClusterStatus::AlreadyExists);
    assert!(
        why.contains("differs at /data/k") && why.contains("IfNoDiff"),
        "{why}"
    );
    // A copy the federation manages already is updated whatever it holds.
    assert!(matches!(
        conflict(&f, &copy(json!({"k": "other"}), true)),
        Ok(Action::Update { adopt: false, .. })
    ));
}

#[test]
fn never_leaves_every_existing_copy_and_always_takes_any() {
    let never = fed(json!({TAKE_OVER_ANNOTATION: "Never"}));
    let (status, _) = conflict(&never, &copy(json!({"k": "v"}), false)).unwrap_err();
    assert_eq!(status, ClusterStatus::AlreadyExists);
    let always = fed(json!({TAKE_OVER_ANNOTATION: "Always"}));
    assert!(matches!(
        conflict(&always, &copy(json!({"k": "x"}), false)),
        Ok(Action::Update { adopt: true, .. })
    ));
    // An unlabelled copy seen in a listing is refused the same way.
    let (action, status) = decide(&never, Some(copy(json!({"k": "v"}), false)), true);
    assert_eq!(
        (action, status),
        (Action::Skip, Some(ClusterStatus::AlreadyExists))
    );
}

#[test]
fn report_diff_writes_nothing_and_says_how_each_copy_differs() {
    let f = fed(json!({APPLY_ANNOTATION: "ReportDiff"}));
    let (action, status) = decide(&f, Some(copy(json!({"k": "by hand"}), true)), true);
    let Action::Report(Drift::Fields(fields)) = action else {
        panic!("{action:?}")
    };
    assert_eq!(status, Some(ClusterStatus::Drifted));
    assert_eq!(fields[0].path, "/data/k");
    assert_eq!(
        (fields[0].member.clone(), fields[0].desired.clone()),
        (Some(json!("by hand")), Some(json!("v")))
    );
    assert_eq!(
        decide(&f, Some(copy(json!({"k": "v"}), true)), true),
        (
            Action::Report(Drift::Fields(vec![])),
            Some(ClusterStatus::Ok)
        )
    );
    assert_eq!(decide(&f, None, true).0, Action::Report(Drift::Missing));
    assert_eq!(
        decide(&f, Some(copy(json!({"k": "v"}), true)), false).0,
        Action::Report(Drift::Unplaced)
    );
    assert_eq!(decide(&f, None, false).0, Action::Nothing);
}

#[test]
fn a_report_only_run_reports_objects_that_would_apply() {
    let f = fed(json!({}));
    let m = MemberState {
        cluster: "m1",
        labels: &NO_LABELS,
        ready: true,
        live: None,
        is_host_namespace: false,
        unobserved: None,
    };
    let settings = SyncSettings {
        report_only: true,
        ..SETTINGS
    };
    let strategy = Strategy::of(&Value::Null, &f, true, true).unwrap();
    let selected = BTreeSet::from(["m1".to_string()]);
    let d = sync_decisions(
        FederatedObject::new(&f),
        &target(),
        &selected,
        &[m],
        None,
        settings,
        strategy,
    );
    assert_eq!(d[0].action, Action::Report(Drift::Missing));
}

#[test]
fn fields_the_retain_rules_keep_are_not_drift() {
    let f = fed(json!({APPLY_ANNOTATION: "ReportDiff",
        "kubefedctl.kubefed.io/retain-fields": "data.k"}));
    let (action, status) = decide(&f, Some(copy(json!({"k": "theirs"}), true)), true);
    assert_eq!(action, Action::Report(Drift::Fields(vec![])));
    assert_eq!(status, Some(ClusterStatus::Ok));
    // Without the rule, the same copy differs there.
    let plain = fed(json!({APPLY_ANNOTATION: "ReportDiff"}));
    let (action, _) = decide(&plain, Some(copy(json!({"k": "theirs"}), true)), true);
    assert!(matches!(action, Action::Report(Drift::Fields(f)) if f.len() == 1));
}
