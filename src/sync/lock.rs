//! The run lock: a live reconcile holds the `coordination.k8s.io/v1` Lease
//! `kubefedctl-reconcile` in the federation namespace while it runs, so two
//! pipelines never interleave their writes (as Terraform's state lock).
//! Renewed in the background, released at the end (also on Ctrl-C and
//! SIGTERM), taken over once expired (a crashed holder). A constant number
//! of requests per run: one read and one write to take it, one write per
//! renewal, one to release it. The rules are `core::lease`.

use crate::apply::{api_error, resource_of};
use crate::core::lease::{self, Acquire, LEASE_SECONDS, ago, identity, micro_time, taken};
use crate::host::Host;
use anyhow::{Context, Result, bail};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
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

/// A held lock; [`RunLock::release`] gives it back.
pub struct RunLock {
    api: Api<DynamicObject>,
    name: String,
    me: String,
    renewal: JoinHandle<()>,
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
    pub async fn acquire(host: &Host, name: &str, me: String, wait: Duration) -> Result<RunLock> {
        let api = lease_api(host);
        let deadline = Instant::now().checked_add(wait);
        loop {
            let current = api
                .get_opt(name)
                .await
                .map_err(api_error)
                .context("reading the federation lock")?;
            let current = current.map(serde_json::to_value).transpose()?;
            let now = crate::clock::now_unix();
            let attempt = match lease::acquire(current.as_ref(), now) {
                Acquire::Create => create(&api, name, &me, now).await.map(|()| None),
                Acquire::Take { previous } => {
                    let current = current.as_ref().expect("a lease to take");
                    take(&api, name, &me, now, current).await.map(|()| {
                        previous.map(|(holder, expired)| {
                            format!("{holder}, expired {} ago", ago(expired))
                        })
                    })
                }
                Acquire::Held { holder, held_for } => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        let waited = if wait.is_zero() {
                            "; --lock-timeout waits".to_string()
                        } else {
                            format!(" (waited {wait:?})")
                        };
                        bail!(
                            "federation is being reconciled by {holder} since {} ago{waited}",
                            ago(held_for)
                        );
                    }
                    tokio::time::sleep(Duration::from_secs(1).min(wait)).await;
                    continue;
                }
            };
            match attempt {
                Ok(took_over) => {
                    let renewal = tokio::spawn(renew(api.clone(), name.to_string(), me.clone()));
                    return Ok(RunLock {
                        api,
                        name: name.to_string(),
                        me,
                        renewal,
                        took_over,
                    });
                }
                // Another run got there first: look again.
                Err(Lost) => continue,
            }
        }
    }

    /// The lease is no longer ours: another holder took it over, or it could
    /// not be renewed for longer than its renew deadline.
    pub fn is_lost(&self) -> bool {
        self.renewal.is_finished()
    }

    /// Stops renewing and clears the holder (only if still ours).
    pub async fn release(self) -> Result<()> {
        self.renewal.abort();
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
        self.api
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(api_error)
            .context("releasing the federation lock")?;
        Ok(())
    }
}

/// Someone else changed the lease between our read and our write.
struct Lost;

async fn create(api: &Api<DynamicObject>, name: &str, me: &str, now: i64) -> Result<(), Lost> {
    let body = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name}, "spec": taken(me, now, 0)});
    let body: DynamicObject = serde_json::from_value(body).expect("a Lease");
    match api.create(&PostParams::default(), &body).await {
        Ok(_) => Ok(()),
        Err(_) => Err(Lost),
    }
}

async fn take(
    api: &Api<DynamicObject>,
    name: &str,
    me: &str,
    now: i64,
    current: &Value,
) -> Result<(), Lost> {
    let transitions = current
        .pointer("/spec/leaseTransitions")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let had_holder = current
        .pointer("/spec/holderIdentity")
        .and_then(Value::as_str)
        .is_some_and(|h| !h.is_empty());
    let patch = json!({
        "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
        "spec": taken(me, now, transitions + i64::from(had_holder)),
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|_| Lost)
}

/// Renews every third of the lease's duration while the run lasts; returns
/// when the lease is lost (taken over, or not renewed within the renew
/// deadline: two thirds of its duration, as KubeFed's leader election).
async fn renew(api: Api<DynamicObject>, name: String, me: String) {
    let every = Duration::from_secs((LEASE_SECONDS / 3).max(1) as u64);
    let deadline = Duration::from_secs((LEASE_SECONDS * 2 / 3).max(1) as u64);
    let mut renewed = Instant::now();
    loop {
        tokio::time::sleep(every).await;
        if renewed.elapsed() > deadline {
            tracing::warn!("the federation lock could not be renewed in time");
            return;
        }
        let patch = json!({"spec": {"renewTime": micro_time(crate::clock::now_unix())}});
        let current = api.get_opt(&name).await.ok().flatten();
        let ours = current
            .as_ref()
            .and_then(|l| l.data.pointer("/spec/holderIdentity"))
            .and_then(Value::as_str)
            == Some(me.as_str());
        if !ours {
            tracing::warn!("the federation lock was taken over while this run was slow");
            return;
        }
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => renewed = Instant::now(),
            Err(e) => tracing::warn!(
                "renewing the federation lock: {}",
                crate::apply::api_error_line(e)
            ),
        }
    }
}
