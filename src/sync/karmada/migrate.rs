//! `migrate karmada`'s steps, each safe to run again: the member copies
//! KubeFed made (and their UIDs), the exported objects server-side applied
//! to the Karmada API server, the wait for Karmada's bindings, the check
//! that Karmada took every copy over without recreating it, and the
//! release on the KubeFed side the way KubeFed orphans, and the removal
//! of the KubeFedClusters from the host; `checkpoint` stops a run between
//! two steps for the tests.

use crate::apply::{api_error, api_resource};
use crate::clients::host::Host;
use crate::clients::members::Member;
use crate::core::export::migration::release_order;
use crate::core::propagation::deletion::ORPHAN_ANNOTATION;
use anyhow::{Context, Result, bail};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The tests' kill point: `POINT` or `POINT#N` of
/// `core::export::migration::KILL_POINTS`. Compiled into builds with debug
/// assertions only (the test profile), so a release binary neither reads
/// nor names it (tests/it/install.rs proves it on the release archive).
#[cfg(debug_assertions)]
pub const KILL_AT: &str = "KUBEFEDCTL_MIGRATE_KILL_AT";

/// A step boundary crossed: with `KUBEFEDCTL_MIGRATE_KILL_AT` naming it
/// (and this crossing), the process kills itself with SIGKILL, as a kill
/// from outside would (no lock given back, nothing flushed), so that the
/// tests stop a migration exactly there. Without it, nothing.
#[cfg(debug_assertions)]
pub fn checkpoint(point: &str) {
    use crate::core::export::migration::kill_here;
    use std::collections::BTreeMap;
    use std::sync::{Mutex, OnceLock};
    static SPEC: OnceLock<Option<String>> = OnceLock::new();
    static CROSSED: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());
    let Some(spec) = SPEC.get_or_init(|| std::env::var(KILL_AT).ok()) else {
        return;
    };
    let n = {
        let mut crossed = CROSSED.lock().unwrap_or_else(|e| e.into_inner());
        let n = crossed.entry(point.to_string()).or_default();
        *n += 1;
        *n
    };
    if kill_here(spec, point, n) {
        eprintln!("{KILL_AT}={spec}: killed at {point}#{n}");
        // SAFETY: kill(2) on our own pid; no memory is touched.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}

/// A release build has no kill points: a step boundary is just that.
#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn checkpoint(_point: &str) {}

/// The field manager of what a migration writes.
pub const FIELD_MANAGER: &str = "kubefedctl-migrate";
/// KubeFed's sync controller's finalizer on federated objects.
pub const SYNC_FINALIZER: &str = "kubefed.io/sync-controller";
/// The label Karmada puts on the member objects it manages.
pub const KARMADA_MANAGED: &str = "karmada.io/managed";

/// One member copy KubeFed made, as found before the migration.
#[derive(Clone, Debug)]
pub struct MemberCopy {
    pub cluster: String,
    pub template: Value,
    pub uid: String,
}

impl MemberCopy {
    /// `member1: apps/v1 Deployment shop/web`.
    pub fn describe(&self) -> String {
        let m = &self.template["metadata"];
        let key = match m["namespace"].as_str() {
            Some(ns) => format!("{ns}/{}", m["name"].as_str().unwrap_or("")),
            None => m["name"].as_str().unwrap_or("").to_string(),
        };
        format!(
            "{}: {} {} {key}",
            self.cluster,
            self.template["apiVersion"].as_str().unwrap_or(""),
            self.template["kind"].as_str().unwrap_or("")
        )
    }
}

/// The API of `obj`'s kind in `client`'s cluster (discovery, so that any
/// kind works), in its namespace when it has one.
async fn api_for(client: &kube::Client, obj: &Value) -> Result<Api<DynamicObject>> {
    let api_version = obj["apiVersion"].as_str().unwrap_or("");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = obj["kind"].as_str().unwrap_or("");
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("the server does not serve {api_version} {kind}"))?;
    Ok(match obj["metadata"]["namespace"].as_str() {
        Some(ns) if caps.scope == kube::discovery::Scope::Namespaced => {
            Api::namespaced_with(client.clone(), ns, &ar)
        }
        _ => Api::all_with(client.clone(), &ar),
    })
}

/// Every copy KubeFed reports propagated (`status.clusters[]` without a
/// status) of every exported template, read from its member: a copy that
/// is missing would be created by Karmada, not taken over, and stops the
/// migration here, named with its member.
pub async fn member_copies(
    members: &[Member],
    federated: &[Value],
    templates: &[(usize, Value)],
) -> Result<Vec<MemberCopy>> {
    let mut out = Vec::new();
    for (i, template) in templates {
        let fed = &federated[*i];
        let clusters = fed["status"]["clusters"].as_array().into_iter().flatten();
        for c in clusters.filter(|c| c.get("status").is_none()) {
            let name = c["name"].as_str().unwrap_or("");
            let member = members
                .iter()
                .find(|m| m.name == name)
                .with_context(|| format!("member {name} has no KubeFedCluster"))?;
            let client = member
                .client
                .as_ref()
                .map_err(|e| anyhow::anyhow!("member {name}: {e}"))?;
            let api = api_for(client, template).await?;
            let obj_name = template["metadata"]["name"].as_str().unwrap_or("");
            let copy = api.get_opt(obj_name).await.map_err(api_error)?;
            let mut found = MemberCopy {
                cluster: name.to_string(),
                template: template.clone(),
                uid: String::new(),
            };
            let Some(copy) = copy else {
                bail!(
                    "{}: missing, though KubeFed reports it propagated: Karmada would create it; run kubefedctl reconcile first",
                    found.describe()
                );
            };
            found.uid = copy.metadata.uid.unwrap_or_default();
            out.push(found);
        }
    }
    Ok(out)
}

/// The exported objects server-side applied to the Karmada API server, in
/// their order (Secrets and Clusters, Namespaces, templates, policies).
pub async fn apply(karmada: &kube::Client, objects: &[&Value]) -> Result<usize> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for obj in objects.iter().copied() {
        let api = api_for(karmada, obj).await?;
        let name = obj["metadata"]["name"].as_str().unwrap_or("");
        api.patch(name, &params, &Patch::Apply(obj))
            .await
            .map_err(api_error)
            .with_context(|| {
                format!(
                    "applying {} {name} to Karmada",
                    obj["kind"].as_str().unwrap_or("")
                )
            })?;
        if obj["kind"] == "CustomResourceDefinition" {
            wait_served(karmada, obj).await?;
        }
        checkpoint("applying");
    }
    Ok(objects.len())
}

/// Waits until Karmada reports each Cluster `Ready` with the APIs it
/// serves (at most `timeout`, looked at once even when it is 0): the
/// scheduler only considers a Cluster with both. The error names each
/// that is not, with Karmada's message.
pub async fn wait_clusters_ready(
    karmada: &kube::Client,
    names: &[String],
    timeout: Duration,
) -> Result<()> {
    let ar = api_resource("cluster.karmada.io", "v1alpha1", "Cluster", "clusters");
    let api: Api<DynamicObject> = Api::all_with(karmada.clone(), &ar);
    let deadline = Instant::now() + timeout;
    loop {
        let mut pending = Vec::new();
        for name in names {
            let status = api
                .get_opt(name)
                .await
                .map_err(api_error)?
                .map(|c| c.data["status"].clone())
                .unwrap_or(Value::Null);
            let ready = status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "Ready");
            let apis = status["apiEnablements"]
                .as_array()
                .is_some_and(|a| !a.is_empty());
            if !apis || ready.is_none_or(|c| c["status"] != "True") {
                let why = ready
                    .and_then(|c| c["message"].as_str())
                    .unwrap_or("no status yet");
                pending.push(format!("{name}: {why}"));
            }
        }
        if pending.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "Karmada's Cluster(s) not Ready within {timeout:?} (nothing scheduled yet): {}",
                pending.join("; ")
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Karmada's binding of a template: `<name>-<kind>` (Karmada's
/// `GenerateBindingName`), a ResourceBinding in the template's namespace
/// or a ClusterResourceBinding.
pub fn binding_of(template: &Value) -> (Option<String>, String) {
    let name = template["metadata"]["name"].as_str().unwrap_or("");
    let kind = template["kind"].as_str().unwrap_or("");
    let binding = format!("{}-{kind}", name.replace(':', ".")).to_lowercase();
    (
        template["metadata"]["namespace"]
            .as_str()
            .map(str::to_string),
        binding,
    )
}

/// Waits until every binding says `FullyApplied` (at most `timeout`);
/// the error names those that do not, with Karmada's message.
pub async fn wait_applied(
    karmada: &kube::Client,
    bindings: &[(Option<String>, String)],
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut pending = Vec::new();
        for (ns, name) in bindings {
            let (kind, plural) = match ns {
                Some(_) => ("ResourceBinding", "resourcebindings"),
                None => ("ClusterResourceBinding", "clusterresourcebindings"),
            };
            let ar = api_resource("work.karmada.io", "v1alpha2", kind, plural);
            let api: Api<DynamicObject> = match ns {
                Some(ns) => Api::namespaced_with(karmada.clone(), ns, &ar),
                None => Api::all_with(karmada.clone(), &ar),
            };
            let b = api.get_opt(name).await.map_err(api_error)?;
            let status = b.map(|b| b.data["status"].clone()).unwrap_or(Value::Null);
            let applied = status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "FullyApplied");
            if applied.is_none_or(|c| c["status"] != "True") {
                let why = applied
                    .and_then(|c| c["message"].as_str())
                    .unwrap_or("not scheduled yet");
                pending.push(format!(
                    "{kind} {}{name}: {why}",
                    ns.as_ref().map_or(String::new(), |n| format!("{n}/"))
                ));
            }
        }
        if pending.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "Karmada did not apply {} binding(s) within {timeout:?}: {}",
                pending.len(),
                pending.join("; ")
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Every copy still there with its UID, and Karmada's: the error names the
/// member and object otherwise (nothing has been released then).
pub async fn verify(members: &[Member], copies: &[MemberCopy], timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    for copy in copies {
        let member = members
            .iter()
            .find(|m| m.name == copy.cluster)
            .context("member gone")?;
        let client = member.client.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
        let api = api_for(client, &copy.template).await?;
        let name = copy.template["metadata"]["name"].as_str().unwrap_or("");
        loop {
            let now = api.get_opt(name).await.map_err(api_error)?;
            let Some(now) = now else {
                bail!("{}: deleted during the hand-over", copy.describe());
            };
            if now.metadata.uid.as_deref() != Some(copy.uid.as_str()) {
                bail!(
                    "{}: recreated during the hand-over (UID {} → {})",
                    copy.describe(),
                    copy.uid,
                    now.metadata.uid.unwrap_or_default()
                );
            }
            let labels = now.metadata.labels.unwrap_or_default();
            if labels.get(KARMADA_MANAGED).is_some_and(|v| v == "true") {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "{}: Karmada has not taken it over within {timeout:?}",
                    copy.describe()
                );
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    Ok(())
}

/// The release, as KubeFed orphans: each federated object annotated
/// `kubefed.io/orphan: "true"`, deleted, and its sync finalizer removed
/// (what KubeFed's controller does for an orphaned object, minus the
/// removal of `kubefed.io/managed` from the copies: no member is written),
/// then its RSP deleted; FederatedNamespaces last, so that nothing of a
/// namespace is released before its contents (`release_order`).
pub async fn release(host: &Host, federated: &[Value], rsps: &[Value]) -> Result<usize> {
    let mut released = 0;
    for obj in release_order(federated, rsps) {
        if release_one(host, obj).await? {
            released += 1;
        }
        checkpoint("released");
    }
    Ok(released)
}

/// One object released; `false` when it was already gone.
async fn release_one(host: &Host, obj: &Value) -> Result<bool> {
    let api = api_for(&host.client, obj).await?;
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    if obj["kind"] != "ReplicaSchedulingPreference" {
        let orphan = json!({"metadata": {"annotations": {ORPHAN_ANNOTATION: "true"}}});
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&orphan))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(false),
            Err(e) => return Err(api_error(e)),
        }
        checkpoint("orphaned");
    }
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(false),
        Err(e) => return Err(api_error(e)),
    }
    checkpoint("deleted");
    if let Some(now) = api.get_opt(name).await.map_err(api_error)? {
        let finalizers: Vec<String> = now
            .metadata
            .finalizers
            .unwrap_or_default()
            .into_iter()
            .filter(|f| f != SYNC_FINALIZER)
            .collect();
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": now.metadata.resource_version}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(api_error)?;
    }
    Ok(true)
}

/// The KubeFedClusters removed from the host, each after its Secret (as
/// `unjoin` does; a run stopped between them leaves a KubeFedCluster
/// without a Secret, which the next run's export does not apply over
/// Karmada's: `migration::to_apply`). Nothing in a member: the member's
/// identity is the one Karmada's Cluster uses now. How many were removed.
pub async fn remove_clusters(host: &Host, clusters: &[Value]) -> Result<usize> {
    use k8s_openapi::api::core::v1::Secret;
    let secrets: Api<Secret> = Api::namespaced(host.client.clone(), &host.namespace);
    let mut removed = 0;
    for kfc in clusters {
        if let Some(secret) = kfc["spec"]["secretRef"]["name"].as_str() {
            match secrets.delete(secret, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(api_error(e)),
            }
        }
        checkpoint("unjoining");
        let api = api_for(&host.client, kfc).await?;
        let name = kfc["metadata"]["name"].as_str().unwrap_or("");
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => removed += 1,
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(api_error(e)),
        }
    }
    Ok(removed)
}

/// The bindings Karmada makes for the exported policies: one per template
/// a (Cluster)PropagationPolicy selects.
pub fn bindings(objects: &[Value]) -> Vec<(Option<String>, String)> {
    objects
        .iter()
        .filter(|o| o["kind"] == "PropagationPolicy" || o["kind"] == "ClusterPropagationPolicy")
        .flat_map(|p| {
            let ns = p["metadata"]["namespace"].clone();
            p["spec"]["resourceSelectors"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |sel| {
                    let mut t = json!({"kind": sel["kind"], "metadata": {"name": sel["name"]}});
                    if !ns.is_null() {
                        t["metadata"]["namespace"] = ns.clone();
                    }
                    binding_of(&t)
                })
        })
        .collect()
}

/// Waits (at most a minute) until the Karmada API server serves the type
/// a CRD just applied defines, before its resource templates are applied.
async fn wait_served(karmada: &kube::Client, crd: &Value) -> Result<()> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or("");
    let kind = spec["names"]["kind"].as_str().unwrap_or("");
    let version = spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["served"] == true)
        .and_then(|v| v["name"].as_str())
        .unwrap_or("");
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let deadline = Instant::now() + Duration::from_secs(60);
    while kube::discovery::pinned_kind(karmada, &gvk).await.is_err() {
        if Instant::now() > deadline {
            bail!(
                "Karmada's API server does not serve {group}/{version} {kind} a minute after its CRD"
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}
