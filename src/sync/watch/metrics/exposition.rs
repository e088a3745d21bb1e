//! The metrics as Prometheus text (format 0.0.4): pure rendering of what
//! `Metrics` counted, so that every family's name, help and labels are
//! unit-tested without a listener.

use super::{Histogram, MemberCounts, Metrics, UPSTREAM_BUCKETS};
use crate::parallel::locked;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

impl Histogram {
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
        if let Some(p) = crate::sync::watch::process::read() {
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
    use std::time::Duration;

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
}
