//! The reconciler inside the host: `init --reconciler` manifests on a real
//! API server, the in-cluster configuration with nothing but the generated
//! service account's token, and `reconcile --shard I/N`.

use crate::fixtures::{
    Federation, cm, get, gone, kubefedctl_in_pod, labels, namespace, patch, pod_mount, post,
    reconciler_token,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;
use testenv::{TestEnv, http};

const IMAGE: &str = "registry.example/kubefedctl:test";

/// A request with `token` straight to the host's API server.
fn as_token(env: &TestEnv, token: &str, method: &str, path: &str, body: Option<Value>) -> u16 {
    http::request(
        method,
        &format!("{}{path}", env.cluster("host").url()),
        env.ca_pem(),
        Some(token),
        body.map(|b| b.to_string()).as_deref(),
        Duration::from_secs(10),
    )
    .unwrap()
    .status
}

#[test]
fn reconciler_manifests_are_accepted_then_unchanged_and_follow_the_types() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "ic-m", &["configmaps"]);
    let install = |shards: &str| {
        f.run(&[
            "init",
            "--reconciler",
            "cronjob",
            "--image",
            IMAGE,
            "--shards",
            shards,
            "--schedule",
            "*/10 * * * *",
        ])
    };
    let run = install("3").ok();
    // 1.21+ serves batch/v1 CronJobs and 1.24+ Indexed Jobs: one CronJob
    // whose Indexed Job runs every shard. 1.20 has neither: one
    // batch/v1beta1 CronJob per shard.
    let indexed = env.version().minor >= 24;
    let batch = if env.version().minor >= 21 {
        "batch/v1"
    } else {
        "batch/v1beta1"
    };
    let crons: Vec<(String, String)> = if indexed {
        vec![(
            "kubefedctl-reconcile".into(),
            "$(JOB_COMPLETION_INDEX)/3".into(),
        )]
    } else {
        (0..3)
            .map(|i| (format!("kubefedctl-reconcile-{i}-of-3"), format!("{i}/3")))
            .collect()
    };
    for (name, shard) in &crons {
        let path = format!("/apis/{batch}/namespaces/{}/cronjobs/{name}", f.fedns);
        let cron = get(env, "host", &path).unwrap_or_else(|| panic!("{path}\n{}", run.stdout));
        assert_eq!(cron["spec"]["schedule"], "*/10 * * * *");
        assert_eq!(cron["spec"]["concurrencyPolicy"], "Forbid");
        let job = &cron["spec"]["jobTemplate"]["spec"];
        if indexed {
            assert_eq!(job["completionMode"], "Indexed");
            assert_eq!(
                (job["completions"].clone(), job["parallelism"].clone()),
                (json!(3), json!(3))
            );
        }
        let pod = &job["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], "kubefedctl-reconciler");
        assert_eq!(pod["containers"][0]["image"], IMAGE);
        let args: Vec<&str> = pod["containers"][0]["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(
            args,
            [
                "reconcile",
                "--kubefed-namespace",
                f.fedns,
                "-o",
                "json",
                "--shard",
                shard.as_str()
            ]
        );
    }
    let role_path = format!(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/kubefedctl-reconciler:{}",
        f.fedns
    );
    let rules = get(env, "host", &role_path).unwrap()["rules"].to_string();
    assert!(rules.contains("federatedconfigmaps"), "{rules}");
    assert!(!rules.contains("\"*\""), "no wildcard: {rules}");

    // Again: nothing to write.
    f.reset();
    let again = install("3").ok();
    assert_eq!(f.host.writes(), 0, "{:?}", f.host.records());
    assert!(!again.stdout.contains(" created"), "{}", again.stdout);

    // Enabling a type extends the rules; disabling takes them back.
    let enabled = f
        .run(&["enable", "limitranges", "--federated-group", f.group])
        .ok();
    assert!(
        enabled.stdout.contains(&format!(
            "clusterrole.rbac.authorization.k8s.io/kubefedctl-reconciler:{} updated",
            f.fedns
        )),
        "{}",
        enabled.stdout
    );
    let rules = get(env, "host", &role_path).unwrap()["rules"].to_string();
    assert!(rules.contains("federatedlimitranges"), "{rules}");
    f.run(&["disable", "limitranges"]).ok();
    let rules = get(env, "host", &role_path).unwrap()["rules"].to_string();
    assert!(!rules.contains("federatedlimitranges"), "{rules}");

    // Fewer shards: the CronJobs of shards that no longer exist go (one
    // Indexed CronJob stays one, with fewer completions).
    let fewer = install("2").ok();
    let crons = get(
        env,
        "host",
        &format!("/apis/{batch}/namespaces/{}/cronjobs", f.fedns),
    )
    .unwrap();
    let mut names: Vec<&str> = crons["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap())
        .collect();
    names.sort();
    if indexed {
        assert_eq!(names, ["kubefedctl-reconcile"]);
        assert_eq!(
            crons["items"][0]["spec"]["jobTemplate"]["spec"]["completions"],
            2
        );
    } else {
        assert!(
            fewer
                .stdout
                .contains("cronjob.batch/kubefedctl-reconcile-2-of-3 deleted"),
            "{}",
            fewer.stdout
        );
        assert_eq!(
            names,
            ["kubefedctl-reconcile-0-of-2", "kubefedctl-reconcile-1-of-2"]
        );
    }

    // The controller instead: a Deployment whose rules allow watching; the
    // CronJobs go. Enabling a type keeps the watch verbs.
    let switched = f
        .run(&["init", "--reconciler", "deployment", "--image", IMAGE])
        .ok();
    let first_cron = if indexed {
        "kubefedctl-reconcile"
    } else {
        "kubefedctl-reconcile-0-of-2"
    };
    assert!(
        switched
            .stdout
            .contains(&format!("cronjob.batch/{first_cron} deleted")),
        "{}",
        switched.stdout
    );
    let deployment = get(
        env,
        "host",
        &format!(
            "/apis/apps/v1/namespaces/{}/deployments/kubefedctl-reconcile",
            f.fedns
        ),
    )
    .unwrap();
    assert_eq!(deployment["spec"]["replicas"], 2);
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(
        args.contains("--watch") && args.contains("--leader-elect"),
        "{args}"
    );
    f.run(&["enable", "limitranges", "--federated-group", f.group])
        .ok();
    let rules = get(env, "host", &role_path).unwrap()["rules"].to_string();
    assert!(
        rules.contains(r#""resources":["federatedconfigmaps","federatedlimitranges","federatednamespaces"],"verbs":["get","list","watch","patch","update"]"#),
        "{rules}"
    );
    // Sharded: a StatefulSet of two watches per shard, its headless Service
    // and a PodDisruptionBudget (policy/v1beta1 on 1.20); the Deployment
    // goes. Again: nothing to write.
    let install_sharded = || {
        f.run(&[
            "init",
            "--reconciler",
            "deployment",
            "--image",
            IMAGE,
            "--shards",
            "2",
        ])
        .ok()
    };
    let sharded = install_sharded();
    assert!(
        sharded
            .stdout
            .contains("deployment.apps/kubefedctl-reconcile deleted"),
        "{}",
        sharded.stdout
    );
    let ns_path = |api: &str, plural: &str| {
        format!("{api}/namespaces/{}/{plural}/kubefedctl-reconcile", f.fedns)
    };
    let set = get(env, "host", &ns_path("/apis/apps/v1", "statefulsets")).unwrap();
    assert_eq!(set["spec"]["replicas"], 4);
    assert_eq!(set["spec"]["serviceName"], "kubefedctl-reconcile");
    let args = set["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(args.contains(r#""--shard-from-hostname","2""#), "{args}");
    let service = get(env, "host", &ns_path("/api/v1", "services")).unwrap();
    assert_eq!(service["spec"]["clusterIP"], "None");
    let policy = if env.version().minor >= 21 {
        "/apis/policy/v1"
    } else {
        "/apis/policy/v1beta1"
    };
    let pdb = get(env, "host", &ns_path(policy, "poddisruptionbudgets")).unwrap();
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    f.reset();
    install_sharded();
    assert_eq!(f.host.writes(), 0, "{:?}", f.host.records());

    // A one-off Job (the sharded watch's objects go), and a bad schedule
    // refused before anything is written.
    f.run(&["init", "--reconciler", "job", "--image", IMAGE])
        .ok();
    for (api, plural) in [
        ("/apis/apps/v1", "statefulsets"),
        ("/api/v1", "services"),
        (policy, "poddisruptionbudgets"),
    ] {
        assert!(
            get(env, "host", &ns_path(api, plural)).is_none(),
            "{plural}"
        );
    }
    let job = get(
        env,
        "host",
        &format!(
            "/apis/batch/v1/namespaces/{}/jobs/kubefedctl-reconcile",
            f.fedns
        ),
    )
    .unwrap();
    assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
    f.reset();
    let bad = f.run(&[
        "init",
        "--reconciler",
        "cronjob",
        "--image",
        IMAGE,
        "--schedule",
        "often",
    ]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("five cron fields"), "{}", bad.stderr);
    assert!(f.host.records().is_empty());
}

#[test]
fn the_reconcilers_own_token_suffices_inside_a_pod_and_grants_nothing_else() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "ic-r", &["configmaps", "deployments.apps"]);
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    f.run(&["init", "--reconciler", "job", "--image", IMAGE])
        .ok();
    let token = reconciler_token(env, f.fedns);
    let pod = pod_mount(env, "ic-r", &token, f.fedns);
    let in_pod = |extra: &[&str]| {
        let mut args = vec!["reconcile", "-n", f.ns, "--kubefed-namespace", f.fedns];
        args.extend_from_slice(extra);
        kubefedctl_in_pod(&pod, &f.host.url(), &args)
    };

    for name in ["plain", "deleted", "orphaned"] {
        f.create(
            env,
            "FederatedConfigMap",
            name,
            json!({"template": {"data": {"n": name}}, "placement": {"clusterSelector": {}}}),
        );
    }
    f.create_deployment(env, "web");
    f.create_rsp(env, "web", 4, &[(m1.as_str(), 1), (m2.as_str(), 1)]);
    // A managed copy whose federated object is gone: reconcile unlabels it.
    namespace(env, "member1", f.ns);
    post(
        env,
        "member1",
        &format!("/api/v1/namespaces/{}/configmaps", f.ns),
        json!({"metadata": {"name": "leftover", "labels": {"kubefed.io/managed": "true"}}}),
    );

    let run = in_pod(&["-o", "json"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    for c in ["member1", "member2"] {
        for name in ["plain", "deleted", "orphaned"] {
            assert_eq!(cm(env, c, f.ns, name).unwrap()["data"]["n"], name);
        }
        assert_eq!(f.replicas(env, c, "web"), 2, "{c}: the RSP's share");
    }
    assert!(
        labels(&cm(env, "member1", f.ns, "leftover").unwrap())
            .get("kubefed.io/managed")
            .is_none()
    );
    let status = f.fed(env, "federatedconfigmaps", "plain").unwrap()["status"].clone();
    assert_eq!(status["conditions"][0]["type"], "Propagation", "{status}");

    // A deletion and an orphaning deletion, again from inside the pod.
    patch(
        env,
        "host",
        &format!(
            "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/orphaned",
            f.group, f.ns
        ),
        json!({"metadata": {"annotations": {"kubefed.io/orphan": "true"}}}),
    );
    for name in ["deleted", "orphaned"] {
        let path = format!(
            "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/{name}",
            f.group, f.ns
        );
        assert_eq!(
            env.request("host", "DELETE", &path, None).unwrap().status,
            200
        );
    }
    let run = in_pod(&[]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    for c in ["member1", "member2"] {
        assert!(gone(
            env,
            c,
            &format!("/api/v1/namespaces/{}/configmaps/deleted", f.ns)
        ));
        let kept = cm(env, c, f.ns, "orphaned").expect("orphaned copies stay");
        assert!(labels(&kept).get("kubefed.io/managed").is_none());
    }
    assert!(f.fed(env, "federatedconfigmaps", "deleted").is_none());
    assert!(f.fed(env, "federatedconfigmaps", "orphaned").is_none());

    // Converged: a further run writes nothing but its lock.
    f.reset();
    in_pod(&[]).ok();
    assert_eq!(f.member_writes(), 0, "{:?}", f.m1.records());
    let host_writes: Vec<String> = f
        .host
        .records()
        .iter()
        .filter(|r| r.method != "GET" && r.resource != "leases")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(host_writes.is_empty(), "{host_writes:?}");

    // And nothing beyond: other namespaces' Secrets, unrelated writes,
    // listing Secrets even in the federation namespace.
    let refused = [
        (
            "GET",
            "/api/v1/namespaces/kube-system/secrets".to_string(),
            None,
        ),
        (
            "GET",
            format!("/api/v1/namespaces/{}/secrets", f.fedns),
            None,
        ),
        (
            "POST",
            format!("/api/v1/namespaces/{}/configmaps", f.ns),
            Some(json!({"metadata": {"name": "intruder"}})),
        ),
        (
            "POST",
            "/api/v1/namespaces".to_string(),
            Some(json!({"metadata": {"name": "ic-r-intruder"}})),
        ),
        (
            "DELETE",
            format!(
                "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/plain",
                f.group, f.ns
            ),
            None,
        ),
    ];
    for (method, path, body) in refused {
        assert_eq!(
            as_token(env, &token, method, &path, body),
            403,
            "{method} {path}"
        );
    }
}

#[test]
fn shards_started_together_reach_one_runs_state_without_sharing_an_object() {
    // Its own clusters: every namespace of the federation is reconciled (-A),
    // which would unlabel other tests' managed member objects.
    let env = &TestEnv::start(&["host", "member1", "member2"]).unwrap();
    let f = Federation::named(env, "ic-s", "ics.kubefed.io", "ic-s-0", &["configmaps"]);
    let namespaces: Vec<String> = (0..12).map(|i| format!("ic-s-{i}")).collect();
    for ns in &namespaces {
        namespace(env, "host", ns);
        let base = format!("/apis/{}/v1beta1/namespaces/{ns}", f.group);
        if ns != f.ns {
            post(
                env,
                "host",
                &format!("{base}/federatednamespaces"),
                json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": "FederatedNamespace",
                       "metadata": {"name": ns, "namespace": ns},
                       "spec": {"placement": {"clusterSelector": {}}}}),
            );
        }
        for name in ["a", "b"] {
            post(
                env,
                "host",
                &format!("{base}/federatedconfigmaps"),
                json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": "FederatedConfigMap",
                       "metadata": {"name": name, "namespace": ns},
                       "spec": {"template": {"data": {"ns": ns}}, "placement": {"clusterSelector": {}}}}),
            );
        }
    }
    f.reset();
    let shards: Vec<std::process::Child> = (0..3)
        .map(|i| {
            std::process::Command::new(crate::fixtures::KUBEFEDCTL)
                .arg("--kubeconfig")
                .arg(&f.kc)
                .args([
                    "reconcile",
                    "-A",
                    "--kubefed-namespace",
                    f.fedns,
                    "-o",
                    "json",
                ])
                .args(["--shard", &format!("{i}/3")])
                .env_remove("KUBECONFIG")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, child) in shards.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "shard {i}/3: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["shard"], format!("{i}/3"));
    }
    // Every object in every member, as one run would leave it.
    for c in ["member1", "member2"] {
        for ns in &namespaces {
            for name in ["a", "b"] {
                let obj = cm(env, c, ns, name).unwrap_or_else(|| panic!("{c} {ns}/{name}"));
                assert_eq!(obj["data"]["ns"], ns.as_str());
            }
        }
    }
    // No member object written by two shards: each was created exactly once
    // (a second writer would have met a 409 and updated it).
    for (member, proxy) in [("member1", &f.m1), ("member2", &f.m2)] {
        let mut creates: BTreeMap<(String, String), usize> = BTreeMap::new();
        for r in proxy.records().iter().filter(|r| r.method != "GET") {
            assert_eq!(
                (r.method.as_str(), r.status),
                ("POST", 201),
                "{member}: only creates, none refused: {r:?}"
            );
            *creates
                .entry((r.resource.clone(), r.namespace.clone()))
                .or_default() += 1;
        }
        for ns in &namespaces {
            let key = ("configmaps".to_string(), ns.clone());
            assert_eq!(creates.get(&key), Some(&2), "{member} {ns}");
        }
        let namespaces_created = creates.get(&("namespaces".to_string(), String::new()));
        assert_eq!(namespaces_created, Some(&12), "{member}");
    }
    // Each shard took and released a lock of its own.
    for i in 0..3 {
        let name = format!("kubefedctl-reconcile-{i}-of-3");
        let lease = get(
            env,
            "host",
            &format!(
                "/apis/coordination.k8s.io/v1/namespaces/{}/leases/{name}",
                f.fedns
            ),
        )
        .unwrap();
        assert!(lease["spec"]["holderIdentity"].is_null(), "{name}: {lease}");
    }

    // A second round writes nothing to the members.
    f.reset();
    for i in 0..3 {
        f.run(&["reconcile", "-A", "--shard", &format!("{i}/3")])
            .ok();
    }
    assert_eq!(f.member_writes(), 0, "{:?}", f.m1.records());

    // In a StatefulSet's pod: the shard is the ordinal of its name, modulo N.
    let as_pod = |pod: &str| -> crate::fixtures::Run {
        std::process::Command::new(crate::fixtures::KUBEFEDCTL)
            .arg("--kubeconfig")
            .arg(&f.kc)
            .args(["reconcile", "-A", "--kubefed-namespace", f.fedns])
            .args(["--shard-from-hostname", "3", "--dry-run", "-o", "json"])
            .env_remove("KUBECONFIG")
            .env("POD_NAME", pod)
            .output()
            .unwrap()
            .into()
    };
    let run = as_pod("kubefedctl-reconcile-4").ok();
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["shard"], "1/3", "{}", run.stdout);
    let bad = as_pod("reconciler");
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr
            .contains("\"reconciler\" does not end in -ORDINAL"),
        "{}",
        bad.stderr
    );
}
