//! `reconcile --watch`: a controller over the same engine. Changes to
//! federated objects, placement, overrides and RSPs reach the members; drift
//! is repaired; a member that was down catches up; a newly joined cluster
//! gets every placed object; leader election hands over when the leader
//! dies; SIGTERM releases the lease; `/metrics` is Prometheus text.
//! Bounds are generous (`wait_until`, 60 s): no wall-clock asserts.

use crate::fixtures::{
    Federation, KUBEFEDCTL, cm, gone, holder, patch, pod_mount, reconciler_token, wait_until,
};
use serde_json::json;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use testenv::{Faults, Mode, RequestRecord, TestEnv};

/// A free loopback port for `--metrics-bind-address`.
pub(crate) fn free_port() -> u16 {
    testenv::process::free_port().unwrap()
}

/// `kubefedctl reconcile --watch` in the background; stderr in `log`.
pub(crate) fn spawn_watch(kc: &Path, f: &Federation, log: &Path, extra: &[&str]) -> Watch {
    spawn_watch_in(kc, f, f.ns, log, extra)
}

/// [`spawn_watch`] of the objects of namespace `ns`.
pub(crate) fn spawn_watch_in(
    kc: &Path,
    f: &Federation,
    ns: &str,
    log: &Path,
    extra: &[&str],
) -> Watch {
    spawn_watch_over(kc, f, &["-n", ns], log, extra)
}

/// A watch process that dies with its test: a test that fails before its
/// SIGTERM must not leave it propagating (or retrying a gone environment).
pub(crate) struct Watch(Child);

impl std::ops::Deref for Watch {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Watch {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // Already waited for: both fail quietly.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// [`spawn_watch`] over what `selection` selects (`-n NS`, `-A`, ...).
fn spawn_watch_over(
    kc: &Path,
    f: &Federation,
    selection: &[&str],
    log: &Path,
    extra: &[&str],
) -> Watch {
    let child = Command::new(KUBEFEDCTL)
        .arg("--kubeconfig")
        .arg(kc)
        .args(["reconcile", "--watch", "--kubefed-namespace", f.fedns])
        .args(selection)
        .args([
            "--probe-interval",
            "1s",
            "--probe-timeout",
            "2s",
            "--timeout",
            "3s",
        ])
        .args(extra)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    Watch(child)
}

pub(crate) fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// A GET on the metrics port: (status, body).
pub(crate) fn http_get(port: u16, path: &str) -> (u16, String) {
    let addr = format!("127.0.0.1:{port}");
    let r = testenv::http::plain_get(&addr, path, std::time::Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("GET {addr}{path}: {e:#}"));
    (r.status, r.body)
}

/// Parses Prometheus text: sample name with labels → value. Fails on any
/// line that is not a comment or `name{labels} value`.
pub(crate) fn samples(text: &str) -> std::collections::BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (name, value) = l.rsplit_once(' ').unwrap_or_else(|| panic!("{l}"));
            let bare = name.split('{').next().unwrap();
            assert!(
                !bare.is_empty() && bare.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{l}"
            );
            (
                name.to_string(),
                value.parse().unwrap_or_else(|_| panic!("{l}")),
            )
        })
        .collect()
}

pub(crate) fn log(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn fed_path(f: &Federation, plural: &str, name: &str) -> String {
    format!(
        "/apis/{}/v1beta1/namespaces/{}/{plural}/{name}",
        f.group, f.ns
    )
}

#[test]
fn changes_reach_the_members_drift_is_repaired_and_members_catch_up() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "wt-a", &["configmaps", "deployments.apps"]);
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    // member2 joins while the controller runs.
    f.run(&["unjoin", &m2, "--cluster-context", "member2"]).ok();
    wait_until("member2's copy of the federation namespace to go", || {
        crate::fixtures::get(env, "member2", &format!("/api/v1/namespaces/{}", f.fedns)).is_none()
    });
    let port = free_port();
    let log_path = env.dir().join("watch-a.log");
    let addr = format!("127.0.0.1:{port}");
    let mut child = spawn_watch(
        &f.kc,
        &f,
        &log_path,
        &["--metrics-bind-address", &addr, "-v", "2"],
    );
    let data = |c: &str, name: &str| cm(env, c, f.ns, name).map(|o| o["data"]["v"].clone());

    f.create(
        env,
        "FederatedConfigMap",
        "web",
        json!({"template": {"data": {"v": "1"}}, "placement": {"clusterSelector": {}}}),
    );
    wait_until("member1 gets web", || {
        data("member1", "web") == Some(json!("1"))
    });
    wait_until("ready once the first full round is done", || {
        http_get(port, "/readyz").0 == 200
    });

    // The template changes.
    let web = fed_path(&f, "federatedconfigmaps", "web");
    patch(
        env,
        "host",
        &web,
        json!({"spec": {"template": {"data": {"v": "2"}}}}),
    );
    wait_until("the template change", || {
        data("member1", "web") == Some(json!("2"))
    });

    // Drift: a hand edit in the member is put back.
    patch(
        env,
        "member1",
        &format!("/api/v1/namespaces/{}/configmaps/web", f.ns),
        json!({"data": {"v": "by hand"}}),
    );
    wait_until("the drift repaired", || {
        data("member1", "web") == Some(json!("2"))
    });

    // A cluster joins: it gets every placed object.
    f.run(&["join", &m2, "--cluster-context", "member2"]).ok();
    wait_until("member2 gets web after joining", || {
        data("member2", "web") == Some(json!("2"))
    });

    // Overrides, then placement.
    patch(
        env,
        "host",
        &web,
        json!({"spec": {"overrides": [{"clusterName": m1, "clusterOverrides": [{"path": "/data/v", "value": "eu"}]}]}}),
    );
    wait_until("the override", || {
        data("member1", "web") == Some(json!("eu"))
    });
    patch(
        env,
        "host",
        &web,
        json!({"spec": {"placement": {"clusters": [{"name": m1}], "clusterSelector": null}}}),
    );
    wait_until("member2's copy removed with the placement", || {
        gone(
            env,
            "member2",
            &format!("/api/v1/namespaces/{}/configmaps/web", f.ns),
        )
    });

    // An RSP, then a change of it.
    f.create_deployment(env, "app");
    f.create_rsp(env, "app", 4, &[(m1.as_str(), 1), (m2.as_str(), 1)]);
    let replicas = |c: &str| {
        crate::fixtures::get(
            env,
            c,
            &format!("/apis/apps/v1/namespaces/{}/deployments/app", f.ns),
        )
        .and_then(|d| d["spec"]["replicas"].as_i64())
    };
    wait_until("the RSP's split", || {
        replicas("member1") == Some(2) && replicas("member2") == Some(2)
    });
    patch(
        env,
        "host",
        &format!(
            "/apis/scheduling.kubefed.io/v1alpha1/namespaces/{}/replicaschedulingpreferences/app",
            f.ns
        ),
        json!({"spec": {"totalReplicas": 6}}),
    );
    wait_until("the RSP change", || {
        replicas("member1") == Some(3) && replicas("member2") == Some(3)
    });

    // A type enabled while running is picked up without a restart.
    f.run(&["enable", "resourcequotas", "--federated-group", f.group])
        .ok();
    f.create(
        env,
        "FederatedResourceQuota",
        "quota",
        json!({"template": {"spec": {"hard": {"pods": "10"}}}, "placement": {"clusterSelector": {}}}),
    );
    wait_until("the new type's object reaches both members", || {
        ["member1", "member2"].iter().all(|c| {
            crate::fixtures::get(
                env,
                c,
                &format!("/api/v1/namespaces/{}/resourcequotas/quota", f.ns),
            )
            .is_some()
        })
    });

    // KubeFed's own metric names, for its dashboards.
    let text = http_get(port, "/metrics").1;
    for m in [&m1, &m2] {
        assert!(
            text.contains(&format!(
                "kubefedcluster_total{{state=\"ready\",cluster=\"{m}\"}} 1"
            )),
            "{text}"
        );
    }
    assert!(text.contains("joined_cluster_total 2"), "{text}");
    assert!(
        text.contains("reconcile_federated_resources_duration_seconds_count ")
            && !text.contains("reconcile_federated_resources_duration_seconds_count 0\n"),
        "rounds are observed under KubeFed's name: {text}"
    );
    assert!(
        samples(&text)["controller_runtime_reconcile_total{controller=\"sync\",result=\"success\"}"]
            > 0.0,
        "{text}"
    );

    // member2 goes down: member1 keeps syncing; member2 catches up later.
    let before = samples(&http_get(port, "/metrics").1);
    f.m2.set_faults(Faults {
        mode: Mode::Refuse,
        ..Faults::default()
    });
    wait_until("member2 seen as not ready", || {
        log(&log_path).contains(&format!("{m2}: not ready"))
    });
    assert!(http_get(port, "/metrics").1.contains(&format!(
        "kubefedcluster_total{{state=\"ready\",cluster=\"{m2}\"}} 0"
    )),);
    f.create(
        env,
        "FederatedConfigMap",
        "during-outage",
        json!({"template": {"data": {"v": "x"}}, "placement": {"clusterSelector": {}}}),
    );
    wait_until("member1 syncs during the outage", || {
        data("member1", "during-outage") == Some(json!("x"))
    });
    assert!(data("member2", "during-outage").is_none());
    f.m2.set_faults(Faults::default());
    wait_until("member2 catches up", || {
        data("member2", "during-outage") == Some(json!("x"))
    });

    // Metrics: Prometheus text, and the counters moved. A round counts its
    // writes when it ends (after the host write-backs), which can be just
    // after the member object shows up: wait for the counters.
    let writes = |s: &std::collections::BTreeMap<String, f64>, c: &str| {
        s.get(&format!(
            "kubefedctl_member_writes_total{{cluster=\"{c}\"}}"
        ))
        .copied()
        .unwrap_or(0.0)
    };
    wait_until("both members' write counters move", || {
        let now = samples(&http_get(port, "/metrics").1);
        writes(&now, &m1) > writes(&before, &m1) && writes(&now, &m2) > writes(&before, &m2)
    });
    let (status, text) = http_get(port, "/metrics");
    assert!(status == 200, "{status}");
    let after = samples(&text);
    assert!(
        after["kubefedctl_reconcile_rounds_total"] > before["kubefedctl_reconcile_rounds_total"]
    );
    assert!(after["kubefedctl_propagation_latency_seconds_count"] > 0.0);
    assert!(after[&format!("kubefedctl_member_requests_total{{cluster=\"{m1}\"}}")] > 0.0);
    assert_eq!(after["kubefedctl_leader"], 1.0);
    assert!(http_get(port, "/healthz").0 == 200);
    // -v 2: one line per member change.
    assert!(
        log(&log_path).contains(&format!("{m1}: created ConfigMap {}/during-outage", f.ns)),
        "{}",
        log(&log_path)
    );

    // SIGTERM: exit 0, the lease released.
    sigterm(&child);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log(&log_path));
    assert_eq!(holder(env, f.fedns), "", "the lease is released");
}

#[test]
fn only_the_leader_writes_and_the_standby_takes_over_when_it_dies() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "wt-b", &["configmaps"]);
    // The standby reaches the host through a proxy of its own, so its
    // requests can be told apart.
    let (standby_host, standby_kc) = crate::fixtures::own_host_kubeconfig(env, "wt-b-standby");
    let (log_a, log_b) = (
        env.dir().join("watch-b1.log"),
        env.dir().join("watch-b2.log"),
    );
    let mut leader = spawn_watch(&f.kc, &f, &log_a, &["--leader-elect"]);
    wait_until("the first instance leads", || {
        holder(env, f.fedns).contains(&format!("pid {}", leader.id()))
    });
    let mut standby = spawn_watch(&standby_kc, &f, &log_b, &["--leader-elect"]);
    f.create(
        env,
        "FederatedConfigMap",
        "one",
        json!({"template": {"data": {"v": "1"}}, "placement": {"clusterSelector": {}}}),
    );
    wait_until("the leader propagates", || {
        cm(env, "member1", f.ns, "one").is_some()
    });
    wait_until("the standby polls the lease", || {
        standby_host
            .records()
            .iter()
            .any(|r| r.resource == "leases")
    });
    // Besides the checks that the host is initialised and that KubeFed's
    // own controller-manager holds no lock, and the KubeFedConfig read at
    // start (the lock's timings), the standby only reads the lease, and
    // writes nothing.
    let not_lease: Vec<String> = standby_host
        .records()
        .iter()
        .filter(|r| {
            !["leases", "customresourcedefinitions", "kubefedconfigs"]
                .contains(&r.resource.as_str())
        })
        .filter(|r| r.name != "kubefed-controller-manager")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(
        not_lease.is_empty(),
        "the standby only watches the lease: {not_lease:?}"
    );
    assert!(standby_host.records().iter().all(|r| r.method == "GET"));

    // The leader dies without releasing: the standby takes over once the
    // lease expires, and writes.
    leader.kill().unwrap();
    leader.wait().unwrap();
    wait_until("the standby takes over", || {
        holder(env, f.fedns).contains(&format!("pid {}", standby.id()))
    });
    f.create(
        env,
        "FederatedConfigMap",
        "two",
        json!({"template": {"data": {"v": "2"}}, "placement": {"clusterSelector": {}}}),
    );
    wait_until("the new leader propagates", || {
        cm(env, "member2", f.ns, "two").is_some()
    });
    assert!(
        standby_host
            .records()
            .iter()
            .any(|r| r.method != "GET" && r.resource != "leases"),
        "the new leader writes the host"
    );
    assert!(
        log(&log_b).contains("took over the federation lock"),
        "{}",
        log(&log_b)
    );

    sigterm(&standby);
    let status = standby.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log(&log_b));
    assert_eq!(holder(env, f.fedns), "");
}

#[test]
fn the_deployments_own_rights_suffice_for_the_watch_inside_a_pod() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "wt-c", &["configmaps"]);
    f.run(&[
        "init",
        "--reconciler",
        "deployment",
        "--image",
        "registry.example/kubefedctl:test",
    ])
    .ok();
    // No pod runs here (no scheduler, no kubelet): run its command as the
    // pod would, with nothing but the service account's token.
    let pod = pod_mount(env, "wt-c", &reconciler_token(env, f.fedns), f.fedns);
    let (hostport, log_path) = (f.host.url(), env.dir().join("watch-c.log"));
    let (host, port) = hostport
        .trim_start_matches("https://")
        .rsplit_once(':')
        .unwrap();
    let home = pod.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut child = Command::new(KUBEFEDCTL)
        .args(["reconcile", "--watch", "--leader-elect", "-n", f.ns])
        .args([
            "--kubefed-namespace",
            f.fedns,
            "--probe-interval",
            "1s",
            "-v",
            "2",
        ])
        .env_remove("KUBECONFIG")
        .env("HOME", &home)
        .env("KUBERNETES_SERVICE_HOST", host)
        .env("KUBERNETES_SERVICE_PORT", port)
        .env("KUBEFEDCTL_SERVICE_ACCOUNT_DIR", &pod)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    f.create(
        env,
        "FederatedConfigMap",
        "in-pod",
        json!({"template": {"data": {"v": "1"}}, "placement": {"clusterSelector": {}}}),
    );
    wait_until("the watch in the pod propagates", || {
        cm(env, "member1", f.ns, "in-pod").is_some() && cm(env, "member2", f.ns, "in-pod").is_some()
    });
    let fed =
        crate::fixtures::get(env, "host", &fed_path(&f, "federatedconfigmaps", "in-pod")).unwrap();
    wait_until("its status written back", || {
        crate::fixtures::get(env, "host", &fed_path(&f, "federatedconfigmaps", "in-pod"))
            .is_some_and(|o| o["status"]["conditions"][0]["type"] == "Propagation")
    });
    assert!(
        fed["metadata"]["finalizers"]
            .to_string()
            .contains("kubefed.io/sync-controller")
    );
    sigterm(&child);
    let status = child.wait().unwrap();
    let text = log(&log_path);
    assert!(status.success(), "{status:?}\n{text}");
    assert!(
        !text.contains("failed:") && !text.contains("forbidden"),
        "{text}"
    );
}

/// `--watch -l`: the selector chooses objects, not the FederatedNamespace
/// (unlabelled here) that places them.
#[test]
fn a_selector_does_not_hide_the_federated_namespace_from_the_watch() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "wt-sel", &["configmaps"]);
    let log_path = env.dir().join("watch-sel.log");
    let labelled = |name: &str, team: &str| {
        let path = format!(
            "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps",
            f.group, f.ns
        );
        crate::fixtures::post(
            env,
            "host",
            &path,
            json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": "FederatedConfigMap",
                "metadata": {"name": name, "namespace": f.ns, "labels": {"team": team}},
                "spec": {"template": {"data": {"v": "1"}}, "placement": {"clusterSelector": {}}}}),
        );
    };
    // The namespace is in the members already.
    f.reconcile(&[]).ok();
    labelled("mine", "shop");
    labelled("theirs", "ops");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &["-l", "team=shop"]);
    wait_until("the selected object propagates", || {
        cm(env, "member1", f.ns, "mine").is_some() && cm(env, "member2", f.ns, "mine").is_some()
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(cm(env, "member1", f.ns, "mine").is_some(), "and stays");
    assert!(
        cm(env, "member1", f.ns, "theirs").is_none(),
        "-l leaves the rest alone"
    );
    sigterm(&watch);
    let status = watch.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log(&log_path));
}

/// The KubeFedConfig's clusterHealthCheck thresholds: under --watch a
/// member turns not ready only after failureThreshold failed probes in a
/// row, as upstream's cluster controller decides.
#[test]
fn a_member_turns_not_ready_after_the_failure_threshold() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "wt-thr", &["configmaps"]);
    let threshold =
        |n: u32| f.configure(env, json!({"clusterHealthCheck": {"failureThreshold": n}}));
    threshold(1000);
    let log_path = env.dir().join("watch-thr.log");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &[]);
    let m2 = f.cluster("m2");
    wait_until("the watch runs", || {
        log(&log_path).contains("watching the federation")
    });
    // Down for several probes (1 s apart): below the threshold, still ready.
    f.m2.set_faults(Faults {
        mode: Mode::Refuse,
        ..Faults::default()
    });
    std::thread::sleep(std::time::Duration::from_secs(6));
    f.m2.set_faults(Faults::default());
    assert!(
        !log(&log_path).contains(&format!("{m2}: not ready")),
        "{}",
        log(&log_path)
    );
    // A threshold of 1 (the watch reads the change): the next failure counts.
    threshold(1);
    std::thread::sleep(std::time::Duration::from_secs(3));
    f.m2.set_faults(Faults {
        mode: Mode::Refuse,
        ..Faults::default()
    });
    wait_until("member2 seen as not ready", || {
        log(&log_path).contains(&format!("{m2}: not ready"))
    });
    f.m2.set_faults(Faults::default());
    sigterm(&watch);
    let status = watch.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log(&log_path));
}

/// As KubeFed's controller, the watch says in each FederatedTypeConfig's
/// status whether it propagates the type, and `disable` waits for it to
/// stop (upstream's verifyPropagationControllerStopped).
#[test]
fn type_configs_say_whether_the_watch_propagates_them() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "wt-ftc", &["configmaps", "secrets"]);
    let ftc = |name: &str| {
        crate::fixtures::get(
            env,
            "host",
            &format!(
                "/apis/core.kubefed.io/v1beta1/namespaces/{}/federatedtypeconfigs/{name}",
                f.fedns
            ),
        )
        .unwrap()
    };
    let log_path = env.dir().join("watch-ftc.log");
    let watch = spawn_watch(&f.kc, &f, &log_path, &[]);
    wait_until("the types are propagated", || {
        ["configmaps", "secrets"]
            .iter()
            .all(|t| ftc(t)["status"]["propagationController"] == "Running")
    });
    let cm = ftc("configmaps");
    assert_eq!(
        cm["status"]["observedGeneration"],
        cm["metadata"]["generation"]
    );
    // disable waits until the watch has stopped propagating the type.
    let run = f.run(&["disable", "secrets"]).ok();
    assert!(
        run.stdout.contains("Disabled propagation"),
        "{}",
        run.stdout
    );
    // (it fails after 10 s otherwise), then deletes the FTC.
    assert!(
        crate::fixtures::get(
            env,
            "host",
            &format!(
                "/apis/core.kubefed.io/v1beta1/namespaces/{}/federatedtypeconfigs/secrets",
                f.fedns
            )
        )
        .is_none()
    );
    assert_eq!(
        ftc("configmaps")["status"]["propagationController"],
        "Running"
    );
    // Stopped: nothing is propagated any more.
    sigterm(&watch);
    let mut watch = watch;
    let status = watch.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log(&log_path));
    assert_eq!(
        ftc("configmaps")["status"]["propagationController"],
        "NotRunning"
    );
}

/// The most requests matching `which` that were in flight at once.
fn max_in_flight(
    records: &[testenv::RequestRecord],
    which: impl Fn(&testenv::RequestRecord) -> bool,
) -> usize {
    let mut edges: Vec<(std::time::Instant, i32)> = Vec::new();
    for r in records.iter().filter(|r| which(r)) {
        if let (Some(start), Some(end)) = (r.received, r.answered) {
            edges.push((start, 1));
            edges.push((end, -1));
        }
    }
    // An answer before a start at the same instant: not overlapping.
    edges.sort_by_key(|&(t, d)| (t, d));
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

/// KubeFedConfig `syncController.maxConcurrentReconciles` sets how many
/// requests the watch has in flight per member (read at start, as upstream).
#[test]
fn the_watch_works_on_as_many_objects_at_once_as_the_config_says() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "wt-mcr", &["configmaps"]);
    f.configure(
        env,
        json!({"syncController": {"maxConcurrentReconciles": 2}}),
    );
    let names = f.create_configmaps(env, "mcr", 10);
    f.m1.set_faults(Faults {
        latency: std::time::Duration::from_millis(300),
        only: Some(std::sync::Arc::new(|r: &testenv::RequestRecord| {
            r.verb == "create"
        })),
        ..Faults::default()
    });
    f.reset();
    let log_path = env.dir().join("watch-mcr.log");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &[]);
    wait_until("every object reached member1", || {
        names.iter().all(|n| cm(env, "member1", f.ns, n).is_some())
    });
    sigterm(&watch);
    let status = watch.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log(&log_path));
    let creates = |r: &testenv::RequestRecord| r.verb == "create" && r.resource == "configmaps";
    let records = f.m1.records();
    assert_eq!(records.iter().filter(|r| creates(r)).count(), 10);
    assert_eq!(
        max_in_flight(&records, creates),
        2,
        "{:#?}",
        records.iter().filter(|r| creates(r)).collect::<Vec<_>>()
    );
}

/// Under churn (a member's status changing ten times a second), the watch
/// writes a collected object's status at most about once a second, and the
/// last status is the one that stays.
#[test]
fn status_writes_are_coalesced_under_churn() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "wt-churn", &["deployments.apps"]);
    f.collect_status(env, &["deployments.apps"]);
    f.create_deployment(env, "busy");
    let log_path = env.dir().join("watch-churn.log");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &[]);
    let path = format!("/apis/apps/v1/namespaces/{}/deployments/busy", f.ns);
    wait_until("the deployment reached member1", || {
        crate::fixtures::get(env, "member1", &path).is_some()
    });
    std::thread::sleep(std::time::Duration::from_secs(2));
    f.reset();
    // The test is member1's deployment controller, and a busy one.
    let started = std::time::Instant::now();
    let mut last = 0;
    for i in 1..=30 {
        last = i;
        patch(
            env,
            "member1",
            &format!("{path}/status"),
            json!({"status": {"replicas": 100, "readyReplicas": i}}),
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let churn = started.elapsed();
    let fed = format!(
        "/apis/{}/v1beta1/namespaces/{}/federateddeployments/busy",
        f.group, f.ns
    );
    wait_until("the last status is collected", || {
        let obj = crate::fixtures::get(env, "host", &fed).unwrap();
        obj["status"]["clusters"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["remoteStatus"]["readyReplicas"] == last)
    });
    sigterm(&watch);
    let status = watch.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log(&log_path));
    let writes: Vec<_> = f
        .host
        .records()
        .into_iter()
        .filter(|r| {
            r.resource == "federateddeployments" && r.subresource == "status" && r.is_write()
        })
        .collect();
    // One a second at most, plus the one at the start and the last one.
    let most = churn.as_secs() as usize + 2;
    assert!(
        !writes.is_empty() && writes.len() <= most,
        "{} status writes in {churn:?} of churn (at most {most})",
        writes.len()
    );
}

/// `disable --timeout`: a controller that keeps saying it propagates the
/// type makes disable give up after the timeout, keeping the CRD and the
/// type. The controller is KubeFed's own controller-manager, which
/// reports the type's propagation Running and then hangs (SIGSTOP): its
/// status keeps saying so. An environment of its own: a cluster-scoped
/// KubeFed takes other federations' member copies for orphans
/// (`handover`'s module doc).
#[test]
fn disable_gives_up_on_a_controller_that_keeps_propagating() {
    let env = TestEnv::private(&testenv::SHARED_CLUSTERS).unwrap();
    let env = &env;
    let f = Federation::new(env, "wt-dis", &["configmaps"]);
    let ftc = format!(
        "/apis/core.kubefed.io/v1beta1/namespaces/{}/federatedtypeconfigs/configmaps",
        f.fedns
    );
    let Some(mut kubefed) = crate::handover::KubeFed::start(env, &f, "disable") else {
        return;
    };
    wait_until("KubeFed to report the type's propagation running", || {
        kubefed.assert_running();
        crate::fixtures::get(env, "host", &ftc)
            .is_some_and(|t| t["status"]["propagationController"] == "Running")
    });
    kubefed.signal(libc::SIGSTOP);
    let run = f
        .run(&[
            "disable",
            "configmaps",
            "--delete-crd",
            "--yes",
            "--timeout",
            "1s",
        ])
        .fails();
    assert!(
        run.stderr.contains("still runs after 1s") && run.stderr.contains("--timeout waits longer"),
        "{}",
        run.stderr
    );
    assert!(
        crate::fixtures::get(env, "host", &ftc).is_some(),
        "the type is kept"
    );
    let crd = format!(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/federatedconfigmaps.{}",
        f.group
    );
    assert!(
        crate::fixtures::get(env, "host", &crd).is_some(),
        "the CRD is kept"
    );
}

/// The member's host Secret token and the recorded expiry of a
/// KubeFedCluster (`kubefedctl.kubefed.io/token-expires-at`).
fn token_and_expiry(env: &TestEnv, f: &Federation, cluster: &str) -> (String, String) {
    let (kfc, secret) = f.kubefed_cluster(env, cluster);
    let s = crate::fixtures::get(env, "host", &secret).unwrap();
    let expires = kfc["metadata"]["annotations"]["kubefedctl.kubefed.io/token-expires-at"]
        .as_str()
        .unwrap_or("")
        .to_string();
    (s["data"]["token"].as_str().unwrap().to_string(), expires)
}

/// Whether member1's API server takes a token, as whom (a TokenReview).
fn token_user(env: &TestEnv, token_b64: &str) -> Option<String> {
    let token = crate::fixtures::b64(token_b64);
    let (_, review) = crate::fixtures::create(
        env,
        "member1",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}),
    );
    (review["status"]["authenticated"] == true).then(|| {
        review["status"]["user"]["username"]
            .as_str()
            .unwrap()
            .to_string()
    })
}

/// `join --token-ttl`: a bound token that expires replaces the token
/// Secret (which goes), the KubeFedCluster records its lifetime, `rotate`
/// issues the next one while the old one stays valid, and the watch
/// rotates a token that is due by itself and carries on propagating.
#[test]
fn short_lived_tokens_replace_long_lived_ones_and_are_rotated_by_rotate_and_the_watch() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "wt-tok", &["configmaps"]);
    let m1 = f.cluster("m1");
    let sa_secret = format!("/api/v1/namespaces/{}/secrets/{m1}-host", f.fedns);
    assert!(
        crate::fixtures::get(env, "member1", &sa_secret).is_some(),
        "a long-lived join first"
    );

    let joined = f
        .run(&[
            "join",
            &m1,
            "--cluster-context",
            "member1",
            "--token-ttl",
            "20m",
            "--error-on-existing=false",
        ])
        .ok();
    assert!(
        joined
            .stdout
            .contains(&format!("secret/{m1}-host deleted ({m1})")),
        "{}",
        joined.stdout
    );
    assert!(
        crate::fixtures::get(env, "member1", &sa_secret).is_none(),
        "its never-expiring token is gone"
    );
    let (first, expires) = token_and_expiry(env, &f, &m1);
    let left = crate::fixtures::seconds_until(&expires);
    assert!(
        (1100..=1200).contains(&left),
        "expires in 20m: {expires} ({left}s)"
    );
    let whom = format!("system:serviceaccount:{}:{m1}-host", f.fedns);
    assert_eq!(token_user(env, &first).as_deref(), Some(whom.as_str()));

    // rotate: a new token, the old one still valid until it expires.
    let rotated = f.run(&["rotate"]).ok();
    assert!(
        rotated
            .stdout
            .contains(&format!("{m1}: token rotated, expires at")),
        "{}",
        rotated.stdout
    );
    assert!(
        !rotated.stdout.contains(&f.cluster("m2")),
        "long-lived members are left alone"
    );
    let (second, _) = token_and_expiry(env, &f, &m1);
    assert_ne!(first, second);
    assert_eq!(
        token_user(env, &first).as_deref(),
        Some(whom.as_str()),
        "the old token is still good"
    );
    assert_eq!(token_user(env, &second).as_deref(), Some(whom.as_str()));
    let named = f.run(&["rotate", &f.cluster("m2")]);
    assert_eq!(named.code, 3, "{}", named.stderr);
    assert!(
        named
            .stderr
            .contains("its token never expires (kubefedctl join"),
        "{}",
        named.stderr
    );

    // The watch renews a token that is due (recorded as expiring within
    // the last fifth of its lifetime), then propagates with it.
    let soon = crate::fixtures::rfc3339_in(60);
    patch(
        env,
        "host",
        &format!(
            "/apis/core.kubefed.io/v1beta1/namespaces/{}/kubefedclusters/{m1}",
            f.fedns
        ),
        json!({"metadata": {"annotations": {"kubefedctl.kubefed.io/token-expires-at": soon}}}),
    );
    let log_path = env.dir().join("watch-tok.log");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &[]);
    wait_until("the watch to rotate the due token", || {
        token_and_expiry(env, &f, &m1).1 != soon
    });
    let (third, _) = token_and_expiry(env, &f, &m1);
    assert_ne!(third, second);
    assert!(
        log(&log_path).contains(&format!("{m1}: token rotated")),
        "{}",
        log(&log_path)
    );
    f.create(
        env,
        "FederatedConfigMap",
        "after-rotation",
        json!({"template": {"data": {"a": "1"}}, "placement": {"clusters": [{"name": m1}]}}),
    );
    wait_until("the watch to propagate with the new token", || {
        cm(env, "member1", f.ns, "after-rotation").is_some()
    });
    sigterm(&watch);
    watch.wait().unwrap();
}

/// A federated CRD and objects of its type, there before the watch starts:
/// its first round propagates the CRDs, waits until the members serve the
/// type, then the objects; no member is ever told it does not serve them.
#[test]
fn a_federated_crd_and_its_objects_converge_in_the_first_round() {
    let env = TestEnv::shared();
    let spec = crate::reconcile::crd_first_type(env, "cogwheels", "Cogwheel");
    let name = "cogwheels.crdfirst.example.com";
    let f = Federation::new(
        env,
        "wt-crd",
        &["customresourcedefinitions.apiextensions.k8s.io", name],
    );
    let v1 = format!("{}/v1beta1", f.group);
    crate::fixtures::post(
        env,
        "host",
        &format!(
            "/apis/{}/v1beta1/federatedcustomresourcedefinitions",
            f.group
        ),
        json!({"apiVersion": v1, "kind": "FederatedCustomResourceDefinition", "metadata": {"name": name},
            "spec": {"template": {"spec": spec}, "placement": {"clusterSelector": {}}}}),
    );
    for s in ["s1", "s2"] {
        crate::fixtures::post(
            env,
            "host",
            &format!(
                "/apis/{}/v1beta1/namespaces/{}/federatedcogwheels",
                f.group, f.ns
            ),
            json!({"apiVersion": v1, "kind": "FederatedCogwheel", "metadata": {"name": s, "namespace": f.ns},
                "spec": {"template": {"spec": {"size": 3}}, "placement": {"clusterSelector": {}}}}),
        );
    }
    let log_path = env.dir().join("watch-crd-first.log");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &[]);
    let cogwheel = |m: &str, s: &str| {
        let path = format!(
            "/apis/crdfirst.example.com/v1/namespaces/{}/cogwheels/{s}",
            f.ns
        );
        env.request(m, "GET", &path, None).unwrap().status == 200
    };
    wait_until("every cogwheel in every member", || {
        ["member1", "member2"]
            .iter()
            .all(|m| cogwheel(m, "s1") && cogwheel(m, "s2"))
    });
    sigterm(&watch);
    let status = watch.wait().unwrap();
    let text = log(&log_path);
    assert!(status.success(), "{status:?}\n{text}");
    assert!(!text.contains("does not serve"), "{text}");
    for m in ["member1", "member2"] {
        let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}");
        let r = env.request(m, "DELETE", &path, None).unwrap();
        assert!(r.status == 200 || r.status == 404, "{}", r.body);
    }
}

/// A full round over more objects than `--round-size` runs as slices of
/// that size, one after another: every object converges, and a managed
/// copy in a member that no federated object accounts for loses its
/// managed label (upstream's orphan cleanup) in the slice that covers its
/// key. The namespace's slice comes first, alone. Rounds over marked objects are
/// cut to the same size.
#[test]
fn a_full_round_larger_than_the_round_size_runs_in_slices() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "wt-slice", &["configmaps"]);
    let r = env
        .request(
            "member1",
            "POST",
            "/api/v1/namespaces",
            Some(&json!({"metadata": {"name": f.ns}}).to_string()),
        )
        .unwrap();
    assert!(r.status == 201 || r.status == 409, "{}", r.body);
    crate::fixtures::post(
        env,
        "member1",
        &format!("/api/v1/namespaces/{}/configmaps", f.ns),
        json!({"metadata": {"name": "orphan", "labels": {"kubefed.io/managed": "true"}}}),
    );
    let names: Vec<String> = (0..5).map(|i| format!("c{i}")).collect();
    for n in &names {
        f.create(
            env,
            "FederatedConfigMap",
            n,
            json!({"template": {"data": {"v": "1"}}, "placement": {"clusterSelector": {}}}),
        );
    }
    let log_path = env.dir().join("watch-slices.log");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &["--round-size", "2", "-v", "2"]);
    let all_at = |v: &str| {
        names.iter().all(|n| {
            ["member1", "member2"]
                .iter()
                .all(|m| cm(env, m, f.ns, n).is_some_and(|o| o["data"]["v"] == v))
        })
    };
    let orphan_managed = || {
        cm(env, "member1", f.ns, "orphan").unwrap()["metadata"]["labels"]["kubefed.io/managed"]
            .is_string()
    };
    wait_until("every copy, and the orphan unlabelled", || {
        all_at("1") && !orphan_managed()
    });
    for n in &names {
        patch(
            env,
            "host",
            &fed_path(&f, "federatedconfigmaps", n),
            json!({"spec": {"template": {"data": {"v": "2"}}}}),
        );
    }
    wait_until("every change", || all_at("2"));
    sigterm(&watch);
    let status = watch.wait().unwrap();
    let text = log(&log_path);
    assert!(status.success(), "{status:?}\n{text}");

    // The namespace goes first: no ConfigMap is sent to a member before
    // its namespace is there (member2 had none).
    let missing = format!("namespaces \"{}\" not found", f.ns);
    assert!(!text.contains(&missing), "{text}");
    // The FederatedNamespace, five ConfigMaps and the orphan: 7 keys, in 4
    // slices, the FederatedNamespace alone in the first. (A member whose
    // watch lists late makes another full round: each is complete, in
    // slices of at most 2. Rounds over changed keys between the slices may
    // take some of a later slice's keys.)
    let slices: Vec<(usize, usize, usize)> = text
        .lines()
        .filter_map(|l| {
            let rest = l.split_once("full round, slice ")?.1;
            let (nth, rest) = rest.split_once(" of ")?;
            let (of, rest) = rest.split_once(": ")?;
            let n = rest.split_once(" object")?.0;
            Some((nth.parse().ok()?, of.parse().ok()?, n.parse().ok()?))
        })
        .collect();
    let full_rounds: Vec<&[(usize, usize, usize)]> =
        slices.chunk_by(|_, next| next.0 != 1).collect();
    for r in &full_rounds {
        let order: Vec<(usize, usize)> = r.iter().map(|s| (s.0, s.1)).collect();
        let whole: Vec<(usize, usize)> = (1..=r[0].1).map(|i| (i, r[0].1)).collect();
        assert_eq!(order, whole, "{text}");
        assert!(r.iter().all(|s| s.2 <= 2), "{text}");
    }
    assert!(
        full_rounds
            .iter()
            .any(|r| r.len() == 4 && r[0].2 == 1 && r.iter().map(|s| s.2).sum::<usize>() <= 7),
        "{text}"
    );
    assert!(
        !text.contains("full round\n"),
        "never one round over all: {text}"
    );
    let rounds: Vec<usize> = text
        .lines()
        .filter_map(|l| {
            l.split_once("round over ")?
                .1
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    assert!(!rounds.is_empty(), "{text}");
    assert!(rounds.iter().all(|n| *n <= 2), "{rounds:?}\n{text}");
}

/// Faults that answer each ConfigMap request of `verb` after a second.
fn configmap_writes_after_a_second(verb: &'static str) -> Faults {
    Faults {
        latency: std::time::Duration::from_secs(1),
        only: Some(std::sync::Arc::new(move |r: &testenv::RequestRecord| {
            r.verb == verb && r.resource == "configmaps"
        })),
        ..Faults::default()
    }
}

/// A change made during a full round waits for its own slice only, not
/// for the round's end: queue rounds run between the slices for the keys
/// no running slice holds. Here member1 answers each ConfigMap create after
/// a second, so the first full round over 16 objects, in slices of one
/// (two at a time), takes 8 s or more; the first object, changed as soon
/// as its copy exists, reaches both members while later slices are still
/// creating theirs. (Before, it waited for the last slice.)
#[test]
fn a_change_during_a_full_round_waits_only_for_its_own_slice() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "wt-hold", &["configmaps"]);
    let names = f.create_configmaps(env, "hold", 16);
    f.m1.set_faults(configmap_writes_after_a_second("create"));
    let log_path = env.dir().join("watch-hold.log");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &["--round-size", "1", "-v", "2"]);
    let first = &names[0];
    wait_until("the first object's copy in member1", || {
        cm(env, "member1", f.ns, first).is_some()
    });
    patch(
        env,
        "host",
        &fed_path(&f, "federatedconfigmaps", first),
        json!({"spec": {"template": {"data": {"n": "changed"}}}}),
    );
    let changed = |m: &str| cm(env, m, f.ns, first).is_some_and(|o| o["data"]["n"] == "changed");
    wait_until("the change in both members", || {
        changed("member1") && changed("member2")
    });
    let created: Vec<&String> = (names.iter())
        .filter(|n| cm(env, "member1", f.ns, n).is_some())
        .collect();
    assert!(
        created.len() < names.len(),
        "the change waited for the full round's end: {created:?} were all created first\n{}",
        log(&log_path)
    );
    wait_until("every copy in member1", || {
        names.iter().all(|n| cm(env, "member1", f.ns, n).is_some())
    });
    assert!(changed("member1"), "no later slice undid the change");
    sigterm(&watch);
    let status = watch.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log(&log_path));
}

/// A slice lets each object it has nothing to write for go at once, not
/// at the slice's end: a change to it is taken by a round of its own
/// meanwhile. Here a first watch syncs 8 ConfigMaps and stops; 7 of them
/// change on the host; member1 then answers each ConfigMap update after a
/// second, one at a time (`--concurrency 1`), so the next watch's first
/// slice (the 8 ConfigMaps) takes 7 s or more. The unchanged one, changed
/// once that slice has written its first update, reaches both members
/// while the slice is still updating the others. (Before, it waited for
/// the slice's end.)
#[test]
fn a_change_during_a_slice_to_an_object_it_left_alone_waits_for_no_slice() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "wt-settle", &["configmaps"]);
    let names = f.create_configmaps(env, "settle", 8);
    let at = |m: &str, n: &str, v: &str| cm(env, m, f.ns, n).is_some_and(|o| o["data"]["v"] == v);
    let first_log = env.dir().join("watch-settle-first.log");
    let mut watch = spawn_watch(&f.kc, &f, &first_log, &[]);
    wait_until("every copy in both members", || {
        (names.iter()).all(|n| cm(env, "member1", f.ns, n).is_some())
            && (names.iter()).all(|n| cm(env, "member2", f.ns, n).is_some())
    });
    sigterm(&watch);
    let status = watch.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log(&first_log));

    let (alone, changed) = names.split_first().unwrap();
    for n in changed {
        patch(
            env,
            "host",
            &fed_path(&f, "federatedconfigmaps", n),
            json!({"spec": {"template": {"data": {"v": "2"}}}}),
        );
    }
    f.m1.set_faults(configmap_writes_after_a_second("update"));
    let log_path = env.dir().join("watch-settle.log");
    let flags = ["--round-size", "8", "--concurrency", "1", "-v", "2"];
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &flags);
    wait_until("a first update in member1", || {
        changed.iter().any(|n| at("member1", n, "2"))
    });
    patch(
        env,
        "host",
        &fed_path(&f, "federatedconfigmaps", alone),
        json!({"spec": {"template": {"data": {"v": "3"}}}}),
    );
    wait_until("the change in both members", || {
        at("member1", alone, "3") && at("member2", alone, "3")
    });
    let updated: Vec<&String> = changed.iter().filter(|n| at("member1", n, "2")).collect();
    let text = log(&log_path);
    assert!(
        text.contains("full round, slice 2 of 2: 8 object(s)"),
        "the ConfigMaps were one slice: {text}"
    );
    assert!(
        updated.len() < changed.len(),
        "the change waited for the slice's end: {updated:?} were all updated first\n{text}"
    );
    wait_until("every update in member1", || {
        changed.iter().all(|n| at("member1", n, "2"))
    });
    assert!(
        at("member1", alone, "3"),
        "the slice did not undo the change"
    );
    sigterm(&watch);
    let status = watch.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log(&log_path));
}

/// The shard of `--shard I/3` that owns namespace `ns` and what is in it.
fn shard_of(ns: &str) -> u32 {
    use kubefedctl::core::{describe::ObjectKey, run::shard::Shard};
    (0..3)
        .find(|&index| Shard { index, count: 3 }.owns(&ObjectKey::new(ns, ns)))
        .unwrap()
}

/// Shard `i` of 3, reaching the host through a proxy of its own (so that
/// its host requests can be told apart), `-v 2` (a line per member change).
fn spawn_shard(env: &TestEnv, f: &Federation, i: u32, log: &Path) -> (Watch, testenv::Proxy) {
    let (proxy, kc) = crate::fixtures::own_host_kubeconfig(env, &format!("wt-shard-{i}"));
    let shard = format!("{i}/3");
    let selection = ["-A", "--shard", &shard, "--leader-elect"];
    let child = spawn_watch_over(&kc, f, &selection, log, &["-v", "2"]);
    (child, proxy)
}

/// The namespaces of the member objects a shard's log says it wrote.
fn written_namespaces(log_text: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    for line in log_text.lines() {
        for kind in [" ConfigMap ", " Namespace "] {
            if let Some((_, rest)) = line.split_once(kind) {
                let object = rest.split_whitespace().next().unwrap_or("");
                out.insert(object.split('/').next().unwrap_or("").to_string());
            }
        }
    }
    out
}

/// Three watch shards share one federation: each writes only what it owns
/// (host writes through its own proxy, member writes as its log says), one
/// killed mid-churn leaves the others' objects flowing, and once back it
/// catches up its own objects and nothing else.
#[test]
fn three_watch_shards_split_the_work_and_one_killed_catches_up_alone() {
    let env = &TestEnv::private(&testenv::SHARED_CLUSTERS).unwrap();
    let f = Federation::new(env, "wt-shard", &["configmaps"]);
    f.configure(
        env,
        json!({"leaderElect": {"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "1s"}}),
    );
    // Two namespaces per shard, each with a FederatedNamespace and two
    // FederatedConfigMaps.
    let mut namespaces: Vec<String> = Vec::new();
    for n in 0.. {
        let ns = format!("shd-{n}");
        if namespaces
            .iter()
            .filter(|o| shard_of(o) == shard_of(&ns))
            .count()
            < 2
        {
            namespaces.push(ns);
        }
        if namespaces.len() == 6 {
            break;
        }
    }
    let group_path =
        |ns: &str, plural: &str| format!("/apis/{}/v1beta1/namespaces/{ns}/{plural}", f.group);
    let v1 = format!("{}/v1beta1", f.group);
    for ns in &namespaces {
        crate::fixtures::post(
            env,
            "host",
            "/api/v1/namespaces",
            json!({"metadata": {"name": ns}}),
        );
        crate::fixtures::post(
            env,
            "host",
            &group_path(ns, "federatednamespaces"),
            json!({"apiVersion": v1, "kind": "FederatedNamespace", "metadata": {"name": ns, "namespace": ns},
                   "spec": {"placement": {"clusterSelector": {}}}}),
        );
        for c in ["c1", "c2"] {
            crate::fixtures::post(
                env,
                "host",
                &group_path(ns, "federatedconfigmaps"),
                json!({"apiVersion": v1, "kind": "FederatedConfigMap", "metadata": {"name": c, "namespace": ns},
                       "spec": {"template": {"data": {"v": "1"}}, "placement": {"clusterSelector": {}}}}),
            );
        }
    }
    let logs: Vec<_> = (0..3)
        .map(|i| env.dir().join(format!("watch-shard-{i}.log")))
        .collect();
    let mut shards: Vec<(Watch, testenv::Proxy)> = (0..3)
        .map(|i| spawn_shard(env, &f, i, &logs[i as usize]))
        .collect();
    let at = |ns: &str, v: &str| {
        ["member1", "member2"].iter().all(|m| {
            ["c1", "c2"]
                .iter()
                .all(|c| cm(env, m, ns, c).is_some_and(|o| o["data"]["v"] == v))
        })
    };
    wait_until("every shard propagates its namespaces", || {
        namespaces.iter().all(|ns| at(ns, "1"))
    });
    let set_all = |v: &str| {
        for ns in &namespaces {
            for c in ["c1", "c2"] {
                let path = format!("{}/{c}", group_path(ns, "federatedconfigmaps"));
                patch(
                    env,
                    "host",
                    &path,
                    json!({"spec": {"template": {"data": {"v": v}}}}),
                );
            }
        }
    };
    set_all("2");
    wait_until("the first churn reaches every member", || {
        namespaces.iter().all(|ns| at(ns, "2"))
    });

    // Host writes: each shard's only on what it owns; what belongs to no
    // object (KubeFedClusters, FederatedTypeConfigs) by shard 0 alone.
    for (i, (_, proxy)) in shards.iter().enumerate() {
        for r in proxy
            .records()
            .iter()
            .filter(|r| r.is_write() && r.resource != "leases")
        {
            match r.resource.as_str() {
                "kubefedclusters" | "federatedtypeconfigs" => assert_eq!(i, 0, "{r:?}"),
                _ if r.namespace.is_empty() || r.namespace == f.fedns => {}
                _ => assert_eq!(shard_of(&r.namespace), i as u32, "shard {i} wrote {r:?}"),
            }
        }
    }
    // Member writes: each shard's log names only its own namespaces.
    for (i, log_path) in logs.iter().enumerate() {
        let text = log(log_path);
        let written = written_namespaces(&text);
        assert!(!written.is_empty(), "shard {i} wrote nothing:\n{text}");
        for ns in &written {
            assert_eq!(shard_of(ns), i as u32, "shard {i} wrote in {ns}:\n{text}");
        }
    }

    // Shard 1 dies without releasing its lease; the churn goes on.
    let (mut dead, _) = shards.remove(1);
    dead.kill().unwrap();
    dead.wait().unwrap();
    set_all("3");
    let (mine, others): (Vec<&String>, Vec<&String>) =
        namespaces.iter().partition(|ns| shard_of(ns) == 1);
    wait_until("the other shards' objects flow", || {
        others.iter().all(|ns| at(ns, "3"))
    });
    assert!(
        mine.iter().all(|ns| at(ns, "2")),
        "nobody writes shard 1's objects"
    );

    // Back (after its lease expires): it catches up its own objects only,
    // one update per object and member, and the others write nothing.
    f.m1.reset_records();
    f.m2.reset_records();
    let restarted_log = env.dir().join("watch-shard-1-again.log");
    shards.insert(1, spawn_shard(env, &f, 1, &restarted_log));
    wait_until("the restarted shard catches up", || {
        mine.iter().all(|ns| at(ns, "3"))
    });
    std::thread::sleep(std::time::Duration::from_secs(2));
    let member_writes: Vec<RequestRecord> = [&f.m1, &f.m2]
        .iter()
        .flat_map(|p| p.records())
        .filter(|r| r.is_write())
        .collect();
    assert!(
        member_writes
            .iter()
            .all(|r| r.resource == "configmaps" && mine.contains(&&r.namespace)),
        "{member_writes:?}"
    );
    assert_eq!(member_writes.len(), mine.len() * 2 * 2, "{member_writes:?}");

    for (child, _) in &shards {
        sigterm(child);
    }
    for (mut child, _) in shards {
        assert!(child.wait().unwrap().success());
    }
}

/// Waits until the watch is idle: no round in flight, nothing queued, and
/// no round started for 3 s (longer than the second an object that wrote
/// waits before its next round).
fn wait_idle(port: u16) {
    let mut last: Option<(f64, Instant)> = None;
    wait_until("the watch idle for 3 s", || {
        let now = samples(&http_get(port, "/metrics").1);
        let rounds = now["kubefedctl_reconcile_rounds_total"];
        let quiet =
            now["kubefedctl_rounds_in_flight"] == 0.0 && now["kubefedctl_queue_depth"] == 0.0;
        last = match last {
            Some((r, since)) if quiet && r == rounds => Some((r, since)),
            _ if quiet => Some((rounds, Instant::now())),
            _ => None,
        };
        last.is_some_and(|(_, since)| since.elapsed() >= Duration::from_secs(3))
    });
}

/// A change takes one round: the events of that round's own writes (its
/// member copies updated, the status and PropagatedVersion written) are
/// no news, since the cache holds what each write answered as soon as it
/// is answered (`Cache::hold_own_write`). Before, each change took a second
/// round, a second after the first, to decide again what it had written.
#[test]
fn the_events_of_a_rounds_own_writes_start_no_round() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "wt-echo", &["configmaps"]);
    let names = f.create_configmaps(env, "echo", 4);
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let log_path = env.dir().join("watch-echo.log");
    let flags = ["--metrics-bind-address", &addr, "-v", "2"];
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &flags);
    let at = |m: &str, n: &str, v: &str| cm(env, m, f.ns, n).is_some_and(|o| o["data"]["v"] == v);
    wait_until("every copy in both members", || {
        (names.iter()).all(|n| cm(env, "member1", f.ns, n).is_some())
            && (names.iter()).all(|n| cm(env, "member2", f.ns, n).is_some())
    });
    wait_idle(port);
    // The rounds over these objects, from the log (`-v 2` names the objects
    // of a small round): the shared environment's other federations have
    // rounds of their own.
    let rounds_over_ours = |from: usize| {
        let ours = format!("{}/echo-", f.ns);
        (log(&log_path).lines().skip(from))
            .filter(|l| l.starts_with("round over") && l.contains(&ours))
            .count()
    };
    let before = log(&log_path).lines().count();
    for n in &names {
        patch(
            env,
            "host",
            &fed_path(&f, "federatedconfigmaps", n),
            json!({"spec": {"template": {"data": {"v": "changed"}}}}),
        );
        wait_until("the change in both members", || {
            at("member1", n, "changed") && at("member2", n, "changed")
        });
        wait_idle(port);
    }
    let rounds = rounds_over_ours(before);
    // One round per change, whether each write's event or its answer
    // reached the watch first.
    assert!(
        rounds == names.len(),
        "{rounds} rounds for {} changes\n{}",
        names.len(),
        log(&log_path)
    );
    sigterm(&watch);
    let status = watch.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log(&log_path));
}

/// The host's Namespaces are watched cluster-wide (a FederatedNamespace
/// reads its own): a namespace created outside a `-n` watch's reach starts
/// no round. Each one used to start a round over the FederatedNamespace key
/// of its name, which the watch does not hold (in the shared environment,
/// every other test's namespaces).
#[test]
fn a_namespace_outside_the_watch_starts_no_round() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "wt-nsout", &["configmaps"]);
    let names = f.create_configmaps(env, "nsout", 1);
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let log_path = env.dir().join("watch-nsout.log");
    let flags = ["--metrics-bind-address", &addr, "-v", "2"];
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &flags);
    let at = |m: &str, v: &str| cm(env, m, f.ns, &names[0]).is_some_and(|o| o["data"]["v"] == v);
    wait_until("the copy in both members", || {
        cm(env, "member1", f.ns, &names[0]).is_some()
            && cm(env, "member2", f.ns, &names[0]).is_some()
    });
    wait_idle(port);
    let before = log(&log_path).lines().count();
    let other = format!("{}-other", f.ns);
    let r = env
        .request(
            "host",
            "POST",
            "/api/v1/namespaces",
            Some(&json!({"metadata": {"name": other}}).to_string()),
        )
        .unwrap();
    assert!(r.status == 201 || r.status == 409, "{}", r.body);
    // A change of the watch's own after it: once it is everywhere and the
    // watch is idle, the namespace's event (a second earlier) is in too.
    std::thread::sleep(Duration::from_secs(1));
    patch(
        env,
        "host",
        &fed_path(&f, "federatedconfigmaps", &names[0]),
        json!({"spec": {"template": {"data": {"v": "changed"}}}}),
    );
    wait_until("the change in both members", || {
        at("member1", "changed") && at("member2", "changed")
    });
    wait_idle(port);
    let rounds: Vec<String> = (log(&log_path).lines().skip(before))
        .filter(|l| l.starts_with("round over"))
        .map(str::to_string)
        .collect();
    let ours = format!("{}/{}", f.ns, names[0]);
    assert!(
        rounds.iter().any(|l| l.contains(&ours)),
        "the change's round is logged: {rounds:?}"
    );
    let theirs = format!("{other}/{other}");
    assert!(
        !rounds.iter().any(|l| l.contains(&theirs)),
        "a round over {theirs}: {rounds:?}"
    );
    env.request(
        "host",
        "DELETE",
        &format!("/api/v1/namespaces/{other}"),
        None,
    )
    .unwrap();
    sigterm(&watch);
    let status = watch.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log(&log_path));
}
