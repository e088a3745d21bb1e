//! The run lock: a live reconcile holds the `coordination.k8s.io/v1` Lease
//! `kubefedctl-reconcile` in the federation namespace while it runs, so two
//! pipelines never interleave their writes (as Terraform's state lock).
//! Renewed in the background, released at the end (also on Ctrl-C and
//! SIGTERM), taken over once expired (a crashed holder). A constant number
//! of requests per run: one read and one write to take it, one write per
//! renewal, one to release it. A holder that loses contact with the host
//! stops writing at the renew deadline and renews when the host answers
//! again, unless someone took the lease meanwhile. The rules are
//! `core::run::lease`.

use crate::apply::{api_error, resource_of};
use crate::clients::host::Host;
use crate::core::run::lease::{
    self, Acquire, LeaseTimings, Renewal, ago, identity, micro_time, taken,
};
use anyhow::{Context, Result, bail};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Who this run is: host name, pid, and the CI job when there is one.
pub fn this_run() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".into());
    let job = ["CI_JOB_ID", "GITHUB_RUN_ID", "BUILD_ID"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|j| !j.is_empty()));
    identity(&host, std::process::id(), job.as_deref())
}

/// Where a held lock stands, as its renewal sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockState {
    /// Renewed within the renew deadline: this holder may write.
    Held,
    /// Not renewed for longer than the renew deadline (the host did not
    /// answer): no write may start until it is renewed again. `since`: the
    /// last renewal.
    Suspended { since: Instant },
    /// Someone else took it over (or it was released or deleted by another):
    /// this holder must never write again under it.
    Lost { holder: String },
}

/// Who holds KubeFed's own controller-manager leader lock in the
/// federation namespace, if anyone does now: a migration must not have
/// both propagating. Only the objects the KubeFedConfig's
/// `leaderElect.resourceLock` names are read (`LeaderLock`): never a v1
/// Endpoints nobody locks with, which 1.33+ servers warn about.
pub async fn kubefed_controller_holder(host: &Host) -> Result<Option<String>> {
    use crate::core::run::lease::{
        KUBEFED_LEADER_LOCK, LEADER_ANNOTATION, LockObject, live_holder,
    };
    use k8s_openapi::api::core::v1::{ConfigMap, Endpoints};
    let now = crate::clock::now_unix();
    for object in host.settings().await?.kubefed_leader_lock.objects() {
        let resource = match object {
            LockObject::Lease => resource_of::<Lease>(),
            LockObject::ConfigMap => resource_of::<ConfigMap>(),
            LockObject::Endpoints => resource_of::<Endpoints>(),
        };
        let Some(lock) = host
            .object(resource, true, KUBEFED_LEADER_LOCK)
            .get()
            .await?
        else {
            continue;
        };
        // A Lease keeps client-go's record as its spec; a ConfigMap or an
        // Endpoints as JSON in an annotation.
        let record = match object {
            LockObject::Lease => Some(lock["spec"].clone()),
            _ => lock["metadata"]["annotations"][LEADER_ANNOTATION]
                .as_str()
                .and_then(|text| serde_json::from_str::<Value>(text).ok()),
        };
        if let Some(holder) = record.and_then(|r| live_holder(&r, now)) {
            return Ok(Some(holder));
        }
    }
    Ok(None)
}

/// Refuses to run beside a live KubeFed controller-manager (unless `force`).
pub async fn refuse_beside_kubefed(host: &Host, force: bool) -> Result<()> {
    if force {
        return Ok(());
    }
    if let Some(holder) = kubefed_controller_holder(host).await? {
        bail!(
            "KubeFed's controller-manager ({holder}) holds its leader lock {}/{}: it propagates this federation; stop it first, or run with --force",
            host.namespace,
            crate::core::run::lease::KUBEFED_LEADER_LOCK
        );
    }
    Ok(())
}

/// The federation lock for a command that changes the whole federation
/// (`what`: `unjoin --cleanup`, `migrate karmada`): refused while any shard
/// of a reconcile or watch holds a live lease, then the unsharded lease
/// taken (waiting up to `wait`).
pub async fn hold_whole_federation(host: &Host, what: &str, wait: Duration) -> Result<RunLock> {
    use crate::core::run::lease::{RECONCILE_LEASE, live_holder};
    let leases: Api<Lease> = Api::namespaced(host.client.clone(), &host.namespace);
    let listed = leases
        .list(&kube::api::ListParams::default())
        .await
        .map_err(api_error)?;
    let now = crate::clock::now_unix();
    for lease in listed.items {
        let name = lease.metadata.name.clone().unwrap_or_default();
        if !name.starts_with(&format!("{RECONCILE_LEASE}-")) {
            continue;
        }
        if let Some(holder) = live_holder(&serde_json::to_value(&lease.spec)?, now) {
            bail!(
                "a sharded reconcile holds lease {}/{name} ({holder}): stop it before {what}",
                host.namespace
            );
        }
    }
    let timings = host.settings().await?.leader_elect;
    take(host, RECONCILE_LEASE, wait, timings)
        .await
        .with_context(|| format!("{what} holds the federation lock while it works"))
}

/// Takes the lock `name` for this run (waiting up to `wait`), and says from
/// whom when it took over an expired one: the one way a one-shot run and
/// the watch take it.
pub async fn take(
    host: &Host,
    name: &str,
    wait: Duration,
    timings: LeaseTimings,
) -> Result<RunLock> {
    let lock = RunLock::acquire(host, name, this_run(), wait, timings).await?;
    if let Some(previous) = &lock.took_over {
        tracing::info!("note: took over the federation lock from {previous}");
    }
    Ok(lock)
}

/// A held lock; [`RunLock::release`] gives it back.
pub struct RunLock {
    api: Api<DynamicObject>,
    name: String,
    me: String,
    renewal: JoinHandle<()>,
    state: watch::Receiver<LockState>,
    /// Set when taking it over from a holder that stopped renewing.
    pub took_over: Option<String>,
}

fn lease_api(host: &Host) -> Api<DynamicObject> {
    Api::namespaced_with(
        host.client.clone(),
        &host.namespace,
        &resource_of::<Lease>(),
    )
}

impl RunLock {
    /// Takes the lease `name`, waiting up to `wait` for its holder
    /// (`Duration::MAX`: as long as it takes, as a standby instance does).
    pub async fn acquire(
        host: &Host,
        name: &str,
        me: String,
        wait: Duration,
        timings: LeaseTimings,
    ) -> Result<RunLock> {
        let api = lease_api(host);
        let deadline = Instant::now().checked_add(wait);
        let standby = wait == Duration::MAX;
        let mut unreachable = false;
        loop {
            let current = match api.get_opt(name).await {
                Ok(c) => c,
                // A standby outlives host outages: it keeps waiting.
                Err(e) if standby => {
                    if !std::mem::replace(&mut unreachable, true) {
                        tracing::warn!(
                            "lock: cannot read the lease {name} ({}); still waiting",
                            crate::apply::api_error_line(e)
                        );
                    }
                    tokio::time::sleep(timings.retry_period).await;
                    continue;
                }
                Err(e) => {
                    return Err(api_error(e)).with_context(|| format!("reading the lease {name}"));
                }
            };
            let current = current.map(serde_json::to_value).transpose()?;
            let now = crate::clock::now_unix();
            let attempt = match lease::acquire(current.as_ref(), now) {
                Acquire::Create => create(&api, name, &me, now, &timings)
                    .await
                    .map(|rv| (rv, None)),
                Acquire::Take { previous } => {
                    let current = current.as_ref().expect("a lease to take");
                    take_over(&api, name, &me, now, current, &timings)
                        .await
                        .map(|rv| {
                            let previous = previous.map(|(holder, expired)| {
                                format!("{holder}, expired {} ago", ago(expired))
                            });
                            (rv, previous)
                        })
                }
                Acquire::Held { holder, held_for } => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        bail!(held_elsewhere(&holder, held_for, wait));
                    }
                    tokio::time::sleep(Duration::from_secs(1).min(wait)).await;
                    continue;
                }
            };
            match attempt {
                Ok((rv, took_over)) => {
                    let transitions = lease::transitions_after_take(current.as_ref());
                    let renewer = Renewer {
                        api: api.clone(),
                        name: name.to_string(),
                        me: me.clone(),
                        resource_version: rv,
                        transitions,
                        timings,
                    };
                    return Ok(RunLock::renewed_by(renewer, took_over));
                }
                // Another run got there first: look again.
                Err(Lost) => continue,
            }
        }
    }

    /// The lock just taken, its renewal started.
    fn renewed_by(renewer: Renewer, took_over: Option<String>) -> RunLock {
        let (api, name, me) = (
            renewer.api.clone(),
            renewer.name.clone(),
            renewer.me.clone(),
        );
        let (tx, state) = watch::channel(LockState::Held);
        let renewal = tokio::spawn(renewer.run(tx));
        RunLock {
            api,
            name,
            me,
            renewal,
            state,
            took_over,
        }
    }

    /// Follows the lock's state (a controller stops writing while it is not
    /// [`LockState::Held`]).
    pub fn state(&self) -> watch::Receiver<LockState> {
        self.state.clone()
    }

    /// Stops renewing and clears the holder (only if still ours). A renewal
    /// already on its way when the renewer was stopped can land between the
    /// read and the release: that 409 is answered by reading the lease again
    /// (a few times at most), as the renewal itself answers one.
    pub async fn release(self) -> Result<()> {
        self.renewal.abort();
        let mut conflicts = 0;
        loop {
            let current = self.api.get_opt(&self.name).await.map_err(api_error)?;
            let Some(current) = current else {
                return Ok(());
            };
            let current = serde_json::to_value(current)?;
            if current
                .pointer("/spec/holderIdentity")
                .and_then(Value::as_str)
                != Some(&self.me)
            {
                return Ok(());
            }
            let patch = json!({"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                               "spec": {"holderIdentity": null, "renewTime": null, "acquireTime": null}});
            match self
                .api
                .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 && conflicts < RELEASE_CONFLICTS => {
                    conflicts += 1;
                }
                Err(e) => {
                    return Err(api_error(e))
                        .with_context(|| format!("releasing the lease {}", self.name));
                }
            }
        }
    }
}

/// Conflicts a release reads past: each is a renewal that was in flight.
const RELEASE_CONFLICTS: u32 = 3;

impl Drop for RunLock {
    fn drop(&mut self) {
        self.renewal.abort();
    }
}

/// Someone else changed the lease between our read and our write.
struct Lost;

/// Creates the lease held by `me`; its resourceVersion.
async fn create(
    api: &Api<DynamicObject>,
    name: &str,
    me: &str,
    now: i64,
    timings: &LeaseTimings,
) -> Result<String, Lost> {
    let body = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name}, "spec": taken(me, now, 0, timings)});
    let body: DynamicObject = serde_json::from_value(body).expect("a Lease");
    match api.create(&PostParams::default(), &body).await {
        Ok(l) => Ok(l.metadata.resource_version.unwrap_or_default()),
        Err(_) => Err(Lost),
    }
}

/// Takes `current` over for `me` (a compare-and-swap on its
/// resourceVersion); the new resourceVersion.
async fn take_over(
    api: &Api<DynamicObject>,
    name: &str,
    me: &str,
    now: i64,
    current: &Value,
    timings: &LeaseTimings,
) -> Result<String, Lost> {
    let patch = json!({
        "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
        "spec": taken(me, now, lease::transitions_after_take(Some(current)), timings),
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|l| l.metadata.resource_version.unwrap_or_default())
        .map_err(|_| Lost)
}

/// The renewal of a held lease, in the background while the run lasts.
struct Renewer {
    api: Api<DynamicObject>,
    name: String,
    me: String,
    /// The lease as this holder last wrote it.
    resource_version: String,
    /// The lease's transitions when this holder took it.
    transitions: i64,
    timings: LeaseTimings,
}

/// What one renewal attempt found.
enum Renewed {
    Yes,
    LostTo(String),
}

impl Renewer {
    /// Renews every third of the lease's duration. When the host does not
    /// answer for the renew deadline (two thirds of the duration, as
    /// KubeFed's leader election), the state becomes `Suspended` at that
    /// instant, whatever request is still in flight, and the renewal keeps
    /// trying every retry period: lost contact is not lost leadership. It
    /// ends only when another holder took the lease over (`Lost`).
    async fn run(mut self, tx: watch::Sender<LockState>) {
        let every = self.timings.renew_every();
        let deadline = self.timings.renew_deadline;
        let retry = self.timings.retry_period;
        let mut renewed = Instant::now();
        let mut next = renewed + every;
        loop {
            let held = *tx.borrow() == LockState::Held;
            let stop_writing = renewed + deadline;
            if held && Instant::now() >= stop_writing {
                tracing::warn!(
                    "lock: not renewed for {}s (the host does not answer); no writes until it is",
                    renewed.elapsed().as_secs()
                );
                let _ = tx.send(LockState::Suspended { since: renewed });
                continue;
            }
            let wake = if held { next.min(stop_writing) } else { next };
            tokio::time::sleep_until(wake.into()).await;
            if Instant::now() < next {
                continue;
            }
            // A renewal must not outlast the deadline it protects.
            let limit = if held {
                stop_writing
            } else {
                Instant::now() + every
            };
            let attempt = tokio::time::timeout_at(limit.into(), self.renew_once()).await;
            match attempt {
                Ok(Ok(Renewed::Yes)) => {
                    if !held {
                        tracing::info!(
                            "lock: renewed after {}s without contact; resuming",
                            renewed.elapsed().as_secs()
                        );
                    }
                    renewed = Instant::now();
                    next = renewed + every;
                    if !held {
                        let _ = tx.send(LockState::Held);
                    }
                }
                Ok(Ok(Renewed::LostTo(holder))) => {
                    let _ = tx.send(LockState::Lost { holder });
                    return;
                }
                Ok(Err(e)) => {
                    tracing::debug!(
                        "renewing the lease {}: {}",
                        self.name,
                        crate::apply::api_error_line(e)
                    );
                    next = Instant::now() + retry;
                }
                Err(_) => next = Instant::now() + retry,
            }
        }
    }

    /// One renewal: a merge patch of `renewTime` with this holder's last
    /// resourceVersion as precondition (one request). A conflict means the
    /// lease changed since: read it, and renew again only if nobody took it
    /// over in between (`core::run::lease::renewal`).
    async fn renew_once(&mut self) -> Result<Renewed, kube::Error> {
        let patch = |rv: &str| {
            json!({"metadata": {"resourceVersion": rv},
                   "spec": {"renewTime": micro_time(crate::clock::now_unix())}})
        };
        let params = PatchParams::default();
        let first = self
            .api
            .patch(
                &self.name,
                &params,
                &Patch::Merge(&patch(&self.resource_version)),
            )
            .await;
        let written = match first {
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let current = self.api.get_opt(&self.name).await?;
                let current = current.map(|l| serde_json::to_value(l).unwrap_or_default());
                match lease::renewal(current.as_ref(), &self.me, self.transitions) {
                    Renewal::Lost { holder } => return Ok(Renewed::LostTo(holder)),
                    Renewal::Ours => {
                        let rv = current
                            .as_ref()
                            .and_then(|c| c.pointer("/metadata/resourceVersion"))
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string();
                        self.api
                            .patch(&self.name, &params, &Patch::Merge(&patch(&rv)))
                            .await?
                    }
                }
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                return Ok(Renewed::LostTo("nobody (the lease was deleted)".into()));
            }
            other => other?,
        };
        self.resource_version = written.metadata.resource_version.unwrap_or_default();
        Ok(Renewed::Yes)
    }
}
/// Why a run that waited `wait` for the lock gives up: who holds it and
/// since when (`held_for` seconds), and how to wait longer.
fn held_elsewhere(holder: &str, held_for: i64, wait: Duration) -> String {
    let waited = if wait.is_zero() {
        "; --lock-timeout waits".to_string()
    } else {
        format!(" (waited {wait:?})")
    };
    format!(
        "federation is being reconciled by {holder} since {} ago{waited}",
        ago(held_for)
    )
}
