//! Progressive rollouts across members (ours; kubefedctl issue #57): a
//! change reaches the members of a federated object wave by wave, each
//! gated on the readiness of the last, and halts at the first wave with
//! more failures than it tolerates. Pure: the engines read, write and keep
//! time; these modules decide.
//!
//! - [`policy`]: [`RolloutPolicy`], from the [`ROLLOUT_ANNOTATION`] or `--rollout`.
//! - [`plan`]: [`assign_waves`] and the planner, [`plan()`].
//! - [`ledger`]: [`RolloutRecord`], what a run records so the next resumes;
//!   the PropagatedVersion mid-rollout; [`abort`] (`--rollout-abort`), and
//!   a record marked aborted (`--previous FILE`: the host's object still
//!   asks for the aborted target, so runs of it write nothing).
//! - [`render`]: the waves as markdown or text.
//! - [`approval`]: approval gates before waves (`"approval": true`), the
//!   approvals beside the record, and `rollout approve`'s [`approve`].
//! - [`gate`]: steps 1–4 for one object in a round, and its decisions gated.
//! - [`pull`]: pull members (issue #68): the record admits them, their
//!   agents apply once admitted and report the copy the gate reads.
//! - [`rules`]: around the gate, which policy applies ([`policy_of`]), who is
//!   out of reach, what a round may write by where the waves stand, the
//!   report's [`Stand`], and when a one-shot run looks again.
//!
//! How a run uses them, for one object whose template or overrides hashes
//! differ from its PropagatedVersion's (an object whose hashes match is
//! rolled out: write as today, no gate):
//! 1. `RolloutRecord::resume(parsed annotation, &target)`;
//! 2. per placed member, `record.observe(name, labels, readiness, now)`
//!    (readiness of its copy when the record says it got the target);
//! 3. `plan(RolloutInput { policy, members, from: record.step, approved, now })`;
//! 4. `record.writing(m, now)` for each of `plan.write` and record it
//!    (annotation and [`RolloutRecord::propagated_versions`]) before the
//!    member writes, then `record.wrote(m, version)`, `record.step =
//!    plan.step`, and record again; complete: the PropagatedVersion from
//!    `propagated_versions(.., true)` and no annotation.
//!
//! Where we differ from OCM's rolloutStrategy: waves are named or
//! label-selected members rather than placement decision groups; a
//! `Failed` readiness is a failure at once (OCM waits for its timeout);
//! `maxConcurrency` cuts a wave into fixed batches gated one after the
//! other (OCM's `Progressive` keeps a sliding window of that many); a
//! count of `maxFailures` above the wave's size tolerates the whole wave
//! (OCM falls back to 0).

pub mod approval;
pub mod gate;
pub mod ledger;
pub mod plan;
pub mod policy;
pub mod pull;
pub mod render;
pub mod rules;
#[cfg(test)]
mod tests;

pub use approval::{
    APPROVALS_ANNOTATION, Approval, ApproveError, ApproveRequest, Approved, Identity,
    approvals_text, approve, approved_waves, parse_approvals,
};
pub use gate::{
    MemberCopy, Rolling, abort_at_once, abort_to_previous, approvals_of, halted_status,
    record_text, rolled_out, target_of,
};
pub use ledger::{
    AbortError, AbortRecord, MemberRecord, ROLLOUT_STATUS_ANNOTATION, Rollback, RolloutRecord,
    Target, abort,
};
pub use plan::{
    Aborted, AwaitingApproval, Halt, Health, MemberFailure, MemberState, OnTarget, PlannedWave,
    RolloutInput, RolloutPlan, RolloutState, Step, Wait, assign_waves, plan,
};
pub use policy::{
    IntOrPercent, ObjectPolicyError, PolicyError, ROLLOUT_ANNOTATION, RolloutPolicy, Wave,
};
pub use render::{waves_markdown, waves_text};
pub use rules::{
    End, RolloutStand, Stand, next_round, out_of_reach, policy_of, stand, stand_over, write_nothing,
};
