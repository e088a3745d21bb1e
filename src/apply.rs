//! Writing objects idempotently, and taking back what a failed run created.
//!
//! `ensure` reads before it writes: a missing object is created, one that
//! already says what we want is left alone (no write at all), one that
//! differs is updated or refused, as the caller asks. Every object a run
//! creates is recorded in a [`Journal`], so that a failure part-way can
//! delete exactly those, newest first, in whichever cluster they live.

use crate::core::propagation::compare::{is_subset, overlay};
use anyhow::{Context, Result, anyhow, bail};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::{Client, Resource};
use serde_json::Value;
use std::fmt;

/// Whether a command writes what it decides or only says what it would
/// write (`--dry-run`): resolved from the flag once, before any work, as
/// kubectl's `DryRunStrategy` is; the helpers that write take this, never
/// a flag's bool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WriteMode {
    /// Writes (the default).
    #[default]
    Write,
    /// `--dry-run` (=client): decides here and prints, writing nothing.
    DryRun,
}

impl WriteMode {
    pub fn is_dry_run(self) -> bool {
        self == WriteMode::DryRun
    }

    pub fn writes(self) -> bool {
        self == WriteMode::Write
    }
}

/// The API resource of a typed object (k8s-openapi or our own CRDs).
pub fn resource_of<K: Resource<DynamicType = ()>>() -> ApiResource {
    ApiResource::erase::<K>(&())
}

/// The API resource `group/version` `kind` (`plural`); `""` is the core group.
pub fn api_resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version: if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.to_string(),
        plural: plural.to_string(),
    }
}

/// A dynamic Api in `namespace`, or cluster-wide (or across all namespaces)
/// when there is none.
pub fn dynamic_api(
    client: &Client,
    namespace: Option<&str>,
    resource: &ApiResource,
) -> Api<DynamicObject> {
    match namespace.filter(|n| !n.is_empty()) {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// One object in one cluster.
#[derive(Clone)]
pub struct ObjectRef {
    /// The cluster's name, for messages (`host`, `member1`).
    pub cluster: String,
    pub client: Client,
    pub resource: ApiResource,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectRef {
    pub fn new(
        cluster: &str,
        client: &Client,
        resource: ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> ObjectRef {
        ObjectRef {
            cluster: cluster.to_string(),
            client: client.clone(),
            resource,
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        }
    }

    fn api(&self) -> Api<DynamicObject> {
        dynamic_api(&self.client, self.namespace.as_deref(), &self.resource)
    }

    /// The object if it exists.
    pub async fn get(&self) -> Result<Option<Value>> {
        match self.api().get_opt(&self.name).await {
            Ok(o) => Ok(o.map(|o| serde_json::to_value(o).expect("objects serialize"))),
            Err(e) => Err(read_error(e, || format!("reading {self}"))),
        }
    }

    /// Deletes the object; `false` when it was already gone.
    pub async fn delete(&self) -> Result<bool> {
        let params = DeleteParams::background();
        match self.api().delete(&self.name, &params).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
            Err(e) => Err(api_error(e)).with_context(|| format!("deleting {self}")),
        }
    }
}

/// `kind[.group]/name`, as kubectl prints objects, plus the cluster.
impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} in {}", self.short(), self.cluster)
    }
}

impl ObjectRef {
    /// `kind[.group]/name` without the cluster.
    pub fn short(&self) -> String {
        let kind = self.resource.kind.to_lowercase();
        if self.resource.group.is_empty() {
            format!("{kind}/{}", self.name)
        } else {
            format!("{kind}.{}/{}", self.resource.group, self.name)
        }
    }
}

/// What `ensure` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Created,
    Updated,
    Unchanged,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Created => "created",
            Outcome::Updated => "updated",
            Outcome::Unchanged => "unchanged",
        })
    }
}

/// What to do with an existing object that differs from the desired one.
#[derive(Clone, Debug)]
pub enum OnExisting {
    /// Bring it in line (fields of `desired` replace the live ones).
    Update,
    /// As `Update`, but `desired`'s top-level fields (other than
    /// metadata) must be matched exactly: fields the live object has
    /// beyond them are no longer wanted and go (KubeFed's join replaces
    /// a KubeFedCluster's spec and a Secret's data).
    Replace,
    /// Fail with this message (it exists, and the caller forbids that).
    Fail(String),
    /// Leave it as it is.
    Keep,
}

/// Objects created by this run, for rollback.
#[derive(Default)]
pub struct Journal {
    created: Vec<ObjectRef>,
}

impl Journal {
    pub fn record(&mut self, r: ObjectRef) {
        self.created.push(r);
    }

    pub fn is_empty(&self) -> bool {
        self.created.is_empty()
    }

    /// Deletes what was created, newest first. Returns one line per object:
    /// what was removed, or what could not be.
    pub async fn rollback(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        while let Some(r) = self.created.pop() {
            match r.delete().await {
                Ok(_) => lines.push(format!("deleted {r}")),
                Err(e) => lines.push(format!(
                    "could not delete {r}: {}",
                    crate::error::one_line(&e)
                )),
            }
        }
        lines
    }
}

/// Makes `target` hold `desired` (a full object as JSON, with apiVersion,
/// kind and metadata.name). Returns what happened and the object as stored.
pub async fn ensure(
    target: &ObjectRef,
    desired: &Value,
    on_existing: &OnExisting,
    journal: &mut Journal,
) -> Result<(Outcome, Value)> {
    if let Some(live) = target.get().await? {
        return reconcile_existing(target, desired, live, on_existing).await;
    }
    let obj: DynamicObject =
        serde_json::from_value(desired.clone()).with_context(|| format!("building {target}"))?;
    match target.api().create(&PostParams::default(), &obj).await {
        Ok(created) => {
            journal.record(target.clone());
            Ok((Outcome::Created, serde_json::to_value(created)?))
        }
        // Someone else created it between our read and our write.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let live = target
                .get()
                .await?
                .ok_or_else(|| anyhow!("{target} exists and does not"))?;
            reconcile_existing(target, desired, live, on_existing).await
        }
        Err(e) => Err(api_error(e)).with_context(|| format!("creating {target}")),
    }
}

async fn reconcile_existing(
    target: &ObjectRef,
    desired: &Value,
    live: Value,
    on_existing: &OnExisting,
) -> Result<(Outcome, Value)> {
    if is_subset(desired, &live)
        && (!matches!(on_existing, OnExisting::Replace) || nothing_beyond(desired, &live))
    {
        return Ok((Outcome::Unchanged, live));
    }
    match on_existing {
        OnExisting::Keep => Ok((Outcome::Unchanged, live)),
        OnExisting::Fail(msg) => bail!("{msg}"),
        OnExisting::Update | OnExisting::Replace => {
            let body: DynamicObject = serde_json::from_value(overlay(&live, desired))?;
            let updated = target
                .api()
                .replace(&target.name, &PostParams::default(), &body)
                .await
                .map_err(api_error)
                .with_context(|| format!("updating {target}"))?;
            Ok((Outcome::Updated, serde_json::to_value(updated)?))
        }
    }
}

/// What kube says when a server's error body is not a Kubernetes Status
/// (e.g. `404 page not found` for a resource the server does not serve).
const NOT_A_STATUS: &str = "Failed to parse error data";

/// kube's API errors as one clear line: the server's message and code.
/// A body that is not a Status is quoted as the server's text after its
/// HTTP code, never as kube's "Failed to parse error data".
pub fn api_error(e: kube::Error) -> anyhow::Error {
    match e {
        kube::Error::Api(s) if s.reason == NOT_A_STATUS => {
            anyhow!("the server answered {}: {}", s.code, s.message.trim())
        }
        kube::Error::Api(s) => anyhow!("{} ({} {})", s.message, s.code, s.reason),
        // A server that did not answer: its line, the library's error below.
        other => match crate::error::no_answer(&other) {
            Some(found) => anyhow::Error::new(crate::error::NoAnswer {
                line: found.line.clone(),
                source: Some(Box::new(other)),
            }),
            None => anyhow!(crate::error::source_chain(&other)),
        },
    }
}

/// [`api_error`] for a read, with what was read as its context; of a
/// server that gave no answer, its line alone says it all (`the connection
/// to the server ... was refused`), as kubectl says it, whichever object
/// the command happened to read first.
pub fn read_error(e: kube::Error, what: impl FnOnce() -> String) -> anyhow::Error {
    let e = api_error(e);
    if e.is::<crate::error::NoAnswer>() {
        e
    } else {
        e.context(what())
    }
}

/// [`api_error`] as a line (for member results and reports).
pub fn api_error_line(e: kube::Error) -> String {
    crate::error::one_line(&api_error(e))
}

/// The live object's top-level fields named by `desired` (metadata
/// aside) hold nothing `desired` does not say.
fn nothing_beyond(desired: &Value, live: &Value) -> bool {
    desired
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, d)| k == "metadata" || k == "apiVersion" || k == "kind" || is_subset(&live[k], d))
}

/// What `ensure` would do, reading only.
pub async fn preview(
    target: &ObjectRef,
    desired: &Value,
    on_existing: &OnExisting,
) -> Result<Outcome> {
    Ok(match target.get().await? {
        None => Outcome::Created,
        Some(live)
            if is_subset(desired, &live)
                && (!matches!(on_existing, OnExisting::Replace)
                    || nothing_beyond(desired, &live)) =>
        {
            Outcome::Unchanged
        }
        Some(_) => match on_existing {
            OnExisting::Keep => Outcome::Unchanged,
            OnExisting::Fail(msg) => bail!("{msg}"),
            OnExisting::Update | OnExisting::Replace => Outcome::Updated,
        },
    })
}

/// A kubectl-style line: `serviceaccount/x created (member1)`, or
/// `... would be created` in a dry run.
pub fn outcome_line(target: &ObjectRef, outcome: Outcome, mode: WriteMode) -> String {
    let verb = match (outcome, mode) {
        (Outcome::Unchanged, _) => "unchanged".to_string(),
        (o, WriteMode::DryRun) => format!("would be {o}"),
        (o, WriteMode::Write) => o.to_string(),
    };
    format!("{} {verb} ({})", target.short(), target.cluster)
}

/// Waits up to 30 s for the CRD `crd` to be `Established`: its objects
/// cannot be written before that (`init`, `join --mode pull`).
pub async fn wait_established(crd: &ObjectRef) -> Result<()> {
    let established = crate::poll::poll_until(
        std::time::Duration::from_secs(30),
        std::time::Duration::from_millis(200),
        || async {
            let live = crd.get().await?.unwrap_or_default();
            Ok(crate::core::propagation::crd_first::established(&live).then_some(()))
        },
    )
    .await?;
    if established.is_none() {
        anyhow::bail!("{crd} was not established within 30s");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::nothing_beyond;
    use serde_json::json;

    #[test]
    fn replace_notices_fields_no_longer_wanted() {
        let desired = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
                             "spec": {"apiEndpoint": "https://e", "secretRef": {"name": "s"}}});
        let same = json!({"apiVersion": "x/v1", "kind": "K",
                          "metadata": {"name": "a", "uid": "u", "labels": {"x": "y"}},
                          "spec": {"apiEndpoint": "https://e", "secretRef": {"name": "s"}},
                          "status": {"conditions": []}});
        assert!(
            nothing_beyond(&desired, &same),
            "server metadata and status are not ours"
        );
        let mut insecure = same.clone();
        insecure["spec"]["disabledTLSValidations"] = json!(["*"]);
        assert!(!nothing_beyond(&desired, &insecure));
        let secret = json!({"data": {"token": "dA=="}});
        assert!(!nothing_beyond(
            &secret,
            &json!({"data": {"token": "dA==", "ca.crt": "Yw=="}})
        ));
    }
}
