//! What KubeFed's users asked for most and never got (kubefed#581, #1462):
//! overrides chosen by cluster label, one-shot, planned and under the
//! watch, with the named cluster's entry winning; values naming the member
//! (`${MEMBER_NAME}`, `${MEMBER_LABEL:key}`, issue 67).

use crate::fixtures::*;
use crate::watch::{log, sigterm, spawn_watch};
use serde_json::{Value, json};
use testenv::TestEnv;

fn relabel(env: &TestEnv, f: &Federation, cluster: &str, region: &str) {
    patch(
        env,
        "host",
        &format!(
            "/apis/core.kubefed.io/v1beta1/namespaces/{}/kubefedclusters/{cluster}",
            f.fedns
        ),
        json!({"metadata": {"labels": {"region": region}}}),
    );
}

fn data(env: &TestEnv, cluster: &str, ns: &str) -> Value {
    get(
        env,
        cluster,
        &format!("/api/v1/namespaces/{ns}/configmaps/cfg"),
    )
    .map_or(Value::Null, |cm| cm["data"].clone())
}

#[test]
fn overrides_chosen_by_region_follow_the_members_labels() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "ov-a", &["configmaps"]);
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    relabel(env, &f, &m1, "eu");
    relabel(env, &f, &m2, "us");
    f.create(
        env,
        "FederatedConfigMap",
        "cfg",
        json!({"template": {"data": {"color": "plain"}},
               "placement": {"clusterSelector": {}},
               "overrides": [
                   {"clusterSelector": {"matchLabels": {"region": "eu"}}, "clusterOverrides": [
                       {"path": "/data/color", "value": "blue"}, {"path": "/data/size", "value": "large"}]},
                   {"clusterName": m1, "clusterOverrides": [{"path": "/data/size", "value": "small"}]}]}),
    );
    let plan = f.reconcile(&["--dry-run"]).ok();
    assert!(plan.stdout.contains(&m1), "{}", plan.stdout);
    f.reconcile(&[]).ok();
    assert_eq!(
        data(env, "member1", f.ns),
        json!({"color": "blue", "size": "small"}),
        "the selector's entry, then the named one, which wins"
    );
    assert_eq!(data(env, "member2", f.ns), json!({"color": "plain"}));

    // Nothing changed: nothing is written.
    f.reset();
    f.reconcile(&[]).ok();
    assert_eq!(f.member_writes(), 0, "{:?}", f.writes());

    // A member's labels change: the next run gives it what its labels choose.
    relabel(env, &f, &m2, "eu");
    f.reconcile(&[]).ok();
    assert_eq!(
        data(env, "member2", f.ns),
        json!({"color": "blue", "size": "large"})
    );
    relabel(env, &f, &m1, "us");
    f.reconcile(&[]).ok();
    assert_eq!(
        data(env, "member1", f.ns),
        json!({"color": "plain", "size": "small"})
    );
    f.reset();
    f.reconcile(&[]).ok();
    assert_eq!(f.member_writes(), 0, "{:?}", f.writes());

    // A member joined later with the label gets the override on its first run.
    f.run(&["join", &f.cluster("m3"), "--cluster-context", "host"])
        .ok();
    relabel(env, &f, &f.cluster("m3"), "eu");
    f.reconcile(&[]).ok();
    assert_eq!(
        data(env, "host", f.ns)["size"],
        "large",
        "{}",
        data(env, "host", f.ns)
    );
    f.run(&[
        "unjoin",
        &f.cluster("m3"),
        "--cluster-context",
        "host",
        "--yes",
    ])
    .ok();

    // Under the watch: a member relabelled before it starts, then one
    // relabelled while it runs, get what their labels choose.
    relabel(env, &f, &m2, "us");
    let log_path = env.dir().join("ov-a-watch.log");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &["-v", "2"]);
    until(&log_path, "member2 to lose the EU override", || {
        data(env, "member2", f.ns) == json!({"color": "plain"})
    });
    relabel(env, &f, &m1, "eu");
    until(&log_path, "member1 to get it", || {
        data(env, "member1", f.ns) == json!({"color": "blue", "size": "small"})
    });
    sigterm(&watch);
    let status = watch.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log(&log_path));
}

/// Writes of member copies of the ConfigMap `name` since the last reset.
fn copy_writes(f: &Federation, name: &str) -> Vec<String> {
    f.writes()
        .iter()
        .filter(|r| r.resource == "configmaps" && r.path.ends_with(&format!("/{name}")))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

/// Per-member values (issue 67): `${MEMBER_LABEL:region}` and
/// `${MEMBER_NAME}` in override values are expanded for each member, live
/// and offline; a relabelled member is rewritten (the PropagatedVersion
/// cannot tell); a placed member without the label fails the object (exit
/// 3, one line naming object, override and member) and nothing of it is
/// written to any member, while other objects go on.
#[test]
fn member_values_are_expanded_per_member_and_a_missing_label_fails_the_object() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "ov-c", &["configmaps"]);
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    relabel(env, &f, &m1, "eu");
    relabel(env, &f, &m2, "us");
    let spec = json!({"template": {"data": {"color": "plain"}},
        "placement": {"clusterSelector": {}},
        "overrides": [{"clusterSelector": {}, "clusterOverrides": [
            {"path": "/data/region", "value": "${MEMBER_LABEL:region}"},
            {"path": "/data/dns", "value": "db.${MEMBER_NAME}.${MEMBER_LABEL:region}.example"},
            {"path": "/data/literal", "value": "$${MEMBER_NAME} ${HOME}"}]}]});
    f.create(env, "FederatedConfigMap", "cfg", spec.clone());
    f.create(
        env,
        "FederatedConfigMap",
        "other",
        json!({"template": {"data": {"a": "1"}}, "placement": {"clusterSelector": {}}}),
    );
    f.reconcile(&[]).ok();
    let want = |member: &str, region: &str| {
        json!({"color": "plain", "region": region,
               "dns": format!("db.{member}.{region}.example"),
               "literal": "${MEMBER_NAME} ${HOME}"})
    };
    assert_eq!(data(env, "member1", f.ns), want(&m1, "eu"));
    assert_eq!(data(env, "member2", f.ns), want(&m2, "us"));
    f.reset();
    f.reconcile(&[]).ok();
    assert_eq!(f.member_writes(), 0, "{:?}", f.writes());

    // A relabelled member gets its new value on the next run, alone.
    relabel(env, &f, &m2, "ap");
    f.reset();
    f.reconcile(&[]).ok();
    assert_eq!(data(env, "member2", f.ns), want(&m2, "ap"));
    assert_eq!(
        copy_writes(&f, "cfg").len(),
        1,
        "{:?}",
        copy_writes(&f, "cfg")
    );
    assert_eq!(f.m1.writes(), 0);

    // m2 loses the label; both templates change. Nothing of `cfg` is
    // written anywhere (m1 could be, alone); `other` goes on.
    patch(
        env,
        "host",
        &format!(
            "/apis/core.kubefed.io/v1beta1/namespaces/{}/kubefedclusters/{m2}",
            f.fedns
        ),
        json!({"metadata": {"labels": {"region": null}}}),
    );
    for name in ["cfg", "other"] {
        patch(
            env,
            "host",
            &format!(
                "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/{name}",
                f.group, f.ns
            ),
            json!({"spec": {"template": {"data": {"color": "red", "a": "2"}}}}),
        );
    }
    let plan = f.reconcile(&["--dry-run"]).exits(3);
    assert!(
        !plan.stdout.contains("update ConfigMap ov-c-objs/cfg"),
        "{}",
        plan.stdout
    );
    f.reset();
    let run = f.reconcile(&[]).exits(3);
    for want in [
        "FederatedConfigMap \"ov-c-objs/cfg\"",
        "\"/data/region\"",
        &format!("member \"{m2}\""),
        "no label \"region\"",
    ] {
        assert!(run.stderr.contains(want), "{want}: {}", run.stderr);
    }
    assert_eq!(copy_writes(&f, "cfg"), Vec::<String>::new());
    assert_eq!(copy_writes(&f, "other").len(), 2, "{:?}", f.writes());
    assert_eq!(data(env, "member1", f.ns)["color"], "plain");
    let status = f.fed(env, "federatedconfigmaps", "cfg").unwrap()["status"].clone();
    let clusters = status["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 2, "{status}");
    assert!(
        clusters
            .iter()
            .all(|c| c["status"] == "ApplyOverridesFailed"),
        "{status}"
    );

    // Offline, the same: per member, and an error that writes nothing.
    let input = env.dir().join("ov-c-render.yaml");
    let fed = json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedConfigMap",
        "metadata": {"name": "cfg", "namespace": "shop"}, "spec": spec});
    std::fs::write(&input, fed.to_string()).unwrap();
    let input = input.to_str().unwrap();
    let rendered = f
        .run(&[
            "reconcile",
            "--from",
            input,
            "--cluster",
            "eu1:region=eu",
            "--cluster",
            "us1:region=us",
            "-o",
            "json",
        ])
        .ok();
    let rendered: Value = serde_json::from_str(&rendered.stdout).unwrap();
    assert_eq!(rendered["eu1"][0]["data"]["dns"], "db.eu1.eu.example");
    assert_eq!(rendered["us1"][0]["data"]["region"], "us");
    let refused = f
        .run(&[
            "reconcile",
            "--from",
            input,
            "--cluster",
            "eu1:region=eu",
            "--cluster",
            "bare",
        ])
        .fails();
    assert!(refused.stdout.is_empty(), "{}", refused.stdout);
    assert!(
        refused.stderr.contains("member \"bare\"") && refused.stderr.contains("\"/data/region\""),
        "{}",
        refused.stderr
    );

    // The label back: the object converges.
    relabel(env, &f, &m2, "us");
    f.reconcile(&[]).ok();
    assert_eq!(data(env, "member2", f.ns)["region"], "us");
    assert_eq!(data(env, "member1", f.ns)["color"], "red");

    // Under the watch: a member relabelled while it runs gets its value.
    let log_path = env.dir().join("ov-c-watch.log");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &[]);
    wait_until("the watch runs", || {
        log(&log_path).contains("watching the federation")
    });
    relabel(env, &f, &m1, "sa");
    until(&log_path, "member1 to get its new region", || {
        data(env, "member1", f.ns)["dns"] == format!("db.{m1}.sa.example")
    });
    sigterm(&watch);
    let status = watch.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log(&log_path));
}

/// [`wait_until`], failing with the watch's log.
fn until(log_path: &std::path::Path, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            log(log_path)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A federated object of this federation's group, created as is (its
/// `metadata` may carry annotations; cluster-scoped when `ns` is `None`).
fn create_fed(env: &TestEnv, f: &Federation, plural: &str, ns: Option<&str>, body: Value) {
    let path = match ns {
        Some(ns) => format!("/apis/{}/v1beta1/namespaces/{ns}/{plural}", f.group),
        None => format!("/apis/{}/v1beta1/{plural}", f.group),
    };
    let mut body = body;
    body["apiVersion"] = json!(format!("{}/v1beta1", f.group));
    let (status, answer) = request(env, "host", "POST", &path, Some(body));
    assert_eq!(status, 201, "{answer}");
}

fn deployment(
    env: &TestEnv,
    f: &Federation,
    name: &str,
    annotations: Value,
    replicas: Option<i64>,
) {
    let mut template = json!({"metadata": {"labels": {"app": name}}, "spec": {
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}},
                     "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
    if let Some(r) = replicas {
        template["spec"]["replicas"] = json!(r);
    }
    create_fed(
        env,
        f,
        "federateddeployments",
        Some(f.ns),
        json!({"kind": "FederatedDeployment",
               "metadata": {"name": name, "namespace": f.ns, "annotations": annotations},
               "spec": {"template": template, "placement": {"clusterSelector": {}}}}),
    );
}

/// As an HPA scales: through the `scale` subresource, as its own manager.
fn scale(env: &TestEnv, cluster: &str, ns: &str, name: &str, replicas: i64) {
    patch(
        env,
        cluster,
        &format!("/apis/apps/v1/namespaces/{ns}/deployments/{name}/scale?fieldManager=hpa"),
        json!({"spec": {"replicas": replicas}}),
    );
}

fn replicas(env: &TestEnv, cluster: &str, ns: &str, name: &str) -> Value {
    get(
        env,
        cluster,
        &format!("/apis/apps/v1/namespaces/{ns}/deployments/{name}"),
    )
    .map_or(Value::Null, |d| d["spec"]["replicas"].clone())
}

/// A template change, so that the next run updates every member copy.
fn touch(env: &TestEnv, f: &Federation, plural: &str, ns: Option<&str>, name: &str, value: &str) {
    let path = match ns {
        Some(ns) => format!("/apis/{}/v1beta1/namespaces/{ns}/{plural}/{name}", f.group),
        None => format!("/apis/{}/v1beta1/{plural}/{name}", f.group),
    };
    patch(
        env,
        "host",
        &path,
        json!({"spec": {"template": {"metadata": {"labels": {"rev": value}}}}}),
    );
}

const HOOK: &str =
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/ov-b-hook";

/// Member fields that other controllers own are kept when a type or an
/// object opts in (kubefed#1510's injected caBundle, #1354's HPA replicas),
/// with no write loop; a field the template sets too is a conflict that
/// `--force-conflicts` decides; without the opt-in KubeFed's revert stays.
#[test]
fn fields_other_managers_own_are_kept_when_asked_and_conflicts_are_reported() {
    let env = TestEnv::shared();
    let hooks = "validatingwebhookconfigurations.admissionregistration.k8s.io";
    let f = Federation::new(env, "ov-b", &["deployments.apps", hooks]);
    // The type opts in for every Deployment; "plain" opts out.
    patch(
        env,
        "host",
        &format!(
            "/apis/core.kubefed.io/v1beta1/namespaces/{}/federatedtypeconfigs/deployments.apps",
            f.fedns
        ),
        json!({"metadata": {"annotations": {"kubefedctl.kubefed.io/retain-foreign-fields": "true"}}}),
    );
    // Before 1.22 a write through the scale subresource is recorded in no
    // managedFields entry: there the HPA's field is listed by path.
    let tracked = env.cluster("member1").version.minor >= 22;
    let web = match tracked {
        true => json!({}),
        false => json!({"kubefedctl.kubefed.io/retain-fields": "spec.replicas"}),
    };
    deployment(env, &f, "web", web, None);
    deployment(env, &f, "fixed", json!({}), Some(2));
    deployment(
        env,
        &f,
        "plain",
        json!({"kubefedctl.kubefed.io/retain-foreign-fields": "false"}),
        None,
    );
    // One webhook configuration opts in by itself.
    let webhook = json!({"name": "w.example.com", "clientConfig": {"url": "https://127.0.0.1:1/x"},
        "rules": [{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["nothings"]}],
        "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Ignore"});
    create_fed(
        env,
        &f,
        "federatedvalidatingwebhookconfigurations",
        None,
        json!({"kind": "FederatedValidatingWebhookConfiguration",
               "metadata": {"name": "ov-b-hook", "annotations": {"kubefedctl.kubefed.io/retain-foreign-fields": "true"}},
               "spec": {"template": {"webhooks": [webhook]}, "placement": {"clusterSelector": {}}}}),
    );
    f.reconcile(&[]).ok();

    // Other managers write into member1: an HPA scales, cert-manager's
    // cainjector injects the CA.
    for name in ["web", "fixed", "plain"] {
        scale(env, "member1", f.ns, name, 4);
    }
    let mut hook = get(env, "member1", HOOK).unwrap();
    hook["webhooks"][0]["clientConfig"]["caBundle"] = json!(b64_encode(env.ca_pem()));
    let (status, answer) = request(
        env,
        "member1",
        "PUT",
        &format!("{HOOK}?fieldManager=cainjector"),
        Some(hook),
    );
    assert_eq!(status, 200, "{answer}");

    // The templates change: every copy is updated.
    for name in ["web", "fixed", "plain"] {
        touch(env, &f, "federateddeployments", Some(f.ns), name, "2");
    }
    touch(
        env,
        &f,
        "federatedvalidatingwebhookconfigurations",
        None,
        "ov-b-hook",
        "2",
    );
    let run = f.reconcile(&[]).ok();
    assert_eq!(
        replicas(env, "member1", f.ns, "web"),
        4,
        "the HPA's replicas stay"
    );
    assert_eq!(
        replicas(env, "member1", f.ns, "plain"),
        1,
        "opted out: KubeFed's revert"
    );
    let hook = get(env, "member1", HOOK).unwrap();
    assert_eq!(
        hook["webhooks"][0]["clientConfig"]["caBundle"],
        b64_encode(env.ca_pem())
    );
    assert_eq!(
        hook["metadata"]["labels"]["rev"], "2",
        "the template's change is there"
    );
    if tracked {
        assert_eq!(
            replicas(env, "member1", f.ns, "fixed"),
            4,
            "a conflict keeps theirs"
        );
        assert!(
            run.stderr
                .contains("conflict: kept the member's value of spec.replicas (owned by hpa)"),
            "{}",
            run.stderr
        );
    } else {
        assert_eq!(
            replicas(env, "member1", f.ns, "fixed"),
            2,
            "no owner recorded"
        );
    }

    // No fight: nothing is written when nothing changed.
    f.reset();
    f.reconcile(&[]).ok();
    assert_eq!(f.member_writes(), 0, "{:?}", f.writes());

    // --force-conflicts writes the template's value over theirs.
    touch(env, &f, "federateddeployments", Some(f.ns), "fixed", "3");
    f.reconcile(&["--force-conflicts"]).ok();
    assert_eq!(replicas(env, "member1", f.ns, "fixed"), 2);

    // Under the watch: an HPA scaling in member2 is not reverted, and the
    // watch does not write in a loop.
    let log_path = env.dir().join("ov-b-watch.log");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &[]);
    wait_until("the watch runs", || {
        log(&log_path).contains("watching the federation")
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    scale(env, "member2", f.ns, "web", 3);
    std::thread::sleep(std::time::Duration::from_secs(3));
    f.reset();
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(
        replicas(env, "member2", f.ns, "web"),
        3,
        "{}",
        log(&log_path)
    );
    assert_eq!(f.member_writes(), 0, "no loop: {:?}", f.writes());
    sigterm(&watch);
    let status = watch.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log(&log_path));
}
