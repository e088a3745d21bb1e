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
    /// Export the federation as another system's objects (Karmada), read-only
    Export(crate::cmd::export::ExportOptions),
    /// Turn existing resources (or files, or a namespace with its contents) into federated resources
    Federate(crate::cmd::federate::FederateOptions),
    /// Move the federation to another system (Karmada) without recreating a member object
    Migrate(crate::cmd::migrate::MigrateOptions),
    /// Register a member cluster with the host cluster
    Join(crate::cmd::join::JoinOptions),
    /// Keep (enable) or delete (disable) member copies when a federated object is deleted
    OrphaningDeletion(crate::cmd::orphaning::OrphaningOptions),
    /// Propagate federated resources to member clusters once (live), or render them offline (--from)
    Reconcile(Box<crate::cmd::reconcile::ReconcileOptions>),
    /// Approve the next wave of a progressive rollout
    Rollout(crate::cmd::rollout::RolloutOptions),
    /// Issue new short-lived tokens for members joined with --token-ttl
    Rotate(crate::cmd::rotate::RotateOptions),
    /// Run a pull member's agent: apply its share from the host, report back
    Agent(crate::cmd::agent::AgentOptions),
    /// Exec credential plugin for the cluster inventory: a short-lived token of a member's consumer identity
    Credential(crate::cmd::credential::CredentialOptions),
    /// Show clusters, federated types and per-cluster propagation
    Status(crate::cmd::status::StatusOptions),
    /// Remove a member cluster from the federation
    Unjoin(crate::cmd::unjoin::UnjoinOptions),
    /// Print the client version
    Version(crate::cmd::version::VersionOptions),
    /// Print a shell completion script (bash, zsh, fish, powershell)
    Completion(crate::cmd::completion::CompletionOptions),
}

/// The commands as the top-level help groups them (kubectl groups its
/// own: basic, deploy, cluster management, ...). Every visible command is
/// in exactly one group (a unit test keeps it so).
pub const COMMAND_GROUPS: &[(&str, &[&str])] = &[
    ("Setting up a host", &["init"]),
    ("Membership", &["join", "unjoin", "rotate", "credential"]),
    (
        "Federated types",
        &["enable", "disable", "orphaning-deletion"],
    ),
    (
        "Propagation",
        &["federate", "reconcile", "rollout", "agent"],
    ),
    ("Migration", &["export", "migrate"]),
    ("Inspection", &["status"]),
    ("Other", &["version", "completion"]),
];

/// The command tree with its top-level help grouped by [`COMMAND_GROUPS`].
pub fn command() -> clap::Command {
    let cmd = Cli::command();
    let width = COMMAND_GROUPS
        .iter()
        .flat_map(|(_, names)| names.iter())
        .map(|n| n.len())
        .max()
        .unwrap_or(0);
    let mut groups = String::new();
    for (heading, names) in COMMAND_GROUPS {
        groups.push_str(&format!("{heading}:\n"));
        for name in *names {
            let about = cmd
                .find_subcommand(name)
                .and_then(|s| s.get_about())
                .map(|a| a.to_string())
                .unwrap_or_default();
            groups.push_str(&wrap_row(&format!("  {name:width$}  "), &about));
        }
        groups.push('\n');
    }
    let template = format!(
        "{{before-help}}{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{groups}Options:\n{{options}}{{after-help}}"
    );
    cmd.help_template(template)
}

/// `lead` then `text`, wrapped at 80 columns under the text's first column.
fn wrap_row(lead: &str, text: &str) -> String {
    let indent = lead.chars().count();
    let mut out = lead.to_string();
    let mut column = indent;
    for word in text.split_whitespace() {
        if column > indent && column + 1 + word.chars().count() > 80 {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            column = indent;
        } else if column > indent {
            out.push(' ');
            column += 1;
        }
        out.push_str(word);
        column += word.chars().count();
    }
    out.push('\n');
    out
}

/// Entry point of every binary: `kubefedctl`, or `kubectl fed` as a plugin.
pub fn main(bin_name: &str) -> ExitCode {
    crate::terminal::output::quiet_broken_pipes();
    crate::terminal::completion::complete_from_env(Cli::command);
    let mut cmd = command().bin_name(bin_name);
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
            tracing::error!("{}", one_line(&err));
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
                Command::Export(o) => crate::cmd::export::run(global, &o).await,
                Command::Migrate(o) => crate::cmd::migrate::run(global, &o).await,
                Command::Join(o) => crate::cmd::join::run(global, &o).await,
                Command::Reconcile(o) => crate::cmd::reconcile::run(global, &o).await,
                Command::Status(o) => crate::cmd::status::run(global, &o).await,
                Command::Unjoin(o) => crate::cmd::unjoin::run(global, &o).await,
                Command::Rotate(o) => crate::cmd::rotate::run(global, &o).await,
                Command::Agent(o) => crate::cmd::agent::run(global, &o).await,
                Command::Rollout(o) => crate::cmd::rollout::run(global, &o).await,
                Command::Credential(o) => crate::cmd::credential::run(global, &o).await,
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
    fn every_command_is_in_one_help_group() {
        let grouped: Vec<&str> = COMMAND_GROUPS
            .iter()
            .flat_map(|(_, names)| names.iter().copied())
            .collect();
        let cmd = Cli::command();
        let visible: Vec<&str> = cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| s.get_name())
            .collect();
        for name in &visible {
            let times = grouped.iter().filter(|g| *g == name).count();
            assert_eq!(times, 1, "{name} is in {times} help groups");
        }
        assert_eq!(grouped.len(), visible.len(), "{grouped:?} vs {visible:?}");
        let help = command().render_help().to_string();
        assert!(help.contains("Membership:\n  join "), "{help}");
    }

    /// Help texts fit an 80-column terminal, as kubectl's examples do.
    #[test]
    fn help_text_fits_80_columns() {
        fn walk(cmd: &clap::Command, path: &str, long: &mut Vec<String>) {
            let texts = [cmd.get_after_help(), cmd.get_after_long_help()];
            for text in texts.into_iter().flatten() {
                for line in text.to_string().lines().filter(|l| l.chars().count() > 80) {
                    long.push(format!("{path}: {line}"));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), long);
            }
        }
        let mut long = Vec::new();
        walk(&Cli::command(), "kubefedctl", &mut long);
        assert!(
            long.is_empty(),
            "lines over 80 columns:\n{}",
            long.join("\n")
        );
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
