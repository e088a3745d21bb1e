//! Hand-over between KubeFed v0.10.0's own controller-manager and us, both
//! ways, measured at the members (issue 33): a federation is meant to move
//! from one to the other without a single member write, because both
//! compute the same objects, hashes, PropagatedVersions and statuses. The
//! controller-manager is the real one (built by `hack/testenv.sh`), run out
//! of cluster on a kubeconfig of its own whose host goes through a proxy of
//! its own; the members' proxies are the federation's, so every member
//! request either side makes is counted. Tests skip, saying why, when
//! KubeFed is not built.
//!
//! Each test has an environment of its own, one test at a time: a
//! cluster-scoped KubeFed controller-manager takes every member object
//! with the `kubefed.io/managed` label that none of its own federated
//! objects explains for an orphan and removes the label (upstream
//! `sync/accessor.go`, `possibleOrphan`), so beside other federations on
//! the same members it would rewrite their objects.

use crate::fixtures::{
    Federation, Run, get, namespace, own_host_kubeconfig, patch, post, wait_until,
};
use crate::watch::{free_port, http_get, log, sigterm, spawn_watch};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use testenv::{Proxy, RequestRecord, TestEnv, Version, kubefed_binary, kubefed_missing};

/// A private environment of host and two members for one test, the
/// hand-over tests one after another (see the module's doc); `None`
/// (after saying why) when KubeFed's controller-manager is not built.
fn private_env() -> Option<(std::sync::MutexGuard<'static, ()>, TestEnv)> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    if kubefed_binary("controller-manager").is_none() {
        testenv::skip(&kubefed_missing("controller-manager"));
        return None;
    }
    let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let env = TestEnv::private(&testenv::SHARED_CLUSTERS).unwrap();
    Some((turn, env))
}

/// Leader election short enough for a test to wait out (KubeFed's defaults
/// are 15s/10s/5s; these pass its `ValidateKubeFedConfig` and ours). KubeFed
/// does not release its lock when it stops (no `ReleaseOnCancel`), so a
/// successor waits for `leaseDuration` after its last renewal.
const LEASE: Duration = Duration::from_secs(6);

fn short_leases(env: &TestEnv, f: &Federation) {
    f.configure(
        env,
        json!({"leaderElect": {"leaseDuration": "6s", "renewDeadline": "4s", "retryPeriod": "1s"}}),
    );
}

/// KubeFed's controller-manager, running; killed when dropped, so that a
/// failing test leaves no controller behind propagating into the shared
/// environment.
pub(crate) struct KubeFed {
    child: Option<Child>,
    log: PathBuf,
    /// Its own host proxy: its host requests, apart from ours.
    host: Proxy,
    stopped_at: Option<Instant>,
    /// Where it serves `/metrics`.
    metrics_port: u16,
}

impl KubeFed {
    /// Starts it on `f`'s federation (`-v=4`: its sync controllers log each
    /// object they finish reconciling); `None` (after saying why) when
    /// `hack/testenv.sh` has not built it.
    pub(crate) fn start(env: &TestEnv, f: &Federation, run: &str) -> Option<KubeFed> {
        let Some(bin) = kubefed_binary("controller-manager") else {
            testenv::skip(&kubefed_missing("controller-manager"));
            return None;
        };
        let (host, kc) = own_host_kubeconfig(env, &format!("{}-kubefed", f.fedns));
        let log = env.dir().join(format!("{}-kubefed-{run}.log", f.fedns));
        let metrics_port = free_port();
        let child = Command::new(bin)
            .arg(format!("--kubeconfig={}", kc.display()))
            .arg(format!("--kubefed-namespace={}", f.fedns))
            // Not the defaults (:8080, :9090): several may run at once.
            .arg("--healthz-addr=127.0.0.1:0")
            .arg(format!("--metrics-addr=127.0.0.1:{metrics_port}"))
            .arg("-v=4")
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Some(KubeFed {
            child: Some(child),
            log,
            host,
            stopped_at: None,
            metrics_port,
        })
    }

    fn log(&self) -> String {
        log(&self.log)
    }

    /// Waits until it holds its leader lock; its identity.
    fn wait_leading(&mut self, env: &TestEnv, f: &Federation) -> String {
        let mut holder = None;
        wait_until(
            "KubeFed's controller-manager to take its leader lock",
            || {
                self.assert_running();
                holder = kubefed_lock_holder(env, f.fedns);
                holder.is_some()
            },
        );
        holder.unwrap()
    }

    /// Sends `signal` (SIGSTOP: a controller that hangs).
    pub(crate) fn signal(&self, signal: i32) {
        let pid = self.child.as_ref().unwrap().id() as i32;
        // SAFETY: a plain kill(2) to our own child.
        unsafe {
            libc::kill(pid, signal);
        }
    }

    pub(crate) fn assert_running(&mut self) {
        if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
            panic!(
                "KubeFed's controller-manager exited ({status}):\n{}",
                self.log()
            );
        }
    }

    /// Waits until each sync controller of `kinds` has started and has
    /// finished reconciling each of `objects` (`Kind ns/name`) at least
    /// once, as its `-v=4` log says; then `settle` more, for the requeues
    /// its own writes and the scheduler's cause.
    fn wait_reconciled(&mut self, objects: &[String], settle: Duration) {
        wait_until("KubeFed to reconcile every federated object", || {
            self.assert_running();
            let text = self.log();
            objects.iter().all(|o| {
                let (kind, key) = o.split_once(' ').unwrap();
                text.contains(&format!("Started sync controller for \"{kind}\""))
                    && text.contains(&format!("Finished reconciling {kind} \"{key}\""))
            })
        });
        std::thread::sleep(settle);
        self.assert_running();
    }

    /// SIGTERM, then waits for it to exit (SIGKILL after 10 s).
    fn stop(&mut self) {
        let mut child = self.child.take().unwrap();
        sigterm(&child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.stopped_at = Some(Instant::now());
    }

    /// Waits until the lock it left behind has expired, as its record
    /// says: `leaseDurationSeconds` (the KubeFedConfig's, so KubeFed
    /// honours `leaderElect`) after its last `renewTime`, which no longer
    /// moves once it has stopped.
    fn wait_lock_expired(&self, env: &TestEnv, f: &Federation) {
        assert!(self.stopped_at.is_some(), "stop it first");
        let record = lock_record(env, f.fedns).expect("KubeFed's lock record");
        assert_eq!(
            record["leaseDurationSeconds"].as_u64(),
            Some(LEASE.as_secs()),
            "{record}"
        );
        let renewed =
            kubefedctl::core::time::parse_rfc3339(record["renewTime"].as_str().unwrap()).unwrap();
        let expires = renewed + LEASE.as_secs() as i64;
        let now = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64
        };
        assert!(expires < now() + 30, "{record}");
        while now() <= expires + 1 {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(
            lock_record(env, f.fedns),
            Some(record),
            "renewed after it stopped"
        );
    }
}

impl Drop for KubeFed {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The leader-election record of KubeFed's ConfigMap lock
/// (`resourceLock: configmaps`, what `init` writes), if any.
fn lock_record(env: &TestEnv, fedns: &str) -> Option<Value> {
    get(
        env,
        "host",
        &format!("/api/v1/namespaces/{fedns}/configmaps/kubefed-controller-manager"),
    )
    .and_then(|c| {
        c["metadata"]["annotations"]["control-plane.alpha.kubernetes.io/leader"]
            .as_str()
            .and_then(|t| serde_json::from_str(t).ok())
    })
}

/// The live holder recorded in KubeFed's leader lock (the ConfigMap lock of
/// `resourceLock: configmaps`, or the Lease of `leases`), if any.
fn kubefed_lock_holder(env: &TestEnv, fedns: &str) -> Option<String> {
    let cm = get(
        env,
        "host",
        &format!("/api/v1/namespaces/{fedns}/configmaps/kubefed-controller-manager"),
    );
    let from_cm = cm
        .as_ref()
        .and_then(|c| {
            c["metadata"]["annotations"]["control-plane.alpha.kubernetes.io/leader"].as_str()
        })
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .and_then(|r| r["holderIdentity"].as_str().map(str::to_string));
    let lease = get(
        env,
        "host",
        &format!(
            "/apis/coordination.k8s.io/v1/namespaces/{fedns}/leases/kubefed-controller-manager"
        ),
    );
    let from_lease = lease.and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string));
    from_cm.or(from_lease).filter(|h| !h.is_empty())
}

/// `reconcile` of every namespace (`-A`, the default): the federated
/// group is the test's own, so only its objects are in it.
fn reconcile_all(f: &Federation) -> Run {
    f.run(&["reconcile", "--probe-timeout", "2s", "--timeout", "3s"])
}

/// The writes (anything but GET, server-side dry runs and reviews aside)
/// one proxy recorded, as `METHOD resource[/sub] ns/name`.
fn writes(p: &Proxy) -> Vec<String> {
    p.records()
        .iter()
        .filter(|r| {
            r.method != "GET" && !r.query.contains("dryRun") && !r.resource.ends_with("reviews")
        })
        .map(describe)
        .collect()
}

fn describe(r: &RequestRecord) -> String {
    let sub = if r.subresource.is_empty() {
        String::new()
    } else {
        format!("/{}", r.subresource)
    };
    format!(
        "{} {}{sub} {}/{}",
        r.method, r.resource, r.namespace, r.name
    )
}

/// Every member write since the last reset, by member.
fn member_writes(f: &Federation) -> Vec<String> {
    let mut all: Vec<String> = writes(&f.m1)
        .into_iter()
        .map(|w| format!("m1 {w}"))
        .collect();
    all.extend(writes(&f.m2).into_iter().map(|w| format!("m2 {w}")));
    all
}

/// Timestamps dropped, at any depth: they say when, not what.
fn untimed(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.ends_with("Time") && !k.ends_with("Timestamp"))
                .map(|(k, v)| (k.clone(), untimed(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(untimed).collect()),
        other => other.clone(),
    }
}

/// What a controller decides and records on the host, by `Kind ns/name`:
/// each federated object's spec, finalizers and status (those of `plurals`
/// in `namespaces`, and the cluster-scoped ones), each PropagatedVersion's
/// and ClusterPropagatedVersion's status, each FederatedTypeConfig's spec
/// and status, and the KubeFedConfig, which neither controller may change;
/// timestamps dropped.
fn host_state(env: &TestEnv, f: &Federation, namespaces: &[&str]) -> BTreeMap<String, Value> {
    let mut lists = vec![];
    for ns in namespaces {
        for p in plurals(true) {
            lists.push(format!("/apis/{}/v1beta1/namespaces/{ns}/{p}", f.group));
        }
        lists.push(format!(
            "/apis/core.kubefed.io/v1alpha1/namespaces/{ns}/propagatedversions"
        ));
    }
    for p in plurals(false) {
        lists.push(format!("/apis/{}/v1beta1/{p}", f.group));
    }
    lists.push("/apis/core.kubefed.io/v1alpha1/clusterpropagatedversions".into());
    // What each controller says of its own per-type controllers.
    lists.push(format!(
        "/apis/core.kubefed.io/v1beta1/namespaces/{}/federatedtypeconfigs",
        f.fedns
    ));
    // The configuration both read: left as it was.
    lists.push(format!(
        "/apis/core.kubefed.io/v1beta1/namespaces/{}/kubefedconfigs",
        f.fedns
    ));
    let mut state = BTreeMap::new();
    for path in lists {
        let list = get(env, "host", &path).unwrap_or_else(|| panic!("{path}"));
        let kind = list["kind"].as_str().unwrap().trim_end_matches("List");
        for item in list["items"].as_array().unwrap() {
            let m = &item["metadata"];
            let key = format!(
                "{kind} {}/{}",
                m["namespace"].as_str().unwrap_or(""),
                m["name"].as_str().unwrap()
            );
            state.insert(
                key,
                untimed(&json!({"spec": item["spec"], "finalizers": m["finalizers"],
                    "labels": m["labels"], "annotations": m["annotations"],
                    "status": item["status"]})),
            );
        }
    }
    assert!(
        state.keys().any(|k| k.starts_with("KubeFedConfig ")),
        "no KubeFedConfig in {state:#?}"
    );
    state
}

/// A member object as its propagation left it: all but what its server
/// keeps (identity, versions, managed fields, status).
fn member_object(env: &TestEnv, cluster: &str, path: &str) -> Value {
    let mut o = get(env, cluster, path).unwrap_or_else(|| panic!("{cluster} {path}"));
    let meta = o["metadata"].as_object_mut().unwrap();
    for k in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "managedFields",
        "generation",
    ] {
        meta.remove(k);
    }
    o.as_object_mut().unwrap().remove("status");
    o
}

/// Creates a federated object `kind` in namespace `ns` (the fixture's
/// `create` serves only the federation's object namespace).
fn create_in(
    env: &TestEnv,
    f: &Federation,
    ns: &str,
    plural: &str,
    kind: &str,
    name: &str,
    spec: Value,
) {
    post(
        env,
        "host",
        &format!("/apis/{}/v1beta1/namespaces/{ns}/{plural}", f.group),
        json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": kind,
            "metadata": {"name": name, "namespace": ns}, "spec": spec}),
    );
}

/// `reconcile --watch` must refuse as well: it exits 1 naming `holder`
/// (killed and failed if it runs on instead).
fn watch_refuses(env: &TestEnv, f: &Federation, holder: &str) {
    let path = env.dir().join(format!("{}-watch-refused.log", f.fedns));
    let mut child = spawn_watch(&f.kc, f, &path, &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the watch ran beside KubeFed:\n{}", log(&path));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = log(&path);
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!(
            "KubeFed's controller-manager ({holder}) holds its leader lock"
        )),
        "{text}"
    );
}

/// KubeFed's real leader lock stops both our one-shot run and our watch,
/// before either writes anything, and only while it is live: once the
/// controller-manager is gone and its lease ran out, ours runs.
#[test]
fn kubefeds_own_leader_lock_keeps_us_out_until_it_expires() {
    let Some((_turn, env)) = private_env() else {
        return;
    };
    let env = &env;
    let f = Federation::new(env, "ho-lock", &["configmaps", "deployments.apps"]);
    short_leases(env, &f);
    let mut kubefed = KubeFed::start(env, &f, "lock").unwrap();
    let holder = kubefed.wait_leading(env, &f);
    // It propagates the fixture's FederatedNamespace; once that is done it
    // writes nothing more to the members, so what follows is ours alone.
    wait_until("KubeFed to propagate the namespace", || {
        [&"member1", &"member2"].iter().all(|m| {
            get(env, m, &format!("/api/v1/namespaces/{}", f.ns))
                .is_some_and(|n| n["metadata"]["labels"]["kubefed.io/managed"] == "true")
        })
    });
    std::thread::sleep(Duration::from_secs(2));
    let theirs = metric_families(&http_get(kubefed.metrics_port, "/metrics").1);
    f.reset();

    let run = reconcile_all(&f).fails();
    assert!(
        run.stderr.contains(&format!(
            "KubeFed's controller-manager ({holder}) holds its leader lock {}/kubefed-controller-manager",
            f.fedns
        )),
        "{}",
        run.stderr
    );
    watch_refuses(env, &f, &holder);
    assert_eq!(f.writes(), vec![], "refused before any write");
    assert_eq!(
        f.host
            .count(|r| r.resource == "leases" && r.method != "GET"),
        0,
        "not even our run lock"
    );

    // Stopped, its lock stays until its lease runs out (KubeFed does not
    // release it): still refused right after, as nothing tells a stopped
    // controller from a slow one.
    kubefed.stop();
    let run = reconcile_all(&f).fails();
    assert!(run.stderr.contains(&holder), "{}", run.stderr);
    kubefed.wait_lock_expired(env, &f);
    reconcile_all(&f).ok();
    // Ours serves every series KubeFed's served, so that its dashboards
    // keep working: one object for the watch to propagate, so that its
    // per-write series have samples as KubeFed's had.
    f.create_configmaps(env, "scraped", 1);
    let path = env.dir().join("ho-lock-watch.log");
    let port = free_port();
    let mut watch = spawn_watch(
        &f.kc,
        &f,
        &path,
        &["--metrics-bind-address", &format!("127.0.0.1:{port}")],
    );
    wait_until("the watch to take the run lock", || {
        !crate::fixtures::holder(env, f.fedns).is_empty()
    });
    wait_until("the watch to propagate", || {
        crate::fixtures::cm(env, "member2", f.ns, "scraped-00").is_some()
    });
    // A member write's sample is recorded once its answer is back in the
    // watch: the copy can be read in member2 a moment before.
    let scrape = || metric_families(&http_get(port, "/metrics").1);
    wait_until("the watch's member write to be counted", || {
        scrape()
            .get("dispatch_operation_duration_seconds")
            .is_some_and(|f| !f.label_names.is_empty())
    });
    let ours = scrape();
    assert_eq!(
        series_differences(&theirs, &ours),
        Vec::<String>::new(),
        "KubeFed's /metrics:\n{theirs:#?}"
    );
    sigterm(&watch);
    assert_eq!(watch.wait().unwrap().code(), Some(0), "{}", log(&path));
}

/// One metric family of a Prometheus text exposition: its type, the label
/// names of each of its series (`le` and `quantile` aside) and its
/// histogram bounds.
#[derive(Debug, Default, PartialEq)]
struct Family {
    kind: String,
    label_names: BTreeSet<Vec<String>>,
    bounds: BTreeSet<String>,
}

fn metric_families(text: &str) -> BTreeMap<String, Family> {
    let mut out: BTreeMap<String, Family> = BTreeMap::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            current = name.to_string();
            out.entry(current.clone()).or_default().kind = kind.to_string();
            continue;
        }
        if line.starts_with('#') || line.is_empty() || !line.starts_with(&current) {
            continue;
        }
        let family = out.get_mut(&current).unwrap();
        let (_, labels) = line.split_once('{').unwrap_or((line, "}"));
        let labels = labels.split_once('}').unwrap().0;
        let mut names = Vec::new();
        // Label values hold no `",` here (names, codes, hosts, methods).
        for pair in labels.split("\",").filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap();
            match name {
                "le" => {
                    family.bounds.insert(value.trim_matches('"').to_string());
                }
                "quantile" => {}
                n => names.push(n.to_string()),
            }
        }
        names.sort();
        family.label_names.insert(names);
    }
    out
}

/// Where `ours` does not serve a family of `theirs` as they do (Go's
/// runtime series aside: the watch is no Go program), one line each.
fn series_differences(
    theirs: &BTreeMap<String, Family>,
    ours: &BTreeMap<String, Family>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (name, t) in theirs.iter().filter(|(n, _)| !n.starts_with("go_")) {
        match ours.get(name) {
            None => out.push(format!("{name}: not served")),
            Some(o) if o != t => out.push(format!("{name}: {o:?}, KubeFed's {t:?}")),
            Some(_) => {}
        }
    }
    out
}

/// The federated types of the hand-over federations: KubeFed's ten
/// default types (`parity::TYPES`, the types of its own e2e fixtures).
fn types() -> Vec<&'static str> {
    crate::parity::TYPES.iter().map(|t| t.name).collect()
}

/// The federated plurals of those types, namespaced or cluster-scoped
/// (FederatedNamespaces are namespaced, in the namespace they stand for).
fn plurals(namespaced: bool) -> Vec<String> {
    crate::parity::TYPES
        .iter()
        .filter(|t| (t.namespaced || t.name == "namespaces") == namespaced)
        .map(|t| format!("federated{}", t.plural))
        .collect()
}

/// The namespace whose FederatedNamespace places it on the first member only.
fn narrow_ns(f: &Federation) -> String {
    format!("{}-one", f.fedns)
}

/// A federation's worth of what propagation has to get right: an object
/// of each of KubeFed's ten default types (its e2e fixtures, with their
/// overrides for the second member), more of some (an override of a
/// label, the orphan annotation, a ReplicaSchedulingPreference), and a
/// namespace that its FederatedNamespace narrows to one member (with an
/// object placed everywhere in it). Returns the federated objects
/// (`Kind ns/name`, or `Kind name` when cluster-scoped, as KubeFed's log
/// names them) and the member objects they make (`member path`).
fn create_objects(env: &TestEnv, f: &Federation) -> (Vec<String>, Vec<(&'static str, String)>) {
    let ns = f.ns;
    let one = narrow_ns(f);
    let everywhere = json!({"clusterSelector": {}});
    let cm = |data: Value| json!({"template": {"data": data}, "placement": everywhere});
    create_in(
        env,
        f,
        ns,
        "federatedconfigmaps",
        "FederatedConfigMap",
        "plain",
        cm(json!({"k": "v"})),
    );
    let mut over = cm(json!({"k": "v"}));
    over["overrides"] = json!([{"clusterName": f.cluster("m2"),
        "clusterOverrides": [{"path": "/data/k", "value": "for m2"},
                             {"path": "/metadata/labels", "value": {"tier": "two"}}]}]);
    create_in(
        env,
        f,
        ns,
        "federatedconfigmaps",
        "FederatedConfigMap",
        "over",
        over,
    );
    create_in(
        env,
        f,
        ns,
        "federatedconfigmaps",
        "FederatedConfigMap",
        "orphan",
        cm(json!({"k": "kept"})),
    );
    patch(
        env,
        "host",
        &format!(
            "/apis/{}/v1beta1/namespaces/{ns}/federatedconfigmaps/orphan",
            f.group
        ),
        json!({"metadata": {"annotations": {"kubefed.io/orphan": "true"}}}),
    );
    create_in(
        env,
        f,
        ns,
        "federatedsecrets",
        "FederatedSecret",
        "creds",
        json!({
        "template": {"type": "Opaque", "data": {"password": "c2VjcmV0"}}, "placement": everywhere}),
    );
    create_in(
        env,
        f,
        ns,
        "federatedservices",
        "FederatedService",
        "web",
        json!({
        "template": {"spec": {"selector": {"app": "web"},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}},
        "placement": everywhere}),
    );
    f.create_deployment(env, "web");
    f.create_deployment(env, "spread");
    f.create_rsp(
        env,
        "spread",
        3,
        &[(&f.cluster("m1"), 1), (&f.cluster("m2"), 2)],
    );
    namespace(env, "host", &one);
    create_in(
        env,
        f,
        &one,
        "federatednamespaces",
        "FederatedNamespace",
        &one,
        json!({
        "placement": {"clusters": [{"name": f.cluster("m1")}]}}),
    );
    create_in(
        env,
        f,
        &one,
        "federatedconfigmaps",
        "FederatedConfigMap",
        "narrow",
        cm(json!({"k": "v"})),
    );

    let mut fed: Vec<String> = ["plain", "over", "orphan"]
        .iter()
        .map(|n| format!("FederatedConfigMap {ns}/{n}"))
        .collect();
    fed.extend([
        format!("FederatedSecret {ns}/creds"),
        format!("FederatedService {ns}/web"),
        format!("FederatedDeployment {ns}/web"),
        format!("FederatedDeployment {ns}/spread"),
        format!("FederatedNamespace {ns}/{ns}"),
        format!("FederatedNamespace {one}/{one}"),
        format!("FederatedConfigMap {one}/narrow"),
    ]);
    let mut members = vec![];
    // One of each default type (namespaces: the FederatedNamespaces here).
    for t in crate::parity::TYPES
        .iter()
        .filter(|t| t.name != "namespaces")
    {
        let (template, overrides) = crate::parity::fixture(t);
        let mut spec = json!({"template": template, "placement": everywhere});
        if overrides != json!([]) {
            spec["overrides"] =
                json!([{"clusterName": f.cluster("m2"), "clusterOverrides": overrides}]);
        }
        let (kind, plural) = (
            format!("Federated{}", t.kind),
            format!("federated{}", t.plural),
        );
        if t.namespaced {
            create_in(env, f, ns, &plural, &kind, "fixture", spec);
            fed.push(format!("{kind} {ns}/fixture"));
            for m in ["member1", "member2"] {
                members.push((m, format!("{}/namespaces/{ns}/{}/fixture", t.api, t.plural)));
            }
        } else {
            let name = format!("{}-fixture", f.fedns);
            post(
                env,
                "host",
                &format!("/apis/{}/v1beta1/{plural}", f.group),
                json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": kind,
                    "metadata": {"name": name}, "spec": spec}),
            );
            fed.push(format!("{kind} {name}"));
            for m in ["member1", "member2"] {
                members.push((m, format!("{}/{}/{name}", t.api, t.plural)));
            }
        }
    }
    for m in ["member1", "member2"] {
        members.push((m, format!("/api/v1/namespaces/{ns}")));
        for n in ["plain", "over", "orphan"] {
            members.push((m, format!("/api/v1/namespaces/{ns}/configmaps/{n}")));
        }
        members.push((m, format!("/api/v1/namespaces/{ns}/secrets/creds")));
        members.push((m, format!("/api/v1/namespaces/{ns}/services/web")));
        for n in ["web", "spread"] {
            members.push((m, format!("/apis/apps/v1/namespaces/{ns}/deployments/{n}")));
        }
    }
    members.push(("member1", format!("/api/v1/namespaces/{one}")));
    members.push((
        "member1",
        format!("/api/v1/namespaces/{one}/configmaps/narrow"),
    ));
    (fed, members)
}

/// Whether the controller that propagated has settled: every member object
/// of `members` holds the version its cluster's entry records in the
/// (Cluster)PropagatedVersions (`gen:N` where the object has a generation,
/// else `rv:R`, as upstream's `pkg/controller/sync/version` compares them).
/// A member's own controllers write some copies after propagation: on 1.20
/// the token controller adds a token Secret to a ServiceAccount's
/// `secrets`, and the controller that propagated sees that write and
/// records it (a one-shot run, on its next run). Until that write has
/// happened and been recorded, a hand-over would rightly rewrite the copy.
fn settled(env: &TestEnv, f: &Federation, namespaces: &[&str], members: &[(&str, String)]) -> bool {
    let mut lists: Vec<String> = namespaces
        .iter()
        .map(|ns| format!("/apis/core.kubefed.io/v1alpha1/namespaces/{ns}/propagatedversions"))
        .collect();
    lists.push("/apis/core.kubefed.io/v1alpha1/clusterpropagatedversions".into());
    let mut recorded = BTreeSet::new();
    for path in lists {
        let Some(list) = get(env, "host", &path) else {
            return false;
        };
        for item in list["items"].as_array().into_iter().flatten() {
            for v in item["status"]["clusterVersions"]
                .as_array()
                .into_iter()
                .flatten()
            {
                recorded.insert((v["clusterName"].to_string(), v["version"].to_string()));
            }
        }
    }
    let makes_token_secrets = env.version() == Version::V1_20;
    members.iter().all(|(m, p)| {
        let Some(o) = get(env, m, p) else {
            return false;
        };
        if makes_token_secrets
            && p.contains("/serviceaccounts/")
            && o["secrets"].as_array().is_none_or(Vec::is_empty)
        {
            return false;
        }
        let meta = &o["metadata"];
        let version = match meta["generation"].as_i64().unwrap_or(0) {
            0 => format!("rv:{}", meta["resourceVersion"].as_str().unwrap_or("")),
            g => format!("gen:{g}"),
        };
        let cluster = f.cluster(&format!("m{}", m.trim_start_matches("member")));
        recorded.contains(&(json!(cluster).to_string(), json!(version).to_string()))
    })
}

/// Every member object of `members`, as [`member_object`] keeps it.
fn member_objects(env: &TestEnv, members: &[(&str, String)]) -> BTreeMap<String, Value> {
    members
        .iter()
        .map(|(m, p)| (format!("{m} {p}"), member_object(env, m, p)))
        .collect()
}

/// The keys whose values differ between two snapshots (or that only one has).
fn changed(before: &BTreeMap<String, Value>, after: &BTreeMap<String, Value>) -> Vec<String> {
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| {
            format!(
                "{k}:\n  before {}\n  after  {}",
                before.get(k).map_or("-".into(), Value::to_string),
                after.get(k).map_or("-".into(), Value::to_string)
            )
        })
        .collect()
}

/// [`host_state`] without the FederatedTypeConfigs: KubeFed's type-config
/// controller adds its finalizer and says its sync controllers run, where
/// a one-shot run runs no controller and writes neither.
fn without_type_configs(state: &BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    state
        .iter()
        .filter(|(k, _)| !k.starts_with("FederatedTypeConfig "))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// From us to KubeFed: a federation that `kubefedctl reconcile` converged
/// is taken over by KubeFed's controller-manager without a member write
/// and with the same statuses and PropagatedVersions (template-less
/// FederatedNamespaces included: both record `""` for them).
#[test]
fn kubefed_takes_over_what_we_propagated_without_a_member_write() {
    let Some((_turn, env)) = private_env() else {
        return;
    };
    let env = &env;
    let f = Federation::new(env, "ho-ours", &types());
    short_leases(env, &f);
    let (fed, members) = create_objects(env, &f);
    let namespaces = [f.ns, &narrow_ns(&f)];
    let mut runs = 0;
    loop {
        runs += 1;
        f.reset();
        reconcile_all(&f).ok();
        if f.writes().is_empty() && settled(env, &f, &namespaces, &members) {
            break;
        }
        assert!(
            runs < 8,
            "not converged after {runs} runs: {:?}",
            f.writes().iter().map(describe).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    let ours = host_state(env, &f, &namespaces);
    let ours_members = member_objects(env, &members);

    let mut taken = vec![];
    for run in ["after us", "after itself"] {
        f.reset();
        let mut kubefed = KubeFed::start(env, &f, &run.replace(' ', "-")).unwrap();
        kubefed.wait_leading(env, &f);
        kubefed.wait_reconciled(&fed, Duration::from_secs(5));
        kubefed.stop();
        // Repeats (a requeue of the same object) count once.
        let written: BTreeSet<String> = member_writes(&f).into_iter().collect();
        let state = host_state(env, &f, &namespaces);
        assert_eq!(
            changed(&without_type_configs(&ours), &without_type_configs(&state)),
            Vec::<String>::new(),
            "KubeFed {run} changed the host's record (its host writes: {:?})",
            writes(&kubefed.host)
        );
        // Both settle on the same member objects.
        assert_eq!(
            changed(&ours_members, &member_objects(env, &members)),
            Vec::<String>::new(),
            "KubeFed {run} changed member objects"
        );
        taken.push(written);
        kubefed.wait_lock_expired(env, &f);
    }
    assert_eq!(
        taken[0],
        BTreeSet::new(),
        "KubeFed's member writes after us"
    );
    assert_eq!(
        taken[1],
        BTreeSet::new(),
        "KubeFed's member writes after itself"
    );
}

/// From KubeFed to us: a federation KubeFed's controller-manager propagated
/// is taken over by `kubefedctl reconcile`, one-shot and `--watch`, without
/// a member write and with the same statuses and PropagatedVersions.
#[test]
fn we_take_over_what_kubefed_propagated_without_a_member_write() {
    let Some((_turn, env)) = private_env() else {
        return;
    };
    let env = &env;
    let f = Federation::new(env, "ho-kf", &types());
    short_leases(env, &f);
    let mut kubefed = KubeFed::start(env, &f, "first").unwrap();
    kubefed.wait_leading(env, &f);
    let (fed, members) = create_objects(env, &f);
    wait_until("KubeFed to propagate every object", || {
        kubefed.assert_running();
        members.iter().all(|(m, p)| get(env, m, p).is_some())
            && f.replicas(env, "member2", "spread") == 2
    });
    kubefed.wait_reconciled(&fed, Duration::from_secs(5));
    let namespaces = [f.ns, &narrow_ns(&f)];
    wait_until("KubeFed to record every member object's version", || {
        kubefed.assert_running();
        settled(env, &f, &namespaces, &members)
    });
    kubefed.stop();
    let theirs = host_state(env, &f, &namespaces);
    let theirs_members = member_objects(env, &members);
    kubefed.wait_lock_expired(env, &f);

    f.reset();
    reconcile_all(&f).ok();
    assert_eq!(
        member_writes(&f),
        Vec::<String>::new(),
        "reconcile wrote to members"
    );
    let host_writes: Vec<String> = f.writes().iter().map(describe).collect();
    assert_eq!(host_writes, Vec::<String>::new(), "reconcile's host writes");
    assert_eq!(
        changed(&theirs, &host_state(env, &f, &namespaces)),
        Vec::<String>::new(),
        "reconcile changed the host's record"
    );

    f.reset();
    let path = env.dir().join("ho-kf-watch.log");
    let mut watch = spawn_watch(&f.kc, &f, &path, &[]);
    wait_until("the watch to take the run lock", || {
        !crate::fixtures::holder(env, f.fedns).is_empty()
    });
    std::thread::sleep(Duration::from_secs(4));
    // Running, it records on the host what KubeFed recorded, its
    // FederatedTypeConfigs' statuses (`Running`) included.
    assert_eq!(
        changed(&theirs, &host_state(env, &f, &namespaces)),
        Vec::<String>::new(),
        "the running watch's record differs from KubeFed's"
    );
    sigterm(&watch);
    assert_eq!(watch.wait().unwrap().code(), Some(0), "{}", log(&path));
    assert_eq!(
        member_writes(&f),
        Vec::<String>::new(),
        "the watch wrote to members:\n{}",
        log(&path)
    );
    // A controller that starts and stops says so in each
    // FederatedTypeConfig's status; nothing else.
    assert_eq!(
        f.writes()
            .iter()
            .map(describe)
            .filter(|w| !w.starts_with("PATCH federatedtypeconfigs/status "))
            .collect::<Vec<_>>(),
        Vec::<String>::new(),
        "the watch's host writes (its lock aside)"
    );
    // Stopped, it says its sync controllers no longer run (KubeFed,
    // killed, leaves `Running` behind).
    let mut stopped = theirs.clone();
    for (k, v) in stopped.iter_mut() {
        if k.starts_with("FederatedTypeConfig ") {
            v["status"]["propagationController"] = json!("NotRunning");
        }
    }
    assert_eq!(
        changed(&stopped, &host_state(env, &f, &namespaces)),
        Vec::<String>::new(),
        "the watch changed the host's record"
    );
    assert_eq!(
        changed(&theirs_members, &member_objects(env, &members)),
        Vec::<String>::new()
    );
}

/// Overrides chosen by cluster label are ours (docs/kubefed-differences.md):
/// handed over, KubeFed's controller reads a selector entry as one for
/// cluster "", which applies nowhere: it leaves the copies as they are
/// (its overrides hash is ours) until the next change, then writes the
/// template alone there, as docs/reconcile.md says.
#[test]
fn kubefed_drops_overrides_chosen_by_label_on_a_hand_over() {
    let Some((_turn, env)) = private_env() else {
        return;
    };
    let env = &env;
    let f = Federation::new(env, "ho-sel", &["configmaps"]);
    short_leases(env, &f);
    patch(
        env,
        "host",
        &format!(
            "/apis/core.kubefed.io/v1beta1/namespaces/{}/kubefedclusters/{}",
            f.fedns,
            f.cluster("m1")
        ),
        json!({"metadata": {"labels": {"region": "eu"}}}),
    );
    create_in(
        env,
        &f,
        f.ns,
        "federatedconfigmaps",
        "FederatedConfigMap",
        "chosen",
        json!({"template": {"data": {"color": "plain"}},
               "placement": {"clusterSelector": {}},
               "overrides": [{"clusterSelector": {"matchLabels": {"region": "eu"}},
                              "clusterOverrides": [{"path": "/data/color", "value": "blue"}]}]}),
    );
    reconcile_all(&f).ok();
    let path = format!("/api/v1/namespaces/{}/configmaps/chosen", f.ns);
    assert_eq!(
        member_object(env, "member1", &path)["data"]["color"],
        "blue"
    );

    let mut kubefed = KubeFed::start(env, &f, "selector").unwrap();
    kubefed.wait_leading(env, &f);
    let fed = vec![format!("FederatedConfigMap {}/chosen", f.ns)];
    kubefed.wait_reconciled(&fed, Duration::from_secs(3));
    // Its overrides hash is ours (the selector is in neither): it finds the
    // copies up to date and leaves them.
    assert_eq!(
        member_object(env, "member1", &path)["data"]["color"],
        "blue"
    );
    // The next template change: KubeFed writes the template alone.
    patch(
        env,
        "host",
        &format!(
            "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/chosen",
            f.group, f.ns
        ),
        json!({"spec": {"template": {"data": {"size": "m"}}}}),
    );
    wait_until("KubeFed to write the template", || {
        member_object(env, "member1", &path)["data"]["size"] == "m"
    });
    kubefed.stop();
    assert_eq!(
        member_object(env, "member1", &path)["data"]["color"],
        "plain",
        "KubeFed ignores clusterSelector in overrides"
    );
}

/// Per-member values in overrides are ours (issue 67,
/// docs/kubefed-differences.md): handed over, KubeFed's controller applies
/// an override's value as written. Its overrides hash is ours (of the text
/// as written), so it leaves the copies as they are until the next change,
/// then writes `${MEMBER_LABEL:region}` itself into the member.
#[test]
fn kubefed_writes_member_values_unexpanded_on_a_hand_over() {
    let Some((_turn, env)) = private_env() else {
        return;
    };
    let env = &env;
    let f = Federation::new(env, "ho-var", &["configmaps"]);
    short_leases(env, &f);
    let m1 = f.cluster("m1");
    patch(
        env,
        "host",
        &format!(
            "/apis/core.kubefed.io/v1beta1/namespaces/{}/kubefedclusters/{m1}",
            f.fedns
        ),
        json!({"metadata": {"labels": {"region": "eu"}}}),
    );
    create_in(
        env,
        &f,
        f.ns,
        "federatedconfigmaps",
        "FederatedConfigMap",
        "valued",
        json!({"template": {"data": {"color": "plain"}},
               "placement": {"clusterSelector": {}},
               "overrides": [{"clusterName": m1, "clusterOverrides": [
                   {"path": "/data/region", "value": "${MEMBER_LABEL:region}"},
                   {"path": "/data/name", "value": "${MEMBER_NAME}"}]}]}),
    );
    reconcile_all(&f).ok();
    let path = format!("/api/v1/namespaces/{}/configmaps/valued", f.ns);
    let data = || member_object(env, "member1", &path)["data"].clone();
    assert_eq!(
        data(),
        json!({"color": "plain", "region": "eu", "name": m1})
    );

    let mut kubefed = KubeFed::start(env, &f, "values").unwrap();
    kubefed.wait_leading(env, &f);
    let fed = vec![format!("FederatedConfigMap {}/valued", f.ns)];
    kubefed.wait_reconciled(&fed, Duration::from_secs(3));
    assert_eq!(
        data()["region"],
        "eu",
        "the same overrides hash: the copy is left"
    );
    patch(
        env,
        "host",
        &format!(
            "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/valued",
            f.group, f.ns
        ),
        json!({"spec": {"template": {"data": {"size": "m"}}}}),
    );
    wait_until("KubeFed to write the template", || data()["size"] == "m");
    kubefed.stop();
    assert_eq!(
        data(),
        json!({"color": "plain", "size": "m",
               "region": "${MEMBER_LABEL:region}", "name": "${MEMBER_NAME}"}),
        "KubeFed writes the values as written"
    );
}

/// KubeFed's controller, handed a federation, ignores our apply
/// strategies (issue #67; docs/kubefed-differences.md): it adopts a copy
/// that `take-over: IfNoDiff` left alone (`adoptResources: Enabled`),
/// writes a `ReportDiff` object to its members at once (replacing our
/// `Drifted` status, leaving the drift record), and writes a wave that
/// waits for an approval.
#[test]
fn kubefed_ignores_take_over_report_only_and_approval_gates_on_a_hand_over() {
    let Some((_turn, env)) = private_env() else {
        return;
    };
    let env = &env;
    let f = Federation::new(env, "ho-strat", &["configmaps"]);
    short_leases(env, &f);
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    namespace(env, "member1", f.ns);
    let copy_path = |name: &str| format!("/api/v1/namespaces/{}/configmaps/{name}", f.ns);
    post(
        env,
        "member1",
        &format!("/api/v1/namespaces/{}/configmaps", f.ns),
        json!({"metadata": {"name": "theirs"}, "data": {"v": "theirs"}}),
    );
    let federate = |name: &str, annotations: Value, placement: Value| {
        post(
            env,
            "host",
            &format!(
                "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps",
                f.group, f.ns
            ),
            json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": "FederatedConfigMap",
                "metadata": {"name": name, "namespace": f.ns, "annotations": annotations},
                "spec": {"template": {"data": {"v": "ours"}}, "placement": placement}}),
        );
    };
    let on_m1 = json!({"clusters": [{"name": m1}]});
    federate(
        "theirs",
        json!({"kubefedctl.kubefed.io/take-over": "IfNoDiff"}),
        on_m1.clone(),
    );
    federate(
        "reported",
        json!({"kubefedctl.kubefed.io/apply": "ReportDiff"}),
        on_m1,
    );
    let gate = json!({"waves": [{"clusters": [m1]}, {"clusters": [m2], "approval": true}]});
    federate(
        "gated",
        json!({"kubefedctl.kubefed.io/rollout": gate.to_string()}),
        json!({"clusters": [{"name": m1}, {"name": m2}]}),
    );
    // Ours: the refused take-over fails the run (3 wins over 8).
    reconcile_all(&f).exits(3);
    assert_eq!(
        member_object(env, "member1", &copy_path("theirs"))["data"]["v"],
        "theirs"
    );
    assert!(get(env, "member1", &copy_path("reported")).is_none());
    assert!(get(env, "member1", &copy_path("gated")).is_some());
    assert!(
        get(env, "member2", &copy_path("gated")).is_none(),
        "waits for its approval"
    );
    let reported = format!(
        "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/reported",
        f.group, f.ns
    );
    let pv = format!(
        "/apis/core.kubefed.io/v1alpha1/namespaces/{}/propagatedversions/configmap-reported",
        f.ns
    );
    assert_eq!(
        get(env, "host", &reported).unwrap()["status"]["clusters"][0]["status"],
        "Drifted"
    );
    assert!(
        get(env, "host", &pv).unwrap()["metadata"]["annotations"]["kubefedctl.kubefed.io/drift"]
            .is_string()
    );

    let mut kubefed = KubeFed::start(env, &f, "strategies").unwrap();
    kubefed.wait_leading(env, &f);
    let objects: Vec<String> = ["theirs", "reported", "gated"]
        .iter()
        .map(|n| format!("FederatedConfigMap {}/{n}", f.ns))
        .collect();
    kubefed.wait_reconciled(&objects, Duration::from_secs(3));
    wait_until("KubeFed to adopt and write every copy", || {
        get(env, "member1", &copy_path("reported")).is_some()
            && get(env, "member2", &copy_path("gated")).is_some()
            && member_object(env, "member1", &copy_path("theirs"))["data"]["v"] == "ours"
    });
    kubefed.stop();
    let adopted = member_object(env, "member1", &copy_path("theirs"));
    assert_eq!(adopted["metadata"]["labels"]["kubefed.io/managed"], "true");
    let status = get(env, "host", &reported).unwrap()["status"]["clusters"].clone();
    assert!(
        status
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["status"] != "Drifted"),
        "KubeFed writes its own statuses: {status}"
    );
    assert!(
        get(env, "host", &pv).unwrap()["metadata"]["annotations"]["kubefedctl.kubefed.io/drift"]
            .is_string(),
        "KubeFed neither reads nor removes the drift record"
    );
}
