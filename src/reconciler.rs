//! Installing the in-cluster reconciler (`init --reconciler`) and keeping
//! its rules in step with the enabled types (`enable`, `disable`). What is
//! written is decided in `core::run::reconciler`; this module reads the host
//! (FederatedTypeConfigs, the DNS API, the server version) and writes.

use crate::apply::{
    Journal, ObjectRef, OnExisting, Outcome, WriteMode, api_error, api_resource, ensure, preview,
};
use crate::clients::host::Host;
use crate::core::cluster::membership::Scope;
use crate::core::run::reconciler::{
    Batch, COMPONENT_LABEL, FederatedResource, RECONCILER, Reconciler, cluster_role_name,
};
use anyhow::{Result, bail};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams};
use serde_json::Value;

/// What the host says about the reconciler's rules and workloads.
pub struct HostFacts {
    pub types: Vec<FederatedResource>,
    pub dns: bool,
    pub batch: Batch,
    pub scope: Scope,
}

/// Reads what the rules and the workload depend on.
pub async fn facts(host: &Host) -> Result<HostFacts> {
    let types = host
        .type_configs()
        .await?
        .into_iter()
        .map(|f| FederatedResource {
            group: f.spec.federated_type.group.unwrap_or_default(),
            plural: f.spec.federated_type.plural_name,
        })
        .collect();
    let dns = host.dns_installed().await?;
    let version = host.client.apiserver_version().await.map_err(api_error)?;
    let scope = host.scope().await.unwrap_or(Scope::Cluster);
    Ok(HostFacts {
        types,
        dns,
        batch: Batch::for_version(&version.major, &version.minor),
        scope,
    })
}

/// The API resource of an object `core::run::reconciler` writes.
fn resource(obj: &Value) -> Result<(ApiResource, bool)> {
    let api_version = obj["apiVersion"].as_str().unwrap_or("");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = obj["kind"].as_str().unwrap_or("");
    let (plural, namespaced) = match kind {
        "ServiceAccount" => ("serviceaccounts", true),
        "ClusterRole" => ("clusterroles", false),
        "Role" => ("roles", true),
        "ClusterRoleBinding" => ("clusterrolebindings", false),
        "RoleBinding" => ("rolebindings", true),
        "CronJob" => ("cronjobs", true),
        "Job" => ("jobs", true),
        "Deployment" => ("deployments", true),
        "StatefulSet" => ("statefulsets", true),
        "Service" => ("services", true),
        "PodDisruptionBudget" => ("poddisruptionbudgets", true),
        other => bail!("no API resource known for kind {other:?}"),
    };
    Ok((api_resource(group, version, kind, plural), namespaced))
}

/// Where `obj` lives in the host.
pub fn target(host: &Host, obj: &Value) -> Result<ObjectRef> {
    let (ar, namespaced) = resource(obj)?;
    Ok(host.object(
        ar,
        namespaced,
        obj["metadata"]["name"].as_str().unwrap_or(""),
    ))
}

/// How an existing object is brought in line: a Job's pod template cannot
/// change, so an existing Job is left as it is (delete it to run again).
pub fn on_existing(obj: &Value) -> OnExisting {
    if obj["kind"] == "Job" {
        OnExisting::Keep
    } else {
        OnExisting::Update
    }
}

/// Writes (or, in a dry run, previews) `objects`; returns one line per object.
pub async fn write(
    host: &Host,
    objects: &[Value],
    mode: WriteMode,
    journal: &mut Journal,
) -> Result<Vec<(ObjectRef, Outcome)>> {
    let mut out = Vec::new();
    for obj in objects {
        let t = target(host, obj)?;
        let policy = on_existing(obj);
        let outcome = match mode {
            WriteMode::DryRun => preview(&t, obj, &policy).await?,
            WriteMode::Write => ensure(&t, obj, &policy, journal).await?.0,
        };
        out.push((t, outcome));
    }
    Ok(out)
}

/// Workloads (and a sharded watch's Service and PodDisruptionBudget) of an
/// earlier `init --reconciler` that the current one does not write (another
/// shard count, another kind): they would run shards that no longer exist,
/// or compete for the lock.
pub async fn stale_workloads(host: &Host, wanted: &[Value]) -> Result<Vec<ObjectRef>> {
    let mut out = Vec::new();
    for (group, version, kind, plural) in [
        ("apps", "v1", "Deployment", "deployments"),
        ("apps", "v1", "StatefulSet", "statefulsets"),
        ("", "v1", "Service", "services"),
        (
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
        ),
        (
            "policy",
            "v1beta1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
        ),
        ("batch", "v1", "CronJob", "cronjobs"),
        ("batch", "v1beta1", "CronJob", "cronjobs"),
    ] {
        let ar = api_resource(group, version, kind, plural);
        let api: Api<DynamicObject> =
            Api::namespaced_with(host.client.clone(), &host.namespace, &ar);
        let selector = format!("{COMPONENT_LABEL}=reconciler");
        let listed = match api.list(&ListParams::default().labels(&selector)).await {
            Ok(l) => l.items,
            Err(kube::Error::Api(s)) if s.code == 404 => continue,
            Err(e) => return Err(api_error(e)),
        };
        for c in listed {
            let name = c.metadata.name.clone().unwrap_or_default();
            let kept = wanted
                .iter()
                .any(|w| w["kind"] == kind && w["metadata"]["name"] == name.as_str());
            // Both CronJob (PodDisruptionBudget) versions list the same
            // objects where both are served.
            let listed = out
                .iter()
                .any(|o: &ObjectRef| o.resource.kind == kind && o.name == name);
            if !kept && !listed {
                out.push(host.object(ar.clone(), true, &name));
            }
        }
    }
    Ok(out)
}

/// Deletes `stale` workloads (running Jobs of a CronJob finish on their own).
pub async fn delete(stale: &[ObjectRef]) -> Result<()> {
    for s in stale {
        let api: Api<DynamicObject> = Api::namespaced_with(
            s.client.clone(),
            s.namespace.as_deref().unwrap_or_default(),
            &s.resource,
        );
        match api.delete(&s.name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(api_error(e)),
        }
    }
    Ok(())
}

/// After `enable` or `disable`: when the reconciler is installed, its
/// ClusterRole and Role get the rules of the types enabled now. `adjust`
/// applies the command's change to the listed types (a dry run has not
/// written it). Returns the lines to print (none when the reconciler is
/// not installed or nothing changed).
pub async fn refresh_rules(
    host: &Host,
    write_mode: WriteMode,
    adjust: impl FnOnce(&mut Vec<FederatedResource>),
) -> Result<Vec<String>> {
    let role = host.object(
        api_resource(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
        ),
        false,
        &cluster_role_name(&host.namespace),
    );
    let Some(live) = role.get().await? else {
        return Ok(Vec::new());
    };
    // The installed kind: the Deployment's rules allow watching.
    let mode = if live["rules"].to_string().contains("\"watch\"") {
        crate::core::run::reconciler::Mode::Deployment
    } else {
        crate::core::run::reconciler::Mode::Job
    };
    let mut facts = facts(host).await?;
    adjust(&mut facts.types);
    let objects = Reconciler {
        mode,
        namespace: &host.namespace,
        scope: facts.scope,
        image: "",
        schedule: "",
        shards: 1,
        types: facts.types,
        dns: facts.dns,
        batch: facts.batch,
    }
    .objects();
    let roles: Vec<Value> = objects
        .into_iter()
        .filter(|o| {
            (o["kind"] == "ClusterRole" || o["kind"] == "Role")
                && (o["metadata"]["name"] == RECONCILER
                    || o["metadata"]["name"] == cluster_role_name(&host.namespace).as_str())
        })
        .collect();
    let mut journal = Journal::default();
    let written = write(host, &roles, write_mode, &mut journal).await?;
    Ok(written
        .into_iter()
        .filter(|(_, o)| *o != Outcome::Unchanged)
        .map(|(t, o)| crate::apply::outcome_line(&t, o, write_mode))
        .collect())
}
