//! A live one-shot run (`reconcile` without `--from` or `--watch`): the
//! change's files read first, the run lock, the run with a progress bar,
//! then the report and `--wait-ready`.

use super::ReconcileOptions;
use super::print::{exit_status, print_report};
use crate::cmd::options::GlobalOptions;
use crate::core::propagation::rollout::RolloutStand;
use crate::core::run::lease::RECONCILE_LEASE;
use crate::core::run::settings::Settings;
use crate::error::{EXIT_NOT_READY, ExitWith};
use crate::sync::review::files::{self, Proposal};
use crate::sync::{live, lock};
use anyhow::Result;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

pub(super) async fn run(global: &GlobalOptions, o: &ReconcileOptions) -> Result<()> {
    let (proposal, previous) = read_files(o)?;
    let (_, host) = global.connect_host().await?;
    host.require_initialised().await?;
    if !o.plan.dry_run() {
        lock::refuse_beside_kubefed(&host, o.lock.force).await?;
    }
    // The lock is decided before the run's options exist: they carry the
    // KubeFedConfig read with it.
    let (lock, settings) = match take_run_lock(&host, o).await? {
        Some((lock, settings)) => (Some(lock), Some(settings)),
        None => (None, None),
    };
    let planned = proposal.clone().filter(|_| o.plan.dry_run());
    let mut opts = o.live_options(planned, None, settings);
    opts.rollout.previous = previous.map(|p| Arc::new(p.in_federation(&host.namespace)));
    let progress = progress_bar(o);
    // From here on a signal releases the lock (while waiting for it, the
    // default action still ends the process at once).
    let mut signals = crate::terminal::signals::Signals::new()?;
    let bar = Bar(&progress);
    let run = async {
        // Applied under the lock, then propagated by the same run.
        if let (Some(p), false) = (&proposal, o.plan.dry_run()) {
            for line in apply_files(&host, &opts, p, o).await? {
                tracing::info!("{line}");
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
    // A rollout halted or still waiting says so itself (exit 7 or 5).
    let rolled_out = (report.rollouts.iter())
        .all(|r| matches!(r.state, RolloutStand::Complete | RolloutStand::Aborted));
    if let (Some(wait), true) = (o.waits.wait_ready, rolled_out) {
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
/// timings, and returned with it for the run.
async fn take_run_lock(
    host: &crate::clients::host::Host,
    o: &ReconcileOptions,
) -> Result<Option<(lock::RunLock, Settings)>> {
    if o.plan.dry_run() || o.lock.no_lock {
        return Ok(None);
    }
    let name = crate::core::run::shard::lease_of(o.selection.scope().shard, RECONCILE_LEASE);
    let settings = host.settings().await?;
    let lock = lock::take(host, &name, o.lock.lock_timeout, settings.leader_elect).await?;
    Ok(Some((lock, settings)))
}
/// A change's files (`-f`) and the previous versions (`--previous`), read
/// (and any error in them named) before any cluster is.
fn read_files(
    o: &ReconcileOptions,
) -> Result<(Option<Arc<Proposal>>, Option<live::rollback::Previous>)> {
    let namespace = o.selection.namespaces.or_every();
    let proposal = match o.input.filenames.is_empty() {
        true => None,
        false => Some(Arc::new(files::load(
            &o.input.filenames,
            o.input.recursive,
            namespace,
            o.input.prune,
        )?)),
    };
    let previous = match o.rollout.previous.is_empty() {
        true => None,
        false => Some(live::rollback::Previous::load(
            &o.rollout.previous,
            o.input.recursive,
            namespace,
        )?),
    };
    Ok((proposal, previous))
}

/// `-f` without `--dry-run`: the files' objects server-side applied to the
/// host (checked against every enabled type, whatever `--type` says).
async fn apply_files(
    host: &crate::clients::host::Host,
    opts: &live::Options,
    p: &Proposal,
    o: &ReconcileOptions,
) -> Result<Vec<crate::core::outcome::Change>> {
    let mut every_type = opts.selection.clone();
    every_type.scope.types.clear();
    let types = crate::sync::run::observe::enabled_types(host, &every_type).await?;
    files::apply(
        host,
        &types,
        p,
        o.selection.selector.as_deref(),
        o.input.force_conflicts,
    )
    .await
}
/// `--wait-ready`: waits for the member objects of the federated objects
/// the run wrote copies of (`--all`: of every placed one), records their
/// `Ready` conditions; exit 3 naming each one not ready in time, or failed.
async fn wait_ready(
    host: &crate::clients::host::Host,
    report: &crate::sync::run::report::Report,
    wait: Duration,
    o: &ReconcileOptions,
) -> Result<()> {
    let objects =
        crate::sync::live::ready::to_wait_for(&report.placed, o.waits.all, &report.failures);
    if objects.is_empty() {
        return Ok(());
    }
    let members = crate::clients::members::load(host, o.requests.timeout, &[]).await?;
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
    let (_, unrecorded) = crate::sync::live::ready::record_ready(host, &objects, &left).await;
    for line in unrecorded {
        tracing::warn!("{line}");
    }
    if left.is_empty() {
        tracing::info!("{} member object(s) ready", objects.len());
        return Ok(());
    }
    for w in &left {
        tracing::info!("not ready: {}", w.line());
    }
    let failed = left.iter().any(|w| {
        matches!(
            w.readiness,
            crate::core::propagation::readiness::Readiness::Failed(_)
        )
    });
    Err(ExitWith {
        code: EXIT_NOT_READY,
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
            None => tracing::info!("ready: {}: {}", w.cluster, w.object),
        }
    }
}
/// The engine's progress as a bar on the terminal.
struct Bar<'a>(&'a indicatif::ProgressBar);
impl crate::sync::live::progress::Progress for Bar<'_> {
    fn requests(&self, more: u64) {
        self.0.inc_length(more);
    }
    fn request_done(&self) {
        self.0.inc(1);
    }
}
