//! A plan's waves for people: a markdown table for `--dry-run -o markdown`
//! (a pull request shows which members a change reaches first) and lines
//! of text for `status` and `--dry-run`.

use std::fmt::Write;

use super::plan::{PlannedWave, RolloutPlan, RolloutState, Step};

/// What happens to one batch in this plan.
fn when(plan: &RolloutPlan, step: Step) -> &'static str {
    let current = match &plan.state {
        RolloutState::Complete => return "done",
        RolloutState::Waiting(w) => w.step,
        RolloutState::AwaitingApproval(a) => a.step,
        RolloutState::Halted(h) => h.step,
        RolloutState::Aborted(_) => return "aborted",
    };
    match step.cmp(&current) {
        std::cmp::Ordering::Less => "done",
        std::cmp::Ordering::Equal if matches!(plan.state, RolloutState::Halted(_)) => "halted",
        std::cmp::Ordering::Equal if matches!(plan.state, RolloutState::AwaitingApproval(_)) => {
            "after approval"
        }
        std::cmp::Ordering::Equal => "now",
        std::cmp::Ordering::Greater => "later",
    }
}

fn batches(w: &PlannedWave) -> impl Iterator<Item = (Step, &Vec<String>)> {
    w.batches.iter().enumerate().map(move |(b, members)| {
        (
            Step {
                wave: w.wave,
                batch: b,
            },
            members,
        )
    })
}

/// `#### rollout of <object>` and a table of wave, batch, members and
/// whether the batch is done, written now, later, or where it halted.
pub fn waves_markdown(object: &str, plan: &RolloutPlan) -> String {
    let mut out = format!(
        "#### rollout of `{object}`\n\n| wave | batch | members | when |\n|---|---|---|---|\n"
    );
    for w in &plan.waves {
        for (step, members) in batches(w) {
            let names: Vec<String> = members.iter().map(|m| format!("`{m}`")).collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                w.label(),
                step.batch + 1,
                names.join(", "),
                when(plan, step)
            );
        }
    }
    let end = match &plan.state {
        RolloutState::Halted(h) => h.to_string(),
        RolloutState::Aborted(a) => a.to_string(),
        RolloutState::AwaitingApproval(a) => a.to_string(),
        _ => String::new(),
    };
    if !end.is_empty() {
        let _ = writeln!(out, "\n{end}");
    }
    out
}

/// One line per batch: `wave 1 batch 1: m1 (now)`.
pub fn waves_text(plan: &RolloutPlan) -> String {
    let mut out = String::new();
    for w in &plan.waves {
        for (step, members) in batches(w) {
            let _ = writeln!(
                out,
                "{} batch {}: {} ({})",
                w.label(),
                step.batch + 1,
                members.join(", "),
                when(plan, step)
            );
        }
    }
    out
}
