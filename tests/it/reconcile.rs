//! reconcile through the built binary: live against real API servers behind
//! counting, fault-injecting proxies, and offline on files.
//!
//! Tests share the clusters, so each has its own federation namespace,
//! cluster names, federated group and object namespace, and reconciles
//! with `-n`.

use crate::fixtures::{
    Federation, assert_golden, cm, get, holder, kubefedctl, labels, lease, namespace, patch, post,
    root, wait_until,
};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;
use testenv::{Faults, Mode, Proxy, RequestRecord, TestEnv};

#[test]
fn converges_with_overrides_and_rsp_then_writes_nothing() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-a", &["configmaps", "deployments.apps"]);
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    f.create(env, "FederatedConfigMap", "settings", json!({
        "template": {"data": {"colour": "blue"}},
        "placement": {"clusters": [{"name": m1}, {"name": m2}]},
        "overrides": [{"clusterName": m2, "clusterOverrides": [{"path": "/data/colour", "value": "green"}]}]
    }));
    f.create_deployment(env, "web");
    f.create_rsp(env, "web", 9, &[(&m1, 2), (&m2, 1)]);

    f.reset();
    let dry = f.reconcile(&["--dry-run", "--exit-code"]);
    assert_eq!(dry.code, 4, "changes pending: {}{}", dry.stdout, dry.stderr);
    assert!(
        dry.stdout
            .contains(&format!("{m2}: create ConfigMap rc-a-objs/settings")),
        "{}",
        dry.stdout
    );
    assert_eq!(f.member_writes(), 0, "a dry run writes nothing to members");

    // --type: that type alone is read and decided.
    f.reset();
    let only = f.reconcile(&["--dry-run", "--type", "configmaps"]).ok();
    assert!(
        only.stdout
            .contains(&format!("{m2}: create ConfigMap rc-a-objs/settings")),
        "{}",
        only.stdout
    );
    assert!(!only.stdout.contains("Deployment"), "{}", only.stdout);
    let deployments: Vec<RequestRecord> = [&f.host, &f.m1, &f.m2]
        .iter()
        .flat_map(|p| p.records())
        .filter(|r| r.path.contains("deployments"))
        .collect();
    assert!(deployments.is_empty(), "{deployments:?}");

    f.reset();
    let run = f.reconcile(&[]).ok();
    assert!(run.stdout.contains("CREATED"), "{}", run.stdout);
    assert_eq!(
        f.member_writes(),
        6,
        "one create per placed object, namespaces included: {:?}",
        f.m1.records()
    );
    assert_eq!(
        cm(env, "member1", f.ns, "settings").unwrap()["data"]["colour"],
        "blue"
    );
    let green = cm(env, "member2", f.ns, "settings").unwrap();
    assert_eq!(green["data"]["colour"], "green");
    assert_eq!(green["metadata"]["labels"]["kubefed.io/managed"], "true");
    assert_eq!(
        (
            f.replicas(env, "member1", "web"),
            f.replicas(env, "member2", "web")
        ),
        (6, 3),
        "RSP weights 2:1 of 9"
    );
    let web = f.fed(env, "federateddeployments", "web").unwrap();
    assert_eq!(
        web["spec"]["placement"]["clusters"],
        json!([{"name": m1}, {"name": m2}]),
        "the RSP result is written back"
    );

    let settings = f.fed(env, "federatedconfigmaps", "settings").unwrap();
    assert_eq!(settings["status"]["conditions"][0]["type"], "Propagation");
    assert_eq!(settings["status"]["conditions"][0]["status"], "True");
    assert_eq!(
        settings["status"]["clusters"],
        json!([{"name": m1}, {"name": m2}])
    );
    assert_eq!(
        settings["metadata"]["finalizers"],
        json!(["kubefed.io/sync-controller"])
    );
    let pv = get(
        env,
        "host",
        &format!(
            "/apis/core.kubefed.io/v1alpha1/namespaces/{}/propagatedversions/configmap-settings",
            f.ns
        ),
    )
    .unwrap();
    assert_eq!(pv["status"]["clusterVersions"].as_array().unwrap().len(), 2);
    assert!(pv["status"]["templateVersion"].as_str().unwrap().len() == 32);

    f.reset();
    let again = f.reconcile(&[]).ok();
    let (lock, writes): (Vec<RequestRecord>, Vec<RequestRecord>) = [&f.host, &f.m1, &f.m2]
        .iter()
        .flat_map(|p| p.records())
        .filter(|r| r.is_write())
        .partition(|r| r.resource == "leases");
    assert!(
        writes.is_empty(),
        "a second run writes nothing at all but its lock: {writes:?}"
    );
    assert_eq!(lock.len(), 2, "the lock is taken and released: {lock:?}");
    assert!(again.stdout.contains("UNCHANGED"));

    // A template change is one update per cluster.
    let path = format!(
        "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/settings",
        f.group, f.ns
    );
    let r = env
        .request(
            "host",
            "PATCH",
            &path,
            Some(r#"{"spec":{"template":{"data":{"colour":"red"}}}}"#),
        )
        .unwrap();
    assert_eq!(r.status, 200);
    f.reset();
    f.reconcile(&[]).ok();
    assert_eq!(f.member_writes(), 2);
    assert_eq!(
        cm(env, "member1", f.ns, "settings").unwrap()["data"]["colour"],
        "red"
    );
    assert_eq!(
        cm(env, "member2", f.ns, "settings").unwrap()["data"]["colour"],
        "green",
        "the override still wins"
    );
}

/// As upstream's RSP controller: a member whose deployment is not settled
/// has its pods counted, and pods unschedulable for over a minute lower its
/// capacity; the replicas it cannot hold go to the other members.
#[test]
fn long_unschedulable_pods_lower_a_members_capacity() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-f", &["deployments.apps"]);
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    f.create_deployment(env, "api");
    f.create_rsp(env, "api", 6, &[(&m1, 1), (&m2, 1)]);
    let replicas = |c: &str| f.replicas(env, c, "api");
    f.reconcile(&[]).ok();
    assert_eq!((replicas("member1"), replicas("member2")), (3, 3));

    // Two pods in member1 that could not be scheduled ten minutes ago (no
    // scheduler runs here: they stay so).
    let since = kubefedctl::clock::rfc3339(kubefedctl::clock::now_unix() - 600);
    for i in 0..2 {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("stuck-{i}"), "labels": {"app": "api"}},
            "spec": {"automountServiceAccountToken": false, "containers": [{"name": "c", "image": "nginx"}]}});
        let path = format!("/api/v1/namespaces/{}/pods", f.ns);
        // The namespace's default service account appears shortly after
        // the namespace.
        let mut created = None;
        for _ in 0..60 {
            let r = env
                .request("member1", "POST", &path, Some(&pod.to_string()))
                .unwrap();
            if r.status == 201 {
                created = Some(r);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        assert!(created.is_some(), "pod stuck-{i} could not be created");
        let status = json!({"status": {"phase": "Pending", "conditions": [{"type": "PodScheduled",
            "status": "False", "reason": "Unschedulable", "lastTransitionTime": since}]}});
        let r = env
            .request(
                "member1",
                "PATCH",
                &format!("{path}/stuck-{i}/status"),
                Some(&status.to_string()),
            )
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }

    f.reset();
    f.reconcile(&[]).ok();
    let pod_lists =
        f.m1.records()
            .iter()
            .filter(|r| r.method == "GET" && r.path.contains("/pods"))
            .count();
    assert_eq!(
        pod_lists, 1,
        "member1's deployment is not settled: its pods are listed once"
    );
    // Capacity 3 − 2 = 1 in member1; the planner gives member2 the rest.
    assert_eq!((replicas("member1"), replicas("member2")), (1, 5));
    let api = f.fed(env, "federateddeployments", "api").unwrap();
    let overrides: Vec<(String, i64)> = api["spec"]["overrides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["clusterName"].as_str().unwrap().to_string(),
                o["clusterOverrides"][0]["value"].as_i64().unwrap(),
            )
        })
        .collect();
    assert!(overrides.contains(&(m1.clone(), 1)), "{overrides:?}");
    assert!(overrides.contains(&(m2.clone(), 5)), "{overrides:?}");
}

#[test]
fn unreachable_and_hanging_members_cost_their_timeout_and_are_reported() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-b", &["configmaps"]);
    // The host joins itself as a third member, the one that stays healthy.
    f.run(&["join", "rc-b-self", "--cluster-context", "host"])
        .ok();
    f.create(
        env,
        "FederatedConfigMap",
        "spread",
        json!({"template": {"data": {"k": "v"}}, "placement": {"clusterSelector": {}}}),
    );
    f.m1.set_faults(Faults {
        mode: Mode::Refuse,
        ..Faults::default()
    });
    f.m2.set_faults(Faults {
        mode: Mode::Hang,
        ..Faults::default()
    });

    let run = f.reconcile(&[]);
    assert_eq!(run.code, 3, "partial: {}{}", run.stdout, run.stderr);
    assert!(
        cm(env, "host", f.ns, "spread").is_some(),
        "the healthy member converged"
    );
    let obj = f.fed(env, "federatedconfigmaps", "spread").unwrap();
    let statuses: Vec<(String, String)> = obj["status"]["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("rc-b-m1".into(), "ClusterNotReady".into()),
            ("rc-b-m2".into(), "ClusterNotReady".into()),
            ("rc-b-self".into(), String::new())
        ]
    );
    assert_eq!(obj["status"]["conditions"][0]["reason"], "CheckClusters");
    let kfc = get(
        env,
        "host",
        "/apis/core.kubefed.io/v1beta1/namespaces/rc-b/kubefedclusters/rc-b-m1",
    )
    .unwrap();
    assert_eq!(kfc["status"]["conditions"][0]["type"], "Offline");
    let ok = get(
        env,
        "host",
        "/apis/core.kubefed.io/v1beta1/namespaces/rc-b/kubefedclusters/rc-b-self",
    )
    .unwrap();
    assert_eq!(ok["status"]["conditions"][0]["type"], "Ready");
    assert_eq!(ok["status"]["kubernetesVersion"], env.version().tag);

    f.m1.clear_faults();
    f.m2.clear_faults();
    f.reconcile(&[]).ok();
    assert!(
        cm(env, "member1", f.ns, "spread").is_some()
            && cm(env, "member2", f.ns, "spread").is_some()
    );
}

#[test]
fn injected_errors_and_conflicts_are_retried_without_loss_or_duplicates() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-c", &["configmaps"]);
    for i in 0..20 {
        f.create(env, "FederatedConfigMap", &format!("cm-{i:02}"), json!({"template": {"data": {"i": i.to_string()}}, "placement": {"clusterSelector": {}}}));
    }
    for p in [&f.m1, &f.m2] {
        p.set_faults(Faults {
            error_rate: 0.05,
            error_statuses: vec![500, 503, 429],
            retry_after_secs: Some(1),
            seed: 7,
            ..Faults::default()
        });
    }
    f.reconcile(&["--attempts", "6"]).ok();
    let injected = f.m1.count(|r| r.injected) + f.m2.count(|r| r.injected);
    assert!(injected > 0, "faults were injected");
    for c in ["member1", "member2"] {
        let list = get(env, c, &format!("/api/v1/namespaces/{}/configmaps", f.ns)).unwrap();
        let names: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|i| i["metadata"]["name"].as_str())
            .filter(|n| n.starts_with("cm-"))
            .collect();
        assert_eq!(names.len(), 20, "{c}: every object, once: {names:?}");
    }

    // Conflicts (409) on updates: re-read, re-apply.
    for i in 0..20 {
        let path = format!(
            "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/cm-{i:02}",
            f.group, f.ns
        );
        assert_eq!(
            env.request(
                "host",
                "PATCH",
                &path,
                Some(r#"{"spec":{"template":{"data":{"i":"changed"}}}}"#)
            )
            .unwrap()
            .status,
            200
        );
    }
    for p in [&f.m1, &f.m2] {
        p.set_faults(Faults {
            error_rate: 0.3,
            error_statuses: vec![409],
            only: Some(std::sync::Arc::new(|r: &RequestRecord| r.verb == "update")),
            seed: 3,
            ..Faults::default()
        });
    }
    f.reconcile(&["--attempts", "8"]).ok();
    assert!(f.m1.count(|r| r.injected && r.status == 409) > 0);
    assert_eq!(
        cm(env, "member2", f.ns, "cm-07").unwrap()["data"]["i"],
        "changed"
    );
    for p in [&f.m1, &f.m2] {
        p.clear_faults();
    }
}

#[test]
fn unmanaged_objects_are_left_alone_and_deletion_cleans_up_or_orphans() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-d", &["configmaps"]);
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    for c in ["member1", "member2"] {
        let r = env
            .request(
                c,
                "POST",
                "/api/v1/namespaces",
                Some(&json!({"metadata": {"name": f.ns}}).to_string()),
            )
            .unwrap();
        assert!(r.status == 201 || r.status == 409);
    }
    // member2 holds "keep" marked never-to-manage, and an unlabelled "stray".
    let put = |name: &str, labels: Value| {
        let body = json!({"metadata": {"name": name, "labels": labels}, "data": {"mine": "yes"}});
        assert_eq!(
            env.request(
                "member2",
                "POST",
                &format!("/api/v1/namespaces/{}/configmaps", f.ns),
                Some(&body.to_string())
            )
            .unwrap()
            .status,
            201
        );
    };
    put("keep", json!({"kubefed.io/managed": "false"}));
    put("stray", json!({}));
    f.create(
        env,
        "FederatedConfigMap",
        "keep",
        json!({"template": {"data": {"mine": "no"}}, "placement": {"clusterSelector": {}}}),
    );
    f.create(
        env,
        "FederatedConfigMap",
        "gone",
        json!({"template": {"data": {}}, "placement": {"clusters": [{"name": m1}, {"name": m2}]}}),
    );
    f.create(
        env,
        "FederatedConfigMap",
        "orphaned",
        json!({"template": {"data": {}}, "placement": {"clusters": [{"name": m1}, {"name": m2}]}}),
    );

    let run = f.reconcile(&[]);
    assert_eq!(
        run.code, 3,
        "managed=false is a reported failure: {}",
        run.stderr
    );
    assert!(
        run.stderr.contains("kubefed.io/managed: false"),
        "{}",
        run.stderr
    );
    assert_eq!(
        cm(env, "member2", f.ns, "keep").unwrap()["data"]["mine"],
        "yes",
        "never touched"
    );
    assert_eq!(
        cm(env, "member1", f.ns, "keep").unwrap()["data"]["mine"],
        "no"
    );
    let keep = f.fed(env, "federatedconfigmaps", "keep").unwrap();
    assert!(
        keep["status"]["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == m2.as_str() && c["status"] == "ManagedLabelFalse")
    );
    assert!(
        cm(env, "member2", f.ns, "stray").is_some(),
        "unlabelled objects are never deleted"
    );

    // Delete one federated object plainly, one with kubefed.io/orphan.
    f.run(&[
        "orphaning-deletion",
        "enable",
        "federatedconfigmaps.rcd.kubefed.io",
        "orphaned",
        "-n",
        f.ns,
    ])
    .ok();
    for name in ["gone", "orphaned"] {
        let path = format!(
            "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/{name}",
            f.group, f.ns
        );
        assert_eq!(
            env.request("host", "DELETE", &path, None).unwrap().status,
            200
        );
        assert!(
            f.fed(env, "federatedconfigmaps", name).is_some(),
            "the finalizer holds {name} until reconcile"
        );
    }
    f.reconcile(&["--cluster", &m1, "--cluster", &m2]);
    for c in ["member1", "member2"] {
        assert!(
            crate::fixtures::gone(
                env,
                c,
                &format!("/api/v1/namespaces/{}/configmaps/gone", f.ns)
            ),
            "{c}: deleted with its federated object"
        );
        let kept = cm(env, c, f.ns, "orphaned").expect("orphaned copies stay");
        assert!(
            kept["metadata"]["labels"]
                .get("kubefed.io/managed")
                .is_none(),
            "and are no longer managed"
        );
    }
    assert!(f.fed(env, "federatedconfigmaps", "gone").is_none());
    assert!(f.fed(env, "federatedconfigmaps", "orphaned").is_none());
}

#[test]
fn render_reads_a_kubefedconfig_as_a_live_run_does() {
    let none = root().join("testdata/no-such.kubeconfig");
    let demo = root().join("testdata/demo");
    let dir = std::env::temp_dir().join(format!("kubefedctl-render-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = |name: &str, namespace: &str, spec: &str| {
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                "apiVersion: core.kubefed.io/v1beta1\nkind: KubeFedConfig\nmetadata: {{name: kubefed, namespace: {namespace}}}\nspec: {spec}\n"
            ),
        )
        .unwrap();
        path
    };
    let render = |config: &Path| {
        kubefedctl(
            &none,
            &[
                "reconcile",
                "--from",
                demo.to_str().unwrap(),
                "--from",
                config.to_str().unwrap(),
                "-o",
                "json",
            ],
        )
    };

    // SchedulerPreferences off: the RSP is not scheduled, the template's
    // one replica goes everywhere.
    let off = config(
        "no-rsp.yaml",
        "kube-federation-system",
        "{scope: Cluster, featureGates: [{name: SchedulerPreferences, configuration: Disabled}]}",
    );
    let run = render(&off).ok();
    assert!(!run.stderr.contains("scheduled test-ns"), "{}", run.stderr);
    assert!(
        run.stderr.contains("SchedulerPreferences feature gate is Disabled: 1 ReplicaSchedulingPreference(s) not scheduled"),
        "{}",
        run.stderr
    );
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let deployment = |doc: &Value, cluster: &str| {
        doc[cluster]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .cloned()
    };
    assert_eq!(deployment(&doc, "us-east").unwrap()["spec"]["replicas"], 1);

    // Namespace-scoped to another namespace: nothing of test-ns is seen.
    let elsewhere = config("namespaced.yaml", "fed", "{scope: Namespaced}");
    let run = render(&elsewhere).ok();
    assert!(
        run.stderr
            .contains("is skipped: the federation is namespace-scoped to \"fed\""),
        "{}",
        run.stderr
    );
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(deployment(&doc, "us-east").is_none(), "{doc}");

    // A malformed config names its file and field, and nothing is printed.
    let bad = config("bad.yaml", "fed", "{scope: Everywhere}");
    let run = render(&bad).fails();
    assert!(
        run.stderr.contains(
            "bad.yaml: document 1: KubeFedConfig: spec.scope: must be Cluster or Namespaced"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(run.stdout, "");

    let off = config(
        "no-push.yaml",
        "kube-federation-system",
        "{featureGates: [{name: PushReconciler, configuration: Disabled}]}",
    );
    let run = render(&off).fails();
    assert!(
        run.stderr
            .contains("PushReconciler feature gate is Disabled"),
        "{}",
        run.stderr
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn render_runs_the_demo_and_the_seed_examples_offline() {
    let none = root().join("testdata/no-such.kubeconfig");
    let demo = root().join("testdata/demo");
    let run = kubefedctl(&none, &["reconcile", "--from", demo.to_str().unwrap()]).ok();
    assert!(
        run.stderr
            .contains("scheduled test-ns/test-deployment: ap-northeast=3, us-east=6, us-west=6"),
        "{}",
        run.stderr
    );
    assert_golden("reconcile-demo.yaml", &run.stdout);

    let seed = root().join("testdata/seeds/federated-deployment.yaml");
    let run = kubefedctl(
        &none,
        &[
            "reconcile",
            "--from",
            seed.to_str().unwrap(),
            "--cluster",
            "cluster1",
            "--cluster",
            "cluster2",
            "-o",
            "json",
        ],
    )
    .ok();
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(doc["cluster1"][0]["spec"].get("replicas").is_none());
    assert_eq!(
        doc["cluster2"][0]["spec"]["replicas"], 5,
        "the seed's override, dotted path and all"
    );

    let out = std::env::temp_dir().join(format!("kubefedctl-render-{}", std::process::id()));
    let run = kubefedctl(
        &none,
        &[
            "reconcile",
            "--from",
            demo.to_str().unwrap(),
            "--output-dir",
            out.to_str().unwrap(),
        ],
    )
    .ok();
    assert!(
        run.stderr.contains("wrote 8 object(s) for 3 cluster(s)"),
        "{}",
        run.stderr
    );
    let d = std::fs::read_to_string(out.join("us-west/test-ns/deployment-test-deployment.yaml"))
        .unwrap();
    assert!(d.contains("replicas: 6"), "{d}");
    assert!(
        std::fs::read_to_string(out.join("us-west/test-ns/configmap-web-config.yaml"))
            .unwrap()
            .contains("howdy")
    );
    assert!(
        !out.join("ap-northeast/test-ns/configmap-web-config.yaml")
            .exists(),
        "clusterSelector tier=core"
    );
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn bad_input_is_a_clear_error_and_writes_no_output_directory() {
    let none = root().join("testdata/no-such.kubeconfig");
    let dir = std::env::temp_dir().join(format!("kubefedctl-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {name: c, namespace: shop}\nspec:\n  placement: {clusterSelector: {}}\n  overrides:\n  - clusterName: a\n    clusterOverrides: [{path: /metadata/name, value: x}]\n").unwrap();
    let out = dir.join("out");
    let run = kubefedctl(
        &none,
        &[
            "reconcile",
            "--from",
            bad.to_str().unwrap(),
            "--cluster",
            "a",
            "--output-dir",
            out.to_str().unwrap(),
        ],
    )
    .fails();
    assert!(
        run.stderr
            .contains("bad.yaml: document 1: FederatedConfigMap \"shop/c\""),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("/metadata/name"), "{}", run.stderr);
    assert!(!out.exists(), "no partial output directory");
    std::fs::write(&bad, "{{{ not yaml").unwrap();
    let run = kubefedctl(
        &none,
        &[
            "reconcile",
            "--from",
            bad.to_str().unwrap(),
            "--cluster",
            "a",
        ],
    )
    .fails();
    assert!(
        run.stderr.contains("bad.yaml: invalid YAML"),
        "{}",
        run.stderr
    );
    let run = kubefedctl(
        &none,
        &[
            "reconcile",
            "--from",
            root().join("testdata/demo").to_str().unwrap(),
            "--cluster",
            "us-east",
        ],
    )
    .fails();
    assert!(
        run.stderr.contains("cluster \"us-east\" is named twice"),
        "{}",
        run.stderr
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn system_namespaces_are_never_touched_and_their_deletion_completes() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-sys", &[]);
    let fedns_path = |ns: &str| {
        format!(
            "/apis/{}/v1beta1/namespaces/{ns}/federatednamespaces",
            f.group
        )
    };
    // `default` and the federation's own namespace, as `federate
    // namespaces default` makes them; the second carries the finalizer an
    // older kubefedctl added.
    for (ns, finalizers) in [
        ("default", json!([])),
        (f.fedns, json!(["kubefed.io/sync-controller"])),
    ] {
        post(
            env,
            "host",
            &fedns_path(ns),
            json!({
            "apiVersion": format!("{}/v1beta1", f.group), "kind": "FederatedNamespace",
            "metadata": {"name": ns, "namespace": ns, "finalizers": finalizers},
            "spec": {"placement": {"clusterSelector": {}}}}),
        );
    }
    let sa_path = format!(
        "/api/v1/namespaces/{}/serviceaccounts/{}-host",
        f.fedns,
        f.cluster("m1")
    );
    assert!(
        get(env, "member1", &sa_path).is_some(),
        "join's service account"
    );

    f.reset();
    for ns in ["default", f.fedns] {
        let run = f.run(&["reconcile", "-n", ns]).ok();
        assert!(
            run.stderr.contains("system namespace"),
            "says why: {}",
            run.stderr
        );
    }
    for c in ["member1", "member2"] {
        for ns in ["default", f.fedns] {
            let member_ns = get(env, c, &format!("/api/v1/namespaces/{ns}")).unwrap();
            assert!(
                labels(&member_ns).get("kubefed.io/managed").is_none(),
                "{c}/{ns} is never adopted: {member_ns}"
            );
        }
    }
    let member_requests = |p: &Proxy| p.count(|r| r.resource == "namespaces" && r.is_write());
    assert_eq!(
        member_requests(&f.m1) + member_requests(&f.m2),
        0,
        "{:?}",
        f.m1.records()
            .iter()
            .filter(|r| r.is_write())
            .map(|r| format!("{} {}", r.method, r.path))
            .collect::<Vec<_>>()
    );
    let default = get(env, "host", &format!("{}/default", fedns_path("default"))).unwrap();
    assert!(
        default["metadata"]["finalizers"].is_null()
            || default["metadata"]["finalizers"] == json!([])
    );
    assert!(
        default["status"].is_null(),
        "no status for an ignored object"
    );

    // Deleting the FederatedNamespace of the federation's namespace completes,
    // and the member's federation namespace (with join's account) stays.
    let own = format!("{}/{}", fedns_path(f.fedns), f.fedns);
    let r = env.request("host", "DELETE", &own, None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        get(env, "host", &own).is_none(),
        "the stray finalizer was removed by the first run"
    );
    f.run(&["reconcile", "-n", f.fedns]).ok();
    assert!(get(env, "member1", &sa_path).is_some());
    assert!(get(env, "member1", &format!("/api/v1/namespaces/{}", f.fedns)).is_some());

    // status shows them as ignored, not as unpropagated.
    let st = f
        .run(&["status", "namespaces", "-n", "default", "-o", "json"])
        .ok();
    let rows: Value = serde_json::from_str(&st.stdout).unwrap();
    assert_eq!(rows[0]["propagation"], "Ignored", "{}", st.stdout);
    assert_eq!(rows[0]["reason"], "SystemNamespace");
}

#[test]
fn a_run_killed_after_some_member_writes_leaves_nothing_behind_once_deleted() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-kill", &["configmaps"]);
    let names: Vec<String> = (0..30).map(|i| format!("cfg-{i:02}")).collect();
    for n in &names {
        f.create(
            env,
            "FederatedConfigMap",
            n,
            json!({
            "template": {"data": {"n": n}}, "placement": {"clusterSelector": {}}}),
        );
    }
    // Slow members, so that the run can be cut off in the middle.
    let slow = testenv::Faults {
        latency: std::time::Duration::from_millis(150),
        ..Default::default()
    };
    f.m1.set_faults(slow.clone());
    f.m2.set_faults(slow);
    f.reset();
    let mut child = std::process::Command::new(crate::fixtures::KUBEFEDCTL)
        .args(["--kubeconfig"])
        .arg(&f.kc)
        .args([
            "reconcile",
            "-n",
            f.ns,
            "--kubefed-namespace",
            f.fedns,
            "--concurrency",
            "1",
        ])
        .env_remove("KUBECONFIG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let creates = |p: &Proxy| {
        p.count(|r| r.verb == "create" && r.resource == "configmaps" && r.status == 201)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while creates(&f.m1) + creates(&f.m2) < 6 {
        assert!(std::time::Instant::now() < deadline, "no member writes");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended too early"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    f.m1.clear_faults();
    f.m2.clear_faults();
    let copies = |c: &str| {
        names
            .iter()
            .filter(|n| cm(env, c, f.ns, n).is_some())
            .count()
    };
    let written = copies("member1") + copies("member2");
    assert!(
        (6..60).contains(&written),
        "cut off part-way: {written} copies"
    );
    // Every copy written belongs to a federated object that already holds
    // the finalizer: deleting them all goes through reconcile.
    for n in &names {
        let path = format!(
            "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/{n}",
            f.group, f.ns
        );
        let fed = get(env, "host", &path).unwrap();
        let has = fed["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|l| l.iter().any(|x| x == "kubefed.io/sync-controller"));
        let placed = cm(env, "member1", f.ns, n).is_some() || cm(env, "member2", f.ns, n).is_some();
        assert!(
            has || !placed,
            "{n}: a member copy exists without the finalizer"
        );
        assert_eq!(
            env.request("host", "DELETE", &path, None).unwrap().status,
            200
        );
    }
    let run = f.reconcile(&["--lock-timeout", "40s"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        copies("member1") + copies("member2"),
        0,
        "no member copy left behind"
    );
    for n in &names {
        assert!(
            f.fed(env, "federatedconfigmaps", n).is_none(),
            "{n} deleted"
        );
    }
}

#[test]
fn a_terminating_member_copy_keeps_the_finalizer_until_it_is_gone() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-term", &["configmaps"]);
    f.create(
        env,
        "FederatedConfigMap",
        "held",
        json!({
        "template": {"data": {"k": "v"}}, "placement": {"clusterSelector": {}}}),
    );
    f.reconcile(&[]).ok();
    let copy = format!("/api/v1/namespaces/{}/configmaps/held", f.ns);
    patch(
        env,
        "member1",
        &copy,
        json!({"metadata": {"finalizers": ["example.com/hold"]}}),
    );
    let fed_path = format!(
        "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/held",
        f.group, f.ns
    );
    assert_eq!(
        env.request("host", "DELETE", &fed_path, None)
            .unwrap()
            .status,
        200
    );

    for extra in [&[][..], &["--wait=2s"][..]] {
        let run = f.reconcile(extra).ok();
        assert!(
            run.stderr.contains(&format!(
                "pending: {}: ConfigMap {}/held is still being deleted",
                f.cluster("m1"),
                f.ns
            )),
            "{extra:?}: {}",
            run.stderr
        );
        let fed = f
            .fed(env, "federatedconfigmaps", "held")
            .expect("kept while member1 holds a copy");
        assert_eq!(
            fed["metadata"]["finalizers"],
            json!(["kubefed.io/sync-controller"])
        );
        assert!(get(env, "member1", &copy).unwrap()["metadata"]["deletionTimestamp"].is_string());
        assert!(
            get(env, "member2", &copy).is_none(),
            "member2's copy is gone"
        );
    }
    // The hold goes while a run waits: the deletion completes in that run.
    let kc = f.kc.clone();
    let (fedns, ns) = (f.fedns, f.ns);
    let waiting = std::thread::spawn(move || {
        crate::fixtures::kubefedctl(
            &kc,
            &[
                "reconcile",
                "-n",
                ns,
                "--kubefed-namespace",
                fedns,
                "--wait=60s",
            ],
        )
    });
    std::thread::sleep(std::time::Duration::from_secs(2));
    patch(
        env,
        "member1",
        &copy,
        json!({"metadata": {"finalizers": null}}),
    );
    let run = waiting.join().unwrap().ok();
    assert!(!run.stderr.contains("pending:"), "{}", run.stderr);
    assert!(get(env, "member1", &copy).is_none());
    assert!(f.fed(env, "federatedconfigmaps", "held").is_none());
}

#[test]
fn rsp_counts_only_managed_member_copies() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-rspu", &["deployments.apps"]);
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    // member2 already runs an unmanaged `web` that wants 3 replicas.
    namespace(env, "member2", f.ns);
    post(
        env,
        "member2",
        &format!("/apis/apps/v1/namespaces/{}/deployments", f.ns),
        json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    );
    f.create_deployment(env, "web");
    f.create_rsp(env, "web", 4, &[(&m1, 1), (&m2, 1)]);
    f.reset();
    f.reconcile(&[]).ok();
    let pod_lists = f.m2.count(|r| r.resource == "pods" && r.verb == "list");
    assert_eq!(
        pod_lists, 0,
        "the unmanaged Deployment is not observed for scheduling"
    );
    assert_eq!(f.replicas(env, "member1", "web"), 2);
    assert_eq!(
        f.replicas(env, "member2", "web"),
        2,
        "adopted with its scheduled replicas"
    );
}

#[test]
fn a_member_that_does_not_serve_a_type_fails_only_that_type_there() {
    let env = TestEnv::shared();
    let group = "t17.example.com";
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gizmos.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    for c in ["host", "member1"] {
        post(env, c, crds, crd.clone());
    }
    let served = |c: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while get(env, c, &format!("/apis/{group}/v1")).is_none() {
            assert!(std::time::Instant::now() < deadline, "{c} serves gizmos");
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    };
    served("host");
    served("member1");
    let f = Federation::new(env, "rc-t17", &["configmaps", &format!("gizmos.{group}")]);
    f.create(
        env,
        "FederatedConfigMap",
        "cfg",
        json!({
        "template": {"data": {"k": "v"}}, "placement": {"clusterSelector": {}}}),
    );
    f.create(
        env,
        "FederatedGizmo",
        "w",
        json!({
        "template": {"spec": {"size": 1}}, "placement": {"clusterSelector": {}}}),
    );
    let m2 = f.cluster("m2");
    let run = f.reconcile(&[]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    // The hint after the type depends on what member2 serves: another
    // test's CRD of the same plural in another group (`crd_first`'s
    // `gizmos.crdfirst.example.com`) turns "install the CRD" into "it
    // serves gizmos in ...".
    let line = (run.stderr.lines())
        .find(|l| l.starts_with(&format!("failed: {m2}: does not serve gizmos.{group}/v1")))
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(
        line.ends_with("; 1 FederatedGizmo not propagated there"),
        "{line}"
    );
    assert!(
        line.contains(&format!("(install the CRD in {m2})"))
            || line.contains("it serves gizmos in crdfirst.example.com/v1"),
        "{line}"
    );
    assert!(
        !run.stderr.contains("Failed to parse error data"),
        "{}",
        run.stderr
    );
    for c in ["member1", "member2"] {
        assert!(
            cm(env, c, f.ns, "cfg").is_some(),
            "{c}: the ConfigMap arrives"
        );
        assert!(get(env, c, &format!("/api/v1/namespaces/{}", f.ns)).is_some());
    }
    let widget = format!("/apis/{group}/v1/namespaces/{}/gizmos/w", f.ns);
    assert!(get(env, "member1", &widget).is_some());
    let fed = f.fed(env, "federatedgizmos", "w").unwrap();
    assert!(
        fed["status"]["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == m2.as_str() && c["status"] == "CachedRetrievalFailed"),
        "{}",
        fed["status"]
    );
    let cfg = f.fed(env, "federatedconfigmaps", "cfg").unwrap();
    assert_eq!(
        cfg["status"]["conditions"][0]["status"], "True",
        "not ClusterNotReady"
    );
    let st = f
        .run(&[
            "status",
            &format!("gizmos.{group}"),
            "-n",
            f.ns,
            "-o",
            "wide",
        ])
        .ok();
    assert!(
        st.stdout.contains(&format!("{m2}:TypeNotServed")),
        "{}",
        st.stdout
    );
    // The same race as the run's hint above: either says what is missing.
    assert!(
        st.stdout.contains("install the CRD")
            || st
                .stdout
                .contains("it serves gizmos in crdfirst.example.com/v1"),
        "{}",
        st.stdout
    );
    let types = f.run(&["status", "types", "--probe"]).ok();
    assert!(
        types
            .stdout
            .contains(&format!("{} (not served: {m2})", f.cluster("m1"))),
        "{}",
        types.stdout
    );

    post(env, "member2", crds, crd);
    served("member2");
    let run = f.reconcile(&[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(get(env, "member2", &widget).is_some());
}

#[test]
fn a_second_run_is_told_who_holds_the_federation_and_can_wait_for_it() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-lock", &["configmaps"]);
    f.create_configmaps(env, "cfg", 10);
    f.slow_members(250);
    let mut first = f.spawn_reconcile(&["--concurrency", "1"]);
    wait_until("the first run to hold the lock", || {
        !holder(env, f.fedns).is_empty()
    });
    let held = holder(env, f.fedns);
    assert!(held.contains(&format!("(pid {}", first.id())), "{held}");

    let refused = f.reconcile(&[]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains(&format!(
            "error: federation is being reconciled by {held} since "
        )) && refused.stderr.contains("ago; --lock-timeout waits"),
        "{}",
        refused.stderr
    );
    let waited = f.reconcile(&["--lock-timeout", "60s"]);
    assert_eq!(waited.code, 0, "waits, then runs: {}", waited.stderr);
    assert!(
        first.wait().unwrap().success(),
        "the first run was not disturbed"
    );
    f.m1.clear_faults();
    f.m2.clear_faults();
    assert_eq!(holder(env, f.fedns), "", "released at the end");

    // A holder that stopped renewing (crashed) is taken over.
    let path = format!(
        "/apis/coordination.k8s.io/v1/namespaces/{}/leases/kubefedctl-reconcile",
        f.fedns
    );
    let old = "2020-01-01T00:00:00.000000Z";
    patch(
        env,
        "host",
        &path,
        json!({"spec": {"holderIdentity": "ghost (pid 1)", "acquireTime": old, "renewTime": old, "leaseDurationSeconds": 15}}),
    );
    let run = f.reconcile(&[]).ok();
    assert!(
        run.stderr
            .contains("note: took over the federation lock from ghost (pid 1), expired"),
        "{}",
        run.stderr
    );
    let l = lease(env, f.fedns).unwrap();
    assert_eq!(l["spec"]["holderIdentity"], Value::Null);
    assert!(l["spec"]["leaseTransitions"].as_i64().unwrap() >= 1);

    // The same note as JSON, one object per line, for log collectors.
    patch(
        env,
        "host",
        &path,
        json!({"spec": {"holderIdentity": "ghost (pid 2)", "acquireTime": old, "renewTime": old, "leaseDurationSeconds": 15}}),
    );
    let run = f.reconcile(&["--log-format", "json"]).ok();
    let events: Vec<Value> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("each JSON line is one object"))
        .collect();
    let took_over = events
        .iter()
        .find(|e| {
            e["message"]
                .as_str()
                .is_some_and(|m| m.contains("took over the federation lock from ghost (pid 2)"))
        })
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert_eq!(took_over["level"], "info");
    // RFC 3339 in UTC, to the millisecond: `2026-01-01T00:00:00.000Z`.
    let time = took_over["time"].as_str().unwrap_or_default();
    assert!(
        time.len() == 24 && time.ends_with('Z') && time.as_bytes()[19] == b'.',
        "{time}"
    );

    // --dry-run and --no-lock do not take it.
    patch(
        env,
        "host",
        &path,
        json!({"spec": {"holderIdentity": "someone (pid 2)", "acquireTime": null,
        "renewTime": "2999-01-01T00:00:00.000000Z"}}),
    );
    f.reconcile(&["--dry-run"]).ok();
    f.reconcile(&["--no-lock"]).ok();
    assert_eq!(holder(env, f.fedns), "someone (pid 2)");
    patch(
        env,
        "host",
        &path,
        json!({"spec": {"holderIdentity": null, "renewTime": null}}),
    );
}

#[test]
fn sigterm_stops_a_run_and_releases_the_lock() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-term2", &["configmaps"]);
    f.create_configmaps(env, "cfg", 10);
    f.slow_members(250);
    f.reset();
    let mut run = f.spawn_reconcile(&["--concurrency", "1"]);
    wait_until("a member write", || f.m1.writes() + f.m2.writes() > 2);
    assert!(!holder(env, f.fedns).is_empty());
    unsafe { libc::kill(run.id() as i32, libc::SIGTERM) };
    let status = run.wait().unwrap();
    f.m1.clear_faults();
    f.m2.clear_faults();
    assert_eq!(status.code(), Some(143), "128 + SIGTERM");
    assert_eq!(holder(env, f.fedns), "", "released");
    // The next run completes the work, without waiting for the lock.
    f.reconcile(&[]).ok();
    for i in 0..10 {
        assert!(cm(env, "member2", f.ns, &format!("cfg-{i:02}")).is_some());
    }
}

/// Everything a clean run leaves, for comparison: member objects (data and
/// labels), PropagatedVersions' cluster versions against the members, and
/// the federated objects' propagation.
fn converged(env: &TestEnv, f: &Federation, names: &[String]) {
    for n in names {
        for (c, short) in [("member1", "m1"), ("member2", "m2")] {
            let obj = cm(env, c, f.ns, n).unwrap_or_else(|| panic!("{c}: {n} missing"));
            assert_eq!(obj["data"], json!({"n": n}), "{c}/{n}");
            assert_eq!(
                labels(&obj),
                json!({"kubefed.io/managed": "true"}),
                "{c}/{n}"
            );
            let pv = get(
                env,
                "host",
                &format!(
                    "/apis/core.kubefed.io/v1alpha1/namespaces/{}/propagatedversions/configmap-{n}",
                    f.ns
                ),
            )
            .unwrap_or_else(|| panic!("propagated version of {n}"));
            let recorded = pv["status"]["clusterVersions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["clusterName"] == f.cluster(short).as_str())
                .map(|v| v["version"].clone());
            assert_eq!(
                recorded,
                Some(json!(format!(
                    "rv:{}",
                    obj["metadata"]["resourceVersion"].as_str().unwrap()
                ))),
                "{n}: the recorded version is the member's"
            );
        }
        let fed = f.fed(env, "federatedconfigmaps", n).unwrap();
        assert_eq!(fed["status"]["conditions"][0]["status"], "True", "{n}");
        assert_eq!(
            fed["metadata"]["finalizers"],
            json!(["kubefed.io/sync-controller"])
        );
    }
    // Nothing stray: the member holds exactly the federated objects.
    for c in ["member1", "member2"] {
        let list = get(
            env,
            c,
            &format!(
                "/api/v1/namespaces/{}/configmaps?labelSelector=kubefed.io/managed",
                f.ns
            ),
        )
        .unwrap();
        assert_eq!(list["items"].as_array().unwrap().len(), names.len(), "{c}");
    }
}

#[test]
fn killed_anywhere_a_rerun_converges_as_a_clean_run_would() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-any", &["configmaps"]);
    let mut all = Vec::new();
    type Moment<'a> = (&'a str, Box<dyn Fn(&Federation) -> bool + 'a>);
    let moments: Vec<Moment> = vec![
        (
            "before any member write",
            Box::new(|f: &Federation| {
                f.host.count(|r| {
                    r.resource == "federatedconfigmaps" && r.verb == "patch" && r.status == 200
                }) >= 3
            }),
        ),
        (
            "after some member writes",
            Box::new(|f: &Federation| {
                f.m1.count(|r| r.is_write() && r.verb == "create" && r.status == 201)
                    + f.m2
                        .count(|r| r.is_write() && r.verb == "create" && r.status == 201)
                    >= 5
            }),
        ),
        (
            "during the host write-back",
            Box::new(|f: &Federation| {
                f.host.count(|r| {
                    r.subresource == "status"
                        && r.resource == "federatedconfigmaps"
                        && r.status == 200
                }) >= 1
            }),
        ),
    ];
    for (i, (moment, reached)) in moments.iter().enumerate() {
        let names = f.create_configmaps(env, &format!("k{i}"), 12);
        all.extend(names);
        f.reset();
        f.slow_members(100);
        // Slow status writes too, so that the write-back can be cut off.
        f.host.set_faults(Faults {
            latency: std::time::Duration::from_millis(300),
            only: Some(std::sync::Arc::new(|r: &RequestRecord| {
                r.subresource == "status"
            })),
            ..Default::default()
        });
        let mut run = f.spawn_reconcile(&["--concurrency", "1"]);
        wait_until(moment, || reached(&f));
        run.kill().unwrap();
        run.wait().unwrap();
        for p in [&f.host, &f.m1, &f.m2] {
            p.clear_faults();
        }
        assert!(
            !holder(env, f.fedns).is_empty(),
            "{moment}: a killed run cannot release"
        );
        let rerun = f.reconcile(&["--lock-timeout", "40s"]);
        assert_eq!(rerun.code, 0, "{moment}: {}", rerun.stderr);
        assert!(
            rerun.stderr.contains("took over the federation lock"),
            "{moment}: {}",
            rerun.stderr
        );
        converged(env, &f, &all);
        f.reset();
        f.reconcile(&[]).ok();
        let writes = f.host.writes() + f.member_writes();
        assert_eq!(
            writes,
            2,
            "{moment}: a further run writes nothing but its lock (take, release): {:?}",
            f.host
                .records()
                .iter()
                .filter(|r| r.is_write())
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn revoked_credentials_fail_that_member_only() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-cred", &["configmaps"]);
    let names = f.create_configmaps(env, "cfg", 2);
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    // member2's service account loses its rights: 403 on every list.
    let binding = format!(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/kubefed-controller-manager:{m2}-host"
    );
    assert_eq!(
        env.request("member2", "DELETE", &binding, None)
            .unwrap()
            .status,
        200
    );
    let run = f.reconcile(&[]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("failed: {m2}: listing configmaps/v1: "))
            && run.stderr.contains("forbidden"),
        "the member's own message: {}",
        run.stderr
    );
    for n in &names {
        assert!(cm(env, "member1", f.ns, n).is_some(), "member1 converges");
        assert!(cm(env, "member2", f.ns, n).is_none());
    }
    // Its token no longer works (revoked, rotated): 401, the cluster is not
    // ready, status says why.
    let (_, secret) = f.kubefed_cluster(env, &m2);
    patch(
        env,
        "host",
        &secret,
        json!({"data": {"token": "cmV2b2tlZA=="}}),
    );
    let run = f.reconcile(&[]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "failed: {m2}: cluster not ready (the member refused its credentials (401"
        )),
        "{}",
        run.stderr
    );
    let st = f.run(&["status", "clusters", "-o", "json"]).ok();
    let doc: Value = serde_json::from_str(&st.stdout).unwrap();
    let row = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == m2.as_str())
        .unwrap()
        .clone();
    assert_eq!(row["ready"], "False", "{row}");
    assert!(row["message"].as_str().unwrap().contains("401"), "{row}");
    let ok = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == m1.as_str())
        .unwrap()
        .clone();
    assert_eq!(ok["ready"], "True");
}

/// A member's status entry for the federated object `name` of `plural`.
fn cluster_status(
    env: &TestEnv,
    f: &Federation,
    plural: &str,
    name: &str,
    cluster: &str,
) -> String {
    f.fed(env, plural, name).unwrap()["status"]["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == cluster)
        .and_then(|c| c["status"].as_str().map(str::to_string))
        .unwrap_or_default()
}

#[test]
fn a_no_op_run_reads_only_the_managed_objects_of_a_member() {
    let env = TestEnv::shared();
    // The default federated group: a FederatedSecret of a second group would
    // make the kind ambiguous for tests that name it by kind (types.rs).
    let f = Federation::named(
        env,
        "rc-sel",
        "types.kubefed.io",
        "rc-sel-objs",
        &["secrets"],
    );
    let m1 = f.cluster("m1");
    for i in 0..10 {
        f.create(
            env,
            "FederatedSecret",
            &format!("s-{i}"),
            json!({"template": {"data": {"k": crate::fixtures::b64_encode("v")}},
                   "placement": {"clusters": [{"name": m1}]}}),
        );
    }
    // What any cluster running Helm holds: 1,000 release Secrets of
    // ~100 KB in a namespace the federation never touches.
    let noise = "rc-sel-noise";
    namespace(env, "member1", noise);
    let blob = crate::fixtures::b64_encode(&"x".repeat(100 * 1024));
    std::thread::scope(|s| {
        for part in 0..4 {
            let blob = &blob;
            s.spawn(move || {
                for i in (part..1000).step_by(4) {
                    let (status, body) = crate::fixtures::create(
                        env,
                        "member1",
                        &format!("/api/v1/namespaces/{noise}/secrets"),
                        json!({"metadata": {"name": format!("sh.helm.release.v1.r{i}.v1")},
                               "type": "helm.sh/release.v1", "data": {"release": blob}}),
                    );
                    assert!(status == 201 || status == 409, "{status} {body}");
                }
            });
        }
    });
    f.reconcile(&[]).ok();
    f.reset();
    let run = f.reconcile(&[]).ok();
    assert_eq!(f.member_writes(), 0, "a no-op: {}", run.stderr);
    let lists: Vec<testenv::RequestRecord> =
        f.m1.records()
            .into_iter()
            .filter(|r| r.resource == "secrets" && r.verb == "list")
            .collect();
    assert_eq!(lists.len(), 1, "one list of Secrets: {lists:?}");
    assert!(
        lists[0]
            .query
            .contains("labelSelector=kubefed.io%2Fmanaged%3Dtrue"),
        "managed Secrets only: {:?}",
        lists[0].query
    );
    assert!(
        lists[0].response_bytes < 100 * 1024,
        "the 10 managed Secrets, not one unrelated one: {} bytes",
        lists[0].response_bytes
    );
    for i in 0..10 {
        let fed = f.fed(env, "federatedsecrets", &format!("s-{i}")).unwrap();
        assert_eq!(
            fed["status"]["clusters"],
            json!([{"name": m1}]),
            "propagated (OK is written as no status, as upstream)"
        );
    }
    let (status, _) = crate::fixtures::request(
        env,
        "member1",
        "DELETE",
        &format!("/api/v1/namespaces/{noise}"),
        None,
    );
    assert_eq!(status, 200);
}

#[test]
fn unmanaged_objects_are_adopted_or_refused_as_adopt_resources_says_in_runs_and_plans() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-adopt", &["configmaps"]);
    let m1 = f.cluster("m1");
    namespace(env, "member1", f.ns);
    let unmanaged = |name: &str| {
        post(
            env,
            "member1",
            &format!("/api/v1/namespaces/{}/configmaps", f.ns),
            json!({"metadata": {"name": name}, "data": {"v": "theirs"}}),
        );
    };
    let federate = |name: &str| {
        f.create(
            env,
            "FederatedConfigMap",
            name,
            json!({"template": {"data": {"v": "ours"}}, "placement": {"clusters": [{"name": m1}]}}),
        );
    };
    // adoptResources: Enabled (init's default): the plan says update, and
    // the run adopts.
    unmanaged("taken");
    federate("taken");
    f.reset();
    let dry = f.reconcile(&["--dry-run"]).ok();
    assert!(
        dry.stdout
            .contains(&format!("{m1}: take over ConfigMap rc-adopt-objs/taken")),
        "an update, not a create: {}",
        dry.stdout
    );
    assert_eq!(f.member_writes(), 0);
    f.reconcile(&[]).ok();
    let taken = cm(env, "member1", f.ns, "taken").unwrap();
    assert_eq!(taken["data"]["v"], "ours");
    assert_eq!(taken["metadata"]["labels"]["kubefed.io/managed"], "true");

    // adoptResources: Disabled: refused with AlreadyExists, in the plan and
    // in the run, and the member object is left as it was.
    f.configure(
        env,
        json!({"syncController": {"adoptResources": "Disabled"}}),
    );
    unmanaged("kept");
    federate("kept");
    let dry = f.reconcile(&["--dry-run"]);
    assert_eq!(dry.code, 3, "{}{}", dry.stdout, dry.stderr);
    assert!(
        dry.stderr.contains("ConfigMap rc-adopt-objs/kept")
            && dry.stderr.contains("adoption is disabled"),
        "{}",
        dry.stderr
    );
    assert!(
        !dry.stdout.contains("create ConfigMap rc-adopt-objs/kept"),
        "{}",
        dry.stdout
    );
    let run = f.reconcile(&[]);
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        cluster_status(env, &f, "federatedconfigmaps", "kept", &m1),
        "AlreadyExists"
    );
    let kept = cm(env, "member1", f.ns, "kept").unwrap();
    assert_eq!(kept["data"]["v"], "theirs");
    assert!(kept["metadata"]["labels"]["kubefed.io/managed"].is_null());
    // The adopted copy is found by the managed list: deleting its federated
    // object deletes it.
    let (status, _) = crate::fixtures::request(
        env,
        "host",
        "DELETE",
        &format!(
            "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/taken",
            f.group, f.ns
        ),
        None,
    );
    assert_eq!(status, 200);
    f.reconcile(&[]);
    assert!(
        cm(env, "member1", f.ns, "taken").is_none(),
        "the managed copy of a deleted federated object is deleted"
    );
}

#[test]
fn the_hosts_kubefedconfig_decides_what_a_run_does() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-cfg", &["configmaps"]);
    f.create(
        env,
        "FederatedConfigMap",
        "web",
        json!({"template": {"data": {"a": "1"}}, "placement": {"clusterSelector": {}}}),
    );
    let set = |spec: Value| f.configure(env, spec);

    // A malformed config: one error naming the field, nothing written.
    set(json!({"syncController": {"adoptResources": "Sometimes"}}));
    f.reset();
    let run = f.reconcile(&[]).fails();
    assert!(
        run.stderr.contains(&format!(
            "KubeFedConfig {}/kubefed: spec.syncController.adoptResources: must be Enabled or Disabled, not \"Sometimes\"",
            f.fedns
        )),
        "{}",
        run.stderr
    );
    // (the run lock's Lease aside, taken before the config is read)
    let writes = f.writes();
    assert!(writes.is_empty(), "{writes:?}");
    assert_eq!(f.member_writes(), 0);

    // PushReconciler off: nothing is propagated, and the run says why.
    set(json!({"syncController": {"adoptResources": "Enabled"},
        "featureGates": [{"name": "PushReconciler", "configuration": "Disabled"}]}));
    let run = f.reconcile(&[]).fails();
    assert!(
        run.stderr
            .contains("PushReconciler feature gate is Disabled"),
        "{}",
        run.stderr
    );
    assert_eq!(f.member_writes(), 0);

    // SchedulerPreferences off: propagation goes on, RSPs are left alone.
    set(json!({"featureGates": [{"name": "SchedulerPreferences", "configuration": "Disabled"}]}));
    let run = f.reconcile(&[]).ok();
    assert!(
        run.stderr
            .contains("SchedulerPreferences feature gate is Disabled")
            || run
                .stdout
                .contains("SchedulerPreferences feature gate is Disabled"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(
        get(
            env,
            "member1",
            &format!("/api/v1/namespaces/{}/configmaps/web", f.ns)
        )
        .is_some()
    );

    // leaderElect: the run lock's Lease carries the configured duration.
    set(json!({"featureGates": null,
        "leaderElect": {"leaseDuration": "40s", "renewDeadline": "30s", "retryPeriod": "3s"}}));
    f.reconcile(&[]).ok();
    let lease = crate::fixtures::lease(env, f.fedns).unwrap();
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 40, "{lease}");
    // A renew deadline the lease does not outlast: refused before the lock.
    set(json!({"leaderElect": {"leaseDuration": "20s"}}));
    f.reset();
    let run = f.reconcile(&[]).fails();
    assert!(
        run.stderr
            .contains("spec.leaderElect.leaseDuration: 20s must be greater than renewDeadline 30s"),
        "{}",
        run.stderr
    );
    let writes: Vec<_> = f
        .host
        .records()
        .into_iter()
        .filter(|r| r.method != "GET")
        .collect();
    assert!(
        writes.is_empty(),
        "nothing written, not even the lock: {writes:?}"
    );
}

/// `reconcile -f`: the plan of a change under review, then applying it.
/// Moving from `kubectl apply` to `reconcile -f`: the fields kubectl's
/// client-side apply owns are taken over once (as `kubectl apply
/// --server-side` takes them over), so the first run converges; fields
/// another manager owns still conflict.
#[test]
fn objects_kubectl_applied_are_taken_over_by_reconcile_f() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-csa", &["configmaps"]);
    let ns = f.ns;
    let dir = std::env::temp_dir().join(format!("kubefedctl-csa-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cm.yaml");
    let path = file.to_str().unwrap();
    let write = |a: &str| {
        let obj = json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": "FederatedConfigMap",
            "metadata": {"name": "csa", "namespace": ns},
            "spec": {"template": {"data": {"a": a}}, "placement": {"clusterSelector": {}}}});
        std::fs::write(&file, serde_json::to_string(&obj).unwrap()).unwrap();
    };
    let fed_path = format!(
        "/apis/{}/v1beta1/namespaces/{ns}/federatedconfigmaps/csa",
        f.group
    );
    let managers = || -> Vec<String> {
        get(env, "host", &fed_path).unwrap()["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                format!(
                    "{} {}",
                    e["manager"].as_str().unwrap(),
                    e["operation"].as_str().unwrap()
                )
            })
            .collect()
    };

    // The old recipe: kubectl apply (client-side), then a reconcile.
    write("1");
    let kubectl = std::process::Command::new("kubectl")
        .args([
            "--kubeconfig",
            f.kc.to_str().unwrap(),
            "--context",
            "host",
            "apply",
            "-f",
            path,
        ])
        .output()
        .expect("kubectl (installed by hack/testenv.sh)");
    assert!(
        kubectl.status.success(),
        "{}",
        String::from_utf8_lossy(&kubectl.stderr)
    );
    assert!(
        managers().contains(&"kubectl-client-side-apply Update".to_string()),
        "{:?}",
        managers()
    );

    // The new one: reconcile -f with a changed template converges in one run.
    write("2");
    let run = f.reconcile(&["-f", path]).ok();
    assert!(
        run.stderr.contains(&format!(
            "host: took over the fields kubectl apply (client-side) wrote on FederatedConfigMap \"{ns}/csa\""
        )),
        "{}",
        run.stderr
    );
    assert_eq!(member_cm_data(env, "member1", ns, "csa"), Some("2".into()));
    assert_eq!(member_cm_data(env, "member2", ns, "csa"), Some("2".into()));
    let after = managers();
    assert!(after.contains(&"kubefedctl Apply".to_string()), "{after:?}");
    assert!(
        !after
            .iter()
            .any(|m| m.starts_with("kubectl-client-side-apply")),
        "{after:?}"
    );
    f.reset();
    let again = f.reconcile(&["-f", path]).ok();
    assert!(
        !again.stderr.contains("took over"),
        "once per object: {}",
        again.stderr
    );
    assert_eq!(f.writes(), vec![], "a second run writes nothing");

    // A field another manager changed since still conflicts.
    let (status, answer) = crate::fixtures::request(
        env,
        "host",
        "PATCH",
        &format!("{fed_path}?fieldManager=someone-else"),
        Some(json!({"spec": {"template": {"data": {"a": "theirs"}}}})),
    );
    assert_eq!(status, 200, "{answer}");
    write("3");
    let refused = f.reconcile(&["-f", path]).fails();
    assert!(
        refused
            .stderr
            .contains("another field manager owns these fields")
            && refused.stderr.contains("someone-else"),
        "{}",
        refused.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `reconcile -f` takes a cluster-scoped federated object (here KubeFed's
/// default FederatedClusterRole) as it is: `-n` is for namespaced ones,
/// and a namespace on a cluster-scoped one is an error naming the file.
#[test]
fn cluster_scoped_federated_objects_are_taken_from_files_as_they_are() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-cs", &["clusterroles.rbac.authorization.k8s.io"]);
    let role = |namespace: Option<&str>| {
        let mut o = json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": "FederatedClusterRole",
            "metadata": {"name": "rc-cs-reader", "labels": {"team": "cs"}},
            "spec": {"template": {"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]},
                     "placement": {"clusterSelector": {}}}});
        if let Some(ns) = namespace {
            o["metadata"]["namespace"] = ns.into();
        }
        o
    };
    let dir = std::env::temp_dir().join(format!("kubefedctl-cs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("role.yaml");
    let path = file.to_str().unwrap();
    let member_role = |m: &str| {
        get(
            env,
            m,
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/rc-cs-reader",
        )
    };

    // Named in its file with a namespace: refused before any write.
    std::fs::write(&file, serde_json::to_string(&role(Some(f.ns))).unwrap()).unwrap();
    f.reset();
    let bad = f.reconcile(&["-f", path]).fails();
    assert!(
        bad.stderr.contains(path)
            && bad
                .stderr
                .contains("is cluster-scoped: remove its metadata.namespace"),
        "{}",
        bad.stderr
    );
    assert_eq!(f.writes(), vec![], "nothing written");

    // As it is (f.reconcile gives -n, which a cluster-scoped object ignores):
    // planned, then applied and propagated in one run, then nothing to do.
    std::fs::write(&file, serde_json::to_string(&role(None)).unwrap()).unwrap();
    let plan = f.reconcile(&["-f", path, "--dry-run", "--exit-code"]);
    assert_eq!(plan.code, 4, "{}\n{}", plan.stdout, plan.stderr);
    assert!(
        plan.stdout
            .contains("host: create FederatedClusterRole rc-cs-reader"),
        "{}",
        plan.stdout
    );
    for m in [f.cluster("m1"), f.cluster("m2")] {
        assert!(
            plan.stdout
                .contains(&format!("{m}: create ClusterRole rc-cs-reader")),
            "{}",
            plan.stdout
        );
    }
    f.reconcile(&["-f", path]).ok();
    for m in ["member1", "member2"] {
        let r = member_role(m).unwrap_or_else(|| panic!("no ClusterRole in {m}"));
        assert_eq!(r["rules"][0]["verbs"], json!(["get"]));
    }
    let fed = get(
        env,
        "host",
        &format!(
            "/apis/{}/v1beta1/federatedclusterroles/rc-cs-reader",
            f.group
        ),
    )
    .unwrap();
    assert!(fed["metadata"]["namespace"].is_null(), "{fed}");
    f.reset();
    f.reconcile(&["-f", path]).ok();
    assert_eq!(f.writes(), vec![], "a second run writes nothing");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The spec of a CRD of group `crdfirst.example.com` (`plural`, `kind`), as
/// the host holds it and a federated CRD propagates it; created in the host
/// and served there when this returns.
pub(crate) fn crd_first_type(env: &TestEnv, plural: &str, kind: &str) -> Value {
    let spec = json!({"group": "crdfirst.example.com", "scope": "Namespaced",
        "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
        "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema":
            {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]});
    let body = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.crdfirst.example.com")}, "spec": spec});
    post(
        env,
        "host",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        body,
    );
    wait_until(&format!("{plural} served by the host"), || {
        get(
            env,
            "host",
            &format!("/apis/crdfirst.example.com/v1/{plural}"),
        )
        .is_some()
    });
    spec
}

#[test]
fn a_federated_crd_and_its_objects_converge_in_one_run() {
    let env = TestEnv::shared();
    let crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let name = "gizmos.crdfirst.example.com";
    let gizmo_crd = crd_first_type(env, "gizmos", "Gizmo");
    let f = Federation::new(
        env,
        "rc-crd",
        &[
            "customresourcedefinitions.apiextensions.k8s.io",
            "gizmos.crdfirst.example.com",
        ],
    );
    for m in ["member1", "member2"] {
        assert!(
            get(env, m, &format!("{crd_path}/{name}")).is_none(),
            "{m} has no gizmos yet"
        );
    }
    // One file: the federated CRD (cluster-scoped) and three objects of its type.
    let mut docs = vec![json!({"apiVersion": format!("{}/v1beta1", f.group),
        "kind": "FederatedCustomResourceDefinition", "metadata": {"name": name},
        "spec": {"template": {"spec": gizmo_crd}, "placement": {"clusterSelector": {}}}})];
    for (i, g) in ["g1", "g2", "g3"].iter().enumerate() {
        docs.push(
            json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": "FederatedGizmo",
            "metadata": {"name": g, "namespace": f.ns},
            "spec": {"template": {"spec": {"size": i + 1}}, "placement": {"clusterSelector": {}}}}),
        );
    }
    let dir = std::env::temp_dir().join(format!("kubefedctl-crd-first-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gizmos.yaml");
    let text: Vec<String> = docs
        .iter()
        .map(|d| serde_json::to_string(d).unwrap())
        .collect();
    std::fs::write(&file, text.join("\n---\n")).unwrap();
    let path = file.to_str().unwrap();

    // The plan shows the objects as they will be created once the CRD is
    // there, and validates what the members can validate today.
    f.reset();
    let plan = f.reconcile(&["-f", path, "--dry-run", "--validate"]).ok();
    for m in [f.cluster("m1"), f.cluster("m2")] {
        for line in [
            format!("{m}: create CustomResourceDefinition {name}"),
            format!("{m}: create Gizmo {}/g3", f.ns),
        ] {
            assert!(plan.stdout.contains(&line), "{line}\n{}", plan.stdout);
        }
    }
    assert!(
        plan.stderr.contains(
            "6 planned change(s) of types defined by CRDs this plan creates not validated"
        ),
        "{}",
        plan.stderr
    );
    assert_eq!(f.writes(), vec![], "a plan writes nothing");

    // One run: CRDs first, awaited, then the gizmos, everywhere; exit 0.
    // In each member the CRD and the namespace were answered before the
    // first gizmo was sent.
    f.reset();
    f.reconcile(&["-f", path]).ok();
    for proxy in [&f.m1, &f.m2] {
        let writes: Vec<RequestRecord> = proxy
            .records()
            .into_iter()
            .filter(|r| r.is_write())
            .collect();
        let answered = |resource: &str| {
            let r = writes
                .iter()
                .find(|r| r.resource == resource && r.verb == "create");
            r.and_then(|r| r.answered)
                .unwrap_or_else(|| panic!("no {resource} created: {writes:?}"))
        };
        let first_gizmo = writes
            .iter()
            .filter(|r| r.resource == "gizmos")
            .filter_map(|r| r.received)
            .min()
            .expect("gizmos created");
        assert!(
            answered("customresourcedefinitions") < first_gizmo,
            "{writes:?}"
        );
        assert!(answered("namespaces") < first_gizmo, "{writes:?}");
    }
    for m in ["member1", "member2"] {
        let crd = get(env, m, &format!("{crd_path}/{name}")).unwrap();
        assert_eq!(crd["metadata"]["labels"]["kubefed.io/managed"], "true");
        for (i, g) in ["g1", "g2", "g3"].iter().enumerate() {
            let live = get(
                env,
                m,
                &format!(
                    "/apis/crdfirst.example.com/v1/namespaces/{}/gizmos/{g}",
                    f.ns
                ),
            )
            .unwrap_or_else(|| panic!("no gizmo {g} in {m}"));
            assert_eq!(live["spec"]["size"], i + 1);
        }
    }
    f.reset();
    f.reconcile(&["-f", path]).ok();
    assert_eq!(f.writes(), vec![], "a second run writes nothing");

    // The members' CRDs (and their gizmos with them) go, for other tests.
    for m in ["member1", "member2"] {
        let r = env
            .request(m, "DELETE", &format!("{crd_path}/{name}"), None)
            .unwrap();
        assert!(r.status == 200 || r.status == 404, "{}", r.body);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn files_under_review_are_planned_then_applied_in_one_run() {
    let env = TestEnv::shared();
    // The default federated group: a FederatedSecret of another group would
    // make the kind ambiguous for other tests.
    let f = Federation::named(
        env,
        "rc-plan",
        "types.kubefed.io",
        "rc-plan-objs",
        &["configmaps", "secrets"],
    );
    let ns = f.ns;
    let fed = |kind: &str, name: &str, template: Value| {
        json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": kind,
            "metadata": {"name": name, "namespace": ns, "labels": {"team": "shop"}},
            "spec": {"template": template, "placement": {"clusterSelector": {}}}})
    };
    let cm = |name: &str, a: &str| fed("FederatedConfigMap", name, json!({"data": {"a": a}}));
    let secret = |value: &str| {
        fed(
            "FederatedSecret",
            "token",
            json!({"type": "Opaque", "data": {"password": crate::fixtures::b64_encode(value)}}),
        )
    };
    let write = |dir: &Path, docs: &[Value]| {
        std::fs::create_dir_all(dir.join("nested")).unwrap();
        let text: Vec<String> = docs
            .iter()
            .map(|d| serde_json::to_string(d).unwrap())
            .collect();
        std::fs::write(dir.join("shop.yaml"), text.join("\n---\n")).unwrap();
    };
    // What is merged today, applied by the tool itself (its field manager).
    let base = std::env::temp_dir().join(format!("kubefedctl-plan-base-{}", std::process::id()));
    write(
        &base,
        &[
            cm("keep", "1"),
            cm("change", "1"),
            cm("drop", "1"),
            secret("old-secret-value"),
        ],
    );
    let applied = f.reconcile(&["-f", base.to_str().unwrap()]).ok();
    assert!(
        applied
            .stderr
            .contains(&format!("host: created FederatedConfigMap \"{ns}/keep\"")),
        "{}",
        applied.stderr
    );
    assert_eq!(member_cm_data(env, "member2", ns, "drop"), Some("1".into()));

    // The change under review: one template changed, one object added, one
    // dropped, the Secret's value changed.
    let dir = std::env::temp_dir().join(format!("kubefedctl-plan-{}", std::process::id()));
    write(
        &dir,
        &[
            cm("keep", "1"),
            cm("change", "2"),
            cm("new", "1"),
            secret("new-secret-value"),
        ],
    );
    // Only read with -R.
    std::fs::write(
        dir.join("nested/other.yaml"),
        serde_json::to_string(&cm("nested", "1")).unwrap(),
    )
    .unwrap();
    let d = dir.to_str().unwrap();
    let secrets = [
        "old-secret-value",
        "new-secret-value",
        &crate::fixtures::b64_encode("old-secret-value"),
        &crate::fixtures::b64_encode("new-secret-value"),
    ];
    let no_secret = |run: &crate::fixtures::Run| {
        for s in &secrets {
            assert!(
                !run.stdout.contains(s) && !run.stderr.contains(s),
                "{s} leaked:\n{}\n{}",
                run.stdout,
                run.stderr
            );
        }
    };

    f.reset();
    let plan = f.reconcile(&[
        "-f",
        d,
        "--prune",
        "-l",
        "team=shop",
        "--dry-run",
        "--diff",
        "--exit-code",
    ]);
    assert_eq!(plan.code, 4, "{}\n{}", plan.stdout, plan.stderr);
    for line in [
        format!("host: update FederatedConfigMap {ns}/change"),
        format!("host: create FederatedConfigMap {ns}/new"),
        format!("host: delete (pruned) FederatedConfigMap {ns}/drop"),
        format!("host: update FederatedSecret {ns}/token"),
    ] {
        assert!(plan.stdout.contains(&line), "{line}\n{}", plan.stdout);
    }
    for m in [f.cluster("m1"), f.cluster("m2")] {
        let mine: BTreeSet<String> = plan
            .stdout
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("{m}: ")))
            .map(str::to_string)
            .collect();
        let want: BTreeSet<String> = [
            format!("update ConfigMap {ns}/change"),
            format!("create ConfigMap {ns}/new"),
            format!("delete ConfigMap {ns}/drop"),
            format!("update Secret {ns}/token"),
        ]
        .into();
        assert_eq!(
            mine, want,
            "{m}: exactly the change's member changes\n{}",
            plan.stdout
        );
    }
    assert!(
        plan.stdout.contains("*** (after)"),
        "the Secret's change shows, masked\n{}",
        plan.stdout
    );
    // A new object shows whole (every line added), a deleted one whole
    // (every line removed), as kubectl diff shows them.
    let block = |header: &str| -> Vec<String> {
        let at = plan
            .stdout
            .find(header)
            .unwrap_or_else(|| panic!("no diff {header:?}\n{}", plan.stdout));
        plan.stdout[at..]
            .lines()
            .skip(2)
            .take_while(|l| (l.starts_with('+') || l.starts_with('-')) && !l.starts_with("--- "))
            .map(str::to_string)
            .collect()
    };
    for m in [f.cluster("m1"), f.cluster("m2")] {
        let new = block(&format!(
            "--- ConfigMap {ns}/new in {m} (absent)\n+++ ConfigMap {ns}/new in {m} (desired)\n"
        ));
        assert!(
            new.iter().all(|l| l.starts_with('+')) && new.contains(&"+kind: ConfigMap".to_string()),
            "{new:?}"
        );
        assert!(new.iter().any(|l| l.starts_with("+  a: ")), "{new:?}");
        let change = block(&format!(
            "--- ConfigMap {ns}/change in {m} (live)\n+++ ConfigMap {ns}/change in {m} (desired)\n"
        ));
        assert!(
            change.iter().any(|l| l.starts_with("+  a: "))
                && !change.iter().any(|l| l.contains("kind:")),
            "an update shows what changes, not the kind a list leaves out: {change:?}"
        );
        let drop = block(&format!(
            "--- ConfigMap {ns}/drop in {m} (live)\n+++ ConfigMap {ns}/drop in {m} (deleted)\n"
        ));
        assert!(
            drop.iter().all(|l| l.starts_with('-'))
                && drop.contains(&"-kind: ConfigMap".to_string()),
            "{drop:?}"
        );
    }
    assert!(!plan.stdout.contains("nested"), "-R not given");
    no_secret(&plan);
    let writes: Vec<_> = [&f.host, &f.m1, &f.m2]
        .iter()
        .flat_map(|p| p.records())
        .filter(|r| r.method != "GET" && !r.resource.ends_with("reviews"))
        .collect();
    assert!(
        writes.is_empty(),
        "a plan writes nothing anywhere (each member is asked once what it may do): {writes:?}"
    );

    let md = f
        .reconcile(&[
            "-f",
            d,
            "--prune",
            "-l",
            "team=shop",
            "--dry-run",
            "-o",
            "markdown",
        ])
        .ok();
    assert!(
        md.stdout.starts_with(
            "### kubefedctl reconcile plan: 8 member change(s) in 2 member(s), 4 host change(s)"
        ),
        "{}",
        md.stdout
    );
    assert!(
        md.stdout
            .contains(&format!("| create | `ConfigMap {ns}/new` |")),
        "{}",
        md.stdout
    );
    assert!(md.stdout.contains("```diff"), "{}", md.stdout);
    no_secret(&md);

    // Applied: host and members converge in one run.
    let apply = f.reconcile(&["-f", d, "--prune", "-l", "team=shop"]).ok();
    no_secret(&apply);
    let member_cm = |m: &str, name: &str| {
        get(
            env,
            m,
            &format!("/api/v1/namespaces/{ns}/configmaps/{name}"),
        )
    };
    for m in ["member1", "member2"] {
        assert_eq!(member_cm(m, "change").unwrap()["data"]["a"], "2");
        assert!(member_cm(m, "new").is_some());
        assert!(member_cm(m, "drop").is_none(), "pruned in {m}");
        let s = get(env, m, &format!("/api/v1/namespaces/{ns}/secrets/token")).unwrap();
        assert_eq!(
            s["data"]["password"],
            crate::fixtures::b64_encode("new-secret-value")
        );
    }
    assert!(
        f.fed(env, "federatedconfigmaps", "drop").is_none(),
        "its deletion completed"
    );
    f.reset();
    let again = f.reconcile(&["-f", d, "--prune", "-l", "team=shop"]).ok();
    let writes = f.writes();
    assert!(
        writes.is_empty(),
        "a second run writes nothing: {writes:?}\n{}",
        again.stderr
    );

    // -l picks the objects a run reconciles, not the FederatedNamespace
    // (unlabelled here) that places them: nothing to do.
    f.reconcile(&["-l", "team=shop", "--dry-run", "--exit-code"])
        .ok();
    // Another field manager owns a field the files set: a clear error, nothing written.
    patch(
        env,
        "host",
        &format!(
            "/apis/{}/v1beta1/namespaces/{ns}/federatedconfigmaps/change",
            f.group
        ),
        json!({"spec": {"template": {"data": {"a": "3"}}}}),
    );
    f.reset();
    let conflict = f.reconcile(&["-f", d]).fails();
    assert!(
        conflict
            .stderr
            .contains(&format!("applying FederatedConfigMap \"{ns}/change\""))
            && conflict.stderr.contains("--force-conflicts"),
        "{}",
        conflict.stderr
    );
    let writes = f.writes();
    assert!(writes.is_empty(), "a conflict writes nothing: {writes:?}");
    assert_eq!(
        f.fed(env, "federatedconfigmaps", "change").unwrap()["spec"]["template"]["data"]["a"],
        "3"
    );

    // Files that are not a change of enabled federated types: an error
    // naming the file and document, before anything is read or written.
    let bad = dir.join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    let gadget = json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": "FederatedGadget",
        "metadata": {"name": "g", "namespace": ns}, "spec": {"template": {}, "placement": {}}});
    std::fs::write(
        bad.join("a.yaml"),
        format!(
            "{}\n---\n{}",
            serde_json::to_string(&cm("ok", "1")).unwrap(),
            serde_json::to_string(&gadget).unwrap()
        ),
    )
    .unwrap();
    f.reset();
    let run = f.reconcile(&["-f", bad.to_str().unwrap()]).fails();
    assert!(
        run.stderr.contains("a.yaml: document 2: FederatedGadget")
            && run
                .stderr
                .contains("is not a federated type enabled on the host"),
        "{}",
        run.stderr
    );
    let cluster = json!({"apiVersion": "core.kubefed.io/v1beta1", "kind": "KubeFedCluster", "metadata": {"name": "x", "namespace": f.fedns}});
    std::fs::write(bad.join("a.yaml"), serde_json::to_string(&cluster).unwrap()).unwrap();
    let run = f
        .reconcile(&["-f", bad.to_str().unwrap(), "--dry-run"])
        .fails();
    assert!(
        run.stderr
            .contains("a.yaml: document 1: KubeFedCluster cannot be applied with -f"),
        "{}",
        run.stderr
    );
    let writes = f.writes();
    assert!(writes.is_empty(), "bad files write nothing: {writes:?}");
    assert!(f.fed(env, "federatedconfigmaps", "ok").is_none());

    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&base).unwrap();
}

/// `data.a` of a ConfigMap in a member.
fn member_cm_data(env: &TestEnv, member: &str, ns: &str, name: &str) -> Option<String> {
    get(
        env,
        member,
        &format!("/api/v1/namespaces/{ns}/configmaps/{name}"),
    )
    .and_then(|c| c["data"]["a"].as_str().map(str::to_string))
}

/// `--wait-ready`: rollout status for workloads, a Ready condition for
/// custom resources, exit 3 naming what did not become ready.
#[test]
fn wait_ready_waits_for_rollouts_and_ready_conditions() {
    // Real readiness: Deployments whose pods a kubelet starts, or not.
    let Some(env) = crate::pods::nodes() else {
        return;
    };
    let group = "ready.example.com";
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("beacons.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "beacons", "singular": "beacon", "kind": "Beacon", "listKind": "BeaconList"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    for c in ["host", "member1", "member2"] {
        post(env, c, crds, crd.clone());
        wait_until(&format!("{c} serves beacons"), || {
            get(env, c, &format!("/apis/{group}/v1")).is_some()
        });
    }
    let widget_type = format!("beacons.{group}");
    let f = Federation::new(env, "rc-ready", &["deployments.apps", &widget_type]);
    let ns = f.ns;
    let deployment = |replicas: i64| {
        json!({"template": {"spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c",
                "image": "localhost/kubefedctl-test:absent", "imagePullPolicy": "Never"}]}}}},
            "placement": {"clusterSelector": {}}})
    };
    let spawn = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_kubefedctl"))
            .arg("--kubeconfig")
            .arg(&f.kc)
            .args(["reconcile", "-n", ns, "--kubefed-namespace", f.fedns])
            .args(extra)
            .env_remove("KUBECONFIG")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let finish = |child: std::process::Child| {
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // No replicas: ready once the deployment controller has seen it.
    f.create(env, "FederatedDeployment", "idle", deployment(0));
    let child = spawn(&["--wait-ready=60s"]);
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("ready: {}: deployment {ns}/idle", f.cluster("m1"))),
        "{stderr}"
    );
    assert!(stderr.contains("member object(s) ready"), "{stderr}");

    // A pod that never starts (an image no node has, never pulled: the
    // kubelet says ErrImageNeverPull): time runs out, exit 5, and only
    // what this run wrote is waited for.
    f.create(env, "FederatedDeployment", "web", deployment(1));
    let child = spawn(&["--wait-ready=8s"]);
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(5), "{stderr}");
    for m in [f.cluster("m1"), f.cluster("m2")] {
        assert!(
            stderr.contains(&format!(
                "not ready: {m}: deployment {ns}/web 0/1 available"
            )),
            "{stderr}"
        );
    }
    assert!(
        !stderr.contains("/idle"),
        "idle was not written this time\n{stderr}"
    );
    assert!(stderr.contains("not ready after 8s"), "{stderr}");

    // A custom resource turns ready when its Ready condition does; the test
    // is its controller too.
    f.create(
        env,
        "FederatedBeacon",
        "w",
        json!({"template": {"spec": {"size": 1}}, "placement": {"clusterSelector": {}}}),
    );
    // Its members' copies exist already, not ready (as their controller
    // says), and are adopted by the run.
    let widget = format!("/apis/{group}/v1/namespaces/{ns}/beacons/w");
    for m in ["member1", "member2"] {
        post(
            env,
            m,
            &format!("/apis/{group}/v1/namespaces/{ns}/beacons"),
            json!({"apiVersion": format!("{group}/v1"), "kind": "Beacon", "metadata": {"name": "w", "namespace": ns}, "spec": {"size": 0}}),
        );
        patch(
            env,
            m,
            &format!("{widget}/status"),
            json!({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Provisioning"}]}}),
        );
    }
    let mut child = spawn(&["--type", &widget_type, "--wait-ready=60s"]);
    wait_until("the beacons adopted", || {
        ["member1", "member2"]
            .iter()
            .all(|m| get(env, m, &widget).is_some_and(|w| w["spec"]["size"] == 1))
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(
        child.try_wait().unwrap().is_none(),
        "still waiting while the widgets are not Ready"
    );
    for m in ["member1", "member2"] {
        patch(
            env,
            m,
            &format!("{widget}/status"),
            json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Provisioned"}]}}),
        );
    }
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("ready: {}: beacon {ns}/w", f.cluster("m1"))),
        "{stderr}"
    );
}

/// docs/ci.md's GitHub Actions plan and apply commands, run as written
/// (a `kubefedctl` on PATH adds this test's federation namespace).
#[test]
fn the_ci_recipe_plans_then_applies() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-ci", &["configmaps"]);
    // The federation exists already (its namespace is in the members).
    f.reconcile(&[]).ok();
    let docs = std::fs::read_to_string(root().join("docs/ci.md")).unwrap();
    let section =
        &docs[docs.find("## GitHub Actions").unwrap()..docs.find("## GitLab CI").unwrap()];
    let commands: Vec<&str> = section
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("kubefedctl "))
        .collect();
    assert_eq!(
        commands.len(),
        2,
        "a plan and an apply command: {commands:?}"
    );
    let (plan, apply) = (commands[0], commands[1]);
    assert!(plan.contains("--dry-run") && !apply.contains("--dry-run"));

    // The runner: a checkout with federation/, the kubeconfig in
    // $RUNNER_TEMP, the step summary file.
    let work = env.dir().join("ci-recipe");
    let runner_temp = work.join("tmp");
    std::fs::create_dir_all(work.join("federation/shop")).unwrap();
    std::fs::create_dir_all(&runner_temp).unwrap();
    std::fs::copy(&f.kc, runner_temp.join("kubeconfig")).unwrap();
    let bin = work.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let shim = bin.join("kubefedctl");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\nexec {} \"$@\" --kubefed-namespace {}\n",
            env!("CARGO_BIN_EXE_kubefedctl"),
            f.fedns
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cm = |name: &str, a: &str| {
        json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": "FederatedConfigMap",
            "metadata": {"name": name, "namespace": f.ns, "labels": {"app.kubernetes.io/part-of": "shop"}},
            "spec": {"template": {"data": {"a": a}}, "placement": {"clusterSelector": {}}}})
    };
    std::fs::write(
        work.join("federation/shop/web.yaml"),
        serde_json::to_string(&cm("web", "1")).unwrap(),
    )
    .unwrap();
    let summary = work.join("summary.md");
    let step = |command: &str| {
        let out = std::process::Command::new("bash")
            .args(["-eo", "pipefail", "-c", command])
            .current_dir(&work)
            .env(
                "PATH",
                format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
            )
            .env("RUNNER_TEMP", &runner_temp)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    // The pull request: a plan in the step summary, the check "changes pending".
    let (code, stderr) = step(plan);
    assert_eq!(code, Some(4), "changes pending: {stderr}");
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.contains(&format!("| create | `ConfigMap {}/web` |", f.ns)),
        "{md}"
    );
    assert!(
        md.contains(&format!("- create FederatedConfigMap {}/web", f.ns)),
        "{md}"
    );
    assert!(
        f.fed(env, "federatedconfigmaps", "web").is_none(),
        "a plan writes nothing"
    );

    // The merge: applied, propagated, ready; the JSON summary kept.
    let (code, stderr) = step(apply);
    assert_eq!(code, Some(0), "{stderr}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(work.join("reconcile.json")).unwrap())
            .unwrap();
    assert_eq!(
        report["clusters"][f.cluster("m1")]["created"],
        1,
        "{report}"
    );
    assert_eq!(
        member_cm_data(env, "member2", f.ns, "web"),
        Some("1".into())
    );

    // The next pull request without changes: nothing pending.
    std::fs::remove_file(&summary).unwrap();
    let (code, stderr) = step(plan);
    assert_eq!(code, Some(0), "{stderr}");
}

/// A migration: KubeFed's own controller-manager still holds its leader
/// lock, so reconcile refuses to propagate beside it (unless --force). The
/// check reads only the lock the KubeFedConfig's `leaderElect.resourceLock`
/// names: one of each kind KubeFed's client-go can keep is tried, and a
/// run never reads a v1 Endpoints lock unless that is the configured one.
#[test]
fn a_live_kubefed_controller_manager_is_not_run_beside() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-handover", &["configmaps"]);
    let now = |offset: i64| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
            + offset;
        kubefedctl::core::time::rfc3339(t)
    };
    let endpoint_reads = || {
        f.host
            .records()
            .iter()
            .filter(|r| r.resource == "endpoints")
            .count()
    };
    // client-go's ConfigMap lock, KubeFed v0.10's default, renewed now.
    let record = json!({"holderIdentity": "kubefed-cm-7d9_abc", "leaseDurationSeconds": 15,
        "acquireTime": now(-100), "renewTime": now(0), "leaderTransitions": 0});
    let annotated = |name: &str, record: &Value| {
        json!({"metadata": {"name": name,
            "annotations": {"control-plane.alpha.kubernetes.io/leader": record.to_string()}}})
    };
    post(
        env,
        "host",
        &format!("/api/v1/namespaces/{}/configmaps", f.fedns),
        annotated("kubefed-controller-manager", &record),
    );
    f.reset();
    let run = f.reconcile(&[]).fails();
    assert!(
        run.stderr.contains(&format!(
            "KubeFed's controller-manager (kubefed-cm-7d9_abc) holds its leader lock {}/kubefed-controller-manager",
            f.fedns
        )),
        "{}",
        run.stderr
    );
    assert_eq!(
        f.host.writes() + f.member_writes(),
        0,
        "nothing written, not even the lock"
    );
    // A plan writes nothing, so it is allowed; --force runs.
    f.reconcile(&["--dry-run"]).ok();
    f.reconcile(&["--force"]).ok();
    // Once its lease has expired, nobody is propagating: a run goes ahead,
    // without reading (or being warned about) a v1 Endpoints lock.
    let stale = json!({"holderIdentity": "kubefed-cm-7d9_abc", "leaseDurationSeconds": 15,
        "acquireTime": now(-600), "renewTime": now(-300)});
    patch(
        env,
        "host",
        &format!(
            "/api/v1/namespaces/{}/configmaps/kubefed-controller-manager",
            f.fedns
        ),
        json!({"metadata": {"annotations": {"control-plane.alpha.kubernetes.io/leader": stale.to_string()}}}),
    );
    f.reset();
    let run = f.reconcile(&[]).ok();
    assert_eq!(endpoint_reads(), 0, "{:?}", f.host.records());
    assert!(!run.stderr.contains("Warning:"), "{}", run.stderr);
    // `resourceLock: leases` (and `configmapsleases`, which writes both):
    // the Lease client-go keeps, renewed now.
    let micro = |offset: i64| now(offset).replace('Z', ".000000Z");
    post(
        env,
        "host",
        &format!("/apis/coordination.k8s.io/v1/namespaces/{}/leases", f.fedns),
        json!({"metadata": {"name": "kubefed-controller-manager"},
               "spec": {"holderIdentity": "kubefed-lease-5f6_def", "leaseDurationSeconds": 600,
                        "acquireTime": micro(-100), "renewTime": micro(0), "leaseTransitions": 0}}),
    );
    // Not the configured lock (configmaps): nobody is propagating by it.
    f.reconcile(&[]).ok();
    for lock in ["leases", "configmapsleases"] {
        f.configure(env, json!({"leaderElect": {"resourceLock": lock}}));
        let run = f.reconcile(&[]).fails();
        assert!(
            run.stderr.contains(
                "KubeFed's controller-manager (kubefed-lease-5f6_def) holds its leader lock"
            ),
            "{lock}: {}",
            run.stderr
        );
    }
    // `resourceLock: endpoints`: the one configuration that reads Endpoints.
    f.configure(env, json!({"leaderElect": {"resourceLock": "endpoints"}}));
    f.reconcile(&[]).ok();
    post(
        env,
        "host",
        &format!("/api/v1/namespaces/{}/endpoints", f.fedns),
        annotated(
            "kubefed-controller-manager",
            &json!({"holderIdentity": "kubefed-ep-1a2_ghi",
            "leaseDurationSeconds": 15, "acquireTime": now(-100), "renewTime": now(0)}),
        ),
    );
    f.reset();
    let run = f.reconcile(&[]).fails();
    assert!(
        run.stderr
            .contains("KubeFed's controller-manager (kubefed-ep-1a2_ghi) holds its leader lock"),
        "{}",
        run.stderr
    );
    assert!(endpoint_reads() > 0);
}

/// Remote status collection (the FTC's statusCollection and the
/// RawResourceStatusCollection gate): each member copy's .status lands in
/// the federated object's status.clusters[].remoteStatus, as upstream's
/// dispatch/managed.go RecordStatus writes it.
#[test]
fn remote_statuses_are_collected_into_the_federated_status() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-remote", &["deployments.apps"]);
    f.collect_status(env, &["deployments.apps"]);
    f.create_deployment(env, "web");
    f.reconcile(&[]).ok();
    // No member status yet (just created): not yet collected.
    let fed = f.fed(env, "federateddeployments", "web").unwrap();
    assert!(
        fed["status"]["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c.get("remoteStatus").is_none()),
        "{fed}"
    );
    // The test is the members' deployment controller.
    for (m, ready) in [("member1", 1), ("member2", 0)] {
        let path = format!("/apis/apps/v1/namespaces/{}/deployments/web", f.ns);
        let generation = get(env, m, &path).unwrap()["metadata"]["generation"].clone();
        patch(
            env,
            m,
            &format!("{path}/status"),
            json!({"status": {"observedGeneration": generation, "replicas": 1, "readyReplicas": ready}}),
        );
    }
    f.reconcile(&[]).ok();
    let fed = f.fed(env, "federateddeployments", "web").unwrap();
    let remote = |cluster: String| {
        fed["status"]["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == cluster.as_str())
            .map(|c| c["remoteStatus"].clone())
            .unwrap_or_default()
    };
    assert_eq!(remote(f.cluster("m1"))["readyReplicas"], 1, "{fed}");
    assert_eq!(remote(f.cluster("m2"))["replicas"], 1, "{fed}");
    // status shows them: READY per member in the table, the statuses in json.
    let table = f.run(&["status", "deployments", "-n", f.ns]).ok();
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    assert!(
        table.stdout.lines().next().unwrap().contains("READY"),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains(&format!("{m1}:1/1,{m2}:0/1")),
        "{}",
        table.stdout
    );
    let json = f
        .run(&["status", "deployments", "web", "-n", f.ns, "-o", "json"])
        .ok();
    let rows: Value = serde_json::from_str(&json.stdout).unwrap();
    let first = &rows[0]["clusters"];
    let of = |name: &str| {
        first
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(of(&m1)["remoteStatus"]["readyReplicas"], 1, "{rows}");
    assert_eq!(of(&m2)["ready"], "0/1", "{rows}");
    // Nothing changed: nothing written.
    f.reset();
    f.reconcile(&[]).ok();
    let writes: Vec<_> = f
        .host
        .records()
        .into_iter()
        .filter(|r| r.method != "GET" && r.resource != "leases")
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
}

/// KubeFed's status controller for `services` (with `statusCollection` and
/// a `statusType`): one FederatedServiceStatus per federated Service, owned
/// by it, listing each ready member's Service status, kept up to date and
/// gone with the Service.
#[test]
fn federated_service_statuses_are_written_as_upstreams_status_controller() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-svcst", &["services"]);
    patch(
        env,
        "host",
        &format!(
            "/apis/core.kubefed.io/v1beta1/namespaces/{}/federatedtypeconfigs/services",
            f.fedns
        ),
        json!({"spec": {"statusCollection": "Enabled", "statusType": {
            "group": "core.kubefed.io", "version": "v1alpha1", "kind": "FederatedServiceStatus",
            "pluralName": "federatedservicestatuses", "scope": "Namespaced"}}}),
    );
    f.create(
        env,
        "FederatedService",
        "web",
        json!({"template": {"spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}},
            "placement": {"clusterSelector": {}}}),
    );
    f.reconcile(&[]).ok();
    let status_path = format!(
        "/apis/core.kubefed.io/v1alpha1/namespaces/{}/federatedservicestatuses/web",
        f.ns
    );
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    let first = get(env, "host", &status_path).expect("created by the first run");
    let fed = f.fed(env, "federatedservices", "web").unwrap();
    assert_eq!(
        first["metadata"]["ownerReferences"][0]["uid"],
        fed["metadata"]["uid"]
    );
    assert_eq!(
        first["metadata"]["ownerReferences"][0]["kind"],
        "FederatedService"
    );
    let names: Vec<&str> = first["clusterStatus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["clusterName"].as_str().unwrap())
        .collect();
    assert_eq!(names, [m1.as_str(), m2.as_str()], "{first}");
    // member1's load balancer gets an address: the next run records it.
    patch(
        env,
        "member1",
        &format!("/api/v1/namespaces/{}/services/web/status", f.ns),
        json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}}}),
    );
    let plan = f.reconcile(&["--dry-run"]).ok();
    assert!(
        plan.stdout
            .contains(&format!("host: update FederatedServiceStatus {}/web", f.ns)),
        "{}",
        plan.stdout
    );
    f.reconcile(&[]).ok();
    let updated = get(env, "host", &status_path).unwrap();
    assert_eq!(
        updated["clusterStatus"][0]["status"]["loadBalancer"]["ingress"][0]["ip"], "192.0.2.7",
        "{updated}"
    );
    assert_eq!(updated["clusterStatus"][1]["clusterName"], m2.as_str());
    // Nothing changed: no status object written.
    f.reset();
    f.reconcile(&[]).ok();
    let writes: Vec<_> = f
        .host
        .records()
        .into_iter()
        .filter(|r| r.resource == "federatedservicestatuses" && r.is_write())
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
    // With the RawResourceStatusCollection gate on, upstream's status
    // controller stops: the remote statuses take its place.
    f.configure(
        env,
        json!({"featureGates": [{"name": "RawResourceStatusCollection", "configuration": "Enabled"}]}),
    );
    patch(
        env,
        "member1",
        &format!("/api/v1/namespaces/{}/services/web/status", f.ns),
        json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.8"}]}}}),
    );
    f.reset();
    f.reconcile(&[]).ok();
    assert_eq!(
        f.host.count(|r| r.resource == "federatedservicestatuses"),
        0,
        "not even listed"
    );
    let fed = f.fed(env, "federatedservices", "web").unwrap();
    assert_eq!(
        fed["status"]["clusters"][0]["remoteStatus"]["loadBalancer"]["ingress"][0]["ip"],
        "192.0.2.8",
        "{fed}"
    );
    // Deleted with its Service (the host's garbage collector).
    let (status, _) = crate::fixtures::request(
        env,
        "host",
        "DELETE",
        &format!(
            "/apis/{}/v1beta1/namespaces/{}/federatedservices/web",
            f.group, f.ns
        ),
        None,
    );
    assert_eq!(status, 200);
    crate::fixtures::wait_until("the status object goes with its Service", || {
        f.reconcile(&[]);
        get(env, "host", &status_path).is_none()
    });
}

/// The remote-status case of KubeFed's `crud.go` for the other workload
/// types it covers (jobs and replicasets; deployments above): each
/// member copy's status is collected as upstream records it.
#[test]
fn remote_statuses_of_jobs_and_replicasets_are_collected() {
    let env = TestEnv::shared();
    // The default group: these kinds exist there for other tests too.
    let f = Federation::named(
        env,
        "rc-remote2",
        "types.kubefed.io",
        "rc-remote2-objs",
        &["jobs.batch", "replicasets.apps"],
    );
    f.collect_status(env, &["jobs.batch", "replicasets.apps"]);
    let pod = json!({"metadata": {"labels": {"app": "w"}}, "spec": {"restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox"}]}});
    f.create(
        env,
        "FederatedJob",
        "batch",
        json!({"template": {"spec": {"template": pod}}, "placement": {"clusterSelector": {}}}),
    );
    let mut rs_pod = pod.clone();
    rs_pod["spec"]["restartPolicy"] = json!("Always");
    f.create(
        env,
        "FederatedReplicaSet",
        "rs",
        json!({"template": {"spec": {"replicas": 2, "selector": {"matchLabels": {"app": "w"}}, "template": rs_pod}},
            "placement": {"clusterSelector": {}}}),
    );
    f.reconcile(&[]).ok();
    // The tests are the members' job and replicaset controllers.
    for m in ["member1", "member2"] {
        patch(
            env,
            m,
            &format!("/apis/batch/v1/namespaces/{}/jobs/batch/status", f.ns),
            json!({"status": {"succeeded": 1, "startTime": "2026-12-01T00:00:00Z"}}),
        );
        patch(
            env,
            m,
            &format!("/apis/apps/v1/namespaces/{}/replicasets/rs/status", f.ns),
            json!({"status": {"replicas": 2, "readyReplicas": 2}}),
        );
    }
    f.reconcile(&[]).ok();
    for (plural, name, field, want) in [
        ("federatedjobs", "batch", "succeeded", 1),
        ("federatedreplicasets", "rs", "readyReplicas", 2),
    ] {
        let fed = f.fed(env, plural, name).unwrap();
        let clusters = fed["status"]["clusters"].as_array().unwrap();
        assert_eq!(clusters.len(), 2, "{fed}");
        for c in clusters {
            assert_eq!(c["remoteStatus"][field], want, "{plural}: {fed}");
        }
    }
    // status shows READY for the replicasets (a workload), not for jobs.
    let table = f.run(&["status", "replicasets", "-n", f.ns]).ok();
    assert!(
        table
            .stdout
            .contains(&format!("{}:2/2,{}:2/2", f.cluster("m1"), f.cluster("m2"))),
        "{}",
        table.stdout
    );
    let jobs = f.run(&["status", "jobs", "-n", f.ns]).ok();
    assert!(!jobs.stdout.contains("READY"), "{}", jobs.stdout);
}

/// `--dry-run --validate`: each planned create and update goes to its
/// member as a server-side dry run with strict field validation, so a
/// misspelt template field fails the pull request's plan naming member,
/// object and field (1.27+; older members ignore fieldValidation), and
/// nothing is written.
#[test]
fn validate_sends_the_plan_as_strict_server_side_dry_runs() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-val", &["deployments.apps", "configmaps"]);
    let everywhere = json!({"clusterSelector": {}});
    f.create(
        env,
        "FederatedConfigMap",
        "first",
        json!({"template": {"data": {"k": "v"}}, "placement": everywhere}),
    );
    let dry_runs = |p: &testenv::Proxy| {
        p.count(|r| r.query.contains("dryRun=All") && r.query.contains("fieldValidation=Strict"))
    };
    // Objects in a namespace the plan creates cannot be checked yet.
    f.reset();
    let first = f.reconcile(&["--dry-run", "--validate"]).ok();
    assert_eq!(
        dry_runs(&f.m1) + dry_runs(&f.m2),
        2,
        "the two namespaces only"
    );
    assert!(
        first.stderr.contains(
            "--validate: 2 planned change(s) in namespaces this plan creates not validated"
        ),
        "{}",
        first.stderr
    );
    f.reconcile(&[]).ok();
    f.create(
        env,
        "FederatedConfigMap",
        "fine",
        json!({"template": {"data": {"k": "v"}}, "placement": everywhere}),
    );
    f.create(env, "FederatedDeployment", "web", json!({
        "template": {"spec": {"replicas": 1, "replcas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}},
        "placement": everywhere
    }));
    f.reset();
    let run = f.reconcile(&["--dry-run", "--validate"]);
    let dry_runs = |p: &testenv::Proxy| {
        p.count(|r| r.query.contains("dryRun=All") && r.query.contains("fieldValidation=Strict"))
    };
    assert_eq!(
        dry_runs(&f.m1) + dry_runs(&f.m2),
        4,
        "one per planned create"
    );
    assert!(f.writes().is_empty(), "nothing written: {:?}", f.writes());
    let strict = env.version().minor >= 27;
    for m in [f.cluster("m1"), f.cluster("m2")] {
        let line = format!(
            "{m}: create Deployment {}/web: refused by the member's validation",
            f.ns
        );
        assert_eq!(run.stderr.contains(&line), strict, "{}", run.stderr);
        assert!(
            !run.stderr.contains(&format!("{m}: create ConfigMap")),
            "{}",
            run.stderr
        );
    }
    if strict {
        assert!(
            run.stderr.contains("unknown field \"spec.replcas\""),
            "{}",
            run.stderr
        );
        assert_ne!(run.code, 0);
    } else {
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    // Without --validate a plan makes no such request.
    f.reset();
    f.reconcile(&["--dry-run"]).ok();
    assert_eq!(dry_runs(&f.m1) + dry_runs(&f.m2), 0);

    // A planned update is validated too: the template mended and applied,
    // then changed with another misspelt field.
    let web = format!(
        "/apis/{}/v1beta1/namespaces/{}/federateddeployments/web",
        f.group, f.ns
    );
    patch(
        env,
        "host",
        &web,
        json!({"spec": {"template": {"spec": {"replcas": null}}}}),
    );
    f.reconcile(&[]).ok();
    patch(
        env,
        "host",
        &web,
        json!({"spec": {"template": {"spec": {"replicas": 2, "minReadySecnds": 5}}}}),
    );
    f.reset();
    let run = f.reconcile(&["--dry-run", "--validate"]);
    let puts = |p: &testenv::Proxy| {
        p.count(|r| {
            r.method == "PUT"
                && r.resource == "deployments"
                && r.name == "web"
                && r.query.contains("dryRun=All")
                && r.query.contains("fieldValidation=Strict")
        })
    };
    assert_eq!(
        (puts(&f.m1), puts(&f.m2), dry_runs(&f.m1) + dry_runs(&f.m2)),
        (1, 1, 2),
        "one per planned update"
    );
    assert!(f.writes().is_empty(), "nothing written: {:?}", f.writes());
    for m in [f.cluster("m1"), f.cluster("m2")] {
        let planned = format!("{m}: update Deployment {}/web", f.ns);
        assert!(run.stdout.contains(&planned), "{}", run.stdout);
        // One line names the member, the object and the field.
        let prefix = format!(
            "failed: {m}: update Deployment {}/web: refused by the member's validation",
            f.ns
        );
        let line = run.stderr.lines().find(|l| l.starts_with(&prefix));
        assert_eq!(line.is_some(), strict, "{}", run.stderr);
        if let Some(line) = line {
            assert!(
                line.contains("unknown field \"spec.minReadySecnds\""),
                "{line}"
            );
        }
    }
    if strict {
        assert_ne!(run.code, 0);
    } else {
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
}

/// `--wait-ready` names what PodSecurity admission (1.25+) refuses: the
/// members run the deployment and replicaset controllers, the federated
/// Namespace carries `pod-security.kubernetes.io/enforce: restricted`, and
/// a Deployment whose Pods run as root is never waited on for the whole
/// timeout: the run ends naming the server's reason.
#[test]
fn wait_ready_names_pods_that_pod_security_refuses() {
    let env = TestEnv::private_with(
        &["host", "member1", "member2"],
        &["deployment", "replicaset"],
    )
    .unwrap();
    let f = Federation::new(&env, "rc-psa", &["deployments.apps"]);
    f.patch_federated_namespace(&env, json!({"spec": {"template": {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}}}));
    f.create(
        &env,
        "FederatedDeployment",
        "root",
        json!({
            "template": {"spec": {"replicas": 1, "selector": {"matchLabels": {"app": "root"}},
                "template": {"metadata": {"labels": {"app": "root"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}},
            "placement": {"clusters": [{"name": f.cluster("m1")}]}
        }),
    );
    let psa = env.version().minor >= 25;
    let run = f.reconcile(&[if psa {
        "--wait-ready=120s"
    } else {
        "--wait-ready=5s"
    }]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    let line = format!("not ready: {}: deployment {}/root", f.cluster("m1"), f.ns);
    if psa {
        assert!(run.stderr.contains(&line), "{}", run.stderr);
        assert!(
            run.stderr.contains("FailedCreate")
                && run
                    .stderr
                    .contains("violates PodSecurity \"restricted:latest\""),
            "{}",
            run.stderr
        );
        assert!(
            run.stderr
                .contains("1 member object(s) will not become ready"),
            "ended on the refusal, not the timeout: {}",
            run.stderr
        );
    } else {
        // No PodSecurity admission: the Pods are made (and, with no node
        // here, never become available).
        assert!(!run.stderr.contains("PodSecurity"), "{}", run.stderr);
    }
}

/// A template whose metadata is not Kubernetes metadata (stored fine: the
/// federated CRD keeps the template as it is) fails that object in each
/// member, named, with no retry, and the run carries on with the others.
#[test]
fn a_template_with_malformed_metadata_fails_that_object_only() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "rc-meta", &["configmaps"]);
    let m1 = f.cluster("m1");
    namespace(env, "member1", f.ns);
    f.create(
        env,
        "FederatedConfigMap",
        "bad",
        json!({"template": {"metadata": {"annotations": 5}, "data": {"a": "1"}},
               "placement": {"clusters": [{"name": m1}]}}),
    );
    f.create(
        env,
        "FederatedConfigMap",
        "good",
        json!({"template": {"data": {"a": "1"}}, "placement": {"clusters": [{"name": m1}]}}),
    );
    let run = f.reconcile(&["--attempts", "3"]);
    assert_eq!(run.code, 3, "a partial run: {}", run.stderr);
    let failed: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("failed: "))
        .collect();
    assert_eq!(failed.len(), 1, "{}", run.stderr);
    assert!(
        failed[0].starts_with(&format!(
            "failed: {m1}: ConfigMap {}/bad: not a valid object: ",
            f.ns
        )),
        "{}",
        failed[0]
    );
    assert!(
        cm(env, "member1", f.ns, "good").is_some(),
        "the other object propagated"
    );
    assert!(cm(env, "member1", f.ns, "bad").is_none());
}
