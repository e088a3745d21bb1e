//! Reading a federation for `export karmada` and `migrate karmada`, from
//! the live host or from files, and handing it to the core's mapping
//! (`core::export::karmada`); `migrate.rs` the migration's steps.

pub mod migrate;

use crate::apply::{api_error, api_resource};
use crate::clients::host::Host;
use crate::core::cluster::membership::Scope;
use crate::core::export::karmada::{self, Export, FederatedType, Input};
use crate::sync::render;
use crate::sync::run::observe::list_all;
use anyhow::Result;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;
use std::path::PathBuf;

/// What an export reads, from the host or from files.
#[derive(Default)]
pub struct Federation {
    pub clusters: Vec<Value>,
    pub secrets: Vec<Value>,
    pub type_configs: Vec<Value>,
    pub federated: Vec<Value>,
    pub rsps: Vec<Value>,
    /// CustomResourceDefinitions: live, those of the FTCs' targets that
    /// are not built in; from files, every one given (those of the types'
    /// targets are exported, and define types no FTC names).
    pub crds: Vec<Value>,
    pub scope: Option<Scope>,
    /// Live, the federated types that could not be listed (`<ftc>:
    /// <error>`): their objects are not in `federated`.
    pub unlisted: Vec<String>,
}

impl Federation {
    /// Each federated object of a known type (its index) with its plain
    /// object as KubeFed writes it in members, before overrides.
    pub fn templates(&self) -> Vec<(usize, Value)> {
        let types = federated_types(self);
        self.federated
            .iter()
            .enumerate()
            .filter_map(|(i, f)| {
                let ty = types.iter().find(|t| t.federates(f))?;
                Some((i, karmada::resource_template(f, ty)))
            })
            .collect()
    }

    /// The Karmada objects and the report (`with_tokens`: the Clusters'
    /// Secrets carry their tokens).
    pub fn export(&self, with_tokens: bool) -> Export {
        let types = federated_types(self);
        let crds: Vec<Value> = self
            .crds
            .iter()
            .filter(|c| types.iter().any(|t| t.targets_crd(c)))
            .cloned()
            .collect();
        karmada::export(&Input {
            clusters: &self.clusters,
            secrets: &self.secrets,
            type_configs: &self.type_configs,
            types: &types,
            federated: &self.federated,
            rsps: &self.rsps,
            crds: &crds,
            scope: self.scope.unwrap_or(Scope::Cluster),
            with_tokens,
        })
    }
}

/// The FTCs' types, and offline those of federated kinds no FTC names:
/// built in, or defined by a CRD of the input.
fn federated_types(g: &Federation) -> Vec<FederatedType> {
    let mut types: Vec<FederatedType> = g
        .type_configs
        .iter()
        .filter_map(FederatedType::from_ftc)
        .collect();
    for fed in &g.federated {
        let kind = fed["kind"].as_str().unwrap_or("");
        let group = fed["apiVersion"]
            .as_str()
            .and_then(|a| a.split_once('/'))
            .map_or("", |(g, _)| g);
        let known = types
            .iter()
            .any(|t| t.federated_kind == kind && t.federated_group == group);
        if known {
            continue;
        }
        let found = FederatedType::builtin(group, kind)
            .or_else(|| FederatedType::from_crd(group, kind, &g.crds));
        if let Some(t) = found {
            types.push(t);
        }
    }
    types
}

/// The federation in files (`-f`): federated objects of `namespace` (all
/// when `None`), RSPs, KubeFedClusters, FTCs, CRDs and the KubeFedConfig's
/// scope.
pub fn read_files(paths: &[PathBuf], namespace: Option<&str>) -> Result<Federation> {
    let inputs = render::load(paths)?;
    for n in &inputs.notes {
        tracing::info!("note: {n}");
    }
    let objects = |v: Vec<render::Sourced>| -> Vec<Value> {
        v.into_iter()
            .map(|s| s.object)
            .filter(|o| namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns))
            .collect()
    };
    let scope = match &inputs.config {
        Some(c) => Some(crate::clients::host::settings_of("", Some(&c.object))?.scope),
        None => None,
    };
    Ok(Federation {
        clusters: inputs.clusters.into_iter().map(|s| s.object).collect(),
        secrets: Vec::new(),
        type_configs: inputs.type_configs.into_iter().map(|s| s.object).collect(),
        crds: inputs.crds.into_iter().map(|s| s.object).collect(),
        federated: objects(inputs.federated),
        rsps: objects(inputs.rsps),
        scope,
        unlisted: Vec::new(),
    })
}

/// The federation in the host: KubeFedClusters, FTCs, every FTC's
/// federated objects and the RSPs (of `namespace`, all when `None`), the
/// scope, and with `with_tokens` the KubeFedClusters' Secrets.
pub async fn read_host(
    host: &Host,
    namespace: Option<&str>,
    with_tokens: bool,
) -> Result<Federation> {
    host.require_initialised().await?;
    let scope = host.scope().await?;
    let fed_ns = Some(host.namespace.as_str());
    let core = |kind, plural| ("core.kubefed.io", "v1beta1", kind, plural);
    let clusters = list(host, core("KubeFedCluster", "kubefedclusters"), fed_ns).await?;
    let type_configs = list(
        host,
        core("FederatedTypeConfig", "federatedtypeconfigs"),
        fed_ns,
    )
    .await?;
    let (federated, unlisted) = federated_objects(host, &type_configs, namespace).await;
    let rsp = (
        "scheduling.kubefed.io",
        "v1alpha1",
        "ReplicaSchedulingPreference",
        "replicaschedulingpreferences",
    );
    let rsps = list(host, rsp, namespace).await.unwrap_or_else(|e| {
        tracing::warn!(
            "ReplicaSchedulingPreferences not read: {}",
            crate::error::one_line(&e)
        );
        Vec::new()
    });
    let secrets = if with_tokens {
        cluster_secrets(&host.client, &host.namespace, &clusters).await?
    } else {
        Vec::new()
    };
    let crds = target_crds(host, &type_configs).await?;
    Ok(Federation {
        crds,
        unlisted,
        clusters,
        secrets,
        type_configs,
        federated,
        rsps,
        scope: Some(scope),
    })
}

/// Every object of `(group, version, kind, plural)` in `ns` (all when `None`).
async fn list(
    host: &Host,
    (group, version, kind, plural): (&str, &str, &str, &str),
    ns: Option<&str>,
) -> Result<Vec<Value>> {
    let ar = api_resource(group, version, kind, plural);
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(host.client.clone(), ns, &ar),
        None => Api::all_with(host.client.clone(), &ar),
    };
    list_all(&api, &ListParams::default()).await
}

/// Every FTC's federated objects; a type that cannot be listed is warned
/// about, left out, and named (`<ftc>: <error>`) in the second list.
async fn federated_objects(
    host: &Host,
    type_configs: &[Value],
    ns: Option<&str>,
) -> (Vec<Value>, Vec<String>) {
    let mut federated = Vec::new();
    let mut unlisted = Vec::new();
    for ftc in type_configs {
        let f = &ftc["spec"]["federatedType"];
        let s = |key: &str| f[key].as_str().unwrap_or("");
        let resource = (s("group"), s("version"), s("kind"), s("pluralName"));
        match list(host, resource, ns).await {
            Ok(o) => federated.extend(o),
            Err(e) => {
                let why = format!(
                    "{}: {}",
                    ftc["metadata"]["name"].as_str().unwrap_or(""),
                    crate::error::one_line(&e)
                );
                tracing::warn!("{why}");
                unlisted.push(why);
            }
        }
    }
    (federated, unlisted)
}

/// The CRDs of the FTCs' targets outside the built-in types, as the host
/// serves them (one the host lacks is left out).
async fn target_crds(host: &Host, type_configs: &[Value]) -> Result<Vec<Value>> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: Api<CustomResourceDefinition> = Api::all(host.client.clone());
    let mut out = Vec::new();
    for ftc in type_configs {
        let t = &ftc["spec"]["targetType"];
        let group = t["group"].as_str().unwrap_or("");
        let api_version = match group {
            "" => t["version"].as_str().unwrap_or("").to_string(),
            g => format!("{g}/{}", t["version"].as_str().unwrap_or("")),
        };
        let kind = t["kind"].as_str().unwrap_or("");
        if group.is_empty() || crate::core::types::builtin::builtin(&api_version, kind).is_some() {
            continue;
        }
        let name = format!("{}.{group}", t["pluralName"].as_str().unwrap_or(""));
        if let Some(crd) = api.get_opt(&name).await.map_err(api_error)? {
            out.push(serde_json::to_value(crd)?);
        }
    }
    Ok(out)
}

/// The KubeFedClusters' Secrets (`--with-tokens`).
pub async fn cluster_secrets(
    client: &kube::Client,
    ns: &str,
    clusters: &[Value],
) -> Result<Vec<Value>> {
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), ns);
    let mut out = Vec::new();
    for c in clusters {
        let Some(name) = c["spec"]["secretRef"]["name"].as_str() else {
            continue;
        };
        if let Some(s) = api.get_opt(name).await.map_err(api_error)? {
            out.push(serde_json::to_value(s)?);
        }
    }
    Ok(out)
}
