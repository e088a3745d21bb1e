//! What the watches report, taken in: at start the host's watches list
//! first (the types and clusters say what else to watch), then the
//! members'; in the loop each event, with those queued behind it, goes
//! into the cache, and the objects it touches into the work queue. Its own
//! file because it is the one way changes enter the controller.

use super::Controller;
use super::cache::Dirt;
use super::sources::Event;
use crate::terminal::signals::Signals;
use anyhow::{Result, bail};
use std::time::{Duration, Instant};

/// How long a start waits for member watches to list before the first
/// full round (a member slower than that joins the rounds when it lists).
const MEMBER_SYNC_WAIT: Duration = Duration::from_secs(30);

impl Controller<'_> {
    /// The host's own watches first (the types and clusters say what else
    /// to watch), then the members'; false when stopped meanwhile.
    pub(super) async fn start_watching(&mut self, stop: &mut Signals) -> Result<bool> {
        self.sources.sync(self.host_specs());
        if !self
            .wait(stop, |c| c.cache.host_synced(&c.host_sources()), None)
            .await?
        {
            return Ok(false);
        }
        self.rebuild().await?;
        Ok(self
            .wait(stop, |c| c.cache.host_synced(&c.host_sources()), None)
            .await?
            && self
                .wait(stop, |c| c.members_synced(), Some(MEMBER_SYNC_WAIT))
                .await?)
    }

    /// An event and those queued behind it into the cache; what they touch
    /// into the queue. True when a full round is due: the structure
    /// changed, or a member is caught up.
    pub(super) async fn take_events(&mut self, event: Event) -> bool {
        let mut dirt = self.cache.apply(event);
        while let Ok(event) = self.rx.try_recv() {
            merge(&mut dirt, self.cache.apply(event));
        }
        for w in std::mem::take(&mut dirt.warnings) {
            tracing::warn!("{w}");
        }
        if dirt.structure {
            self.try_rebuild().await;
        }
        let now = Instant::now();
        for k in dirt.keys {
            self.scheduler.mark(k, now);
        }
        for (k, written, rv) in dirt.written {
            self.scheduler.mark_written(k, (written, rv), now);
        }
        self.catching_up.extend(dirt.listed);
        self.caught_up() || dirt.structure
    }

    /// Whether a member listing again has now listed all of its watches
    /// (those left are still catching up). Its catch-up is one full round
    /// after the last of them: a member back from an outage lists each
    /// type's watch at its own time, and a full round per type (with the
    /// probe's own, started before any had listed, while rounds still left
    /// the member out) held changes back three times as long at 10,000 ×
    /// 10 (docs/performance.md, *Faults at 10,000 × 10*).
    pub(super) fn caught_up(&mut self) -> bool {
        // Called for every batch of events: nothing to build when no
        // member is listing again.
        if self.catching_up.is_empty() {
            return false;
        }
        let fleet = &self.fleet;
        (self.catching_up).retain(|name| fleet.contains(name));
        let types = self.types();
        let cache = &self.cache;
        let before = self.catching_up.len();
        (self.catching_up).retain(|m| !cache.member_synced(m, &types));
        self.catching_up.len() < before
    }

    /// Takes in events until `done` (or `limit` passes); `false`: stopped by
    /// a signal.
    async fn wait(
        &mut self,
        stop: &mut Signals,
        done: impl Fn(&Self) -> bool,
        limit: Option<Duration>,
    ) -> Result<bool> {
        let deadline = limit.map(|l| Instant::now() + l);
        while !done(self) {
            let until = deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                _ = stop.next() => {
                    tracing::info!("stopping before the first round; releasing the federation lock");
                    return Ok(false);
                }
                event = self.rx.recv() => match event {
                    Some(event) => {
                        let dirt = self.cache.apply(event);
                        self.catching_up.extend(dirt.listed);
                        for w in &dirt.warnings {
                            tracing::warn!("{w}");
                        }
                        if dirt.structure && self.cache.host_synced(&self.host_sources()) && !self.fleet.is_empty() {
                            self.rebuild().await?;
                        }
                    }
                    None => bail!("the watches stopped"),
                },
                _ = tokio::time::sleep_until(until.into()) => return Ok(true),
            }
        }
        Ok(true)
    }
}

fn merge(into: &mut Dirt, more: Dirt) {
    into.keys.extend(more.keys);
    into.warnings.extend(more.warnings);
    into.structure |= more.structure;
    into.listed.extend(more.listed);
    into.written.extend(more.written);
}
