//! `kubefedctl migrate karmada --karmada-context CTX`: the whole move of a
//! live federation to Karmada, each step safe to run again
//! (`sync::karmada::migrate`): export, apply to Karmada, wait for its
//! bindings, check that it took every member copy over with the same UID,
//! then release the federated objects as KubeFed orphans them, and
//! remove the KubeFedClusters once nothing federated is left.

use crate::apply::WriteMode;
use crate::cmd::options::{GlobalOptions, parse_duration};
use crate::core::export::karmada::Export;
use crate::core::export::migration::{Clusters, clusters_after_release, clusters_first, to_apply};
use crate::sync::karmada::{self, migrate};
use crate::sync::lock;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct MigrateOptions {
    #[command(subcommand)]
    pub target: MigrateTarget,
}

#[derive(Subcommand, Debug)]
pub enum MigrateTarget {
    /// Move the federation to a Karmada control plane, without recreating a member object
    Karmada(MigrateKarmadaOptions),
}

#[derive(Args, Debug)]
#[command(mut_arg("namespace", |a| a.help("Only the federated objects and RSPs of this namespace [default: every namespace, as reconcile: the federation is moved whole, not the context's namespace]")))]
#[command(mut_arg("dry_run", |a| a.help("Say what would be done, writing nothing (=client: decided here)")))]
#[command(
    after_help = "Steps, each safe to run again after an interruption: refuse while
KubeFed's controller-manager or a reconcile holds the federation; export
(as export karmada, tokens included); record every member copy's UID;
server-side apply the export to Karmada (the Clusters first, then, once
Karmada reports them Ready, the rest); wait until Karmada reports each
binding FullyApplied; check each copy carries karmada.io/managed with its
UID unchanged; then annotate each federated object kubefed.io/orphan,
delete it and its RSP. Nothing is released if a copy was recreated.
Last, once no federated object is left in any namespace, delete
the KubeFedClusters and their Secrets from the host (--keep-clusters
keeps them); nothing in a member is deleted.

Examples:
  kubefedctl migrate karmada --karmada-context karmada --dry-run
  kubefedctl migrate karmada --karmada-context karmada -n shop --timeout 10m"
)]
pub struct MigrateKarmadaOptions {
    /// The Karmada API server's context in the kubeconfig
    #[arg(long, value_name = "CONTEXT")]
    pub karmada_context: String,

    #[command(flatten)]
    pub scope: crate::cmd::options::NamespaceScope,

    #[command(flatten)]
    pub dry_run: crate::cmd::options::DryRunFlag,

    /// How long to wait for Karmada to apply and take over everything
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Wait up to DURATION for the federation lock another run holds (a
    /// killed migration's expires after the lease duration; 0: fail at once)
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_duration)]
    pub lock_timeout: Duration,

    /// Keep the KubeFedClusters and their Secrets in the host once every
    /// federated object is released [default: removed then]
    #[arg(long)]
    pub keep_clusters: bool,
}

pub async fn run(global: &GlobalOptions, o: &MigrateOptions) -> Result<()> {
    let MigrateTarget::Karmada(k) = &o.target;
    let (factory, host) = global.connect_host().await?;
    let karmada_client = factory
        .client(&k.karmada_context)
        .await
        .with_context(|| format!("--karmada-context {}", k.karmada_context))?;
    lock::refuse_beside_kubefed(&host, false).await?;
    let held = match k.dry_run.mode() {
        WriteMode::DryRun => None,
        WriteMode::Write => {
            Some(lock::hold_whole_federation(&host, "migrate karmada", k.lock_timeout).await?)
        }
    };
    // The lock is given back however the steps end, so that the next run
    // (which finishes an interrupted one) does not wait for it.
    let result = steps(global, k, &host, &karmada_client).await;
    if let Some(held) = held {
        held.release().await?;
    }
    result
}

async fn steps(
    global: &GlobalOptions,
    k: &MigrateKarmadaOptions,
    host: &crate::clients::host::Host,
    karmada_client: &kube::Client,
) -> Result<()> {
    let federation = karmada::read_host(host, k.scope.or_every(), true).await?;
    // Karmada would hold a token it cannot renew: refused before any step.
    let expiring = crate::core::export::karmada::expiring_tokens(&federation.clusters);
    if !expiring.is_empty() {
        anyhow::bail!("{}", expiring.join("; "));
    }
    let export = federation.export(true);
    eprint!("{}", report_lines(&export));
    let members = crate::clients::members::load(host, global.member_timeout(), &[]).await?;
    let copies =
        migrate::member_copies(&members, &federation.federated, &federation.templates()).await?;
    migrate::checkpoint("recorded");
    let bindings = migrate::bindings(&export.objects);
    if k.dry_run.mode().is_dry_run() {
        print_plan(k, &export, copies.len(), &bindings, &federation);
        return Ok(());
    }
    let (objects, left_out) = to_apply(&export.objects);
    for s in left_out {
        tracing::warn!(
            "Secret {s} not applied: its KubeFedCluster's Secret is gone from the host; Karmada keeps the one it has"
        );
    }
    let (clusters, rest, cluster_names) = clusters_first(&objects);
    let mut applied = migrate::apply(karmada_client, &clusters).await?;
    migrate::wait_clusters_ready(karmada_client, &cluster_names, k.timeout).await?;
    applied += migrate::apply(karmada_client, &rest).await?;
    tracing::info!(
        "applied {applied} object(s) to Karmada ({})",
        k.karmada_context
    );
    migrate::checkpoint("applied");
    migrate::wait_applied(karmada_client, &bindings, k.timeout).await?;
    migrate::checkpoint("waited");
    migrate::verify(&members, &copies, k.timeout).await?;
    migrate::checkpoint("verified");
    tracing::info!(
        "Karmada took over {} member object(s), every UID unchanged",
        copies.len()
    );
    let released = migrate::release(host, &federation.federated, &federation.rsps).await?;
    println!(
        "migrated to Karmada ({}): {applied} object(s) applied, {} member object(s) taken over, {released} KubeFed object(s) released",
        k.karmada_context,
        copies.len()
    );
    finish_clusters(k, host, &federation).await
}

/// The KubeFedClusters (and their Secrets) removed from the host once no
/// federated object of the federation is left in any namespace, unless
/// `--keep-clusters`; said either way.
async fn finish_clusters(
    k: &MigrateKarmadaOptions,
    host: &crate::clients::host::Host,
    federation: &karmada::Federation,
) -> Result<()> {
    let left = karmada::read_host(host, None, false).await?;
    let own = match left.scope {
        Some(crate::core::cluster::membership::Scope::Namespaced) => Some(host.namespace.as_str()),
        _ => None,
    };
    match clusters_after_release(k.keep_clusters, &left.federated, &left.unlisted, own) {
        Clusters::Unknown(types) => println!(
            "{} KubeFedCluster(s) kept: federated type(s) not listed, objects may remain: {}",
            left.clusters.len(),
            types.join("; ")
        ),
        Clusters::Kept => println!(
            "{} KubeFedCluster(s) kept (--keep-clusters)",
            federation.clusters.len()
        ),
        Clusters::StillUsed(namespaces, count) => println!(
            "{} KubeFedCluster(s) kept: {count} federated object(s) remain (namespaces: {})",
            left.clusters.len(),
            namespaces
                .iter()
                .map(|n| if n.is_empty() { "(cluster-scoped)" } else { n })
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Clusters::Remove => {
            let removed = migrate::remove_clusters(host, &left.clusters).await?;
            println!(
                "{removed} KubeFedCluster(s) and their Secrets removed from the host (nothing in a member)"
            );
        }
    }
    Ok(())
}

/// The report's approximations (notes left to `export karmada`).
fn report_lines(export: &Export) -> String {
    let mut out = String::new();
    for r in export.reports.iter().filter(|r| r.inexact()) {
        for f in &r.findings {
            out.push_str(&format!(
                "{}: {}: {} {}\n",
                r.object,
                f.kind.as_str(),
                f.field,
                f.message
            ));
        }
    }
    out
}

fn print_plan(
    k: &MigrateKarmadaOptions,
    export: &Export,
    copies: usize,
    bindings: &[(Option<String>, String)],
    federation: &karmada::Federation,
) {
    println!(
        "would apply {} object(s) to Karmada ({}):",
        export.objects.len(),
        k.karmada_context
    );
    for o in &export.objects {
        let m = &o["metadata"];
        let ns = m["namespace"]
            .as_str()
            .map_or(String::new(), |n| format!("{n}/"));
        println!(
            "  {} {ns}{}",
            o["kind"].as_str().unwrap_or(""),
            m["name"].as_str().unwrap_or("")
        );
    }
    println!(
        "would wait for {} binding(s) and check {copies} member object(s) keep their UID",
        bindings.len()
    );
    println!(
        "would release {} federated object(s) and {} RSP(s) (kubefed.io/orphan, then deleted)",
        federation.federated.len(),
        federation.rsps.len()
    );
    match k.keep_clusters {
        true => println!("would keep the KubeFedClusters (--keep-clusters)"),
        false => println!(
            "would then remove {} KubeFedCluster(s) and their Secrets from the host, if no federated object is left in any namespace",
            federation.clusters.len()
        ),
    }
}
