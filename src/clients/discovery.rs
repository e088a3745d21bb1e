//! What a cluster serves: API resources (aggregated discovery where the
//! server has it, the per-group form that Kubernetes 1.20 has otherwise)
//! and the OpenAPI documents (v3 where served, else v2).

use crate::apply::api_error;
use crate::core::types::lookup::{self, DiscoveryRoot, ServedResource};
use anyhow::{Context, Result, bail};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::Client;
use serde_json::Value;
use std::collections::HashMap;
use tokio::task::JoinSet;

/// Every resource the cluster serves (only preferred versions unless
/// `all_versions`). Aggregated discovery where the server offers it (1.30+:
/// two requests, `/api` and `/apis`, in one form each); else the legacy
/// form those same two answers give, then one request per group version
/// (1.20), as client-go's discovery client does.
pub async fn served_resources(client: &Client, all_versions: bool) -> Result<Vec<ServedResource>> {
    let (core, groups) = tokio::try_join!(fetch_root(client, "/api"), fetch_root(client, "/apis"))?;
    let mut out = Vec::new();
    let mut versions = Vec::new();
    for root in [core, groups] {
        match lookup::discovery_root(&root, all_versions) {
            Some(DiscoveryRoot::Aggregated(served)) => out.extend(served),
            Some(DiscoveryRoot::Legacy(listed)) => versions.extend(listed),
            None => bail!("discovery: unexpected answer {}", root["kind"]),
        }
    }
    let mut lists: JoinSet<Result<(String, bool, APIResourceList)>> = JoinSet::new();
    for (group, group_version, is_preferred) in versions {
        let c = client.clone();
        lists.spawn(async move {
            // A group version listed a moment ago may be gone (its CRD
            // being deleted): skipped, as kubectl's discovery does.
            let listed = if group.is_empty() {
                c.list_core_api_resources(&group_version).await
            } else {
                c.list_api_group_resources(&group_version).await
            };
            let list = match listed {
                Err(kube::Error::Api(s)) if s.code == 404 => APIResourceList {
                    group_version: group_version.clone(),
                    resources: Vec::new(),
                },
                other => other.map_err(api_error)?,
            };
            Ok((group, is_preferred, list))
        });
    }
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

/// `/api` or `/apis`, asking for the aggregated form first and accepting
/// the legacy one (what a server without it answers).
async fn fetch_root(client: &Client, path: &str) -> Result<Value> {
    let req = http::Request::get(path)
        .header(
            "Accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        )
        .body(Vec::new())
        .expect("a valid request");
    let text = client
        .request_text(req)
        .await
        .map_err(api_error)
        .context("discovery")?;
    serde_json::from_str(&text).with_context(|| format!("discovery: parsing {path}"))
}

/// The api versions in which the cluster serves `target`'s resource
/// other than `target`'s own (asked when `target` answers 404: what a
/// FederatedTypeConfig of a removed version should point at instead).
pub async fn served_elsewhere(
    client: &Client,
    target: &kube::api::ApiResource,
) -> Result<Vec<String>> {
    let served = served_resources(client, true).await?;
    Ok(served
        .into_iter()
        .filter(|r| r.plural == target.plural && r.api_version() != target.api_version)
        .map(|r| r.api_version())
        .collect())
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

/// The OpenAPI documents of one command, each read at most once.
///
/// A built-in type's model costs two requests where the server serves v3
/// (1.24 and later): the index `/openapi/v3`, then the one group version's
/// document it names (`/openapi/v3/apis/apps/v1?hash=...`, about 0.7 MB).
/// Where it does not (1.20 answers 404), the index's 404 and then the whole
/// v2 document (about 3 MB). v3 is preferred because v2 cannot say
/// `nullable`, `default`, `oneOf`, and loses list and map types; more types
/// of one group version cost nothing more, another group version one
/// request.
#[derive(Default)]
pub struct OpenApi {
    /// `Some(None)`: v3 is not served.
    index: Option<Option<Value>>,
    v3: HashMap<String, Value>,
    v2: Option<Value>,
}

impl OpenApi {
    /// The document that models `group/version` (`""` is the core group).
    pub async fn document(
        &mut self,
        client: &Client,
        group: &str,
        version: &str,
    ) -> Result<&Value> {
        if self.index.is_none() {
            self.index = Some(get_json(client, "/openapi/v3", true).await?);
        }
        let key = if group.is_empty() {
            format!("api/{version}")
        } else {
            format!("apis/{group}/{version}")
        };
        let url = self.index.as_ref().and_then(|i| i.as_ref()).and_then(|i| {
            i["paths"][&key]["serverRelativeURL"]
                .as_str()
                .map(str::to_string)
        });
        match url {
            Some(url) => {
                if !self.v3.contains_key(&key) {
                    let doc = get_json(client, &url, false).await?.unwrap_or_default();
                    self.v3.insert(key.clone(), doc);
                }
                Ok(&self.v3[&key])
            }
            // No v3, or v3 without this group version: v2 has every model.
            None => {
                if self.v2.is_none() {
                    self.v2 = get_json(client, "/openapi/v2", false).await?;
                }
                Ok(self.v2.as_ref().expect("fetched"))
            }
        }
    }
}

/// GET `path` as JSON; `None` for a 404 when `missing_ok`. The HTTP
/// status is read from the response itself: 1.20's 404 for `/openapi/v3`
/// has a JSON body that is no Status (it lists the served paths).
async fn get_json(client: &Client, path: &str, missing_ok: bool) -> Result<Option<Value>> {
    let shown = path.split('?').next().unwrap_or(path);
    let req = http::Request::get(path)
        .header("Accept", "application/json")
        .body(kube::client::Body::from(Vec::new()))
        .expect("a valid request");
    let res = client
        .send(req)
        .await
        .map_err(api_error)
        .with_context(|| format!("reading {shown}"))?;
    let status = res.status();
    if status == http::StatusCode::NOT_FOUND && missing_ok {
        return Ok(None);
    }
    let body = res
        .into_body()
        .collect_bytes()
        .await
        .map_err(api_error)
        .with_context(|| format!("reading {shown}"))?;
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body);
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| text.chars().take(200).collect());
        bail!(
            "reading {shown}: the server answered {status}: {}",
            message.trim()
        );
    }
    serde_json::from_slice(&body)
        .map(Some)
        .with_context(|| format!("parsing {shown}"))
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
