//! `kubefedctl agent --cluster CLUSTER`: a pull member's agent
//! (`join --mode pull` runs it as a Deployment in the member). The member
//! is the kubeconfig's context, or in a pod the pod's own identity; the
//! host is reached with `--host-kubeconfig`, the identity join made for
//! this member's agent, which may read its share and write only its
//! reports and its KubeFedCluster's status.

use crate::cmd::options::{GlobalOptions, parse_duration};
use crate::sync::agent::credential::HostCredential;
use crate::sync::agent::{self, AgentOptions as Engine, AgentRound};
use crate::terminal::output::DocumentFormat;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(
    after_help = "The member is the kubeconfig's context (--context), or, in a pod, the pod's
own service account; the host is reached with --host-kubeconfig only.

Examples:
  # in the member, as join --mode pull runs it
  kubefedctl agent --cluster edge1 \\
    --host-kubeconfig /etc/kubefedctl/host/kubeconfig
  # one round from a workstation, the member as context edge1
  kubefedctl agent --cluster edge1 --host-kubeconfig host.kubeconfig \\
    --context edge1 --once -o json"
)]
pub struct AgentOptions {
    /// The pull member this agent applies to: its KubeFedCluster's name
    #[arg(long, value_name = "CLUSTER")]
    pub cluster: String,

    /// Kubeconfig of the agent's host identity (join --mode pull writes it
    /// into the member's Secret kubefedctl-agent-host)
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub host_kubeconfig: PathBuf,

    /// Context in --host-kubeconfig [default: its current context]
    #[arg(long, value_name = "CONTEXT")]
    pub host_context: Option<String>,

    /// Only the federated objects of this namespace (and the member's
    /// copies there), as reconcile -n: for a member shared with other
    /// federations, whose copies it would otherwise take for orphans
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,

    /// Time between rounds (each reads the share, applies it, reports)
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub interval: Duration,

    /// One heartbeat and one round, then exit (3 when an object failed);
    /// it takes the member's lease first, waiting for a running agent's
    /// to expire at most 20s
    #[arg(long)]
    pub once: bool,

    /// Requests in flight to the member
    #[arg(long, value_name = "N", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub concurrency: u32,

    /// Renew the host token this long before it expires (as cert-manager's
    /// renewBefore) [default: a fifth of its lifetime]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub renew_before: Option<Duration>,

    /// With --once: print the round's report (yaml or json)
    #[arg(short = 'o', long = "output", value_name = "FORMAT", requires = "once")]
    pub output: Option<DocumentFormat>,
}

pub async fn run(global: &GlobalOptions, o: &AgentOptions) -> Result<()> {
    if o.interval < Duration::from_secs(1) {
        return Err(crate::error::usage("--interval must be at least 1s"));
    }
    let (factory, member) = global.connect_host().await?;
    let mut credential = HostCredential::read(
        &o.host_kubeconfig,
        o.host_context.as_deref(),
        factory.timeouts(),
    )?;
    if let Some(before) = o.renew_before {
        credential.renew_before(before)?;
    }
    let mut host = credential.connect(&global.kubefed_namespace).await?;
    let engine = Engine {
        cluster: o.cluster.clone(),
        namespace: o.namespace.clone(),
        timeout: global.request_limit().unwrap_or(Duration::from_secs(30)),
        concurrency: o.concurrency as usize,
        attempts: 3,
    };
    if o.once {
        let round = agent::once(&host, &member.client, &engine).await?;
        return finish_once(&round, o);
    }
    let mut signals = crate::terminal::signals::Signals::new()?;
    let both = (&mut host, &mut credential);
    let agent::Stopped(sig) =
        agent::run(both, &member.client, &engine, o.interval, &mut signals).await?;
    tracing::info!("agent of {}: stopped", engine.cluster);
    Err(crate::error::ExitWith {
        code: 128 + sig,
        message: "interrupted".into(),
    }
    .into())
}

/// `--once`: the report, and exit 3 when an object failed.
fn finish_once(round: &AgentRound, o: &AgentOptions) -> Result<()> {
    match o.output {
        Some(format) => crate::terminal::output::print(&round.report, format)?,
        None => {
            println!("{}", round.summary(&o.cluster));
            for n in &round.report.notes {
                eprintln!("{n}");
            }
        }
    }
    for f in &round.report.failures {
        tracing::warn!("{f}");
    }
    if round.report.failures.is_empty() {
        return Ok(());
    }
    Err(crate::error::ExitWith {
        code: 3,
        message: format!(
            "{} object(s) or member(s) failed",
            round.report.failures.len()
        ),
    }
    .into())
}
