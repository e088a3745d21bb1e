//! Loading the kubeconfig the way kubectl does, and naming its contexts.
//!
//! `--kubeconfig PATH` wins; else `KUBECONFIG` (a `:`-separated list, merged
//! with kubectl's rules: the first file to set a value wins); else
//! `~/.kube/config`; else, inside a pod, the pod's service account (context
//! `in-cluster`, as client-go's in-cluster config). The loading itself is
//! kube's own.

use anyhow::{Result, anyhow, bail};
use kube::config::{Kubeconfig, KubeconfigError};
use std::path::{Path, PathBuf};

/// A loaded kubeconfig and a description of where it came from, for errors.
#[derive(Clone, Debug)]
pub struct LoadedKubeconfig {
    pub config: Kubeconfig,
    pub source: String,
}

/// Loads the kubeconfig: `explicit` path, else `KUBECONFIG`, else `~/.kube/config`.
pub fn load(explicit: Option<&Path>) -> Result<LoadedKubeconfig> {
    if let Some(path) = explicit {
        let config = Kubeconfig::read_from(path).map_err(|e| read_error(&e, &path.display()))?;
        return Ok(LoadedKubeconfig {
            config,
            source: path.display().to_string(),
        });
    }
    match Kubeconfig::from_env() {
        Ok(Some(config)) => {
            return Ok(LoadedKubeconfig {
                config,
                source: "$KUBECONFIG".into(),
            });
        }
        Ok(None) => {}
        Err(e) => {
            let value = std::env::var_os("KUBECONFIG").unwrap_or_default();
            let named = format!("KUBECONFIG={}", value.to_string_lossy());
            return Err(read_error(&e, &named));
        }
    }
    let default = default_path().filter(|p| p.exists());
    if default.is_none()
        && let Some(in_cluster) = in_cluster()?
    {
        return Ok(in_cluster);
    }
    let default = default_path().ok_or_else(|| {
        anyhow!("no kubeconfig: set --kubeconfig or KUBECONFIG (no home directory)")
    })?;
    if !default.exists() {
        bail!(
            "no kubeconfig: {} does not exist; set --kubeconfig or KUBECONFIG",
            default.display()
        );
    }
    let config = Kubeconfig::read_from(&default).map_err(|e| read_error(&e, &default.display()))?;
    Ok(LoadedKubeconfig {
        config,
        source: default.display().to_string(),
    })
}

/// kube's error reading a kubeconfig, in one line that names the file once:
/// `cannot read kubeconfig /nope: no such file`. `named` is what was asked
/// for (a path, or `KUBECONFIG=a:b`); a file kube names is the one that
/// failed.
fn read_error(e: &KubeconfigError, named: &dyn std::fmt::Display) -> anyhow::Error {
    let named = named.to_string();
    let env = named.starts_with("KUBECONFIG=");
    match e {
        KubeconfigError::ReadConfig(io, path) => {
            let what = file_error(io);
            let via = if env { " (named by KUBECONFIG)" } else { "" };
            anyhow!("cannot read kubeconfig {}{via}: {what}", path.display())
        }
        KubeconfigError::Parse(y) => anyhow!(
            "cannot read kubeconfig {}{named}: invalid YAML: {}",
            if env { "from " } else { "" },
            crate::yaml::YamlError::of(y)
        ),
        other => anyhow!(
            "cannot read kubeconfig {}{named}: {}",
            if env { "from " } else { "" },
            crate::error::source_chain(other)
        ),
    }
}

/// Why a file could not be read, in a few words: `no such file`.
pub fn file_error(io: &std::io::Error) -> String {
    match io.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::IsADirectory => "it is a directory".to_string(),
        _ => without_os_code(&io.to_string()),
    }
}

/// kube's error making a context's configuration, in one line: a file
/// the kubeconfig names that cannot be read is named once, with what it
/// is for (`cannot read the certificate-authority /x/ca.crt: no such
/// file`), not as kube's `failed to read file '"/x/ca.crt"': No such file
/// or directory (os error 2)`.
pub fn context_error(context: &str, e: &(dyn std::error::Error + 'static)) -> anyhow::Error {
    unreadable_file(context, e)
        .unwrap_or_else(|| anyhow!("context {context:?}: {}", crate::error::source_chain(e)))
}

/// [`context_error`]'s line when `e` is about a file the kubeconfig names.
pub fn unreadable_file(
    context: &str,
    e: &(dyn std::error::Error + 'static),
) -> Option<anyhow::Error> {
    use kube::config::LoadDataError;
    let mut link = Some(e);
    while let Some(l) = link {
        let file = match l.downcast_ref::<KubeconfigError>() {
            Some(KubeconfigError::LoadCertificateAuthority(LoadDataError::ReadFile(io, path))) => {
                Some(("certificate-authority", io, path))
            }
            Some(KubeconfigError::LoadClientCertificate(LoadDataError::ReadFile(io, path))) => {
                Some(("client-certificate", io, path))
            }
            Some(KubeconfigError::LoadClientKey(LoadDataError::ReadFile(io, path))) => {
                Some(("client-key", io, path))
            }
            _ => None,
        };
        if let Some((what, io, path)) = file {
            return Some(anyhow!(
                "context {context:?}: cannot read the {what} {}: {}",
                path.display(),
                file_error(io)
            ));
        }
        link = l.source();
    }
    None
}

/// `Is a directory` of `Is a directory (os error 21)`.
fn without_os_code(text: &str) -> String {
    match text.rsplit_once(" (os error ") {
        Some((words, _)) => words.to_string(),
        None => text.to_string(),
    }
}

/// The context name of the in-cluster configuration.
pub const IN_CLUSTER: &str = "in-cluster";

/// Where a pod's service account credentials are mounted.
const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Inside a pod (`KUBERNETES_SERVICE_HOST` set and a service account token
/// mounted): a kubeconfig with one context, `in-cluster`, for the API
/// server's service address, the mounted CA and token (re-read as kube
/// rotates it) and the pod's namespace. `KUBEFEDCTL_SERVICE_ACCOUNT_DIR`
/// points elsewhere than the standard mount (tests, unusual mounts).
fn in_cluster() -> Result<Option<LoadedKubeconfig>> {
    let (Some(host), Some(port)) = (
        std::env::var_os("KUBERNETES_SERVICE_HOST"),
        std::env::var_os("KUBERNETES_SERVICE_PORT"),
    ) else {
        return Ok(None);
    };
    let dir = std::env::var_os("KUBEFEDCTL_SERVICE_ACCOUNT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(SERVICE_ACCOUNT_DIR));
    let token = dir.join("token");
    if !token.exists() {
        return Ok(None);
    }
    let (host, port) = (host.to_string_lossy(), port.to_string_lossy());
    let server = if host.contains(':') {
        format!("https://[{host}]:{port}")
    } else {
        format!("https://{host}:{port}")
    };
    let namespace = std::fs::read_to_string(dir.join("namespace"))
        .map(|n| n.trim().to_string())
        .unwrap_or_else(|_| "default".into());
    let config = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": IN_CLUSTER,
        "clusters": [{"name": IN_CLUSTER, "cluster": {
            "server": server, "certificate-authority": dir.join("ca.crt")}}],
        "users": [{"name": IN_CLUSTER, "user": {"tokenFile": token}}],
        "contexts": [{"name": IN_CLUSTER, "context": {
            "cluster": IN_CLUSTER, "user": IN_CLUSTER, "namespace": namespace}}],
    });
    let config: Kubeconfig = serde_json::from_value(config)
        .map_err(|e| anyhow!("in-cluster configuration from {}: {e}", dir.display()))?;
    Ok(Some(LoadedKubeconfig {
        config,
        source: format!("the pod's service account ({})", dir.display()),
    }))
}

/// `~/.kube/config`.
pub fn default_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube").join("config"))
}

impl LoadedKubeconfig {
    /// Context names in file order.
    pub fn context_names(&self) -> Vec<String> {
        self.config
            .contexts
            .iter()
            .map(|c| c.name.clone())
            .collect()
    }

    /// The context to use: `requested`, else the current context. Errors
    /// name the context and list the ones that exist.
    pub fn resolve_context(&self, requested: Option<&str>) -> Result<String> {
        let name = match requested.filter(|s| !s.is_empty()) {
            Some(n) => n.to_string(),
            None => match self
                .config
                .current_context
                .as_deref()
                .filter(|s| !s.is_empty())
            {
                Some(c) => c.to_string(),
                None => bail!(
                    "no current context in kubeconfig {}: pass --context (--host-cluster-context) (available: {})",
                    self.source,
                    self.available()
                ),
            },
        };
        if !self.config.contexts.iter().any(|c| c.name == name) {
            bail!(
                "context {name:?} not found in kubeconfig (available: {})",
                self.available()
            );
        }
        Ok(name)
    }

    /// The name of `context`'s user entry, if any.
    pub fn user_of(&self, context: &str) -> Option<String> {
        (self.config.contexts.iter())
            .find(|c| c.name == context)?
            .context
            .as_ref()?
            .user
            .clone()
    }

    /// The credential plugin (`exec` command) of `context`'s user, if any.
    pub fn exec_command(&self, context: &str) -> Option<String> {
        let user = self.user_of(context)?;
        let info = self.config.auth_infos.iter().find(|a| a.name == user)?;
        info.auth_info.as_ref()?.exec.as_ref()?.command.clone()
    }

    fn available(&self) -> String {
        let names = self.context_names();
        if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_CONTEXTS: &str = r#"
apiVersion: v1
kind: Config
current-context: host
clusters:
- name: c1
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u1
  user: {token: abc}
contexts:
- name: host
  context: {cluster: c1, user: u1}
- name: member1
  context: {cluster: c1, user: u1}
"#;

    fn loaded(text: &str) -> LoadedKubeconfig {
        LoadedKubeconfig {
            config: Kubeconfig::from_yaml(text).unwrap(),
            source: "test".into(),
        }
    }

    #[test]
    fn resolves_explicit_and_current_contexts() {
        let kc = loaded(TWO_CONTEXTS);
        assert_eq!(kc.resolve_context(None).unwrap(), "host");
        assert_eq!(kc.resolve_context(Some("")).unwrap(), "host");
        assert_eq!(kc.resolve_context(Some("member1")).unwrap(), "member1");
        let err = kc.resolve_context(Some("prod")).unwrap_err().to_string();
        assert_eq!(
            err,
            r#"context "prod" not found in kubeconfig (available: host, member1)"#
        );
    }

    #[test]
    fn no_current_context_is_a_clear_error() {
        let kc = loaded(&TWO_CONTEXTS.replace("current-context: host", ""));
        let err = kc.resolve_context(None).unwrap_err().to_string();
        assert!(err.contains("no current context"), "{err}");
        assert!(err.contains("host, member1"), "{err}");
    }

    #[test]
    fn unreadable_file_names_the_path() {
        let err = load(Some(Path::new("/nonexistent/kc.yaml")))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "cannot read kubeconfig /nonexistent/kc.yaml: no such file"
        );
        assert_eq!(err.matches("/nonexistent/kc.yaml").count(), 1, "{err}");
        let err = load(Some(Path::new("/"))).unwrap_err().to_string();
        assert_eq!(err, "cannot read kubeconfig /: it is a directory");
    }

    #[test]
    fn a_kubeconfig_that_is_not_yaml_names_the_file_and_line() {
        let dir = std::env::temp_dir().join(format!("kubefedctl-kc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad-config");
        std::fs::write(&path, "apiVersion: v1\nclusters: [unclosed\n").unwrap();
        let err = load(Some(&path)).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "cannot read kubeconfig {}: invalid YAML: line ",
                path.display()
            )),
            "{err}"
        );
        assert!(!err.contains("<input>") && !err.contains('\n'), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
