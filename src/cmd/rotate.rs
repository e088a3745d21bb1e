//! `kubefedctl rotate [CLUSTER...]`: new short-lived tokens for members
//! joined with `--token-ttl` (every such member when none is named). Each
//! member's identity issues its own next token; the host Secret is
//! rewritten, then the KubeFedCluster records the new expiry. The old token
//! stays valid until it expires, so nothing that holds it is cut off.
//!
//! A pull member (`join --mode pull`) is rotated the other way round: the
//! host issues a new token of its agent's host account, written into the
//! agent's Secret in the member through the kubeconfig context join
//! recorded; `--revoke` first makes that account again, which ends every
//! token issued before (`pull_member::rotate`).

use crate::clients::ClientFactory;
use crate::clients::host::Host;
use crate::clients::members::Member;
use crate::cmd::options::{GlobalOptions, print_member_outcomes};
use crate::core::cluster::pull::is_pull_value;
use crate::core::cluster::rbac::MEMBER_CONTEXT_ANNOTATION;
use crate::core::cluster::token::Lifetime;
use crate::core::outcome::{Failure, Place};
use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(mut_arg("dry_run", |a| a.help("Say which members' tokens would be rotated, issuing none (=client: decided here)")))]
#[command(after_help = "Examples:
  kubefedctl rotate                 # every member joined with --token-ttl
  kubefedctl rotate member1 member2
  kubefedctl rotate --dry-run       # which tokens would be rotated
  # A pull member whose Secret may have leaked: every older token stops working
  kubefedctl rotate edge1 --revoke

reconcile --watch rotates by itself once 80 % of a token's lifetime has passed.")]
pub struct RotateOptions {
    /// Members to rotate [default: every member whose token expires]
    #[arg(value_name = "CLUSTER")]
    pub clusters: Vec<String>,

    /// Pull members only: make the agent's host service account again first, so that every
    /// token issued before stops working
    #[arg(long)]
    pub revoke: bool,

    #[command(flatten)]
    pub dry_run: crate::cmd::options::DryRunFlag,
}

pub async fn run(global: &GlobalOptions, o: &RotateOptions) -> Result<()> {
    let (factory, host) = global.connect_host().await?;
    host.require_initialised().await?;
    let members =
        crate::clients::members::load(&host, Duration::from_secs(10), &o.clusters).await?;
    for c in &o.clusters {
        if !members.iter().any(|m| &m.name == c) {
            bail!("no KubeFedCluster {c:?} in {}", host.namespace);
        }
    }
    // Named members are rotated (or told why not); otherwise those whose
    // token expires, and pull members (`-o yaml`'s has none yet).
    let due: Vec<_> = members
        .iter()
        .filter(|m| {
            !o.clusters.is_empty()
                || serde_json::to_value(&m.cluster)
                    .is_ok_and(|v| Lifetime::of_cluster(&v).is_some() || is_pull_value(&v))
        })
        .collect();
    if due.is_empty() {
        println!(
            "No member has a short-lived token (kubefedctl join CLUSTER --token-ttl DURATION)."
        );
        return Ok(());
    }
    if o.dry_run.mode().is_dry_run() {
        for m in &due {
            let revoked = match o.revoke {
                true => ", every older token revoked",
                false => "",
            };
            println!(
                "kubefedcluster.core.kubefed.io/{}: token would be rotated{revoked} (dry run)",
                m.name
            );
        }
        return Ok(());
    }
    let rotations = due.iter().map(|m| {
        let (host, factory) = (&host, &factory);
        async move {
            rotate_one(host, factory, m, o.revoke)
                .await
                .map(|life| (m.name.clone(), life))
        }
    });
    let (mut lines, mut failures) = (Vec::new(), Vec::new());
    for result in futures::future::join_all(rotations).await {
        match result {
            Ok((name, life)) => lines.push(format!(
                "kubefedcluster.core.kubefed.io/{name}: token rotated, expires at {}",
                crate::core::time::rfc3339(life.expires_at)
            )),
            Err(f) => failures.push(f),
        }
    }
    print_member_outcomes((lines, failures), "member(s) not rotated")
}

/// One member's rotation: a push member's through its own credential, a
/// pull member's through the host and the member's kubeconfig context.
async fn rotate_one(
    host: &Host,
    factory: &ClientFactory,
    m: &Member,
    revoke: bool,
) -> Result<Lifetime, Failure> {
    let fail = |e: anyhow::Error| Failure::at(Place::member(&m.name), crate::error::one_line(&e));
    let cluster = serde_json::to_value(&m.cluster).map_err(|e| fail(e.into()))?;
    if !is_pull_value(&cluster) {
        if revoke {
            return Err(fail(anyhow!(
                "--revoke is for pull members: a push member's tokens belong to its service account in the member (kubefedctl unjoin {0} and join {0} again make a new one)",
                m.name
            )));
        }
        let client = (m.client.clone()).map_err(|why| Failure::at(Place::member(&m.name), why))?;
        return crate::member_token::rotate(host, &m.cluster, &client)
            .await
            .map_err(fail);
    }
    // The host holds no credential for a pull member: the operator's
    // context join recorded (else one named after the member) writes it.
    let context = cluster["metadata"]["annotations"][MEMBER_CONTEXT_ANNOTATION]
        .as_str()
        .unwrap_or(&m.name);
    let client = factory
        .client(context)
        .await
        .with_context(|| format!("the member's kubeconfig context {context:?}"))
        .map_err(fail)?;
    crate::pull_member::rotate(host, &cluster, (&m.name, &client), revoke)
        .await
        .map_err(fail)
}
