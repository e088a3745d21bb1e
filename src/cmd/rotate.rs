//! `kubefedctl rotate [CLUSTER...]`: new short-lived tokens for members
//! joined with `--token-ttl` (every such member when none is named). Each
//! member's identity issues its own next token; the host Secret is
//! rewritten, then the KubeFedCluster records the new expiry. The old token
//! stays valid until it expires, so nothing that holds it is cut off.

use crate::cmd::options::{GlobalOptions, print_member_outcomes};
use crate::core::cluster::token::Lifetime;
use crate::core::outcome::{Failure, Place};
use anyhow::{Result, bail};
use clap::Args;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(mut_arg("dry_run", |a| a.help("Say which members' tokens would be rotated, issuing none (=client: decided here)")))]
#[command(after_help = "Examples:
  kubefedctl rotate                 # every member joined with --token-ttl
  kubefedctl rotate member1 member2
  kubefedctl rotate --dry-run       # which tokens would be rotated

reconcile --watch rotates by itself once 80 % of a token's lifetime has passed.")]
pub struct RotateOptions {
    /// Members to rotate [default: every member whose token expires]
    #[arg(value_name = "CLUSTER")]
    pub clusters: Vec<String>,

    #[command(flatten)]
    pub dry_run: crate::cmd::options::DryRunFlag,
}

pub async fn run(global: &GlobalOptions, o: &RotateOptions) -> Result<()> {
    let (_, host) = global.connect_host().await?;
    host.require_initialised().await?;
    let members =
        crate::clients::members::load(&host, Duration::from_secs(10), &o.clusters).await?;
    for c in &o.clusters {
        if !members.iter().any(|m| &m.name == c) {
            bail!("no KubeFedCluster {c:?} in {}", host.namespace);
        }
    }
    // Named members are rotated (or told why not); otherwise those whose
    // token expires.
    let due: Vec<_> = members
        .iter()
        .filter(|m| {
            !o.clusters.is_empty()
                || serde_json::to_value(&m.cluster)
                    .is_ok_and(|v| Lifetime::of_cluster(&v).is_some())
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
            println!(
                "kubefedcluster.core.kubefed.io/{}: token would be rotated (dry run)",
                m.name
            );
        }
        return Ok(());
    }
    let rotations = due.iter().map(|m| {
        let host = &host;
        async move {
            let client = m
                .client
                .clone()
                .map_err(|why| Failure::at(Place::member(&m.name), why))?;
            crate::member_token::rotate(host, &m.cluster, &client)
                .await
                .map(|life| (m.name.clone(), life))
                .map_err(|e| Failure::at(Place::member(&m.name), crate::error::one_line(&e)))
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
