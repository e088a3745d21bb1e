//! `kubefedctl rollout approve TYPE/NAME -n NS [--wave N]`: a wave of a
//! progressive rollout that asks for an approval (`"approval": true`)
//! approved for the version in progress, by the requester the API server
//! names (kubefedctl issue #67). The decision is the core's
//! (`core::propagation::rollout::approve`); this reads the federated
//! object and its PropagatedVersion, asks who we are, and records the
//! approval beside the rollout's record; the next run or the watch goes on.

use crate::apply::{WriteMode, api_error, dynamic_api, resource_of};
use crate::cmd::options::GlobalOptions;
use crate::core::describe::{ObjectKey, describe_key};
use crate::core::events::record::{Event, EventType, InvolvedObject, sync_component};
use crate::core::propagation::rollout::{
    self as core_rollout, APPROVALS_ANNOTATION, Approval, ApproveRequest, Approved, Identity,
    RolloutPolicy, RolloutRecord,
};
use crate::error::{EXIT_PARTIAL, ExitWith, usage};
use anyhow::Result;
use clap::{Args, Subcommand};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

#[derive(Args, Debug)]
pub struct RolloutOptions {
    #[command(subcommand)]
    pub action: RolloutAction,
}

#[derive(Subcommand, Debug)]
pub enum RolloutAction {
    /// Approve the wave a progressive rollout awaits, for the version in progress
    Approve(ApproveOptions),
}

#[derive(Args, Debug)]
#[command(
    mut_arg("dry_run", |a| a.help("Say what would be approved, writing nothing (=client: decided here)")),
    after_help = "TYPE is the federated type as status names it: configmaps,
deployments.apps, FederatedDeployment. The approval is recorded in the
annotation kubefedctl.kubefed.io/rollout-approvals of the object's
PropagatedVersion, with the user the API server names (SelfSubjectReview;
servers before 1.27: the kubeconfig's, marked unconfirmed), and holds for
the version in progress only: a new template needs a new approval.

Exit codes: 0 approved (or approved before); 2 a --wave the rollout has
no gate for; 3 the object has no rollout awaiting an approval.

Examples:
  kubefedctl rollout approve deployments.apps/web -n shop
  kubefedctl rollout approve configmaps/settings -n shop --wave 3"
)]
pub struct ApproveOptions {
    /// The federated object: TYPE/NAME
    #[arg(value_name = "TYPE/NAME")]
    pub object: String,
    /// Namespace of the object [default: the context's namespace, else default]
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// The wave to approve, as messages number it (1: the first) [default: the one the rollout awaits]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub wave: Option<u16>,
    #[command(flatten)]
    pub dry_run: crate::cmd::options::DryRunFlag,
}

pub async fn run(global: &GlobalOptions, o: &RolloutOptions) -> Result<()> {
    match &o.action {
        RolloutAction::Approve(a) => approve(global, a).await,
    }
}

/// TYPE/NAME, checked before anything is read.
fn validate(o: &ApproveOptions) -> Result<(&str, &str)> {
    let Some((type_name, name)) = o.object.split_once('/') else {
        return Err(usage(format!(
            "{:?}: give the object as TYPE/NAME (configmaps/settings)",
            o.object
        )));
    };
    if type_name.is_empty() {
        return Err(usage(format!("{:?}: TYPE is empty", o.object)));
    }
    if let Some(why) = crate::core::names::subdomain_error(name) {
        return Err(usage(format!("{:?}: NAME {why}", o.object)));
    }
    Ok((type_name, name))
}

/// An error of the object (exit 3), naming it; nothing is written.
fn failed(what: &str, why: impl std::fmt::Display) -> anyhow::Error {
    ExitWith {
        code: EXIT_PARTIAL,
        message: format!("{what}: {why}; nothing written"),
    }
    .into()
}

async fn approve(global: &GlobalOptions, o: &ApproveOptions) -> Result<()> {
    let (type_name, name) = validate(o)?;
    let (factory, host) = global.connect_host().await?;
    let ftcs = host.type_configs().await?;
    let t = crate::sync::run::observe::ObservedType::of(the_type(&ftcs, type_name)?);
    let config = factory.config(&host.context).await?;
    let namespace = match (t.ty.namespaced, &o.namespace) {
        (false, _) => String::new(),
        (true, Some(ns)) => ns.clone(),
        (true, None) => config.default_namespace.clone(),
    };
    let what = describe_key(&t.federated.kind, &ObjectKey::new(&namespace, name));
    let fed_api = dynamic_api(&host.client, Some(&namespace), &t.federated);
    let Some(fed) = fed_api.get_opt(name).await.map_err(api_error)? else {
        return Err(failed(&what, "not found"));
    };
    let fed = serde_json::to_value(fed)?;
    let who = crate::clients::identity::requester(
        &host.client,
        factory.kubeconfig(),
        (&host.context, &config),
    )
    .await?;
    let pv_name = crate::core::propagation::version::propagated_version_name(&t.target.kind, name);
    let pv_ar = match t.ty.namespaced {
        true => resource_of::<crate::api::core::PropagatedVersion>(),
        false => resource_of::<crate::api::core::ClusterPropagatedVersion>(),
    };
    let pv_api = dynamic_api(&host.client, Some(&namespace), &pv_ar);
    let Some(approval) = record(&pv_api, &pv_name, (&what, &fed), o, &who).await? else {
        return Ok(());
    };
    said(&host, &t.federated.kind, &fed, &approval).await;
    println!("{what}: {approval}; the next run or the watch goes on");
    Ok(())
}

/// The one FederatedTypeConfig TYPE names; none or several is a usage error.
fn the_type<'f>(
    ftcs: &'f [crate::api::core::FederatedTypeConfig],
    type_name: &str,
) -> Result<&'f crate::api::core::FederatedTypeConfig> {
    let found: Vec<_> = (ftcs.iter())
        .filter(|f| crate::clients::host::names_federated_type(f, type_name))
        .collect();
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err(usage(format!(
            "no federated type {type_name:?} (see kubefedctl status types)"
        ))),
        _ => Err(usage(format!(
            "{type_name:?} names several federated types: use the FederatedTypeConfig's name"
        ))),
    }
}

/// The approval decided and written over the PropagatedVersion it was
/// decided from (a run may write it meanwhile: then decided again), or
/// said and not written (`None`: given before, or a dry run).
async fn record(
    pv_api: &kube::Api<kube::api::DynamicObject>,
    pv_name: &str,
    (what, fed): (&str, &Value),
    o: &ApproveOptions,
    who: &Identity,
) -> Result<Option<Approval>> {
    for _ in 0..3 {
        let pv = pv_api.get_opt(pv_name).await.map_err(api_error)?;
        let pv = pv.map(serde_json::to_value).transpose()?;
        let (wave, list) = match decide(what, fed, pv.as_ref(), o.wave, who)? {
            Approved::Already(given) => {
                println!("{what}: {given} already; nothing written");
                return Ok(None);
            }
            Approved::New { wave, list } => (wave, list),
        };
        let mine = list.iter().find(|a| a.wave == wave).expect("approved");
        if o.dry_run.mode() == WriteMode::DryRun {
            println!("{what}: {mine} (dry run)");
            return Ok(None);
        }
        let rv = pv
            .as_ref()
            .map(|p| p["metadata"]["resourceVersion"].clone());
        let patch = json!({"metadata": {"resourceVersion": rv,
            "annotations": {APPROVALS_ANNOTATION: core_rollout::approvals_text(&list)}}});
        match (pv_api)
            .patch(pv_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(Some(mine.clone())),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(failed(what, crate::error::one_line(&api_error(e)))),
        }
    }
    Err(failed(
        what,
        "its PropagatedVersion kept changing while the approval was written; try again",
    ))
}

/// The core's decision for `fed` and its PropagatedVersion `pv`: a
/// `--wave` the object cannot take is a usage error (exit 2), anything
/// else refused is the object's (exit 3).
fn decide(
    what: &str,
    fed: &Value,
    pv: Option<&Value>,
    wave: Option<u16>,
    who: &Identity,
) -> Result<Approved> {
    let policy = RolloutPolicy::of_object(fed).map_err(|e| {
        failed(
            what,
            format!(
                "annotation {}: {}",
                core_rollout::ROLLOUT_ANNOTATION,
                e.problem
            ),
        )
    })?;
    let target = core_rollout::target_of(fed)
        .ok_or_else(|| failed(what, "its template or overrides cannot be hashed"))?;
    let record: Option<RolloutRecord> = match pv.and_then(core_rollout::record_text) {
        Some(text) => Some(RolloutRecord::parse(text).map_err(|e| failed(what, e))?),
        None => None,
    };
    // Unreadable approvals are replaced (a run counts none of them).
    let existing: Vec<Approval> = (pv.and_then(core_rollout::approvals_of))
        .and_then(|text| core_rollout::parse_approvals(text).ok())
        .unwrap_or_default();
    let request = ApproveRequest {
        policy: policy.as_ref(),
        record: record.as_ref(),
        target: &target,
        wave: wave.map(usize::from),
        existing: &existing,
    };
    let now = crate::clock::now_unix();
    core_rollout::approve(request, who, now).map_err(|e| match e.is_usage() {
        true => usage(format!("{what}: {e}; nothing written")),
        false => failed(what, e),
    })
}

/// A Normal Event `RolloutApproved` on the federated object (best-effort,
/// as every Event).
async fn said(host: &crate::clients::host::Host, kind: &str, fed: &Value, a: &Approval) {
    let event = Event {
        involved: InvolvedObject::of(fed),
        event_type: EventType::Normal,
        reason: "RolloutApproved".into(),
        message: a.to_string(),
        component: sync_component(kind),
    };
    let recorder = crate::sync::passes::events::Recorder::new();
    let _ = recorder.record(host, vec![event]).await;
}
