//! The command tree, global options, and the way errors become exit codes.

use crate::client::{ClientFactory, Timeouts};
use crate::error::{EXIT_OK, exit_code, one_line};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use clap_complete::ArgValueCompleter;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The default kubefed system namespace, as KubeFed's.
pub const DEFAULT_KUBEFED_NAMESPACE: &str = "kube-federation-system";

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

/// Options every command accepts, spelled as kubectl and KubeFed spell them.
#[derive(Args, Debug, Clone)]
pub struct GlobalOptions {
    /// Path to the kubeconfig file (default: $KUBECONFIG, merged, else ~/.kube/config)
    #[arg(long, global = true, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub kubeconfig: Option<PathBuf>,

    /// Context of the host cluster in the kubeconfig (default: the current context)
    #[arg(long, global = true, value_name = "CONTEXT",
          add = ArgValueCompleter::new(crate::completion::complete_context))]
    pub host_cluster_context: Option<String>,

    /// Namespace of the federation's own objects in the host cluster
    #[arg(long, global = true, value_name = "NAMESPACE", default_value = DEFAULT_KUBEFED_NAMESPACE)]
    pub kubefed_namespace: String,

    /// Time to wait for any one API request, e.g. 30s, 2m (0 = no limit)
    #[arg(long, global = true, value_name = "DURATION", default_value = "30s",
          value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// Diagnostics on stderr: 0 warnings, 2 progress, 4 debug, 6 every request
    #[arg(
        short = 'v',
        long = "verbosity",
        global = true,
        value_name = "LEVEL",
        default_value_t = 0
    )]
    pub verbosity: u8,
}

impl GlobalOptions {
    /// Loads the kubeconfig and returns a factory for clients of its contexts.
    pub fn client_factory(&self) -> anyhow::Result<ClientFactory> {
        let kubeconfig = crate::kubeconfig::load(self.kubeconfig.as_deref())?;
        let read = if self.request_timeout.is_zero() {
            Duration::from_secs(24 * 3600)
        } else {
            self.request_timeout
        };
        Ok(ClientFactory::new(
            kubeconfig,
            Timeouts {
                connect: read.min(Duration::from_secs(10)),
                read,
            },
        ))
    }
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
    Reconcile(crate::cmd::reconcile::ReconcileOptions),
    /// Show clusters, federated types and per-cluster propagation
    Status(crate::cmd::status::StatusOptions),
    /// Remove a member cluster from the federation
    Unjoin(crate::cmd::unjoin::UnjoinOptions),
    /// Print the client version
    Version(crate::cmd::version::VersionOptions),
    /// Print a shell completion script (bash, zsh, fish, powershell)
    Completion(crate::cmd::completion::CompletionOptions),
}

/// Parses durations the way kubectl's `--request-timeout` does: a number of
/// seconds, or numbers with `ms`, `s`, `m` or `h`, one after another as Go
/// writes them (`1m30s`, `1.5h`, `250ms`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let invalid = || format!("invalid duration {text:?} (examples: 30s, 500ms, 2m, 1m30s)");
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return seconds(t.parse().map_err(|_| invalid())?, text);
    }
    let mut rest = t;
    let mut total = 0.0f64;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(invalid)?;
        let n: f64 = rest[..digits].parse().map_err(|_| invalid())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => {
                return Err(format!(
                    "invalid duration unit in {text:?} (use ms, s, m or h)"
                ));
            }
        };
        total += n * scale;
        rest = &rest[unit_len..];
    }
    if t.is_empty() {
        return Err(invalid());
    }
    seconds(total, text)
}

fn seconds(secs: f64, text: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(secs).map_err(|_| format!("duration {text:?} is too long"))
}

/// Entry point of every binary: `kubefedctl`, or `kubectl fed` as a plugin.
pub fn main(bin_name: &str) -> ExitCode {
    crate::output::quiet_broken_pipes();
    crate::completion::complete_from_env();
    let cmd = Cli::command().bin_name(bin_name);
    let matches = match cmd.try_get_matches() {
        Ok(m) => m,
        Err(e) => e.exit(),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    init_diagnostics(cli.global.verbosity);
    match run(cli) {
        Ok(()) => ExitCode::from(EXIT_OK),
        Err(err) if err.is::<crate::output::StdoutClosed>() => ExitCode::from(EXIT_OK),
        Err(err) => {
            eprintln!("error: {}", one_line(&err));
            ExitCode::from(exit_code(&err))
        }
    }
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Init(o) => crate::cmd::init::run(&cli.global, &o),
        Command::Disable(o) => crate::cmd::disable::run(&cli.global, &o),
        Command::OrphaningDeletion(o) => crate::cmd::orphaning::run(&cli.global, &o),
        Command::Enable(o) => crate::cmd::enable::run(&cli.global, &o),
        Command::Federate(o) => crate::cmd::federate::run(&cli.global, &o),
        Command::Join(o) => crate::cmd::join::run(&cli.global, &o),
        Command::Reconcile(o) => crate::cmd::reconcile::run(&cli.global, &o),
        Command::Status(o) => crate::cmd::status::run(&cli.global, &o),
        Command::Unjoin(o) => crate::cmd::unjoin::run(&cli.global, &o),
        Command::Version(o) => crate::cmd::version::run(&o),
        Command::Completion(o) => crate::cmd::completion::run(&o),
    }
}

/// A tokio runtime for commands that talk to clusters.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

fn init_diagnostics(verbosity: u8) {
    use tracing::Level;
    let level = match verbosity {
        0 | 1 => Level::WARN,
        2 | 3 => Level::INFO,
        4 | 5 => Level::DEBUG,
        _ => Level::TRACE,
    };
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_target(verbosity >= 4)
        .with_ansi(false)
        .without_time()
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_tree_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations_parse_like_kubectl() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("3d").is_err());
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(
            parse_duration("1h0m0.5s"),
            Ok(Duration::from_millis(3_600_500))
        );
        for bad in ["", "s", "m5", "1x", "1..5s", "5s5"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        // Found by fuzzing (hack/fuzz.sh): values past Duration's range
        // were a panic, not an error.
        for huge in [
            "        5555555555555555555555555555",
            "00202002202000200220200220h",
        ] {
            assert_eq!(
                parse_duration(huge),
                Err(format!("duration {huge:?} is too long"))
            );
        }
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
        assert_eq!(cli.global.kubeconfig, Some(PathBuf::from("/k")));
        assert_eq!(cli.global.host_cluster_context.as_deref(), Some("h"));
        assert_eq!(cli.global.kubefed_namespace, "fed");
        assert_eq!(cli.global.verbosity, 4);
        let d = Cli::try_parse_from(["kubefedctl", "version"]).unwrap();
        assert_eq!(d.global.kubefed_namespace, DEFAULT_KUBEFED_NAMESPACE);
    }
}
