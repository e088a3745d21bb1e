//! The record step of a live reconcile, and the host writes around the
//! member phase: KubeFedCluster health, the sync finalizer *before* any
//! member write, and after it the federated objects' status,
//! PropagatedVersions and the finalizer's release, as KubeFed writes them.
//! What to write is decided by the pure core (`core::propagation::record`).

use crate::api::core::{ClusterPropagatedVersion, PropagatedVersion};
use crate::apply::{api_error, dynamic_api, resource_of};
use crate::clients::host::Host;
use crate::clients::members::ProbedMember;
use crate::core::cluster::health::status_after_probe;
use crate::core::describe::{ObjectKey, key_of};
use crate::core::propagation::decide::{FinalizerStep, ObjectPlan};
use crate::core::propagation::deletion::SYNC_FINALIZER;
use crate::core::propagation::record::WriteBack;
use crate::sync::live::progress::Answer;
use anyhow::{Context, Result};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn federated_api(host: &Host, ar: &ApiResource, key: &ObjectKey) -> Api<DynamicObject> {
    dynamic_api(&host.client, Some(&key.namespace), ar)
}

/// The finalizers of `fed` with ours added or removed.
fn finalizers_with(fed: &Value, ours: bool) -> Vec<Value> {
    let mut list: Vec<Value> = fed
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|f| *f != SYNC_FINALIZER)
        .cloned()
        .collect();
    if ours {
        list.push(json!(SYNC_FINALIZER));
    }
    list
}

/// The finalizer step decided before the member phase: add it (so a run
/// killed after member writes leaves deletion to reconcile) or remove a
/// stray one. Returns the object as the host now has it.
pub async fn finalizer_first(
    host: &Host,
    ar: &ApiResource,
    fed: &Value,
    step: FinalizerStep,
) -> Result<Option<Value>> {
    let ours = match step {
        FinalizerStep::Keep => return Ok(None),
        FinalizerStep::AddFirst => true,
        FinalizerStep::RemoveStray => false,
    };
    // Guarded by resourceVersion: a concurrent change makes this fail
    // (reported; the next run decides again) instead of clobbering it.
    let patch = json!({"metadata": {
        "finalizers": finalizers_with(fed, ours),
        "resourceVersion": fed["metadata"]["resourceVersion"],
    }});
    let key = key_of(fed);
    let patched = federated_api(host, ar, &key)
        .patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(api_error)
        .context(if ours {
            "adding the finalizer"
        } else {
            "removing the finalizer of an ignored system namespace"
        })?;
    Ok(Some(serde_json::to_value(patched)?))
}

/// Status, PropagatedVersion and finalizer release of one federated
/// object. Returns the number of host writes.
/// `answers`: where to keep the objects as the server answered the writes
/// (the watch holds them at once; see `progress::Answer`).
pub async fn write_back(
    host: &Host,
    ar: &ApiResource,
    fed: &Value,
    plan: &ObjectPlan,
    w: WriteBack,
    mut answers: Option<&mut Vec<Answer>>,
) -> Result<usize> {
    let mut writes = 0;
    let api = federated_api(host, ar, &plan.key);
    let name = &plan.key.name;
    if w.release_finalizer {
        let patch = json!({"metadata": {
            "finalizers": finalizers_with(fed, false),
            "resourceVersion": fed["metadata"]["resourceVersion"],
        }});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(api_error)
            .context("removing the finalizer")?;
        writes += 1;
    }
    if let Some(status) = w.status {
        let mut obj = fed.clone();
        obj["status"] = status.clone();
        match api
            .replace_status(name, &PostParams::default(), &serde_json::from_value(obj)?)
            .await
        {
            Ok(written) => {
                keep(&mut answers, Answer::federated, written)?;
                writes += 1;
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Changed meanwhile: write the status onto the current object.
                let mut current = serde_json::to_value(api.get(name).await.map_err(api_error)?)?;
                current["status"] = status;
                let written = api
                    .replace_status(
                        name,
                        &PostParams::default(),
                        &serde_json::from_value(current)?,
                    )
                    .await
                    .map_err(api_error)?;
                keep(&mut answers, Answer::federated, written)?;
                writes += 1;
            }
            Err(e) => return Err(api_error(e)).context("writing status"),
        }
    }
    let mut create = w.create_versions;
    if let Some(versions) = w.versions {
        let (n, written) = write_versions(host, ar, fed, plan, versions, create).await?;
        keep(&mut answers, Answer::version, written)?;
        writes += n;
        create = false;
    }
    if let Some(record) = w.drift {
        writes += write_drift_record(host, ar, fed, plan, record, create).await?;
    }
    Ok(writes)
}

/// Keeps a write's answer, when answers are kept.
fn keep(
    answers: &mut Option<&mut Vec<Answer>>,
    as_answer: fn(Value) -> Answer,
    written: DynamicObject,
) -> Result<()> {
    if let Some(answers) = answers {
        answers.push(as_answer(serde_json::to_value(written)?));
    }
    Ok(())
}

/// Creates the (Cluster)PropagatedVersion when missing (owned by the
/// federated object, so it goes with it), then writes its status.
async fn write_versions(
    host: &Host,
    federated: &ApiResource,
    fed: &Value,
    plan: &ObjectPlan,
    status: Value,
    create: bool,
) -> Result<(usize, DynamicObject)> {
    let api = versions_api(host, plan);
    if !create {
        // An update needs no read first: the status is merged whole (its
        // list replaced), as the status subresource takes it.
        let written = api
            .patch_status(
                &plan.pv_name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": status})),
            )
            .await
            .map_err(api_error)
            .context("writing the propagated version")?;
        return Ok((1, written));
    }
    let mut obj = create_versions(host, federated, fed, plan, json!({})).await?;
    obj["status"] = status;
    let written = api
        .replace_status(
            &plan.pv_name,
            &PostParams::default(),
            &serde_json::from_value(obj)?,
        )
        .await
        .map_err(api_error)
        .context("writing the propagated version")?;
    Ok((2, written))
}

/// The object's (Cluster)PropagatedVersion API.
fn versions_api(host: &Host, plan: &ObjectPlan) -> kube::Api<DynamicObject> {
    let ar = if plan.key.namespace.is_empty() {
        resource_of::<ClusterPropagatedVersion>()
    } else {
        resource_of::<PropagatedVersion>()
    };
    dynamic_api(&host.client, Some(&plan.key.namespace), &ar)
}

/// Creates the object's (Cluster)PropagatedVersion, owned by it, with
/// these annotations (one created meanwhile is read instead).
async fn create_versions(
    host: &Host,
    federated: &ApiResource,
    fed: &Value,
    plan: &ObjectPlan,
    annotations: Value,
) -> Result<Value> {
    let (ns, pv_name) = (&plan.key.namespace, &plan.pv_name);
    let api = versions_api(host, plan);
    let kind = if ns.is_empty() {
        "ClusterPropagatedVersion"
    } else {
        "PropagatedVersion"
    };
    let mut meta = json!({"name": pv_name, "annotations": annotations, "ownerReferences": [{
        "apiVersion": federated.api_version, "kind": federated.kind,
        "name": fed["metadata"]["name"], "uid": fed["metadata"]["uid"]
    }]});
    if !ns.is_empty() {
        meta["namespace"] = json!(ns);
    }
    let body: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "core.kubefed.io/v1alpha1", "kind": kind, "metadata": meta, "spec": {}}),
    )?;
    let created = match api.create(&PostParams::default(), &body).await {
        Ok(c) => c,
        Err(kube::Error::Api(s)) if s.code == 409 => api.get(pv_name).await.map_err(api_error)?,
        Err(e) => return Err(api_error(e)).context("creating the propagated version"),
    };
    Ok(serde_json::to_value(created)?)
}

/// A report-only object's drift record
/// (`core::propagation::drift::DRIFT_ANNOTATION`, `None` removes it) on its
/// PropagatedVersion, created with it when missing. The host writes made.
async fn write_drift_record(
    host: &Host,
    federated: &ApiResource,
    fed: &Value,
    plan: &ObjectPlan,
    record: Option<String>,
    create: bool,
) -> Result<usize> {
    use crate::core::propagation::drift::DRIFT_ANNOTATION;
    let annotations = json!({DRIFT_ANNOTATION: record});
    if create {
        create_versions(host, federated, fed, plan, annotations).await?;
        return Ok(1);
    }
    versions_api(host, plan)
        .patch(
            &plan.pv_name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": annotations}})),
        )
        .await
        .map_err(api_error)
        .context("recording the drift")?;
    Ok(1)
}

/// Writes each KubeFedCluster's status when its readiness changed (the
/// probe time alone is not worth a write).
pub async fn write_cluster_health(host: &Host, all: &[ProbedMember]) -> Result<usize> {
    let now = crate::clock::now_rfc3339();
    let ar = crate::apply::resource_of::<crate::api::core::KubeFedCluster>();
    let api = dynamic_api(&host.client, Some(&host.namespace), &ar);
    let mut writes = 0;
    for ProbedMember {
        member: m,
        health: h,
    } in all
    {
        if m.pull {
            // Its agent writes it (`sync::agent`): the heartbeat.
            continue;
        }
        let old = serde_json::to_value(&m.cluster.status).unwrap_or(Value::Null);
        let Some(status) = status_after_probe(&old, h, &now) else {
            continue;
        };
        api.patch_status(
            &m.name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": status})),
        )
        .await
        .map_err(api_error)
        .with_context(|| format!("writing the status of KubeFedCluster {}", m.name))?;
        writes += 1;
    }
    Ok(writes)
}

/// A rollout's record on the object's (Cluster)PropagatedVersion
/// (`core::propagation::rollout`): its `status` mid-rollout, created with
/// the object when missing, then the record's annotation (`Some(None)`
/// removes it). Returns the host writes made.
pub async fn write_rollout_record(
    host: &Host,
    federated: &ApiResource,
    fed: &Value,
    plan: &ObjectPlan,
    status: Option<Value>,
    annotation: Option<Option<String>>,
) -> Result<usize> {
    use crate::core::propagation::rollout::{APPROVALS_ANNOTATION, ROLLOUT_STATUS_ANNOTATION};
    let mut writes = 0;
    if let Some(status) = status.filter(|s| plan.pv_status.as_ref() != Some(s)) {
        let create = plan.pv_status.is_none();
        writes += write_versions(host, federated, fed, plan, status, create)
            .await?
            .0;
    }
    if let Some(value) = annotation {
        // The record gone (the rollout complete), its approvals go too;
        // otherwise they are `rollout approve`'s alone to write.
        let mut annotations = json!({ROLLOUT_STATUS_ANNOTATION: value});
        if value.is_none() {
            annotations[APPROVALS_ANNOTATION] = Value::Null;
        }
        let patch = json!({"metadata": {"annotations": annotations}});
        versions_api(host, plan)
            .patch(
                &plan.pv_name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(api_error)
            .context("recording the rollout")?;
        writes += 1;
    }
    Ok(writes)
}

/// A rollout's end on its federated object's `status`, as `edit` makes
/// it from the current one (`None`: as it is): a halt's `Ready` `False`
/// (`core::propagation::rollout::halted_status`), a completed one's
/// `Ready`. Re-read once if it changed meanwhile. Whether it was written.
pub async fn write_rollout_status(
    host: &Host,
    federated: &ApiResource,
    key: &ObjectKey,
    edit: impl Fn(&Value) -> Option<Value>,
) -> Result<bool> {
    let api = federated_api(host, federated, key);
    for _ in 0..2 {
        let mut obj = serde_json::to_value(api.get(&key.name).await.map_err(api_error)?)?;
        let Some(status) = edit(&obj["status"]) else {
            return Ok(false);
        };
        obj["status"] = status;
        match api
            .replace_status(
                &key.name,
                &PostParams::default(),
                &serde_json::from_value(obj)?,
            )
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(api_error(e)).context("writing the rollout's status"),
        }
    }
    anyhow::bail!("it kept changing while being written")
}
