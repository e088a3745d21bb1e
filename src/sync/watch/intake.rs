//! What the watches report, taken in: at start the host's watches list
//! first (the types and clusters say what else to watch), then the
//! members'; in the loop each event, with those queued behind it, goes
//! into the cache, and the objects it touches into the scheduler. The
//! [`Intake`] owns the watchers, their channel, the cache and the members
//! catching up; the controller only routes what it reports. Its own file
//! because it is the one way changes enter the controller.

use super::Controller;
use super::cache::{Cache, Dirt};
use super::metrics::Metrics;
use super::sources::{Event, Sources};
use crate::core::run::shard::Shard;
use crate::terminal::signals::Signals;
use anyhow::{Result, bail};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// How long a start waits for member watches to list before the first
/// full round (a member slower than that joins the rounds when it lists).
const MEMBER_SYNC_WAIT: Duration = Duration::from_secs(30);

/// The watches, what they saw, and the members whose watches are listing
/// again.
pub(super) struct Intake {
    pub cache: Cache,
    pub sources: Sources,
    rx: UnboundedReceiver<Event>,
    /// Members whose watches are listing again (back, or new): a full
    /// round catches each up once all of its watches have listed.
    catching_up: BTreeSet<String>,
}

impl Intake {
    /// Nothing watched yet.
    pub(super) fn new(
        metrics: Arc<Metrics>,
        shard: Option<Shard>,
        federation_namespace: &str,
    ) -> Intake {
        let (tx, rx) = unbounded_channel();
        let mut cache = Cache::default();
        cache.federation_namespace = federation_namespace.to_string();
        Intake {
            cache,
            sources: Sources::new(tx, metrics, shard),
            rx,
            catching_up: BTreeSet::new(),
        }
    }

    /// An intake, and a sender of events as its watchers would send them.
    #[cfg(test)]
    fn with_sender() -> (Intake, tokio::sync::mpsc::UnboundedSender<Event>) {
        let (tx, rx) = unbounded_channel();
        let intake = Intake {
            cache: Cache::default(),
            sources: Sources::new(tx.clone(), Arc::new(Metrics::default()), None),
            rx,
            catching_up: BTreeSet::new(),
        };
        (intake, tx)
    }

    /// The next event (never `None` while the watchers live).
    pub(super) async fn next(&mut self) -> Option<Event> {
        self.rx.recv().await
    }

    /// An event and those queued behind it into the cache: what they
    /// touched, merged. Members that listed start catching up.
    pub(super) fn take(&mut self, event: Event) -> Dirt {
        let mut dirt = self.cache.apply(event);
        while let Ok(event) = self.rx.try_recv() {
            merge(&mut dirt, self.cache.apply(event));
        }
        self.catching_up.extend(dirt.listed.iter().cloned());
        dirt
    }

    /// Whether a member listing again (still a member: `is_member`) has
    /// now listed all of its watches of `types` (those left are still
    /// catching up). Its catch-up is one full round after the last of
    /// them: a member back from an outage lists each type's watch at its
    /// own time, and a full round per type (with the probe's own, started
    /// before any had listed, while rounds still left the member out) held
    /// changes back three times as long at 10,000 × 10
    /// (docs/performance/faults.md).
    pub(super) fn caught_up(&mut self, is_member: impl Fn(&str) -> bool, types: &[String]) -> bool {
        // Called for every batch of events: nothing to build when no
        // member is listing again.
        if self.catching_up.is_empty() {
            return false;
        }
        (self.catching_up).retain(|name| is_member(name));
        let before = self.catching_up.len();
        let cache = &self.cache;
        (self.catching_up).retain(|m| !cache.member_synced(m, types));
        self.catching_up.len() < before
    }
}

impl Controller<'_> {
    /// The host's own watches first (the types and clusters say what else
    /// to watch), then the members'; false when stopped meanwhile.
    pub(super) async fn start_watching(&mut self, stop: &mut Signals) -> Result<bool> {
        self.intake.sources.sync(self.host_specs());
        if !self
            .wait(
                stop,
                |c| c.intake.cache.host_synced(&c.host_sources()),
                None,
            )
            .await?
        {
            return Ok(false);
        }
        self.rebuild().await?;
        Ok(self
            .wait(
                stop,
                |c| c.intake.cache.host_synced(&c.host_sources()),
                None,
            )
            .await?
            && self
                .wait(stop, |c| c.members_synced(), Some(MEMBER_SYNC_WAIT))
                .await?)
    }

    /// An event and those queued behind it into the cache; what they touch
    /// into the queue. True when a full round is due: the structure
    /// changed, or a member is caught up.
    pub(super) async fn take_events(&mut self, event: Event) -> bool {
        let mut dirt = self.intake.take(event);
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
        // A wave's readiness, watched.
        for k in dirt.status_only {
            if self.rollouts.waits_for(&k) {
                self.scheduler.mark(k, now);
            }
        }
        self.caught_up() || dirt.structure
    }

    /// Whether a member listing again has now listed all of its watches
    /// ([`Intake::caught_up`]).
    pub(super) fn caught_up(&mut self) -> bool {
        let types = self.types();
        let fleet = &self.fleet;
        self.intake.caught_up(|name| fleet.contains(name), &types)
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
                event = self.intake.next() => match event {
                    Some(event) => {
                        let dirt = self.intake.take(event);
                        for w in &dirt.warnings {
                            tracing::warn!("{w}");
                        }
                        if dirt.structure && self.intake.cache.host_synced(&self.host_sources()) && !self.fleet.is_empty() {
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
    into.status_only.extend(more.status_only);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::watch::cache::tests::{ev, ftc, key, obj};
    use crate::sync::watch::sources::{Change, Source};
    use serde_json::json;

    fn types() -> Event {
        let mut ns = ftc("namespaces", "Namespace", "namespaces", "");
        ns["spec"]["targetType"]["scope"] = json!("Cluster");
        let cms = ftc("configmaps", "ConfigMap", "configmaps", "");
        ev(Source::TypeConfigs, Change::replaced(vec![cms, ns]))
    }

    fn listed(cluster: &str, ftc: &str, objects: Vec<serde_json::Value>) -> Event {
        let source = Source::Member(cluster.into(), ftc.into());
        ev(source, Change::replaced(objects))
    }

    /// An event and every one queued behind it are taken in one batch,
    /// their marks merged.
    #[tokio::test(start_paused = true)]
    async fn the_events_queued_behind_one_are_taken_with_it() {
        let (mut intake, tx) = Intake::with_sender();
        let fed = Source::Federated("configmaps".into());
        let a = obj("FederatedConfigMap", "shop", "a", "1");
        for event in [
            types(),
            ev(fed, Change::replaced(vec![a])),
            listed("m1", "configmaps", vec![obj("ConfigMap", "shop", "b", "1")]),
            ev(
                Source::Member("m1".into(), "configmaps".into()),
                Change::Applied(obj("ConfigMap", "shop", "b", "drifted")),
            ),
        ] {
            tx.send(event).unwrap();
        }
        let first = intake.next().await.unwrap();
        let dirt = intake.take(first);
        assert!(dirt.structure);
        let want = [
            key("configmaps", "shop", "a"),
            key("configmaps", "shop", "b"),
        ];
        assert_eq!(dirt.keys, want.into());
        assert_eq!(dirt.listed, ["m1".to_string()].into());
        let more = tokio::time::timeout(Duration::from_secs(1), intake.next()).await;
        assert!(more.is_err(), "every queued event was taken");
    }

    /// A member listing again is caught up once all of its types have
    /// listed, once: one full round for its catch-up, not one per type. A
    /// member gone meanwhile is dropped without one.
    #[test]
    fn a_member_is_caught_up_once_every_type_of_it_has_listed() {
        let (mut intake, _tx) = Intake::with_sender();
        intake.take(types());
        let types = ["configmaps".to_string(), "namespaces".to_string()];
        let members = |name: &str| name == "m1";
        intake.take(listed("m1", "configmaps", vec![]));
        intake.take(listed("m2", "configmaps", vec![]));
        assert!(!intake.caught_up(members, &types));
        intake.take(listed("m1", "namespaces", vec![]));
        assert!(intake.caught_up(members, &types));
        assert!(!intake.caught_up(members, &types));
        assert!(intake.catching_up.is_empty(), "m2 is no member");
    }
}
