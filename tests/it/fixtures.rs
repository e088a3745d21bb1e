//! The one fixture module of the integration tests: the built binaries, the
//! shared test environment, requests as a cluster's admin, golden files, and
//! a whole federation behind counting proxies. A new test goes into the
//! module of its command and takes what it needs from here.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use testenv::{Faults, KubeconfigBuilder, Proxy, RequestRecord, TestEnv};

pub const KUBEFEDCTL: &str = env!("CARGO_BIN_EXE_kubefedctl");

/// What a run printed and how it ended.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Run {
    pub fn ok(self) -> Run {
        assert_eq!(
            self.code, 0,
            "expected success\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    pub fn fails(self) -> Run {
        self.exits(1)
    }

    /// A usage error: exit 2, one line on stderr, before any connection.
    pub fn usage(self) -> Run {
        self.exits(2)
    }

    pub fn exits(self, code: i32) -> Run {
        assert_eq!(
            self.code, code,
            "expected exit {code}\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

/// Runs kubefedctl with `--kubeconfig kc` and `args`, no TTY, no KUBECONFIG.
pub fn kubefedctl(kc: &Path, args: &[&str]) -> Run {
    Command::new(KUBEFEDCTL)
        .arg("--kubeconfig")
        .arg(kc)
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("COMPLETE")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running kubefedctl")
        .into()
}

/// A token of the reconciler's service account, as a Pod's projected
/// service-account volume gets it: from the TokenRequest API (1.20 also
/// made token Secrets by itself; 1.24 and later make none).
pub fn reconciler_token(env: &TestEnv, fedns: &str) -> String {
    let path = format!("/api/v1/namespaces/{fedns}/serviceaccounts/kubefedctl-reconciler/token");
    let body = serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600}})
    .to_string();
    let mut token = String::new();
    wait_until("a token for the reconciler's service account", || {
        let r = env.request("host", "POST", &path, Some(&body)).unwrap();
        match r
            .json()
            .ok()
            .and_then(|v| v["status"]["token"].as_str().map(str::to_string))
        {
            Some(t) if r.status == 201 => {
                token = t;
                true
            }
            _ => false,
        }
    });
    token
}

/// A pod's service account mount: token, CA, namespace.
pub fn pod_mount(env: &TestEnv, test: &str, token: &str, fedns: &str) -> PathBuf {
    let dir = env.dir().join(format!("pod-{test}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("token"), token).unwrap();
    std::fs::write(dir.join("ca.crt"), env.ca_pem()).unwrap();
    std::fs::write(dir.join("namespace"), fedns).unwrap();
    dir
}

/// Runs kubefedctl as inside a pod: no kubeconfig anywhere, the service
/// account's token, CA and namespace in `pod_dir` (as they are mounted in a
/// pod), and the API server at `server` (`https://host:port`).
pub fn kubefedctl_in_pod(pod_dir: &Path, server: &str, args: &[&str]) -> Run {
    let hostport = server.trim_start_matches("https://");
    let (host, port) = hostport.rsplit_once(':').expect("server has a port");
    let home = pod_dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    Command::new(KUBEFEDCTL)
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", &home)
        .env("KUBERNETES_SERVICE_HOST", host)
        .env("KUBERNETES_SERVICE_PORT", port)
        .env("KUBEFEDCTL_SERVICE_ACCOUNT_DIR", pod_dir)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running kubefedctl")
        .into()
}

/// Writes a kubeconfig for this test under the environment's directory
/// (numbered, so two tests that pick the same name never share a file).
pub fn write_kubeconfig(env: &TestEnv, test: &str, kc: KubeconfigBuilder) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = env.dir().join(format!("kubeconfig-{test}-{n}.yaml"));
    kc.write(&path).unwrap();
    path
}

/// GET as the cluster's admin; `None` on 404.
pub fn get(env: &TestEnv, cluster: &str, path: &str) -> Option<serde_json::Value> {
    let r = env.request(cluster, "GET", path, None).unwrap();
    match r.status {
        200 => Some(r.json().unwrap()),
        404 => None,
        s => panic!("GET {path} in {cluster}: {s} {}", r.body),
    }
}

/// True when the object is gone or being deleted.
pub fn gone(env: &TestEnv, cluster: &str, path: &str) -> bool {
    match get(env, cluster, path) {
        None => true,
        Some(o) => !o["metadata"]["deletionTimestamp"].is_null(),
    }
}

/// Decodes a base64 Secret value.
pub fn b64(text: &str) -> String {
    use base64::Engine;
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap(),
    )
    .unwrap()
}

/// `text` base64-encoded, as a Secret's `data` holds it.
/// Seconds from now until an RFC 3339 time (negative: past).
pub fn seconds_until(rfc3339: &str) -> i64 {
    kubefedctl::core::time::parse_rfc3339(rfc3339).expect("an RFC 3339 time")
        - kubefedctl::clock::now_unix()
}

/// The RFC 3339 time `seconds` from now.
pub fn rfc3339_in(seconds: i64) -> String {
    kubefedctl::core::time::rfc3339(kubefedctl::clock::now_unix() + seconds)
}

pub fn b64_encode(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A request as the cluster's admin: status code and JSON body (`null`
/// when the body is not JSON).
pub fn request(
    env: &TestEnv,
    cluster: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let r = env
        .request(
            cluster,
            method,
            path,
            body.map(|b| b.to_string()).as_deref(),
        )
        .unwrap();
    (
        r.status,
        serde_json::from_str(&r.body).unwrap_or(Value::Null),
    )
}

/// POST as the cluster's admin: status code and body, for tests that
/// expect a refusal.
pub fn create(env: &TestEnv, cluster: &str, path: &str, body: Value) -> (u16, Value) {
    request(env, cluster, "POST", path, Some(body))
}

/// Creates the object by POST to `path` in `cluster`; one that is already
/// there is fine. Returns the answer's body.
pub fn post(env: &TestEnv, cluster: &str, path: &str, body: Value) -> Value {
    let (status, answer) = request(env, cluster, "POST", path, Some(body));
    assert!(
        status == 201 || status == 409,
        "POST {path} in {cluster}: {status} {answer}"
    );
    answer
}

/// Creates namespace `name` in `cluster` (one already there is fine).
pub fn namespace(env: &TestEnv, cluster: &str, name: &str) {
    post(
        env,
        cluster,
        "/api/v1/namespaces",
        json!({"metadata": {"name": name}}),
    );
}

/// Merge-patches the object at `path` in `cluster`.
pub fn patch(env: &TestEnv, cluster: &str, path: &str, body: Value) {
    let (status, answer) = request(env, cluster, "PATCH", path, Some(body));
    assert_eq!(status, 200, "PATCH {path} in {cluster}: {answer}");
}

pub fn labels(obj: &Value) -> Value {
    obj["metadata"]["labels"].clone()
}

/// The repository root (for `testdata/`).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `text` equals `testdata/golden/NAME`, with the environment's random
/// ports and its Kubernetes releases masked (`v1.NN.N`), so that one file
/// holds on every release; `UPDATE_GOLDEN=1` rewrites the file instead.
pub fn assert_golden(name: &str, text: &str) {
    let mut masked = mask_ports(text);
    for v in testenv::Version::ALL {
        masked = masked.replace(v.tag, "v1.NN.N");
    }
    let file = root().join("testdata/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&file, &masked).unwrap();
    }
    assert_eq!(
        masked,
        std::fs::read_to_string(&file).unwrap_or_default(),
        "UPDATE_GOLDEN=1 rewrites {}",
        file.display()
    );
}

/// `127.0.0.1:41234` → `127.0.0.1:PORT`, keeping column widths.
fn mask_ports(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("127.0.0.1:") {
        out.push_str(&rest[..i + 10]);
        rest = &rest[i + 10..];
        let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
        out.push_str(&format!("{:<width$}", "PORT", width = digits));
        rest = &rest[digits..];
    }
    out.push_str(rest);
    out
}

/// The documents of a YAML stream.
pub fn yaml_docs(text: &str) -> Vec<Value> {
    text.split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_saphyr::from_str(d).unwrap())
        .collect()
}

/// Polls `done` every 20 ms for up to 60 s.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One test's federation: proxies in front of every cluster, a kubeconfig
/// through them, and its names.
pub struct Federation {
    pub kc: PathBuf,
    pub fedns: &'static str,
    pub group: &'static str,
    pub ns: &'static str,
    pub host: Proxy,
    pub m1: Proxy,
    pub m2: Proxy,
}

impl Federation {
    /// The federation of one test, every name derived from `prefix`
    /// (`rc-b`: federation namespace `rc-b`, federated group
    /// `rcb.kubefed.io`, objects in `rc-b-objs`), with `types` enabled.
    pub fn new(env: &TestEnv, prefix: &'static str, types: &[&str]) -> Federation {
        let group = format!("{}.kubefed.io", prefix.replace('-', ""));
        let ns = format!("{prefix}-objs");
        Federation::named(
            env,
            prefix,
            Box::leak(group.into()),
            Box::leak(ns.into()),
            types,
        )
    }

    /// [`Federation::new`] with member2 joined as a pull member
    /// (`join --mode pull`): the host never reaches it, an agent does.
    pub fn with_pull(env: &TestEnv, prefix: &'static str, types: &[&str]) -> Federation {
        let group = format!("{}.kubefed.io", prefix.replace('-', ""));
        let ns = format!("{prefix}-objs");
        let (group, ns) = (Box::leak(group.into()), Box::leak(ns.into()));
        Federation::joined(env, (prefix, group, ns), types, &["m2"])
    }

    /// [`Federation::new`] with names of the test's own choosing.
    pub fn named(
        env: &TestEnv,
        fedns: &'static str,
        group: &'static str,
        ns: &'static str,
        types: &[&str],
    ) -> Federation {
        Federation::joined(env, (fedns, group, ns), types, &[])
    }

    /// [`Federation::named`], the members named in `pull` joined as pull
    /// members.
    fn joined(
        env: &TestEnv,
        (fedns, group, ns): (&'static str, &'static str, &'static str),
        types: &[&str],
        pull: &[&str],
    ) -> Federation {
        let (host, m1, m2) = (
            env.proxy("host").unwrap(),
            env.proxy("member1").unwrap(),
            env.proxy("member2").unwrap(),
        );
        let kc = write_kubeconfig(
            env,
            fedns,
            env.kubeconfig()
                .current_context("host")
                .server("host", &host.url())
                .server("member1", &m1.url())
                .server("member2", &m2.url()),
        );
        let f = Federation {
            kc,
            fedns,
            group,
            ns,
            host,
            m1,
            m2,
        };
        f.run(&["init"]).ok();
        for (short, context) in [("m1", "member1"), ("m2", "member2")] {
            let name = f.cluster(short);
            let mut join = vec!["join", &name, "--cluster-context", context];
            if pull.contains(&short) {
                join.extend(["--mode", "pull", "--image", "kubefedctl:test"]);
            }
            f.run(&join).ok();
        }
        for t in types.iter().chain(&["namespaces"]) {
            f.run(&["enable", t, "--federated-group", group]).ok();
        }
        let r = env
            .request(
                "host",
                "POST",
                "/api/v1/namespaces",
                Some(&json!({"metadata": {"name": ns}}).to_string()),
            )
            .unwrap();
        assert!(r.status == 201 || r.status == 409);
        // Namespaced objects go where their FederatedNamespace places the namespace.
        f.create(
            env,
            "FederatedNamespace",
            ns,
            json!({"placement": {"clusterSelector": {}}}),
        );
        f
    }

    /// This federation's name for a member (`<fedns>-m1`).
    pub fn cluster(&self, short: &str) -> String {
        format!("{}-{short}", self.fedns)
    }

    pub fn run(&self, args: &[&str]) -> Run {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--kubefed-namespace", self.fedns]);
        kubefedctl(&self.kc, &all)
    }

    /// A KubeFedCluster of this federation, and the path of its host Secret.
    pub fn kubefed_cluster(&self, env: &TestEnv, cluster: &str) -> (Value, String) {
        let kfc = get(
            env,
            "host",
            &format!(
                "/apis/core.kubefed.io/v1beta1/namespaces/{}/kubefedclusters/{cluster}",
                self.fedns
            ),
        )
        .unwrap();
        let secret = kfc["spec"]["secretRef"]["name"].as_str().unwrap();
        let path = format!("/api/v1/namespaces/{}/secrets/{secret}", self.fedns);
        (kfc, path)
    }

    pub fn reconcile(&self, extra: &[&str]) -> Run {
        self.reconcile_in(self.ns, extra)
    }

    /// [`Federation::reconcile`] of the objects of namespace `ns`.
    pub fn reconcile_in(&self, ns: &str, extra: &[&str]) -> Run {
        let mut args = vec![
            "reconcile",
            "-n",
            ns,
            "--probe-timeout",
            "2s",
            "--timeout",
            "3s",
        ];
        args.extend_from_slice(extra);
        self.run(&args)
    }

    pub fn create(&self, env: &TestEnv, kind: &str, name: &str, spec: Value) {
        let plural = match kind.to_lowercase() {
            k if k.ends_with("ss") => format!("{k}es"),
            k if k.ends_with('s') => k,
            k => format!("{k}s"),
        };
        let path = format!(
            "/apis/{}/v1beta1/namespaces/{}/{plural}",
            self.group, self.ns
        );
        let body = json!({"apiVersion": format!("{}/v1beta1", self.group), "kind": kind, "metadata": {"name": name, "namespace": self.ns}, "spec": spec});
        let r = env
            .request("host", "POST", &path, Some(&body.to_string()))
            .unwrap();
        assert_eq!(r.status, 201, "{}", r.body);
    }

    /// Merge-patches the FederatedNamespace of this federation's object
    /// namespace with `body`.
    pub fn patch_federated_namespace(&self, env: &TestEnv, body: Value) {
        let path = format!(
            "/apis/{}/v1beta1/namespaces/{}/federatednamespaces/{}",
            self.group, self.ns, self.ns
        );
        patch(env, "host", &path, body);
    }

    /// Merge-patches this federation's KubeFedConfig with `spec`.
    pub fn configure(&self, env: &TestEnv, spec: Value) {
        let path = format!(
            "/apis/core.kubefed.io/v1beta1/namespaces/{}/kubefedconfigs/kubefed",
            self.fedns
        );
        patch(env, "host", &path, json!({ "spec": spec }));
    }

    /// Remote status collection on for these FederatedTypeConfigs: their
    /// `statusCollection: Enabled` and the RawResourceStatusCollection gate.
    pub fn collect_status(&self, env: &TestEnv, ftcs: &[&str]) {
        for ftc in ftcs {
            let path = format!(
                "/apis/core.kubefed.io/v1beta1/namespaces/{}/federatedtypeconfigs/{ftc}",
                self.fedns
            );
            patch(
                env,
                "host",
                &path,
                json!({"spec": {"statusCollection": "Enabled"}}),
            );
        }
        self.configure(
            env,
            json!({"featureGates": [
                {"name": "RawResourceStatusCollection", "configuration": "Enabled"}]}),
        );
    }

    /// A FederatedDeployment of one container, labelled `app: NAME`,
    /// placed on every member.
    pub fn create_deployment(&self, env: &TestEnv, name: &str) {
        self.create(env, "FederatedDeployment", name, json!({
            "template": {"spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}},
            "placement": {"clusterSelector": {}}
        }));
    }

    /// A ReplicaSchedulingPreference for the FederatedDeployment `name`:
    /// `total` replicas over these (cluster, weight) pairs.
    pub fn create_rsp(&self, env: &TestEnv, name: &str, total: i64, weights: &[(&str, i64)]) {
        let clusters: serde_json::Map<String, Value> = weights
            .iter()
            .map(|(c, w)| (c.to_string(), json!({"weight": w})))
            .collect();
        let rsp = json!({"apiVersion": "scheduling.kubefed.io/v1alpha1", "kind": "ReplicaSchedulingPreference",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {"targetKind": "FederatedDeployment", "totalReplicas": total, "clusters": clusters}});
        let path = format!(
            "/apis/scheduling.kubefed.io/v1alpha1/namespaces/{}/replicaschedulingpreferences",
            self.ns
        );
        let r = env
            .request("host", "POST", &path, Some(&rsp.to_string()))
            .unwrap();
        assert_eq!(r.status, 201, "{}", r.body);
    }

    /// `spec.replicas` of the Deployment `name` in a member.
    pub fn replicas(&self, env: &TestEnv, cluster: &str, name: &str) -> i64 {
        let path = format!("/apis/apps/v1/namespaces/{}/deployments/{name}", self.ns);
        get(env, cluster, &path).unwrap()["spec"]["replicas"]
            .as_i64()
            .unwrap()
    }

    pub fn fed(&self, env: &TestEnv, plural: &str, name: &str) -> Option<Value> {
        get(env, "host", &self.fed_path(plural, name))
    }

    /// The host path of this federation's federated object `name` of
    /// `plural` (`federatedconfigmaps`); `name` empty: the collection.
    pub fn fed_path(&self, plural: &str, name: &str) -> String {
        let path = format!(
            "/apis/{}/v1beta1/namespaces/{}/{plural}",
            self.group, self.ns
        );
        match name {
            "" => path,
            name => format!("{path}/{name}"),
        }
    }

    /// Writes recorded by any of this federation's proxies since the last
    /// reset: every request but GETs, the run lock's Lease, server-side
    /// dry runs and reviews (a run asks each member it plans changes for
    /// what it may do).
    pub fn writes(&self) -> Vec<RequestRecord> {
        [&self.host, &self.m1, &self.m2]
            .iter()
            .flat_map(|p| p.records())
            .filter(|r| {
                r.method != "GET"
                    && r.resource != "leases"
                    && !r.query.contains("dryRun")
                    && !r.resource.ends_with("reviews")
            })
            .collect()
    }

    pub fn member_writes(&self) -> usize {
        self.m1.writes() + self.m2.writes()
    }

    pub fn reset(&self) {
        for p in [&self.host, &self.m1, &self.m2] {
            p.reset_records();
        }
    }

    /// `kubefedctl reconcile` started in the background, output discarded.
    pub fn spawn_reconcile(&self, extra: &[&str]) -> std::process::Child {
        std::process::Command::new(KUBEFEDCTL)
            .arg("--kubeconfig")
            .arg(&self.kc)
            .args([
                "reconcile",
                "-n",
                self.ns,
                "--kubefed-namespace",
                self.fedns,
            ])
            .args(extra)
            .env_remove("KUBECONFIG")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    }

    /// `count` FederatedConfigMaps `<prefix>-NN` placed everywhere.
    pub fn create_configmaps(&self, env: &TestEnv, prefix: &str, count: usize) -> Vec<String> {
        let names: Vec<String> = (0..count).map(|i| format!("{prefix}-{i:02}")).collect();
        for n in &names {
            self.create(
                env,
                "FederatedConfigMap",
                n,
                json!({
                "template": {"data": {"n": n}}, "placement": {"clusterSelector": {}}}),
            );
        }
        names
    }

    pub fn slow_members(&self, latency_ms: u64) {
        let slow = Faults {
            latency: Duration::from_millis(latency_ms),
            ..Default::default()
        };
        self.m1.set_faults(slow.clone());
        self.m2.set_faults(slow);
    }
}

/// A kubeconfig whose host goes through a proxy of its own (the members as
/// the federation's KubeFedClusters say), so that a second instance's host
/// requests can be told apart from the first's.
pub fn own_host_kubeconfig(env: &TestEnv, name: &str) -> (Proxy, PathBuf) {
    let proxy = env.proxy("host").unwrap();
    let kc = write_kubeconfig(
        env,
        name,
        env.kubeconfig()
            .current_context("host")
            .server("host", &proxy.url()),
    );
    (proxy, kc)
}

pub fn cm(env: &TestEnv, cluster: &str, ns: &str, name: &str) -> Option<Value> {
    get(
        env,
        cluster,
        &format!("/api/v1/namespaces/{ns}/configmaps/{name}"),
    )
}

/// The federation lock's Lease, if any.
pub fn lease(env: &TestEnv, fedns: &str) -> Option<Value> {
    get(
        env,
        "host",
        &format!("/apis/coordination.k8s.io/v1/namespaces/{fedns}/leases/kubefedctl-reconcile"),
    )
}

pub fn holder(env: &TestEnv, fedns: &str) -> String {
    lease(env, fedns)
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string))
        .unwrap_or_default()
}
