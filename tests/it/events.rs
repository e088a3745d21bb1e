//! Kubernetes Events as KubeFed v0.10 records them: written to the host
//! after a run's member writes, one per object and operation naming its
//! members, aggregated like client-go's (a repeated Event bumps `count`);
//! none for a no-op run, a dry run or `--events=false`.

use crate::fixtures::{Federation, get, patch, wait_until};
use crate::watch::{sigterm, spawn_watch};
use serde_json::{Value, json};
use testenv::TestEnv;

/// The Events on the federated object `name` of `kind`, oldest first.
fn events_of(env: &TestEnv, f: &Federation, kind: &str, name: &str) -> Vec<Value> {
    let list = get(env, "host", &format!("/api/v1/namespaces/{}/events", f.ns)).unwrap();
    let mut out: Vec<Value> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["kind"] == kind && e["involvedObject"]["name"] == name)
        .cloned()
        .collect();
    out.sort_by_key(|e| e["metadata"]["name"].as_str().unwrap().to_string());
    out
}

/// (type, reason, message, count) of each Event.
fn summary(events: &[Value]) -> Vec<(String, String, String, i64)> {
    let mut out: Vec<_> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_string(),
                e["reason"].as_str().unwrap().to_string(),
                e["message"].as_str().unwrap().to_string(),
                e["count"].as_i64().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

fn event_requests(f: &Federation) -> usize {
    f.host.count(|r| r.resource == "events")
}

#[test]
fn a_run_records_creates_and_updates_and_a_no_op_run_records_nothing() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "ev-a", &["configmaps"]);
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    f.create(
        env,
        "FederatedConfigMap",
        "web",
        json!({
            "template": {"data": {"colour": "blue"}},
            "placement": {"clusters": [{"name": m1}, {"name": m2}]}
        }),
    );
    f.create(
        env,
        "FederatedConfigMap",
        "noted",
        json!({
            "template": {"metadata": {"annotations": {"team": "a"}}, "data": {"x": "1"}},
            "placement": {"clusters": [{"name": m1}, {"name": m2}]}
        }),
    );

    f.reset();
    let run = f.reconcile(&[]).ok();
    // One Event per operation, naming both members.
    let created = (
        "Normal".to_string(),
        "CreateInCluster".to_string(),
        format!(
            r#"Creating ConfigMap "{}/web" in clusters "{m1}", "{m2}""#,
            f.ns
        ),
        1,
    );
    let web = events_of(env, &f, "FederatedConfigMap", "web");
    assert_eq!(summary(&web), vec![created.clone()], "{web:#?}");
    let fed = f.fed(env, "federatedconfigmaps", "web").unwrap();
    for e in &web {
        let io = &e["involvedObject"];
        assert_eq!(io["apiVersion"], format!("{}/v1beta1", f.group));
        assert_eq!(io["namespace"], f.ns);
        assert_eq!(io["uid"], fed["metadata"]["uid"]);
        assert!(io["resourceVersion"].is_string(), "{io}");
        assert_eq!(e["source"]["component"], "federatedconfigmap-controller");
        assert_eq!(e["metadata"]["namespace"], f.ns);
        assert!(e["metadata"]["name"].as_str().unwrap().starts_with("web."));
    }
    // Template annotations are dropped with a warning line, and one
    // Warning Event for the run.
    assert!(
        run.stderr.contains("warning: FederatedConfigMap ev-a-objs/noted: metadata.annotations cannot be set via template"),
        "{}",
        run.stderr
    );
    let noted = summary(&events_of(env, &f, "FederatedConfigMap", "noted"));
    let warning = noted
        .iter()
        .find(|e| e.1 == "AnnotationsNotSupported")
        .unwrap();
    assert_eq!((warning.0.as_str(), warning.3), ("Warning", 1), "{noted:?}");
    // One POST per Event: web's create, noted's create and its Warning,
    // and the create of the FederatedNamespace that places them.
    let posts = f
        .host
        .count(|r| r.resource == "events" && r.method == "POST");
    assert_eq!(posts, 4, "{:?}", f.host.records());

    // An update: one UpdateInCluster Event; the create's stays as it was.
    patch(
        env,
        "host",
        &format!(
            "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/web",
            f.group, f.ns
        ),
        json!({"spec": {"template": {"data": {"colour": "green"}}}}),
    );
    f.reconcile(&[]).ok();
    let updated = (
        "Normal".to_string(),
        "UpdateInCluster".to_string(),
        format!(
            r#"Updating ConfigMap "{}/web" in clusters "{m1}", "{m2}""#,
            f.ns
        ),
        1,
    );
    let web = events_of(env, &f, "FederatedConfigMap", "web");
    assert_eq!(summary(&web), vec![created, updated], "{web:#?}");

    // Nothing changed: not one Event request.
    f.reset();
    let run = f.reconcile(&[]).ok();
    assert_eq!(event_requests(&f), 0, "{:?}", f.host.records());
    assert!(
        f.writes().is_empty(),
        "a no-op run writes nothing: {}",
        run.stderr
    );
    assert_eq!(events_of(env, &f, "FederatedConfigMap", "web").len(), 2);
}

#[test]
fn events_false_and_dry_run_write_none() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "ev-b", &["configmaps"]);
    f.create(
        env,
        "FederatedConfigMap",
        "web",
        json!({
            "template": {"data": {"colour": "blue"}},
            "placement": {"clusterSelector": {}}
        }),
    );
    f.reset();
    f.reconcile(&["--dry-run"]).ok();
    assert_eq!(event_requests(&f), 0, "a dry run records nothing");
    f.reconcile(&["--events=false"]).ok();
    assert_eq!(
        f.member_writes(),
        4,
        "the run did propagate (namespace and object, two members)"
    );
    assert_eq!(event_requests(&f), 0, "{:?}", f.host.records());
    assert!(events_of(env, &f, "FederatedConfigMap", "web").is_empty());
    // The flag parses as kubectl's: --events alone means true.
    patch(
        env,
        "host",
        &format!(
            "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/web",
            f.group, f.ns
        ),
        json!({"spec": {"template": {"data": {"colour": "red"}}}}),
    );
    f.reconcile(&["--events"]).ok();
    assert_eq!(events_of(env, &f, "FederatedConfigMap", "web").len(), 1);
}

#[test]
fn under_watch_a_repeated_event_bumps_its_count() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "ev-c", &["configmaps"]);
    let m1 = f.cluster("m1");
    f.create(
        env,
        "FederatedConfigMap",
        "web",
        json!({
            "template": {"data": {"colour": "blue"}},
            "placement": {"clusters": [{"name": m1}]}
        }),
    );
    let log = std::env::temp_dir().join(format!("ev-c-{}.log", std::process::id()));
    let mut watch = spawn_watch(&f.kc, &f, &log, &[]);
    let cm_path = format!("/api/v1/namespaces/{}/configmaps/web", f.ns);
    let colour = || get(env, "member1", &cm_path).map(|c| c["data"]["colour"].clone());
    wait_until("the first create", || colour() == Some(json!("blue")));
    // Drift in the member, three times: the watch repairs it each time.
    for _ in 0..3 {
        patch(
            env,
            "member1",
            &cm_path,
            json!({"data": {"colour": "drift"}}),
        );
        wait_until("drift repaired", || colour() == Some(json!("blue")));
    }
    let updating = format!(r#"Updating ConfigMap "{}/web" in cluster "{m1}""#, f.ns);
    wait_until("one Event counted three times", || {
        let events = events_of(env, &f, "FederatedConfigMap", "web");
        let updates: Vec<&Value> = events
            .iter()
            .filter(|e| e["reason"] == "UpdateInCluster")
            .collect();
        updates.len() == 1 && updates[0]["count"] == 3 && updates[0]["message"] == updating.as_str()
    });
    let events = events_of(env, &f, "FederatedConfigMap", "web");
    let firsts: Vec<&Value> = events.iter().map(|e| &e["firstTimestamp"]).collect();
    assert!(
        events
            .iter()
            .any(|e| e["reason"] == "CreateInCluster" && e["count"] == 1),
        "{events:#?}"
    );
    assert!(firsts.iter().all(|t| t.is_string()));
    sigterm(&watch);
    assert!(watch.wait().unwrap().success());
    let _ = std::fs::remove_file(&log);
}
