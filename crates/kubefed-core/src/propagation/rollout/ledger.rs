//! What a rollout records so that a killed run resumes and no member holds
//! a version nobody recorded: the target's hashes, the step reached, and
//! per member that got the target when its write began, its member version
//! once written, and since when it is ready. It lives as JSON in the
//! `kubefedctl.kubefed.io/rollout-status` annotation of the object's
//! (Cluster)PropagatedVersion, next to the versions it completes.
//!
//! The PropagatedVersion itself stays exact for KubeFed: mid-rollout it
//! keeps the previous hashes and only the entries of members still on the
//! previous version ([`RolloutRecord::propagated_versions`]), so a KubeFed
//! controller taking over sees a change not yet propagated and finishes
//! it all at once, and never trusts a stale entry; complete, it holds the
//! target's hashes and every member's version, as without a rollout.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::plan::{Health, MemberState, OnTarget, Step};
use crate::propagation::readiness::Readiness;
use crate::propagation::version::merged_status;
use crate::time::{parse_rfc3339, rfc3339};

/// The annotation of the (Cluster)PropagatedVersion that holds a rollout
/// in progress (KubeFed writes only that object's `status`, so it stays).
pub const ROLLOUT_STATUS_ANNOTATION: &str = "kubefedctl.kubefed.io/rollout-status";

/// A version of a federated object as KubeFed hashes it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    pub template_version: String,
    pub overrides_version: String,
}

impl Target {
    /// The hashes a PropagatedVersion `status` records, when it has them.
    pub fn of_status(status: &Value) -> Option<Target> {
        Some(Target {
            template_version: status.get("templateVersion")?.as_str()?.to_string(),
            overrides_version: status.get("overridesVersion")?.as_str()?.to_string(),
        })
    }
}

/// A rollout in progress: what the annotation holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutRecord {
    #[serde(flatten)]
    pub target: Target,
    /// The step in progress (earlier steps passed).
    #[serde(default)]
    pub step: Step,
    #[serde(default)]
    pub members: BTreeMap<String, MemberRecord>,
    /// `--rollout-abort --previous FILE`: the target was aborted and its
    /// members sent back to the previous version; `members` then holds
    /// those still on the target. Runs of this target write nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted: Option<AbortRecord>,
    /// The wave (as messages number it) the rollout stopped before, until
    /// someone approves it for this target (`approval::approve`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaiting_approval: Option<usize>,
}

/// When a rollout was aborted, and the version its members went back to
/// (the one the PropagatedVersion records).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AbortRecord {
    #[serde(with = "instant")]
    pub at: i64,
    #[serde(flatten)]
    pub to: Target,
}

/// One member that got the target.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberRecord {
    /// When its write began (RFC 3339): recorded before the write.
    #[serde(with = "instant")]
    pub since: i64,
    /// Its member version (`gen:`/`rv:`) once written; `None`: the write
    /// began and no answer was recorded (write it again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Since when it is ready, as runs saw it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "optional_instant"
    )]
    pub ready_since: Option<i64>,
}

impl RolloutRecord {
    /// The record to go on with for `target`: the existing one when it is
    /// this target's, else a new one from the first wave (a new template
    /// starts over).
    pub fn resume(existing: Option<RolloutRecord>, target: &Target) -> RolloutRecord {
        match existing {
            Some(r) if r.target == *target => r,
            _ => RolloutRecord {
                target: target.clone(),
                ..RolloutRecord::default()
            },
        }
    }

    /// The record in an annotation's value.
    pub fn parse(text: &str) -> Result<RolloutRecord, String> {
        serde_json::from_str(text)
            .map_err(|e| format!("annotation {ROLLOUT_STATUS_ANNOTATION}: {e}"))
    }

    /// The annotation's value (compact JSON, members by name).
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The planner's view of member `name` from the record and its copy's
    /// readiness now (`None`: not observed), noting when it became ready
    /// (a member that is not ready loses its ready time). A member whose
    /// write began but has no recorded version is not on the target: the
    /// planner writes it again, its deadline still from the first try.
    pub fn observe(
        &mut self,
        name: &str,
        labels: &BTreeMap<String, String>,
        readiness: Option<&Readiness>,
        now: i64,
    ) -> MemberState {
        // A write that began and was not confirmed is written again.
        let confirmed = self.members.get_mut(name).filter(|m| m.version.is_some());
        let target = confirmed.map(|m| {
            let health = match readiness {
                Some(Readiness::Ready) => {
                    let since = *m.ready_since.get_or_insert(now);
                    Health::Ready { since }
                }
                Some(Readiness::Pending(why)) => Health::Pending(why.clone()),
                Some(Readiness::Failed(why)) => Health::Failed(why.clone()),
                None => Health::Pending("not observed".into()),
            };
            if !matches!(health, Health::Ready { .. }) {
                m.ready_since = None;
            }
            OnTarget {
                since: m.since,
                health,
            }
        });
        MemberState {
            name: name.to_string(),
            labels: labels.clone(),
            target,
        }
    }

    /// Before writing the target to `name`: record that its write began.
    pub fn writing(&mut self, name: &str, now: i64) {
        self.members
            .entry(name.to_string())
            .or_insert(MemberRecord {
                since: now,
                ..MemberRecord::default()
            });
    }

    /// After the write: its member version.
    pub fn wrote(&mut self, name: &str, version: &str) {
        if let Some(m) = self.members.get_mut(name) {
            m.version = Some(version.to_string());
            m.ready_since = None;
        }
    }

    /// `--rollout-abort --previous FILE`: the target aborted, its members
    /// going back to `to` (the first abort's time kept).
    pub fn abort(&mut self, to: &Target, now: i64) {
        let at = self.aborted.as_ref().map_or(now, |a| a.at);
        self.aborted = Some(AbortRecord { at, to: to.clone() });
    }

    /// Where it stands, for `status`: `wave 2: m1 ready, m2 written, m3
    /// writing`, or `awaiting approval: wave 2: m1 ready` (the step's wave as messages number it; each member that
    /// got the target: ready since a run saw it so, written, or its write
    /// begun and not confirmed).
    pub fn summary(&self) -> String {
        let members: Vec<String> = (self.members.iter())
            .map(|(name, m)| {
                let how = match (&m.version, m.ready_since) {
                    (Some(_), Some(_)) => "ready",
                    (Some(_), None) => "written",
                    (None, _) => "writing",
                };
                format!("{name} {how}")
            })
            .collect();
        let wave = match (&self.aborted, self.awaiting_approval) {
            (Some(_), _) => "aborted".to_string(),
            (None, Some(n)) => format!("awaiting approval: wave {n}"),
            (None, None) => format!("wave {}", self.step.wave + 1),
        };
        match members.is_empty() {
            true => wave,
            false => format!("{wave}: {}", members.join(", ")),
        }
    }

    /// The PropagatedVersion `status` to write alongside this record.
    /// In progress (`complete: false`): the previous hashes and entries of
    /// `existing`, without the members that got (or are getting) the
    /// target; complete: the target's hashes with the recorded versions.
    pub fn propagated_versions(
        &self,
        existing: Option<&Value>,
        selected: &BTreeSet<String>,
        complete: bool,
    ) -> Value {
        let t = &self.target;
        if complete {
            let recorded: BTreeMap<String, String> = self
                .members
                .iter()
                .filter_map(|(n, m)| Some((n.clone(), m.version.clone()?)))
                .collect();
            return merged_status(
                None,
                &t.template_version,
                &t.overrides_version,
                selected,
                &recorded,
            );
        }
        self.versions_with(existing, selected, &BTreeMap::new())
    }

    /// The PropagatedVersion `status` of a rollout not complete (in
    /// progress, or aborted): the previous hashes and entries of
    /// `existing`, without the members on (or getting) the target, with
    /// `back`: members sent back to the previous version and their new
    /// member versions.
    pub fn versions_with(
        &self,
        existing: Option<&Value>,
        selected: &BTreeSet<String>,
        back: &BTreeMap<String, String>,
    ) -> Value {
        let previous = existing.and_then(Target::of_status).unwrap_or_default();
        let still_old: BTreeSet<String> = selected
            .iter()
            .filter(|n| !self.members.contains_key(*n))
            .cloned()
            .collect();
        let back: BTreeMap<String, String> = (back.iter())
            .filter(|(n, _)| still_old.contains(*n))
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect();
        merged_status(
            existing,
            &previous.template_version,
            &previous.overrides_version,
            &still_old,
            &back,
        )
    }
}

/// Seconds since the epoch as RFC 3339 in the record.
pub(super) mod instant {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &i64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::rfc3339(*t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        let text = String::deserialize(d)?;
        super::parse_rfc3339(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("{text:?} is not an RFC 3339 time")))
    }
}

mod optional_instant {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => super::instant::serialize(t, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        text.map(|text| {
            super::parse_rfc3339(&text).ok_or_else(|| {
                serde::de::Error::custom(format!("{text:?} is not an RFC 3339 time"))
            })
        })
        .transpose()
    }
}

/// What `--rollout-abort` does: give `members` the version `to` again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rollback {
    pub to: Target,
    /// Members that got (or began getting) the aborted target, by name.
    pub members: Vec<String>,
}

/// Why a rollout cannot be rolled back.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum AbortError {
    #[error("no rollout in progress")]
    NoRollout,
    #[error("no previous version is recorded: the members that got this one keep it")]
    NothingRecorded,
    #[error(
        "previous template unknown: the PropagatedVersion records template {}; give it with -f or --previous FILE",
        .recorded.template_version
    )]
    PreviousUnknown { recorded: Target },
    #[error(
        "previous template unknown: the given template hashes to {}/{}, the PropagatedVersion records {}/{}",
        .given.template_version, .given.overrides_version,
        .recorded.template_version, .recorded.overrides_version
    )]
    PreviousMismatch { recorded: Target, given: Target },
}

/// `--rollout-abort`: the members that got the target go back to the
/// version the PropagatedVersion still records (`recorded`, its hashes
/// mid-rollout), only when the run knows that template (`previous`: the
/// hashes of the one `-f` or `--previous FILE` gave) — a hash alone
/// cannot be written back.
pub fn abort(
    record: Option<&RolloutRecord>,
    recorded: Option<&Target>,
    previous: Option<&Target>,
) -> Result<Rollback, AbortError> {
    let record = record.ok_or(AbortError::NoRollout)?;
    let recorded = recorded
        .filter(|t| !t.template_version.is_empty() || !t.overrides_version.is_empty())
        .ok_or(AbortError::NothingRecorded)?;
    match previous {
        None => Err(AbortError::PreviousUnknown {
            recorded: recorded.clone(),
        }),
        Some(given) if given != recorded => Err(AbortError::PreviousMismatch {
            recorded: recorded.clone(),
            given: given.clone(),
        }),
        Some(_) => Ok(Rollback {
            to: recorded.clone(),
            members: record.members.keys().cloned().collect(),
        }),
    }
}
