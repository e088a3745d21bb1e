//! `/healthz`, `/readyz` and `/metrics` (Prometheus text format 0.0.4) of
//! `reconcile --watch`, on `--metrics-bind-address`. A few lines of HTTP/1.1
//! on a tokio listener: three GET paths need no web framework.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Upper bounds (seconds) of the propagation-latency histogram.
pub const LATENCY_BUCKETS: [f64; 11] =
    [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];

/// A cumulative histogram.
#[derive(Clone, Debug, Default)]
pub struct Histogram {
    counts: [u64; LATENCY_BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    pub fn observe(&mut self, value: Duration) {
        let v = value.as_secs_f64();
        for (i, bound) in LATENCY_BUCKETS.iter().enumerate() {
            if v <= *bound {
                self.counts[i] += 1;
            }
        }
        self.count += 1;
        self.sum += v;
    }
}

/// Per member: requests made, changes written.
#[derive(Clone, Debug, Default)]
pub struct MemberCounts {
    pub requests: u64,
    pub writes: u64,
    pub failures: u64,
}

/// Everything `/metrics` reports.
#[derive(Default)]
pub struct Metrics {
    pub rounds: AtomicU64,
    pub full_rounds: AtomicU64,
    pub failures: AtomicU64,
    pub queue_depth: AtomicU64,
    pub leader: AtomicBool,
    /// The first full round after taking the lead has completed.
    pub synced: AtomicBool,
    pub members: Mutex<BTreeMap<String, MemberCounts>>,
    pub latency: Mutex<Histogram>,
}

impl Metrics {
    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let counter = |out: &mut String, name: &str, help: &str, value: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        };
        counter(
            &mut out,
            "kubefedctl_reconcile_rounds_total",
            "Rounds run (full and partial).",
            self.rounds.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "kubefedctl_reconcile_full_rounds_total",
            "Full rounds (start, resync, structure changes).",
            self.full_rounds.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "kubefedctl_reconcile_errors_total",
            "Failures reported by rounds (one per failed member request or host write).",
            self.failures.load(Ordering::Relaxed),
        );
        let gauge = |out: &mut String, name: &str, help: &str, value: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
            );
        };
        gauge(
            &mut out,
            "kubefedctl_queue_depth",
            "Federated objects waiting to be re-decided.",
            self.queue_depth.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "kubefedctl_leader",
            "1 while this instance holds the federation lock.",
            u64::from(self.leader.load(Ordering::Relaxed)),
        );
        let members = self.members.lock().expect("metrics lock").clone();
        for (name, help, pick) in [
            (
                "kubefedctl_member_requests_total",
                "Requests made to a member cluster.",
                (|c: &MemberCounts| c.requests) as fn(&MemberCounts) -> u64,
            ),
            (
                "kubefedctl_member_writes_total",
                "Member objects created, updated, unlabelled or deleted.",
                |c: &MemberCounts| c.writes,
            ),
            (
                "kubefedctl_member_write_failures_total",
                "Member requests that failed after their retries.",
                |c: &MemberCounts| c.failures,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (cluster, c) in &members {
                let _ = writeln!(out, "{name}{{cluster=\"{}\"}} {}", escape(cluster), pick(c));
            }
        }
        let h = self.latency.lock().expect("metrics lock").clone();
        let name = "kubefedctl_propagation_latency_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} From the first event touching a federated object to its member writes done.\n# TYPE {name} histogram"
        );
        for (bound, count) in LATENCY_BUCKETS.iter().zip(h.counts) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(out, "{name}_sum {}", h.sum);
        let _ = writeln!(out, "{name}_count {}", h.count);
        out
    }
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Serves the three paths until the process ends. `/readyz` is ready while
/// standing by for the lock and, once leading, after the first full round.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> anyhow::Result<()> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("--metrics-bind-address {addr}: {e}"))?;
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                continue;
            };
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut read = 0;
                // Up to the end of the request head (bounded, with a timeout).
                let head = tokio::time::timeout(Duration::from_secs(5), async {
                    while read < buf.len() {
                        let n = socket.read(&mut buf[read..]).await.ok()?;
                        if n == 0 {
                            break;
                        }
                        read += n;
                        if buf[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                            break;
                        }
                    }
                    Some(())
                })
                .await;
                if !matches!(head, Ok(Some(()))) {
                    return;
                }
                let request = String::from_utf8_lossy(&buf[..read]);
                let path = request
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("")
                    .split('?')
                    .next()
                    .unwrap_or("");
                let ready = !metrics.leader.load(Ordering::Relaxed)
                    || metrics.synced.load(Ordering::Relaxed);
                let (status, content_type, body) = match path {
                    "/healthz" => ("200 OK", "text/plain", "ok\n".to_string()),
                    "/readyz" if ready => ("200 OK", "text/plain", "ok\n".to_string()),
                    "/readyz" => (
                        "503 Service Unavailable",
                        "text/plain",
                        "not synced yet\n".to_string(),
                    ),
                    "/metrics" => (
                        "200 OK",
                        "text/plain; version=0.0.4; charset=utf-8",
                        metrics.render(),
                    ),
                    _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_is_prometheus_text_and_the_histogram_cumulative() {
        let m = Metrics::default();
        m.rounds.store(3, Ordering::Relaxed);
        m.members.lock().unwrap().insert(
            "eu\"1".into(),
            MemberCounts {
                requests: 7,
                writes: 2,
                failures: 0,
            },
        );
        {
            let mut h = m.latency.lock().unwrap();
            h.observe(Duration::from_millis(30));
            h.observe(Duration::from_millis(700));
            h.observe(Duration::from_secs(400));
        }
        let text = m.render();
        assert!(text.contains("kubefedctl_reconcile_rounds_total 3\n"));
        assert!(
            text.contains("kubefedctl_member_requests_total{cluster=\"eu\\\"1\"} 7\n"),
            "{text}"
        );
        assert!(text.contains("kubefedctl_propagation_latency_seconds_bucket{le=\"0.05\"} 1\n"));
        assert!(text.contains("kubefedctl_propagation_latency_seconds_bucket{le=\"1\"} 2\n"));
        assert!(text.contains("kubefedctl_propagation_latency_seconds_bucket{le=\"300\"} 2\n"));
        assert!(text.contains("kubefedctl_propagation_latency_seconds_bucket{le=\"+Inf\"} 3\n"));
        assert!(text.contains("kubefedctl_propagation_latency_seconds_count 3\n"));
        // Every sample line: name{labels} value.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
            let bare = name.split('{').next().unwrap();
            assert!(
                bare.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{line}"
            );
        }
    }
}
