//! What the API servers warn about, shown as kubectl shows it: one
//! `Warning: ...` line on stderr (here prefixed with the cluster it came
//! from), once per cluster and text for the life of the process, however
//! many requests draw it; every occurrence is counted for the watch's
//! `/metrics`. The header is read by [`crate::core::warning`].

use crate::clients::answers::AnswerLayer;
use crate::core::warning::warning_texts;
use crate::parallel::locked;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// Texts already shown, by cluster, and how many warnings each cluster sent.
#[derive(Default)]
struct Seen {
    shown: BTreeSet<(String, String)>,
    counts: BTreeMap<String, u64>,
}

static SEEN: Mutex<Option<Seen>> = Mutex::new(None);

/// The target of the servers' warnings: logged at `warn` (a collector of
/// JSON logs files them with the tool's own warnings), printed in text as
/// kubectl prints them (`Warning: ...`, no `warning: ` before it).
pub const TARGET: &str = "kubefedctl::server_warning";

/// Records one warning of `cluster`: shown the first time, counted always.
pub fn record(cluster: &str, text: &str) {
    let mut guard = locked(&SEEN);
    let seen = guard.get_or_insert_with(Seen::default);
    *seen.counts.entry(cluster.to_string()).or_default() += 1;
    if seen.shown.insert((cluster.to_string(), text.to_string())) {
        tracing::warn!(target: TARGET, "Warning: {cluster}: {text}");
    }
}

/// Warnings received so far, by cluster.
pub fn counts() -> BTreeMap<String, u64> {
    let guard = locked(&SEEN);
    guard.as_ref().map(|s| s.counts.clone()).unwrap_or_default()
}

/// A layer recording the `Warning` headers of every answer (an
/// [`AnswerLayer`]), naming the cluster it talks to.
pub fn layer(cluster: &str) -> AnswerLayer {
    let cluster = cluster.to_string();
    AnswerLayer::new(move |_, answer| {
        let Some((_, headers)) = answer else {
            return;
        };
        for value in headers.get_all(http::header::WARNING) {
            if let Ok(value) = value.to_str() {
                for text in warning_texts(value) {
                    record(&cluster, &text);
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Request, Response};
    use tower::{Layer, Service};

    #[tokio::test]
    async fn every_warning_of_an_answer_is_counted_for_its_cluster() {
        let cluster = "api-warnings-test";
        let mut svc = layer(cluster).layer(tower::service_fn(|_: Request<()>| async {
            Ok::<_, std::convert::Infallible>(
                Response::builder()
                    .header("warning", "299 - \"v1 Endpoints is deprecated\"")
                    .header("warning", "299 - \"unknown field \\\"x\\\"\"")
                    .body(())
                    .unwrap(),
            )
        }));
        for _ in 0..2 {
            svc.call(Request::get("/").body(()).unwrap()).await.unwrap();
        }
        assert_eq!(counts().get(cluster), Some(&4));
    }
}
