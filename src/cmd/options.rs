//! Options shared by commands: the global flags every command accepts
//! (spelled as kubectl and KubeFed spell them), where a member is (join,
//! unjoin), and how durations are written. Commands take these; `cli`
//! only parses them.

use crate::clients::ClientFactory;
use crate::core::cluster::rbac::MemberRbac;
use crate::core::outcome::Failure;

use crate::apply::WriteMode;
use crate::clients::Timeouts;
use crate::core::names::{sanitize_label, subdomain_error};
use crate::core::types::typegen::TemplateSchema;
use crate::core::{cluster::membership, run::reconciler};
use anyhow::{Result, bail};
use clap::Args;
use clap_complete::ArgValueCompleter;
use std::path::PathBuf;
use std::time::Duration;

/// The default kubefed system namespace, as KubeFed's.
pub use crate::api::DEFAULT_KUBEFED_NAMESPACE;

/// Options every command accepts, spelled as kubectl and KubeFed spell them;
/// listed apart in each command's help, as `kubectl options` keeps them.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Global options")]
pub struct GlobalOptions {
    /// Path to the kubeconfig file (default: $KUBECONFIG, merged, else ~/.kube/config)
    #[arg(long, global = true, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub kubeconfig: Option<PathBuf>,

    /// Context of the host cluster in the kubeconfig (default: the current
    /// context); `--context`, kubectl's name, is the same flag
    #[arg(long, global = true, value_name = "CONTEXT", visible_alias = "context",
          add = ArgValueCompleter::new(crate::terminal::completion::complete_context))]
    pub host_cluster_context: Option<String>,

    /// Namespace of the federation's own objects in the host cluster
    #[arg(long, global = true, value_name = "NAMESPACE", default_value = DEFAULT_KUBEFED_NAMESPACE)]
    pub kubefed_namespace: String,

    /// Time to wait for any one API request, e.g. 30s, 2m (0 = no limit)
    #[arg(long, global = true, value_name = "DURATION", default_value = "30s",
          value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// Diagnostics on stderr: 0 notes and warnings, 2 progress, 4 debug, 6 every request
    #[arg(
        short = 'v',
        long = "verbosity",
        // kubefedctl v0.10's klog flag, for scripts written for it.
        alias = "v",
        global = true,
        value_name = "LEVEL",
        default_value_t = 0
    )]
    pub verbosity: u8,

    /// Diagnostics as text lines, or as one JSON object per line (for log collectors)
    #[arg(
        long,
        global = true,
        value_name = "FORMAT",
        value_enum,
        default_value_t
    )]
    pub log_format: crate::terminal::logging::LogFormat,
}

impl GlobalOptions {
    /// The kubeconfig's clients, and the host cluster they name.
    pub async fn connect_host(
        &self,
    ) -> anyhow::Result<(ClientFactory, crate::clients::host::Host)> {
        let factory = self.client_factory()?;
        let host = crate::clients::host::Host::connect(
            &factory,
            self.host_cluster_context.as_deref(),
            &self.kubefed_namespace,
        )
        .await?;
        Ok((factory, host))
    }

    /// Loads the kubeconfig and returns a factory for clients of its contexts.
    pub fn client_factory(&self) -> anyhow::Result<ClientFactory> {
        let kubeconfig = crate::clients::kubeconfig::load(self.kubeconfig.as_deref())?;
        let read = self.request_limit();
        Ok(ClientFactory::new(
            kubeconfig,
            Timeouts {
                connect: read.map_or(CONNECT_LIMIT, |r| r.min(CONNECT_LIMIT)),
                read,
            },
        ))
    }

    /// `--request-timeout`, `None` for 0: no limit, as kubectl reads it.
    pub fn request_limit(&self) -> Option<Duration> {
        (!self.request_timeout.is_zero()).then_some(self.request_timeout)
    }

    /// The timeout of one request to a member: `--request-timeout`, or
    /// its default 30 s under `0` (members' clients always have one, as
    /// their KubeFedClusters' own timeouts do).
    pub fn member_timeout(&self) -> Duration {
        self.request_limit().unwrap_or(Duration::from_secs(30))
    }
}

/// The longest wait for a connection: an unreachable server is told
/// within it (a shorter `--request-timeout` shortens it too).
const CONNECT_LIMIT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod flag_group_tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        global: GlobalOptions,
    }

    fn global(args: &[&str]) -> GlobalOptions {
        Cli::parse_from([&["kubefedctl"], args].concat()).global
    }

    #[derive(Parser)]
    struct Scoped {
        #[command(flatten)]
        scope: NamespaceScope,
        #[command(flatten)]
        dry_run: DryRunFlag,
    }

    fn scoped(args: &[&str]) -> Result<Scoped, clap::Error> {
        Scoped::try_parse_from([&["kubefedctl"], args].concat())
    }

    #[test]
    fn the_flag_groups_resolve_once_as_kubectl_spells_them() {
        let s = scoped(&["-n", "shop"]).unwrap();
        assert_eq!(s.scope.asked(), Namespaces::One("shop"));
        assert_eq!(s.scope.or_every(), Some("shop"));
        let s = scoped(&["-A"]).unwrap();
        assert_eq!(s.scope.asked(), Namespaces::Every);
        assert_eq!(s.scope.or_every(), None);
        let s = scoped(&[]).unwrap();
        assert_eq!(s.scope.asked(), Namespaces::Unsaid);
        assert_eq!(s.dry_run.mode(), WriteMode::Write);
        assert!(
            scoped(&["-n", "shop", "-A"]).is_err(),
            "-n conflicts with -A"
        );
        assert_eq!(
            scoped(&["--dry-run"]).unwrap().dry_run.mode(),
            WriteMode::DryRun
        );
        assert_eq!(
            scoped(&["--dry-run=none"]).unwrap().dry_run.mode(),
            WriteMode::Write
        );
        let server = scoped(&["--dry-run=server"]).err().unwrap().to_string();
        assert!(server.contains("plans on the client only"), "{server}");
    }

    #[test]
    fn zero_is_no_limit_and_names_none() {
        let g = global(&["--request-timeout", "0"]);
        assert_eq!(g.request_limit(), None);
        assert_eq!(g.member_timeout(), Duration::from_secs(30));
        let g = global(&["--request-timeout", "2s"]);
        assert_eq!(g.request_limit(), Some(Duration::from_secs(2)));
        assert_eq!(g.member_timeout(), Duration::from_secs(2));
    }
}

/// Where the member is, shared by join and unjoin.
#[derive(Args, Debug, Clone)]
pub struct MemberOptions {
    /// Context of the member cluster in the kubeconfig [default: CLUSTER_NAME]
    #[arg(long, value_name = "CONTEXT", add = ArgValueCompleter::new(crate::terminal::completion::complete_context))]
    pub cluster_context: Option<String>,

    /// A kubeconfig file holding the member's context, when it is not in --kubeconfig
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub cluster_kubeconfig: Option<PathBuf>,

    /// Name of the host inside the member's object names [default: the host context, made a valid name]
    #[arg(long, value_name = "NAME")]
    pub host_cluster_name: Option<String>,
}

/// The cluster name, checked: it names the KubeFedCluster.
pub fn validate_cluster_name(name: &str) -> Result<()> {
    if let Some(e) = subdomain_error(name) {
        bail!("invalid cluster name {name:?}: {e}");
    }
    Ok(())
}

/// The host's name as used in member object names: `--host-cluster-name`
/// (must be valid), else the host context, made a DNS-1123 label when it is
/// not one (an EKS ARN, `user@cluster`), with a note on stderr.
pub fn host_cluster_name(explicit: Option<&str>, host_context: &str) -> Result<String> {
    if let Some(name) = explicit {
        if let Some(e) = subdomain_error(name) {
            bail!("invalid --host-cluster-name {name:?}: {e}");
        }
        return Ok(name.to_string());
    }
    if subdomain_error(host_context).is_none() {
        return Ok(host_context.to_string());
    }
    let Some(clean) = sanitize_label(host_context) else {
        bail!(
            "host context {host_context:?} gives no valid Kubernetes name: set --host-cluster-name"
        );
    };
    tracing::info!(
        "note: host context {host_context:?} is not a valid Kubernetes name; using {clean:?} in the member's object names (set --host-cluster-name to choose)"
    );
    Ok(clean)
}

impl MemberOptions {
    pub fn context<'a>(&'a self, cluster_name: &'a str) -> &'a str {
        self.cluster_context.as_deref().unwrap_or(cluster_name)
    }

    /// Clients for the member come from `--cluster-kubeconfig` when given.
    pub fn factory(
        &self,
        host_factory: &ClientFactory,
        global: &GlobalOptions,
    ) -> Result<ClientFactory> {
        match &self.cluster_kubeconfig {
            None => Ok(host_factory.clone()),
            Some(path) => {
                let g = GlobalOptions {
                    kubeconfig: Some(path.clone()),
                    ..global.clone()
                };
                g.client_factory()
            }
        }
    }
}

pub use crate::core::time::parse_duration;

#[cfg(test)]
mod tests {
    use super::*;

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
                Err(crate::core::time::DurationError::TooLong(huge.to_string()))
            );
        }
    }
}

/// `--dry-run[=STRATEGY]`, spelled as kubectl spells it.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DryRun {
    /// Not a dry run (kubectl's default spelled out).
    None,
    /// Decide here what would change, and print it; send no write.
    Client,
    /// As client, and send each planned write as a server-side dry run
    /// (`reconcile`; the other commands refuse it).
    Server,
}

impl DryRun {
    /// A plan rather than writes.
    pub fn plans(self) -> bool {
        self != DryRun::None
    }
}

/// `-n NAMESPACE` / `-A`: which namespaces' federated objects a command
/// covers, one group flattened into each; a command words its default in
/// its help with `mut_arg("namespace", ...)`.
#[derive(Args, Debug, Clone, Default)]
pub struct NamespaceScope {
    /// Only the federated objects of this namespace [default: every namespace]
    #[arg(
        short = 'n',
        long,
        value_name = "NAMESPACE",
        conflicts_with = "all_namespaces"
    )]
    pub namespace: Option<String>,

    /// Every namespace (the default, spelled as kubectl spells it)
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
}

/// The namespaces a [`NamespaceScope`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Namespaces<'a> {
    /// `-A`.
    Every,
    /// `-n NAMESPACE`.
    One(&'a str),
    /// Neither: the command's default.
    Unsaid,
}

impl NamespaceScope {
    pub fn asked(&self) -> Namespaces<'_> {
        match (&self.namespace, self.all_namespaces) {
            (_, true) => Namespaces::Every,
            (Some(n), false) => Namespaces::One(n),
            (None, false) => Namespaces::Unsaid,
        }
    }

    /// For the commands that cover a federation whole unless told
    /// (reconcile, export, migrate): the one namespace, `None` for every.
    pub fn or_every(&self) -> Option<&str> {
        match self.asked() {
            Namespaces::One(n) => Some(n),
            Namespaces::Every | Namespaces::Unsaid => None,
        }
    }
}

/// `--dry-run[=client|none]` of every writing command but reconcile (whose
/// plan has more: `PlanFlags`), flattened into each so that it is said
/// once; a command words its help with `mut_arg("dry_run", ...)`.
#[derive(Args, Debug, Clone, Copy, Default)]
pub struct DryRunFlag {
    /// Show what would change, writing nothing (=client: decided here)
    #[arg(id = "dry_run", long = "dry-run", value_name = "STRATEGY", num_args = 0..=1,
          require_equals = true, default_value = "none", default_missing_value = "client",
          hide_default_value = true, value_parser = client_dry_run, action = clap::ArgAction::Set)]
    mode: WriteMode,
}

impl DryRunFlag {
    /// The command's mode, resolved before any work.
    pub fn mode(self) -> WriteMode {
        self.mode
    }
}

/// `--dry-run[=client|none]` of a command that plans on the client only.
/// `=server` is refused as a usage error naming what to use instead.
fn client_dry_run(text: &str) -> std::result::Result<WriteMode, String> {
    match text {
        "client" | "true" => Ok(WriteMode::DryRun),
        "none" | "false" => Ok(WriteMode::Write),
        "server" => Err(
            "this command plans on the client only: use --dry-run (=client); \
             reconcile --dry-run=server sends its writes as server-side dry runs"
                .into(),
        ),
        other => Err(format!("expected client or none, not {other:?}")),
    }
}

/// `init --scope`: [`membership::Scope`] as the flag spells it
/// (KubeFedConfig's spelling; lower case accepted). Flags are the shell's:
/// the core knows no clap.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScopeFlag {
    /// Federate across all namespaces (cluster-wide RBAC in members).
    #[value(name = "Cluster", alias = "cluster")]
    Cluster,
    /// Federate only the kubefed namespace (namespace RBAC in members).
    #[value(name = "Namespaced", alias = "namespaced")]
    Namespaced,
}

impl From<ScopeFlag> for membership::Scope {
    fn from(flag: ScopeFlag) -> Self {
        match flag {
            ScopeFlag::Cluster => membership::Scope::Cluster,
            ScopeFlag::Namespaced => membership::Scope::Namespaced,
        }
    }
}

/// What `enable` and `disable` did to the least-privilege members' roles
/// (`member_rbac::refresh`): its lines on stdout, each member not updated
/// on stderr, and exit 3 when any was not.
pub fn print_member_rbac(outcome: (Vec<String>, Vec<Failure>)) -> Result<()> {
    print_member_outcomes(outcome, "least-privilege member(s) not updated")
}

/// What `federated_types::follow_new_types` did: the reconciler's lines,
/// then each least-privilege member's.
pub fn print_followers((lines, members): (Vec<String>, (Vec<String>, Vec<Failure>))) -> Result<()> {
    for line in lines {
        println!("{line}");
    }
    print_member_rbac(members)
}

/// What a command did member by member: the lines on stdout, each member
/// it could not do it for on stderr, and exit 3 (`<count> <not_done>; the
/// others were`) when there is any.
pub fn print_member_outcomes(
    (lines, failures): (Vec<String>, Vec<Failure>),
    not_done: &str,
) -> Result<()> {
    for line in lines {
        println!("{line}");
    }
    for f in &failures {
        tracing::error!("{f}");
    }
    if failures.is_empty() {
        return Ok(());
    }
    Err(crate::error::ExitWith {
        code: crate::error::EXIT_PARTIAL,
        message: format!("{} {not_done}; the others were", failures.len()),
    }
    .into())
}

/// `join --rbac`: [`MemberRbac`].
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RbacFlag {
    /// Only what the federation uses: the sync verbs on the enabled types' resources, reading
    /// Namespaces, Nodes and the health endpoints; kept in step by enable and disable.
    #[default]
    Least,
    /// `*` on every resource, as KubeFed's join (for a hand-over to KubeFed's controller).
    Admin,
}

impl From<RbacFlag> for MemberRbac {
    fn from(flag: RbacFlag) -> Self {
        match flag {
            RbacFlag::Least => MemberRbac::Least,
            RbacFlag::Admin => MemberRbac::Admin,
        }
    }
}

/// `init --reconciler`: [`reconciler::Mode`].
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReconcilerFlag {
    /// A CronJob, every `--schedule`.
    Cronjob,
    /// A one-off Job.
    Job,
    /// A Deployment of two replicas running `reconcile --watch --leader-elect`.
    Deployment,
}

impl From<ReconcilerFlag> for reconciler::Mode {
    fn from(flag: ReconcilerFlag) -> Self {
        match flag {
            ReconcilerFlag::Cronjob => reconciler::Mode::Cronjob,
            ReconcilerFlag::Job => reconciler::Mode::Job,
            ReconcilerFlag::Deployment => reconciler::Mode::Deployment,
        }
    }
}

/// `enable --template-schema`: [`TemplateSchema`].
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TemplateSchemaFlag {
    /// Any object (`x-kubernetes-preserve-unknown-fields`), as KubeFed.
    #[default]
    Preserve,
    /// The target type's own structural schema.
    Embed,
}

impl From<TemplateSchemaFlag> for TemplateSchema {
    fn from(flag: TemplateSchemaFlag) -> Self {
        match flag {
            TemplateSchemaFlag::Preserve => TemplateSchema::Preserve,
            TemplateSchemaFlag::Embed => TemplateSchema::Embed,
        }
    }
}
