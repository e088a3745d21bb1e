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
pub struct Type {
    pub name: &'static str,
    pub api: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
}

/// KubeFed's ten default types (also `unjoin --cleanup`'s test).
pub const TYPES: &[Type] = &[
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
    // A FederatedNamespace lives in its own namespace; the host's
    // namespace is left alone, as upstream's tester expects.
    Type {
        name: "namespaces",
        api: "/api/v1",
        plural: "namespaces",
        kind: "Namespace",
        namespaced: false,
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
pub fn fixture(t: &Type) -> (Value, Value) {
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

/// How the federation converges: one-shot runs, or a running watch that
/// the test polls as upstream's tests poll KubeFed's controller.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Driver {
    OneShot,
    Watch,
}

impl Driver {
    /// Converges, then requires `check` to hold. One-shot runs until it
    /// holds (at most 60 s): a later run sees a deletion done, as upstream's
    /// controller sees it at its requeue.
    fn converge(
        self,
        f: &Federation,
        ns: &str,
        what: &str,
        check: impl Fn() -> Result<(), String>,
    ) {
        let run = || f.reconcile_in(ns, &[]).ok();
        // One-shot: run, and again while the check fails (deletions in
        // members, a namespace's contents, take their time); watch: poll,
        // as upstream polls its controller.
        let one_shot = self == Driver::OneShot;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        if one_shot {
            run();
        }
        while let Err(e) = check() {
            assert!(std::time::Instant::now() < deadline, "{what}: {e}");
            std::thread::sleep(std::time::Duration::from_millis(if one_shot {
                500
            } else {
                200
            }));
            if one_shot {
                run();
            }
        }
    }
}

#[test]
fn kubefeds_crud_lifecycle_for_every_default_type() {
    let env = TestEnv::shared();
    let names: Vec<&str> = TYPES.iter().map(|t| t.name).collect();
    // The default federated group: the tests share clusters, and a second
    // group would make these kinds ambiguous for the types tests.
    let f = Federation::named(env, "par", "types.kubefed.io", "par-objs", &names);
    f.reconcile(&[]).ok();
    for t in TYPES {
        lifecycle(env, &f, t, Driver::OneShot, "one");
    }
    // The same under --watch, polled: a watch of the objects' namespace,
    // and one of the FederatedNamespace's own.
    let (objects, namespaces): (Vec<&Type>, Vec<&Type>) =
        TYPES.iter().partition(|t| !is_namespace(t));
    for (ns, types) in [
        (f.ns.to_string(), objects),
        (own_namespace("watch"), namespaces),
    ] {
        let log_path = env.dir().join(format!("watch-parity-{ns}.log"));
        let mut watch = crate::watch::spawn_watch_in(&f.kc, &f, &ns, &log_path, &[]);
        for t in types {
            lifecycle(env, &f, t, Driver::Watch, "watch");
        }
        crate::watch::sigterm(&watch);
        let status = watch.wait().unwrap();
        assert!(status.success(), "{status:?}");
    }
}

fn is_namespace(t: &Type) -> bool {
    t.kind == "Namespace"
}

/// The namespace (and name) of the FederatedNamespace of a lifecycle.
fn own_namespace(tag: &str) -> String {
    format!("par-{tag}-namespaces")
}

/// Where a lifecycle's federated object lives: the federation's objects
/// namespace, a FederatedNamespace's own, or nowhere (cluster-scoped).
fn federated_namespace(f: &Federation, t: &Type, tag: &str) -> Option<String> {
    if is_namespace(t) {
        Some(own_namespace(tag))
    } else if t.namespaced {
        Some(f.ns.to_string())
    } else {
        None
    }
}

/// What the members should hold of one federated object.
struct Expected<'a> {
    /// Clusters holding a copy.
    placed: &'a [&'a str],
    /// Overrides the first cluster's copy shows.
    overrides: &'a Value,
    /// The label every placed copy carries after the update.
    updated: bool,
}

fn lifecycle(env: &TestEnv, f: &Federation, t: &Type, driver: Driver, tag: &str) {
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    let (m1, m2) = (m1.as_str(), m2.as_str());
    let name = format!("par-{tag}-{}", t.plural);
    let fed_kind = format!("Federated{}", t.kind);
    let fed_plural = format!("federated{}", t.plural);
    let fed_ns = federated_namespace(f, t, tag);
    let ns = fed_ns.clone().unwrap_or_else(|| f.ns.to_string());
    let ns = ns.as_str();
    let fed_path = match &fed_ns {
        Some(ns) => format!("/apis/types.kubefed.io/v1beta1/namespaces/{ns}/{fed_plural}"),
        None => format!("/apis/types.kubefed.io/v1beta1/{fed_plural}"),
    };
    let (template, overrides) = fixture(t);
    let mut metadata = json!({"name": name});
    if let Some(ns) = &fed_ns {
        metadata["namespace"] = json!(ns);
    }
    if is_namespace(t) {
        crate::fixtures::namespace(env, "host", ns);
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
    let what = format!("{tag}: {fed_kind} {name}");
    let check = |e: &Expected| state(env, f, t, ns, &fed_path, &name, e);

    // Create.
    let created = Expected {
        placed: &[m1, m2],
        overrides: &overrides,
        updated: false,
    };
    driver.converge(f, ns, &format!("{what}: created"), || check(&created));

    // Update: a /metadata/labels override for every cluster.
    let labels = json!({"crudtester-operation": "update", "kubefed.io/managed": "true"});
    let mut fed = get(env, "host", &format!("{fed_path}/{name}")).unwrap();
    let mut first = overrides.as_array().unwrap().clone();
    first.push(json!({"path": "/metadata/labels", "value": labels}));
    fed["spec"]["overrides"] = json!([
        {"clusterName": m1, "clusterOverrides": first},
        {"clusterName": m2, "clusterOverrides": [{"path": "/metadata/labels", "value": labels}]},
    ]);
    let (status, body) =
        crate::fixtures::request(env, "host", "PUT", &format!("{fed_path}/{name}"), Some(fed));
    assert_eq!(status, 200, "{body}");
    let updated = Expected {
        placed: &[m1, m2],
        overrides: &overrides,
        updated: true,
    };
    driver.converge(f, ns, &format!("{what}: updated"), || check(&updated));

    // Placement change: the second cluster's copy goes.
    crate::fixtures::patch(
        env,
        "host",
        &format!("{fed_path}/{name}"),
        json!({"spec": {"placement": {"clusters": [{"name": m1}]}}}),
    );
    let narrowed = Expected {
        placed: &[m1],
        overrides: &overrides,
        updated: true,
    };
    driver.converge(f, ns, &format!("{what}: placement"), || check(&narrowed));

    // Delete: the member copy goes, then the federated object.
    let (status, body) =
        crate::fixtures::request(env, "host", "DELETE", &format!("{fed_path}/{name}"), None);
    assert_eq!(status, 200, "{body}");
    let member_path = member_path(t, ns, &name);
    driver.converge(f, ns, &format!("{what}: deleted"), || {
        if get(env, "member1", &member_path).is_some() {
            return Err("still in member1".into());
        }
        if get(env, "host", &format!("{fed_path}/{name}")).is_some() {
            return Err("the federated object is still there (finalizer)".into());
        }
        Ok(())
    });
}

pub fn member_path(t: &Type, ns: &str, name: &str) -> String {
    if t.namespaced {
        format!("{}/namespaces/{ns}/{}/{name}", t.api, t.plural)
    } else {
        format!("{}/{}/{name}", t.api, t.plural)
    }
}

/// Upstream's `CheckPropagation`: every placed member holds the template
/// with its overrides and the managed label, a cluster taken out holds
/// nothing; the PropagatedVersion records a version per placed cluster;
/// the federated object's status lists them OK (upstream's
/// ClusterPropagationOK is "", so no status), a cluster taken out absent
/// or WaitingForRemoval, with `Propagation` True at its generation.
fn state(
    env: &TestEnv,
    f: &Federation,
    t: &Type,
    ns: &str,
    fed_path: &str,
    name: &str,
    e: &Expected,
) -> Result<(), String> {
    let member_path = member_path(t, ns, name);
    for (member, cluster) in [("member1", f.cluster("m1")), ("member2", f.cluster("m2"))] {
        let obj = get(env, member, &member_path);
        let placed = e.placed.contains(&cluster.as_str());
        let Some(obj) = obj else {
            if placed {
                return Err(format!("not in {member}"));
            }
            continue;
        };
        if !placed {
            return Err(format!("still in {member}"));
        }
        if obj["metadata"]["labels"]["kubefed.io/managed"] != "true" {
            return Err(format!("{member}: not labelled managed"));
        }
        if e.updated && obj["metadata"]["labels"]["crudtester-operation"] != "update" {
            return Err(format!("{member}: not updated"));
        }
        if member == "member1" {
            for o in e.overrides.as_array().unwrap() {
                let path = o["path"].as_str().unwrap();
                if at(&obj, path) != &o["value"] {
                    return Err(format!("{member}: override {path} not applied: {obj}"));
                }
            }
        }
    }
    let fed = get(env, "host", &format!("{fed_path}/{name}")).ok_or("no federated object")?;
    let version_name = format!("{}-{name}", t.kind.to_lowercase());
    let version = if t.namespaced || is_namespace(t) {
        get(
            env,
            "host",
            &format!(
                "/apis/core.kubefed.io/v1alpha1/namespaces/{ns}/propagatedversions/{version_name}"
            ),
        )
    } else {
        get(
            env,
            "host",
            &format!("/apis/core.kubefed.io/v1alpha1/clusterpropagatedversions/{version_name}"),
        )
    }
    .ok_or("no PropagatedVersion")?;
    let mut versioned: Vec<&str> = version["status"]["clusterVersions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["clusterName"].as_str())
        .collect();
    versioned.sort_unstable();
    if versioned != e.placed {
        return Err(format!("versions for {versioned:?}, placed {:?}", e.placed));
    }
    // KubeFed's GetTemplateHash: an MD5 of the template, `""` without one
    // (its namespaces fixture has none).
    let has_template = fed["spec"].get("template").is_some_and(|t| !t.is_null());
    match version["status"]["templateVersion"].as_str() {
        Some(v) if has_template && v.len() == 32 => {}
        Some("") if !has_template => {}
        _ => return Err(format!("wrong template version: {version}")),
    }
    // test/e2e/version.go: the PropagatedVersion is owned by the federated
    // object (so it goes with it).
    let owned = version["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| r["uid"] == fed["metadata"]["uid"] && r["kind"] == fed["kind"]);
    if !owned {
        return Err(format!(
            "the PropagatedVersion is not owned by the federated object: {version}"
        ));
    }
    let clusters = fed["status"]["clusters"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for c in &clusters {
        let (cluster, status) = (
            c["name"].as_str().unwrap_or(""),
            c["status"].as_str().unwrap_or(""),
        );
        let want = if e.placed.contains(&cluster) {
            ""
        } else {
            "WaitingForRemoval"
        };
        if status != want {
            return Err(format!("status of {cluster} is {status:?}: {fed}"));
        }
    }
    for cluster in e.placed {
        if !clusters.iter().any(|c| c["name"] == *cluster) {
            return Err(format!("status does not name {cluster}"));
        }
    }
    let propagation = fed["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Propagation");
    if propagation.is_none_or(|c| c["status"] != "True") {
        return Err(format!("Propagation is not True: {fed}"));
    }
    if fed["status"]["observedGeneration"] != fed["metadata"]["generation"] {
        return Err("status is of an older generation".into());
    }
    Ok(())
}

/// KubeFed's namespace-scoped control plane (`KubeFedConfig.scope:
/// Namespaced`): only the federation namespace's federated objects are
/// propagated, with no FederatedNamespace needed.
#[test]
fn a_namespace_scoped_control_plane_propagates_its_own_namespace_only() {
    let env = TestEnv::shared();
    let f = Federation::named(
        env,
        "par-nsd",
        "types.kubefed.io",
        "par-nsd-objs",
        &["configmaps"],
    );
    f.configure(env, json!({"scope": "Namespaced"}));
    let cm = |ns: &str, name: &str| {
        post(
            env,
            "host",
            &format!("/apis/types.kubefed.io/v1beta1/namespaces/{ns}/federatedconfigmaps"),
            json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedConfigMap",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"template": {"data": {"a": "1"}}, "placement": {"clusterSelector": {}}}}),
        );
    };
    cm(f.fedns, "inside");
    cm(f.ns, "outside");
    f.run(&[
        "reconcile",
        "-A",
        "--probe-timeout",
        "2s",
        "--timeout",
        "3s",
    ])
    .ok();
    for m in ["member1", "member2"] {
        assert!(
            get(
                env,
                m,
                &format!("/api/v1/namespaces/{}/configmaps/inside", f.fedns)
            )
            .is_some(),
            "{m}: the federation namespace's object"
        );
        assert!(
            get(
                env,
                m,
                &format!("/api/v1/namespaces/{}/configmaps/outside", f.ns)
            )
            .is_none(),
            "{m}: nothing from another namespace"
        );
    }
    let fed = get(
        env,
        "host",
        &format!(
            "/apis/types.kubefed.io/v1beta1/namespaces/{}/federatedconfigmaps/inside",
            f.fedns
        ),
    )
    .unwrap();
    assert_eq!(fed["status"]["conditions"][0]["status"], "True", "{fed}");
    let outside = get(
        env,
        "host",
        &format!(
            "/apis/types.kubefed.io/v1beta1/namespaces/{}/federatedconfigmaps/outside",
            f.ns
        ),
    )
    .unwrap();
    assert!(
        outside.get("status").is_none(),
        "not seen at all: {outside}"
    );
}

/// `test/e2e/crd.go`: a cluster-scoped CRD federated like a built-in type,
/// and deletion with `kubefed.io/orphan` leaving the member copy unmanaged.
#[test]
fn a_cluster_scoped_crd_is_federated_and_orphaned() {
    let env = TestEnv::shared();
    let group = "parity.example.com";
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("lanterns.{group}")},
        "spec": {"group": group, "scope": "Cluster",
                 "names": {"plural": "lanterns", "singular": "lantern", "kind": "Lantern", "listKind": "LanternList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    for c in ["host", "member1", "member2"] {
        post(
            env,
            c,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            crd.clone(),
        );
        crate::fixtures::wait_until(&format!("{c} serves lanterns"), || {
            get(env, c, &format!("/apis/{group}/v1")).is_some()
        });
    }
    let t = format!("lanterns.{group}");
    let f = Federation::named(
        env,
        "par-crd",
        "types.kubefed.io",
        "par-crd-objs",
        &[t.as_str()],
    );
    let fed_path = "/apis/types.kubefed.io/v1beta1/federatedlanterns";
    post(
        env,
        "host",
        fed_path,
        json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedLantern",
            "metadata": {"name": "par-crd-l"},
            "spec": {"template": {"spec": {"lumens": 800}}, "placement": {"clusterSelector": {}},
                     "overrides": [{"clusterName": f.cluster("m2"), "clusterOverrides": [{"path": "/spec/lumens", "value": 400}]}]}}),
    );
    f.reconcile(&[]).ok();
    let member = |m: &str| get(env, m, &format!("/apis/{group}/v1/lanterns/par-crd-l"));
    assert_eq!(member("member1").unwrap()["spec"]["lumens"], 800);
    assert_eq!(member("member2").unwrap()["spec"]["lumens"], 400);
    // Orphaning deletion: the members keep their copies, unmanaged.
    crate::fixtures::patch(
        env,
        "host",
        &format!("{fed_path}/par-crd-l"),
        json!({"metadata": {"annotations": {"kubefed.io/orphan": "true"}}}),
    );
    let (status, body) = crate::fixtures::request(
        env,
        "host",
        "DELETE",
        &format!("{fed_path}/par-crd-l"),
        None,
    );
    assert_eq!(status, 200, "{body}");
    f.reconcile(&[]).ok();
    for m in ["member1", "member2"] {
        let kept = member(m).unwrap_or_else(|| panic!("{m}: orphaned, not deleted"));
        assert!(
            kept["metadata"]["labels"]
                .get("kubefed.io/managed")
                .is_none(),
            "{m}: no longer managed: {kept}"
        );
    }
    assert!(get(env, "host", &format!("{fed_path}/par-crd-l")).is_none());
}

/// `test/e2e/ftccontroller.go`: a CRD upgraded from v1 to v2 and enabled
/// again with `--version v2`: the FederatedTypeConfig's target version
/// changes and the next run writes the members through v2.
#[test]
fn a_target_version_change_is_followed() {
    let env = TestEnv::shared();
    let group = "kites.example.com";
    let version = |name: &str, storage: bool| {
        json!({"name": name, "served": true, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
    };
    let crd = |versions: Value| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("kites.{group}")},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "kites", "singular": "kite", "kind": "Kite", "listKind": "KiteList"},
                     "versions": versions}})
    };
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    for c in ["host", "member1", "member2"] {
        post(env, c, crds, crd(json!([version("v1", true)])));
        crate::fixtures::wait_until(&format!("{c} serves kites/v1"), || {
            get(env, c, &format!("/apis/{group}/v1")).is_some()
        });
    }
    let t = format!("kites.{group}");
    let f = Federation::named(
        env,
        "par-ftc",
        "types.kubefed.io",
        "par-ftc-objs",
        &[t.as_str()],
    );
    post(
        env,
        "host",
        &format!(
            "/apis/types.kubefed.io/v1beta1/namespaces/{}/federatedkites",
            f.ns
        ),
        json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedKite",
            "metadata": {"name": "k", "namespace": f.ns},
            "spec": {"template": {"spec": {"tail": 1}}, "placement": {"clusterSelector": {}}}}),
    );
    f.reconcile(&[]).ok();
    let kite = |m: &str, v: &str| {
        get(
            env,
            m,
            &format!("/apis/{group}/{v}/namespaces/{}/kites/k", f.ns),
        )
    };
    assert!(kite("member1", "v1").is_some());

    // The CRD is upgraded: v1 and v2 served, v2 stored.
    for c in ["host", "member1", "member2"] {
        let mut live = get(env, c, &format!("{crds}/kites.{group}")).unwrap();
        live["spec"]["versions"] = json!([version("v1", false), version("v2", true)]);
        let (status, body) =
            crate::fixtures::request(env, c, "PUT", &format!("{crds}/kites.{group}"), Some(live));
        assert_eq!(status, 200, "{body}");
        crate::fixtures::wait_until(&format!("{c} serves kites/v2"), || {
            get(env, c, &format!("/apis/{group}/v2")).is_some()
        });
    }
    f.run(&[
        "enable",
        &t,
        "--version",
        "v2",
        "--federated-group",
        "types.kubefed.io",
    ])
    .ok();
    let ftc = get(
        env,
        "host",
        &format!(
            "/apis/core.kubefed.io/v1beta1/namespaces/{}/federatedtypeconfigs/{t}",
            f.fedns
        ),
    )
    .unwrap();
    assert_eq!(ftc["spec"]["targetType"]["version"], "v2", "{ftc}");
    // A template change is written through v2.
    crate::fixtures::patch(
        env,
        "host",
        &format!(
            "/apis/types.kubefed.io/v1beta1/namespaces/{}/federatedkites/k",
            f.ns
        ),
        json!({"spec": {"template": {"spec": {"tail": 2}}}}),
    );
    f.reset();
    f.reconcile(&[]).ok();
    assert_eq!(kite("member2", "v2").unwrap()["spec"]["tail"], 2);
    assert!(
        f.m1.records()
            .iter()
            .any(|r| r.method == "PUT" && r.version == "v2" && r.resource == "kites"),
        "{:?}",
        f.m1.records()
    );
}

/// KubeFed's `test/e2e/deleteoptions.go`: a federated Deployment whose
/// `kubefed.io/deleteoption` says `propagationPolicy: Orphan` is deleted
/// from the member, but the ReplicaSet the member's deployment controller
/// made for it stays; without it the member's garbage collector takes the
/// ReplicaSet too. An environment of its own: its members run the
/// deployment controller, which the shared one does not.
#[test]
fn delete_options_orphan_keeps_the_members_replicasets() {
    let env = TestEnv::private_with(&["host", "member1", "member2"], &["deployment"]).unwrap();
    let f = Federation::named(
        &env,
        "par-del",
        "types.kubefed.io",
        "par-del-objs",
        &["deployments.apps"],
    );
    let m1 = f.cluster("m1");
    let fed_path = format!(
        "/apis/types.kubefed.io/v1beta1/namespaces/{}/federateddeployments",
        f.ns
    );
    for name in ["keep", "drop"] {
        f.create(&env, "FederatedDeployment", name, json!({
            "template": {"spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}},
            "placement": {"clusters": [{"name": m1}]}
        }));
    }
    f.reconcile(&[]).ok();
    let replicasets = |app: &str| -> Vec<Value> {
        get(
            &env,
            "member1",
            &format!(
                "/apis/apps/v1/namespaces/{}/replicasets?labelSelector=app%3D{app}",
                f.ns
            ),
        )
        .and_then(|l| l["items"].as_array().cloned())
        .unwrap_or_default()
    };
    crate::fixtures::wait_until(
        "the member's deployment controller made ReplicaSets",
        || !replicasets("keep").is_empty() && !replicasets("drop").is_empty(),
    );
    // crudtester's SetDeleteOption.
    crate::fixtures::patch(
        &env,
        "host",
        &format!("{fed_path}/keep"),
        json!({"metadata": {"annotations": {"kubefed.io/deleteoption": "{\"propagationPolicy\":\"Orphan\"}"}}}),
    );
    for name in ["keep", "drop"] {
        let (status, body) =
            crate::fixtures::request(&env, "host", "DELETE", &format!("{fed_path}/{name}"), None);
        assert_eq!(status, 200, "{body}");
    }
    crate::fixtures::wait_until("both federated objects deleted (CheckDelete)", || {
        f.reconcile(&[]);
        ["keep", "drop"].iter().all(|n| {
            get(&env, "host", &format!("{fed_path}/{n}")).is_none()
                && get(
                    &env,
                    "member1",
                    &format!("/apis/apps/v1/namespaces/{}/deployments/{n}", f.ns),
                )
                .is_none()
        })
    });
    crate::fixtures::wait_until(
        "the member's garbage collector took drop's ReplicaSet",
        || replicasets("drop").is_empty(),
    );
    // CheckReplicaSet: the orphaned ReplicaSet is there, owned by nobody.
    crate::fixtures::wait_until("keep's ReplicaSet orphaned", || {
        let kept = replicasets("keep");
        !kept.is_empty()
            && kept.iter().all(|rs| {
                rs["metadata"]["ownerReferences"]
                    .as_array()
                    .is_none_or(|o| o.is_empty())
            })
    });
}

/// Upstream's e2e joins the host as a member too, and its crudtester
/// expects a FederatedNamespace never to delete the host's own namespace:
/// the host leaving the placement (or the FederatedNamespace going) only
/// takes the managed label off it (`pkg/controller/sync/controller.go`,
/// `removeManagedLabel` for the host's namespace).
#[test]
fn a_host_joined_as_a_member_keeps_its_own_namespace() {
    let env = TestEnv::shared();
    let f = Federation::named(env, "par-hm", "types.kubefed.io", "par-hm-objs", &[]);
    f.run(&["join", "par-hm-self", "--cluster-context", "host"])
        .ok();
    let m1 = f.cluster("m1");
    let ns = "par-hm-ns";
    crate::fixtures::namespace(env, "host", ns);
    post(
        env,
        "host",
        &format!("/apis/types.kubefed.io/v1beta1/namespaces/{ns}/federatednamespaces"),
        json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedNamespace",
            "metadata": {"name": ns, "namespace": ns},
            "spec": {"placement": {"clusters": [{"name": "par-hm-self"}, {"name": m1}]}}}),
    );
    let run = || f.reconcile_in(ns, &[]).ok();
    let managed = |cluster: &str| {
        get(env, cluster, &format!("/api/v1/namespaces/{ns}"))
            .map(|n| n["metadata"]["labels"]["kubefed.io/managed"] == "true")
    };
    run();
    assert_eq!(
        managed("host"),
        Some(true),
        "the host's namespace is managed"
    );
    assert_eq!(managed("member1"), Some(true));
    // The host leaves the placement: its namespace stays, unlabelled.
    crate::fixtures::patch(
        env,
        "host",
        &format!("/apis/types.kubefed.io/v1beta1/namespaces/{ns}/federatednamespaces/{ns}"),
        json!({"spec": {"placement": {"clusters": [{"name": m1}]}}}),
    );
    run();
    assert_eq!(managed("host"), Some(false), "kept, no longer managed");
    assert_eq!(managed("member1"), Some(true));
    // Back in, then the FederatedNamespace goes: member1's namespace is
    // deleted, the host's kept and unlabelled.
    crate::fixtures::patch(
        env,
        "host",
        &format!("/apis/types.kubefed.io/v1beta1/namespaces/{ns}/federatednamespaces/{ns}"),
        json!({"spec": {"placement": {"clusters": [{"name": "par-hm-self"}, {"name": m1}]}}}),
    );
    run();
    assert_eq!(managed("host"), Some(true));
    let (status, body) = crate::fixtures::request(
        env,
        "host",
        "DELETE",
        &format!("/apis/types.kubefed.io/v1beta1/namespaces/{ns}/federatednamespaces/{ns}"),
        None,
    );
    assert_eq!(status, 200, "{body}");
    crate::fixtures::wait_until("the FederatedNamespace and member1's namespace go", || {
        run();
        let gone = get(
            env,
            "host",
            &format!("/apis/types.kubefed.io/v1beta1/namespaces/{ns}/federatednamespaces/{ns}"),
        )
        .is_none();
        let m1_ns = get(env, "member1", &format!("/api/v1/namespaces/{ns}"));
        gone && m1_ns.is_none_or(|n| !n["metadata"]["deletionTimestamp"].is_null())
    });
    let host_ns = get(env, "host", &format!("/api/v1/namespaces/{ns}")).expect("the host keeps it");
    assert!(
        host_ns["metadata"]["deletionTimestamp"].is_null(),
        "{host_ns}"
    );
    assert_ne!(
        host_ns["metadata"]["labels"]["kubefed.io/managed"], "true",
        "{host_ns}"
    );
}
