//! What a run did, printed: the plan, the summary table or a document, a
//! dry run's markdown plan, notes and failures on stderr, and the exit code.

use super::{ReconcileOptions, ReconcileOutput};
use crate::cmd::options::GlobalOptions;
use crate::core::outcome::{Change, Place};
use crate::core::propagation::rollout::RolloutStand;
use crate::error::{
    EXIT_CHANGES_PENDING, EXIT_NOT_READY, EXIT_PARTIAL, EXIT_ROLLOUT_AWAITING_APPROVAL,
    EXIT_ROLLOUT_HALTED, ExitWith,
};
use crate::sync::run::mode::PlanMode;
use anyhow::Result;
use comfy_table::Cell;

/// The plan (dry run), then the report as the output asks, then notes,
/// pending deletions, warnings and failures on stderr.
pub(super) fn print_report(
    global: &GlobalOptions,
    o: &ReconcileOptions,
    report: &crate::sync::run::report::Report,
) -> Result<()> {
    if o.plan.dry_run() && o.output != Some(ReconcileOutput::Markdown) {
        for change in &report.changes {
            println!("{change}");
        }
        print_rollout_waves(report);
        let diff = matches!(o.plan.mode(), PlanMode::DryRun { diff: true, .. });
        if diff || global.verbosity >= 2 {
            for diff in report.changes.iter().filter_map(|c| c.diff.as_ref()) {
                print!("{diff}");
            }
        }
    }
    match o.output {
        Some(ReconcileOutput::Markdown) => print!("{}", markdown_plan(report, o.plan.mode())),
        Some(format) => {
            crate::terminal::output::print(report, format.document().expect("yaml or json"))?
        }
        None => print!("{}", summary_table(report, o.plan.mode())),
    }
    for n in &report.notes {
        tracing::info!("note: {n}");
    }
    for p in &report.pending {
        tracing::info!("pending: {p}");
    }
    for w in &report.warnings {
        tracing::warn!("{w}");
    }
    for d in &report.drift {
        tracing::info!("drift: {}", d.line());
    }
    for f in &report.failures {
        tracing::info!("failed: {f}");
    }
    for r in (report.rollouts.iter()).filter(|r| r.state == RolloutStand::Halted) {
        tracing::info!("halted: {}", r.line());
    }
    for r in (report.rollouts.iter()).filter(|r| r.state == RolloutStand::AwaitingApproval) {
        tracing::info!("awaiting approval: {}", r.line());
    }
    Ok(())
}

/// A dry run's rollouts as text: each object's waves, after its plan.
fn print_rollout_waves(report: &crate::sync::run::report::Report) {
    for r in &report.rollouts {
        println!("rollout of {}:", r.object);
        for line in r.waves_text.lines() {
            println!("  {line}");
        }
    }
}

/// Exit 7 when a rollout halted, 3 on failures, 8 when a rollout awaits
/// an approval, 5 when a rollout still waits, 4 on pending changes with
/// `--dry-run --exit-code`.
pub(super) fn exit_status(
    o: &ReconcileOptions,
    report: &crate::sync::run::report::Report,
) -> Result<()> {
    let stand = |s: RolloutStand| (report.rollouts.iter()).filter(move |r| r.state == s);
    if !o.plan.dry_run()
        && let Some(first) = stand(RolloutStand::Halted).next()
    {
        return Err(ExitWith {
            code: EXIT_ROLLOUT_HALTED,
            message: format!(
                "{} rollout(s) halted: {}; the next run resumes once it is fixed",
                stand(RolloutStand::Halted).count(),
                first.line()
            ),
        }
        .into());
    }
    if !report.failures.is_empty() {
        return Err(ExitWith {
            code: EXIT_PARTIAL,
            message: format!("{} failure(s); the rest converged", report.failures.len()),
        }
        .into());
    }
    if !o.plan.dry_run()
        && let Some(first) = stand(RolloutStand::AwaitingApproval).next()
    {
        return Err(ExitWith {
            code: EXIT_ROLLOUT_AWAITING_APPROVAL,
            message: format!(
                "{} rollout(s) awaiting approval: {}; kubefedctl rollout approve {}, then the next run goes on",
                stand(RolloutStand::AwaitingApproval).count(),
                first.line(),
                first.approve_args()
            ),
        }
        .into());
    }
    let exit_code = matches!(
        o.plan.mode(),
        PlanMode::DryRun {
            exit_code: true,
            ..
        }
    );
    if !o.plan.dry_run()
        && let Some(first) = stand(RolloutStand::Waiting).next()
    {
        return Err(ExitWith {
            code: EXIT_NOT_READY,
            message: format!(
                "{} rollout(s) not complete when the run's wait ended: {}; the next run resumes",
                stand(RolloutStand::Waiting).count(),
                first.line()
            ),
        }
        .into());
    }
    if exit_code && report.pending_changes() > 0 {
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
pub fn markdown_plan(r: &crate::sync::run::report::Report, mode: PlanMode) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let (host, member_changes): (Vec<&Change>, Vec<&Change>) =
        r.changes.iter().partition(|c| c.place == Place::Host);
    let total = member_changes.len();
    let members: std::collections::BTreeSet<&Place> =
        member_changes.iter().map(|c| &c.place).collect();
    let _ = writeln!(
        out,
        "### kubefedctl reconcile{}: {total} member change(s) in {} member(s), {} host change(s)\n",
        if mode.plans() { " plan" } else { "" },
        members.len(),
        host.len()
    );
    if !host.is_empty() {
        let _ = writeln!(out, "#### host\n");
        for change in &host {
            let _ = writeln!(out, "- {}", change.what());
        }
        out.push('\n');
    }
    for member in &members {
        let changes: Vec<_> = member_changes
            .iter()
            .filter(|c| c.place == **member)
            .collect();
        let _ = writeln!(out, "#### {member}\n\n| change | object |\n|---|---|");
        for c in changes.iter().take(MARKDOWN_ROWS) {
            let _ = writeln!(out, "| {} | `{}` |", c.verb, c.object);
        }
        if changes.len() > MARKDOWN_ROWS {
            let _ = writeln!(out, "\n… and {} more", changes.len() - MARKDOWN_ROWS);
        }
        out.push('\n');
    }
    let diffs: Vec<_> = member_changes.iter().filter(|c| c.diff.is_some()).collect();
    for c in diffs.iter().take(MARKDOWN_DIFFS) {
        let _ = writeln!(
            out,
            "<details><summary>{}: {} {}</summary>\n\n```diff\n{}```\n\n</details>\n",
            c.place,
            c.verb,
            c.object,
            c.diff.as_deref().unwrap_or_default()
        );
    }
    if diffs.len() > MARKDOWN_DIFFS {
        let _ = writeln!(out, "… and {} more diffs\n", diffs.len() - MARKDOWN_DIFFS);
    }
    for rollout in &r.rollouts {
        let _ = writeln!(out, "{}", rollout.waves_markdown);
    }
    if !r.failures.is_empty() {
        let _ = writeln!(out, "#### failures\n");
        for f in &r.failures {
            let _ = writeln!(out, "- {f}");
        }
    }
    // Report-only objects (`kubefedctl.kubefed.io/apply: ReportDiff`): how
    // their copies differ, nothing written.
    if !r.drift.is_empty() {
        let _ = writeln!(out, "\n#### drift (report-only, not written)\n");
        for d in &r.drift {
            let _ = writeln!(out, "- {}", d.line());
        }
    }
    out
}

/// CLUSTER, READY, CREATED, UPDATED, DELETED, UNCHANGED, FAILED.
pub fn summary_table(r: &crate::sync::run::report::Report, mode: PlanMode) -> String {
    let plans = mode.plans();
    let mut t = crate::terminal::output::table(&[
        "CLUSTER",
        "READY",
        if plans { "TO CREATE" } else { "CREATED" },
        if plans { "TO UPDATE" } else { "UPDATED" },
        if plans { "TO DELETE" } else { "DELETED" },
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
    use crate::sync::run::report::Report;

    #[test]
    fn a_markdown_plan_has_a_table_per_member_and_collapsed_diffs() {
        let change = |cluster: &str, verb: &str, name: &str, diff: Option<&str>| Change {
            diff: diff.map(str::to_string),
            ..Change::new(
                Place::member(cluster),
                verb,
                format!("ConfigMap shop/{name}"),
            )
        };
        let mut r = Report {
            changes: vec![
                Change::new(Place::Host, "create", "FederatedConfigMap shop/new"),
                change("m2", "create", "new", None),
                change("m1", "update", "web", Some("-a: 1\n+a: 2\n")),
            ],
            ..Report::default()
        };
        for i in 0..(MARKDOWN_ROWS + 3) {
            r.changes
                .push(change("m3", "delete", &format!("x{i}"), None));
        }
        let md = markdown_plan(&r, PlanMode::PLAN);
        assert!(md.starts_with("### kubefedctl reconcile plan: 205 member change(s) in 3 member(s), 1 host change(s)"), "{md}");
        assert!(md.contains("#### host\n\n- create FederatedConfigMap shop/new"));
        let m1 = md.find("#### m1").unwrap();
        let m2 = md.find("#### m2").unwrap();
        assert!(m1 < m2, "members in name order");
        assert!(md.contains("| update | `ConfigMap shop/web` |"));
        assert!(md.contains("<details><summary>m1: update ConfigMap shop/web</summary>\n\n```diff\n-a: 1\n+a: 2\n```"));
        assert!(md.contains("… and 3 more"));
        assert!(!md.contains("shop/x200"), "cut after {MARKDOWN_ROWS} rows");
        assert!(!md.contains("drift"));
    }

    #[test]
    fn a_markdown_plan_lists_the_drift_of_report_only_objects() {
        use crate::core::propagation::drift::FieldDrift;
        let r = Report {
            drift: vec![crate::sync::run::report::DriftLine {
                cluster: "m1".into(),
                object: "ConfigMap shop/web".into(),
                state: "differs",
                fields: vec![FieldDrift {
                    path: "/data/k".into(),
                    member: Some("by hand".into()),
                    desired: Some("v".into()),
                    hidden: false,
                }],
            }],
            ..Report::default()
        };
        let md = markdown_plan(&r, PlanMode::PLAN);
        assert!(md.contains("#### drift (report-only, not written)\n\n- m1: ConfigMap shop/web: /data/k: member \"by hand\", desired \"v\""), "{md}");
    }
}
