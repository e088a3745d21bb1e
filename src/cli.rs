//! The command tree, global options, and the way errors become exit codes.

use crate::cmd::options::GlobalOptions;
use crate::error::{EXIT_OK, exit_code, one_line};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "kubefedctl",
    about = "kubefedctl controls a Kubernetes Cluster Federation",
    long_about = "kubefedctl controls a Kubernetes Cluster Federation (KubeFed v0.10's API).\n\n\
                  Also installed as the kubectl plugin `kubectl fed`.",
    disable_version_flag = true,
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalOptions,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Prepare a host cluster for federation: namespace, KubeFed's CRDs, KubeFedConfig
    Init(crate::cmd::init::InitOptions),
    /// Stop federating an API type; optionally delete its federated CRD
    Disable(crate::cmd::disable::DisableOptions),
    /// Federate an API type: generate its Federated<Kind> CRD and FederatedTypeConfig
    Enable(crate::cmd::enable::EnableOptions),
    /// Turn existing resources (or files, or a namespace with its contents) into federated resources
    Federate(crate::cmd::federate::FederateOptions),
    /// Register a member cluster with the host cluster
    Join(crate::cmd::join::JoinOptions),
    /// Keep (enable) or delete (disable) member copies when a federated object is deleted
    OrphaningDeletion(crate::cmd::orphaning::OrphaningOptions),
    /// Propagate federated resources to member clusters once (live), or render them offline (--from)
    Reconcile(Box<crate::cmd::reconcile::ReconcileOptions>),
    /// Issue new short-lived tokens for members joined with --token-ttl
    Rotate(crate::cmd::rotate::RotateOptions),
    /// Show clusters, federated types and per-cluster propagation
    Status(crate::cmd::status::StatusOptions),
    /// Remove a member cluster from the federation
    Unjoin(crate::cmd::unjoin::UnjoinOptions),
    /// Print the client version
    Version(crate::cmd::version::VersionOptions),
    /// Print a shell completion script (bash, zsh, fish, powershell)
    Completion(crate::cmd::completion::CompletionOptions),
}

/// Entry point of every binary: `kubefedctl`, or `kubectl fed` as a plugin.
pub fn main(bin_name: &str) -> ExitCode {
    crate::terminal::output::quiet_broken_pipes();
    crate::terminal::completion::complete_from_env(Cli::command);
    let mut cmd = Cli::command().bin_name(bin_name);
    // Bare, as kubefedctl v0.10 (cobra) does: the help, exit 0.
    if std::env::args_os().len() == 1 {
        let _ = cmd.print_help();
        return ExitCode::from(EXIT_OK);
    }
    let matches = match cmd.try_get_matches() {
        Ok(m) => m,
        Err(e) => e.exit(),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    crate::terminal::logging::init(cli.global.verbosity, cli.global.log_format);
    match run(cli) {
        Ok(()) => ExitCode::from(EXIT_OK),
        Err(err) if err.is::<crate::terminal::output::StdoutClosed>() => ExitCode::from(EXIT_OK),
        Err(err) => {
            eprintln!("error: {}", one_line(&err));
            ExitCode::from(exit_code(&err))
        }
    }
}

/// Runs a parsed command line. Commands that talk to clusters are `async`
/// and run on one tokio runtime made here.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    let global = &cli.global;
    match cli.command {
        Command::Version(o) => crate::cmd::version::run(&o),
        Command::Completion(o) => crate::cmd::completion::run(&o),
        command => runtime()?.block_on(async move {
            match command {
                Command::Init(o) => crate::cmd::init::run(global, &o).await,
                Command::Disable(o) => crate::cmd::disable::run(global, &o).await,
                Command::OrphaningDeletion(o) => crate::cmd::orphaning::run(global, &o).await,
                Command::Enable(o) => crate::cmd::enable::run(global, &o).await,
                Command::Federate(o) => crate::cmd::federate::run(global, &o).await,
                Command::Join(o) => crate::cmd::join::run(global, &o).await,
                Command::Reconcile(o) => crate::cmd::reconcile::run(global, &o).await,
                Command::Status(o) => crate::cmd::status::run(global, &o).await,
                Command::Unjoin(o) => crate::cmd::unjoin::run(global, &o).await,
                Command::Rotate(o) => crate::cmd::rotate::run(global, &o).await,
                Command::Version(_) | Command::Completion(_) => unreachable!("run above"),
            }
        }),
    }
}

/// A tokio runtime for commands that talk to clusters.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_tree_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_parse_after_the_subcommand() {
        let cli = Cli::try_parse_from([
            "kubefedctl",
            "version",
            "--kubeconfig",
            "/k",
            "--host-cluster-context",
            "h",
            "--kubefed-namespace",
            "fed",
            "-v",
            "4",
        ])
        .unwrap();
        assert_eq!(cli.global.kubeconfig, Some(std::path::PathBuf::from("/k")));
        assert_eq!(cli.global.host_cluster_context.as_deref(), Some("h"));
        assert_eq!(cli.global.kubefed_namespace, "fed");
        assert_eq!(cli.global.verbosity, 4);
        // kubectl's `--context` names the same flag.
        let c = Cli::try_parse_from(["kubefedctl", "status", "--context", "k"]).unwrap();
        assert_eq!(c.global.host_cluster_context.as_deref(), Some("k"));
        let both = Cli::try_parse_from([
            "kubefedctl",
            "status",
            "--context",
            "k",
            "--host-cluster-context",
            "h",
        ]);
        assert!(both.is_err(), "one flag given twice is refused");
        let d = Cli::try_parse_from(["kubefedctl", "version"]).unwrap();
        assert_eq!(
            d.global.kubefed_namespace,
            crate::api::DEFAULT_KUBEFED_NAMESPACE
        );
    }
}
