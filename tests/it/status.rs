//! status through the built binary: tables (golden, colours off), JSON
//! shape, a cluster that is down, per-object propagation.

use crate::fixtures::{assert_golden, create, kubefedctl, write_kubeconfig};
use serde_json::{Value, json};
use testenv::{Faults, Mode, TestEnv};

#[test]
fn overview_tables_json_and_a_cluster_that_is_down() {
    let env = TestEnv::shared();
    let down = env.proxy("member2").unwrap();
    let kc = write_kubeconfig(
        env,
        "status",
        env.kubeconfig()
            .current_context("host")
            .server("member2", &down.url()),
    );
    let ns = ["--kubefed-namespace", "status-a"];
    let with = |args: &[&'static str]| -> Vec<&'static str> { [args, &ns[..]].concat() };
    kubefedctl(&kc, &with(&["init"])).ok();
    kubefedctl(&kc, &with(&["join", "member1"])).ok();
    kubefedctl(&kc, &with(&["join", "member2"])).ok();
    // Types of its own group: the object counts are this test's alone.
    kubefedctl(
        &kc,
        &with(&[
            "enable",
            "configmaps",
            "--federated-group",
            "status.kubefed.io",
        ]),
    )
    .ok();
    kubefedctl(
        &kc,
        &with(&[
            "enable",
            "deployments.apps",
            "--federated-group",
            "status.kubefed.io",
        ]),
    )
    .ok();
    down.set_faults(Faults {
        mode: Mode::Refuse,
        ..Faults::default()
    });

    let run = kubefedctl(&kc, &with(&["status", "--probe", "--probe-timeout", "2s"])).ok();
    assert!(
        !run.stdout.contains('\u{1b}'),
        "no colours without a terminal"
    );
    assert_golden("status-overview.txt", &run.stdout);

    let json_run = kubefedctl(
        &kc,
        &with(&["status", "--probe", "--probe-timeout", "2s", "-o", "json"]),
    )
    .ok();
    let doc: Value = serde_json::from_str(&json_run.stdout).unwrap();
    assert_eq!(
        doc["host"],
        json!({"context": "host", "namespace": "status-a"})
    );
    let clusters = doc["clusters"].as_array().unwrap();
    assert_eq!(clusters[0]["name"], "member1");
    assert_eq!(clusters[0]["ready"], "True");
    assert_eq!(
        clusters[0]["kubernetesVersion"],
        env.cluster("member1").version.tag
    );
    assert_eq!(clusters[1]["ready"], "Offline");
    assert!(
        clusters[1]["message"]
            .as_str()
            .unwrap()
            .starts_with("cluster is not reachable"),
        "{}",
        clusters[1]
    );
    assert_eq!(doc["types"][0]["name"], "configmaps");
    assert_eq!(doc["types"][0]["objects"], 0);

    let gate = kubefedctl(
        &kc,
        &with(&[
            "status",
            "clusters",
            "--probe",
            "--probe-timeout",
            "2s",
            "--exit-code",
        ]),
    );
    assert_eq!(gate.code, 5, "a cluster is down: {}", gate.stderr);
    down.clear_faults();
    let gate = kubefedctl(
        &kc,
        &with(&["status", "clusters", "--probe", "--exit-code"]),
    );
    assert_eq!(gate.code, 0, "{}", gate.stderr);

    // Printing into a reader that has gone away: quiet, exit 0.
    for args in [
        &["status"][..],
        &["status", "-o", "json"],
        &["status", "types", "-o", "name"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = std::process::Command::new(crate::fixtures::KUBEFEDCTL)
            .arg("--kubeconfig")
            .arg(&kc)
            .args(with(args))
            .env_remove("KUBECONFIG")
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("error"),
            "{args:?}: {err}"
        );
    }

    let names = kubefedctl(&kc, &with(&["status", "types", "-o", "name"])).ok();
    assert_eq!(
        names.stdout,
        "federatedtypeconfig.core.kubefed.io/configmaps\nfederatedtypeconfig.core.kubefed.io/deployments.apps\n"
    );
}

#[test]
fn objects_show_placement_and_per_cluster_propagation() {
    let env = TestEnv::shared();
    let kc = write_kubeconfig(env, "status-b", env.kubeconfig().current_context("host"));
    let ns = ["--kubefed-namespace", "status-b"];
    let with = |args: &[&'static str]| -> Vec<&'static str> { [args, &ns[..]].concat() };
    kubefedctl(&kc, &with(&["init"])).ok();
    kubefedctl(&kc, &with(&["enable", "configmaps"])).ok();
    assert_eq!(
        create(
            env,
            "host",
            "/api/v1/namespaces",
            json!({"metadata": {"name": "status-objs"}})
        )
        .0,
        201
    );
    let base = "/apis/types.kubefed.io/v1beta1/namespaces/status-objs/federatedconfigmaps";
    for (name, placement) in [
        (
            "a",
            json!({"clusters": [{"name": "member1"}, {"name": "member2"}]}),
        ),
        (
            "b",
            json!({"clusterSelector": {"matchLabels": {"region": "eu"}}}),
        ),
    ] {
        let body = json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedConfigMap", "metadata": {"name": name}, "spec": {"template": {"data": {"k": "v"}}, "placement": placement}});
        assert_eq!(
            env.request("host", "POST", base, Some(&body.to_string()))
                .unwrap()
                .status,
            201
        );
    }
    // The status a reconcile (or KubeFed) writes.
    let mut a = crate::fixtures::get(env, "host", &format!("{base}/a")).unwrap();
    a["status"] = json!({
        "observedGeneration": 1,
        "conditions": [{"type": "Propagation", "status": "False", "reason": "CheckClusters", "lastUpdateTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "clusters": [{"name": "member2", "status": "ClusterNotReady"}, {"name": "member1"}]
    });
    let r = env
        .request(
            "host",
            "PUT",
            &format!("{base}/a/status"),
            Some(&a.to_string()),
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);

    let run = kubefedctl(
        &kc,
        &with(&["status", "configmaps", "-n", "status-objs", "-o", "wide"]),
    )
    .ok();
    assert_golden("status-configmaps.txt", &run.stdout);
    let one = kubefedctl(
        &kc,
        &with(&[
            "status",
            "FederatedConfigMap",
            "a",
            "-n",
            "status-objs",
            "-o",
            "json",
        ]),
    )
    .ok();
    let rows: Value = serde_json::from_str(&one.stdout).unwrap();
    assert_eq!(
        rows[0]["clusters"],
        json!([{"name": "member1", "status": "OK"}, {"name": "member2", "status": "ClusterNotReady"}])
    );
    assert_eq!(rows[0]["propagation"], "False");
    let gate = kubefedctl(&kc, &with(&["status", "configmaps", "-A", "--exit-code"]));
    assert_eq!(gate.code, 5);
    let missing = kubefedctl(&kc, &with(&["status", "widgets"])).fails();
    assert!(
        missing.stderr.contains("no federated type \"widgets\""),
        "{}",
        missing.stderr
    );
}

#[test]
fn live_status_finds_drifted_and_missing_member_objects() {
    let env = TestEnv::shared();
    let kc = write_kubeconfig(env, "status-c", env.kubeconfig().current_context("host"));
    let fed = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--kubefed-namespace", "status-c"]);
        kubefedctl(&kc, &all)
    };
    fed(&["init"]).ok();
    fed(&["join", "sc-m1", "--cluster-context", "member1"]).ok();
    fed(&["join", "sc-m2", "--cluster-context", "member2"]).ok();
    for t in ["configmaps", "namespaces"] {
        fed(&["enable", t, "--federated-group", "sc.kubefed.io"]).ok();
    }
    let ns = "status-live";
    assert_eq!(
        create(
            env,
            "host",
            "/api/v1/namespaces",
            json!({"metadata": {"name": ns}})
        )
        .0,
        201
    );
    for (plural, kind, name, spec) in [
        (
            "federatednamespaces",
            "FederatedNamespace",
            ns,
            json!({"placement": {"clusterSelector": {}}}),
        ),
        (
            "federatedconfigmaps",
            "FederatedConfigMap",
            "watched",
            json!({"template": {"data": {"k": "v"}}, "placement": {"clusterSelector": {}}}),
        ),
    ] {
        let body = json!({"apiVersion": "sc.kubefed.io/v1beta1", "kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": spec});
        let r = env
            .request(
                "host",
                "POST",
                &format!("/apis/sc.kubefed.io/v1beta1/namespaces/{ns}/{plural}"),
                Some(&body.to_string()),
            )
            .unwrap();
        assert_eq!(r.status, 201, "{}", r.body);
    }
    fed(&["reconcile", "-n", ns]).ok();
    let live = |extra: &[&str]| {
        let mut args = vec!["status", "configmaps", "-n", ns, "--live"];
        args.extend_from_slice(extra);
        fed(&args)
    };
    let rows: Value = serde_json::from_str(&live(&["-o", "json"]).ok().stdout).unwrap();
    assert_eq!(
        rows[0]["clusters"],
        json!([{"name": "sc-m1", "status": "OK", "live": "in-sync"}, {"name": "sc-m2", "status": "OK", "live": "in-sync"}])
    );

    // Someone edits member1's copy and deletes member2's.
    let path = format!("/api/v1/namespaces/{ns}/configmaps/watched");
    assert_eq!(
        env.request(
            "member1",
            "PATCH",
            &path,
            Some(r#"{"data":{"k":"edited"}}"#)
        )
        .unwrap()
        .status,
        200
    );
    assert_eq!(
        env.request("member2", "DELETE", &path, None)
            .unwrap()
            .status,
        200
    );
    let table = live(&[]).ok();
    assert!(
        table.stdout.contains("sc-m1:drifted,sc-m2:missing"),
        "{}",
        table.stdout
    );
    assert_eq!(live(&["--exit-code"]).code, 5);

    // A reconcile repairs both.
    fed(&["reconcile", "-n", ns]).ok();
    assert!(
        live(&[])
            .ok()
            .stdout
            .contains("sc-m1:in-sync,sc-m2:in-sync")
    );
}

#[test]
fn live_status_agrees_with_a_dry_run_under_namespace_narrowing_and_an_rsp() {
    let env = TestEnv::shared();
    let f = crate::fixtures::Federation::new(env, "st-agree", &["configmaps", "deployments.apps"]);
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    // The namespace is placed on member1 only; its objects ask for both.
    f.patch_federated_namespace(
        env,
        json!({"spec": {"placement": {"clusterSelector": null, "clusters": [{"name": m1}]}}}),
    );
    f.create(
        env,
        "FederatedConfigMap",
        "both",
        json!({"template": {"data": {"k": "v"}},
               "placement": {"clusters": [{"name": m1}, {"name": m2}]}}),
    );
    f.create_deployment(env, "web");
    f.create_rsp(env, "web", 4, &[(&m1, 1), (&m2, 1)]);
    f.reconcile(&[]).ok();

    let live = |plural: &str, extra: &[&str]| {
        let mut args = vec!["status", plural, "-n", f.ns, "--live", "--exit-code"];
        args.extend_from_slice(extra);
        f.run(&args)
    };
    let agree = |plural: &str| {
        (
            live(plural, &[]),
            f.reconcile(&["--dry-run", "--exit-code"]),
        )
    };
    let (status, dry) = agree("configmaps");
    assert_eq!(dry.code, 0, "converged: {}{}", dry.stdout, dry.stderr);
    assert_eq!(
        status.code, 0,
        "nothing to do, so nothing is out of sync: {}{}",
        status.stdout, status.stderr
    );
    let rows: Value =
        serde_json::from_str(&live("configmaps", &["-o", "json"]).ok().stdout).unwrap();
    assert_eq!(
        rows[0]["clusters"],
        json!([{"name": m1, "status": "OK", "live": "in-sync"}]),
        "member2 holds no namespace for it: nothing is expected there"
    );
    let (status, dry) = agree("deployments");
    assert_eq!(
        (status.code, dry.code),
        (0, 0),
        "{}{}",
        status.stdout,
        dry.stdout
    );

    // Drift in member1: both see it, and name the same member.
    crate::fixtures::patch(
        env,
        "member1",
        &format!("/api/v1/namespaces/{}/configmaps/both", f.ns),
        json!({"data": {"k": "edited"}}),
    );
    let (status, dry) = agree("configmaps");
    assert_eq!(status.code, 5, "{}", status.stdout);
    assert!(
        status.stdout.contains(&format!("{m1}:drifted")),
        "{}",
        status.stdout
    );
    assert_eq!(dry.code, 4);
    assert!(
        dry.stdout
            .contains(&format!("{m1}: update ConfigMap {}/both", f.ns)),
        "{}",
        dry.stdout
    );
}

/// A member whose join token Kubernetes invalidated
/// (`LegacyServiceAccountTokenCleanUp`, 1.30+: the token Secret labelled
/// `kubernetes.io/legacy-token-invalid-since`, its token refused) is named
/// with the label's date and the command that gives it a new token, read
/// through the kubeconfig's own context for the member.
#[test]
fn a_member_whose_token_kubernetes_invalidated_is_named_with_the_fix() {
    let env = TestEnv::shared();
    let kc = write_kubeconfig(env, "status-lt", env.kubeconfig().current_context("host"));
    let fed = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--kubefed-namespace", "status-lt"]);
        kubefedctl(&kc, &all)
    };
    fed(&["init"]).ok();
    fed(&["join", "member1"]).ok();
    crate::fixtures::patch(
        env,
        "member1",
        "/api/v1/namespaces/status-lt/secrets/member1-host",
        json!({"metadata": {"labels": {"kubernetes.io/legacy-token-invalid-since": "2025-11-30"}}}),
    );
    let out = fed(&[
        "status",
        "clusters",
        "--probe",
        "--probe-timeout",
        "5s",
        "-o",
        "json",
    ]);
    let doc: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|_| panic!("{}{}", out.stdout, out.stderr));
    let row = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "member1")
        .cloned()
        .unwrap();
    let message = row["message"].as_str().unwrap_or("");
    if env.version().minor >= 30 {
        assert_eq!(row["ready"], "False", "{row}");
        assert!(
            message.contains("the member refused its credentials")
                && message.contains(
                    "token Secret status-lt/member1-host in member1 is labelled kubernetes.io/legacy-token-invalid-since=2025-11-30"
                )
                && message.contains("run kubefedctl join member1 --error-on-existing=false"),
            "{row}"
        );
    } else {
        // Before the clean-up, the label is only a label.
        assert_eq!(row["ready"], "True", "{row}");
        assert!(!message.contains("legacy-token-invalid-since"), "{row}");
    }
}
