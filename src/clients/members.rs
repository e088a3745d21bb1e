//! Member clusters as the host knows them: a client for each from its
//! `KubeFedCluster` (endpoint, CA, TLS settings, proxy) and the token in its
//! Secret, and a bounded health probe, as KubeFed's cluster controller did.

use crate::api::core::KubeFedCluster;
use crate::apply::api_error;
use crate::clients::host::Host;
use crate::clients::server_retry::RetryAfterLayer;
use crate::core::cluster::tls::{TlsChecks, tls_checks};
use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// A joined cluster, and a client for it when its configuration allows one.
#[derive(Clone)]
pub struct Member {
    pub name: String,
    pub cluster: KubeFedCluster,
    pub labels: BTreeMap<String, String>,
    /// The ClusterProfile the KubeFedCluster is linked to (published for
    /// it, or joined from it), as read when the member was loaded: a
    /// placement's `clusterSelector` may also match its properties, and a
    /// one-shot run keeps its status from this copy.
    pub profile: Option<serde_json::Value>,
    /// `Err` holds why no client could be built (ConfigMalformed).
    pub client: std::result::Result<kube::Client, String>,
    /// For watches (`reconcile --watch`): the same credentials without a
    /// read timeout, as a watch is silent while nothing changes.
    pub watch_client: Option<kube::Client>,
    /// Requests made through either client (the watch loop's metrics).
    pub requests: Arc<AtomicU64>,
    /// For `reconcile --watch`: set when a request to the member got no
    /// answer within the timeout, cleared when a probe is answered. While
    /// it is set, that member's requests fail at once instead of each
    /// waiting out its own timeout, so a frozen member (connections
    /// accepted, never answered) holds no round back. `None` in one-shot
    /// runs, where every request keeps its own timeout and retries.
    pub stalled: Option<Arc<Stall>>,
    /// What the credentials were built from (the KubeFedCluster's spec and
    /// its Secret's resourceVersion): a change means new clients.
    pub fingerprint: String,
    /// How long building its clients took, its Secret read included (the
    /// watch's `cluster_client_connection_duration_seconds`).
    pub connected_in: std::time::Duration,
    /// A pull member (`core::cluster::pull`): the host has no client for
    /// it, its agent applies its share and reports its health.
    pub pull: bool,
}

#[cfg(test)]
impl Member {
    /// A member named `name` with no client (unit tests use none): its
    /// probe says `ConfigMalformed` without a request.
    pub fn without_client(name: &str) -> Member {
        let cluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "core.kubefed.io/v1beta1", "kind": "KubeFedCluster",
            "metadata": {"name": name, "namespace": "fed"},
            "spec": {"apiEndpoint": "https://m", "secretRef": {"name": name}}}))
        .expect("a valid KubeFedCluster");
        Member {
            name: name.into(),
            cluster,
            labels: BTreeMap::new(),
            profile: None,
            client: Err("none in unit tests".into()),
            watch_client: None,
            requests: Default::default(),
            stalled: None,
            fingerprint: String::new(),
            connected_in: Default::default(),
            pull: false,
        }
    }
}

/// Whether a member stopped answering (the watch's; see `Member::stalled`).
/// Setting it wakes every request waiting on that member, so that rounds
/// in flight end at once instead of at their timeouts.
#[derive(Debug, Default)]
pub struct Stall {
    set: AtomicBool,
    notify: tokio::sync::Notify,
}

impl Stall {
    pub fn is_set(&self) -> bool {
        self.set.load(Ordering::Relaxed)
    }

    /// The member stopped answering: requests to it give up now.
    pub fn set(&self) {
        if !self.set.swap(true, Ordering::Relaxed) {
            self.notify.notify_waiters();
        }
    }

    /// A probe was answered: requests may go to it again.
    pub fn clear(&self) {
        self.set.store(false, Ordering::Relaxed);
    }

    /// Waits until it is set.
    pub async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a `set` in between is seen.
            notified.as_mut().enable();
            if self.is_set() {
                return;
            }
            notified.await;
        }
    }
}

pub use crate::core::cluster::health::{CREDENTIALS_REFUSED, Health};

/// Every KubeFedCluster in the kubefed namespace, sorted by name, each with
/// a client (or the reason there is none). `only` limits them by name.
pub async fn load(host: &Host, timeout: Duration, only: &[String]) -> Result<Vec<Member>> {
    load_with(host, timeout, only, None).await
}

/// [`load`], with clients for watches too when `watch` is given; its
/// request counters (by member) carry on counting for members loaded again.
pub async fn load_with(
    host: &Host,
    timeout: Duration,
    only: &[String],
    watch: Option<&[Member]>,
) -> Result<Vec<Member>> {
    let api: Api<KubeFedCluster> = Api::namespaced(host.client.clone(), &host.namespace);
    let mut clusters = api
        .list(&ListParams::default())
        .await
        .map_err(api_error)
        .context("listing KubeFedClusters")?
        .items;
    clusters.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for name in only {
        if !clusters
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some(name))
        {
            bail!("no KubeFedCluster {name:?} in {}", host.namespace);
        }
    }
    let secrets: Api<Secret> = Api::namespaced(host.client.clone(), &host.namespace);
    let mut out = Vec::new();
    for c in clusters {
        let name = c.metadata.name.clone().unwrap_or_default();
        if !only.is_empty() && !only.contains(&name) {
            continue;
        }
        let requests = watch
            .and_then(|before| before.iter().find(|m| m.name == name))
            .map(|m| m.requests.clone())
            .unwrap_or_default();
        let started = std::time::Instant::now();
        let pull = crate::core::cluster::pull::is_pull(c.metadata.annotations.as_ref());
        let built = if pull {
            // No Secret is read: a pull member gave the host no credential.
            Err(format!(
                "pull member: its agent applies its share (kubefedctl agent --cluster {name})"
            ))
        } else {
            client_for(&c, &secrets, timeout, &requests, watch.is_some())
                .await
                .map_err(|e| crate::error::one_line(&e))
        };
        let connected_in = started.elapsed();
        let (client, watch_client, secret_version) = match built {
            Ok(b) => (Ok(b.client), b.watch_client, b.secret_version),
            Err(e) => (Err(e), None, String::new()),
        };
        let fingerprint = format!(
            "{}/{secret_version}",
            serde_json::to_string(&c.spec).unwrap_or_default()
        );
        let stalled = watch.map(|before| {
            before
                .iter()
                .find(|m| m.name == name && m.fingerprint == fingerprint)
                .and_then(|m| m.stalled.clone())
                .unwrap_or_default()
        });
        let profile = linked_profile(host, &c).await;
        out.push(Member {
            labels: c.metadata.labels.clone().unwrap_or_default(),
            profile,
            name,
            cluster: c,
            client,
            watch_client,
            requests,
            stalled,
            fingerprint,
            connected_in,
            pull,
        });
    }
    Ok(out)
}

/// The ClusterProfile a KubeFedCluster's annotations link it to: one
/// read, only for such members. Best-effort: a profile that cannot be read
/// is none (said at `-v 2`), and placement selects on labels alone.
async fn linked_profile(host: &Host, c: &KubeFedCluster) -> Option<serde_json::Value> {
    use crate::core::cluster::inventory as inv;
    let annotations = c.metadata.annotations.as_ref()?;
    let linked = annotations
        .get(inv::FROM_PROFILE_ANNOTATION)
        .or_else(|| annotations.get(inv::PROFILE_ANNOTATION))?;
    let (ns, name) = inv::parse_ref(linked)?;
    let resource = crate::apply::api_resource(inv::GROUP, inv::VERSION, inv::KIND, inv::PLURAL);
    let target = crate::apply::ObjectRef::new("host", &host.client, resource, Some(ns), name);
    target.get().await.unwrap_or_else(|e| {
        tracing::debug!("ClusterProfile {ns}/{name}: {}", crate::error::one_line(&e));
        None
    })
}

/// A member's clients and the Secret version they were built from.
struct Clients {
    client: kube::Client,
    watch_client: Option<kube::Client>,
    secret_version: String,
}

async fn client_for(
    c: &KubeFedCluster,
    secrets: &Api<Secret>,
    timeout: Duration,
    requests: &Arc<AtomicU64>,
    watch: bool,
) -> Result<Clients> {
    let name = c.metadata.name.as_deref().unwrap_or("");
    let spec = &c.spec;
    if spec.api_endpoint.is_empty() {
        bail!("the api endpoint of cluster {name} is empty");
    }
    if spec.secret_ref.name.is_empty() {
        bail!("cluster {name} does not have a secret name");
    }
    let (secret, token) = read_token(secrets, name, &spec.secret_ref.name).await?;
    let (config, checks) = member_config(c, name, token, timeout)?;
    let watch_client = if watch {
        let mut config = config.clone();
        config.read_timeout = None;
        Some(build_client(config, checks, name, requests)?)
    } else {
        None
    };
    Ok(Clients {
        client: build_client(config, checks, name, requests)?,
        watch_client,
        secret_version: secret.metadata.resource_version.clone().unwrap_or_default(),
    })
}

/// The member's credential Secret in the host, and its non-empty token.
async fn read_token(secrets: &Api<Secret>, name: &str, secret: &str) -> Result<(Secret, String)> {
    let found = secrets
        .get_opt(secret)
        .await
        .map_err(api_error)?
        .ok_or_else(|| anyhow!("secret {secret:?} of cluster {name} not found"))?;
    let token = found
        .data
        .as_ref()
        .and_then(|d| d.get("token"))
        .map(|t| String::from_utf8_lossy(&t.0).trim().to_string())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            anyhow!("the secret for cluster {name} is missing a non-empty value for \"token\"")
        })?;
    Ok((found, token))
}

/// Where a member is, as text: a KubeFedCluster's or a ClusterProfile's.
pub(crate) struct Endpoint<'a> {
    pub server: &'a str,
    /// Base64 of the PEM CA bundle.
    pub ca_bundle: Option<&'a str>,
    pub proxy_url: Option<&'a str>,
}

/// What each source calls the fields of an [`Endpoint`], for errors.
pub(crate) struct EndpointFields {
    pub server: &'static str,
    pub ca_bundle: &'static str,
    pub proxy_url: &'static str,
}

const KUBEFED_CLUSTER_FIELDS: EndpointFields = EndpointFields {
    server: "apiEndpoint",
    ca_bundle: "caBundle",
    proxy_url: "proxyURL",
};

/// `config` pointed at `at`: its server (`https://` when it names no
/// scheme), its CA trusted, through its proxy. A field that cannot be
/// read is an error naming it (`fields`) after `prefix`.
pub(crate) fn point_at(
    config: &mut kube::Config,
    at: &Endpoint,
    fields: &EndpointFields,
    prefix: &str,
) -> Result<()> {
    let server = match at.server.contains("://") {
        true => at.server.to_string(),
        false => format!("https://{}", at.server),
    };
    config.cluster_url = server
        .parse()
        .with_context(|| format!("{prefix}invalid {} {server:?}", fields.server))?;
    if let Some(ca) = at.ca_bundle {
        let pem = base64::engine::general_purpose::STANDARD
            .decode(ca.trim())
            .with_context(|| format!("{prefix}{} is not base64", fields.ca_bundle))?;
        let certs =
            pem_certificates(&pem).with_context(|| format!("{prefix}{}", fields.ca_bundle))?;
        config.root_cert = Some(certs);
    }
    if let Some(p) = at.proxy_url.filter(|p| !p.is_empty()) {
        let proxy = p.parse();
        config.proxy_url =
            Some(proxy.with_context(|| format!("{prefix}invalid {} {p:?}", fields.proxy_url))?);
    }
    Ok(())
}

/// The connection a KubeFedCluster describes (endpoint, CA, TLS
/// exceptions, proxy), with `token`, explicit timeouts and no retries of
/// kube's own; each field that cannot be read is an error naming it.
fn member_config(
    c: &KubeFedCluster,
    name: &str,
    token: String,
    timeout: Duration,
) -> Result<(kube::Config, TlsChecks)> {
    let spec = &c.spec;
    let mut config = kube::Config::new(http::Uri::from_static("https://localhost"));
    let at = Endpoint {
        server: &spec.api_endpoint,
        ca_bundle: spec.ca_bundle.as_deref(),
        proxy_url: spec.proxy_url.as_deref(),
    };
    point_at(
        &mut config,
        &at,
        &KUBEFED_CLUSTER_FIELDS,
        &format!("cluster {name}: "),
    )?;
    let checks =
        tls_checks(&spec.disabled_tls_validations).map_err(|e| anyhow!("cluster {name}: {e}"))?;
    config.accept_invalid_certs = checks == TlsChecks::None;
    config.auth_info.token = Some(token.into());
    config.connect_timeout = Some(timeout);
    config.read_timeout = Some(timeout);
    config.write_timeout = Some(timeout);
    config.default_retry = false;
    Ok((config, checks))
}

/// A member's client: counted per member and by answer code, its
/// warnings shown, a busy server's answers retried; TLS checked as
/// `checks` says.
fn build_client(
    config: kube::Config,
    checks: TlsChecks,
    name: &str,
    requests: &Arc<AtomicU64>,
) -> Result<kube::Client> {
    let counter = CountRequests(requests.clone());
    let by_code = crate::clients::request_metrics::layer(&config.cluster_url);
    let warnings = crate::clients::api_warnings::layer(name);
    let server = crate::clients::no_answer::Server::of_member(&config, name);
    let logged = crate::clients::request_log::RequestLogLayer::new(&server.url);
    let explained = crate::clients::no_answer::NoAnswerLayer::new(server);
    let context = || format!("building a client for cluster {name}");
    Ok(match checks {
        TlsChecks::Relaxed {
            subject_name,
            validity_period,
        } => crate::clients::tls::relaxed_client_builder(&config, subject_name, validity_period)
            .with_context(context)?
            .with_layer(&explained)
            .with_layer(&logged)
            .with_layer(&by_code)
            .with_layer(&counter)
            .with_layer(&warnings)
            .with_layer(&RetryAfterLayer)
            .build(),
        TlsChecks::Full | TlsChecks::None => kube::client::ClientBuilder::try_from(config)
            .with_context(context)?
            .with_layer(&explained)
            .with_layer(&logged)
            .with_layer(&by_code)
            .with_layer(&counter)
            .with_layer(&warnings)
            .with_layer(&RetryAfterLayer)
            .build(),
    })
}

/// A tower layer counting the requests a client makes.
#[derive(Clone)]
struct CountRequests(Arc<AtomicU64>);

impl<S> tower::Layer<S> for CountRequests {
    type Service = Counted<S>;
    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            count: self.0.clone(),
        }
    }
}

#[derive(Clone)]
struct Counted<S> {
    inner: S,
    count: Arc<AtomicU64>,
}

impl<S, B> tower::Service<http::Request<B>> for Counted<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::result::Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> S::Future {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.inner.call(request)
    }
}

/// DER certificates from PEM text.
pub(crate) fn pem_certificates(pem: &[u8]) -> Result<Vec<Vec<u8>>> {
    let text = std::str::from_utf8(pem).context("not UTF-8")?;
    let mut out = Vec::new();
    let mut body = String::new();
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("-----BEGIN CERTIFICATE") {
            inside = true;
            body.clear();
        } else if line.starts_with("-----END CERTIFICATE") {
            inside = false;
            out.push(
                base64::engine::general_purpose::STANDARD
                    .decode(&body)
                    .context("bad PEM")?,
            );
        } else if inside {
            body.push_str(line);
        }
    }
    if out.is_empty() {
        bail!("no PEM certificate found");
    }
    Ok(out)
}

/// Probes one member: `/healthz`, then `/version` (bounded by `timeout`).
pub async fn probe(member: &Member, timeout: Duration) -> Health {
    if member.pull {
        // Never probed from the host: its agent's heartbeat says.
        let status = serde_json::to_value(&member.cluster.status).ok();
        let now = crate::clock::now_unix();
        return crate::core::cluster::pull::agent_health(
            status.as_ref().filter(|s| !s.is_null()),
            now,
        );
    }
    let client = match &member.client {
        Ok(c) => c.clone(),
        Err(e) => return Health::ConfigMalformed { message: e.clone() },
    };
    let healthz = || {
        http::Request::get("/healthz")
            .body(Vec::new())
            .expect("valid request")
    };
    let deadline = tokio::time::Instant::now() + timeout;
    let mut answer = tokio::time::timeout_at(deadline, client.request_text(healthz())).await;
    // A pooled connection the member closed while idle fails the request
    // at once; one more try on a fresh connection tells that apart from a
    // member that is really gone (no false "not ready" in between).
    if matches!(&answer, Ok(Err(e)) if !matches!(e, kube::Error::Api(_))) {
        answer = tokio::time::timeout_at(deadline, client.request_text(healthz())).await;
    }
    match answer {
        Err(_) => Health::Offline {
            message: format!(
                "cluster is not reachable: the server {} did not answer within {}",
                member.cluster.spec.api_endpoint.trim_end_matches('/'),
                crate::clients::no_answer::human(timeout)
            ),
        },
        Ok(Err(kube::Error::Api(s))) if s.code == 401 => Health::NotReady {
            message: format!(
                "{CREDENTIALS_REFUSED} ({} {}): the token in the KubeFedCluster's Secret no longer works; join it again (kubefedctl join {} --error-on-existing=false)",
                s.code,
                s.message.trim(),
                member.name
            ),
        },
        Ok(Err(kube::Error::Api(s))) => Health::NotReady {
            message: format!("/healthz responded without ok ({} {})", s.code, s.message),
        },
        Ok(Err(e)) => Health::Offline {
            message: format!(
                "cluster is not reachable: {}",
                crate::error::source_chain(&e)
            ),
        },
        Ok(Ok(body)) if body.trim().eq_ignore_ascii_case("ok") => {
            let version = match tokio::time::timeout(timeout, client.apiserver_version()).await {
                Ok(Ok(v)) => v.git_version,
                _ => String::new(),
            };
            Health::Ready { version }
        }
        Ok(Ok(_)) => Health::NotReady {
            message: "/healthz responded without ok".into(),
        },
    }
}

/// A member with its health as last probed. Runs and the watch keep one
/// list of these, so that a member's health is never read by its position
/// in a list beside the members.
#[derive(Clone)]
pub struct ProbedMember {
    pub member: Member,
    pub health: Health,
}

impl ProbedMember {
    pub fn name(&self) -> &str {
        &self.member.name
    }

    pub fn is_ready(&self) -> bool {
        self.health.is_ready()
    }
}

/// Probes every member at once; each costs at most `timeout`. The list
/// keeps the members' order.
pub async fn probe_all(members: &[Member], timeout: Duration) -> Vec<ProbedMember> {
    let mut set = tokio::task::JoinSet::new();
    for (i, m) in members.iter().enumerate() {
        let m = m.clone();
        set.spawn(async move { (i, probe(&m, timeout).await) });
    }
    let mut out: Vec<ProbedMember> = (members.iter())
        .map(|m| ProbedMember {
            member: m.clone(),
            health: Health::Offline {
                message: "not probed".into(),
            },
        })
        .collect();
    while let Some(Ok((i, h))) = set.join_next().await {
        out[i].health = h;
    }
    out
}

/// The readiness a KubeFedCluster's status records (no probe).
pub fn recorded_health(c: &KubeFedCluster) -> Option<Health> {
    let status = c.status.as_ref()?;
    let cond = |t: &str| status.conditions.iter().find(|c| c.type_ == t);
    if let Some(r) = cond("Ready")
        && r.status == "True"
    {
        return Some(Health::Ready {
            version: status.kubernetes_version.clone().unwrap_or_default(),
        });
    }
    if let Some(c) = cond("ConfigMalformed").filter(|c| c.status == "True") {
        return Some(Health::ConfigMalformed {
            message: c.message.clone().unwrap_or_default(),
        });
    }
    if let Some(c) = cond("Offline").filter(|c| c.status == "True") {
        return Some(Health::Offline {
            message: c.message.clone().unwrap_or_default(),
        });
    }
    cond("Ready").map(|c| Health::NotReady {
        message: c.message.clone().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_bundles_decode_to_der() {
        let pem = "-----BEGIN CERTIFICATE-----\nAQID\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\nBAUG\n-----END CERTIFICATE-----\n";
        assert_eq!(
            pem_certificates(pem.as_bytes()).unwrap(),
            vec![vec![1, 2, 3], vec![4, 5, 6]]
        );
        assert!(pem_certificates(b"nothing").is_err());
    }

    #[test]
    fn recorded_health_reads_kubefed_conditions() {
        let mut c = KubeFedCluster::new("m", Default::default());
        assert_eq!(recorded_health(&c), None);
        let cond = |t: &str, s: &str, m: &str| crate::api::core::ClusterCondition {
            type_: t.into(),
            status: s.into(),
            last_probe_time: "2026-01-01T00:00:00Z".into(),
            message: Some(m.into()),
            ..Default::default()
        };
        c.status = Some(crate::api::core::KubeFedClusterStatus {
            conditions: vec![cond("Ready", "True", "ok")],
            kubernetes_version: Some("v1.20.2".into()),
            ..Default::default()
        });
        assert_eq!(
            recorded_health(&c),
            Some(Health::Ready {
                version: "v1.20.2".into()
            })
        );
        c.status.as_mut().unwrap().conditions = vec![cond("Offline", "True", "down")];
        assert_eq!(
            recorded_health(&c),
            Some(Health::Offline {
                message: "down".into()
            })
        );
    }
}
