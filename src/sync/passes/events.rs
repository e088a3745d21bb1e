//! Kubernetes Events written to the host, best-effort: what a run did to
//! each federated object (and each failed probe of a KubeFedCluster), as
//! KubeFed v0.10's controllers record them (`core::events` decides which
//! and whether each is a new Event or a count bump). A failed write is a
//! warning line, never a failed run.

use crate::clients::host::Host;
use crate::core::events::correlator::{Correlated, Correlator, Write};
use crate::core::events::record::Event;
use crate::parallel::locked;
use crate::sync::run::mode::HOST_WRITES_IN_FLIGHT;
use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::Value;
use std::sync::Mutex;

/// The correlator of one process: a one-shot run's, or a watch's across
/// its rounds (repeated Events bump `count`, as a controller's do).
#[derive(Default)]
pub struct Recorder {
    correlator: Mutex<Correlator>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recorder")
    }
}

/// What writing a batch of Events did.
#[derive(Debug, Default)]
pub struct Recorded {
    /// Requests made (a POST or PATCH each; a PATCH of a vanished Event
    /// and its POST count as two).
    pub writes: usize,
    /// One line per Event not written.
    pub warnings: Vec<String>,
}

fn events_resource() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Event".into(),
        plural: "events".into(),
    }
}

fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder::default()
    }

    /// Correlates `events` and writes them to the host, at most
    /// [`HOST_WRITES_IN_FLIGHT`] at once, a batch after another: a first
    /// run over 10,000 objects records as many Events, and each batch's
    /// request bodies are built only when it is written.
    pub async fn record(&self, host: &Host, events: Vec<Event>) -> Recorded {
        let mut out = Recorded::default();
        for batch in events.chunks(EVENTS_PER_BATCH) {
            self.record_batch(host, batch, &mut out).await;
        }
        out
    }

    async fn record_batch(&self, host: &Host, events: &[Event], out: &mut Recorded) {
        let writes: Vec<Correlated> = {
            let mut c = locked(&self.correlator);
            events
                .iter()
                .filter_map(|e| c.correlate(e, now_nanos()))
                .collect()
        };
        let answers: Vec<(String, usize, Result<Value, String>)> = futures::stream::iter(writes)
            .map(|w| async move {
                let (n, answer) = write(host, &w.write).await;
                // Only what the correlator keeps: a large run holds no
                // full answers.
                let answer = answer.map(|e| {
                    serde_json::json!({"metadata": {"name": e["metadata"]["name"]},
                        "firstTimestamp": e["firstTimestamp"], "count": e["count"]})
                });
                (w.key, n, answer)
            })
            .buffer_unordered(HOST_WRITES_IN_FLIGHT)
            .collect()
            .await;
        let mut c = locked(&self.correlator);
        for (key, n, answer) in answers {
            out.writes += n;
            match answer {
                Ok(v) => c.written(&key, &v),
                Err(e) => out.warnings.push(format!("event not recorded: {e}")),
            }
        }
    }
}

/// Events correlated and written together: enough to keep every host lane
/// busy between batches.
const EVENTS_PER_BATCH: usize = 16 * HOST_WRITES_IN_FLIGHT;

/// One Event's request (and the create a PATCH falls back to on 404, as
/// client-go's `recordEvent`); returns the requests made and the answer.
async fn write(host: &Host, w: &Write) -> (usize, Result<Value, String>) {
    let (namespace, body) = match w {
        Write::Create { namespace, body }
        | Write::Patch {
            namespace, body, ..
        } => (namespace, body),
    };
    let api = crate::apply::dynamic_api(&host.client, Some(namespace), &events_resource());
    let describe = || {
        format!(
            "{} {}/{}: {}",
            body["reason"].as_str().unwrap_or_default(),
            namespace,
            body["involvedObject"]["name"].as_str().unwrap_or_default(),
            body["message"].as_str().unwrap_or_default()
        )
    };
    let mut requests = 0;
    if let Write::Patch { name, patch, .. } = w {
        requests += 1;
        match api
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
        {
            Ok(e) => return (requests, Ok(to_value(e))),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                let why = crate::apply::api_error_line(e);
                return (requests, Err(format!("{} ({why})", describe())));
            }
        }
    }
    requests += 1;
    let obj: DynamicObject = serde_json::from_value(body.clone()).expect("events are objects");
    match api.create(&PostParams::default(), &obj).await {
        Ok(e) => (requests, Ok(to_value(e))),
        Err(e) => {
            let why = crate::apply::api_error_line(e);
            (requests, Err(format!("{} ({why})", describe())))
        }
    }
}

fn to_value(o: DynamicObject) -> Value {
    serde_json::to_value(o).unwrap_or(Value::Null)
}
