//! What `status` observes: rows for clusters, types, federated objects
//! and DNS names, read from the host (and, when asked, the members).

use super::StatusOptions;
use crate::api::core::FederatedTypeConfig;
use crate::apply::api_error;
use crate::clients::ClientFactory;
use crate::clients::host::Host;
use crate::clients::members::{self, Health};
use crate::cmd::options::Namespaces;
use crate::core::cluster::health::{
    CREDENTIALS_REFUSED, LEGACY_TOKEN_INVALID_LABEL, legacy_token_invalid,
};
use crate::core::cluster::membership::JoinNames;
use crate::core::cluster::rbac::MemberRbac;
use crate::core::cluster::token::Lifetime;
use crate::core::propagation::decide::not_served;
use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

#[derive(Serialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRow {
    pub name: String,
    pub ready: String,
    pub kubernetes_version: String,
    pub endpoint: String,
    pub region: String,
    pub zones: Vec<String>,
    pub message: String,
    pub created: String,
    /// `push` (the host writes to the member) or `pull` (an agent in the
    /// member reads from the host: `join --mode pull`).
    pub mode: String,
    /// What the host may do in the member: `least` or `admin`
    /// (docs/security.md).
    pub identity: String,
    /// When the member's stored token expires (`join --token-ttl`), or
    /// `never`.
    pub token_expires: String,
    /// The member in the cluster inventory: `published NAMESPACE/NAME` (its
    /// ClusterProfile, which `join` wrote), `from NAMESPACE/NAME` (joined
    /// from one), or empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub inventory: String,
}

#[derive(Serialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct TypeRow {
    pub name: String,
    pub federated_kind: String,
    pub federated_type: String,
    pub propagation: String,
    pub objects: usize,
    pub propagated: usize,
    /// FederatedNamespaces of system namespaces: reconcile never
    /// propagates them (KubeFed ignores them too).
    pub ignored: usize,
    /// With `--probe`: member → `serves`, `does not serve` or why unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub members: Option<BTreeMap<String, String>>,
}

#[derive(Serialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRow {
    pub namespace: String,
    pub name: String,
    pub placement: String,
    pub propagation: String,
    pub reason: String,
    /// Cluster name → KubeFed's per-cluster status (`OK`, `ClusterNotReady`...).
    pub clusters: Vec<ClusterPropagation>,
    pub created: String,
    /// A progressive rollout in progress (its PropagatedVersion's record),
    /// `halted` when the object's `Ready` condition says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<String>,
}

#[derive(Serialize, Debug, Clone)]
pub struct ClusterPropagation {
    pub name: String,
    pub status: String,
    /// With `--live`: in-sync, drifted, missing, unmanaged or unreachable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<String>,
    /// Why the status is what it is, when we can say more (shown by `-o wide|yaml|json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The member object's `.status`, when the type's status is collected.
    #[serde(rename = "remoteStatus", skip_serializing_if = "Option::is_none")]
    pub remote_status: Option<Value>,
    /// kubectl's READY (`2/3`) from the collected status, for workloads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,
    /// With `--drift` (or `--live -o json|yaml`): how the member's copy
    /// differs from what a run would write (absent when in sync).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftView>,
}

/// One member's drift, as `status` shows it.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct DriftView {
    /// `in-sync`, `differs`, `missing` or `unplaced`.
    pub state: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldView>,
    /// A whole copy missing or unplaced: since when (recorded by the runs
    /// of a report-only object).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

/// One differing field and since when it has differed, when recorded.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct FieldView {
    #[serde(flatten)]
    pub field: crate::core::propagation::drift::FieldDrift,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

impl DriftView {
    /// The view of `drift`, with the first-seen times recorded for the member.
    pub fn of(
        drift: &crate::core::propagation::drift::Drift,
        since: &BTreeMap<String, String>,
    ) -> DriftView {
        let (state, fields) = match drift {
            d if d.is_in_sync() => ("in-sync", Vec::new()),
            crate::core::propagation::drift::Drift::Missing => ("missing", Vec::new()),
            crate::core::propagation::drift::Drift::Unplaced => ("unplaced", Vec::new()),
            crate::core::propagation::drift::Drift::Fields(f) => ("differs", f.clone()),
        };
        DriftView {
            state,
            since: matches!(
                drift,
                crate::core::propagation::drift::Drift::Missing
                    | crate::core::propagation::drift::Drift::Unplaced
            )
            .then(|| since.get("").cloned())
            .flatten(),
            fields: fields
                .into_iter()
                .map(|field| FieldView {
                    since: since.get(&field.path).cloned(),
                    field,
                })
                .collect(),
        }
    }

    pub fn is_in_sync(&self) -> bool {
        self.state == "in-sync"
    }
}

pub(super) async fn cluster_rows(
    host: &Host,
    factory: &ClientFactory,
    o: &StatusOptions,
) -> Result<Vec<ClusterRow>> {
    let list = members::load(host, o.probe_timeout, &[]).await?;
    let health: Vec<Option<Health>> = if o.probe {
        (members::probe_all(&list, o.probe_timeout).await.into_iter())
            .map(|p| Some(p.health))
            .collect()
    } else {
        list.iter()
            .map(|m| members::recorded_health(&m.cluster))
            .collect()
    };
    let mut rows = list
        .iter()
        .zip(health)
        .map(|(m, h)| {
            let status = m.cluster.status.clone().unwrap_or_default();
            let (ready, version, message) = match h {
                Some(Health::Ready { version }) => ("True".to_string(), version, String::new()),
                Some(Health::NotReady { message }) => ("False".into(), String::new(), message),
                Some(Health::Offline { message }) => ("Offline".into(), String::new(), message),
                Some(Health::ConfigMalformed { message }) => {
                    ("ConfigMalformed".into(), String::new(), message)
                }
                None => (
                    "Unknown".into(),
                    String::new(),
                    "not probed yet (kubefedctl reconcile or --probe)".into(),
                ),
            };
            let cluster = serde_json::to_value(&m.cluster).unwrap_or_default();
            let (identity, _) = MemberRbac::of_cluster(&cluster);
            let token_expires = Lifetime::of_cluster(&cluster).map_or("never".to_string(), |l| {
                crate::core::time::rfc3339(l.expires_at)
            });
            ClusterRow {
                name: m.name.clone(),
                ready,
                kubernetes_version: if version.is_empty() {
                    status.kubernetes_version.clone().unwrap_or_default()
                } else {
                    version
                },
                endpoint: m.cluster.spec.api_endpoint.clone(),
                region: status.region.clone().unwrap_or_default(),
                zones: status.zones.clone(),
                message,
                created: created(&m.cluster.metadata),
                mode: match crate::core::cluster::pull::is_pull_value(&cluster) {
                    true => "pull".to_string(),
                    false => "push".to_string(),
                },
                identity: identity.as_str().to_string(),
                token_expires,
                inventory: inventory_of(&cluster),
            }
        })
        .collect::<Vec<_>>();
    for row in rows
        .iter_mut()
        .filter(|r| r.message.starts_with(CREDENTIALS_REFUSED))
    {
        if let Some(note) = legacy_token_note(host, factory, &row.name, o.probe_timeout).await {
            row.message = format!("{}; {note}", row.message);
        }
    }
    Ok(rows)
}

/// A member that refuses its credentials may hold a join token Secret that
/// Kubernetes invalidated ([`LEGACY_TOKEN_INVALID_LABEL`]). The refused
/// token cannot read it; a kubeconfig context named after the member (as
/// join names members by default) can, and is asked, at most twice: the
/// join ServiceAccount, then its token Secrets (the one join writes, and
/// those listed in `.secrets`, as KubeFed's older joins used). Any failure
/// on the way means no note.
async fn legacy_token_note(
    host: &Host,
    factory: &ClientFactory,
    cluster: &str,
    timeout: Duration,
) -> Option<String> {
    if !factory
        .kubeconfig()
        .context_names()
        .iter()
        .any(|c| c == cluster)
    {
        return None;
    }
    let client = factory.client(cluster).await.ok()?;
    let names = JoinNames::new(cluster, &host.context, &host.namespace);
    let ns = host.namespace.as_str();
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let secrets: Api<Secret> = Api::namespaced(client, ns);
    let sa = tokio::time::timeout(timeout, sas.get_opt(&names.service_account))
        .await
        .ok()?
        .ok()??;
    let mut candidates = vec![names.service_account.clone()];
    candidates.extend(sa.secrets.into_iter().flatten().filter_map(|r| r.name));
    for name in candidates {
        let Ok(Ok(Some(secret))) = tokio::time::timeout(timeout, secrets.get_opt(&name)).await
        else {
            continue;
        };
        if let Some(since) = secret
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LEGACY_TOKEN_INVALID_LABEL))
        {
            return Some(legacy_token_invalid(
                cluster,
                &format!("{ns}/{name}"),
                since,
            ));
        }
    }
    None
}

/// `probe`: ask each member whether it serves each type (`status types --probe`).
pub(super) async fn type_rows(host: &Host, o: &StatusOptions, probe: bool) -> Result<Vec<TypeRow>> {
    let api: Api<FederatedTypeConfig> = Api::namespaced(host.client.clone(), &host.namespace);
    let mut ftcs = api
        .list(&ListParams::default())
        .await
        .map_err(api_error)?
        .items;
    ftcs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let members = if probe {
        members::load(host, o.probe_timeout, &[]).await?
    } else {
        Vec::new()
    };
    let mut rows = Vec::new();
    for f in ftcs {
        let objects = list_federated(host, &f, None).await.unwrap_or_default();
        let ignored = objects
            .iter()
            .filter(|obj| is_ignored(host, &f, obj))
            .count();
        let propagated = objects
            .iter()
            .filter(|obj| propagation(obj).0 == "True" && !is_ignored(host, &f, obj))
            .count();
        let serving = if probe {
            Some(serving(&members, &f, o.probe_timeout).await)
        } else {
            None
        };
        let t = &f.spec.federated_type;
        rows.push(TypeRow {
            name: f.metadata.name.clone().unwrap_or_default(),
            federated_kind: t.kind.clone(),
            federated_type: format!(
                "{}.{}/{}",
                t.plural_name,
                t.group.clone().unwrap_or_default(),
                t.version
            ),
            propagation: f.spec.propagation.clone(),
            objects: objects.len(),
            propagated,
            ignored,
            members: serving,
        });
    }
    Ok(rows)
}

/// Propagation of an object reconcile never propagates.
pub(super) const IGNORED: &str = "Ignored";

/// A FederatedNamespace of a system namespace (`kube-system`,
/// `kube-public`, `default`, the federation's): ignored by reconcile as by
/// KubeFed (`pkg/controller/sync/accessor.go`, `isSystemNamespace`).
pub(super) fn is_ignored(host: &Host, f: &FederatedTypeConfig, obj: &Value) -> bool {
    let t = &f.spec.target_type;
    t.kind == "Namespace"
        && t.group.as_deref().unwrap_or("").is_empty()
        && obj["metadata"]["name"].as_str().is_some_and(|n| {
            crate::core::propagation::member::is_system_namespace(n, &host.namespace)
        })
}

/// Whether each member serves the type's target (`--probe`).
pub(super) async fn serving(
    members: &[members::Member],
    f: &FederatedTypeConfig,
    timeout: Duration,
) -> BTreeMap<String, String> {
    let t = &f.spec.target_type;
    let group = t.group.clone().unwrap_or_default();
    let mut out = BTreeMap::new();
    for m in members {
        let verdict = match &m.client {
            Err(e) => format!("unknown ({e})"),
            Ok(client) => match tokio::time::timeout(
                timeout,
                crate::clients::discovery::serves(client, &group, &t.version, &t.plural_name),
            )
            .await
            {
                Ok(Ok(true)) => SERVES.to_string(),
                Ok(Ok(false)) => NOT_SERVED.to_string(),
                Ok(Err(e)) => format!("unknown ({})", crate::error::one_line(&e)),
                Err(_) => format!("unknown (no answer within {timeout:?})"),
            },
        };
        out.insert(m.name.clone(), verdict);
    }
    out
}

pub(super) const SERVES: &str = "serves";
pub(super) const NOT_SERVED: &str = "does not serve";

/// Per-cluster `CachedRetrievalFailed` says reconcile could not list the
/// type in that member; ask the member whether it serves the type at all
/// (one discovery request per member) and name the cause.
pub(super) async fn explain_unlisted(
    host: &Host,
    o: &StatusOptions,
    ftc: &FederatedTypeConfig,
    rows: &mut [ObjectRow],
) -> Result<()> {
    let unlisted: BTreeSet<String> = rows
        .iter()
        .flat_map(|r| &r.clusters)
        .filter(|c| c.status == "CachedRetrievalFailed")
        .map(|c| c.name.clone())
        .collect();
    if unlisted.is_empty() {
        return Ok(());
    }
    let only: Vec<String> = unlisted.into_iter().collect();
    let members = members::load(host, o.probe_timeout, &only).await?;
    let verdicts = serving(&members, ftc, o.probe_timeout).await;
    let t = &ftc.spec.target_type;
    // Where a member that does not serve the target serves its resource.
    let target_resource = crate::apply::api_resource(
        t.group.as_deref().unwrap_or(""),
        &t.version,
        &t.kind,
        &t.plural_name,
    );
    let mut elsewhere = BTreeMap::new();
    for m in &members {
        if let (Some(NOT_SERVED), Ok(client)) =
            (verdicts.get(&m.name).map(String::as_str), &m.client)
        {
            let found = tokio::time::timeout(
                o.probe_timeout,
                crate::clients::discovery::served_elsewhere(client, &target_resource),
            )
            .await;
            if let Ok(Ok(found)) = found {
                elsewhere.insert(m.name.clone(), found);
            }
        }
    }
    let target = match t.group.as_deref().unwrap_or("") {
        "" => format!("{}/{}", t.plural_name, t.version),
        g => format!("{}.{g}/{}", t.plural_name, t.version),
    };
    for c in rows.iter_mut().flat_map(|r| r.clusters.iter_mut()) {
        if c.status != "CachedRetrievalFailed" {
            continue;
        }
        match verdicts.get(&c.name).map(String::as_str) {
            Some(NOT_SERVED) => {
                c.status = "TypeNotServed".into();
                let elsewhere = elsewhere.get(&c.name).cloned().unwrap_or_default();
                c.message = Some(format!(
                    "{}; recorded as CachedRetrievalFailed",
                    not_served(
                        &c.name,
                        &t.plural_name,
                        t.group.as_deref().unwrap_or(""),
                        &t.version,
                        &elsewhere
                    )
                ));
            }
            _ => {
                c.message = Some(format!(
                    "the last reconcile could not list {target} in {}",
                    c.name
                ))
            }
        }
    }
    Ok(())
}

/// `--live`: what a run would do in each member, by the decide step over
/// one observation of the type (`sync::live::member_view`), so that
/// `status --live` and `reconcile --dry-run` never disagree (RSPs and
/// FederatedNamespace narrowing included, lists instead of one GET per
/// object and member). The recorded status stays beside each verdict.
pub(super) async fn check_members(
    host: &Host,
    o: &StatusOptions,
    ftc: &FederatedTypeConfig,
    namespace: Option<&str>,
    rows: &mut [ObjectRow],
) -> Result<()> {
    let options = crate::sync::live::Options {
        selection: crate::sync::run::observe::Selection {
            scope: crate::core::run::scope::RunScope {
                types: vec![ftc.metadata.name.clone().unwrap_or_default()],
                namespace: namespace.map(str::to_string),
                ..Default::default()
            },
            timeout: o.probe_timeout,
            probe_timeout: Some(o.probe_timeout),
            settings: None,
            // Compared field by field (`--drift`): read whole.
            whole_copies: o.wants_drift(),
        },
        proposal: None,
        mode: crate::sync::run::mode::PlanMode::PLAN,
        concurrency: 8,
        attempts: 1,
        wait: None,
        events: None,
        wait_ready: false,
        force_conflicts: false,
        report_only: o.wants_drift(),
        rollout: Default::default(),
    };
    let view = crate::sync::live::member_view(host, &options).await?;
    let kind = &ftc.spec.federated_type.kind;
    for row in rows.iter_mut() {
        let key = crate::core::describe::ObjectKey::new(row.namespace.clone(), row.name.clone());
        let Some(verdicts) = view.get(&(kind.clone(), key)) else {
            continue;
        };
        row.clusters = verdicts
            .iter()
            .map(|v| {
                let recorded = row.clusters.iter().find(|c| c.name == v.cluster);
                ClusterPropagation {
                    name: v.cluster.clone(),
                    status: recorded.map_or("-".to_string(), |c| c.status.clone()),
                    live: Some(v.verdict.to_string()),
                    message: recorded.and_then(|c| c.message.clone()),
                    remote_status: recorded.and_then(|c| c.remote_status.clone()),
                    ready: recorded.and_then(|c| c.ready.clone()),
                    // Only a copy that differs says how.
                    drift: (v.drift.as_ref())
                        .map(|(d, since)| DriftView::of(d, since))
                        .filter(|d| !d.is_in_sync()),
                }
            })
            .collect();
    }
    Ok(())
}

pub(super) fn federated_resource(f: &FederatedTypeConfig) -> ApiResource {
    let t = &f.spec.federated_type;
    let group = t.group.clone().unwrap_or_default();
    crate::apply::api_resource(&group, &t.version, &t.kind, &t.plural_name)
}

/// Federated objects of a type, in `namespace` or everywhere.
pub(super) async fn list_federated(
    host: &Host,
    f: &FederatedTypeConfig,
    namespace: Option<&str>,
) -> Result<Vec<Value>> {
    let ar = federated_resource(f);
    let api: Api<DynamicObject> = match namespace {
        Some(ns) if f.spec.federated_type.scope == "Namespaced" => {
            Api::namespaced_with(host.client.clone(), ns, &ar)
        }
        _ => Api::all_with(host.client.clone(), &ar),
    };
    let list = api.list(&ListParams::default()).await.map_err(api_error)?;
    Ok(list
        .items
        .into_iter()
        .map(|o| serde_json::to_value(o).expect("objects serialize"))
        .collect())
}

/// The `Propagation` condition: (status, reason).
pub(super) fn propagation(obj: &Value) -> (String, String) {
    obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Propagation"))
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .unwrap_or_else(|| ("Unknown".into(), "NotReconciled".into()))
}

pub(super) async fn object_rows(
    host: &Host,
    factory: &crate::clients::ClientFactory,
    o: &StatusOptions,
    type_name: &str,
) -> Result<(FederatedTypeConfig, Vec<ObjectRow>, Option<String>)> {
    let ftcs = Api::<FederatedTypeConfig>::namespaced(host.client.clone(), &host.namespace)
        .list(&ListParams::default())
        .await
        .map_err(api_error)?
        .items;
    let ftc = the_type(&ftcs, type_name)?;
    let namespace = match o.scope.asked() {
        Namespaces::Every => None,
        Namespaces::One(n) => Some(n.to_string()),
        Namespaces::Unsaid => Some(factory.config(&host.context).await?.default_namespace),
    };
    let mut objects = list_federated(host, ftc, namespace.as_deref()).await?;
    if let Some(name) = &o.name {
        objects.retain(|obj| obj["metadata"]["name"] == name.as_str());
        if objects.is_empty() {
            bail!("{} {name:?} not found", ftc.spec.federated_type.kind);
        }
    }
    let mut rows: Vec<ObjectRow> = objects
        .iter()
        .map(|obj| object_row(host, ftc, obj))
        .collect();
    rollouts(host, ftc, &objects, namespace.as_deref(), &mut rows).await?;
    rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok((ftc.clone(), rows, namespace))
}

/// Each row's rollout in progress, from its (Cluster)PropagatedVersion's
/// record (one list of them): nothing is read when no object has a policy.
async fn rollouts(
    host: &Host,
    ftc: &FederatedTypeConfig,
    objects: &[Value],
    namespace: Option<&str>,
    rows: &mut [ObjectRow],
) -> Result<()> {
    use crate::core::propagation::rollout::{ROLLOUT_ANNOTATION, RolloutRecord, record_text};
    use crate::core::propagation::version::propagated_version_name;
    let with_policy = |o: &Value| o["metadata"]["annotations"][ROLLOUT_ANNOTATION].is_string();
    if !objects.iter().any(with_policy) {
        return Ok(());
    }
    let ar = match ftc.spec.target_type.scope == "Namespaced" {
        true => crate::apply::resource_of::<crate::api::core::PropagatedVersion>(),
        false => crate::apply::resource_of::<crate::api::core::ClusterPropagatedVersion>(),
    };
    let api = crate::apply::dynamic_api(&host.client, namespace, &ar);
    let pvs = crate::sync::run::observe::list_all(&api, &ListParams::default()).await?;
    let kind = &ftc.spec.target_type.kind;
    for (row, obj) in rows.iter_mut().zip(objects) {
        let pv_name = propagated_version_name(kind, &row.name);
        let Some(text) = (pvs.iter())
            .find(|p| {
                p["metadata"]["name"] == pv_name.as_str()
                    && p["metadata"]["namespace"].as_str().unwrap_or("") == row.namespace
            })
            .and_then(record_text)
        else {
            continue;
        };
        let halted = (obj["status"]["conditions"].as_array().into_iter().flatten())
            .any(|c| c["type"] == "Ready" && c["reason"] == "RolloutHalted");
        let summary = RolloutRecord::parse(text).map_or_else(|e| e, |r| r.summary());
        row.rollout = Some(match halted {
            true => format!("halted in {summary}"),
            false => summary,
        });
    }
    Ok(())
}

/// The one FederatedTypeConfig `type_name` names (its name, the target's
/// plural or kind); none or several is an error saying what to give.
fn the_type<'f>(
    ftcs: &'f [FederatedTypeConfig],
    type_name: &str,
) -> Result<&'f FederatedTypeConfig> {
    let found: Vec<&FederatedTypeConfig> = ftcs
        .iter()
        .filter(|f| crate::clients::host::names_federated_type(f, type_name))
        .collect();
    Ok(match found.as_slice() {
        [one] => *one,
        [] => bail!("no federated type {type_name:?} (see kubefedctl status types)"),
        many => bail!(
            "{type_name:?} matches several federated types: {}; use the FederatedTypeConfig's name",
            many.iter()
                .map(|f| f.metadata.name.clone().unwrap_or_default())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// One federated object's row: its propagation as its status says (or
/// ignored, in a system namespace), and each member's.
fn object_row(host: &Host, ftc: &FederatedTypeConfig, obj: &Value) -> ObjectRow {
    let mut clusters: Vec<ClusterPropagation> = obj["status"]["clusters"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| ClusterPropagation {
                    name: c["name"].as_str().unwrap_or("").to_string(),
                    status: c["status"]
                        .as_str()
                        .filter(|s| !s.is_empty())
                        .unwrap_or("OK")
                        .to_string(),
                    live: None,
                    message: None,
                    remote_status: c.get("remoteStatus").cloned(),
                    ready: c.get("remoteStatus").and_then(|s| {
                        crate::core::propagation::readiness::ready_column(
                            &ftc.spec.target_type.kind,
                            s,
                        )
                    }),
                    drift: None,
                })
                .collect()
        })
        .unwrap_or_default();
    clusters.sort_by(|a, b| a.name.cmp(&b.name));
    let (propagation, reason) = if is_ignored(host, ftc, obj) {
        (IGNORED.to_string(), "SystemNamespace".to_string())
    } else {
        propagation(obj)
    };
    ObjectRow {
        namespace: obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        name: obj["metadata"]["name"].as_str().unwrap_or("").to_string(),
        placement: placement_text(&obj["spec"]["placement"]),
        propagation,
        reason,
        clusters,
        created: obj["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        rollout: None,
    }
}

/// One DNS name a DNSEndpoint publishes.
#[derive(Serialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct DnsRow {
    pub namespace: String,
    pub endpoint: String,
    pub dns_name: String,
    pub record_type: String,
    pub ttl: i64,
    pub targets: Vec<String>,
}

pub(super) async fn dns_rows(host: &Host, o: &StatusOptions) -> Result<Vec<DnsRow>> {
    if !host.dns_installed().await? {
        bail!("multi-cluster DNS is not installed in the host (kubefedctl init --with-dns)");
    }
    // Every namespace unless -n names one.
    let namespace = o.scope.or_every().map(str::to_string);
    let ar = crate::apply::api_resource(
        "multiclusterdns.kubefed.io",
        "v1alpha1",
        "DNSEndpoint",
        "dnsendpoints",
    );
    let api = crate::apply::dynamic_api(&host.client, namespace.as_deref(), &ar);
    let mut rows = Vec::new();
    for ep in api
        .list(&ListParams::default())
        .await
        .map_err(api_error)?
        .items
    {
        let ep = serde_json::to_value(ep)?;
        for e in ep["spec"]["endpoints"].as_array().into_iter().flatten() {
            rows.push(DnsRow {
                namespace: ep["metadata"]["namespace"].as_str().unwrap_or("").into(),
                endpoint: ep["metadata"]["name"].as_str().unwrap_or("").into(),
                dns_name: e["dnsName"].as_str().unwrap_or("").into(),
                record_type: e["recordType"].as_str().unwrap_or("").into(),
                ttl: e["recordTTL"].as_i64().unwrap_or(0),
                targets: e["targets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|t| t.as_str().map(String::from))
                    .collect(),
            });
        }
    }
    rows.sort_by(|a, b| {
        (&a.namespace, &a.endpoint, &a.dns_name).cmp(&(&b.namespace, &b.endpoint, &b.dns_name))
    });
    Ok(rows)
}

/// `member1,member2`, `selector region=eu`, `all clusters` or `none`.
pub(super) fn placement_text(p: &Value) -> String {
    if let Some(list) = p["clusters"].as_array() {
        let names: Vec<&str> = list.iter().filter_map(|c| c["name"].as_str()).collect();
        return if names.is_empty() {
            "none".into()
        } else {
            names.join(",")
        };
    }
    match p.get("clusterSelector") {
        None | Some(Value::Null) => "none".into(),
        Some(sel) => {
            let mut parts: Vec<String> = sel["matchLabels"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                        .collect()
                })
                .unwrap_or_default();
            if let Some(exprs) = sel["matchExpressions"].as_array() {
                parts.extend(exprs.iter().map(|e| {
                    format!(
                        "{} {}",
                        e["key"].as_str().unwrap_or(""),
                        e["operator"].as_str().unwrap_or("")
                    )
                }));
            }
            if parts.is_empty() {
                "all clusters".into()
            } else {
                format!("selector {}", parts.join(","))
            }
        }
    }
}

pub(super) fn created(meta: &kube::api::ObjectMeta) -> String {
    meta.creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default()
}

/// Where the member stands in the cluster inventory, from its
/// KubeFedCluster's annotations.
fn inventory_of(cluster: &Value) -> String {
    use crate::core::cluster::inventory::{FROM_PROFILE_ANNOTATION, PROFILE_ANNOTATION};
    let a = &cluster["metadata"]["annotations"];
    match (
        a[FROM_PROFILE_ANNOTATION].as_str(),
        a[PROFILE_ANNOTATION].as_str(),
    ) {
        (Some(from), _) => format!("from {from}"),
        (None, Some(published)) => format!("published {published}"),
        (None, None) => String::new(),
    }
}
