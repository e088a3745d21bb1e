//! A federation of mixed releases, as real ones are: the host and member1
//! on the current release, member2 on 1.20. Every step a user takes (init,
//! join, enable, federate, reconcile, status, the watch, unjoin) works
//! across them, and each member reports its own version.

use crate::fixtures::{Federation, cm, get, wait_until};
use crate::watch::{log, sigterm, spawn_watch};
use serde_json::{Value, json};
use testenv::{TestEnv, Version};

#[test]
fn a_federation_of_the_current_release_and_1_20_converges() {
    let env = TestEnv::private_mixed(&[
        ("host", Version::CURRENT),
        ("member1", Version::CURRENT),
        ("member2", Version::V1_20),
    ])
    .unwrap();
    let f = Federation::new(&env, "ver-mix", &["configmaps", "deployments.apps"]);
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));

    // Each KubeFedCluster says what its member runs.
    let out = f.run(&["status", "--probe", "-o", "json"]).ok();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let version_of = |name: &str| {
        doc["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .map(|c| c["kubernetesVersion"].clone())
    };
    assert_eq!(
        version_of(&m1),
        Some(json!(Version::CURRENT.tag)),
        "{}",
        out.stdout
    );
    assert_eq!(
        version_of(&m2),
        Some(json!(Version::V1_20.tag)),
        "{}",
        out.stdout
    );

    // An existing ConfigMap federated, a Deployment with an override per member.
    crate::fixtures::post(
        &env,
        "host",
        &format!("/api/v1/namespaces/{}/configmaps", f.ns),
        json!({"metadata": {"name": "settings"}, "data": {"mode": "mixed"}}),
    );
    f.run(&["federate", "configmaps", "settings", "-n", f.ns])
        .ok();
    crate::fixtures::patch(
        &env,
        "host",
        &format!(
            "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/settings",
            f.group, f.ns
        ),
        json!({"spec": {"placement": {"clusterSelector": {}}}}),
    );
    f.create(&env, "FederatedDeployment", "web", json!({
        "template": {"spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}},
        "placement": {"clusterSelector": {}},
        "overrides": [{"clusterName": m2, "clusterOverrides": [{"path": "/spec/replicas", "value": 3}]}]
    }));
    f.reconcile(&[]).ok();
    for member in ["member1", "member2"] {
        assert_eq!(
            cm(&env, member, f.ns, "settings").unwrap()["data"]["mode"],
            "mixed"
        );
    }
    let replicas = |member: &str| {
        get(
            &env,
            member,
            &format!("/apis/apps/v1/namespaces/{}/deployments/web", f.ns),
        )
        .map(|d| d["spec"]["replicas"].clone())
    };
    assert_eq!(replicas("member1"), Some(json!(1)));
    assert_eq!(replicas("member2"), Some(json!(3)));
    f.reset();
    let second = f.reconcile(&[]).ok();
    assert_eq!(
        f.member_writes(),
        0,
        "a second run writes nothing:\n{}",
        second.stdout
    );

    // The watch propagates a change to both.
    let log_path = env.dir().join("ver-mix-watch.log");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &[]);
    crate::fixtures::patch(
        &env,
        "host",
        &format!(
            "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/settings",
            f.group, f.ns
        ),
        json!({"spec": {"template": {"data": {"mode": "watched"}}}}),
    );
    wait_until("the change reaches both releases", || {
        ["member1", "member2"]
            .iter()
            .all(|m| cm(&env, m, f.ns, "settings").is_some_and(|c| c["data"]["mode"] == "watched"))
    });
    sigterm(&watch);
    assert!(watch.wait().unwrap().success(), "{}", log(&log_path));

    // Unjoin of the old member takes its identity away.
    f.run(&["unjoin", &m2, "--cluster-context", "member2"]).ok();
    assert!(
        get(
            &env,
            "member2",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles"
        )
        .unwrap()["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| !r["metadata"]["name"].as_str().unwrap_or("").contains(&m2)),
        "no ClusterRole of {m2} left"
    );
}

/// A FederatedTypeConfig made when its version was current (Ingress
/// `extensions/v1beta1`, as KubeFed before v0.10 enabled it, removed in
/// 1.22): a 1.37 member is named with the version it serves instead and
/// the command that moves the type, in reconcile and status; the move keeps
/// the federated objects, and every member then holds the Ingress (the 1.20
/// member its existing copy, unwritten).
#[test]
fn a_member_that_no_longer_serves_a_types_version_is_told_what_it_serves() {
    let env = TestEnv::private_mixed(&[
        ("host", Version::V1_20),
        ("member1", Version::CURRENT),
        ("member2", Version::V1_20),
    ])
    .unwrap();
    let f = Federation::new(&env, "ver-old", &[]);
    f.run(&[
        "enable",
        "ingresses.extensions",
        "--federated-group",
        f.group,
    ])
    .ok();
    f.create(
        &env,
        "FederatedIngress",
        "site",
        json!({
            "template": {"spec": {"rules": [{"host": "site.example.com"}]}},
            "placement": {"clusterSelector": {}}
        }),
    );
    let run = f.reconcile(&[]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    let m1 = f.cluster("m1");
    let told = format!(
        "{m1}: does not serve ingresses.extensions/v1beta1, the target of FederatedTypeConfig ingresses.extensions; it serves ingresses in networking.k8s.io/v1 (kubefedctl enable ingresses.networking.k8s.io --version v1 moves the type)"
    );
    assert!(run.stderr.contains(&told), "{}", run.stderr);
    let path = |g: &str| format!("/apis/{g}/namespaces/{}/ingresses/site", f.ns);
    assert!(
        get(&env, "member2", &path("extensions/v1beta1")).is_some(),
        "the 1.20 member holds it"
    );
    let status = f
        .run(&["status", "ingresses.extensions", "-n", f.ns, "-o", "json"])
        .ok();
    // status says the same of the same member, and what the last run
    // recorded; the 1.20 member is fine.
    let rows: Value = serde_json::from_str(&status.stdout).unwrap();
    let clusters = rows[0]["clusters"].as_array().unwrap();
    let of = |name: &str| {
        clusters
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {}", status.stdout))
    };
    assert_eq!(of(&m1)["status"], "TypeNotServed", "{}", status.stdout);
    assert_eq!(
        of(&m1)["message"],
        format!("{told}; recorded as CachedRetrievalFailed"),
        "{}",
        status.stdout
    );
    assert_eq!(of(&f.cluster("m2"))["status"], "OK", "{}", status.stdout);

    // The move the message names: the old FederatedTypeConfig goes, the
    // federated object stays, every member converges.
    let moved = f
        .run(&[
            "enable",
            "ingresses.networking.k8s.io",
            "--version",
            "v1",
            "--federated-group",
            f.group,
        ])
        .ok();
    assert!(
        moved.stdout.contains(
            "federatedtypeconfig.core.kubefed.io/ingresses.extensions deleted (host): the type moved to ingresses.networking.k8s.io"
        ),
        "{}",
        moved.stdout
    );
    assert!(
        f.fed(&env, "federatedingresses", "site").is_some(),
        "the federated object stays"
    );
    f.reset();
    f.reconcile(&[]).ok();
    for member in ["member1", "member2"] {
        assert!(
            get(&env, member, &path("networking.k8s.io/v1")).is_some(),
            "{member}"
        );
    }
    assert_eq!(f.m2.writes(), 0, "the 1.20 member's copy was already right");
}

/// 1.22+ labels every Namespace `kubernetes.io/metadata.name`. An override
/// that replaces a federated Namespace's `/metadata/labels` (KubeFed's own
/// CRUD fixture does) must converge once: a second run writes nothing and
/// `status --live` and a plan both call every member in sync, as KubeFed's
/// version comparison does.
#[test]
fn a_namespace_whose_labels_an_override_replaces_converges_once() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "ver-nsl", &["configmaps"]);
    let labels = json!({"team": "blue", "kubefed.io/managed": "true"});
    f.patch_federated_namespace(env, json!({"spec": {"overrides": [
            {"clusterName": f.cluster("m1"), "clusterOverrides": [{"path": "/metadata/labels", "value": labels}]},
            {"clusterName": f.cluster("m2"), "clusterOverrides": [{"path": "/metadata/labels", "value": labels}]}
        ]}}));
    f.reconcile(&[]).ok();
    let member_labels =
        get(env, "member1", &format!("/api/v1/namespaces/{}", f.ns)).unwrap()["metadata"]["labels"]
            .clone();
    assert_eq!(member_labels["team"], "blue", "{member_labels}");
    if env.version().minor >= 22 {
        assert_eq!(
            member_labels["kubernetes.io/metadata.name"], f.ns,
            "the server keeps its label"
        );
    }
    f.reset();
    f.reconcile(&[]).ok();
    assert_eq!(f.member_writes(), 0, "converged once");
    let plan = f.reconcile(&["--dry-run", "--exit-code"]);
    assert_eq!(plan.code, 0, "{}{}", plan.stdout, plan.stderr);
    let live = f
        .run(&["status", "namespaces", "-n", f.ns, "--live", "-o", "json"])
        .ok();
    let rows: Value = serde_json::from_str(&live.stdout).unwrap();
    for c in rows[0]["clusters"].as_array().unwrap() {
        assert_eq!(c["live"], "in-sync", "{}", live.stdout);
    }
}
