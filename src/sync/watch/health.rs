//! The members' health as the watch reports it: the fleet (`fleet`) probes
//! and counts; here its news become log lines, the Warnings upstream's
//! cluster controller records, watches listing again, and the
//! KubeFedClusters' status written where it changes. Its own file because
//! it is the controller's other timer: it runs beside the rounds, not
//! through them.

use super::Controller;
use super::sources::Source;
use crate::clients::members::{Health, ProbedMember};
use crate::core::outcome::{Failure, Place};
use crate::parallel::locked;
use crate::sync::live;
use std::time::{Duration, Instant};

impl Controller<'_> {
    /// `--probe-timeout`, else the KubeFedConfig's.
    pub(super) fn probe_timeout(&self) -> Duration {
        self.o
            .run
            .selection
            .probe_timeout
            .unwrap_or(self.intake.cache.settings.health.timeout)
    }

    /// Starts a probe of every member beside the loop (a member that does
    /// not answer keeps only its probe waiting).
    pub(super) fn start_probe(&mut self) {
        let timeout = self.probe_timeout();
        let metrics = self.metrics.clone();
        let took = move |took| locked(&metrics.health_check_time.0).observe(took);
        self.fleet.refresh_pull(&self.intake.cache.clusters);
        self.fleet.start_probe(timeout, took);
    }

    /// A probe's result. A member that came back lists again at once, and
    /// the full round that catches it up follows once its watches have
    /// listed (`intake`): one started now would leave it out, since rounds
    /// touch a ready member only once it has listed. A member that went
    /// away asks for no round: a full round would hold every other
    /// member's changes back while it rewrites each object's status; its
    /// objects show ClusterNotReady as they are next decided, and all of
    /// them at the next resync or when it is back.
    pub(super) async fn probed(&mut self, probed: Option<Vec<ProbedMember>>) {
        let Some(probed) = probed else {
            return;
        };
        self.record_cluster_events(&probed).await;
        let news = self
            .fleet
            .take_probe(probed, self.intake.cache.settings.health);
        // A revoked token: the KubeFedCluster's Secret may hold a new one
        // (now or later); new clients and watches are built from it, at
        // every probe until the member takes its credentials again.
        if news.credentials_refused {
            self.runner.rebuild_at(Some(Instant::now()));
        }
        if news.changed {
            for p in self.fleet.members() {
                log_readiness(p);
            }
            self.write_health().await;
            // A pull member lists nothing that would catch it up: its
            // objects' statuses follow its readiness in a full round.
            if self.fleet.iter().any(|m| m.pull) {
                self.runner.want_full(true);
            }
        }
        if !news.back.is_empty() {
            let back = news.back;
            self.restart_sources(|s| matches!(s, Source::Member(c, _) if back.contains(c)));
        }
    }

    /// A member whose request got no answer within the timeout is not
    /// ready from now on (its objects show ClusterNotReady as they are next
    /// decided), without waiting for the next probe; the probe that it
    /// answers again brings it back.
    pub(super) async fn notice_stalled_members(&mut self) {
        let timeout = self.o.run.selection.timeout;
        let stalled = self.fleet.notice_stalled(timeout);
        for name in &stalled {
            tracing::warn!("{name}: not ready (no answer within {timeout:?})");
        }
        if !stalled.is_empty() {
            self.write_health().await;
        }
    }

    /// Upstream's cluster controller records a Warning on every failed
    /// probe, before its thresholds count it (not while the lock is
    /// suspended; the correlator bumps `count`).
    pub(super) async fn record_cluster_events(&mut self, probed: &[ProbedMember]) {
        let Some(recorder) = self.shared.run.events.clone() else {
            return;
        };
        if self.runner.suspended() || !self.writes_cluster_state() {
            return;
        }
        let events = live::cluster_events(probed);
        if events.is_empty() {
            return;
        }
        for w in recorder.record(&self.shared.host, events).await.warnings {
            self.report_warning(w);
        }
    }

    /// KubeFedCluster health, compared with the latest status the watch saw
    /// (not while the lock is suspended: the next rebuild writes it).
    pub(super) async fn write_health(&mut self) {
        {
            let mut states = locked(&self.metrics.cluster_states);
            states.clear();
            for ProbedMember {
                member: m,
                health: h,
            } in self.fleet.members()
            {
                let state = match h {
                    Health::Ready { .. } => "ready",
                    Health::Offline { .. } => "offline",
                    Health::NotReady { .. } | Health::ConfigMalformed { .. } => "notready",
                };
                states.insert(m.name.clone(), state);
            }
        }
        if self.runner.suspended() {
            self.runner.rebuild_at(Some(Instant::now()));
            return;
        }
        if !self.writes_cluster_state() {
            return;
        }
        let clusters = &self.intake.cache.clusters;
        self.fleet.refresh_clusters(|name| clusters.get(name));
        let members = self.fleet.members();
        if let Err(e) =
            crate::sync::live::record::write_cluster_health(&self.shared.host, members).await
        {
            self.report_failure(Failure::at(Place::Host, crate::error::one_line(&e)).to_string());
        }
        crate::inventory::write_statuses(&self.shared.host, self.fleet.members(), false).await;
    }
}

/// A member's readiness as a log line: a warning when it is not ready.
pub(super) fn log_readiness(p: &ProbedMember) {
    if p.is_ready() {
        tracing::info!("{}: ready", p.name());
    } else {
        tracing::warn!("{}: not ready", p.name());
    }
}
