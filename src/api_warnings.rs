//! What the API servers warn about, shown as kubectl shows it: one
//! `Warning: ...` line on stderr (here prefixed with the cluster it came
//! from), once per cluster and text for the life of the process, however
//! many requests draw it; every occurrence is counted for the watch's
//! `/metrics`. The header is read by [`crate::core::warning`].

use crate::core::warning::warning_texts;
use futures::future::BoxFuture;
use http::{Request, Response};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use tower::{Layer, Service};

/// Texts already shown, by cluster, and how many warnings each cluster sent.
#[derive(Default)]
struct Seen {
    shown: BTreeSet<(String, String)>,
    counts: BTreeMap<String, u64>,
}

static SEEN: Mutex<Option<Seen>> = Mutex::new(None);

/// Records one warning of `cluster`: shown the first time, counted always.
pub fn record(cluster: &str, text: &str) {
    let mut guard = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
    let seen = guard.get_or_insert_with(Seen::default);
    *seen.counts.entry(cluster.to_string()).or_default() += 1;
    if seen.shown.insert((cluster.to_string(), text.to_string())) {
        eprintln!("Warning: {cluster}: {text}");
    }
}

/// Warnings received so far, by cluster.
pub fn counts() -> BTreeMap<String, u64> {
    let guard = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
    guard.as_ref().map(|s| s.counts.clone()).unwrap_or_default()
}

/// Puts [`Warnings`] on a client's stack, naming the cluster it talks to.
#[derive(Clone, Debug)]
pub struct WarningLayer {
    cluster: Arc<str>,
}

impl WarningLayer {
    pub fn new(cluster: &str) -> WarningLayer {
        WarningLayer {
            cluster: cluster.into(),
        }
    }
}

impl<S> Layer<S> for WarningLayer {
    type Service = Warnings<S>;
    fn layer(&self, inner: S) -> Warnings<S> {
        Warnings {
            inner,
            cluster: self.cluster.clone(),
        }
    }
}

/// A service that records the `Warning` headers of every answer.
#[derive(Clone, Debug)]
pub struct Warnings<S> {
    inner: S,
    cluster: Arc<str>,
}

impl<S, ReqBody, B> Service<Request<ReqBody>> for Warnings<S>
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
        let answer = self.inner.call(request);
        let cluster = self.cluster.clone();
        Box::pin(async move {
            let response = answer.await?;
            for value in response.headers().get_all(http::header::WARNING) {
                if let Ok(value) = value.to_str() {
                    for text in warning_texts(value) {
                        record(&cluster, &text);
                    }
                }
            }
            Ok(response)
        })
    }
}
