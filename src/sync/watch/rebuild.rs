//! The controller's structure rebuilt from the cache: members (clients
//! from the KubeFedClusters), their health, the types' status and every
//! watch, at start, when types, clusters or the KubeFedConfig change and at
//! each resync. Its own file because it is the one step that touches every
//! other part (health, type status, watches) at once.

use super::Controller;
use super::health::log_readiness;
use crate::clients::members::{self, Member};
use crate::core::outcome::{Failure, Place};
use crate::parallel::locked;
use anyhow::Result;
use std::time::{Duration, Instant};

/// How often a rebuild that failed (the host did not answer) is tried again.
const REBUILD_RETRY: Duration = Duration::from_secs(2);

impl Controller<'_> {
    /// [`Self::rebuild`], where a host that does not answer is no reason to
    /// stop: it is reported and tried again shortly (and not at all while
    /// the lock is suspended, as it writes the clusters' health).
    pub(super) async fn try_rebuild(&mut self) {
        if self.runner.suspended() {
            self.runner.rebuild_at(Some(Instant::now()));
            return;
        }
        match self.rebuild().await {
            Ok(()) => self.runner.rebuild_at(None),
            Err(e) => {
                self.report_failure(
                    Failure::at(Place::Host, crate::error::one_line(&e)).to_string(),
                );
                self.runner.rebuild_at(Some(Instant::now() + REBUILD_RETRY));
            }
        }
    }

    /// Members, their health and every watch, from the current cache:
    /// at start, after structure changes, at each resync.
    pub(super) async fn rebuild(&mut self) -> Result<()> {
        let timeout = self.o.run.selection.timeout;
        let before: Vec<Member> = self.fleet.iter().cloned().collect();
        let loaded = members::load_with(&self.shared.host, timeout, &[], Some(&before)).await?;
        // `--cluster` naming a pull member would make a watch that writes
        // nothing: refused, as the one-shot run refuses it.
        let mut named = self.o.run.selection.scope.clusters.iter().flatten();
        if let Some(c) = named.find(|c| loaded.iter().any(|m| m.pull && &m.name == *c)) {
            anyhow::bail!(crate::sync::run::observe::pull_refusal(c));
        }
        {
            let mut h = locked(&self.metrics.client_connection_time.0);
            for m in &loaded {
                h.observe(m.connected_in);
            }
        }
        let probed = members::probe_all(&loaded, self.probe_timeout()).await;
        self.record_cluster_events(&probed).await;
        for p in self.fleet.replace(probed) {
            log_readiness(p);
        }
        self.write_health().await;
        self.write_type_statuses(true).await;
        self.intake.cache.whole_copies = (self.types().into_iter())
            .filter(|t| self.o.run.report_only || self.intake.cache.keeps_member_fields(t))
            .collect();
        if !self.intake.cache.whole_copies.is_empty() {
            tracing::debug!(
                "member copies held whole (their fields kept): {:?}",
                self.intake.cache.whole_copies
            );
        }
        let started = self.sync_sources();
        if !started.is_empty() {
            tracing::debug!("watching {} more source(s)", started.len());
        }
        Ok(())
    }
}
