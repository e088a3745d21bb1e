//! The ReplicaSchedulingPreference controller's pure part (upstream
//! `pkg/controller/schedulingpreference`): from an
//! RSP, its federated Deployment/ReplicaSet and the ready clusters, the new
//! `spec.placement.clusters` and per-cluster `/spec/replicas` overrides,
//! written exactly where and how upstream writes them so that a Go KubeFed
//! sync controller reading the object sees the same thing.
//!
//! Also the observation of member replicas (ready replicas, or running
//! pods and long-unschedulable pods as capacity), with the time passed in.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::describe::{FieldError, FieldProblem};
use crate::propagation::overrides::{MemberCluster, OverrideError, overrides_for_cluster};
use crate::propagation::placement::{Cluster, selector_only_clusters};
use crate::scheduling::replicas::{ClusterPreferences, Preferences, distribute};
use crate::time::parse_rfc3339;
use crate::types::legacy::SCHEDULING_GROUPS;

/// The only kinds upstream schedules.
pub const SCHEDULABLE_KINDS: [&str; 2] = ["FederatedDeployment", "FederatedReplicaSet"];
/// Override path the RSP controller owns.
pub const REPLICAS_PATH: &str = "/spec/replicas";
/// Pods unschedulable for longer than this reduce a cluster's capacity.
pub const UNSCHEDULABLE_THRESHOLD_SECONDS: i64 = 60;

/// Why an RSP cannot be applied; messages name the RSP and the field.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SchedulingError {
    #[error("ReplicaSchedulingPreference {rsp:?}: {problem}")]
    InvalidRsp { rsp: String, problem: String },
    #[error("ReplicaSchedulingPreference {rsp:?}: {problem}")]
    Target { rsp: String, problem: String },
    #[error(
        "ReplicaSchedulingPreference {rsp:?}: FederatedNamespace {namespace:?} not found (needed by intersectWithClusterSelector)"
    )]
    MissingFederatedNamespace { rsp: String, namespace: String },
}

/// What the RSP asks for, read from the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rsp {
    /// `<namespace>/<name>`: also the planner's hash key.
    pub key: String,
    pub target_kind: String,
    pub intersect_with_cluster_selector: bool,
    /// With `{"*": {weight: 1}}` when `spec.clusters` is empty.
    pub preferences: Preferences,
}

/// Read and check an RSP object (group spelling, target kind, spec).
pub fn read_rsp(rsp: &Value) -> Result<Rsp, SchedulingError> {
    let meta = rsp.get("metadata");
    let get = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let key = format!("{}/{}", get("namespace"), get("name"));
    let invalid = |problem: String| SchedulingError::InvalidRsp {
        rsp: key.clone(),
        problem,
    };
    if let Some(api_version) = rsp.get("apiVersion").and_then(Value::as_str) {
        let group = api_version.split_once('/').map(|(g, _)| g).unwrap_or("");
        if !SCHEDULING_GROUPS.contains(&group) {
            return Err(invalid(format!(
                "apiVersion {api_version:?} is not in group scheduling.kubefed.io"
            )));
        }
    }
    let spec = rsp
        .get("spec")
        .ok_or_else(|| invalid("spec is required".into()))?;
    let target_kind = spec
        .get("targetKind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !SCHEDULABLE_KINDS.contains(&target_kind.as_str()) {
        return Err(invalid(format!(
            "spec.targetKind {target_kind:?} is not FederatedDeployment or FederatedReplicaSet"
        )));
    }
    let mut preferences = Preferences::from_spec(spec).map_err(|e| invalid(e.to_string()))?;
    if preferences.clusters.is_empty() {
        preferences.clusters.insert(
            "*".into(),
            ClusterPreferences {
                weight: 1,
                ..ClusterPreferences::default()
            },
        );
    }
    let intersect_with_cluster_selector = spec
        .get("intersectWithClusterSelector")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(Rsp {
        key,
        target_kind,
        intersect_with_cluster_selector,
        preferences,
    })
}

/// The clusters to schedule over (steps 1 and 3): the ready clusters, or
/// in intersect mode the selector-only placement of the object ∩ that of
/// its FederatedNamespace over the ready clusters. `None` = nothing to do
/// (no ready cluster, or an empty intersection).
pub fn scheduling_clusters(
    rsp: &Rsp,
    fed: &Value,
    federated_namespace: Option<&Value>,
    clusters: &[Cluster],
) -> Result<Option<Vec<String>>, SchedulingError> {
    let ready: Vec<Cluster> = clusters.iter().filter(|c| c.ready).cloned().collect();
    if ready.is_empty() {
        return Ok(None);
    }
    if !rsp.intersect_with_cluster_selector {
        let mut names: Vec<String> = ready.into_iter().map(|c| c.name).collect();
        names.sort();
        return Ok(Some(names));
    }
    let namespace = rsp.key.split('/').next().unwrap_or("").to_string();
    let fed_ns = federated_namespace.ok_or_else(|| SchedulingError::MissingFederatedNamespace {
        rsp: rsp.key.clone(),
        namespace: format!("{namespace}/{namespace}"),
    })?;
    let target_err = |e: crate::propagation::placement::PlacementError| SchedulingError::Target {
        rsp: rsp.key.clone(),
        problem: e.to_string(),
    };
    let own = selector_only_clusters(fed, &ready).map_err(target_err)?;
    let ns = selector_only_clusters(fed_ns, &ready).map_err(target_err)?;
    let both: Vec<String> = own.intersection(&ns).cloned().collect();
    Ok((!both.is_empty()).then_some(both))
}

/// Replicas per cluster to write (step 6): planner `plan + overflow`,
/// and 0 for every cluster that reported current replicas.
pub fn scheduling_result(
    rsp: &Rsp,
    clusters: &[String],
    current: &BTreeMap<String, i64>,
    capacity: &BTreeMap<String, i64>,
) -> BTreeMap<String, i64> {
    let planned = distribute(&rsp.preferences, clusters, current, capacity, &rsp.key);
    let mut result: BTreeMap<String, i64> = current.keys().map(|c| (c.clone(), 0)).collect();
    result.extend(planned.replicas);
    for (c, extra) in planned.overflow {
        *result.entry(c).or_insert(0) += extra;
    }
    result
}

/// The result of scheduling one RSP.
#[derive(Clone, Debug, PartialEq)]
pub enum Scheduled {
    /// Nothing to write.
    Unchanged,
    /// PUT this federated object.
    Updated(Value),
}

/// Steps 1–7 in one call: check the RSP against the federated object, pick
/// clusters, plan, and rewrite placement and overrides when they differ.
/// `current`/`capacity` come from [`observe_member`] per cluster.
pub fn schedule(
    rsp_obj: &Value,
    fed: &Value,
    federated_namespace: Option<&Value>,
    clusters: &[Cluster],
    current: &BTreeMap<String, i64>,
    capacity: &BTreeMap<String, i64>,
) -> Result<Scheduled, SchedulingError> {
    let rsp = read_rsp(rsp_obj)?;
    let kind = fed.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != rsp.target_kind {
        return Err(SchedulingError::Target {
            rsp: rsp.key.clone(),
            problem: format!(
                "federated object is a {kind:?}, targetKind is {:?}",
                rsp.target_kind
            ),
        });
    }
    let Some(names) = scheduling_clusters(&rsp, fed, federated_namespace, clusters)? else {
        return Ok(Scheduled::Unchanged);
    };
    let in_scope = |m: &BTreeMap<String, i64>| -> BTreeMap<String, i64> {
        m.iter()
            .filter(|(c, _)| names.contains(c))
            .map(|(c, v)| (c.clone(), *v))
            .collect()
    };
    let result = scheduling_result(&rsp, &names, &in_scope(current), &in_scope(capacity));
    apply_result(fed, &result).map_err(|e| SchedulingError::Target {
        rsp: rsp.key.clone(),
        problem: e.to_string(),
    })
}

/// Why a federated object cannot take an RSP's result.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TargetError {
    /// Upstream's message (`pkg/controller/schedulingpreference`).
    #[error("error reading cluster overrides: {0}")]
    Overrides(OverrideError),
    #[error(transparent)]
    Field(#[from] FieldError),
}

/// Step 7: write `result` into the federated object as upstream does.
pub fn apply_result(fed: &Value, result: &BTreeMap<String, i64>) -> Result<Scheduled, TargetError> {
    // Upstream refuses objects whose overrides it cannot read.
    overrides_for_cluster(fed, MemberCluster::named("")).map_err(TargetError::Overrides)?;
    let mut out = fed.clone();
    let mut dirty = false;

    let existing: Option<Vec<String>> = fed
        .pointer("/spec/placement/clusters")
        .and_then(Value::as_array)
        .map(|l| {
            let mut v: Vec<String> = l
                .iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
                .collect();
            v.sort();
            v
        });
    let wanted: Vec<String> = result.keys().cloned().collect();
    if existing.as_ref() != Some(&wanted) {
        let placement = object_at(&mut out, &["spec", "placement"])?;
        placement.insert(
            "clusters".into(),
            Value::Array(wanted.iter().map(|n| json!({"name": n})).collect()),
        );
        dirty = true;
    }

    let items: Vec<Value> = fed
        .pointer("/spec/overrides")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if override_update_needed(&items, result) {
        let new_items = updated_overrides(items, result);
        object_at(&mut out, &["spec"])?.insert("overrides".into(), Value::Array(new_items));
        dirty = true;
    }
    Ok(if dirty {
        Scheduled::Updated(out)
    } else {
        Scheduled::Unchanged
    })
}

fn cluster_of(item: &Value) -> &str {
    item.get("clusterName")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn entries_of(item: &Value) -> &[Value] {
    item.get("clusterOverrides")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn is_replicas(entry: &Value) -> bool {
    entry.get("path").and_then(Value::as_str) == Some(REPLICAS_PATH)
}

/// Upstream's `OverrideUpdateNeeded`: every `/spec/replicas` override is
/// numeric (truncated to an integer) and equals the result for its cluster,
/// and there are exactly as many as result entries.
fn override_update_needed(items: &[Value], result: &BTreeMap<String, i64>) -> bool {
    let mut matched = 0;
    for item in items {
        for entry in entries_of(item).iter().filter(|e| is_replicas(e)) {
            let Some(value) = entry.get("value").and_then(Value::as_f64) else {
                return true;
            };
            if result.get(cluster_of(item)) != Some(&(value as i64)) {
                return true;
            }
            matched += 1;
        }
    }
    matched != result.len()
}

/// Upstream's `updateOverridesMap`, keeping the existing order of
/// clusters and entries (upstream's is random) and appending new clusters
/// by name: unscheduled clusters lose their replicas override (their other
/// overrides stay), scheduled ones get theirs set or appended (no `op`).
fn updated_overrides(items: Vec<Value>, result: &BTreeMap<String, i64>) -> Vec<Value> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for mut item in items {
        let cluster = cluster_of(&item).to_string();
        seen.insert(cluster.clone());
        let mut entries: Vec<Value> = entries_of(&item).to_vec();
        match result.get(&cluster) {
            None => {
                if let Some(i) = entries.iter().position(is_replicas) {
                    entries.remove(i);
                }
            }
            Some(n) => match entries.iter_mut().find(|e| is_replicas(e)) {
                Some(e) => e["value"] = json!(n),
                None => entries.push(json!({"path": REPLICAS_PATH, "value": n})),
            },
        }
        if let Some(m) = item.as_object_mut() {
            m.insert("clusterOverrides".into(), Value::Array(entries));
        }
        out.push(item);
    }
    for (cluster, n) in result {
        if !seen.contains(cluster) {
            out.push(json!({"clusterName": cluster,
                "clusterOverrides": [{"path": REPLICAS_PATH, "value": n}]}));
        }
    }
    out
}

fn object_at<'a>(
    obj: &'a mut Value,
    path: &[&str],
) -> Result<&'a mut Map<String, Value>, FieldError> {
    let mut current = obj;
    for (i, key) in path.iter().enumerate() {
        let map = current
            .as_object_mut()
            .ok_or_else(|| FieldError::new(path[..i].join("."), FieldProblem::NotA("an object")))?;
        let next = map
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if next.is_null() {
            *next = Value::Object(Map::new());
        }
        current = next;
    }
    current
        .as_object_mut()
        .ok_or_else(|| FieldError::new(path.join("."), FieldProblem::NotA("an object")))
}

/// A member Deployment/ReplicaSet's replica state (step 4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberReplicas {
    /// `spec.replicas == status.readyReplicas`: current = ready.
    Settled { ready: i64 },
    /// Not settled: count pods matching this selector ([`analyze_pods`]).
    NeedsPods {
        replicas: i64,
        match_labels: BTreeMap<String, String>,
    },
}

/// A member Deployment or ReplicaSet without `spec.selector.matchLabels`
/// (upstream's message, `pkg/controller/util/podanalyzer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("missing selector on object")]
pub struct MissingSelector;

/// Read a member object's replicas (missing → 0).
pub fn observe_member(obj: &Value) -> Result<MemberReplicas, MissingSelector> {
    let replicas = obj
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let ready = obj
        .pointer("/status/readyReplicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if replicas == ready {
        return Ok(MemberReplicas::Settled { ready });
    }
    let labels = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .ok_or(MissingSelector)?;
    Ok(MemberReplicas::NeedsPods {
        replicas,
        match_labels: labels
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
            .collect(),
    })
}

/// Upstream's pod analysis (podanalyzer).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodAnalysis {
    pub total: i64,
    /// Running pods with a `Ready` condition (its status is not checked:
    /// upstream quirk).
    pub running_and_ready: i64,
    /// Not running, `PodScheduled=False/Unschedulable` for over 60 s.
    pub unschedulable: i64,
    /// Some pods are unschedulable for less than 60 s: look again later.
    pub needs_recheck: bool,
}

/// Analyse pods at `now_unix` (seconds). Condition times are RFC 3339.
pub fn analyze_pods(pods: &[Value], now_unix: i64) -> PodAnalysis {
    let mut result = PodAnalysis::default();
    let mut unschedulable_now = 0;
    for pod in pods {
        result.total += 1;
        let running = pod.pointer("/status/phase").and_then(Value::as_str) == Some("Running");
        let conditions = pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for c in conditions {
            let field = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
            if running {
                if field("type") == "Ready" {
                    result.running_and_ready += 1;
                }
            } else if field("type") == "PodScheduled"
                && field("status") == "False"
                && field("reason") == "Unschedulable"
            {
                unschedulable_now += 1;
                let since = parse_rfc3339(field("lastTransitionTime")).unwrap_or(0);
                if since + UNSCHEDULABLE_THRESHOLD_SECONDS < now_unix {
                    result.unschedulable += 1;
                }
            }
        }
    }
    result.needs_recheck = unschedulable_now != result.unschedulable;
    result
}

/// `current` and optional `capacity` of a cluster from its replica state
/// and (when not settled) the analysed pods.
pub fn current_and_capacity(state: &MemberReplicas, pods: &PodAnalysis) -> (i64, Option<i64>) {
    match state {
        MemberReplicas::Settled { ready } => (*ready, None),
        MemberReplicas::NeedsPods { replicas, .. } => (
            pods.running_and_ready,
            (pods.unschedulable > 0).then(|| replicas - pods.unschedulable),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rsp(spec: Value) -> Value {
        json!({"apiVersion": "scheduling.kubefed.io/v1alpha1", "kind": "ReplicaSchedulingPreference",
               "metadata": {"name": "web", "namespace": "demo"}, "spec": spec})
    }

    fn fed_deploy() -> Value {
        json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedDeployment",
               "metadata": {"name": "web", "namespace": "demo"},
               "spec": {"template": {"spec": {"replicas": 1}}, "placement": {"clusterSelector": {}}}})
    }

    fn two_ready() -> Vec<Cluster> {
        vec![
            Cluster::new("cluster1", &[], true),
            Cluster::new("cluster2", &[], true),
        ]
    }

    fn none() -> BTreeMap<String, i64> {
        BTreeMap::new()
    }

    fn replicas_of(obj: &Value) -> BTreeMap<String, i64> {
        obj["spec"]["overrides"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|i| {
                let n = i["clusterOverrides"]
                    .as_array()?
                    .iter()
                    .find(|e| is_replicas(e))?["value"]
                    .as_i64()?;
                Some((i["clusterName"].as_str()?.to_string(), n))
            })
            .collect()
    }

    fn updated(s: Scheduled) -> Value {
        match s {
            Scheduled::Updated(v) => v,
            Scheduled::Unchanged => panic!("expected an update"),
        }
    }

    fn map(list: &[(&str, i64)]) -> BTreeMap<String, i64> {
        list.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    // E2E expectations of upstream test/e2e/scheduling.go, run on the pure part.
    #[test]
    fn upstream_two_cluster_expectations() {
        let cases = [
            (
                json!({"targetKind": "FederatedDeployment", "totalReplicas": 4}),
                map(&[("cluster1", 2), ("cluster2", 2)]),
            ),
            (
                json!({"targetKind": "FederatedDeployment", "totalReplicas": 6,
                    "clusters": {"cluster1": {"weight": 2}, "cluster2": {"weight": 1}}}),
                map(&[("cluster1", 4), ("cluster2", 2)]),
            ),
            (
                json!({"targetKind": "FederatedDeployment", "totalReplicas": 6,
                    "clusters": {"cluster1": {"weight": 2, "minReplicas": 3}, "cluster2": {"weight": 1, "minReplicas": 3}}}),
                map(&[("cluster1", 3), ("cluster2", 3)]),
            ),
        ];
        for (spec, want) in cases {
            let out = updated(
                schedule(
                    &rsp(spec.clone()),
                    &fed_deploy(),
                    None,
                    &two_ready(),
                    &none(),
                    &none(),
                )
                .unwrap(),
            );
            assert_eq!(replicas_of(&out), want, "{spec}");
            assert_eq!(
                out["spec"]["placement"]["clusters"],
                json!([{"name": "cluster1"}, {"name": "cluster2"}])
            );
            assert_eq!(
                out["spec"]["placement"]["clusterSelector"],
                json!({}),
                "selector left alone"
            );
            for item in out["spec"]["overrides"].as_array().unwrap() {
                assert!(
                    item["clusterOverrides"][0].get("op").is_none(),
                    "no op written"
                );
            }
            // Running again on the output changes nothing.
            assert_eq!(
                schedule(&rsp(spec), &out, None, &two_ready(), &none(), &none()).unwrap(),
                Scheduled::Unchanged
            );
        }
    }

    #[test]
    fn intersect_mode() {
        let clusters = vec![
            Cluster::new("cluster1", &[("foo", "bar")], true),
            Cluster::new("cluster2", &[], true),
        ];
        let spec = json!({"targetKind": "FederatedReplicaSet", "totalReplicas": 6, "intersectWithClusterSelector": true,
            "clusters": {"cluster1": {"minReplicas": 3, "weight": 2}, "cluster2": {"minReplicas": 3, "weight": 1}}});
        let mut fed = fed_deploy();
        fed["kind"] = json!("FederatedReplicaSet");
        fed["spec"]["placement"] = json!({"clusterSelector": {"matchLabels": {"foo": "bar"}}});
        let fed_ns =
            json!({"kind": "FederatedNamespace", "spec": {"placement": {"clusterSelector": {}}}});
        let out = updated(
            schedule(
                &rsp(spec.clone()),
                &fed,
                Some(&fed_ns),
                &clusters,
                &none(),
                &none(),
            )
            .unwrap(),
        );
        assert_eq!(replicas_of(&out), map(&[("cluster1", 6)]));
        assert_eq!(
            out["spec"]["placement"]["clusters"],
            json!([{"name": "cluster1"}])
        );
        // missing FederatedNamespace is an error
        let err =
            schedule(&rsp(spec.clone()), &fed, None, &clusters, &none(), &none()).unwrap_err();
        assert!(err.to_string().contains("demo/demo"), "{err}");
        // a FederatedNamespace with only a clusters list selects nothing: no change (quirk)
        let list_ns = json!({"spec": {"placement": {"clusters": [{"name": "cluster1"}]}}});
        assert_eq!(
            schedule(
                &rsp(spec),
                &fed,
                Some(&list_ns),
                &clusters,
                &none(),
                &none()
            )
            .unwrap(),
            Scheduled::Unchanged
        );
    }

    #[test]
    fn unready_clusters_and_bad_rsps() {
        let spec = json!({"targetKind": "FederatedDeployment", "totalReplicas": 4});
        let unready = vec![Cluster::new("cluster1", &[], false)];
        assert_eq!(
            schedule(
                &rsp(spec.clone()),
                &fed_deploy(),
                None,
                &unready,
                &none(),
                &none()
            )
            .unwrap(),
            Scheduled::Unchanged
        );
        let mixed = vec![Cluster::new("a", &[], true), Cluster::new("b", &[], false)];
        let out = updated(
            schedule(
                &rsp(spec.clone()),
                &fed_deploy(),
                None,
                &mixed,
                &none(),
                &none(),
            )
            .unwrap(),
        );
        assert_eq!(replicas_of(&out), map(&[("a", 4)]));

        let bad_kind = rsp(json!({"targetKind": "FederatedJob", "totalReplicas": 1}));
        assert!(
            read_rsp(&bad_kind)
                .unwrap_err()
                .to_string()
                .contains("\"demo/web\"")
        );
        let mut old_group = rsp(spec.clone());
        old_group["apiVersion"] = json!("scheduling.kubefed.k8s.io/v1alpha1");
        assert!(read_rsp(&old_group).is_ok());
        let mut wrong_group = rsp(spec.clone());
        wrong_group["apiVersion"] = json!("example.com/v1");
        assert!(read_rsp(&wrong_group).is_err());
        let mut rs = fed_deploy();
        rs["kind"] = json!("FederatedReplicaSet");
        assert!(schedule(&rsp(spec), &rs, None, &two_ready(), &none(), &none()).is_err());
    }

    // Upstream schedulingtypes/plugin_test.go: the 3 updateOverridesMap cases.
    #[test]
    fn upstream_update_overrides_cases() {
        // removing a replicas override for an unscheduled cluster keeps its other overrides
        let items = vec![json!({"clusterName": "cluster1", "clusterOverrides": [
            {"path": "/spec/replicas", "value": 1}, {"path": "/ultimate/answer", "value": 42}]})];
        let out = updated_overrides(items, &map(&[]));
        assert_eq!(
            out,
            vec![
                json!({"clusterName": "cluster1", "clusterOverrides": [{"path": "/ultimate/answer", "value": 42}]})
            ]
        );
        // an existing replicas override is updated
        let items = vec![
            json!({"clusterName": "cluster1", "clusterOverrides": [{"path": "/spec/replicas", "value": 0}]}),
        ];
        let out = updated_overrides(items, &map(&[("cluster1", 5)]));
        assert_eq!(
            out,
            vec![
                json!({"clusterName": "cluster1", "clusterOverrides": [{"path": "/spec/replicas", "value": 5}]})
            ]
        );
        // a missing one is added
        let out = updated_overrides(vec![], &map(&[("cluster1", 0)]));
        assert_eq!(
            out,
            vec![
                json!({"clusterName": "cluster1", "clusterOverrides": [{"path": "/spec/replicas", "value": 0}]})
            ]
        );
    }

    #[test]
    fn override_update_needed_rules() {
        let r = map(&[("a", 2), ("b", 0)]);
        let item = |c: &str, v: Value| json!({"clusterName": c, "clusterOverrides": [{"path": REPLICAS_PATH, "value": v}]});
        assert!(!override_update_needed(
            &[item("a", json!(2)), item("b", json!(0))],
            &r
        ));
        assert!(
            !override_update_needed(&[item("a", json!(2.7)), item("b", json!(0))], &r),
            "truncated like int64(float)"
        );
        assert!(
            override_update_needed(&[item("a", json!(2))], &r),
            "count differs"
        );
        assert!(
            override_update_needed(&[item("a", json!("2")), item("b", json!(0))], &r),
            "non-numeric"
        );
        assert!(override_update_needed(
            &[
                item("a", json!(2)),
                item("b", json!(0)),
                item("c", json!(1))
            ],
            &r
        ));
        assert!(override_update_needed(
            &[item("a", json!(3)), item("b", json!(0))],
            &r
        ));
    }

    #[test]
    fn current_replicas_and_capacity_feed_the_planner() {
        let spec =
            json!({"targetKind": "FederatedDeployment", "totalReplicas": 10, "rebalance": true});
        let out = updated(
            schedule(
                &rsp(spec),
                &fed_deploy(),
                None,
                &two_ready(),
                &map(&[("cluster2", 1)]),
                &map(&[("cluster2", 2)]),
            )
            .unwrap(),
        );
        // cluster2 can hold 2 (overflow 3 added back with rebalance, quirk 14): 5 + 2 + 3
        let got = replicas_of(&out);
        assert_eq!(got["cluster1"] + got["cluster2"], 13, "{got:?}");
        assert_eq!(got["cluster2"], 5);
    }

    #[test]
    fn seed_example_through_the_controller() {
        let spec = json!({"targetKind": "FederatedDeployment", "totalReplicas": 15, "clusters": {
            "*": {"weight": 2, "maxReplicas": 12}, "ap-northeast": {"minReplicas": 1, "maxReplicas": 3, "weight": 1}}});
        let clusters = vec![
            Cluster::new("ap-northeast", &[], true),
            Cluster::new("us-east", &[], true),
            Cluster::new("us-west", &[], true),
        ];
        let out = updated(
            schedule(&rsp(spec), &fed_deploy(), None, &clusters, &none(), &none()).unwrap(),
        );
        assert_eq!(
            replicas_of(&out),
            map(&[("ap-northeast", 3), ("us-east", 6), ("us-west", 6)])
        );
    }

    // Upstream util/podanalyzer/pod_helper_test.go.
    #[test]
    fn pod_analysis() {
        let now = parse_rfc3339("2024-05-01T12:00:00Z").unwrap();
        let running_ready = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        let unsched = |t: &str| {
            json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": t}]}})
        };
        let pods = vec![
            running_ready.clone(),
            running_ready.clone(),
            running_ready,
            unsched("2024-05-01T11:50:00Z"),
            unsched("2024-05-01T11:50:00Z"),
            unsched("2024-05-01T12:00:00Z"),
        ];
        assert_eq!(
            analyze_pods(&pods, now),
            PodAnalysis {
                total: 6,
                running_and_ready: 3,
                unschedulable: 2,
                needs_recheck: true
            }
        );
        let pending = vec![json!({"status": {"phase": "Pending"}})];
        assert_eq!(
            analyze_pods(&pending, now),
            PodAnalysis {
                total: 1,
                ..PodAnalysis::default()
            }
        );
    }

    #[test]
    fn member_observation() {
        let settled = json!({"spec": {"replicas": 3}, "status": {"readyReplicas": 3}});
        assert_eq!(
            observe_member(&settled).unwrap(),
            MemberReplicas::Settled { ready: 3 }
        );
        assert_eq!(
            observe_member(&json!({})).unwrap(),
            MemberReplicas::Settled { ready: 0 }
        );
        let moving = json!({"spec": {"replicas": 5, "selector": {"matchLabels": {"app": "web"}}}, "status": {"readyReplicas": 2}});
        let state = observe_member(&moving).unwrap();
        assert_eq!(
            state,
            MemberReplicas::NeedsPods {
                replicas: 5,
                match_labels: [("app".to_string(), "web".to_string())].into()
            }
        );
        let pods = PodAnalysis {
            total: 5,
            running_and_ready: 2,
            unschedulable: 2,
            needs_recheck: false,
        };
        assert_eq!(current_and_capacity(&state, &pods), (2, Some(3)));
        assert!(
            observe_member(&json!({"spec": {"replicas": 1}}))
                .unwrap_err()
                .to_string()
                .contains("missing selector")
        );
    }

    #[test]
    fn rfc3339_parsing() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("2000-03-01T00:00:00Z"), Some(951_868_800));
        assert_eq!(parse_rfc3339("2019-05-08T01:23:20Z"), Some(1_557_278_600));
        assert_eq!(
            parse_rfc3339("2019-05-08T03:23:20.5+02:00"),
            Some(1_557_278_600)
        );
        assert_eq!(parse_rfc3339("yesterday"), None);
    }
}
