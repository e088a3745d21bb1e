//! `/healthz`, `/readyz` and `/metrics` (Prometheus text format 0.0.4) of
//! `reconcile --watch`, on `--metrics-bind-address`. A few lines of HTTP/1.1
//! on a tokio listener: three GET paths need no web framework.

use crate::parallel::locked;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Upper bounds (seconds) of the propagation-latency histogram.
pub const LATENCY_BUCKETS: [f64; 11] =
    [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];

/// Upper bounds of KubeFed's duration histograms (`pkg/metrics/metrics.go`,
/// `cluster_health_status_duration_seconds` and the others).
pub const UPSTREAM_BUCKETS: [f64; 21] = [
    0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 7.5, 10.0, 12.5, 15.0, 17.5, 20.0, 22.5, 25.0, 27.5, 30.0,
    50.0, 75.0, 100.0, 1000.0,
];

/// Upper bounds of controller-runtime's `controller_runtime_reconcile_time_seconds`.
pub const RECONCILE_TIME_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// A cumulative histogram over fixed upper bounds.
#[derive(Clone, Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    count: u64,
    sum: f64,
}

impl Default for Histogram {
    /// The propagation-latency histogram's bounds.
    fn default() -> Histogram {
        Histogram::with_bounds(&LATENCY_BUCKETS)
    }
}

impl Histogram {
    pub fn with_bounds(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len()],
            count: 0,
            sum: 0.0,
        }
    }

    pub fn observe(&mut self, value: Duration) {
        let v = value.as_secs_f64();
        for (i, bound) in self.bounds.iter().enumerate() {
            if v <= *bound {
                self.counts[i] += 1;
            }
        }
        self.count += 1;
        self.sum += v;
    }

    /// Its exposition as `name` (with `labels`, e.g. `controller="sync"`).
    fn render(&self, out: &mut String, name: &str, help: &str, labels: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        self.render_samples(out, name, labels);
    }

    /// Its samples alone, one series of a family with several.
    fn render_samples(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (bound, count) in self.bounds.iter().zip(&self.counts) {
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}",
            self.count
        );
        let braces = |l: &str| {
            if l.is_empty() {
                String::new()
            } else {
                format!("{{{l}}}")
            }
        };
        let _ = writeln!(out, "{name}_sum{} {}", braces(labels), self.sum);
        let _ = writeln!(out, "{name}_count{} {}", braces(labels), self.count);
    }
}

/// A histogram with KubeFed's duration bounds.
pub struct UpstreamHistogram(pub Mutex<Histogram>);

impl Default for UpstreamHistogram {
    fn default() -> UpstreamHistogram {
        UpstreamHistogram(Mutex::new(Histogram::with_bounds(&UPSTREAM_BUCKETS)))
    }
}

/// A histogram with controller-runtime's reconcile-time bounds.
pub struct ReconcileTimeHistogram(pub Mutex<Histogram>);

impl Default for ReconcileTimeHistogram {
    fn default() -> ReconcileTimeHistogram {
        ReconcileTimeHistogram(Mutex::new(Histogram::with_bounds(&RECONCILE_TIME_BUCKETS)))
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
    /// Every watch by its name (`host: FederatedConfigMap`): restarts, and
    /// since when it is down.
    pub watches: Mutex<BTreeMap<String, WatchState>>,
    /// Set while the federation lock is not renewed (no writes).
    pub lock_suspended_since: Mutex<Option<Instant>>,
    /// When the control loop last turned (it turns at least every second).
    pub heartbeat: Mutex<Option<Instant>>,
    /// Rounds running now.
    pub rounds_in_flight: AtomicU64,
    /// Each member's state as upstream's `kubefedcluster_total` names it
    /// (`ready`, `notready`, `offline`).
    pub cluster_states: Mutex<BTreeMap<String, &'static str>>,
    /// Federated objects decided by rounds, and those that failed.
    pub objects_reconciled: AtomicU64,
    pub objects_failed: AtomicU64,
    /// Each probe of every member (upstream's `cluster_health_status_duration_seconds`).
    pub health_check_time: UpstreamHistogram,
    /// Each round (`controller_runtime_reconcile_time_seconds{controller="sync"}`).
    pub round_time: ReconcileTimeHistogram,
    /// Each round again, with KubeFed's own bounds: its
    /// `reconcile_federated_resources_duration_seconds` and
    /// `controller_runtime_reconcile_duration_seconds{controller="sync"}`.
    pub round_time_upstream: UpstreamHistogram,
    /// Each member write by KubeFed's action name (`create`, `update`,
    /// `delete`): its `dispatch_operation_duration_seconds`.
    pub dispatch_time: Mutex<BTreeMap<&'static str, Histogram>>,
    /// Each member client built (its Secret read included): KubeFed's
    /// `cluster_client_connection_duration_seconds`.
    pub client_connection_time: UpstreamHistogram,
    /// Rounds allowed at once (`controller_runtime_max_concurrent_reconciles`).
    pub max_rounds: AtomicU64,
}

impl Metrics {
    /// A member write done, as KubeFed's dispatcher names it; an unlabelled
    /// (orphaned) object is not one of its three actions.
    pub fn member_write(&self, effect: &crate::core::propagation::record::Effect, took: Duration) {
        use crate::core::propagation::record::Effect;
        let action = match effect {
            Effect::Created => "create",
            Effect::Updated => "update",
            Effect::Deleted { .. } => "delete",
            Effect::Unlabelled => return,
        };
        locked(&self.dispatch_time)
            .entry(action)
            .or_insert_with(|| Histogram::with_bounds(&UPSTREAM_BUCKETS))
            .observe(took);
    }
}

/// One watch's health.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchState {
    pub restarts: u64,
    /// Failed and not listed again since.
    pub down_since: Option<Instant>,
}

/// A control loop that has not turned for this long is wedged: `/healthz`
/// fails so that a kubelet restarts it.
pub const WEDGED_AFTER: Duration = Duration::from_secs(60);

impl Metrics {
    /// A watch starts over; `down`: after a failure (not a plain 410 re-list).
    pub fn watch_restarted(&self, label: &str, down: bool) {
        let mut w = locked(&self.watches);
        let e = w.entry(label.to_string()).or_default();
        e.restarts += 1;
        if down && e.down_since.is_none() {
            e.down_since = Some(Instant::now());
        }
    }

    /// A watch has listed: it is up.
    pub fn watch_listed(&self, label: &str) {
        let mut w = locked(&self.watches);
        w.entry(label.to_string()).or_default().down_since = None;
    }

    /// A watch was stopped on purpose (its type disabled, its member gone):
    /// not down. Its restarts keep counting if it comes back.
    pub fn watch_stopped(&self, label: &str) {
        if let Some(e) = locked(&self.watches).get_mut(label) {
            e.down_since = None;
        }
    }

    /// The control loop turned.
    pub fn beat(&self) {
        *locked(&self.heartbeat) = Some(Instant::now());
    }

    /// `/readyz`: `Ok` while standing by, or leading and synced with every
    /// watch up and the lock renewed; otherwise one line per reason.
    pub fn readiness(&self, now: Instant) -> Result<(), Vec<String>> {
        if !self.leader.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut why = Vec::new();
        if !self.synced.load(Ordering::Relaxed) {
            why.push("not synced yet".to_string());
        }
        if let Some(since) = *locked(&self.lock_suspended_since) {
            why.push(format!(
                "lock: not renewed for {}s (no writes)",
                now.saturating_duration_since(since).as_secs()
            ));
        }
        for (label, w) in locked(&self.watches).iter() {
            if let Some(since) = w.down_since {
                why.push(format!(
                    "{label} watch down since {}s",
                    now.saturating_duration_since(since).as_secs()
                ));
            }
        }
        if why.is_empty() { Ok(()) } else { Err(why) }
    }

    /// `/healthz`: `Err` only when the control loop is wedged.
    pub fn liveness(&self, now: Instant) -> Result<(), String> {
        match *locked(&self.heartbeat) {
            Some(at) if now.saturating_duration_since(at) > WEDGED_AFTER => Err(format!(
                "wedged: the control loop has not turned for {}s",
                now.saturating_duration_since(at).as_secs()
            )),
            _ => Ok(()),
        }
    }
}

/// One counter with its help.
fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
    );
}

/// One gauge with its help.
fn gauge(out: &mut String, name: &str, help: &str, value: u64) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
    );
}

impl Metrics {
    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_rounds(&mut out);
        self.render_process(&mut out);
        self.render_watches(&mut out);
        self.render_members(&mut out);
        self.render_latency(&mut out);
        self.render_upstream(&mut out);
        out
    }

    /// KubeFed v0.10's own metric names where one means the same
    /// (`pkg/metrics/metrics.go`), so its dashboards and alerts keep
    /// working: cluster states, joined clusters, and controller-runtime's
    /// reconcile counters for the sync controller.
    fn render_upstream(&self, out: &mut String) {
        self.render_cluster_gauges(out);
        self.render_reconcile_counters(out);
        self.render_durations(out);
        render_client_requests(out);
        self.render_reconcile_summary(out);
    }

    /// `kubefedcluster_total` per member and state, `joined_cluster_total`.
    fn render_cluster_gauges(&self, out: &mut String) {
        let states = locked(&self.cluster_states).clone();
        let name = "kubefedcluster_total";
        let _ = writeln!(
            out,
            "# HELP {name} Number of total kubefed cluster in a specific state.\n# TYPE {name} gauge"
        );
        for (cluster, state) in &states {
            for s in ["ready", "notready", "offline"] {
                let _ = writeln!(
                    out,
                    "{name}{{state=\"{s}\",cluster=\"{}\"}} {}",
                    escape(cluster),
                    u8::from(s == *state)
                );
            }
        }
        // v0.10.0's name (the module's `pkg/metrics/metrics.go`; later
        // commits renamed it `joinedcluster_total`). Its controller-manager
        // always serves 0 (only its kubefedctl counts joins); the watch
        // serves the members it reconciles.
        gauge(
            out,
            "joined_cluster_total",
            "Number of total joined clusters.",
            states.len() as u64,
        );
    }

    /// controller-runtime's counters and gauges of the sync controller.
    fn render_reconcile_counters(&self, out: &mut String) {
        let (done, failed) = (
            self.objects_reconciled.load(Ordering::Relaxed),
            self.objects_failed.load(Ordering::Relaxed),
        );
        let name = "controller_runtime_reconcile_total";
        let _ = writeln!(
            out,
            "# HELP {name} Total number of reconciliations per controller\n# TYPE {name} counter\n{name}{{controller=\"sync\",result=\"success\"}} {}\n{name}{{controller=\"sync\",result=\"error\"}} {failed}",
            done - failed.min(done)
        );
        let name = "controller_runtime_reconcile_errors_total";
        let _ = writeln!(
            out,
            "# HELP {name} Total number of reconciliation errors per controller\n# TYPE {name} counter\n{name}{{controller=\"sync\"}} {failed}"
        );
        let name = "controller_runtime_max_concurrent_reconciles";
        let _ = writeln!(
            out,
            "# HELP {name} Maximum number of concurrent reconciles per controller\n# TYPE {name} gauge\n{name}{{controller=\"sync\"}} {}",
            self.max_rounds.load(Ordering::Relaxed)
        );
        let name = "controller_runtime_active_workers";
        let _ = writeln!(
            out,
            "# HELP {name} Number of currently used workers per controller\n# TYPE {name} gauge\n{name}{{controller=\"sync\"}} {}",
            self.rounds_in_flight.load(Ordering::Relaxed)
        );
    }

    /// KubeFed's and controller-runtime's histograms, under their bounds.
    fn render_durations(&self, out: &mut String) {
        // A round decides every object an event touched at once, so one
        // observation is one round (upstream: one object).
        locked(&self.round_time.0).render(
            out,
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            "controller=\"sync\"",
        );
        locked(&self.health_check_time.0).render(
            out,
            "cluster_health_status_duration_seconds",
            "Time taken for the cluster health periodic function.",
            "",
        );
        let rounds = locked(&self.round_time_upstream.0);
        rounds.render(
            out,
            "reconcile_federated_resources_duration_seconds",
            "Time taken to reconcile federated resources in the target clusters.",
            "",
        );
        rounds.render(
            out,
            "controller_runtime_reconcile_duration_seconds",
            "Time taken by various parts of Kubefed controllers reconciliation loops.",
            "controller=\"sync\"",
        );
        drop(rounds);
        locked(&self.client_connection_time.0).render(
            out,
            "cluster_client_connection_duration_seconds",
            "Time taken for the cluster client connection function.",
            "",
        );
        let name = "dispatch_operation_duration_seconds";
        let dispatch = locked(&self.dispatch_time);
        let _ = writeln!(
            out,
            "# HELP {name} Time taken to run dispatch operation.\n# TYPE {name} histogram"
        );
        for (action, h) in dispatch.iter() {
            h.render_samples(out, name, &format!("action=\"{action}\""));
        }
        drop(dispatch);
        // Served empty, as by KubeFed's controller-manager: only a joining
        // or unjoining kubefedctl process observes them.
        for (name, help) in [
            (
                "join_cluster_duration_seconds",
                "Time taken to join a cluster.",
            ),
            (
                "unjoin_cluster_duration_seconds",
                "Time taken to unjoin a cluster.",
            ),
        ] {
            Histogram::with_bounds(&UPSTREAM_BUCKETS).render(out, name, help, "");
        }
    }

    /// controller-runtime's reconcile summary, without quantiles.
    fn render_reconcile_summary(&self, out: &mut String) {
        let rounds = locked(&self.round_time_upstream.0);
        // KubeFed's summary, without quantiles (a summary may carry none):
        // its sum and count are the rounds'.
        let name = "controller_runtime_reconcile_quantile_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Quantiles of time taken by various parts of Kubefed controllers reconciliation loops.\n# TYPE {name} summary\n{name}_sum{{controller=\"sync\"}} {}\n{name}_count{{controller=\"sync\"}} {}",
            rounds.sum, rounds.count
        );
    }

    /// Rounds, failures, the queue and leadership.
    fn render_rounds(&self, out: &mut String) {
        counter(
            out,
            "kubefedctl_reconcile_rounds_total",
            "Rounds run (full and partial).",
            self.rounds.load(Ordering::Relaxed),
        );
        counter(
            out,
            "kubefedctl_reconcile_full_rounds_total",
            "Full rounds (start, resync, structure changes).",
            self.full_rounds.load(Ordering::Relaxed),
        );
        counter(
            out,
            "kubefedctl_reconcile_errors_total",
            "Failures reported by rounds (one per failed member request or host write).",
            self.failures.load(Ordering::Relaxed),
        );
        gauge(
            out,
            "kubefedctl_queue_depth",
            "Federated objects waiting to be re-decided.",
            self.queue_depth.load(Ordering::Relaxed),
        );
        gauge(
            out,
            "kubefedctl_leader",
            "1 while this instance holds the federation lock.",
            u64::from(self.leader.load(Ordering::Relaxed)),
        );
        gauge(
            out,
            "kubefedctl_rounds_in_flight",
            "Rounds running now.",
            self.rounds_in_flight.load(Ordering::Relaxed),
        );
    }

    /// Tasks and memory of the process.
    fn render_process(&self, out: &mut String) {
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            gauge(
                out,
                "kubefedctl_tasks",
                "Tasks alive in the process (watches, rounds, probes, connections).",
                rt.metrics().num_alive_tasks() as u64,
            );
        }
        // The Go client's process collector, by its names and help texts.
        if let Some(p) = super::process::read() {
            let series: [(&str, &str, &str, f64); 7] = [
                (
                    "process_cpu_seconds_total",
                    "counter",
                    "Total user and system CPU time spent in seconds.",
                    p.cpu_seconds,
                ),
                (
                    "process_max_fds",
                    "gauge",
                    "Maximum number of open file descriptors.",
                    p.max_fds as f64,
                ),
                (
                    "process_open_fds",
                    "gauge",
                    "Number of open file descriptors.",
                    p.open_fds as f64,
                ),
                (
                    "process_resident_memory_bytes",
                    "gauge",
                    "Resident memory size in bytes.",
                    p.resident_memory_bytes as f64,
                ),
                (
                    "process_start_time_seconds",
                    "gauge",
                    "Start time of the process since unix epoch in seconds.",
                    p.start_time_seconds,
                ),
                (
                    "process_virtual_memory_bytes",
                    "gauge",
                    "Virtual memory size in bytes.",
                    p.virtual_memory_bytes as f64,
                ),
                (
                    "process_virtual_memory_max_bytes",
                    "gauge",
                    "Maximum amount of virtual memory available in bytes.",
                    p.virtual_memory_max_bytes as f64,
                ),
            ];
            for (name, kind, help, value) in series {
                let _ = writeln!(
                    out,
                    "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
                );
            }
        }
    }

    /// Watch restarts per source, and the watches down.
    fn render_watches(&self, out: &mut String) {
        let watches = locked(&self.watches).clone();
        let name = "kubefedctl_watch_restarts_total";
        let _ = writeln!(
            out,
            "# HELP {name} Watches started over after a failure or a 410 (a fresh list).\n# TYPE {name} counter"
        );
        for (label, w) in &watches {
            let _ = writeln!(out, "{name}{{source=\"{}\"}} {}", escape(label), w.restarts);
        }
        gauge(
            out,
            "kubefedctl_watches_down",
            "Watches failed and not listed again since.",
            watches.values().filter(|w| w.down_since.is_some()).count() as u64,
        );
    }

    /// Requests, writes and failures per member.
    fn render_members(&self, out: &mut String) {
        let members = locked(&self.members).clone();
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
        let name = "kubefedctl_api_warnings_total";
        let _ = writeln!(
            out,
            "# HELP {name} Warning headers the API servers answered with (deprecated APIs and fields).\n# TYPE {name} counter"
        );
        for (cluster, n) in crate::clients::api_warnings::counts() {
            let _ = writeln!(out, "{name}{{cluster=\"{}\"}} {n}", escape(&cluster));
        }
    }

    /// The propagation latency histogram.
    fn render_latency(&self, out: &mut String) {
        locked(&self.latency).render(
            out,
            "kubefedctl_propagation_latency_seconds",
            "From the first event touching a federated object to its member writes done.",
            "",
        );
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
                let now = Instant::now();
                let unavailable = "503 Service Unavailable";
                let (status, content_type, body) = match path {
                    "/healthz" => match metrics.liveness(now) {
                        Ok(()) => ("200 OK", "text/plain", "ok\n".to_string()),
                        Err(why) => (unavailable, "text/plain", format!("{why}\n")),
                    },
                    "/readyz" => match metrics.readiness(now) {
                        Ok(()) => ("200 OK", "text/plain", "ok\n".to_string()),
                        Err(why) => (unavailable, "text/plain", why.join("\n") + "\n"),
                    },
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

/// client-go's `rest_client_requests_total`: every request this process
/// sent, by code, host and method (`crate::clients::request_metrics`).
fn render_client_requests(out: &mut String) {
    let name = "rest_client_requests_total";
    let _ = writeln!(
        out,
        "# HELP {name} Number of HTTP requests, partitioned by status code, method, and host.\n# TYPE {name} counter"
    );
    for ((code, host, method), n) in crate::clients::request_metrics::counts() {
        let _ = writeln!(
            out,
            "{name}{{code=\"{}\",host=\"{}\",method=\"{}\"}} {n}",
            escape(&code),
            escape(&host),
            escape(&method)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every family of the exposition, sorted by name, its samples sorted
    /// and their values masked; of the process-wide request and warning
    /// counts only the series this test made.
    fn shape(text: &str) -> String {
        let mut families: Vec<(Vec<String>, Vec<String>)> = Vec::new();
        for line in text.lines() {
            if line.starts_with("# HELP ") {
                families.push(Default::default());
            }
            let (meta, samples) = families.last_mut().expect("# HELP first");
            if line.starts_with('#') {
                meta.push(line.to_string());
                continue;
            }
            let (series, _value) = line.rsplit_once(' ').unwrap();
            let global = [
                "rest_client_requests_total",
                "kubefedctl_api_warnings_total",
            ];
            if global.iter().any(|g| series.starts_with(g)) && !series.contains("golden") {
                continue;
            }
            samples.push(format!("{series} _"));
        }
        for (_, samples) in &mut families {
            samples.sort();
        }
        families.sort();
        let lines: Vec<String> = families
            .into_iter()
            .flat_map(|(m, s)| m.into_iter().chain(s))
            .collect();
        lines.join("\n") + "\n"
    }

    /// A `Metrics` with a sample in every family.
    async fn seeded() -> Metrics {
        use crate::core::propagation::record::Effect;
        use tower::{Layer, Service};
        let m = Metrics::default();
        m.rounds.store(3, Ordering::Relaxed);
        m.full_rounds.store(1, Ordering::Relaxed);
        m.failures.store(2, Ordering::Relaxed);
        m.queue_depth.store(4, Ordering::Relaxed);
        m.leader.store(true, Ordering::Relaxed);
        m.rounds_in_flight.store(1, Ordering::Relaxed);
        m.max_rounds.store(8, Ordering::Relaxed);
        m.objects_reconciled.store(5, Ordering::Relaxed);
        m.objects_failed.store(1, Ordering::Relaxed);
        for (name, state) in [("eu\"1", "ready"), ("us", "offline")] {
            m.members
                .lock()
                .unwrap()
                .insert(name.into(), MemberCounts::default());
            m.cluster_states.lock().unwrap().insert(name.into(), state);
        }
        m.watch_restarted("host: FederatedConfigMap", true);
        m.watch_restarted("us: ConfigMap", false);
        let took = Duration::from_millis(300);
        m.latency.lock().unwrap().observe(took);
        m.health_check_time.0.lock().unwrap().observe(took);
        m.round_time.0.lock().unwrap().observe(took);
        m.round_time_upstream.0.lock().unwrap().observe(took);
        m.client_connection_time.0.lock().unwrap().observe(took);
        m.member_write(&Effect::Created, took);
        m.member_write(&Effect::Deleted { gone: false }, took);
        crate::clients::api_warnings::record("golden", "a warning");
        let url: http::Uri = "https://golden.test:6443".parse().unwrap();
        let ok = tower::service_fn(|_: http::Request<()>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(()))
        });
        let mut svc = crate::clients::request_metrics::layer(&url).layer(ok);
        svc.call(http::Request::get("/").body(()).unwrap())
            .await
            .unwrap();
        m
    }

    /// Every series `/metrics` serves: name, HELP, TYPE, labels and bucket
    /// bounds, as KubeFed's dashboards and the hand-over test read them.
    /// `UPDATE_GOLDEN=1` rewrites the file.
    #[tokio::test]
    async fn the_exposition_keeps_every_series_name_type_label_and_bucket() {
        let text = seeded().await.render();
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/golden/metrics-exposition.txt");
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&file, shape(&text)).unwrap();
        }
        let want = std::fs::read_to_string(&file).unwrap_or_default();
        assert_eq!(shape(&text), want, "{text}");
    }

    /// One GET on a fresh connection: status line, content type, body.
    async fn get(addr: SocketAddr, path: &str) -> (String, String, String) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).await.unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let status = head.lines().next().unwrap().to_string();
        let content_type = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-type: ")
                    .map(str::to_string)
            })
            .unwrap_or_default();
        (status, content_type, body.to_string())
    }

    #[tokio::test]
    async fn the_listener_serves_the_three_paths_and_404_elsewhere() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let m = Arc::new(Metrics::default());
        m.rounds.store(3, Ordering::Relaxed);
        serve(addr, m.clone()).await.unwrap();
        let (status, ct, body) = get(addr, "/metrics").await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8");
        assert!(
            body.contains("kubefedctl_reconcile_rounds_total 3\n"),
            "{body}"
        );
        assert_eq!(get(addr, "/healthz").await.0, "HTTP/1.1 200 OK");
        assert_eq!(get(addr, "/readyz?verbose").await.2, "ok\n");
        m.leader.store(true, Ordering::Relaxed);
        let (status, _, body) = get(addr, "/readyz").await;
        assert_eq!(
            (status.as_str(), body.as_str()),
            ("HTTP/1.1 503 Service Unavailable", "not synced yet\n")
        );
        assert_eq!(get(addr, "/nope").await.0, "HTTP/1.1 404 Not Found");
    }

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

    #[test]
    fn upstreams_duration_histograms_use_its_names_and_bounds() {
        let m = Metrics::default();
        m.round_time
            .0
            .lock()
            .unwrap()
            .observe(Duration::from_millis(30));
        m.health_check_time
            .0
            .lock()
            .unwrap()
            .observe(Duration::from_secs(2));
        let text = m.render();
        let has = |line: &str| assert!(text.contains(line), "{line} missing from:\n{text}");
        has("# TYPE controller_runtime_reconcile_time_seconds histogram\n");
        has(
            "controller_runtime_reconcile_time_seconds_bucket{controller=\"sync\",le=\"0.025\"} 0\n",
        );
        has(
            "controller_runtime_reconcile_time_seconds_bucket{controller=\"sync\",le=\"0.05\"} 1\n",
        );
        has(
            "controller_runtime_reconcile_time_seconds_bucket{controller=\"sync\",le=\"+Inf\"} 1\n",
        );
        has("controller_runtime_reconcile_time_seconds_count{controller=\"sync\"} 1\n");
        has("cluster_health_status_duration_seconds_bucket{le=\"1\"} 0\n");
        has("cluster_health_status_duration_seconds_bucket{le=\"2.5\"} 1\n");
        has("cluster_health_status_duration_seconds_sum 2\n");
        has("cluster_health_status_duration_seconds_count 1\n");
        m.round_time_upstream
            .0
            .lock()
            .unwrap()
            .observe(Duration::from_millis(300));
        let text = m.render();
        let has = |line: &str| assert!(text.contains(line), "{line} missing from:\n{text}");
        has("reconcile_federated_resources_duration_seconds_bucket{le=\"0.1\"} 0\n");
        has("reconcile_federated_resources_duration_seconds_bucket{le=\"0.5\"} 1\n");
        has("controller_runtime_reconcile_duration_seconds_count{controller=\"sync\"} 1\n");
        has("# TYPE controller_runtime_reconcile_quantile_seconds summary\n");
        has("controller_runtime_reconcile_quantile_seconds_count{controller=\"sync\"} 1\n");
    }

    #[test]
    fn readiness_names_every_watch_down_and_a_suspended_lock() {
        let m = Metrics::default();
        let t0 = Instant::now();
        assert_eq!(m.readiness(t0), Ok(()), "a standby is ready");
        m.leader.store(true, Ordering::Relaxed);
        assert_eq!(m.readiness(t0), Err(vec!["not synced yet".to_string()]));
        m.synced.store(true, Ordering::Relaxed);
        assert_eq!(m.readiness(t0), Ok(()));
        m.watch_restarted("host: FederatedConfigMap", true);
        m.watch_restarted("member1: ConfigMap", false);
        *m.lock_suspended_since.lock().unwrap() = Some(t0);
        let later = Instant::now() + Duration::from_secs(12);
        let why = m.readiness(later).unwrap_err();
        assert_eq!(why.len(), 2, "{why:?}: a 410 re-list is not down");
        assert!(why[0].starts_with("lock: not renewed for 12s"), "{why:?}");
        assert!(
            why[1].starts_with("host: FederatedConfigMap watch down since 1"),
            "{why:?}"
        );
        m.watch_restarted("host: FederatedConfigMap", true);
        m.watch_listed("host: FederatedConfigMap");
        *m.lock_suspended_since.lock().unwrap() = None;
        assert_eq!(m.readiness(later), Ok(()));
        let text = m.render();
        assert!(
            text.contains(
                "kubefedctl_watch_restarts_total{source=\"host: FederatedConfigMap\"} 2\n"
            ),
            "{text}"
        );
        assert!(text.contains("kubefedctl_watches_down 0\n"), "{text}");

        assert_eq!(m.liveness(t0), Ok(()), "before the loop turned");
        m.beat();
        assert_eq!(m.liveness(Instant::now()), Ok(()));
        let wedged = m.liveness(Instant::now() + WEDGED_AFTER + Duration::from_secs(5));
        assert!(wedged.unwrap_err().starts_with("wedged: "));
    }
}
