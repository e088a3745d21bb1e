//! A request that got no answer, said in one plain line that names the
//! server, who it is for the user (the kubeconfig context, the member) and
//! what happened, as kubectl says `The connection to the server
//! 127.0.0.1:1 was refused`: refused, timed out after the limit, a TLS
//! failure in words (unknown authority, wrong name, expired), a name that
//! does not resolve, a connection closed. A tower layer on every client
//! turns the HTTP and TLS libraries' errors into a [`NoAnswer`] there,
//! where the server and the limits are known; the library's error stays
//! its source. Errors of kube's own layers (credentials) and answers pass
//! unchanged.

use crate::error::NoAnswer;
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use std::error::Error as StdError;
use std::io::ErrorKind;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower::{BoxError, Layer, Service};

/// The body every client layer of ours hands on.
pub type AnyBody = UnsyncBoxBody<Bytes, BoxError>;

/// Who a client talks to, and its limits, for the line.
#[derive(Clone, Debug)]
pub struct Server {
    /// `https://127.0.0.1:6443`, without a trailing `/`.
    pub url: String,
    /// Who it is to the user: `context "host"`, `cluster "member1"`.
    pub who: String,
    /// The proxy between, if any.
    pub proxy: Option<String>,
    pub connect_timeout: Option<Duration>,
    pub read_timeout: Option<Duration>,
    /// The flag that set the read timeout (`--request-timeout`), if one did.
    pub limit_flag: Option<&'static str>,
    /// Which CAs the client trusts: `the kubeconfig's certificate-authority`.
    pub trusted: String,
}

impl Server {
    /// The server of a kubeconfig `context`'s configuration.
    pub fn of_context(config: &kube::Config, context: &str) -> Server {
        Server::new(config, format!("context {context:?}"), "the kubeconfig's")
            .with_limit_flag("--request-timeout")
    }

    /// The server of member `cluster` (its KubeFedCluster).
    pub fn of_member(config: &kube::Config, cluster: &str) -> Server {
        Server::new(
            config,
            format!("cluster {cluster:?}"),
            "the KubeFedCluster's",
        )
    }

    fn new(config: &kube::Config, who: String, ca_of: &str) -> Server {
        let trusted = match (&config.root_cert, ca_of) {
            (Some(_), "the kubeconfig's") => format!("{ca_of} certificate-authority"),
            (Some(_), _) => format!("{ca_of} caBundle"),
            (None, _) => "the system's trusted CAs".to_string(),
        };
        Server {
            url: config
                .cluster_url
                .to_string()
                .trim_end_matches('/')
                .to_string(),
            who,
            proxy: config.proxy_url.as_ref().map(|p| p.to_string()),
            connect_timeout: config.connect_timeout,
            read_timeout: config.read_timeout,
            limit_flag: None,
            trusted,
        }
    }

    fn with_limit_flag(mut self, flag: &'static str) -> Server {
        self.limit_flag = Some(flag);
        self
    }

    /// `context "host"`, `context "host", --request-timeout 1s`, with the
    /// proxy when there is one.
    fn about(&self, limit: Option<Duration>) -> String {
        let mut about = self.who.clone();
        if let (Some(flag), Some(limit)) = (self.limit_flag, limit)
            && Some(limit) == self.read_timeout
        {
            about.push_str(&format!(", {flag} {}", human(limit)));
        }
        if let Some(proxy) = &self.proxy {
            about.push_str(&format!(", through the proxy {proxy}"));
        }
        about
    }

    fn host(&self) -> &str {
        let rest = self.url.split_once("://").map_or(&*self.url, |(_, r)| r);
        let authority = rest.split('/').next().unwrap_or(rest);
        match authority.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(v6),
            None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
        }
    }

    /// The line for `what` happened.
    fn line(&self, what: &What) -> String {
        let url = &self.url;
        match what {
            What::Refused => format!(
                "the connection to the server {url} was refused ({}): is it running, and are the host and port right?",
                self.about(None)
            ),
            What::ConnectTimeout => match self.connect_timeout {
                Some(limit) => format!(
                    "the connection to the server {url} timed out after {} ({})",
                    human(limit),
                    self.about(Some(limit))
                ),
                None => format!(
                    "the connection to the server {url} timed out ({})",
                    self.about(None)
                ),
            },
            What::ReadTimeout => match self.read_timeout {
                Some(limit) => format!(
                    "the server {url} did not answer within {} ({})",
                    human(limit),
                    self.about(Some(limit))
                ),
                None => format!(
                    "the server {url} did not answer in time ({})",
                    self.about(None)
                ),
            },
            What::Tls(problem) => format!(
                "TLS failure with the server {url} ({}): {}",
                self.about(None),
                problem.words(self.host(), &self.trusted)
            ),
            What::Unresolved => format!(
                "the host name of the server {url} does not resolve ({})",
                self.about(None)
            ),
            What::Closed => format!(
                "the server {url} closed the connection before answering ({})",
                self.about(None)
            ),
            What::Other(text) => format!(
                "cannot reach the server {url} ({}): {text}",
                self.about(None)
            ),
        }
    }

    /// `error`, as a [`NoAnswer`] when it says that no answer came;
    /// anything else (kube's own errors, such as credentials that cannot
    /// be read) unchanged. `other` says whether an error of the HTTP stack
    /// that fits no case is still one (a request's) or not (a body's).
    fn explain(&self, error: BoxError, other: bool) -> BoxError {
        if error.is::<kube::Error>() || error.is::<NoAnswer>() {
            return error;
        }
        match what(&*error) {
            Some(What::Other(_)) if !other => error,
            Some(what) => Box::new(NoAnswer {
                line: self.line(&what),
                source: Some(error),
            }),
            None => error,
        }
    }
}

/// What happened instead of an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
enum What {
    Refused,
    ConnectTimeout,
    ReadTimeout,
    Tls(Tls),
    Unresolved,
    Closed,
    Other(String),
}

/// A TLS failure, as much as the line says of it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Tls {
    UnknownAuthority,
    WrongName(Vec<String>),
    Expired(Option<u64>),
    NotYetValid(Option<u64>),
    PlainText,
    Alert(String),
    Other(String),
}

impl Tls {
    fn of(e: &rustls::Error) -> Tls {
        use rustls::CertificateError as C;
        match e {
            rustls::Error::InvalidCertificate(c) => match c {
                C::UnknownIssuer => Tls::UnknownAuthority,
                C::NotValidForName => Tls::WrongName(Vec::new()),
                C::NotValidForNameContext { presented, .. } => {
                    Tls::WrongName(presented.iter().map(|n| bare_name(n)).collect())
                }
                C::Expired => Tls::Expired(None),
                C::ExpiredContext { not_after, .. } => Tls::Expired(Some(not_after.as_secs())),
                C::NotValidYet => Tls::NotYetValid(None),
                C::NotValidYetContext { not_before, .. } => {
                    Tls::NotYetValid(Some(not_before.as_secs()))
                }
                other => Tls::Other(format!("its certificate is refused ({other:?})")),
            },
            rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
                Tls::PlainText
            }
            rustls::Error::AlertReceived(alert) => Tls::Alert(format!("{alert:?}")),
            other => Tls::Other(other.to_string()),
        }
    }

    fn words(&self, host: &str, trusted: &str) -> String {
        let day = |secs: &u64| {
            let t = crate::clock::rfc3339(i64::try_from(*secs).unwrap_or(i64::MAX));
            t.get(..10).unwrap_or(&t).to_string()
        };
        match self {
            Tls::UnknownAuthority => {
                format!("its certificate is signed by an unknown authority, not by {trusted}")
            }
            Tls::WrongName(names) if names.is_empty() => {
                format!("its certificate is not valid for {host}")
            }
            Tls::WrongName(names) => format!(
                "its certificate is not valid for {host}, only for {}",
                names.join(", ")
            ),
            Tls::Expired(Some(at)) => format!("its certificate expired on {}", day(at)),
            Tls::Expired(None) => "its certificate has expired".into(),
            Tls::NotYetValid(Some(at)) => {
                format!("its certificate is not valid before {}", day(at))
            }
            Tls::NotYetValid(None) => "its certificate is not valid yet".into(),
            Tls::PlainText => "it does not speak TLS (a plain http:// server?)".into(),
            Tls::Alert(alert) if alert == "CertificateRequired" => {
                "it asks for a client certificate, and none was given".into()
            }
            Tls::Alert(alert) => format!("it ended the handshake ({alert})"),
            Tls::Other(text) => text.clone(),
        }
    }
}

/// `example.com` of rustls' `DnsName("example.com")`, `10.0.0.1` of
/// `IpAddress(10.0.0.1)`; other text as it is.
fn bare_name(presented: &str) -> String {
    let inner = presented
        .split_once('(')
        .filter(|(kind, _)| kind.chars().all(|c| c.is_ascii_alphanumeric()))
        .and_then(|(_, rest)| rest.strip_suffix(')'));
    match inner {
        Some(inner) => inner.trim_matches('"').to_string(),
        None => presented.to_string(),
    }
}

/// An error and its sources, the error an `io::Error` wraps included
/// (its `source` skips it).
fn links<'a>(e: &'a (dyn StdError + 'static)) -> Vec<&'a (dyn StdError + 'static)> {
    let mut out = Vec::new();
    let mut next = Some(e);
    while let Some(link) = next {
        if out.len() > 16 {
            break;
        }
        out.push(link);
        next = match link
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn StdError + 'static)),
            None => link.source(),
        };
    }
    out
}

/// What an error of the HTTP stack says happened; `None` when it is not
/// the HTTP stack's.
fn what(e: &(dyn StdError + 'static)) -> Option<What> {
    let links = links(e);
    let http = |l: &&(dyn StdError + 'static)| {
        l.is::<hyper::Error>() || l.is::<hyper_util::client::legacy::Error>()
    };
    let connecting = links.iter().any(|l| {
        l.downcast_ref::<hyper_util::client::legacy::Error>()
            .is_some_and(|e| e.is_connect())
    });
    if let Some(tls) = links.iter().find_map(|l| l.downcast_ref::<rustls::Error>()) {
        return Some(What::Tls(Tls::of(tls)));
    }
    for link in &links {
        if let Some(io) = link.downcast_ref::<std::io::Error>() {
            match io.kind() {
                ErrorKind::ConnectionRefused => return Some(What::Refused),
                ErrorKind::TimedOut if connecting => return Some(What::ConnectTimeout),
                ErrorKind::TimedOut => return Some(What::ReadTimeout),
                ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::BrokenPipe
                | ErrorKind::UnexpectedEof
                    if !connecting =>
                {
                    return Some(What::Closed);
                }
                _ => {}
            }
        }
        if let Some(h) = link.downcast_ref::<hyper::Error>() {
            if h.is_timeout() {
                return Some(What::ReadTimeout);
            }
            if h.is_incomplete_message() || h.is_closed() {
                return Some(What::Closed);
            }
        }
    }
    if !links.iter().any(http) && !links.iter().any(|l| l.is::<std::io::Error>()) {
        return None;
    }
    if connecting && links.iter().any(|l| l.to_string().starts_with("dns error")) {
        return Some(What::Unresolved);
    }
    let innermost = links.last().map(|l| l.to_string()).unwrap_or_default();
    Some(What::Other(innermost))
}

/// `30s`, `2m`, `1m30s`, `500ms`, `1.5s`.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    if !ms.is_multiple_of(1000) {
        return format!("{}s", d.as_secs_f64());
    }
    let s = d.as_secs();
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

/// Puts [`Explained`] on a client's stack, next to kube's own layers.
#[derive(Clone, Debug)]
pub struct NoAnswerLayer(Arc<Server>);

impl NoAnswerLayer {
    pub fn new(server: Server) -> NoAnswerLayer {
        NoAnswerLayer(Arc::new(server))
    }
}

impl<S> Layer<S> for NoAnswerLayer {
    type Service = Explained<S>;
    fn layer(&self, inner: S) -> Explained<S> {
        Explained {
            inner,
            server: self.0.clone(),
        }
    }
}

/// A service whose failures to get an answer are [`NoAnswer`]s, those of
/// the answer's body too (a read that timed out half-way).
#[derive(Clone)]
pub struct Explained<S> {
    inner: S,
    server: Arc<Server>,
}

impl<S, ReqBody, B> Service<Request<ReqBody>> for Explained<S>
where
    S: Service<Request<ReqBody>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<AnyBody>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<AnyBody>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        let server = &self.server;
        self.inner
            .poll_ready(cx)
            .map_err(|e| server.explain(e.into(), true))
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let server = self.server.clone();
        let answer = self.inner.call(request);
        Box::pin(async move {
            match answer.await {
                Ok(response) => Ok(response.map(|body| {
                    body.map_err(move |e| server.explain(e.into(), false))
                        .boxed_unsync()
                })),
                Err(e) => Err(server.explain(e.into(), true)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(read: u64, flag: bool) -> Server {
        Server {
            url: "https://127.0.0.1:6443".into(),
            who: "context \"host\"".into(),
            proxy: None,
            connect_timeout: Some(Duration::from_secs(read.min(10))),
            read_timeout: Some(Duration::from_secs(read)),
            limit_flag: flag.then_some("--request-timeout"),
            trusted: "the kubeconfig's certificate-authority".into(),
        }
    }

    /// The error hyper-util's client gives for a failed connect.
    async fn connect_error(cause: std::io::Error) -> BoxError {
        use hyper_util::client::legacy::Client;
        use hyper_util::rt::TokioExecutor;
        let (kind, text) = (cause.kind(), cause.to_string());
        let connector = tower::service_fn(move |_: http::Uri| {
            let e = std::io::Error::new(kind, text.clone());
            std::future::ready(Err::<hyper_util::rt::TokioIo<tokio::net::TcpStream>, _>(e))
        });
        let client: Client<_, http_body_util::Empty<Bytes>> =
            Client::builder(TokioExecutor::new()).build(connector);
        let request = Request::get("http://127.0.0.1:1/").body(Default::default());
        Box::new(client.request(request.unwrap()).await.unwrap_err())
    }

    #[tokio::test]
    async fn refused_and_timed_out_connections_name_the_server_and_the_limit() {
        let refused = connect_error(ErrorKind::ConnectionRefused.into()).await;
        assert!(refused.to_string().contains("client error (Connect)"));
        let line = server(30, true).explain(refused, true).to_string();
        assert_eq!(
            line,
            "the connection to the server https://127.0.0.1:6443 was refused (context \"host\"): is it running, and are the host and port right?"
        );
        let slow = connect_error(ErrorKind::TimedOut.into()).await;
        assert_eq!(
            server(1, true).explain(slow, true).to_string(),
            "the connection to the server https://127.0.0.1:6443 timed out after 1s (context \"host\", --request-timeout 1s)"
        );
        // A connect limit that is not the flag's is not said to be.
        let slow = connect_error(ErrorKind::TimedOut.into()).await;
        assert_eq!(
            server(30, true).explain(slow, true).to_string(),
            "the connection to the server https://127.0.0.1:6443 timed out after 10s (context \"host\")"
        );
    }

    #[test]
    fn a_read_that_timed_out_names_the_flag_that_set_the_limit() {
        let read = Box::new(std::io::Error::from(ErrorKind::TimedOut));
        let line = server(1, true).explain(read, true).to_string();
        assert_eq!(
            line,
            "the server https://127.0.0.1:6443 did not answer within 1s (context \"host\", --request-timeout 1s)"
        );
        let read = Box::new(std::io::Error::from(ErrorKind::TimedOut));
        let mut member = server(10, false);
        member.who = "cluster \"m1\"".into();
        assert_eq!(
            member.explain(read, true).to_string(),
            "the server https://127.0.0.1:6443 did not answer within 10s (cluster \"m1\")"
        );
    }

    #[test]
    fn tls_failures_say_what_is_wrong_with_the_certificate() {
        use rustls::CertificateError as C;
        let tls = |e: rustls::Error| -> BoxError {
            Box::new(std::io::Error::new(ErrorKind::InvalidData, e))
        };
        let s = server(30, true);
        let line = |e| s.explain(tls(e), true).to_string();
        assert_eq!(
            line(rustls::Error::InvalidCertificate(C::UnknownIssuer)),
            "TLS failure with the server https://127.0.0.1:6443 (context \"host\"): its certificate is signed by an unknown authority, not by the kubeconfig's certificate-authority"
        );
        let wrong = C::NotValidForNameContext {
            expected: rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap(),
            presented: vec!["DnsName(\"example.invalid\")".into()],
        };
        let text = line(rustls::Error::InvalidCertificate(wrong));
        assert!(
            text.ends_with("its certificate is not valid for 127.0.0.1, only for example.invalid"),
            "{text}"
        );
        assert_eq!(bare_name("IpAddress(10.0.0.1)"), "10.0.0.1");
        assert_eq!(bare_name("*.example.com"), "*.example.com");
        let expired = C::ExpiredContext {
            time: rustls::pki_types::UnixTime::since_unix_epoch(Duration::from_secs(1_800_000_000)),
            not_after: rustls::pki_types::UnixTime::since_unix_epoch(Duration::from_secs(
                1_583_280_000,
            )),
        };
        assert!(
            line(rustls::Error::InvalidCertificate(expired))
                .ends_with("its certificate expired on 2020-03-04")
        );
        let plain = rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType);
        assert!(line(plain).ends_with("it does not speak TLS (a plain http:// server?)"));
        for text in [
            line(rustls::Error::InvalidCertificate(C::UnknownIssuer)),
            line(rustls::Error::InvalidCertificate(C::Expired)),
        ] {
            for library in [
                "rustls",
                "invalid peer certificate",
                "ServiceError",
                "hyper",
            ] {
                assert!(!text.contains(library), "{text}");
            }
        }
    }

    #[test]
    fn errors_that_are_not_about_the_server_pass_unchanged() {
        let s = server(30, true);
        // kube's own layers (credentials) and anything else.
        let auth: BoxError = Box::new(kube::Error::LinesCodecMaxLineLengthExceeded);
        assert!(s.explain(auth, true).is::<kube::Error>());
        let other: BoxError = "something else".into();
        assert_eq!(s.explain(other, true).to_string(), "something else");
        // A body's error that fits no case stays the body's.
        let odd: BoxError = Box::new(std::io::Error::other("decompression failed"));
        assert!(s.explain(odd, false).is::<std::io::Error>());
    }

    #[test]
    fn the_host_of_the_url_is_named_in_a_name_mismatch() {
        let mut s = server(30, true);
        assert_eq!(s.host(), "127.0.0.1");
        s.url = "https://[::1]:6443".into();
        assert_eq!(s.host(), "::1");
        s.url = "https://api.example.com/prefix".into();
        assert_eq!(s.host(), "api.example.com");
    }

    #[test]
    fn durations_read_as_flags_are_written() {
        assert_eq!(human(Duration::from_secs(30)), "30s");
        assert_eq!(human(Duration::from_secs(120)), "2m");
        assert_eq!(human(Duration::from_secs(90)), "1m30s");
        assert_eq!(human(Duration::from_millis(500)), "500ms");
        assert_eq!(human(Duration::from_millis(1500)), "1.5s");
        assert_eq!(human(Duration::from_secs(86400)), "24h");
    }
}
