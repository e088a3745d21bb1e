//! What a cluster serves: API resources (through plain discovery, which
//! Kubernetes 1.20 has; aggregated discovery came later) and the OpenAPI
//! document.

use crate::apply::api_error;
use crate::core::lookup::{self, ServedResource};
use anyhow::{Context, Result};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::Client;
use serde_json::Value;
use tokio::task::JoinSet;

/// Every served resource (no subresources). Only each group's preferred
/// version unless `all_versions`. Group lists are fetched in parallel.
pub async fn served_resources(client: &Client, all_versions: bool) -> Result<Vec<ServedResource>> {
    let mut lists: JoinSet<Result<(String, bool, APIResourceList)>> = JoinSet::new();
    let core = client
        .list_core_api_versions()
        .await
        .map_err(api_error)
        .context("discovery")?;
    for v in core.versions {
        let c = client.clone();
        lists.spawn(async move {
            let list = c.list_core_api_resources(&v).await.map_err(api_error)?;
            Ok((String::new(), true, list))
        });
    }
    let groups = client
        .list_api_groups()
        .await
        .map_err(api_error)
        .context("discovery")?;
    for g in groups.groups {
        let preferred = g
            .preferred_version
            .as_ref()
            .map(|p| p.group_version.clone());
        for v in g.versions {
            let is_preferred = preferred.as_deref() == Some(v.group_version.as_str());
            if !all_versions && !is_preferred {
                continue;
            }
            let c = client.clone();
            let name = g.name.clone();
            lists.spawn(async move {
                // A group version listed a moment ago may be gone (its CRD
                // being deleted): skipped, as kubectl's discovery does.
                let list = match c.list_api_group_resources(&v.group_version).await {
                    Err(kube::Error::Api(s)) if s.code == 404 => APIResourceList {
                        group_version: v.group_version.clone(),
                        resources: Vec::new(),
                    },
                    other => other.map_err(api_error)?,
                };
                Ok((name, is_preferred, list))
            });
        }
    }
    let mut out = Vec::new();
    while let Some(joined) = lists.join_next().await {
        let (group, preferred, list) = joined.context("discovery task")?.context("discovery")?;
        let version = list
            .group_version
            .rsplit('/')
            .next()
            .unwrap_or("")
            .to_string();
        for r in list.resources.into_iter().filter(|r| !r.name.contains('/')) {
            out.push(ServedResource {
                group: group.clone(),
                version: version.clone(),
                kind: r.kind,
                plural: r.name,
                singular: r.singular_name,
                short_names: r.short_names.unwrap_or_default(),
                namespaced: r.namespaced,
                preferred,
                verbs: r.verbs,
            });
        }
    }
    // Discovery order (core first, then by group) keeps lookups stable.
    out.sort_by(|a, b| {
        (!a.group.is_empty(), &a.group, &a.version, &a.plural).cmp(&(
            !b.group.is_empty(),
            &b.group,
            &b.version,
            &b.plural,
        ))
    });
    Ok(out)
}

/// The kube API resource of a served resource.
pub fn api_resource_of(r: &ServedResource) -> kube::api::ApiResource {
    crate::apply::api_resource(&r.group, &r.version, &r.kind, &r.plural)
}

/// The resource `key` names in the cluster (see [`lookup::find`]).
pub async fn find_resource(
    client: &Client,
    key: &str,
    version: Option<&str>,
) -> Result<ServedResource> {
    let served = served_resources(client, version.is_some()).await?;
    Ok(lookup::find(&served, key, version)?)
}

/// The cluster's OpenAPI v2 document (Kubernetes 1.20 serves no v3).
pub async fn openapi_v2(client: &Client) -> Result<Value> {
    let req = http::Request::get("/openapi/v2")
        .header("Accept", "application/json")
        .body(Vec::new())
        .expect("a valid request");
    let text = client
        .request_text(req)
        .await
        .map_err(api_error)
        .context("reading /openapi/v2")?;
    serde_json::from_str(&text).context("parsing /openapi/v2")
}

/// Whether the cluster serves `plural` in `group`/`version` (`""` is the
/// core group). A group version the cluster does not know is a plain no.
pub async fn serves(client: &Client, group: &str, version: &str, plural: &str) -> Result<bool> {
    let list = if group.is_empty() {
        client.list_core_api_resources(version).await
    } else {
        client
            .list_api_group_resources(&format!("{group}/{version}"))
            .await
    };
    match list {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == plural)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(api_error(e)).context("discovery"),
    }
}
