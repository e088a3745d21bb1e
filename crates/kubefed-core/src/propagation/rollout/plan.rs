//! The wave planner: which members a change reaches now, which wait, and
//! whether the rollout waits, halted or is complete — from the policy, what
//! each member holds, its readiness and `now`, so that any run (one-shot or
//! the watch, killed or not) reaches the same decision from the same record.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::policy::{IntOrPercent, RolloutPolicy};

/// Where a rollout stands: the wave (its index in the policy's `waves`;
/// `waves.len()` is the implicit last wave of members in none) and the
/// batch inside it. Steps before it have passed and are not gated again.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Step {
    pub wave: usize,
    pub batch: usize,
}

/// One non-empty wave of the members an object is placed on, split into
/// batches of at most `maxConcurrency` members, each sorted by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedWave {
    /// The wave's index in the policy (`waves.len()`: the implicit last).
    pub wave: usize,
    /// Whether this is the implicit wave of members no wave takes.
    pub implicit: bool,
    pub batches: Vec<Vec<String>>,
}

impl PlannedWave {
    /// All its members, in batch order.
    pub fn members(&self) -> impl Iterator<Item = &String> {
        self.batches.iter().flatten()
    }

    /// How messages name it: `wave 2` (the policy's `waves[1]`), or
    /// `wave 3 (members in no wave)`.
    pub fn label(&self) -> String {
        if self.implicit {
            format!("wave {} (members in no wave)", self.wave + 1)
        } else {
            format!("wave {}", self.wave + 1)
        }
    }
}

/// The members in waves: each in the first wave that names or selects
/// it, the rest last; empty waves skipped; by name inside a wave.
/// `maxConcurrency` cuts a wave into fixed batches (a percentage of the
/// wave's size, rounded up as OCM's `calculateRolloutSize`; `0` or more
/// than the wave: one batch, as OCM falls back to the whole group).
pub fn assign_waves<'a>(
    policy: &RolloutPolicy,
    members: impl IntoIterator<Item = (&'a str, &'a BTreeMap<String, String>)>,
) -> Vec<PlannedWave> {
    let mut by_wave: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (name, labels) in members {
        let wave = policy
            .waves
            .iter()
            .position(|w| w.takes(name, labels))
            .unwrap_or(policy.waves.len());
        by_wave.entry(wave).or_default().push(name.to_string());
    }
    by_wave
        .into_iter()
        .map(|(wave, mut names)| {
            names.sort();
            names.dedup();
            let size = batch_size(policy.max_concurrency, names.len());
            PlannedWave {
                wave,
                implicit: wave == policy.waves.len(),
                batches: names.chunks(size).map(<[String]>::to_vec).collect(),
            }
        })
        .collect()
}

fn batch_size(max: Option<IntOrPercent>, total: usize) -> usize {
    match max.map(|m| m.of(total)) {
        Some(n) if n > 0 => n,
        _ => total.max(1),
    }
}

/// A placed member as the planner sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberState {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// `None`: it holds another version or nothing (it gets the target
    /// when its step comes).
    pub target: Option<OnTarget>,
}

/// A member that holds the target version (or whose write of it began).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OnTarget {
    /// When it got the target (seconds since the epoch): its progress
    /// deadline counts from here, as OCM's from the cluster's transition.
    pub since: i64,
    pub health: Health,
}

/// A member copy's readiness by the `--wait-ready` rules, with the time
/// the record noted it ready.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    Ready {
        since: i64,
    },
    Pending(String),
    /// It will not become ready by waiting (a failed Job): a failure at
    /// once, where OCM waits for its timeout first.
    Failed(String),
}

/// A member that counts as a failure, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberFailure {
    pub member: String,
    pub reason: String,
}

/// The rollout stopped: more failures in a wave than it tolerates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Halt {
    pub step: Step,
    /// As messages name the wave (`wave 1`).
    pub wave_label: String,
    pub failures: Vec<MemberFailure>,
    pub tolerated: usize,
}

impl std::fmt::Display for Halt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let members: Vec<String> = self
            .failures
            .iter()
            .map(|m| format!("{} ({})", m.member, m.reason))
            .collect();
        write!(
            f,
            "rollout halted in {}: {} (tolerated: {})",
            self.wave_label,
            members.join(", "),
            self.tolerated
        )
    }
}

/// What the current step waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wait {
    pub step: Step,
    pub wave_label: String,
    /// Members not done yet and why (`m1: 0/3 available`, `m1: ready for 20s of 1m`).
    pub members: Vec<(String, String)>,
    /// When a member's soak ends or its deadline passes: look again then
    /// (or sooner, when a watch sees a readiness change). `None`: only a
    /// readiness change moves it on.
    pub recheck_at: Option<i64>,
}

/// The rollout was aborted (`--rollout-abort --previous FILE`): its
/// members went back to the previous version while the federated object
/// still asks for this one, so runs of this version write nothing; a new
/// template starts over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Aborted {
    /// When (seconds since the epoch).
    pub at: i64,
    /// Members still on the aborted version (their way back not
    /// confirmed), by name.
    pub left: Vec<String>,
}

impl std::fmt::Display for Aborted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "aborted at {}: ", crate::time::rfc3339(self.at))?;
        match self.left.is_empty() {
            true => write!(f, "every member is on the previous version")?,
            false => write!(
                f,
                "{} still on this version (--rollout-abort --previous FILE sends them back)",
                self.left.join(", ")
            )?,
        }
        write!(
            f,
            "; nothing of this version is written (change the template to go on)"
        )
    }
}

/// The rollout stopped before a wave whose policy asks for an approval
/// (`"approval": true`) not given for this version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwaitingApproval {
    /// The step it starts at once approved (the wave's first batch).
    pub step: Step,
    /// As messages name the wave (`wave 2`).
    pub wave_label: String,
}

impl AwaitingApproval {
    /// The wave as messages number it (`2`: the policy's `waves[1]`).
    pub fn wave(&self) -> usize {
        self.step.wave + 1
    }
}

impl std::fmt::Display for AwaitingApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "awaiting approval: {}", self.wave_label)
    }
}

/// How the rollout stands after this decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RolloutState {
    Waiting(Wait),
    AwaitingApproval(AwaitingApproval),
    Halted(Halt),
    Complete,
    Aborted(Aborted),
}

/// The planner's decision for one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RolloutPlan {
    pub waves: Vec<PlannedWave>,
    /// The step to record (`None` once complete: drop the record).
    pub step: Option<Step>,
    /// Members to give the target now, by name.
    pub write: Vec<String>,
    /// Members that keep the version they hold (later steps), by name.
    pub keep: Vec<String>,
    pub state: RolloutState,
}

impl RolloutPlan {
    /// A plan of no waves that writes nothing in them: an abort's (the
    /// members go back as decided, or not at all).
    pub fn without_waves(state: RolloutState) -> RolloutPlan {
        RolloutPlan {
            waves: Vec::new(),
            step: None,
            write: Vec::new(),
            keep: Vec::new(),
            state,
        }
    }
}

/// What the planner is given for one object.
#[derive(Clone, Copy, Debug)]
pub struct RolloutInput<'a> {
    pub policy: &'a RolloutPolicy,
    /// The members the object is placed on (removed ones are not here).
    pub members: &'a [MemberState],
    /// The recorded step of this target's rollout; `Step::default()` for
    /// a new target (it starts over from the first wave).
    pub from: Step,
    /// The gated waves (indexes in the policy's `waves`) approved for
    /// this target: the others of `policy.approvals` stop the rollout.
    pub approved: &'a BTreeSet<usize>,
    pub now: i64,
}

/// The decision. Steps before `from` have passed: their members that do
/// not hold the target (newly placed ones) get it now. From `from` on,
/// each step's members get the target; the next step starts when every
/// one of them is ready for `minSuccessTime` or a tolerated failure. A
/// wave with more failures than `maxFailures` halts it: nothing is written.
/// A wave that asks for an approval not given is not started: the rollout
/// awaits it once the steps before have passed.
pub fn plan(input: RolloutInput) -> RolloutPlan {
    let RolloutInput {
        policy,
        members,
        from,
        approved,
        now,
    } = input;
    let waves = assign_waves(policy, members.iter().map(|m| (m.name.as_str(), &m.labels)));
    let by_name: BTreeMap<&str, &MemberState> =
        members.iter().map(|m| (m.name.as_str(), m)).collect();
    let mut write = Vec::new();
    let mut state = RolloutState::Complete;
    let mut step = None;
    'waves: for w in &waves {
        let mut failures = Vec::new();
        for (b, batch) in w.batches.iter().enumerate() {
            let here = Step {
                wave: w.wave,
                batch: b,
            };
            let gated = policy.approvals.contains(&w.wave) && !approved.contains(&w.wave);
            if b == 0 && here >= from && gated {
                state = RolloutState::AwaitingApproval(AwaitingApproval {
                    step: here,
                    wave_label: w.label(),
                });
                step = Some(here);
                break 'waves;
            }
            let verdict = judge(batch, &by_name, policy, now);
            failures.extend(verdict.failures);
            write.extend(verdict.unwritten);
            if here < from {
                continue;
            }
            let tolerated = policy.max_failures.of(w.members().count());
            if failures.len() > tolerated {
                return halted(waves.clone(), here, w.label(), failures, tolerated, by_name);
            }
            if !verdict.waiting.is_empty() || write_in(batch, &write) {
                state = RolloutState::Waiting(Wait {
                    step: here,
                    wave_label: w.label(),
                    members: verdict.waiting,
                    recheck_at: verdict.recheck_at,
                });
                step = Some(here);
                break 'waves;
            }
        }
    }
    let keep = kept(&by_name, &write);
    RolloutPlan {
        waves,
        step,
        write,
        keep,
        state,
    }
}

fn write_in(batch: &[String], write: &[String]) -> bool {
    batch.iter().any(|m| write.contains(m))
}

/// Members holding neither the target nor a write of it: they keep theirs.
fn kept(by_name: &BTreeMap<&str, &MemberState>, write: &[String]) -> Vec<String> {
    by_name
        .values()
        .filter(|m| m.target.is_none() && !write.contains(&m.name))
        .map(|m| m.name.clone())
        .collect()
}

fn halted(
    waves: Vec<PlannedWave>,
    step: Step,
    wave_label: String,
    failures: Vec<MemberFailure>,
    tolerated: usize,
    by_name: BTreeMap<&str, &MemberState>,
) -> RolloutPlan {
    RolloutPlan {
        waves,
        step: Some(step),
        write: Vec::new(),
        keep: kept(&by_name, &[]),
        state: RolloutState::Halted(Halt {
            step,
            wave_label,
            failures,
            tolerated,
        }),
    }
}

/// One batch's members now.
#[derive(Default)]
struct Verdict {
    unwritten: Vec<String>,
    waiting: Vec<(String, String)>,
    failures: Vec<MemberFailure>,
    recheck_at: Option<i64>,
}

impl Verdict {
    fn recheck(&mut self, at: i64) {
        self.recheck_at = Some(self.recheck_at.map_or(at, |t| t.min(at)));
    }
}

fn judge(
    batch: &[String],
    by_name: &BTreeMap<&str, &MemberState>,
    policy: &RolloutPolicy,
    now: i64,
) -> Verdict {
    let mut v = Verdict::default();
    let soak = secs(policy.min_success_time);
    for name in batch {
        let Some(on) = by_name.get(name.as_str()).and_then(|m| m.target.as_ref()) else {
            // Written now: its deadline counts from now.
            if let Some(d) = policy.progress_deadline {
                v.recheck(now.saturating_add(secs(d)));
            }
            v.unwritten.push(name.clone());
            continue;
        };
        let deadline = policy
            .progress_deadline
            .map(|d| on.since.saturating_add(secs(d)));
        match &on.health {
            Health::Ready { since } if since.saturating_add(soak) <= now => {}
            Health::Ready { since } => {
                let left = since.saturating_add(soak);
                v.waiting.push((
                    name.clone(),
                    format!("ready for {}s of {}s", now - since, soak),
                ));
                v.recheck(left);
            }
            Health::Failed(reason) => v.failures.push(MemberFailure {
                member: name.clone(),
                reason: reason.clone(),
            }),
            Health::Pending(reason) => match deadline {
                Some(d) if d <= now => v.failures.push(MemberFailure {
                    member: name.clone(),
                    reason: format!("not ready within the progress deadline: {reason}"),
                }),
                _ => {
                    v.waiting.push((name.clone(), reason.clone()));
                    if let Some(d) = deadline {
                        v.recheck(d);
                    }
                }
            },
        }
    }
    v
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}
