//! The one retry every client makes by itself: a server that answers 429
//! or 5xx with `Retry-After` asks to be asked again, and client-go (so
//! kubectl and KubeFed) does, up to ten times (`rest/request.go`). A 1.37
//! API server answers so while a new CRD's storage initialises (`storage
//! is (re)initializing`), an apiextensions server whose informers have not
//! synced yet answers `503 server is starting`, and a busy server sheds
//! load with 429. Nothing else is retried here: timeouts, connection
//! errors and answers without `Retry-After` reach the command, which
//! decides (`core::propagation::retry`). The rule itself is
//! [`crate::core::propagation::retry::server_asked_wait`].

use crate::core::propagation::retry::{SERVER_ASKED_RETRIES, server_asked_wait};
use futures::future::BoxFuture;
use http::{Request, Response};
use kube::client::Body;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::Mutex;
use tower::{Layer, Service, ServiceExt};

/// Puts [`RetryAfter`] on a client's service stack.
#[derive(Clone, Copy, Debug, Default)]
pub struct RetryAfterLayer;

impl<S> Layer<S> for RetryAfterLayer {
    type Service = RetryAfter<S>;
    fn layer(&self, inner: S) -> RetryAfter<S> {
        RetryAfter {
            inner: Arc::new(Mutex::new(inner)),
        }
    }
}

/// A service that repeats a request the server asked to be repeated. The
/// services below are not `Clone` (kube boxes them): they are shared, and
/// locked only while a request is handed over, never while it is answered.
#[derive(Debug)]
pub struct RetryAfter<S> {
    inner: Arc<Mutex<S>>,
}

impl<S> Clone for RetryAfter<S> {
    fn clone(&self) -> Self {
        RetryAfter {
            inner: self.inner.clone(),
        }
    }
}

impl<S, B> Service<Request<Body>> for RetryAfter<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response<B>, S::Error>>;

    /// Readiness is awaited in [`Service::call`], under the lock.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move {
            let send = |request: Request<Body>| {
                let inner = inner.clone();
                async move {
                    let mut service = inner.lock().await;
                    let answer = service.ready().await?.call(request);
                    drop(service);
                    answer.await
                }
            };
            let (parts, body) = request.into_parts();
            // A streamed body cannot be sent twice: such a request is sent once.
            let Some(copy) = body.try_clone() else {
                return send(Request::from_parts(parts, body)).await;
            };
            let mut body = Some(body);
            let mut retries = 0;
            loop {
                let this = match body.take() {
                    Some(first) => first,
                    None => copy.try_clone().unwrap_or_else(Body::empty),
                };
                let response = send(rebuild(&parts, this)).await?;
                let retry_after = response
                    .headers()
                    .get(http::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok());
                let status = response.status().as_u16();
                let Some(wait) = server_asked_wait(status, retry_after, retries) else {
                    return Ok(response);
                };
                retries += 1;
                tracing::debug!(
                    "{} {}: the server answered {status} with Retry-After; again in {wait:?} ({retries}/{SERVER_ASKED_RETRIES})",
                    parts.method,
                    parts.uri.path()
                );
                drop(response);
                tokio::time::sleep(wait).await;
            }
        })
    }
}

/// The same request again (`http::request::Parts` is not `Clone`).
fn rebuild(parts: &http::request::Parts, body: Body) -> Request<Body> {
    let mut request = Request::new(body);
    *request.method_mut() = parts.method.clone();
    *request.uri_mut() = parts.uri.clone();
    *request.version_mut() = parts.version;
    *request.headers_mut() = parts.headers.clone();
    *request.extensions_mut() = parts.extensions.clone();
    request
}
