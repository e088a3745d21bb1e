//! Pods that run for real (issue #66): an environment whose clusters each
//! have a node (containerd, kubelet, kube-scheduler; kube-proxy on the
//! host: `testenv::node`), the images of `hack/image.sh` imported into
//! every node, and the in-cluster reconciler exactly as users install it
//! with `init --reconciler`.

use crate::fixtures::*;
use serde_json::{Value, json};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use testenv::{SHARED_CLUSTERS, TestEnv};

/// The environment with nodes every test of this binary that needs pods
/// shares: `host`, `member1` and `member2`, each with a node, the plain
/// and the `-ci` image of `hack/image.sh` on every node; and the
/// [`OWN_MEMBERS`], with none. `None` (the test
/// returns) when a node's programs are missing and the environment is not
/// required ([`testenv::skip`]).
pub fn nodes() -> Option<&'static TestEnv> {
    static NODES: OnceLock<TestEnv> = OnceLock::new();
    if let Some(missing) = testenv::node::node_missing() {
        testenv::skip(&format!("no node: {missing} (hack/testenv.sh)"));
        return None;
    }
    Some(NODES.get_or_init(|| {
        let env = TestEnv::with_nodes(&SHARED_CLUSTERS, &OWN_MEMBERS)
            .unwrap_or_else(|e| panic!("starting the environment with nodes: {e:#}"));
        let (plain, ci) = crate::install::images();
        for (i, image) in [plain, ci].into_iter().enumerate() {
            let archive = env.dir().join(format!("image-{i}.tar"));
            let out = std::process::Command::new("podman")
                .args(["save", "--format", "docker-archive", "-o"])
                .arg(&archive)
                .arg(image)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "podman save {image}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            env.import_image(&archive)
                .unwrap_or_else(|e| panic!("importing {image}: {e:#}"));
        }
        env
    }))
}

/// A reconciler of whole clusters (`init --reconciler`) takes member
/// copies of its types that no federated object of its own names for
/// orphans, as KubeFed's controller does: two federations on the same
/// members undo each other's copies. So each test that installs one
/// federates a member of its own, one of these (API servers on the
/// bridge with no node: they hold copies, they run no pods), while the
/// tests whose runs are scoped to their namespaces share `member1` and
/// `member2`.
pub const OWN_MEMBERS: [&str; 5] = [
    "pods-cron",
    "pods-shard",
    "pods-token",
    "pods-recipes",
    "pods-gitlab",
];

/// A federation of the host and one member of its own (see
/// [`OWN_MEMBERS`]), its kubeconfig naming the clusters' own addresses:
/// the member endpoint `join` writes is one a pod in the host reaches.
pub struct Solo {
    pub kc: std::path::PathBuf,
    pub fedns: &'static str,
    pub group: String,
    pub ns: String,
    /// The member's context (= cluster) name.
    pub member: &'static str,
    /// Its name in the federation (`<fedns>-m1`).
    pub cluster: String,
}

impl Solo {
    pub fn new(env: &TestEnv, fedns: &'static str, member: &'static str, types: &[&str]) -> Solo {
        let kc = write_kubeconfig(env, fedns, env.kubeconfig().current_context("host"));
        let f = Solo {
            kc,
            fedns,
            group: format!("{}.kubefed.io", fedns.replace('-', "")),
            ns: format!("{fedns}-objs"),
            member,
            cluster: format!("{fedns}-m1"),
        };
        f.run(&["init"]).ok();
        f.run(&["join", &f.cluster, "--cluster-context", member])
            .ok();
        for t in types.iter().chain(&["namespaces"]) {
            f.run(&["enable", t, "--federated-group", &f.group]).ok();
        }
        let (status, answer) = create(
            env,
            "host",
            "/api/v1/namespaces",
            json!({"metadata": {"name": f.ns}}),
        );
        assert!(status == 201 || status == 409, "{answer}");
        f.create(
            env,
            "FederatedNamespace",
            &f.ns.clone(),
            json!({"placement": {"clusterSelector": {}}}),
        );
        f
    }

    pub fn run(&self, args: &[&str]) -> Run {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--kubefed-namespace", self.fedns]);
        kubefedctl(&self.kc, &all)
    }

    /// Creates `Federated<kind>` `name` in the objects' namespace.
    pub fn create(&self, env: &TestEnv, kind: &str, name: &str, spec: Value) {
        let plural = format!("{}s", kind.to_lowercase());
        let path = format!(
            "/apis/{}/v1beta1/namespaces/{}/{plural}",
            self.group, self.ns
        );
        let body = json!({"apiVersion": format!("{}/v1beta1", self.group), "kind": kind,
            "metadata": {"name": name, "namespace": self.ns}, "spec": spec});
        let (status, answer) = create(env, "host", &path, body);
        assert_eq!(status, 201, "{answer}");
    }

    /// A ConfigMap's copy in the member.
    pub fn copy(&self, env: &TestEnv, name: &str) -> Option<Value> {
        cm(env, self.member, &self.ns, name)
    }
}

/// Removes a federation's in-cluster reconciler when the test ends (even
/// a failed one), and waits for its pods to be gone: nothing of it runs
/// on when the next test takes the members.
pub struct Reconciler<'a> {
    env: &'a TestEnv,
    fedns: &'a str,
}

impl<'a> Reconciler<'a> {
    pub fn installed(env: &'a TestEnv, fedns: &'a str) -> Reconciler<'a> {
        Reconciler { env, fedns }
    }
}

impl Drop for Reconciler<'_> {
    fn drop(&mut self) {
        let ns = self.fedns;
        for kind in [
            "apis/batch/v1/namespaces/{ns}/cronjobs",
            "apis/batch/v1/namespaces/{ns}/jobs",
            "apis/apps/v1/namespaces/{ns}/statefulsets",
            "apis/apps/v1/namespaces/{ns}/deployments",
        ] {
            let path = format!("/{}", kind.replace("{ns}", ns));
            for o in items(self.env, "host", &path) {
                let name = o["metadata"]["name"].as_str().unwrap_or_default();
                let _ = self.env.request(
                    "host",
                    "DELETE",
                    &format!("{path}/{name}"),
                    Some(r#"{"propagationPolicy":"Background"}"#),
                );
            }
        }
        let pods = format!("/api/v1/namespaces/{ns}/pods");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = items(self.env, "host", &pods);
            if left.is_empty() || Instant::now() > deadline {
                break;
            }
            for p in left {
                let name = p["metadata"]["name"].as_str().unwrap_or_default();
                let _ = self.env.request(
                    "host",
                    "DELETE",
                    &format!("{pods}/{name}"),
                    Some(r#"{"gracePeriodSeconds":0}"#),
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// The image the reconciler pods run (FROM scratch, user 65532).
pub fn image() -> &'static str {
    &crate::install::images().0
}

/// The `-ci` image: a shell and busybox's commands, for workloads that
/// must stay up (`sleep`) or look at themselves (`id`).
pub fn ci_image() -> &'static str {
    &crate::install::images().1
}

/// The items of a list.
pub fn items(env: &TestEnv, cluster: &str, path: &str) -> Vec<Value> {
    get(env, cluster, path)
        .and_then(|l| l["items"].as_array().cloned())
        .unwrap_or_default()
}

/// A pod's log, from its kubelet through the API server.
pub fn pod_log(env: &TestEnv, cluster: &str, ns: &str, pod: &str) -> String {
    let r = env
        .request(
            cluster,
            "GET",
            &format!("/api/v1/namespaces/{ns}/pods/{pod}/log"),
            None,
        )
        .unwrap();
    assert_eq!(r.status, 200, "log of {ns}/{pod} in {cluster}: {}", r.body);
    r.body
}

/// What the pods of a namespace are doing, for a failure's message.
pub fn pods_report(env: &TestEnv, cluster: &str, ns: &str) -> String {
    let mut out = String::new();
    for p in items(env, cluster, &format!("/api/v1/namespaces/{ns}/pods")) {
        out.push_str(&format!(
            "{} {} {}\n",
            p["metadata"]["name"].as_str().unwrap_or_default(),
            p["status"]["phase"],
            p["status"]["containerStatuses"]
        ));
    }
    let events = items(env, cluster, &format!("/api/v1/namespaces/{ns}/events"));
    for e in events.iter().rev().take(15) {
        out.push_str(&format!(
            "event {} {}: {}\n",
            e["involvedObject"]["name"], e["reason"], e["message"]
        ));
    }
    out
}

/// Waits for `done`, up to `limit` (pods start in seconds, CronJobs run
/// on the minute), saying `report()` when it gives up.
pub fn wait_long(
    what: &str,
    limit: Duration,
    mut done: impl FnMut() -> bool,
    report: impl Fn() -> String,
) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}\n{}",
            report()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The JSON summary a reconciler pod logs (`reconcile -o json`): its
/// last line that is a JSON object.
fn summary(log: &str) -> Value {
    log.lines()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l.trim())
                .ok()
                .filter(Value::is_object)
        })
        .or_else(|| serde_json::from_str(log.trim()).ok())
        .unwrap_or_else(|| panic!("no JSON summary in the pod's log:\n{log}"))
}

/// How many member objects a summary says the run created, updated or
/// deleted.
fn writes_of(summary: &Value) -> u64 {
    let mut n = 0;
    let mut walk = vec![summary];
    while let Some(v) = walk.pop() {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v.as_u64()) {
                        ("created" | "updated" | "deleted", Some(c)) => n += c,
                        _ => walk.push(v),
                    }
                }
            }
            Value::Array(a) => walk.extend(a),
            _ => {}
        }
    }
    n
}

fn succeeded_jobs(env: &TestEnv, ns: &str) -> usize {
    items(env, "host", &format!("/apis/batch/v1/namespaces/{ns}/jobs"))
        .iter()
        .filter(|j| j["status"]["succeeded"].as_u64().unwrap_or(0) > 0)
        .count()
}

#[test]
fn a_reconciler_cronjob_runs_as_pods_converges_the_members_and_then_writes_nothing() {
    let Some(env) = nodes() else { return };
    let f = Solo::new(env, "pd-cron", "pods-cron", &["configmaps"]);
    let _reconciler = Reconciler::installed(env, f.fedns);
    f.create(
        env,
        "FederatedConfigMap",
        "hello",
        json!({"template": {"data": {"v": "1"}}, "placement": {"clusterSelector": {}}}),
    );
    f.run(&[
        "init",
        "--reconciler",
        "cronjob",
        "--image",
        image(),
        "--schedule",
        "* * * * *",
    ])
    .ok();
    // Runs on the minute: two of them within three.
    wait_long(
        "two scheduled runs to complete",
        Duration::from_secs(200),
        || succeeded_jobs(env, f.fedns) >= 2,
        || pods_report(env, "host", f.fedns),
    );
    let copy = f.copy(env, "hello").expect("the member's copy");
    assert_eq!(copy["data"]["v"], "1");
    let mut pods = items(env, "host", &format!("/api/v1/namespaces/{}/pods", f.fedns));
    pods.retain(|p| p["status"]["phase"] == "Succeeded");
    pods.sort_by_key(|p| {
        p["metadata"]["creationTimestamp"]
            .as_str()
            .map(String::from)
    });
    assert!(pods.len() >= 2, "{}", pods_report(env, "host", f.fedns));
    let logs: Vec<String> = pods
        .iter()
        .map(|p| {
            pod_log(
                env,
                "host",
                f.fedns,
                p["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    // The first run wrote the members' copies; the last found nothing to do.
    assert!(writes_of(&summary(&logs[0])) >= 2, "{}", logs[0]);
    let last = logs.last().unwrap();
    assert_eq!(writes_of(&summary(last)), 0, "{}", logs.join("\n----\n"));
    // The reconciler's rights were enough.
    for log in &logs {
        let lower = log.to_lowercase();
        assert!(
            !lower.contains("forbidden") && !lower.contains(" 403"),
            "{log}"
        );
    }

    // The kubelet ran the pods as the template says: user 65532 on a
    // read-only root file system. The same pod spec with the `-ci`
    // image's shell shows it from inside.
    let cron = get(
        env,
        "host",
        &format!(
            "/apis/batch/v1/namespaces/{}/cronjobs/kubefedctl-reconcile",
            f.fedns
        ),
    )
    .unwrap();
    let mut spec = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"].clone();
    spec["restartPolicy"] = json!("Never");
    spec["containers"][0]["image"] = json!(ci_image());
    spec["containers"][0]["command"] = json!(["/bin/sh", "-c"]);
    spec["containers"][0]["args"] =
        json!(["id -u; if touch /probe 2>/dev/null; then echo writable; else echo read-only; fi"]);
    let (status, answer) = create(
        env,
        "host",
        &format!("/api/v1/namespaces/{}/pods", f.fedns),
        json!({"metadata": {"name": "self-check"}, "spec": spec}),
    );
    assert_eq!(status, 201, "{answer}");
    let path = format!("/api/v1/namespaces/{}/pods/self-check", f.fedns);
    wait_long(
        "the self-check pod to finish",
        Duration::from_secs(60),
        || get(env, "host", &path).is_some_and(|p| p["status"]["phase"] == "Succeeded"),
        || pods_report(env, "host", f.fedns),
    );
    let said = pod_log(env, "host", f.fedns, "self-check");
    assert_eq!(said.lines().collect::<Vec<_>>(), ["65532", "read-only"]);
}

#[test]
fn a_sharded_watch_elects_a_leader_per_shard_and_a_standby_takes_over() {
    let Some(env) = nodes() else { return };
    let f = Solo::new(env, "pd-shard", "pods-shard", &["configmaps"]);
    let _reconciler = Reconciler::installed(env, f.fedns);
    f.run(&[
        "init",
        "--reconciler",
        "deployment",
        "--shards",
        "2",
        "--image",
        image(),
    ])
    .ok();
    let pods_path = format!("/api/v1/namespaces/{}/pods", f.fedns);
    let ready = |p: &Value| {
        (p["status"]["conditions"].as_array().into_iter().flatten())
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    };
    // Probes pass: every pod is Ready.
    wait_long(
        "four reconciler pods to be ready",
        Duration::from_secs(120),
        || {
            let pods = items(env, "host", &pods_path);
            pods.len() == 4 && pods.iter().all(ready)
        },
        || pods_report(env, "host", f.fedns),
    );
    let lease = |shard: u32| {
        get(
            env,
            "host",
            &format!(
                "/apis/coordination.k8s.io/v1/namespaces/{}/leases/kubefedctl-reconcile-{shard}-of-2",
                f.fedns
            ),
        )
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(String::from))
        .unwrap_or_default()
    };
    let pod_of = |holder: &str| holder.split(' ').next().unwrap_or_default().to_string();
    wait_long(
        "a leader for each shard",
        Duration::from_secs(60),
        || !lease(0).is_empty() && !lease(1).is_empty(),
        || pods_report(env, "host", f.fedns),
    );
    // Pod I works on shard I mod 2.
    for shard in 0..2 {
        let pod = pod_of(&lease(shard));
        let ordinal: u32 = pod.rsplit('-').next().unwrap().parse().unwrap();
        assert_eq!(ordinal % 2, shard, "{pod} leads shard {shard}");
    }
    // Each pod answers /metrics on its own address.
    for p in items(env, "host", &pods_path) {
        let ip = p["status"]["podIP"].as_str().unwrap();
        let r =
            testenv::http::plain_get(&format!("{ip}:8080"), "/metrics", Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("GET {ip}:8080/metrics: {e:#}"));
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(r.body.contains("kubefedctl_"), "{}", r.body);
    }
    // Both shards' leaders converge a new object.
    f.create(
        env,
        "FederatedConfigMap",
        "before",
        json!({"template": {"data": {"v": "1"}}, "placement": {"clusterSelector": {}}}),
    );
    wait_long(
        "the leaders to propagate `before`",
        Duration::from_secs(60),
        || f.copy(env, "before").is_some(),
        || pods_report(env, "host", f.fedns),
    );

    // The leader of the objects' shard goes; its standby takes the shard
    // over within the lease, and a change made meanwhile reaches the members.
    let leader = pod_of(&lease(0));
    let ordinal: u32 = leader.rsplit('-').next().unwrap().parse().unwrap();
    let standby = format!("kubefedctl-reconcile-{}", (ordinal + 2) % 4);
    let deleted = env
        .request(
            "host",
            "DELETE",
            &format!("{pods_path}/{leader}"),
            Some(&json!({"gracePeriodSeconds": 5}).to_string()),
        )
        .unwrap();
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    let leader1 = pod_of(&lease(1));
    let ordinal1: u32 = leader1.rsplit('-').next().unwrap().parse().unwrap();
    let standby1 = format!("kubefedctl-reconcile-{}", (ordinal1 + 2) % 4);
    let _ = env.request(
        "host",
        "DELETE",
        &format!("{pods_path}/{leader1}"),
        Some(&json!({"gracePeriodSeconds": 5}).to_string()),
    );
    f.create(
        env,
        "FederatedConfigMap",
        "meanwhile",
        json!({"template": {"data": {"v": "2"}}, "placement": {"clusterSelector": {}}}),
    );
    wait_long(
        "the standbys to lead",
        Duration::from_secs(40),
        || pod_of(&lease(0)) == standby && pod_of(&lease(1)) == standby1,
        || {
            format!(
                "leases: {:?} {:?}\n{}",
                lease(0),
                lease(1),
                pods_report(env, "host", f.fedns)
            )
        },
    );
    wait_long(
        "`meanwhile` in the member",
        Duration::from_secs(60),
        || {
            f.copy(env, "meanwhile")
                .is_some_and(|c| c["data"]["v"] == "2")
        },
        || pods_report(env, "host", f.fedns),
    );
    wait_long(
        "four reconciler pods to be ready again",
        Duration::from_secs(120),
        || {
            let pods = items(env, "host", &pods_path);
            pods.len() == 4 && pods.iter().all(ready)
        },
        || pods_report(env, "host", f.fedns),
    );
    for p in items(env, "host", &pods_path) {
        let name = p["metadata"]["name"].as_str().unwrap();
        let log = pod_log(env, "host", f.fedns, name).to_lowercase();
        assert!(!log.contains("forbidden"), "{name}: {log}");
    }
}

/// Every pod's log in the federation namespace, joined.
fn all_logs(env: &TestEnv, ns: &str) -> String {
    let mut out = String::new();
    for p in items(env, "host", &format!("/api/v1/namespaces/{ns}/pods")) {
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        let r = env
            .request(
                "host",
                "GET",
                &format!("/api/v1/namespaces/{ns}/pods/{name}/log"),
                None,
            )
            .unwrap();
        if r.status == 200 {
            out.push_str(&format!("--- {name}\n{}\n", r.body));
        }
    }
    out
}

#[test]
fn the_in_cluster_watch_rotates_a_short_lived_member_token() {
    let Some(env) = nodes() else { return };
    let f = Solo::new(env, "pd-token", "pods-token", &["configmaps"]);
    let _reconciler = Reconciler::installed(env, f.fedns);
    f.run(&[
        "join",
        &f.cluster,
        "--cluster-context",
        f.member,
        "--token-ttl",
        "20m",
        "--error-on-existing=false",
    ])
    .ok();
    let kfc_path = format!(
        "/apis/core.kubefed.io/v1beta1/namespaces/{}/kubefedclusters/{}",
        f.fedns, f.cluster
    );
    let token = || {
        let kfc = get(env, "host", &kfc_path).unwrap();
        let secret = kfc["spec"]["secretRef"]["name"]
            .as_str()
            .unwrap()
            .to_string();
        get(
            env,
            "host",
            &format!("/api/v1/namespaces/{}/secrets/{secret}", f.fedns),
        )
        .unwrap()["data"]["token"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // Recorded as expiring within the last fifth of its lifetime: due.
    patch(
        env,
        "host",
        &kfc_path,
        json!({"metadata": {"annotations": {"kubefedctl.kubefed.io/token-expires-at": rfc3339_in(60)}}}),
    );
    let first = token();
    f.run(&["init", "--reconciler", "deployment", "--image", image()])
        .ok();
    wait_long(
        "the reconciler's pod to rotate the due token",
        Duration::from_secs(120),
        || token() != first,
        || {
            format!(
                "{}\n{}",
                pods_report(env, "host", f.fedns),
                all_logs(env, f.fedns)
            )
        },
    );
    // It propagates with the new token.
    f.create(
        env,
        "FederatedConfigMap",
        "after-rotation",
        json!({"template": {"data": {"a": "1"}}, "placement": {"clusterSelector": {}}}),
    );
    wait_long(
        "the change to reach the member",
        Duration::from_secs(60),
        || f.copy(env, "after-rotation").is_some(),
        || all_logs(env, f.fedns),
    );
    let logs = all_logs(env, f.fedns);
    assert!(
        logs.contains(&format!("{}: token rotated", f.cluster)),
        "{logs}"
    );
    assert!(!logs.to_lowercase().contains("forbidden"), "{logs}");
}

/// `kubectl create job --from=cronjob/NAME`: a run now, from the
/// CronJob's own template.
fn run_cronjob_now(env: &TestEnv, ns: &str, cron: &str, job: &str) {
    let c = get(
        env,
        "host",
        &format!("/apis/batch/v1/namespaces/{ns}/cronjobs/{cron}"),
    )
    .unwrap_or_else(|| panic!("no CronJob {ns}/{cron}"));
    let (status, answer) = create(
        env,
        "host",
        &format!("/apis/batch/v1/namespaces/{ns}/jobs"),
        json!({"metadata": {"name": job}, "spec": c["spec"]["jobTemplate"]["spec"]}),
    );
    assert_eq!(status, 201, "{answer}");
}

/// Waits until Job `name` has `n` succeeded pods.
fn job_succeeds(env: &TestEnv, ns: &str, name: &str, n: u64) {
    let path = format!("/apis/batch/v1/namespaces/{ns}/jobs/{name}");
    wait_long(
        &format!("Job {name} to succeed {n} time(s)"),
        Duration::from_secs(120),
        || get(env, "host", &path).is_some_and(|j| j["status"]["succeeded"].as_u64() >= Some(n)),
        || pods_report(env, "host", ns),
    );
}

/// The `kubefedctl init --reconciler` lines of docs/in-cluster.md's
/// first block, as shell words, comments and redirections dropped.
fn documented_recipes() -> Vec<Vec<String>> {
    let docs = std::fs::read_to_string(root().join("docs/in-cluster.md")).unwrap();
    let block = docs
        .split("```sh")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    block
        .lines()
        .map(|l| l.split(" #").next().unwrap().trim())
        .filter(|l| l.starts_with("kubefedctl init --reconciler"))
        .map(|l| {
            let mut words = Vec::new();
            let mut rest = l.split('>').next().unwrap().trim();
            while !rest.is_empty() {
                let (word, tail) = if let Some(quoted) = rest.strip_prefix('\'') {
                    let end = quoted.find('\'').unwrap();
                    (&quoted[..end], &quoted[end + 1..])
                } else {
                    let end = rest.find(' ').unwrap_or(rest.len());
                    (&rest[..end], &rest[end..])
                };
                words.push(word.to_string());
                rest = tail.trim_start();
            }
            words
        })
        .collect()
}

#[test]
fn the_documented_in_cluster_recipes_run_as_pods() {
    let Some(env) = nodes() else { return };
    let f = Solo::new(env, "pd-docs", "pods-recipes", &["configmaps"]);
    let _reconciler = Reconciler::installed(env, f.fedns);
    let recipes = documented_recipes();
    assert_eq!(recipes.len(), 5, "{recipes:?}");
    let ns = f.fedns;
    for (i, words) in recipes.iter().enumerate() {
        let args: Vec<&str> = (words[1..].iter())
            .map(|w| match w.as_str() {
                "IMAGE" | "registry.example/kubefedctl:0.1" => image(),
                w => w,
            })
            .collect();
        // Each recipe's run carries a change of its own to the member.
        let name = format!("recipe-{i}");
        f.create(
            env,
            "FederatedConfigMap",
            &name,
            json!({"template": {"data": {"i": i.to_string()}}, "placement": {"clusterSelector": {}}}),
        );
        let run = f.run(&args).ok();
        let has = |flag: &str| args.contains(&flag);
        if has("-o") {
            // A review: the manifests, nothing written (the previous
            // recipe's Deployment is still the one running).
            assert!(run.stdout.contains("kind: CronJob"), "{}", run.stdout);
            assert!(
                get(
                    env,
                    "host",
                    &format!("/apis/batch/v1/namespaces/{ns}/cronjobs/kubefedctl-reconcile")
                )
                .is_none(),
                "-o yaml wrote nothing"
            );
            assert!(
                get(
                    env,
                    "host",
                    &format!("/apis/apps/v1/namespaces/{ns}/deployments/kubefedctl-reconcile")
                )
                .is_some()
            );
            continue;
        }
        match args[2] {
            "cronjob" => {
                let job = format!("now-{i}");
                run_cronjob_now(env, ns, "kubefedctl-reconcile", &job);
                // One pod per shard (an Indexed Job).
                let shards = if has("--shards") { 3 } else { 1 };
                job_succeeds(env, ns, &job, shards);
            }
            "job" => job_succeeds(env, ns, "kubefedctl-reconcile", 1),
            "deployment" => {
                let path =
                    format!("/apis/apps/v1/namespaces/{ns}/deployments/kubefedctl-reconcile");
                wait_long(
                    "the reconciler Deployment's two replicas to be available",
                    Duration::from_secs(120),
                    || {
                        get(env, "host", &path)
                            .is_some_and(|d| d["status"]["availableReplicas"] == 2)
                    },
                    || pods_report(env, "host", ns),
                );
            }
            other => panic!("a recipe of a kind this test does not know: {other}"),
        }
        wait_long(
            &format!("`{}` to reach the member", words.join(" ")),
            Duration::from_secs(60),
            || f.copy(env, &name).is_some(),
            || pods_report(env, "host", ns),
        );
    }
    assert!(!all_logs(env, ns).to_lowercase().contains("forbidden"));
}

/// Runs docs/ci.md's GitLab job `name` as GitLab's Kubernetes executor
/// would: a pod of the job's image (the `-ci` image, imported), the
/// project's files checked out into its working directory first, the
/// runner's shell preamble, then `before_script` and `script` as written.
/// Its exit code and log.
fn gitlab_job(env: &TestEnv, f: &Solo, pipeline: &Value, name: &str, run: usize) -> (i64, String) {
    let lines = |v: &Value| -> Vec<String> {
        (v.as_array().unwrap().iter())
            .map(|l| l.as_str().unwrap().to_string())
            .collect()
    };
    let template = &pipeline[".kubefedctl"];
    assert_eq!(pipeline[name]["extends"], ".kubefedctl");
    // The checkout (a ConfigMap stands for the repository), then the
    // runner's preamble.
    let mut script = String::from(
        "cp -rL /checkout/. . && mkdir -p federation/shop .shim && mv web.yaml federation/shop/ \
         && mv kubefedctl .shim/ && chmod +x .shim/kubefedctl\n\
         if set -o | grep pipefail > /dev/null; then set -o pipefail; fi; set -o errexit\n",
    );
    for l in lines(&template["before_script"])
        .iter()
        .chain(&lines(&pipeline[name]["script"]))
    {
        script.push_str(l);
        script.push('\n');
    }
    let pod = format!("gitlab-{name}-{run}");
    let kc = std::fs::read(&f.kc).unwrap();
    use base64::Engine as _;
    let kc_b64 = base64::engine::general_purpose::STANDARD.encode(kc);
    let spec = json!({"metadata": {"name": pod},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "build", "image": ci_image(), "imagePullPolicy": "Never",
                "command": ["sh", "-c", script], "workingDir": "/builds/project",
                "env": [{"name": "FEDERATION_KUBECONFIG", "value": kc_b64},
                        {"name": "PATH", "value": "/builds/project/.shim:/usr/local/bin:/bin"}],
                "volumeMounts": [{"name": "project", "mountPath": "/builds/project"},
                                 {"name": "checkout", "mountPath": "/checkout"}]}],
            "volumes": [{"name": "project", "emptyDir": {}},
                        {"name": "checkout", "configMap": {"name": "gitlab-checkout"}}]}});
    let (status, answer) = create(
        env,
        "host",
        &format!("/api/v1/namespaces/{}/pods", f.fedns),
        spec,
    );
    assert_eq!(status, 201, "{answer}");
    let path = format!("/api/v1/namespaces/{}/pods/{pod}", f.fedns);
    let mut code = None;
    wait_long(
        &format!("the {name} job's pod to finish"),
        Duration::from_secs(120),
        || {
            let p = get(env, "host", &path).unwrap();
            code = p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"].as_i64();
            code.is_some()
        },
        || {
            format!(
                "{}\nits log:\n{}",
                pods_report(env, "host", f.fedns),
                pod_log(env, "host", f.fedns, &pod)
            )
        },
    );
    (code.unwrap(), pod_log(env, "host", f.fedns, &pod))
}

#[test]
fn the_gitlab_ci_jobs_run_in_the_ci_image_as_pods() {
    let Some(env) = nodes() else { return };
    let f = Solo::new(env, "pd-gitlab", "pods-gitlab", &["configmaps"]);
    // The federation exists already (its namespace is in the member).
    f.run(&["reconcile"]).ok();
    let pipeline: Value = serde_saphyr::from_str(&crate::install::recipe("## GitLab CI")).unwrap();
    let (yaml, _) = crate::install::github_recipe();
    let pending = i64::from(crate::install::pending_exit_code(&yaml));
    // The repository: one FederatedConfigMap of the `shop` part, and a
    // kubefedctl that adds this test's federation namespace (the recipe
    // uses the default one).
    let web = json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": "FederatedConfigMap",
        "metadata": {"name": "web", "namespace": f.ns, "labels": {"app.kubernetes.io/part-of": "shop"}},
        "spec": {"template": {"data": {"a": "1"}}, "placement": {"clusterSelector": {}}}});
    let shim = format!(
        "#!/bin/sh\nexec /usr/local/bin/kubefedctl \"$@\" --kubefed-namespace {}\n",
        f.fedns
    );
    let (status, answer) = create(
        env,
        "host",
        &format!("/api/v1/namespaces/{}/configmaps", f.fedns),
        json!({"metadata": {"name": "gitlab-checkout"},
               "data": {"web.yaml": web.to_string(), "kubefedctl": shim}}),
    );
    assert_eq!(status, 201, "{answer}");

    let (code, log) = gitlab_job(env, &f, &pipeline, "plan", 1);
    assert_eq!(
        code, pending,
        "changes pending fail the job (pipefail through tee)\n{log}"
    );
    assert!(
        log.contains(&format!("| create | `ConfigMap {}/web` |", f.ns)),
        "{log}"
    );
    let (code, log) = gitlab_job(env, &f, &pipeline, "apply", 1);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("created"), "{log}");
    assert_eq!(f.copy(env, "web").unwrap()["data"]["a"], "1");
    // Converged: the next plan finds nothing to do.
    let (code, log) = gitlab_job(env, &f, &pipeline, "plan", 2);
    assert_eq!(code, 0, "{log}");
}

/// A pull member's agent (issue #68) as `join --mode pull` installs it: a
/// Deployment in member2, whose pod reaches the host with the kubeconfig
/// join wrote into the member and applies its share with its own
/// ServiceAccount. The host never holds a credential for member2.
#[test]
fn a_pull_members_agent_runs_as_a_pod_and_converges_its_member() {
    let Some(env) = nodes() else { return };
    let fedns = "pd-pull";
    let kc = write_kubeconfig(env, fedns, env.kubeconfig().current_context("host"));
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--kubefed-namespace", fedns]);
        kubefedctl(&kc, &all)
    };
    let (group, ns, cluster) = ("pdpull.kubefed.io", "pd-pull-objs", "pd-pull-m2");
    run(&["init"]).ok();
    for t in ["configmaps", "namespaces"] {
        run(&["enable", t, "--federated-group", group]).ok();
    }
    // member2 is shared with other tests' federations: the agent is
    // scoped to this one's namespace.
    run(&[
        "join",
        cluster,
        "--cluster-context",
        "member2",
        "--mode",
        "pull",
        "--image",
        image(),
        "--agent-objects-namespace",
        ns,
    ])
    .ok();
    struct Unjoin<'a>(&'a dyn Fn(&[&str]) -> Run, &'a str);
    impl Drop for Unjoin<'_> {
        fn drop(&mut self) {
            (self.0)(&["unjoin", self.1, "--cluster-context", "member2"]);
        }
    }
    let _unjoin = Unjoin(&run, cluster);
    // The environment's one kube-proxy serves the host's `kubernetes`
    // Service (every cluster's has the same ClusterIP): the pod is pointed
    // at member2's API server itself, as its own Service would route it.
    let member2 = env.cluster("member2").url();
    let (address, port) = member2
        .trim_start_matches("https://")
        .rsplit_once(':')
        .unwrap();
    let deployment = format!("/apis/apps/v1/namespaces/{fedns}/deployments/kubefedctl-agent");
    wait_until("the agent's Deployment, pointed at member2", || {
        let mut d = get(env, "member2", &deployment).expect("join installs the agent");
        let container = &mut d["spec"]["template"]["spec"]["containers"][0];
        let args = container["args"].as_array().unwrap();
        assert_eq!(args[args.len() - 2..], [json!("-n"), json!(ns)]);
        container["env"] = json!([
            {"name": "KUBERNETES_SERVICE_HOST", "value": address},
            {"name": "KUBERNETES_SERVICE_PORT", "value": port},
        ]);
        let (status, answer) = request(env, "member2", "PUT", &deployment, Some(d));
        assert!(status == 200 || status == 409, "{answer}");
        status == 200
    });
    let (status, answer) = create(
        env,
        "host",
        "/api/v1/namespaces",
        json!({"metadata": {"name": ns}}),
    );
    assert!(status == 201 || status == 409, "{answer}");
    for (kind, name, spec) in [
        (
            "FederatedNamespace",
            ns,
            json!({"placement": {"clusterSelector": {}}}),
        ),
        (
            "FederatedConfigMap",
            "from-the-pod",
            json!({"template": {"data": {"k": "v"}}, "placement": {"clusterSelector": {}}}),
        ),
    ] {
        let plural = format!("{}s", kind.to_lowercase());
        let body = json!({"apiVersion": format!("{group}/v1beta1"), "kind": kind,
            "metadata": {"name": name, "namespace": ns}, "spec": spec});
        let (status, answer) = create(
            env,
            "host",
            &format!("/apis/{group}/v1beta1/namespaces/{ns}/{plural}"),
            body,
        );
        assert_eq!(status, 201, "{answer}");
    }
    let logs = || {
        let pods = items(env, "member2", &format!("/api/v1/namespaces/{fedns}/pods"));
        let mut out = pods_report(env, "member2", fedns);
        for p in pods {
            let name = p["metadata"]["name"].as_str().unwrap_or_default();
            out.push_str(&pod_log(env, "member2", fedns, name));
        }
        out
    };
    wait_long(
        "the agent's pod to apply its share",
        Duration::from_secs(120),
        || cm(env, "member2", ns, "from-the-pod").is_some(),
        logs,
    );
    let report = format!(
        "/apis/kubefedctl.kubefed.io/v1alpha1/namespaces/{fedns}-pull-{cluster}/propagationreports/configmaps.{ns}.from-the-pod"
    );
    wait_long(
        "its report",
        Duration::from_secs(60),
        || get(env, "host", &report).is_some(),
        logs,
    );
    // The host's run reads it as a push member's result.
    run(&["reconcile", "-n", ns]).ok();
    let fed = get(
        env,
        "host",
        &format!("/apis/{group}/v1beta1/namespaces/{ns}/federatedconfigmaps/from-the-pod"),
    )
    .unwrap();
    assert_eq!(fed["status"]["clusters"][0]["name"], cluster, "{fed}");
    assert_eq!(fed["status"]["conditions"][0]["status"], "True", "{fed}");
    let log = logs();
    assert!(!log.to_lowercase().contains("forbidden"), "{log}");
    assert!(log.contains("leading"), "{log}");
}
