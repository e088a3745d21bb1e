//! `kubefedctl join CLUSTER_NAME`: register a member cluster with the host.
//!
//! As KubeFed v0.10's join: in the member, a service account with a token
//! secret and RBAC (cluster-wide or namespace-only, after the host's
//! KubeFedConfig scope); in the host, a Secret with the member's token and
//! CA and a `KubeFedCluster`. Fixed on purpose: names derived from contexts
//! are made valid, a re-join reuses the host Secret (upstream leaks a new one
//! each time), an identical re-join writes nothing, and a failure part-way
//! takes back everything this run created, in both clusters.
//!
//! `--mode pull` (ours, issue #68) is [`pull`]'s: the host holds no
//! credential for the member, an agent in the member reads from the host.

mod pull;

use crate::api::core::KubeFedCluster;
use crate::apply::{
    Journal, ObjectRef, OnExisting, Outcome, WriteMode, api_error, ensure, outcome_line, preview,
    resource_of,
};
use crate::clients::host::Host;
use crate::cmd::options::{
    GlobalOptions, MemberOptions, RbacFlag, host_cluster_name, parse_duration,
    validate_cluster_name,
};
use crate::core::cluster::inventory;
use crate::core::cluster::membership::{self, JoinNames, MemberEndpoint, Scope};
use crate::core::cluster::rbac::MemberRbac;
use crate::core::cluster::token::{self, Lifetime, check_ttl};
use crate::core::names::subdomain_error;
use crate::terminal::completion::complete_context;
use crate::terminal::output::DocumentFormat;
use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use clap::{ArgAction, Args};
use clap_complete::ArgValueCompleter;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use std::time::Duration;

#[derive(Args, Debug)]
#[command(after_help = "Examples:
  # Context member1 joins the host (the current context)
  kubefedctl join member1
  kubefedctl join prod \\
      --cluster-context arn:aws:eks:eu-west-1:123456789012:cluster/prod
  # Update an existing join in place
  kubefedctl join member1 --error-on-existing=false
  # KubeFed's `*` identity (a hand-over to KubeFed's controller-manager)
  kubefedctl join member1 --rbac admin
  # Print what would be written
  kubefedctl join member1 -o yaml
  # A pull member: an agent in the member reads from the host, which holds no
  # credential for it (host objects, then the member's)
  kubefedctl join edge1 --mode pull --image ghcr.io/example/kubefedctl:v0.4.0 \\
      --host-endpoint https://hub.example.com:6443

A member endpoint on 127.0.0.1/localhost works for kubefedctl reconcile run on
this machine, but a controller running in the host cluster could not reach it.")]
pub struct JoinOptions {
    /// Name of the member cluster (the KubeFedCluster's name)
    #[arg(value_name = "CLUSTER_NAME", add = ArgValueCompleter::new(complete_context))]
    pub cluster_name: String,

    #[command(flatten)]
    pub member: MemberOptions,

    /// push: the host holds a credential for the member and writes to it; pull: an agent in
    /// the member reads its share from the host and applies it (--image)
    #[arg(long, value_enum, value_name = "MODE", default_value = "push")]
    pub mode: JoinMode,

    /// With --mode pull: the container image holding kubefedctl that the member's agent runs
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,

    /// With --mode pull: the host's API server URL as the agent in the member reaches it
    /// [default: the host context's server]
    #[arg(long, value_name = "URL")]
    pub host_endpoint: Option<String>,

    /// With --mode pull: the agent propagates only this namespace's federated objects (its -n),
    /// for a member that other federations also use
    #[arg(long, value_name = "NAMESPACE")]
    pub agent_objects_namespace: Option<String>,

    /// Name of the host Secret holding the member's credentials [default: the joined one, else CLUSTER_NAME-<random>]
    #[arg(long, value_name = "NAME")]
    pub secret_name: Option<String>,

    /// What the host (with --mode pull: the agent) may do in the member: least (only the
    /// federation's own verbs on the enabled types, kept in step by enable and disable) or admin
    /// (KubeFed's `*` on everything)
    #[arg(long, value_enum, value_name = "MODE", default_value = "least")]
    pub rbac: RbacFlag,

    /// Fail when the cluster is already joined; with =false, update the join in place
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    pub error_on_existing: bool,

    /// Store a bound token from the member's TokenRequest API that expires after DURATION
    /// (at least 10m) instead of one that never expires; kubefedctl rotate and the watch renew it.
    /// With --mode pull: the lifetime of the agent's host token [default: 24h]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub token_ttl: Option<Duration>,

    /// How long to wait for the member's token controller to issue the token [default: 30s]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub token_timeout: Option<Duration>,

    #[command(flatten)]
    pub dry_run: crate::cmd::options::DryRunFlag,

    /// Print the objects (yaml or json) instead of writing them
    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    pub output: Option<DocumentFormat>,

    #[command(flatten)]
    pub inventory: InventoryFlags,
}

/// `join --mode`: who holds the credential and who writes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum JoinMode {
    /// The host holds a credential for the member and writes to it (KubeFed's).
    #[default]
    Push,
    /// An agent in the member reads from the host and applies; the host holds no credential
    /// for the member.
    Pull,
}

/// The cluster inventory (SIG Multicluster's ClusterProfile API).
#[derive(Args, Debug, Default)]
#[command(next_help_heading = "Cluster inventory")]
pub struct InventoryFlags {
    /// Publish the member as a ClusterProfile when the host serves them (kubefedctl init
    /// --cluster-inventory); =false: do not
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    pub cluster_profile: bool,

    /// Namespace of the member's ClusterProfile in the host [default: the federation namespace]
    #[arg(long, value_name = "NAMESPACE")]
    pub inventory_namespace: Option<String>,

    /// Join a member the inventory already knows: its server, CA and proxy from this
    /// ClusterProfile in the host, the credential from --cluster-context
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub from_cluster_profile: Option<String>,

    /// With --from-cluster-profile: the access provider to read [default: the first listed]
    #[arg(long, value_name = "NAME", requires = "from_cluster_profile")]
    pub cluster_profile_provider: Option<String>,

    /// A consumer identity in the member for which `kubefedctl credential` issues short-lived
    /// tokens (Argo CD, Kueue, ... reading the inventory); repeatable
    #[arg(long, value_name = "NAME")]
    pub consumer: Vec<String>,

    /// With --consumer: the ClusterRole the consumers are bound to in the member
    #[arg(
        long,
        value_name = "CLUSTERROLE",
        default_value = "view",
        requires = "consumer"
    )]
    pub consumer_role: String,
}

pub async fn run(global: &GlobalOptions, o: &JoinOptions) -> Result<()> {
    validate(o).map_err(crate::error::usage_of)?;
    match o.mode {
        JoinMode::Push => join(global, o).await,
        JoinMode::Pull => {
            pull::validate(o, &global.kubefed_namespace).map_err(crate::error::usage_of)?;
            pull::join(global, o).await
        }
    }
}

/// Flag checks that need no cluster: a usage error before anything is read.
fn validate(o: &JoinOptions) -> Result<()> {
    validate_cluster_name(&o.cluster_name)?;
    if o.mode == JoinMode::Push {
        for (flag, given) in [
            ("--image", o.image.is_some()),
            ("--host-endpoint", o.host_endpoint.is_some()),
            (
                "--agent-objects-namespace",
                o.agent_objects_namespace.is_some(),
            ),
        ] {
            if given {
                bail!("{flag} is for a pull member (--mode pull)");
            }
        }
    }
    if let Some(ttl) = o.token_ttl {
        check_ttl(ttl.as_secs() as i64)?;
    }
    if let Some(ns) = &o.agent_objects_namespace
        && let Some(e) = crate::core::names::label_error(ns)
    {
        bail!("invalid --agent-objects-namespace {ns:?}: {e}");
    }
    if let Some(s) = &o.secret_name
        && let Some(e) = subdomain_error(s)
    {
        bail!("invalid --secret-name {s:?}: {e}");
    }
    let inv = &o.inventory;
    if let Some(r) = &inv.from_cluster_profile
        && inventory::parse_ref(r).is_none()
    {
        bail!("invalid --from-cluster-profile {r:?}: expected NAMESPACE/NAME");
    }
    for (flag, name) in inv
        .inventory_namespace
        .iter()
        .map(|n| ("--inventory-namespace", n))
        .chain(inv.consumer.iter().map(|n| ("--consumer", n)))
    {
        if let Some(e) = subdomain_error(name) {
            bail!("invalid {flag} {name:?}: {e}");
        }
    }
    Ok(())
}

/// Everything a join needs to know before writing anything.
struct Plan {
    host: Host,
    member_label: String,
    member_client: kube::Client,
    /// The member's minor version (what its objects may say depends on it).
    member_minor: Option<u32>,
    names: JoinNames,
    scope: Scope,
    rbac: MemberRbac,
    /// `--rbac least`: the main role's rules, from the enabled types.
    least_rules: Option<Vec<Value>>,
    /// `--token-ttl`, in seconds.
    token_ttl: Option<i64>,
    endpoint: MemberEndpoint,
    existing_cluster: Option<Value>,
    /// The host Secret to (re)use, when one is known.
    secret_name: Option<String>,
    /// The member's `gitVersion`, for its ClusterProfile.
    member_version: String,
    /// Where the member's ClusterProfile goes, when one is published.
    profile_namespace: Option<String>,
    /// `--consumer`s, and the ClusterRole they are bound to.
    consumers: Vec<String>,
    consumer_role: String,
}

async fn join(global: &GlobalOptions, o: &JoinOptions) -> Result<()> {
    let plan = prepare(global, o).await?;
    let ns = plan.host.namespace.clone();
    let member_objects = member_objects(&plan);

    if let Some(format) = o.output {
        return print_join(&plan, o, &member_objects, format);
    }
    if o.dry_run.mode().is_dry_run() {
        return preview_join(&plan, o, &member_objects).await;
    }

    let mut journal = Journal::default();
    match write(&plan, o, &member_objects, &mut journal).await {
        Ok(()) => {
            println!(
                "Cluster {:?} joined host {:?} ({} federation; service account {ns}/{}).",
                o.cluster_name,
                plan.host.context,
                match plan.scope {
                    Scope::Cluster => "cluster-scoped",
                    Scope::Namespaced => "namespace-scoped",
                },
                plan.names.service_account
            );
            Ok(())
        }
        Err(e) => Err(rolled_back(e, journal, &o.cluster_name).await),
    }
}

/// A failed join: what it created taken back, and the error saying so.
async fn rolled_back(e: anyhow::Error, mut journal: Journal, cluster: &str) -> anyhow::Error {
    let undone = journal.rollback().await;
    for line in &undone {
        tracing::info!("rolled back: {line}");
    }
    let note = match undone.len() {
        0 => "nothing had been created".to_string(),
        n => format!("removed the {n} object(s) this run created"),
    };
    e.context(format!("join {cluster:?} failed ({note})"))
}

/// `-o yaml|json`: every object a join writes, the host Secret's name
/// generated when none is known yet.
fn print_join(
    plan: &Plan,
    o: &JoinOptions,
    member_objects: &[(ObjectRef, Value)],
    format: DocumentFormat,
) -> Result<()> {
    let ns = &plan.host.namespace;
    let mut all: Vec<Value> = member_objects.iter().map(|(_, v)| v.clone()).collect();
    let secret = plan.secret_name.clone();
    all.push(membership::host_secret(
        secret.as_deref(),
        &o.cluster_name,
        ns,
        &json!({}),
    ));
    let secret_ref = secret.unwrap_or_else(|| format!("{}-<generated>", o.cluster_name));
    all.push(kubefed_cluster(plan, o, &secret_ref, &plan.endpoint, None));
    if let Some(ns) = &plan.profile_namespace {
        all.push(inventory::profile(&o.cluster_name, ns));
    }
    crate::terminal::output::print_objects(&all, format)
}

/// `--dry-run`: what would change in the member, then in the host.
async fn preview_join(
    plan: &Plan,
    o: &JoinOptions,
    member_objects: &[(ObjectRef, Value)],
) -> Result<()> {
    for (target, body) in member_objects {
        let policy = if target.resource.kind == "Namespace" {
            OnExisting::Keep
        } else {
            OnExisting::Update
        };
        println!(
            "{}",
            outcome_line(
                target,
                preview(target, body, &policy).await?,
                WriteMode::DryRun
            )
        );
    }
    let kfc = plan
        .host
        .object(resource_of::<KubeFedCluster>(), true, &o.cluster_name);
    let what = if plan.existing_cluster.is_some() {
        "would be updated if its token or CA changed"
    } else {
        "would be created"
    };
    let secret = plan
        .secret_name
        .clone()
        .unwrap_or_else(|| format!("{}-<generated>", o.cluster_name));
    println!("secret/{secret} {what} (host)");
    println!("{} {what} (host)", kfc.short());
    if let Some(ns) = &plan.profile_namespace {
        let target = crate::inventory::profile_ref(&plan.host, ns, &o.cluster_name);
        let body = inventory::profile(&o.cluster_name, ns);
        let outcome = preview(&target, &body, &OnExisting::Update).await?;
        println!("{}", outcome_line(&target, outcome, WriteMode::DryRun));
    }
    Ok(())
}

async fn prepare(global: &GlobalOptions, o: &JoinOptions) -> Result<Plan> {
    let (factory, host) = global.connect_host().await?;
    let host_name = host_cluster_name(o.member.host_cluster_name.as_deref(), &host.context)?;
    let names = JoinNames::new(&o.cluster_name, &host_name, &host.namespace);
    if let Some(e) = subdomain_error(&names.service_account) {
        bail!(
            "service account name {:?} would be invalid: {e}",
            names.service_account
        );
    }
    host.require_initialised().await?;
    let scope = host.scope().await?;

    let member_factory = o.member.factory(&factory, global)?;
    let (endpoint, member_client, version) = connect_member(&host, &member_factory, o).await?;
    let member_minor = membership::minor_version(&version.minor);

    let member_label = o.cluster_name.clone();
    let sa = ObjectRef::new(
        &member_label,
        &member_client,
        resource_of::<ServiceAccount>(),
        Some(&host.namespace),
        &names.service_account,
    );
    let existing_cluster = host
        .object(resource_of::<KubeFedCluster>(), true, &o.cluster_name)
        .get()
        .await?;
    if existing_cluster
        .as_ref()
        .is_some_and(crate::core::cluster::pull::is_pull_value)
    {
        bail!(
            "cluster {:?} is joined as a pull member: kubefedctl unjoin {} first to join it in push mode",
            o.cluster_name,
            o.cluster_name
        );
    }
    if o.error_on_existing {
        refuse_existing(o, &names, &sa, existing_cluster.is_some()).await?;
    }
    let secret_name = match &o.secret_name {
        Some(name) => Some(name.clone()),
        None => joined_secret(&host, existing_cluster.as_ref()).await?,
    };
    let rbac = MemberRbac::from(o.rbac);
    let least_rules = match rbac {
        MemberRbac::Admin => None,
        MemberRbac::Least => {
            let resources = crate::member_rbac::synced_resources(&host).await?;
            Some(crate::member_rbac::rules(&host, scope, &resources).await?)
        }
    };
    let profile_namespace = profile_namespace(&host, o).await?;
    Ok(Plan {
        member_version: version.git_version,
        profile_namespace,
        consumers: o.inventory.consumer.clone(),
        consumer_role: o.inventory.consumer_role.clone(),
        host,
        member_label,
        member_client,
        member_minor,
        names,
        scope,
        rbac,
        least_rules,
        token_ttl: o.token_ttl.map(|d| d.as_secs() as i64),
        endpoint,
        existing_cluster,
        secret_name,
    })
}

/// The member's endpoint (from the kubeconfig, or from the ClusterProfile
/// `--from-cluster-profile` names), a client for it, and its version.
async fn connect_member(
    host: &Host,
    member_factory: &crate::clients::ClientFactory,
    o: &JoinOptions,
) -> Result<(
    MemberEndpoint,
    kube::Client,
    k8s_openapi::apimachinery::pkg::version::Info,
)> {
    let member_context = o.member.context(&o.cluster_name);
    let (endpoint, member_client) = match &o.inventory.from_cluster_profile {
        None => {
            let ep = member_factory.endpoint(member_context).await?;
            let client = member_factory.client(member_context).await?;
            (endpoint_of(&ep), client)
        }
        Some(r) => {
            let ep = profile_endpoint(host, r, o).await?;
            let client = member_factory
                .client_at(member_context, &ep)
                .await
                .with_context(|| format!("reaching the cluster ClusterProfile {r} names"))?;
            (ep, client)
        }
    };
    let version = member_client
        .apiserver_version()
        .await
        .map_err(crate::apply::api_error)
        .with_context(|| format!("reading the version of cluster {:?}", o.cluster_name))?;
    if membership::is_loopback_endpoint(&endpoint.api_endpoint) {
        tracing::warn!(
            "member endpoint {} is only reachable from this machine; a controller running in the host cluster could not reach it",
            endpoint.api_endpoint
        );
    }
    Ok((endpoint, member_client, version))
}

/// Where the kubeconfig says the member is, as the KubeFedCluster says it.
pub(super) fn endpoint_of(ep: &crate::clients::Endpoint) -> MemberEndpoint {
    let b64 = base64::engine::general_purpose::STANDARD;
    MemberEndpoint {
        api_endpoint: ep.server.clone(),
        ca_bundle: ep.ca_pem.as_ref().map(|pem| b64.encode(pem)),
        insecure_skip_tls_verify: ep.insecure_skip_tls_verify,
        proxy_url: ep.proxy_url.clone(),
    }
}

/// `--from-cluster-profile`: where the profile's access provider says the
/// member is.
async fn profile_endpoint(host: &Host, r: &str, o: &JoinOptions) -> Result<MemberEndpoint> {
    let (ns, name) = inventory::parse_ref(r).expect("validated");
    let profile = crate::inventory::profile_ref(host, ns, name)
        .get()
        .await?
        .ok_or_else(|| anyhow!("ClusterProfile {r} not found in host {:?}", host.context))?;
    let provider = o.inventory.cluster_profile_provider.as_deref();
    inventory::endpoint_of(&profile, provider).map_err(|e| anyhow!("ClusterProfile {r} {e}"))
}

/// Where the member's ClusterProfile goes: nowhere when the host serves
/// none, when the member comes from an inventory already, when asked not
/// to, or when a profile of that name belongs to another manager (left
/// alone, said once).
async fn profile_namespace(host: &Host, o: &JoinOptions) -> Result<Option<String>> {
    let inv = &o.inventory;
    if inv.from_cluster_profile.is_some() || !inv.cluster_profile {
        return Ok(None);
    }
    if !crate::inventory::served(host).await? {
        if let Some(ns) = &inv.inventory_namespace {
            bail!(
                "--inventory-namespace {ns}: host {:?} does not serve ClusterProfiles (run kubefedctl init --cluster-inventory)",
                host.context
            );
        }
        return Ok(None);
    }
    let ns = inv
        .inventory_namespace
        .clone()
        .unwrap_or_else(|| host.namespace.clone());
    let live = crate::inventory::profile_ref(host, &ns, &o.cluster_name)
        .get()
        .await?;
    if let Some(live) = live
        && !inventory::is_ours(&live)
    {
        tracing::warn!(
            "ClusterProfile {ns}/{} belongs to cluster manager {:?}: left alone, not published",
            o.cluster_name,
            inventory::manager_of(&live)
        );
        return Ok(None);
    }
    Ok(Some(ns))
}

/// Without `--error-on-existing=false`, a member or host that is already
/// joined is an error saying how to update the join instead.
async fn refuse_existing(
    o: &JoinOptions,
    names: &JoinNames,
    sa: &ObjectRef,
    cluster_exists: bool,
) -> Result<()> {
    if sa.get().await?.is_some() {
        bail!(
            "service account {} already exists in joining cluster {:?} (use --error-on-existing=false to update the join)",
            names.service_account,
            o.cluster_name
        );
    }
    if cluster_exists {
        bail!(
            "federated cluster {:?} already exists in host cluster (use --error-on-existing=false to update the join)",
            o.cluster_name
        );
    }
    Ok(())
}

/// The host Secret an existing join points at, when it is still there: a
/// re-join reuses it (upstream leaks a new one each time).
async fn joined_secret(host: &Host, existing_cluster: Option<&Value>) -> Result<Option<String>> {
    let Some(name) = existing_cluster.and_then(|c| c["spec"]["secretRef"]["name"].as_str()) else {
        return Ok(None);
    };
    let found = host
        .object(resource_of::<Secret>(), true, name)
        .get()
        .await?;
    Ok(found.map(|_| name.to_string()))
}

/// The member's objects with where they go, in creation order.
fn member_objects(plan: &Plan) -> Vec<(ObjectRef, Value)> {
    let ns = plan.host.namespace.as_str();
    let at = |resource, namespaced: bool, name: &str| {
        ObjectRef::new(
            &plan.member_label,
            &plan.member_client,
            resource,
            namespaced.then_some(ns),
            name,
        )
    };
    let sa = &plan.names.service_account;
    let mut out = vec![
        (
            at(resource_of::<Namespace>(), false, ns),
            membership::namespace(ns),
        ),
        (
            at(resource_of::<ServiceAccount>(), true, sa),
            membership::service_account(&plan.names, ns, plan.member_minor),
        ),
    ];
    // A token that never expires lives in a token Secret; a short-lived
    // one is issued on request, by an identity that may renew itself.
    let token_rbac = match plan.token_ttl {
        None => {
            out.push((
                at(resource_of::<Secret>(), true, sa),
                membership::token_secret(&plan.names, ns),
            ));
            Vec::new()
        }
        Some(_) => token::token_rbac(&plan.names, ns),
    };
    let rbac = membership::rbac(&plan.names, ns, plan.scope, plan.least_rules.as_deref());
    let consumers = plan.consumers.iter().flat_map(|c| {
        crate::inventory::consumer_targets(
            &plan.member_label,
            &plan.member_client,
            &plan.names,
            ns,
            c,
            &plan.consumer_role,
        )
    });
    let consumers: Vec<(ObjectRef, Value)> = consumers.collect();
    for obj in rbac.into_iter().chain(token_rbac) {
        let name = obj["metadata"]["name"].as_str().expect("named").to_string();
        let target = match obj["kind"].as_str() {
            Some("ClusterRole") => at(resource_of::<ClusterRole>(), false, &name),
            Some("ClusterRoleBinding") => at(resource_of::<ClusterRoleBinding>(), false, &name),
            Some("Role") => at(resource_of::<Role>(), true, &name),
            _ => at(resource_of::<RoleBinding>(), true, &name),
        };
        out.push((target, obj));
    }
    out.extend(consumers);
    out
}

async fn write(
    plan: &Plan,
    o: &JoinOptions,
    member_objects: &[(ObjectRef, Value)],
    journal: &mut Journal,
) -> Result<()> {
    for (target, body) in member_objects {
        let outcome = match target.resource.kind.as_str() {
            "Namespace" => ensure(target, body, &OnExisting::Keep, journal).await?.0,
            "RoleBinding" | "ClusterRoleBinding" => ensure_binding(target, body, journal).await?,
            _ => ensure(target, body, &OnExisting::Update, journal).await?.0,
        };
        println!("{}", outcome_line(target, outcome, WriteMode::Write));
    }
    let (data, lifetime) = member_token(plan, member_objects, o).await?;

    // The host Secret: the member's token, and its CA when known.
    let ns = plan.host.namespace.as_str();
    let mut host_data = json!({"token": data["token"]});
    let ca_b64 = plan
        .endpoint
        .ca_bundle
        .clone()
        .or_else(|| data["ca.crt"].as_str().map(str::to_string));
    if let Some(ca) = &ca_b64 {
        host_data["ca.crt"] = json!(ca);
    }
    let secret_name = match &plan.secret_name {
        Some(name) => {
            let target = plan.host.object(resource_of::<Secret>(), true, name);
            let body = membership::host_secret(Some(name), &o.cluster_name, ns, &host_data);
            // Replaced as upstream's join does: keys no longer wanted go.
            let (outcome, _) = ensure(&target, &body, &OnExisting::Replace, journal).await?;
            println!("{}", outcome_line(&target, outcome, WriteMode::Write));
            name.clone()
        }
        None => {
            let body = membership::host_secret(None, &o.cluster_name, ns, &host_data);
            let api: Api<DynamicObject> =
                Api::namespaced_with(plan.host.client.clone(), ns, &resource_of::<Secret>());
            let created = api
                .create(&PostParams::default(), &serde_json::from_value(body)?)
                .await
                .map_err(api_error)
                .context("creating the credentials secret in host")?;
            let name = created
                .metadata
                .name
                .clone()
                .ok_or_else(|| anyhow!("created secret has no name"))?;
            let target = plan.host.object(resource_of::<Secret>(), true, &name);
            journal.record(target.clone());
            println!(
                "{}",
                outcome_line(&target, Outcome::Created, WriteMode::Write)
            );
            name
        }
    };

    let mut endpoint = plan.endpoint.clone();
    endpoint.ca_bundle = ca_b64;
    let kfc_body = kubefed_cluster(plan, o, &secret_name, &endpoint, lifetime);
    let kfc = plan
        .host
        .object(resource_of::<KubeFedCluster>(), true, &o.cluster_name);
    // The spec is replaced as upstream's join does (`join.go`): fields no
    // longer wanted (e.g. disabledTLSValidations) disappear.
    let (outcome, written) = ensure(&kfc, &kfc_body, &OnExisting::Replace, journal).await?;
    println!("{}", outcome_line(&kfc, outcome, WriteMode::Write));
    publish_profile(plan, o, &written, journal).await
}

/// The member's token for the host Secret (`data` with `token`): the token
/// Secret's, filled by the member's token controller; or, with
/// `--token-ttl`, a bound token issued now, with its lifetime (a token
/// Secret of an earlier join is deleted: its token would never expire).
async fn member_token(
    plan: &Plan,
    member_objects: &[(ObjectRef, Value)],
    o: &JoinOptions,
) -> Result<(Value, Option<Lifetime>)> {
    Ok(match plan.token_ttl {
        None => {
            let token_secret = &member_objects[2].0;
            let timeout = o.token_timeout.unwrap_or(Duration::from_secs(30));
            (wait_for_token(token_secret, timeout).await?, None)
        }
        Some(ttl) => {
            let sa = &plan.names.service_account;
            let (token, lifetime) =
                crate::member_token::issue(&plan.member_client, &plan.host.namespace, sa, ttl)
                    .await?;
            // A token Secret of an earlier join would keep a token that
            // never expires valid: it goes.
            let legacy = ObjectRef::new(
                &plan.member_label,
                &plan.member_client,
                resource_of::<Secret>(),
                Some(&plan.host.namespace),
                sa,
            );
            if legacy
                .get()
                .await?
                .is_some_and(|s| s["type"] == "kubernetes.io/service-account-token")
            {
                legacy.delete().await?;
                println!("{} deleted ({})", legacy.short(), plan.member_label);
            }
            let b64 = base64::engine::general_purpose::STANDARD;
            (json!({"token": b64.encode(token)}), Some(lifetime))
        }
    })
}

/// The KubeFedCluster, annotated with the member's RBAC mode when it is
/// least privilege (or when a re-join takes that back), and with its
/// token's lifetime when it is short-lived.
fn kubefed_cluster(
    plan: &Plan,
    o: &JoinOptions,
    secret: &str,
    endpoint: &MemberEndpoint,
    lifetime: Option<Lifetime>,
) -> Value {
    let mut kfc =
        membership::kubefed_cluster(&o.cluster_name, &plan.host.namespace, secret, endpoint);
    let previous = plan
        .existing_cluster
        .as_ref()
        .map(|c| MemberRbac::of_cluster(c).0);
    let sa = &plan.names.service_account;
    let context = o.member.context(&o.cluster_name);
    let rbac = plan.rbac.cluster_annotations(sa, context, previous);
    let ttl_asked = plan.token_ttl.is_some();
    let life = token::join_annotations(ttl_asked, lifetime, plan.existing_cluster.as_ref(), sa);
    let inv = inventory_annotations(plan, o);
    for (key, value) in [rbac, life, inv]
        .into_iter()
        .flatten()
        .flat_map(|a| match a {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        })
    {
        kfc["metadata"]["annotations"][key] = value;
    }
    kfc
}

/// The KubeFedCluster's links to the inventory: the profile published for
/// it or the one it was joined from, and every consumer made in the member
/// (earlier joins' too, so that unjoin finds them all).
fn inventory_annotations(plan: &Plan, o: &JoinOptions) -> Option<Value> {
    let mut out = serde_json::Map::new();
    if let Some(ns) = &plan.profile_namespace {
        let r = format!("{ns}/{}", o.cluster_name);
        out.insert(inventory::PROFILE_ANNOTATION.into(), json!(r));
    }
    if let Some(r) = &o.inventory.from_cluster_profile {
        out.insert(inventory::FROM_PROFILE_ANNOTATION.into(), json!(r));
    }
    let mut consumers = plan
        .existing_cluster
        .as_ref()
        .map(crate::inventory::consumers_of)
        .unwrap_or_default();
    consumers.extend(plan.consumers.iter().cloned());
    consumers.sort();
    consumers.dedup();
    if !consumers.is_empty() {
        out.insert(
            inventory::CONSUMERS_ANNOTATION.into(),
            json!(consumers.join(",")),
        );
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// Publishes the member's ClusterProfile with its status from what join
/// just saw: the member answered, at this version.
async fn publish_profile(
    plan: &Plan,
    o: &JoinOptions,
    kfc: &Value,
    journal: &mut Journal,
) -> Result<()> {
    let Some(ns) = &plan.profile_namespace else {
        return Ok(());
    };
    let (outcome, profile) =
        crate::inventory::publish(&plan.host, ns, &o.cluster_name, journal).await?;
    let target = crate::inventory::profile_ref(&plan.host, ns, &o.cluster_name);
    println!("{}", outcome_line(&target, outcome, WriteMode::Write));
    let annotations: std::collections::BTreeMap<String, String> =
        serde_json::from_value(kfc["metadata"]["annotations"].clone()).unwrap_or_default();
    let labels: std::collections::BTreeMap<String, String> =
        serde_json::from_value(kfc["metadata"]["labels"].clone()).unwrap_or_default();
    let spec: crate::api::core::KubeFedClusterSpec = serde_json::from_value(kfc["spec"].clone())?;
    let subject = crate::inventory::Subject {
        cluster: &o.cluster_name,
        annotations: &annotations,
        labels: &labels,
        endpoint: crate::inventory::endpoint_of(&spec),
    };
    let health = crate::core::cluster::health::Health::Ready {
        version: plan.member_version.clone(),
    };
    let copy = crate::inventory::ProfileCopy::AtHand(Some(&profile));
    crate::inventory::write_status(&plan.host, &subject, &health, copy, &mut Default::default())
        .await?;
    Ok(())
}

/// Bindings cannot change their roleRef: a binding that points elsewhere
/// is deleted and made again.
pub(super) async fn ensure_binding(
    target: &ObjectRef,
    body: &Value,
    journal: &mut Journal,
) -> Result<Outcome> {
    if let Some(live) = target.get().await?
        && live["roleRef"] != body["roleRef"]
    {
        target.delete().await?;
        ensure(target, body, &OnExisting::Update, journal).await?;
        return Ok(Outcome::Updated);
    }
    Ok(ensure(target, body, &OnExisting::Update, journal).await?.0)
}

/// Waits (bounded, visibly) until the token controller has filled the
/// service account's token secret; returns its `data`.
async fn wait_for_token(secret: &ObjectRef, timeout: Duration) -> Result<Value> {
    let told = std::cell::Cell::new(false);
    let filled = crate::poll::poll_until(timeout, Duration::from_millis(500), || async {
        if let Some(s) = secret.get().await?
            && s["data"]["token"].as_str().is_some_and(|t| !t.is_empty())
        {
            return Ok(Some(s["data"].clone()));
        }
        if !told.replace(true) {
            tracing::info!(
                "waiting up to {timeout:?} for the token controller to fill {}",
                secret
            );
        }
        Ok(None)
    })
    .await?;
    filled.ok_or_else(|| {
        anyhow!(
            "the token controller of {:?} did not fill {} within {timeout:?} (is kube-controller-manager running there?)",
            secret.cluster,
            secret.short()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_are_validated() {
        assert!(validate_cluster_name("member1").is_ok());
        let e = validate_cluster_name("Member_1").unwrap_err().to_string();
        assert!(e.starts_with("invalid cluster name \"Member_1\""), "{e}");
    }

    #[test]
    fn host_names_come_from_flag_or_context() {
        assert_eq!(host_cluster_name(Some("hub"), "whatever@x").unwrap(), "hub");
        assert!(host_cluster_name(Some("a/b"), "h").is_err());
        assert_eq!(host_cluster_name(None, "host").unwrap(), "host");
        assert_eq!(host_cluster_name(None, "admin@hub").unwrap(), "admin-hub");
        assert!(host_cluster_name(None, "@@").is_err());
    }
}
