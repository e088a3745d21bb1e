//! Kubeconfig files for the environment: one context per cluster, any
//! context pointed at a proxy instead of its apiserver, extra contexts.

use anyhow::{Context, Result};
use base64::Engine;
use std::collections::BTreeMap;
use std::path::Path;

/// One context of a kubeconfig being built.
#[derive(Clone, Debug)]
struct Entry {
    server: String,
    token: String,
    ca_pem: Option<String>,
    insecure: bool,
}

/// Builds a kubeconfig for an environment (`TestEnv::kubeconfig`);
/// `render` gives the YAML text.
pub struct KubeconfigBuilder {
    entries: BTreeMap<String, Entry>,
    current: Option<String>,
}

impl KubeconfigBuilder {
    /// One context per cluster, `(name, server URL, admin token)`, each
    /// trusting `ca_pem`; the first is current.
    pub(crate) fn new(ca_pem: &str, clusters: Vec<(String, String, String)>) -> KubeconfigBuilder {
        let current = clusters.first().map(|(name, _, _)| name.clone());
        let entries = clusters
            .into_iter()
            .map(|(name, server, token)| {
                (
                    name,
                    Entry {
                        server,
                        token,
                        ca_pem: Some(ca_pem.to_string()),
                        insecure: false,
                    },
                )
            })
            .collect::<BTreeMap<_, _>>();
        KubeconfigBuilder { entries, current }
    }

    /// A kubeconfig text with a single context (used for the controllers).
    pub fn single(name: &str, server: &str, ca_pem: &str, token: &str) -> String {
        let mut entries = BTreeMap::new();
        entries.insert(
            name.to_string(),
            Entry {
                server: server.to_string(),
                token: token.to_string(),
                ca_pem: Some(ca_pem.to_string()),
                insecure: false,
            },
        );
        KubeconfigBuilder {
            entries,
            current: Some(name.to_string()),
        }
        .render()
    }

    pub fn current_context(mut self, name: &str) -> Self {
        self.current = Some(name.to_string());
        self
    }

    /// Points `context` at another server, e.g. a [`crate::proxy::Proxy`] URL.
    pub fn server(mut self, context: &str, url: &str) -> Self {
        self.entry(context).server = url.to_string();
        self
    }

    /// Adds `alias` as another context with the same server and credentials as `of`.
    pub fn alias(mut self, alias: &str, of: &str) -> Self {
        let e = self.entry(of).clone();
        self.entries.insert(alias.to_string(), e);
        self
    }

    /// Uses `insecure-skip-tls-verify` and no CA for `context`.
    pub fn insecure(mut self, context: &str) -> Self {
        let e = self.entry(context);
        e.insecure = true;
        e.ca_pem = None;
        self
    }

    /// Replaces the bearer token of `context`.
    pub fn token(mut self, context: &str, token: &str) -> Self {
        self.entry(context).token = token.to_string();
        self
    }

    /// Keeps only the named contexts.
    pub fn only(mut self, contexts: &[&str]) -> Self {
        self.entries.retain(|k, _| contexts.contains(&k.as_str()));
        self
    }

    fn entry(&mut self, context: &str) -> &mut Entry {
        self.entries
            .get_mut(context)
            .unwrap_or_else(|| panic!("no context {context:?} in the kubeconfig"))
    }

    pub fn render(&self) -> String {
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut clusters = String::new();
        let mut users = String::new();
        let mut contexts = String::new();
        for (name, e) in &self.entries {
            clusters.push_str(&format!(
                "- name: {name}\n  cluster:\n    server: {}\n",
                e.server
            ));
            if let Some(ca) = &e.ca_pem {
                clusters.push_str(&format!(
                    "    certificate-authority-data: {}\n",
                    b64.encode(ca)
                ));
            }
            if e.insecure {
                clusters.push_str("    insecure-skip-tls-verify: true\n");
            }
            users.push_str(&format!(
                "- name: {name}\n  user:\n    token: {}\n",
                e.token
            ));
            contexts.push_str(&format!(
                "- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n"
            ));
        }
        let current = self.current.clone().unwrap_or_default();
        format!(
            "apiVersion: v1\nkind: Config\npreferences: {{}}\ncurrent-context: {current}\nclusters:\n{clusters}users:\n{users}contexts:\n{contexts}"
        )
    }

    /// Writes the kubeconfig with mode 0600 (it holds tokens).
    pub fn write(&self, path: &Path) -> Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("writing {}", path.display()))?;
        f.write_all(self.render().as_bytes())?;
        Ok(())
    }
}
