//! The members as the watch keeps them: each with its health, the probes
//! run beside the loop, the KubeFedConfig's thresholds over them, and each
//! member's stall. It owns what the loop once shared about members (the
//! list, its generation, the streaks, the probe in flight) and does no
//! I/O but the probe task; `health` turns what it reports into log lines,
//! Events and KubeFedCluster statuses.

use crate::clients::members::{self, Health, Member, ProbedMember};
use crate::core::run::settings::HealthCheck;
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;
use tokio::task::JoinHandle;

/// The members of one term of leadership and their health.
#[derive(Default)]
pub(super) struct Fleet {
    members: Vec<ProbedMember>,
    /// Bumped whenever the members are replaced: a probe of older members
    /// is not applied to newer ones.
    generation: u64,
    /// Per member: probes in a row that disagree with its readiness
    /// (`core::cluster::health::after_probe`).
    streaks: HashMap<String, u32>,
    /// A probe of every member, beside the loop: (generation, task).
    probing: Option<(u64, JoinHandle<Vec<ProbedMember>>)>,
}

/// What a probe changed, once the thresholds counted it.
#[derive(Debug, Default, PartialEq)]
pub(super) struct ProbeNews {
    /// Members that turned ready: their watches list again.
    pub back: BTreeSet<String>,
    /// Some member's readiness (or kind of not-ready) changed: the
    /// KubeFedClusters' status is written.
    pub changed: bool,
    /// A member is not ready because it refuses its credentials (once the
    /// thresholds count it): a new Secret may hold new ones.
    pub credentials_refused: bool,
}

impl Fleet {
    pub(super) fn members(&self) -> &[ProbedMember] {
        &self.members
    }

    /// Pull members' KubeFedClusters as the watch holds them now: their
    /// health is their agents' heartbeat, in the status (`core::cluster::pull`).
    pub(super) fn refresh_pull(
        &mut self,
        clusters: &std::collections::BTreeMap<String, serde_json::Value>,
    ) {
        for p in self.members.iter_mut().filter(|p| p.member.pull) {
            let now = clusters.get(&p.member.name).cloned();
            if let Some(cluster) = now.and_then(|v| serde_json::from_value(v).ok()) {
                p.member.cluster = cluster;
            }
        }
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().map(|p| &p.member)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Whether `name` is a member.
    pub(super) fn contains(&self, name: &str) -> bool {
        self.members.iter().any(|p| p.name() == name)
    }

    /// The members just loaded and probed replace the old ones (a probe
    /// in flight of the old ones will not count); returns those whose
    /// readiness changed, for the log.
    pub(super) fn replace(&mut self, probed: Vec<ProbedMember>) -> Vec<&ProbedMember> {
        let before: HashMap<String, bool> = (self.members.iter())
            .map(|p| (p.name().to_string(), p.is_ready()))
            .collect();
        self.generation += 1;
        self.members = probed;
        let members = &self.members;
        (self.streaks).retain(|name, _| members.iter().any(|p| p.name() == name));
        mark_stalls(&self.members);
        (self.members.iter())
            .filter(|p| before.get(p.name()).is_some_and(|was| *was != p.is_ready()))
            .collect()
    }

    /// Starts a probe of every member beside the loop, unless one runs
    /// (a member that does not answer keeps only its probe waiting);
    /// `took` is told how long it took.
    pub(super) fn start_probe(
        &mut self,
        timeout: Duration,
        took: impl FnOnce(Duration) + Send + 'static,
    ) {
        if self.probing.is_some() {
            return;
        }
        let members: Vec<Member> = self.iter().cloned().collect();
        let task = tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let probed = members::probe_all(&members, timeout).await;
            took(started.elapsed());
            probed
        });
        self.probing = Some((self.generation, task));
    }

    /// The probe beside the loop, when it is done (never, when none runs):
    /// `None` when the members were replaced meanwhile.
    pub(super) async fn probe_done(&mut self) -> Option<Vec<ProbedMember>> {
        let Some((generation, task)) = self.probing.as_mut() else {
            return std::future::pending().await;
        };
        let probed = task.await.unwrap_or_default();
        let current = *generation == self.generation;
        self.probing = None;
        current.then_some(probed)
    }

    /// A probe's results as the KubeFedConfig's thresholds let them count:
    /// a member changes readiness only after enough probes in a row say so.
    pub(super) fn take_probe(&mut self, probed: Vec<ProbedMember>, h: HealthCheck) -> ProbeNews {
        let mut by_name: HashMap<String, Health> = (probed.into_iter())
            .map(|p| (p.member.name, p.health))
            .collect();
        let mut news = ProbeNews::default();
        for p in &mut self.members {
            let Some(now) = by_name.remove(&p.member.name) else {
                continue;
            };
            let streak = self.streaks.get(&p.member.name).copied().unwrap_or(0);
            let (kept, streak) = crate::core::cluster::health::after_probe(
                &p.health,
                now,
                streak,
                h.failure_threshold,
                h.success_threshold,
            );
            self.streaks.insert(p.member.name.clone(), streak);
            if kept.is_ready() && !p.health.is_ready() {
                news.back.insert(p.member.name.clone());
            }
            news.changed |= std::mem::discriminant(&kept) != std::mem::discriminant(&p.health);
            // As the thresholds count it: a member refusing its
            // credentials for one probe only is not rebuilt yet.
            news.credentials_refused |= kept.credentials_refused();
            p.health = kept;
        }
        mark_stalls(&self.members);
        news
    }

    /// Members whose requests got no answer within `timeout` are not ready
    /// from now on, without waiting for the next probe (the probe that
    /// they answer again brings them back). Returns their names.
    pub(super) fn notice_stalled(&mut self, timeout: Duration) -> Vec<String> {
        let mut stalled = Vec::new();
        for p in &mut self.members {
            let stall = p.member.stalled.as_ref().is_some_and(|s| s.is_set());
            if stall && p.health.is_ready() {
                p.health = Health::Offline {
                    message: format!("cluster is not reachable: no answer within {timeout:?}"),
                };
                stalled.push(p.member.name.clone());
            }
        }
        stalled
    }

    /// The KubeFedClusters as the watch last saw them, into the members,
    /// so that a status is written over the latest.
    pub(super) fn refresh_clusters<'a>(
        &mut self,
        latest: impl Fn(&str) -> Option<&'a serde_json::Value>,
    ) {
        for p in &mut self.members {
            if let Some(kfc) =
                latest(&p.member.name).and_then(|v| serde_json::from_value(v.clone()).ok())
            {
                p.member.cluster = kfc;
            }
        }
    }
}

/// What a probe found, as each member's stall: a member that does not
/// answer its probe holds no request; one that answers may be asked again.
fn mark_stalls(members: &[ProbedMember]) {
    for p in members {
        if let Some(s) = &p.member.stalled {
            if p.is_ready() { s.clear() } else { s.set() }
        }
    }
}

#[cfg(test)]
mod tests;
