//! `kubefedctl init`: prepare a host for controller-less federation.
//!
//! Writes the kubefed namespace, KubeFed v0.10's core CRDs (generated from
//! our API types) and the default `kubefed` KubeFedConfig. Reads before it
//! writes: on an initialised host it makes no write request at all.

use crate::api::core::{KubeFedConfig, KubeFedConfigSpec};
use crate::api::{KUBEFED_CONFIG_NAME, core_crds};
use crate::apply::{
    Journal, ObjectRef, OnExisting, Outcome, WriteMode, ensure, outcome_line, preview, resource_of,
};
use crate::clients::host::Host;
use crate::cmd::options::{GlobalOptions, ReconcilerFlag, ScopeFlag};
use crate::core::cluster::membership::Scope;
use crate::core::run::reconciler;
use crate::terminal::output::{self, DocumentFormat};
use anyhow::{Context, Result, bail};
use clap::Args;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

#[derive(Args, Debug)]
#[command(after_help = "Examples:
  # A cluster-wide federation in kube-federation-system
  kubefedctl init
  kubefedctl init --scope Namespaced --kubefed-namespace team-a
  # Also publish members in SIG Multicluster's cluster inventory
  kubefedctl init --cluster-inventory
  # Review, or apply with kubectl; nothing is written
  kubefedctl init -o yaml > kubefed.yaml
  # Reconcile every 5 minutes inside the host, in 3 shards
  kubefedctl init --reconciler cronjob --image IMAGE --shards 3")]
pub struct InitOptions {
    /// Scope of the federation: Cluster (all namespaces) or Namespaced (the kubefed namespace only) [default: Cluster]
    #[arg(long, value_enum)]
    pub scope: Option<ScopeFlag>,

    /// Print the objects (yaml or json) instead of writing them; needs no cluster
    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    pub output: Option<DocumentFormat>,

    #[command(flatten)]
    pub dry_run: crate::cmd::options::DryRunFlag,

    /// Also install the multi-cluster DNS CRDs (Domain, ServiceDNSRecord, IngressDNSRecord, DNSEndpoint)
    #[arg(long)]
    pub with_dns: bool,

    /// Also install SIG Multicluster's ClusterProfile CRD (the cluster inventory,
    /// sigs.k8s.io/cluster-inventory-api v0.1.2): join then publishes each member there
    #[arg(long)]
    pub cluster_inventory: bool,

    /// Also install a reconciler that runs `kubefedctl reconcile` inside the host, with least-privilege RBAC
    /// (deployment: a controller, `reconcile --watch`, 2 replicas with leader election;
    /// with --shards, a StatefulSet)
    #[arg(long, value_enum, value_name = "KIND", requires = "image")]
    pub reconciler: Option<ReconcilerFlag>,

    /// With --reconciler: the container image holding kubefedctl (on PATH)
    #[arg(long, value_name = "IMAGE", requires = "reconciler")]
    pub image: Option<String>,

    /// With --reconciler cronjob: when to run, in cron syntax
    #[arg(long, value_name = "CRON", default_value = reconciler::DEFAULT_SCHEDULE, value_parser = parse_schedule)]
    pub schedule: String,

    /// With --reconciler: split the work into N shards (by namespace) that run in parallel
    /// (deployment: a StatefulSet of 2 × N watches, each shard with a standby)
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub shards: u32,
}

fn parse_schedule(text: &str) -> Result<String, reconciler::ScheduleError> {
    reconciler::check_schedule(text).map(|()| text.to_string())
}

impl InitOptions {
    /// The reconciler to install, given what the host has.
    fn reconciler<'a>(
        &'a self,
        namespace: &'a str,
        scope: Scope,
        facts: crate::reconciler::HostFacts,
    ) -> Option<reconciler::Reconciler<'a>> {
        Some(reconciler::Reconciler {
            mode: self.reconciler?.into(),
            namespace,
            scope,
            image: self.image.as_deref().unwrap_or_default(),
            schedule: &self.schedule,
            shards: self.shards,
            types: facts.types,
            dns: facts.dns || self.with_dns,
            batch: facts.batch,
        })
    }
}

/// Everything init writes, in order.
pub fn objects(namespace: &str, scope: Scope, with_dns: bool, inventory: bool) -> Vec<Value> {
    let mut out =
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})];
    out.extend(all_crds(with_dns, inventory));
    out.push(kubefed_config(namespace, scope));
    out
}

/// KubeFed's core CRDs, and the multi-cluster DNS ones and the
/// inventory's ClusterProfile when asked.
fn all_crds(with_dns: bool, inventory: bool) -> Vec<Value> {
    let mut out: Vec<Value> = core_crds()
        .into_iter()
        .map(|c| serde_json::to_value(c).expect("CRDs serialize"))
        .collect();
    out.push(crate::api::core::federated_service_status_crd());
    if with_dns {
        out.extend(crate::api::dns::dns_crds());
    }
    if inventory {
        out.push(crate::inventory::crd());
    }
    out
}

fn kubefed_config(namespace: &str, scope: Scope) -> Value {
    let mut cfg = KubeFedConfig::new(
        KUBEFED_CONFIG_NAME,
        KubeFedConfigSpec::defaults(scope.as_str()),
    );
    cfg.metadata.namespace = Some(namespace.to_string());
    serde_json::to_value(cfg).expect("KubeFedConfig serializes")
}

pub async fn run(global: &GlobalOptions, o: &InitOptions) -> Result<()> {
    let scope = o.scope.map_or(Scope::Cluster, Scope::from);
    if let Some(format) = o.output {
        let mut all = objects(
            &global.kubefed_namespace,
            scope,
            o.with_dns,
            o.cluster_inventory,
        );
        // Offline: a fresh federation (no types yet; `enable` adds their
        // rules) on a current Kubernetes.
        let fresh = crate::reconciler::HostFacts {
            types: Vec::new(),
            dns: o.with_dns,
            batch: reconciler::Batch::MODERN,
            scope,
        };
        if let Some(r) = o.reconciler(&global.kubefed_namespace, scope, fresh) {
            all.extend(r.objects());
        }
        return output::print_objects(&all, format);
    }
    run_live(global, o, scope).await
}

async fn run_live(global: &GlobalOptions, o: &InitOptions, scope: Scope) -> Result<()> {
    let (factory, host) = global.connect_host().await?;
    let ns = host.namespace.clone();
    let objects = HostObjects::of(&host, o, scope);

    // The scope of an existing federation is immutable: refuse to "change" it.
    if let (Some(asked), Ok(Some(live))) = (o.scope.map(Scope::from), objects.config.0.get().await)
    {
        let live_scope = live["spec"]["scope"].as_str().unwrap_or("");
        if live_scope != asked.as_str() {
            bail!(
                "KubeFedConfig {ns}/{KUBEFED_CONFIG_NAME} has scope {live_scope}; a federation's scope cannot change (delete the KubeFedConfig first)"
            );
        }
    }
    if o.dry_run.mode().is_dry_run() {
        return preview_init(&host, o, &objects).await;
    }
    let mut journal = Journal::default();
    if let Err(e) = write_init(&host, o, &objects, &mut journal).await {
        let undone = journal.rollback().await;
        for line in &undone {
            tracing::info!("rolled back: {line}");
        }
        return Err(e);
    }
    let live_scope = host.scope().await?;
    println!(
        "Host {:?} is ready for federation (namespace {ns}, scope {}).",
        host.context,
        live_scope.as_str()
    );
    if o.with_dns {
        // Members joined before DNS was installed now read what the DNS
        // pass reads.
        let refreshed =
            crate::member_rbac::refresh(&host, &factory, WriteMode::Write, |_| {}).await?;
        crate::cmd::options::print_member_rbac(refreshed)?;
    }
    Ok(())
}

/// What `init` writes to the host, each with where it goes: the
/// federation namespace, KubeFed's CRDs, the KubeFedConfig.
struct HostObjects {
    namespace: (ObjectRef, Value),
    crds: Vec<(ObjectRef, Value)>,
    config: (ObjectRef, Value),
}

impl HostObjects {
    fn of(host: &Host, o: &InitOptions, scope: Scope) -> HostObjects {
        let ns = &host.namespace;
        let crds = all_crds(o.with_dns, o.cluster_inventory)
            .into_iter()
            .map(|c| {
                let name = c["metadata"]["name"]
                    .as_str()
                    .expect("CRDs are named")
                    .to_string();
                (
                    host.object(resource_of::<CustomResourceDefinition>(), false, &name),
                    c,
                )
            })
            .collect();
        HostObjects {
            namespace: (
                host.object(resource_of::<Namespace>(), false, ns),
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            ),
            crds,
            config: (
                host.object(resource_of::<KubeFedConfig>(), true, KUBEFED_CONFIG_NAME),
                kubefed_config(ns, scope),
            ),
        }
    }
}

/// `--dry-run`: what would change, the reconciler's objects included.
async fn preview_init(host: &Host, o: &InitOptions, objects: &HostObjects) -> Result<()> {
    let (namespace, ns_body) = &objects.namespace;
    let mut steps = vec![(namespace, ns_body, OnExisting::Keep)];
    steps.extend(objects.crds.iter().map(|(r, b)| (r, b, OnExisting::Update)));
    for (target, body, policy) in steps {
        let outcome = preview(target, body, &policy).await?;
        println!("{}", outcome_line(target, outcome, WriteMode::DryRun));
    }
    // Without the CRD, the config cannot even be read: it would be created.
    let (config, config_body) = &objects.config;
    let outcome = preview(config, config_body, &OnExisting::Keep)
        .await
        .unwrap_or(Outcome::Created);
    println!("{}", outcome_line(config, outcome, WriteMode::DryRun));
    let facts = crate::reconciler::facts(host).await?;
    if let Some(r) = o.reconciler(&host.namespace, facts.scope, facts) {
        install_reconciler(host, &r, WriteMode::DryRun, &mut Journal::default()).await?;
    }
    Ok(())
}

/// Writes the namespace, the CRDs (waiting until those that changed are
/// served), the KubeFedConfig and the reconciler, each in `journal`.
async fn write_init(
    host: &Host,
    o: &InitOptions,
    objects: &HostObjects,
    journal: &mut Journal,
) -> Result<()> {
    let (namespace, ns_body) = &objects.namespace;
    let (outcome, _) = ensure(namespace, ns_body, &OnExisting::Keep, journal).await?;
    println!("{}", outcome_line(namespace, outcome, WriteMode::Write));
    let mut changed_crds = Vec::new();
    for (target, body) in &objects.crds {
        let (outcome, _) = ensure(target, body, &OnExisting::Update, journal).await?;
        println!("{}", outcome_line(target, outcome, WriteMode::Write));
        if outcome != Outcome::Unchanged {
            changed_crds.push(target.clone());
        }
    }
    wait_established(&changed_crds).await?;
    let (config, config_body) = &objects.config;
    let (outcome, _) = ensure(config, config_body, &OnExisting::Keep, journal).await?;
    println!("{}", outcome_line(config, outcome, WriteMode::Write));
    let facts = crate::reconciler::facts(host).await?;
    if let Some(r) = o.reconciler(&host.namespace, facts.scope, facts) {
        install_reconciler(host, &r, WriteMode::Write, journal).await?;
    }
    Ok(())
}

/// Writes the reconciler's objects and removes CronJobs of an earlier
/// shard count.
async fn install_reconciler(
    host: &Host,
    r: &reconciler::Reconciler<'_>,
    mode: WriteMode,
    journal: &mut Journal,
) -> Result<()> {
    let objects = r.objects();
    for (target, outcome) in crate::reconciler::write(host, &objects, mode, journal).await? {
        println!("{}", outcome_line(&target, outcome, mode));
    }
    let stale = crate::reconciler::stale_workloads(host, &objects).await?;
    for s in &stale {
        let verb = if mode.is_dry_run() {
            "would be deleted"
        } else {
            "deleted"
        };
        println!("{} {verb} ({})", s.short(), s.cluster);
    }
    if mode.writes() {
        crate::reconciler::delete(&stale).await?;
    }
    Ok(())
}

/// New CRDs are served only once `Established`; objects of their kinds
/// cannot be written before that.
async fn wait_established(crds: &[ObjectRef]) -> Result<()> {
    for crd in crds {
        crate::apply::wait_established(crd)
            .await
            .context("waiting for the API server to serve KubeFed's CRDs")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// init writes exactly the values a run then uses.
    #[test]
    fn the_written_config_means_the_tools_own_defaults() {
        let cfg = kubefed_config("fed", Scope::Cluster);
        let settings = crate::core::run::settings::settings(Some(&cfg["spec"])).unwrap();
        let defaults = crate::core::run::settings::Settings::default();
        assert_eq!(settings.health, defaults.health);
        assert_eq!(settings.leader_elect, defaults.leader_elect);
        assert_eq!(settings.max_concurrent_reconciles, Some(8));
        assert_eq!(
            (settings.push_reconciler, settings.scheduler_preferences),
            (true, true)
        );
        assert!(!settings.raw_resource_status_collection);
    }

    #[test]
    fn objects_match_kubefed_v0_10() {
        assert_eq!(
            objects("fed", Scope::Cluster, true, false).len(),
            13,
            "with the four DNS CRDs"
        );
        let inventory = objects("fed", Scope::Cluster, false, true);
        assert_eq!(
            inventory[inventory.len() - 2]["metadata"]["name"],
            "clusterprofiles.multicluster.x-k8s.io",
            "the inventory's CRD, before the KubeFedConfig"
        );
        let objs = objects("fed", Scope::Namespaced, false, false);
        let names: Vec<&str> = objs
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "fed",
                "kubefedclusters.core.kubefed.io",
                "federatedtypeconfigs.core.kubefed.io",
                "kubefedconfigs.core.kubefed.io",
                "propagatedversions.core.kubefed.io",
                "clusterpropagatedversions.core.kubefed.io",
                "replicaschedulingpreferences.scheduling.kubefed.io",
                "federatedservicestatuses.core.kubefed.io",
                "kubefed"
            ]
        );
        let kfc = &objs[1]["spec"];
        assert_eq!(kfc["scope"], "Namespaced");
        assert_eq!(kfc["names"]["shortNames"], json!(["kfc"]));
        assert_eq!(kfc["versions"][0]["name"], "v1beta1");
        assert_eq!(kfc["versions"][0]["subresources"]["status"], json!({}));
        let cols: Vec<&str> = kfc["versions"][0]["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(cols, ["age", "ready", "kubernetes-version"]);
        assert_eq!(objs[5]["spec"]["scope"], "Cluster");
        assert_eq!(objs[4]["spec"]["versions"][0]["name"], "v1alpha1");
        assert_eq!(objs[6]["spec"]["names"]["shortNames"], json!(["rsp"]));
        assert!(objs[6]["spec"]["versions"][0].get("subresources").is_none());
        assert_eq!(objs[7]["spec"]["names"]["kind"], "FederatedServiceStatus");
        let cfg = &objs[8];
        assert_eq!(cfg["metadata"]["namespace"], "fed");
        assert_eq!(cfg["spec"]["scope"], "Namespaced");
        assert_eq!(cfg["spec"]["syncController"]["adoptResources"], "Enabled");
        assert_eq!(cfg["spec"]["featureGates"].as_array().unwrap().len(), 3);
    }
}
