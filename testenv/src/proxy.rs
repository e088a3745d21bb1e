//! A fault-injecting, request-counting TLS reverse proxy that stands in front
//! of a real kube-apiserver in tests.
//!
//! Tests are synchronous and drive the CLI as a subprocess, so the API here is
//! synchronous too: the proxy runs its own single-threaded tokio runtime on a
//! dedicated thread, and every setter takes effect before it returns.
//!
//! Each client connection gets at most one upstream connection at a time
//! (HTTP/1.1 serves one request after another), so the number of upstream
//! connections stays bounded by the number of client connections.

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// How long `set_faults` waits for the listener to close or re-bind before
/// giving up: a test that goes on after that would misread its own results.
const APPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// A client that never finishes its TLS handshake should not pin a task forever.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the proxy forwards to and which certificate it serves.
#[derive(Clone)]
pub struct ProxyConfig {
    /// The upstream API server, e.g. `https://127.0.0.1:6443`.
    pub upstream: String,
    /// CA that signed the upstream's serving certificate; the upstream is verified against it.
    pub upstream_ca_pem: String,
    /// Certificate (chain) the proxy serves; clients verify it like the upstream's.
    pub serving_cert_pem: String,
    /// Private key of `serving_cert_pem` (PKCS#8, SEC1 or PKCS#1 PEM).
    pub serving_key_pem: String,
    /// Port on 127.0.0.1; 0 picks a free one.
    pub listen_port: u16,
}

/// What the listener does with connections.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub enum Mode {
    /// Forward requests (subject to latency and error faults).
    #[default]
    Normal,
    /// Nothing listens: connects fail with ECONNREFUSED, open connections are closed.
    Refuse,
    /// Connections are accepted but never answered, like a stuck server.
    Hang,
}

/// Predicate choosing which requests the latency and error faults apply to.
pub type RequestFilter = Arc<dyn Fn(&RequestRecord) -> bool + Send + Sync>;

/// Faults to inject; `Faults::default()` injects none.
#[derive(Clone, Default)]
pub struct Faults {
    /// Added before forwarding each request.
    pub latency: Duration,
    /// Fraction (0.0..=1.0) of requests answered with an injected error instead of being forwarded.
    pub error_rate: f64,
    /// Statuses of injected errors, used round-robin; `[503]` when empty.
    pub error_statuses: Vec<u16>,
    /// `Retry-After` header (and `details.retryAfterSeconds`) on injected 429 and 503 answers.
    pub retry_after_secs: Option<u32>,
    /// Listener behaviour.
    pub mode: Mode,
    /// When set, latency and errors apply only to requests it accepts (the mode applies to all).
    pub only: Option<RequestFilter>,
    /// Seed of the deterministic choice of which requests fail.
    pub seed: u64,
}

impl fmt::Debug for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Faults")
            .field("latency", &self.latency)
            .field("error_rate", &self.error_rate)
            .field("error_statuses", &self.error_statuses)
            .field("retry_after_secs", &self.retry_after_secs)
            .field("mode", &self.mode)
            .field("only", &self.only.as_ref().map(|_| "<filter>"))
            .field("seed", &self.seed)
            .finish()
    }
}

/// One request the proxy saw, classified like kube-apiserver's `RequestInfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// HTTP method, e.g. `GET`.
    pub method: String,
    /// get, list, watch, create, update, patch, delete, deletecollection; `other`
    /// for non-resource paths (`/healthz`, `/version`, discovery, `/openapi/v2`).
    pub verb: String,
    /// URL path without the query.
    pub path: String,
    /// The raw query string, without `?` (`labelSelector=...&limit=500`).
    pub query: String,
    /// API group, `""` for core (and for non-resource paths).
    pub group: String,
    /// API version, also filled in for group-version discovery paths.
    pub version: String,
    /// Plural resource name, `""` for non-resource and discovery paths.
    pub resource: String,
    /// Subresource such as `status`, `""` if none.
    pub subresource: String,
    /// Namespace, `""` if none. As in kube-apiserver, a Namespace object's own
    /// path (`/api/v1/namespaces/foo`) has namespace `foo` as well as name `foo`.
    pub namespace: String,
    /// Object name, `""` if none.
    pub name: String,
    /// Status answered to the client; 0 while unanswered (hung, dropped or in flight).
    pub status: u16,
    /// True when the proxy answered with an injected error instead of forwarding.
    pub injected: bool,
    /// When the proxy received the request (`None` from [`classify`] alone).
    pub received: Option<Instant>,
    /// When the proxy had the answer's status; `None` while unanswered.
    pub answered: Option<Instant>,
    /// Bytes of the answer's body passed to the client so far (a watch's
    /// grow while it runs).
    pub response_bytes: u64,
}

impl RequestRecord {
    /// Whether the verb changes state (create, update, patch, delete,
    /// deletecollection). Reviews (`SelfSubjectRulesReview` and the like)
    /// are created to be answered, never stored: not writes.
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        ) && !self.resource.ends_with("reviews")
    }
}

/// Classifies a request the way kube-apiserver's `RequestInfoFactory` does.
///
/// `query` is the raw query string without `?`. The result has status 0.
pub fn classify(method: &str, path: &str, query: Option<&str>) -> RequestRecord {
    let mut rec = RequestRecord {
        method: method.to_string(),
        verb: "other".to_string(),
        path: path.to_string(),
        query: query.unwrap_or("").to_string(),
        group: String::new(),
        version: String::new(),
        resource: String::new(),
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
        status: 0,
        injected: false,
        received: None,
        answered: None,
        response_bytes: 0,
    };
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let mut rest: &[&str] = match parts.as_slice() {
        ["api", version, rest @ ..] => {
            rec.version = version.to_string();
            rest
        }
        ["apis", group, version, rest @ ..] => {
            rec.group = group.to_string();
            rec.version = version.to_string();
            rest
        }
        _ => return rec,
    };
    // The deprecated `/api/v1/watch/...` form.
    let watch_prefix = rest.first() == Some(&"watch");
    if watch_prefix {
        rest = &rest[1..];
    }
    if rest.is_empty() {
        // Group-version discovery.
        return rec;
    }
    if rest[0] == "namespaces" && rest.len() > 1 {
        rec.namespace = rest[1].to_string();
        // `namespaces/foo/status` and `namespaces/foo/finalize` are subresources
        // of the Namespace object; anything else is a namespaced resource.
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest = &rest[2..];
        }
    }
    rec.resource = rest[0].to_string();
    if let Some(name) = rest.get(1) {
        rec.name = name.to_string();
    }
    if let Some(sub) = rest.get(2) {
        rec.subresource = sub.to_string();
    }
    let named = !rec.name.is_empty();
    let verb = match method {
        _ if watch_prefix => "watch",
        "GET" | "HEAD" if named => "get",
        "GET" | "HEAD" if watch_param(query) => "watch",
        "GET" | "HEAD" => "list",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" if named => "delete",
        "DELETE" => "deletecollection",
        _ => "other",
    };
    rec.verb = verb.to_string();
    rec
}

/// `watch=...` as kube-apiserver reads it: any value but empty, `false` or `0` is true.
fn watch_param(query: Option<&str>) -> bool {
    query.is_some_and(|q| {
        q.split('&').any(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            k == "watch" && !(v.is_empty() || v == "0" || v.eq_ignore_ascii_case("false"))
        })
    })
}

/// A running proxy; dropping it stops listening and ends its runtime thread.
pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Binds the listener and starts forwarding to `cfg.upstream`.
    pub fn start(cfg: ProxyConfig) -> Result<Proxy> {
        let upstream = Upstream::new(&cfg.upstream, &cfg.upstream_ca_pem)?;
        let acceptor = server_tls(&cfg.serving_cert_pem, &cfg.serving_key_pem)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("building the proxy runtime")?;
        let listener = {
            let _guard = rt.enter();
            bind(cfg.listen_port)
                .with_context(|| format!("binding 127.0.0.1:{}", cfg.listen_port))?
        };
        let port = listener.local_addr()?.port();
        let (state_tx, _) = watch::channel(State::default());
        let shared = Arc::new(Shared {
            port,
            upstream,
            acceptor,
            state: state_tx,
            active: Mutex::new(Arc::new(ActiveFaults::new(Faults::default()))),
            records: Mutex::new(Records::default()),
            applied: Mutex::new(0),
            applied_cv: Condvar::new(),
        });
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let loop_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("testenv-proxy-{port}"))
            .spawn(move || {
                rt.block_on(async move {
                    tokio::select! {
                        _ = accept_loop(loop_shared, listener) => {}
                        _ = stop_rx => {}
                    }
                });
                // Dropping the runtime drops every connection task and socket.
                drop(rt);
            })
            .context("spawning the proxy thread")?;
        Ok(Proxy {
            port,
            shared,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// `https://127.0.0.1:PORT`; the port stays the same for the proxy's life.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Replaces the faults. New requests see them at once; when the mode
    /// changes, this returns only after the listener has closed or re-bound.
    ///
    /// Panics if the port cannot be bound again within 10 s.
    pub fn set_faults(&self, faults: Faults) {
        let mode = faults.mode;
        *lock(&self.shared.active) = Arc::new(ActiveFaults::new(faults));
        let mut generation = 0;
        self.shared.state.send_modify(|s| {
            s.generation += 1;
            if mode == Mode::Refuse && s.mode != Mode::Refuse {
                s.refuse_epoch += 1;
            }
            s.mode = mode;
            generation = s.generation;
        });
        let applied = lock(&self.shared.applied);
        let (applied, timeout) = self
            .shared
            .applied_cv
            .wait_timeout_while(applied, APPLY_TIMEOUT, |a| *a < generation)
            .unwrap_or_else(|e| e.into_inner());
        drop(applied);
        if timeout.timed_out() {
            panic!(
                "proxy on port {} did not apply mode {mode:?} within {APPLY_TIMEOUT:?} \
                 (is the port taken?)",
                self.port
            );
        }
    }

    /// Back to plain forwarding.
    pub fn clear_faults(&self) {
        self.set_faults(Faults::default());
    }

    /// Every request seen since start or the last reset, in arrival order.
    pub fn records(&self) -> Vec<RequestRecord> {
        lock(&self.shared.records).list.clone()
    }

    pub fn reset_records(&self) {
        let mut r = lock(&self.shared.records);
        r.epoch += 1;
        r.list.clear();
    }

    /// Number of recorded requests matching `pred`.
    pub fn count(&self, pred: impl Fn(&RequestRecord) -> bool) -> usize {
        lock(&self.shared.records)
            .list
            .iter()
            .filter(|r| pred(r))
            .count()
    }

    /// Recorded create/update/patch/delete/deletecollection requests, injected ones included.
    pub fn writes(&self) -> usize {
        self.count(RequestRecord::is_write)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl fmt::Debug for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Proxy").field("port", &self.port).finish()
    }
}

/// Locks, ignoring poisoning: a panicking test thread must not cascade into the proxy.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Listener state published to the accept loop and every connection.
#[derive(Clone, Copy, Default, Debug)]
struct State {
    /// Bumped by every `set_faults`; acknowledged by the accept loop.
    generation: u64,
    mode: Mode,
    /// Bumped on each entry into Refuse, so connections notice even a brief one.
    refuse_epoch: u64,
}

/// Faults plus the counters that make their choices deterministic from the moment they were set.
struct ActiveFaults {
    faults: Faults,
    draws: AtomicU64,
    injected: AtomicU64,
}

impl ActiveFaults {
    fn new(faults: Faults) -> Self {
        ActiveFaults {
            faults,
            draws: AtomicU64::new(0),
            injected: AtomicU64::new(0),
        }
    }

    /// Decides whether the next eligible request fails, and with which status.
    fn draw_error(&self) -> Option<u16> {
        let rate = self.faults.error_rate;
        if rate.is_nan() || rate <= 0.0 {
            return None;
        }
        let n = self.draws.fetch_add(1, Ordering::Relaxed);
        let unit = (splitmix64(self.faults.seed, n) >> 11) as f64 / (1u64 << 53) as f64;
        if unit >= rate {
            return None;
        }
        let statuses = &self.faults.error_statuses;
        let i = self.injected.fetch_add(1, Ordering::Relaxed);
        Some(if statuses.is_empty() {
            503
        } else {
            statuses[(i % statuses.len() as u64) as usize]
        })
    }
}

/// The `n`-th output of a SplitMix64 generator seeded with `seed`.
fn splitmix64(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(n.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Records plus an epoch, so a reset cannot be overwritten by an in-flight request's status.
#[derive(Default)]
struct Records {
    epoch: u64,
    list: Vec<RequestRecord>,
}

struct Shared {
    port: u16,
    upstream: Upstream,
    acceptor: TlsAcceptor,
    state: watch::Sender<State>,
    active: Mutex<Arc<ActiveFaults>>,
    records: Mutex<Records>,
    applied: Mutex<u64>,
    applied_cv: Condvar,
}

impl Shared {
    fn push_record(&self, mut rec: RequestRecord) -> (u64, usize) {
        rec.received = Some(Instant::now());
        let mut r = lock(&self.records);
        r.list.push(rec);
        (r.epoch, r.list.len() - 1)
    }

    fn finish_record(&self, (epoch, index): (u64, usize), status: u16, injected: bool) {
        let mut r = lock(&self.records);
        if r.epoch == epoch
            && let Some(rec) = r.list.get_mut(index)
        {
            rec.status = status;
            rec.injected = injected;
            rec.answered = Some(Instant::now());
        }
    }

    fn count_bytes(&self, (epoch, index): (u64, usize), bytes: usize) {
        let mut r = lock(&self.records);
        if r.epoch == epoch
            && let Some(rec) = r.list.get_mut(index)
        {
            rec.response_bytes += bytes as u64;
        }
    }

    fn acknowledge(&self, generation: u64) {
        let mut a = lock(&self.applied);
        if *a < generation {
            *a = generation;
            self.applied_cv.notify_all();
        }
    }
}

fn bind(port: u16) -> std::io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    // Re-binding the same port after Refuse must work despite TIME_WAIT sockets.
    socket.set_reuseaddr(true)?;
    socket.bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))?;
    socket.listen(1024)
}

/// Accepts connections, closing the listener in Refuse mode and re-binding after it.
async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    let mut listener = Some(listener);
    let mut rx = shared.state.subscribe();
    loop {
        let state = *rx.borrow_and_update();
        if state.mode == Mode::Refuse {
            listener = None;
        } else if listener.is_none() {
            match bind(shared.port) {
                Ok(l) => listener = Some(l),
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            }
        }
        shared.acknowledge(state.generation);
        match &listener {
            Some(l) => tokio::select! {
                accepted = l.accept() => match accepted {
                    Ok((tcp, _)) => {
                        tokio::spawn(serve_connection(shared.clone(), tcp));
                    }
                    // Out of descriptors and the like: back off instead of spinning.
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                },
                changed = rx.changed() => if changed.is_err() { return },
            },
            None => {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        }
    }
}

type Body = BoxBody<Bytes, hyper::Error>;

/// Per client connection: the upstream connection its requests reuse.
struct ConnCtx {
    upstream: tokio::sync::Mutex<Option<SendRequest<Incoming>>>,
}

async fn serve_connection(shared: Arc<Shared>, tcp: TcpStream) {
    let _ = tcp.set_nodelay(true);
    let mut rx = shared.state.subscribe();
    let epoch = rx.borrow().refuse_epoch;
    // Hang: hold the socket without reading or writing until the mode changes.
    let Ok(state) = rx.wait_for(|s| s.mode != Mode::Hang).await.map(|s| *s) else {
        return;
    };
    if state.mode == Mode::Refuse || state.refuse_epoch != epoch {
        return;
    }
    let refused = async {
        let _ = rx.wait_for(|s| s.refuse_epoch != epoch).await;
    };
    // Dropping the connection on Refuse closes it, so pooled clients see a failure.
    tokio::select! {
        _ = serve_tls(shared.clone(), tcp) => {}
        _ = refused => {}
    }
}

async fn serve_tls(shared: Arc<Shared>, tcp: TcpStream) {
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, shared.acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        _ => return,
    };
    let ctx = Arc::new(ConnCtx {
        upstream: tokio::sync::Mutex::new(None),
    });
    let service = hyper::service::service_fn(move |req| {
        let shared = shared.clone();
        let ctx = ctx.clone();
        async move { Ok::<_, Infallible>(handle(&shared, &ctx, req).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(tls), service)
        .await;
}

async fn handle(shared: &Arc<Shared>, ctx: &ConnCtx, req: Request<Incoming>) -> Response<Body> {
    let rec = classify(req.method().as_str(), req.uri().path(), req.uri().query());
    let slot = shared.push_record(rec.clone());

    // Hang holds requests on open connections unanswered; Refuse is about to
    // close this connection. Either way, answer nothing until back to Normal.
    let mut rx = shared.state.subscribe();
    if rx.wait_for(|s| s.mode == Mode::Normal).await.is_err() {
        std::future::pending::<()>().await;
    }

    let active = lock(&shared.active).clone();
    let applies = active.faults.only.as_ref().is_none_or(|only| only(&rec));
    if applies {
        if !active.faults.latency.is_zero() {
            tokio::time::sleep(active.faults.latency).await;
        }
        if let Some(code) = active.draw_error() {
            let resp = injected_response(code, active.faults.retry_after_secs);
            shared.finish_record(slot, resp.status().as_u16(), true);
            return resp;
        }
    }

    let resp = match shared.upstream.forward(ctx, req).await {
        Ok(resp) => {
            let (mut parts, body) = resp.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            let counter = shared.clone();
            let body = body.map_frame(move |frame| {
                if let Some(data) = frame.data_ref() {
                    counter.count_bytes(slot, data.len());
                }
                frame
            });
            Response::from_parts(parts, body.boxed())
        }
        Err(e) => status_response(
            StatusCode::BAD_GATEWAY,
            &format!("proxy: upstream request failed: {e:#}"),
            None,
        ),
    };
    shared.finish_record(slot, resp.status().as_u16(), false);
    resp
}

/// A Kubernetes `Status` answer for an injected error.
fn injected_response(code: u16, retry_after: Option<u32>) -> Response<Body> {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let retry_after = retry_after.filter(|_| matches!(status.as_u16(), 429 | 503));
    status_response(status, "injected fault", retry_after)
}

fn status_response(status: StatusCode, message: &str, retry_after: Option<u32>) -> Response<Body> {
    let code = status.as_u16();
    let reason = match code {
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        410 => "Expired",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        400..=499 => "BadRequest",
        _ => "InternalError",
    };
    let mut body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    if let Some(secs) = retry_after {
        body["details"] = serde_json::json!({ "retryAfterSeconds": secs });
    }
    let mut resp = Response::new(
        Full::new(Bytes::from(body.to_string()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(secs) = retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

/// Removes headers that describe one hop, not the message (RFC 9110 §7.6.1).
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for name in listed {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        header::PROXY_AUTHENTICATE,
        header::PROXY_AUTHORIZATION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
    headers.remove("keep-alive");
    headers.remove("proxy-connection");
}

/// The upstream API server and how to reach it over verified TLS.
struct Upstream {
    /// `host:port` for TCP connects (brackets stripped for IPv6).
    connect_host: String,
    port: u16,
    /// Value of the Host header sent upstream.
    authority: HeaderValue,
    server_name: rustls::pki_types::ServerName<'static>,
    connector: TlsConnector,
}

impl Upstream {
    fn new(url: &str, ca_pem: &str) -> Result<Upstream> {
        let uri: Uri = url
            .parse()
            .with_context(|| format!("bad upstream URL {url}"))?;
        if uri.scheme_str() != Some("https") {
            bail!("upstream must be https: {url}");
        }
        let host = uri
            .host()
            .ok_or_else(|| anyhow!("upstream URL has no host: {url}"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = uri.port_u16().unwrap_or(443);
        let authority = uri
            .authority()
            .ok_or_else(|| anyhow!("upstream URL has no authority: {url}"))?;
        let server_name = rustls::pki_types::ServerName::try_from(host.to_string())
            .map_err(|e| anyhow!("bad upstream host {host}: {e}"))?;

        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
            roots
                .add(cert.context("reading upstream CA PEM")?)
                .context("adding upstream CA")?;
        }
        if roots.is_empty() {
            bail!("upstream CA PEM holds no certificate");
        }
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Upstream {
            connect_host: host.to_string(),
            port,
            authority: HeaderValue::from_str(authority.as_str())?,
            server_name,
            connector: TlsConnector::from(Arc::new(config)),
        })
    }

    async fn connect(&self) -> Result<SendRequest<Incoming>> {
        let tcp = TcpStream::connect((self.connect_host.as_str(), self.port))
            .await
            .with_context(|| format!("connecting to {}:{}", self.connect_host, self.port))?;
        let _ = tcp.set_nodelay(true);
        let tls = self
            .connector
            .connect(self.server_name.clone(), tcp)
            .await
            .context("TLS handshake with upstream")?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    /// Sends `req` over the connection's upstream connection, opening one if
    /// there is none or it has closed; a request that never left is retried once.
    async fn forward(&self, ctx: &ConnCtx, req: Request<Incoming>) -> Result<Response<Incoming>> {
        let (mut parts, body) = req.into_parts();
        let path = parts
            .uri
            .path_and_query()
            .map_or("/", |pq| pq.as_str())
            .to_string();
        parts.uri = path.parse()?;
        parts.version = hyper::Version::HTTP_11;
        strip_hop_by_hop(&mut parts.headers);
        parts.headers.insert(header::HOST, self.authority.clone());
        let mut req = Request::from_parts(parts, body);

        let mut slot = ctx.upstream.lock().await;
        let mut retried = false;
        loop {
            let reusable = match slot.as_mut() {
                Some(sender) => sender.ready().await.is_ok(),
                None => false,
            };
            if !reusable {
                *slot = None;
                let mut sender = self.connect().await?;
                sender.ready().await?;
                *slot = Some(sender);
            }
            let sender = slot.as_mut().expect("set above");
            match sender.try_send_request(req).await {
                Ok(resp) => return Ok(resp),
                Err(mut e) => {
                    *slot = None;
                    match e.take_message() {
                        Some(unsent) if !retried => {
                            retried = true;
                            req = unsent;
                        }
                        _ => return Err(e.into_error().into()),
                    }
                }
            }
        }
    }
}

fn server_tls(cert_pem: &str, key_pem: &str) -> Result<TlsAcceptor> {
    let certs = rustls_pemfile::certs(&mut cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .context("reading serving certificate PEM")?;
    if certs.is_empty() {
        bail!("serving certificate PEM holds no certificate");
    }
    let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())
        .context("reading serving key PEM")?
        .ok_or_else(|| anyhow!("serving key PEM holds no private key"))?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .context("serving certificate and key do not match")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(method: &str, path_and_query: &str) -> RequestRecord {
        let (path, query) = match path_and_query.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (path_and_query, None),
        };
        classify(method, path, query)
    }

    /// (verb, group, version, resource, subresource, namespace, name)
    fn fields(r: &RequestRecord) -> [&str; 7] {
        [
            &r.verb,
            &r.group,
            &r.version,
            &r.resource,
            &r.subresource,
            &r.namespace,
            &r.name,
        ]
        .map(String::as_str)
    }

    #[test]
    fn core_resources() {
        let r = rec("GET", "/api/v1/namespaces/ns1/configmaps/cm1");
        assert_eq!(
            fields(&r),
            ["get", "", "v1", "configmaps", "", "ns1", "cm1"]
        );
        assert_eq!(r.path, "/api/v1/namespaces/ns1/configmaps/cm1");
        assert_eq!(r.method, "GET");
        assert_eq!((r.status, r.injected), (0, false));
        let r = rec("GET", "/api/v1/namespaces/ns1/configmaps?limit=500");
        assert_eq!(fields(&r), ["list", "", "v1", "configmaps", "", "ns1", ""]);
        assert_eq!(r.path, "/api/v1/namespaces/ns1/configmaps");
        let r = rec("POST", "/api/v1/namespaces/ns1/configmaps");
        assert_eq!(
            fields(&r),
            ["create", "", "v1", "configmaps", "", "ns1", ""]
        );
        assert!(r.is_write());
        let r = rec("GET", "/api/v1/configmaps");
        assert_eq!(fields(&r), ["list", "", "v1", "configmaps", "", "", ""]);
    }

    #[test]
    fn grouped_namespaced_and_cluster_scoped() {
        let r = rec("PUT", "/apis/apps/v1/namespaces/default/deployments/web");
        assert_eq!(
            fields(&r),
            ["update", "apps", "v1", "deployments", "", "default", "web"]
        );
        let r = rec(
            "PATCH",
            "/apis/types.kubefed.io/v1beta1/namespaces/kube-federation-system/federatedconfigmaps/x",
        );
        assert_eq!(
            fields(&r),
            [
                "patch",
                "types.kubefed.io",
                "v1beta1",
                "federatedconfigmaps",
                "",
                "kube-federation-system",
                "x"
            ]
        );
        let r = rec(
            "DELETE",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.example.com",
        );
        assert_eq!(
            fields(&r),
            [
                "delete",
                "apiextensions.k8s.io",
                "v1",
                "customresourcedefinitions",
                "",
                "",
                "foos.example.com"
            ]
        );
        let r = rec("DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterroles");
        assert_eq!(
            fields(&r),
            [
                "deletecollection",
                "rbac.authorization.k8s.io",
                "v1",
                "clusterroles",
                "",
                "",
                ""
            ]
        );
        let r = rec("DELETE", "/api/v1/namespaces/ns1/secrets");
        assert_eq!(
            fields(&r),
            ["deletecollection", "", "v1", "secrets", "", "ns1", ""]
        );
        assert!(r.is_write());
    }

    #[test]
    fn subresources() {
        let r = rec(
            "PUT",
            "/apis/core.kubefed.io/v1beta1/namespaces/kube-federation-system/kubefedclusters/c1/status",
        );
        assert_eq!(
            fields(&r),
            [
                "update",
                "core.kubefed.io",
                "v1beta1",
                "kubefedclusters",
                "status",
                "kube-federation-system",
                "c1"
            ]
        );
        let r = rec(
            "PATCH",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.example.com/status",
        );
        assert_eq!(r.subresource, "status");
        assert_eq!(r.name, "foos.example.com");
        assert_eq!(r.namespace, "");
    }

    #[test]
    fn namespace_objects() {
        let r = rec("GET", "/api/v1/namespaces/foo");
        assert_eq!(
            fields(&r),
            ["get", "", "v1", "namespaces", "", "foo", "foo"]
        );
        let r = rec("GET", "/api/v1/namespaces");
        assert_eq!(fields(&r), ["list", "", "v1", "namespaces", "", "", ""]);
        let r = rec("POST", "/api/v1/namespaces");
        assert_eq!(fields(&r), ["create", "", "v1", "namespaces", "", "", ""]);
        let r = rec("DELETE", "/api/v1/namespaces/foo");
        assert_eq!(
            fields(&r),
            ["delete", "", "v1", "namespaces", "", "foo", "foo"]
        );
        let r = rec("PUT", "/api/v1/namespaces/foo/status");
        assert_eq!(
            fields(&r),
            ["update", "", "v1", "namespaces", "status", "foo", "foo"]
        );
        let r = rec("PUT", "/api/v1/namespaces/foo/finalize");
        assert_eq!(
            fields(&r),
            ["update", "", "v1", "namespaces", "finalize", "foo", "foo"]
        );
    }

    #[test]
    fn watches() {
        let r = rec(
            "GET",
            "/api/v1/namespaces/ns1/configmaps?watch=true&resourceVersion=10",
        );
        assert_eq!(fields(&r), ["watch", "", "v1", "configmaps", "", "ns1", ""]);
        let r = rec(
            "GET",
            "/apis/apps/v1/deployments?allowWatchBookmarks=true&watch=1",
        );
        assert_eq!(
            fields(&r),
            ["watch", "apps", "v1", "deployments", "", "", ""]
        );
        assert_eq!(rec("GET", "/api/v1/pods?watch=false").verb, "list");
        assert_eq!(rec("GET", "/api/v1/pods?watch=0").verb, "list");
        assert_eq!(rec("GET", "/api/v1/pods?watch=").verb, "list");
        assert_eq!(
            rec("GET", "/api/v1/pods?resourceVersionMatch=watch").verb,
            "list"
        );
        // The deprecated path form.
        let r = rec("GET", "/api/v1/watch/namespaces/ns1/pods/p1");
        assert_eq!(fields(&r), ["watch", "", "v1", "pods", "", "ns1", "p1"]);
        assert!(!r.is_write());
    }

    #[test]
    fn non_resource_paths() {
        for path in [
            "/healthz",
            "/readyz?verbose",
            "/version",
            "/api",
            "/apis",
            "/openapi/v2",
            "/",
        ] {
            let r = rec("GET", path);
            assert_eq!(r.verb, "other", "{path}");
            assert_eq!(r.resource, "", "{path}");
            assert_eq!(r.name, "", "{path}");
            assert_eq!(r.namespace, "", "{path}");
        }
        // Group-version discovery: no resource, but the group and version are known.
        let r = rec("GET", "/api/v1");
        assert_eq!(fields(&r), ["other", "", "v1", "", "", "", ""]);
        let r = rec("GET", "/apis/apps/v1");
        assert_eq!(fields(&r), ["other", "apps", "v1", "", "", "", ""]);
        // A group without a version is group discovery.
        let r = rec("GET", "/apis/apps");
        assert_eq!(fields(&r), ["other", "", "", "", "", "", ""]);
        assert!(!rec("POST", "/healthz").is_write());
    }

    #[test]
    fn error_choice_is_deterministic_and_round_robin() {
        let mk = |seed| {
            ActiveFaults::new(Faults {
                error_rate: 0.3,
                error_statuses: vec![500, 429],
                seed,
                ..Faults::default()
            })
        };
        let run = |a: &ActiveFaults| (0..1000).map(|_| a.draw_error()).collect::<Vec<_>>();
        let first = run(&mk(7));
        assert_eq!(first, run(&mk(7)));
        assert_ne!(first, run(&mk(8)));
        let failed: Vec<u16> = first.iter().flatten().copied().collect();
        assert!((200..400).contains(&failed.len()), "{}", failed.len());
        assert!(
            failed
                .chunks(2)
                .all(|c| c[0] == 500 && c.get(1).is_none_or(|&s| s == 429))
        );

        let always = ActiveFaults::new(Faults {
            error_rate: 1.0,
            ..Faults::default()
        });
        assert!((0..100).all(|_| always.draw_error() == Some(503)));
        let never = ActiveFaults::new(Faults::default());
        assert!((0..100).all(|_| never.draw_error().is_none()));
    }

    #[test]
    fn injected_status_body() {
        let resp = injected_response(429, Some(3));
        assert_eq!(resp.status(), 429);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "3");
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
        let resp = injected_response(500, Some(3));
        assert!(resp.headers().get(header::RETRY_AFTER).is_none());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let body = rt.block_on(resp.into_body().collect()).unwrap().to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "injected fault", "reason": "InternalError", "code": 500
            })
        );
    }

    #[test]
    fn proxy_can_be_shared_between_test_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Proxy>();
        send_sync::<Faults>();
    }

    #[test]
    fn hop_by_hop_headers_are_dropped() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-hop"),
        );
        h.insert("x-hop", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer t"));
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        strip_hop_by_hop(&mut h);
        let mut left: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        left.sort();
        assert_eq!(left, ["authorization", "content-type"]);
    }
}
