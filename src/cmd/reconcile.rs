//! `kubefedctl reconcile`: the one-shot sync. Live, against the host and
//! its members; or offline (`--from PATH`), rendering member manifests.

use crate::cmd::options::{GlobalOptions, parse_duration};
use crate::core::run::lease::RECONCILE_LEASE;
use crate::core::run::shard::Shard;
use crate::error::{EXIT_CHANGES_PENDING, EXIT_PARTIAL, ExitWith};
use crate::sync::live::observe::Selection;
use crate::sync::lock;
use crate::sync::review::files::{self, Proposal};
use crate::sync::{live, render, watch};
use crate::terminal::output::{DocumentFormat, on_stdout};
use anyhow::Result;
use clap::Args;
use comfy_table::Cell;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(
    after_help = "Exit codes: 0 converged (or, with --dry-run --exit-code, nothing to do);
1 error before any change (the federation lock held by another run included),
  or changes pending with --dry-run --exit-code;
3 partial: some objects or clusters failed (listed on stderr);
130/143 interrupted by Ctrl-C/SIGTERM (the lock is released).

Examples:
  kubefedctl reconcile --from testdata/demo                    # offline: print member manifests
  kubefedctl reconcile --from app/ --cluster eu1:region=eu --output-dir out/
  kubefedctl reconcile                                         # live: every enabled type, every member
  kubefedctl reconcile --type deployments.apps -n shop --dry-run --diff
  kubefedctl reconcile --cluster member2 -o json               # only touch member2; JSON summary for CI
  kubefedctl reconcile --shard 1/3                             # one of three runs that split the work
  kubefedctl reconcile --watch --leader-elect --metrics-bind-address :8080   # a controller"
)]
pub struct ReconcileOptions {
    /// Render offline from these files or directories (- for stdin): federated objects, FederatedNamespaces, RSPs, KubeFedClusters
    #[arg(long = "from", value_name = "PATH")]
    pub from: Vec<PathBuf>,

    /// Live: these files' federated objects, FederatedNamespaces and RSPs
    /// (files, directories, - for stdin) replace the host's for this run:
    /// planned with --dry-run, else applied to the host first (server-side)
    #[arg(short = 'f', long = "filename", value_name = "PATH", conflicts_with_all = ["from", "watch", "shard"])]
    pub filenames: Vec<PathBuf>,

    /// With -f: read directories' subdirectories too
    #[arg(short = 'R', long, requires = "filenames")]
    pub recursive: bool,

    /// With -f and -l: host objects of the files' federated types that -l selects and the files lack are deleted
    #[arg(long, requires_all = ["filenames", "selector"])]
    pub prune: bool,

    /// With -f: take over fields another field manager owns (as kubectl apply --server-side)
    #[arg(long, requires = "filenames", conflicts_with = "dry_run")]
    pub force_conflicts: bool,

    /// With --from: write DIR/<cluster>/<namespace>/<kind>-<name>.yaml instead of printing
    #[arg(long, value_name = "DIR", requires = "from")]
    pub output_dir: Option<PathBuf>,

    /// Live: only touch these members; with --from: clusters to render for, as NAME[:key=value,...]
    #[arg(long = "cluster", value_name = "CLUSTER")]
    pub clusters: Vec<String>,

    /// Only these federated types (FederatedTypeConfig name, plural or kind); repeatable
    #[arg(long = "type", value_name = "TYPE")]
    pub types: Vec<String>,

    /// Only federated objects in this namespace
    #[arg(
        short = 'n',
        long,
        value_name = "NAMESPACE",
        conflicts_with = "all_namespaces"
    )]
    pub namespace: Option<String>,

    /// Federated objects in every namespace (the default)
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,

    /// Only federated objects with these labels (e.g. app=web)
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,

    /// Print the plan, write nothing
    #[arg(long)]
    pub dry_run: bool,

    /// With --dry-run: show a diff of every member object that would change
    /// (created and deleted objects whole)
    #[arg(long)]
    pub diff: bool,

    /// With --dry-run: send each planned create and update to its member as
    /// a server-side dry run with strict field validation, so that unknown
    /// fields and values the member refuses fail the plan (one request per
    /// planned change)
    #[arg(long, requires = "dry_run")]
    pub validate: bool,

    /// With --dry-run: exit 1 when changes are pending
    #[arg(long)]
    pub exit_code: bool,

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

    /// Wait up to DURATION (default 5m) for member copies of deleted
    /// federated objects that are still terminating, then complete the deletion
    #[arg(
        long,
        value_name = "DURATION",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "5m",
        value_parser = parse_duration,
        conflicts_with = "dry_run"
    )]
    pub wait: Option<Duration>,

    /// After propagating, wait up to DURATION (default 5m) until every member
    /// object this run created or updated is ready (rollout status rules)
    #[arg(
        long,
        value_name = "DURATION",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "5m",
        value_parser = parse_duration,
        conflicts_with = "dry_run"
    )]
    pub wait_ready: Option<Duration>,

    /// With --wait-ready: wait for every placed member object, not only those this run wrote
    #[arg(long, requires = "wait_ready")]
    pub all: bool,

    /// Wait up to DURATION for the federation lock another run holds (0: fail at once)
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_duration)]
    pub lock_timeout: Duration,

    /// Run even while KubeFed's own controller-manager holds its leader lock (a migration's overlap)
    #[arg(long)]
    pub force: bool,

    /// Do not take the federation lock (only when no other run can overlap)
    #[arg(long, conflicts_with = "lock_timeout")]
    pub no_lock: bool,

    /// Only shard I of N (0 <= I < N): objects partitioned by namespace
    /// (cluster-scoped ones by name); each shard has its own lock
    #[arg(long, value_name = "I/N", value_parser = Shard::parse, conflicts_with = "from")]
    pub shard: Option<Shard>,

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

    /// Keep running: watch the host and the members and propagate every change (a controller)
    #[arg(long, conflicts_with_all = ["from", "dry_run", "wait", "shard", "output", "wait_ready"])]
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

    /// With --watch: serve /healthz, /readyz and /metrics here (e.g. :8080; default: off)
    #[arg(long, value_name = "ADDRESS", value_parser = parse_bind_address, requires = "watch")]
    pub metrics_bind_address: Option<std::net::SocketAddr>,

    /// Summary (live) or manifests (--from) as yaml or json; a dry run's plan as markdown (for a pull request)
    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    pub output: Option<ReconcileOutput>,
}

/// `-o`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReconcileOutput {
    Yaml,
    Json,
    /// A dry run's plan for a pull-request comment or `$GITHUB_STEP_SUMMARY`.
    Markdown,
}

impl ReconcileOutput {
    fn document(self) -> Option<DocumentFormat> {
        match self {
            ReconcileOutput::Yaml => Some(DocumentFormat::Yaml),
            ReconcileOutput::Json => Some(DocumentFormat::Json),
            ReconcileOutput::Markdown => None,
        }
    }
}

pub async fn run(global: &GlobalOptions, o: &ReconcileOptions) -> Result<()> {
    let clusters = validate(o)?;
    if !o.from.is_empty() {
        return run_render(o, &clusters);
    }
    if o.watch {
        return run_watch(global, o).await;
    }
    run_live(global, o).await
}

/// What clap cannot check, before anything is read: `--cluster` values
/// (with `--from`, `NAME[:k=v,...]` clusters to render for; live, member
/// names only) and `--concurrency`. Returns the render's clusters.
fn validate(o: &ReconcileOptions) -> Result<Vec<crate::core::propagation::placement::Cluster>> {
    if o.concurrency == Some(0) {
        anyhow::bail!("--concurrency must be at least 1");
    }
    if let Some(sel) = &o.selector {
        crate::core::propagation::placement::Selector::parse_flag(sel)
            .map_err(|e| anyhow::anyhow!("-l {sel:?}: {e}"))?;
    }
    if o.output == Some(ReconcileOutput::Markdown) && !o.dry_run {
        anyhow::bail!("-o markdown prints a plan: use it with --dry-run");
    }
    if o.from.is_empty() {
        for c in &o.clusters {
            if c.contains(':') {
                anyhow::bail!(
                    "--cluster {c:?}: labels (NAME:k=v) describe clusters to render for, with --from; a live run names joined members only"
                );
            }
            crate::cmd::options::validate_cluster_name(c)
                .map_err(|e| anyhow::anyhow!("--cluster: {e}"))?;
        }
        return Ok(Vec::new());
    }
    o.clusters
        .iter()
        .map(|c| render::parse_cluster_flag(c))
        .collect()
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

/// The live selection and limits, shared by one-shot runs and the watch.
/// `configured`: the KubeFedConfig's requests in flight per member (the
/// watch reads it; `--concurrency` wins over it).
fn live_options(
    o: &ReconcileOptions,
    proposal: Option<Arc<Proposal>>,
    configured: Option<usize>,
) -> live::Options {
    live::Options {
        selection: Selection {
            types: o.types.clone(),
            namespace: if o.all_namespaces {
                None
            } else {
                o.namespace.clone()
            },
            clusters: o.clusters.clone(),
            selector: o.selector.clone(),
            timeout: o.timeout,
            probe_timeout: o.probe_timeout,
            shard: o.shard,
            settings: None,
        },
        proposal,
        dry_run: o.dry_run,
        validate: o.validate,
        concurrency: o.concurrency.or(configured).unwrap_or(DEFAULT_CONCURRENCY),
        attempts: o.attempts,
        wait: o.wait,
        events: (o.events && !o.dry_run)
            .then(|| Arc::new(crate::sync::passes::events::Recorder::new())),
    }
}

async fn run_watch(global: &GlobalOptions, o: &ReconcileOptions) -> Result<()> {
    // Registered first: a standby stopped while it still waits for the host
    // (a pod deleted during an outage) ends cleanly, not by the signal.
    let mut stop = crate::terminal::signals::Signals::new()?;
    let (factory, host) = global.connect_host().await?;
    let start = async {
        if o.leader_elect {
            // A standby outlives host outages, from its start on.
            let retry = crate::core::run::lease::LeaseTimings::default().retry_period;
            host.wait_initialised(retry).await?;
        } else {
            host.require_initialised().await?;
        }
        lock::refuse_beside_kubefed(&host, o.force).await?;
        // Read once at start, as upstream's controller-manager reads it: the
        // lock's timings and the number of requests in flight per member.
        host.settings().await
    };
    let settings = tokio::select! {
        settings = start => settings?,
        _ = stop.next() => {
            tracing::info!("stopped while starting");
            return Ok(());
        }
    };
    let run = live_options(o, None, settings.max_concurrent_reconciles);
    // Watches are silent while nothing changes: no read timeout for them.
    let mut config = factory.config(&host.context).await?;
    config.read_timeout = None;
    let watch_client = crate::clients::build(config, &host.context)?;
    let options = watch::WatchOptions {
        run,
        lock_timings: settings.leader_elect,
        watch_client,
        probe_interval: o.probe_interval,
        resync_period: o.resync_period,
        leader_elect: o.leader_elect,
        lock_timeout: o.lock_timeout,
        no_lock: o.no_lock,
        metrics_bind_address: o.metrics_bind_address,
        verbosity: global.verbosity,
    };
    watch::run(&host, &options, stop).await
}

fn run_render(
    o: &ReconcileOptions,
    clusters: &[crate::core::propagation::placement::Cluster],
) -> Result<()> {
    let inputs = render::load(&o.from)?;
    let plan = render::plan(inputs, clusters)?;
    for n in &plan.notes {
        eprintln!("note: {n}");
    }
    for s in &plan.scheduling {
        eprintln!("scheduled {s}");
    }
    match (&o.output_dir, o.output) {
        (Some(dir), _) => {
            let count = render::write_dir(&plan, dir)?;
            eprintln!(
                "wrote {count} object(s) for {} cluster(s) under {}",
                plan.clusters.len(),
                dir.display()
            );
        }
        (None, Some(ReconcileOutput::Json)) => {
            on_stdout(render::write_json(&plan, &mut std::io::stdout().lock()))?
        }
        (None, _) => on_stdout(render::write_stream(&plan, &mut std::io::stdout().lock()))?,
    }
    Ok(())
}

/// `-f` without `--dry-run`: the files' objects server-side applied to the
/// host (checked against every enabled type, whatever `--type` says).
async fn apply_files(
    host: &crate::clients::host::Host,
    opts: &live::Options,
    p: &Proposal,
    o: &ReconcileOptions,
) -> Result<Vec<String>> {
    let every_type = Selection {
        types: Vec::new(),
        ..opts.selection.clone()
    };
    let types = crate::sync::live::observe::enabled_types(host, &every_type).await?;
    files::apply(host, &types, p, o.selector.as_deref(), o.force_conflicts).await
}

/// `--wait-ready`: waits for the member objects the run wrote (`--all`:
/// every placed one); exit 3 naming each one not ready in time, or failed.
async fn wait_ready(
    host: &crate::clients::host::Host,
    report: &crate::sync::live::report::Report,
    wait: Duration,
    o: &ReconcileOptions,
) -> Result<()> {
    let objects: Vec<_> = report
        .placed
        .iter()
        .filter(|p| p.written || o.all)
        .cloned()
        .collect();
    if objects.is_empty() {
        return Ok(());
    }
    let members = crate::clients::members::load(host, o.timeout, &[]).await?;
    let bar = if std::io::stderr().is_terminal() {
        Some(styled_bar("waiting", "ready"))
    } else {
        None
    };
    let until = tokio::time::Instant::now() + wait;
    let left =
        crate::sync::live::ready::wait_ready(&members, &objects, until, &ReadyBar(bar.as_ref()))
            .await;
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    if left.is_empty() {
        eprintln!("{} member object(s) ready", objects.len());
        return Ok(());
    }
    for w in &left {
        eprintln!("not ready: {}", w.line());
    }
    let failed = left.iter().any(|w| {
        matches!(
            w.readiness,
            crate::core::propagation::readiness::Readiness::Failed(_)
        )
    });
    Err(ExitWith {
        code: EXIT_PARTIAL,
        message: if failed {
            format!("{} member object(s) will not become ready", left.len())
        } else {
            format!(
                "{} of {} member object(s) not ready after {}",
                left.len(),
                objects.len(),
                crate::core::run::lease::ago(wait.as_secs() as i64)
            )
        },
    }
    .into())
}

/// `--wait-ready`'s progress: a bar on a terminal, else a line per object.
struct ReadyBar<'a>(Option<&'a indicatif::ProgressBar>);

impl crate::sync::live::ready::WaitProgress for ReadyBar<'_> {
    fn total(&self, n: u64) {
        if let Some(b) = self.0 {
            b.set_length(n);
        }
    }
    fn ready(&self, w: &crate::sync::live::ready::Waiting) {
        match self.0 {
            Some(b) => b.inc(1),
            None => eprintln!("ready: {}: {}", w.cluster, w.object),
        }
    }
}

/// The engine's progress as a bar on the terminal.
struct Bar<'a>(&'a indicatif::ProgressBar);

impl crate::sync::live::progress::Progress for Bar<'_> {
    fn requests(&self, total: u64) {
        self.0.set_length(total);
    }
    fn request_done(&self) {
        self.0.inc(1);
    }
}

async fn run_live(global: &GlobalOptions, o: &ReconcileOptions) -> Result<()> {
    // A change's files are read (and any error in them named) before any
    // cluster is.
    let proposal = match o.filenames.is_empty() {
        true => None,
        false => Some(Arc::new(files::load(
            &o.filenames,
            o.recursive,
            o.namespace.as_deref(),
            o.prune,
        )?)),
    };
    let (_, host) = global.connect_host().await?;
    host.require_initialised().await?;
    if !o.dry_run {
        lock::refuse_beside_kubefed(&host, o.force).await?;
    }
    let mut opts = live_options(o, proposal.clone().filter(|_| o.dry_run), None);
    let progress = progress_bar(o);
    let lock = take_run_lock(&host, o, &mut opts).await?;
    // From here on a signal releases the lock (while waiting for it, the
    // default action still ends the process at once).
    let mut signals = crate::terminal::signals::Signals::new()?;
    let bar = Bar(&progress);
    let run = async {
        // Applied under the lock, then propagated by the same run.
        if let (Some(p), false) = (&proposal, o.dry_run) {
            for line in apply_files(&host, &opts, p, o).await? {
                eprintln!("{line}");
            }
        }
        live::reconcile(&host, &opts, &bar).await
    };
    let report = tokio::select! {
        report = run => report,
        signal = signals.next() => {
            // The run stops between requests; a later run converges.
            progress.finish_and_clear();
            if let Some(lock) = lock {
                lock.release().await?;
            }
            return Err(ExitWith {
                code: 128 + signal,
                message: "interrupted; the federation lock is released and the next run completes the work".into(),
            }
            .into());
        }
    };
    // Released whatever the run's outcome; the run's own error comes first.
    let released = match lock {
        Some(lock) => lock.release().await,
        None => Ok(()),
    };
    let report = report?;
    released?;
    progress.finish_and_clear();

    print_report(global, o, &report)?;
    if let Some(wait) = o.wait_ready {
        wait_ready(&host, &report, wait, o).await?;
    }
    exit_status(o, &report)
}

/// The progress bar of a run: on a terminal, when nothing is printed as
/// a document; hidden otherwise.
fn progress_bar(o: &ReconcileOptions) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() || o.output.is_some() {
        return indicatif::ProgressBar::hidden();
    }
    styled_bar("reconcile", "member requests")
}

/// A bar on stderr, `PREFIX [====>   ] 3/10 UNIT`.
fn styled_bar(prefix: &'static str, unit: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{{prefix}} [{{bar:30}}] {{pos}}/{{len}} {unit}"
        ))
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_prefix(prefix);
    bar
}

/// The run lock: one live reconcile of a federation at a time (none for a
/// dry run or `--no-lock`). The KubeFedConfig is read before it for its
/// timings, and handed to the run.
async fn take_run_lock(
    host: &crate::clients::host::Host,
    o: &ReconcileOptions,
    opts: &mut live::Options,
) -> Result<Option<lock::RunLock>> {
    if o.dry_run || o.no_lock {
        return Ok(None);
    }
    let name = o.shard.map_or(RECONCILE_LEASE.to_string(), |s| {
        s.lease_name(RECONCILE_LEASE)
    });
    let settings = host.settings().await?;
    opts.selection.settings = Some(settings);
    Ok(Some(
        lock::take(host, &name, o.lock_timeout, settings.leader_elect).await?,
    ))
}

/// The plan (dry run), then the report as the output asks, then notes,
/// pending deletions, warnings and failures on stderr.
fn print_report(
    global: &GlobalOptions,
    o: &ReconcileOptions,
    report: &crate::sync::live::report::Report,
) -> Result<()> {
    if o.dry_run && o.output != Some(ReconcileOutput::Markdown) {
        for line in &report.plan {
            println!("{line}");
        }
        if o.diff || global.verbosity >= 2 {
            for d in &report.diffs {
                print!("{d}");
            }
        }
    }
    match o.output {
        Some(ReconcileOutput::Markdown) => print!("{}", markdown_plan(report, o.dry_run)),
        Some(format) => {
            crate::terminal::output::print(report, format.document().expect("yaml or json"))?
        }
        None => print!("{}", summary_table(report, o.dry_run)),
    }
    for n in &report.notes {
        eprintln!("note: {n}");
    }
    for p in &report.pending {
        eprintln!("pending: {p}");
    }
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    for f in &report.failures {
        eprintln!("failed: {f}");
    }
    Ok(())
}

/// Exit 3 on failures, 1 on pending changes with `--dry-run --exit-code`.
fn exit_status(o: &ReconcileOptions, report: &crate::sync::live::report::Report) -> Result<()> {
    if !report.failures.is_empty() {
        return Err(ExitWith {
            code: EXIT_PARTIAL,
            message: format!("{} failure(s); the rest converged", report.failures.len()),
        }
        .into());
    }
    if o.dry_run && o.exit_code && report.pending_changes() > 0 {
        return Err(ExitWith {
            code: EXIT_CHANGES_PENDING,
            message: format!("{} change(s) pending", report.pending_changes()),
        }
        .into());
    }
    Ok(())
}

/// Rows of one member's table in a markdown plan before the rest are
/// counted; diffs shown in all.
const MARKDOWN_ROWS: usize = 200;
const MARKDOWN_DIFFS: usize = 50;

/// A dry run's plan as markdown for a pull request: a summary line, the
/// host changes of `-f`, per member a table of its changes, then the diffs
/// in collapsible blocks. Stable order (members by name, changes as
/// planned); long plans are cut with a count. Secret values are masked in
/// the diffs already.
pub fn markdown_plan(r: &crate::sync::live::report::Report, dry_run: bool) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let total = r.changes.len();
    let members: std::collections::BTreeSet<&str> =
        r.changes.iter().map(|c| c.cluster.as_str()).collect();
    let host: Vec<&String> = r.plan.iter().filter(|l| l.starts_with("host: ")).collect();
    let _ = writeln!(
        out,
        "### kubefedctl reconcile{}: {total} member change(s) in {} member(s), {} host change(s)\n",
        if dry_run { " plan" } else { "" },
        members.len(),
        host.len()
    );
    if !host.is_empty() {
        let _ = writeln!(out, "#### host\n");
        for line in &host {
            let _ = writeln!(out, "- {}", line.trim_start_matches("host: "));
        }
        out.push('\n');
    }
    for member in &members {
        let changes: Vec<_> = r.changes.iter().filter(|c| c.cluster == *member).collect();
        let _ = writeln!(out, "#### {member}\n\n| change | object |\n|---|---|");
        for c in changes.iter().take(MARKDOWN_ROWS) {
            let _ = writeln!(out, "| {} | `{}` |", c.verb, c.object);
        }
        if changes.len() > MARKDOWN_ROWS {
            let _ = writeln!(out, "\n… and {} more", changes.len() - MARKDOWN_ROWS);
        }
        out.push('\n');
    }
    let diffs: Vec<_> = r.changes.iter().filter(|c| c.diff.is_some()).collect();
    for c in diffs.iter().take(MARKDOWN_DIFFS) {
        let _ = writeln!(
            out,
            "<details><summary>{}: {} {}</summary>\n\n```diff\n{}```\n\n</details>\n",
            c.cluster,
            c.verb,
            c.object,
            c.diff.as_deref().unwrap_or_default()
        );
    }
    if diffs.len() > MARKDOWN_DIFFS {
        let _ = writeln!(out, "… and {} more diffs\n", diffs.len() - MARKDOWN_DIFFS);
    }
    if !r.failures.is_empty() {
        let _ = writeln!(out, "#### failures\n");
        for f in &r.failures {
            let _ = writeln!(out, "- {f}");
        }
    }
    out
}

/// CLUSTER, READY, CREATED, UPDATED, DELETED, UNCHANGED, FAILED.
pub fn summary_table(r: &crate::sync::live::report::Report, dry_run: bool) -> String {
    let mut t = crate::terminal::output::table(&[
        "CLUSTER",
        "READY",
        if dry_run { "TO CREATE" } else { "CREATED" },
        if dry_run { "TO UPDATE" } else { "UPDATED" },
        if dry_run { "TO DELETE" } else { "DELETED" },
        "UNCHANGED",
        "FAILED",
    ]);
    for (name, c) in &r.clusters {
        t.add_row(vec![
            Cell::new(name),
            Cell::new(if c.ready { "True" } else { "False" }),
            Cell::new(c.created),
            Cell::new(c.updated),
            Cell::new(c.deleted),
            Cell::new(c.unchanged),
            Cell::new(c.failed),
        ]);
    }
    crate::terminal::output::table_text(&t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::live::report::{PlannedChange, Report};
    use clap::Parser;

    #[test]
    fn a_markdown_plan_has_a_table_per_member_and_collapsed_diffs() {
        let change = |cluster: &str, verb: &str, name: &str, diff: Option<&str>| PlannedChange {
            cluster: cluster.into(),
            verb: verb.into(),
            object: format!("ConfigMap shop/{name}"),
            diff: diff.map(str::to_string),
        };
        let mut r = Report {
            plan: vec!["host: create FederatedConfigMap shop/new".into()],
            changes: vec![
                change("m2", "create", "new", None),
                change("m1", "update", "web", Some("-a: 1\n+a: 2\n")),
            ],
            ..Report::default()
        };
        for i in 0..(MARKDOWN_ROWS + 3) {
            r.changes
                .push(change("m3", "delete", &format!("x{i}"), None));
        }
        let md = markdown_plan(&r, true);
        assert!(md.starts_with("### kubefedctl reconcile plan: 205 member change(s) in 3 member(s), 1 host change(s)"), "{md}");
        assert!(md.contains("#### host\n\n- create FederatedConfigMap shop/new"));
        let m1 = md.find("#### m1").unwrap();
        let m2 = md.find("#### m2").unwrap();
        assert!(m1 < m2, "members in name order");
        assert!(md.contains("| update | `ConfigMap shop/web` |"));
        assert!(md.contains("<details><summary>m1: update ConfigMap shop/web</summary>\n\n```diff\n-a: 1\n+a: 2\n```"));
        assert!(md.contains("… and 3 more"));
        assert!(!md.contains("shop/x200"), "cut after {MARKDOWN_ROWS} rows");
    }

    fn options(args: &[&str]) -> ReconcileOptions {
        let mut all = vec!["kubefedctl", "reconcile"];
        all.extend_from_slice(args);
        match crate::cli::Cli::try_parse_from(all).unwrap().command {
            crate::cli::Command::Reconcile(o) => o,
            _ => unreachable!("a reconcile command line"),
        }
    }

    #[test]
    fn validate_names_the_flag_before_anything_is_read() {
        let cases: [(&[&str], Option<&str>); 6] = [
            (&["--cluster", "m1"], None),
            (&["--from", "x", "--cluster", "eu1:region=eu"], None),
            (
                &["--cluster", "eu1:region=eu"],
                Some(
                    "--cluster \"eu1:region=eu\": labels (NAME:k=v) describe clusters to render for",
                ),
            ),
            (
                &["--cluster", "Bad_Name"],
                Some("--cluster: invalid cluster name \"Bad_Name\""),
            ),
            (
                &["--concurrency", "0"],
                Some("--concurrency must be at least 1"),
            ),
            (&["-l", "tier in web"], Some("-l \"tier in web\": ")),
        ];
        for (args, want) in cases {
            let got = validate(&options(args))
                .map(|_| ())
                .map_err(|e| e.to_string());
            match want {
                None => assert!(got.is_ok(), "{args:?}: {got:?}"),
                Some(w) => assert!(
                    got.as_ref().is_err_and(|e| e.starts_with(w)),
                    "{args:?}: {got:?}"
                ),
            }
        }
        let clusters = validate(&options(&["--from", "x", "--cluster", "eu1:region=eu"])).unwrap();
        assert!(
            validate(&options(&["-o", "markdown"]))
                .is_err_and(|e| e.to_string().contains("use it with --dry-run"))
        );
        assert_eq!(clusters[0].labels["region"], "eu");
    }
}
