//! Every request this process sends to an API server, counted as
//! client-go counts them for `rest_client_requests_total{code,host,method}`
//! (the series KubeFed's controller-manager serves, so that its dashboards
//! keep working on `reconcile --watch`): one count per attempt, by the
//! server's `host:port`, the HTTP method and the status code, `<error>`
//! when no answer came.

use futures::future::BoxFuture;
use http::{Request, Response};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use tower::{Layer, Service};

/// (code, host, method) → requests.
type Counts = BTreeMap<(String, String, String), u64>;

static COUNTS: Mutex<Counts> = Mutex::new(BTreeMap::new());

fn record(code: String, host: &str, method: &str) {
    let mut counts = COUNTS.lock().unwrap_or_else(PoisonError::into_inner);
    *counts
        .entry((code, host.to_string(), method.to_string()))
        .or_default() += 1;
}

/// Requests so far, by (code, host, method).
pub fn counts() -> Counts {
    COUNTS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// The `host` label of a server URL: its authority (`127.0.0.1:6443`).
pub fn host_label(url: &http::Uri) -> String {
    url.authority().map(|a| a.to_string()).unwrap_or_default()
}

/// Puts [`Requests`] on a client's stack for the server at `host`. Placed
/// under the retry layer, so that each attempt counts, as in client-go.
#[derive(Clone, Debug)]
pub struct RequestMetricsLayer {
    host: Arc<str>,
}

impl RequestMetricsLayer {
    pub fn new(url: &http::Uri) -> RequestMetricsLayer {
        RequestMetricsLayer {
            host: host_label(url).into(),
        }
    }
}

impl<S> Layer<S> for RequestMetricsLayer {
    type Service = Requests<S>;
    fn layer(&self, inner: S) -> Requests<S> {
        Requests {
            inner,
            host: self.host.clone(),
        }
    }
}

/// A service that counts each request once it is answered (or failed).
#[derive(Clone, Debug)]
pub struct Requests<S> {
    inner: S,
    host: Arc<str>,
}

impl<S, ReqBody, B> Service<Request<ReqBody>> for Requests<S>
where
    S: Service<Request<ReqBody>, Response = Response<B>>,
    S::Future: Send + 'static,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response<B>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let method = request.method().as_str().to_string();
        let answer = self.inner.call(request);
        let host = self.host.clone();
        Box::pin(async move {
            let result = answer.await;
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            record(code, &host, &method);
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_label_is_the_servers_authority() {
        let url: http::Uri = "https://127.0.0.1:6443/some/path".parse().unwrap();
        assert_eq!(host_label(&url), "127.0.0.1:6443");
        let url: http::Uri = "https://kubernetes.default.svc".parse().unwrap();
        assert_eq!(host_label(&url), "kubernetes.default.svc");
    }

    #[tokio::test]
    async fn each_answer_and_each_failure_is_counted_by_code_host_and_method() {
        let url: http::Uri = "https://10.9.8.7:6443".parse().unwrap();
        let answers = tower::service_fn(|r: Request<()>| async move {
            match r.uri().path() {
                "/fail" => Err("connection refused"),
                "/missing" => Ok(Response::builder().status(404).body(()).unwrap()),
                _ => Ok(Response::new(())),
            }
        });
        let mut svc = RequestMetricsLayer::new(&url).layer(answers);
        let get = |p: &str| Request::get(p).body(()).unwrap();
        svc.call(get("/ok")).await.unwrap();
        svc.call(get("/ok")).await.unwrap();
        svc.call(get("/missing")).await.unwrap();
        svc.call(get("/fail")).await.unwrap_err();
        svc.call(Request::put("/ok").body(()).unwrap())
            .await
            .unwrap();
        let mine: BTreeMap<_, _> = counts()
            .into_iter()
            .filter(|((_, h, _), _)| h == "10.9.8.7:6443")
            .map(|((c, _, m), n)| (format!("{c} {m}"), n))
            .collect();
        let want: BTreeMap<String, u64> = [
            ("200 GET".to_string(), 2),
            ("404 GET".to_string(), 1),
            ("<error> GET".to_string(), 1),
            ("200 PUT".to_string(), 1),
        ]
        .into();
        assert_eq!(mine, want);
    }
}
