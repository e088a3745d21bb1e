//! `reconcile --watch`: the one-shot engine as a controller. Watches keep a
//! cache of the host (types, federated objects, FederatedNamespaces, RSPs,
//! clusters, the KubeFedConfig, versions, namespaces) and of every ready
//! member's managed objects; each change marks the federated objects it
//! touches, and a round re-decides exactly those with the same decide,
//! execute and record steps as a one-shot run (`live::round`). Full rounds
//! run at start, every `--resync-period`, and when types, clusters or the
//! KubeFedConfig change; members are probed every `--probe-interval`.
//!
//! Leader election is the run lock: one instance holds the Lease and works,
//! others (`--leader-elect`) wait to take it over once it expires.
//!
//! Faults: rounds run as tasks of their own (several at once, never two on
//! one object), so a member that stops answering holds back only its own
//! requests; probes run beside the loop; a lock that cannot be renewed
//! cancels every round and pauses writing until it is renewed (or lost);
//! watches start over by themselves (`sources`).

pub mod cache;
pub mod metrics;
pub mod process;
pub mod sources;

use crate::apply::{api_resource, dynamic_api, resource_of};
use crate::clients::host::Host;
use crate::clients::members::{self, Health, Member};
use crate::core::run::lease::RECONCILE_LEASE;
use crate::core::run::queue::WorkQueue;
use crate::parallel::locked;
use crate::sync::live::observe::{self, Observation};
use crate::sync::live::{self, Passes, RoundOutcome};
use crate::sync::lock::{self, LockState, RunLock};
use crate::terminal::signals::Signals;
use anyhow::{Result, bail};
use cache::{Cache, Dirt, WorkKey};
use kube::runtime::watcher;
use metrics::Metrics;
use sources::{Event, Source, Sources, Spec};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::sync::watch as state;
use tokio::task::{JoinHandle, JoinSet};

/// How long a start waits for member watches to list before the first
/// full round (a member slower than that joins the rounds when it lists).
const MEMBER_SYNC_WAIT: Duration = Duration::from_secs(30);

/// Rounds at once. Each works on objects no other round holds; the bound
/// only keeps a storm of events from opening unbounded tasks.
const ROUNDS_IN_FLIGHT: usize = 64;

/// How often a rebuild that failed (the host did not answer) is tried again.
const REBUILD_RETRY: Duration = Duration::from_secs(2);

/// `reconcile --watch` and its flags.
pub struct WatchOptions {
    /// What each round does (selection, concurrency, attempts, timeouts).
    pub run: live::Options,
    /// The host, without a read timeout: watches are silent while nothing
    /// changes.
    pub watch_client: kube::Client,
    /// `--probe-interval`; `None`: the KubeFedConfig's.
    pub probe_interval: Option<Duration>,
    pub resync_period: Duration,
    pub leader_elect: bool,
    pub lock_timeout: Duration,
    /// The KubeFedConfig's `leaderElect` (read at start).
    pub lock_timings: crate::core::run::lease::LeaseTimings,
    pub no_lock: bool,
    pub metrics_bind_address: Option<SocketAddr>,
    /// `-v 2`: one line per member change.
    pub verbosity: u8,
}

/// Runs until SIGTERM or Ctrl-C (then `Ok`), or until another instance
/// takes the lock over (then an error naming it; with `--leader-elect` this
/// instance stands by again instead).
pub async fn run(host: &Host, o: &WatchOptions, mut stop: Signals) -> Result<()> {
    limit_malloc_arenas();
    let metrics = Arc::new(Metrics::default());
    metrics
        .max_rounds
        .store(ROUNDS_IN_FLIGHT as u64, Ordering::Relaxed);
    if let Some(addr) = o.metrics_bind_address {
        metrics::serve(addr, metrics.clone()).await?;
    }
    let shared = Shared {
        host: Arc::new(host.clone()),
        run: Arc::new(o.run.clone()),
    };
    loop {
        let lock = if o.no_lock {
            None
        } else {
            match wait_for_lock(host, o, &mut stop).await? {
                Some(lock) => Some(lock),
                None => return Ok(()),
            }
        };
        metrics.leader.store(true, Ordering::Relaxed);
        tracing::info!(
            "watching the federation in {} (host {:?})",
            host.namespace,
            host.context
        );
        let mut controller = Controller::new(host, shared.clone(), o, metrics.clone());
        let ended = controller.run(lock.as_ref(), &mut stop).await;
        // Stopping: the types are no longer propagated (a lost lock's new
        // holder says so itself).
        if !matches!(ended, Ok(Ended::Lost { .. })) {
            controller.write_type_statuses(false).await;
        }
        drop(controller);
        metrics.leader.store(false, Ordering::Relaxed);
        metrics.synced.store(false, Ordering::Relaxed);
        *locked(&metrics.lock_suspended_since) = None;
        match ended {
            Ok(Ended::Stopped) => {
                if let Some(lock) = lock {
                    lock.release().await?;
                }
                return Ok(());
            }
            Ok(Ended::Lost { holder }) if o.leader_elect => {
                tracing::warn!("lock: {holder} holds the federation lock now; standing by");
            }
            Ok(Ended::Lost { holder }) => bail!(
                "lost the federation lock to {holder}; stopping (with --leader-elect this instance would stand by)"
            ),
            Err(e) => {
                if let Some(lock) = lock {
                    let _ = lock.release().await;
                }
                return Err(e);
            }
        }
    }
}

/// Waits for the federation lock: for ever with `--leader-elect` (a
/// standby), else up to `--lock-timeout`; `None` when a signal ended the
/// wait.
async fn wait_for_lock(
    host: &Host,
    o: &WatchOptions,
    stop: &mut Signals,
) -> Result<Option<RunLock>> {
    let wait = if o.leader_elect {
        tracing::info!(
            "waiting for the federation lock {}/{RECONCILE_LEASE} (--leader-elect)",
            host.namespace
        );
        Duration::MAX
    } else {
        o.lock_timeout
    };
    tokio::select! {
        lock = lock::take(host, RECONCILE_LEASE, wait, o.lock_timings) => Ok(Some(lock?)),
        _ = stop.next() => {
            tracing::info!("stopped while waiting for the federation lock");
            Ok(None)
        }
    }
}

/// What a round tells the metrics as it goes: each member write's time.
struct RoundProgress<'a>(&'a Metrics);

impl crate::sync::live::progress::Progress for RoundProgress<'_> {
    fn requests(&self, _: u64) {}
    fn request_done(&self) {}
    fn member_write(&self, effect: &crate::core::propagation::record::Effect, took: Duration) {
        self.0.member_write(effect, took);
    }
}

/// How a leadership term ended.
enum Ended {
    /// SIGTERM or Ctrl-C.
    Stopped,
    /// Another instance took the lock over.
    Lost { holder: String },
}

/// What rounds, as tasks of their own, share with the loop.
#[derive(Clone)]
struct Shared {
    host: Arc<Host>,
    run: Arc<live::Options>,
}

/// A round's result, back in the loop.
struct RoundDone {
    full: bool,
    taken: Vec<(WorkKey, Instant)>,
    result: Result<RoundResult>,
}

struct RoundResult {
    outcome: RoundOutcome,
    failed: BTreeSet<WorkKey>,
    changed: BTreeSet<WorkKey>,
    /// Changed a member or wrote to the host: its next round waits a second.
    wrote: BTreeSet<WorkKey>,
}

struct Controller<'a> {
    host: &'a Host,
    shared: Shared,
    o: &'a WatchOptions,
    metrics: Arc<Metrics>,
    cache: Cache,
    sources: Sources,
    rx: UnboundedReceiver<Event>,
    queue: WorkQueue<WorkKey>,
    members: Vec<Member>,
    /// Bumped whenever `members` is rebuilt (a probe of older members is
    /// not applied to newer ones).
    generation: u64,
    health: Vec<Health>,
    /// Failure lines printed, and when: a failure repeated by every retry
    /// is printed again only after a while.
    reported: HashMap<String, Instant>,
    /// Rounds running, each a task.
    rounds: JoinSet<RoundDone>,
    /// A full round is running (it runs alone).
    full_running: bool,
    /// A probe of every member, beside the loop: (generation, task).
    probing: Option<(u64, JoinHandle<Vec<Health>>)>,
    /// The lock is not renewed: no round, no write.
    suspended: bool,
    /// A rebuild failed (or was put off while suspended): when to try again.
    rebuild_due: Option<Instant>,
    /// Per member: probes in a row that disagree with its readiness
    /// (`core::cluster::health::after_probe`).
    streaks: HashMap<String, u32>,
}

impl<'a> Controller<'a> {
    /// A controller for one term of leadership: nothing watched yet.
    fn new(
        host: &'a Host,
        shared: Shared,
        o: &'a WatchOptions,
        metrics: Arc<Metrics>,
    ) -> Controller<'a> {
        let (tx, rx) = unbounded_channel();
        Controller {
            host,
            shared,
            o,
            sources: Sources::new(tx, metrics.clone()),
            metrics,
            cache: Cache::default(),
            rx,
            queue: WorkQueue::default(),
            members: Vec::new(),
            generation: 0,
            health: Vec::new(),
            reported: HashMap::new(),
            rounds: JoinSet::new(),
            full_running: false,
            probing: None,
            suspended: false,
            rebuild_due: None,
            streaks: HashMap::new(),
        }
    }
}

impl Controller<'_> {
    async fn run(&mut self, lock: Option<&RunLock>, stop: &mut Signals) -> Result<Ended> {
        if !self.start_watching(stop).await? {
            return Ok(Ended::Stopped);
        }
        let mut lock_state = lock.map(RunLock::state);
        let mut probe = interval(
            self.o
                .probe_interval
                .unwrap_or(self.cache.settings.health.period),
        )
        .await;
        let mut resync = interval(self.o.resync_period).await;
        let mut tick = interval(Duration::from_secs(1)).await;
        let mut full = true;
        // Whether events or rounds ran since the heap was last trimmed.
        let mut active = false;
        loop {
            self.metrics.beat();
            let retry = self.queue.next_retry(Instant::now());
            tokio::select! {
                biased;
                _ = stop.next() => {
                    self.finish_rounds().await;
                    return Ok(Ended::Stopped);
                }
                Some(now) = lock_changed(&mut lock_state) => match now {
                    LockState::Held => {
                        self.resume();
                        full = true;
                    }
                    LockState::Suspended { since } => self.suspend(since).await,
                    LockState::Lost { holder } => {
                        self.suspend(Instant::now()).await;
                        return Ok(Ended::Lost { holder });
                    }
                },
                Some(done) = self.rounds.join_next(), if !self.rounds.is_empty() => {
                    active = true;
                    if let Ok(done) = done {
                        self.finish(done);
                    }
                }
                Some(event) = self.rx.recv() => {
                    active = true;
                    full |= self.take_events(event).await;
                }
                probed = probe_done(&mut self.probing) => {
                    full |= self.probed(probed).await;
                    if std::mem::take(&mut active) {
                        release_free_memory();
                    }
                }
                _ = probe.tick() => self.start_probe(),
                _ = resync.tick() => {
                    self.try_rebuild().await;
                    full = true;
                }
                _ = tick.tick() => {
                    if self.rebuild_due.is_some_and(|at| at <= Instant::now()) {
                        self.try_rebuild().await;
                    }
                }
                _ = tokio::time::sleep_until(retry.unwrap_or_else(Instant::now).into()), if retry.is_some() => {}
            }
            self.notice_stalled_members().await;
            self.metrics
                .queue_depth
                .store(self.queue.len() as u64, Ordering::Relaxed);
            if self.suspended || !self.cache.host_synced(&self.host_sources()) {
                continue;
            }
            full = self.next_round(full);
        }
    }

    /// Each FederatedTypeConfig's status as a running controller writes it
    /// (`Running` for the types this watch propagates; all `NotRunning`
    /// when it stops), only where it changes. A failed write is reported
    /// and tried again at the next rebuild.
    async fn write_type_statuses(&mut self, running: bool) {
        if self.suspended {
            return;
        }
        let api: kube::Api<crate::api::core::FederatedTypeConfig> =
            kube::Api::namespaced(self.host.client.clone(), &self.host.namespace);
        for (name, ftc) in &self.cache.ftcs {
            let current = serde_json::to_value(&ftc.status).unwrap_or_default();
            let generation = ftc.metadata.generation.unwrap_or(0);
            let status_controller = (self.cache.settings)
                .writes_service_status(observe::service_status_type(ftc).is_some());
            let Some(status) = crate::core::types::typegen::ftc_status(
                &current,
                generation,
                running && ftc.spec.is_enabled(),
                status_controller,
            ) else {
                continue;
            };
            let patch = kube::api::Patch::Merge(serde_json::json!({ "status": status }));
            if let Err(e) = api
                .patch_status(name, &kube::api::PatchParams::default(), &patch)
                .await
            {
                tracing::warn!(
                    "FederatedTypeConfig {name}: writing its status: {}",
                    crate::apply::api_error_line(e)
                );
            }
        }
    }

    /// The host's own watches first (the types and clusters say what else
    /// to watch), then the members'; false when stopped meanwhile.
    async fn start_watching(&mut self, stop: &mut Signals) -> Result<bool> {
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

    /// Stopping: the rounds in flight complete.
    async fn finish_rounds(&mut self) {
        tracing::info!("stopping: the rounds in flight complete; releasing the federation lock");
        while let Some(done) = self.rounds.join_next().await {
            if let Ok(done) = done {
                self.finish(done);
            }
        }
    }

    /// An event and those queued behind it into the cache; what they touch
    /// into the queue. True when a full round is due.
    async fn take_events(&mut self, event: Event) -> bool {
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
            self.queue.add(k, now);
        }
        dirt.structure || dirt.all
    }

    /// Starts the next round if one may run; returns whether a full round
    /// is still due. A full round runs alone, after the rounds in flight.
    fn next_round(&mut self, full: bool) -> bool {
        if full {
            if self.rounds.is_empty() {
                self.start_round(true);
                return false;
            }
            return true;
        }
        if !self.full_running
            && self.rounds.len() < ROUNDS_IN_FLIGHT
            && self.queue.has_ready(Instant::now())
        {
            self.start_round(false);
        }
        false
    }

    /// The lock could not be renewed: every round in flight is cancelled
    /// (its objects wait again) and nothing is written until it is.
    async fn suspend(&mut self, since: Instant) {
        self.suspended = true;
        *locked(&self.metrics.lock_suspended_since) = Some(since);
        self.rounds.abort_all();
        while self.rounds.join_next().await.is_some() {}
        self.full_running = false;
        self.metrics.rounds_in_flight.store(0, Ordering::Relaxed);
        self.queue.abandon_in_flight();
    }

    /// The lock is renewed after a suspension: every watch lists again (what
    /// they missed while the host was away) and everything is re-decided.
    fn resume(&mut self) {
        if !self.suspended {
            return;
        }
        self.suspended = false;
        *locked(&self.metrics.lock_suspended_since) = None;
        // Started again at once (not at the rebuild): until each has listed
        // no round runs, and a host source that is not running would
        // count as synced.
        self.restart_sources(|_| true);
        self.rebuild_due = Some(Instant::now());
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
                        for w in &dirt.warnings {
                            tracing::warn!("{w}");
                        }
                        if dirt.structure && self.cache.host_synced(&self.host_sources()) && !self.members.is_empty() {
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

    /// The enabled types this run covers (`--type`).
    fn types(&self) -> Vec<String> {
        let wanted = &self.o.run.selection.types;
        self.cache
            .ftcs
            .iter()
            .filter(|(_, f)| f.spec.is_enabled())
            .filter(|(_, f)| {
                wanted.is_empty()
                    || wanted
                        .iter()
                        .any(|w| crate::clients::host::names_federated_type(f, w))
            })
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// [`Self::types`] with what the watches need of each.
    fn observed_types(&self) -> Vec<(String, crate::sync::live::observe::ObservedType)> {
        self.types()
            .into_iter()
            .filter_map(|name| {
                let t = self.cache.ftcs.get(&name)?;
                Some((name, crate::sync::live::observe::ObservedType::of(t)))
            })
            .collect()
    }

    fn namespace(&self) -> Option<String> {
        self.cache.settings.objects_namespace(
            &self.host.namespace,
            self.o.run.selection.namespace.as_deref(),
        )
    }

    /// The host's watches that rounds wait for.
    fn host_sources(&self) -> Vec<Source> {
        self.sources
            .running()
            .filter(|s| !matches!(s, Source::Member(..)))
            .cloned()
            .collect()
    }

    fn host_specs(&self) -> BTreeMap<Source, Spec> {
        use crate::api::core::{
            ClusterPropagatedVersion, FederatedTypeConfig, KubeFedCluster, KubeFedConfig,
            PropagatedVersion,
        };
        use crate::api::scheduling::ReplicaSchedulingPreference;
        let client = &self.o.watch_client;
        let fedns = Some(self.host.namespace.as_str());
        let ns = self.namespace();
        let spec =
            |ar: kube::api::ApiResource, namespace: Option<&str>, config: watcher::Config| Spec {
                api: dynamic_api(client, namespace, &ar),
                config,
                api_version: ar.api_version.clone(),
                kind: ar.kind.clone(),
                fingerprint: namespace.unwrap_or("").to_string(),
            };
        let plain = watcher::Config::default;
        let mut out = BTreeMap::from([
            (
                Source::Config,
                spec(
                    resource_of::<KubeFedConfig>(),
                    fedns,
                    plain().fields(&format!(
                        "metadata.name={}",
                        crate::api::KUBEFED_CONFIG_NAME
                    )),
                ),
            ),
            (
                Source::TypeConfigs,
                spec(resource_of::<FederatedTypeConfig>(), fedns, plain()),
            ),
            (
                Source::Clusters,
                spec(resource_of::<KubeFedCluster>(), fedns, plain()),
            ),
            (
                Source::Schedulings,
                spec(
                    resource_of::<ReplicaSchedulingPreference>(),
                    ns.as_deref(),
                    plain(),
                ),
            ),
            (
                Source::Versions(false),
                spec(resource_of::<PropagatedVersion>(), ns.as_deref(), plain()),
            ),
            (
                Source::Versions(true),
                spec(resource_of::<ClusterPropagatedVersion>(), None, plain()),
            ),
            (
                Source::Namespaces,
                spec(
                    api_resource("", "v1", "Namespace", "namespaces"),
                    None,
                    plain(),
                ),
            ),
        ]);
        for (name, t) in self.observed_types() {
            let mut config = plain();
            if let Some(sel) = &self.o.run.selection.selector
                && !t.ty.target.is_namespace()
            {
                config = config.labels(sel);
            }
            let in_ns = ns.as_deref().filter(|_| t.federated_namespaced);
            out.insert(Source::Federated(name), spec(t.federated, in_ns, config));
        }
        out
    }

    fn member_specs(&self) -> BTreeMap<Source, Spec> {
        let ns = self.namespace();
        let mut out = BTreeMap::new();
        for m in &self.members {
            let Some(client) = &m.watch_client else {
                continue;
            };
            if !self.touchable(&m.name) {
                continue;
            }
            for (name, t) in self.observed_types() {
                let in_ns = ns.as_deref().filter(|_| t.ty.namespaced);
                out.insert(
                    Source::Member(m.name.clone(), name),
                    Spec {
                        api: dynamic_api(client, in_ns, &t.target),
                        config: watcher::Config::default().labels(&format!(
                            "{}=true",
                            crate::core::propagation::desired::MANAGED_LABEL
                        )),
                        api_version: t.target.api_version.clone(),
                        kind: t.target.kind.clone(),
                        fingerprint: format!("{}/{}", m.fingerprint, in_ns.unwrap_or("")),
                    },
                );
            }
        }
        out
    }

    /// `--cluster` limits which members are touched.
    fn touchable(&self, cluster: &str) -> bool {
        let only = &self.o.run.selection.clusters;
        only.is_empty() || only.iter().any(|c| c == cluster)
    }

    /// [`Self::rebuild`], where a host that does not answer is no reason to
    /// stop: it is reported and tried again shortly (and not at all while
    /// the lock is suspended, as it writes the clusters' health).
    async fn try_rebuild(&mut self) {
        if self.suspended {
            self.rebuild_due = Some(Instant::now());
            return;
        }
        match self.rebuild().await {
            Ok(()) => self.rebuild_due = None,
            Err(e) => {
                self.report_failure(format!("host: {}", crate::error::one_line(&e)));
                self.rebuild_due = Some(Instant::now() + REBUILD_RETRY);
            }
        }
    }

    /// Members, their health and every watch, from the current cache:
    /// at start, after structure changes, at each resync.
    async fn rebuild(&mut self) -> Result<()> {
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
        let started = self.sync_sources();
        if !started.is_empty() {
            tracing::debug!("watching {} more source(s)", started.len());
        }
        Ok(())
    }

    /// Runs exactly the watches the cache's types and the members call for;
    /// a watch started now forgets what it saw until it lists. Returns the
    /// started ones.
    fn sync_sources(&mut self) -> Vec<Source> {
        let mut wanted = self.host_specs();
        wanted.extend(self.member_specs());
        let started = self.sources.sync(wanted);
        for s in &started {
            self.cache.forget(s);
        }
        started
    }

    /// Starts the watches `which` selects again, from a fresh list.
    fn restart_sources(&mut self, which: impl Fn(&Source) -> bool) {
        for s in self.sources.restart(which) {
            self.cache.forget(&s);
        }
        self.sync_sources();
    }

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
    fn probe_timeout(&self) -> Duration {
        self.o
            .run
            .selection
            .probe_timeout
            .unwrap_or(self.cache.settings.health.timeout)
    }

    /// Starts a probe of every member beside the loop (a member that does
    /// not answer keeps only its probe waiting).
    fn start_probe(&mut self) {
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

    /// A probe's result; returns whether a member came back (a full round
    /// follows: it lists again at once and is caught up). A member that
    /// went away asks for no round: a full round runs alone and would hold
    /// every other member's changes back while it rewrites each object's
    /// status; its objects show ClusterNotReady as they are next decided,
    /// and all of them at the next resync or when it is back.
    async fn probed(&mut self, (generation, health): (u64, Vec<Health>)) -> bool {
        if generation != self.generation || health.len() != self.members.len() {
            return false;
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
        !back.is_empty()
    }

    /// A member whose request got no answer within the timeout is not
    /// ready from now on (its objects show ClusterNotReady as they are next
    /// decided), without waiting for the next probe; the probe that it
    /// answers again brings it back.
    async fn notice_stalled_members(&mut self) {
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
    async fn record_cluster_events(&mut self, probed: &[Health]) {
        let Some(recorder) = self.shared.run.events.clone() else {
            return;
        };
        if self.suspended {
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
    async fn write_health(&mut self) {
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
            self.report_failure(format!("host: {}", crate::error::one_line(&e)));
        }
    }

    fn members_synced(&self) -> bool {
        let types = self.types();
        self.members
            .iter()
            .zip(&self.health)
            .filter(|(m, h)| h.is_ready() && m.watch_client.is_some() && self.touchable(&m.name))
            .all(|(m, _)| self.cache.member_synced(&m.name, &types))
    }

    /// The members a round may touch: the unready (their objects show
    /// ClusterNotReady) and the ready whose watches have listed.
    fn touched(&self) -> BTreeSet<String> {
        let types = self.types();
        self.members
            .iter()
            .zip(&self.health)
            .filter(|(m, _)| self.touchable(&m.name))
            .filter(|(m, h)| !h.is_ready() || self.cache.member_synced(&m.name, &types))
            .map(|(m, _)| m.name.clone())
            .collect()
    }

    fn observe(&self, keys: Option<&BTreeSet<WorkKey>>) -> Observation {
        let mut seen = self.cache.observe(
            &self.host.namespace,
            self.namespace().as_deref(),
            &self.types(),
            (&self.members, &self.health),
            self.touched(),
            keys,
        );
        // FederatedNamespaces are watched whatever -l says (they place
        // everything in them); -l still chooses which of them a round decides.
        if let Some(sel) = &self.o.run.selection.selector {
            // Checked by reconcile's validate step: it parses.
            let _ = observe::retain_selected_namespaces(&mut seen.types, sel);
        }
        seen
    }

    /// Starts a round as a task of its own: a full one over everything, or
    /// one over the keys that are ready (and in flight from now on).
    fn start_round(&mut self, full: bool) {
        let taken = self.queue.take_ready(Instant::now());
        if !full && taken.is_empty() {
            return;
        }
        let keys: BTreeSet<WorkKey> = taken.iter().map(|(k, _)| k.clone()).collect();
        let seen = self.observe(if full { None } else { Some(&keys) });
        let passes = Passes {
            cluster_health: false,
            dns: full,
        };
        if full {
            self.full_running = true;
            self.metrics.full_rounds.fetch_add(1, Ordering::Relaxed);
        }
        self.metrics
            .rounds_in_flight
            .fetch_add(1, Ordering::Relaxed);
        let shared = self.shared.clone();
        let metrics = self.metrics.clone();
        self.rounds.spawn(async move {
            let started = Instant::now();
            let mut seen = seen;
            let timeout = shared.run.selection.timeout;
            let result = async {
                observe::finish_from_cache(&shared.host, &mut seen, timeout, full).await?;
                let progress = RoundProgress(&metrics);
                live::round(&shared.host, &mut seen, &shared.run, passes, &progress).await
            }
            .await
            .map(|outcome| {
                let (failed, changed, wrote) = outcome_keys(&outcome);
                RoundResult {
                    outcome,
                    failed,
                    changed,
                    wrote,
                }
            });
            crate::parallel::drop_in_background(seen);
            let took = started.elapsed();
            locked(&metrics.round_time.0).observe(took);
            locked(&metrics.round_time_upstream.0).observe(took);
            RoundDone {
                full,
                taken,
                result,
            }
        });
    }

    /// A round ended: its keys succeed, or wait their backoff.
    fn finish(&mut self, done: RoundDone) {
        let now = Instant::now();
        self.metrics.rounds.fetch_add(1, Ordering::Relaxed);
        self.metrics
            .rounds_in_flight
            .fetch_sub(1, Ordering::Relaxed);
        if done.full {
            self.full_running = false;
            self.metrics.synced.store(true, Ordering::Relaxed);
        }
        let r = match done.result {
            Ok(r) => r,
            Err(e) => {
                self.metrics.failures.fetch_add(1, Ordering::Relaxed);
                self.report_failure(crate::error::one_line(&e));
                for (k, since) in done.taken {
                    self.queue.failed(k, since, now);
                }
                return;
            }
        };
        for (k, since) in done.taken {
            if r.failed.contains(&k) {
                self.queue.failed(k, since, now);
            } else {
                self.queue.succeeded(&k);
                if r.wrote.contains(&k) {
                    self.queue.wrote(k.clone(), now);
                }
                if r.changed.contains(&k) {
                    locked(&self.metrics.latency).observe(now.saturating_duration_since(since));
                }
            }
        }
        for o in &r.outcome.objects {
            for c in &o.changes {
                tracing::debug!("{c}");
            }
        }
        let failed = r.outcome.objects.iter().filter(|o| o.failed).count();
        self.metrics
            .objects_reconciled
            .fetch_add(r.outcome.objects.len() as u64, Ordering::Relaxed);
        self.metrics
            .objects_failed
            .fetch_add(failed as u64, Ordering::Relaxed);
        let report = &r.outcome.report;
        self.metrics
            .failures
            .fetch_add(report.failures.len() as u64, Ordering::Relaxed);
        for f in &report.failures {
            self.report_failure(f.clone());
        }
        for w in report.warnings.clone() {
            self.report_warning(w);
        }
        let mut counts = locked(&self.metrics.members);
        for m in &self.members {
            let c = counts.entry(m.name.clone()).or_default();
            c.requests = m.requests.load(Ordering::Relaxed);
            if let Some(r) = report.clusters.get(&m.name) {
                c.writes += (r.created + r.updated + r.deleted) as u64;
                c.failures += r.failed as u64;
            }
        }
    }

    /// Prints a warning line, unless it was printed in the last 5 minutes.
    fn report_warning(&mut self, line: String) {
        let now = Instant::now();
        let key = format!("warning: {line}");
        let repeat = self
            .reported
            .get(&key)
            .is_some_and(|at| now.duration_since(*at) < Duration::from_secs(300));
        if !repeat {
            tracing::warn!("{line}");
            self.reported.insert(key, now);
        }
    }

    /// Prints a failure line, unless it was printed in the last 5 minutes.
    fn report_failure(&mut self, line: String) {
        let now = Instant::now();
        let repeat = self
            .reported
            .get(&line)
            .is_some_and(|at| now.duration_since(*at) < Duration::from_secs(300));
        if !repeat {
            tracing::error!("{line}");
            self.reported.insert(line, now);
        }
        self.reported
            .retain(|_, at| now.duration_since(*at) < Duration::from_secs(600));
    }
}

/// `ready` or `not ready`, for the readiness lines.
/// A member's readiness as a log line: a warning when it is not ready.
fn log_readiness(name: &str, h: &Health) {
    if h.is_ready() {
        tracing::info!("{name}: {}", readiness(h));
    } else {
        tracing::warn!("{name}: {}", readiness(h));
    }
}

fn readiness(h: &Health) -> &'static str {
    if h.is_ready() { "ready" } else { "not ready" }
}

/// What a probe found, as each member's stall: a member that does not
/// answer its probe holds no request; one that answers may be asked again.
fn mark_stalls(members: &[Member], health: &[Health]) {
    for (m, h) in members.iter().zip(health) {
        if let Some(s) = &m.stalled {
            if h.is_ready() { s.clear() } else { s.set() }
        }
    }
}

/// The keys of a round's outcome that failed, those that changed a member,
/// and those that wrote anywhere: an outcome names its object as the queue
/// does.
fn outcome_keys(
    outcome: &RoundOutcome,
) -> (BTreeSet<WorkKey>, BTreeSet<WorkKey>, BTreeSet<WorkKey>) {
    let mut failed = BTreeSet::new();
    let mut changed = BTreeSet::new();
    let mut wrote = BTreeSet::new();
    for o in &outcome.objects {
        let k = o.object.federated();
        if o.failed {
            failed.insert(k.clone());
        }
        if !o.changes.is_empty() {
            changed.insert(k.clone());
        }
        if !o.changes.is_empty() || o.host_writes > 0 {
            wrote.insert(k.clone());
        }
    }
    (failed, changed, wrote)
}

/// A timer whose first tick is now (taken), and that delays missed ticks.
async fn interval(every: Duration) -> tokio::time::Interval {
    let mut t = tokio::time::interval(every);
    t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    t.tick().await;
    t
}

/// The lock's next state (never, without a lock or once it is settled).
async fn lock_changed(rx: &mut Option<state::Receiver<LockState>>) -> Option<LockState> {
    let Some(rx) = rx else {
        return std::future::pending().await;
    };
    if rx.changed().await.is_err() {
        return std::future::pending().await;
    }
    Some(rx.borrow_and_update().clone())
}

/// The probe beside the loop, when it is done (never, when none runs).
async fn probe_done(probing: &mut Option<(u64, JoinHandle<Vec<Health>>)>) -> (u64, Vec<Health>) {
    let Some((generation, task)) = probing.as_mut() else {
        return std::future::pending().await;
    };
    let health = task.await.unwrap_or_default();
    let generation = *generation;
    *probing = None;
    (generation, health)
}

/// glibc's malloc tuned for a process that lives for days through bursts:
/// two arenas, not eight per core (rounds run on every worker thread and on
/// short-lived threads, and each arena keeps what was freed in it), and a
/// fixed mmap threshold of 128 KiB (by default it rises to the largest
/// block freed, up to 32 MiB, after which a round's big buffers come from
/// the arenas and pin their pages between the cache's live blocks, where
/// `malloc_trim` cannot give them back).
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt has no preconditions; it sets allocator tunables.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Hands freed heap back to the system (every probe interval, after
/// activity). A full round copies every cached object, and events queue up
/// while a round runs; glibc's malloc keeps what was freed in its arenas,
/// so without this a watcher would idle at its peak.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions; it only returns free pages.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn merge(into: &mut Dirt, more: Dirt) {
    into.keys.extend(more.keys);
    into.warnings.extend(more.warnings);
    into.structure |= more.structure;
    into.all |= more.all;
}
