//! What a run does with what it decides — write it, or plan it — resolved
//! once from the flags, and the one host writer that knows it. kubectl
//! sets its `DryRunStrategy` once on its write helper; the passes here
//! likewise write to the host through [`HostWriter`] and never see a flag.

use super::report::Report;
use crate::clients::host::Host;
use crate::core::outcome::Change;
use anyhow::Result;
use std::future::Future;

/// A run's mode. Only a plan validates, shows diffs or exits 4 on
/// pending changes, so those live inside it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PlanMode {
    /// Writes what it decides (`reconcile`).
    #[default]
    Write,
    /// Writes nothing and reports what it would write (`--dry-run`).
    DryRun {
        /// `--validate` / `--dry-run=server`: each planned member create
        /// and update goes to its member as a server-side dry run.
        validate: bool,
        /// `--diff`: the plan prints each change's diff.
        diff: bool,
        /// `--exit-code`: pending changes exit 4.
        exit_code: bool,
    },
}

impl PlanMode {
    /// A plan and nothing more (no validation, diff or exit code).
    pub const PLAN: PlanMode = PlanMode::DryRun {
        validate: false,
        diff: false,
        exit_code: false,
    };

    /// A plan: nothing is written anywhere.
    pub fn plans(self) -> bool {
        matches!(self, PlanMode::DryRun { .. })
    }

    /// Planned member writes are sent as server-side dry runs.
    pub fn validates(self) -> bool {
        matches!(self, PlanMode::DryRun { validate: true, .. })
    }
}

/// Write-backs to the host in flight at once.
pub const HOST_WRITES_IN_FLIGHT: usize = 16;

/// The host as a run's passes write to it: in a plan, each write becomes
/// a planned change in the report instead.
#[derive(Clone, Copy)]
pub struct HostWriter<'a> {
    pub host: &'a Host,
    pub mode: PlanMode,
}

impl<'a> HostWriter<'a> {
    pub fn new(host: &'a Host, mode: PlanMode) -> HostWriter<'a> {
        HostWriter { host, mode }
    }

    pub fn plans(&self) -> bool {
        self.mode.plans()
    }

    /// One host write: in a plan, `planned` goes into the report and
    /// `write` is never started; else `write` runs, and counts as a host
    /// write when it succeeds. `None`: planned only.
    pub async fn write<T>(
        &self,
        report: &mut Report,
        planned: impl FnOnce() -> Change,
        write: impl Future<Output = Result<T>>,
    ) -> Result<Option<T>> {
        if self.plans() {
            report.changes.push(planned());
            return Ok(None);
        }
        let written = write.await?;
        report.host_writes += 1;
        Ok(Some(written))
    }
}
