//! `join CLUSTER --mode pull` (issue #68): a member the host neither
//! reaches nor holds a credential for. The host gets the PropagationReport
//! CRD, the agent's account, its report namespace and roles, and a
//! KubeFedCluster that says pull and whose `secretRef` names a Secret that
//! is never written; the member gets the agent: its identity (as a push
//! member's, `--rbac`), a Secret with a kubeconfig holding a short-lived
//! token of the agent's host account, and its Deployment. What each side
//! gets is `core::cluster::pull`'s. The host is written first: the
//! member's Secret holds a token the host issues. A failure part-way takes
//! back what this run created, in both clusters, as a push join does.

use super::{JoinOptions, endpoint_of, ensure_binding};
use crate::api::core::KubeFedCluster;
use crate::apply::{
    Journal, ObjectRef, OnExisting, WriteMode, api_error, ensure, outcome_line, preview,
    resource_of,
};
use crate::clients::host::Host;
use crate::cmd::options::GlobalOptions;
use crate::core::cluster::membership::{MemberEndpoint, Scope, is_loopback_endpoint};
use crate::core::cluster::pull::{
    self, AGENT, DEFAULT_TOKEN_TTL_SECONDS, PullMember, TOKEN_PLACEHOLDER, is_pull_value,
    report_namespace_problem,
};
use crate::core::cluster::rbac::MemberRbac;
use crate::core::cluster::token::Lifetime;
use crate::core::run::reconciler::FederatedResource;
use crate::pull_member::{ensure_report_crd, issue_host_token, target};
use crate::terminal::output::{DocumentFormat, on_stdout, print_objects, render};
use anyhow::{Context, Result, bail};
use base64::Engine;
use k8s_openapi::api::core::v1::ServiceAccount;
use serde_json::Value;
use std::io::Write;

/// What a pull member cannot use, and what it needs: a usage error before
/// anything is read.
pub(super) fn validate(o: &JoinOptions, kubefed_namespace: &str) -> Result<()> {
    if o.image.as_deref().is_none_or(str::is_empty) {
        bail!(
            "--mode pull needs --image: the container image holding kubefedctl that the member's agent runs"
        );
    }
    let push_only = [
        ("--secret-name", o.secret_name.is_some()),
        ("--token-timeout", o.token_timeout.is_some()),
        ("--host-cluster-name", o.member.host_cluster_name.is_some()),
        (
            "--from-cluster-profile",
            o.inventory.from_cluster_profile.is_some(),
        ),
        (
            "--inventory-namespace",
            o.inventory.inventory_namespace.is_some(),
        ),
        ("--consumer", !o.inventory.consumer.is_empty()),
    ];
    if let Some((flag, _)) = push_only.iter().find(|(_, given)| *given) {
        bail!(
            "{flag} is for a push member: with --mode pull the host holds no credential for the member"
        );
    }
    if let Some(problem) = report_namespace_problem(kubefed_namespace, &o.cluster_name) {
        bail!("{problem}");
    }
    if let Some(url) = &o.host_endpoint
        && !(url.starts_with("https://") || url.starts_with("http://"))
    {
        bail!("invalid --host-endpoint {url:?}: expected https://HOST[:PORT]");
    }
    Ok(())
}

/// Everything a pull join needs to know before writing anything.
struct Plan {
    host: Host,
    member_label: String,
    member_client: kube::Client,
    scope: Scope,
    types: Vec<FederatedResource>,
    rbac: MemberRbac,
    /// `--rbac least`: the main role's rules, from the enabled types.
    least_rules: Option<Vec<Value>>,
    /// The agent's host token lifetime, in seconds.
    ttl: i64,
    /// The member as its kubeconfig context says (informational on the
    /// KubeFedCluster: the host never connects).
    endpoint: MemberEndpoint,
    /// The host as the agent reaches it: server, CA (base64), and whether
    /// TLS is not verified.
    host_server: String,
    host_ca: Option<String>,
    host_insecure: bool,
}

impl Plan {
    fn member<'a>(&'a self, o: &'a JoinOptions) -> PullMember<'a> {
        PullMember {
            cluster: &o.cluster_name,
            kubefed_namespace: &self.host.namespace,
            scope: self.scope,
            types: self.types.clone(),
            image: o.image.as_deref().unwrap_or_default(),
            member_rules: self.least_rules.clone(),
            objects_namespace: o.agent_objects_namespace.as_deref(),
        }
    }

    fn kubeconfig(&self, token: &str) -> String {
        pull::host_kubeconfig(
            &self.host_server,
            self.host_ca.as_deref(),
            self.host_insecure,
            token,
        )
    }

    /// `issued`: the token's lifetime (`None` in a preview or a print).
    fn kubefed_cluster(&self, o: &JoinOptions, issued: Option<Lifetime>) -> Value {
        let context = o.member.context(&o.cluster_name);
        let annotations = pull::cluster_annotations(self.rbac, context, self.ttl, issued);
        pull::kubefed_cluster(
            &o.cluster_name,
            &self.host.namespace,
            &self.endpoint,
            annotations,
        )
    }

    fn host_targets(&self, o: &JoinOptions) -> Result<Vec<(ObjectRef, Value)>> {
        let objects = self.member(o).host_objects();
        (objects.into_iter())
            .map(|obj| Ok((target("host", &self.host.client, &obj)?, obj)))
            .collect()
    }

    fn member_targets(&self, o: &JoinOptions, token: &str) -> Result<Vec<(ObjectRef, Value)>> {
        let objects = self.member(o).member_objects(&self.kubeconfig(token));
        let (label, client) = (&self.member_label, &self.member_client);
        (objects.into_iter())
            .map(|obj| Ok((target(label, client, &obj)?, obj)))
            .collect()
    }
}

pub(super) async fn join(global: &GlobalOptions, o: &JoinOptions) -> Result<()> {
    let plan = prepare(global, o).await?;
    if let Some(format) = o.output {
        return print(&plan, o, format);
    }
    if o.dry_run.mode().is_dry_run() {
        return preview_join(&plan, o).await;
    }
    let mut journal = Journal::default();
    match write(&plan, o, &mut journal).await {
        Ok(()) => {
            println!(
                "Cluster {:?} joined host {:?} as a pull member ({} federation; its agent {}/{AGENT} reports to namespace {} of the host).",
                o.cluster_name,
                plan.host.context,
                match plan.scope {
                    Scope::Cluster => "cluster-scoped",
                    Scope::Namespaced => "namespace-scoped",
                },
                plan.host.namespace,
                pull::report_namespace(&plan.host.namespace, &o.cluster_name),
            );
            Ok(())
        }
        Err(e) => Err(super::rolled_back(e, journal, &o.cluster_name).await),
    }
}

async fn prepare(global: &GlobalOptions, o: &JoinOptions) -> Result<Plan> {
    let (factory, host) = global.connect_host().await?;
    host.require_initialised().await?;
    let scope = host.scope().await?;
    let member_factory = o.member.factory(&factory, global)?;
    let context = o.member.context(&o.cluster_name);
    let endpoint = endpoint_of(&member_factory.endpoint(context).await?);
    let member_client = member_factory.client(context).await?;
    member_client
        .apiserver_version()
        .await
        .map_err(api_error)
        .with_context(|| format!("reading the version of cluster {:?}", o.cluster_name))?;
    refuse_existing(o, &host, &member_client).await?;
    let rbac = MemberRbac::from(o.rbac);
    let least_rules = match rbac {
        MemberRbac::Admin => None,
        MemberRbac::Least => {
            let resources = crate::member_rbac::synced_resources(&host).await?;
            Some(crate::member_rbac::rules(&host, scope, &resources).await?)
        }
    };
    let types = crate::pull_member::federated_resources(&host).await?;
    let host_ep = factory.endpoint(&host.context).await?;
    let host_server = o.host_endpoint.clone().unwrap_or(host_ep.server);
    if is_loopback_endpoint(&host_server) {
        tracing::warn!(
            "host endpoint {host_server} is only reachable from this machine; an agent running in cluster {:?} could not reach it (set --host-endpoint)",
            o.cluster_name
        );
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    Ok(Plan {
        member_label: o.cluster_name.clone(),
        member_client,
        scope,
        types,
        rbac,
        least_rules,
        ttl: o
            .token_ttl
            .map_or(DEFAULT_TOKEN_TTL_SECONDS, |d| d.as_secs() as i64),
        endpoint,
        host_server,
        host_ca: host_ep.ca_pem.map(|pem| b64.encode(pem)),
        host_insecure: host_ep.insecure_skip_tls_verify,
        host,
    })
}

/// A push member is not turned into a pull one (unjoin first); without
/// `--error-on-existing=false`, a member joined already is an error saying
/// how to update the join instead.
async fn refuse_existing(o: &JoinOptions, host: &Host, member: &kube::Client) -> Result<()> {
    let existing = host
        .object(resource_of::<KubeFedCluster>(), true, &o.cluster_name)
        .get()
        .await?;
    if let Some(c) = &existing
        && !is_pull_value(c)
    {
        bail!(
            "cluster {:?} is joined as a push member: kubefedctl unjoin {} first to join it in pull mode",
            o.cluster_name,
            o.cluster_name
        );
    }
    if !o.error_on_existing {
        return Ok(());
    }
    let ns = Some(host.namespace.as_str());
    let sa = ObjectRef::new(
        &o.cluster_name,
        member,
        resource_of::<ServiceAccount>(),
        ns,
        AGENT,
    );
    if sa.get().await?.is_some() {
        bail!(
            "service account {AGENT} already exists in joining cluster {:?} (use --error-on-existing=false to update the join)",
            o.cluster_name
        );
    }
    if existing.is_some() {
        bail!(
            "federated cluster {:?} already exists in host cluster (use --error-on-existing=false to update the join)",
            o.cluster_name
        );
    }
    Ok(())
}

/// The host (the CRD, the agent's account and roles, a token, the
/// KubeFedCluster), then the member.
async fn write(plan: &Plan, o: &JoinOptions, journal: &mut Journal) -> Result<()> {
    let mode = WriteMode::Write;
    let (crd, outcome) = ensure_report_crd(&plan.host, mode, journal).await?;
    println!("{}", outcome_line(&crd, outcome, mode));
    for (target, body) in plan.host_targets(o)? {
        put(&target, &body, journal).await?;
    }
    let (token, life) = issue_host_token(&plan.host, &o.cluster_name, plan.ttl).await?;
    let kfc_body = plan.kubefed_cluster(o, Some(life));
    let kfc = target("host", &plan.host.client, &kfc_body)?;
    // The spec replaced as a push join replaces it.
    let (outcome, _) = ensure(&kfc, &kfc_body, &OnExisting::Replace, journal).await?;
    println!("{}", outcome_line(&kfc, outcome, mode));
    for (target, body) in plan.member_targets(o, &token)? {
        put(&target, &body, journal).await?;
    }
    Ok(())
}

/// One object as join writes it: a namespace kept as it is, a binding made
/// again when its role changed, anything else brought in line.
async fn put(target: &ObjectRef, body: &Value, journal: &mut Journal) -> Result<()> {
    let outcome = match target.resource.kind.as_str() {
        "Namespace" => ensure(target, body, &OnExisting::Keep, journal).await?.0,
        "RoleBinding" | "ClusterRoleBinding" => ensure_binding(target, body, journal).await?,
        _ => ensure(target, body, &OnExisting::Update, journal).await?.0,
    };
    println!("{}", outcome_line(target, outcome, WriteMode::Write));
    Ok(())
}

/// `--dry-run`: what would change in the host, then in the member.
async fn preview_join(plan: &Plan, o: &JoinOptions) -> Result<()> {
    let mode = WriteMode::DryRun;
    let (crd, outcome) = ensure_report_crd(&plan.host, mode, &mut Journal::default()).await?;
    println!("{}", outcome_line(&crd, outcome, mode));
    let mut all = plan.host_targets(o)?;
    let kfc = plan.kubefed_cluster(o, None);
    all.push((target("host", &plan.host.client, &kfc)?, kfc));
    all.extend(plan.member_targets(o, TOKEN_PLACEHOLDER)?);
    for (target, body) in &all {
        let policy = match target.resource.kind.as_str() {
            "Namespace" => OnExisting::Keep,
            "KubeFedCluster" => OnExisting::Replace,
            _ => OnExisting::Update,
        };
        let outcome = preview(target, body, &policy).await?;
        println!("{}", outcome_line(target, outcome, mode));
    }
    Ok(())
}

/// `-o yaml|json`: the host's objects, then the member's, for GitOps. The
/// member Secret's kubeconfig holds [`TOKEN_PLACEHOLDER`], not a token
/// (as a push join's `-o` prints the host Secret without its data):
/// `kubefedctl rotate CLUSTER` writes a real one once both sides are
/// applied. YAML says in a comment where each part goes; JSON prints two
/// Lists, the host's first.
fn print(plan: &Plan, o: &JoinOptions, format: DocumentFormat) -> Result<()> {
    let mut host = vec![crate::core::propagation::report::crd()];
    host.extend(plan.member(o).host_objects());
    host.push(plan.kubefed_cluster(o, None));
    let member = plan
        .member(o)
        .member_objects(&plan.kubeconfig(TOKEN_PLACEHOLDER));
    if format == DocumentFormat::Json {
        print_objects(&host, format)?;
        return print_objects(&member, format);
    }
    let host_note = format!(
        "# To the host cluster (context {:?}): pull member {:?}\n",
        plan.host.context, o.cluster_name
    );
    let member_note = format!(
        "# To member cluster {:?} (context {:?}): its agent. Secret {} holds no\n# token: once both parts are applied, kubefedctl rotate {} writes one.\n",
        o.cluster_name,
        o.member.context(&o.cluster_name),
        pull::HOST_SECRET,
        o.cluster_name
    );
    let mut text = String::new();
    for (note, objects) in [(host_note, &host), (member_note, &member)] {
        for (i, obj) in objects.iter().enumerate() {
            text.push_str("---\n");
            if i == 0 {
                text.push_str(&note);
            }
            text.push_str(&render(obj, format)?);
        }
    }
    let mut out = std::io::stdout().lock();
    on_stdout(
        (out.write_all(text.as_bytes()).and_then(|()| out.flush())).map_err(anyhow::Error::from),
    )
}
