//! The fault-injecting proxy in front of a real kube-apiserver: forwarding,
//! recording, injected errors and latency, Refuse and Hang modes.
//!
//! Requests go through a small hyper + tokio-rustls client that trusts the
//! environment's CA and sends the cluster's admin token, so the tests see
//! exactly what a CLI would: statuses, bodies, refused connects, timeouts.

use anyhow::{Context, Result, anyhow};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST, HeaderMap, RETRY_AFTER};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use std::time::{Duration, Instant};
use testenv::TestEnv;
use testenv::proxy::{Faults, Mode, Proxy, RequestRecord};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

const CLUSTER: &str = "host";
const TIMEOUT: Duration = Duration::from_secs(20);

/// A status, headers and body text.
struct Answer {
    status: u16,
    headers: HeaderMap,
    body: String,
}

impl Answer {
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// HTTPS client of one proxy, authenticated as the cluster admin.
struct Client {
    rt: tokio::runtime::Runtime,
    tls: TlsConnector,
    token: String,
    port: u16,
}

/// One keep-alive connection, for requests that must share it.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
}

impl Client {
    fn new(env: &TestEnv, proxy: &Proxy) -> Client {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut env.ca_pem().as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        Client {
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
            tls: TlsConnector::from(Arc::new(config)),
            token: env.cluster(CLUSTER).admin_token.clone(),
            port: proxy.port(),
        }
    }

    /// Runs `fut` on the client's runtime, failing after `timeout`.
    fn within<T>(
        &self,
        timeout: Duration,
        what: &str,
        fut: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        self.rt
            .block_on(async { tokio::time::timeout(timeout, fut).await })
            .map_err(|_| anyhow!("{what} timed out after {timeout:?}"))?
    }

    fn connect(&self) -> Result<Conn> {
        self.within(TIMEOUT, "connect", self.open())
    }

    async fn open(&self) -> Result<Conn> {
        let tcp = TcpStream::connect(("127.0.0.1", self.port))
            .await
            .context("connecting to the proxy")?;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let tls = self.tls.connect(name, tcp).await.context("TLS handshake")?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn { sender })
    }

    fn build(&self, method: &str, path: &str, body: Option<&str>) -> Request<Full<Bytes>> {
        let content_type = if method == "PATCH" {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, format!("127.0.0.1:{}", self.port))
            .header(AUTHORIZATION, format!("Bearer {}", self.token))
            .header(CONTENT_TYPE, content_type)
            .body(Full::new(Bytes::from(body.unwrap_or("").to_string())))
            .unwrap()
    }

    /// One request on its own connection, failing after `timeout`.
    fn request_within(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        timeout: Duration,
    ) -> Result<Answer> {
        let req = self.build(method, path, body);
        self.within(timeout, &format!("{method} {path}"), async {
            let mut conn = self.open().await?;
            read_answer(conn.sender.send_request(req).await?).await
        })
    }

    fn request(&self, method: &str, path: &str, body: Option<&str>) -> Result<Answer> {
        self.request_within(method, path, body, TIMEOUT)
    }

    /// A request on an existing connection.
    fn send(&self, conn: &mut Conn, method: &str, path: &str, timeout: Duration) -> Result<Answer> {
        let req = self.build(method, path, None);
        self.within(timeout, &format!("{method} {path}"), async {
            conn.sender.ready().await?;
            read_answer(conn.sender.send_request(req).await?).await
        })
    }

    /// Starts a request and returns before its body is read, for watches.
    fn start(&self, conn: &mut Conn, path: &str) -> Result<Response<Incoming>> {
        let req = self.build("GET", path, None);
        self.within(TIMEOUT, path, async {
            conn.sender.ready().await?;
            Ok(conn.sender.send_request(req).await?)
        })
    }

    /// Reads a streaming body until `needle` shows up.
    fn read_until(&self, body: &mut Incoming, needle: &str) -> Result<String> {
        self.within(TIMEOUT, "reading the stream", async {
            let mut seen = String::new();
            while !seen.contains(needle) {
                let frame = body
                    .frame()
                    .await
                    .ok_or_else(|| anyhow!("stream ended before {needle:?}: {seen}"))??;
                if let Ok(data) = frame.into_data() {
                    seen.push_str(&String::from_utf8_lossy(&data));
                }
            }
            Ok(seen)
        })
    }
}

async fn read_answer(resp: Response<Incoming>) -> Result<Answer> {
    let (parts, body) = resp.into_parts();
    let body = body.collect().await?.to_bytes();
    Ok(Answer {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn io_error_kind(e: &anyhow::Error) -> Option<std::io::ErrorKind> {
    e.chain()
        .find_map(|c| c.downcast_ref::<std::io::Error>())
        .map(|io| io.kind())
}

/// A fresh namespace made directly on the cluster, not through any proxy.
fn namespace(env: &TestEnv, name: &str) -> String {
    let body =
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    let r = env
        .request(
            CLUSTER,
            "POST",
            "/api/v1/namespaces",
            Some(&body.to_string()),
        )
        .unwrap();
    assert_eq!(r.status, 201, "creating namespace {name}: {}", r.body);
    name.to_string()
}

fn configmap(name: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": {"k": "v"}
    })
    .to_string()
}

/// (method, verb, resource, namespace, name, status, injected) of each record.
fn summary(records: &[RequestRecord]) -> Vec<(String, String, String, String, String, u16, bool)> {
    records
        .iter()
        .map(|r| {
            (
                r.method.clone(),
                r.verb.clone(),
                r.resource.clone(),
                r.namespace.clone(),
                r.name.clone(),
                r.status,
                r.injected,
            )
        })
        .collect()
}

fn row(
    method: &str,
    verb: &str,
    resource: &str,
    namespace: &str,
    name: &str,
    status: u16,
    injected: bool,
) -> (String, String, String, String, String, u16, bool) {
    (
        method.into(),
        verb.into(),
        resource.into(),
        namespace.into(),
        name.into(),
        status,
        injected,
    )
}

#[test]
fn forwards_requests_and_records_them() {
    let env = TestEnv::shared();
    let proxy = env.proxy(CLUSTER).unwrap();
    assert_eq!(proxy.url(), format!("https://127.0.0.1:{}", proxy.port()));
    let c = Client::new(env, &proxy);
    let ns = namespace(env, "proxy-forward");
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");

    let version = c.request("GET", "/version", None).unwrap();
    assert_eq!(version.status, 200, "{}", version.body);
    assert_eq!(version.json()["gitVersion"], env.version().tag);

    let created = c.request("POST", &cms, Some(&configmap("cm1"))).unwrap();
    assert_eq!(created.status, 201, "{}", created.body);
    // The apiserver saw the admin token: the object was made by an authorized user.
    let got = c.request("GET", &format!("{cms}/cm1"), None).unwrap();
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.json()["data"]["k"], "v");
    let list = c.request("GET", &format!("{cms}?limit=10"), None).unwrap();
    assert_eq!(list.status, 200);
    assert_eq!(list.json()["items"].as_array().unwrap().len(), 1);
    let patched = c
        .request(
            "PATCH",
            &format!("{cms}/cm1"),
            Some(r#"{"data":{"k":"w"}}"#),
        )
        .unwrap();
    assert_eq!(patched.status, 200, "{}", patched.body);
    let missing = c.request("GET", &format!("{cms}/nope"), None).unwrap();
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["reason"], "NotFound");
    let deleted = c.request("DELETE", &format!("{cms}/cm1"), None).unwrap();
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    let ns_obj = c
        .request("GET", &format!("/api/v1/namespaces/{ns}"), None)
        .unwrap();
    assert_eq!(ns_obj.status, 200);

    assert_eq!(
        summary(&proxy.records()),
        vec![
            row("GET", "other", "", "", "", 200, false),
            row("POST", "create", "configmaps", &ns, "", 201, false),
            row("GET", "get", "configmaps", &ns, "cm1", 200, false),
            row("GET", "list", "configmaps", &ns, "", 200, false),
            row("PATCH", "patch", "configmaps", &ns, "cm1", 200, false),
            row("GET", "get", "configmaps", &ns, "nope", 404, false),
            row("DELETE", "delete", "configmaps", &ns, "cm1", 200, false),
            row("GET", "get", "namespaces", &ns, &ns, 200, false),
        ]
    );
    assert_eq!(proxy.records()[0].path, "/version");
    assert_eq!(proxy.records()[3].path, cms);
    assert_eq!(proxy.writes(), 3);
    assert_eq!(proxy.count(|r| r.verb == "get"), 3);
    proxy.reset_records();
    assert!(proxy.records().is_empty());
    assert_eq!(proxy.writes(), 0);

    // Without the token the apiserver, not the proxy, refuses.
    let anonymous = c.rt.block_on(async {
        let mut conn = c.open().await.unwrap();
        let req = Request::get(cms.as_str())
            .header(HOST, "127.0.0.1")
            .body(Full::new(Bytes::new()))
            .unwrap();
        read_answer(conn.sender.send_request(req).await.unwrap())
            .await
            .unwrap()
    });
    assert_eq!(anonymous.status, 403, "{}", anonymous.body);
    assert!(
        anonymous.body.contains("system:anonymous"),
        "{}",
        anonymous.body
    );
}

#[test]
fn watch_responses_stream() {
    let env = TestEnv::shared();
    let proxy = env.proxy(CLUSTER).unwrap();
    let c = Client::new(env, &proxy);
    let ns = namespace(env, "proxy-watch");
    let mut conn = c.connect().unwrap();
    let mut watch = c
        .start(
            &mut conn,
            &format!("/api/v1/namespaces/{ns}/configmaps?watch=true&timeoutSeconds=60"),
        )
        .unwrap();
    assert_eq!(watch.status(), 200);
    let records = proxy.records();
    assert_eq!(
        summary(&records),
        vec![row("GET", "watch", "configmaps", &ns, "", 200, false)]
    );

    // Events made directly on the cluster arrive while the stream stays open.
    for name in ["first", "second"] {
        let r = env
            .request(
                CLUSTER,
                "POST",
                &format!("/api/v1/namespaces/{ns}/configmaps"),
                Some(&configmap(name)),
            )
            .unwrap();
        assert_eq!(r.status, 201, "{}", r.body);
        let seen = c
            .read_until(watch.body_mut(), &format!("\"name\":\"{name}\""))
            .unwrap();
        assert!(seen.contains("\"type\":\"ADDED\""), "{seen}");
    }
}

/// A watch-list stream (`sendInitialEvents=true`, what client-go does by
/// default from 1.35) passes whole: the initial objects as ADDED events,
/// then the bookmark annotated `k8s.io/initial-events-end`, then live
/// events on the same stream. 1.20 has no watch-list and refuses the
/// parameter combination, as the server would without the proxy.
#[test]
fn watch_list_streams_and_their_bookmark_pass_through() {
    let env = TestEnv::shared();
    let proxy = env.proxy(CLUSTER).unwrap();
    let c = Client::new(env, &proxy);
    let ns = namespace(env, "proxy-watchlist");
    let post = |name: &str| {
        let r = env
            .request(
                CLUSTER,
                "POST",
                &format!("/api/v1/namespaces/{ns}/configmaps"),
                Some(&configmap(name)),
            )
            .unwrap();
        assert_eq!(r.status, 201, "{}", r.body);
    };
    post("before");
    let mut conn = c.connect().unwrap();
    let mut watch = c
        .start(
            &mut conn,
            &format!(
                "/api/v1/namespaces/{ns}/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=60"
            ),
        )
        .unwrap();
    if env.version().minor < 27 {
        assert_ne!(watch.status(), 200, "no watch-list before 1.27");
        return;
    }
    assert_eq!(watch.status(), 200);
    let initial = c
        .read_until(watch.body_mut(), "k8s.io/initial-events-end")
        .unwrap();
    assert!(
        initial.contains("\"type\":\"ADDED\"") && initial.contains("\"name\":\"before\""),
        "{initial}"
    );
    assert!(initial.contains("\"type\":\"BOOKMARK\""), "{initial}");
    post("after");
    let live = c
        .read_until(watch.body_mut(), "\"name\":\"after\"")
        .unwrap();
    assert!(live.contains("\"type\":\"ADDED\""), "{live}");
    assert_eq!(
        summary(&proxy.records()),
        vec![row("GET", "watch", "configmaps", &ns, "", 200, false)]
    );
}

#[test]
fn injected_errors_are_answered_by_the_proxy_and_not_forwarded() {
    let env = TestEnv::shared();
    let proxy = env.proxy(CLUSTER).unwrap();
    let c = Client::new(env, &proxy);
    let ns = namespace(env, "proxy-errors");
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");

    proxy.set_faults(Faults {
        error_rate: 1.0,
        retry_after_secs: Some(7),
        ..Faults::default()
    });
    let failed = c.request("POST", &cms, Some(&configmap("never"))).unwrap();
    assert_eq!(failed.status, 503);
    assert_eq!(failed.headers[CONTENT_TYPE], "application/json");
    assert_eq!(failed.headers[RETRY_AFTER], "7");
    let status = failed.json();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["apiVersion"], "v1");
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["reason"], "ServiceUnavailable");
    assert_eq!(status["message"], "injected fault");
    assert_eq!(status["code"], 503);
    let direct = env
        .request(CLUSTER, "GET", &format!("{cms}/never"), None)
        .unwrap();
    assert_eq!(
        direct.status, 404,
        "the injected create reached the apiserver"
    );
    assert_eq!(
        summary(&proxy.records()),
        vec![row("POST", "create", "configmaps", &ns, "", 503, true)]
    );
    assert_eq!(proxy.writes(), 1);

    // Statuses rotate; Retry-After only on 429 and 503.
    proxy.set_faults(Faults {
        error_rate: 1.0,
        error_statuses: vec![500, 429],
        retry_after_secs: Some(1),
        ..Faults::default()
    });
    let a = c.request("GET", &cms, None).unwrap();
    let b = c.request("GET", &cms, None).unwrap();
    let d = c.request("GET", &cms, None).unwrap();
    assert_eq!((a.status, b.status, d.status), (500, 429, 500));
    assert_eq!(a.json()["reason"], "InternalError");
    assert!(a.headers.get(RETRY_AFTER).is_none());
    assert_eq!(b.json()["reason"], "TooManyRequests");
    assert_eq!(b.headers[RETRY_AFTER], "1");

    // A partial rate fails a seeded, repeatable subset of requests.
    let pattern = |seed| {
        proxy.set_faults(Faults {
            error_rate: 0.5,
            seed,
            ..Faults::default()
        });
        (0..24)
            .map(|_| c.request("GET", "/version", None).unwrap().status)
            .collect::<Vec<_>>()
    };
    let first = pattern(42);
    assert_eq!(first, pattern(42));
    assert!(first.contains(&503) && first.contains(&200), "{first:?}");
    assert!(first.iter().all(|s| *s == 503 || *s == 200), "{first:?}");

    proxy.clear_faults();
    let created = c.request("POST", &cms, Some(&configmap("after"))).unwrap();
    assert_eq!(created.status, 201, "{}", created.body);
}

#[test]
fn only_filter_limits_faults_to_matching_requests() {
    let env = TestEnv::shared();
    let proxy = env.proxy(CLUSTER).unwrap();
    let c = Client::new(env, &proxy);
    let ns = namespace(env, "proxy-only");
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");

    proxy.set_faults(Faults {
        error_rate: 1.0,
        error_statuses: vec![500],
        only: Some(Arc::new(|r: &RequestRecord| r.method == "POST")),
        ..Faults::default()
    });
    assert_eq!(c.request("GET", &cms, None).unwrap().status, 200);
    assert_eq!(
        c.request("POST", &cms, Some(&configmap("x")))
            .unwrap()
            .status,
        500
    );
    assert_eq!(
        c.request("GET", &format!("{cms}/x"), None).unwrap().status,
        404
    );
    assert_eq!(
        summary(&proxy.records()),
        vec![
            row("GET", "list", "configmaps", &ns, "", 200, false),
            row("POST", "create", "configmaps", &ns, "", 500, true),
            row("GET", "get", "configmaps", &ns, "x", 404, false),
        ]
    );
    assert_eq!(proxy.count(|r| r.injected), 1);
}

#[test]
fn latency_delays_matching_requests() {
    let env = TestEnv::shared();
    let proxy = env.proxy(CLUSTER).unwrap();
    let c = Client::new(env, &proxy);
    let latency = Duration::from_millis(400);
    proxy.set_faults(Faults {
        latency,
        only: Some(Arc::new(|r: &RequestRecord| r.path == "/version")),
        ..Faults::default()
    });
    let start = Instant::now();
    let r = c.request("GET", "/version", None).unwrap();
    let took = start.elapsed();
    assert_eq!(r.status, 200);
    assert!(took >= latency, "took {took:?}, latency {latency:?}");
    assert_eq!(proxy.count(|r| r.status == 200 && !r.injected), 1);
    // Records carry when the request came and when it was answered.
    let rec = proxy.records().pop().unwrap();
    let (received, answered) = (rec.received.unwrap(), rec.answered.unwrap());
    assert!(received >= start, "received before it was sent");
    assert!(answered - received >= latency, "{:?}", answered - received);
}

#[test]
fn refuse_mode_closes_the_port_and_normal_reopens_it() {
    let env = TestEnv::shared();
    let proxy = env.proxy(CLUSTER).unwrap();
    let port = proxy.port();
    let c = Client::new(env, &proxy);
    let mut pooled = c.connect().unwrap();
    assert_eq!(
        c.send(&mut pooled, "GET", "/version", TIMEOUT)
            .unwrap()
            .status,
        200
    );

    proxy.set_faults(Faults {
        mode: Mode::Refuse,
        ..Faults::default()
    });
    let err = c
        .request("GET", "/version", None)
        .err()
        .expect("connect must fail");
    assert_eq!(
        io_error_kind(&err),
        Some(std::io::ErrorKind::ConnectionRefused),
        "{err:#}"
    );
    // A kept-alive connection was closed too: no answer comes through it.
    let err = c
        .send(&mut pooled, "GET", "/version", TIMEOUT)
        .err()
        .expect("the pooled connection must fail");
    assert!(!format!("{err:#}").contains("timed out"), "{err:#}");

    proxy.set_faults(Faults::default());
    assert_eq!(proxy.port(), port);
    assert_eq!(c.request("GET", "/version", None).unwrap().status, 200);
    // Back and forth again, on the same port.
    proxy.set_faults(Faults {
        mode: Mode::Refuse,
        ..Faults::default()
    });
    assert!(c.connect().is_err());
    proxy.clear_faults();
    assert_eq!(c.request("GET", "/healthz", None).unwrap().status, 200);
    assert_eq!(proxy.count(|r| r.status == 200), 3);

    drop(proxy);
    let err = c.connect().err().expect("a dropped proxy must not listen");
    assert_eq!(
        io_error_kind(&err),
        Some(std::io::ErrorKind::ConnectionRefused)
    );
}

#[test]
fn hang_mode_accepts_but_never_answers() {
    let env = TestEnv::shared();
    let proxy = env.proxy(CLUSTER).unwrap();
    let c = Client::new(env, &proxy);
    let mut pooled = c.connect().unwrap();
    assert_eq!(
        c.send(&mut pooled, "GET", "/version", TIMEOUT)
            .unwrap()
            .status,
        200
    );

    proxy.set_faults(Faults {
        mode: Mode::Hang,
        ..Faults::default()
    });
    let short = Duration::from_millis(500);
    // The TCP connect succeeds; nothing after it does.
    let tcp = std::net::TcpStream::connect(("127.0.0.1", proxy.port()));
    assert!(tcp.is_ok(), "{tcp:?}");
    let err = c
        .request_within("GET", "/version", None, short)
        .err()
        .expect("a new connection must hang");
    assert!(format!("{err:#}").contains("timed out"), "{err:#}");
    let err = c
        .send(&mut pooled, "GET", "/healthz", short)
        .err()
        .expect("an open connection must hang");
    assert!(format!("{err:#}").contains("timed out"), "{err:#}");
    // The request on the open connection reached the proxy but was never answered.
    let records = proxy.records();
    assert_eq!(records.len(), 2);
    assert_eq!(
        (records[1].path.as_str(), records[1].status),
        ("/healthz", 0)
    );

    proxy.clear_faults();
    assert_eq!(c.request("GET", "/version", None).unwrap().status, 200);
}
