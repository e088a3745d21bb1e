//! `kubefedctl disable NAME`: stop federating an API type.
//!
//! Sets `propagation: Disabled` on the FederatedTypeConfig, then deletes
//! it; with `--delete-crd` also deletes the `Federated<Kind>` CRD, which is
//! refused while federated objects of the type exist (unless `--force`:
//! deleting the CRD deletes them all). There is no controller to wait for.

use crate::api::DEFAULT_FEDERATED_GROUP;
use crate::api::core::FederatedTypeConfig;
use crate::apply::{ObjectRef, WriteMode, api_error, resource_of};
use crate::clients::discovery;
use crate::clients::host::Host;
use crate::cmd::options::GlobalOptions;
use crate::core::run::reconciler::FederatedResource;
use crate::core::types::typegen::FederatedNames;
use crate::federated_types::{DEFAULT_FEDERATED_VERSION, crd_object};
use anyhow::{Result, bail};
use clap::Args;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;
use std::io::IsTerminal;

#[derive(Args, Debug)]
#[command(
    after_help = "NAME is the FederatedTypeConfig's name (deployments.apps) or anything enable
accepts (deploy, Deployment); a name with a dot is used as it is, so a type
whose API is gone can still be disabled.

Objects already propagated to member clusters are left where they are.

Examples:
  kubefedctl disable deployments.apps
  kubefedctl disable etcdclusters --delete-crd --yes"
)]
pub struct DisableOptions {
    /// The federated type to disable
    #[arg(value_name = "NAME")]
    pub name: String,

    /// Also delete the Federated<Kind> CRD
    #[arg(long)]
    pub delete_crd: bool,

    /// With --delete-crd: delete the CRD even while federated objects of the type exist (they are deleted with it)
    #[arg(long, requires = "delete_crd")]
    pub force: bool,

    /// With --delete-crd and no FederatedTypeConfig: the federated group the CRD is in
    #[arg(long, value_name = "GROUP", default_value = DEFAULT_FEDERATED_GROUP, requires = "delete_crd")]
    pub federated_group: String,

    /// With --delete-crd and no FederatedTypeConfig: the target version to look up
    #[arg(long = "version", value_name = "VERSION", requires = "delete_crd")]
    pub target_version: Option<String>,

    /// Do not ask for confirmation before deleting the CRD
    #[arg(short = 'y', long)]
    pub yes: bool,

    #[command(flatten)]
    pub dry_run: crate::cmd::options::DryRunFlag,

    /// How long to wait for a running controller (reconcile --watch, or KubeFed's) to stop propagating the type
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::cmd::options::parse_duration)]
    pub timeout: std::time::Duration,
}

pub async fn run(global: &GlobalOptions, o: &DisableOptions) -> Result<()> {
    disable(global, o).await
}

/// What disable acts on, all read before anything is written.
struct Target {
    /// The FederatedTypeConfig's name, in the kubefed namespace.
    name: String,
    ftc_ref: ObjectRef,
    ftc: Option<FederatedTypeConfig>,
    /// With --delete-crd: the `Federated<Kind>` CRD and its objects' resource.
    crd: Option<(ObjectRef, ApiResource)>,
}

/// Reads the type, guards the CRD's deletion, then shows (--dry-run) or makes the changes.
async fn disable(global: &GlobalOptions, o: &DisableOptions) -> Result<()> {
    let (factory, host) = global.connect_host().await?;
    host.require_initialised().await?;
    let target = find_target(&host, o).await?;
    if let Some((crd, ar)) = &target.crd {
        guard_crd_deletion(&host, o, crd, ar).await?;
    }

    let mode = o.dry_run.mode();
    match mode {
        WriteMode::DryRun => print_dry_run(&host, &target).await?,
        WriteMode::Write => apply(&host, &target, o.timeout).await?,
    }
    refresh_reconciler_rules(&host, &factory, target.ftc.as_ref(), mode).await
}

/// NAME as the FTC's name (a dotted name as it is, so a type whose API is gone still works).
async fn find_target(host: &Host, o: &DisableOptions) -> Result<Target> {
    let name = if o.name.contains('.') {
        o.name.clone()
    } else {
        discovery::find_resource(&host.client, &o.name, None)
            .await?
            .qualified_name()
    };
    let ns = &host.namespace;
    let ftc_ref = host.object(resource_of::<FederatedTypeConfig>(), true, &name);
    let api: Api<FederatedTypeConfig> = Api::namespaced(host.client.clone(), ns);
    let ftc = api.get_opt(&name).await.map_err(api_error)?;
    if ftc.is_none() {
        println!("FederatedTypeConfig \"{ns}/{name}\" does not exist");
    }

    let crd: Option<(ObjectRef, ApiResource)> = if o.delete_crd {
        Some(federated_crd(host, o, &name, ftc.as_ref()).await?)
    } else {
        None
    };
    Ok(Target {
        name,
        ftc_ref,
        ftc,
        crd,
    })
}

/// The CRD is named by the FTC when there is one, else by the target type and --federated-group.
async fn federated_crd(
    host: &Host,
    o: &DisableOptions,
    name: &str,
    ftc: Option<&FederatedTypeConfig>,
) -> Result<(ObjectRef, ApiResource)> {
    let names = match ftc {
        Some(f) => {
            let t = &f.spec.federated_type;
            FederatedNames {
                group: t.group.clone().unwrap_or_default(),
                version: t.version.clone(),
                kind: t.kind.clone(),
                plural: t.plural_name.clone(),
                namespaced: t.scope == "Namespaced",
            }
        }
        None => {
            let target =
                discovery::find_resource(&host.client, name, o.target_version.as_deref()).await?;
            FederatedNames::new(&target, &o.federated_group, DEFAULT_FEDERATED_VERSION)
        }
    };
    let ar = crate::apply::api_resource(&names.group, &names.version, &names.kind, &names.plural);
    Ok((crd_object(host, &names), ar))
}

/// Deleting a CRD deletes its objects: refused while some exist (but --force), and confirmed.
async fn guard_crd_deletion(
    host: &Host,
    o: &DisableOptions,
    crd: &ObjectRef,
    ar: &ApiResource,
) -> Result<()> {
    if crd.get().await?.is_none() {
        return Ok(());
    }
    let count = instances(host, ar).await?;
    if count > 0 && !o.force {
        bail!(
            "cannot delete CRD {:?} while {count} {} object(s) exist: delete them first, or pass --force to delete them with the CRD",
            crd.name,
            ar.kind
        );
    }
    if o.dry_run.mode().writes()
        && !o.yes
        && std::io::stdin().is_terminal()
        && std::io::stderr().is_terminal()
    {
        let ok = dialoguer::Confirm::new()
            .with_prompt(format!(
                "Delete CRD {:?} and every {} in the host?",
                crd.name, ar.kind
            ))
            .default(false)
            .interact()?;
        if !ok {
            bail!("disable cancelled");
        }
    }
    Ok(())
}

/// --dry-run: what would change, read again now, writing nothing.
async fn print_dry_run(host: &Host, target: &Target) -> Result<()> {
    let (ns, name) = (&host.namespace, &target.name);
    if let Some(f) = &target.ftc {
        if f.spec.is_enabled() {
            println!("propagation would be disabled for FederatedTypeConfig \"{ns}/{name}\"");
        }
        println!("{} would be deleted (host)", target.ftc_ref.short());
    }
    if let Some((crd, _)) = &target.crd
        && crd.get().await?.is_some()
    {
        println!("{} would be deleted (host)", crd.short());
    }
    Ok(())
}

/// Disables propagation, then deletes the CRD (with --delete-crd) and the FTC.
async fn apply(host: &Host, target: &Target, timeout: std::time::Duration) -> Result<()> {
    let (ns, name) = (&host.namespace, &target.name);
    // Propagation off first, CRD next, FTC last: KubeFed's order, so that a
    // running controller stops before its CRD disappears.
    if let Some(f) = &target.ftc
        && f.spec.is_enabled()
    {
        let api: Api<FederatedTypeConfig> = Api::namespaced(host.client.clone(), ns);
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"propagation": "Disabled"}})),
        )
        .await
        .map_err(api_error)?;
        println!("Disabled propagation for FederatedTypeConfig \"{ns}/{name}\"");
        wait_for_propagation_stopped(&api, name, ns, timeout).await?;
    }
    if let Some((crd, _)) = &target.crd {
        if crd.delete().await? {
            println!("{} deleted (host)", crd.short());
        } else {
            println!("customresourcedefinition {:?} does not exist", crd.name);
        }
    }
    if target.ftc.is_some() && target.ftc_ref.delete().await? {
        println!("{} deleted (host)", target.ftc_ref.short());
    }
    Ok(())
}

/// A running controller (`reconcile --watch`, or KubeFed's) says in the
/// FTC's status whether it still propagates the type; as upstream's
/// `verifyPropagationControllerStopped` (`pkg/kubefedctl/disable.go`),
/// wait up to `--timeout` (10 s) for `NotRunning` before the CRD goes.
/// Without a controller (one-shot use) there is nothing to wait for.
async fn wait_for_propagation_stopped(
    api: &Api<FederatedTypeConfig>,
    name: &str,
    ns: &str,
    timeout: std::time::Duration,
) -> Result<()> {
    let running = |f: &FederatedTypeConfig| {
        f.status
            .as_ref()
            .is_some_and(|s| s.propagation_controller == "Running")
    };
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let ftc = api.get(name).await.map_err(api_error)?;
        if !running(&ftc) {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!(
                "the propagation controller of FederatedTypeConfig \"{ns}/{name}\" still runs after {} (status.propagationController: Running); is a reconcile --watch or KubeFed's controller-manager alive? (--timeout waits longer)",
                crate::core::run::lease::ago(timeout.as_secs() as i64)
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The reconciler (when installed), pull members' agents and the
/// least-privilege members lose the disabled type's rules.
async fn refresh_reconciler_rules(
    host: &crate::clients::host::Host,
    factory: &crate::clients::ClientFactory,
    ftc: Option<&FederatedTypeConfig>,
    mode: WriteMode,
) -> Result<()> {
    let gone = ftc.map(|f| FederatedResource {
        group: f.spec.federated_type.group.clone().unwrap_or_default(),
        plural: f.spec.federated_type.plural_name.clone(),
    });
    let mut lines = crate::reconciler::refresh_rules(host, mode, |types| {
        types.retain(|t| Some(t) != gone.as_ref())
    })
    .await?;
    lines.extend(
        crate::pull_member::refresh_agent_roles(host, mode, |types| {
            types.retain(|t| Some(t) != gone.as_ref())
        })
        .await?,
    );
    for line in lines {
        println!("{line}");
    }
    // Least-privilege members lose the type's resource (a dry run has
    // not disabled it yet).
    let target = ftc.map(|f| {
        (
            f.spec.target_type.group.clone().unwrap_or_default(),
            f.spec.target_type.plural_name.clone(),
        )
    });
    let refreshed = crate::member_rbac::refresh(host, factory, mode, |resources| {
        resources.retain(|r| Some((&r.group, &r.plural)) != target.as_ref().map(|(g, p)| (g, p)))
    })
    .await?;
    crate::cmd::options::print_member_rbac(refreshed)
}

/// How many objects of a federated type exist in the host (all namespaces).
async fn instances(host: &Host, ar: &ApiResource) -> Result<usize> {
    let api: Api<DynamicObject> = Api::all_with(host.client.clone(), ar);
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(list.items.len()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(0),
        Err(e) => Err(api_error(e)),
    }
}
