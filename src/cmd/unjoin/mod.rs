//! `kubefedctl unjoin CLUSTER_NAME`: take a member out of the federation.
//!
//! Removes, in the member, the service account, its token secret and the
//! RBAC objects join made (both scopes' names, whatever the scope), and the
//! kubefed namespace when join created it and nothing else lives there now;
//! in the host, the KubeFedCluster, its credentials Secret and the
//! ClusterProfile join published for it (never another manager's). Workloads
//! already propagated to the member stay where they are, unless
//! `--cleanup` deletes them first ([`cleanup`]). A pull member's agent
//! and its host account, roles and report namespace go instead of a
//! push member's identity and Secret ([`pull`]).

mod cleanup;
mod pull;

use crate::api::core::KubeFedCluster;
use crate::apply::{ObjectRef, api_error, resource_of};
use crate::clients::host::Host;
use crate::cmd::options::{GlobalOptions, MemberOptions, host_cluster_name, validate_cluster_name};
use crate::core::cluster::membership::{CREATED_BY_JOIN_ANNOTATION, JoinNames};
use crate::core::cluster::token::token_role_name;
use crate::error::one_line;
use crate::terminal::completion::complete_context;
use anyhow::{Context, Result, bail};
use clap::Args;
use clap_complete::ArgValueCompleter;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::{Discovery, Scope as ResourceScope, verbs};
use std::io::IsTerminal;

#[derive(Args, Debug)]
#[command(mut_arg("dry_run", |a| a.help("Show what would be removed, removing nothing (=client: decided here)")))]
#[command(
    after_help = "Without --cleanup, workloads already propagated to the member stay there.
With --cleanup, every object the federation manages in the member (labelled
kubefed.io/managed=true, of an enabled type) is deleted first, as the
reconcile deletes it, namespaces last; one whose federated object says
kubefed.io/orphan: \"true\", or that no federated object accounts for, is
only unlabelled. Then the host's federated objects and PropagatedVersions stop
naming the cluster. The member's kubefed namespace is deleted only when join
created it and it is now empty (nothing but the default service account, its
token, kube-root-ca.crt and events).

Examples:
  kubefedctl unjoin member1
  # List what would go, type by type
  kubefedctl unjoin member1 --cleanup --dry-run
  kubefedctl unjoin member1 --cleanup --yes
  # The member is unreachable: remove the host records anyway
  kubefedctl unjoin member1 --force --yes"
)]
pub struct UnjoinOptions {
    /// Name of the member cluster (the KubeFedCluster's name)
    #[arg(value_name = "CLUSTER_NAME", add = ArgValueCompleter::new(complete_context))]
    pub cluster_name: String,

    #[command(flatten)]
    pub member: MemberOptions,

    /// First delete (or unlabel) what the federation manages in the member, and drop the cluster from the host's statuses and PropagatedVersions
    #[arg(long)]
    pub cleanup: bool,

    /// Remove the host records even when the member cannot be cleaned up
    #[arg(long)]
    pub force: bool,

    /// Do not ask for confirmation
    #[arg(short = 'y', long)]
    pub yes: bool,

    #[command(flatten)]
    pub dry_run: crate::cmd::options::DryRunFlag,
}

pub async fn run(global: &GlobalOptions, o: &UnjoinOptions) -> Result<()> {
    validate(o).map_err(crate::error::usage_of)?;
    unjoin(global, o).await
}

/// Flag checks that need no cluster: the names unjoin looks objects up by, before anything is read.
fn validate(o: &UnjoinOptions) -> Result<()> {
    validate_cluster_name(&o.cluster_name)?;
    if let Some(name) = o.member.host_cluster_name.as_deref() {
        // A given name is checked as it is: the host context is only used without one.
        host_cluster_name(Some(name), "")?;
    }
    Ok(())
}

/// The host's records of the member, read before the member is touched.
struct HostRecords {
    /// The credentials Secret the KubeFedCluster points at.
    secret: Option<ObjectRef>,
    /// The KubeFedCluster, when it exists.
    cluster: Option<ObjectRef>,
    /// The ClusterProfile join published for it, when it is still ours.
    profile: Option<ObjectRef>,
    /// The consumer identities join made in the member (`--consumer`).
    consumers: Vec<String>,
    /// A pull member (`join --mode pull`): its agent's host objects, the
    /// report namespace last (empty for a push member).
    agent: Vec<ObjectRef>,
}

impl HostRecords {
    fn pull(&self) -> bool {
        !self.agent.is_empty()
    }
}

/// Confirms, cleans up the member, then removes the host records, and says what it did.
async fn unjoin(global: &GlobalOptions, o: &UnjoinOptions) -> Result<()> {
    let (factory, host) = global.connect_host().await?;
    host.require_initialised().await?;
    let host_name = host_cluster_name(o.member.host_cluster_name.as_deref(), &host.context)?;
    let names = JoinNames::new(&o.cluster_name, &host_name, &host.namespace);
    let records = host_records(&host, o).await?;
    if records.pull() && o.cleanup {
        bail!(
            "--cleanup of pull member {:?} is not supported yet: its agent would put back what is deleted; unjoin it without --cleanup, then delete what the federation left in the member (kubectl delete ... -l kubefed.io/managed=true)",
            o.cluster_name
        );
    }
    // Everything --cleanup needs is read before the question and any write.
    let side = match o.cleanup {
        true => Some(cleanup::read_host(&host, &o.cluster_name).await?),
        false => None,
    };
    let member = member_client(global, o, &factory).await;
    let plan = match (&side, &member) {
        (Some(side), Ok(client)) => {
            let plan = cleanup::plan_member(side, client, &host.namespace).await;
            Some(plan.with_context(|| {
                format!(
                    "cannot clean up cluster {:?}; nothing was removed",
                    o.cluster_name
                )
            })?)
        }
        _ => None,
    };
    confirm(o, &host, plan.as_ref())?;
    // A reconcile running meanwhile would put the objects back.
    let lock = match o.cleanup && o.dry_run.mode().writes() {
        true => Some(cleanup::hold_federation(&host).await?),
        false => None,
    };

    // The member first: once the host records are gone, nothing points at it.
    let steps = async {
        let work = side.as_ref().zip(plan.as_ref());
        let member_side = MemberSide {
            names: &names,
            consumers: &records.consumers,
            pull: records.pull(),
        };
        let mut removed = clean_up_member(global, o, member, work, &host, member_side).await?;
        if let Some(side) = &side {
            removed += cleanup::run_host(&host, side, &o.cluster_name, o.dry_run.mode()).await?;
        }
        removed += remove_host_records(o, &records).await?;
        anyhow::Ok(removed)
    };
    let removed = steps.await;
    if let Some(lock) = lock {
        lock.release().await?;
    }
    let removed = removed?;
    if o.dry_run.mode().is_dry_run() {
        return Ok(());
    }
    if removed == 0 {
        println!(
            "Cluster {:?} is not joined to host {:?}: nothing to remove.",
            o.cluster_name, host.context
        );
    } else {
        println!(
            "Cluster {:?} unjoined from host {:?}.",
            o.cluster_name, host.context
        );
    }
    Ok(())
}

/// The KubeFedCluster names its Secret, so both are found before either is deleted.
async fn host_records(host: &Host, o: &UnjoinOptions) -> Result<HostRecords> {
    let kfc = host.object(resource_of::<KubeFedCluster>(), true, &o.cluster_name);
    let cluster = kfc.get().await?;
    let pull = cluster
        .as_ref()
        .is_some_and(crate::core::cluster::pull::is_pull_value);
    // A pull member's `secretRef` names a Secret that was never written.
    let secret = cluster
        .as_ref()
        .filter(|_| !pull)
        .and_then(|c| c["spec"]["secretRef"]["name"].as_str())
        .map(|s| host.object(resource_of::<Secret>(), true, s));
    let agent = match pull {
        true => pull::host_objects(host, &o.cluster_name),
        false => Vec::new(),
    };
    let profile = match &cluster {
        Some(c) => crate::inventory::own_profile(host, c).await?,
        None => None,
    };
    Ok(HostRecords {
        secret,
        profile,
        consumers: cluster
            .as_ref()
            .map(crate::inventory::consumers_of)
            .unwrap_or_default(),
        cluster: cluster.is_some().then_some(kfc),
        agent,
    })
}

/// Unjoining is not undone by a re-run: ask on a terminal, unless --yes or --dry-run.
fn confirm(o: &UnjoinOptions, host: &Host, plan: Option<&cleanup::MemberPlan<'_>>) -> Result<()> {
    if !o.yes
        && o.dry_run.mode().writes()
        && std::io::stdin().is_terminal()
        && std::io::stderr().is_terminal()
    {
        let what = match plan.map(cleanup::MemberPlan::counts) {
            Some((deletes, unlabels)) => {
                format!("{deletes} managed object(s) there will be deleted, {unlabels} unlabelled.")
            }
            None if o.cleanup => "Its managed objects cannot be reached and stay.".to_string(),
            None => "Workloads already propagated to it stay.".to_string(),
        };
        let ok = dialoguer::Confirm::new()
            .with_prompt(format!(
                "Unjoin cluster {:?} from host {:?}? {what}",
                o.cluster_name, host.context
            ))
            .default(false)
            .interact()?;
        if !ok {
            bail!("unjoin cancelled");
        }
    }
    Ok(())
}

/// The member's client, through the operator's own context (not the
/// federation's identity, which may not delete everything and is about to
/// go); fails when the member does not answer.
async fn member_client(
    global: &GlobalOptions,
    o: &UnjoinOptions,
    host_factory: &crate::clients::ClientFactory,
) -> Result<kube::Client> {
    let factory = o.member.factory(host_factory, global)?;
    let client = factory.client(o.member.context(&o.cluster_name)).await?;
    // Reachable? One cheap read, so an outage is reported as such.
    client.apiserver_version().await.map_err(api_error)?;
    Ok(client)
}

/// What join made in the member: a push member's identity (by its names)
/// and consumers, or a pull member's agent.
struct MemberSide<'a> {
    names: &'a JoinNames,
    consumers: &'a [String],
    pull: bool,
}

/// Member cleanup first: a member that cannot be cleaned up stops unjoin, unless --force.
async fn clean_up_member(
    global: &GlobalOptions,
    o: &UnjoinOptions,
    member: Result<kube::Client>,
    work: Option<(&cleanup::HostSide, &cleanup::MemberPlan<'_>)>,
    host: &Host,
    joined: MemberSide<'_>,
) -> Result<usize> {
    let names = joined.names;
    let ns = &host.namespace;
    let client = match member {
        Ok(client) => client,
        Err(e) if o.force => {
            let managed = match o.cleanup {
                true => "the objects the federation manages (labelled kubefed.io/managed=true), ",
                false => "",
            };
            let identity = match joined.pull {
                true => pull::left_behind(ns),
                false => format!(
                    "service account {ns}/{}, its token secret, and RBAC objects {} / {}",
                    names.service_account, names.role, names.health_check
                ),
            };
            tracing::warn!(
                "cluster {:?} not cleaned up ({}); left behind there: {managed}{identity}",
                o.cluster_name,
                one_line(&e),
            );
            return Ok(0);
        }
        Err(e) => {
            return Err(e.context(format!(
                "cannot reach cluster {:?} to clean it up; nothing was removed (use --force to remove the host records anyway)",
                o.cluster_name
            )));
        }
    };
    let mut removed = 0;
    if let Some((side, plan)) = work {
        removed += clean_up_managed(global, o, side, plan, &client).await?;
    }
    if joined.pull {
        removed += pull::stop_agent(o, &client, ns).await?;
    }
    let (mut objects, namespace) = match joined.pull {
        true => pull::member_objects(o, &client, ns),
        false => member_objects(o, &client, names, ns),
    };
    // `join --consumer`'s identities, bindings before the account.
    for c in joined.consumers {
        let targets =
            crate::inventory::consumer_targets(&o.cluster_name, &client, names, ns, c, "");
        objects.splice(0..0, targets.into_iter().rev().map(|(t, _)| t));
    }
    let (deleted, failures) = delete_member_objects(o, &objects).await;
    removed += deleted;
    if failures.is_empty() && o.dry_run.mode().writes() {
        removed += remove_namespace_if_join_made_it(&namespace, host).await?;
    }
    if !failures.is_empty() {
        if !o.force {
            bail!(
                "cannot clean up cluster {:?}: {}; nothing was removed from the host (use --force to remove the host records anyway)",
                o.cluster_name,
                failures.join("; ")
            );
        }
        tracing::warn!(
            "left behind in {:?}: {}",
            o.cluster_name,
            failures.join("; ")
        );
    }
    Ok(removed)
}

/// `--cleanup` in the member, before its identity goes: listed with
/// `--dry-run`, else done; what failed stops unjoin unless `--force`.
async fn clean_up_managed(
    global: &GlobalOptions,
    o: &UnjoinOptions,
    side: &cleanup::HostSide,
    plan: &cleanup::MemberPlan<'_>,
    client: &kube::Client,
) -> Result<usize> {
    let cluster = &o.cluster_name;
    let mut failures = plan.failures.clone();
    let mut done = 0;
    if o.dry_run.mode().is_dry_run() {
        cleanup::print_member_plan(plan, cluster);
    } else {
        let timeout = match global.request_timeout.is_zero() {
            true => std::time::Duration::from_secs(24 * 3600),
            false => global.request_timeout,
        };
        let (n, failed) = cleanup::run_member(side, plan, client, cluster, timeout).await;
        done = n;
        failures.extend(failed);
    }
    if failures.is_empty() {
        return Ok(done);
    }
    if !o.force {
        bail!(
            "cannot clean up cluster {cluster:?}: {}; its identity and the host records were kept (use --force to remove them anyway)",
            failures.join("; ")
        );
    }
    tracing::warn!(
        "managed objects left behind in {cluster:?}: {}",
        failures.join("; ")
    );
    Ok(done)
}

/// Deletes (with --dry-run lists) each object; a failure is noted and the rest still go.
async fn delete_member_objects(o: &UnjoinOptions, objects: &[ObjectRef]) -> (usize, Vec<String>) {
    let mut removed = 0usize;
    let mut failures = Vec::new();
    for obj in objects {
        if o.dry_run.mode().is_dry_run() {
            if obj.get().await.ok().flatten().is_some() {
                println!("{} would be deleted ({})", obj.short(), obj.cluster);
            }
            continue;
        }
        match obj.delete().await {
            Ok(true) => {
                removed += 1;
                println!("{} deleted ({})", obj.short(), obj.cluster);
            }
            Ok(false) => {}
            Err(e) => failures.push(format!("{}: {}", obj.short(), one_line(&e))),
        }
    }
    (removed, failures)
}

/// The Secret (a pull member's agent objects), then the KubeFedCluster,
/// last so that a run that fails part-way can be run again (with
/// --dry-run only listed); returns how many were deleted.
async fn remove_host_records(o: &UnjoinOptions, records: &HostRecords) -> Result<usize> {
    let mut removed = 0usize;
    let listed = records.agent.iter().map(|r| (r, true));
    let records = (records.profile.iter().chain(&records.secret))
        .map(|r| (r, false))
        .chain(listed)
        .chain(records.cluster.iter().map(|r| (r, false)));
    for (obj, only_if_found) in records {
        if o.dry_run.mode().is_dry_run() {
            // A pull member's objects are listed for both scopes: only
            // those there are said.
            if only_if_found && obj.get().await?.is_none() {
                continue;
            }
            println!("{} would be deleted (host)", obj.short());
        } else if obj.delete().await? {
            removed += 1;
            println!("{} deleted (host)", obj.short());
        }
    }
    Ok(removed)
}

/// The member's join objects, bindings before roles, and its kubefed
/// namespace.
fn member_objects(
    o: &UnjoinOptions,
    client: &kube::Client,
    names: &JoinNames,
    ns: &str,
) -> (Vec<ObjectRef>, ObjectRef) {
    let label = o.cluster_name.as_str();
    let at = |resource, namespaced: bool, name: &str| {
        ObjectRef::new(label, client, resource, namespaced.then_some(ns), name)
    };
    let objects = vec![
        at(resource_of::<ClusterRoleBinding>(), false, &names.role),
        at(resource_of::<ClusterRole>(), false, &names.role),
        at(
            resource_of::<ClusterRoleBinding>(),
            false,
            &names.health_check,
        ),
        at(resource_of::<ClusterRole>(), false, &names.health_check),
        at(resource_of::<RoleBinding>(), true, &names.role),
        at(resource_of::<Role>(), true, &names.role),
        // `join --token-ttl`'s: the identity renews its own token.
        at(resource_of::<RoleBinding>(), true, &token_role_name(names)),
        at(resource_of::<Role>(), true, &token_role_name(names)),
        at(resource_of::<Secret>(), true, &names.service_account),
        at(
            resource_of::<ServiceAccount>(),
            true,
            &names.service_account,
        ),
    ];
    (objects, at(resource_of::<Namespace>(), false, ns))
}

/// Deletes the member's kubefed namespace when join created it, it is not
/// the host's own namespace (the host joined itself), and it is empty.
async fn remove_namespace_if_join_made_it(namespace: &ObjectRef, host: &Host) -> Result<usize> {
    let Some(live) = namespace.get().await? else {
        return Ok(0);
    };
    if live["metadata"]["annotations"][CREATED_BY_JOIN_ANNOTATION] != "true"
        || !live["metadata"]["deletionTimestamp"].is_null()
    {
        return Ok(0);
    }
    let host_ns = host
        .object(resource_of::<Namespace>(), false, &host.namespace)
        .get()
        .await?;
    if host_ns.is_some_and(|h| h["metadata"]["uid"] == live["metadata"]["uid"]) {
        return Ok(0);
    }
    if let Some(what) = first_remaining_object(namespace).await? {
        println!(
            "{} kept ({}): not empty ({what})",
            namespace.short(),
            namespace.cluster
        );
        return Ok(0);
    }
    Ok(if namespace.delete().await? {
        println!("{} deleted ({})", namespace.short(), namespace.cluster);
        1
    } else {
        0
    })
}

/// The first object in the namespace that is not part of an empty
/// namespace's furniture, found through discovery.
async fn first_remaining_object(namespace: &ObjectRef) -> Result<Option<String>> {
    let discovery = Discovery::new(namespace.client.clone())
        .run()
        .await
        .map_err(api_error)?;
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            if caps.scope != ResourceScope::Namespaced
                || !caps.supports_operation(verbs::LIST)
                || ar.plural == "events"
            {
                continue;
            }
            let api: Api<DynamicObject> =
                Api::namespaced_with(namespace.client.clone(), &namespace.name, &ar);
            let list = api
                .list(&ListParams::default().limit(50))
                .await
                .map_err(api_error)?;
            for item in list.items {
                if !is_furniture(&ar.kind, &item) {
                    let name = item.metadata.name.unwrap_or_default();
                    return Ok(Some(format!("{}/{name}", ar.kind.to_lowercase())));
                }
            }
        }
    }
    Ok(None)
}

/// What every namespace holds without anyone putting it there.
fn is_furniture(kind: &str, item: &DynamicObject) -> bool {
    let name = item.metadata.name.as_deref().unwrap_or("");
    match kind {
        "ServiceAccount" => name == "default",
        "ConfigMap" => name == "kube-root-ca.crt",
        "Secret" => {
            item.data["type"] == "kubernetes.io/service-account-token"
                && item
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("kubernetes.io/service-account.name"))
                    .is_some_and(|sa| sa == "default")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(cluster_name: &str, host_cluster_name: Option<&str>) -> UnjoinOptions {
        UnjoinOptions {
            cluster_name: cluster_name.into(),
            member: MemberOptions {
                cluster_context: None,
                cluster_kubeconfig: None,
                host_cluster_name: host_cluster_name.map(str::to_string),
            },
            cleanup: false,
            force: false,
            yes: false,
            dry_run: Default::default(),
        }
    }

    #[test]
    fn validate_names_the_bad_name_before_any_cluster() {
        let e = validate(&options("Bad_Name", None))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid cluster name \"Bad_Name\""), "{e}");
        let e = validate(&options("member1", Some("Bad_Host")))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid --host-cluster-name \"Bad_Host\""),
            "{e}"
        );
        assert!(validate(&options("member1", Some("hub"))).is_ok());
        assert!(validate(&options("member1", None)).is_ok());
    }
}
