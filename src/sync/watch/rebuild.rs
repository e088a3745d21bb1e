//! The controller's structure rebuilt from the cache: members (clients
//! from the KubeFedClusters), their health, the types' status and every
//! watch, at start, when types, clusters or the KubeFedConfig change and at
//! each resync. Its own file because it is the one step that touches every
//! other part (health, type status, watches) at once.

use super::Controller;
use super::health::{log_readiness, mark_stalls};
use crate::clients::members;
use crate::core::outcome::{Failure, Place};
use crate::parallel::locked;
use anyhow::Result;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often a rebuild that failed (the host did not answer) is tried again.
const REBUILD_RETRY: Duration = Duration::from_secs(2);

impl Controller<'_> {
    /// [`Self::rebuild`], where a host that does not answer is no reason to
    /// stop: it is reported and tried again shortly (and not at all while
    /// the lock is suspended, as it writes the clusters' health).
    pub(super) async fn try_rebuild(&mut self) {
        if self.suspended {
            self.rebuild_due = Some(Instant::now());
            return;
        }
        match self.rebuild().await {
            Ok(()) => self.rebuild_due = None,
            Err(e) => {
                self.report_failure(
                    Failure::at(Place::Host, crate::error::one_line(&e)).to_string(),
                );
                self.rebuild_due = Some(Instant::now() + REBUILD_RETRY);
            }
        }
    }

    /// Members, their health and every watch, from the current cache:
    /// at start, after structure changes, at each resync.
    pub(super) async fn rebuild(&mut self) -> Result<()> {
        let timeout = self.o.run.selection.timeout;
        let before: HashMap<String, bool> = self
            .members
            .iter()
            .zip(&self.health)
            .map(|(m, h)| (m.name.clone(), h.is_ready()))
            .collect();
        self.members = members::load_with(self.host, timeout, &[], Some(&self.members)).await?;
        {
            let mut h = locked(&self.metrics.client_connection_time.0);
            for m in &self.members {
                h.observe(m.connected_in);
            }
        }
        self.generation += 1;
        self.health = members::probe_all(&self.members, self.probe_timeout()).await;
        let probed = self.health.clone();
        self.record_cluster_events(&probed).await;
        for (m, h) in self.members.iter().zip(&self.health) {
            if before.get(&m.name).is_some_and(|was| *was != h.is_ready()) {
                log_readiness(&m.name, h);
            }
        }
        mark_stalls(&self.members, &self.health);
        self.write_health().await;
        self.write_type_statuses(true).await;
        self.cache.whole_copies = (self.types().into_iter())
            .filter(|t| self.cache.keeps_member_fields(t))
            .collect();
        if !self.cache.whole_copies.is_empty() {
            tracing::debug!(
                "member copies held whole (their fields kept): {:?}",
                self.cache.whole_copies
            );
        }
        let started = self.sync_sources();
        if !started.is_empty() {
            tracing::debug!("watching {} more source(s)", started.len());
        }
        Ok(())
    }
}
