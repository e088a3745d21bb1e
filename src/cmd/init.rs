//! `kubefedctl init`: prepare a host for controller-less federation.
//!
//! Writes the kubefed namespace, KubeFed v0.10's core CRDs (generated from
//! our API types) and the default `kubefed` KubeFedConfig. Reads before it
//! writes: on an initialised host it makes no write request at all.

use crate::api::core::{KubeFedConfig, KubeFedConfigSpec};
use crate::api::{KUBEFED_CONFIG_NAME, core_crds};
use crate::apply::{
    Journal, ObjectRef, OnExisting, Outcome, ensure, outcome_line, preview, resource_of,
};
use crate::cmd::options::GlobalOptions;
use crate::core::membership::Scope;
use crate::output::{self, DocumentFormat};
use anyhow::{Context, Result, bail};
use clap::Args;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};
use std::time::Duration;

#[derive(Args, Debug)]
#[command(after_help = "Examples:
  kubefedctl init                         # cluster-wide federation in kube-federation-system
  kubefedctl init --scope Namespaced --kubefed-namespace team-a
  kubefedctl init -o yaml > kubefed.yaml  # review or apply with kubectl; nothing is written")]
pub struct InitOptions {
    /// Scope of the federation: Cluster (all namespaces) or Namespaced (the kubefed namespace only) [default: Cluster]
    #[arg(long, value_enum)]
    pub scope: Option<Scope>,

    /// Print the objects (yaml or json) instead of writing them; needs no cluster
    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    pub output: Option<DocumentFormat>,

    /// Show what would change, writing nothing
    #[arg(long)]
    pub dry_run: bool,

    /// Also install the multi-cluster DNS CRDs (Domain, ServiceDNSRecord, IngressDNSRecord, DNSEndpoint)
    #[arg(long)]
    pub with_dns: bool,
}

/// Everything init writes, in order.
pub fn objects(namespace: &str, scope: Scope, with_dns: bool) -> Vec<Value> {
    let mut out =
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})];
    out.extend(all_crds(with_dns));
    out.push(kubefed_config(namespace, scope));
    out
}

/// KubeFed's core CRDs, and the multi-cluster DNS ones when asked.
fn all_crds(with_dns: bool) -> Vec<Value> {
    let mut out: Vec<Value> = core_crds()
        .into_iter()
        .map(|c| serde_json::to_value(c).expect("CRDs serialize"))
        .collect();
    if with_dns {
        out.extend(crate::api::dns::dns_crds());
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
    let scope = o.scope.unwrap_or(Scope::Cluster);
    if let Some(format) = o.output {
        return output::print_objects(
            &objects(&global.kubefed_namespace, scope, o.with_dns),
            format,
        );
    }
    run_live(global, o, scope).await
}

async fn run_live(global: &GlobalOptions, o: &InitOptions, scope: Scope) -> Result<()> {
    let (_, host) = global.connect_host().await?;
    let ns = host.namespace.clone();
    let namespace = host.object(resource_of::<Namespace>(), false, &ns);
    let crds: Vec<(ObjectRef, Value)> = all_crds(o.with_dns)
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
    let config = host.object(resource_of::<KubeFedConfig>(), true, KUBEFED_CONFIG_NAME);
    let config_body = kubefed_config(&ns, scope);
    let ns_body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});

    // The scope of an existing federation is immutable: refuse to "change" it.
    if let (Some(asked), Ok(Some(live))) = (o.scope, config.get().await) {
        let live_scope = live["spec"]["scope"].as_str().unwrap_or("");
        if live_scope != asked.as_str() {
            bail!(
                "KubeFedConfig {ns}/{KUBEFED_CONFIG_NAME} has scope {live_scope}; a federation's scope cannot change (delete the KubeFedConfig first)"
            );
        }
    }

    if o.dry_run {
        let mut steps = vec![(&namespace, &ns_body, OnExisting::Keep)];
        steps.extend(crds.iter().map(|(r, b)| (r, b, OnExisting::Update)));
        for (target, body, policy) in steps {
            let outcome = preview(target, body, &policy).await?;
            println!("{}", outcome_line(target, outcome, true));
        }
        // Without the CRD, the config cannot even be read: it would be created.
        let outcome = preview(&config, &config_body, &OnExisting::Keep)
            .await
            .unwrap_or(Outcome::Created);
        println!("{}", outcome_line(&config, outcome, true));
        return Ok(());
    }

    let mut journal = Journal::default();
    let result = async {
        let (outcome, _) = ensure(&namespace, &ns_body, &OnExisting::Keep, &mut journal).await?;
        println!("{}", outcome_line(&namespace, outcome, false));
        let mut changed_crds = Vec::new();
        for (target, body) in &crds {
            let (outcome, _) = ensure(target, body, &OnExisting::Update, &mut journal).await?;
            println!("{}", outcome_line(target, outcome, false));
            if outcome != Outcome::Unchanged {
                changed_crds.push(target.clone());
            }
        }
        wait_established(&changed_crds).await?;
        let (outcome, _) = ensure(&config, &config_body, &OnExisting::Keep, &mut journal).await?;
        println!("{}", outcome_line(&config, outcome, false));
        anyhow::Ok(())
    }
    .await;
    if let Err(e) = result {
        let undone = journal.rollback().await;
        for line in &undone {
            eprintln!("rolled back: {line}");
        }
        return Err(e);
    }
    let live_scope = host.scope().await?;
    println!(
        "Host {:?} is ready for federation (namespace {ns}, scope {}).",
        host.context,
        live_scope.as_str()
    );
    Ok(())
}

/// New CRDs are served only once `Established`; objects of their kinds
/// cannot be written before that.
async fn wait_established(crds: &[ObjectRef]) -> Result<()> {
    for crd in crds {
        let established = crate::poll::poll_until(
            Duration::from_secs(30),
            Duration::from_millis(200),
            || async {
                let live = crd.get().await?.unwrap_or_default();
                Ok(live["status"]["conditions"]
                    .as_array()
                    .is_some_and(|c| {
                        c.iter()
                            .any(|c| c["type"] == "Established" && c["status"] == "True")
                    })
                    .then_some(()))
            },
        )
        .await?;
        if established.is_none() {
            return Err(anyhow::anyhow!("{crd} was not established within 30s"))
                .context("waiting for the API server to serve KubeFed's CRDs");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_match_kubefed_v0_10() {
        assert_eq!(
            objects("fed", Scope::Cluster, true).len(),
            12,
            "with the four DNS CRDs"
        );
        let objs = objects("fed", Scope::Namespaced, false);
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
        let cfg = &objs[7];
        assert_eq!(cfg["metadata"]["namespace"], "fed");
        assert_eq!(cfg["spec"]["scope"], "Namespaced");
        assert_eq!(cfg["spec"]["syncController"]["adoptResources"], "Enabled");
        assert_eq!(cfg["spec"]["featureGates"].as_array().unwrap().len(), 3);
    }
}
