//! Every request, logged as kubectl logs it at `-v 6`: one line with the
//! method, the URL with its query, the answer's status and the time it
//! took (`GET https://127.0.0.1:6443/api/v1/namespaces/x 404 Not Found in
//! 3 milliseconds`), for the host's clients and each member's, each attempt
//! its own line. At `-v 8` the bodies sent and received follow
//! (`Request Body: …`, `Response Body: …`, cut at 1,024 characters; whole
//! at `-v 9`). Headers are never logged (the bearer token is one), and
//! neither is Secret data: a body to or from a path about Secrets or tokens
//! (`secrets`, `federatedsecrets`, a service account's `token`,
//! `tokenreviews`) is left out, and in any other body the `data` and
//! `stringData` of a Secret and every `token` field are masked. A watch's
//! body is a stream, not shown. Which lines show is the log filter's
//! (`terminal::logging`): these are events of [`TARGET`] and [`BODY_TARGET`].

use crate::clients::no_answer::AnyBody;
use futures::FutureExt;
use futures::future::BoxFuture;
use http::{Request, Response};
use http_body_util::BodyExt;
use kube::client::Body;
use serde_json::Value;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tower::{BoxError, Layer, Service};

/// The target of the request lines (`-v 6`).
pub const TARGET: &str = "kubefedctl::request";
/// The target of the body lines (`-v 8`).
pub const BODY_TARGET: &str = "kubefedctl::request::body";
/// The target that shows bodies whole (`-v 9`).
pub const FULL_BODY_TARGET: &str = "kubefedctl::request::body::full";

/// Bodies are cut at this many characters below `-v 9`, as kubectl's.
const BODY_LIMIT: usize = 1024;

/// The request line: `GET https://h/api/v1/x?limit=1 200 OK in 3 milliseconds`.
pub fn request_line(
    method: &http::Method,
    url: &str,
    status: http::StatusCode,
    ms: u128,
) -> String {
    let reason = status.canonical_reason().unwrap_or("");
    format!(
        "{method} {url} {} {reason} in {ms} milliseconds",
        status.as_u16()
    )
    .replace("  in ", " in ")
}

/// Whether a path is about Secrets or tokens: its bodies are never shown.
pub fn path_hides_bodies(path: &str) -> bool {
    path.split('/').any(|segment| {
        let s = segment.to_ascii_lowercase();
        s.contains("secret") || s.contains("token")
    })
}

/// A watch (`?watch=true`, `/watch/` paths): its body is a stream.
fn is_watch(uri: &http::Uri) -> bool {
    uri.path().contains("/watch/")
        || uri.query().is_some_and(|q| {
            q.split('&').any(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                k == "watch" && !(v.is_empty() || v == "0" || v.eq_ignore_ascii_case("false"))
            })
        })
}

/// What may be shown of a body sent to or received from `path`, cut at
/// `limit` characters when one is given.
pub fn shown_body(path: &str, body: &[u8], limit: Option<usize>) -> String {
    if path_hides_bodies(path) {
        return format!("<{} bytes not shown: Secret or token data>", body.len());
    }
    let text = match serde_json::from_slice::<Value>(body) {
        Ok(mut value) => {
            mask(&mut value);
            value.to_string()
        }
        Err(_) => String::from_utf8_lossy(body).trim_end().to_string(),
    };
    match limit {
        Some(limit) if text.chars().count() > limit => {
            let cut: String = text.chars().take(limit).collect();
            format!("{cut} [truncated {} chars]", text.chars().count() - limit)
        }
        _ => text,
    }
}

/// Masks Secret data and tokens wherever they are in a JSON value.
fn mask(value: &mut Value) {
    const HIDDEN: &str = "***";
    match value {
        Value::Object(map) => {
            let secret = map.get("kind").and_then(Value::as_str) == Some("Secret");
            for (key, v) in map.iter_mut() {
                let key = key.to_ascii_lowercase();
                let hidden = (secret && (key == "data" || key == "stringdata"))
                    || (key.ends_with("token") && !v.is_null() && !v.is_boolean());
                if hidden {
                    *v = Value::String(HIDDEN.into());
                } else {
                    mask(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask),
        _ => {}
    }
}

/// Puts [`Logged`] on a client's stack, above [`crate::clients::no_answer`].
#[derive(Clone, Debug)]
pub struct RequestLogLayer(Arc<str>);

impl RequestLogLayer {
    /// Requests to the server at `url` (`https://127.0.0.1:6443`), whose
    /// paths the URLs logged are completed with.
    pub fn new(url: &str) -> RequestLogLayer {
        RequestLogLayer(Arc::from(url.trim_end_matches('/')))
    }
}

impl<S> Layer<S> for RequestLogLayer {
    type Service = Logged<S>;
    fn layer(&self, inner: S) -> Logged<S> {
        Logged {
            inner,
            server: self.0.clone(),
        }
    }
}

/// A service that logs each request it passes on, and its answer.
#[derive(Clone)]
pub struct Logged<S> {
    inner: S,
    server: Arc<str>,
}

impl<S> Service<Request<Body>> for Logged<S>
where
    S: Service<Request<Body>, Response = Response<AnyBody>, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<AnyBody>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<AnyBody>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        if !tracing::enabled!(target: TARGET, tracing::Level::DEBUG) {
            return Box::pin(self.inner.call(request));
        }
        let bodies = tracing::enabled!(target: BODY_TARGET, tracing::Level::DEBUG);
        let limit = (!tracing::enabled!(target: FULL_BODY_TARGET, tracing::Level::DEBUG))
            .then_some(BODY_LIMIT);
        let method = request.method().clone();
        let uri = request.uri().clone();
        let path = uri.path().to_string();
        let url = format!(
            "{}{}",
            self.server,
            uri.path_and_query()
                .map_or("", |p| p.as_str().trim_end_matches('?'))
        );
        if bodies && let Some(sent) = sent_body(request.body()) {
            tracing::debug!(target: BODY_TARGET, "Request Body: {}", shown_body(&path, &sent, limit));
        }
        let started = Instant::now();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let result = answer.await;
            let ms = started.elapsed().as_millis();
            let response = match result {
                Ok(response) => response,
                Err(e) => {
                    tracing::debug!(target: TARGET, "{method} {url} failed in {ms} milliseconds");
                    return Err(e);
                }
            };
            tracing::debug!(target: TARGET, "{}", request_line(&method, &url, response.status(), ms));
            if !bodies || is_watch(&uri) {
                return Ok(response);
            }
            let (parts, body) = response.into_parts();
            let received = body.collect().await?.to_bytes();
            tracing::debug!(target: BODY_TARGET, "Response Body: {}", shown_body(&path, &received, limit));
            let body = http_body_util::Full::new(received)
                .map_err(|never| match never {})
                .boxed_unsync();
            Ok(Response::from_parts(parts, body))
        })
    }
}

/// A request's body when it is held whole (kube's are, but for streams).
fn sent_body(body: &Body) -> Option<bytes::Bytes> {
    let copy = body.try_clone()?;
    let collected = copy.collect().now_or_never()?.ok()?;
    let bytes = collected.to_bytes();
    (!bytes.is_empty()).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Method, StatusCode};
    use serde_json::json;

    #[test]
    fn a_request_line_is_kubectls() {
        assert_eq!(
            request_line(
                &Method::GET,
                "https://127.0.0.1:6443/api/v1/namespaces/x",
                StatusCode::NOT_FOUND,
                3
            ),
            "GET https://127.0.0.1:6443/api/v1/namespaces/x 404 Not Found in 3 milliseconds"
        );
        assert_eq!(
            request_line(
                &Method::PUT,
                "https://h/apis/a/v1/x?fieldManager=kubefedctl",
                StatusCode::OK,
                12
            ),
            "PUT https://h/apis/a/v1/x?fieldManager=kubefedctl 200 OK in 12 milliseconds"
        );
        let unknown = StatusCode::from_u16(599).unwrap();
        assert_eq!(
            request_line(&Method::GET, "https://h/x", unknown, 1),
            "GET https://h/x 599 in 1 milliseconds"
        );
    }

    #[test]
    fn secret_and_token_bodies_are_never_shown() {
        let secret = br#"{"kind":"Secret","data":{"token":"c2VjcmV0"}}"#;
        for path in [
            "/api/v1/namespaces/kube-federation-system/secrets/m1-abc",
            "/api/v1/namespaces/ns/secrets",
            "/apis/types.kubefed.io/v1beta1/namespaces/ns/federatedsecrets/s",
            "/api/v1/namespaces/ns/serviceaccounts/m1/token",
            "/apis/authentication.k8s.io/v1/tokenreviews",
        ] {
            let shown = shown_body(path, secret, None);
            assert!(!shown.contains("c2VjcmV0"), "{path}: {shown}");
            assert!(shown.contains("not shown"), "{path}: {shown}");
        }
        // Elsewhere, a Secret's data and any token are masked.
        let list = json!({"kind": "List", "items": [
            {"kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "c2VjcmV0"},
             "stringData": {"p": "plain-secret"}},
            {"kind": "ConfigMap", "data": {"k": "visible"}},
            {"status": {"token": "eyJhbGciOi"}, "spec": {"bearerToken": "abc123"}},
            {"kind": "ServiceAccount", "automountServiceAccountToken": false}
        ]});
        let shown = shown_body(
            "/api/v1/namespaces/ns/configmaps",
            list.to_string().as_bytes(),
            None,
        );
        for hidden in ["c2VjcmV0", "plain-secret", "eyJhbGciOi", "abc123"] {
            assert!(!shown.contains(hidden), "{hidden} in {shown}");
        }
        assert!(shown.contains("visible"), "{shown}");
        assert!(shown.contains(r#""name":"s""#), "{shown}");
        assert!(
            shown.contains(r#""automountServiceAccountToken":false"#),
            "{shown}"
        );
    }

    #[test]
    fn long_bodies_are_cut_and_plain_text_shown_as_is() {
        let big = json!({"data": {"k": "x".repeat(3000)}}).to_string();
        let shown = shown_body("/api/v1/configmaps", big.as_bytes(), Some(BODY_LIMIT));
        assert!(shown.starts_with(r#"{"data":{"k":"xxx"#), "{shown}");
        assert!(shown.ends_with(&format!(" [truncated {} chars]", big.len() - BODY_LIMIT)));
        assert_eq!(shown_body("/api/v1/configmaps", big.as_bytes(), None), big);
        assert_eq!(shown_body("/healthz", b"ok\n", Some(BODY_LIMIT)), "ok");
    }

    #[test]
    fn watches_are_told_from_lists() {
        let uri = |s: &str| s.parse::<http::Uri>().unwrap();
        assert!(is_watch(&uri(
            "/api/v1/configmaps?watch=true&resourceVersion=1"
        )));
        assert!(is_watch(&uri("/api/v1/watch/configmaps")));
        assert!(!is_watch(&uri("/api/v1/configmaps?watch=false")));
        assert!(!is_watch(&uri("/api/v1/configmaps?limit=500")));
    }
}
