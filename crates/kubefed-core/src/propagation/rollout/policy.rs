//! The rollout policy: ordered waves of members and the gates between
//! them, read from the `kubefedctl.kubefed.io/rollout` annotation of a
//! federated object or from `reconcile --rollout` for a whole run.
//!
//! The fields follow OCM's `RolloutConfig` and `RolloutProgressive`
//! (`open-cluster-management.io/api` `cluster/v1alpha1/types_rolloutstrategy.go`)
//! where they overlap; a wave plays the part of a decision group. Where we
//! differ it is said at the field.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::describe::{FieldError, FieldProblem, describe_federated};
use crate::propagation::placement::{Selector, SelectorError};
use crate::time::parse_duration;

/// The annotation of a federated object that holds its policy as JSON
/// (KubeFed's controller ignores it: it rolls out all at once).
pub const ROLLOUT_ANNOTATION: &str = "kubefedctl.kubefed.io/rollout";

const FIELDS: &str = "waves, progressDeadline, minSuccessTime, maxFailures, maxConcurrency";

/// How a change reaches the members an object is placed on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RolloutPolicy {
    /// In order; a member belongs to the first wave that names or selects
    /// it, members in none go in a last, implicit wave.
    pub waves: Vec<Wave>,
    /// How long a member may take to become ready once it got the change;
    /// `None` (`"None"` or absent): as long as it takes, as OCM's default.
    pub progress_deadline: Option<Duration>,
    /// How long every member of a batch must stay ready before the next
    /// batch or wave starts (OCM's soak time).
    pub min_success_time: Duration,
    /// Failed members a wave tolerates (of the wave's size, as OCM's
    /// ProgressivePerGroup counts per group); one more halts the rollout.
    pub max_failures: IntOrPercent,
    /// Members of a wave written together; `None`: the whole wave.
    pub max_concurrency: Option<IntOrPercent>,
    /// The waves (indexes in `waves`) that say `"approval": true`: the
    /// rollout stops before each until someone approves it for the
    /// version rolled out (`kubefedctl rollout approve`; ours, as
    /// KubeFleet's approval tasks between stages: OCM has no such gate).
    pub approvals: BTreeSet<usize>,
}

/// One wave: members by name or by their KubeFedCluster labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wave {
    Clusters(Vec<String>),
    /// The selector, and its JSON as written (for plans and messages).
    Selector(Selector, String),
}

impl Wave {
    /// Whether the member `name` with `labels` belongs to this wave.
    pub fn takes(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Wave::Clusters(names) => names.iter().any(|n| n == name),
            Wave::Selector(selector, _) => selector.matches(labels),
        }
    }

    /// How the wave is written: `clusters m1, m2` or `clusterSelector {...}`.
    pub fn describe(&self) -> String {
        match self {
            Wave::Clusters(names) => format!("clusters {}", names.join(", ")),
            Wave::Selector(_, text) => format!("clusterSelector {text}"),
        }
    }
}

/// OCM's `intstr` for `maxFailures` and `maxConcurrency`: a count, or a
/// percentage from 0% to 100% (OCM's pattern `^((100|[0-9]{1,2})%|[0-9]+)$`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOrPercent {
    Count(u64),
    Percent(u8),
}

impl Default for IntOrPercent {
    fn default() -> Self {
        IntOrPercent::Count(0)
    }
}

impl IntOrPercent {
    /// The count this is of `total` members: a percentage rounded up, as
    /// OCM's `calculateRolloutSize` (`math.Ceil`), never more than `total`.
    /// OCM falls back to its default when a count exceeds the total (so
    /// `maxFailures: 5` on a wave of 3 tolerates none there); we clamp.
    pub fn of(self, total: usize) -> usize {
        let n = match self {
            IntOrPercent::Count(n) => usize::try_from(n).unwrap_or(usize::MAX),
            IntOrPercent::Percent(p) => (usize::from(p) * total).div_ceil(100),
        };
        n.min(total)
    }

    fn describe(self) -> String {
        match self {
            IntOrPercent::Count(n) => n.to_string(),
            IntOrPercent::Percent(p) => format!("{p}%"),
        }
    }
}

impl std::fmt::Display for IntOrPercent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// A policy that cannot be read.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum PolicyError {
    #[error("not JSON: {0}")]
    NotJson(String),
    /// A field and what is wrong with it (`waves[1].clusterSelector.matchLabels is not an object`).
    #[error("{0}")]
    Field(FieldError),
}

/// A federated object's annotation that cannot be read: nothing of that
/// object is written.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{object}: annotation {ROLLOUT_ANNOTATION}: {problem}")]
pub struct ObjectPolicyError {
    pub object: String,
    pub problem: PolicyError,
}

fn field(path: impl Into<String>, problem: FieldProblem) -> PolicyError {
    PolicyError::Field(FieldError::new(path, problem))
}

fn invalid(path: impl Into<String>, why: String) -> PolicyError {
    field(path, FieldProblem::Invalid(why))
}

impl RolloutPolicy {
    /// All at once, today's behaviour: one wave of every member, no gate.
    pub fn all_at_once() -> RolloutPolicy {
        RolloutPolicy::default()
    }

    /// Whether this policy gates nothing: the run may write every member
    /// at once, as without a policy.
    pub fn is_all_at_once(&self) -> bool {
        self.waves.is_empty()
            && self
                .max_concurrency
                .is_none_or(|c| c == IntOrPercent::Count(0))
            && self.min_success_time.is_zero()
    }

    /// The policy of an annotation's or `--rollout`'s JSON text.
    pub fn parse(text: &str) -> Result<RolloutPolicy, PolicyError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| PolicyError::NotJson(e.to_string()))?;
        RolloutPolicy::from_value(&value)
    }

    /// The policy of a JSON value; unknown fields are refused, so that a
    /// misspelt gate is not silently ignored.
    pub fn from_value(value: &Value) -> Result<RolloutPolicy, PolicyError> {
        let Value::Object(m) = value else {
            return Err(field("", FieldProblem::NotA("an object")));
        };
        if let Some(k) = m.keys().find(|k| !FIELDS.split(", ").any(|f| f == *k)) {
            return Err(invalid(
                "",
                format!("unknown field {k:?} (known: {FIELDS})"),
            ));
        }
        let parsed: Vec<(Wave, bool)> = match m.get("waves") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(list)) => list
                .iter()
                .enumerate()
                .map(|(i, w)| parse_wave(w, &format!("waves[{i}]")))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(field("waves", FieldProblem::NotA("a list"))),
        };
        let approvals = (parsed.iter().enumerate())
            .filter(|(_, (_, approval))| *approval)
            .map(|(i, _)| i)
            .collect();
        let waves = parsed.into_iter().map(|(w, _)| w).collect();
        let progress_deadline = match m.get("progressDeadline") {
            Some(Value::String(s)) if s == "None" => None,
            None | Some(Value::Null) => None,
            Some(v) => Some(duration(v, "progressDeadline")?),
        };
        let min_success_time = match m.get("minSuccessTime") {
            None | Some(Value::Null) => Duration::ZERO,
            Some(v) => duration(v, "minSuccessTime")?,
        };
        let max_failures = match m.get("maxFailures") {
            None | Some(Value::Null) => IntOrPercent::default(),
            Some(v) => int_or_percent(v, "maxFailures")?,
        };
        let max_concurrency = match m.get("maxConcurrency") {
            None | Some(Value::Null) => None,
            Some(v) => Some(int_or_percent(v, "maxConcurrency")?),
        };
        Ok(RolloutPolicy {
            waves,
            progress_deadline,
            min_success_time,
            max_failures,
            max_concurrency,
            approvals,
        })
    }

    /// The policy a federated object asks for in its annotation, `None`
    /// without one (the run's `--rollout` policy, or all at once, applies).
    pub fn of_object(fed: &Value) -> Result<Option<RolloutPolicy>, ObjectPolicyError> {
        let Some(text) = fed["metadata"]["annotations"][ROLLOUT_ANNOTATION].as_str() else {
            return Ok(None);
        };
        RolloutPolicy::parse(text)
            .map(Some)
            .map_err(|problem| ObjectPolicyError {
                object: describe_federated(fed),
                problem,
            })
    }
}

/// A wave has exactly one of `clusters` and `clusterSelector`, and may
/// say `approval` (a boolean); the wave and whether it waits for one.
fn parse_wave(w: &Value, path: &str) -> Result<(Wave, bool), PolicyError> {
    let Value::Object(m) = w else {
        return Err(field(path, FieldProblem::NotA("an object")));
    };
    if let Some(k) = m
        .keys()
        .find(|k| !["clusters", "clusterSelector", "approval"].contains(&k.as_str()))
    {
        return Err(invalid(
            path,
            format!("unknown field {k:?} (known: clusters, clusterSelector, approval)"),
        ));
    }
    let approval = match m.get("approval") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(field(
                format!("{path}.approval"),
                FieldProblem::NotA("a boolean"),
            ));
        }
    };
    members_of(m, path).map(|wave| (wave, approval))
}

/// The members a wave takes: its `clusters` or its `clusterSelector`.
fn members_of(m: &Map<String, Value>, path: &str) -> Result<Wave, PolicyError> {
    match (present(m, "clusters"), present(m, "clusterSelector")) {
        (Some(_), Some(_)) | (None, None) => Err(invalid(
            path,
            "exactly one of clusters and clusterSelector is required".into(),
        )),
        (Some(list), None) => clusters(list, &format!("{path}.clusters")),
        (None, Some(selector)) => {
            let at = format!("{path}.clusterSelector");
            Selector::parse(selector)
                .map(|s| Wave::Selector(s, selector.to_string()))
                .map_err(|e| selector_error(&at, e))
        }
    }
}

fn present<'v>(m: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    m.get(key).filter(|v| !v.is_null())
}

fn clusters(list: &Value, path: &str) -> Result<Wave, PolicyError> {
    let Value::Array(items) = list else {
        return Err(field(path, FieldProblem::NotA("a list")));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item.as_str() {
            Some(name) if !name.is_empty() => Ok(name.to_string()),
            _ => Err(field(
                format!("{path}[{i}]"),
                FieldProblem::NotA("a cluster name"),
            )),
        })
        .collect::<Result<_, _>>()
        .map(Wave::Clusters)
}

/// A selector's problem at its field's path: `...clusterSelector.matchLabels is not an object`.
fn selector_error(at: &str, e: SelectorError) -> PolicyError {
    match e {
        SelectorError::NotAnObject => field(at, FieldProblem::NotA("an object")),
        SelectorError::LabelsNotAnObject => {
            field(format!("{at}.matchLabels"), FieldProblem::NotA("an object"))
        }
        SelectorError::LabelNotAString(k) => field(
            format!("{at}.matchLabels[{k}]"),
            FieldProblem::NotA("a string"),
        ),
        SelectorError::ExpressionsNotAList => field(
            format!("{at}.matchExpressions"),
            FieldProblem::NotA("a list"),
        ),
        SelectorError::Expression { index, problem } => invalid(
            format!("{at}.matchExpressions[{index}]"),
            problem.to_string(),
        ),
        other => invalid(at, other.to_string()),
    }
}

/// Go's `time.ParseDuration` forms with a unit (`90s`, `10m`, `1h30m`),
/// or `0`; a bare number is refused as Go refuses it.
fn duration(v: &Value, path: &str) -> Result<Duration, PolicyError> {
    let not = || invalid(path, format!("{v} is not a duration"));
    let Some(text) = v.as_str() else {
        return Err(not());
    };
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(not());
    }
    parse_duration(text).map_err(|_| not())
}

fn int_or_percent(v: &Value, path: &str) -> Result<IntOrPercent, PolicyError> {
    let not = || {
        invalid(
            path,
            format!("{v} is not a count or a percentage from 0% to 100%"),
        )
    };
    if let Some(n) = v.as_u64() {
        return Ok(IntOrPercent::Count(n));
    }
    let digits = v
        .as_str()
        .and_then(|s| s.strip_suffix('%'))
        .ok_or_else(not)?;
    if digits.is_empty() || digits.len() > 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(not());
    }
    match digits.parse::<u8>() {
        Ok(p) if p <= 100 => Ok(IntOrPercent::Percent(p)),
        _ => Err(not()),
    }
}
