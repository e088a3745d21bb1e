//! The federation's members as ClusterProfiles in the host (SIG
//! Multicluster's cluster inventory, `sigs.k8s.io/cluster-inventory-api`
//! v0.1.2): installing the upstream CRD, publishing a member's profile,
//! keeping its status with each probe, taking it away. What each profile
//! says is decided in `core::cluster::inventory`; this module reads and
//! writes. KubeFed v0.10 has no such thing; its controller ignores the
//! annotations that link a KubeFedCluster to its profile.

use crate::apply::{Journal, ObjectRef, OnExisting, Outcome, api_error, api_resource, ensure};
use crate::clients::host::Host;
use crate::clients::members::{Member, ProbedMember};
use crate::core::cluster::health::Health;
use crate::core::cluster::inventory::{self, ProfileFacts};
use crate::core::cluster::membership::MemberEndpoint;
use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, Patch, PatchParams};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The upstream CRD, as `sigs.k8s.io/cluster-inventory-api` v0.1.2 ships it
/// (`config/crd/bases/multicluster.x-k8s.io_clusterprofiles.yaml`,
/// Apache-2.0); a test compares it with the module's file.
pub const CRD_YAML: &str =
    include_str!("../deploy/inventory/multicluster.x-k8s.io_clusterprofiles.yaml");

pub fn profile_resource() -> ApiResource {
    api_resource(
        inventory::GROUP,
        inventory::VERSION,
        inventory::KIND,
        inventory::PLURAL,
    )
}

/// The profile `NAMESPACE/NAME` in the host.
pub fn profile_ref(host: &Host, namespace: &str, name: &str) -> ObjectRef {
    ObjectRef::new(
        "host",
        &host.client,
        profile_resource(),
        Some(namespace),
        name,
    )
}

/// Whether the host serves ClusterProfiles (their CRD is there).
pub async fn served(host: &Host) -> Result<bool> {
    let crd = host.object(
        crate::apply::resource_of::<CustomResourceDefinition>(),
        false,
        inventory::CRD_NAME,
    );
    Ok(crd.get().await?.is_some())
}

/// The upstream CRD as an object.
pub fn crd() -> Value {
    crate::yaml::yaml_documents(CRD_YAML)
        .ok()
        .and_then(|docs| docs.into_iter().next())
        .expect("the bundled ClusterProfile CRD parses")
}

/// Writes the member's profile (spec and labels); what happened and the
/// profile as stored. The caller has made sure that no profile of that
/// name belongs to another manager (`join` reads it before it writes
/// anything).
pub async fn publish(
    host: &Host,
    namespace: &str,
    name: &str,
    journal: &mut Journal,
) -> Result<(Outcome, Value)> {
    let target = profile_ref(host, namespace, name);
    let body = inventory::profile(name, namespace);
    ensure(&target, &body, &OnExisting::Update, journal).await
}

/// Where a KubeFedCluster says its member is.
pub fn endpoint_of(spec: &crate::api::core::KubeFedClusterSpec) -> MemberEndpoint {
    MemberEndpoint {
        api_endpoint: spec.api_endpoint.clone(),
        ca_bundle: spec.ca_bundle.clone(),
        insecure_skip_tls_verify: crate::core::cluster::tls::tls_checks(
            &spec.disabled_tls_validations,
        ) == Ok(crate::core::cluster::tls::TlsChecks::None),
        proxy_url: spec.proxy_url.clone(),
    }
}

/// One member as its profile's status needs it.
pub struct Subject<'a> {
    pub cluster: &'a str,
    pub annotations: &'a BTreeMap<String, String>,
    pub labels: &'a BTreeMap<String, String>,
    pub endpoint: MemberEndpoint,
}

impl<'a> Subject<'a> {
    pub fn of(m: &'a Member) -> Subject<'a> {
        Subject {
            cluster: &m.name,
            annotations: m.cluster.metadata.annotations.as_ref().unwrap_or(&EMPTY),
            labels: &m.labels,
            endpoint: endpoint_of(&m.cluster.spec),
        }
    }
}

static EMPTY: BTreeMap<String, String> = BTreeMap::new();

/// Which copy of a member's profile its new status is worked out from.
#[derive(Clone, Copy)]
pub enum ProfileCopy<'a> {
    /// Read it now (the watch: its members were loaded long ago).
    ReadNow,
    /// The copy at hand, just read or written (`None`: there is none).
    AtHand(Option<&'a Value>),
}

/// Keeps the profile of every member that has one (the KubeFedCluster's
/// annotation names it) true to the probe: a write only when more than
/// times changed. `loaded`: the members were loaded by this run, and their
/// copies (`Member::profile`) serve, with no read; else one read per such
/// profile. Members without a profile cost nothing. Best-effort, as the
/// Events a run records: a profile that cannot be written is a warning
/// naming it, never a failed run. Returns the writes made.
pub async fn write_statuses(host: &Host, members: &[ProbedMember], loaded: bool) -> usize {
    let mut clustersets = BTreeMap::new();
    let mut writes = 0;
    for ProbedMember {
        member: m,
        health: h,
    } in members
    {
        let copy = match loaded {
            true => ProfileCopy::AtHand(m.profile.as_ref()),
            false => ProfileCopy::ReadNow,
        };
        match write_status(host, &Subject::of(m), h, copy, &mut clustersets).await {
            Ok(written) => writes += written as usize,
            Err(e) => tracing::warn!(
                "the ClusterProfile of {}: {}",
                m.name,
                crate::error::one_line(&e)
            ),
        }
    }
    writes
}

/// [`write_statuses`] for one member; `clustersets` caches what each
/// namespace names.
pub async fn write_status(
    host: &Host,
    s: &Subject<'_>,
    h: &Health,
    copy: ProfileCopy<'_>,
    clustersets: &mut BTreeMap<String, Option<String>>,
) -> Result<bool> {
    let Some((ns, name)) = s
        .annotations
        .get(inventory::PROFILE_ANNOTATION)
        .and_then(|r| inventory::parse_ref(r))
    else {
        return Ok(false);
    };
    let is_it = |p: &&Value| p["metadata"]["namespace"] == ns && p["metadata"]["name"] == name;
    let live = match copy {
        ProfileCopy::AtHand(p) => p.filter(is_it).cloned(),
        ProfileCopy::ReadNow => profile_ref(host, ns, name).get().await?,
    };
    let Some(live) = live else {
        return Ok(false);
    };
    if !inventory::is_ours(&live) {
        return Ok(false);
    }
    if !clustersets.contains_key(ns) {
        clustersets.insert(ns.to_string(), clusterset_of(host, ns).await?);
    }
    let facts = ProfileFacts {
        cluster: s.cluster,
        federation_namespace: &host.namespace,
        endpoint: &s.endpoint,
        labels: s.labels,
        clusterset: clustersets[ns].as_deref(),
    };
    let now = crate::clock::now_rfc3339();
    let Some(status) = inventory::status_after_probe(&live["status"], h, &facts, &now) else {
        return Ok(false);
    };
    crate::apply::dynamic_api(&host.client, Some(ns), &profile_resource())
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": status})),
        )
        .await
        .map_err(api_error)
        .with_context(|| format!("writing the status of ClusterProfile {ns}/{name}"))?;
    Ok(true)
}

/// The ClusterSet a namespace names (its `multicluster.x-k8s.io/clusterset`
/// label), if any.
async fn clusterset_of(host: &Host, ns: &str) -> Result<Option<String>> {
    let target = ObjectRef::new(
        "host",
        &host.client,
        crate::apply::resource_of::<Namespace>(),
        None,
        ns,
    );
    // An identity that may not read namespaces (the in-cluster reconciler)
    // publishes no ClusterSet rather than failing.
    let namespace = target.get().await.unwrap_or_else(|e| {
        tracing::debug!(
            "no ClusterSet read for namespace {ns}: {}",
            crate::error::one_line(&e)
        );
        None
    });
    Ok(namespace.and_then(|n| {
        n["metadata"]["labels"][inventory::CLUSTERSET_LABEL]
            .as_str()
            .map(str::to_string)
    }))
}

/// The profile a KubeFedCluster names, when it is ours: what `unjoin`
/// deletes.
pub async fn own_profile(host: &Host, cluster: &Value) -> Result<Option<ObjectRef>> {
    let Some((ns, name)) = cluster["metadata"]["annotations"][inventory::PROFILE_ANNOTATION]
        .as_str()
        .and_then(inventory::parse_ref)
    else {
        return Ok(None);
    };
    let target = profile_ref(host, ns, name);
    Ok(match target.get().await? {
        Some(live) if inventory::is_ours(&live) => Some(target),
        _ => None,
    })
}

/// A consumer identity's objects in the member with where they go, in
/// creation order (`core::cluster::inventory::consumer_objects`).
pub fn consumer_targets(
    member: &str,
    client: &kube::Client,
    names: &crate::core::cluster::membership::JoinNames,
    ns: &str,
    consumer: &str,
    cluster_role: &str,
) -> Vec<(ObjectRef, Value)> {
    use crate::apply::resource_of;
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
    inventory::consumer_objects(consumer, names, ns, cluster_role)
        .into_iter()
        .map(|obj| {
            let name = obj["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let (resource, namespaced) = match obj["kind"].as_str() {
                Some("ServiceAccount") => (resource_of::<ServiceAccount>(), true),
                Some("ClusterRoleBinding") => (resource_of::<ClusterRoleBinding>(), false),
                Some("Role") => (resource_of::<Role>(), true),
                _ => (resource_of::<RoleBinding>(), true),
            };
            let target = ObjectRef::new(member, client, resource, namespaced.then_some(ns), &name);
            (target, obj)
        })
        .collect()
}

/// The consumers a KubeFedCluster records (`join --consumer`).
pub fn consumers_of(cluster: &Value) -> Vec<String> {
    cluster["metadata"]["annotations"][inventory::CONSUMERS_ANNOTATION]
        .as_str()
        .unwrap_or("")
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}
