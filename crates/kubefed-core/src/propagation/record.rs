//! The record step of a reconcile: from what the member requests did to
//! what the host must say afterwards — the federated object's `status`,
//! its PropagatedVersion, and whether the sync finalizer can go.
//! Upstream: `pkg/controller/sync/controller.go` (`setFederatedStatus`,
//! `ensureRemovedOrUnmanaged`, `removeFinalizer`) and
//! `pkg/controller/sync/version/manager.go`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::propagation::action::{Action, ClusterStatus};
use crate::propagation::decide::ObjectPlan;
use crate::propagation::deletion::DeletionPlan;
use crate::propagation::drift;
use crate::propagation::federated::FederatedObject;
use crate::propagation::placement::Cluster;
use crate::propagation::report::{Pulled, Report};
use crate::propagation::status::{AggregateReason, ClusterOutcome, federated_status};
use crate::propagation::version::{
    merged_status, overrides_version, recorded_version, template_version,
};

/// What a member request achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    Created,
    Updated,
    /// `gone`: the member confirmed the object no longer exists (a DELETE
    /// answered with a Status, or a later GET answered 404). Otherwise it
    /// is still terminating (finalizers, graceful deletion).
    Deleted {
        gone: bool,
    },
    Unlabelled,
}

/// A member request's result: the effect and the member object's new
/// version (`gen:`/`rv:`), when it has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Done {
    pub effect: Effect,
    pub version: Option<String>,
}

/// A member request's outcome; failures carry upstream's status and a message.
pub type MemberResult = Result<Done, (ClusterStatus, String)>;

/// What to write to the host for one federated object after the member phase.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WriteBack {
    /// The new `status`, when it changed.
    pub status: Option<Value>,
    /// The PropagatedVersion's new `status`, when it changed.
    pub versions: Option<Value>,
    /// The PropagatedVersion does not exist yet (create, then write status).
    pub create_versions: bool,
    /// Deletion complete: every member copy is confirmed deleted or
    /// unlabelled, nothing blocks: remove the sync finalizer.
    pub release_finalizer: bool,
    /// Deletion: clusters whose copy is still there (terminating).
    pub pending: Vec<String>,
    /// The PropagatedVersion's [`drift::DRIFT_ANNOTATION`], when it
    /// changed (`Some(None)`: remove it); the PropagatedVersion exists or
    /// is created first (`create_versions`).
    pub drift: Option<Option<String>>,
    /// A pull member's agent: its report of this object ([`member_report`]),
    /// the one thing it writes back; the other fields are the host's.
    pub report: Option<Report>,
}

/// Whether a deletion decision's request confirmed the copy is gone or unlabelled.
fn confirmed(action: &Action, result: Option<&MemberResult>) -> bool {
    match (action, result) {
        (Action::Delete { .. } | Action::AwaitRemoval, Some(Ok(done))) => {
            done.effect == Effect::Deleted { gone: true }
        }
        (Action::RemoveManagedLabel, Some(Ok(_))) => true,
        _ => false,
    }
}

/// The host's write-backs for `fed` after its member requests.
/// `clusters` are all registered members; `touched` the ones this run may
/// change (others keep the status recorded for them); `now` is RFC 3339.
pub fn plan_write_back(
    fed: &Value,
    plan: &ObjectPlan,
    results: &BTreeMap<String, MemberResult>,
    clusters: &[Cluster],
    touched: Option<&BTreeSet<String>>,
    now: &str,
) -> WriteBack {
    plan_write_back_collecting(fed, plan, results, clusters, touched, None, now)
}

/// [`plan_write_back`] with remote status collection (the FTC's
/// `statusCollection: Enabled` and the `RawResourceStatusCollection`
/// feature gate): `remote` holds each member copy's `.status` as observed,
/// recorded as `status.clusters[].remoteStatus` as upstream's
/// `dispatch/managed.go` `RecordStatus` does. A member without one (a copy
/// created in this pass) keeps the Propagation condition at
/// `CheckClusters` until a later pass collects it, as upstream.
pub fn plan_write_back_collecting(
    fed: &Value,
    plan: &ObjectPlan,
    results: &BTreeMap<String, MemberResult>,
    clusters: &[Cluster],
    touched: Option<&BTreeSet<String>>,
    remote: Option<&BTreeMap<String, Value>>,
    now: &str,
) -> WriteBack {
    if let Some(deletion) = &plan.deletion {
        // A deleted object's status and versions are not written (its
        // PropagatedVersion goes with it, by owner reference).
        return deletion_write_back(deletion, &plan.pulled, results);
    }
    let mut out = WriteBack::default();
    if !plan.record {
        return out;
    }
    let fed = FederatedObject::new(fed);

    let mut outcomes = decided_outcomes(plan, results);
    if let Some(remote) = remote {
        for o in &mut outcomes {
            o.remote_status = remote.get(&o.cluster).cloned();
        }
    }
    // Clusters this run did not touch keep what was recorded for them.
    let mut reason = plan.reason;
    if let Some(touched) = touched {
        outcomes.extend(recorded_outcomes(fed, clusters, touched, &plan.pulled));
        if untouched_behind(fed, plan, touched) {
            reason = AggregateReason::CheckClusters;
        }
    }
    // Pull members: what their agents reported (`report::Pulled`).
    outcomes.extend(
        plan.pulled
            .statuses(&plan.selected)
            .map(|(c, status)| ClusterOutcome {
                cluster: c.to_string(),
                status,
                remote_status: None,
            }),
    );
    let updated_any = created_or_updated(results);
    let status = federated_status(
        fed.value(),
        reason,
        &outcomes,
        remote.is_some(),
        updated_any,
        now,
    );
    if status.changed {
        out.status = Some(status.status);
    }

    // A report-only object's members got nothing: its versions stay.
    if !plan.report_only {
        let versions = propagated_versions(fed, plan, results);
        if plan.pv_status.as_ref() != Some(&versions) {
            out.create_versions = plan.pv_status.is_none();
            out.versions = Some(versions);
        }
    }
    let record = drift_record(plan, now);
    if record != plan.drift_record {
        out.create_versions = plan.pv_status.is_none();
        out.drift = Some(record);
    }
    out
}

/// The drift record after this run: since when each difference reported
/// (`Action::Report`) has been seen; members this run did not decide keep
/// theirs.
fn drift_record(plan: &ObjectPlan, now: &str) -> Option<String> {
    let old = drift::first_seen(plan.drift_record.as_deref());
    let mut current: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for d in &plan.decisions {
        if let Action::Report(drift) = &d.action
            && !drift.is_in_sync()
        {
            current.insert(d.cluster.clone(), drift.paths());
        }
    }
    for (member, paths) in &old {
        if !plan.decisions.iter().any(|d| &d.cluster == member) {
            current.insert(member.clone(), paths.keys().map(String::as_str).collect());
        }
    }
    drift::next_record(&old, &current, now)
}

/// Deletion: the clusters still holding a copy, and whether the finalizer can go.
/// Pull members that may still hold a copy keep the finalizer too, until
/// their agents report it removed.
fn deletion_write_back(
    deletion: &DeletionPlan,
    pulled: &Pulled,
    results: &BTreeMap<String, MemberResult>,
) -> WriteBack {
    let mut out = WriteBack::default();
    for d in &deletion.decisions {
        let r = results.get(&d.cluster);
        if !confirmed(&d.action, r) && !matches!(r, Some(Err(_))) {
            out.pending.push(d.cluster.clone());
        }
    }
    let holding = if deletion.has_finalizer {
        pulled.holding()
    } else {
        Vec::new()
    };
    out.pending.extend(holding.iter().cloned());
    out.release_finalizer = deletion.has_finalizer
        && holding.is_empty()
        && deletion.blocked_by().is_empty()
        && deletion
            .decisions
            .iter()
            .all(|d| confirmed(&d.action, results.get(&d.cluster)));
    out
}

/// Whether a placed member this run may not touch (`--cluster`) is not
/// known to hold the current version: no version is recorded for it under
/// the current template and overrides. Upstream touches every member, so
/// never meets this; its recorded OK must not make `Propagation` True for
/// a template that member has not received (docs/kubefed-differences.md).
fn untouched_behind(fed: FederatedObject, plan: &ObjectPlan, touched: &BTreeSet<String>) -> bool {
    if plan.selected.iter().all(|c| touched.contains(c)) {
        return false;
    }
    let template = template_version(fed.value()).unwrap_or_default();
    let overrides = overrides_version(fed.value()).unwrap_or_default();
    let pulled = plan.pulled.versions(fed.value());
    plan.selected.iter().any(|c| {
        !touched.contains(c)
            && !pulled.contains_key(c)
            && recorded_version(plan.pv_status.as_ref(), &template, &overrides, c).is_none()
    })
}

/// The status of each decided cluster: a failed request's, else the
/// decision's. A request that was planned but not made (refused before
/// it was sent: the member's identity may not make it) is that request's
/// failure, never the OK its success would have recorded.
fn decided_outcomes(
    plan: &ObjectPlan,
    results: &BTreeMap<String, MemberResult>,
) -> Vec<ClusterOutcome> {
    // Outcomes: what happened, or what was decided.
    plan.decisions
        .iter()
        .filter_map(|d| {
            let status = match results.get(&d.cluster) {
                Some(Err((s, _))) => *s,
                Some(Ok(_)) => d.status?,
                None => d.action.failure_status().or(d.status)?,
            };
            Some(ClusterOutcome {
                cluster: d.cluster.clone(),
                status,
                remote_status: None,
            })
        })
        .collect()
}

/// The statuses `fed` records for registered clusters this run may not
/// touch (pull members' come from their reports).
fn recorded_outcomes(
    fed: FederatedObject,
    clusters: &[Cluster],
    touched: &BTreeSet<String>,
    pulled: &Pulled,
) -> Vec<ClusterOutcome> {
    let mut outcomes = Vec::new();
    for c in fed.status_clusters() {
        let name = c.get("name").and_then(Value::as_str).unwrap_or("");
        if !touched.contains(name)
            && !pulled.contains(name)
            && clusters.iter().any(|k| k.name == name)
        {
            outcomes.push(ClusterOutcome {
                cluster: name.to_string(),
                status: ClusterStatus::parse(c.get("status").and_then(Value::as_str).unwrap_or(""))
                    .unwrap_or(ClusterStatus::Ok),
                remote_status: None,
            });
        }
    }
    outcomes
}

/// What a pull member's agent reports of `fed` for its own `cluster`
/// after its requests (`report::Report`); `None` when the object is not
/// recorded (ignored, invalid) or a deletion is still under way there.
/// A member the object is not placed on reports it removed.
pub fn member_report(
    (fed, type_name): (&Value, &str),
    plan: &ObjectPlan,
    results: &BTreeMap<String, MemberResult>,
    cluster: &str,
    now: &str,
) -> Option<Report> {
    let object = FederatedObject::new(fed);
    let mut report = Report {
        cluster: cluster.to_string(),
        type_name: type_name.to_string(),
        key: object.key(),
        uid: fed
            .pointer("/metadata/uid")
            .and_then(Value::as_str)?
            .to_string(),
        template_version: template_version(fed).unwrap_or_default(),
        overrides_version: overrides_version(fed).unwrap_or_default(),
        status: ClusterStatus::Ok,
        version: None,
        removed: false,
        readiness: None,
        reported_at: now.to_string(),
    };
    if let Some(deletion) = &plan.deletion {
        let blocked = deletion.blocked_by().iter().any(|c| c == cluster);
        let done = (deletion.decisions.iter())
            .filter(|d| d.cluster == cluster)
            .all(|d| confirmed(&d.action, results.get(cluster)));
        report.removed = !blocked && done;
        return report.removed.then_some(report);
    }
    if !plan.record {
        return None;
    }
    if !plan.selected.contains(cluster) {
        let failed = matches!(results.get(cluster), Some(Err(_)));
        report.removed = !failed;
        if failed {
            report.status = decided_outcomes(plan, results)
                .into_iter()
                .find(|o| o.cluster == cluster)
                .map_or(ClusterStatus::DeletionFailed, |o| o.status);
        }
        return Some(report);
    }
    let outcome = decided_outcomes(plan, results)
        .into_iter()
        .find(|o| o.cluster == cluster)?;
    report.status = outcome.status;
    if outcome.status == ClusterStatus::Ok {
        report.version = match results.get(cluster) {
            Some(Ok(Done {
                version: Some(v), ..
            })) => Some(v.clone()),
            _ => plan.unchanged_versions.get(cluster).cloned(),
        };
    }
    Some(report)
}

/// Whether a create or update succeeded in this pass (the status may then need a write).
fn created_or_updated(results: &BTreeMap<String, MemberResult>) -> bool {
    results.values().any(|r| {
        matches!(
            r,
            Ok(Done {
                effect: Effect::Created | Effect::Updated,
                ..
            })
        )
    })
}

/// The PropagatedVersion's new `status`: the versions of what each selected member now holds.
fn propagated_versions(
    fed: FederatedObject,
    plan: &ObjectPlan,
    results: &BTreeMap<String, MemberResult>,
) -> Value {
    // Versions of what each member now holds; pull members' as reported.
    let mut recorded = plan.pulled.versions(fed.value());
    recorded.extend(plan.unchanged_versions.clone());
    for (cluster, r) in results {
        if let Ok(Done {
            version: Some(v), ..
        }) = r
        {
            recorded.insert(cluster.clone(), v.clone());
        }
    }
    merged_status(
        plan.pv_status.as_ref(),
        &template_version(fed.value()).unwrap_or_default(),
        &overrides_version(fed.value()).unwrap_or_default(),
        &plan.selected,
        &recorded,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::membership::Scope;
    use crate::describe::{ObjectKey, key_of};
    use crate::propagation::decide::{FederatedType, Federation, Listing, decide_object};
    use crate::propagation::{deletion::SYNC_FINALIZER, member::SyncSettings};
    use crate::run::scope::RunScope;
    use serde_json::json;
    use std::collections::HashMap;

    fn t() -> FederatedType {
        crate::propagation::decide::test_types::configmaps()
    }

    fn cm(name: &str) -> Value {
        json!({"kind": "FederatedConfigMap", "metadata": {"name": name, "namespace": "ns",
               "generation": 1, "finalizers": [SYNC_FINALIZER]},
               "spec": {"template": {"data": {"k": "v"}}, "placement": {"clusters": [{"name": "a"}, {"name": "b"}]}}})
    }

    fn copy(name: &str, terminating: bool) -> Value {
        let mut o = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns",
            "resourceVersion": "9", "labels": {"kubefed.io/managed": "true"}}});
        if terminating {
            o["metadata"]["deletionTimestamp"] = json!("t");
        }
        o
    }

    fn plan_for(fed: &Value, a: &[Value], b: &[Value]) -> ObjectPlan {
        let clusters = vec![Cluster::new("a", &[], true), Cluster::new("b", &[], true)];
        let fed_namespaces = BTreeMap::from([(
            "ns".to_string(),
            json!({"kind": "FederatedNamespace", "metadata": {"name": "ns", "namespace": "ns"},
                   "spec": {"placement": {"clusterSelector": {}}}}),
        )]);
        let host_namespaces = HashMap::new();
        let versions: HashMap<ObjectKey, Value> = HashMap::new();
        let f = Federation {
            kubefed_namespace: "kube-federation-system",
            scope: Scope::Cluster,
            settings: SyncSettings {
                adopt_resources: true,
                force_conflicts: false,
                report_only: false,
            },
            clusters: &clusters,
            run: &RunScope::default(),
            fed_namespaces: &fed_namespaces,
            host_namespaces: &host_namespaces,
            versions: &versions,
        };
        let listing = |objs: &[Value]| {
            Listing::Listed(
                objs.iter()
                    .map(|o| (key_of(o), crate::object_text::ObjectText::of(o)))
                    .collect(),
            )
        };
        let members = BTreeMap::from([("a".into(), listing(a)), ("b".into(), listing(b))]);
        decide_object(&f, &t(), fed, &members)
    }

    fn ok(effect: Effect) -> MemberResult {
        Ok(Done {
            effect,
            version: None,
        })
    }

    fn results(rows: &[(&str, MemberResult)]) -> BTreeMap<String, MemberResult> {
        rows.iter()
            .map(|(c, r)| (c.to_string(), r.clone()))
            .collect()
    }

    #[test]
    fn the_finalizer_goes_only_when_every_copy_is_confirmed_gone() {
        let mut fed = cm("x");
        fed["metadata"]["deletionTimestamp"] = json!("t");
        let p = plan_for(&fed, &[copy("x", false)], &[copy("x", false)]);
        let clusters = [];
        /// A row: the member results, whether the finalizer goes, and
        /// the clusters still holding a copy.
        struct Case<'a> {
            name: &'a str,
            results: BTreeMap<String, MemberResult>,
            release: bool,
            pending: Vec<&'a str>,
        }
        let cases = [
            Case {
                name: "both gone",
                results: results(&[
                    ("a", ok(Effect::Deleted { gone: true })),
                    ("b", ok(Effect::Deleted { gone: true })),
                ]),
                release: true,
                pending: vec![],
            },
            Case {
                name: "b accepted but still terminating",
                results: results(&[
                    ("a", ok(Effect::Deleted { gone: true })),
                    ("b", ok(Effect::Deleted { gone: false })),
                ]),
                release: false,
                pending: vec!["b"],
            },
            Case {
                name: "b failed",
                results: results(&[
                    ("a", ok(Effect::Deleted { gone: true })),
                    ("b", Err((ClusterStatus::DeletionFailed, "boom".into()))),
                ]),
                release: false,
                pending: vec![],
            },
            Case {
                name: "run killed before b (no result)",
                results: results(&[("a", ok(Effect::Deleted { gone: true }))]),
                release: false,
                pending: vec!["b"],
            },
        ];
        for c in cases {
            let name = c.name;
            let w = plan_write_back(&fed, &p, &c.results, &clusters, None, "now");
            assert_eq!(w.release_finalizer, c.release, "{name}");
            assert_eq!(w.pending, c.pending, "{name}");
            assert!(w.status.is_none() && w.versions.is_none(), "{name}");
        }
        // A copy already terminating is waited for: released only once gone.
        let p = plan_for(&fed, &[], &[copy("x", true)]);
        let w = plan_write_back(&fed, &p, &BTreeMap::new(), &clusters, None, "now");
        assert!(!w.release_finalizer);
        assert_eq!(w.pending, vec!["b"]);
        let w = plan_write_back(
            &fed,
            &p,
            &results(&[("b", ok(Effect::Deleted { gone: true }))]),
            &clusters,
            None,
            "now",
        );
        assert!(w.release_finalizer, "--wait saw it go");
        // Nothing anywhere: released at once.
        let p = plan_for(&fed, &[], &[]);
        let w = plan_write_back(&fed, &p, &BTreeMap::new(), &clusters, None, "now");
        assert!(w.release_finalizer);
    }

    #[test]
    fn orphaning_releases_once_labels_are_removed() {
        let mut fed = cm("x");
        fed["metadata"]["deletionTimestamp"] = json!("t");
        fed["metadata"]["annotations"] = json!({"kubefed.io/orphan": "true"});
        let p = plan_for(&fed, &[copy("x", false)], &[]);
        let clusters = [];
        let none = plan_write_back(&fed, &p, &BTreeMap::new(), &clusters, None, "now");
        assert!(!none.release_finalizer, "killed before the unlabel");
        let done = plan_write_back(
            &fed,
            &p,
            &results(&[("a", ok(Effect::Unlabelled))]),
            &clusters,
            None,
            "now",
        );
        assert!(done.release_finalizer);
    }

    #[test]
    fn status_and_versions_after_a_sync() {
        let fed = cm("x");
        let p = plan_for(&fed, &[], &[]);
        let clusters = [Cluster::new("a", &[], true), Cluster::new("b", &[], true)];
        let r = results(&[
            (
                "a",
                Ok(Done {
                    effect: Effect::Created,
                    version: Some("rv:5".into()),
                }),
            ),
            ("b", Err((ClusterStatus::CreationFailed, "boom".into()))),
        ]);
        let w = plan_write_back(&fed, &p, &r, &clusters, None, "now");
        let status = w.status.unwrap();
        assert_eq!(status["conditions"][0]["reason"], "CheckClusters");
        assert_eq!(
            status["clusters"],
            json!([{"name": "a"}, {"name": "b", "status": "CreationFailed"}])
        );
        assert!(w.create_versions);
        assert_eq!(
            w.versions.unwrap()["clusterVersions"],
            json!([{"clusterName": "a", "version": "rv:5"}])
        );
        assert!(!w.release_finalizer && w.pending.is_empty());
    }
    /// The Propagation condition of what `plan_write_back` writes.
    fn propagation(w: &WriteBack) -> (String, String) {
        let status = w.status.as_ref().expect("a status is written");
        let c = status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Propagation")
            .unwrap();
        (
            c["status"].as_str().unwrap().to_string(),
            c["reason"].as_str().unwrap_or("").to_string(),
        )
    }

    fn created() -> MemberResult {
        ok(Effect::Created)
    }

    #[test]
    fn propagation_is_true_only_when_every_placed_member_holds_the_current_version() {
        let fed = cm("x");
        let clusters = [Cluster::new("a", &[], true), Cluster::new("b", &[], true)];
        let fresh = plan_for(&fed, &[], &[]);
        type Case<'a> = (&'a str, BTreeMap<String, MemberResult>, (&'a str, &'a str));
        let cases: Vec<Case> = vec![
            (
                "both created",
                results(&[("a", created()), ("b", created())]),
                ("True", ""),
            ),
            (
                "b refused the create",
                results(&[
                    ("a", created()),
                    ("b", Err((ClusterStatus::CreationFailed, "no".into()))),
                ]),
                ("False", "CheckClusters"),
            ),
            (
                "b's create planned but never sent (its identity may not create)",
                results(&[("a", created())]),
                ("False", "CheckClusters"),
            ),
        ];
        for (name, r, want) in cases {
            let w = plan_write_back(&fed, &fresh, &r, &clusters, None, "now");
            let (status, reason) = propagation(&w);
            assert_eq!((status.as_str(), reason.as_str()), want, "{name}");
        }
        let w = plan_write_back(
            &fed,
            &fresh,
            &results(&[("a", created())]),
            &clusters,
            None,
            "now",
        );
        assert_eq!(
            w.status.unwrap()["clusters"],
            json!([{"name": "a"}, {"name": "b", "status": "CreationFailed"}]),
            "the request not made is named as failed"
        );

        // A placed copy that is being deleted is not held: it goes, and
        // is created again later.
        let mut dying = copy("x", true);
        dying["metadata"]["generation"] = json!(1);
        let p = plan_for(&fed, &[], &[dying]);
        let r = results(&[("a", created()), ("b", ok(Effect::Updated))]);
        let w = plan_write_back(&fed, &p, &r, &clusters, None, "now");
        assert_eq!(propagation(&w), ("False".into(), "CheckClusters".into()));
        assert_eq!(
            w.status.unwrap()["clusters"][1],
            json!({"name": "b", "status": "WaitingForRemoval"})
        );
    }

    #[test]
    fn a_member_the_run_may_not_touch_counts_only_with_the_current_version() {
        // `--cluster a`: b keeps its recorded OK, but that is only worth
        // `Propagation: True` if b's recorded version is of this template.
        let mut fed = cm("x");
        fed["status"] = json!({"observedGeneration": 1, "clusters": [{"name": "a"}, {"name": "b"}],
            "conditions": [{"type": "Propagation", "status": "True"}]});
        let clusters = [Cluster::new("a", &[], true), Cluster::new("b", &[], true)];
        let touched = BTreeSet::from(["a".to_string()]);
        let mut p = plan_for(&fed, &[], &[]);
        p.decisions.retain(|d| d.cluster == "a");
        let r = results(&[("a", created())]);
        let pv = |template: &str| {
            json!({"templateVersion": template,
                   "overridesVersion": overrides_version(&fed).unwrap(),
                   "clusterVersions": [{"clusterName": "b", "version": "rv:3"}]})
        };
        p.pv_status = Some(pv("an older template's hash"));
        let w = plan_write_back(&fed, &p, &r, &clusters, Some(&touched), "now");
        assert_eq!(
            propagation(&w),
            ("False".into(), "CheckClusters".into()),
            "b holds an older template"
        );
        p.pv_status = Some(pv(&template_version(&fed).unwrap()));
        let w = plan_write_back(&fed, &p, &r, &clusters, Some(&touched), "now");
        assert_eq!(w.status, None, "b holds this template: still True");
        p.pv_status = None;
        let w = plan_write_back(&fed, &p, &r, &clusters, Some(&touched), "now");
        assert_eq!(propagation(&w).0, "False", "nothing recorded for b");
    }

    /// `fed`'s plan in a run that touches `a` only, `b` being a pull
    /// member whose agent reported `b_report`.
    fn pulled_plan(fed: &Value, b_report: Option<Report>, silent: bool) -> ObjectPlan {
        let clusters = vec![Cluster::new("a", &[], true), Cluster::new("b", &[], true)];
        let fed_namespaces = BTreeMap::from([(
            "ns".to_string(),
            json!({"kind": "FederatedNamespace", "metadata": {"name": "ns", "namespace": "ns"},
                   "spec": {"placement": {"clusterSelector": {}}}}),
        )]);
        let (host_namespaces, versions) = (HashMap::new(), HashMap::new());
        let run = RunScope {
            clusters: Some(BTreeSet::from(["a".to_string()])),
            ..RunScope::default()
        };
        let f = Federation {
            kubefed_namespace: "kube-federation-system",
            scope: Scope::Cluster,
            settings: SyncSettings {
                adopt_resources: true,
                force_conflicts: false,
                report_only: false,
            },
            clusters: &clusters,
            run: &run,
            fed_namespaces: &fed_namespaces,
            host_namespaces: &host_namespaces,
            versions: &versions,
        };
        let members = BTreeMap::from([("a".into(), Listing::Listed(Default::default()))]);
        let mut p = decide_object(&f, &t(), fed, &members);
        let mut reports = crate::propagation::report::Reports::default();
        reports.extend(b_report);
        p.pulled = Pulled::of(fed, "configmaps", &[("b".to_string(), silent)], &reports);
        p
    }

    fn b_report(fed: &Value, version: &str) -> Report {
        let created = results(&[(
            "b",
            Ok(Done {
                effect: Effect::Created,
                version: Some(version.into()),
            }),
        )]);
        // The agent's side: b alone decided, its copy created.
        let mut agent_plan = plan_for(fed, &[], &[]);
        agent_plan.decisions.retain(|d| d.cluster == "b");
        member_report((fed, "configmaps"), &agent_plan, &created, "b", "now").expect("a report")
    }

    #[test]
    fn a_pull_members_report_reads_as_a_push_members_record() {
        let mut fed = cm("x");
        fed["metadata"]["uid"] = json!("u1");
        let report = b_report(&fed, "rv:5");
        assert_eq!(
            (report.status, report.version.as_deref()),
            (ClusterStatus::Ok, Some("rv:5"))
        );
        let clusters = vec![Cluster::new("a", &[], true), Cluster::new("b", &[], true)];
        let touched = BTreeSet::from(["a".to_string()]);
        let a_done = results(&[(
            "a",
            Ok(Done {
                effect: Effect::Created,
                version: Some("rv:1".into()),
            }),
        )]);

        let p = pulled_plan(&fed, Some(report), false);
        let w = plan_write_back(&fed, &p, &a_done, &clusters, Some(&touched), "now");
        let status = w.status.expect("a status");
        let names: Vec<&str> = status["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            status["conditions"][0]["reason"],
            json!(null),
            "in sync: {status}"
        );
        let versions = w.versions.expect("versions");
        assert_eq!(
            versions["clusterVersions"][1],
            json!({"clusterName": "b", "version": "rv:5"})
        );

        // Nothing reported yet: b is behind, and not listed.
        let p = pulled_plan(&fed, None, false);
        let w = plan_write_back(&fed, &p, &a_done, &clusters, Some(&touched), "now");
        let status = w.status.expect("a status");
        assert_eq!(status["clusters"].as_array().unwrap().len(), 1);
        assert_eq!(status["conditions"][0]["reason"], "CheckClusters");

        // A silent agent: ClusterNotReady.
        let p = pulled_plan(&fed, Some(b_report(&fed, "rv:5")), true);
        let w = plan_write_back(&fed, &p, &a_done, &clusters, Some(&touched), "now");
        let status = w.status.expect("a status");
        assert_eq!(
            status["clusters"][1],
            json!({"name": "b", "status": "ClusterNotReady"})
        );
    }

    #[test]
    fn a_deletion_waits_for_the_pull_members_removal_report() {
        let mut fed = cm("x");
        fed["metadata"]["uid"] = json!("u1");
        let held = b_report(&fed, "rv:5");
        fed["metadata"]["deletionTimestamp"] = json!("t");
        let clusters = [];
        let p = pulled_plan(&fed, Some(held), false);
        let w = plan_write_back(&fed, &p, &BTreeMap::new(), &clusters, None, "now");
        assert!(!w.release_finalizer);
        assert_eq!(w.pending, ["b"]);

        // The agent deletes its copy and says so.
        let mut agent_plan = plan_for(&fed, &[], &[copy("x", false)]);
        agent_plan.decisions.retain(|d| d.cluster == "b");
        if let Some(d) = agent_plan.deletion.as_mut() {
            d.decisions.retain(|d| d.cluster == "b");
        }
        let gone = results(&[("b", ok(Effect::Deleted { gone: true }))]);
        let removed =
            member_report((&fed, "configmaps"), &agent_plan, &gone, "b", "now").expect("removed");
        assert!(removed.removed);
        let p = pulled_plan(&fed, Some(removed), false);
        let w = plan_write_back(&fed, &p, &BTreeMap::new(), &clusters, None, "now");
        assert!(w.release_finalizer, "{w:?}");
    }
}
