//! Pull members (`join --mode pull`, issue #68) as the shell meets them:
//! their objects put where they go on either side, the PropagationReport
//! CRD the host needs, the agent's host token issued from the host's
//! TokenRequest API and written into the member's Secret (`join`,
//! `rotate`), and the agent's host account made again so that every token
//! of it stops working (`rotate --revoke`), the agents' host roles kept
//! in step with the types (`enable`, `disable`), and an agent stopped
//! before `unjoin` removes its identity. What the objects say is
//! `core::cluster::pull`'s.

use crate::api::core::KubeFedCluster;
use crate::apply::{
    Journal, ObjectRef, OnExisting, Outcome, WriteMode, api_error, ensure, preview, resource_of,
};
use crate::clients::host::Host;
use crate::core::cluster::pull::{self, AGENT, HOST_SECRET, HOST_SECRET_KEY};
use crate::core::cluster::token::Lifetime;
use crate::core::run::reconciler::FederatedResource;
use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::time::Duration;

/// Where `obj` (one of the kinds join writes for a pull member) lives in
/// the cluster `label` names (`host`, or the member's name).
pub fn target(label: &str, client: &kube::Client, obj: &Value) -> Result<ObjectRef> {
    let (resource, namespaced) = match obj["kind"].as_str().unwrap_or("") {
        "Namespace" => (resource_of::<Namespace>(), false),
        "ServiceAccount" => (resource_of::<ServiceAccount>(), true),
        "Secret" => (resource_of::<Secret>(), true),
        "ClusterRole" => (resource_of::<ClusterRole>(), false),
        "ClusterRoleBinding" => (resource_of::<ClusterRoleBinding>(), false),
        "Role" => (resource_of::<Role>(), true),
        "RoleBinding" => (resource_of::<RoleBinding>(), true),
        "Deployment" => (resource_of::<Deployment>(), true),
        "CustomResourceDefinition" => (resource_of::<CustomResourceDefinition>(), false),
        "KubeFedCluster" => (resource_of::<KubeFedCluster>(), true),
        other => bail!("no API resource known for kind {other:?}"),
    };
    let ns = obj["metadata"]["namespace"].as_str();
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    Ok(ObjectRef::new(
        label,
        client,
        resource,
        namespaced.then_some(ns).flatten(),
        name,
    ))
}

/// The `PropagationReport` CRD in the host (created when missing, brought
/// up to this version's schema when present: the API server prunes the
/// fields it does not name, such as the readiness a rollout gates on),
/// served before anything of its kind is written.
pub async fn ensure_report_crd(
    host: &Host,
    mode: WriteMode,
    journal: &mut Journal,
) -> Result<(ObjectRef, Outcome)> {
    let body = crate::core::propagation::report::crd();
    let crd = target("host", &host.client, &body)?;
    if mode.is_dry_run() {
        return Ok((
            crd.clone(),
            preview(&crd, &body, &OnExisting::Update).await?,
        ));
    }
    let (outcome, _) = ensure(&crd, &body, &OnExisting::Update, journal).await?;
    crate::apply::wait_established(&crd).await?;
    Ok((crd, outcome))
}

/// A new token of the agent's host account (in `cluster`'s report
/// namespace) living `ttl_seconds`.
pub async fn issue_host_token(
    host: &Host,
    cluster: &str,
    ttl_seconds: i64,
) -> Result<(String, Lifetime)> {
    let reports = pull::report_namespace(&host.namespace, cluster);
    crate::member_token::issue(&host.client, &reports, AGENT, ttl_seconds).await
}

/// The federated resources of every FederatedTypeConfig: the groups a
/// pull member's agent reads on the host.
pub async fn federated_resources(host: &Host) -> Result<Vec<FederatedResource>> {
    Ok((host.type_configs().await?.into_iter())
        .map(|f| FederatedResource {
            group: f.spec.federated_type.group.unwrap_or_default(),
            plural: f.spec.federated_type.plural_name,
        })
        .collect())
}

/// The agent's Secret in the member, reached with `client` (the
/// operator's context, as join and unjoin reach members).
pub fn host_secret(label: &str, client: &kube::Client, kubefed_namespace: &str) -> ObjectRef {
    ObjectRef::new(
        label,
        client,
        resource_of::<Secret>(),
        Some(kubefed_namespace),
        HOST_SECRET,
    )
}

/// The kubeconfig the agent's Secret holds now.
pub async fn read_host_kubeconfig(secret: &ObjectRef) -> Result<Value> {
    let live = secret.get().await?.ok_or_else(|| {
        anyhow!(
            "{secret} not found (kubefedctl join {} --mode pull --error-on-existing=false writes it again)",
            secret.cluster
        )
    })?;
    let encoded = live["data"][HOST_SECRET_KEY]
        .as_str()
        .ok_or_else(|| anyhow!("{secret} has no {HOST_SECRET_KEY:?} key"))?;
    let text = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .with_context(|| format!("{secret}: {HOST_SECRET_KEY:?} is not base64"))?;
    // JSON is YAML: a kubeconfig someone rewrote as YAML reads too.
    let text = String::from_utf8_lossy(&text);
    let docs = crate::yaml::yaml_documents(&text).map_err(|e| {
        anyhow!(
            "{secret}: {HOST_SECRET_KEY:?} is not a kubeconfig: {}",
            e.message
        )
    })?;
    docs.into_iter()
        .find(Value::is_object)
        .ok_or_else(|| anyhow!("{secret}: {HOST_SECRET_KEY:?} is empty"))
}

/// Writes `kubeconfig` with `token` into the agent's Secret.
pub async fn write_host_kubeconfig(
    secret: &ObjectRef,
    kubeconfig: Value,
    token: &str,
) -> Result<()> {
    let config = pull::with_token(kubeconfig, token)
        .ok_or_else(|| anyhow!("{secret}: its kubeconfig has no user for {AGENT}"))?;
    let text = serde_json::to_string_pretty(&config)?;
    let api: Api<Secret> = Api::namespaced(
        secret.client.clone(),
        secret.namespace.as_deref().unwrap_or_default(),
    );
    api.patch(
        &secret.name,
        &PatchParams::default(),
        &Patch::Merge(json!({"stringData": {HOST_SECRET_KEY: text}})),
    )
    .await
    .map_err(api_error)
    .with_context(|| format!("writing the agent's new host token into {secret}"))?;
    Ok(())
}

/// Deletes and makes again the agent's host ServiceAccount: bound tokens
/// name their account's UID, so every token issued before stops working
/// (those in leaked copies of the member Secret too).
pub async fn recreate_host_account(host: &Host, cluster: &str) -> Result<()> {
    let reports = pull::report_namespace(&host.namespace, cluster);
    let api: Api<ServiceAccount> = Api::namespaced(host.client.clone(), &reports);
    let old = api
        .get(AGENT)
        .await
        .map_err(api_error)
        .with_context(|| format!("reading service account {reports}/{AGENT} in host"))?;
    api.delete(AGENT, &Default::default())
        .await
        .map_err(api_error)
        .with_context(|| format!("deleting service account {reports}/{AGENT} in host"))?;
    let mut fresh = ServiceAccount::default();
    fresh.metadata.name = Some(AGENT.to_string());
    fresh.metadata.labels = old.metadata.labels;
    // The account is gone once its delete is answered (no finalizers);
    // a create racing the deletion is answered 409 and tried again.
    let created = crate::poll::poll_until(
        Duration::from_secs(10),
        Duration::from_millis(200),
        || async {
            match api.create(&PostParams::default(), &fresh).await {
                Ok(_) => Ok(Some(())),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
                Err(e) => Err(api_error(e)),
            }
        },
    )
    .await
    .with_context(|| format!("creating service account {reports}/{AGENT} in host again"))?;
    created.ok_or_else(|| anyhow!("service account {reports}/{AGENT} was not deleted within 10s"))
}

/// Records a new token's lifetime on the pull member's KubeFedCluster.
pub async fn record_lifetime(host: &Host, cluster: &str, life: Lifetime) -> Result<()> {
    let clusters: Api<KubeFedCluster> = Api::namespaced(host.client.clone(), &host.namespace);
    clusters
        .patch(
            cluster,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": life.annotations(AGENT)}})),
        )
        .await
        .map_err(api_error)
        .context("recording the new token's lifetime on the KubeFedCluster")?;
    Ok(())
}

/// `rotate` of a pull member: the member Secret read first (a member that
/// cannot be written to is found before any token is issued or revoked),
/// with `revoke` the host account made again, then a new token of the
/// lifetime the KubeFedCluster records into the Secret, and its expiry
/// onto the KubeFedCluster.
pub async fn rotate(
    host: &Host,
    kfc: &Value,
    member: (&str, &kube::Client),
    revoke: bool,
) -> Result<Lifetime> {
    let name = kfc["metadata"]["name"].as_str().unwrap_or_default();
    let secret = host_secret(member.0, member.1, &host.namespace);
    let kubeconfig = read_host_kubeconfig(&secret).await?;
    if revoke {
        recreate_host_account(host, name).await?;
    }
    let (token, life) = issue_host_token(host, name, pull::token_ttl_of(kfc)).await?;
    write_host_kubeconfig(&secret, kubeconfig, &token)
        .await
        .map_err(|e| match revoke {
            true => e.context(
                "the old tokens are revoked and the agent holds none that works until rotate succeeds",
            ),
            false => e,
        })?;
    record_lifetime(host, name, life).await?;
    Ok(life)
}

/// After `enable` or `disable`: every pull member's agent reads the
/// federated groups of the types there are now (its host ClusterRole).
/// `adjust` applies the command's change (a dry run has not written it).
/// Returns the lines to print (none when nothing changed).
pub async fn refresh_agent_roles(
    host: &Host,
    mode: WriteMode,
    adjust: impl FnOnce(&mut Vec<FederatedResource>),
) -> Result<Vec<String>> {
    let clusters: Api<KubeFedCluster> = Api::namespaced(host.client.clone(), &host.namespace);
    let items = match clusters.list(&Default::default()).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
        Err(e) => return Err(api_error(e)),
    };
    let pulled: Vec<String> = (items.iter())
        .filter(|c| pull::is_pull(c.metadata.annotations.as_ref()))
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    if pulled.is_empty() {
        return Ok(Vec::new());
    }
    let mut types = federated_resources(host).await?;
    adjust(&mut types);
    let scope = host.scope().await?;
    let mut lines = Vec::new();
    for cluster in &pulled {
        let member = pull::PullMember {
            cluster,
            kubefed_namespace: &host.namespace,
            scope,
            types: types.clone(),
            image: "",
            member_rules: None,
            objects_namespace: None,
        };
        let Some(role) = (member.host_objects().into_iter()).find(|o| o["kind"] == "ClusterRole")
        else {
            continue;
        };
        let t = target("host", &host.client, &role)?;
        let outcome = match mode {
            WriteMode::DryRun => preview(&t, &role, &OnExisting::Update).await?,
            WriteMode::Write => {
                (ensure(&t, &role, &OnExisting::Update, &mut Journal::default()).await?).0
            }
        };
        if outcome != Outcome::Unchanged {
            lines.push(crate::apply::outcome_line(&t, outcome, mode));
        }
    }
    Ok(lines)
}

/// Stops a pull member's agent before unjoin removes its identity: the
/// Deployment deleted in the foreground (its ReplicaSets and pods go
/// first) and waited for, up to `timeout`, so that no agent writes after
/// unjoin and the namespace it ran in can be found empty. `false`: there
/// was none.
pub async fn stop_agent(deployment: &ObjectRef, timeout: Duration) -> Result<bool> {
    let api: Api<kube::api::DynamicObject> = crate::apply::dynamic_api(
        &deployment.client,
        deployment.namespace.as_deref(),
        &deployment.resource,
    );
    match api
        .delete(&deployment.name, &kube::api::DeleteParams::foreground())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(false),
        Err(e) => return Err(api_error(e)).with_context(|| format!("deleting {deployment}")),
    }
    let gone = crate::poll::poll_until(timeout, Duration::from_millis(500), || async {
        Ok(deployment.get().await?.is_none().then_some(()))
    })
    .await?;
    if gone.is_none() {
        tracing::warn!(
            "{deployment} is still terminating after {timeout:?}: its pods may still run for a while"
        );
    }
    Ok(true)
}
