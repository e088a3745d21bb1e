//! Nodes: what makes pods run in a cluster of the environment. Each node
//! is its own containerd (root, state and socket in the environment's
//! directory), a kubelet v1.37 and a kube-scheduler; the first cluster's
//! node also runs kube-proxy, so that its pods reach the `kubernetes`
//! Service. Pods sit on one bridge ([`BRIDGE`], [`BRIDGE_ADDRESS`]) that
//! the API servers are bound to, with no default route: nothing a pod sends
//! leaves this machine. The settings are those of
//! `../shared/reference/node-here.md`; `hack/testenv.sh` builds the
//! programs and the pause image and installs Debian's containerd, runc,
//! conntrack and CNI plugins.
//!
//! Containers outlive a killed containerd (their shims are daemons), so a
//! node is torn down by hand: its cgroups' processes, its shims, its
//! mounts, its network namespaces ([`teardown`]), at drop, at exit, and for
//! a killed test process at the next start ([`crate::env`]'s sweep).

use crate::kubeconfig::KubeconfigBuilder;
use crate::process::{Process, free_port};
use crate::version::{Version, cache_root};
use anyhow::{Context, Result, anyhow, bail};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The bridge every node's pods are attached to.
pub const BRIDGE: &str = "kfdtest0";
/// The bridge's own address: API servers of a node environment listen
/// here, and it is every pod's gateway.
pub const BRIDGE_ADDRESS: &str = "10.244.0.1";
/// The pods' network (one subnet; node `i` hands out `10.244.(i+1).x`).
pub const POD_NETWORK: &str = "10.244.0.0/16";
/// The Services' network (`--service-cluster-ip-range`); the
/// `kubernetes` Service is its first address.
pub const SERVICE_NETWORK: &str = "10.96.0.0/16";
pub const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";
/// The sandbox image every node's containerd names (built by
/// `hack/testenv.sh` from the release's `build/pause/linux/pause.c`).
pub const PAUSE_IMAGE: &str = "localhost/kubefedctl-testenv/pause:3.10";
/// The cgroup hierarchies of cgroup v1 a kubelet's root must exist in.
const CGROUP_V1: [&str; 9] = [
    "cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd",
];

/// Where the node's programs and the pause image are cached.
pub fn node_dir() -> PathBuf {
    cache_root().join(format!("node-{}", Version::CURRENT.tag))
}

/// What is missing for a node, if anything (a sentence for the skip or
/// failure message).
pub fn node_missing() -> Option<String> {
    let dir = node_dir();
    for b in ["kubelet", "kube-scheduler", "kube-proxy"] {
        if !dir.join("bin").join(b).is_file() {
            return Some(format!("{} is missing", dir.join("bin").join(b).display()));
        }
    }
    if !dir.join("pause.tar").is_file() {
        return Some(format!("{} is missing", dir.join("pause.tar").display()));
    }
    for p in ["containerd", "ctr", "runc", "conntrack", "iptables", "ip"] {
        if which(p).is_none() {
            return Some(format!("{p} is not on PATH"));
        }
    }
    for p in ["bridge", "host-local", "loopback"] {
        if !Path::new("/usr/lib/cni").join(p).is_file() {
            return Some(format!("/usr/lib/cni/{p} is missing"));
        }
    }
    None
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// The bridge, made once per machine (kept: other runs reuse it).
pub fn ensure_bridge() -> Result<()> {
    let exists = Command::new("ip")
        .args(["link", "show", BRIDGE])
        .output()
        .is_ok_and(|o| o.status.success());
    if !exists {
        run("ip", &["link", "add", BRIDGE, "type", "bridge"])?;
    }
    let addr = Command::new("ip")
        .args(["-4", "addr", "show", "dev", BRIDGE])
        .output()
        .context("ip addr show")?;
    if !String::from_utf8_lossy(&addr.stdout).contains(&format!("{BRIDGE_ADDRESS}/16")) {
        run(
            "ip",
            &[
                "addr",
                "add",
                &format!("{BRIDGE_ADDRESS}/16"),
                "dev",
                BRIDGE,
            ],
        )?;
    }
    run("ip", &["link", "set", BRIDGE, "up"])
}

fn run(program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// What a node is started with.
pub struct NodeSpec<'a> {
    /// The cluster's name (the node is `node-<cluster>`).
    pub cluster: &'a str,
    /// Its position in the environment: the pods' address range.
    pub index: usize,
    /// Its API server (on [`BRIDGE_ADDRESS`]).
    pub server: String,
    pub ca_pem: &'a str,
    pub admin_token: &'a str,
    /// Run kube-proxy (one node per machine may: its iptables rules are
    /// the machine's).
    pub kube_proxy: bool,
    /// The environment's directory (`<dir>/<cluster>/node` is the node's).
    pub env_dir: &'a Path,
}

/// A running node.
pub struct Node {
    /// `node-<cluster>`.
    pub name: String,
    /// The cluster it is a node of.
    pub cluster: String,
    dir: PathBuf,
    cgroup_root: String,
    // Stopped in this order on drop (before teardown).
    kube_proxy: Option<Process>,
    scheduler: Process,
    kubelet: Process,
    containerd: Process,
}

impl Node {
    pub fn start(spec: &NodeSpec) -> Result<Node> {
        let dir = spec.env_dir.join(spec.cluster).join("node");
        for d in [
            "containerd/root",
            "containerd/state",
            "cni",
            "ipam",
            "kubelet",
            "logs",
        ] {
            std::fs::create_dir_all(dir.join(d))?;
        }
        let name = format!("node-{}", spec.cluster);
        let cgroup_root = cgroup_root_of(&dir);
        make_cgroup_root(&cgroup_root)?;
        let kubeconfig = dir.join("node.kubeconfig");
        write(
            &kubeconfig,
            &KubeconfigBuilder::single(spec.cluster, &spec.server, spec.ca_pem, spec.admin_token),
        )?;
        write(&dir.join("ca.crt"), spec.ca_pem)?;
        write(&dir.join("containerd.toml"), &containerd_config(&dir))?;
        write(
            &dir.join("cni/10-kubefedctl-testenv.conflist"),
            &cni_config(&dir, spec.index),
        )?;
        let containerd = Process::spawn(
            &format!("containerd ({name})"),
            &which("containerd").ok_or_else(|| anyhow!("containerd is not on PATH"))?,
            &[format!(
                "--config={}",
                dir.join("containerd.toml").display()
            )],
            &dir.join("containerd.log"),
        )?;
        let mut node = NodeParts {
            containerd,
            dir: dir.clone(),
        };
        node.wait_socket()?;
        node.import(&node_dir().join("pause.tar"))?;

        let kubelet = spawn_kubelet(&name, &dir, &cgroup_root, &kubeconfig)?;
        let scheduler = spawn_scheduler(&name, &dir, &kubeconfig)?;
        let kube_proxy = if spec.kube_proxy {
            Some(spawn_kube_proxy(&name, &dir, &kubeconfig)?)
        } else {
            None
        };
        let NodeParts { containerd, dir } = node;
        Ok(Node {
            name,
            cluster: spec.cluster.to_string(),
            dir,
            cgroup_root,
            kube_proxy,
            scheduler,
            kubelet,
            containerd,
        })
    }

    /// Imports an image archive (`podman save --format docker-archive`)
    /// into the node's containerd, for pods to use with
    /// `imagePullPolicy: Never` or `IfNotPresent`.
    pub fn import_image(&self, archive: &Path) -> Result<()> {
        import(&self.dir, archive)
    }

    /// Fails when one of the node's programs has exited.
    pub fn check_running(&mut self) -> Result<()> {
        self.containerd.check_running()?;
        self.kubelet.check_running()?;
        self.scheduler.check_running()?;
        if let Some(p) = self.kube_proxy.as_mut() {
            p.check_running()?;
        }
        Ok(())
    }

    /// The kubelet's log (where a pod that does not start says why).
    pub fn kubelet_log_tail(&self, lines: usize) -> String {
        self.kubelet.log_tail(lines)
    }

    /// Where the kubelet writes container logs:
    /// `<dir>/<namespace>_<pod>_<uid>/<container>/<n>.log`.
    pub fn pod_logs_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(p) = self.kube_proxy.as_mut() {
            p.stop(Duration::from_secs(2));
        }
        self.scheduler.stop(Duration::from_secs(2));
        self.kubelet.stop(Duration::from_secs(5));
        teardown(&self.dir, &self.cgroup_root);
        self.containerd.stop(Duration::from_secs(5));
        unmount_under(&self.dir);
        remove_cgroup_root(&self.cgroup_root);
    }
}

fn spawn_kubelet(name: &str, dir: &Path, cgroup_root: &str, kubeconfig: &Path) -> Result<Process> {
    write(
        &dir.join("kubelet.yaml"),
        &kubelet_config(dir, cgroup_root, free_port()?, free_port()?),
    )?;
    Process::spawn(
        &format!("kubelet ({name})"),
        &node_dir().join("bin/kubelet"),
        &[
            format!("--config={}", dir.join("kubelet.yaml").display()),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--root-dir={}", dir.join("kubelet").display()),
            format!("--cert-dir={}", dir.join("kubelet/pki").display()),
            format!("--hostname-override={name}"),
            format!("--node-ip={BRIDGE_ADDRESS}"),
            "--v=1".into(),
        ],
        &dir.join("kubelet.log"),
    )
}

fn spawn_scheduler(name: &str, dir: &Path, kubeconfig: &Path) -> Result<Process> {
    Process::spawn(
        &format!("kube-scheduler ({name})"),
        &node_dir().join("bin/kube-scheduler"),
        &[
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--authentication-kubeconfig={}", kubeconfig.display()),
            format!("--authorization-kubeconfig={}", kubeconfig.display()),
            "--leader-elect=false".into(),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", free_port()?),
            "--v=0".into(),
        ],
        &dir.join("kube-scheduler.log"),
    )
}

fn spawn_kube_proxy(name: &str, dir: &Path, kubeconfig: &Path) -> Result<Process> {
    Process::spawn(
        &format!("kube-proxy ({name})"),
        &node_dir().join("bin/kube-proxy"),
        &[
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--hostname-override={name}"),
            "--proxy-mode=iptables".into(),
            format!("--cluster-cidr={POD_NETWORK}"),
            format!("--healthz-bind-address=127.0.0.1:{}", free_port()?),
            format!("--metrics-bind-address=127.0.0.1:{}", free_port()?),
            // Leave the kernel's conntrack settings alone: a container
            // may not change them.
            "--conntrack-max-per-core=0".into(),
            "--conntrack-tcp-timeout-established=0".into(),
            "--conntrack-tcp-timeout-close-wait=0".into(),
            "--v=0".into(),
        ],
        &dir.join("kube-proxy.log"),
    )
}

/// A node being started: its containerd, for the first steps.
struct NodeParts {
    containerd: Process,
    dir: PathBuf,
}

impl NodeParts {
    fn wait_socket(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let sock = self.dir.join("containerd.sock");
        while !sock.exists() {
            self.containerd.check_running()?;
            if Instant::now() > deadline {
                bail!(
                    "containerd made no socket in 30 s:\n{}",
                    self.containerd.log_tail(20)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    fn import(&self, archive: &Path) -> Result<()> {
        import(&self.dir, archive)
    }
}

fn import(dir: &Path, archive: &Path) -> Result<()> {
    let out = Command::new(which("ctr").ok_or_else(|| anyhow!("ctr is not on PATH"))?)
        .arg("--address")
        .arg(dir.join("containerd.sock"))
        .args(["--namespace", "k8s.io", "images", "import"])
        .arg(archive)
        .output()
        .context("running ctr images import")?;
    if !out.status.success() {
        bail!(
            "ctr images import {} failed: {}",
            archive.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The node's cgroup root, named after its directory (so that a sweep
/// finds a killed run's): `/kubefedctl-testenv-<pid>-<n>-<cluster>`.
pub fn cgroup_root_of(node_dir: &Path) -> String {
    let cluster = node_dir
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let env = node_dir
        .parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("/{env}-{cluster}")
}

fn make_cgroup_root(root: &str) -> Result<()> {
    for h in CGROUP_V1 {
        let base = Path::new("/sys/fs/cgroup").join(h);
        if !base.is_dir() {
            continue;
        }
        let d = base.join(root.trim_start_matches('/'));
        std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        if h == "cpuset" {
            // A new cpuset has no CPUs or memory nodes until given its parent's.
            for f in ["cpuset.cpus", "cpuset.mems"] {
                let v = std::fs::read_to_string(base.join(f)).unwrap_or_default();
                let _ = std::fs::write(d.join(f), v.trim());
            }
        }
    }
    Ok(())
}

fn remove_cgroup_root(root: &str) {
    for h in CGROUP_V1 {
        let d = Path::new("/sys/fs/cgroup")
            .join(h)
            .join(root.trim_start_matches('/'));
        remove_cgroup_tree(&d);
    }
}

/// Removes a cgroup directory and its children, deepest first (a cgroup's
/// files cannot be removed, only its empty directory).
fn remove_cgroup_tree(d: &Path) {
    if let Ok(entries) = std::fs::read_dir(d) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(d);
}

/// Every process in a cgroup tree (the `pids` hierarchy holds them all).
fn cgroup_pids(root: &str) -> Vec<i32> {
    fn walk(d: &Path, out: &mut Vec<i32>) {
        if let Ok(text) = std::fs::read_to_string(d.join("cgroup.procs")) {
            out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
        if let Ok(entries) = std::fs::read_dir(d) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    walk(&e.path(), out);
                }
            }
        }
    }
    let mut out = Vec::new();
    for h in ["pids", "memory", "cpu"] {
        walk(
            &Path::new("/sys/fs/cgroup")
                .join(h)
                .join(root.trim_start_matches('/')),
            &mut out,
        );
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Kills what a node leaves behind when its programs are gone: the
/// containers (every process in its cgroup root), their shims (which
/// name its containerd's socket), and the network namespaces of its pods.
pub fn teardown(dir: &Path, cgroup_root: &str) {
    for _ in 0..3 {
        let pids = cgroup_pids(cgroup_root);
        if pids.is_empty() {
            break;
        }
        pids.into_iter().for_each(kill);
        std::thread::sleep(Duration::from_millis(200));
    }
    let sock = dir.join("containerd.sock").display().to_string();
    kill_naming(&["containerd-shim", &sock]);
    remove_idle_pod_netns();
}

/// Tears down every node of an environment directory whose test process
/// is gone or going (at exit, or a killed run's, found by the sweep): its
/// programs (each names the node's directory in its arguments), then
/// [`teardown`], its mounts and its cgroups.
pub fn teardown_env(env_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(env_dir) else {
        return;
    };
    for e in entries.flatten() {
        let dir = e.path().join("node");
        if !dir.is_dir() {
            continue;
        }
        kill_naming(&[&dir.display().to_string()]);
        std::thread::sleep(Duration::from_millis(100));
        let root = cgroup_root_of(&dir);
        teardown(&dir, &root);
        unmount_under(&dir);
        remove_cgroup_root(&root);
    }
}

/// SIGKILLs every other process whose command line holds each of `words`.
fn kill_naming(words: &[&str]) {
    let me = std::process::id() as i32;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if pid != me && words.iter().all(|w| cmdline.contains(w)) {
            kill(pid);
        }
    }
}

fn kill(pid: i32) {
    // SAFETY: a plain kill(2).
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// containerd 1.6 puts pods' network namespaces in `/var/run/netns/cni-*`
/// whatever its state directory: those no process is in any more go.
fn remove_idle_pod_netns() {
    let Ok(entries) = std::fs::read_dir("/var/run/netns") else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("cni-") {
            continue;
        }
        let idle = Command::new("ip")
            .args(["netns", "pids", &name])
            .output()
            .is_ok_and(|o| o.status.success() && o.stdout.trim_ascii().is_empty());
        if idle {
            let _ = Command::new("ip").args(["netns", "delete", &name]).output();
        }
    }
}

/// Unmounts every mount under `dir` (containers' root file systems, pods'
/// volumes), deepest first, so that removing the directory never reaches
/// through a mount.
pub fn unmount_under(dir: &Path) {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let prefix = dir.display().to_string();
    let mut points: Vec<String> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mount_path)
        .filter(|p| p.starts_with(&prefix))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in points {
        if let Ok(c) = std::ffi::CString::new(p) {
            // SAFETY: umount2(2) with a valid C string.
            unsafe {
                libc::umount2(c.as_ptr(), libc::MNT_DETACH);
            }
        }
    }
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape_mount_path(p: &str) -> String {
    p.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

fn containerd_config(dir: &Path) -> String {
    let d = dir.display();
    format!(
        r#"version = 2
root = "{d}/containerd/root"
state = "{d}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{d}/containerd.sock"

[ttrpc]
  address = "{d}/containerd.sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # Lowering a sandbox's oom_score_adj needs CAP_SYS_RESOURCE, which a
  # container (this machine) lacks.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{d}/cni"
"#
    )
}

/// The bridge plugin on [`BRIDGE`], addresses from the node's own range of
/// [`POD_NETWORK`], routes to the Services' network only: no default
/// route, no masquerading.
fn cni_config(dir: &Path, index: usize) -> String {
    let range = index + 1;
    serde_json::json!({
        "cniVersion": "0.4.0",
        "name": "kubefedctl-testenv",
        "plugins": [{
            "type": "bridge",
            "bridge": BRIDGE,
            "isGateway": true,
            "ipMasq": false,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "dataDir": dir.join("ipam").display().to_string(),
                "ranges": [[{
                    "subnet": POD_NETWORK,
                    "rangeStart": format!("10.244.{range}.2"),
                    "rangeEnd": format!("10.244.{range}.254"),
                    "gateway": BRIDGE_ADDRESS,
                }]],
                "routes": [{"dst": SERVICE_NETWORK}],
            },
        }],
    })
    .to_string()
}

fn kubelet_config(dir: &Path, cgroup_root: &str, port: u16, healthz_port: u16) -> String {
    let d = dir.display();
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 is refused by default since 1.35; this machine has it.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: {cgroup_root}
failSwapOn: false
containerRuntimeEndpoint: unix://{d}/containerd.sock
address: {BRIDGE_ADDRESS}
port: {port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz_port}
podLogsDir: {d}/logs
localStorageCapacityIsolation: false
evictionHard:
  nodefs.available: "1%"
  imagefs.available: "1%"
  memory.available: "1Mi"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
oomScoreAdj: 0
clusterDNS: []
maxPods: 60
serializeImagePulls: false
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: {d}/ca.crt
authorization:
  mode: AlwaysAllow
"#
    )
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup_root_names_the_environment_and_the_cluster() {
        let dir = Path::new("/dev/shm/kubefedctl-testenv-42-0/host/node");
        assert_eq!(cgroup_root_of(dir), "/kubefedctl-testenv-42-0-host");
    }

    #[test]
    fn pods_get_no_default_route_and_a_range_of_their_node() {
        let text = cni_config(Path::new("/x"), 2);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let ipam = &v["plugins"][0]["ipam"];
        assert_eq!(ipam["ranges"][0][0]["rangeStart"], "10.244.3.2");
        assert_eq!(
            ipam["routes"],
            serde_json::json!([{"dst": SERVICE_NETWORK}])
        );
        assert_eq!(v["plugins"][0]["ipMasq"], false);
    }

    #[test]
    fn mount_paths_are_unescaped() {
        assert_eq!(unescape_mount_path("/a\\040b"), "/a b");
    }
}
