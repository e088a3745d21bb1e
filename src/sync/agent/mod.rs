//! `kubefedctl agent`: a pull member's agent (`core::cluster::pull`). It
//! reads its member's share from the host with an identity that may read
//! and report only, applies it to its member through the one-shot run's
//! decide and execute steps (`live::agent`), reports each object back
//! (`reports`), and beats: its KubeFedCluster's status says how its member
//! is, at least every `pull::HEARTBEAT_SECONDS`. The host never connects
//! to the member. Agents of one member (a rollout of its Deployment) elect
//! one leader with a Lease in the member ([`run`]): only the leader writes.

pub mod credential;
pub mod reports;

use crate::api::core::KubeFedCluster;
use crate::apply::api_error;
use crate::clients::host::Host;
use crate::clients::members::{self, Member, ProbedMember};
use crate::core::cluster::pull::{self, report_namespace};
use crate::core::describe::{ObjectKey, key_of};
use crate::core::propagation::report::agent_versions;
use crate::core::propagation::version::propagated_version_key;
use crate::core::run::scope::RunScope;
use crate::sync::live::{self, progress::Progress};
use crate::sync::run::observe::{self, Observation, Selection};
use crate::sync::run::report::Report;
use anyhow::{Context, Result, bail};
use kube::api::{Api, Patch, PatchParams};
use reports::ReportWriter;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::Duration;

/// How the agent runs.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// Its member's KubeFedCluster name.
    pub cluster: String,
    /// `-n`: only the federated objects of this namespace (and its
    /// member's copies there: a member shared with other federations).
    pub namespace: Option<String>,
    /// Per request.
    pub timeout: Duration,
    /// Requests in flight to the member.
    pub concurrency: usize,
    /// Attempts per member request.
    pub attempts: u32,
}

/// What one round did.
pub struct AgentRound {
    pub report: Report,
    /// Reports written and stale ones removed on the host.
    pub reports_written: usize,
    pub reports_removed: usize,
}

/// The agent's member as the engine sees a member: its own KubeFedCluster
/// and the agent's client, probed.
async fn own_member(
    host: &Host,
    member: &kube::Client,
    o: &AgentOptions,
    probe: Duration,
) -> Result<ProbedMember> {
    let api: Api<KubeFedCluster> = Api::namespaced(host.client.clone(), &host.namespace);
    let cluster = api
        .get(&o.cluster)
        .await
        .map_err(api_error)
        .with_context(|| {
            format!(
                "reading KubeFedCluster {}/{}, the agent's own",
                host.namespace, o.cluster
            )
        })?;
    if !pull::is_pull(cluster.metadata.annotations.as_ref()) {
        bail!(
            "KubeFedCluster {}/{} is not a pull member ({}: {}): the host propagates to it; join it with --mode pull for an agent",
            host.namespace,
            o.cluster,
            pull::MODE_ANNOTATION,
            pull::PULL
        );
    }
    let m = Member {
        name: o.cluster.clone(),
        labels: cluster.metadata.labels.clone().unwrap_or_default(),
        cluster,
        profile: None,
        client: Ok(member.clone()),
        watch_client: None,
        requests: Default::default(),
        stalled: None,
        fingerprint: String::new(),
        connected_in: Duration::ZERO,
        pull: false,
    };
    let health = members::probe(&m, probe).await;
    Ok(ProbedMember { member: m, health })
}

/// Writes the heartbeat: the member's health as the agent probed it.
pub async fn beat(host: &Host, member: &kube::Client, o: &AgentOptions) -> Result<()> {
    let probed = own_member(host, member, o, o.timeout.min(Duration::from_secs(10))).await?;
    let old = serde_json::to_value(&probed.member.cluster.status).unwrap_or_default();
    let status = pull::heartbeat_status(&old, &probed.health, &crate::clock::now_rfc3339());
    let api: Api<KubeFedCluster> = Api::namespaced(host.client.clone(), &host.namespace);
    api.patch_status(
        &o.cluster,
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": status})),
    )
    .await
    .map_err(api_error)
    .with_context(|| {
        format!(
            "writing the status of KubeFedCluster {}/{}",
            host.namespace, o.cluster
        )
    })?;
    Ok(())
}

/// One round: the share read, applied, reported.
pub async fn round(
    host: &Host,
    member: &kube::Client,
    o: &AgentOptions,
    progress: &dyn Progress,
) -> Result<AgentRound> {
    let settings = host.settings().await?;
    let probed = own_member(host, member, o, settings.health.timeout).await?;
    let scope = RunScope {
        clusters: Some(BTreeSet::from([o.cluster.clone()])),
        namespace: o.namespace.clone(),
        ..RunScope::default()
    };
    let selection = Selection {
        scope: scope.clone(),
        timeout: o.timeout,
        probe_timeout: None,
        settings: Some(settings),
        whole_copies: false,
    };
    let mut seen =
        observe::observe_over(host, &selection, settings, vec![probed], scope, false).await?;
    let admitted = live::agent::admissions(&seen, &o.cluster);
    let writer =
        ReportWriter::list(&host.client, &report_namespace(&host.namespace, &o.cluster)).await?;
    own_versions(&mut seen, &writer, &o.cluster);
    let observed = observed_objects(&seen);
    let options = live::Options {
        selection,
        proposal: None,
        mode: Default::default(),
        concurrency: o.concurrency,
        attempts: o.attempts,
        wait: None,
        events: None,
        wait_ready: false,
        force_conflicts: false,
        report_only: false,
        rollout: Default::default(),
    };
    let outcome = live::agent::round(
        host,
        &mut seen,
        &options,
        (&writer, &o.cluster, &admitted),
        progress,
    )
    .await?;
    let reports_removed = writer
        .remove_stale(&observed, o.namespace.as_deref())
        .await?;
    Ok(AgentRound {
        report: outcome.report,
        reports_written: writer.written.load(std::sync::atomic::Ordering::Relaxed),
        reports_removed,
    })
}

/// The agent's own reports as its record of versions, in place of the
/// host's PropagatedVersions, which are written from them later.
fn own_versions(seen: &mut Observation, writer: &ReportWriter, cluster: &str) {
    for t in &seen.types {
        for fed in &t.objects {
            let key = key_of(fed);
            let Some(report) = writer
                .existing
                .get(cluster, &t.name, &key)
                .filter(|r| r.is_of(fed))
            else {
                continue;
            };
            let pv_key = propagated_version_key(&t.ty.target.kind, &key);
            if let Some(mine) = agent_versions(seen.versions.get(&pv_key), report) {
                seen.versions.insert(pv_key, mine);
            }
        }
    }
}

/// Every federated object the round read: its type, key and UID.
fn observed_objects(seen: &Observation) -> BTreeSet<(String, ObjectKey, String)> {
    let mut out = BTreeSet::new();
    for t in &seen.types {
        for fed in &t.objects {
            let uid = fed
                .pointer("/metadata/uid")
                .and_then(|u| u.as_str())
                .unwrap_or("");
            out.insert((t.name.to_string(), key_of(fed), uid.to_string()));
        }
    }
    out
}

/// The Lease the agents of one member elect their leader with, in the
/// member's federation namespace.
pub const AGENT_LEASE: &str = "kubefedctl-agent";

/// How a running agent ended: stopped by a signal (its number).
pub struct Stopped(pub u8);

/// Runs the agent until `stop` says so: leads (or waits as a standby for
/// the member's Lease), and while it leads, beats every
/// `pull::HEARTBEAT_SECONDS` and runs a round every `interval`. A failed
/// round or beat is logged and tried again, failed rounds backing off
/// (`pull::round_backoff`); the member keeps what it has. At each beat the
/// host token is renewed once due (`credential`). A leader that loses its Lease stops writing and stands by again.
pub async fn run(
    (host, credential): (&mut Host, &mut credential::HostCredential),
    member: &kube::Client,
    o: &AgentOptions,
    interval: Duration,
    stop: &mut crate::terminal::signals::Signals,
) -> Result<Stopped> {
    use crate::sync::lock::{LockState, RunLock, this_run};
    let lease_host = Host {
        context: "member".into(),
        client: member.clone(),
        namespace: host.namespace.clone(),
    };
    let timings = crate::core::run::lease::LeaseTimings::default();
    loop {
        tracing::info!(
            "agent of {}: waiting for the Lease {AGENT_LEASE} in the member",
            o.cluster
        );
        let lock = tokio::select! {
            sig = stop.next() => return Ok(Stopped(sig)),
            lock = RunLock::acquire(&lease_host, AGENT_LEASE, this_run(), Duration::MAX, timings) => lock?,
        };
        tracing::info!(
            "agent of {}: leading (rounds every {}s)",
            o.cluster,
            interval.as_secs()
        );
        let mut state = lock.state();
        let mut beats = tokio::time::interval(Duration::from_secs(pull::HEARTBEAT_SECONDS));
        let mut rounds = tokio::time::interval(interval);
        rounds.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failures = 0;
        let stopped = loop {
            let held = *state.borrow() == LockState::Held;
            tokio::select! {
                sig = stop.next() => break Some(sig),
                changed = state.changed() => {
                    if changed.is_err() || matches!(*state.borrow(), LockState::Lost { .. }) {
                        tracing::warn!("agent of {}: lost the lease; standing by", o.cluster);
                        break None;
                    }
                }
                // A leader that cannot renew its Lease (its member away)
                // still says so to the host; only its rounds wait.
                _ = beats.tick() => {
                    if let Err(e) = beat(host, member, o).await {
                        tracing::warn!("heartbeat: {}", crate::error::one_line(&e));
                    }
                    match credential.renew_if_due(host, member, &o.cluster).await {
                        Ok(true) => tracing::info!("agent of {}: host token renewed", o.cluster),
                        Ok(false) => {}
                        Err(e) => tracing::warn!("renewing the host token: {}", crate::error::one_line(&e)),
                    }
                }
                _ = rounds.tick(), if held => {
                    let done = round(host, member, o, &Quiet).await;
                    failures = if done.is_ok() { 0 } else { failures + 1 };
                    if failures > 0 {
                        let wait = pull::round_backoff(interval, failures - 1);
                        rounds.reset_at(tokio::time::Instant::now() + wait);
                    }
                    log_round(done, o);
                }
            }
        };
        if let Some(sig) = stopped {
            if let Err(e) = lock.release().await {
                tracing::warn!("releasing the lease: {}", crate::error::one_line(&e));
            }
            return Ok(Stopped(sig));
        }
    }
}

/// One heartbeat and one round under the member's Lease (`--once`),
/// waiting for a running agent's lease at most 20 s: never beside a
/// running leader.
pub async fn once(host: &Host, member: &kube::Client, o: &AgentOptions) -> Result<AgentRound> {
    use crate::sync::lock::{RunLock, this_run};
    let lease_host = Host {
        context: "member".into(),
        client: member.clone(),
        namespace: host.namespace.clone(),
    };
    let timings = crate::core::run::lease::LeaseTimings::default();
    let wait = Duration::from_secs(20);
    let lock = RunLock::acquire(&lease_host, AGENT_LEASE, this_run(), wait, timings)
        .await
        .context("the member's agent lease")?;
    let done = async {
        beat(host, member, o).await?;
        round(host, member, o, &Quiet).await
    }
    .await;
    lock.release().await?;
    done
}

/// Reports nothing: the agent logs each round in one line.
pub struct Quiet;

impl Progress for Quiet {
    fn requests(&self, _more: u64) {}
    fn request_done(&self) {}
}

/// One line per round, and its failures.
fn log_round(round: Result<AgentRound>, o: &AgentOptions) {
    match round {
        Ok(round) => {
            tracing::info!("{}", round.summary(&o.cluster));
            for n in &round.report.notes {
                tracing::info!("{n}");
            }
            for f in &round.report.failures {
                tracing::warn!("{f}");
            }
        }
        Err(e) => tracing::warn!("round: {}", crate::error::one_line(&e)),
    }
}

impl AgentRound {
    /// The round in one line.
    pub fn summary(&self, cluster: &str) -> String {
        let c = self
            .report
            .clusters
            .get(cluster)
            .cloned()
            .unwrap_or_default();
        format!(
            "{cluster}: {} created, {} updated, {} deleted, {} unchanged, {} failed; {} report(s) written, {} removed",
            c.created,
            c.updated,
            c.deleted,
            c.unchanged,
            c.failed,
            self.reports_written,
            self.reports_removed
        )
    }
}
