//! `reconcile`'s flags in groups, shared by the one-shot run and the watch
//! (as kubectl's flag structs), and the one place each group becomes what
//! the engine takes ([`ReconcileOptions::live_options`] for every run,
//! [`ReconcileOptions::watch_options`] for the watch): a new flag touches
//! its group and that place.

use super::ReconcileOptions;
use crate::cmd::options::parse_duration;
use crate::core::propagation::rollout::RolloutPolicy;
use crate::core::run::lease::LeaseTimings;
use crate::core::run::scope::RunScope;
use crate::core::run::settings::Settings;
use crate::core::run::shard::Shard;
use crate::sync::live;
use crate::sync::review::files::Proposal;
use crate::sync::run::mode::PlanMode;
use crate::sync::run::observe::Selection;
use crate::sync::watch::WatchOptions;
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What a run reads besides the host: files to render offline (`--from`)
/// or a change under review (`-f`).
#[derive(Args, Debug)]
#[command(next_help_heading = "Files (--from offline, -f live)")]
pub struct InputFlags {
    /// Render offline from these files or directories (- for stdin): federated objects, FederatedNamespaces, RSPs, KubeFedClusters
    #[arg(long = "from", value_name = "PATH")]
    pub from: Vec<PathBuf>,

    /// Live: these files' federated objects, FederatedNamespaces and RSPs
    /// (files, directories, - for stdin) replace the host's for this run:
    /// planned with --dry-run, else applied to the host first (server-side)
    #[arg(short = 'f', long = "filename", value_name = "PATH", group = "abort_from", conflicts_with_all = ["from", "watch", "shard"])]
    pub filenames: Vec<PathBuf>,

    /// With -f or --previous: read directories' subdirectories too
    #[arg(short = 'R', long, requires = "abort_from")]
    pub recursive: bool,

    /// With -f and -l: host objects of the files' federated types that -l selects and the files lack are deleted
    #[arg(long, requires_all = ["filenames", "selector"])]
    pub prune: bool,

    /// Take over fields another field manager owns: with -f, of the host's objects (as kubectl
    /// apply --server-side); in members, where a kept field conflicts with the template
    #[arg(long, conflicts_with = "plan")]
    pub force_conflicts: bool,

    /// Write nothing to the members (no create, update, delete or label): compare each copy with
    /// what would be written and report how it differs (drift); statuses are still recorded
    #[arg(long, conflicts_with = "from")]
    pub report_only: bool,

    /// With --from: write DIR/<cluster>/<namespace>/<kind>-<name>.yaml (.json with -o json) instead of printing
    #[arg(long, value_name = "DIR", requires = "from")]
    pub output_dir: Option<PathBuf>,
}

/// Which federated objects and members a run covers.
#[derive(Args, Debug)]
#[command(
    mut_arg("namespace", |a| a.help("Only federated objects in this namespace").conflicts_with("from")),
    mut_arg("all_namespaces", |a| a.help("Federated objects in every namespace (the default)").conflicts_with("from"))
)]
#[command(next_help_heading = "Selection")]
pub struct SelectionFlags {
    /// Live: only touch these members; with --from: clusters to render for, as NAME[:key=value,...]
    #[arg(long = "cluster", value_name = "CLUSTER")]
    pub clusters: Vec<String>,

    /// Only these federated types (FederatedTypeConfig name, plural or kind); repeatable
    #[arg(long = "type", value_name = "TYPE", conflicts_with = "from")]
    pub types: Vec<String>,

    #[command(flatten)]
    pub namespaces: crate::cmd::options::NamespaceScope,

    /// Only federated objects with these labels (e.g. app=web)
    #[arg(short = 'l', long, value_name = "SELECTOR", conflicts_with = "from")]
    pub selector: Option<String>,

    /// Only shard I of N (0 <= I < N): objects partitioned by namespace
    /// (cluster-scoped ones by name); each shard has its own lock
    #[arg(long, value_name = "I/N", value_parser = Shard::parse, conflicts_with = "from")]
    pub shard: Option<Shard>,

    /// Shard I of N, I the ordinal that ends this pod's name ($POD_NAME,
    /// else the host name; kubefedctl-reconciler-2 runs shard 2/N), modulo N
    #[arg(long, value_name = "N", value_parser = shard_from_hostname, conflicts_with_all = ["from", "shard"])]
    pub shard_from_hostname: Option<Shard>,
}

/// `--shard-from-hostname N`: this pod's shard, from its name as a
/// StatefulSet gives it.
fn shard_from_hostname(count: &str) -> Result<Shard, String> {
    let count: u32 = count
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("expected a number of shards (at least 1), not {count:?}"))?;
    let name = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .or_else(|_| std::fs::read_to_string("/proc/sys/kernel/hostname"))
        .map_err(|e| format!("cannot read this host's name: {e}"))?;
    Shard::from_hostname(&name, count).map_err(|e| e.to_string())
}

/// A plan instead of a run (`--dry-run`) and what it shows.
#[derive(Args, Debug)]
#[command(next_help_heading = "Plan (writes nothing)")]
#[group(id = "plan", multiple = true, conflicts_with = "from")]
pub struct PlanFlags {
    /// Print the plan, write nothing: =client (the default) plans here;
    /// =server also sends each planned create and update to its member as a
    /// server-side dry run (as --validate)
    #[arg(
        id = "dry_run",
        long = "dry-run",
        value_name = "STRATEGY",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "client"
    )]
    pub strategy: Option<crate::cmd::options::DryRun>,

    /// Plan with a diff of every member object that would change (created
    /// and deleted objects whole); implies --dry-run, as kubectl diff
    #[arg(long)]
    pub diff: bool,

    /// Plan, sending each planned create and update to its member as a
    /// server-side dry run with strict field validation, so that unknown
    /// fields and values the member refuses fail the plan (one request per
    /// planned change); implies --dry-run
    #[arg(long)]
    pub validate: bool,

    /// Plan, and exit 4 when changes are pending; implies --dry-run
    #[arg(long)]
    pub exit_code: bool,
}

impl PlanFlags {
    /// A plan, not a run: `--dry-run` (=client or =server), or a flag that
    /// only makes sense for a plan and so implies it (kubectl diff never
    /// writes either), so that none of them ever writes to a member.
    /// The run's mode, derived once: the engine sees only this.
    pub fn mode(&self) -> PlanMode {
        let plans = self.strategy.is_some_and(|s| s.plans())
            || self.diff
            || self.validate
            || self.exit_code;
        match plans {
            false => PlanMode::Write,
            true => PlanMode::DryRun {
                validate: self.validate
                    || self.strategy == Some(crate::cmd::options::DryRun::Server),
                diff: self.diff,
                exit_code: self.exit_code,
            },
        }
    }

    pub fn dry_run(&self) -> bool {
        self.mode().plans()
    }
}

/// How a run talks to the members, and what it records on the host.
#[derive(Args, Debug)]
#[command(next_help_heading = "Requests")]
#[group(id = "requests", multiple = true, conflicts_with = "from")]
pub struct RequestFlags {
    /// Requests in flight per member cluster [default: 8; with --watch, the KubeFedConfig's syncController.maxConcurrentReconciles when it sets one]
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,

    /// Timeout of each member request
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Timeout of each member health probe [default: the KubeFedConfig's clusterHealthCheck.timeout; 3s without one]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub probe_timeout: Option<Duration>,

    /// Attempts per member request (429, 5xx, timeouts and conflicts are retried)
    #[arg(long, value_name = "N", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub attempts: u32,

    /// Record Kubernetes Events on federated objects and KubeFedClusters in the host, as KubeFed does (--events=false: none)
    #[arg(
        long,
        value_name = "BOOL",
        default_value_t = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub events: bool,
}

/// What a run waits for after its writes.
#[derive(Args, Debug)]
#[command(next_help_heading = "Waits")]
#[group(id = "waits", multiple = true, conflicts_with = "from")]
pub struct WaitFlags {
    /// Wait up to DURATION (default 5m) for member copies of deleted
    /// federated objects that are still terminating, then complete the deletion
    #[arg(
        long,
        value_name = "DURATION",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "5m",
        value_parser = parse_duration,
        conflicts_with = "plan"
    )]
    pub wait: Option<Duration>,

    /// After propagating, wait up to DURATION (default 5m) until the member
    /// copies of every federated object this run changed are ready (rollout
    /// status rules); recorded as the federated objects' Ready condition
    #[arg(
        long,
        value_name = "DURATION",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "5m",
        value_parser = parse_duration,
        conflicts_with = "plan"
    )]
    pub wait_ready: Option<Duration>,

    /// With --wait-ready: wait for (and record) every placed federated object, not only those this run changed
    #[arg(long, requires = "wait_ready")]
    pub all: bool,
}

/// The federation lock, and KubeFed's own.
#[derive(Args, Debug)]
#[command(next_help_heading = "Locks")]
#[group(id = "lock", multiple = true, conflicts_with = "from")]
pub struct LockFlags {
    /// Wait up to DURATION for the federation lock another run holds (0: fail at once)
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_duration)]
    pub lock_timeout: Duration,

    /// Run even while KubeFed's own controller-manager holds its leader lock (a migration's overlap)
    #[arg(long)]
    pub force: bool,

    /// Do not take the federation lock (only when no other run can overlap)
    #[arg(long, conflicts_with = "lock_timeout")]
    pub no_lock: bool,
}

/// Progressive rollouts, of one-shot runs and the watch (`live::rollout`).
#[derive(Args, Debug)]
#[command(next_help_heading = "Rollout")]
pub struct RolloutFlags {
    /// The rollout policy of federated objects without a kubefedctl.kubefed.io/rollout
    /// annotation, as JSON or a file holding it (waves, progressDeadline, minSuccessTime,
    /// maxFailures, maxConcurrency): a change reaches them wave by wave
    #[arg(long, value_name = "FILE|JSON", conflicts_with = "from")]
    pub rollout: Option<String>,

    /// With -f or --previous holding the previous version of federated objects with a
    /// rollout in progress: their members that got the new version go back to it at
    /// once, when it is the version their PropagatedVersion records (else nothing of
    /// them is written)
    #[arg(long, requires = "abort_from", conflicts_with_all = ["from", "watch"])]
    pub rollout_abort: bool,

    /// With --rollout-abort: the previous version of federated objects (files,
    /// directories, - for stdin), not applied to the host: the members go back to it,
    /// and runs of the version the host's object still asks for write nothing until
    /// its template changes (exit 7)
    #[arg(long, value_name = "PATH", group = "abort_from", requires = "rollout_abort", conflicts_with_all = ["from", "watch"])]
    pub previous: Vec<PathBuf>,
}

impl RolloutFlags {
    /// The policy `--rollout` gives (a usage error when it cannot be read).
    pub fn policy(&self) -> anyhow::Result<Option<RolloutPolicy>> {
        let Some(given) = &self.rollout else {
            return Ok(None);
        };
        let text = match given.trim_start().starts_with('{') {
            true => given.clone(),
            false => std::fs::read_to_string(given)
                .map_err(|e| anyhow::anyhow!("--rollout {given}: {e}"))?,
        };
        RolloutPolicy::parse(&text)
            .map(Some)
            .map_err(|e| anyhow::anyhow!("--rollout: {e}"))
    }
}

/// `--watch`: the run as a controller.
#[derive(Args, Debug)]
#[command(next_help_heading = "Watch (a controller)")]
#[group(id = "watching", multiple = true, conflicts_with = "from")]
pub struct WatchFlags {
    /// Keep running: watch the host and the members and propagate every change (a controller)
    #[arg(long, conflicts_with_all = ["from", "plan", "wait", "output", "wait_ready"])]
    pub watch: bool,

    /// With --watch: wait for the federation lock and take over when its holder stops (high availability)
    #[arg(long, requires = "watch", conflicts_with_all = ["no_lock", "lock_timeout"])]
    pub leader_elect: bool,

    /// With --watch: how often members are probed [default: the KubeFedConfig's clusterHealthCheck.period; 10s without one]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "watch")]
    pub probe_interval: Option<Duration>,

    /// With --watch: how often everything is re-decided, changed or not
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration, requires = "watch")]
    pub resync_period: Duration,

    /// With --watch: federated objects one round covers at most; more are taken in several rounds, and a full round over more runs in slices (fewer: less memory, more rounds)
    #[arg(long, value_name = "N", default_value = "1000", value_parser = clap::value_parser!(u32).range(1..), requires = "watch")]
    pub round_size: u32,

    /// With --watch: serve /healthz, /readyz and /metrics here (e.g. :8080; default: off)
    #[arg(long, value_name = "ADDRESS", value_parser = parse_bind_address, requires = "watch")]
    pub metrics_bind_address: Option<std::net::SocketAddr>,
}

/// `:8080` (every address), `127.0.0.1:8080`, `[::1]:8080`.
fn parse_bind_address(text: &str) -> Result<std::net::SocketAddr, String> {
    let full = match text.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => text.to_string(),
    };
    full.parse().map_err(|_| {
        format!("invalid address {text:?}: expected [HOST]:PORT, e.g. :8080 or 127.0.0.1:8080")
    })
}

/// Requests in flight per member when neither `--concurrency` nor (under
/// `--watch`) the KubeFedConfig says.
const DEFAULT_CONCURRENCY: usize = 8;

/// How long a one-shot run waits for its rollouts' waves without
/// `--wait-ready` (`--wait-ready`'s own default).
const DEFAULT_ROLLOUT_WAIT: Duration = Duration::from_secs(300);

impl SelectionFlags {
    /// What the run covers: the one value every step reads.
    pub(super) fn scope(&self) -> RunScope {
        RunScope {
            types: self.types.clone(),
            namespace: self.namespaces.or_every().map(str::to_string),
            clusters: (!self.clusters.is_empty()).then(|| self.clusters.iter().cloned().collect()),
            selector: self.selector.clone(),
            shard: self.shard.or(self.shard_from_hostname),
        }
    }
}

impl ReconcileOptions {
    /// The live selection and limits, shared by one-shot runs and the watch.
    /// `configured`: the KubeFedConfig's requests in flight per member (the
    /// watch reads it; `--concurrency` wins over it). `settings`: the
    /// KubeFedConfig when it was read already (with the run lock), so the
    /// run does not read it again.
    pub(super) fn live_options(
        &self,
        proposal: Option<Arc<Proposal>>,
        configured: Option<usize>,
        settings: Option<Settings>,
    ) -> live::Options {
        live::Options {
            selection: Selection {
                scope: self.selection.scope(),
                timeout: self.requests.timeout,
                probe_timeout: self.requests.probe_timeout,
                settings,
                whole_copies: self.plan.dry_run() || self.input.report_only,
            },
            proposal,
            mode: self.plan.mode(),
            concurrency: self
                .requests
                .concurrency
                .or(configured)
                .unwrap_or(DEFAULT_CONCURRENCY),
            attempts: self.requests.attempts,
            wait: self.waits.wait,
            events: (self.requests.events && !self.plan.dry_run())
                .then(|| Arc::new(crate::sync::passes::events::Recorder::new())),
            wait_ready: self.waits.wait_ready.is_some(),
            force_conflicts: self.input.force_conflicts,
            report_only: self.input.report_only,
            rollout: live::rollout::RolloutOptions {
                enabled: true,
                // Read and checked before anything else (`validate`).
                policy: self.rollout.policy().ok().flatten(),
                abort: self.rollout.rollout_abort,
                // Read before the host is (`live::run`), given with its namespace.
                previous: None,
                wait: self.waits.wait_ready.unwrap_or(DEFAULT_ROLLOUT_WAIT),
            },
        }
    }

    /// What the watch takes: each round's `run` ([`Self::live_options`]),
    /// the lock's flags and timings (the KubeFedConfig's `leaderElect`), the
    /// watch flags, and the host's client without a read timeout.
    pub(super) fn watch_options(
        &self,
        run: live::Options,
        lock_timings: LeaseTimings,
        watch_client: kube::Client,
        verbosity: u8,
    ) -> WatchOptions {
        WatchOptions {
            run,
            lock_timings,
            watch_client,
            probe_interval: self.watch.probe_interval,
            resync_period: self.watch.resync_period,
            round_size: self.watch.round_size as usize,
            leader_elect: self.watch.leader_elect,
            lock_timeout: self.lock.lock_timeout,
            no_lock: self.lock.no_lock,
            metrics_bind_address: self.watch.metrics_bind_address,
            verbosity,
        }
    }
}
