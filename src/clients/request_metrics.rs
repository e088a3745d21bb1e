//! Every request this process sends to an API server, counted as
//! client-go counts them for `rest_client_requests_total{code,host,method}`
//! (the series KubeFed's controller-manager serves, so that its dashboards
//! keep working on `reconcile --watch`): one count per attempt, by the
//! server's `host:port`, the HTTP method and the status code, `<error>`
//! when no answer came.

use crate::clients::answers::AnswerLayer;
use crate::parallel::locked;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// (code, host, method) → requests.
type Counts = BTreeMap<(String, String, String), u64>;

static COUNTS: Mutex<Counts> = Mutex::new(BTreeMap::new());

fn record(code: String, host: &str, method: &str) {
    let mut counts = locked(&COUNTS);
    *counts
        .entry((code, host.to_string(), method.to_string()))
        .or_default() += 1;
}

/// Requests so far, by (code, host, method).
pub fn counts() -> Counts {
    locked(&COUNTS).clone()
}

/// The `host` label of a server URL: its authority (`127.0.0.1:6443`).
pub fn host_label(url: &http::Uri) -> String {
    url.authority().map(|a| a.to_string()).unwrap_or_default()
}

/// A layer counting each answer of the server at `url` (an
/// [`AnswerLayer`]). Placed under the retry layer, so that each attempt
/// counts, as in client-go.
pub fn layer(url: &http::Uri) -> AnswerLayer {
    let host = host_label(url);
    AnswerLayer::new(move |method, answer| {
        let code = answer.map_or("<error>".to_string(), |(status, _)| {
            status.as_u16().to_string()
        });
        record(code, &host, method.as_str());
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Request, Response};
    use tower::{Layer, Service};

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
        let mut svc = layer(&url).layer(answers);
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
