//! Talking to API servers: clients for named contexts of the loaded
//! kubeconfig (this file), the [`kubeconfig`] itself, the [`host`] and its
//! [`members`], [`discovery`], the member [`tls`] exceptions, and the tower
//! layers every client shares ([`server_retry`], [`answers`] with
//! [`api_warnings`] and [`request_metrics`]).
//!
//! kube does the heavy lifting (token, client certificates, CA data or file,
//! `insecure-skip-tls-verify`, `proxy-url`, exec plugins); this module picks
//! the context, adds explicit timeouts, and turns failures into one line.

pub mod answers;
pub mod api_warnings;
pub mod discovery;
pub mod host;
pub mod identity;
pub mod kubeconfig;
pub mod members;
pub mod no_answer;
pub mod request_log;
pub mod request_metrics;
pub mod server_retry;
pub mod tls;

use crate::clients::kubeconfig::LoadedKubeconfig;
use anyhow::Result;
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::time::Duration;

/// Timeouts for every request a client makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Duration,
    /// `None`: no limit (`--request-timeout 0`, as kubectl reads it), so
    /// that no message names a limit the user never set.
    pub read: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            read: Some(Duration::from_secs(30)),
        }
    }
}

/// What a client is connected to, for messages and for join.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub context: String,
    pub server: String,
    /// The CA bundle the kubeconfig gives for the cluster (PEM), if any.
    pub ca_pem: Option<Vec<u8>>,
    pub insecure_skip_tls_verify: bool,
    pub proxy_url: Option<String>,
}

/// Builds clients for the contexts of one kubeconfig.
#[derive(Clone, Debug)]
pub struct ClientFactory {
    kubeconfig: LoadedKubeconfig,
    timeouts: Timeouts,
}

impl ClientFactory {
    pub fn new(kubeconfig: LoadedKubeconfig, timeouts: Timeouts) -> ClientFactory {
        ClientFactory {
            kubeconfig,
            timeouts,
        }
    }

    /// The timeouts its clients get.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    pub fn kubeconfig(&self) -> &LoadedKubeconfig {
        &self.kubeconfig
    }

    /// The kube `Config` for `context` (validated to exist), timeouts set.
    pub async fn config(&self, context: &str) -> Result<kube::Config> {
        let context = self.kubeconfig.resolve_context(Some(context))?;
        let options = KubeConfigOptions {
            context: Some(context.clone()),
            ..Default::default()
        };
        let mut config = kube::Config::from_custom_kubeconfig(self.raw().clone(), &options)
            .await
            .map_err(|e| kubeconfig::context_error(&context, &e))?;
        config.connect_timeout = Some(self.timeouts.connect);
        config.read_timeout = self.timeouts.read;
        config.write_timeout = self.timeouts.read;
        // kube retries 429/503/504 up to 15 times with backoff capped at
        // 1000 s: minutes of silence behind one request. Commands retry
        // themselves, boundedly, where a retry is safe and useful.
        config.default_retry = false;
        Ok(config)
    }

    /// A client for `context`.
    pub async fn client(&self, context: &str) -> Result<kube::Client> {
        let config = self.config(context).await?;
        build(config, context).map_err(|e| {
            let unreadable = e
                .chain()
                .find_map(|link| kubeconfig::unreadable_file(context, link));
            let plugin = e.chain().find_map(|link| match link.downcast_ref() {
                Some(kube::client::AuthError::AuthExecStart(io)) => Some(io),
                _ => None,
            });
            match (unreadable, plugin, self.kubeconfig.exec_command(context)) {
                (Some(line), _, _) => line,
                (None, Some(io), Some(command)) => anyhow::anyhow!(
                    "context {context:?}: cannot run its credential plugin {command}: {}",
                    kubeconfig::file_error(io)
                ),
                _ => e.context(format!("building a client for context {context:?}")),
            }
        })
    }

    /// A client with `context`'s credentials for a cluster found elsewhere
    /// (a ClusterProfile): its server, CA and proxy replace the context's.
    pub async fn client_at(
        &self,
        context: &str,
        ep: &crate::core::cluster::membership::MemberEndpoint,
    ) -> Result<kube::Client> {
        const PROFILE_FIELDS: members::EndpointFields = members::EndpointFields {
            server: "server",
            ca_bundle: "certificate-authority-data",
            proxy_url: "proxy-url",
        };
        let mut config = self.config(context).await?;
        let at = members::Endpoint {
            server: &ep.api_endpoint,
            ca_bundle: ep.ca_bundle.as_deref(),
            proxy_url: ep.proxy_url.as_deref(),
        };
        config.root_cert = None;
        config.proxy_url = None;
        members::point_at(&mut config, &at, &PROFILE_FIELDS, "")?;
        config.accept_invalid_certs = ep.insecure_skip_tls_verify;
        build(config, context)
    }

    /// Where `context` points, as written in the kubeconfig.
    pub async fn endpoint(&self, context: &str) -> Result<Endpoint> {
        let config = self.config(context).await?;
        let ca_pem = config.root_cert.as_ref().map(|certs| {
            certs
                .iter()
                .map(|der| pem_encode("CERTIFICATE", der))
                .collect::<String>()
                .into_bytes()
        });
        Ok(Endpoint {
            context: context.to_string(),
            server: config
                .cluster_url
                .to_string()
                .trim_end_matches('/')
                .to_string(),
            ca_pem,
            insecure_skip_tls_verify: config.accept_invalid_certs,
            proxy_url: config.proxy_url.as_ref().map(|u| u.to_string()),
        })
    }

    fn raw(&self) -> &Kubeconfig {
        &self.kubeconfig.config
    }
}

/// kube's client for `config`, which retries only what a server asks to
/// be retried (`crate::clients::server_retry`), shows what it warns about as
/// coming from `cluster` (`crate::clients::api_warnings`), counts every attempt
/// (`crate::clients::request_metrics`), logs it at `-v 6`
/// (`crate::clients::request_log`) and says in one line why none was
/// answered (`crate::clients::no_answer`).
pub fn build(config: kube::Config, cluster: &str) -> Result<kube::Client> {
    let counted = crate::clients::request_metrics::layer(&config.cluster_url);
    let server = no_answer::Server::of_context(&config, cluster);
    let logged = request_log::RequestLogLayer::new(&server.url);
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&no_answer::NoAnswerLayer::new(server))
        .with_layer(&logged)
        .with_layer(&counted)
        .with_layer(&crate::clients::api_warnings::layer(cluster))
        .with_layer(&crate::clients::server_retry::RetryAfterLayer)
        .build())
}

/// PEM text for one DER block.
fn pem_encode(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    use std::fmt::Write;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        let _ = writeln!(
            out,
            "{}",
            std::str::from_utf8(chunk).expect("base64 is ASCII")
        );
    }
    let _ = writeln!(out, "-----END {label}-----");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_wraps_at_64_columns() {
        let pem = pem_encode("CERTIFICATE", &[7u8; 100]);
        let lines: Vec<&str> = pem.lines().collect();
        assert_eq!(lines[0], "-----BEGIN CERTIFICATE-----");
        assert_eq!(lines[1].len(), 64);
        assert_eq!(*lines.last().unwrap(), "-----END CERTIFICATE-----");
    }

    fn factory(yaml: &str) -> ClientFactory {
        ClientFactory::new(
            LoadedKubeconfig {
                config: Kubeconfig::from_yaml(yaml).unwrap(),
                source: "test".into(),
            },
            Timeouts::default(),
        )
    }

    #[tokio::test]
    async fn endpoint_reads_server_ca_and_tls_settings() {
        let f = factory(
            r#"
current-context: a
clusters:
- name: a
  cluster: {server: "https://10.1.2.3:6443/", insecure-skip-tls-verify: true, proxy-url: "http://proxy:3128"}
users:
- name: u
  user: {token: t}
contexts:
- name: a
  context: {cluster: a, user: u}
"#,
        );
        let ep = f.endpoint("a").await.unwrap();
        assert_eq!(ep.server, "https://10.1.2.3:6443");
        assert!(ep.insecure_skip_tls_verify);
        assert_eq!(ep.proxy_url.as_deref(), Some("http://proxy:3128/"));
        assert!(ep.ca_pem.is_none());
        let cfg = f.config("a").await.unwrap();
        assert_eq!(cfg.read_timeout, Some(Duration::from_secs(30)));
        assert!(!cfg.default_retry, "no hidden unbounded retries");
        let err = f
            .client("zzz")
            .await
            .err()
            .expect("unknown context")
            .to_string();
        assert!(err.contains(r#"context "zzz" not found"#), "{err}");
    }

    #[tokio::test]
    async fn a_file_the_kubeconfig_names_and_nobody_can_read_is_named_once() {
        let f = factory(
            r#"
current-context: a
clusters:
- name: a
  cluster: {server: "https://10.1.2.3:6443", certificate-authority: /nonexistent/ca.crt}
users:
- name: u
  user: {client-certificate: /nonexistent/c.crt, client-key: /nonexistent/c.key}
contexts:
- name: a
  context: {cluster: a, user: u}
"#,
        );
        let err = crate::error::one_line(&f.client("a").await.err().expect("no CA file"));
        assert_eq!(
            err,
            r#"context "a": cannot read the certificate-authority /nonexistent/ca.crt: no such file"#
        );
        let f = factory(
            r#"
current-context: a
clusters:
- name: a
  cluster: {server: "https://10.1.2.3:6443"}
users:
- name: u
  user: {client-certificate: /nonexistent/c.crt, client-key: /nonexistent/c.key}
contexts:
- name: a
  context: {cluster: a, user: u}
"#,
        );
        let err = crate::error::one_line(&f.client("a").await.err().expect("no certificate"));
        assert_eq!(
            err,
            r#"context "a": cannot read the client-certificate /nonexistent/c.crt: no such file"#
        );
        let f = factory(
            r#"
current-context: a
clusters:
- name: a
  cluster: {server: "https://10.1.2.3:6443"}
users:
- name: u
  user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /nonexistent/plugin}}
contexts:
- name: a
  context: {cluster: a, user: u}
"#,
        );
        let err = crate::error::one_line(&f.client("a").await.err().expect("no plugin"));
        assert_eq!(
            err,
            r#"context "a": cannot run its credential plugin /nonexistent/plugin: no such file"#
        );
    }
}
