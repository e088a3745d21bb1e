//! `unjoin --cleanup`: what the federation manages in the member deleted
//! or unlabelled (the core decides which, `core::cluster::cleanup`, with
//! the reconcile's deletion rules; the requests are the reconcile's own,
//! `sync::live::execute`), then the cluster dropped from the host's
//! statuses and PropagatedVersions. Everything is read before anything is
//! written, so a read that fails leaves both clusters as they were.

use crate::api::core::{ClusterPropagatedVersion, PropagatedVersion};
use crate::apply::{WriteMode, api_error, api_error_line, api_resource, dynamic_api, resource_of};
use crate::clients::host::Host;
use crate::core::cluster::cleanup::{self, Reach, Step, TypeSteps};
use crate::core::describe::{ObjectKey, key_of, qualified_key};
use crate::core::propagation::action::{Action, Decision};
use crate::core::propagation::desired::MANAGED_LABEL;
use crate::core::run::settings::Settings;
use crate::sync::live::execute::{self, Limits};
use crate::sync::live::requests::Clusters;
use crate::sync::run::observe::{ObservedType, list_all, list_pages};
use crate::sync::run::work::{Target, Work};
use anyhow::{Context, Result};
use futures::StreamExt;
use kube::api::{ApiResource, ListParams, PostParams};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

/// Member requests in flight at once.
const IN_FLIGHT: usize = 8;

/// What the host holds of the federation, read before anything is written.
pub struct HostSide {
    settings: Settings,
    /// The enabled types, each with its federated objects.
    types: Vec<ObservedType>,
    objects_namespace: Option<String>,
    /// The host's namespaces, name → UID (a host joined to itself).
    host_namespaces: HashMap<String, String>,
    /// Host objects that name the cluster, in the order they are written.
    pub edits: Vec<HostEdit>,
}

/// A federated object or (Cluster)PropagatedVersion that names the cluster.
pub struct HostEdit {
    resource: ApiResource,
    object: Value,
    /// A PropagatedVersion (its `clusterVersions`), else a federated object (`clusters`).
    versions: bool,
}

impl HostEdit {
    fn describe(&self) -> String {
        describe(&self.resource, &key_of(&self.object))
    }
}

/// Reads the enabled types, their federated objects, the
/// PropagatedVersions and the host's namespaces; notes every host object
/// whose status names `cluster`.
pub async fn read_host(host: &Host, cluster: &str) -> Result<HostSide> {
    let settings = host.settings().await?;
    let objects_namespace = settings.objects_namespace(&host.namespace, None);
    let mut types: Vec<ObservedType> = host
        .type_configs()
        .await?
        .iter()
        .filter(|f| f.spec.is_enabled())
        .map(ObservedType::of)
        .collect();
    types.sort_by(|a, b| a.name.cmp(&b.name));
    let mut edits = Vec::new();
    let mut version_keys = BTreeSet::new();
    for t in &mut types {
        let ns = objects_namespace
            .as_deref()
            .filter(|_| t.federated_namespaced);
        t.objects = list_all(
            &dynamic_api(&host.client, ns, &t.federated),
            &ListParams::default(),
        )
        .await
        .with_context(|| format!("listing {}", t.federated.kind))?;
        version_keys.extend(cleanup::version_keys(&t.ty, &t.objects));
        for obj in &t.objects {
            if cleanup::status_without(&obj["status"], cluster).is_some() {
                edits.push(HostEdit {
                    resource: t.federated.clone(),
                    object: obj.clone(),
                    versions: false,
                });
            }
        }
    }
    edits
        .extend(versions_naming(host, objects_namespace.as_deref(), &version_keys, cluster).await?);
    let host_namespaces = if types.iter().any(|t| t.ty.target.is_namespace()) {
        host_namespaces(host).await?
    } else {
        HashMap::new()
    };
    Ok(HostSide {
        settings,
        types,
        objects_namespace,
        host_namespaces,
        edits,
    })
}

/// The federation's (Cluster)PropagatedVersions (`keys`) whose status names `cluster`.
async fn versions_naming(
    host: &Host,
    namespace: Option<&str>,
    keys: &BTreeSet<ObjectKey>,
    cluster: &str,
) -> Result<Vec<HostEdit>> {
    let mut out = Vec::new();
    let kinds = [
        (resource_of::<PropagatedVersion>(), namespace),
        (resource_of::<ClusterPropagatedVersion>(), None),
    ];
    for (ar, ns) in kinds {
        let listed = list_all(&dynamic_api(&host.client, ns, &ar), &ListParams::default())
            .await
            .with_context(|| format!("listing {}s", ar.kind))?;
        for v in listed {
            if keys.contains(&key_of(&v))
                && cleanup::versions_without(&v["status"], cluster).is_some()
            {
                out.push(HostEdit {
                    resource: ar.clone(),
                    object: v,
                    versions: true,
                });
            }
        }
    }
    Ok(out)
}

async fn host_namespaces(host: &Host) -> Result<HashMap<String, String>> {
    let ar = api_resource("", "v1", "Namespace", "namespaces");
    let listed = list_all(
        &dynamic_api(&host.client, None, &ar),
        &ListParams::default(),
    )
    .await
    .context("listing the host's namespaces")?;
    Ok(listed
        .iter()
        .map(|n| {
            let uid = n["metadata"]["uid"].as_str().unwrap_or("").to_string();
            (key_of(n).name, uid)
        })
        .collect())
}

/// One type's steps in the member, with the objects they are for.
pub struct TypeWork<'s> {
    ty: &'s ObservedType,
    steps: TypeSteps,
    live: HashMap<ObjectKey, Value>,
}

/// What the member cleanup will do, and the types it could not list.
pub struct MemberPlan<'s> {
    types: Vec<TypeWork<'s>>,
    pub failures: Vec<String>,
}

impl MemberPlan<'_> {
    /// (deletes, unlabels) planned.
    pub fn counts(&self) -> (usize, usize) {
        let steps = self.types.iter().flat_map(|t| &t.steps.steps);
        let deletes = steps
            .filter(|s| matches!(s.action, Action::Delete { .. }))
            .count();
        let all: usize = self.types.iter().map(|t| t.steps.steps.len()).sum();
        (deletes, all - deletes)
    }
}

/// Lists each enabled type's labelled objects in the member (through
/// `client`, the operator's own context) and asks the core what each gets.
pub async fn plan_member<'s>(
    side: &'s HostSide,
    client: &kube::Client,
    kubefed_namespace: &str,
) -> Result<MemberPlan<'s>> {
    let reach = Reach {
        kubefed_namespace,
        objects_namespace: side.objects_namespace.as_deref(),
        host_namespaces: &side.host_namespaces,
    };
    let managed = ListParams::default().labels(&format!("{MANAGED_LABEL}=true"));
    let mut types = Vec::new();
    let mut failures = Vec::new();
    for t in &side.types {
        let ns = side
            .objects_namespace
            .as_deref()
            .filter(|_| t.ty.namespaced);
        let labelled = match list_pages(&dynamic_api(client, ns, &t.target), &managed).await {
            Ok(items) => items,
            // Not served there: nothing of the type can be left.
            Err(kube::Error::Api(s)) if s.code == 404 => continue,
            Err(e) => {
                failures.push(format!("{}: listing: {}", t.name, api_error_line(e)));
                continue;
            }
        };
        let steps = cleanup::member_steps(&t.name, &t.ty, &labelled, &t.objects, reach)?;
        let live = labelled.into_iter().map(|o| (key_of(&o), o)).collect();
        types.push(TypeWork { ty: t, steps, live });
    }
    types.sort_by(|a, b| cleanup::order(&a.steps, &b.steps));
    Ok(MemberPlan { types, failures })
}

/// `configmap shop/a`, `clusterrole.rbac.authorization.k8s.io admin`.
fn describe(ar: &ApiResource, key: &ObjectKey) -> String {
    let kind = ar.kind.to_lowercase();
    let kind = match ar.group.as_str() {
        "" => kind,
        g => format!("{kind}.{g}"),
    };
    format!("{kind} {}", qualified_key(key))
}

fn why(step: &Step) -> String {
    match step.reason.note() {
        "" => String::new(),
        note => format!(": {note}"),
    }
}

/// `--dry-run`: what would be deleted or unlabelled, type by type, in
/// the order the requests would be made.
pub fn print_member_plan(plan: &MemberPlan<'_>, cluster: &str) {
    for w in &plan.types {
        if w.steps.steps.is_empty() {
            continue;
        }
        let t = w.ty;
        let deletes = w
            .steps
            .steps
            .iter()
            .filter(|s| matches!(s.action, Action::Delete { .. }))
            .count();
        println!(
            "{}: {deletes} to delete, {} to unlabel ({cluster})",
            t.name,
            w.steps.steps.len() - deletes
        );
        for s in &w.steps.steps {
            let verb = match s.action {
                Action::Delete { .. } => "deleted",
                _ => "unlabelled",
            };
            println!(
                "  {} would be {verb}{}",
                describe(&t.target, &s.key),
                why(s)
            );
        }
    }
}

/// Makes the member requests, type by type (namespaces last), as the
/// reconcile makes them; returns how many were done and what failed.
pub async fn run_member(
    side: &HostSide,
    plan: &MemberPlan<'_>,
    client: &kube::Client,
    cluster: &str,
    timeout: Duration,
) -> (usize, Vec<String>) {
    let limits = Limits {
        concurrency: IN_FLIGHT,
        timeout,
        attempts: 5,
        settings: side.settings.sync,
    };
    let member = Clusters::one(cluster, client.clone());
    let member = &member;
    let mut done = 0;
    let mut failures = Vec::new();
    for w in &plan.types {
        let t = w.ty;
        let results: Vec<(String, &Step, _)> = futures::stream::iter(&w.steps.steps)
            .map(|s| async move {
                let work = Work {
                    ty: t,
                    target: Target::Orphan,
                    decision: Decision {
                        cluster: cluster.to_string(),
                        action: s.action.clone(),
                        status: None,
                        message: None,
                    },
                    live: w.live.get(&s.key).cloned(),
                };
                let result = execute::apply_one(member, (&work, &Default::default()), limits, None)
                    .await
                    .map(|(done, _)| done);
                (describe(&t.target, &s.key), s, result)
            })
            .buffered(IN_FLIGHT)
            .collect()
            .await;
        for (what, s, result) in results {
            match result {
                Ok(_) => {
                    done += 1;
                    let verb = match s.action {
                        Action::Delete { .. } => "deleted",
                        _ => "unlabelled",
                    };
                    println!("{what} {verb} ({cluster}){}", why(s));
                }
                Err((_, message)) => failures.push(format!("{what}: {message}")),
            }
        }
    }
    (done, failures)
}

/// Drops the cluster from each host object that names it (with
/// `--dry-run` only listing them); returns how many were written.
pub async fn run_host(
    host: &Host,
    side: &HostSide,
    cluster: &str,
    mode: WriteMode,
) -> Result<usize> {
    let mut written = 0;
    for e in &side.edits {
        let field = if e.versions {
            "clusterVersions"
        } else {
            "clusters"
        };
        if mode.is_dry_run() {
            println!(
                "{}: cluster {cluster:?} would be dropped from status.{field} (host)",
                e.describe()
            );
            continue;
        }
        if drop_cluster(host, e, cluster)
            .await
            .with_context(|| format!("dropping cluster {cluster:?} from {}", e.describe()))?
        {
            written += 1;
            println!(
                "{}: cluster {cluster:?} dropped from status.{field} (host)",
                e.describe()
            );
        }
    }
    Ok(written)
}

/// Writes the status without the cluster through the status subresource,
/// guarded by the resourceVersion read: on a conflict the object is read
/// again and the edit decided again. `false`: nothing left to drop.
async fn drop_cluster(host: &Host, e: &HostEdit, cluster: &str) -> Result<bool> {
    let ObjectKey {
        namespace: ns,
        name,
    } = key_of(&e.object);
    let api = dynamic_api(&host.client, Some(&ns), &e.resource);
    let mut object = e.object.clone();
    for _ in 0..3 {
        let status = match e.versions {
            true => cleanup::versions_without(&object["status"], cluster),
            false => cleanup::status_without(&object["status"], cluster),
        };
        let Some(status) = status else {
            return Ok(false);
        };
        object["status"] = status;
        let body = serde_json::from_value(object.clone())?;
        match api
            .replace_status(&name, &PostParams::default(), &body)
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                match api.get_opt(&name).await.map_err(api_error)? {
                    Some(current) => object = serde_json::to_value(current)?,
                    None => return Ok(false),
                }
            }
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(false),
            Err(e) => return Err(api_error(e)),
        }
    }
    anyhow::bail!("changed by someone else three times in a row; run unjoin again")
}

/// The federation lock, held for the cleanup: refused while a reconcile of
/// this federation (one-shot, watch, or any shard of them) holds a live
/// lock, which would put the objects back between the member's cleanup and
/// the records' removal.
pub async fn hold_federation(host: &Host) -> Result<crate::sync::lock::RunLock> {
    crate::sync::lock::hold_whole_federation(host, "unjoin --cleanup", Duration::ZERO).await
}
