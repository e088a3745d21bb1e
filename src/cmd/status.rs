//! `kubefedctl status`: where the federation stands — clusters, federated
//! types, and per-cluster propagation of federated objects.
//!
//! Reads only. Cluster readiness comes from each KubeFedCluster's status
//! (written by `reconcile`'s probe, or by a KubeFed controller) or, with
//! `--probe`, from probing every member now, in parallel.

use crate::api::core::FederatedTypeConfig;
use crate::apply::api_error;
use crate::cli::GlobalOptions;
use crate::error::ExitWith;
use crate::host::Host;
use crate::members::{self, Health};
use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use comfy_table::{Cell, Color, Table, presets};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(after_help = "Examples:
  kubefedctl status                          # clusters, types and a propagation summary
  kubefedctl status clusters --probe         # probe every member now
  kubefedctl status types
  kubefedctl status deployments.apps -A      # one row per FederatedDeployment
  kubefedctl status configmaps web -n demo -o yaml
  kubefedctl status --exit-code              # exit 3 when anything is not ready or not propagated")]
pub struct StatusOptions {
    /// clusters, types, or a federated type by its target's name (deployments.apps, configmaps)
    #[arg(value_name = "WHAT")]
    pub what: Option<String>,

    /// With a type: one federated object
    #[arg(value_name = "NAME")]
    pub name: Option<String>,

    /// Namespace of the federated objects [default: the context's namespace]
    #[arg(
        short = 'n',
        long,
        value_name = "NAMESPACE",
        conflicts_with = "all_namespaces"
    )]
    pub namespace: Option<String>,

    /// Federated objects in every namespace
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,

    /// Output format: wide, json, yaml or name [default: tables]
    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    pub output: Option<StatusFormat>,

    /// Probe every member cluster now instead of reading the recorded status
    #[arg(long)]
    pub probe: bool,

    /// Timeout of each probe
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = crate::cli::parse_duration)]
    pub probe_timeout: Duration,

    /// With a type: check the member clusters themselves (in-sync, drifted, missing, unmanaged)
    #[arg(long)]
    pub live: bool,

    /// Exit with 3 when a cluster is not ready or an object is not propagated
    #[arg(long)]
    pub exit_code: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusFormat {
    Wide,
    Json,
    Yaml,
    Name,
}

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
}

pub fn run(global: &GlobalOptions, o: &StatusOptions) -> Result<()> {
    crate::cli::runtime()?.block_on(status(global, o))
}

async fn status(global: &GlobalOptions, o: &StatusOptions) -> Result<()> {
    let factory = global.client_factory()?;
    let host = Host::connect(global, &factory).await?;
    host.require_initialised().await?;
    let colour = o.output.is_none()
        && std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none();
    let wide = o.output == Some(StatusFormat::Wide);
    let mut unhealthy = false;
    match o.what.as_deref() {
        None | Some("clusters") | Some("types") => {
            let show_clusters = o.what.as_deref() != Some("types");
            let show_types = o.what.as_deref() != Some("clusters");
            let clusters = if show_clusters {
                cluster_rows(&host, o).await?
            } else {
                Vec::new()
            };
            let types = if show_types {
                type_rows(&host, o).await?
            } else {
                Vec::new()
            };
            unhealthy |= clusters.iter().any(|c| c.ready != "True");
            unhealthy |= types.iter().any(|t| t.propagated + t.ignored < t.objects);
            match o.output {
                Some(StatusFormat::Json) | Some(StatusFormat::Yaml) => {
                    let format = if o.output == Some(StatusFormat::Json) {
                        crate::output::DocumentFormat::Json
                    } else {
                        crate::output::DocumentFormat::Yaml
                    };
                    let mut doc = serde_json::Map::new();
                    doc.insert(
                        "host".into(),
                        serde_json::json!({"context": host.context, "namespace": host.namespace}),
                    );
                    if show_clusters {
                        doc.insert("clusters".into(), serde_json::to_value(&clusters)?);
                    }
                    if show_types {
                        doc.insert("types".into(), serde_json::to_value(&types)?);
                    }
                    crate::output::print(&doc, format)?;
                }
                Some(StatusFormat::Name) => {
                    for c in &clusters {
                        println!("kubefedcluster.core.kubefed.io/{}", c.name);
                    }
                    for t in &types {
                        println!("federatedtypeconfig.core.kubefed.io/{}", t.name);
                    }
                }
                _ => {
                    if o.what.is_none() {
                        let scope = host.scope().await?;
                        println!(
                            "Host: context {:?}, namespace {}, scope {}\n",
                            host.context,
                            host.namespace,
                            scope.as_str()
                        );
                    }
                    if show_clusters {
                        print!("{}", clusters_table(&clusters, wide, colour));
                    }
                    if show_clusters && show_types {
                        println!();
                    }
                    if show_types {
                        print!("{}", types_table(&types, wide));
                    }
                    if o.what.is_none() {
                        println!("\n{}", summary(&clusters, &types));
                    }
                }
            }
        }
        Some("dns") => {
            let rows = dns_rows(&host, o).await?;
            match o.output {
                Some(StatusFormat::Json) => {
                    crate::output::print(&rows, crate::output::DocumentFormat::Json)?
                }
                Some(StatusFormat::Yaml) => {
                    crate::output::print(&rows, crate::output::DocumentFormat::Yaml)?
                }
                _ => print!("{}", dns_table(&rows)),
            }
        }
        Some(type_name) => {
            let (ftc, mut rows) = object_rows(&host, &factory, o, type_name).await?;
            explain_unlisted(&host, o, &ftc, &mut rows).await?;
            if o.live {
                check_members(&host, o, &ftc, &mut rows).await?;
                unhealthy |= rows
                    .iter()
                    .flat_map(|r| &r.clusters)
                    .any(|c| c.live.as_deref() != Some("in-sync"));
            }
            unhealthy |= rows
                .iter()
                .any(|r| r.propagation != "True" && r.propagation != IGNORED);
            match o.output {
                Some(StatusFormat::Json) => {
                    crate::output::print(&rows, crate::output::DocumentFormat::Json)?
                }
                Some(StatusFormat::Yaml) => {
                    crate::output::print(&rows, crate::output::DocumentFormat::Yaml)?
                }
                Some(StatusFormat::Name) => {
                    for r in &rows {
                        println!(
                            "{}",
                            if r.namespace.is_empty() {
                                r.name.clone()
                            } else {
                                format!("{}/{}", r.namespace, r.name)
                            }
                        );
                    }
                }
                _ => print!("{}", objects_table(&rows, wide, colour)),
            }
        }
    }
    if o.exit_code && unhealthy {
        return Err(ExitWith {
            code: 3,
            message: "not everything is ready and propagated".into(),
        }
        .into());
    }
    Ok(())
}

async fn cluster_rows(host: &Host, o: &StatusOptions) -> Result<Vec<ClusterRow>> {
    let list = members::load(host, o.probe_timeout, &[]).await?;
    let health: Vec<Option<Health>> = if o.probe {
        members::probe_all(&list, o.probe_timeout)
            .await
            .into_iter()
            .map(Some)
            .collect()
    } else {
        list.iter()
            .map(|m| members::recorded_health(&m.cluster))
            .collect()
    };
    Ok(list
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
            }
        })
        .collect())
}

async fn type_rows(host: &Host, o: &StatusOptions) -> Result<Vec<TypeRow>> {
    let api: Api<FederatedTypeConfig> = Api::namespaced(host.client.clone(), &host.namespace);
    let mut ftcs = api
        .list(&ListParams::default())
        .await
        .map_err(api_error)?
        .items;
    ftcs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    // `status types --probe` asks the members; the overview's `--probe` is for clusters.
    let probe = o.probe && o.what.as_deref() == Some("types");
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
const IGNORED: &str = "Ignored";

/// A FederatedNamespace of a system namespace (`kube-system`,
/// `kube-public`, `default`, the federation's): ignored by reconcile as by
/// KubeFed (`pkg/controller/sync/accessor.go`, `isSystemNamespace`).
fn is_ignored(host: &Host, f: &FederatedTypeConfig, obj: &Value) -> bool {
    let t = &f.spec.target_type;
    t.kind == "Namespace"
        && t.group.as_deref().unwrap_or("").is_empty()
        && obj["metadata"]["name"]
            .as_str()
            .is_some_and(|n| crate::core::plan::is_system_namespace(n, &host.namespace))
}

/// Whether each member serves the type's target (`--probe`).
async fn serving(
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
                crate::discovery::serves(client, &group, &t.version, &t.plural_name),
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

const SERVES: &str = "serves";
const NOT_SERVED: &str = "does not serve";

/// Per-cluster `CachedRetrievalFailed` says reconcile could not list the
/// type in that member; ask the member whether it serves the type at all
/// (one discovery request per member) and name the cause.
async fn explain_unlisted(
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
                c.message = Some(format!(
                    "{} does not serve {target} (install the CRD in {}); recorded as CachedRetrievalFailed",
                    c.name, c.name
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

/// `--live`: what each placed member really holds, compared with what it
/// should hold (the desired object, with its live fields retained).
async fn check_members(
    host: &Host,
    o: &StatusOptions,
    ftc: &FederatedTypeConfig,
    rows: &mut [ObjectRow],
) -> Result<()> {
    use crate::core::compare::is_subset;
    use crate::core::desired::{TargetType, desired_for_cluster};
    use crate::core::placement::{Cluster, selected_clusters};
    let t = &ftc.spec.target_type;
    let group = t.group.clone().unwrap_or_default();
    let target = TargetType::new(&group, &t.version, &t.kind);
    let ar = crate::apply::api_resource(&group, &t.version, &t.kind, &t.plural_name);
    let members = members::load(host, o.probe_timeout, &[]).await?;
    let clusters: Vec<Cluster> = members
        .iter()
        .map(|m| Cluster {
            name: m.name.clone(),
            labels: m.labels.clone(),
            ready: true,
        })
        .collect();
    let fed_ar = federated_resource(ftc);
    for row in rows.iter_mut() {
        let fed_api: Api<DynamicObject> = if row.namespace.is_empty() {
            Api::all_with(host.client.clone(), &fed_ar)
        } else {
            Api::namespaced_with(host.client.clone(), &row.namespace, &fed_ar)
        };
        let fed = match fed_api.get_opt(&row.name).await {
            Ok(Some(f)) => serde_json::to_value(f)?,
            _ => continue,
        };
        let placed = selected_clusters(&fed, &clusters).unwrap_or_default();
        let mut checked = Vec::new();
        for m in members.iter().filter(|m| placed.contains(&m.name)) {
            let live = match &m.client {
                Err(_) => Err(()),
                Ok(client) => {
                    let api: Api<DynamicObject> = if t.scope == "Namespaced" {
                        Api::namespaced_with(client.clone(), &row.namespace, &ar)
                    } else {
                        Api::all_with(client.clone(), &ar)
                    };
                    tokio::time::timeout(o.probe_timeout, api.get_opt(&row.name))
                        .await
                        .map_err(|_| ())
                        .and_then(|r| r.map_err(|_| ()))
                }
            };
            let verdict = match live {
                Err(()) => "unreachable".to_string(),
                Ok(None) => "missing".into(),
                Ok(Some(obj)) => {
                    let obj = serde_json::to_value(obj)?;
                    if crate::core::plan::managed_label(&obj)
                        != crate::core::plan::ManagedLabel::True
                    {
                        "unmanaged".into()
                    } else {
                        match desired_for_cluster(&fed, &target, &m.name, Some(&obj)) {
                            Ok(d) if is_subset(&strip_server_fields(&d), &obj) => "in-sync".into(),
                            Ok(_) => "drifted".into(),
                            Err(_) => "invalid".into(),
                        }
                    }
                }
            };
            let status = row
                .clusters
                .iter()
                .find(|c| c.name == m.name)
                .map_or("-".to_string(), |c| c.status.clone());
            let message = row
                .clusters
                .iter()
                .find(|c| c.name == m.name)
                .and_then(|c| c.message.clone());
            checked.push(ClusterPropagation {
                name: m.name.clone(),
                status,
                live: Some(verdict),
                message,
            });
        }
        row.clusters = checked;
    }
    Ok(())
}

/// The desired object minus what only the server decides.
fn strip_server_fields(d: &Value) -> Value {
    let mut d = d.clone();
    if let Some(m) = d.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    d
}

fn federated_resource(f: &FederatedTypeConfig) -> ApiResource {
    let t = &f.spec.federated_type;
    let group = t.group.clone().unwrap_or_default();
    crate::apply::api_resource(&group, &t.version, &t.kind, &t.plural_name)
}

/// Federated objects of a type, in `namespace` or everywhere.
async fn list_federated(
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
fn propagation(obj: &Value) -> (String, String) {
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

async fn object_rows(
    host: &Host,
    factory: &crate::client::ClientFactory,
    o: &StatusOptions,
    type_name: &str,
) -> Result<(FederatedTypeConfig, Vec<ObjectRow>)> {
    let api: Api<FederatedTypeConfig> = Api::namespaced(host.client.clone(), &host.namespace);
    let ftcs = api
        .list(&ListParams::default())
        .await
        .map_err(api_error)?
        .items;
    let found: Vec<&FederatedTypeConfig> = ftcs
        .iter()
        .filter(|f| crate::host::names_federated_type(f, type_name))
        .collect();
    let ftc = match found.as_slice() {
        [one] => *one,
        [] => bail!("no federated type {type_name:?} (see kubefedctl status types)"),
        many => bail!(
            "{type_name:?} matches several federated types: {}; use the FederatedTypeConfig's name",
            many.iter()
                .map(|f| f.metadata.name.clone().unwrap_or_default())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let namespace = if o.all_namespaces {
        None
    } else {
        Some(match &o.namespace {
            Some(n) => n.clone(),
            None => factory.config(&host.context).await?.default_namespace,
        })
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
        .map(|obj| {
            let (prop, reason) = propagation(obj);
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
                        })
                        .collect()
                })
                .unwrap_or_default();
            clusters.sort_by(|a, b| a.name.cmp(&b.name));
            let (prop, reason) = if is_ignored(host, ftc, obj) {
                (IGNORED.to_string(), "SystemNamespace".to_string())
            } else {
                (prop, reason)
            };
            ObjectRow {
                namespace: obj["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                name: obj["metadata"]["name"].as_str().unwrap_or("").to_string(),
                placement: placement_text(&obj["spec"]["placement"]),
                propagation: prop,
                reason,
                clusters,
                created: obj["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            }
        })
        .collect();
    rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok((ftc.clone(), rows))
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

async fn dns_rows(host: &Host, o: &StatusOptions) -> Result<Vec<DnsRow>> {
    if !crate::sync::dns::installed(host).await? {
        bail!("multi-cluster DNS is not installed in the host (kubefedctl init --with-dns)");
    }
    // Every namespace unless -n names one.
    let namespace = if o.all_namespaces {
        None
    } else {
        o.namespace.clone()
    };
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

fn dns_table(rows: &[DnsRow]) -> String {
    if rows.is_empty() {
        return "No DNS records (ServiceDNSRecord / IngressDNSRecord, then kubefedctl reconcile).\n".into();
    }
    let mut t = table(&[
        "NAMESPACE",
        "ENDPOINT",
        "DNS NAME",
        "TYPE",
        "TTL",
        "TARGETS",
    ]);
    for r in rows {
        t.add_row(vec![
            Cell::new(&r.namespace),
            Cell::new(&r.endpoint),
            Cell::new(&r.dns_name),
            Cell::new(&r.record_type),
            Cell::new(r.ttl),
            Cell::new(r.targets.join(",")),
        ]);
    }
    render(&t)
}

/// `member1,member2`, `selector region=eu`, `all clusters` or `none`.
fn placement_text(p: &Value) -> String {
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

fn created(meta: &kube::api::ObjectMeta) -> String {
    meta.creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default()
}

fn table(headers: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(headers.iter().map(Cell::new).collect::<Vec<_>>());
    t.force_no_tty();
    t
}

/// Table text with trailing blanks trimmed (no borders, kubectl style).
fn render(t: &Table) -> String {
    t.lines()
        .map(|l| l.strip_prefix(' ').unwrap_or(&l).trim_end().to_string() + "\n")
        .collect()
}

fn ready_cell(text: &str, colour: bool) -> Cell {
    let cell = Cell::new(text);
    if !colour {
        return cell;
    }
    if text == "True" {
        cell.fg(Color::Green)
    } else {
        cell.fg(Color::Red)
    }
}

pub fn clusters_table(rows: &[ClusterRow], wide: bool, colour: bool) -> String {
    let mut headers = vec![
        "NAME",
        "READY",
        "KUBERNETES VERSION",
        "ENDPOINT",
        "REGION/ZONES",
    ];
    if wide {
        headers.push("MESSAGE");
    }
    let mut t = table(&headers);
    if colour {
        t.enforce_styling();
    }
    for r in rows {
        let zones = match (r.region.as_str(), r.zones.is_empty()) {
            ("", true) => "-".to_string(),
            (region, _) => format!(
                "{}{}{}",
                region,
                if r.zones.is_empty() { "" } else { "/" },
                r.zones.join(",")
            ),
        };
        let mut cells = vec![
            Cell::new(&r.name),
            ready_cell(&r.ready, colour),
            Cell::new(if r.kubernetes_version.is_empty() {
                "-"
            } else {
                &r.kubernetes_version
            }),
            Cell::new(&r.endpoint),
            Cell::new(zones),
        ];
        if wide {
            cells.push(Cell::new(&r.message));
        }
        t.add_row(cells);
    }
    if rows.is_empty() {
        return "No member clusters joined (kubefedctl join CLUSTER).\n".into();
    }
    render(&t)
}

pub fn types_table(rows: &[TypeRow], wide: bool) -> String {
    if rows.is_empty() {
        return "No federated types (kubefedctl enable TYPE).\n".into();
    }
    let probed = rows.iter().any(|r| r.members.is_some());
    let mut headers = vec!["TYPE", "FEDERATED KIND", "PROPAGATION", "OBJECTS"];
    if wide {
        headers.extend(["PROPAGATED", "FEDERATED TYPE"]);
    }
    if probed {
        headers.push("MEMBERS");
    }
    let mut t = table(&headers);
    for r in rows {
        let mut cells = vec![
            Cell::new(&r.name),
            Cell::new(&r.federated_kind),
            Cell::new(&r.propagation),
            Cell::new(r.objects),
        ];
        if wide {
            cells.extend([Cell::new(r.propagated), Cell::new(&r.federated_type)]);
        }
        if probed {
            cells.push(Cell::new(serving_text(r.members.as_ref())));
        }
        t.add_row(cells);
    }
    render(&t)
}

/// `m1,m2`, or `m1 (not served: m2)`, or `m1 (unknown: m3)`.
fn serving_text(members: Option<&BTreeMap<String, String>>) -> String {
    let Some(members) = members else {
        return "-".into();
    };
    let with = |want: &dyn Fn(&str) -> bool| {
        members
            .iter()
            .filter(|(_, v)| want(v))
            .map(|(k, _)| k.as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    let serves = with(&|v| v == SERVES);
    let mut text = if serves.is_empty() {
        "none".to_string()
    } else {
        serves
    };
    for (label, rule) in [
        (
            "not served",
            &(|v: &str| v == NOT_SERVED) as &dyn Fn(&str) -> bool,
        ),
        ("unknown", &|v: &str| v.starts_with("unknown")),
    ] {
        let names = with(rule);
        if !names.is_empty() {
            text.push_str(&format!(" ({label}: {names})"));
        }
    }
    text
}

pub fn objects_table(rows: &[ObjectRow], wide: bool, colour: bool) -> String {
    if rows.is_empty() {
        return "No federated objects found.\n".into();
    }
    let explained = rows
        .iter()
        .flat_map(|r| &r.clusters)
        .any(|c| c.message.is_some());
    let mut headers = vec!["NAMESPACE", "NAME", "PLACEMENT", "PROPAGATED", "CLUSTERS"];
    if wide {
        headers.push("REASON");
        if explained {
            headers.push("MESSAGE");
        }
    }
    let mut t = table(&headers);
    if colour {
        t.enforce_styling();
    }
    for r in rows {
        let clusters = if r.clusters.is_empty() {
            "-".to_string()
        } else {
            r.clusters
                .iter()
                .map(|c| format!("{}:{}", c.name, c.live.as_deref().unwrap_or(&c.status)))
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut cells = vec![
            Cell::new(if r.namespace.is_empty() {
                "-"
            } else {
                &r.namespace
            }),
            Cell::new(&r.name),
            Cell::new(&r.placement),
            ready_cell(&r.propagation, colour),
            Cell::new(clusters),
        ];
        if wide {
            let messages: Vec<String> = r
                .clusters
                .iter()
                .filter_map(|c| c.message.as_ref())
                .cloned()
                .collect();
            cells.push(Cell::new(&r.reason));
            if explained {
                cells.push(Cell::new(messages.join("; ")));
            }
        }
        t.add_row(cells);
    }
    render(&t)
}

/// One line: how much of the federation is healthy.
pub fn summary(clusters: &[ClusterRow], types: &[TypeRow]) -> String {
    let ready = clusters.iter().filter(|c| c.ready == "True").count();
    let objects: usize = types.iter().map(|t| t.objects - t.ignored).sum();
    let propagated: usize = types.iter().map(|t| t.propagated).sum();
    format!(
        "Propagation: {propagated} of {objects} federated object(s) propagated; {ready} of {} cluster(s) ready.",
        clusters.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placement_reads_like_kubefed_decides() {
        assert_eq!(
            placement_text(
                &json!({"clusters": [{"name": "a"}, {"name": "b"}], "clusterSelector": {}})
            ),
            "a,b"
        );
        assert_eq!(placement_text(&json!({"clusters": []})), "none");
        assert_eq!(
            placement_text(&json!({"clusterSelector": {}})),
            "all clusters"
        );
        assert_eq!(
            placement_text(&json!({"clusterSelector": {"matchLabels": {"region": "eu"}}})),
            "selector region=eu"
        );
        assert_eq!(placement_text(&json!({})), "none");
    }

    #[test]
    fn tables_without_colour_are_plain_text() {
        let rows = vec![ClusterRow {
            name: "member1".into(),
            ready: "True".into(),
            kubernetes_version: "v1.20.2".into(),
            endpoint: "https://10.0.0.1:6443".into(),
            region: "eu".into(),
            zones: vec!["eu-1a".into()],
            message: String::new(),
            created: String::new(),
        }];
        let text = clusters_table(&rows, false, false);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("NAME     READY"), "{text}");
        assert!(
            lines[1].contains("member1")
                && lines[1].contains("True")
                && lines[1].contains("eu/eu-1a"),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'), "no escape codes without colour");
        assert!(
            clusters_table(&rows, false, true).contains('\u{1b}'),
            "colour when asked"
        );
    }
}
