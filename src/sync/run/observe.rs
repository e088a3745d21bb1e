//! The observe step of a live reconcile: everything the decide step needs,
//! read once — the KubeFedConfig, the members and their health, the enabled
//! types and their federated objects, one list per type and ready member,
//! PropagatedVersions and the host's namespaces. Reads only.

use crate::api::core::{ClusterPropagatedVersion, FederatedTypeConfig, PropagatedVersion};
use crate::api::scheduling::ReplicaSchedulingPreference;
use crate::apply::{api_error, api_error_line, api_resource, dynamic_api, resource_of};
use crate::clients::host::Host;
use crate::clients::members::{self, Member, ProbedMember};
use crate::core::cluster::inventory::selectable_labels;
use crate::core::describe::{ObjectKey, key_of};
use crate::core::object_text::ObjectText;
use crate::core::propagation::decide::{FederatedType, Listing};
use crate::core::propagation::desired::{MANAGED_LABEL, TargetType};
use crate::core::propagation::member::{
    ManagedLabel, federated_namespace_name_is_valid, managed_label,
};
use crate::core::propagation::placement::Cluster;
use crate::core::propagation::report::Reports;
use crate::core::run::scope::RunScope;
use crate::core::run::settings::Settings;
use crate::core::run::shard::{self};
use crate::core::scheduling::preference::{MemberReplicas, observe_member};
use anyhow::{Context, Result, bail};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

/// What to observe.
#[derive(Clone, Debug)]
pub struct Selection {
    /// What the run covers: types, namespace, members, labels, shard.
    pub scope: RunScope,
    pub timeout: Duration,
    /// `--probe-timeout`; `None`: the KubeFedConfig's.
    pub probe_timeout: Option<Duration>,
    /// The KubeFedConfig's settings when the caller already read them (to
    /// take the lock with its timings); None: the observation reads them.
    pub settings: Option<Settings>,
    /// Hold member copies whole, for a dry run's diffs; otherwise only the
    /// view decide and the passes read of them (`core::held`).
    pub whole_copies: bool,
}

/// One enabled type and what was read of it.
pub struct ObservedType {
    /// The FederatedTypeConfig's name (`FederatedRef::type_name`, which
    /// shares it).
    pub name: std::sync::Arc<str>,
    pub ty: FederatedType,
    pub federated: ApiResource,
    /// The federated objects are namespaced (FederatedNamespaces are, though
    /// Namespaces are not).
    pub federated_namespaced: bool,
    /// The FTC's `statusCollection: Enabled`.
    pub status_collection: bool,
    /// The FederatedServiceStatus type upstream's status controller writes
    /// for this type (`core::service_status::applies`).
    pub service_status: Option<ApiResource>,
    pub target: ApiResource,
    pub objects: Vec<Value>,
    /// Ready touched member → its objects of the type (or why not).
    pub members: BTreeMap<String, Listing>,
    /// A watch round: the only keys of this type it covers; `objects`
    /// hold those of them that exist, and orphans are looked for among
    /// them only. `None`: everything was observed.
    pub only: Option<BTreeSet<ObjectKey>>,
}

/// Everything one run reads before it decides.
pub struct Observation {
    /// What the KubeFedConfig says.
    pub settings: Settings,
    /// Every member, sorted by name, with its probe result.
    pub members: Vec<ProbedMember>,
    /// The members as placement sees them.
    pub clusters: Vec<Cluster>,
    /// What the run covers (the command's flags, built once).
    pub scope: RunScope,
    /// The namespace federated objects are read from (`-n`, or the
    /// federation namespace of a namespace-scoped federation).
    pub namespace: Option<String>,
    pub types: Vec<ObservedType>,
    pub fed_namespaces: BTreeMap<String, Value>,
    pub host_namespaces: HashMap<String, String>,
    pub versions: HashMap<ObjectKey, Value>,
    /// The ReplicaSchedulingPreferences of the observed namespace (none
    /// when the SchedulerPreferences feature gate is off).
    pub rsps: Vec<Value>,
    /// The member pods RSP scheduling needs (member copies that have not
    /// settled), by [`PodQuery`]; `Err` says why they could not be listed.
    pub rsp_pods: BTreeMap<PodQuery, Result<Vec<Value>, String>>,
    /// The host has the multi-cluster DNS API (`init --with-dns`).
    pub dns_installed: bool,
    /// What a proposal (`-f --dry-run`) changes on the host.
    pub host_plan: Vec<crate::core::outcome::Change>,
    /// A dry run's (type name, member) where the type is planned as if the
    /// member held none of its objects: the CRD that defines it is created
    /// by the same plan (`crd_first`). `--validate` leaves them out.
    pub types_to_come: BTreeSet<(String, String)>,
    /// The pull members' agents' reports (`core::propagation::report`):
    /// read by the host's runs, which leave those members to their agents.
    pub reports: Reports,
}

impl Observation {
    /// Each pull member, and whether it is not ready (its agent silent,
    /// or its member not ready as the agent last saw it).
    pub fn pull_members(&self) -> Vec<(String, bool)> {
        (self.members.iter())
            .filter(|p| p.member.pull)
            .map(|p| (p.member.name.clone(), !p.is_ready()))
            .collect()
    }

    /// A member's labels as placement and overrides see them (none for a
    /// cluster this run does not know).
    pub fn labels_of(&self, cluster: &str) -> &BTreeMap<String, String> {
        static NONE: BTreeMap<String, String> = BTreeMap::new();
        self.clusters
            .iter()
            .find(|c| c.name == cluster)
            .map_or(&NONE, |c| &c.labels)
    }

    /// An observation of the members and their health, with nothing read
    /// of the types yet: the one-shot observe step and the watch's cache
    /// both start from it and fill in what they read.
    pub fn new(
        settings: Settings,
        members: Vec<ProbedMember>,
        scope: RunScope,
        namespace: Option<String>,
    ) -> Observation {
        let clusters = placement_clusters(&members);
        Observation {
            settings,
            members,
            clusters,
            scope,
            namespace,
            types: Vec::new(),
            fed_namespaces: BTreeMap::new(),
            host_namespaces: HashMap::new(),
            versions: HashMap::new(),
            rsps: Vec::new(),
            rsp_pods: BTreeMap::new(),
            dns_installed: false,
            host_plan: Vec::new(),
            types_to_come: BTreeSet::new(),
            reports: Reports::default(),
        }
    }

    pub fn touches(&self, cluster: &str) -> bool {
        self.scope.touches(cluster)
    }

    /// The member named `cluster`, if joined.
    pub fn member(&self, cluster: &str) -> Option<&Member> {
        (self.members.iter())
            .find(|p| p.name() == cluster)
            .map(|p| &p.member)
    }

    /// Ready members this run may touch.
    pub fn ready_members(&self) -> impl Iterator<Item = &Member> {
        (self.members.iter())
            .filter(|p| p.is_ready() && self.touches(p.name()))
            .map(|p| &p.member)
    }
}

/// Reads the host and the members. The pods that RSP scheduling needs are
/// read apart ([`read_rsp_pods`]), once the caller has laid any proposal
/// of its own over the host's objects.
pub async fn observe(host: &Host, o: &Selection) -> Result<Observation> {
    // The KubeFedConfig is read once.
    let settings = match o.settings {
        Some(s) => s,
        None => host.settings().await?,
    };

    // Members: all of them for placement (labels), the chosen ones to touch.
    let members = members::load(host, o.timeout, &[]).await?;
    for c in o.scope.clusters.iter().flatten() {
        let Some(m) = members.iter().find(|m| &m.name == c) else {
            bail!(
                "no KubeFedCluster {c:?} in {} (joined: {})",
                host.namespace,
                members
                    .iter()
                    .map(|m| m.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        };
        if m.pull {
            bail!(pull_refusal(c));
        }
    }
    let probe_timeout = o.probe_timeout.unwrap_or(settings.health.timeout);
    let members = members::probe_all(&members, probe_timeout).await;
    let scope = leave_pull_members(&o.scope, &members);
    let mut seen = observe_over(host, o, settings, members, scope, true).await?;
    if seen.members.iter().any(|m| m.member.pull) {
        seen.reports = read_reports(host).await?;
    }
    Ok(seen)
}

/// Why `--cluster` may not name the pull member `c`.
pub fn pull_refusal(c: &str) -> String {
    format!(
        "{c} is a pull member: its agent applies its share (kubefedctl agent --cluster {c}), the host never writes to it"
    )
}

/// The run's scope with its pull members left to their agents: the host
/// never writes to them (`--cluster` names the members it may write to).
pub fn leave_pull_members(scope: &RunScope, members: &[ProbedMember]) -> RunScope {
    let mut scope = scope.clone();
    if members.iter().any(|m| m.member.pull) {
        let push = (members.iter())
            .filter(|m| !m.member.pull && scope.touches(m.name()))
            .map(|m| m.name().to_string());
        scope.clusters = Some(push.collect());
    }
    scope
}

/// Every PropagationReport on the host (none where the CRD is not
/// installed: no pull member ever joined).
pub async fn read_reports(host: &Host) -> Result<Reports> {
    use crate::core::cluster::pull::report_namespace;
    use crate::core::propagation::report as r;
    let ar = api_resource(r::GROUP, r::VERSION, r::KIND, r::PLURAL);
    let api = dynamic_api(&host.client, None, &ar);
    let objects = match list_pages(&api, &ListParams::default()).await {
        Ok(objects) => objects,
        Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
        Err(e) => {
            return Err(api_error(e).context("listing the pull members' PropagationReports"));
        }
    };
    let fed_ns = host.namespace.clone();
    Ok(Reports::of(&objects, |c| report_namespace(&fed_ns, c)))
}

/// [`observe`] over members already loaded and probed, `scope` the
/// members it may touch; `dns`: whether to ask if the host has the DNS
/// API (an agent's identity may not).
pub async fn observe_over(
    host: &Host,
    o: &Selection,
    settings: Settings,
    members: Vec<ProbedMember>,
    scope: RunScope,
    dns: bool,
) -> Result<Observation> {
    let o = &Selection { scope, ..o.clone() };
    let namespace = settings.objects_namespace(&host.namespace, o.scope.namespace.as_deref());
    let mut seen = Observation::new(settings, members, o.scope.clone(), namespace);
    // What the decide step needs is read all at once after the types are
    // known: the federated objects of each type, every member's objects,
    // the PropagatedVersions and the host's namespaces. Each is a paged list
    // bound by its API server's CPU; one after another they added up.
    seen.types = enabled_types(host, o).await?;
    let wants_namespaces = seen.types.iter().any(|t| t.ty.target.is_namespace());
    let (objects, listings, versions, namespaces, rsps, dns) = tokio::join!(
        federated_objects(host, o, &seen.types, &seen.namespace),
        list_members(&seen, o.timeout, o.whole_copies),
        read_versions(host, &seen.namespace),
        async {
            if !wants_namespaces {
                return Ok(Vec::new());
            }
            let api = dynamic_api(
                &host.client,
                None,
                &api_resource("", "v1", "Namespace", "namespaces"),
            );
            list_all(&api, &ListParams::default()).await
        },
        read_rsps(host, &seen),
        async {
            match dns {
                true => host.dns_installed().await,
                false => Ok(false),
            }
        },
    );
    for (t, objects) in seen.types.iter_mut().zip(objects?) {
        t.objects = shard::retain_owned(o.scope.shard, objects);
    }
    for (i, cluster, listing) in listings {
        seen.types[i].members.insert(cluster, listing);
    }
    if !o.whole_copies {
        relist_whole(&mut seen, o.timeout).await;
    }
    seen.fed_namespaces = federated_namespaces(&seen.types);
    // A type read only for placement (`enabled_types`) has nothing decided.
    for t in seen.types.iter_mut().filter(|t| t.only.is_some()) {
        t.objects.clear();
    }
    if let Some(sel) = &o.scope.selector {
        retain_selected_namespaces(&mut seen.types, sel)?;
    }
    seen.versions = versions?;
    seen.host_namespaces = namespaces?
        .into_iter()
        .map(|n| {
            let uid = n["metadata"]["uid"].as_str().unwrap_or("").to_string();
            (key_of(&n).name, uid)
        })
        .collect();
    seen.rsps = rsps?;
    seen.dns_installed = dns?;
    Ok(seen)
}

/// The types whose objects (read beside their copies) keep fields of the
/// member copies while the type itself does not: their copies are listed
/// again, whole (`ObservedType::keeps_member_fields`). Nothing is listed
/// again for a federation that keeps nothing.
async fn relist_whole(seen: &mut Observation, timeout: Duration) {
    use crate::core::propagation::foreign::wants_whole_copies;
    let again: Vec<usize> = (seen.types.iter().enumerate())
        .filter(|(_, t)| {
            t.keeps_member_fields() && !wants_whole_copies(&t.ty.target.type_annotations)
        })
        .map(|(i, _)| i)
        .collect();
    let mut lists = Vec::new();
    for i in again {
        let t = &seen.types[i];
        let ns = seen.namespace.clone().filter(|_| t.ty.namespaced);
        for m in seen.ready_members() {
            let (client, ar, ns) = (m.client.clone(), t.target.clone(), ns.clone());
            let name = m.name.clone();
            lists.push(async move {
                let client = client.expect("ready members have clients");
                let listing = list_member(&client, ns.as_deref(), &ar, &name, timeout, true).await;
                (i, name, listing)
            });
        }
    }
    for (i, cluster, listing) in futures::future::join_all(lists).await {
        seen.types[i].members.insert(cluster, listing);
    }
}

/// What a watch round reads beyond its cache: the pods its RSPs need and,
/// on a full round (the only one with a DNS pass), whether the host has
/// the DNS API.
pub async fn finish_from_cache(
    host: &Host,
    seen: &mut Observation,
    timeout: Duration,
    full: bool,
) -> Result<()> {
    if !seen.settings.scheduler_preferences {
        seen.rsps.clear();
    }
    read_rsp_pods(seen, timeout).await;
    if full {
        seen.dns_installed = host.dns_installed().await?;
    }
    Ok(())
}

/// The ReplicaSchedulingPreferences a run schedules.
async fn read_rsps(host: &Host, seen: &Observation) -> Result<Vec<Value>> {
    if !seen.settings.scheduler_preferences {
        return Ok(Vec::new());
    }
    let ar = resource_of::<ReplicaSchedulingPreference>();
    let api = dynamic_api(&host.client, seen.namespace.as_deref(), &ar);
    list_all(&api, &ListParams::default())
        .await
        .context("listing ReplicaSchedulingPreferences")
}

/// Which pods RSP scheduling needs: a member, a namespace and the label
/// selector of a workload whose copy has not settled.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodQuery {
    pub cluster: String,
    pub namespace: String,
    /// `k=v,k2=v2`.
    pub selector: String,
}

impl PodQuery {
    pub fn new(cluster: &str, namespace: &str, labels: &BTreeMap<String, String>) -> PodQuery {
        PodQuery {
            cluster: cluster.to_string(),
            namespace: namespace.to_string(),
            selector: labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(","),
        }
    }
}

/// Lists the member pods the observed RSPs need (`seen.rsps`, members
/// already listed): upstream's scheduler counts a workload's running pods
/// when its copy has not settled. All lists at once.
pub async fn read_rsp_pods(seen: &mut Observation, timeout: Duration) {
    let mut queries = BTreeSet::new();
    for rsp in &seen.rsps {
        let target_kind = rsp["spec"]["targetKind"].as_str().unwrap_or("");
        let Some(t) = seen.types.iter().find(|t| t.federated.kind == target_kind) else {
            continue;
        };
        let key = key_of(rsp);
        for m in seen.ready_members() {
            let Some(Listing::Listed(objects)) = t.members.get(&m.name) else {
                continue;
            };
            let managed = objects
                .get(&key)
                .map(ObjectText::value)
                .filter(|o| managed_label(o) == ManagedLabel::True);
            if let Some(Ok(MemberReplicas::NeedsPods { match_labels, .. })) =
                managed.as_ref().map(observe_member)
            {
                queries.insert(PodQuery::new(&m.name, &key.namespace, &match_labels));
            }
        }
    }
    let lists = queries.into_iter().map(|q| {
        let member = seen.member(&q.cluster);
        async move {
            let pods = match member.map(|m| m.client.as_ref()) {
                Some(Ok(client)) => {
                    let api = dynamic_api(
                        client,
                        Some(&q.namespace),
                        &api_resource("", "v1", "Pod", "pods"),
                    );
                    let params = ListParams::default().labels(&q.selector);
                    match tokio::time::timeout(timeout, list_all(&api, &params)).await {
                        Ok(Ok(pods)) => Ok(pods),
                        Ok(Err(e)) => Err(format!("listing pods: {}", crate::error::one_line(&e))),
                        Err(_) => Err(format!("listing pods: no answer within {timeout:?}")),
                    }
                }
                _ => Err("no client for this member".to_string()),
            };
            (q, pods)
        }
    });
    seen.rsp_pods = futures::future::join_all(lists).await.into_iter().collect();
}

/// The enabled types (all, or those `--type` asks for: an unknown one is an
/// error), with nothing read of them yet.
pub async fn enabled_types(host: &Host, o: &Selection) -> Result<Vec<ObservedType>> {
    let ftc_api: Api<FederatedTypeConfig> = Api::namespaced(host.client.clone(), &host.namespace);
    let mut ftcs: Vec<FederatedTypeConfig> = ftc_api
        .list(&ListParams::default())
        .await
        .map_err(api_error)?
        .items;
    ftcs.retain(|f| f.spec.is_enabled());
    ftcs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for t in &o.scope.types {
        if !ftcs
            .iter()
            .any(|f| crate::clients::host::names_federated_type(f, t))
        {
            bail!("no enabled federated type {t:?} (see kubefedctl status types)");
        }
    }
    // `--type`: only those are decided. The FederatedNamespaces are read
    // all the same (they place what their namespaces hold), none decided.
    let wanted = &o.scope.types;
    let asked = |f: &FederatedTypeConfig| {
        wanted.is_empty()
            || (wanted.iter()).any(|t| crate::clients::host::names_federated_type(f, t))
    };
    let mut types = Vec::new();
    for f in &ftcs {
        let mut t = ObservedType::of(f);
        match (asked(f), t.ty.target.is_namespace()) {
            (true, _) => {}
            (false, true) => t.only = Some(BTreeSet::new()),
            (false, false) => continue,
        }
        types.push(t);
    }
    Ok(types)
}

/// The federated objects of each type (in `types`' order), all types at
/// once; the first type whose list fails names the error.
async fn federated_objects(
    host: &Host,
    o: &Selection,
    types: &[ObservedType],
    namespace: &Option<String>,
) -> Result<Vec<Vec<Value>>> {
    let mut params = ListParams::default();
    if let Some(sel) = &o.scope.selector {
        params = params.labels(sel);
    }
    let lists: Vec<_> = types
        .iter()
        .map(|t| {
            let in_namespace = namespace.as_deref().filter(|_| t.federated_namespaced);
            let api = dynamic_api(&host.client, in_namespace, &t.federated);
            // FederatedNamespaces are read whatever -l says: they place
            // every object in them (`retain_selected_namespaces`).
            let params = match t.ty.target.is_namespace() {
                true => ListParams::default(),
                false => params.clone(),
            };
            let kind = t.federated.kind.clone();
            // A task each, so that their pages are parsed on every core.
            tokio::spawn(async move {
                list_without_owners(&api, &params)
                    .await
                    .with_context(|| format!("listing {kind}"))
            })
        })
        .collect();
    let mut out = Vec::with_capacity(lists.len());
    for list in futures::future::join_all(lists).await {
        out.push(list.expect("list tasks do not panic")?);
    }
    Ok(out)
}

impl ObservedType {
    /// Whether the type or one of its objects keeps fields of the member
    /// copies (`core::propagation::foreign`): its copies are then read
    /// whole, not as the view decide otherwise needs.
    pub fn keeps_member_fields(&self) -> bool {
        use crate::core::propagation::foreign::wants_whole_copies;
        wants_whole_copies(&self.ty.target.type_annotations)
            || self
                .objects
                .iter()
                .any(|o| wants_whole_copies(&o["metadata"]["annotations"]))
    }

    /// The type a FederatedTypeConfig enables, with nothing read yet.
    pub fn of(f: &FederatedTypeConfig) -> ObservedType {
        let (t, fd) = (&f.spec.target_type, &f.spec.federated_type);
        let target_group = t.group.clone().unwrap_or_default();
        ObservedType {
            name: f.metadata.name.as_deref().unwrap_or_default().into(),
            ty: FederatedType {
                target: TargetType {
                    type_annotations: serde_json::to_value(&f.metadata.annotations)
                        .unwrap_or_default(),
                    ..TargetType::new(&target_group, &t.version, &t.kind)
                },
                federated_kind: fd.kind.clone(),
                target_plural: t.plural_name.clone(),
                namespaced: t.scope == "Namespaced",
            },
            target: api_resource(&target_group, &t.version, &t.kind, &t.plural_name),
            federated: api_resource(
                fd.group.as_deref().unwrap_or(""),
                &fd.version,
                &fd.kind,
                &fd.plural_name,
            ),
            federated_namespaced: fd.scope == "Namespaced",
            status_collection: f.spec.status_collection.as_deref() == Some("Enabled"),
            service_status: service_status_type(f),
            objects: Vec::new(),
            members: BTreeMap::new(),
            only: None,
        }
    }
}

/// The status type of `f` when upstream's status controller writes it; as
/// upstream's defaults, its group and version are the federated type's
/// unless given (`pkg/apis/core/v1beta1/federatedtypeconfig_types.go`).
pub fn service_status_type(f: &FederatedTypeConfig) -> Option<ApiResource> {
    let st = f.spec.status_type.as_ref()?;
    let collected = f.spec.status_collection.as_deref() == Some("Enabled");
    let name = f.metadata.name.as_deref().unwrap_or("");
    if !crate::core::service_status::applies(name, collected, true) {
        return None;
    }
    let fd = &f.spec.federated_type;
    let group = st.group.clone().or(fd.group.clone()).unwrap_or_default();
    let version = Some(st.version.clone())
        .filter(|v| !v.is_empty())
        .unwrap_or(fd.version.clone());
    let plural = Some(st.plural_name.clone())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| crate::core::types::builtin::plural_of(&st.kind));
    Some(api_resource(&group, &version, &st.kind, &plural))
}

/// `-l` chooses the objects a run decides, not the FederatedNamespaces that
/// place them: those were read whatever their labels (one-shot lists and
/// the watch alike) and only the selected ones are decided.
pub fn retain_selected_namespaces(types: &mut [ObservedType], selector: &str) -> Result<()> {
    let sel = crate::core::propagation::placement::Selector::parse_flag(selector)
        .map_err(|e| anyhow::anyhow!("-l {selector:?}: {e}"))?;
    for t in types.iter_mut().filter(|t| t.ty.target.is_namespace()) {
        t.objects.retain(|o| sel.matches(&labels_of(o)));
    }
    Ok(())
}

/// An object's labels.
pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The FederatedNamespaces among the observed types' objects, by name.
pub fn federated_namespaces(types: &[ObservedType]) -> BTreeMap<String, Value> {
    types
        .iter()
        .filter(|t| t.ty.target.is_namespace())
        .flat_map(|t| t.objects.iter())
        // The FTC says which type federates namespaces, whatever its group.
        .filter(|o| federated_namespace_name_is_valid(o))
        .map(|o| (key_of(o).name, o.clone()))
        .collect()
}

/// The members as placement sees them: their labels, over the properties
/// of their ClusterProfile (an extension KubeFed's controller ignores:
/// docs/membership.md).
pub fn placement_clusters(members: &[ProbedMember]) -> Vec<Cluster> {
    (members.iter())
        .map(|p| Cluster {
            name: p.member.name.clone(),
            labels: selectable_labels(&p.member.labels, p.member.profile.as_ref()),
            ready: p.is_ready(),
        })
        .collect()
}

/// One list per type and ready touched member, all at once, as (type
/// index, member, listing). A 404 means the member does not serve the
/// type: that type alone is affected there.
async fn list_members(
    seen: &Observation,
    timeout: Duration,
    whole: bool,
) -> Vec<(usize, String, Listing)> {
    let mut lists = tokio::task::JoinSet::new();
    for (i, t) in seen.types.iter().enumerate() {
        for m in seen.ready_members() {
            let client = m.client.clone().expect("ready members have clients");
            let ar = t.target.clone();
            let ns = seen.namespace.clone().filter(|_| t.ty.namespaced);
            let name = m.name.clone();
            let whole = whole || t.keeps_member_fields();
            lists.spawn(async move {
                let listing = list_member(&client, ns.as_deref(), &ar, &name, timeout, whole).await;
                (i, name, listing)
            });
        }
    }
    let mut out = Vec::new();
    while let Some(joined) = lists.join_next().await {
        out.push(joined.expect("list tasks do not panic"));
    }
    out
}

/// One member's managed objects of one type (`ns`: the namespace of a
/// namespaced type's run, if any), each held `whole` or as the view decide
/// reads. A 404 means the member does not serve the type (yet: see
/// `crd_first`).
pub async fn list_member(
    client: &kube::Client,
    ns: Option<&str>,
    ar: &ApiResource,
    name: &str,
    timeout: Duration,
    whole: bool,
) -> Listing {
    let api = dynamic_api(client, ns, ar);
    // Managed objects only, as KubeFed's member informers
    // (upstream `pkg/controller/util/resourceinformer.go`): a
    // run's cost follows the federation, not everything the
    // member holds. A same-named unmanaged object shows up when
    // a create meets it (409), as upstream's dispatcher sees it.
    let managed = ListParams::default().labels(&format!("{MANAGED_LABEL}=true"));
    match tokio::time::timeout(timeout * 4, list_copies(&api, &managed, whole)).await {
        Err(_) => Listing::Failed(format!("no answer within {:?}", timeout * 4)),
        Ok(Err(kube::Error::Api(s))) if s.code == 404 => Listing::NotServed(
            crate::clients::discovery::served_elsewhere(client, ar)
                .await
                .unwrap_or_default(),
        ),
        // A least-privilege role that lags behind the types.
        Ok(Err(kube::Error::Api(s))) if s.code == 403 => Listing::Failed(format!(
            "{}; run kubefedctl join {name} --error-on-existing=false to give its identity the enabled types",
            api_error_line(kube::Error::Api(s))
        )),
        Ok(Err(e)) => Listing::Failed(api_error_line(e)),
        Ok(Ok(items)) => Listing::Listed(items),
    }
}

/// One page of a list, read straight into JSON values: going through
/// `ObjectList<DynamicObject>` parsed every object into typed metadata and
/// serialised it back, a third of a no-op run's own CPU.
#[derive(serde::Deserialize)]
struct Page {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    metadata: PageMeta,
    #[serde(default)]
    items: Vec<Value>,
}

#[derive(Default, serde::Deserialize)]
struct PageMeta {
    #[serde(rename = "continue", default)]
    continue_: Option<String>,
}

/// Every page of a list, as JSON values carrying their apiVersion (built-in
/// types' list items leave it to the list).
pub async fn list_pages(
    api: &Api<DynamicObject>,
    params: &ListParams,
) -> std::result::Result<Vec<Value>, kube::Error> {
    let mut out = Vec::new();
    for_each_listed(api, params, |item| out.push(item)).await?;
    Ok(out)
}

/// A member's copies of a type as a run holds them: as text, keyed, each
/// page turned into text as it arrives, so that a run over a whole
/// federation holds one page of parsed objects at a time, not every
/// member's listing (see `core::object_text`); `whole` or only the view
/// decide reads (`core::held`).
async fn list_copies(
    api: &Api<DynamicObject>,
    params: &ListParams,
    whole: bool,
) -> std::result::Result<HashMap<ObjectKey, ObjectText>, kube::Error> {
    let mut out = HashMap::new();
    for_each_listed(api, params, |item| {
        let text = if whole {
            ObjectText::of(&item)
        } else {
            ObjectText::of(&crate::core::held::member_view(&item))
        };
        out.insert(key_of(&item), text);
    })
    .await?;
    Ok(out)
}

/// Lists every page of `api`, handing each object (with its `apiVersion`)
/// to `take` as its page arrives.
async fn for_each_listed(
    api: &Api<DynamicObject>,
    params: &ListParams,
    mut take: impl FnMut(Value),
) -> std::result::Result<(), kube::Error> {
    let client = api.clone().into_client();
    let request = kube::core::Request::new(api.resource_url());
    let mut params = params.clone().limit(500);
    loop {
        let mut req = request.list(&params).map_err(kube::Error::BuildRequest)?;
        req.extensions_mut().insert("list");
        let page: Page = client.request(req).await?;
        for mut item in page.items {
            if let Some(fields) = item.as_object_mut()
                && !fields.contains_key("apiVersion")
                && !page.api_version.is_empty()
            {
                fields.insert("apiVersion".into(), json!(page.api_version));
            }
            take(item);
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => params = params.continue_token(&c),
            None => return Ok(()),
        }
    }
}

/// [`list_pages`] with errors as one clear line.
pub async fn list_all(api: &Api<DynamicObject>, params: &ListParams) -> Result<Vec<Value>> {
    list_pages(api, params).await.map_err(api_error)
}

/// [`list_all`], each object without its managedFields from the moment
/// its page arrives: a run never reads who owns the federated objects' or
/// PropagatedVersions' fields (an update without them leaves them as they
/// are), and they are much of each object (a PropagatedVersion's mirror
/// its `clustersVersions` entry by entry).
async fn list_without_owners(api: &Api<DynamicObject>, params: &ListParams) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for_each_listed(api, params, |mut item| {
        if let Some(meta) = item.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        out.push(item);
    })
    .await
    .map_err(api_error)?;
    Ok(out)
}

/// PropagatedVersions and ClusterPropagatedVersions by (namespace, name).
async fn read_versions(
    host: &Host,
    namespace: &Option<String>,
) -> Result<HashMap<ObjectKey, Value>> {
    let pv = resource_of::<PropagatedVersion>();
    let cpv = resource_of::<ClusterPropagatedVersion>();
    let mut out = HashMap::new();
    for (ar, ns) in [(pv, namespace.as_deref()), (cpv, None)] {
        let api = dynamic_api(&host.client, ns, &ar);
        for v in list_without_owners(&api, &ListParams::default()).await? {
            out.insert(key_of(&v), v);
        }
    }
    Ok(out)
}
