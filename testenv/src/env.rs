//! `TestEnv`: one etcd, and per cluster one kube-apiserver and one
//! kube-controller-manager, all on loopback, sharing one CA.

use crate::http::{self, Response};
use crate::kubeconfig::KubeconfigBuilder;
use crate::node::{self, BRIDGE_ADDRESS, KUBERNETES_SERVICE_IP, Node, NodeSpec};
use crate::pki::{Ca, CertPair, CertSpec, SigningKey, random_token};
use crate::process::{Process, free_port};
use crate::proxy::{Proxy, ProxyConfig};
use crate::version::Version;
use anyhow::{Context, Result, anyhow, bail};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The clusters of the environment shared by one test binary.
pub const SHARED_CLUSTERS: [&str; 3] = ["host", "member1", "member2"];

const READY_TIMEOUT: Duration = Duration::from_secs(90);
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// A node's kubelet registers and reports Ready within seconds here.
const NODE_READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Where the default release's `kube-apiserver` and
/// `kube-controller-manager` live ([`Version::from_env`]).
pub fn binaries_dir() -> PathBuf {
    Version::from_env()
        .unwrap_or(Version::CURRENT)
        .binaries_dir()
}

/// The etcd of an environment: `$KUBEFEDCTL_ETCD`, else the one built
/// beside the newest release that has one (the current release's own
/// etcd), else etcd on `PATH` (Debian's, beside 1.20).
fn etcd_binary(versions: &[Version]) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("KUBEFEDCTL_ETCD") {
        return Ok(PathBuf::from(p));
    }
    let mut newest_first = versions.to_vec();
    newest_first.sort_by(|a, b| b.cmp(a));
    if let Some(built) = newest_first
        .iter()
        .map(|v| v.binaries_dir().join("etcd"))
        .find(|p| p.is_file())
    {
        return Ok(built);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("etcd"))
        .find(|p| p.is_file())
        .ok_or_else(|| anyhow!("etcd not found: run hack/testenv.sh (builds or installs it)"))
}

/// One member or host cluster of the environment.
pub struct Cluster {
    pub name: String,
    /// The Kubernetes release it runs.
    pub version: Version,
    pub port: u16,
    /// The address its API server listens on: `127.0.0.1`, or in an
    /// environment with nodes the pods' bridge ([`BRIDGE_ADDRESS`]).
    pub address: String,
    /// Bearer token of a `system:masters` user.
    pub admin_token: String,
    apiserver: Process,
    controller_manager: Option<Process>,
}

impl Cluster {
    /// `https://<address>:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}:{}", self.address, self.port)
    }

    pub fn apiserver_pid(&self) -> u32 {
        self.apiserver.pid()
    }

    pub fn controller_manager_pid(&self) -> Option<u32> {
        self.controller_manager.as_ref().map(Process::pid)
    }
}

/// A running control plane of several clusters. Dropping it stops every
/// process and removes its directory.
pub struct TestEnv {
    dir: PathBuf,
    ca: Ca,
    clusters: Vec<Cluster>,
    etcd: Process,
    etcd_port: u16,
    /// One per cluster in an environment with nodes ([`TestEnv::with_nodes`]).
    nodes: Vec<Node>,
    /// Held while the environment has nodes: one such environment per
    /// machine (kube-proxy's rules and the bridge are the machine's).
    _node_lock: Option<std::fs::File>,
}

/// What an environment is started with.
struct Plan<'a> {
    clusters: &'a [(&'a str, Version)],
    extra_controllers: &'a [&'a str],
    nodes: bool,
}

impl Plan<'_> {
    /// The controller-manager's controllers beyond the environment's own.
    fn controllers(&self) -> Vec<&str> {
        let node: &[&str] = if self.nodes { &NODE_CONTROLLERS } else { &[] };
        self.extra_controllers.iter().chain(node).copied().collect()
    }

    /// Where the API servers listen.
    fn address(&self) -> &'static str {
        if self.nodes {
            BRIDGE_ADDRESS
        } else {
            "127.0.0.1"
        }
    }
}

fn check_binaries(clusters: &[(&str, Version)]) -> Result<()> {
    for (_, version) in clusters {
        let bin = version.binaries_dir();
        for b in ["kube-apiserver", "kube-controller-manager"] {
            if !bin.join(b).is_file() {
                bail!(
                    "{} is missing: run hack/testenv.sh first (it builds Kubernetes {version} once and caches it)",
                    bin.join(b).display()
                );
            }
        }
    }
    Ok(())
}

/// The controllers pods need, beside the environment's own: a node loses
/// its not-ready taint (nodelifecycle), pods mount `kube-root-ca.crt`
/// (root-ca-cert-publisher), and the workloads users deploy run.
const NODE_CONTROLLERS: [&str; 13] = [
    "nodelifecycle",
    "root-ca-cert-publisher",
    "deployment",
    "replicaset",
    "statefulset",
    "daemonset",
    "job",
    "cronjob",
    "disruption",
    "podgc",
    "endpoint",
    "endpointslice",
    "ttl-after-finished",
];

impl TestEnv {
    /// Starts the named clusters (names must be unique DNS labels).
    pub fn start(names: &[&str]) -> Result<TestEnv> {
        TestEnv::start_with(names, &[])
    }

    /// [`TestEnv::start`] with more kube-controller-manager controllers
    /// than the environment's own (e.g. `deployment`, which makes
    /// ReplicaSets for Deployments).
    pub fn start_with(names: &[&str], extra_controllers: &[&str]) -> Result<TestEnv> {
        let version = Version::from_env()?;
        let clusters: Vec<(&str, Version)> = names.iter().map(|n| (*n, version)).collect();
        TestEnv::start_mixed(&clusters, extra_controllers)
    }

    /// Clusters of several releases in one environment (a host on the
    /// current release and a member on 1.20, as real federations mix
    /// them); one etcd, the newest's.
    pub fn start_mixed(
        clusters: &[(&str, Version)],
        extra_controllers: &[&str],
    ) -> Result<TestEnv> {
        TestEnv::start_plan(&Plan {
            clusters,
            extra_controllers,
            nodes: false,
        })
    }

    /// Clusters of the current release, those of `with` each with a node
    /// ([`crate::node`]): pods run for real; those of `without` hold
    /// objects only (a member that runs no pods needs no node). Every API
    /// server listens on the pods' bridge ([`BRIDGE_ADDRESS`]), so that
    /// pods reach them (through the `kubernetes` Service in the first
    /// cluster, whose node runs kube-proxy, or directly). One such
    /// environment runs on a machine at a time: a second waits for the
    /// first to end.
    pub fn with_nodes(with: &[&str], without: &[&str]) -> Result<TestEnv> {
        if let Some(missing) = node::node_missing() {
            bail!(
                "{missing}: run hack/testenv.sh first (it builds and installs what a node needs)"
            );
        }
        let clusters: Vec<(&str, Version)> = (with.iter().chain(without))
            .map(|n| (*n, Version::CURRENT))
            .collect();
        let mut env = TestEnv::start_plan(&Plan {
            clusters: &clusters,
            extra_controllers: &[],
            nodes: true,
        })?;
        env.start_nodes(with)?;
        register_exit_cleanup(env.dir.clone());
        Ok(env)
    }

    fn start_plan(plan: &Plan) -> Result<TestEnv> {
        let clusters = plan.clusters;
        let extra_controllers = plan.controllers();
        let node_lock = if plan.nodes { Some(node_lock()?) } else { None };
        let address = plan.address();
        if plan.nodes {
            node::ensure_bridge()?;
        }
        check_binaries(clusters)?;
        let versions: Vec<Version> = clusters.iter().map(|(_, v)| *v).collect();
        sweep_stale_dirs();
        raise_inotify_instances();
        let dir = new_env_dir()?;
        let ca = Ca::new("kubefedctl-testenv-ca")?;
        let sa = SigningKey::generate()?;
        write(&dir.join("ca.crt"), ca.cert_pem())?;
        write(&dir.join("sa.key"), &sa.private_pem)?;
        write(&dir.join("sa.pub"), &sa.public_pem)?;
        // The aggregator's front proxy (an APIService's server learns the
        // user from its headers, e.g. karmada-aggregated-apiserver).
        let front = ca.issue_client_cert(FRONT_PROXY_CLIENT)?;
        write(&dir.join("front-proxy.crt"), &front.cert_pem)?;
        write(&dir.join("front-proxy.key"), &front.key_pem)?;

        let etcd_port = free_port()?;
        let etcd = start_etcd(&dir, etcd_port, &versions)?;

        let mut pending = Vec::new();
        for &(name, version) in clusters {
            pending.push(start_apiserver(
                &dir, &ca, name, version, etcd_port, address, plan.nodes,
            )?);
        }

        let mut env = TestEnv {
            dir,
            ca,
            clusters: Vec::new(),
            etcd,
            etcd_port,
            nodes: Vec::new(),
            _node_lock: node_lock,
        };
        for (mut cluster, cm_token) in pending {
            env.wait_ready(&mut cluster)?;
            env.start_controller_manager(&mut cluster, &cm_token, &extra_controllers)?;
            env.clusters.push(cluster);
        }
        for i in 0..env.clusters.len() {
            env.wait_controllers(i)?;
        }
        Ok(env)
    }

    fn start_controller_manager(
        &self,
        cluster: &mut Cluster,
        token: &str,
        controllers: &[&str],
    ) -> Result<()> {
        let cdir = self.dir.join(&cluster.name);
        let kc =
            KubeconfigBuilder::single(&cluster.name, &cluster.url(), self.ca.cert_pem(), token);
        write(&cdir.join("controller-manager.kubeconfig"), &kc)?;
        cluster.controller_manager = Some(Process::spawn(
            &format!("kube-controller-manager ({})", cluster.name),
            &cluster
                .version
                .binaries_dir()
                .join("kube-controller-manager"),
            &controller_manager_args(&self.dir, &cdir, controllers, cluster.version),
            &cdir.join("kube-controller-manager.log"),
        )?);
        Ok(())
    }

    /// A node for each of the clusters `with`, kube-proxy on the first
    /// cluster's; each waited for until it is Ready and untainted.
    fn start_nodes(&mut self, with: &[&str]) -> Result<()> {
        for (i, c) in self.clusters.iter().enumerate() {
            if !with.contains(&c.name.as_str()) {
                continue;
            }
            let node = Node::start(&NodeSpec {
                cluster: &c.name,
                index: i,
                server: c.url(),
                ca_pem: self.ca.cert_pem(),
                admin_token: &c.admin_token,
                kube_proxy: i == 0,
                env_dir: &self.dir,
            })?;
            self.nodes.push(node);
        }
        for i in 0..self.nodes.len() {
            self.wait_node_ready(i)?;
        }
        Ok(())
    }

    /// Waits until node `i` is Ready and schedulable (its not-ready taint
    /// gone), failing early when one of its programs exits.
    fn wait_node_ready(&mut self, i: usize) -> Result<()> {
        let cluster = self.nodes[i].cluster.clone();
        let path = format!("/api/v1/nodes/{}", self.nodes[i].name);
        let deadline = Instant::now() + NODE_READY_TIMEOUT;
        loop {
            self.nodes[i].check_running()?;
            let node = self.request(&cluster, "GET", &path, None).ok();
            if node
                .filter(|r| r.status == 200)
                .and_then(|r| r.json().ok())
                .is_some_and(|n| node_schedulable(&n))
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{} not ready after {NODE_READY_TIMEOUT:?}; kubelet's last lines:\n{}",
                    self.nodes[i].name,
                    self.nodes[i].kubelet_log_tail(30)
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The node of a cluster of an environment [`TestEnv::with_nodes`].
    pub fn node(&self, cluster: &str) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.cluster == cluster)
            .unwrap_or_else(|| panic!("cluster {cluster} has no node (TestEnv::with_nodes)"))
    }

    /// Imports an image archive into every node's containerd.
    pub fn import_image(&self, archive: &Path) -> Result<()> {
        for n in &self.nodes {
            n.import_image(archive)?;
        }
        Ok(())
    }

    /// The environment shared by every test of one test binary: clusters
    /// `host`, `member1` and `member2`. Started on first use; its processes
    /// die with the test process. Tests isolate themselves by namespace and
    /// by object names.
    pub fn shared() -> &'static TestEnv {
        static SHARED: OnceLock<TestEnv> = OnceLock::new();
        SHARED.get_or_init(|| {
            let env = TestEnv::start(&SHARED_CLUSTERS)
                .unwrap_or_else(|e| panic!("starting the test environment: {e:#}"));
            register_exit_cleanup(env.dir.clone());
            env
        })
    }

    /// An environment of its own for tests that stop, restart or freeze its
    /// processes (the shared one must keep running for the other tests).
    /// Its processes die with the test process, and its directory is
    /// removed at exit like the shared one's.
    pub fn private(names: &[&str]) -> Result<TestEnv> {
        TestEnv::private_with(names, &[])
    }

    /// [`TestEnv::private`] with more controllers ([`TestEnv::start_with`]).
    pub fn private_with(names: &[&str], extra_controllers: &[&str]) -> Result<TestEnv> {
        let env = TestEnv::start_with(names, extra_controllers)?;
        register_exit_cleanup(env.dir.clone());
        Ok(env)
    }

    /// [`TestEnv::private`] of several releases ([`TestEnv::start_mixed`]).
    pub fn private_mixed(clusters: &[(&str, Version)]) -> Result<TestEnv> {
        let env = TestEnv::start_mixed(clusters, &[])?;
        register_exit_cleanup(env.dir.clone());
        Ok(env)
    }

    /// The release of the environment's first cluster (the host, by
    /// convention).
    pub fn version(&self) -> Version {
        self.clusters
            .first()
            .map_or(Version::CURRENT, |c| c.version)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The one etcd every cluster of the environment keeps its state in.
    /// etcd's client port (`http://127.0.0.1:PORT`), for servers of
    /// their own beside the clusters (an aggregated API server).
    pub fn etcd_port(&self) -> u16 {
        self.etcd_port
    }

    pub fn etcd_pid(&self) -> u32 {
        self.etcd.pid()
    }

    /// Stops a cluster's kube-apiserver (as an upgrade or a crash would):
    /// its port refuses connections until [`Self::start_apiserver`].
    pub fn stop_apiserver(&mut self, name: &str) {
        let c = self.cluster_mut(name);
        c.apiserver.stop(Duration::from_secs(10));
    }

    /// Starts a stopped kube-apiserver again on its port, and waits until
    /// it is ready.
    pub fn start_apiserver(&mut self, name: &str) -> Result<()> {
        let i = self.index(name);
        self.clusters[i].apiserver.start_again()?;
        let mut c = self.clusters.remove(i);
        let ready = self.wait_ready(&mut c);
        self.clusters.insert(i, c);
        ready
    }

    /// Compacts etcd's history up to its current revision (what the API
    /// servers do every 5 minutes): watches resumed from before it get
    /// `410 Gone`. Returns the revision.
    pub fn compact_etcd(&self) -> Result<i64> {
        let addr = format!("127.0.0.1:{}", self.etcd_port);
        // The key "/" base64-encoded: any key gives the store's revision.
        let range = http::plain_post(&addr, "/v3/kv/range", r#"{"key":"Lw=="}"#, PROBE_TIMEOUT)?;
        let rev: i64 = range.json()?["header"]["revision"]
            .as_str()
            .and_then(|r| r.parse().ok())
            .ok_or_else(|| anyhow!("etcd answered no revision: {}", range.body))?;
        let body = format!(r#"{{"revision":"{rev}","physical":true}}"#);
        let r = http::plain_post(&addr, "/v3/kv/compaction", &body, Duration::from_secs(30))?;
        if r.status != 200 {
            bail!("etcd compaction answered {}: {}", r.status, r.body);
        }
        Ok(rev)
    }

    fn index(&self, name: &str) -> usize {
        self.clusters
            .iter()
            .position(|c| c.name == name)
            .unwrap_or_else(|| panic!("no cluster {name} in the test environment"))
    }

    fn cluster_mut(&mut self, name: &str) -> &mut Cluster {
        let i = self.index(name);
        &mut self.clusters[i]
    }

    pub fn ca_pem(&self) -> &str {
        self.ca.cert_pem()
    }

    pub fn clusters(&self) -> &[Cluster] {
        &self.clusters
    }

    pub fn cluster(&self, name: &str) -> &Cluster {
        self.clusters
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no cluster {name:?} in the test environment"))
    }

    /// A serving certificate for loopback from the environment's CA, trusted
    /// by every kubeconfig the environment writes.
    pub fn issue_serving_cert(&self) -> Result<CertPair> {
        self.ca.issue_serving_cert("testenv-proxy", &[])
    }

    /// Starts a fault-injecting, counting proxy in front of `cluster`.
    pub fn proxy(&self, cluster: &str) -> Result<Proxy> {
        self.proxy_serving(cluster, self.issue_serving_cert()?)
    }

    /// The environment's CA (to issue certificates of a test's own making).
    pub fn ca(&self) -> &Ca {
        &self.ca
    }

    /// [`TestEnv::proxy`] serving `pair` instead of a good loopback certificate.
    pub fn proxy_serving(&self, cluster: &str, pair: CertPair) -> Result<Proxy> {
        Proxy::start(ProxyConfig {
            upstream: self.cluster(cluster).url(),
            upstream_ca_pem: self.ca_pem().to_string(),
            serving_cert_pem: pair.cert_pem,
            serving_key_pem: pair.key_pem,
            listen_port: 0,
        })
    }

    /// A kubeconfig with one context per cluster (context = cluster = user
    /// name), admin credentials, current context `host` (or the first).
    pub fn kubeconfig(&self) -> KubeconfigBuilder {
        KubeconfigBuilder::new(
            self.ca_pem(),
            self.clusters()
                .iter()
                .map(|c| (c.name.clone(), c.url(), c.admin_token.clone()))
                .collect(),
        )
    }

    /// One request as the cluster's admin, e.g. `("POST", "/api/v1/namespaces", Some(json))`.
    pub fn request(
        &self,
        cluster: &str,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> Result<Response> {
        let c = self.cluster(cluster);
        // As client-go (and so kubectl) does: a 429 or 503 the server says
        // to retry (a new CRD's storage initialising answers 429 on 1.37)
        // is sent again after the wait, up to 10 times.
        let mut retries = 0;
        loop {
            let r = http::request(
                method,
                &format!("{}{path}", c.url()),
                self.ca_pem(),
                Some(&c.admin_token),
                body,
                Duration::from_secs(30),
            )?;
            let wait = match r.status {
                429 | 503 if retries < 10 => r
                    .json()
                    .ok()
                    .and_then(|s| s["details"]["retryAfterSeconds"].as_u64())
                    .filter(|s| *s > 0),
                _ => None,
            };
            let Some(seconds) = wait else {
                return Ok(r);
            };
            retries += 1;
            std::thread::sleep(Duration::from_secs(seconds.min(10)));
        }
    }

    fn wait_ready(&self, cluster: &mut Cluster) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            cluster.apiserver.check_running()?;
            let r = http::request(
                "GET",
                &format!("{}/readyz", cluster.url()),
                self.ca_pem(),
                Some(&cluster.admin_token),
                None,
                PROBE_TIMEOUT,
            );
            if matches!(r, Ok(ref r) if r.status == 200) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "kube-apiserver for {} not ready after {READY_TIMEOUT:?}; last lines:\n{}",
                    cluster.name,
                    cluster.apiserver.log_tail(30)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The controllers are working once the `default` service account exists.
    fn wait_controllers(&mut self, i: usize) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let name = self.clusters[i].name.clone();
        loop {
            if let Some(cm) = self.clusters[i].controller_manager.as_mut() {
                cm.check_running()?;
            }
            let r = self.request(
                &name,
                "GET",
                "/api/v1/namespaces/default/serviceaccounts/default",
                None,
            );
            if matches!(r, Ok(ref r) if r.status == 200) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "kube-controller-manager for {name} made no default service account in {READY_TIMEOUT:?}"
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        // Nodes first (their pods stop before the API servers do).
        self.nodes.clear();
        // Controllers first, then apiservers, then etcd (field order).
        for c in &mut self.clusters {
            if let Some(cm) = c.controller_manager.as_mut() {
                cm.stop(Duration::from_secs(2));
            }
            c.apiserver.stop(Duration::from_secs(5));
        }
        self.clusters.clear();
        if std::env::var_os("KUBEFEDCTL_TESTENV_KEEP").is_none() {
            node::unmount_under(&self.dir);
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Whether a Node object is Ready and has no taint that keeps pods off.
fn node_schedulable(node: &serde_json::Value) -> bool {
    let ready = node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    let tainted = node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["effect"] == "NoSchedule" || t["effect"] == "NoExecute");
    ready && !tainted
}

/// An exclusive lock on the machine's one environment with nodes, waited
/// for (another test process may hold it).
fn node_lock() -> Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    let path = std::env::temp_dir().join("kubefedctl-testenv-nodes.lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    // SAFETY: flock(2) on a descriptor this function owns.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        bail!(
            "locking {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
    }
    Ok(f)
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// The common name of the apiservers' front-proxy client certificate.
const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

fn arg(k: &str, v: impl std::fmt::Display) -> String {
    format!("--{k}={v}")
}

/// One cluster's API server, started on a free port with its own
/// serving certificate and tokens (an admin, and the controller-manager's,
/// returned beside the cluster for its kubeconfig).
fn start_apiserver(
    dir: &Path,
    ca: &Ca,
    name: &str,
    version: Version,
    etcd_port: u16,
    address: &str,
    nodes: bool,
) -> Result<(Cluster, String)> {
    let bin = version.binaries_dir();
    let port = free_port()?;
    let admin_token = random_token(16)?;
    let cm_token = random_token(16)?;
    let cdir = dir.join(name);
    std::fs::create_dir_all(&cdir)?;
    let serving = if nodes {
        // Pods reach it by the bridge's address and by the `kubernetes`
        // Service's name and ClusterIP.
        ca.issue_cert_named(
            "kube-apiserver",
            &CertSpec {
                dns_names: [
                    "localhost",
                    "kubernetes",
                    "kubernetes.default",
                    "kubernetes.default.svc",
                    "kubernetes.default.svc.cluster.local",
                ]
                .map(String::from)
                .to_vec(),
                loopback: true,
                ips: vec![
                    address.parse().expect("an IP address"),
                    KUBERNETES_SERVICE_IP.parse().expect("an IP address"),
                ],
                validity: None,
            },
        )?
    } else {
        ca.issue_serving_cert("kube-apiserver", &["kubernetes", "kubernetes.default"])?
    };
    if nodes {
        // The API server's client certificate towards kubelets (logs, exec).
        let client = ca.issue_client_cert("kube-apiserver-kubelet-client")?;
        write(&cdir.join("kubelet-client.crt"), &client.cert_pem)?;
        write(&cdir.join("kubelet-client.key"), &client.key_pem)?;
    }
    write(&cdir.join("serving.crt"), &serving.cert_pem)?;
    write(&cdir.join("serving.key"), &serving.key_pem)?;
    write(
        &cdir.join("tokens.csv"),
        &format!(
            "{admin_token},admin,admin,\"system:masters\"\n{cm_token},system:kube-controller-manager,kcm,\"system:masters\"\n"
        ),
    )?;
    let mut args = apiserver_args(dir, &cdir, name, port, etcd_port, version);
    if nodes {
        node_apiserver_args(&mut args, &cdir, address);
    }
    let apiserver = Process::spawn(
        &format!("kube-apiserver ({name})"),
        &bin.join("kube-apiserver"),
        &args,
        &cdir.join("kube-apiserver.log"),
    )?;
    Ok((
        Cluster {
            name: name.to_string(),
            version,
            port,
            address: address.to_string(),
            admin_token,
            apiserver,
            controller_manager: None,
        },
        cm_token,
    ))
}

fn apiserver_args(
    dir: &Path,
    cdir: &Path,
    name: &str,
    port: u16,
    etcd_port: u16,
    version: Version,
) -> Vec<String> {
    let mut args = vec![
        arg("etcd-servers", format!("http://127.0.0.1:{etcd_port}")),
        arg("etcd-prefix", format!("/clusters/{name}")),
        arg("bind-address", "127.0.0.1"),
        arg("advertise-address", "127.0.0.1"),
        arg("secure-port", port),
        arg("tls-cert-file", cdir.join("serving.crt").display()),
        arg("tls-private-key-file", cdir.join("serving.key").display()),
        arg("client-ca-file", dir.join("ca.crt").display()),
        arg("token-auth-file", cdir.join("tokens.csv").display()),
        arg("authorization-mode", "RBAC"),
        arg(
            "service-account-issuer",
            "https://kubernetes.default.svc.cluster.local",
        ),
        arg("service-account-key-file", dir.join("sa.pub").display()),
        arg(
            "service-account-signing-key-file",
            dir.join("sa.key").display(),
        ),
        arg("service-cluster-ip-range", "10.96.0.0/16"),
        arg("endpoint-reconciler-type", "none"),
        arg("allow-privileged", "true"),
        arg("profiling", "false"),
        arg("cert-dir", cdir.display()),
        arg("requestheader-client-ca-file", dir.join("ca.crt").display()),
        arg("requestheader-allowed-names", FRONT_PROXY_CLIENT),
        arg("requestheader-username-headers", "X-Remote-User"),
        arg("requestheader-group-headers", "X-Remote-Group"),
        arg("requestheader-extra-headers-prefix", "X-Remote-Extra-"),
        arg(
            "proxy-client-cert-file",
            dir.join("front-proxy.crt").display(),
        ),
        arg(
            "proxy-client-key-file",
            dir.join("front-proxy.key").display(),
        ),
        arg("max-requests-inflight", 800),
        arg("max-mutating-requests-inflight", 400),
        arg("v", 0),
    ];
    if version.has_insecure_ports() {
        args.push(arg("insecure-port", 0));
    }
    args
}

/// An API server that pods reach: on the bridge, advertised there (the
/// `kubernetes` Service's endpoint), talking to kubelets with a client
/// certificate.
fn node_apiserver_args(args: &mut Vec<String>, cdir: &Path, address: &str) {
    for (k, v) in [
        ("bind-address", address.to_string()),
        ("advertise-address", address.to_string()),
        ("endpoint-reconciler-type", "lease".to_string()),
    ] {
        let flag = format!("--{k}=");
        args.retain(|a| !a.starts_with(&flag));
        args.push(arg(k, v));
    }
    args.push(arg(
        "kubelet-client-certificate",
        cdir.join("kubelet-client.crt").display(),
    ));
    args.push(arg(
        "kubelet-client-key",
        cdir.join("kubelet-client.key").display(),
    ));
    args.push(arg("kubelet-preferred-address-types", "InternalIP"));
}

fn controller_manager_args(
    dir: &Path,
    cdir: &Path,
    extra_controllers: &[&str],
    version: Version,
) -> Vec<String> {
    let mut controllers =
        "namespace,garbagecollector,serviceaccount,serviceaccount-token,clusterrole-aggregation"
            .to_string();
    for c in extra_controllers {
        controllers.push(',');
        controllers.push_str(c);
    }
    let mut args = vec![
        arg(
            "kubeconfig",
            cdir.join("controller-manager.kubeconfig").display(),
        ),
        arg("controllers", controllers),
        arg(
            "service-account-private-key-file",
            dir.join("sa.key").display(),
        ),
        arg("root-ca-file", dir.join("ca.crt").display()),
        arg("leader-elect", "false"),
        arg("use-service-account-credentials", "false"),
        arg("secure-port", 0),
        arg("kube-api-qps", 100),
        arg("kube-api-burst", 200),
        arg("v", 0),
    ];
    if version.has_insecure_ports() {
        args.push(arg("port", 0));
    }
    args
}

fn start_etcd(dir: &Path, port: u16, versions: &[Version]) -> Result<Process> {
    let peer = free_port()?;
    let data = dir.join("etcd");
    let args = vec![
        arg("name", "testenv"),
        arg("data-dir", data.display()),
        arg("listen-client-urls", format!("http://127.0.0.1:{port}")),
        arg("advertise-client-urls", format!("http://127.0.0.1:{port}")),
        arg("listen-peer-urls", format!("http://127.0.0.1:{peer}")),
        arg(
            "initial-advertise-peer-urls",
            format!("http://127.0.0.1:{peer}"),
        ),
        arg(
            "initial-cluster",
            format!("testenv=http://127.0.0.1:{peer}"),
        ),
        arg("quota-backend-bytes", 4u64 << 30),
        arg("logger", "zap"),
        arg("log-level", "warn"),
    ];
    let mut etcd = Process::spawn(
        "etcd",
        &etcd_binary(versions)?,
        &args,
        &dir.join("etcd.log"),
    )?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        etcd.check_running()?;
        if Instant::now() > deadline {
            bail!("etcd did not listen on {port}:\n{}", etcd.log_tail(20));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(etcd)
}

/// Environment directories live in memory (`/dev/shm`) when possible, so
/// etcd's fsyncs cost nothing.
fn env_root() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

fn new_env_dir() -> Result<PathBuf> {
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = env_root().join(format!("kubefedctl-testenv-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// Removes directories left by test processes that were killed.
/// The inotify instances one user may hold (`fs.inotify.max_user_instances`)
/// that a test run needs: every API server watches its certificate files,
/// and a kubelet's cAdvisor takes several. Debian's default of 128 runs out
/// when a whole suite's environments and nodes run at once (a kubelet then
/// exits at start: "inotify_init: too many open files"). kind asks for 512.
const INOTIFY_INSTANCES: u64 = 1024;

/// Raises `fs.inotify.max_user_instances` to [`INOTIFY_INSTANCES`] where
/// it is lower (root only, as the nodes' bridge and cgroups are); a
/// machine that refuses keeps its own, said once.
fn raise_inotify_instances() {
    const PATH: &str = "/proc/sys/fs/inotify/max_user_instances";
    let current = std::fs::read_to_string(PATH)
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok());
    if current.is_none_or(|c| c >= INOTIFY_INSTANCES) {
        return;
    }
    if let Err(e) = std::fs::write(PATH, INOTIFY_INSTANCES.to_string()) {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            eprintln!("testenv: cannot raise {PATH} to {INOTIFY_INSTANCES} ({e}); API servers and kubelets may run out of inotify instances");
        });
    }
}

fn sweep_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(env_root()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("kubefedctl-testenv-") else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            node::teardown_env(&e.path());
            node::unmount_under(&e.path());
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The shared environment is a static and never dropped: its children die
/// with the process (PDEATHSIG); its directory is removed here at exit.
fn register_exit_cleanup(dir: PathBuf) {
    static DIRS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    extern "C" fn cleanup() {
        if std::env::var_os("KUBEFEDCTL_TESTENV_KEEP").is_some() {
            return;
        }
        if let Ok(dirs) = DIRS.lock() {
            for d in dirs.iter() {
                node::teardown_env(d);
                node::unmount_under(d);
                let _ = std::fs::remove_dir_all(d);
            }
        }
    }
    let mut dirs = DIRS.lock().expect("cleanup lock");
    if dirs.is_empty() {
        // SAFETY: registering a plain extern "C" fn with atexit(3).
        unsafe {
            libc::atexit(cleanup);
        }
    }
    dirs.push(dir);
}
