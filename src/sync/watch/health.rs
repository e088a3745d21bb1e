//! The members' health as the watch keeps it: probes beside the loop, the
//! KubeFedConfig's thresholds over them, a member that stops answering a
//! round's requests taken as not ready at once (and its stall marked), the
//! Warnings upstream's cluster controller records, and the KubeFedClusters'
//! status written where it changes. Its own file because it is the
//! controller's other timer: it runs beside the rounds, not through them.

use super::Controller;
use super::sources::Source;
use crate::clients::members::{self, Health, Member};
use crate::core::outcome::{Failure, Place};
use crate::parallel::locked;
use crate::sync::live;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

impl Controller<'_> {
    /// A probe's results as the KubeFedConfig's thresholds let them count:
    /// a member changes readiness only after enough probes in a row say so.
    fn thresholds(&mut self, probed: Vec<Health>) -> Vec<Health> {
        let h = self.cache.settings.health;
        let mut out = Vec::with_capacity(probed.len());
        for ((m, now), before) in self.members.iter().zip(probed).zip(&self.health) {
            let streak = self.streaks.get(&m.name).copied().unwrap_or(0);
            let (kept, streak) = crate::core::cluster::health::after_probe(
                before,
                now,
                streak,
                h.failure_threshold,
                h.success_threshold,
            );
            self.streaks.insert(m.name.clone(), streak);
            out.push(kept);
        }
        out
    }

    /// `--probe-timeout`, else the KubeFedConfig's.
    pub(super) fn probe_timeout(&self) -> Duration {
        self.o
            .run
            .selection
            .probe_timeout
            .unwrap_or(self.cache.settings.health.timeout)
    }

    /// Starts a probe of every member beside the loop (a member that does
    /// not answer keeps only its probe waiting).
    pub(super) fn start_probe(&mut self) {
        if self.probing.is_some() {
            return;
        }
        let members = self.members.clone();
        let timeout = self.probe_timeout();
        let metrics = self.metrics.clone();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let health = members::probe_all(&members, timeout).await;
            let took = started.elapsed();
            locked(&metrics.health_check_time.0).observe(took);
            health
        });
        self.probing = Some((self.generation, task));
    }

    /// A probe's result. A member that came back lists again at once, and
    /// the full round that catches it up follows once its watches have
    /// listed (`intake`): one started now would leave it out, since rounds
    /// touch a ready member only once it has listed. A member that went
    /// away asks for no round: a full round would hold every other
    /// member's changes back while it rewrites each object's status; its
    /// objects show ClusterNotReady as they are next decided, and all of
    /// them at the next resync or when it is back.
    pub(super) async fn probed(&mut self, (generation, health): (u64, Vec<Health>)) {
        if generation != self.generation || health.len() != self.members.len() {
            return;
        }
        self.record_cluster_events(&health).await;
        let health = self.thresholds(health);
        mark_stalls(&self.members, &health);
        let back: BTreeSet<String> = self
            .members
            .iter()
            .zip(health.iter().zip(&self.health))
            .filter(|(_, (now, before))| now.is_ready() && !before.is_ready())
            .map(|(m, _)| m.name.clone())
            .collect();
        let changed = health
            .iter()
            .zip(&self.health)
            .any(|(a, b)| std::mem::discriminant(a) != std::mem::discriminant(b));
        // A revoked token: the KubeFedCluster's Secret may hold a new one
        // (now or later); new clients and watches are built from it, at
        // every probe until the member takes its credentials again.
        if health.iter().any(Health::credentials_refused) {
            self.rebuild_due = Some(Instant::now());
        }
        self.health = health;
        if changed {
            for (m, h) in self.members.iter().zip(&self.health) {
                log_readiness(&m.name, h);
            }
            self.write_health().await;
        }
        if !back.is_empty() {
            self.restart_sources(|s| matches!(s, Source::Member(c, _) if back.contains(c)));
        }
    }

    /// A member whose request got no answer within the timeout is not
    /// ready from now on (its objects show ClusterNotReady as they are next
    /// decided), without waiting for the next probe; the probe that it
    /// answers again brings it back.
    pub(super) async fn notice_stalled_members(&mut self) {
        let timeout = self.o.run.selection.timeout;
        let mut changed = false;
        for (m, h) in self.members.iter().zip(self.health.iter_mut()) {
            let stalled = m.stalled.as_ref().is_some_and(|s| s.is_set());
            if stalled && h.is_ready() {
                *h = Health::Offline {
                    message: format!("cluster is not reachable: no answer within {timeout:?}"),
                };
                tracing::warn!("{}: not ready (no answer within {timeout:?})", m.name);
                changed = true;
            }
        }
        if changed {
            self.write_health().await;
        }
    }

    /// Upstream's cluster controller records a Warning on every failed
    /// probe, before its thresholds count it (not while the lock is
    /// suspended; the correlator bumps `count`).
    pub(super) async fn record_cluster_events(&mut self, probed: &[Health]) {
        let Some(recorder) = self.shared.run.events.clone() else {
            return;
        };
        if self.suspended || !self.writes_cluster_state() {
            return;
        }
        let events = live::cluster_events(&self.members, probed);
        if events.is_empty() {
            return;
        }
        for w in recorder.record(self.host, events).await.warnings {
            self.report_warning(w);
        }
    }

    /// KubeFedCluster health, compared with the latest status the watch saw
    /// (not while the lock is suspended: the next rebuild writes it).
    pub(super) async fn write_health(&mut self) {
        {
            let mut states = locked(&self.metrics.cluster_states);
            states.clear();
            for (m, h) in self.members.iter().zip(&self.health) {
                let state = match h {
                    Health::Ready { .. } => "ready",
                    Health::Offline { .. } => "offline",
                    Health::NotReady { .. } | Health::ConfigMalformed { .. } => "notready",
                };
                states.insert(m.name.clone(), state);
            }
        }
        if self.suspended {
            self.rebuild_due = Some(Instant::now());
            return;
        }
        if !self.writes_cluster_state() {
            return;
        }
        for m in &mut self.members {
            if let Some(kfc) = self
                .cache
                .clusters
                .get(&m.name)
                .and_then(|v| serde_json::from_value(v.clone()).ok())
            {
                m.cluster = kfc;
            }
        }
        if let Err(e) =
            crate::sync::live::record::write_cluster_health(self.host, &self.members, &self.health)
                .await
        {
            self.report_failure(Failure::at(Place::Host, crate::error::one_line(&e)).to_string());
        }
        crate::inventory::write_statuses(self.host, &self.members, &self.health, false).await;
    }
}

/// A member's readiness as a log line: a warning when it is not ready.
pub(super) fn log_readiness(name: &str, h: &Health) {
    if h.is_ready() {
        tracing::info!("{name}: {}", readiness(h));
    } else {
        tracing::warn!("{name}: {}", readiness(h));
    }
}

/// `ready` or `not ready`, for the readiness lines.
fn readiness(h: &Health) -> &'static str {
    if h.is_ready() { "ready" } else { "not ready" }
}

/// What a probe found, as each member's stall: a member that does not
/// answer its probe holds no request; one that answers may be asked again.
pub(super) fn mark_stalls(members: &[Member], health: &[Health]) {
    for (m, h) in members.iter().zip(health) {
        if let Some(s) = &m.stalled {
            if h.is_ready() { s.clear() } else { s.set() }
        }
    }
}

/// The probe beside the loop, when it is done (never, when none runs).
pub(super) async fn probe_done(
    probing: &mut Option<(u64, JoinHandle<Vec<Health>>)>,
) -> (u64, Vec<Health>) {
    let Some((generation, task)) = probing.as_mut() else {
        return std::future::pending().await;
    };
    let health = task.await.unwrap_or_default();
    let generation = *generation;
    *probing = None;
    (generation, health)
}
