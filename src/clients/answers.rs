//! One tower layer for the client-side observers of the traffic (the API
//! servers' warnings, the request counters): it shows each answer, or
//! that none came, to a function, and changes nothing.

use futures::future::BoxFuture;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::{Layer, Service};

/// What an observer is shown: the request's method, and the answer's
/// status and headers (`None` when no answer came).
type Observer = Arc<dyn Fn(&Method, Option<(StatusCode, &HeaderMap)>) + Send + Sync>;

/// Puts [`Answers`] on a client's stack.
#[derive(Clone)]
pub struct AnswerLayer(Observer);

impl AnswerLayer {
    pub fn new(
        observe: impl Fn(&Method, Option<(StatusCode, &HeaderMap)>) + Send + Sync + 'static,
    ) -> AnswerLayer {
        AnswerLayer(Arc::new(observe))
    }
}

impl<S> Layer<S> for AnswerLayer {
    type Service = Answers<S>;
    fn layer(&self, inner: S) -> Answers<S> {
        Answers {
            inner,
            observe: self.0.clone(),
        }
    }
}

/// A service that shows every answer to its observer once it came.
#[derive(Clone)]
pub struct Answers<S> {
    inner: S,
    observe: Observer,
}

impl<S, ReqBody, B> Service<Request<ReqBody>> for Answers<S>
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
        let method = request.method().clone();
        let answer = self.inner.call(request);
        let observe = self.observe.clone();
        Box::pin(async move {
            let result = answer.await;
            match &result {
                Ok(response) => observe(&method, Some((response.status(), response.headers()))),
                Err(_) => observe(&method, None),
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[tokio::test]
    async fn the_observer_sees_each_answer_and_each_failure() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let layer = AnswerLayer::new(move |method, answer| {
            record.lock().unwrap().push(format!(
                "{method} {}",
                answer.map_or("none".to_string(), |(status, headers)| format!(
                    "{} {}",
                    status.as_u16(),
                    headers.len()
                ))
            ));
        });
        let mut svc = layer.layer(tower::service_fn(|r: Request<()>| async move {
            match r.uri().path() {
                "/fail" => Err("connection refused"),
                _ => Ok(Response::builder()
                    .status(409)
                    .header("x-a", "1")
                    .body(())
                    .unwrap()),
            }
        }));
        let answer = svc.call(Request::put("/ok").body(()).unwrap()).await;
        assert_eq!(answer.unwrap().status(), 409, "the answer passes unchanged");
        svc.call(Request::get("/fail").body(()).unwrap())
            .await
            .unwrap_err();
        assert_eq!(*seen.lock().unwrap(), ["PUT 409 1", "GET none"]);
    }
}
