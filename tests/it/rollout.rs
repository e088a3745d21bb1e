//! Progressive rollouts in one-shot runs (issue #57): three members, a
//! canary `m1` (member1) and a second wave of the members labelled
//! `tier=prod` (`m2` on member2, `m3` on the host); a change reaches the
//! canary first, halts there when it cannot become ready, resumes where a
//! killed run stopped, and a plan lists the waves.

use crate::fixtures::*;
use serde_json::{Value, json};
use std::io::BufRead;
use testenv::TestEnv;

/// Where each member's copies live.
const MEMBERS: [(&str, &str); 3] = [("m1", "member1"), ("m2", "member2"), ("m3", "host")];

/// A federation with a third member (the host) and the second wave's label.
fn federation(env: &TestEnv, prefix: &'static str, types: &[&str]) -> Federation {
    let f = Federation::new(env, prefix, types);
    f.run(&["join", &f.cluster("m3"), "--cluster-context", "host"])
        .ok();
    for m in ["m2", "m3"] {
        patch(
            env,
            "host",
            &format!(
                "/apis/core.kubefed.io/v1beta1/namespaces/{}/kubefedclusters/{}",
                f.fedns,
                f.cluster(m)
            ),
            json!({"metadata": {"labels": {"tier": "prod"}}}),
        );
    }
    f
}

/// The canary first, then `tier=prod`.
fn policy(f: &Federation, extra: Value) -> String {
    let mut p = json!({"waves": [{"clusters": [f.cluster("m1")]},
                                 {"clusterSelector": {"matchLabels": {"tier": "prod"}}}]});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    p.to_string()
}

/// A federated object with its rollout policy in the annotation.
fn create(
    env: &TestEnv,
    f: &Federation,
    plural: &str,
    kind: &str,
    name: &str,
    spec: Value,
    p: &str,
) {
    let path = format!("/apis/{}/v1beta1/namespaces/{}/{plural}", f.group, f.ns);
    let body = json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": kind,
        "metadata": {"name": name, "namespace": f.ns,
                     "annotations": {"kubefedctl.kubefed.io/rollout": p}},
        "spec": spec});
    let (status, answer) = crate::fixtures::create(env, "host", &path, body);
    assert_eq!(status, 201, "{answer}");
}

fn pv(env: &TestEnv, f: &Federation, name: &str) -> Value {
    get(
        env,
        "host",
        &format!(
            "/apis/core.kubefed.io/v1alpha1/namespaces/{}/propagatedversions/{name}",
            f.ns
        ),
    )
    .unwrap_or(Value::Null)
}

/// The members a PropagatedVersion has entries for.
fn pv_members(pv: &Value) -> Vec<String> {
    pv["status"]["clusterVersions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["clusterName"].as_str().unwrap().to_string())
        .collect()
}

fn record(pv: &Value) -> Option<Value> {
    let text = pv["metadata"]["annotations"]["kubefedctl.kubefed.io/rollout-status"].as_str()?;
    Some(serde_json::from_str(text).unwrap())
}

fn value(env: &TestEnv, f: &Federation, member: &str, name: &str) -> Value {
    let cluster = MEMBERS.iter().find(|(m, _)| *m == member).unwrap().1;
    cm(env, cluster, f.ns, name).map_or(Value::Null, |c| c["data"]["v"].clone())
}

/// When the copy was last written (its newest managedFields entry).
fn written_at(obj: &Value) -> String {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["time"].as_str())
        .max()
        .unwrap_or_default()
        .to_string()
}

fn spawn(f: &Federation, extra: &[&str]) -> std::process::Child {
    std::process::Command::new(KUBEFEDCTL)
        .arg("--kubeconfig")
        .arg(&f.kc)
        .args(["reconcile", "-n", f.ns, "--kubefed-namespace", f.fedns])
        .args(["--probe-timeout", "2s", "--timeout", "3s"])
        .args(extra)
        .env_remove("KUBECONFIG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(child: std::process::Child) -> Run {
    Run::from(child.wait_with_output().unwrap())
}

#[test]
fn a_configmap_change_reaches_the_canary_first_then_the_second_wave() {
    let env = TestEnv::shared();
    // ReplicationControllers: a type no other test of the shared environment enables,
    // so that no kind becomes ambiguous for them.
    let f = federation(env, "ro-a", &["configmaps", "replicationcontrollers"]);
    let p = policy(
        &f,
        json!({"minSuccessTime": "3s", "progressDeadline": "30s"}),
    );
    let spec =
        |v: &str| json!({"template": {"data": {"v": v}}, "placement": {"clusterSelector": {}}});
    create(
        env,
        &f,
        "federatedconfigmaps",
        "FederatedConfigMap",
        "cfg",
        spec("1"),
        &p,
    );
    // A new object rolls out too, wave by wave, within the run.
    let run = f.reconcile(&[]).ok();
    assert!(
        run.stderr.contains("wave 1: wrote ro-a-m1"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("complete"), "{}", run.stderr);
    for (m, _) in MEMBERS {
        assert_eq!(value(env, &f, m, "cfg"), "1", "{m}");
    }
    let done = pv(env, &f, "configmap-cfg");
    assert_eq!(pv_members(&done).len(), 3, "{done}");
    assert!(record(&done).is_none(), "{done}");
    let old_template = done["status"]["templateVersion"].clone();

    // The change: the canary gets it; the second wave keeps the old value,
    // and the PropagatedVersion says so, until the canary has been ready
    // for minSuccessTime.
    patch(
        env,
        "host",
        &f.fed_path("federatedconfigmaps", "cfg"),
        json!({"spec": {"template": {"data": {"v": "2"}}}}),
    );
    f.reset();
    let child = spawn(&f, &["--wait-ready=60s"]);
    wait_until("the canary has the change", || {
        value(env, &f, "m1", "cfg") == "2"
    });
    assert_eq!(value(env, &f, "m2", "cfg"), "1");
    assert_eq!(value(env, &f, "m3", "cfg"), "1");
    let mid = pv(env, &f, "configmap-cfg");
    assert_eq!(mid["status"]["templateVersion"], old_template, "{mid}");
    assert_eq!(
        pv_members(&mid),
        [f.cluster("m2"), f.cluster("m3")],
        "{mid}"
    );
    let rec = record(&mid).expect("a rollout record");
    assert!(rec["members"][f.cluster("m1")].is_object(), "{rec}");
    let run = finish(child).ok();
    assert!(
        run.stderr.contains("wave 2: wrote ro-a-m2, ro-a-m3"),
        "{}",
        run.stderr
    );
    // --wait-ready then waits for each copy once, whatever the rounds.
    assert!(
        run.stderr.contains("3 member object(s) ready"),
        "{}",
        run.stderr
    );
    // The rounds between waves read the types of the rollouts waiting
    // alone: member1's ReplicationControllers were listed by the first round only.
    let lists = |resource: &str| {
        (f.m1.records().iter())
            .filter(|r| r.verb == "list" && r.resource == resource)
            .count()
    };
    assert_eq!(lists("replicationcontrollers"), 1, "{:?}", f.m1.records());
    assert!(lists("configmaps") >= 2, "{:?}", f.m1.records());
    for (m, _) in MEMBERS {
        assert_eq!(value(env, &f, m, "cfg"), "2", "{m}");
    }
    let done = pv(env, &f, "configmap-cfg");
    assert_ne!(done["status"]["templateVersion"], old_template);
    assert_eq!(pv_members(&done).len(), 3, "{done}");
    assert!(record(&done).is_none(), "{done}");
    // The write times show the order: the second wave at least
    // minSuccessTime after the canary.
    let at = |cluster| written_at(&cm(env, cluster, f.ns, "cfg").unwrap());
    let (canary, second) = (at("member1"), at("member2"));
    assert!(
        seconds_until(&second) - seconds_until(&canary) >= 3,
        "{canary} then {second}"
    );
    // Rolled out: the next run writes nothing to the members.
    f.reset();
    f.reconcile(&[]).ok();
    assert_eq!(f.member_writes(), 0, "{:?}", f.writes());
}

/// The spec of FederatedDeployment `web` on every member: one replica of
/// a container that stays up (`good`), or of an image no node has and
/// none may pull (`imagePullPolicy: Never`: the kubelet reports
/// `ErrImageNeverPull` and the Deployment never becomes Available).
fn web_deployment(version: Web) -> Value {
    let (image, sleep) = match version {
        Web::Good(seconds) => (crate::pods::ci_image().to_string(), seconds),
        Web::Missing => ("localhost/kubefedctl-test:absent".to_string(), 3600),
    };
    json!({"template": {"spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"terminationGracePeriodSeconds": 0,
                              "containers": [{"name": "c", "image": image, "imagePullPolicy": "Never",
                                              "command": ["/bin/sh", "-c", format!("sleep {sleep}")]}]}}}},
        "placement": {"clusterSelector": {}}})
}

/// A version of `web`.
#[derive(Clone, Copy)]
enum Web {
    /// Starts and stays up (the number makes versions differ).
    Good(u32),
    /// Never starts.
    Missing,
}

/// The image of `web`'s container in a member (`None` before it has one).
fn web_image(env: &TestEnv, f: &Federation, member: &str) -> Option<String> {
    let cluster = MEMBERS.iter().find(|(s, _)| *s == member).unwrap().1;
    let path = format!("/apis/apps/v1/namespaces/{}/deployments/web", f.ns);
    get(env, cluster, &path).map(|d| {
        d["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    })
}

/// A federation of Deployments (see [`federation`]) in the environment
/// with nodes, holding `web`, whose rollout gives a member 40 s to have
/// its pod Available (started by a real kubelet).
fn web_federation(env: &'static TestEnv, prefix: &'static str) -> Federation {
    let f = federation(env, prefix, &["deployments.apps"]);
    let p = policy(
        &f,
        json!({"minSuccessTime": "1s", "progressDeadline": "40s"}),
    );
    create(
        env,
        &f,
        "federateddeployments",
        "FederatedDeployment",
        "web",
        web_deployment(Web::Good(3600)),
        &p,
    );
    f
}

/// A federated object's `Ready` condition (`null` when it has none).
fn ready_condition(fed: &Value) -> Value {
    (fed["status"]["conditions"].as_array().into_iter().flatten())
        .find(|c| c["type"] == "Ready")
        .cloned()
        .unwrap_or_default()
}

#[test]
fn a_deployment_that_cannot_become_ready_halts_on_the_canary_then_a_fix_completes() {
    let Some(env) = crate::pods::nodes() else {
        return;
    };
    let f = web_federation(env, "ro-b");
    f.reconcile(&[]).ok();
    let good = crate::pods::ci_image().to_string();
    let missing = "localhost/kubefedctl-test:absent".to_string();
    let image = |m: &str| web_image(env, &f, m).unwrap_or_default();
    let before = pv(env, &f, "deployment-web");
    assert_eq!(pv_members(&before).len(), 3, "{before}");

    // An image the kubelet may not pull: the canary's pod never starts,
    // its Deployment is not Available within the progress deadline; the
    // rollout halts, the second wave untouched.
    let path = f.fed_path("federateddeployments", "web");
    patch(
        env,
        "host",
        &path,
        json!({"spec": web_deployment(Web::Missing)}),
    );
    let run = f.reconcile(&[]).exits(7);
    assert!(
        run.stderr.contains("rollout halted in wave 1: ro-b-m1"),
        "{}",
        run.stderr
    );
    assert_eq!(image("m1"), missing);
    assert_eq!(image("m2"), good);
    assert_eq!(image("m3"), good);
    let pods = crate::pods::items(env, "member1", &format!("/api/v1/namespaces/{}/pods", f.ns));
    assert!(
        pods.iter().any(
            |p| p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                == "ErrImageNeverPull"
        ),
        "the kubelet refused the image: {pods:?}"
    );
    let halted = pv(env, &f, "deployment-web");
    assert_eq!(
        halted["status"]["templateVersion"],
        before["status"]["templateVersion"]
    );
    assert_eq!(
        pv_members(&halted),
        [f.cluster("m2"), f.cluster("m3")],
        "{halted}"
    );
    assert!(record(&halted).is_some(), "{halted}");
    let fed = get(env, "host", &path).unwrap();
    let ready = ready_condition(&fed);
    assert_eq!(ready["status"], "False", "{fed}");
    assert_eq!(ready["reason"], "RolloutHalted", "{fed}");
    let canary = fed["status"]["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == f.cluster("m1"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(canary["status"], "RolloutHalted", "{fed}");
    let events = get(env, "host", &format!("/api/v1/namespaces/{}/events", f.ns)).unwrap();
    let halt_event = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["reason"] == "RolloutHalted")
        .cloned()
        .unwrap_or_default();
    let message = halt_event["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("wave 1") && message.contains("ro-b-m1"),
        "{events}"
    );

    // Run again unchanged: still halted, nothing beyond the canary written,
    // and the object's status, which says so already, neither read alone
    // nor written; the halt's Event, recorded once, is not written again.
    f.reset();
    f.reconcile(&[]).exits(7);
    assert_eq!(image("m2"), good);
    let events_written: Vec<_> = (f.host.records().into_iter())
        .filter(|r| r.resource == "events" && r.is_write())
        .collect();
    assert!(events_written.is_empty(), "{events_written:?}");
    let object: Vec<_> = (f.host.records().into_iter())
        .filter(|r| r.path.contains("/federateddeployments/web"))
        .collect();
    assert!(object.is_empty(), "{object:?}");
    // `status` says where it stopped.
    let status = f.run(&["status", "deployments.apps", "-n", f.ns]).ok();
    assert!(
        status.stdout.contains(&format!(
            "rollout of {}/web: halted in wave 1: ro-b-m1 written",
            f.ns
        )),
        "{}",
        status.stdout
    );

    // Fixed by going back to the previous template (a new target for the
    // record, ready on the canary): it starts over from the first wave;
    // the second wave's copies, already as wanted, get no request.
    patch(
        env,
        "host",
        &path,
        json!({"spec": web_deployment(Web::Good(3600))}),
    );
    f.reset();
    let run = f.reconcile(&[]).ok();
    assert!(run.stderr.contains("complete"), "{}", run.stderr);
    for (m, _) in MEMBERS {
        assert_eq!(image(m), good, "{m}");
    }
    let member2_writes = (f.m2.records().iter())
        .filter(|r| r.method != "GET" && r.path.contains("/deployments/"))
        .count();
    assert_eq!(member2_writes, 0, "{:?}", f.writes());
    let done = pv(env, &f, "deployment-web");
    assert_eq!(pv_members(&done).len(), 3, "{done}");
    assert!(record(&done).is_none(), "{done}");
    let fed = get(env, "host", &path).unwrap();
    assert!(
        fed["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True"),
        "{fed}"
    );
}

/// `reconcile --watch` over the federation, logging to `name` in the
/// environment's directory.
fn watch(env: &TestEnv, f: &Federation, name: &str) -> (crate::watch::Watch, std::path::PathBuf) {
    let log = env.dir().join(name);
    (crate::watch::spawn_watch(&f.kc, f, &log, &[]), log)
}

/// [`wait_until`], the watch's log in the failure.
fn wait_watched(what: &str, log: &std::path::Path, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done() {
        let text = crate::watch::log(log);
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}; the watch said:\n{text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn the_watch_rolls_a_change_out_wave_by_wave_and_holds_no_other_object_back() {
    let env = TestEnv::shared();
    let f = federation(env, "ro-w", &["configmaps"]);
    let p = policy(&f, json!({"minSuccessTime": "10s"}));
    let spec =
        |v: &str| json!({"template": {"data": {"v": v}}, "placement": {"clusterSelector": {}}});
    create(
        env,
        &f,
        "federatedconfigmaps",
        "FederatedConfigMap",
        "cfg",
        spec("1"),
        &p,
    );
    f.create(env, "FederatedConfigMap", "free", spec("1"));
    let (_watch, log) = watch(env, &f, "watch-ro-w.log");
    wait_watched("the first rollout to complete", &log, || {
        MEMBERS.iter().all(|(m, _)| value(env, &f, m, "cfg") == "1")
            && record(&pv(env, &f, "configmap-cfg")).is_none()
            && pv_members(&pv(env, &f, "configmap-cfg")).len() == 3
    });
    let old_template = pv(env, &f, "configmap-cfg")["status"]["templateVersion"].clone();

    // Both change: the object with a policy reaches the canary; the other
    // reaches every member, not held back by the rollout's soak.
    f.reset();
    for name in ["cfg", "free"] {
        patch(
            env,
            "host",
            &f.fed_path("federatedconfigmaps", name),
            json!({"spec": {"template": {"data": {"v": "2"}}}}),
        );
    }
    wait_watched(
        "the canary and every copy of free have the change",
        &log,
        || {
            value(env, &f, "m1", "cfg") == "2"
                && MEMBERS
                    .iter()
                    .all(|(m, _)| value(env, &f, m, "free") == "2")
        },
    );
    assert_eq!(value(env, &f, "m2", "cfg"), "1");
    assert_eq!(value(env, &f, "m3", "cfg"), "1");
    let mid = pv(env, &f, "configmap-cfg");
    assert_eq!(mid["status"]["templateVersion"], old_template, "{mid}");
    assert_eq!(
        pv_members(&mid),
        [f.cluster("m2"), f.cluster("m3")],
        "{mid}"
    );
    assert!(record(&mid).is_some(), "{mid}");

    // The soak ends: the second wave, from a time of its own.
    wait_watched("the second wave has the change", &log, || {
        MEMBERS.iter().all(|(m, _)| value(env, &f, m, "cfg") == "2")
    });
    let at = |cluster| written_at(&cm(env, cluster, f.ns, "cfg").unwrap());
    let (canary, second) = (at("member1"), at("member2"));
    assert!(
        seconds_until(&second) - seconds_until(&canary) >= 10,
        "{canary} then {second}"
    );
    wait_watched("the rollout to complete", &log, || {
        let done = pv(env, &f, "configmap-cfg");
        record(&done).is_none() && pv_members(&done).len() == 3
    });
    assert_ne!(
        pv(env, &f, "configmap-cfg")["status"]["templateVersion"],
        old_template
    );
    // Watched, not polled: the canary's copy was never read by itself.
    let cfg = format!("/namespaces/{}/configmaps/cfg", f.ns);
    let reads: Vec<_> = (f.m1.records().into_iter())
        .filter(|r| r.method == "GET" && r.path.ends_with(&cfg))
        .collect();
    assert!(reads.is_empty(), "{reads:?}");
    let text = crate::watch::log(&log);
    let object = format!("rollout of FederatedConfigMap {}/cfg", f.ns);
    for said in [
        "wave 1: wrote ro-w-m1",
        "wave 2: wrote ro-w-m2, ro-w-m3",
        "complete",
    ] {
        assert!(
            text.contains(&format!("{object}: {said}")),
            "{said}: {text}"
        );
    }
}

#[test]
fn the_watch_halts_a_deployment_that_cannot_become_ready_and_completes_its_fix() {
    let Some(env) = crate::pods::nodes() else {
        return;
    };
    let f = web_federation(env, "ro-x");
    let (_watch, log) = watch(env, &f, "watch-ro-x.log");
    let good = Some(crate::pods::ci_image().to_string());
    let image = |m: &str| web_image(env, &f, m);
    // The canary's readiness (its pod Available, by the kubelet and the
    // deployment controller) moves the rollout on: no time would.
    wait_watched("every member to have the deployment", &log, || {
        MEMBERS.iter().all(|(m, _)| image(m) == good)
            && record(&pv(env, &f, "deployment-web")).is_none()
    });

    let path = f.fed_path("federateddeployments", "web");
    patch(
        env,
        "host",
        &path,
        json!({"spec": web_deployment(Web::Missing)}),
    );
    wait_watched("the rollout to halt at its progress deadline", &log, || {
        let fed = get(env, "host", &path).unwrap();
        ready_condition(&fed)["reason"] == "RolloutHalted"
    });
    assert_eq!(
        image("m1").as_deref(),
        Some("localhost/kubefedctl-test:absent")
    );
    assert_eq!(image("m2"), good);
    assert_eq!(image("m3"), good);
    let halted = pv(env, &f, "deployment-web");
    assert_eq!(
        pv_members(&halted),
        [f.cluster("m2"), f.cluster("m3")],
        "{halted}"
    );
    // The watch logs the halt after it writes the record read above.
    wait_watched("the watch's halt line", &log, || {
        crate::watch::log(&log).contains("rollout halted in wave 1: ro-x-m1")
    });

    // Fixed: a new version starts over from the first wave and completes.
    patch(
        env,
        "host",
        &path,
        json!({"spec": web_deployment(Web::Good(3601))}),
    );
    wait_watched("the fix to be rolled out", &log, || {
        let fed = get(env, "host", &path).unwrap();
        let done = pv(env, &f, "deployment-web");
        ready_condition(&fed)["status"] == "True"
            && record(&done).is_none()
            && pv_members(&done).len() == 3
    });
    for m in ["m1", "m2", "m3"] {
        let spec = get(
            env,
            MEMBERS.iter().find(|(s, _)| *s == m).unwrap().1,
            &format!("/apis/apps/v1/namespaces/{}/deployments/web", f.ns),
        )
        .unwrap();
        assert_eq!(
            spec["spec"]["template"]["spec"]["containers"][0]["command"][2], "sleep 3601",
            "{m}"
        );
    }
}

#[test]
fn a_run_killed_between_waves_is_resumed_by_the_next() {
    let env = TestEnv::shared();
    let f = federation(env, "ro-c", &["configmaps"]);
    let p = policy(&f, json!({"minSuccessTime": "30s"}));
    create(
        env,
        &f,
        "federatedconfigmaps",
        "FederatedConfigMap",
        "cfg",
        json!({"template": {"data": {"v": "1"}}, "placement": {"clusterSelector": {}}}),
        &p,
    );
    let mut child = spawn(&f, &["--no-lock"]);
    let stderr = child.stderr.take().unwrap();
    let mut seen = String::new();
    for line in std::io::BufReader::new(stderr).lines() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("wave 1: wrote ro-c-m1") {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(seen.contains("wave 1: wrote ro-c-m1"), "{seen}");
    assert_eq!(value(env, &f, "m1", "cfg"), "1");
    assert_eq!(value(env, &f, "m2", "cfg"), Value::Null);
    assert_eq!(value(env, &f, "m3", "cfg"), Value::Null);
    let rec = record(&pv(env, &f, "configmap-cfg")).expect("the first wave's record");
    assert!(
        rec["members"][f.cluster("m1")]["version"].is_string(),
        "{rec}"
    );
    let canary_rv = cm(env, "member1", f.ns, "cfg").unwrap()["metadata"]["resourceVersion"].clone();

    // The next run goes on from the second wave: the canary is not written again.
    let p = policy(&f, json!({"minSuccessTime": "1s"}));
    patch(
        env,
        "host",
        &f.fed_path("federatedconfigmaps", "cfg"),
        json!({"metadata": {"annotations": {"kubefedctl.kubefed.io/rollout": p}}}),
    );
    let run = f.reconcile(&["--no-lock"]).ok();
    assert!(!run.stderr.contains("wave 1: wrote"), "{}", run.stderr);
    assert!(
        run.stderr.contains("wave 2: wrote ro-c-m2, ro-c-m3"),
        "{}",
        run.stderr
    );
    for (m, _) in MEMBERS {
        assert_eq!(value(env, &f, m, "cfg"), "1", "{m}");
    }
    assert_eq!(
        cm(env, "member1", f.ns, "cfg").unwrap()["metadata"]["resourceVersion"],
        canary_rv
    );
    assert!(record(&pv(env, &f, "configmap-cfg")).is_none());
}

#[test]
fn a_plan_lists_the_waves_and_a_malformed_policy_writes_nothing_of_its_object() {
    let env = TestEnv::shared();
    let f = federation(env, "ro-d", &["configmaps"]);
    let spec = json!({"template": {"data": {"v": "1"}}, "placement": {"clusterSelector": {}}});
    create(
        env,
        &f,
        "federatedconfigmaps",
        "FederatedConfigMap",
        "planned",
        spec.clone(),
        &policy(&f, json!({})),
    );
    // Without an annotation: --rollout gives the policy.
    f.create(env, "FederatedConfigMap", "plain", spec.clone());
    let run_policy = json!({"waves": [{"clusters": [f.cluster("m3")]}]}).to_string();
    let plan = f
        .reconcile(&["--dry-run", "-o", "markdown", "--rollout", &run_policy])
        .ok();
    let ns = f.ns;
    assert!(
        plan.stdout.contains(&format!(
            "#### rollout of `FederatedConfigMap {ns}/planned`"
        )),
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout.contains("| wave 1 | 1 | `ro-d-m1` | now |"),
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout
            .contains("| wave 2 | 1 | `ro-d-m2`, `ro-d-m3` | later |"),
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout.contains("| wave 1 | 1 | `ro-d-m3` | now |"),
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout
            .contains("| wave 2 (members in no wave) | 1 | `ro-d-m1`, `ro-d-m2` | later |"),
        "{}",
        plan.stdout
    );
    // The plan's member changes are the first waves' alone.
    assert!(plan.stdout.contains("#### ro-d-m1"), "{}", plan.stdout);
    assert_eq!(
        cm(env, "member1", ns, "planned"),
        None,
        "a plan writes nothing"
    );
    assert!(pv(env, &f, "configmap-planned").is_null());

    // A malformed policy: an error naming the object and the field, nothing
    // of that object written, the others propagated.
    create(
        env,
        &f,
        "federatedconfigmaps",
        "FederatedConfigMap",
        "bad",
        spec,
        &json!({"progressDeadline": "10x"}).to_string(),
    );
    let run = f.reconcile(&[]).exits(3);
    assert!(
        run.stderr.contains(&format!(
            "FederatedConfigMap {ns}/bad: annotation kubefedctl.kubefed.io/rollout: progressDeadline: \"10x\" is not a duration"
        )),
        "{}",
        run.stderr
    );
    for (_, cluster) in MEMBERS {
        assert_eq!(cm(env, cluster, ns, "bad"), None, "{cluster}");
        assert!(cm(env, cluster, ns, "plain").is_some(), "{cluster}");
    }
    assert!(pv(env, &f, "configmap-bad").is_null());
    let bad = get(env, "host", &f.fed_path("federatedconfigmaps", "bad")).unwrap();
    assert!(bad["metadata"]["finalizers"].is_null(), "{bad}");

    // A run that may not write to every member an object is placed on
    // takes no step of its rollout: it would count them written.
    patch(
        env,
        "host",
        &f.fed_path("federatedconfigmaps", "planned"),
        json!({"spec": {"template": {"data": {"v": "2"}}}}),
    );
    f.reset();
    let run = f.reconcile(&["--cluster", &f.cluster("m1")]).exits(3);
    assert!(
        run.stderr.contains(&format!(
            "FederatedConfigMap {ns}/planned: its rollout goes on only in a run that may write to every member it is placed on, and this one may not write to ro-d-m2, ro-d-m3 (--cluster)"
        )),
        "{}",
        run.stderr
    );
    assert_eq!(f.member_writes(), 0, "{:?}", f.writes());
    assert_eq!(cm(env, "member1", ns, "planned").unwrap()["data"]["v"], "1");
}

#[test]
fn rollout_abort_sends_the_members_that_got_a_version_back_at_once() {
    let env = TestEnv::shared();
    let f = federation(env, "ro-e", &["configmaps"]);
    let object = |v: &str, soak: &str| {
        json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": "FederatedConfigMap",
            "metadata": {"name": "cfg", "namespace": f.ns,
                "annotations": {"kubefedctl.kubefed.io/rollout": policy(&f, json!({"minSuccessTime": soak}))}},
            "spec": {"template": {"data": {"v": v}}, "placement": {"clusterSelector": {}}}})
    };
    let v1 = object("1", "0s");
    let (status, answer) = crate::fixtures::create(
        env,
        "host",
        &f.fed_path("federatedconfigmaps", ""),
        v1.clone(),
    );
    assert_eq!(status, 201, "{answer}");
    f.reconcile(&[]).ok();
    let rolled_out = pv(env, &f, "configmap-cfg");
    // v2 reaches the canary; the second wave waits out a long soak, and
    // the run's wait ends first: exit 5, the rollout waiting.
    let path = f.fed_path("federatedconfigmaps", "cfg");
    patch(
        env,
        "host",
        &path,
        json!({"metadata": object("2", "60s")["metadata"], "spec": object("2", "60s")["spec"]}),
    );
    let run = f.reconcile(&["--wait-ready=4s"]).exits(5);
    assert!(
        run.stderr.contains("rollout(s) not complete"),
        "{}",
        run.stderr
    );
    assert_eq!(value(env, &f, "m1", "cfg"), "2");
    assert_eq!(value(env, &f, "m2", "cfg"), "1");

    let dir = std::env::temp_dir().join("kubefedctl-it-ro-e");
    std::fs::create_dir_all(&dir).unwrap();
    // The files must hold the version the PropagatedVersion records.
    let same = dir.join("same.yaml");
    std::fs::write(&same, object("2", "60s").to_string()).unwrap();
    let run = f
        .reconcile(&[
            "-f",
            same.to_str().unwrap(),
            "--force-conflicts",
            "--rollout-abort",
        ])
        .exits(3);
    assert!(
        run.stderr
            .contains("--rollout-abort: previous template unknown"),
        "{}",
        run.stderr
    );
    assert_eq!(value(env, &f, "m1", "cfg"), "2");
    let previous = dir.join("previous.yaml");
    std::fs::write(&previous, object("1", "60s").to_string()).unwrap();
    let run = f
        .reconcile(&[
            "-f",
            previous.to_str().unwrap(),
            "--force-conflicts",
            "--rollout-abort",
        ])
        .ok();
    assert!(
        run.stderr
            .contains("aborted: ro-e-m1 back to the recorded version"),
        "{}",
        run.stderr
    );
    for (m, _) in MEMBERS {
        assert_eq!(value(env, &f, m, "cfg"), "1", "{m}");
    }
    let back = pv(env, &f, "configmap-cfg");
    assert!(record(&back).is_none(), "{back}");
    assert_eq!(
        back["status"]["templateVersion"],
        rolled_out["status"]["templateVersion"]
    );
    assert_eq!(pv_members(&back).len(), 3, "{back}");
}

#[test]
fn rollout_abort_with_previous_keeps_the_host_and_writes_the_aborted_version_no_more() {
    let env = TestEnv::shared();
    let f = federation(env, "ro-p", &["configmaps"]);
    // v1 rolls out at once (no soak); from v2 on, the second wave soaks
    // for a minute, longer than any run here waits.
    let object = |v: &str| {
        let soak = if v == "1" { "0s" } else { "60s" };
        json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": "FederatedConfigMap",
            "metadata": {"name": "cfg", "namespace": f.ns,
                "annotations": {"kubefedctl.kubefed.io/rollout": policy(&f, json!({"minSuccessTime": soak}))}},
            "spec": {"template": {"data": {"v": v}}, "placement": {"clusterSelector": {}}}})
    };
    let collection = f.fed_path("federatedconfigmaps", "");
    let (status, answer) = crate::fixtures::create(env, "host", &collection, object("1"));
    assert_eq!(status, 201, "{answer}");
    f.reconcile(&[]).ok();
    let rolled_out = pv(env, &f, "configmap-cfg");
    // v2 reaches the canary; the second wave waits out its soak.
    let path = f.fed_path("federatedconfigmaps", "cfg");
    patch(
        env,
        "host",
        &path,
        json!({"metadata": object("2")["metadata"], "spec": object("2")["spec"]}),
    );
    f.reconcile(&["--wait-ready=4s"]).exits(5);
    assert_eq!(value(env, &f, "m1", "cfg"), "2");
    assert_eq!(value(env, &f, "m2", "cfg"), "1");
    let mid = pv(env, &f, "configmap-cfg");

    let dir = std::env::temp_dir().join("kubefedctl-it-ro-p");
    std::fs::create_dir_all(&dir).unwrap();
    // A version other than the recorded one: a failure naming the
    // object, nothing of it written.
    let wrong = dir.join("wrong.yaml");
    std::fs::write(&wrong, object("3").to_string()).unwrap();
    f.reset();
    let run = f
        .reconcile(&["--rollout-abort", "--previous", wrong.to_str().unwrap()])
        .exits(3);
    let ns = f.ns;
    assert!(
        run.stderr.contains(&format!(
            "FederatedConfigMap {ns}/cfg: --rollout-abort --previous {}: document 1: previous template unknown: the given template hashes to",
            wrong.display()
        )),
        "{}",
        run.stderr
    );
    assert_eq!(f.member_writes(), 0, "{:?}", f.writes());
    assert_eq!(value(env, &f, "m1", "cfg"), "2");
    assert_eq!(pv(env, &f, "configmap-cfg"), mid);

    // The recorded version: the canary goes back, the host's object
    // keeps asking for v2.
    let previous = dir.join("previous.yaml");
    std::fs::write(&previous, object("1").to_string()).unwrap();
    let run = f
        .reconcile(&["--rollout-abort", "--previous", previous.to_str().unwrap()])
        .ok();
    assert!(
        run.stderr
            .contains("aborted: ro-p-m1 back to the previous version"),
        "{}",
        run.stderr
    );
    for (m, _) in MEMBERS {
        assert_eq!(value(env, &f, m, "cfg"), "1", "{m}");
    }
    let host = get(env, "host", &path).unwrap();
    assert_eq!(host["spec"]["template"]["data"]["v"], "2", "{host}");
    // For KubeFed: the previous hashes, every member on them.
    let back = pv(env, &f, "configmap-cfg");
    assert_eq!(
        back["status"]["templateVersion"],
        rolled_out["status"]["templateVersion"]
    );
    assert_eq!(pv_members(&back).len(), 3, "{back}");
    let kept = record(&back).expect("the record stays, aborted");
    assert!(kept["aborted"]["at"].is_string(), "{kept}");
    assert!(
        kept["members"].as_object().is_none_or(|m| m.is_empty()),
        "{kept}"
    );

    // Runs of v2 write nothing to the members and say why (exit 7).
    f.reset();
    let run = f.reconcile(&[]).exits(7);
    assert!(
        run.stderr.contains(&format!(
            "rollout of FederatedConfigMap {ns}/cfg: aborted at "
        )) && run.stderr.contains("change the template to go on"),
        "{}",
        run.stderr
    );
    assert_eq!(f.member_writes(), 0, "{:?}", f.writes());
    assert_eq!(value(env, &f, "m1", "cfg"), "1");
    assert_eq!(pv(env, &f, "configmap-cfg")["status"], back["status"]);

    // The watch reads the same record: it writes nothing of v2 either.
    f.reset();
    let (mut watch_child, log) = watch(env, &f, "watch-ro-p.log");
    wait_watched("the watch to say the rollout was aborted", &log, || {
        crate::watch::log(&log).contains("change the template to go on")
    });
    // Stopped as a user would: the lock released for the next run.
    crate::watch::sigterm(&watch_child);
    watch_child.wait().unwrap();
    assert_eq!(f.member_writes(), 0, "{:?}", f.writes());
    for (m, _) in MEMBERS {
        assert_eq!(value(env, &f, m, "cfg"), "1", "{m}");
    }

    // A new template starts over from the first wave.
    patch(env, "host", &path, json!({"spec": object("3")["spec"]}));
    f.reconcile(&["--wait-ready=4s"]).exits(5);
    assert_eq!(value(env, &f, "m1", "cfg"), "3");
    assert_eq!(value(env, &f, "m2", "cfg"), "1");
    let again = record(&pv(env, &f, "configmap-cfg")).unwrap();
    assert!(again.get("aborted").is_none(), "{again}");
}

/// The canary, then `tier=prod` behind an approval gate (issue #67).
fn gated_policy(f: &Federation) -> String {
    json!({"waves": [{"clusters": [f.cluster("m1")]},
                     {"clusterSelector": {"matchLabels": {"tier": "prod"}}, "approval": true}]})
    .to_string()
}

/// The approvals a PropagatedVersion holds.
fn approvals(pv: &Value) -> Option<Value> {
    let text = pv["metadata"]["annotations"]["kubefedctl.kubefed.io/rollout-approvals"].as_str()?;
    Some(serde_json::from_str(text).unwrap())
}

/// Whether the host serves SelfSubjectReview (1.27 on; not 1.20): an
/// approval's user is then the server's, else marked unconfirmed.
fn serves_self_subject_review(env: &TestEnv) -> bool {
    ["v1", "v1beta1"].iter().any(|v| {
        get(env, "host", &format!("/apis/authentication.k8s.io/{v}")).is_some_and(|l| {
            l["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| r["name"] == "selfsubjectreviews")
        })
    })
}

fn approve(f: &Federation, object: &str, extra: &[&str]) -> Run {
    let mut args = vec!["rollout", "approve", object, "-n", f.ns];
    args.extend_from_slice(extra);
    f.run(&args)
}

#[test]
fn an_approval_gate_stops_a_rollout_until_it_is_approved_for_its_version() {
    let env = TestEnv::shared();
    let f = federation(env, "ro-g", &["configmaps"]);
    let spec =
        |v: &str| json!({"template": {"data": {"v": v}}, "placement": {"clusterSelector": {}}});
    create(
        env,
        &f,
        "federatedconfigmaps",
        "FederatedConfigMap",
        "cfg",
        spec("1"),
        &gated_policy(&f),
    );
    f.create(env, "FederatedConfigMap", "free", spec("1"));
    // The canary gets it; the run stops before wave 2 with its own code.
    let run = f.reconcile(&[]).exits(8);
    let object = format!("rollout of FederatedConfigMap {}/cfg", f.ns);
    assert!(
        run.stderr.contains(&format!(
            "awaiting approval: {object}: awaiting approval: wave 2"
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!(
            "kubefedctl rollout approve configmaps/cfg -n {}",
            f.ns
        )),
        "{}",
        run.stderr
    );
    assert_eq!(value(env, &f, "m1", "cfg"), "1");
    assert_eq!(value(env, &f, "m2", "cfg"), Value::Null);
    assert_eq!(value(env, &f, "m3", "free"), "1", "other objects go on");
    let rec = record(&pv(env, &f, "configmap-cfg")).expect("a record");
    assert_eq!(rec["awaitingApproval"], 2, "{rec}");
    let status = f.run(&["status", "configmaps", "-n", f.ns]).ok();
    assert!(
        status.stdout.contains(&format!(
            "rollout of {}/cfg: awaiting approval: wave 2",
            f.ns
        )),
        "{}",
        status.stdout
    );
    let events = get(env, "host", &format!("/api/v1/namespaces/{}/events", f.ns)).unwrap();
    let said: Vec<&Value> = (events["items"].as_array().unwrap().iter())
        .filter(|e| e["reason"] == "RolloutAwaitingApproval")
        .collect();
    assert_eq!(said.len(), 1, "{events}");
    assert!(
        said[0]["message"].as_str().unwrap().contains("wave 2"),
        "{events}"
    );
    // Run again: still waiting, no second Event, nothing written to the members.
    f.reset();
    f.reconcile(&[]).exits(8);
    assert_eq!(f.member_writes(), 0, "{:?}", f.writes());

    // Bad input: named, the right code, nothing written.
    let before = pv(env, &f, "configmap-cfg");
    let out = approve(&f, "configmaps/cfg", &["--wave", "5"]).exits(2);
    assert!(
        out.stderr.contains(&format!(
            "FederatedConfigMap {}/cfg: --wave 5: out of range",
            f.ns
        )),
        "{}",
        out.stderr
    );
    let out = approve(&f, "configmaps/cfg", &["--wave", "1"]).exits(2);
    assert!(
        out.stderr.contains("waves[0].approval is not true"),
        "{}",
        out.stderr
    );
    approve(&f, "configmaps/cfg", &["--wave", "0"]).exits(2);
    approve(&f, "configmaps", &[]).exits(2);
    let out = approve(&f, "configmaps/free", &[]).exits(3);
    assert!(
        out.stderr.contains(&format!(
            "FederatedConfigMap {}/free: no rollout in progress",
            f.ns
        )),
        "{}",
        out.stderr
    );
    let out = approve(&f, "configmaps/cfg", &["--dry-run"]).ok();
    assert!(
        out.stdout.contains("wave 2 approved by") && out.stdout.contains("(dry run)"),
        "{}",
        out.stdout
    );
    assert_eq!(
        pv(env, &f, "configmap-cfg")["metadata"]["annotations"],
        before["metadata"]["annotations"]
    );

    // Approved: recorded with who and when, as the API server says.
    let out = approve(&f, "configmaps/cfg", &[]).ok();
    assert!(out.stdout.contains("wave 2 approved by"), "{}", out.stdout);
    let given = approvals(&pv(env, &f, "configmap-cfg")).expect("approvals");
    assert_eq!(given[0]["wave"], 2, "{given}");
    assert!(
        given[0]["by"].as_str().is_some_and(|b| !b.is_empty()),
        "{given}"
    );
    assert!(given[0]["at"].is_string(), "{given}");
    assert_eq!(
        given[0]["unconfirmed"].is_null(),
        serves_self_subject_review(env),
        "{given}"
    );
    assert!(
        approve(&f, "configmaps/cfg", &[])
            .ok()
            .stdout
            .contains("already")
    );
    let run = f.reconcile(&[]).ok();
    assert!(
        run.stderr.contains(&format!("{object}: complete")),
        "{}",
        run.stderr
    );
    for (m, _) in MEMBERS {
        assert_eq!(value(env, &f, m, "cfg"), "1", "{m}");
    }
    let done = pv(env, &f, "configmap-cfg");
    assert!(
        record(&done).is_none() && approvals(&done).is_none(),
        "{done}"
    );

    // A new template needs a new approval: one given for version 2 does
    // not let version 3 through.
    let to = |v: &str| {
        patch(
            env,
            "host",
            &f.fed_path("federatedconfigmaps", "cfg"),
            json!({"spec": {"template": {"data": {"v": v}}}}),
        );
    };
    to("2");
    f.reconcile(&[]).exits(8);
    assert_eq!(
        (value(env, &f, "m1", "cfg"), value(env, &f, "m2", "cfg")),
        (json!("2"), json!("1"))
    );
    approve(&f, "configmaps/cfg", &[]).ok();
    to("3");
    let out = approve(&f, "configmaps/cfg", &[]).exits(3);
    assert!(out.stderr.contains("another version"), "{}", out.stderr);
    f.reconcile(&[]).exits(8);
    assert_eq!(
        (value(env, &f, "m1", "cfg"), value(env, &f, "m2", "cfg")),
        (json!("3"), json!("1"))
    );
    approve(&f, "configmaps/cfg", &[]).ok();
    f.reconcile(&[]).ok();
    for (m, _) in MEMBERS {
        assert_eq!(value(env, &f, m, "cfg"), "3", "{m}");
    }
}

#[test]
fn the_watch_waits_at_an_approval_gate_and_goes_on_once_approved() {
    let env = TestEnv::shared();
    let f = federation(env, "ro-gw", &["configmaps"]);
    let spec =
        |v: &str| json!({"template": {"data": {"v": v}}, "placement": {"clusterSelector": {}}});
    create(
        env,
        &f,
        "federatedconfigmaps",
        "FederatedConfigMap",
        "cfg",
        spec("1"),
        &gated_policy(&f),
    );
    let (_watch, log) = watch(env, &f, "watch-ro-gw.log");
    wait_watched("the canary and the gate", &log, || {
        value(env, &f, "m1", "cfg") == "1"
            && record(&pv(env, &f, "configmap-cfg")).is_some_and(|r| r["awaitingApproval"] == 2)
    });
    let object = format!("rollout of FederatedConfigMap {}/cfg", f.ns);
    wait_watched("the gate in the log", &log, || {
        crate::watch::log(&log).contains(&format!("{object}: awaiting approval: wave 2"))
    });
    assert_eq!(value(env, &f, "m2", "cfg"), Value::Null);
    assert_eq!(value(env, &f, "m3", "cfg"), Value::Null);
    approve(&f, "configmaps/cfg", &[]).ok();
    wait_watched("the second wave after the approval", &log, || {
        MEMBERS.iter().all(|(m, _)| value(env, &f, m, "cfg") == "1")
    });
    wait_watched("the rollout to complete", &log, || {
        let done = pv(env, &f, "configmap-cfg");
        record(&done).is_none() && approvals(&done).is_none() && pv_members(&done).len() == 3
    });
    // The watch logs the end after writing it: waited for, not raced.
    wait_watched("the watch to say the rollout is complete", &log, || {
        crate::watch::log(&log).contains(&format!("{object}: complete"))
    });
}
