//! Offline reconcile: federated objects, FederatedNamespaces, RSPs and
//! KubeFedClusters from files → the objects each member cluster would hold.

use crate::core::builtin_types::{builtin_by_kind, builtin_version, plural_of};
use crate::core::decide::{self, FederatedType, Federation, Listing, ObjectPlan, key_of};
use crate::core::describe::describe_federated;
use crate::core::desired::TargetType;
use crate::core::legacy;
use crate::core::membership::Scope;
use crate::core::overrides::validate_overrides;
use crate::core::placement::{Cluster, is_federated_namespace};
use crate::core::plan::{Action, AggregateReason, ClusterStatus};
use crate::core::scheduling::{Scheduled, schedule};
use crate::core::settings::Settings;
use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One input object and where it came from (for error messages).
#[derive(Clone, Debug)]
pub struct Sourced {
    pub source: String,
    pub object: Value,
}

/// Everything read from the input files, sorted by role.
#[derive(Clone, Default, Debug)]
pub struct Inputs {
    pub clusters: Vec<Sourced>,
    pub federated: Vec<Sourced>,
    pub rsps: Vec<Sourced>,
    /// Domains, ServiceDNSRecords and IngressDNSRecords.
    pub dns: Vec<Sourced>,
    /// Member Services/Ingresses (annotated with their cluster) carrying
    /// `status.loadBalancer`, for the DNS records.
    pub member_status: Vec<Sourced>,
    /// The KubeFedConfig, when the input has one: its settings apply as
    /// they do to a live run.
    pub config: Option<Sourced>,
    pub notes: Vec<String>,
}

/// Annotation naming the member a Service or Ingress document was read from.
pub const CLUSTER_ANNOTATION: &str = "kubefedctl.kubefed.io/cluster";

/// Reads YAML/JSON files, directories (recursively, `*.yaml`, `*.yml`,
/// `*.json`, in name order) or `-` (stdin).
pub fn load(paths: &[PathBuf]) -> Result<Inputs> {
    let mut inputs = Inputs::default();
    for path in paths {
        for file in files(path)? {
            let (name, text) = if file.as_os_str() == "-" {
                let mut s = String::new();
                std::io::stdin()
                    .read_to_string(&mut s)
                    .context("reading stdin")?;
                ("stdin".to_string(), s)
            } else {
                let text = std::fs::read_to_string(&file)
                    .with_context(|| format!("reading {}", file.display()))?;
                (file.display().to_string(), text)
            };
            add_documents(&mut inputs, &name, &text)?;
        }
    }
    Ok(inputs)
}

fn files(path: &Path) -> Result<Vec<PathBuf>> {
    if path.as_os_str() == "-" || path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    if !path.is_dir() {
        bail!("{}: no such file or directory", path.display());
    }
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("reading {}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            out.extend(files(&p)?);
        } else if p
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            out.push(p);
        }
    }
    Ok(out)
}

/// Sorts the documents of one file into [`Inputs`].
pub fn add_documents(inputs: &mut Inputs, source: &str, text: &str) -> Result<()> {
    let docs: Vec<Value> =
        crate::yaml::yaml_documents(text).map_err(|e| anyhow!("{source}: invalid YAML: {e}"))?;
    for (i, doc) in docs.into_iter().enumerate() {
        let at = format!("{source}: document {}", i + 1);
        let items = match doc {
            Value::Object(mut list) if list.get("kind").is_some_and(|k| k == "List") => {
                match list.remove("items") {
                    Some(Value::Array(items)) => items,
                    _ => Vec::new(),
                }
            }
            doc => vec![doc],
        };
        for obj in items {
            let (object, notes) = legacy::normalize(obj);
            inputs
                .notes
                .extend(notes.into_iter().map(|n| format!("{at}: {n}")));
            let kind = object["kind"].as_str().unwrap_or("");
            let group = object["apiVersion"]
                .as_str()
                .and_then(|a| a.split_once('/'))
                .map(|(g, _)| g)
                .unwrap_or("");
            if object["metadata"]["name"]
                .as_str()
                .is_none_or(str::is_empty)
            {
                bail!(
                    "{at}: {} has no metadata.name",
                    if kind.is_empty() { "the object" } else { kind }
                );
            }
            let member = object["metadata"]["annotations"][CLUSTER_ANNOTATION]
                .as_str()
                .is_some();
            let role = match (group, kind) {
                ("core.kubefed.io", "KubeFedCluster") => &mut inputs.clusters,
                (
                    "multiclusterdns.kubefed.io",
                    "Domain" | "ServiceDNSRecord" | "IngressDNSRecord",
                ) => &mut inputs.dns,
                ("", "Service") | ("networking.k8s.io", "Ingress") if member => {
                    &mut inputs.member_status
                }
                ("scheduling.kubefed.io", "ReplicaSchedulingPreference") => &mut inputs.rsps,
                ("core.kubefed.io", "KubeFedConfig") => {
                    if let Some(first) = &inputs.config {
                        bail!(
                            "{at}: a second KubeFedConfig (the first is {})",
                            first.source
                        );
                    }
                    inputs.config = Some(Sourced {
                        source: at.clone(),
                        object,
                    });
                    continue;
                }
                ("core.kubefed.io", _) => {
                    inputs
                        .notes
                        .push(format!("{at}: {kind} is not used when rendering; skipped"));
                    continue;
                }
                (_, k) if k.starts_with("Federated") && group.ends_with("kubefed.io") => {
                    &mut inputs.federated
                }
                _ => bail!(
                    "{at}: {kind:?} ({}) is not a federated object, ReplicaSchedulingPreference or KubeFedCluster",
                    object["apiVersion"].as_str().unwrap_or("no apiVersion")
                ),
            };
            role.push(Sourced {
                source: at.clone(),
                object,
            });
        }
    }
    Ok(())
}

/// `name` or `name:k=v,k2=v2` from `--cluster`.
pub fn parse_cluster_flag(text: &str) -> Result<Cluster> {
    let (name, labels) = text.split_once(':').unwrap_or((text, ""));
    if let Some(e) = crate::core::names::subdomain_error(name) {
        bail!("--cluster {text:?}: invalid cluster name: {e}");
    }
    let labels = crate::core::convert::parse_labels(labels)
        .map_err(|e| anyhow!("--cluster {text:?}: {e}"))?;
    Ok(Cluster {
        name: name.to_string(),
        labels: labels.into_iter().collect(),
        ready: true,
    })
}

/// Everything a render decided before building any member object: the
/// clusters, each federated object's target and placement (after the RSP
/// pass) and the host's own objects. Member objects are built per cluster
/// ([`RenderPlan::cluster_objects`]), on all cores, so a large render never
/// holds every cluster's objects at once.
#[derive(Debug)]
pub struct RenderPlan {
    /// Sorted by name.
    pub clusters: Vec<Cluster>,
    placed: Vec<Placed>,
    /// Cluster name → indices into `placed`, in input order.
    by_cluster: BTreeMap<String, Vec<usize>>,
    /// Objects for the host itself (DNSEndpoints).
    pub host: Vec<Value>,
    /// One line per RSP decision: `test-ns/web: ap-northeast=3, us-east=6`.
    pub scheduling: Vec<String>,
    pub notes: Vec<String>,
}

/// A federated object placed on at least one cluster: what the decide
/// step creates in each (members hold nothing offline).
#[derive(Debug)]
struct Placed {
    /// Cluster → the object to create there.
    objects: BTreeMap<String, Arc<Value>>,
    /// The object several clusters share (no overrides), if any.
    shared: Option<Arc<Value>>,
}

impl Placed {
    fn new(plan: ObjectPlan) -> Placed {
        let objects: BTreeMap<String, Arc<Value>> = plan
            .decisions
            .into_iter()
            .filter_map(|d| match d.action {
                Action::Create(obj) => Some((d.cluster, obj)),
                _ => None,
            })
            .collect();
        let all: Vec<&Arc<Value>> = objects.values().collect();
        let shared = all
            .iter()
            .enumerate()
            .find(|(i, a)| all[i + 1..].iter().any(|b| Arc::ptr_eq(a, b)))
            .map(|(_, a)| Arc::clone(a));
        Placed { objects, shared }
    }
}

/// One object of one member cluster: its federated object's shared object
/// or this cluster's own (overridden) copy.
pub struct MemberObject<'a> {
    /// The federated object's index in the plan.
    placed: usize,
    object: &'a Arc<Value>,
    shared: bool,
}

impl MemberObject<'_> {
    pub fn value(&self) -> &Value {
        self.object
    }

    /// The object as text: a shared object's from `shared` (written once
    /// for every cluster, see [`RenderPlan::shared_texts`]), an own copy
    /// written now.
    fn text<'t>(
        &'t self,
        shared: &'t [String],
        write: impl Fn(&Value) -> Result<String>,
    ) -> Result<Cow<'t, str>> {
        if self.shared {
            Ok(Cow::Borrowed(&shared[self.placed]))
        } else {
            Ok(Cow::Owned(write(self.object)?))
        }
    }
}

/// Every cluster's objects in memory (small renders, tests).
#[derive(Debug, Default)]
pub struct Rendered {
    /// Cluster → its objects, in apply order (namespaces first).
    pub clusters: BTreeMap<String, Vec<Value>>,
    /// Objects for the host itself (DNSEndpoints).
    pub host: Vec<Value>,
    /// One line per RSP decision.
    pub scheduling: Vec<String>,
    pub notes: Vec<String>,
}

/// [`plan`], then every cluster's objects.
pub fn render(inputs: Inputs, extra_clusters: &[Cluster]) -> Result<Rendered> {
    let plan = plan(inputs, extra_clusters)?;
    let clusters = plan.per_cluster(|cluster, objects| {
        let objects = objects.into_iter().map(|o| o.value().clone()).collect();
        Ok((cluster.to_string(), objects))
    })?;
    Ok(Rendered {
        clusters: clusters.into_iter().collect(),
        host: plan.host,
        scheduling: plan.scheduling,
        notes: plan.notes,
    })
}

/// Runs RSP scheduling, placement, override validation and template
/// rendering over the inputs (objects are validated and placed on all
/// cores). Every error names the file/document, object, cluster or field.
pub fn plan(inputs: Inputs, extra_clusters: &[Cluster]) -> Result<RenderPlan> {
    let mut inputs = inputs;
    let mut notes = std::mem::take(&mut inputs.notes);
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
        .map(|f| (key_of(&f.object).1, f.object.clone()))
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
struct RenderConfig {
    source: String,
    namespace: String,
    settings: Settings,
}

fn config_of(inputs: &Inputs) -> Result<Option<RenderConfig>> {
    let Some(c) = &inputs.config else {
        return Ok(None);
    };
    let namespace = c.object["metadata"]["namespace"]
        .as_str()
        .unwrap_or(crate::api::DEFAULT_KUBEFED_NAMESPACE)
        .to_string();
    let settings = crate::core::settings::settings(Some(&c.object["spec"]))
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
fn clusters_of(inputs: &Inputs, extra_clusters: &[Cluster]) -> Result<Vec<Cluster>> {
    let mut clusters: Vec<Cluster> = inputs
        .clusters
        .iter()
        .map(|c| Cluster {
            name: key_of(&c.object).1,
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
fn check_federated(federated: &[Sourced]) -> Result<()> {
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
fn schedule_rsps(
    inputs: &Inputs,
    federated: &mut [Sourced],
    fed_namespaces: &BTreeMap<String, Value>,
    clusters: &[Cluster],
    notes: &mut Vec<String>,
) -> Result<Vec<String>> {
    let mut scheduling = Vec::new();
    for rsp in &inputs.rsps {
        let (ns, name) = key_of(&rsp.object);
        let target_kind = rsp.object["spec"]["targetKind"].as_str().unwrap_or("");
        let Some(fed) = federated.iter_mut().find(|f| {
            key_of(&f.object) == (ns.clone(), name.clone()) && f.object["kind"] == target_kind
        }) else {
            notes.push(format!("{}: no {target_kind} {ns}/{name} in the input for this ReplicaSchedulingPreference", rsp.source));
            continue;
        };
        let fedns = fed_namespaces.get(&ns);
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
type ByCluster = BTreeMap<String, Vec<usize>>;

/// The decide step, as a live run makes it, with members that hold
/// nothing: each object is placed and rendered once, on all cores.
/// Without any FederatedNamespace in the input, namespaces are not a
/// constraint (as in a namespace-scoped control plane).
fn decide_all(
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
        touched: None,
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
fn decide_one(
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
            plan.key.0
        ));
    }
    Ok((Placed::new(plan), notes))
}

impl RenderPlan {
    /// The objects for `cluster`, in apply order (namespaces first, then by
    /// namespace, kind and name).
    fn build(&self, cluster: &str) -> Vec<MemberObject<'_>> {
        let indices = self.by_cluster.get(cluster).map_or(&[][..], Vec::as_slice);
        let objects = indices
            .iter()
            .map(|&i| {
                let placed = &self.placed[i];
                let object = &placed.objects[cluster];
                let shared = placed
                    .shared
                    .as_ref()
                    .is_some_and(|s| Arc::ptr_eq(s, object));
                MemberObject {
                    placed: i,
                    object,
                    shared,
                }
            })
            .collect();
        in_apply_order(objects)
    }

    /// Every federated object's shared object as text, on all cores: most
    /// clusters share it, so it is written once, not once per cluster.
    fn shared_texts(&self, write: impl Fn(&Value) -> Result<String> + Sync) -> Result<Vec<String>> {
        crate::parallel::map(&self.placed, |p| match &p.shared {
            Some(shared) => write(shared),
            None => Ok(String::new()),
        })
        .into_iter()
        .collect()
    }

    /// Builds every cluster's objects and hands them to `work`, clusters
    /// spread over all cores; results come back in cluster order (on
    /// failure, the first cluster's error).
    pub fn per_cluster<T: Send>(
        &self,
        work: impl Fn(&str, Vec<MemberObject<'_>>) -> Result<T> + Sync,
    ) -> Result<Vec<T>> {
        crate::parallel::map(&self.clusters, |c| work(&c.name, self.build(&c.name)))
            .into_iter()
            .collect()
    }
}

/// `objects` sorted (stably) by [`apply_order`], each key computed once.
fn in_apply_order(objects: Vec<MemberObject<'_>>) -> Vec<MemberObject<'_>> {
    let order: Vec<usize> = {
        let keys: Vec<_> = objects.iter().map(|o| apply_order(o.value())).collect();
        if keys.is_sorted() {
            return objects;
        }
        let mut order: Vec<usize> = (0..objects.len()).collect();
        order.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
        order
    };
    let mut slots: Vec<Option<MemberObject>> = objects.into_iter().map(Some).collect();
    order
        .into_iter()
        .map(|i| slots[i].take().expect("each index once"))
        .collect()
}

/// Namespaces first, then namespace, kind, name.
fn apply_order(o: &Value) -> (bool, &str, &str, &str) {
    (
        o["kind"] != "Namespace",
        o["metadata"]["namespace"].as_str().unwrap_or(""),
        o["kind"].as_str().unwrap_or(""),
        o["metadata"]["name"].as_str().unwrap_or(""),
    )
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
fn replicas_summary(fed: &Value) -> String {
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

/// DNSEndpoints for the DNS records in the input: region and zones from
/// the KubeFedClusters' status, load balancers from the member Services
/// annotated with their cluster (offline, every such Service counts as
/// having ready endpoints).
fn render_dns(
    inputs: &Inputs,
    clusters: &[Cluster],
    notes: &mut Vec<String>,
) -> Result<Vec<Value>> {
    use crate::core::dns::{
        ClusterObservation, DnsRecord, Domain, LbIngress, RecordStatus, dns_endpoints,
        record_status,
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
        let member_kind = if record.kind == crate::core::dns::RecordKind::Service {
            "Service"
        } else {
            "Ingress"
        };
        let observations: Vec<ClusterObservation> = clusters
            .iter()
            .map(|c| {
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
                            && m.object["metadata"]["annotations"][CLUSTER_ANNOTATION]
                                == c.name.as_str()
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
            })
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

/// A multi-document stream, each object preceded by `# cluster: NAME`
/// (`# host` for the host's own objects, DNSEndpoints). Every piece is
/// built before the first byte is written: an error writes nothing.
pub fn write_stream(plan: &RenderPlan, out: &mut dyn Write) -> Result<()> {
    let yaml = |obj: &Value| crate::output::render(obj, crate::output::DocumentFormat::Yaml);
    let mut host = String::new();
    for obj in &plan.host {
        host.push_str("---\n# host\n");
        host.push_str(&yaml(obj)?);
    }
    let shared = plan.shared_texts(yaml)?;
    let pieces = plan.per_cluster(|cluster, objects| {
        let mut piece = String::new();
        for obj in &objects {
            piece.push_str("---\n# cluster: ");
            piece.push_str(cluster);
            piece.push('\n');
            piece.push_str(&obj.text(&shared, yaml)?);
        }
        Ok(piece)
    })?;
    out.write_all(host.as_bytes())?;
    for piece in pieces {
        out.write_all(piece.as_bytes())?;
    }
    Ok(out.flush()?)
}

/// `{"<cluster>": [objects], "_host": [DNSEndpoints]}`, byte for byte what
/// serde_json's pretty printer writes for that map, but built from
/// per-cluster pieces in parallel without holding every object at once.
/// As [`write_stream`], an error writes nothing.
pub fn write_json(plan: &RenderPlan, out: &mut dyn Write) -> Result<()> {
    let shared = plan.shared_texts(indented_json)?;
    let mut members: Vec<(String, String)> = plan.per_cluster(|cluster, objects| {
        let texts = objects.iter().map(|o| o.text(&shared, indented_json));
        Ok((cluster.to_string(), json_member(cluster, texts)?))
    })?;
    if !plan.host.is_empty() {
        let texts = plan.host.iter().map(|o| indented_json(o).map(Cow::Owned));
        members.push(("_host".into(), json_member("_host", texts)?));
    }
    members.sort_by(|a, b| a.0.cmp(&b.0));
    if members.is_empty() {
        out.write_all(b"{}\n")?;
        return Ok(out.flush()?);
    }
    out.write_all(b"{\n")?;
    for (i, (_, member)) in members.iter().enumerate() {
        if i > 0 {
            out.write_all(b",\n")?;
        }
        out.write_all(member.as_bytes())?;
    }
    out.write_all(b"\n}\n")?;
    Ok(out.flush()?)
}

/// `  "key": [ ... ]` at depth one of a pretty-printed map, from the
/// elements' [`indented_json`].
fn json_member<'a>(
    key: &str,
    elements: impl ExactSizeIterator<Item = Result<Cow<'a, str>>>,
) -> Result<String> {
    let mut text = format!("  {}: ", serde_json::to_string(key)?);
    if elements.len() == 0 {
        text.push_str("[]");
        return Ok(text);
    }
    text.push_str("[\n");
    let last = elements.len() - 1;
    for (i, element) in elements.enumerate() {
        text.push_str("    ");
        text.push_str(&element?);
        text.push_str(if i < last { ",\n" } else { "\n" });
    }
    text.push_str("  ]");
    Ok(text)
}

/// `value` as pretty JSON for an array inside a map (four more spaces
/// after every newline).
fn indented_json(value: &Value) -> Result<String> {
    let mut text = Vec::new();
    serde_json::to_writer_pretty(Indented(&mut text), value)?;
    Ok(String::from_utf8(text)?)
}

/// Pretty JSON two levels deeper than serde_json starts it. Pretty JSON
/// has no raw newline inside strings, so indenting after every newline is
/// exact.
struct Indented<'a>(&'a mut Vec<u8>);

impl std::io::Write for Indented<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut rest = buf;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            self.0.extend_from_slice(&rest[..=i]);
            self.0.extend_from_slice(b"    ");
            rest = &rest[i + 1..];
        }
        self.0.extend_from_slice(rest);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Marks a directory as ours, so a re-render may replace it.
pub const RENDER_MARKER: &str = ".kubefedctl-render";

/// Writes `DIR/<cluster>/<namespace or _cluster>/<kind>-<name>.yaml`,
/// all or nothing: into a new directory, renamed into place at the end.
pub fn write_dir(plan: &RenderPlan, dir: &Path) -> Result<usize> {
    if dir.exists() {
        let ours = dir.join(RENDER_MARKER).exists();
        let empty = std::fs::read_dir(dir)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if !ours && !empty {
            bail!(
                "{} exists and was not written by kubefedctl reconcile --output-dir: refusing to replace it",
                dir.display()
            );
        }
    }
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let staging = parent.join(format!(
        ".{}.tmp-{}",
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("render"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&staging);
    let result = (|| -> Result<usize> {
        std::fs::create_dir_all(&staging)?;
        std::fs::write(
            staging.join(RENDER_MARKER),
            "rendered by kubefedctl reconcile --from\n",
        )?;
        let write = |cluster: &str, obj: &Value, yaml: &str| -> Result<()> {
            let ns = obj["metadata"]["namespace"].as_str().unwrap_or("_cluster");
            let file = staging.join(cluster).join(ns).join(format!(
                "{}-{}.yaml",
                obj["kind"].as_str().unwrap_or("object").to_lowercase(),
                obj["metadata"]["name"].as_str().unwrap_or("")
            ));
            std::fs::create_dir_all(file.parent().expect("has a parent"))?;
            Ok(std::fs::write(&file, yaml)?)
        };
        let mut count = 0;
        for obj in &plan.host {
            let yaml = crate::output::render(obj, crate::output::DocumentFormat::Yaml)?;
            write("_host", obj, &yaml)?;
            count += 1;
        }
        let yaml = |obj: &Value| crate::output::render(obj, crate::output::DocumentFormat::Yaml);
        let shared = plan.shared_texts(yaml)?;
        for written in plan.per_cluster(|cluster, objects| {
            for obj in &objects {
                write(cluster, obj.value(), &obj.text(&shared, yaml)?)?;
            }
            Ok(objects.len())
        })? {
            count += written;
        }
        Ok(count)
    })();
    match result {
        Ok(count) => {
            if dir.exists() {
                std::fs::remove_dir_all(dir)
                    .with_context(|| format!("replacing {}", dir.display()))?;
            }
            std::fs::rename(&staging, dir)
                .with_context(|| format!("moving the output into {}", dir.display()))?;
            Ok(count)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(e.context(format!("writing {}", dir.display())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_records_render_from_annotated_member_services() {
        let text = r#"
apiVersion: core.kubefed.io/v1beta1
kind: KubeFedCluster
metadata: {name: eu1}
spec: {apiEndpoint: "https://eu1", secretRef: {name: s}}
status: {region: europe, zones: [europe-1a], conditions: []}
---
apiVersion: core.kubefed.io/v1beta1
kind: KubeFedCluster
metadata: {name: us1}
spec: {apiEndpoint: "https://us1", secretRef: {name: s}}
status: {region: america, zones: [america-1b], conditions: []}
---
apiVersion: multiclusterdns.kubefed.k8s.io/v1alpha1
kind: Domain
metadata: {name: galactic, namespace: kube-federation-system}
domain: example.com
---
apiVersion: multiclusterdns.kubefed.io/v1alpha1
kind: ServiceDNSRecord
metadata: {name: web, namespace: shop}
spec: {domainRef: galactic}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop, annotations: {kubefedctl.kubefed.io/cluster: eu1}}
status: {loadBalancer: {ingress: [{ip: 192.0.2.10}]}}
"#;
        let r = render(inputs(text), &[]).unwrap();
        assert_eq!(r.host.len(), 1);
        let ep = &r.host[0];
        assert_eq!(ep["kind"], "DNSEndpoint");
        assert_eq!(ep["metadata"]["name"], "service-web");
        let names: Vec<(&str, &str)> = ep["spec"]["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["dnsName"].as_str().unwrap(),
                    e["recordType"].as_str().unwrap(),
                )
            })
            .collect();
        assert!(
            names.contains(&("web.shop.galactic.svc.europe-1a.europe.example.com", "A")),
            "{names:?}"
        );
        assert!(
            names.contains(&("web.shop.galactic.svc.america.example.com", "CNAME")),
            "us1 has no load balancer: {names:?}"
        );
        let mut stream = Vec::new();
        write_stream(&plan(inputs(text), &[]).unwrap(), &mut stream).unwrap();
        assert!(
            String::from_utf8(stream)
                .unwrap()
                .starts_with("---\n# host\n")
        );
    }

    fn inputs(text: &str) -> Inputs {
        let mut i = Inputs::default();
        add_documents(&mut i, "in.yaml", text).unwrap();
        i
    }

    const SEED_RSP: &str = r#"
apiVersion: scheduling.kubefed.k8s.io/v1alpha1
kind: ReplicaSchedulingPreference
metadata: {name: test-deployment, namespace: test-ns}
spec:
  targetKind: FederatedDeployment
  totalReplicas: 15
  clusters:
    "*": {weight: 2, maxReplicas: 12}
    ap-northeast: {minReplicas: 1, maxReplicas: 3, weight: 1}
---
apiVersion: types.kubefed.k8s.io/v1beta1
kind: FederatedDeployment
metadata: {name: test-deployment, namespace: test-ns}
spec:
  template:
    spec:
      selector: {matchLabels: {app: nginx}}
      template:
        metadata: {labels: {app: nginx}}
        spec: {containers: [{name: nginx, image: nginx}]}
  placement: {clusterSelector: {}}
"#;

    #[test]
    fn the_seed_rsp_gives_3_6_6() {
        let clusters: Vec<Cluster> = ["ap-northeast", "us-east", "us-west"]
            .iter()
            .map(|c| parse_cluster_flag(c).unwrap())
            .collect();
        let r = render(inputs(SEED_RSP), &clusters).unwrap();
        let replicas: Vec<(String, i64)> = r
            .clusters
            .iter()
            .map(|(c, objs)| (c.clone(), objs[0]["spec"]["replicas"].as_i64().unwrap()))
            .collect();
        assert_eq!(
            replicas,
            [
                ("ap-northeast".into(), 3),
                ("us-east".into(), 6),
                ("us-west".into(), 6)
            ]
        );
        assert_eq!(
            r.scheduling,
            ["test-ns/test-deployment: ap-northeast=3, us-east=6, us-west=6"]
        );
        let d = &r.clusters["us-east"][0];
        assert_eq!(d["apiVersion"], "apps/v1");
        assert_eq!(d["kind"], "Deployment");
        assert_eq!(d["metadata"]["namespace"], "test-ns");
        assert_eq!(d["metadata"]["labels"]["kubefed.io/managed"], "true");
    }

    #[test]
    fn labels_select_clusters_and_federated_namespaces_narrow() {
        let text = r#"
apiVersion: core.kubefed.io/v1beta1
kind: KubeFedCluster
metadata: {name: eu1, labels: {region: eu}}
spec: {apiEndpoint: "https://eu1", secretRef: {name: s}}
---
apiVersion: core.kubefed.io/v1beta1
kind: KubeFedCluster
metadata: {name: us1, labels: {region: us}}
spec: {apiEndpoint: "https://us1", secretRef: {name: s}}
---
apiVersion: types.kubefed.io/v1beta1
kind: FederatedNamespace
metadata: {name: shop, namespace: shop}
spec: {placement: {clusters: [{name: eu1}, {name: us1}]}}
---
apiVersion: types.kubefed.io/v1beta1
kind: FederatedConfigMap
metadata: {name: cfg, namespace: shop}
spec:
  template: {data: {colour: blue}}
  placement: {clusterSelector: {matchLabels: {region: eu}}}
  overrides:
  - clusterName: eu1
    clusterOverrides: [{path: /data/colour, value: green}]
"#;
        let r = render(inputs(text), &[]).unwrap();
        let kinds = |c: &str| {
            r.clusters[c]
                .iter()
                .map(|o| o["kind"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(kinds("eu1"), ["Namespace", "ConfigMap"]);
        assert_eq!(kinds("us1"), ["Namespace"]);
        assert_eq!(r.clusters["eu1"][1]["data"]["colour"], "green");
        assert!(r.clusters["eu1"][0]["metadata"].get("namespace").is_none());
    }

    #[test]
    fn bad_input_names_file_object_and_field() {
        let dup = format!(
            "{SEED_RSP}---\napiVersion: core.kubefed.io/v1beta1\nkind: KubeFedCluster\nmetadata: {{name: us-east}}\nspec: {{}}\n"
        );
        let e = render(inputs(&dup), &[parse_cluster_flag("us-east").unwrap()])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "cluster \"us-east\" is named twice (KubeFedCluster files and --cluster)"
        );

        let forbidden = "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {name: c, namespace: ns1}\nspec:\n  placement: {clusterSelector: {}}\n  overrides:\n  - clusterName: a\n    clusterOverrides: [{path: /metadata/name, value: x}]\n";
        let e = render(inputs(forbidden), &[parse_cluster_flag("a").unwrap()])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("in.yaml: document 1: FederatedConfigMap \"ns1/c\": "),
            "{e}"
        );
        assert!(e.contains("/metadata/name"), "{e}");

        let remove_missing = "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {name: c, namespace: ns1}\nspec:\n  template: {data: {}}\n  placement: {clusterSelector: {}}\n  overrides:\n  - clusterName: a\n    clusterOverrides: [{op: remove, path: /data/nothing}]\n";
        let e = render(inputs(remove_missing), &[parse_cluster_flag("a").unwrap()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cluster \"a\"") && e.contains("/data/nothing"),
            "{e}"
        );

        let mut i = Inputs::default();
        let e = add_documents(
            &mut i,
            "x.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "x.yaml: document 1: \"ConfigMap\" (v1) is not a federated object, ReplicaSchedulingPreference or KubeFedCluster"
        );
        let e = target_type(
            &serde_json::json!({"kind": "FederatedGizmo", "metadata": {"name": "g"}, "spec": {}}),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("set spec.template.apiVersion"), "{e}");
        assert!(parse_cluster_flag("Bad_Name").is_err());
        assert_eq!(
            parse_cluster_flag("eu1:region=eu,tier=web")
                .unwrap()
                .labels
                .len(),
            2
        );
    }

    /// The JSON written from per-cluster pieces is byte for byte what
    /// serde_json's pretty printer writes for the whole map: clusters with
    /// and without overrides, an empty cluster, host objects, and a cluster
    /// name that sorts before `_host`.
    #[test]
    fn json_from_pieces_equals_the_pretty_printed_map() {
        let text = r#"
apiVersion: types.kubefed.io/v1beta1
kind: FederatedConfigMap
metadata: {name: cfg, namespace: shop}
spec:
  template: {data: {colour: "blue \"sky\"\nline", n: 1.5}}
  placement: {clusters: [{name: 0a}, {name: eu1}]}
  overrides:
  - clusterName: eu1
    clusterOverrides: [{path: /data/colour, value: green}]
---
apiVersion: types.kubefed.io/v1beta1
kind: FederatedSecret
metadata: {name: empty, namespace: shop}
spec: {template: {}, placement: {clusters: [{name: 0a}]}}
"#;
        let flags: Vec<Cluster> = ["0a", "eu1", "idle"]
            .iter()
            .map(|c| parse_cluster_flag(c).unwrap())
            .collect();
        let mut with_dns = inputs(text);
        for c in ["0a", "eu1", "idle"] {
            add_documents(
                &mut with_dns,
                "clusters.yaml",
                &format!("apiVersion: core.kubefed.io/v1beta1\nkind: KubeFedCluster\nmetadata: {{name: {c}}}\nspec: {{}}\nstatus: {{region: r{c}, zones: [z{c}]}}\n"),
            )
            .unwrap();
        }
        add_documents(
            &mut with_dns,
            "dns.yaml",
            "apiVersion: multiclusterdns.kubefed.io/v1alpha1\nkind: Domain\nmetadata: {name: d, namespace: kube-federation-system}\ndomain: example.com\n---\napiVersion: multiclusterdns.kubefed.io/v1alpha1\nkind: ServiceDNSRecord\nmetadata: {name: web, namespace: shop}\nspec: {domainRef: d}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop, annotations: {kubefedctl.kubefed.io/cluster: eu1}}\nstatus: {loadBalancer: {ingress: [{ip: 192.0.2.1}]}}\n",
        )
        .unwrap();
        let mut hosts = Vec::new();
        for (inputs_now, clusters) in [(inputs(text), flags), (with_dns, Vec::new())] {
            let again = inputs_now.clone();
            let whole = render(inputs_now, &clusters).unwrap();
            let mut map: serde_json::Map<String, Value> = whole
                .clusters
                .iter()
                .map(|(c, objs)| (c.clone(), Value::Array(objs.clone())))
                .collect();
            if !whole.host.is_empty() {
                map.insert("_host".into(), Value::Array(whole.host.clone()));
            }
            let expected = serde_json::to_string_pretty(&map).unwrap() + "\n";
            let mut written = Vec::new();
            write_json(&plan(again, &clusters).unwrap(), &mut written).unwrap();
            assert_eq!(String::from_utf8(written).unwrap(), expected);
            assert_eq!(whole.clusters["eu1"][0]["data"]["colour"], "green");
            assert!(whole.clusters["idle"].is_empty());
            hosts.push(whole.host.len());
        }
        assert_eq!(
            hosts,
            [0, 1],
            "the second case has a DNSEndpoint for the host"
        );
    }

    /// Clusters are built in parallel, yet the error is the one a
    /// sequential pass over the objects meets first: the earliest object.
    #[test]
    fn the_first_failing_object_is_reported_whatever_the_cluster() {
        let failing = |name: &str, cluster: &str| {
            format!(
                "---\napiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {{name: {name}, namespace: ns1}}\nspec:\n  template: {{data: {{}}}}\n  placement: {{clusterSelector: {{}}}}\n  overrides:\n  - clusterName: {cluster}\n    clusterOverrides: [{{op: remove, path: /data/nothing}}]\n"
            )
        };
        // The first object fails only in the last cluster, the second in
        // the first cluster.
        let text = failing("first", "z") + &failing("second", "a");
        let clusters: Vec<Cluster> = ["a", "m", "z"]
            .iter()
            .map(|c| parse_cluster_flag(c).unwrap())
            .collect();
        let e = render(inputs(&text), &clusters).unwrap_err().to_string();
        assert!(e.starts_with("in.yaml: document 1: cluster \"z\": "), "{e}");
        // The decide step finds it, before anything can be written.
        let e = plan(inputs(&text), &clusters).unwrap_err().to_string();
        assert!(e.starts_with("in.yaml: document 1: cluster \"z\": "), "{e}");
    }
}

/// Properties of the render over generated federations (proptest).
#[cfg(test)]
mod properties {
    use super::*;
    use crate::core::desired::desired_for_cluster;
    use proptest::prelude::*;
    use serde_json::json;

    const CLUSTERS: [&str; 4] = ["a", "b", "c", "d"];

    /// A FederatedConfigMap: name index, data, placement (explicit list or
    /// a selector on `tier`), overrides per cluster.
    fn federated() -> impl Strategy<Value = Value> {
        (
            0u8..40,
            proptest::collection::btree_map("[a-z]{1,3}", "[a-z0-9]{0,4}", 0..3),
            prop_oneof![
                proptest::sample::subsequence(CLUSTERS.to_vec(), 0..=4)
                    .prop_map(|cs| json!({"clusters": cs.iter().map(|c| json!({"name": c})).collect::<Vec<_>>()})),
                Just(json!({"clusterSelector": {}})),
                Just(json!({"clusterSelector": {"matchLabels": {"tier": "gold"}}})),
            ],
            proptest::collection::btree_map(
                proptest::sample::select(CLUSTERS.to_vec()),
                "[a-z0-9]{0,4}",
                0..3,
            ),
        )
            .prop_map(|(i, data, placement, overrides)| {
                let overrides: Vec<Value> = overrides
                    .into_iter()
                    .map(|(c, v)| json!({"clusterName": c, "clusterOverrides": [{"path": "/data/extra", "value": v}]}))
                    .collect();
                json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedConfigMap",
                       "metadata": {"name": format!("cm-{i}"), "namespace": "shop"},
                       "spec": {"template": {"data": data}, "placement": placement, "overrides": overrides}})
            })
    }

    fn inputs(objects: &[Value]) -> Inputs {
        let mut seen = BTreeSet::new();
        let federated = objects
            .iter()
            .filter(|o| seen.insert(o["metadata"]["name"].to_string()))
            .map(|o| Sourced {
                source: "gen.yaml".into(),
                object: o.clone(),
            })
            .collect();
        let clusters = CLUSTERS
            .iter()
            .enumerate()
            .map(|(i, c)| Sourced {
                source: "clusters.yaml".into(),
                object: json!({"apiVersion": "core.kubefed.io/v1beta1", "kind": "KubeFedCluster",
                    "metadata": {"name": c, "labels": if i % 2 == 0 { json!({"tier": "gold"}) } else { json!({}) }}}),
            })
            .collect();
        Inputs {
            clusters,
            federated,
            ..Inputs::default()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The same input renders the same bytes, and every member object is
        /// what the per-cluster desired-object function (an independent path
        /// from the decide step's shared objects) says — nothing more, nothing less.
        #[test]
        fn render_is_deterministic_and_agrees_with_desired_for_cluster(
            objects in proptest::collection::vec(federated(), 0..12)
        ) {
            let stream = |objects: &[Value]| {
                let mut out = Vec::new();
                write_stream(&plan(inputs(objects), &[]).unwrap(), &mut out).unwrap();
                out
            };
            prop_assert_eq!(stream(&objects), stream(&objects));

            let rendered = render(inputs(&objects), &[]).unwrap();
            let clusters: Vec<Cluster> = CLUSTERS
                .iter()
                .enumerate()
                .map(|(i, c)| Cluster::new(c, if i % 2 == 0 { &[("tier", "gold")] } else { &[] }, true))
                .collect();
            let target = TargetType::new("", "v1", "ConfigMap");
            for c in &clusters {
                let mut want: Vec<Value> = inputs(&objects)
                    .federated
                    .iter()
                    .filter(|f| {
                        crate::core::placement::selected_clusters(&f.object, &clusters)
                            .unwrap()
                            .contains(&c.name)
                    })
                    .map(|f| desired_for_cluster(&f.object, &target, &c.name, None).unwrap())
                    .collect();
                // The decide step itself, object by object, with empty members.
                let federation = crate::core::decide::Federation {
                    kubefed_namespace: crate::api::DEFAULT_KUBEFED_NAMESPACE,
                    scope: Scope::Namespaced,
                    settings: Settings::default().sync,
                    clusters: &clusters,
                    touched: None,
                    fed_namespaces: &BTreeMap::new(),
                    host_namespaces: &HashMap::new(),
                    versions: &HashMap::new(),
                };
                let empty: BTreeMap<String, Listing> = clusters
                    .iter()
                    .map(|c| (c.name.clone(), Listing::Listed(HashMap::new())))
                    .collect();
                let t = FederatedType {
                    target: target.clone(),
                    federated_kind: "FederatedConfigMap".into(),
                    target_plural: "configmaps".into(),
                    namespaced: true,
                };
                let mut decided: Vec<Value> = inputs(&objects)
                    .federated
                    .iter()
                    .flat_map(|f| decide::decide_object(&federation, &t, &f.object, &empty).decisions)
                    .filter(|d| d.cluster == c.name)
                    .filter_map(|d| match d.action {
                        Action::Create(o) => Some((*o).clone()),
                        _ => None,
                    })
                    .collect();
                let mut got = rendered.clusters.get(&c.name).cloned().unwrap_or_default();
                let name = |o: &Value| o["metadata"]["name"].as_str().unwrap_or("").to_string();
                want.sort_by_key(name);
                got.sort_by_key(name);
                decided.sort_by_key(name);
                prop_assert_eq!(&got, &want, "cluster {}", c.name);
                prop_assert_eq!(&decided, &want, "cluster {}: the decide step", c.name);
            }
        }
    }
}
