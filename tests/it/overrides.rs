//! What KubeFed's users asked for most and never got (kubefed#581, #1462):
//! overrides chosen by cluster label, one-shot, planned and under the
//! watch, with the named cluster's entry winning.

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
