//! Short-lived member tokens (`join --token-ttl`): issuing one from the
//! member's TokenRequest API, and rotating a member's before it expires
//! (`kubefedctl rotate`, and the watch by itself). The member identity
//! renews itself (its token Role, `core::cluster::token`), so no other
//! credential is needed; a token that has already expired can only be
//! replaced by a new join. When and for how long is `core::cluster::token`'s.

use crate::api::core::KubeFedCluster;
use crate::apply::api_error;
use crate::clients::host::Host;
use crate::core::cluster::rbac::MEMBER_SERVICE_ACCOUNT_ANNOTATION;
use crate::core::cluster::token::Lifetime;
use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// A new token of `service_account` (in the member's federation namespace
/// `ns`) living `ttl_seconds`, issued by whoever `client` is; the token and
/// its lifetime.
pub async fn issue(
    client: &kube::Client,
    ns: &str,
    service_account: &str,
    ttl_seconds: i64,
) -> Result<(String, Lifetime)> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(ttl_seconds),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = api
        .create_token_request(service_account, &PostParams::default(), &request)
        .await
        .map_err(api_error)
        .with_context(|| {
            format!("requesting a token for service account {ns}/{service_account}")
        })?;
    let status = answer
        .status
        .ok_or_else(|| anyhow!("the TokenRequest was answered without a token"))?;
    Ok((
        status.token,
        Lifetime {
            // The server may issue a shorter token than asked for.
            ttl_seconds,
            expires_at: status.expiration_timestamp.0.as_second(),
        },
    ))
}

/// Rotates the token of the member of `cluster` (a KubeFedCluster with a
/// recorded lifetime) with `client`, the member's current credential: a new
/// token of the same lifetime goes into the host Secret, then its lifetime
/// onto the KubeFedCluster (which a watch notices, and rebuilds its
/// clients on). The old token stays valid until it expires.
pub async fn rotate(
    host: &Host,
    cluster: &KubeFedCluster,
    client: &kube::Client,
) -> Result<Lifetime> {
    let value = serde_json::to_value(cluster)?;
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    let Some(lifetime) = Lifetime::of_cluster(&value) else {
        bail!(
            "its token never expires (kubefedctl join {name} --token-ttl DURATION --error-on-existing=false makes it short-lived)"
        );
    };
    let Some(sa) = value["metadata"]["annotations"][MEMBER_SERVICE_ACCOUNT_ANNOTATION].as_str()
    else {
        bail!(
            "KubeFedCluster {name} does not name its member's service account ({MEMBER_SERVICE_ACCOUNT_ANNOTATION})"
        );
    };
    let now = crate::clock::now_unix();
    let (token, renewed) = match issue(client, &host.namespace, sa, lifetime.ttl_seconds).await {
        Ok(issued) => issued,
        Err(e) if now >= lifetime.expires_at => {
            return Err(e.context(format!(
                "its token expired at {}: kubefedctl join {name} --token-ttl {}s --error-on-existing=false issues a new one",
                crate::core::time::rfc3339(lifetime.expires_at),
                lifetime.ttl_seconds
            )));
        }
        Err(e) => return Err(e),
    };
    let b64 = base64::engine::general_purpose::STANDARD;
    let secret: Api<Secret> = Api::namespaced(host.client.clone(), &host.namespace);
    secret
        .patch(
            &cluster.spec.secret_ref.name,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"token": b64.encode(&token)}})),
        )
        .await
        .map_err(api_error)
        .context("writing the new token into the host Secret")?;
    let clusters: Api<KubeFedCluster> = Api::namespaced(host.client.clone(), &host.namespace);
    let annotations: Value = renewed.annotations(sa);
    clusters
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
        )
        .await
        .map_err(api_error)
        .context("recording the new token's lifetime on the KubeFedCluster")?;
    Ok(renewed)
}
