//! `kubefedctl credential`: the exec credential plugin that consumers of
//! the cluster inventory configure for the `kubefed` access provider
//! (`deploy/inventory/provider.json`). client-go runs it with
//! `KUBERNETES_EXEC_INFO` holding the ClusterProfile's cluster entry; the
//! extension we published there names the member and the federation. The
//! member's federation identity (from the host Secret, as the reconcile
//! reaches members) asks the member's TokenRequest API for a short-lived
//! token of the consumer identity `join --consumer` made; that token, with
//! its expiry, is all that leaves: the federation's own token never does.

use crate::cmd::options::{GlobalOptions, parse_duration};
use crate::core::cluster::inventory;
use crate::core::cluster::token::check_ttl;
use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(
    after_help = "Run by a client, not by hand: client-go runs it for a ClusterProfile whose
access provider is \"kubefed\" (deploy/inventory/provider.json), with the host's
kubeconfig in the environment, and reads the ExecCredential it prints.

Examples:
  # What a consumer's provider file names (see docs/membership.md)
  kubefedctl credential --consumer argocd
  # By hand, as client-go would run it
  KUBERNETES_EXEC_INFO='{\"apiVersion\":\"client.authentication.k8s.io/v1\",
    \"kind\":\"ExecCredential\",\"spec\":{\"cluster\":{
    \"server\":\"https://m1:6443\",\"config\":{\"cluster\":\"member1\",
    \"federationNamespace\":\"kube-federation-system\"}}}}' \\
    kubefedctl credential"
)]
pub struct CredentialOptions {
    /// The consumer identity in the member (made by kubefedctl join --consumer NAME)
    #[arg(long, value_name = "NAME", default_value = inventory::DEFAULT_CONSUMER)]
    pub consumer: String,

    /// How long the issued token lives (at least 10m)
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = token_lifetime)]
    pub expiration: Duration,
}

/// A token's lifetime: a duration of at least 10 minutes, the shortest an
/// API server issues.
fn token_lifetime(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text).map_err(|e| e.to_string())?;
    check_ttl(d.as_secs() as i64)
        .map(|_| d)
        .map_err(|_| "at least 10m: API servers issue no shorter token".to_string())
}

pub async fn run(global: &GlobalOptions, o: &CredentialOptions) -> Result<()> {
    let ttl = o.expiration.as_secs() as i64;
    let info = std::env::var("KUBERNETES_EXEC_INFO").map_err(|_| {
        crate::error::usage(
            "KUBERNETES_EXEC_INFO is not set: kubefedctl credential is an exec credential plugin, run by a client whose provider sets provideClusterInfo: true",
        )
    })?;
    let info: serde_json::Value =
        serde_json::from_str(&info).context("KUBERNETES_EXEC_INFO is not JSON")?;
    let target = inventory::credential_target(&info).map_err(|e| anyhow!(e))?;
    let api_version = info["apiVersion"]
        .as_str()
        .unwrap_or("client.authentication.k8s.io/v1");

    let global = GlobalOptions {
        kubefed_namespace: target.federation_namespace.clone(),
        ..global.clone()
    };
    let (_, host) = global.connect_host().await?;
    let members = crate::clients::members::load(
        &host,
        global.member_timeout(),
        std::slice::from_ref(&target.cluster),
    )
    .await?;
    let Some(member) = members.first() else {
        bail!(
            "no KubeFedCluster {:?} in {}",
            target.cluster,
            host.namespace
        );
    };
    let client = member
        .client
        .clone()
        .map_err(|e| anyhow!("no client for member {:?}: {e}", target.cluster))?;
    let (token, lifetime) =
        crate::member_token::issue(&client, &host.namespace, &o.consumer, ttl)
            .await
            .with_context(|| {
                format!(
                    "member {:?} (is {:?} a consumer there? kubefedctl join {} --consumer {} --error-on-existing=false)",
                    target.cluster, o.consumer, target.cluster, o.consumer
                )
            })?;
    let expires = crate::core::time::rfc3339(lifetime.expires_at);
    let credential = inventory::exec_credential(api_version, &token, &expires);
    println!("{credential}");
    Ok(())
}
