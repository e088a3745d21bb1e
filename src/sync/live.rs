//! Live one-shot reconcile against the host and its members.
//!
//! Reads everything first (cluster health, type configs, federated objects,
//! propagated versions, and one list per type and member), asks the pure
//! core what each member should hold, then applies the plan: all members at
//! once, a bounded number of requests in flight per member, retries with
//! backoff for 429 (honouring Retry-After), 5xx, timeouts and conflicts.
//! Status goes back as KubeFed writes it, so a KubeFed controller can take
//! over: KubeFedCluster conditions, `status` of federated objects, and
//! PropagatedVersions. A run with nothing to do writes nothing.

use crate::api::core::{FederatedTypeConfig, KubeFedConfig};
use crate::apply::{api_error, api_resource};
use crate::core::desired::{TargetType, desired_for_cluster};
use crate::core::membership::Scope;
use crate::core::placement::{Cluster, sync_placement};
use crate::core::plan::{
    self, Action, AggregateReason, ClusterOutcome, ClusterStatus, Decision, MemberState,
    SyncSettings,
};
use crate::core::scheduling::{
    MemberReplicas, PodAnalysis, Scheduled, analyze_pods, current_and_capacity, observe_member,
    schedule,
};
use crate::core::version::{
    member_version, merged_status, overrides_version, propagated_version_name, template_version,
};
use crate::host::Host;
use crate::members::{self, Health, Member};
use anyhow::{Context, Result, bail};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

/// Write-backs to the host in flight at once.
const HOST_WRITES_IN_FLIGHT: usize = 16;

/// What to reconcile and how.
#[derive(Clone, Debug)]
pub struct Options {
    /// FederatedTypeConfig names or target plurals/kinds; empty = all enabled.
    pub types: Vec<String>,
    pub namespace: Option<String>,
    /// Members to touch; empty = all.
    pub clusters: Vec<String>,
    pub selector: Option<String>,
    pub dry_run: bool,
    /// Requests in flight per member.
    pub concurrency: usize,
    /// Per-request timeout.
    pub timeout: Duration,
    pub probe_timeout: Duration,
    /// Attempts per request (first try included).
    pub attempts: u32,
}

/// Per-member counts, for the summary.
#[derive(Serialize, Debug, Default, Clone, PartialEq, Eq)]
pub struct ClusterReport {
    pub ready: bool,
    pub created: usize,
    pub updated: usize,
    pub deleted: usize,
    pub unchanged: usize,
    pub failed: usize,
}

/// What a run did (or, dry, would do).
#[derive(Serialize, Debug, Default)]
pub struct Report {
    pub clusters: BTreeMap<String, ClusterReport>,
    /// `cluster: kind ns/name: message` for every failure.
    pub failures: Vec<String>,
    /// Dry run: one line per pending member change.
    pub plan: Vec<String>,
    /// Writes to the host (status, versions, finalizers, RSP results).
    pub host_writes: usize,
    /// Things worth knowing that are not failures.
    pub warnings: Vec<String>,
    /// Informational lines.
    pub notes: Vec<String>,
    #[serde(skip)]
    pub diffs: Vec<String>,
}

impl Report {
    pub fn pending_changes(&self) -> usize {
        self.clusters
            .values()
            .map(|c| c.created + c.updated + c.deleted)
            .sum()
    }
}

/// One enabled federated type and everything read for it.
struct TypeState {
    federated: ApiResource,
    target: ApiResource,
    target_type: TargetType,
    namespaced: bool,
    objects: Vec<Value>,
    /// Member → (namespace, name) → object.
    live: HashMap<String, HashMap<(String, String), Value>>,
}

fn key(obj: &Value) -> (String, String) {
    (
        obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        obj["metadata"]["name"].as_str().unwrap_or("").to_string(),
    )
}

fn describe(kind: &str, obj: &Value) -> String {
    match key(obj) {
        (ns, name) if ns.is_empty() => format!("{kind} {name}"),
        (ns, name) => format!("{kind} {ns}/{name}"),
    }
}

/// Runs one reconcile pass. Errors before any write are returned as `Err`;
/// failures while applying are in the report.
pub async fn reconcile(
    host: &Host,
    o: &Options,
    progress: &indicatif::ProgressBar,
) -> Result<Report> {
    let mut report = Report::default();
    let config = kube::Api::<KubeFedConfig>::namespaced(host.client.clone(), &host.namespace)
        .get_opt(crate::api::KUBEFED_CONFIG_NAME)
        .await
        .map_err(api_error)?;
    let scope = match config.as_ref().map(|c| c.spec.scope.as_str()) {
        Some("Namespaced") => Scope::Namespaced,
        _ => Scope::Cluster,
    };
    let settings = SyncSettings {
        adopt_resources: config
            .as_ref()
            .and_then(|c| c.spec.sync_controller.as_ref())
            .and_then(|s| s.adopt_resources.as_deref())
            != Some("Disabled"),
    };

    // Members: all of them for placement (labels), the chosen ones to touch.
    let all = members::load(host, o.timeout, &[]).await?;
    for c in &o.clusters {
        if !all.iter().any(|m| &m.name == c) {
            bail!(
                "no KubeFedCluster {c:?} in {} (joined: {})",
                host.namespace,
                all.iter()
                    .map(|m| m.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let touched = |name: &str| o.clusters.is_empty() || o.clusters.iter().any(|c| c == name);
    let health = members::probe_all(&all, o.probe_timeout).await;
    if !o.dry_run {
        report.host_writes += write_cluster_health(host, &all, &health).await?;
    }
    let clusters: Vec<Cluster> = all
        .iter()
        .zip(&health)
        .map(|(m, h)| Cluster {
            name: m.name.clone(),
            labels: m.labels.clone(),
            ready: h.is_ready(),
        })
        .collect();
    for (m, h) in all.iter().zip(&health) {
        if touched(&m.name) {
            report.clusters.insert(
                m.name.clone(),
                ClusterReport {
                    ready: h.is_ready(),
                    ..Default::default()
                },
            );
            let why = match h {
                Health::Ready { .. } => continue,
                Health::NotReady { message }
                | Health::Offline { message }
                | Health::ConfigMalformed { message } => message,
            };
            report.failures.push(format!(
                "{}: cluster not ready ({why}); its objects are marked ClusterNotReady",
                m.name
            ));
        }
    }
    let ready_members: Vec<&Member> = all
        .iter()
        .zip(&health)
        .filter(|(m, h)| h.is_ready() && touched(&m.name))
        .map(|(m, _)| m)
        .collect();

    // Types and their federated objects.
    let ftc_api: Api<FederatedTypeConfig> = Api::namespaced(host.client.clone(), &host.namespace);
    let mut ftcs: Vec<FederatedTypeConfig> = ftc_api
        .list(&ListParams::default())
        .await
        .map_err(api_error)?
        .items;
    ftcs.retain(|f| f.spec.propagation == "Enabled");
    ftcs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    if !o.types.is_empty() {
        for t in &o.types {
            if !ftcs.iter().any(|f| crate::host::names_federated_type(f, t)) {
                bail!("no enabled federated type {t:?} (see kubefedctl status types)");
            }
        }
    }
    // Namespace-scoped federations only ever look in their own namespace.
    let namespace = match scope {
        Scope::Namespaced => Some(host.namespace.clone()),
        Scope::Cluster => o.namespace.clone(),
    };
    let mut list_params = ListParams::default();
    if let Some(sel) = &o.selector {
        list_params = list_params.labels(sel);
    }
    let mut types: Vec<TypeState> = Vec::new();
    for f in &ftcs {
        let t = &f.spec.target_type;
        let fd = &f.spec.federated_type;
        let target_group = t.group.clone().unwrap_or_default();
        let federated = api_resource(
            fd.group.as_deref().unwrap_or(""),
            &fd.version,
            &fd.kind,
            &fd.plural_name,
        );
        let fed_api: Api<DynamicObject> = match (&namespace, fd.scope.as_str()) {
            (Some(ns), "Namespaced") => Api::namespaced_with(host.client.clone(), ns, &federated),
            _ => Api::all_with(host.client.clone(), &federated),
        };
        let objects = list_all(&fed_api, &list_params)
            .await
            .with_context(|| format!("listing {}", fd.kind))?;
        types.push(TypeState {
            target: api_resource(&target_group, &t.version, &t.kind, &t.plural_name),
            target_type: TargetType::new(&target_group, &t.version, &t.kind),
            namespaced: t.scope == "Namespaced",
            federated,
            objects,
            live: HashMap::new(),
        });
    }
    if scope == Scope::Cluster
        && types.iter().any(|t| t.namespaced)
        && !types.iter().any(|t| t.target_type.is_namespace())
    {
        report.warnings.push(
            "namespaced objects are placed only in namespaces a FederatedNamespace places, and the namespaces type is not enabled (kubefedctl enable namespaces)".into(),
        );
    }
    let fed_namespaces: BTreeMap<String, Value> = types
        .iter()
        .filter(|t| t.target_type.is_namespace())
        .flat_map(|t| t.objects.iter())
        // The FTC says which type federates namespaces, whatever its group.
        .filter(|o| plan::federated_namespace_name_is_valid(o))
        .map(|o| (key(o).1, o.clone()))
        .collect();

    // One list per type and ready member, all members at once.
    let mut lists = tokio::task::JoinSet::new();
    for (i, t) in types.iter().enumerate() {
        for m in &ready_members {
            let client = m.client.clone().expect("ready members have clients");
            let ar = t.target.clone();
            let ns = if t.namespaced {
                namespace.clone()
            } else {
                None
            };
            let name = m.name.clone();
            let timeout = o.timeout;
            lists.spawn(async move {
                let api: Api<DynamicObject> = match &ns {
                    Some(ns) => Api::namespaced_with(client, ns, &ar),
                    None => Api::all_with(client, &ar),
                };
                let r =
                    tokio::time::timeout(timeout * 4, list_all(&api, &ListParams::default())).await;
                (
                    i,
                    name,
                    r.unwrap_or_else(|_| Err(anyhow::anyhow!("listing timed out"))),
                )
            });
        }
    }
    let mut unlisted: BTreeSet<String> = BTreeSet::new();
    while let Some(joined) = lists.join_next().await {
        let (i, cluster, result) = joined.context("list task")?;
        match result {
            Ok(items) => {
                let map = items.into_iter().map(|o| (key(&o), o)).collect();
                types[i].live.insert(cluster, map);
            }
            Err(e) => {
                report.failures.push(format!(
                    "{cluster}: listing {}: {}",
                    types[i].target.plural,
                    crate::error::one_line(&e)
                ));
                unlisted.insert(cluster);
            }
        }
    }
    let usable = |name: &str| {
        clusters.iter().any(|c| c.name == name && c.ready)
            && !unlisted.contains(name)
            && touched(name)
    };

    // RSP pass: placement and replicas overrides, as KubeFed's RSP controller writes them.
    let seen = Observed {
        namespace: &namespace,
        clusters: &clusters,
        members: &ready_members,
        fed_namespaces: &fed_namespaces,
    };
    report.host_writes += schedule_replicas(host, o, &seen, &mut types, &mut report).await?;

    // Propagated versions, by namespace and name.
    let versions = read_versions(host, &namespace).await?;
    let host_namespaces: HashMap<String, String> =
        if types.iter().any(|t| t.target_type.is_namespace()) {
            let api: Api<DynamicObject> = Api::all_with(
                host.client.clone(),
                &api_resource("", "v1", "Namespace", "namespaces"),
            );
            list_all(&api, &ListParams::default())
                .await?
                .into_iter()
                .map(|n| {
                    (
                        key(&n).1,
                        n["metadata"]["uid"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        } else {
            HashMap::new()
        };

    // Decisions for every federated object.
    let mut work: Vec<Work> = Vec::new();
    let mut per_object: Vec<ObjectPlan> = Vec::new();
    for (ti, t) in types.iter().enumerate() {
        let kind = t.target_type.kind.clone();
        let fed_keys: BTreeSet<(String, String)> = t.objects.iter().map(key).collect();
        for (oi, fed) in t.objects.iter().enumerate() {
            if t.target_type.is_namespace() && !plan::federated_namespace_name_is_valid(fed) {
                report.failures.push(format!(
                    "{}: the name of a federated namespace must match its namespace",
                    describe(&t.federated.kind, fed)
                ));
                continue;
            }
            let (fed_ns, fed_name) = key(fed);
            let member_states: Vec<(String, bool, Option<Value>, bool)> = clusters
                .iter()
                .filter(|c| touched(&c.name))
                .map(|c| {
                    let live_key = if t.namespaced {
                        (fed_ns.clone(), fed_name.clone())
                    } else {
                        (String::new(), fed_name.clone())
                    };
                    let live = t.live.get(&c.name).and_then(|m| m.get(&live_key)).cloned();
                    let is_host_ns = t.target_type.is_namespace()
                        && live.as_ref().is_some_and(|l| {
                            host_namespaces.get(&fed_name).is_some_and(|uid| {
                                Some(uid.as_str()) == l["metadata"]["uid"].as_str()
                            })
                        });
                    (c.name.clone(), usable(&c.name), live, is_host_ns)
                })
                .collect();
            let states: Vec<MemberState> = member_states
                .iter()
                .map(|(c, ready, live, host_ns)| MemberState {
                    cluster: c,
                    ready: *ready,
                    live: live.as_ref(),
                    is_host_namespace: *host_ns,
                })
                .collect();
            let fedns = if t.namespaced {
                fed_namespaces.get(&fed_ns)
            } else {
                None
            };
            let placement = sync_placement(
                fed,
                fedns,
                &clusters,
                scope,
                t.namespaced && !t.target_type.is_namespace(),
            );
            let pv_name = propagated_version_name(&kind, &fed_name);
            let pv_status = versions
                .get(&(fed_ns.clone(), pv_name.clone()))
                .map(|v| v["status"].clone());
            let deleting = !fed["metadata"]["deletionTimestamp"].is_null();
            let (decisions, reason, deletion) = if deleting {
                let placed = placement
                    .as_ref()
                    .map(|p| p.clusters.clone())
                    .unwrap_or_default();
                match plan::deletion_decisions(fed, &placed, &states) {
                    Ok(p) => {
                        if !p.not_ready.is_empty() {
                            report.failures.push(format!(
                                "{}: deletion waits for clusters that are not ready: {}",
                                describe(&t.federated.kind, fed),
                                p.not_ready.join(", ")
                            ));
                        }
                        let d = p.decisions.clone();
                        (d, AggregateReason::Success, Some(p))
                    }
                    Err(e) => {
                        report
                            .failures
                            .push(format!("{}: {e}", describe(&t.federated.kind, fed)));
                        continue;
                    }
                }
            } else {
                match &placement {
                    Ok(p) => {
                        let reason = if p.namespace_not_federated {
                            AggregateReason::NamespaceNotFederated
                        } else {
                            AggregateReason::Success
                        };
                        (
                            plan::sync_decisions(
                                fed,
                                &t.target_type,
                                &p.clusters,
                                &states,
                                pv_status.as_ref(),
                                settings,
                            ),
                            reason,
                            None,
                        )
                    }
                    Err(e) => {
                        report
                            .failures
                            .push(format!("{}: {e}", describe(&t.federated.kind, fed)));
                        (Vec::new(), AggregateReason::ComputePlacementFailed, None)
                    }
                }
            };
            let plan_index = per_object.len();
            // Work items own the decisions (and their desired objects); the
            // per-object plan keeps light copies for the status write-back.
            let light: Vec<Decision> = decisions.iter().map(lighten).collect();
            for d in decisions {
                let live = member_states
                    .iter()
                    .find(|(c, ..)| c == &d.cluster)
                    .and_then(|(_, _, l, _)| l.clone());
                match &d.action {
                    Action::Create(_)
                    | Action::Update { .. }
                    | Action::Delete { .. }
                    | Action::RemoveManagedLabel => {
                        work.push(Work {
                            type_index: ti,
                            object_index: oi,
                            plan_index,
                            decision: d,
                            live,
                        });
                    }
                    Action::Unchanged => {
                        if let Some(r) = report.clusters.get_mut(&d.cluster) {
                            r.unchanged += 1;
                        }
                    }
                    Action::Skip => {
                        if d.status != Some(ClusterStatus::ClusterNotReady)
                            && let Some(r) = report.clusters.get_mut(&d.cluster)
                        {
                            r.failed += 1;
                            report.failures.push(format!(
                                "{}: {}: {}",
                                d.cluster,
                                describe(&kind, fed),
                                d.message.clone().unwrap_or_else(|| d
                                    .status
                                    .map(|s| s.as_str().to_string())
                                    .unwrap_or_default())
                            ));
                        }
                    }
                    Action::Nothing => {}
                }
            }
            per_object.push(ObjectPlan {
                type_index: ti,
                object_index: oi,
                decisions: light,
                reason,
                deletion,
                selected: placement.map(|p| p.clusters).unwrap_or_default(),
                pv_name,
                pv_status,
                results: BTreeMap::new(),
            });
        }
        // Labelled member objects whose federated object is gone: unlabel.
        if o.selector.is_none() {
            for (cluster, objs) in &t.live {
                for (k, obj) in objs {
                    let fed_key = if t.namespaced {
                        k.clone()
                    } else {
                        (String::new(), k.1.clone())
                    };
                    let fed_key = if t.target_type.is_namespace() {
                        (k.1.clone(), k.1.clone())
                    } else {
                        fed_key
                    };
                    if fed_keys.contains(&fed_key)
                        || plan::managed_label(obj) != plan::ManagedLabel::True
                    {
                        continue;
                    }
                    // -n limits what is touched: cluster-scoped objects other
                    // than the namespace itself are out of reach.
                    if let Some(only) = &namespace
                        && !t.namespaced
                        && !(t.target_type.is_namespace() && &k.1 == only)
                    {
                        continue;
                    }
                    let states = [MemberState {
                        cluster,
                        ready: true,
                        live: Some(obj),
                        is_host_namespace: false,
                    }];
                    for d in plan::orphan_cleanup_decisions(&states).0 {
                        work.push(Work {
                            type_index: ti,
                            object_index: usize::MAX,
                            plan_index: usize::MAX,
                            decision: d,
                            live: Some(obj.clone()),
                        });
                    }
                }
            }
        }
    }

    if o.dry_run {
        for w in &work {
            let t = &types[w.type_index];
            let (verb, obj) = match &w.decision.action {
                Action::Create(obj) => ("create", Some(obj)),
                Action::Update { object, .. } => ("update", Some(object)),
                Action::Delete { .. } => ("delete", None),
                _ => ("unlabel", None),
            };
            let target = w.live.as_ref().or(obj).cloned().unwrap_or(json!({}));
            let r = report
                .clusters
                .get_mut(&w.decision.cluster)
                .expect("touched");
            match verb {
                "create" => r.created += 1,
                "update" => r.updated += 1,
                "delete" => r.deleted += 1,
                _ => {}
            }
            report.plan.push(format!(
                "{}: {verb} {}",
                w.decision.cluster,
                describe(&t.target.kind, &target)
            ));
            if let (Some(live), Some(desired)) = (&w.live, obj) {
                report.diffs.push(crate::sync::diff::unified(
                    &describe(&t.target.kind, desired),
                    &w.decision.cluster,
                    live,
                    desired,
                ));
            }
        }
        dns(host, &all, &health, namespace.as_deref(), true, &mut report).await?;
        return Ok(report);
    }

    // Apply: every member at once, bounded per member.
    progress.set_length(work.len() as u64);
    let results = execute(&all, &types, work, o, settings, progress).await;
    for (w, result) in results {
        let r = report
            .clusters
            .get_mut(&w.decision.cluster)
            .expect("touched");
        match &result {
            Ok(done) => match done.effect {
                Effect::Created => r.created += 1,
                Effect::Updated => r.updated += 1,
                Effect::Deleted => r.deleted += 1,
                Effect::Unlabelled => r.updated += 1,
            },
            Err((_, msg)) => {
                r.failed += 1;
                report
                    .failures
                    .push(format!("{}: {msg}", w.decision.cluster));
            }
        }
        if w.plan_index != usize::MAX {
            per_object[w.plan_index]
                .results
                .insert(w.decision.cluster.clone(), result);
        }
    }

    // Status, propagated versions and finalizers back to the host, a
    // bounded number at a time (thousands of objects, one host).
    use futures::StreamExt;
    let now = crate::clock::now_rfc3339();
    let written: Vec<(usize, Result<usize>)> = futures::stream::iter(per_object.iter().enumerate())
        .map(|(i, p)| {
            let t = &types[p.type_index];
            let fed = &t.objects[p.object_index];
            let (clusters, only, now) = (&clusters, &o.clusters, &now);
            async move { (i, write_back(host, t, fed, p, clusters, only, now).await) }
        })
        .buffer_unordered(HOST_WRITES_IN_FLIGHT)
        .collect()
        .await;
    for (i, result) in written {
        let p = &per_object[i];
        let t = &types[p.type_index];
        match result {
            Ok(n) => report.host_writes += n,
            Err(e) => report.failures.push(format!(
                "host: {}: {}",
                describe(&t.federated.kind, &t.objects[p.object_index]),
                crate::error::one_line(&e)
            )),
        }
    }
    dns(
        host,
        &all,
        &health,
        namespace.as_deref(),
        false,
        &mut report,
    )
    .await?;
    Ok(report)
}

/// Every page of a list.
async fn list_all(api: &Api<DynamicObject>, params: &ListParams) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    let mut params = params.clone().limit(500);
    loop {
        let page = api.list(&params).await.map_err(api_error)?;
        let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
        let api_version = Some(page.types.api_version.clone()).filter(|a| !a.is_empty());
        for item in page.items {
            let mut v = serde_json::to_value(item)?;
            if v.get("apiVersion").is_none()
                && let Some(av) = &api_version
            {
                v["apiVersion"] = json!(av);
            }
            out.push(v);
        }
        match next {
            Some(c) => params = params.continue_token(&c),
            None => return Ok(out),
        }
    }
}

/// KubeFed's conditions for a probe result.
fn health_conditions(h: &Health, now: &str) -> Vec<Value> {
    let c = |t: &str, s: &str, reason: &str, msg: &str| json!({"type": t, "status": s, "reason": reason, "message": msg, "lastProbeTime": now, "lastTransitionTime": now});
    match h {
        Health::Ready { .. } => vec![c(
            "Ready",
            "True",
            "ClusterReady",
            "/healthz responded with ok",
        )],
        Health::NotReady { .. } => vec![
            c(
                "Ready",
                "False",
                "ClusterNotReady",
                "/healthz responded without ok",
            ),
            c(
                "Offline",
                "False",
                "ClusterReachable",
                "cluster is reachable",
            ),
        ],
        Health::Offline { message } => vec![c("Offline", "True", "ClusterNotReachable", message)],
        Health::ConfigMalformed { .. } => vec![c(
            "ConfigMalformed",
            "True",
            "ClusterConfigMalformed",
            "cluster's configuration may be malformed",
        )],
    }
}

/// Writes each KubeFedCluster's status when its readiness changed (the
/// probe time alone is not worth a write).
async fn write_cluster_health(host: &Host, all: &[Member], health: &[Health]) -> Result<usize> {
    let now = crate::clock::now_rfc3339();
    let ar = api_resource(
        "core.kubefed.io",
        "v1beta1",
        "KubeFedCluster",
        "kubefedclusters",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(host.client.clone(), &host.namespace, &ar);
    let mut writes = 0;
    for (m, h) in all.iter().zip(health) {
        let old = serde_json::to_value(&m.cluster.status).unwrap_or(Value::Null);
        let essence = |conds: &Value| -> Vec<(String, String, String)> {
            conds
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    (
                        c["type"].as_str().unwrap_or("").into(),
                        c["status"].as_str().unwrap_or("").into(),
                        c["reason"].as_str().unwrap_or("").into(),
                    )
                })
                .collect()
        };
        let mut conditions = health_conditions(h, &now);
        // Keep the transition time while readiness does not change.
        for c in conditions.iter_mut() {
            if let Some(prev) = old["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["type"] == c["type"] && p["status"] == c["status"])
            {
                c["lastTransitionTime"] = prev["lastTransitionTime"].clone();
            }
        }
        let version = match h {
            Health::Ready { version } if !version.is_empty() => json!(version),
            _ => old["kubernetesVersion"].clone(),
        };
        let same = essence(&old["conditions"]) == essence(&json!(conditions))
            && old["kubernetesVersion"] == version;
        if same {
            continue;
        }
        let mut status = json!({"conditions": conditions});
        if !version.is_null() {
            status["kubernetesVersion"] = version;
        }
        for k in ["zones", "region"] {
            if !old[k].is_null() {
                status[k] = old[k].clone();
            }
        }
        let patch = json!({"status": status});
        api.patch_status(&m.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(api_error)
            .with_context(|| format!("writing the status of KubeFedCluster {}", m.name))?;
        writes += 1;
    }
    Ok(writes)
}

/// What the RSP pass works from besides the federated objects.
struct Observed<'a> {
    /// The namespace to list RSPs in (`None`: all).
    namespace: &'a Option<String>,
    clusters: &'a [Cluster],
    /// Ready members, for their pods.
    members: &'a [&'a Member],
    fed_namespaces: &'a BTreeMap<String, Value>,
}

/// The RSP pass. Returns the number of host writes.
async fn schedule_replicas(
    host: &Host,
    o: &Options,
    seen: &Observed<'_>,
    types: &mut [TypeState],
    report: &mut Report,
) -> Result<usize> {
    let Observed {
        namespace,
        clusters,
        members,
        fed_namespaces,
    } = *seen;
    let ar = api_resource(
        "scheduling.kubefed.io",
        "v1alpha1",
        "ReplicaSchedulingPreference",
        "replicaschedulingpreferences",
    );
    let api: Api<DynamicObject> =
        crate::apply::dynamic_api(&host.client, namespace.as_deref(), &ar);
    let rsps = list_all(&api, &ListParams::default()).await?;
    let mut writes = 0;
    for rsp in rsps {
        let target_kind = rsp["spec"]["targetKind"].as_str().unwrap_or("").to_string();
        let Some(t) = types.iter_mut().find(|t| t.federated.kind == target_kind) else {
            continue;
        };
        let Some(idx) = t.objects.iter().position(|f| key(f) == key(&rsp)) else {
            continue;
        };
        // Current replicas and capacity per member, as upstream's RSP
        // controller observes them: a settled member object's ready
        // replicas, else its pods (running and ready ones count; pods
        // unschedulable for over 60 s lower the capacity).
        let (ns, name) = key(&rsp);
        let mut current = BTreeMap::new();
        let mut capacity = BTreeMap::new();
        for (cluster, objs) in &t.live {
            let Some(obj) = objs.get(&(ns.clone(), name.clone())) else {
                continue;
            };
            let state = match observe_member(obj) {
                Ok(state) => state,
                Err(e) => {
                    report.warnings.push(format!(
                        "{cluster}: replica scheduling of {target_kind} {ns}/{name}: {e}"
                    ));
                    continue;
                }
            };
            let pods = match &state {
                MemberReplicas::Settled { .. } => PodAnalysis::default(),
                MemberReplicas::NeedsPods { match_labels, .. } => {
                    let member = members.iter().find(|m| &m.name == cluster).copied();
                    match member_pods(member, &ns, match_labels, o.timeout).await {
                        Ok(pods) => analyze_pods(&pods, crate::clock::now_unix()),
                        Err(e) => {
                            report.warnings.push(format!(
                                "{cluster}: replica scheduling of {target_kind} {ns}/{name}: listing pods: {}",
                                crate::error::one_line(&e)
                            ));
                            continue;
                        }
                    }
                }
            };
            if pods.needs_recheck {
                report.warnings.push(format!(
                    "{cluster}: some pods of {target_kind} {ns}/{name} are unschedulable for less than 60 s and do not lower its capacity yet; run again later"
                ));
            }
            let (now, cap) = current_and_capacity(&state, &pods);
            current.insert(cluster.clone(), now);
            if let Some(cap) = cap {
                capacity.insert(cluster.clone(), cap);
            }
        }
        let fedns = fed_namespaces.get(&key(&rsp).0);
        match schedule(&rsp, &t.objects[idx], fedns, clusters, &current, &capacity) {
            Ok(Scheduled::Unchanged) => {}
            Ok(Scheduled::Updated(obj)) => {
                if o.dry_run {
                    report.plan.push(format!(
                        "host: update {} (replica scheduling)",
                        describe(&target_kind, &obj)
                    ));
                    t.objects[idx] = obj;
                    continue;
                }
                let (ns, name) = key(&obj);
                let fapi: Api<DynamicObject> =
                    Api::namespaced_with(host.client.clone(), &ns, &t.federated);
                let body: DynamicObject = serde_json::from_value(obj)?;
                match fapi.replace(&name, &PostParams::default(), &body).await {
                    Ok(updated) => {
                        t.objects[idx] = serde_json::to_value(updated)?;
                        writes += 1;
                    }
                    Err(e) => report.failures.push(format!(
                        "host: scheduling {target_kind} {ns}/{name}: {}",
                        crate::error::one_line(&api_error(e))
                    )),
                }
            }
            Err(e) => report.failures.push(format!("host: {e}")),
        }
    }
    Ok(writes)
}

/// The pods in `namespace` of a member that carry all `labels`.
async fn member_pods(
    member: Option<&Member>,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    timeout: Duration,
) -> Result<Vec<Value>> {
    let Some(client) = member.and_then(|m| m.client.as_ref().ok()) else {
        bail!("no client for this member");
    };
    let pods = crate::apply::dynamic_api(
        client,
        Some(namespace),
        &api_resource("", "v1", "Pod", "pods"),
    );
    let selector = labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    tokio::time::timeout(
        timeout,
        list_all(&pods, &ListParams::default().labels(&selector)),
    )
    .await
    .map_err(|_| anyhow::anyhow!("timed out after {timeout:?}"))?
}

/// PropagatedVersions and ClusterPropagatedVersions by (namespace, name).
async fn read_versions(
    host: &Host,
    namespace: &Option<String>,
) -> Result<HashMap<(String, String), Value>> {
    let mut out = HashMap::new();
    let pv = api_resource(
        "core.kubefed.io",
        "v1alpha1",
        "PropagatedVersion",
        "propagatedversions",
    );
    let api: Api<DynamicObject> =
        crate::apply::dynamic_api(&host.client, namespace.as_deref(), &pv);
    for v in list_all(&api, &ListParams::default()).await? {
        out.insert(key(&v), v);
    }
    let cpv = api_resource(
        "core.kubefed.io",
        "v1alpha1",
        "ClusterPropagatedVersion",
        "clusterpropagatedversions",
    );
    for v in list_all(
        &Api::all_with(host.client.clone(), &cpv),
        &ListParams::default(),
    )
    .await?
    {
        out.insert(key(&v), v);
    }
    Ok(out)
}

/// A decision without its desired object (kept for the status write-back,
/// which needs only cluster, action kind and status).
fn lighten(d: &Decision) -> Decision {
    let action = match &d.action {
        Action::Create(_) => Action::Create(Value::Null),
        Action::Update { adopt, .. } => Action::Update {
            object: Value::Null,
            adopt: *adopt,
        },
        other => other.clone(),
    };
    Decision {
        cluster: d.cluster.clone(),
        action,
        status: d.status,
        message: d.message.clone(),
    }
}

/// One member request to make.
#[derive(Clone)]
struct Work {
    type_index: usize,
    object_index: usize,
    plan_index: usize,
    decision: Decision,
    live: Option<Value>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Effect {
    Created,
    Updated,
    Deleted,
    Unlabelled,
}

/// A request's result: the member object's new version.
#[derive(Clone, Debug)]
struct Done {
    effect: Effect,
    version: Option<String>,
}

type WorkResult = std::result::Result<Done, (ClusterStatus, String)>;

struct ObjectPlan {
    type_index: usize,
    object_index: usize,
    decisions: Vec<Decision>,
    reason: AggregateReason,
    deletion: Option<plan::DeletionPlan>,
    selected: BTreeSet<String>,
    pv_name: String,
    pv_status: Option<Value>,
    results: BTreeMap<String, WorkResult>,
}

/// Runs the work in three phases — namespaces created or updated, then
/// everything else, then namespaces deleted — so that namespaced objects
/// never race their namespace. Within a phase all members go at once.
async fn execute(
    all: &[Member],
    types: &[TypeState],
    work: Vec<Work>,
    o: &Options,
    settings: SyncSettings,
    progress: &indicatif::ProgressBar,
) -> Vec<(Work, WorkResult)> {
    let is_ns = |w: &Work| types[w.type_index].target_type.is_namespace();
    let is_delete = |w: &Work| matches!(w.decision.action, Action::Delete { .. });
    let (namespaces, rest): (Vec<Work>, Vec<Work>) =
        work.into_iter().partition(|w| is_ns(w) && !is_delete(w));
    let (ns_deletes, rest): (Vec<Work>, Vec<Work>) =
        rest.into_iter().partition(|w| is_ns(w) && is_delete(w));
    let mut out = Vec::new();
    for phase in [namespaces, rest, ns_deletes] {
        out.extend(execute_phase(all, types, phase, o, settings, progress).await);
    }
    out
}

async fn execute_phase(
    all: &[Member],
    types: &[TypeState],
    work: Vec<Work>,
    o: &Options,
    settings: SyncSettings,
    progress: &indicatif::ProgressBar,
) -> Vec<(Work, WorkResult)> {
    use futures::StreamExt;
    // Requests are made lazily, at most `concurrency` per member at a time,
    // borrowing the federated objects: memory stays flat however many there are.
    let mut by_cluster: BTreeMap<String, Vec<Work>> = BTreeMap::new();
    for w in work {
        by_cluster
            .entry(w.decision.cluster.clone())
            .or_default()
            .push(w);
    }
    let null = Value::Null;
    let per_member = by_cluster.into_iter().filter_map(|(cluster, items)| {
        let client = all
            .iter()
            .find(|m| m.name == cluster)?
            .client
            .clone()
            .ok()?;
        let null = &null;
        Some(async move {
            futures::stream::iter(items)
                .map(|w| {
                    let client = client.clone();
                    async move {
                        let t = &types[w.type_index];
                        let fed = if w.object_index == usize::MAX {
                            null
                        } else {
                            &t.objects[w.object_index]
                        };
                        let result =
                            apply_one(&client, &t.target, &t.target_type, fed, &w, o, settings)
                                .await
                                .map_err(|(s, m)| {
                                    let obj = w.live.as_ref().or(match &w.decision.action {
                                        Action::Create(obj) => Some(obj),
                                        Action::Update { object, .. } => Some(object),
                                        _ => None,
                                    });
                                    let what = obj
                                        .map(|ob| describe(&t.target.kind, ob))
                                        .unwrap_or_else(|| t.target.kind.clone());
                                    (s, format!("{what}: {m}"))
                                });
                        progress.inc(1);
                        (w, result)
                    }
                })
                .buffer_unordered(o.concurrency.max(1))
                .collect::<Vec<_>>()
                .await
        })
    });
    futures::future::join_all(per_member)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// One request with retries: 429 (after Retry-After), 5xx, timeouts and
/// connection errors are retried with backoff; a conflict re-reads the
/// member object and recomputes the update.
async fn apply_one(
    client: &kube::Client,
    ar: &ApiResource,
    target: &TargetType,
    fed: &Value,
    w: &Work,
    o: &Options,
    settings: SyncSettings,
) -> WorkResult {
    let subject = w.live.clone().or_else(|| match &w.decision.action {
        Action::Create(obj) => Some(obj.clone()),
        _ => None,
    });
    let (ns, name) = subject.as_ref().map(key).unwrap_or_default();
    let api: Api<DynamicObject> = if ns.is_empty() {
        Api::all_with(client.clone(), ar)
    } else {
        Api::namespaced_with(client.clone(), &ns, ar)
    };
    let failed = w
        .decision
        .action
        .failure_status()
        .unwrap_or(ClusterStatus::UpdateFailed);
    let mut action = w.decision.action.clone();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let r = tokio::time::timeout(o.timeout, run_action(&api, &name, &action)).await;
        let err = match r {
            Ok(Ok(done)) => return Ok(done),
            Ok(Err(e)) => e,
            Err(_) => {
                if attempt >= o.attempts {
                    let timed_out = match failed {
                        ClusterStatus::CreationFailed => ClusterStatus::CreationTimedOut,
                        ClusterStatus::DeletionFailed => ClusterStatus::DeletionTimedOut,
                        ClusterStatus::LabelRemovalFailed => ClusterStatus::LabelRemovalTimedOut,
                        _ => ClusterStatus::UpdateTimedOut,
                    };
                    return Err((timed_out, format!("no answer within {:?}", o.timeout)));
                }
                backoff(attempt, None).await;
                continue;
            }
        };
        match &err {
            kube::Error::Api(s) if s.code == 409 => {
                // Created meanwhile, or changed meanwhile: read it and decide again.
                let live = match api.get_opt(&name).await {
                    Ok(Some(l)) => serde_json::to_value(l).expect("serializes"),
                    Ok(None) => {
                        return Err((failed, format!("conflict, then gone: {}", s.message)));
                    }
                    Err(e) => {
                        return Err((
                            ClusterStatus::RetrievalFailed,
                            crate::error::one_line(&api_error(e)),
                        ));
                    }
                };
                match &w.decision.action {
                    Action::Create(_) | Action::Update { .. } => {
                        let label = plan::managed_label(&live);
                        if label == plan::ManagedLabel::False {
                            return Err((
                                ClusterStatus::ManagedLabelFalse,
                                "the member object has label kubefed.io/managed: false".into(),
                            ));
                        }
                        if label == plan::ManagedLabel::Absent && !settings.adopt_resources {
                            return Err((
                                ClusterStatus::AlreadyExists,
                                "the object exists in the member and adoption is disabled".into(),
                            ));
                        }
                        match desired_for_cluster(fed, target, &w.decision.cluster, Some(&live)) {
                            Ok(obj) => {
                                action = Action::Update {
                                    object: obj,
                                    adopt: label == plan::ManagedLabel::Absent,
                                }
                            }
                            Err(e) => {
                                return Err((ClusterStatus::FieldRetentionFailed, e.to_string()));
                            }
                        }
                    }
                    _ => return Err((failed, s.message.clone())),
                }
            }
            kube::Error::Api(s) if s.code == 429 || s.code >= 500 => {
                if attempt >= o.attempts {
                    return Err((failed, format!("{} ({})", s.message, s.code)));
                }
                let retry_after = s
                    .details
                    .as_ref()
                    .map(|d| d.retry_after_seconds)
                    .filter(|s| *s > 0)
                    .map(|s| Duration::from_secs(u64::from(s)));
                backoff(attempt, retry_after).await;
                continue;
            }
            kube::Error::Api(s) => return Err((failed, format!("{} ({})", s.message, s.code))),
            other => {
                if attempt >= o.attempts {
                    return Err((failed, crate::error::source_chain(other)));
                }
                backoff(attempt, None).await;
                continue;
            }
        }
        if attempt >= o.attempts {
            return Err((failed, "gave up after conflicts".into()));
        }
    }
}

async fn run_action(
    api: &Api<DynamicObject>,
    name: &str,
    action: &Action,
) -> std::result::Result<Done, kube::Error> {
    let version = |o: DynamicObject| {
        Some(member_version(
            &serde_json::to_value(o).expect("serializes"),
        ))
    };
    match action {
        Action::Create(obj) => {
            let body: DynamicObject =
                serde_json::from_value(obj.clone()).expect("desired objects are objects");
            let created = api.create(&PostParams::default(), &body).await?;
            Ok(Done {
                effect: Effect::Created,
                version: version(created),
            })
        }
        Action::Update { object, .. } => {
            let body: DynamicObject =
                serde_json::from_value(object.clone()).expect("desired objects are objects");
            let updated = api.replace(name, &PostParams::default(), &body).await?;
            Ok(Done {
                effect: Effect::Updated,
                version: version(updated),
            })
        }
        Action::Delete { options } => {
            let mut dp = DeleteParams::background();
            if let Some(opts) = options {
                if let Some(p) = opts["propagationPolicy"].as_str() {
                    dp.propagation_policy = match p {
                        "Orphan" => Some(kube::api::PropagationPolicy::Orphan),
                        "Foreground" => Some(kube::api::PropagationPolicy::Foreground),
                        _ => Some(kube::api::PropagationPolicy::Background),
                    };
                }
                dp.grace_period_seconds = opts["gracePeriodSeconds"].as_u64().map(|g| g as u32);
            }
            match api.delete(name, &dp).await {
                Ok(_) => Ok(Done {
                    effect: Effect::Deleted,
                    version: None,
                }),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(Done {
                    effect: Effect::Deleted,
                    version: None,
                }),
                Err(e) => Err(e),
            }
        }
        _ => {
            let patch =
                json!({"metadata": {"labels": {crate::core::desired::MANAGED_LABEL: null}}});
            match api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => Ok(Done {
                    effect: Effect::Unlabelled,
                    version: None,
                }),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(Done {
                    effect: Effect::Unlabelled,
                    version: None,
                }),
                Err(e) => Err(e),
            }
        }
    }
}

/// 100 ms, 200 ms, 400 ms ... capped at 5 s; a server's Retry-After wins.
async fn backoff(attempt: u32, retry_after: Option<Duration>) {
    let exp = Duration::from_millis(100u64 << attempt.min(6)).min(Duration::from_secs(5));
    tokio::time::sleep(retry_after.map_or(exp, |r| r.min(Duration::from_secs(30)))).await;
}

/// Status, PropagatedVersion and finalizer of one federated object.
async fn write_back(
    host: &Host,
    t: &TypeState,
    fed: &Value,
    p: &ObjectPlan,
    clusters: &[Cluster],
    only: &[String],
    now: &str,
) -> Result<usize> {
    let mut writes = 0;
    let (ns, name) = key(fed);
    let fapi: Api<DynamicObject> = if ns.is_empty() {
        Api::all_with(host.client.clone(), &t.federated)
    } else {
        Api::namespaced_with(host.client.clone(), &ns, &t.federated)
    };

    if let Some(deletion) = &p.deletion {
        let all_done = deletion.not_ready.is_empty() && p.results.values().all(|r| r.is_ok());
        if deletion.remove_finalizer || all_done {
            let finalizers: Vec<Value> = fed["metadata"]["finalizers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|f| f != &plan::SYNC_FINALIZER)
                .cloned()
                .collect();
            let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": fed["metadata"]["resourceVersion"]}});
            fapi.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(api_error)
                .context("removing the finalizer")?;
            writes += 1;
        }
        return Ok(writes);
    }

    // Outcomes: what happened, or what was decided.
    let mut outcomes: Vec<ClusterOutcome> = p
        .decisions
        .iter()
        .filter_map(|d| {
            let status = match p.results.get(&d.cluster) {
                Some(Ok(_)) => d.status?,
                Some(Err((s, _))) => *s,
                None => d.status?,
            };
            Some(ClusterOutcome {
                cluster: d.cluster.clone(),
                status,
                remote_status: None,
            })
        })
        .collect();
    // Clusters this run did not touch keep what was recorded for them.
    if !only.is_empty() {
        for c in fed["status"]["clusters"].as_array().into_iter().flatten() {
            let cname = c["name"].as_str().unwrap_or("");
            if !only.iter().any(|o| o == cname) && clusters.iter().any(|k| k.name == cname) {
                let status = plan::ClusterStatus::parse(c["status"].as_str().unwrap_or(""))
                    .unwrap_or(ClusterStatus::Ok);
                outcomes.push(ClusterOutcome {
                    cluster: cname.to_string(),
                    status,
                    remote_status: None,
                });
            }
        }
    }
    let updated_any = p.results.values().any(|r| {
        matches!(
            r,
            Ok(Done {
                effect: Effect::Created | Effect::Updated,
                ..
            })
        )
    });
    let status = plan::federated_status(fed, p.reason, &outcomes, false, updated_any, now);
    if status.changed {
        let mut obj = fed.clone();
        obj["status"] = status.status.clone();
        let body: DynamicObject = serde_json::from_value(obj)?;
        match fapi
            .replace_status(&name, &PostParams::default(), &body)
            .await
        {
            Ok(_) => writes += 1,
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Changed meanwhile: write the status onto the current object.
                let mut current = serde_json::to_value(fapi.get(&name).await.map_err(api_error)?)?;
                current["status"] = status.status.clone();
                let current: DynamicObject = serde_json::from_value(current)?;
                fapi.replace_status(&name, &PostParams::default(), &current)
                    .await
                    .map_err(api_error)?;
                writes += 1;
            }
            Err(e) => return Err(api_error(e)).context("writing status"),
        }
    }

    // Versions of what each member now holds.
    let tv = template_version(fed).unwrap_or_default();
    let ov = overrides_version(fed).unwrap_or_default();
    let mut recorded = BTreeMap::new();
    for d in &p.decisions {
        match (&d.action, p.results.get(&d.cluster)) {
            (
                _,
                Some(Ok(Done {
                    version: Some(v), ..
                })),
            ) => {
                recorded.insert(d.cluster.clone(), v.clone());
            }
            (Action::Unchanged, None) => {
                if let Some(live) = t.live.get(&d.cluster).and_then(|m| {
                    m.get(&if t.namespaced {
                        (ns.clone(), name.clone())
                    } else {
                        (String::new(), name.clone())
                    })
                }) {
                    recorded.insert(d.cluster.clone(), member_version(live));
                }
            }
            _ => {}
        }
    }
    let selected: BTreeSet<String> = p.selected.clone();
    let new_status = merged_status(p.pv_status.as_ref(), &tv, &ov, &selected, &recorded);
    if p.pv_status.as_ref() != Some(&new_status) {
        writes += write_version(
            host,
            fed,
            t,
            &p.pv_name,
            &ns,
            new_status,
            p.pv_status.is_none(),
        )
        .await?;
    }

    // The finalizer makes deletions come through reconcile.
    let has_finalizer = fed["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == plan::SYNC_FINALIZER));
    if !has_finalizer {
        let mut finalizers: Vec<Value> = fed["metadata"]["finalizers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        finalizers.push(json!(plan::SYNC_FINALIZER));
        let patch = json!({"metadata": {"finalizers": finalizers}});
        fapi.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(api_error)
            .context("adding the finalizer")?;
        writes += 1;
    }
    Ok(writes)
}

async fn write_version(
    host: &Host,
    fed: &Value,
    t: &TypeState,
    pv_name: &str,
    ns: &str,
    status: Value,
    create: bool,
) -> Result<usize> {
    let (kind, plural, api): (&str, &str, Api<DynamicObject>) = if ns.is_empty() {
        let ar = api_resource(
            "core.kubefed.io",
            "v1alpha1",
            "ClusterPropagatedVersion",
            "clusterpropagatedversions",
        );
        (
            "ClusterPropagatedVersion",
            "clusterpropagatedversions",
            Api::all_with(host.client.clone(), &ar),
        )
    } else {
        let ar = api_resource(
            "core.kubefed.io",
            "v1alpha1",
            "PropagatedVersion",
            "propagatedversions",
        );
        (
            "PropagatedVersion",
            "propagatedversions",
            Api::namespaced_with(host.client.clone(), ns, &ar),
        )
    };
    let _ = plural;
    let mut writes = 0;
    let mut obj = if create {
        let mut meta = json!({"name": pv_name, "ownerReferences": [{
            "apiVersion": t.federated.api_version, "kind": t.federated.kind,
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
            Err(kube::Error::Api(s)) if s.code == 409 => {
                api.get(pv_name).await.map_err(api_error)?
            }
            Err(e) => return Err(api_error(e)).context("creating the propagated version"),
        };
        writes += 1;
        serde_json::to_value(created)?
    } else {
        serde_json::to_value(api.get(pv_name).await.map_err(api_error)?)?
    };
    obj["status"] = status;
    let obj: DynamicObject = serde_json::from_value(obj)?;
    api.replace_status(pv_name, &PostParams::default(), &obj)
        .await
        .map_err(api_error)
        .context("writing the propagated version")?;
    Ok(writes + 1)
}

/// The multi-cluster DNS pass, when the host has the DNS API.
async fn dns(
    host: &Host,
    all: &[Member],
    health: &[Health],
    namespace: Option<&str>,
    dry_run: bool,
    report: &mut Report,
) -> Result<()> {
    if crate::sync::dns::installed(host).await? {
        crate::sync::dns::dns_pass(host, all, health, namespace, dry_run, report).await
    } else {
        report.notes.push("multi-cluster DNS is not installed in the host (kubefedctl init --with-dns): DNS records skipped".into());
        Ok(())
    }
}
