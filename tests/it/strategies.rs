//! Apply strategies (issue #67): when an existing member object is taken
//! over (`kubefedctl.kubefed.io/take-over: Always | IfNoDiff | Never`),
//! report-only objects and runs (`kubefedctl.kubefed.io/apply: ReportDiff`,
//! `reconcile --report-only`) that write nothing to the members, and the
//! drift they report (`status TYPE --drift`, `--live -o json`, `-o junit`).

use crate::fixtures::*;
use serde_json::{Value, json};
use testenv::TestEnv;

const TAKE_OVER: &str = "kubefedctl.kubefed.io/take-over";
const APPLY: &str = "kubefedctl.kubefed.io/apply";

/// A federated object of `plural` with these annotations.
fn federate(
    env: &TestEnv,
    f: &Federation,
    kind: &str,
    name: &str,
    annotations: Value,
    spec: Value,
) {
    let plural = format!("{}s", kind.to_lowercase());
    let path = format!("/apis/{}/v1beta1/namespaces/{}/{plural}", f.group, f.ns);
    let body = json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": kind,
        "metadata": {"name": name, "namespace": f.ns, "annotations": annotations}, "spec": spec});
    let (status, answer) = create(env, "host", &path, body);
    assert_eq!(status, 201, "{answer}");
}

fn fed_path(f: &Federation, plural: &str, name: &str) -> String {
    format!(
        "/apis/{}/v1beta1/namespaces/{}/{plural}/{name}",
        f.group, f.ns
    )
}

/// A member's entry in the federated object's status.
fn member_status(env: &TestEnv, f: &Federation, plural: &str, name: &str, cluster: &str) -> String {
    let obj = get(env, "host", &fed_path(f, plural, name)).unwrap();
    (obj["status"]["clusters"].as_array().into_iter().flatten())
        .find(|c| c["name"] == cluster)
        .map(|c| c["status"].as_str().unwrap_or("").to_string())
        .unwrap_or_else(|| "(none)".into())
}

/// Writes to `path` of member1 since the last reset (the refused create's
/// POST goes to the collection and changes nothing).
fn writes_to(f: &Federation, path: &str) -> usize {
    f.m1.count(|r| r.method != "GET" && r.method != "POST" && r.path == path)
}

#[test]
fn if_no_diff_takes_over_an_equal_copy_refuses_a_different_one_and_never_leaves_all() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "st-take", &["configmaps"]);
    let m1 = f.cluster("m1");
    namespace(env, "member1", f.ns);
    let member_cm = |name: &str, v: &str| {
        post(
            env,
            "member1",
            &format!("/api/v1/namespaces/{}/configmaps", f.ns),
            json!({"metadata": {"name": name, "labels": {"team": "theirs"}}, "data": {"v": v}}),
        )
    };
    member_cm("equal", "ours");
    let different = member_cm("different", "theirs");
    let left = member_cm("left", "ours");
    // The type says Never; two objects say IfNoDiff, which wins.
    patch(
        env,
        "host",
        &format!(
            "/apis/core.kubefed.io/v1beta1/namespaces/{}/federatedtypeconfigs/configmaps",
            f.fedns
        ),
        json!({"metadata": {"annotations": {TAKE_OVER: "Never"}}}),
    );
    let spec =
        json!({"template": {"data": {"v": "ours"}}, "placement": {"clusters": [{"name": m1}]}});
    federate(
        env,
        &f,
        "FederatedConfigMap",
        "equal",
        json!({TAKE_OVER: "IfNoDiff"}),
        spec.clone(),
    );
    federate(
        env,
        &f,
        "FederatedConfigMap",
        "different",
        json!({TAKE_OVER: "IfNoDiff"}),
        spec.clone(),
    );
    federate(env, &f, "FederatedConfigMap", "left", json!({}), spec);

    // The plan says which are taken over and which refused, and why.
    f.reset();
    let dry = f.reconcile(&["--dry-run"]).exits(3);
    let objs = f.ns;
    assert!(
        dry.stdout
            .contains(&format!("{m1}: take over ConfigMap {objs}/equal")),
        "{}",
        dry.stdout
    );
    assert!(
        !dry.stdout.contains("different") && !dry.stdout.contains("/left"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stderr.contains("differs at /data/v") && dry.stderr.contains("IfNoDiff"),
        "{}",
        dry.stderr
    );
    assert!(
        dry.stderr.contains(&format!("ConfigMap {objs}/left"))
            && dry.stderr.contains("take-over: Never"),
        "{}",
        dry.stderr
    );
    assert_eq!(f.member_writes(), 0);

    let run = f.reconcile(&[]).exits(3);
    assert!(run.stderr.contains("differs at /data/v"), "{}", run.stderr);
    let equal = cm(env, "member1", objs, "equal").unwrap();
    assert_eq!(equal["metadata"]["labels"]["kubefed.io/managed"], "true");
    for (name, before) in [("different", &different), ("left", &left)] {
        let now = cm(env, "member1", objs, name).unwrap();
        assert_eq!(
            now["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
            "{name} untouched"
        );
        assert!(now["metadata"]["labels"]["kubefed.io/managed"].is_null());
        assert_eq!(
            writes_to(&f, &format!("/api/v1/namespaces/{objs}/configmaps/{name}")),
            0,
            "{name}"
        );
        assert_eq!(
            member_status(env, &f, "federatedconfigmaps", name, &m1),
            "AlreadyExists"
        );
    }
    assert_eq!(
        member_status(env, &f, "federatedconfigmaps", "equal", &m1),
        ""
    );

    // Made equal by hand, the refused copy is taken over by the next run.
    patch(
        env,
        "member1",
        &format!("/api/v1/namespaces/{objs}/configmaps/different"),
        json!({"data": {"v": "ours"}}),
    );
    f.reconcile(&[]).exits(3);
    let now = cm(env, "member1", objs, "different").unwrap();
    assert_eq!(now["metadata"]["labels"]["kubefed.io/managed"], "true");

    // An unknown value is an error naming the annotation and the object;
    // nothing of it is written.
    patch(
        env,
        "host",
        &fed_path(&f, "federatedconfigmaps", "left"),
        json!({"metadata": {"annotations": {TAKE_OVER: "Sometimes"}}}),
    );
    f.reset();
    let bad = f.reconcile(&[]).exits(3);
    assert!(bad.stderr.contains(&format!("FederatedConfigMap {objs}/left"))
        && bad.stderr.contains("annotation kubefedctl.kubefed.io/take-over: \"Sometimes\" is not Always, IfNoDiff or Never"),
        "{}", bad.stderr);
    assert_eq!(
        writes_to(&f, &format!("/api/v1/namespaces/{objs}/configmaps/left")),
        0
    );
}

/// The drift record of a federated object's PropagatedVersion (`null`
/// without one, or without the PropagatedVersion).
fn drift_record(env: &TestEnv, f: &Federation, name: &str) -> Value {
    let pv = get(
        env,
        "host",
        &format!(
            "/apis/core.kubefed.io/v1alpha1/namespaces/{}/propagatedversions/configmap-{name}",
            f.ns
        ),
    )
    .unwrap_or_default();
    let text = pv["metadata"]["annotations"]["kubefedctl.kubefed.io/drift"]
        .as_str()
        .unwrap_or("null");
    serde_json::from_str(text).unwrap()
}

#[test]
fn report_diff_writes_nothing_and_status_drift_names_each_path_with_both_values_since_when() {
    let env = TestEnv::shared();
    // The default federated group: a FederatedSecret of a second group
    // would make the kind ambiguous for tests that name it by kind (types.rs).
    let f = Federation::named(
        env,
        "st-report",
        "types.kubefed.io",
        "st-report-objs",
        &["configmaps", "secrets"],
    );
    let (m1, m2, objs) = (f.cluster("m1"), f.cluster("m2"), f.ns);
    let everywhere = json!({"clusterSelector": {}});
    federate(
        env,
        &f,
        "FederatedConfigMap",
        "web",
        json!({}),
        json!({"template": {"data": {"k": "v"}}, "placement": everywhere}),
    );
    federate(
        env,
        &f,
        "FederatedSecret",
        "token",
        json!({}),
        json!({"template": {"data": {"token": b64_encode("s3cr3t-old")}}, "placement": everywhere}),
    );
    f.reconcile(&[]).ok();
    let pv_path = format!(
        "/apis/core.kubefed.io/v1alpha1/namespaces/{objs}/propagatedversions/configmap-web"
    );
    let pv_before = get(env, "host", &pv_path).unwrap()["status"].clone();

    // Edited by hand in member1, then made report-only: nothing is written
    // back; the run says how it differs.
    patch(
        env,
        "member1",
        &format!("/api/v1/namespaces/{objs}/configmaps/web"),
        json!({"data": {"k": "by hand"}}),
    );
    patch(
        env,
        "member1",
        &format!("/api/v1/namespaces/{objs}/secrets/token"),
        json!({"data": {"token": b64_encode("s3cr3t-edited")}}),
    );
    // The apply annotation of both objects (`null` removes it).
    let apply_both = |value: Value| {
        for (plural, name) in [
            ("federatedconfigmaps", "web"),
            ("federatedsecrets", "token"),
        ] {
            patch(
                env,
                "host",
                &fed_path(&f, plural, name),
                json!({"metadata": {"annotations": {APPLY: value}}}),
            );
        }
    };
    apply_both(json!("ReportDiff"));
    f.reset();
    let run = f.reconcile(&[]).ok();
    assert_eq!(f.member_writes(), 0, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "drift: {m1}: ConfigMap {objs}/web: /data/k: member \"by hand\", desired \"v\""
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!(
            "drift: {m1}: Secret {objs}/token: /data/token (a Secret's value, hidden)"
        )),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains(&b64_encode("s3cr3t-edited"))
            && !run.stderr.contains(&b64_encode("s3cr3t-old"))
    );
    assert_eq!(
        member_status(env, &f, "federatedconfigmaps", "web", &m1),
        "Drifted"
    );
    assert_eq!(
        member_status(env, &f, "federatedconfigmaps", "web", &m2),
        ""
    );
    let first = drift_record(env, &f, "web")[&m1]["/data/k"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(first.starts_with("20"), "{first}");

    // A new template: still nothing written, the PropagatedVersion stays
    // where it was, member2 now differs too, and member1's time holds.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    patch(
        env,
        "host",
        &fed_path(&f, "federatedconfigmaps", "web"),
        json!({"spec": {"template": {"data": {"k": "v2"}}}}),
    );
    f.reset();
    f.reconcile(&[]).ok();
    assert_eq!(f.member_writes(), 0);
    assert_eq!(get(env, "host", &pv_path).unwrap()["status"], pv_before);
    let record = drift_record(env, &f, "web");
    assert_eq!(record[&m1]["/data/k"], first.as_str());
    assert!(
        record[&m2]["/data/k"].as_str().unwrap() > first.as_str(),
        "{record}"
    );

    // status --drift: the table, the document, the JUnit report.
    let table = f.run(&["status", "configmaps", "-n", objs, "--drift"]).ok();
    for want in ["/data/k", "\"by hand\"", "\"v2\"", &first, &m1, &m2] {
        assert!(table.stdout.contains(want), "{want} in {}", table.stdout);
    }
    let doc: Value = serde_json::from_str(
        &f.run(&["status", "configmaps", "-n", objs, "--live", "-o", "json"])
            .ok()
            .stdout,
    )
    .unwrap();
    let web = doc
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "web")
        .unwrap();
    let c1 = web["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == m1.as_str())
        .unwrap();
    assert_eq!(c1["live"], "drifted");
    assert_eq!(
        c1["drift"]["fields"][0],
        json!({"path": "/data/k", "member": "by hand", "desired": "v2", "since": first})
    );
    let secrets = f
        .run(&["status", "secrets", "-n", objs, "--drift", "-o", "yaml"])
        .ok()
        .stdout;
    assert!(
        secrets.contains("/data/token") && secrets.contains("hidden: true"),
        "{secrets}"
    );
    assert!(
        !secrets.contains(&b64_encode("s3cr3t-edited"))
            && !secrets.contains(&b64_encode("s3cr3t-old")),
        "{secrets}"
    );
    f.run(&["status", "configmaps", "-n", objs, "--drift", "--exit-code"])
        .exits(5);

    let junit = f
        .run(&["status", "configmaps", "-n", objs, "-o", "junit"])
        .ok()
        .stdout;
    assert!(junit.contains("tests=\"2\" failures=\"2\""), "{junit}");
    junit_schema_check(&junit);
    f.run(&["status", "clusters", "--drift"]).usage();

    // reconcile --report-only: a new object is reported missing, nothing written.
    federate(
        env,
        &f,
        "FederatedConfigMap",
        "fresh",
        json!({}),
        json!({"template": {"data": {"a": "1"}}, "placement": everywhere}),
    );
    f.reset();
    let report = f.reconcile(&["--report-only", "-o", "json"]).ok();
    assert_eq!(f.member_writes(), 0);
    let doc: Value = serde_json::from_str(&report.stdout).unwrap();
    let fresh: Vec<&Value> = (doc["drift"].as_array().unwrap().iter())
        .filter(|d| d["object"] == format!("ConfigMap {objs}/fresh"))
        .collect();
    assert_eq!(fresh.len(), 2, "{}", report.stdout);
    assert!(fresh.iter().all(|d| d["state"] == "missing"));
    // Back to apply: the drift is repaired and its record goes.
    apply_both(json!(null));
    f.reconcile(&[]).ok();
    assert_eq!(cm(env, "member1", objs, "web").unwrap()["data"]["k"], "v2");
    assert_eq!(drift_record(env, &f, "web"), Value::Null);
    f.run(&["status", "configmaps", "-n", objs, "--drift", "--exit-code"])
        .ok();
    // A pushed object edited by hand: --drift names the field (no run saw
    // it yet, so no time), and the next run repairs it.
    patch(
        env,
        "member1",
        &format!("/api/v1/namespaces/{objs}/configmaps/web"),
        json!({"data": {"k": "again"}}),
    );
    f.run(&["status", "configmaps", "-n", objs, "--drift", "--exit-code"])
        .exits(5);
    let doc: Value = serde_json::from_str(
        &f.run(&[
            "status",
            "configmaps",
            "web",
            "-n",
            objs,
            "--live",
            "-o",
            "json",
        ])
        .ok()
        .stdout,
    )
    .unwrap();
    let c1 = (doc[0]["clusters"].as_array().unwrap().iter())
        .find(|c| c["name"] == m1.as_str())
        .unwrap()
        .clone();
    assert_eq!(c1["live"], "drifted");
    assert_eq!(
        c1["drift"]["fields"],
        json!([{"path": "/data/k", "member": "again", "desired": "v2"}])
    );
}

/// The report validates against junit-10.xsd (hack/testenv.sh fetches it)
/// with xmllint.
fn junit_schema_check(xml: &str) {
    let xsd = testenv::version::cache_root().join("tools/junit/junit-10.xsd");
    assert!(
        xsd.exists(),
        "{} is missing: run hack/testenv.sh",
        xsd.display()
    );
    let file = std::env::temp_dir().join(format!("kubefedctl-drift-{}.xml", std::process::id()));
    std::fs::write(&file, xml).unwrap();
    let out = std::process::Command::new("xmllint")
        .args(["--noout", "--schema"])
        .arg(&xsd)
        .arg(&file)
        .output()
        .expect("xmllint (hack/testenv.sh installs it)");
    let _ = std::fs::remove_file(&file);
    assert!(
        out.status.success(),
        "{}\n{xml}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The watch reports too: a report-only object's copy edited by hand is
/// compared at once (the copies are watched, read whole), its drift
/// recorded with a first-seen time, and nothing is written to the member;
/// `--watch --report-only` writes nothing of any object.
#[test]
fn the_watch_records_drift_of_report_only_objects_and_writes_nothing() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "st-watch", &["configmaps"]);
    let (m1, objs) = (f.cluster("m1"), f.ns);
    let on_m1 = json!({"clusters": [{"name": m1}]});
    federate(
        env,
        &f,
        "FederatedConfigMap",
        "web",
        json!({}),
        json!({"template": {"data": {"k": "v"}}, "placement": on_m1}),
    );
    f.reconcile(&[]).ok();
    patch(
        env,
        "host",
        &fed_path(&f, "federatedconfigmaps", "web"),
        json!({"metadata": {"annotations": {APPLY: "ReportDiff"}}}),
    );
    let log = env.dir().join("watch-st-watch.log");
    let mut watch = crate::watch::spawn_watch(&f.kc, &f, &log, &[]);
    f.reset();
    patch(
        env,
        "member1",
        &format!("/api/v1/namespaces/{objs}/configmaps/web"),
        json!({"data": {"k": "by hand"}}),
    );
    wait_until("the watch to record the drift", || {
        drift_record(env, &f, "web")[&m1]["/data/k"].is_string()
    });
    // Recorded once: no round writes it again while nothing changes.
    std::thread::sleep(std::time::Duration::from_millis(500));
    f.host.reset_records();
    std::thread::sleep(std::time::Duration::from_secs(3));
    let rewrites: Vec<_> = (f.host.records().into_iter())
        .filter(|r| r.method != "GET" && r.resource == "propagatedversions")
        .collect();
    assert!(rewrites.is_empty(), "{rewrites:?}");
    // Stopped as a user would: the lock released for the next.
    crate::watch::sigterm(&watch);
    watch.wait().unwrap();
    let member_writes: Vec<_> = (f.m1.records().into_iter())
        .filter(|r| r.method != "GET" && r.resource != "leases")
        .collect();
    assert!(member_writes.is_empty(), "{member_writes:?}");
    assert_eq!(
        cm(env, "member1", objs, "web").unwrap()["data"]["k"],
        "by hand"
    );
    assert_eq!(
        member_status(env, &f, "federatedconfigmaps", "web", &m1),
        "Drifted"
    );

    // A whole run report-only under the watch: a pushed object's new
    // template is not written, its copy reported.
    federate(
        env,
        &f,
        "FederatedConfigMap",
        "pushed",
        json!({}),
        json!({"template": {"data": {"a": "1"}}, "placement": {"clusters": [{"name": m1}]}}),
    );
    f.reset();
    let log = env.dir().join("watch-st-watch-report-only.log");
    let watch = crate::watch::spawn_watch(&f.kc, &f, &log, &["--report-only"]);
    wait_until("the watch to report the missing copy", || {
        drift_record(env, &f, "pushed")[&m1][""].is_string()
    });
    drop(watch);
    let member_writes: Vec<_> = (f.m1.records().into_iter())
        .filter(|r| r.method != "GET" && r.resource != "leases")
        .collect();
    assert!(member_writes.is_empty(), "{member_writes:?}");
    assert!(cm(env, "member1", objs, "pushed").is_none());
}
