//! The render's decisions: clusters, the KubeFedConfig, RSP scheduling,
//! the decide step per object and the DNS records; every error names its
//! file and document.

use super::*;
use crate::core::cluster::membership::Scope;
use crate::core::describe::describe_federated;
use crate::core::describe::key_of;
use crate::core::propagation::action::{Action, ClusterStatus};
use crate::core::propagation::decide::{self, FederatedType, Federation, Listing};
use crate::core::propagation::desired::TargetType;
use crate::core::propagation::overrides::validate_overrides;
use crate::core::propagation::placement::{Cluster, is_federated_namespace};
use crate::core::propagation::status::AggregateReason;
use crate::core::run::settings::Settings;
use crate::core::scheduling::preference::{Scheduled, schedule};
use crate::core::types::builtin::{builtin_by_kind, builtin_version, plural_of};
use anyhow::{Result, anyhow, bail};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Runs RSP scheduling, placement, override validation and template
/// rendering over the inputs (objects are validated and placed on all
/// cores). Every error names the file/document, object, cluster or field.
pub fn plan(inputs: Inputs, extra_clusters: &[Cluster]) -> Result<RenderPlan> {
    let mut inputs = inputs;
    let mut notes = std::mem::take(&mut inputs.notes);
    notes.extend(inputs.type_configs.iter().chain(&inputs.crds).map(|t| {
        format!(
            "{}: {} is not used when rendering; skipped",
            t.source,
            t.object["kind"].as_str().unwrap_or("")
        )
    }));
    let clusters = clusters_of(&inputs, extra_clusters)?;
    let config = config_of(&inputs)?;
    let mut federated = std::mem::take(&mut inputs.federated);
    check_federated(&federated)?;
    if let Some(c) = &config {
        federated = c.keep_visible(federated, &mut notes);
    }
    let fed_namespaces: BTreeMap<String, Value> = federated
        .iter()
        .filter(|f| is_federated_namespace(&f.object))
        .map(|f| (key_of(&f.object).name, f.object.clone()))
        .collect();
    // RSP pass first: it rewrites placement and replicas overrides.
    let scheduling = if config
        .as_ref()
        .is_none_or(|c| c.settings.scheduler_preferences)
    {
        schedule_rsps(
            &inputs,
            &mut federated,
            &fed_namespaces,
            &clusters,
            &mut notes,
        )?
    } else {
        if !inputs.rsps.is_empty() {
            notes.push(format!(
                "{}: the SchedulerPreferences feature gate is Disabled: {} ReplicaSchedulingPreference(s) not scheduled",
                config.as_ref().map_or("", |c| c.source.as_str()),
                inputs.rsps.len()
            ));
        }
        Vec::new()
    };
    let (placed, by_cluster) = decide_all(
        federated,
        config.as_ref(),
        &fed_namespaces,
        &clusters,
        &mut notes,
    )?;
    let host = render_dns(&inputs, &clusters, &mut notes)?;
    Ok(RenderPlan {
        clusters,
        placed,
        by_cluster,
        host,
        scheduling,
        notes,
    })
}

/// The input's KubeFedConfig, read by the same rule as a live run's.
pub(super) struct RenderConfig {
    source: String,
    namespace: String,
    settings: Settings,
}

pub(super) fn config_of(inputs: &Inputs) -> Result<Option<RenderConfig>> {
    let Some(c) = &inputs.config else {
        return Ok(None);
    };
    let namespace = c.object["metadata"]["namespace"]
        .as_str()
        .unwrap_or(crate::api::DEFAULT_KUBEFED_NAMESPACE)
        .to_string();
    let settings = crate::core::run::settings::settings(Some(&c.object["spec"]))
        .map_err(|e| anyhow!("{}: KubeFedConfig: {e}", c.source))?;
    if !settings.push_reconciler {
        bail!(
            "{}: the PushReconciler feature gate is Disabled: nothing is propagated",
            c.source
        );
    }
    Ok(Some(RenderConfig {
        source: c.source.clone(),
        namespace,
        settings,
    }))
}

impl RenderConfig {
    /// The federated objects a control plane with this config sees: a
    /// namespace-scoped one only those of its own namespace.
    fn keep_visible(&self, federated: Vec<Sourced>, notes: &mut Vec<String>) -> Vec<Sourced> {
        let only = self.settings.objects_namespace(&self.namespace, None);
        let (kept, skipped): (Vec<_>, Vec<_>) = federated.into_iter().partition(|f| {
            only.as_deref()
                .is_none_or(|ns| f.object["metadata"]["namespace"].as_str() == Some(ns))
        });
        notes.extend(skipped.iter().map(|f| {
            format!(
                "{}: {} is skipped: the federation is namespace-scoped to {:?} ({})",
                f.source,
                describe_federated(&f.object),
                self.namespace,
                self.source
            )
        }));
        kept
    }
}

/// The clusters to render for, sorted: KubeFedClusters of the input and `--cluster`s.
pub(super) fn clusters_of(inputs: &Inputs, extra_clusters: &[Cluster]) -> Result<Vec<Cluster>> {
    let mut clusters: Vec<Cluster> = inputs
        .clusters
        .iter()
        .map(|c| Cluster {
            name: key_of(&c.object).name,
            labels: c.object["metadata"]["labels"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                        .collect()
                })
                .unwrap_or_default(),
            ready: true,
        })
        .collect();
    clusters.extend(extra_clusters.iter().cloned());
    let mut seen = BTreeSet::new();
    for c in &clusters {
        if !seen.insert(c.name.clone()) {
            bail!(
                "cluster {:?} is named twice (KubeFedCluster files and --cluster)",
                c.name
            );
        }
    }
    if clusters.is_empty() {
        bail!("no clusters: give KubeFedCluster objects in the input, or --cluster NAME[:k=v,...]");
    }
    clusters.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(clusters)
}

/// Every federated object once, with overrides that can be read (checked
/// on all cores; errors in input order).
pub fn check_federated(federated: &[Sourced]) -> Result<()> {
    let mut names = BTreeSet::new();
    for f in federated {
        let kind = f.object["kind"].as_str().unwrap_or("");
        if !names.insert((kind.to_string(), key_of(&f.object))) {
            bail!(
                "{}: {kind} {:?} is given twice",
                f.source,
                describe_federated(&f.object)
            );
        }
    }
    crate::parallel::map(federated, |f| {
        validate_overrides(&f.object)
            .map_err(|e| anyhow!("{}: {}: {e}", f.source, describe_federated(&f.object)))
    })
    .into_iter()
    .collect()
}

/// The RSP pass over the input: each RSP rewrites its federated object.
/// Returns one line per RSP decision.
pub(super) fn schedule_rsps(
    inputs: &Inputs,
    federated: &mut [Sourced],
    fed_namespaces: &BTreeMap<String, Value>,
    clusters: &[Cluster],
    notes: &mut Vec<String>,
) -> Result<Vec<String>> {
    let mut scheduling = Vec::new();
    for rsp in &inputs.rsps {
        let key = key_of(&rsp.object);
        let (ns, name) = (&key.namespace, &key.name);
        let target_kind = rsp.object["spec"]["targetKind"].as_str().unwrap_or("");
        let Some(fed) = federated
            .iter_mut()
            .find(|f| key_of(&f.object) == key && f.object["kind"] == target_kind)
        else {
            notes.push(format!("{}: no {target_kind} {ns}/{name} in the input for this ReplicaSchedulingPreference", rsp.source));
            continue;
        };
        let fedns = fed_namespaces.get(ns);
        let empty = BTreeMap::new();
        match schedule(&rsp.object, &fed.object, fedns, clusters, &empty, &empty)
            .map_err(|e| anyhow!("{}: {e}", rsp.source))?
        {
            Scheduled::Updated(obj) => fed.object = obj,
            Scheduled::Unchanged => {}
        }
        scheduling.push(format!("{ns}/{name}: {}", replicas_summary(&fed.object)));
    }
    Ok(scheduling)
}

/// Cluster → indices into the placed objects, in input order.
pub(super) type ByCluster = BTreeMap<String, Vec<usize>>;

/// The decide step, as a live run makes it, with members that hold
/// nothing: each object is placed and rendered once, on all cores.
/// Without any FederatedNamespace in the input, namespaces are not a
/// constraint (as in a namespace-scoped control plane).
pub(super) fn decide_all(
    federated: Vec<Sourced>,
    config: Option<&RenderConfig>,
    fed_namespaces: &BTreeMap<String, Value>,
    clusters: &[Cluster],
    notes: &mut Vec<String>,
) -> Result<(Vec<Placed>, ByCluster)> {
    // Without a KubeFedConfig the input says which scope it was written for.
    let settings = config.map_or_else(
        || Settings {
            scope: if fed_namespaces.is_empty() {
                Scope::Namespaced
            } else {
                Scope::Cluster
            },
            ..Settings::default()
        },
        |c| c.settings,
    );
    let empty: BTreeMap<String, Listing> = clusters
        .iter()
        .map(|c| (c.name.clone(), Listing::Listed(HashMap::new())))
        .collect();
    let (host_namespaces, versions) = (HashMap::new(), HashMap::new());
    let federation = Federation {
        kubefed_namespace: config.map_or(crate::api::DEFAULT_KUBEFED_NAMESPACE, |c| &c.namespace),
        scope: settings.scope,
        settings: settings.sync,
        clusters,
        run: &crate::core::run::scope::RunScope::default(),
        fed_namespaces,
        host_namespaces: &host_namespaces,
        versions: &versions,
    };
    let decided = crate::parallel::map_owned(federated, |f| {
        decide_one(&federation, &empty, &f).map_err(|e| anyhow!("{}: {e}", f.source))
    });
    let mut placed = Vec::with_capacity(decided.len());
    let mut by_cluster: ByCluster = clusters
        .iter()
        .map(|c| (c.name.clone(), Vec::new()))
        .collect();
    for result in decided {
        let (object, note) = result?;
        notes.extend(note);
        if object.objects.is_empty() {
            continue;
        }
        for cluster in object.objects.keys() {
            by_cluster
                .get_mut(cluster)
                .expect("placement picks known clusters")
                .push(placed.len());
        }
        placed.push(object);
    }
    Ok((placed, by_cluster))
}

/// One federated object of the input through the decide step; every
/// problem is an error (offline there is nothing to retry).
pub(super) fn decide_one(
    federation: &Federation,
    empty: &BTreeMap<String, Listing>,
    f: &Sourced,
) -> Result<(Placed, Vec<String>)> {
    let obj = &f.object;
    let target = target_type(obj)?;
    let namespaced = builtin_by_kind(&target.kind)
        .map_or(obj["metadata"]["namespace"].is_string(), |b| b.namespaced);
    let t = FederatedType {
        federated_kind: obj["kind"].as_str().unwrap_or("").to_string(),
        target_plural: plural_of(&target.kind),
        target,
        namespaced,
    };
    let plan = decide::decide_object(federation, &t, obj, empty);
    if let Some(e) = &plan.placement_error {
        bail!("{e}");
    }
    for d in &plan.decisions {
        if let (Action::Skip, Some(status)) = (&d.action, d.status) {
            let why = d.message.clone().unwrap_or_default();
            if status == ClusterStatus::ComputeResourceFailed {
                bail!("{why}");
            }
            bail!("cluster {:?}: {why}", d.cluster);
        }
    }
    let mut notes: Vec<String> = plan
        .notes
        .iter()
        .map(|n| format!("{}: {n}", f.source))
        .collect();
    if plan.reason == AggregateReason::NamespaceNotFederated {
        notes.push(format!(
            "{}: {} is not placed: namespace {:?} has no FederatedNamespace in the input",
            f.source,
            describe_federated(obj),
            plan.key.namespace
        ));
    }
    Ok((Placed::new(plan), notes))
}

/// The target of a federated object: `Federated<Kind>` → Kind, with the
/// group/version of the built-in type, or the template's own apiVersion.
pub fn target_type(fed: &Value) -> Result<TargetType> {
    let kind = fed["kind"]
        .as_str()
        .and_then(|k| k.strip_prefix("Federated"))
        .unwrap_or("");
    if kind.is_empty() {
        bail!("{}: not a Federated<Kind>", describe_federated(fed));
    }
    if let Some(av) = fed["spec"]["template"]["apiVersion"]
        .as_str()
        .filter(|a| !a.is_empty())
    {
        let (group, version) = av.split_once('/').unwrap_or(("", av));
        return Ok(TargetType::new(group, version, kind));
    }
    match builtin_by_kind(kind) {
        Some(b) => Ok(TargetType::new(b.group, builtin_version(b.group), kind)),
        None => bail!(
            "{}: {kind} is not a built-in type; set spec.template.apiVersion to say which group/version it is",
            describe_federated(fed)
        ),
    }
}

/// `ap-northeast=3, us-east=6` from a federated object's replicas overrides.
pub(super) fn replicas_summary(fed: &Value) -> String {
    let mut parts = Vec::new();
    for o in fed["spec"]["overrides"].as_array().into_iter().flatten() {
        for co in o["clusterOverrides"].as_array().into_iter().flatten() {
            if co["path"] == "/spec/replicas" {
                parts.push(format!(
                    "{}={}",
                    o["clusterName"].as_str().unwrap_or(""),
                    co["value"]
                ));
            }
        }
    }
    parts.sort();
    if parts.is_empty() {
        "no replicas scheduled".into()
    } else {
        parts.join(", ")
    }
}

/// What the files say of one member for a DNS record: its topology (its
/// KubeFedCluster's status) and the load balancer of the record's
/// Service or Ingress there (a member object annotated with its cluster).
fn file_observation(
    inputs: &Inputs,
    c: &Cluster,
    record: &crate::core::dns::DnsRecord,
) -> crate::core::dns::ClusterObservation {
    use crate::core::dns::{ClusterObservation, LbIngress};
    let member_kind = if record.kind == crate::core::dns::RecordKind::Service {
        "Service"
    } else {
        "Ingress"
    };
    let kfc = inputs
        .clusters
        .iter()
        .find(|k| k.object["metadata"]["name"] == c.name.as_str());
    let status = kfc
        .map(|k| k.object["status"].clone())
        .unwrap_or(Value::Null);
    let lb: Vec<LbIngress> = inputs
        .member_status
        .iter()
        .filter(|m| {
            m.object["kind"] == member_kind
                && m.object["metadata"]["annotations"][CLUSTER_ANNOTATION] == c.name.as_str()
                && m.object["metadata"]["name"] == record.name.as_str()
                && m.object["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("default")
                    == record.namespace
        })
        .flat_map(|m| {
            m.object["status"]["loadBalancer"]["ingress"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|i| LbIngress {
            ip: i["ip"].as_str().unwrap_or("").into(),
            hostname: i["hostname"].as_str().unwrap_or("").into(),
        })
        .collect();
    ClusterObservation {
        cluster: c.name.clone(),
        ready: true,
        region: status["region"].as_str().unwrap_or("").into(),
        zones: status["zones"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|z| z.as_str().map(String::from))
            .collect(),
        has_ready_endpoints: !lb.is_empty(),
        load_balancer: lb,
    }
}

/// DNSEndpoints for the DNS records in the input: region and zones from
/// the KubeFedClusters' status, load balancers from the member Services
/// annotated with their cluster (offline, every such Service counts as
/// having ready endpoints).
pub(super) fn render_dns(
    inputs: &Inputs,
    clusters: &[Cluster],
    notes: &mut Vec<String>,
) -> Result<Vec<Value>> {
    use crate::core::dns::{
        ClusterObservation, DnsRecord, Domain, RecordStatus, dns_endpoints, record_status,
    };
    let domains: Vec<Domain> = inputs
        .dns
        .iter()
        .filter(|d| d.object["kind"] == "Domain")
        .map(|d| Domain::from_value(&d.object).map_err(|e| anyhow!("{}: {e}", d.source)))
        .collect::<Result<_>>()?;
    let mut out = Vec::new();
    for r in inputs.dns.iter().filter(|d| d.object["kind"] != "Domain") {
        let record = DnsRecord::from_value(&r.object).map_err(|e| anyhow!("{}: {e}", r.source))?;
        let observations: Vec<ClusterObservation> = clusters
            .iter()
            .map(|c| file_observation(inputs, c, &record))
            .collect();
        let domain = domains.iter().find(|d| d.name == record.domain_ref);
        let plan = record_status(&record, domain, &observations, &RecordStatus::default())
            .map_err(|e| anyhow!("{}: {e}", r.source))?;
        notes.extend(plan.warnings.iter().map(|w| format!("{}: {w}", r.source)));
        if let Some(status) = plan.status {
            let endpoints = dns_endpoints(&record, &status);
            notes.extend(
                endpoints
                    .warnings
                    .iter()
                    .map(|w| format!("{}: {w}", r.source)),
            );
            out.push(endpoints.object());
        }
    }
    Ok(out)
}
