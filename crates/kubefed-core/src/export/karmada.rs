//! KubeFed v0.10 → Karmada v1.13 (`export karmada`), after Karmada's own
//! migration guide and its v1.13.0 CRDs:
//!
//! - a KubeFedCluster → a `cluster.karmada.io/v1alpha1` Cluster in Push mode
//!   and the Secret it references (`caBundle`; `token` only when asked for);
//! - a federated object → its template as the plain object (Karmada's
//!   "resource template"), a PropagationPolicy (ClusterPropagationPolicy for
//!   cluster-scoped types) naming it, with `clusterAffinity` from the
//!   placement (narrowed by the FederatedNamespace as KubeFed narrows it)
//!   and `conflictResolution: Overwrite` so that Karmada adopts the objects
//!   KubeFed wrote; its overrides → an OverridePolicy (ClusterOverridePolicy)
//!   of plaintext overriders;
//! - a ReplicaSchedulingPreference → the target's policy's
//!   `replicaScheduling` (Divided, Weighted, static weights);
//! - a FederatedNamespace → the Namespace (kept out of Karmada's automatic
//!   namespace propagation) and a ClusterPropagationPolicy;
//! - a FederatedTypeConfig → nothing (Karmada propagates any kind): listed.
//!
//! Every field that is not carried exactly is a [`Finding`] of the object's
//! [`ObjectReport`]; nothing is dropped silently.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::division;
use super::ingress;
use super::report::{FindingKind, ObjectReport};
use crate::cluster::membership::Scope;
use crate::propagation::overrides::{ClusterOverride, Op, overrides_by_cluster};
use crate::propagation::placement::Selector;
use crate::scheduling::preference::{REPLICAS_PATH, SCHEDULABLE_KINDS, read_rsp};
use crate::types::builtin::{builtin_by_kind, builtin_version};

/// Where the Clusters' Secrets go in the Karmada API server (as `karmadactl
/// join` puts them).
pub const CLUSTER_SECRET_NAMESPACE: &str = "karmada-cluster";
/// The label that keeps a Namespace out of Karmada's automatic propagation
/// of every namespace to every cluster: its ClusterPropagationPolicy decides.
pub const SKIP_AUTO_PROPAGATION: &str = "namespace.karmada.io/skip-auto-propagation";
/// Karmada's API versions written here.
pub const POLICY_API: &str = "policy.karmada.io/v1alpha1";
pub const CLUSTER_API: &str = "cluster.karmada.io/v1alpha1";

/// A federated type: the federated kind and group, and its target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FederatedType {
    /// The FederatedTypeConfig's name (`deployments.apps`).
    pub name: String,
    pub federated_group: String,
    pub federated_kind: String,
    /// `apps/v1`, `v1`.
    pub target_api_version: String,
    pub target_kind: String,
    pub namespaced: bool,
}

impl FederatedType {
    /// From a FederatedTypeConfig; `None` when it lacks a field.
    pub fn from_ftc(ftc: &Value) -> Option<FederatedType> {
        let spec = ftc.get("spec")?;
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let target = spec.get("targetType")?;
        let fed = spec.get("federatedType")?;
        let group = s(target, "group").unwrap_or_default();
        let version = s(target, "version")?;
        Some(FederatedType {
            name: s(&ftc["metadata"], "name").unwrap_or_default(),
            federated_group: s(fed, "group")?,
            federated_kind: s(fed, "kind")?,
            target_api_version: api_version(&group, &version),
            target_kind: s(target, "kind")?,
            namespaced: s(target, "scope").as_deref() != Some("Cluster"),
        })
    }

    /// Offline, without a FederatedTypeConfig: a built-in target named by
    /// the federated kind (`FederatedDeployment` → `apps/v1 Deployment`).
    pub fn builtin(federated_group: &str, federated_kind: &str) -> Option<FederatedType> {
        let kind = federated_kind.strip_prefix("Federated")?;
        let b = builtin_by_kind(kind)?;
        Some(FederatedType {
            name: if b.group.is_empty() {
                b.plural.to_string()
            } else {
                format!("{}.{}", b.plural, b.group)
            },
            federated_group: federated_group.to_string(),
            federated_kind: federated_kind.to_string(),
            target_api_version: api_version(b.group, builtin_version(b.group)),
            target_kind: kind.to_string(),
            namespaced: b.namespaced,
        })
    }
}

impl FederatedType {
    /// Offline, without a FederatedTypeConfig: the target of
    /// `Federated<Kind>` from the one CustomResourceDefinition among `crds`
    /// that defines `<Kind>` outside KubeFed's own groups (`*.kubefed.io`
    /// are federated types, never targets), at its storage version, as
    /// `enable` would name it. `None` when none or several do.
    pub fn from_crd(
        federated_group: &str,
        federated_kind: &str,
        crds: &[Value],
    ) -> Option<FederatedType> {
        let kind = federated_kind.strip_prefix("Federated")?;
        let mut defining = crds.iter().filter(|c| {
            let spec = &c["spec"];
            spec["names"]["kind"] == kind
                && spec["group"]
                    .as_str()
                    .is_some_and(|g| !g.is_empty() && !g.ends_with("kubefed.io"))
        });
        let crd = defining.next()?;
        if defining.next().is_some() {
            return None;
        }
        let spec = &crd["spec"];
        let versions = spec["versions"].as_array()?;
        let version = versions
            .iter()
            .find(|v| v["storage"] == true)
            .or_else(|| versions.iter().find(|v| v["served"] == true))?["name"]
            .as_str()?;
        let group = spec["group"].as_str()?;
        Some(FederatedType {
            name: format!("{}.{group}", spec["names"]["plural"].as_str()?),
            federated_group: federated_group.to_string(),
            federated_kind: federated_kind.to_string(),
            target_api_version: api_version(group, version),
            target_kind: kind.to_string(),
            namespaced: spec["scope"] != "Cluster",
        })
    }

    /// Whether `crd` defines this type's target (its group and kind).
    pub fn targets_crd(&self, crd: &Value) -> bool {
        let group = self
            .target_api_version
            .split_once('/')
            .map_or("", |(g, _)| g);
        !group.is_empty()
            && crd["spec"]["group"] == group
            && crd["spec"]["names"]["kind"] == self.target_kind.as_str()
    }

    /// A FederatedNamespace's type, in whatever federated group: its
    /// target is the Namespace.
    pub fn targets_namespace(&self) -> bool {
        self.target_api_version == "v1" && self.target_kind == "Namespace"
    }

    /// Whether `fed` is an object of this federated type.
    pub fn federates(&self, fed: &Value) -> bool {
        let group = fed["apiVersion"]
            .as_str()
            .and_then(|a| a.split_once('/'))
            .map_or("", |(g, _)| g);
        fed["kind"].as_str() == Some(self.federated_kind.as_str()) && group == self.federated_group
    }
}

fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// Everything an export reads.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    pub clusters: &'a [Value],
    /// The KubeFedClusters' Secrets, read only when tokens are asked for.
    pub secrets: &'a [Value],
    /// The FederatedTypeConfigs: listed in the report.
    pub type_configs: &'a [Value],
    /// The federated types known (from the FTCs, or built-in offline).
    pub types: &'a [FederatedType],
    pub federated: &'a [Value],
    pub rsps: &'a [Value],
    /// The CustomResourceDefinitions of the federated types' targets (read
    /// from the host): Karmada's API server must serve a type to hold its
    /// resource templates.
    pub crds: &'a [Value],
    /// The control plane's scope (`KubeFedConfig.spec.scope`).
    pub scope: Scope,
    /// Write each Cluster Secret's token (else the report says where it is).
    pub with_tokens: bool,
}

/// What an export writes and says.
#[derive(Clone, Debug, Default)]
pub struct Export {
    /// In the order to apply them: Secrets and Clusters, Namespaces, the
    /// resource templates, the override policies, then the propagation
    /// policies.
    pub objects: Vec<Value>,
    pub reports: Vec<ObjectReport>,
}

impl Export {
    /// Whether any object was approximated or not mapped.
    pub fn inexact(&self) -> bool {
        self.reports.iter().any(ObjectReport::inexact)
    }
}

/// The whole export of a federation.
pub fn export(input: &Input) -> Export {
    let mut out = Export::default();
    if !input.clusters.is_empty() {
        // Karmada's own installer makes it; written so that the output
        // applies to any Karmada API server as it is.
        out.objects.push(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": CLUSTER_SECRET_NAMESPACE},
        }));
    }
    for kfc in input.clusters {
        let (objects, report) = cluster(kfc, input.secrets, input.with_tokens);
        out.objects.extend(objects);
        out.reports.push(report);
    }
    let namespaces: BTreeMap<String, &Value> = input
        .federated
        .iter()
        .filter(|f| {
            input
                .types
                .iter()
                .any(|t| t.targets_namespace() && t.federates(f))
        })
        .map(|f| (meta(f, "name").to_string(), f))
        .collect();
    let ctx = Context {
        input,
        namespaces: &namespaces,
    };
    for fed in input.federated {
        let (objects, report) = federated_object(fed, &ctx);
        out.objects.extend(objects);
        out.reports.push(report);
    }
    out.reports.extend(unused_rsps(input));
    for crd in input.crds {
        let (object, report) = custom_resource_definition(crd);
        out.objects.push(object);
        out.reports.push(report);
    }
    for ftc in input.type_configs {
        let mut report = ObjectReport::new(format!("FederatedTypeConfig {}", meta(ftc, "name")));
        report.add(
            FindingKind::Note,
            "",
            "nothing to write: Karmada propagates any kind; this type's objects are exported above",
        );
        out.reports.push(report);
    }
    out.objects.sort_by_key(apply_rank);
    out
}

fn meta<'v>(obj: &'v Value, key: &str) -> &'v str {
    obj["metadata"][key].as_str().unwrap_or("")
}

/// `ns/name` or `name`.
fn key(obj: &Value) -> String {
    match meta(obj, "namespace") {
        "" => meta(obj, "name").to_string(),
        ns => format!("{ns}/{}", meta(obj, "name")),
    }
}

/// `apps/v1 Deployment ns/name`, as the report names what was written.
fn describe(obj: &Value) -> String {
    format!(
        "{} {} {}",
        obj["apiVersion"].as_str().unwrap_or(""),
        obj["kind"].as_str().unwrap_or(""),
        key(obj)
    )
}

fn apply_rank(obj: &Value) -> u8 {
    match (obj["apiVersion"].as_str(), obj["kind"].as_str()) {
        (Some("v1"), Some("Namespace")) if meta(obj, "name") == CLUSTER_SECRET_NAMESPACE => 0,
        (Some("v1"), Some("Secret")) if obj["type"] == "Opaque" && is_cluster_secret(obj) => 1,
        (Some(CLUSTER_API), _) => 2,
        (Some("v1"), Some("Namespace")) => 3,
        (Some(CRD_API), Some("CustomResourceDefinition")) => 4,
        // Overrides before placements: Karmada then never writes a copy
        // without KubeFed's overrides, even when an apply stops between
        // them (the first binding already finds its OverridePolicy).
        (Some(POLICY_API), Some("OverridePolicy" | "ClusterOverridePolicy")) => 6,
        (Some(POLICY_API), _) => 7,
        _ => 5,
    }
}

const CRD_API: &str = "apiextensions.k8s.io/v1";

/// A target type's CRD as the Karmada API server needs it: its spec, none
/// of what the host's server keeps for itself. No policy selects it: the
/// members keep the CRD they have.
pub fn custom_resource_definition(crd: &Value) -> (Value, ObjectReport) {
    let name = meta(crd, "name");
    let mut metadata = json!({"name": name});
    for k in ["labels", "annotations"] {
        if let Some(m) = crd["metadata"][k].as_object().filter(|m| !m.is_empty()) {
            metadata[k] = Value::Object(m.clone());
        }
    }
    let object = json!({
        "apiVersion": CRD_API, "kind": "CustomResourceDefinition",
        "metadata": metadata, "spec": crd["spec"],
    });
    let mut report = ObjectReport::new(format!("CustomResourceDefinition {name}"));
    report.add(
        FindingKind::Note,
        "",
        "written so that Karmada's API server serves the type of its resource templates; no policy propagates it",
    );
    report.produced = vec![describe(&object)];
    (object, report)
}

fn is_cluster_secret(obj: &Value) -> bool {
    meta(obj, "namespace") == CLUSTER_SECRET_NAMESPACE
}

/// A KubeFedCluster → a Push-mode Cluster and its Secret.
pub fn cluster(kfc: &Value, secrets: &[Value], with_tokens: bool) -> (Vec<Value>, ObjectReport) {
    let name = meta(kfc, "name");
    let mut report = ObjectReport::new(format!("KubeFedCluster {name}"));
    let spec = &kfc["spec"];
    if name.len() > 48 || name.contains('.') {
        report.add(
            FindingKind::Approximated,
            "metadata.name",
            format!("Karmada refuses a cluster name that is not a DNS label of at most 48 characters: rename {name:?} in the output and in every policy"),
        );
    }
    let mut cluster_spec = json!({
        "syncMode": "Push",
        "apiEndpoint": spec["apiEndpoint"],
        "secretRef": {"namespace": CLUSTER_SECRET_NAMESPACE, "name": name},
    });
    if let Some(proxy) = spec["proxyURL"].as_str().filter(|p| !p.is_empty()) {
        cluster_spec["proxyURL"] = json!(proxy);
    }
    tls_validations(spec, &mut cluster_spec, &mut report);
    let mut metadata = json!({"name": name});
    if let Some(labels) = kfc["metadata"]["labels"]
        .as_object()
        .filter(|l| !l.is_empty())
    {
        metadata["labels"] = Value::Object(labels.clone());
    }
    let cluster = json!({
        "apiVersion": CLUSTER_API, "kind": "Cluster",
        "metadata": metadata, "spec": cluster_spec,
    });
    let secret = cluster_secret(kfc, secrets, with_tokens, &mut report);
    report.produced = vec![describe(&secret), describe(&cluster)];
    (vec![secret, cluster], report)
}

fn tls_validations(spec: &Value, cluster_spec: &mut Value, report: &mut ObjectReport) {
    let disabled: Vec<&str> = spec["disabledTLSValidations"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if disabled.contains(&"*") {
        cluster_spec["insecureSkipTLSVerification"] = json!(true);
    } else if !disabled.is_empty() {
        report.add(
            FindingKind::Approximated,
            "spec.disabledTLSValidations",
            format!(
                "Karmada skips all TLS verification or none: {} kept verified, so a certificate that needs these exceptions fails until it is fixed (or set insecureSkipTLSVerification)",
                disabled.join(", ")
            ),
        );
    }
}

/// The Secret Karmada reads a Push cluster's credentials from: `caBundle`
/// (the KubeFedCluster's, public) and `token` only when asked for.
fn cluster_secret(
    kfc: &Value,
    secrets: &[Value],
    with_tokens: bool,
    report: &mut ObjectReport,
) -> Value {
    let name = meta(kfc, "name");
    let secret_name = kfc["spec"]["secretRef"]["name"].as_str().unwrap_or("");
    let mut data = Map::new();
    if let Some(ca) = kfc["spec"]["caBundle"].as_str().filter(|c| !c.is_empty()) {
        data.insert("caBundle".into(), json!(ca));
    }
    let host_secret = format!("Secret {}/{secret_name}", meta(kfc, "namespace"));
    let token = secrets
        .iter()
        .find(|s| meta(s, "name") == secret_name && meta(s, "namespace") == meta(kfc, "namespace"))
        .and_then(|s| s["data"]["token"].as_str());
    let expires = crate::cluster::token::Lifetime::of_cluster(kfc);
    match (with_tokens, token) {
        // Karmada keeps the token it is given and never renews it: one that
        // expires would cut Karmada off from the member at its expiry.
        (true, Some(_)) if expires.is_some() => report.add(
            FindingKind::NotMapped,
            "spec.secretRef",
            expiring_token(name, expires.map_or(0, |l| l.expires_at)),
        ),
        (true, Some(token)) => {
            data.insert("token".into(), json!(token));
        }
        (true, None) => report.add(
            FindingKind::NotMapped,
            "spec.secretRef",
            format!("{host_secret} has no token: copy one into Secret {CLUSTER_SECRET_NAMESPACE}/{name}, key token"),
        ),
        (false, _) => report.add(
            FindingKind::Note,
            "spec.secretRef",
            format!("token not written: copy key token of the host's {host_secret} into Secret {CLUSTER_SECRET_NAMESPACE}/{name}, or export with --with-tokens"),
        ),
    }
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"namespace": CLUSTER_SECRET_NAMESPACE, "name": name},
        "data": data,
    })
}

/// Why a member's expiring token (`join --token-ttl`) is not handed to
/// Karmada, and how to give the member a lasting one.
pub fn expiring_token(cluster: &str, expires_at: i64) -> String {
    format!(
        "the token of {cluster} expires at {} (joined with --token-ttl) and Karmada cannot renew it: \
         give the member a lasting token first (kubefedctl join {cluster} --cluster-context CONTEXT \
         --error-on-existing=false, without --token-ttl), then export or migrate again",
        crate::time::rfc3339(expires_at)
    )
}

/// The members whose token expires, each with why and how to fix it:
/// `migrate karmada` refuses them before anything is written.
pub fn expiring_tokens(clusters: &[Value]) -> Vec<String> {
    clusters
        .iter()
        .filter_map(|kfc| {
            let life = crate::cluster::token::Lifetime::of_cluster(kfc)?;
            Some(expiring_token(meta(kfc, "name"), life.expires_at))
        })
        .collect()
}

/// What a federated object's export reads besides the object.
struct Context<'a> {
    input: &'a Input<'a>,
    /// FederatedNamespaces by name.
    namespaces: &'a BTreeMap<String, &'a Value>,
}

impl Context<'_> {
    fn find_type(&self, fed: &Value) -> Option<FederatedType> {
        self.input.types.iter().find(|t| t.federates(fed)).cloned()
    }

    /// The RSP of a FederatedDeployment or FederatedReplicaSet.
    fn rsp(&self, fed: &Value) -> Option<&Value> {
        let kind = fed["kind"].as_str().unwrap_or("");
        if !SCHEDULABLE_KINDS.contains(&kind) {
            return None;
        }
        self.input
            .rsps
            .iter()
            .find(|r| key(r) == key(fed) && r["spec"]["targetKind"].as_str() == Some(kind))
    }
}

/// One federated object → its resource template and policies.
fn federated_object(fed: &Value, ctx: &Context) -> (Vec<Value>, ObjectReport) {
    let kind = fed["kind"].as_str().unwrap_or("");
    let mut report = ObjectReport::new(format!("{kind} {}", key(fed)));
    let Some(ty) = ctx.find_type(fed) else {
        report.add(
            FindingKind::NotMapped,
            "",
            format!("no FederatedTypeConfig for {kind} ({}): give it (or, for a custom type, its target's CustomResourceDefinition) with the input to export this object", fed["apiVersion"].as_str().unwrap_or("")),
        );
        return (Vec::new(), report);
    };
    let rsp = ctx.rsp(fed);
    let ty = upgrade_type(ty, &mut report);
    let mut template = resource_template(fed, &ty);
    upgrade_template(fed, &mut template, &mut report);
    let mut objects = Vec::new();
    let affinity = placement(fed, &ty, rsp, ctx, &mut report);
    let scheduling = rsp.and_then(|r| replica_scheduling(r, &mut template, &mut report));
    objects.push(template.clone());
    if let Some(affinity) = affinity {
        let policy = propagation_policy(fed, &ty, affinity, scheduling);
        if let Some(r) = rsp {
            compare_replicas(r, &policy, ctx, &mut report);
        }
        objects.push(policy);
    }
    if let Some(op) = override_policy(fed, &ty, &template, rsp.is_some(), &mut report) {
        objects.push(op);
    }
    for (field, value) in unmapped_fields(fed) {
        report.add(FindingKind::NotMapped, &field, value);
    }
    report.produced = objects.iter().map(describe).collect();
    (objects, report)
}

/// A type of a removed API version (Ingress `v1beta1`) → the served one.
fn upgrade_type(mut ty: FederatedType, report: &mut ObjectReport) -> FederatedType {
    if ingress::is_legacy(&ty.target_api_version, &ty.target_kind) {
        report.add(
            FindingKind::Note,
            "",
            format!(
                "written as {} Ingress: {} is no longer served",
                ingress::INGRESS_V1,
                ty.target_api_version
            ),
        );
        ty.target_api_version = ingress::INGRESS_V1.to_string();
    }
    ty
}

/// An Ingress template of KubeFed's era converted as the API server
/// converts it; overrides of its old fields cannot follow.
fn upgrade_template(fed: &Value, template: &mut Value, report: &mut ObjectReport) {
    if template["kind"] != "Ingress" || template["apiVersion"] != ingress::INGRESS_V1 {
        return;
    }
    if ingress::upgrade(template) {
        report.add(
            FindingKind::Note,
            "spec.template.spec",
            "serviceName/servicePort backends and paths without pathType converted to networking.k8s.io/v1 as the API server converts them",
        );
    }
    let old_paths = fed["spec"]["overrides"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|o| o["clusterOverrides"].as_array().into_iter().flatten())
        .filter_map(|o| o["path"].as_str())
        .filter(|p| {
            p.contains("serviceName") || p.contains("servicePort") || p.ends_with("/backend")
        });
    for path in old_paths {
        report.add(
            FindingKind::Approximated,
            &format!("spec.overrides: {path}"),
            "an override of an Ingress v1beta1 backend field, written as is: rewrite it for networking.k8s.io/v1 (service.name, service.port)",
        );
    }
}

/// Fields of a federated object's spec that nothing here maps.
fn unmapped_fields(fed: &Value) -> Vec<(String, String)> {
    let Some(spec) = fed["spec"].as_object() else {
        return Vec::new();
    };
    spec.keys()
        .filter(|k| !["template", "placement", "overrides"].contains(&k.as_str()))
        .map(|k| {
            (
                format!("spec.{k}"),
                "a field of a fork's federated type that Karmada has no place for".to_string(),
            )
        })
        .collect()
}

/// The plain object: the template with the federated object's name and
/// namespace, as KubeFed builds each member's copy before overrides.
pub fn resource_template(fed: &Value, ty: &FederatedType) -> Value {
    let mut obj = match &fed["spec"]["template"] {
        Value::Object(t) => Value::Object(t.clone()),
        _ => json!({}),
    };
    obj["apiVersion"] = json!(ty.target_api_version);
    obj["kind"] = json!(ty.target_kind);
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    let m = obj["metadata"].as_object_mut().expect("an object");
    m.insert("name".into(), json!(meta(fed, "name")));
    m.remove("namespace");
    if ty.namespaced {
        m.insert("namespace".into(), json!(meta(fed, "namespace")));
    }
    if ty.targets_namespace() {
        let labels = m.entry("labels").or_insert_with(|| json!({}));
        if labels.is_object() {
            labels[SKIP_AUTO_PROPAGATION] = json!("true");
        }
    }
    obj
}

/// Which clusters a placement selects, as Karmada's `clusterAffinity`
/// (whose terms are all required: names, label selector, exclusions).
#[derive(Clone, Debug, PartialEq)]
pub enum Affinity {
    /// No cluster: no policy is written, the template stays in Karmada.
    Nowhere,
    /// Every cluster (an empty `clusterAffinity`).
    All,
    Names(BTreeSet<String>),
    Selector(Value),
    Both(BTreeSet<String>, Value),
}

impl Affinity {
    /// A KubeFed placement: the `clusters` list wins even when empty, else
    /// the selector, else nothing (`selector_only`: the list is ignored,
    /// as the RSP controller ignores it).
    pub fn of(fed: &Value, selector_only: bool) -> Result<Affinity, String> {
        let placement = &fed["spec"]["placement"];
        match (&placement["clusters"], selector_only) {
            (Value::Null, _) | (_, true) => {}
            (Value::Array(items), false) => {
                let names: Option<BTreeSet<String>> = items
                    .iter()
                    .map(|i| i["name"].as_str().map(str::to_string))
                    .collect();
                let names = names.ok_or("spec.placement.clusters[].name is not a string")?;
                return Ok(Affinity::names(names));
            }
            _ => return Err("spec.placement.clusters is not a list".into()),
        }
        match &placement["clusterSelector"] {
            Value::Null => Ok(Affinity::Nowhere),
            sel => {
                Selector::parse(sel).map_err(|e| format!("spec.placement.clusterSelector: {e}"))?;
                Ok(Affinity::Selector(sel.clone()))
            }
        }
    }

    fn names(names: BTreeSet<String>) -> Affinity {
        if names.is_empty() {
            Affinity::Nowhere
        } else {
            Affinity::Names(names)
        }
    }

    fn parts(self) -> Option<(Option<BTreeSet<String>>, Option<Value>)> {
        match self {
            Affinity::Nowhere => None,
            Affinity::All => Some((None, None)),
            Affinity::Names(n) => Some((Some(n), None)),
            Affinity::Selector(s) => Some((None, Some(s))),
            Affinity::Both(n, s) => Some((Some(n), Some(s))),
        }
    }

    /// The clusters both select (KubeFed's narrowing by the
    /// FederatedNamespace), exactly: names intersect, selectors merge.
    pub fn intersect(self, other: Affinity) -> Affinity {
        let (Some((n1, s1)), Some((n2, s2))) = (self.parts(), other.parts()) else {
            return Affinity::Nowhere;
        };
        let names = match (n1, n2) {
            (Some(a), Some(b)) => Some(a.intersection(&b).cloned().collect::<BTreeSet<_>>()),
            (a, b) => a.or(b),
        };
        let selector = match (s1, s2) {
            (Some(a), Some(b)) => match merge_selectors(&a, &b) {
                Some(s) => Some(s),
                None => return Affinity::Nowhere,
            },
            (a, b) => a.or(b),
        };
        match (names, selector) {
            (Some(n), _) if n.is_empty() => Affinity::Nowhere,
            (None, None) => Affinity::All,
            (Some(n), None) => Affinity::Names(n),
            (None, Some(s)) => Affinity::Selector(s),
            (Some(n), Some(s)) => Affinity::Both(n, s),
        }
    }

    /// Karmada's `clusterAffinity`.
    pub fn to_karmada(&self) -> Value {
        let mut out = json!({});
        if let Affinity::Names(n) | Affinity::Both(n, _) = self {
            out["clusterNames"] = json!(n);
        }
        if let Affinity::Selector(s) | Affinity::Both(_, s) = self {
            out["labelSelector"] = s.clone();
        }
        out
    }
}

/// Both selectors at once; `None` when no labels can match both.
fn merge_selectors(a: &Value, b: &Value) -> Option<Value> {
    let mut labels = a["matchLabels"].as_object().cloned().unwrap_or_default();
    for (k, v) in b["matchLabels"].as_object().into_iter().flatten() {
        match labels.get(k) {
            Some(existing) if existing != v => return None,
            _ => {
                labels.insert(k.clone(), v.clone());
            }
        }
    }
    let mut exprs: Vec<Value> = Vec::new();
    for s in [a, b] {
        exprs.extend(
            s["matchExpressions"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
    }
    let mut out = json!({});
    if !labels.is_empty() {
        out["matchLabels"] = Value::Object(labels);
    }
    if !exprs.is_empty() {
        out["matchExpressions"] = json!(exprs);
    }
    Some(out)
}

/// The object's placement as KubeFed's sync controller computes it, or
/// `None` (no policy) when it places the object nowhere.
fn placement(
    fed: &Value,
    ty: &FederatedType,
    rsp: Option<&Value>,
    ctx: &Context,
    report: &mut ObjectReport,
) -> Option<Affinity> {
    let intersect_rsp = rsp.is_some_and(|r| r["spec"]["intersectWithClusterSelector"] == true);
    let own = match rsp {
        Some(_) if !intersect_rsp => Ok(Affinity::All),
        _ => Affinity::of(fed, intersect_rsp),
    };
    let own = match own {
        Ok(a) => a,
        Err(e) => {
            report.add(
                FindingKind::NotMapped,
                "spec.placement",
                format!("{e}: KubeFed places this object nowhere; no policy written"),
            );
            return None;
        }
    };
    let narrowed = if ty.namespaced {
        narrow_by_namespace(own, meta(fed, "namespace"), ctx, report)?
    } else {
        own
    };
    if narrowed == Affinity::Nowhere {
        report.add(
            FindingKind::Note,
            "spec.placement",
            "placed on no cluster: no policy written, so the resource template stays in Karmada only",
        );
        return None;
    }
    Some(narrowed)
}

fn narrow_by_namespace(
    own: Affinity,
    namespace: &str,
    ctx: &Context,
    report: &mut ObjectReport,
) -> Option<Affinity> {
    match (ctx.namespaces.get(namespace), ctx.input.scope) {
        (Some(ns), _) => match Affinity::of(ns, false) {
            Ok(ns) => Some(own.intersect(ns)),
            Err(e) => {
                report.add(
                    FindingKind::NotMapped,
                    "spec.placement",
                    format!("FederatedNamespace {namespace}: {e}; no policy written"),
                );
                None
            }
        },
        (None, Scope::Namespaced) => Some(own),
        (None, Scope::Cluster) => {
            report.add(
                FindingKind::Note,
                "metadata.namespace",
                format!("namespace {namespace} has no FederatedNamespace, so KubeFed places this object nowhere: no policy written"),
            );
            None
        }
    }
}

/// `<name>-<kind>`, the policies' names, as Karmada's `GenerateBindingName`
/// names bindings (a ClusterRole `system:viewer` has
/// `:`, which no custom resource's name may hold), so that a policy and
/// the binding Karmada makes for its object share one name.
pub fn policy_name(fed: &Value, ty: &FederatedType) -> String {
    format!("{}-{}", meta(fed, "name").replace(':', "."), ty.target_kind).to_lowercase()
}

fn selector(fed: &Value, ty: &FederatedType) -> Value {
    json!([{
        "apiVersion": ty.target_api_version,
        "kind": ty.target_kind,
        "name": meta(fed, "name"),
    }])
}

fn policy_metadata(fed: &Value, ty: &FederatedType) -> Value {
    let mut m = json!({"name": policy_name(fed, ty)});
    if ty.namespaced {
        m["namespace"] = json!(meta(fed, "namespace"));
    }
    m
}

fn propagation_policy(
    fed: &Value,
    ty: &FederatedType,
    affinity: Affinity,
    scheduling: Option<Value>,
) -> Value {
    let mut placement = json!({"clusterAffinity": affinity.to_karmada()});
    if let Some(s) = scheduling {
        placement["replicaScheduling"] = s;
    }
    let kind = if ty.namespaced {
        "PropagationPolicy"
    } else {
        "ClusterPropagationPolicy"
    };
    let metadata = policy_metadata(fed, ty);
    json!({
        "apiVersion": POLICY_API,
        "kind": kind,
        "metadata": metadata,
        "spec": {
            "resourceSelectors": selector(fed, ty),
            "placement": placement,
            "conflictResolution": "Overwrite",
        },
    })
}

/// An RSP → `replicaScheduling`, and the template's replicas set to its
/// total; `None` (and a finding) when the RSP cannot be read.
fn replica_scheduling(
    rsp: &Value,
    template: &mut Value,
    report: &mut ObjectReport,
) -> Option<Value> {
    let rsp_name = format!("ReplicaSchedulingPreference {}", key(rsp));
    let parsed = match read_rsp(rsp) {
        Ok(r) => r,
        Err(e) => {
            report.add(
                FindingKind::NotMapped,
                "",
                format!("{e}: no replicaScheduling written"),
            );
            return None;
        }
    };
    let prefs = &parsed.preferences;
    template["spec"]["replicas"] = json!(prefs.total_replicas);
    let explicit: Vec<&String> = prefs.clusters.keys().filter(|c| *c != "*").collect();
    let mut weights = Vec::new();
    for (cluster, p) in &prefs.clusters {
        let field = format!("{rsp_name}: spec.clusters.{cluster}");
        if p.min_replicas > 0 {
            report.add(FindingKind::Approximated, &format!("{field}.minReplicas"), format!("Karmada has no per-cluster minimum (karmada#4805, #6511): {cluster} gets its share by weight only, not at least {}", p.min_replicas));
        }
        if let Some(max) = p.max_replicas {
            report.add(FindingKind::Approximated, &format!("{field}.maxReplicas"), format!("Karmada has no per-cluster maximum (karmada#4805, #6511): {cluster} may get more than {max}"));
        }
        if p.weight <= 0 {
            continue;
        }
        let target = if cluster == "*" {
            let mut t = json!({});
            if !explicit.is_empty() {
                t["exclude"] = json!(explicit);
            }
            t
        } else {
            json!({"clusterNames": [cluster]})
        };
        weights.push(json!({"targetCluster": target, "weight": p.weight}));
    }
    if weights.is_empty() {
        report.add(FindingKind::Approximated, &format!("{rsp_name}: spec.clusters"), "no cluster has a weight: KubeFed schedules by minReplicas alone, Karmada then divides equally");
        weights.push(json!({"targetCluster": {}, "weight": 1}));
    }
    if prefs.rebalance {
        report.add(FindingKind::Approximated, &format!("{rsp_name}: spec.rebalance"), "Karmada's static weights do not move replicas by the members' running pods and capacity");
    }
    report.add(
        FindingKind::Note,
        &format!("{rsp_name}: spec.totalReplicas"),
        format!(
            "the template's spec.replicas is {}, which Karmada divides",
            prefs.total_replicas
        ),
    );
    Some(json!({
        "replicaSchedulingType": "Divided",
        "replicaDivisionPreference": "Weighted",
        "weightPreference": {"staticWeightList": weights},
    }))
}

/// Each member whose replicas Karmada's static weights change from
/// KubeFed's planner's (`division`): an approximation each, named with
/// both numbers. Only when the input holds the KubeFedClusters to divide
/// over (offline files without them are not compared).
fn compare_replicas(rsp: &Value, policy: &Value, ctx: &Context, report: &mut ObjectReport) {
    let Ok(parsed) = read_rsp(rsp) else {
        return;
    };
    let exported: Vec<(String, Value)> = ctx
        .input
        .clusters
        .iter()
        .map(|c| (meta(c, "name").to_string(), c["metadata"]["labels"].clone()))
        .collect();
    if exported.is_empty() || policy["spec"]["placement"]["replicaScheduling"].is_null() {
        return;
    }
    let affinity = &policy["spec"]["placement"]["clusterAffinity"];
    let placed = division::affinity_clusters(Some(affinity).filter(|a| !a.is_null()), &exported);
    let kubefed = match parsed.intersect_with_cluster_selector {
        true => placed.clone(),
        false => exported.iter().map(|(n, _)| n.clone()).collect(),
    };
    for d in division::differences(&parsed.preferences, &parsed.key, &kubefed, &placed) {
        report.add(
            FindingKind::Approximated,
            &format!(
                "ReplicaSchedulingPreference {}: replicas.{}",
                key(rsp),
                d.cluster
            ),
            d.message(),
        );
    }
}

/// RSPs with no federated object to schedule in the input.
fn unused_rsps(input: &Input) -> Vec<ObjectReport> {
    input
        .rsps
        .iter()
        .filter(|r| {
            !input
                .federated
                .iter()
                .any(|f| key(f) == key(r) && f["kind"].as_str() == r["spec"]["targetKind"].as_str())
        })
        .map(|r| {
            let mut report = ObjectReport::new(format!("ReplicaSchedulingPreference {}", key(r)));
            report.add(
                FindingKind::NotMapped,
                "spec.targetKind",
                "its federated object is not in the input: nothing to schedule",
            );
            report
        })
        .collect()
}

/// Overrides → an OverridePolicy (ClusterOverridePolicy) with one rule per
/// cluster; `None` when there are none. With an RSP, its `/spec/replicas`
/// overrides are Karmada's scheduler's now and are left out.
fn override_policy(
    fed: &Value,
    ty: &FederatedType,
    template: &Value,
    scheduled: bool,
    report: &mut ObjectReport,
) -> Option<Value> {
    let parsed = match overrides_by_cluster(fed) {
        Ok(p) => p,
        Err(e) => {
            report.add(
                FindingKind::NotMapped,
                "spec.overrides",
                format!("{e}: KubeFed would not propagate this object; no OverridePolicy written"),
            );
            return None;
        }
    };
    // Entries choosing clusters by label (ours) first, as Karmada's
    // `targetCluster.labelSelector` (the exported Clusters carry the
    // KubeFedClusters' labels); then the named ones, which so win, as
    // they do here (Karmada applies later rules over earlier ones).
    let mut rules: Vec<Value> = selector_rules(fed, template, report);
    for (cluster, overrides) in parsed.named {
        let mut plaintext: Vec<Value> = Vec::new();
        for o in &overrides {
            if scheduled && normalized_path(&o.path) == REPLICAS_PATH {
                report.add(
                    FindingKind::Note,
                    &format!("spec.overrides.{cluster}"),
                    "its /spec/replicas override was the RSP's: Karmada's scheduler sets replicas now",
                );
                continue;
            }
            plaintext.extend(plaintext_overrider(o, template, &cluster, report));
        }
        if !plaintext.is_empty() {
            rules.push(json!({
                "targetCluster": {"clusterNames": [cluster]},
                "overriders": {"plaintext": plaintext},
            }));
        }
    }
    if rules.is_empty() {
        return None;
    }
    Some(json!({
        "apiVersion": POLICY_API,
        "kind": if ty.namespaced { "OverridePolicy" } else { "ClusterOverridePolicy" },
        "metadata": policy_metadata(fed, ty),
        "spec": {"resourceSelectors": selector(fed, ty), "overrideRules": rules},
    }))
}

/// The override entries with a `clusterSelector`, each as a rule for the
/// clusters its labels select.
fn selector_rules(fed: &Value, template: &Value, report: &mut ObjectReport) -> Vec<Value> {
    let items = fed["spec"]["overrides"].as_array().into_iter().flatten();
    let mut rules = Vec::new();
    for (n, item) in items
        .enumerate()
        .filter(|(_, i)| !i["clusterSelector"].is_null())
    {
        let at = format!("spec.overrides[{n}]");
        let overrides = crate::propagation::overrides::overrides_by_cluster(
            &json!({"spec": {"overrides": [{"clusterOverrides": item["clusterOverrides"]}]}}),
        )
        .map(|p| p.named.into_iter().flat_map(|(_, l)| l).collect::<Vec<_>>())
        .unwrap_or_default();
        let plaintext: Vec<Value> = overrides
            .iter()
            .flat_map(|o| plaintext_overrider(o, template, &at, report))
            .collect();
        if !plaintext.is_empty() {
            rules.push(json!({
                "targetCluster": {"labelSelector": item["clusterSelector"]},
                "overriders": {"plaintext": plaintext},
            }));
        }
    }
    rules
}

/// KubeFed's JSON-patch engine drops a path's first segment unread, so
/// `spec/replicas` means `/replicas`; Karmada's needs the leading `/`.
fn normalized_path(path: &str) -> String {
    if path.starts_with('/') || path.is_empty() {
        return path.to_string();
    }
    match path.split_once('/') {
        Some((_, rest)) => format!("/{rest}"),
        None => "/".to_string(),
    }
}

/// One override → one plaintext overrider.
fn plaintext_overrider(
    o: &ClusterOverride,
    template: &Value,
    cluster: &str,
    report: &mut ObjectReport,
) -> Option<Value> {
    let field = format!("spec.overrides.{cluster}.{}", o.path);
    if o.path.is_empty() {
        report.add(
            FindingKind::NotMapped,
            &field,
            "an override of the whole object: Karmada's overriders change fields, not the object",
        );
        return None;
    }
    let path = normalized_path(&o.path);
    if path != o.path {
        report.add(
            FindingKind::Note,
            &field,
            format!("written as {path}, the path KubeFed's JSON patch engine used"),
        );
    }
    let mut operator = o.op;
    if o.op == Op::Replace && template.pointer(&path).is_none() {
        // KubeFed's engine (evanphx/json-patch v4) replaces a missing member
        // as `add` does; Karmada's refuses it.
        operator = Op::Add;
        report.add(FindingKind::Note, &field, "replace of a field the template does not have: written as add, which is what KubeFed did");
    }
    let mut out = json!({"path": path, "operator": operator.as_str()});
    if operator != Op::Remove {
        out["value"] = o.value.clone();
    }
    Some(out)
}
