//! Karmada v1.13.0, the system `export karmada` writes for: `hack/testenv.sh`
//! builds its `karmada-controller-manager`, `karmada-scheduler` and
//! `karmada-aggregated-apiserver` from the Go module proxy and keeps its
//! CRDs (`charts/karmada/_crds/bases/`) beside them, so that tests check
//! the export against Karmada's own schemas on a real API server.

use crate::TestEnv;
use crate::process::{Process, free_port};
use crate::version::cache_root;
use anyhow::{Context, Result, bail};
use base64::Engine as _;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The Karmada release `hack/testenv.sh` builds.
pub const KARMADA_VERSION: &str = "v1.13.0";

/// `${cache}/karmada-v1.13.0`: `bin/` and `crds/`.
fn karmada_root() -> PathBuf {
    cache_root().join(format!("karmada-{KARMADA_VERSION}"))
}

/// One of Karmada's programs (`karmada-scheduler`, ...), if built.
pub fn karmada_binary(name: &str) -> Option<PathBuf> {
    let path = karmada_root().join("bin").join(name);
    path.is_file().then_some(path)
}

/// Karmada's CRDs as YAML texts, sorted by file name; an error naming
/// `hack/testenv.sh` when they are not there (the script requires them,
/// so a test never skips for want of them).
pub fn karmada_crds() -> Result<Vec<(String, String)>> {
    let dir = karmada_root().join("crds");
    let entries = std::fs::read_dir(&dir).with_context(|| {
        format!(
            "Karmada {KARMADA_VERSION}'s CRDs are missing from {}: run hack/testenv.sh",
            dir.display()
        )
    })?;
    let mut out = Vec::new();
    for e in entries {
        let path = e?.path();
        if path.extension().is_some_and(|x| x == "yaml") {
            let name = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            out.push((name, std::fs::read_to_string(&path)?));
        }
    }
    out.sort();
    if out.is_empty() {
        bail!("no CRD in {}: run hack/testenv.sh", dir.display());
    }
    Ok(out)
}

/// Karmada's module source as the Go module proxy served it (its chart's
/// webhook configuration is read from there).
fn karmada_source() -> PathBuf {
    cache_root()
        .join("gomod/github.com/karmada-io")
        .join(format!("karmada@{KARMADA_VERSION}"))
}

/// A Karmada control plane on one cluster of a [`TestEnv`] (its
/// kube-apiserver plays karmada-apiserver): Karmada's CRDs,
/// `karmada-aggregated-apiserver` behind the `v1alpha1.cluster.karmada.io`
/// APIService (an ExternalName Service naming `localhost`, as Karmada's
/// chart registers it), `karmada-webhook` registered by URL on loopback
/// with the chart's own webhook configuration, and the controller-manager
/// and scheduler; all out of cluster, dying with the test process.
pub struct KarmadaPlane {
    processes: Vec<Process>,
    /// The cluster (and kubeconfig context) of the Karmada API server.
    pub cluster: String,
}

impl KarmadaPlane {
    pub fn start(env: &TestEnv, cluster: &str) -> Result<KarmadaPlane> {
        let dir = env.dir().join(format!("{cluster}-karmada"));
        std::fs::create_dir_all(&dir)?;
        install_crds(env, cluster)?;
        let kc = dir.join("admin.kubeconfig");
        env.kubeconfig()
            .only(&[cluster])
            .current_context(cluster)
            .write(&kc)?;
        let mut plane = KarmadaPlane {
            processes: Vec::new(),
            cluster: cluster.to_string(),
        };
        plane.start_aggregated(env, &dir, &kc)?;
        plane.start_webhook(env, &dir, &kc)?;
        let common = [
            format!("--kubeconfig={}", kc.display()),
            "--leader-elect=false".to_string(),
            "--metrics-bind-address=0".to_string(),
            "--health-probe-bind-address=0".to_string(),
        ];
        let mut cm = common.to_vec();
        cm.push("--cluster-status-update-frequency=2s".into());
        plane.spawn(&dir, "karmada-controller-manager", &cm)?;
        plane.spawn(&dir, "karmada-scheduler", &common)?;
        Ok(plane)
    }

    fn spawn(&mut self, dir: &Path, program: &str, args: &[String]) -> Result<()> {
        let bin = karmada_binary(program)
            .with_context(|| format!("{program} is missing: run hack/testenv.sh"))?;
        let log = dir.join(format!("{program}.log"));
        self.processes
            .push(Process::spawn(program, &bin, args, &log)?);
        Ok(())
    }

    /// The Cluster API, served through the aggregation layer.
    fn start_aggregated(&mut self, env: &TestEnv, dir: &Path, kc: &Path) -> Result<()> {
        let port = free_port()?;
        let kc = kc.display();
        let args = vec![
            format!("--kubeconfig={kc}"),
            format!("--authentication-kubeconfig={kc}"),
            format!("--authorization-kubeconfig={kc}"),
            format!("--etcd-servers=http://127.0.0.1:{}", env.etcd_port()),
            format!("--etcd-prefix=/karmada-aggregated/{}", self.cluster),
            format!("--secure-port={port}"),
            "--bind-address=127.0.0.1".into(),
            format!("--cert-dir={}", dir.join("aggregated").display()),
        ];
        self.spawn(dir, "karmada-aggregated-apiserver", &args)?;
        let c = &self.cluster;
        create(
            env,
            c,
            "/api/v1/namespaces",
            &json!({"metadata": {"name": "karmada-system"}}),
        )?;
        create(
            env,
            c,
            "/api/v1/namespaces/karmada-system/services",
            &json!({
                "metadata": {"name": "karmada-aggregated-apiserver", "namespace": "karmada-system"},
                "spec": {"type": "ExternalName", "externalName": "localhost",
                         "ports": [{"port": port, "protocol": "TCP", "targetPort": port}]}
            }),
        )?;
        create(
            env,
            c,
            "/apis/apiregistration.k8s.io/v1/apiservices",
            &json!({
                "metadata": {"name": "v1alpha1.cluster.karmada.io"},
                "spec": {"group": "cluster.karmada.io", "version": "v1alpha1",
                         "groupPriorityMinimum": 2000, "versionPriority": 10,
                         "insecureSkipTLSVerify": true,
                         "service": {"name": "karmada-aggregated-apiserver", "namespace": "karmada-system", "port": port}}
            }),
        )?;
        wait(&format!("the Cluster API of {c}"), || {
            Ok(env
                .request(c, "GET", "/apis/cluster.karmada.io/v1alpha1/clusters", None)?
                .status
                == 200)
        })
    }

    /// Karmada's webhook: the permanent ids of policies and bindings, its
    /// defaults and validation, as the chart registers them.
    fn start_webhook(&mut self, env: &TestEnv, dir: &Path, kc: &Path) -> Result<()> {
        let port = free_port()?;
        let certs = dir.join("webhook");
        std::fs::create_dir_all(&certs)?;
        let pair = env.issue_serving_cert()?;
        std::fs::write(certs.join("tls.crt"), &pair.cert_pem)?;
        std::fs::write(certs.join("tls.key"), &pair.key_pem)?;
        let args = vec![
            format!("--kubeconfig={}", kc.display()),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            format!("--cert-dir={}", certs.display()),
            "--metrics-bind-address=0".into(),
            "--health-probe-bind-address=0".into(),
        ];
        self.spawn(dir, "karmada-webhook", &args)?;
        wait("karmada-webhook", || {
            Ok(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok())
        })?;
        let template =
            karmada_source().join("charts/karmada/templates/_karmada_webhook_configuration.tpl");
        let text = std::fs::read_to_string(&template)
            .with_context(|| format!("reading {}", template.display()))?;
        let ca = base64::engine::general_purpose::STANDARD.encode(env.ca_pem());
        let text = text
            .replace(
                "{{ $name }}-webhook.{{ $namespace }}.svc:443",
                &format!("localhost:{port}"),
            )
            .replace(
                "{{- include \"karmada.webhook.caBundle\" . | nindent 6 }}",
                &format!("caBundle: {ca}"),
            );
        let text: String = text
            .lines()
            .filter(|l| !l.contains("{{"))
            .map(|l| format!("{l}\n"))
            .collect();
        for doc in text.split("\n---\n").filter(|d| d.contains("kind:")) {
            let kind = if doc.contains("kind: MutatingWebhookConfiguration") {
                "mutatingwebhookconfigurations"
            } else {
                "validatingwebhookconfigurations"
            };
            let path = format!("/apis/admissionregistration.k8s.io/v1/{kind}");
            let r = env.request(&self.cluster, "POST", &path, Some(doc))?;
            if r.status != 201 && r.status != 409 {
                bail!("registering Karmada's webhooks: {} {}", r.status, r.body);
            }
        }
        Ok(())
    }

    /// The logs' last lines, for a test's failure message.
    pub fn log_tails(&self) -> String {
        self.processes
            .iter()
            .map(|p| p.log_tail(15))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Karmada's CRDs in `cluster`, Established.
pub fn install_crds(env: &TestEnv, cluster: &str) -> Result<()> {
    let mut names = Vec::new();
    for (file, text) in karmada_crds()? {
        let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
        let r = env.request(cluster, "POST", path, Some(&text))?;
        if r.status != 201 && r.status != 409 {
            bail!("{file}: {} {}", r.status, r.body);
        }
        let name = text
            .lines()
            .skip_while(|l| !l.starts_with("metadata:"))
            .find_map(|l| l.trim().strip_prefix("name: "))
            .with_context(|| format!("{file}: no metadata.name"))?;
        names.push(name.trim().to_string());
    }
    for name in names {
        let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}");
        wait(&format!("CRD {name} Established"), || {
            let r = env.request(cluster, "GET", &path, None)?;
            Ok(r.status == 200 && {
                let crd: Value = serde_json::from_str(&r.body)?;
                crd["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            })
        })?;
    }
    Ok(())
}

fn create(env: &TestEnv, cluster: &str, path: &str, body: &Value) -> Result<()> {
    let r = env.request(cluster, "POST", path, Some(&body.to_string()))?;
    if r.status != 201 && r.status != 409 {
        bail!("POST {path}: {} {}", r.status, r.body);
    }
    Ok(())
}

/// Polls `done` every 100 ms for up to 60 s.
fn wait(what: &str, mut done: impl FnMut() -> Result<bool>) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if matches!(done(), Ok(true)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("timed out after 60s waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
