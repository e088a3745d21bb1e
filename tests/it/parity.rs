//! KubeFed's own e2e CRUD lifecycle (`test/e2e/crud.go` driving
//! `test/common/crudtester.go`), with its fixtures
//! (`testdata/kubefed-fixtures/`), for the default types: create with the
//! fixture's overrides on the first cluster, update with a
//! `/metadata/labels` override for every cluster, remove a cluster from the
//! placement, delete. Each step is one one-shot `reconcile`, then checked
//! as upstream's `CheckPropagation` checks it: every placed member holds the
//! template with its overrides and the managed label, the
//! PropagatedVersion records a version per cluster, the federated object's
//! status lists the clusters with `Propagation` True at its generation.

use crate::fixtures::{Federation, get, post, root};
use serde_json::{Value, json};
use testenv::TestEnv;

/// A default type: the name `enable` takes, its target's API path prefix,
/// plural and kind, and whether it is namespaced.
struct Type {
    name: &'static str,
    api: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
}

const TYPES: &[Type] = &[
    Type {
        name: "configmaps",
        api: "/api/v1",
        plural: "configmaps",
        kind: "ConfigMap",
        namespaced: true,
    },
    Type {
        name: "secrets",
        api: "/api/v1",
        plural: "secrets",
        kind: "Secret",
        namespaced: true,
    },
    Type {
        name: "serviceaccounts",
        api: "/api/v1",
        plural: "serviceaccounts",
        kind: "ServiceAccount",
        namespaced: true,
    },
    Type {
        name: "services",
        api: "/api/v1",
        plural: "services",
        kind: "Service",
        namespaced: true,
    },
    Type {
        name: "deployments.apps",
        api: "/apis/apps/v1",
        plural: "deployments",
        kind: "Deployment",
        namespaced: true,
    },
    Type {
        name: "replicasets.apps",
        api: "/apis/apps/v1",
        plural: "replicasets",
        kind: "ReplicaSet",
        namespaced: true,
    },
    Type {
        name: "jobs.batch",
        api: "/apis/batch/v1",
        plural: "jobs",
        kind: "Job",
        namespaced: true,
    },
    Type {
        name: "ingresses.networking.k8s.io",
        api: "/apis/networking.k8s.io/v1",
        plural: "ingresses",
        kind: "Ingress",
        namespaced: true,
    },
    Type {
        name: "clusterroles.rbac.authorization.k8s.io",
        api: "/apis/rbac.authorization.k8s.io/v1",
        plural: "clusterroles",
        kind: "ClusterRole",
        namespaced: false,
    },
];

/// The fixture of a type: `template` and `overrides` (cluster overrides,
/// given to the first cluster as upstream's tester does).
fn fixture(t: &Type) -> (Value, Value) {
    let text =
        std::fs::read_to_string(root().join(format!("testdata/kubefed-fixtures/{}.yaml", t.name)))
            .unwrap();
    let doc: Value = kubefedctl::yaml::yaml_documents(&text).unwrap().remove(0);
    let overrides = doc["overrides"]
        .as_array()
        .and_then(|o| o.first())
        .map(|o| o["clusterOverrides"].clone())
        .unwrap_or(json!([]));
    (doc["template"].clone(), overrides)
}

/// The value at an override's path (`/spec/replicas`) of a member object.
fn at<'v>(obj: &'v Value, path: &str) -> &'v Value {
    obj.pointer(path).unwrap_or(&Value::Null)
}

#[test]
fn kubefeds_crud_lifecycle_for_every_default_type() {
    let env = TestEnv::shared();
    let names: Vec<&str> = TYPES.iter().map(|t| t.name).collect();
    // The default federated group: the tests share clusters, and a second
    // group would make these kinds ambiguous for the types tests.
    let f = Federation::named(env, "par", "types.kubefed.io", "par-objs", &names);
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    f.reconcile(&[]).ok();
    for t in TYPES {
        lifecycle(env, &f, t, &m1, &m2);
    }
}

fn lifecycle(env: &TestEnv, f: &Federation, t: &Type, m1: &str, m2: &str) {
    let ns = f.ns;
    let name = format!("par-{}", t.plural);
    let fed_kind = format!("Federated{}", t.kind);
    let fed_plural = format!("federated{}", t.plural);
    let fed_path = if t.namespaced {
        format!("/apis/types.kubefed.io/v1beta1/namespaces/{ns}/{fed_plural}")
    } else {
        format!("/apis/types.kubefed.io/v1beta1/{fed_plural}")
    };
    let member_path = if t.namespaced {
        format!("{}/namespaces/{ns}/{}/{name}", t.api, t.plural)
    } else {
        format!("{}/{}/{name}", t.api, t.plural)
    };
    let (template, overrides) = fixture(t);
    let mut metadata = json!({"name": name});
    if t.namespaced {
        metadata["namespace"] = json!(ns);
    }
    post(
        env,
        "host",
        &fed_path,
        json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": fed_kind, "metadata": metadata,
            "spec": {"template": template,
                     "placement": {"clusters": [{"name": m1}, {"name": m2}]},
                     "overrides": [{"clusterName": m1, "clusterOverrides": overrides}]}}),
    );
    let what = format!("{fed_kind} {name}");

    // Create.
    f.reconcile(&[]).ok();
    let on = |member: &str| get(env, member, &member_path);
    for member in ["member1", "member2"] {
        let obj = on(member).unwrap_or_else(|| panic!("{what}: created in {member}"));
        assert_eq!(
            obj["metadata"]["labels"]["kubefed.io/managed"], "true",
            "{what} in {member}"
        );
    }
    for o in overrides.as_array().unwrap() {
        let path = o["path"].as_str().unwrap();
        assert_eq!(
            at(&on("member1").unwrap(), path),
            &o["value"],
            "{what}: override {path} on the first cluster"
        );
    }
    check_propagation(env, f, t, &fed_path, &name, &[m1, m2]);

    // Update: a /metadata/labels override for every cluster.
    let labels = json!({"crudtester-operation": "update", "kubefed.io/managed": "true"});
    let mut fed = get(env, "host", &format!("{fed_path}/{name}")).unwrap();
    let mut first = overrides.as_array().unwrap().clone();
    first.push(json!({"path": "/metadata/labels", "value": labels}));
    fed["spec"]["overrides"] = json!([
        {"clusterName": m1, "clusterOverrides": first},
        {"clusterName": m2, "clusterOverrides": [{"path": "/metadata/labels", "value": labels}]},
    ]);
    crate::fixtures::request(env, "host", "PUT", &format!("{fed_path}/{name}"), Some(fed));
    f.reconcile(&[]).ok();
    for member in ["member1", "member2"] {
        assert_eq!(
            on(member).unwrap()["metadata"]["labels"]["crudtester-operation"],
            "update",
            "{what}: updated in {member}"
        );
    }
    check_propagation(env, f, t, &fed_path, &name, &[m1, m2]);

    // Placement change: the second cluster's copy goes.
    crate::fixtures::patch(
        env,
        "host",
        &format!("{fed_path}/{name}"),
        json!({"spec": {"placement": {"clusters": [{"name": m1}]}}}),
    );
    f.reconcile(&[]).ok();
    // The deletion is seen done by the next run, as upstream's controller
    // sees it at its requeue (until then the cluster is WaitingForRemoval).
    f.reconcile(&[]).ok();
    assert!(on("member1").is_some(), "{what}: kept where still placed");
    assert!(
        on("member2").is_none(),
        "{what}: removed from the cluster taken out"
    );
    check_propagation(env, f, t, &fed_path, &name, &[m1]);

    // Delete: the member copy goes, then the federated object.
    let (status, body) =
        crate::fixtures::request(env, "host", "DELETE", &format!("{fed_path}/{name}"), None);
    assert_eq!(status, 200, "{body}");
    f.reconcile(&[]).ok();
    assert!(on("member1").is_none(), "{what}: deleted from the members");
    assert!(
        get(env, "host", &format!("{fed_path}/{name}")).is_none(),
        "{what}: the finalizer released"
    );
}

/// Upstream's `CheckPropagation`: the PropagatedVersion records a version
/// for each placed cluster, and the federated object's status lists them
/// with `Propagation` True at its current generation.
fn check_propagation(
    env: &TestEnv,
    f: &Federation,
    t: &Type,
    fed_path: &str,
    name: &str,
    clusters: &[&str],
) {
    let fed = get(env, "host", &format!("{fed_path}/{name}")).unwrap();
    let what = format!("{} {name}", fed["kind"]);
    let version_name = format!("{}-{name}", t.kind.to_lowercase());
    let version = if t.namespaced {
        get(
            env,
            "host",
            &format!(
                "/apis/core.kubefed.io/v1alpha1/namespaces/{}/propagatedversions/{version_name}",
                f.ns
            ),
        )
    } else {
        get(
            env,
            "host",
            &format!("/apis/core.kubefed.io/v1alpha1/clusterpropagatedversions/{version_name}"),
        )
    }
    .unwrap_or_else(|| panic!("{what}: its PropagatedVersion"));
    let mut versioned: Vec<&str> = version["status"]["clusterVersions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["clusterName"].as_str().unwrap())
        .collect();
    versioned.sort_unstable();
    assert_eq!(versioned, clusters, "{what}: a version per placed cluster");
    assert!(
        version["status"]["templateVersion"]
            .as_str()
            .is_some_and(|v| !v.is_empty()),
        "{what}: {version}"
    );
    // Placed clusters OK (upstream's ClusterPropagationOK is "", so no
    // status); a cluster taken out absent, or waiting for removal
    // (upstream's checkFederatedStatus).
    for c in fed["status"]["clusters"].as_array().unwrap() {
        let (cluster, status) = (c["name"].as_str().unwrap(), c["status"].as_str().unwrap_or(""));
        if clusters.contains(&cluster) {
            assert_eq!(status, "", "{what}: {cluster} OK: {fed}");
        } else {
            assert_eq!(status, "WaitingForRemoval", "{what}: {cluster} taken out: {fed}");
        }
    }
    for cluster in clusters {
        assert!(
            fed["status"]["clusters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["name"] == *cluster),
            "{what}: status names {cluster}: {fed}"
        );
    }
    let propagation = fed["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Propagation")
        .unwrap_or_else(|| panic!("{what}: {fed}"));
    assert_eq!(propagation["status"], "True", "{what}: {fed}");
    assert_eq!(
        fed["status"]["observedGeneration"], fed["metadata"]["generation"],
        "{what}: status of the current generation"
    );
}
