//! `kubefedctl orphaning-deletion enable|disable|status TYPE NAME`: whether
//! deleting a federated object leaves its propagated copies in the members
//! (the `kubefed.io/orphan: "true"` annotation, as KubeFed).

use crate::apply::{WriteMode, api_error};
use crate::clients::discovery;
use crate::cmd::options::GlobalOptions;
use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;

use crate::core::propagation::deletion::ORPHAN_ANNOTATION;

#[derive(Args, Debug)]
#[command(after_help = "TYPE is the federated type: FederatedDeployment,
federateddeployments.types.kubefed.io, fdeploy.

Examples:
  kubefedctl orphaning-deletion enable FederatedDeployment web -n demo
  kubefedctl orphaning-deletion status fdeploy web -n demo
  kubefedctl orphaning-deletion disable fdeploy web -n demo --dry-run")]
pub struct OrphaningOptions {
    #[command(subcommand)]
    pub action: OrphaningAction,
}

#[derive(Subcommand, Debug)]
pub enum OrphaningAction {
    /// Keep the member copies when the federated object is deleted
    Enable(Change),
    /// Delete the member copies with the federated object (the default)
    Disable(Change),
    /// Print Enabled or Disabled
    Status(Target),
}

#[derive(Args, Debug)]
pub struct Target {
    /// The federated type
    #[arg(value_name = "TYPE")]
    pub type_name: String,
    /// The federated object
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Namespace of the object [default: the context's namespace, else default]
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

/// `enable` and `disable`: the object, and whether only to say what would change.
#[derive(Args, Debug)]
#[command(mut_arg("dry_run", |a| a.help("Say what would change, writing nothing (=client: decided here)")))]
pub struct Change {
    #[command(flatten)]
    pub target: Target,
    #[command(flatten)]
    pub dry_run: crate::cmd::options::DryRunFlag,
}

pub async fn run(global: &GlobalOptions, o: &OrphaningOptions) -> Result<()> {
    orphaning(global, o).await
}

async fn orphaning(global: &GlobalOptions, o: &OrphaningOptions) -> Result<()> {
    let (target, set, mode) = match &o.action {
        OrphaningAction::Enable(c) => (&c.target, Some(true), c.dry_run.mode()),
        OrphaningAction::Disable(c) => (&c.target, Some(false), c.dry_run.mode()),
        OrphaningAction::Status(t) => (t, None, WriteMode::Write),
    };
    let (factory, host) = global.connect_host().await?;
    let resource = discovery::find_resource(&host.client, &target.type_name, None).await?;
    if !resource.kind.starts_with("Federated") {
        tracing::warn!(
            "{}/{} might not be a federated type",
            resource.qualified_name(),
            resource.version
        );
    }
    let ar = discovery::api_resource_of(&resource);
    let namespace = match &target.namespace {
        Some(ns) => ns.clone(),
        None => factory.config(&host.context).await?.default_namespace,
    };
    let api: Api<DynamicObject> = if resource.namespaced {
        Api::namespaced_with(host.client.clone(), &namespace, &ar)
    } else {
        Api::all_with(host.client.clone(), &ar)
    };
    let qualified = if resource.namespaced {
        format!("{namespace}/{}", target.name)
    } else {
        target.name.clone()
    };
    let Some(obj) = api.get_opt(&target.name).await.map_err(api_error)? else {
        bail!("{} {qualified:?} not found", resource.kind);
    };
    let enabled = obj
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ORPHAN_ANNOTATION))
        .is_some_and(|v| v == "true");
    match set {
        None => println!("{}", if enabled { "Enabled" } else { "Disabled" }),
        Some(want) if want == enabled => {}
        Some(want) if mode.is_dry_run() => println!(
            "{} {qualified}: orphaning deletion would be {} (dry run)",
            resource.kind,
            if want { "enabled" } else { "disabled" }
        ),
        Some(want) => {
            let value = if want { json!("true") } else { json!(null) };
            let patch = json!({"metadata": {"annotations": {ORPHAN_ANNOTATION: value}}});
            api.patch(&target.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(api_error)?;
        }
    }
    Ok(())
}
