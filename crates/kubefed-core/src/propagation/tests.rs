//! The sync rules ([`super::member`], [`super::deletion`],
//! [`super::status`], [`super::action`]) against upstream's cases.

use super::action::*;
use super::deletion::*;
use super::member::*;
use super::status::*;
use crate::propagation::desired::{MANAGED_LABEL, TargetType};
use crate::propagation::federated::FederatedObject;
use crate::propagation::strategy::Strategy;
use crate::propagation::version::{overrides_version, template_version};
use serde_json::{Value, json};
use std::collections::BTreeSet;

fn view(fed: &Value) -> FederatedObject<'_> {
    FederatedObject::new(fed)
}

fn target() -> TargetType {
    TargetType::new("", "v1", "ConfigMap")
}

fn fed() -> Value {
    json!({"kind": "FederatedConfigMap", "metadata": {"name": "cm", "namespace": "ns", "generation": 2,
            "finalizers": [SYNC_FINALIZER]},
           "spec": {"template": {"data": {"k": "v"}}}})
}

fn live(rv: &str, label: Option<&str>) -> Value {
    let mut o = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "ns", "resourceVersion": rv, "labels": {}}, "data": {"k": "v"}});
    if let Some(l) = label {
        o["metadata"]["labels"][MANAGED_LABEL] = json!(l);
    }
    o
}

fn versions_for(fed: &Value, cluster: &str, version: &str) -> Value {
    json!({"templateVersion": template_version(fed).unwrap(), "overridesVersion": overrides_version(fed).unwrap(),
           "clusterVersions": [{"clusterName": cluster, "version": version}]})
}

fn set(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn member<'a>(cluster: &'a str, ready: bool, live: Option<&'a Value>) -> MemberState<'a> {
    MemberState {
        cluster,
        labels: &NO_LABELS,
        ready,
        live: live.cloned(),
        is_host_namespace: false,
        unobserved: None,
    }
}

const ADOPT: SyncSettings = SyncSettings {
    adopt_resources: true,
    force_conflicts: false,
    report_only: false,
};
const NO_ADOPT: SyncSettings = SyncSettings {
    adopt_resources: false,
    force_conflicts: false,
    report_only: false,
};

fn one(
    selected: bool,
    m: MemberState,
    versions: Option<&Value>,
    settings: SyncSettings,
) -> Decision {
    let sel = if selected {
        set(&[m.cluster])
    } else {
        set(&[])
    };
    sync_decisions(
        view(&fed()),
        &target(),
        &sel,
        &[m],
        versions,
        settings,
        Strategy::plain(settings.adopt_resources),
    )
    .remove(0)
}

/// A row of [`sync_decision_table`]: one member as the decision sees it,
/// and the decision wanted.
struct SyncRow<'a> {
    name: &'a str,
    selected: bool,
    ready: bool,
    live: Option<&'a Value>,
    versions: Option<&'a Value>,
    settings: SyncSettings,
    action: &'a str,
    status: Option<ClusterStatus>,
}

impl SyncRow<'_> {
    /// A placed, ready member holding nothing, adoption on.
    fn placed() -> Self {
        SyncRow {
            name: "",
            selected: true,
            ready: true,
            live: None,
            versions: None,
            settings: ADOPT,
            action: "",
            status: None,
        }
    }
}

#[test]
fn sync_decision_table() {
    let managed = live("5", Some("true"));
    let unlabelled = live("5", None);
    let label_false = live("5", Some("false"));
    let mut terminating = live("5", Some("true"));
    terminating["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
    let matching = versions_for(&fed(), "c1", "rv:5");
    let stale = versions_for(&fed(), "c1", "rv:4");
    let rows = [
        SyncRow {
            name: "unready selected",
            ready: false,
            action: "skip",
            status: Some(ClusterStatus::ClusterNotReady),
            ..SyncRow::placed()
        },
        SyncRow {
            name: "unready unselected",
            selected: false,
            ready: false,
            live: Some(&managed),
            action: "nothing",
            status: None,
            ..SyncRow::placed()
        },
        SyncRow {
            name: "unselected absent",
            selected: false,
            action: "nothing",
            status: None,
            ..SyncRow::placed()
        },
        SyncRow {
            name: "unselected unmanaged is never touched",
            selected: false,
            live: Some(&unlabelled),
            action: "nothing",
            status: None,
            ..SyncRow::placed()
        },
        SyncRow {
            name: "unselected managed",
            selected: false,
            live: Some(&managed),
            action: "delete",
            status: Some(ClusterStatus::WaitingForRemoval),
            ..SyncRow::placed()
        },
        SyncRow {
            name: "unselected terminating",
            selected: false,
            live: Some(&terminating),
            action: "nothing",
            status: Some(ClusterStatus::WaitingForRemoval),
            ..SyncRow::placed()
        },
        SyncRow {
            name: "selected absent",
            action: "create",
            status: Some(ClusterStatus::Ok),
            ..SyncRow::placed()
        },
        SyncRow {
            name: "adoption disabled",
            live: Some(&unlabelled),
            settings: NO_ADOPT,
            action: "skip",
            status: Some(ClusterStatus::AlreadyExists),
            ..SyncRow::placed()
        },
        SyncRow {
            name: "adoption enabled",
            live: Some(&unlabelled),
            action: "adopt",
            status: Some(ClusterStatus::Ok),
            ..SyncRow::placed()
        },
        SyncRow {
            name: "label false",
            live: Some(&label_false),
            action: "skip",
            status: Some(ClusterStatus::ManagedLabelFalse),
            ..SyncRow::placed()
        },
        SyncRow {
            name: "no recorded version",
            live: Some(&managed),
            action: "update",
            status: Some(ClusterStatus::Ok),
            ..SyncRow::placed()
        },
        SyncRow {
            name: "stale version",
            live: Some(&managed),
            versions: Some(&stale),
            action: "update",
            status: Some(ClusterStatus::Ok),
            ..SyncRow::placed()
        },
        SyncRow {
            name: "matching version",
            live: Some(&managed),
            versions: Some(&matching),
            action: "unchanged",
            status: Some(ClusterStatus::Ok),
            ..SyncRow::placed()
        },
    ];
    for r in rows {
        let d = one(
            r.selected,
            member("c1", r.ready, r.live),
            r.versions,
            r.settings,
        );
        let action = match &d.action {
            Action::Update { adopt: true, .. } => "adopt",
            other => other.verb(),
        };
        assert_eq!(action, r.action, "{}", r.name);
        assert_eq!(d.status, r.status, "{}", r.name);
    }
}

#[test]
fn generation_tracked_objects_also_compare_metadata() {
    let deploy = TargetType::new("apps", "v1", "Deployment");
    let fed_d = json!({"metadata": {"name": "d", "namespace": "ns"}, "spec": {"template": {"metadata": {"labels": {"a": "1"}}}}});
    let mut obj = json!({"metadata": {"name": "d", "namespace": "ns", "generation": 3, "resourceVersion": "7",
        "labels": {"a": "1", MANAGED_LABEL: "true"}}});
    let versions = versions_for(&fed_d, "c1", "gen:3");
    let decide = |o: &Value| {
        sync_decisions(
            view(&fed_d),
            &deploy,
            &set(&["c1"]),
            &[member("c1", true, Some(o))],
            Some(&versions),
            ADOPT,
            Strategy::plain(true),
        )
        .remove(0)
        .action
    };
    assert_eq!(decide(&obj), Action::Unchanged);
    obj["metadata"]["labels"]["extra"] = json!("x");
    assert!(
        matches!(decide(&obj), Action::Update { adopt: false, .. }),
        "label drift on gen: objects"
    );
    // rv: objects are never re-compared
    let cm_fed = fed();
    let mut cm = live("5", Some("true"));
    cm["metadata"]["labels"]["extra"] = json!("x");
    let v = versions_for(&cm_fed, "c1", "rv:5");
    let d = sync_decisions(
        view(&cm_fed),
        &target(),
        &set(&["c1"]),
        &[member("c1", true, Some(&cm))],
        Some(&v),
        ADOPT,
        Strategy::plain(true),
    );
    assert_eq!(d[0].action, Action::Unchanged);
}

#[test]
fn host_namespace_is_unlabelled_never_deleted_and_adopted_even_without_adoption() {
    let ns_target = TargetType::new("", "v1", "Namespace");
    let fed_ns =
        json!({"kind": "FederatedNamespace", "metadata": {"name": "demo", "namespace": "demo"}});
    let mut host = json!({"metadata": {"name": "demo", "uid": "h", "resourceVersion": "3", "labels": {MANAGED_LABEL: "true"}}});
    let m = MemberState {
        cluster: "host",
        labels: &NO_LABELS,
        ready: true,
        live: Some(host.clone()),
        is_host_namespace: true,
        unobserved: None,
    };
    let d = sync_decisions(
        view(&fed_ns),
        &ns_target,
        &set(&[]),
        &[m],
        None,
        NO_ADOPT,
        Strategy::plain(false),
    );
    assert_eq!(d[0].action, Action::RemoveManagedLabel);
    assert_eq!(d[0].status, None);
    host["metadata"]["labels"] = json!({});
    let m = MemberState {
        cluster: "host",
        labels: &NO_LABELS,
        ready: true,
        live: Some(host.clone()),
        is_host_namespace: true,
        unobserved: None,
    };
    let d = sync_decisions(
        view(&fed_ns),
        &ns_target,
        &set(&["host"]),
        &[m],
        None,
        NO_ADOPT,
        Strategy::plain(false),
    );
    assert!(matches!(d[0].action, Action::Update { adopt: true, .. }));
}

#[test]
fn desired_errors_become_statuses() {
    let mut bad = fed();
    bad["spec"]["overrides"] =
        json!([{"clusterName": "c1", "clusterOverrides": [{"path": "/metadata/name"}]}]);
    let d = sync_decisions(
        view(&bad),
        &target(),
        &set(&["c1"]),
        &[member("c1", true, None)],
        None,
        ADOPT,
        Strategy::plain(true),
    );
    assert_eq!(d[0].action, Action::Skip);
    assert_eq!(d[0].status, Some(ClusterStatus::ApplyOverridesFailed));
    assert!(d[0].message.as_deref().unwrap().contains("/metadata/name"));
}

#[test]
fn deletion_and_orphaning() {
    let managed = live("5", Some("true"));
    let mut terminating = managed.clone();
    terminating["metadata"]["deletionTimestamp"] = json!("t");
    let mut deleting = fed();
    deleting["metadata"]["deletionTimestamp"] = json!("t");
    deleting["metadata"]["annotations"] = json!({DELETE_OPTION_ANNOTATION: "{\"propagationPolicy\":\"Orphan\",\"dryRun\":[\"All\"]}"});
    let members = [
        member("a", true, Some(&managed)),
        member("b", true, Some(&terminating)),
        member("c", true, None),
        member("d", false, Some(&managed)),
        member("outside", true, Some(&managed)),
    ];
    let placed = set(&["a", "b", "c", "d"]);
    let plan = deletion_decisions(view(&deleting), &placed, &members).unwrap();
    assert_eq!(plan.decisions.len(), 2);
    assert_eq!(plan.decisions[0].cluster, "a");
    assert_eq!(
        plan.decisions[0].action,
        Action::Delete {
            options: Some(json!({"propagationPolicy": "Orphan"}))
        }
    );
    assert_eq!(
        (
            plan.decisions[1].cluster.as_str(),
            &plan.decisions[1].action
        ),
        ("b", &Action::AwaitRemoval),
        "a terminating copy is waited for, not deleted again"
    );
    assert_eq!(plan.remaining, vec!["a", "b"]);
    assert_eq!(plan.not_ready, vec!["d"]);
    assert!(!plan.remove_finalizer);

    let gone = [member("a", true, None), member("c", true, None)];
    assert!(
        deletion_decisions(view(&deleting), &set(&["a", "c"]), &gone)
            .unwrap()
            .remove_finalizer
    );

    let mut orphaning = deleting.clone();
    orphaning["metadata"]["annotations"] = json!({ORPHAN_ANNOTATION: "true"});
    let plan = deletion_decisions(view(&orphaning), &placed, &members).unwrap();
    assert!(
        !plan.remove_finalizer,
        "orphaning keeps the finalizer until the labels are gone"
    );
    assert!(plan.blocked_by().is_empty(), "unready d is cleaned later");
    assert_eq!(
        plan.decisions
            .iter()
            .map(|d| d.cluster.as_str())
            .collect::<Vec<_>>(),
        vec!["a"]
    );
    assert_eq!(plan.decisions[0].action, Action::RemoveManagedLabel);
    assert_eq!(plan.not_ready, vec!["d"]);

    let mut no_finalizer = deleting.clone();
    no_finalizer["metadata"]["finalizers"] = json!([]);
    let plan = deletion_decisions(view(&no_finalizer), &placed, &members).unwrap();
    assert!(plan.decisions.is_empty() && !plan.remove_finalizer && !plan.has_finalizer);

    let unlisted = [MemberState {
        unobserved: Some("list failed"),
        ..member("a", true, None)
    }];
    let plan = deletion_decisions(view(&deleting), &set(&["a"]), &unlisted).unwrap();
    assert_eq!(plan.unobserved, vec!["a"]);
    assert!(!plan.remove_finalizer, "nothing is known of a's copy");

    let mut bad = deleting.clone();
    bad["metadata"]["annotations"] = json!({DELETE_OPTION_ANNOTATION: "nope"});
    assert!(
        deletion_decisions(view(&bad), &placed, &members)
            .unwrap_err()
            .to_string()
            .contains("'nope'")
    );
    let mut orphan_wrong_value = deleting.clone();
    orphan_wrong_value["metadata"]["annotations"] = json!({ORPHAN_ANNOTATION: "True"});
    assert!(!is_orphaning(view(&orphan_wrong_value)));
}

// Upstream util/deletionannotation_test.go.
#[test]
fn delete_option_annotation_cases() {
    let with = |v: &str| json!({"metadata": {"annotations": {DELETE_OPTION_ANNOTATION: v}}});
    assert_eq!(delete_options(view(&json!({}))).unwrap(), None);
    assert_eq!(
        delete_options(view(&with(r#"{"propagationPolicy":"Orphan"}"#))).unwrap(),
        Some(json!({"propagationPolicy": "Orphan"}))
    );
    assert_eq!(
        delete_options(view(&with(r#"{"gracePeriodSeconds":5}"#))).unwrap(),
        Some(json!({"gracePeriodSeconds": 5}))
    );
    assert_eq!(
        delete_options(view(&with(
            r#"{"propagationPolicy":"Orphan","gracePeriodSeconds":5}"#
        )))
        .unwrap(),
        Some(json!({"propagationPolicy": "Orphan", "gracePeriodSeconds": 5}))
    );
}

#[test]
fn orphan_cleanup_unlabels_managed_objects() {
    let managed = live("1", Some("true"));
    let unlabelled = live("1", None);
    let (d, not_ready) = orphan_cleanup_decisions(&[
        member("a", true, Some(&managed)),
        member("b", true, Some(&unlabelled)),
        member("c", false, Some(&managed)),
    ]);
    assert_eq!(d.len(), 1);
    assert_eq!(
        (d[0].cluster.as_str(), &d[0].action),
        ("a", &Action::RemoveManagedLabel)
    );
    assert_eq!(not_ready, vec!["c"]);
}

fn outcome(c: &str, s: ClusterStatus) -> ClusterOutcome {
    ClusterOutcome {
        cluster: c.into(),
        status: s,
        remote_status: None,
    }
}

#[test]
fn status_is_built_sorted_with_the_right_reason() {
    let f = fed();
    let up = federated_status(
        &f,
        AggregateReason::Success,
        &[
            outcome("b", ClusterStatus::ClusterNotReady),
            outcome("a", ClusterStatus::Ok),
        ],
        false,
        false,
        "T1",
    );
    assert!(up.changed);
    assert_eq!(up.status["observedGeneration"], 2);
    assert_eq!(
        up.status["clusters"],
        json!([{"name": "a"}, {"name": "b", "status": "ClusterNotReady"}])
    );
    assert_eq!(
        up.status["conditions"],
        json!([{"type": "Propagation", "status": "False", "reason": "CheckClusters",
                "lastTransitionTime": "T1", "lastUpdateTime": "T1"}])
    );
    let ok = federated_status(
        &f,
        AggregateReason::Success,
        &[outcome("a", ClusterStatus::Ok)],
        false,
        false,
        "T1",
    );
    assert_eq!(ok.status["conditions"][0]["status"], "True");
    assert!(ok.status["conditions"][0].get("reason").is_none());
    let nnf = federated_status(
        &f,
        AggregateReason::NamespaceNotFederated,
        &[],
        false,
        false,
        "T1",
    );
    assert_eq!(
        nnf.status["conditions"][0]["reason"],
        "NamespaceNotFederated"
    );
}

// Upstream sync/status/status_test.go truth table (existing status: one
// cluster "cluster1" OK, condition True).
#[test]
fn status_changed_truth_table() {
    let mut f = fed();
    f["metadata"]["generation"] = json!(1);
    f["status"] = json!({"observedGeneration": 1, "clusters": [{"name": "cluster1"}],
        "conditions": [{"type": "Propagation", "status": "True", "lastTransitionTime": "T0", "lastUpdateTime": "T0"}]});
    let run = |outcomes: &[ClusterOutcome], reason, remote: bool, f: &Value| {
        federated_status(f, reason, outcomes, remote, false, "T1").changed
    };
    let ok = outcome("cluster1", ClusterStatus::Ok);
    assert!(run(
        &[outcome("cluster1", ClusterStatus::ClusterNotReady)],
        AggregateReason::Success,
        false,
        &f
    ));
    assert!(run(&[], AggregateReason::Success, false, &f));
    assert!(
        run(
            std::slice::from_ref(&ok),
            AggregateReason::Success,
            true,
            &f
        ),
        "no remote status with collection on"
    );
    assert!(!run(
        std::slice::from_ref(&ok),
        AggregateReason::Success,
        false,
        &f
    ));
    assert!(run(
        &[ok.clone(), outcome("cluster2", ClusterStatus::Ok)],
        AggregateReason::Success,
        false,
        &f
    ));
    assert!(run(
        std::slice::from_ref(&ok),
        AggregateReason::NamespaceNotFederated,
        false,
        &f
    ));
    let mut g = f.clone();
    g["status"]["observedGeneration"] = json!(0);
    let up = federated_status(
        &g,
        AggregateReason::Success,
        std::slice::from_ref(&ok),
        false,
        false,
        "T1",
    );
    assert!(up.changed, "generation 0 → 1");
    assert_eq!(
        up.status["conditions"][0]["lastUpdateTime"], "T0",
        "generation alone keeps timestamps"
    );
    // remote status: same → unchanged, different → changed
    let mut r = f.clone();
    r["status"]["clusters"] = json!([{"name": "cluster1", "remoteStatus": {"replicas": 1}}]);
    let with_rs = |v: Value| ClusterOutcome {
        cluster: "cluster1".into(),
        status: ClusterStatus::Ok,
        remote_status: Some(v),
    };
    assert!(!run(
        &[with_rs(json!({"replicas": 1}))],
        AggregateReason::Success,
        true,
        &r
    ));
    assert!(run(
        &[with_rs(json!({"replicas": 2}))],
        AggregateReason::Success,
        true,
        &r
    ));
}

#[test]
fn status_keeps_other_conditions_and_omits_empty_fields() {
    let mut f = fed();
    f["metadata"]["generation"] = json!(0);
    f["status"] = json!({"conditions": [{"type": "Other", "status": "True"},
        {"type": "Propagation", "status": "True", "lastTransitionTime": "T0", "lastUpdateTime": "T0"}],
        "clusters": [{"name": "a", "remoteStatus": {"n": 1.0}}]});
    let up = federated_status(&f, AggregateReason::Success, &[], false, false, "T1");
    assert!(up.status.get("observedGeneration").is_none());
    assert!(up.status.get("clusters").is_none(), "clusters dropped");
    assert_eq!(up.status["conditions"][0]["type"], "Other");
    assert_eq!(up.status["conditions"][1]["lastTransitionTime"], "T0");
    assert_eq!(
        up.status["conditions"][1]["lastUpdateTime"], "T1",
        "clusters changed"
    );
    // remote status numbers compare as float64
    let same = ClusterOutcome {
        cluster: "a".into(),
        status: ClusterStatus::Ok,
        remote_status: Some(json!({"n": 1})),
    };
    let up = federated_status(
        &f,
        AggregateReason::Success,
        std::slice::from_ref(&same),
        true,
        false,
        "T1",
    );
    assert!(!up.changed, "{:?}", up.status);
    // updated resources count only with remote statuses collected
    assert!(federated_status(&f, AggregateReason::Success, &[same], true, true, "T1").changed);
    let plain = ClusterOutcome {
        cluster: "a".into(),
        status: ClusterStatus::Ok,
        remote_status: None,
    };
    let mut g = f.clone();
    g["status"]["clusters"] = json!([{"name": "a"}]);
    assert!(!federated_status(&g, AggregateReason::Success, &[plain], false, true, "T1").changed);
}

#[test]
fn namespace_rules() {
    for ns in [
        "kube-system",
        "kube-public",
        "default",
        "kube-federation-system",
    ] {
        assert!(is_system_namespace(ns, "kube-federation-system"), "{ns}");
    }
    assert!(!is_system_namespace("demo", "kube-federation-system"));
    assert!(federated_namespace_name_is_valid(
        &json!({"metadata": {"name": "a", "namespace": "a"}})
    ));
    assert!(!federated_namespace_name_is_valid(
        &json!({"metadata": {"name": "a", "namespace": "b"}})
    ));
}

#[test]
fn recoverable_statuses() {
    assert!(ClusterStatus::CreationFailed.is_recoverable());
    assert!(ClusterStatus::DeletionTimedOut.is_recoverable());
    assert!(!ClusterStatus::AlreadyExists.is_recoverable());
    assert!(!ClusterStatus::ClusterNotReady.is_recoverable());
    assert_eq!(ClusterStatus::Ok.as_str(), "");
    assert_eq!(
        Action::Delete { options: None }.failure_status(),
        Some(ClusterStatus::DeletionFailed)
    );
    let outs = outcomes_on_success(&[
        Decision {
            cluster: "a".into(),
            action: Action::Nothing,
            status: None,
            message: None,
        },
        Decision {
            cluster: "b".into(),
            action: Action::Unchanged,
            status: Some(ClusterStatus::Ok),
            message: None,
        },
    ]);
    assert_eq!(outs, vec![outcome("b", ClusterStatus::Ok)]);
}

#[test]
fn a_federated_objects_readiness_is_its_least_ready_copys() {
    use crate::propagation::readiness::Readiness;
    let ready = Readiness::Ready;
    let pending = Readiness::Pending("0/1 available".into());
    let failed = Readiness::Failed("progress deadline exceeded".into());
    type Case<'a> = (&'a str, Vec<&'a Readiness>, bool, ReadyState);
    let cases: Vec<Case> = vec![
        (
            "every copy ready",
            vec![&ready, &ready],
            true,
            ReadyState::Ready,
        ),
        (
            "no copy at all, none placed",
            vec![],
            true,
            ReadyState::Ready,
        ),
        (
            "a placed member holds no copy",
            vec![&ready],
            false,
            ReadyState::NotReady,
        ),
        (
            "one pending",
            vec![&ready, &pending],
            true,
            ReadyState::NotReady,
        ),
        (
            "one failed wins",
            vec![&pending, &failed, &ready],
            true,
            ReadyState::Failed,
        ),
    ];
    for (name, copies, complete, want) in cases {
        assert_eq!(federated_readiness(copies, complete), want, "{name}");
    }
    assert_eq!(ReadyState::Ready.condition(), ("True", "MembersReady"));
    assert_eq!(
        ReadyState::NotReady.condition(),
        ("False", "MembersNotReady")
    );
    assert_eq!(ReadyState::Failed.condition(), ("False", "MembersFailed"));
}

#[test]
fn the_ready_condition_is_added_beside_propagation_and_written_only_on_change() {
    let prop = json!({"type": "Propagation", "status": "True", "lastTransitionTime": "T0", "lastUpdateTime": "T0"});
    let status = json!({"observedGeneration": 2, "conditions": [prop.clone()]});
    let added = with_ready(&status, ReadyState::NotReady, "T1").unwrap();
    assert_eq!(
        added["conditions"],
        json!([prop, {"type": "Ready", "status": "False", "reason": "MembersNotReady",
                      "lastUpdateTime": "T1", "lastTransitionTime": "T1"}])
    );
    assert_eq!(added["observedGeneration"], 2, "the rest is kept");
    assert_eq!(
        with_ready(&added, ReadyState::NotReady, "T2"),
        None,
        "the same again writes nothing"
    );
    let ready = with_ready(&added, ReadyState::Ready, "T2").unwrap();
    assert_eq!(ready["conditions"][1]["status"], "True");
    assert_eq!(ready["conditions"][1]["reason"], "MembersReady");
    assert_eq!(ready["conditions"][1]["lastTransitionTime"], "T2");
    let failed = with_ready(&ready, ReadyState::Failed, "T3").unwrap();
    assert_eq!(failed["conditions"][1]["reason"], "MembersFailed");
    // No status yet: one is made.
    let made = with_ready(&Value::Null, ReadyState::Ready, "T1").unwrap();
    assert_eq!(made["conditions"][0]["type"], "Ready");
}

#[test]
fn a_ready_condition_goes_unknown_when_copies_or_the_generation_change() {
    let mut f = fed();
    f["status"] = json!({"observedGeneration": 2, "clusters": [{"name": "a"}],
        "conditions": [{"type": "Propagation", "status": "True", "lastTransitionTime": "T0", "lastUpdateTime": "T0"},
                       {"type": "Ready", "status": "True", "reason": "MembersReady", "lastTransitionTime": "T0", "lastUpdateTime": "T0"}]});
    let ok = [outcome("a", ClusterStatus::Ok)];
    let ready_of = |s: &Value| s["conditions"][1].clone();
    // Nothing changed: nothing written, Ready kept.
    let same = federated_status(&f, AggregateReason::Success, &ok, false, false, "T1");
    assert!(!same.changed);
    assert_eq!(ready_of(&same.status)["status"], "True");
    // A copy updated in this pass: readiness is no longer known.
    let updated = federated_status(&f, AggregateReason::Success, &ok, false, true, "T1");
    assert!(updated.changed);
    assert_eq!(
        ready_of(&updated.status),
        json!({"type": "Ready", "status": "Unknown", "reason": "NotChecked",
               "lastUpdateTime": "T1", "lastTransitionTime": "T1"})
    );
    assert_eq!(
        updated.status["conditions"][0]["lastUpdateTime"], "T0",
        "Propagation as upstream"
    );
    // A new generation likewise.
    let mut g = f.clone();
    g["metadata"]["generation"] = json!(3);
    let newer = federated_status(&g, AggregateReason::Success, &ok, false, false, "T1");
    assert_eq!(ready_of(&newer.status)["status"], "Unknown");
    // Already Unknown: no further write for it.
    let mut h = f.clone();
    h["status"] = updated.status.clone();
    assert!(!federated_status(&h, AggregateReason::Success, &ok, false, true, "T2").changed);
    // Without a Ready condition, upstream's status exactly.
    let mut plain = f.clone();
    plain["status"]["conditions"].as_array_mut().unwrap().pop();
    let up = federated_status(&plain, AggregateReason::Success, &ok, false, true, "T1");
    assert!(!up.changed);
    assert_eq!(up.status["conditions"].as_array().unwrap().len(), 1);
}

#[cfg(test)]
static NO_LABELS: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();

/// A value naming a member's label: a member copy written for one label
/// value is unchanged while the label stays, and updated with the new value
/// when it changes, though the PropagatedVersion (one overrides hash for
/// every member, KubeFed's) cannot tell.
#[test]
fn a_relabelled_member_gets_its_new_value() {
    use crate::propagation::desired::desired_for_cluster;
    use crate::propagation::overrides::{MemberCluster, SELECTED_OVERRIDES_ANNOTATION};
    let mut fed = fed();
    fed["spec"]["overrides"] = json!([{"clusterName": "c1", "clusterOverrides": [
        {"path": "/data/where", "value": "${MEMBER_NAME} in ${MEMBER_LABEL:region}"}]}]);
    let label = |v: &str| std::collections::BTreeMap::from([("region".to_string(), v.to_string())]);
    let (eu, us) = (label("eu"), label("us"));
    let at = |labels| MemberCluster { name: "c1", labels };
    let mut copy = desired_for_cluster(&fed, &target(), at(&eu), None).unwrap();
    assert_eq!(copy["data"]["where"], "c1 in eu");
    assert!(copy["metadata"]["annotations"][SELECTED_OVERRIDES_ANNOTATION].is_string());
    copy["metadata"]["resourceVersion"] = json!("7");
    let versions = versions_for(&fed, "c1", "rv:7");
    let decide = |labels| {
        let m = MemberState {
            labels,
            ..member("c1", true, Some(&copy))
        };
        sync_decisions(
            view(&fed),
            &target(),
            &set(&["c1"]),
            &[m],
            Some(&versions),
            ADOPT,
            Strategy::plain(true),
        )
        .remove(0)
    };
    assert_eq!(decide(&eu).action, Action::Unchanged);
    let Action::Update { object, .. } = decide(&us).action else {
        panic!("a relabelled member is updated");
    };
    assert_eq!(object["data"]["where"], "c1 in us");
    // The overrides hash is KubeFed's: of the overrides as written.
    let mut written = fed.clone();
    written["spec"]["overrides"][0]["clusterOverrides"][0]["value"] = json!("c1 in eu");
    assert_ne!(overrides_version(&fed), overrides_version(&written));
}
