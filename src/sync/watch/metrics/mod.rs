//! `/healthz`, `/readyz` and `/metrics` (Prometheus text format 0.0.4) of
//! `reconcile --watch`, on `--metrics-bind-address`: what is counted
//! (here), its text (`exposition`, pure, unit-tested) and the few lines of
//! HTTP/1.1 that serve it (`listener`), kept apart so that the text is
//! tested without a socket.

mod exposition;
mod listener;

pub use listener::serve;

use crate::parallel::locked;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

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

#[cfg(test)]
mod tests {
    use super::*;

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
