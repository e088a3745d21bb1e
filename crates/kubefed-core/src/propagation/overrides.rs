//! Per-cluster overrides (`spec.overrides[]`) with KubeFed v0.10's exact
//! semantics: validated as upstream's `GetOverrides` does, then applied as
//! an RFC 6902 JSON patch *the way evanphx/json-patch v4.12 applies it*.
//!
//! That engine is more lenient than the RFC and users rely on it: `replace`
//! of a missing object member acts like `add`, negative array indices count
//! from the end, a path's first segment is dropped without looking at it
//! (so `spec/replicas` means `/replicas`), and `replace` with the empty
//! path replaces the whole object. Matching it matters because
//! an override that works with the Go controller must work with us.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Number, Value};

use crate::propagation::federated::FederatedObject;
use crate::propagation::member_values::{self, MemberValueError};
use crate::propagation::placement::Selector;

/// Paths no override may touch: name, namespace and kind tie the member
/// object to its federated object. (`/apiVersion` is allowed on purpose.)
pub const FORBIDDEN_PATHS: [&str; 4] = [
    "/metadata/namespace",
    "/metadata/name",
    "/metadata/generateName",
    "/kind",
];

/// A JSON-patch operation allowed in an override (the CRD's enum).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Add,
    Remove,
    Replace,
}

impl Op {
    /// `""` means `replace` (upstream's defaulting).
    pub fn parse(text: &str) -> Option<Op> {
        match text {
            "" | "replace" => Some(Op::Replace),
            "add" => Some(Op::Add),
            "remove" => Some(Op::Remove),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Add => "add",
            Op::Remove => "remove",
            Op::Replace => "replace",
        }
    }
}

/// One `clusterOverrides[]` entry; `value` is `null` when omitted (that is
/// what upstream writes then).
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterOverride {
    pub op: Op,
    pub path: String,
    pub value: Value,
}

/// Why overrides cannot be used (upstream: `ApplyOverridesFailed`).
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum OverrideError {
    #[error("cluster {0:?} appears more than once")]
    DuplicateCluster(String),
    #[error("path {path:?} appears more than once for cluster {cluster:?}")]
    DuplicatePath { cluster: String, path: String },
    #[error("override[{index}] for cluster {cluster:?} has an invalid path: {path}")]
    ForbiddenPath {
        index: usize,
        cluster: String,
        path: String,
    },
    #[error("override[{index}] for cluster {cluster:?}: {problem}")]
    Invalid {
        index: usize,
        cluster: String,
        problem: String,
    },
    #[error("spec.overrides: {0}")]
    Malformed(String),
    /// A `${MEMBER_...}` variable of a value ([`member_values`]).
    #[error("spec.overrides: the value of {op} {path:?} for member {cluster:?}: {problem}")]
    MemberValue {
        cluster: String,
        op: &'static str,
        path: String,
        problem: MemberValueError,
    },
    #[error("override {op} {path:?} for cluster {cluster:?} failed: {message}")]
    Apply {
        cluster: String,
        op: &'static str,
        path: String,
        message: Box<PatchError>,
    },
}

/// Why one override did not apply, worded as evanphx/json-patch v4.12
/// (which KubeFed applies overrides with) words it.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum PatchError {
    #[error("replace operation value must be an object")]
    DocumentNotAnObject,
    /// The patched object cannot be decoded again (apimachinery's words).
    #[error("Object 'Kind' is missing in the patched object")]
    NoKind,
    #[error("{op} operation does not apply: doc is missing path: {path}")]
    MissingPath { op: &'static str, path: String },
    #[error("replace operation does not apply: doc is missing key: {0}")]
    MissingKey(String),
    #[error("value was not a proper array index: '{0}'")]
    NotAnIndex(String),
    #[error("Unable to access invalid index: {0}")]
    InvalidIndex(i64),
    #[error(
        "error in remove for path: '{path}': Unable to remove nonexistent key: {key}: missing value"
    )]
    NoSuchKey { path: String, key: String },
    #[error("error in remove for path: '{path}': {problem}")]
    Remove {
        path: String,
        problem: Box<PatchError>,
    },
}

/// The member an override list is chosen for: its name and its
/// KubeFedCluster's labels (for entries with a `clusterSelector`).
#[derive(Clone, Copy, Debug)]
pub struct MemberCluster<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
}

impl<'a> MemberCluster<'a> {
    /// A member known by name alone (no selector entry matches it).
    pub fn named(name: &'a str) -> MemberCluster<'a> {
        static NONE: BTreeMap<String, String> = BTreeMap::new();
        MemberCluster {
            name,
            labels: &NONE,
        }
    }
}

/// The annotation on a member object of a federated object whose overrides
/// choose clusters by label: a digest of the overrides that member got, so
/// that a member whose labels change is updated (the PropagatedVersion,
/// KubeFed's, records one overrides version for all members). Ours alone:
/// objects without selector entries never carry it.
pub const SELECTED_OVERRIDES_ANNOTATION: &str = "kubefedctl.kubefed.io/selected-overrides";

/// The overrides of `cluster`, after upstream's checks of the *whole*
/// `spec.overrides` (a duplicate anywhere fails every cluster, as upstream).
/// No entry for the cluster → empty list. Values as written: member
/// variables are not expanded (see [`ParsedOverrides::expanded_for_cluster`]).
pub fn overrides_for_cluster(
    fed: &Value,
    cluster: MemberCluster,
) -> Result<Vec<ClusterOverride>, OverrideError> {
    Ok(parse(FederatedObject::new(fed), false)?.for_cluster(cluster))
}

/// Every cluster's overrides, checked as [`overrides_for_cluster`] checks
/// them, for callers that want many clusters of one object
/// ([`ParsedOverrides::expanded_for_cluster`] expands member variables).
pub fn overrides_by_cluster(fed: &Value) -> Result<ParsedOverrides, OverrideError> {
    parse(FederatedObject::new(fed), false)
}

/// Offline validation of `spec.overrides`: upstream's run-time checks plus
/// the CRD's (op in add/remove/replace, path required and non-empty).
pub fn validate_overrides(fed: &Value) -> Result<(), OverrideError> {
    parse(FederatedObject::new(fed), true).map(|_| ())
}

/// `spec.overrides`, parsed: the entries naming a cluster, in list order,
/// and those choosing clusters by label (ours; KubeFed's controller
/// ignores `clusterSelector`).
#[derive(Clone, Debug, Default)]
pub struct ParsedOverrides {
    pub named: Vec<(String, Vec<ClusterOverride>)>,
    pub selected: Vec<(Selector, Vec<ClusterOverride>)>,
    /// Whether a value names a member variable ([`member_values`]).
    pub member_values: bool,
}

impl ParsedOverrides {
    /// A member's overrides in the order they apply: every selector entry
    /// that matches its labels, in list order, then the entry naming it,
    /// which so wins on a path both set.
    pub fn for_cluster(&self, cluster: MemberCluster) -> Vec<ClusterOverride> {
        let selected = self
            .selected
            .iter()
            .filter(|(s, _)| s.matches(cluster.labels))
            .flat_map(|(_, list)| list.iter().cloned());
        let named = self
            .named
            .iter()
            .filter(|(c, _)| c == cluster.name)
            .flat_map(|(_, list)| list.iter().cloned());
        selected.chain(named).collect()
    }

    /// [`Self::for_cluster`] with the member variables of each value
    /// expanded for `cluster` ([`member_values`]).
    pub fn expanded_for_cluster(
        &self,
        cluster: MemberCluster,
    ) -> Result<Vec<ClusterOverride>, OverrideError> {
        let mut list = self.for_cluster(cluster);
        if self.member_values {
            for o in &mut list {
                member_values::expand(&mut o.value, cluster.name, cluster.labels).map_err(
                    |problem| OverrideError::MemberValue {
                        cluster: cluster.name.to_string(),
                        op: o.op.as_str(),
                        path: o.path.clone(),
                        problem,
                    },
                )?;
            }
        }
        Ok(list)
    }

    /// Whether any entry chooses clusters by label.
    pub fn has_selectors(&self) -> bool {
        !self.selected.is_empty()
    }

    /// Whether members may get different overrides for reasons the
    /// PropagatedVersion cannot tell (their labels): selector entries, or
    /// values naming member variables. Such objects' member copies carry
    /// [`SELECTED_OVERRIDES_ANNOTATION`].
    pub fn varies_by_member(&self) -> bool {
        self.has_selectors() || self.member_values
    }

    /// Whether no entry holds an override.
    pub fn is_empty(&self) -> bool {
        self.named.iter().all(|(_, l)| l.is_empty())
            && self.selected.iter().all(|(_, l)| l.is_empty())
    }
}

/// The digest [`SELECTED_OVERRIDES_ANNOTATION`] holds: of the overrides a
/// member got, in order.
pub fn selected_digest(overrides: &[ClusterOverride]) -> String {
    use md5::{Digest, Md5};
    let text: Vec<Value> = overrides
        .iter()
        .map(|o| serde_json::json!([o.op.as_str(), o.path, o.value]))
        .collect();
    let digest = Md5::digest(Value::Array(text).to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse(fed: FederatedObject, strict: bool) -> Result<ParsedOverrides, OverrideError> {
    let items = match fed.overrides() {
        None | Some(Value::Null) => return Ok(ParsedOverrides::default()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(OverrideError::Malformed("not a list".into())),
    };
    let mut seen = BTreeSet::new();
    let mut out = ParsedOverrides::default();
    for (n, item) in items.iter().enumerate() {
        let cluster = match item.get("clusterName") {
            None | Some(Value::Null) => "",
            Some(Value::String(s)) => s.as_str(),
            Some(_) => {
                return Err(OverrideError::Malformed(format!(
                    "[{n}].clusterName is not a string"
                )));
            }
        }
        .to_string();
        let selector = selector_of(item, n, &cluster)?;
        if selector.is_none() && !seen.insert(cluster.clone()) {
            return Err(OverrideError::DuplicateCluster(cluster));
        }
        let label = match &selector {
            Some(_) => format!("selected by [{n}].clusterSelector"),
            None => cluster.clone(),
        };
        let overrides = parse_entry(item, &label, strict)?;
        out.member_values |= overrides
            .iter()
            .any(|o| member_values::has_member_values(&o.value));
        match selector {
            Some(s) => out.selected.push((s, overrides)),
            None => out.named.push((cluster, overrides)),
        }
    }
    Ok(out)
}

/// An entry's `clusterSelector`, when it has one instead of a cluster name.
fn selector_of(item: &Value, n: usize, cluster: &str) -> Result<Option<Selector>, OverrideError> {
    match item.get("clusterSelector") {
        None | Some(Value::Null) => Ok(None),
        Some(_) if !cluster.is_empty() => Err(OverrideError::Malformed(format!(
            "[{n}] has both clusterName and clusterSelector: one or the other"
        ))),
        Some(sel) => Selector::parse(sel)
            .map(Some)
            .map_err(|e| OverrideError::Malformed(format!("[{n}].clusterSelector: {e}"))),
    }
}

/// One entry's `clusterOverrides`, checked as upstream checks them;
/// `cluster` names the entry in errors.
fn parse_entry(
    item: &Value,
    cluster: &str,
    strict: bool,
) -> Result<Vec<ClusterOverride>, OverrideError> {
    let cluster = cluster.to_string();
    let list = match item.get("clusterOverrides") {
        None | Some(Value::Null) => &Vec::new(),
        Some(Value::Array(l)) => l,
        Some(_) => {
            return Err(OverrideError::Malformed(format!(
                "clusterOverrides of cluster {cluster:?} is not a list"
            )));
        }
    };
    let mut paths = BTreeSet::new();
    let mut overrides = Vec::new();
    for (index, o) in list.iter().enumerate() {
        let invalid = |problem: &str| OverrideError::Invalid {
            index,
            cluster: cluster.clone(),
            problem: problem.to_string(),
        };
        let path = match o.get("path") {
            None | Some(Value::Null) => "",
            Some(Value::String(p)) => p.as_str(),
            Some(_) => return Err(invalid("path is not a string")),
        };
        if FORBIDDEN_PATHS.contains(&path) {
            return Err(OverrideError::ForbiddenPath {
                index,
                cluster: cluster.clone(),
                path: path.to_string(),
            });
        }
        if !paths.insert(path.to_string()) {
            return Err(OverrideError::DuplicatePath {
                cluster: cluster.clone(),
                path: path.to_string(),
            });
        }
        let op_text = match o.get("op") {
            None | Some(Value::Null) => "",
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err(invalid("op is not a string")),
        };
        let op = Op::parse(op_text).ok_or_else(|| {
            invalid(&format!(
                "op {op_text:?} is not one of \"add\", \"remove\", \"replace\""
            ))
        })?;
        if strict && path.is_empty() {
            return Err(invalid("path is required"));
        }
        let value = o.get("value").cloned().unwrap_or(Value::Null);
        if strict && let Err(e) = member_values::check_syntax(&value) {
            return Err(invalid(&format!("value: {e}")));
        }
        overrides.push(ClusterOverride {
            op,
            path: path.to_string(),
            value,
        });
    }
    Ok(overrides)
}

/// Apply `cluster`'s overrides to `obj` in list order, all or nothing.
pub fn apply_overrides(
    obj: &mut Value,
    cluster: &str,
    overrides: &[ClusterOverride],
) -> Result<(), OverrideError> {
    if overrides.is_empty() {
        return Ok(());
    }
    // Patch a copy: a failing override leaves `obj` as it was.
    *obj = patched(obj.clone(), cluster, overrides)?;
    Ok(())
}

/// `doc` with `cluster`'s overrides applied in list order. It is consumed,
/// so a failure leaves no half-patched object behind (and callers that own
/// a fresh copy need not make another).
pub fn patched(
    mut doc: Value,
    cluster: &str,
    overrides: &[ClusterOverride],
) -> Result<Value, OverrideError> {
    for o in overrides {
        apply_one(&mut doc, o).map_err(|message| OverrideError::Apply {
            cluster: cluster.to_string(),
            op: o.op.as_str(),
            path: o.path.clone(),
            message: Box::new(message),
        })?;
    }
    // Upstream decodes the patched bytes back into an unstructured object,
    // which needs a kind.
    let has_kind = doc
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| !k.is_empty());
    if !has_kind && let Some(last) = overrides.last() {
        return Err(OverrideError::Apply {
            cluster: cluster.to_string(),
            op: last.op.as_str(),
            path: last.path.clone(),
            message: Box::new(PatchError::NoKind),
        });
    }
    Ok(doc)
}

/// The cluster's overrides, member variables expanded, then [`apply_overrides`].
pub fn apply_cluster_overrides(
    obj: &mut Value,
    fed: &Value,
    cluster: MemberCluster,
) -> Result<(), OverrideError> {
    let overrides = overrides_by_cluster(fed)?.expanded_for_cluster(cluster)?;
    apply_overrides(obj, cluster.name, &overrides)
}

/// Numbers as they come out of upstream's path: decoded to float64,
/// patched, re-decoded as int64 when integral (and printed without
/// exponent, i.e. below 1e21) else float64.
fn through_float64(v: &Value) -> Value {
    match v {
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(0.0);
            if f.fract() == 0.0 && f.abs() < 9.2e18 {
                Value::Number(Number::from(f as i64))
            } else {
                Number::from_f64(f)
                    .map(Value::Number)
                    .unwrap_or(Value::Null)
            }
        }
        Value::Array(a) => Value::Array(a.iter().map(through_float64).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), through_float64(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn decode_key(k: &str) -> String {
    k.replace("~1", "/").replace("~0", "~")
}

/// Go's `strconv.Atoi` (optional sign, decimal digits).
fn atoi(key: &str) -> Result<i64, PatchError> {
    key.parse::<i64>()
        .map_err(|_| PatchError::NotAnIndex(key.to_string()))
}

fn apply_one(doc: &mut Value, o: &ClusterOverride) -> Result<(), PatchError> {
    let kind = o.op.as_str();
    if o.op == Op::Replace && o.path.is_empty() {
        // v4.12 replaces the whole document for an empty path.
        return match through_float64(&o.value) {
            v @ Value::Object(_) => {
                *doc = v;
                Ok(())
            }
            _ => Err(PatchError::DocumentNotAnObject),
        };
    }
    let missing = || PatchError::MissingPath {
        op: kind,
        path: o.path.clone(),
    };
    let (container, key) = find_container(doc, &o.path).ok_or_else(missing)?;
    let value = through_float64(&o.value);
    match (o.op, container) {
        (Op::Add, Value::Object(m)) => {
            m.insert(key, value);
        }
        (Op::Add, Value::Array(a)) => {
            if key == "-" {
                a.push(value);
            } else {
                let len = a.len() as i64 + 1;
                let mut idx = atoi(&key)?;
                if idx >= len || idx < -len {
                    return Err(PatchError::InvalidIndex(idx));
                }
                if idx < 0 {
                    idx += len;
                }
                a.insert(idx as usize, value);
            }
        }
        (Op::Replace, Value::Object(m)) => {
            m.insert(key, value);
        }
        (Op::Replace, Value::Array(a)) => {
            let idx = array_index(a, &key).map_err(|_| PatchError::MissingKey(o.path.clone()))?;
            a[idx] = value;
        }
        (Op::Remove, Value::Object(m)) => {
            if m.remove(&key).is_none() {
                return Err(PatchError::NoSuchKey {
                    path: o.path.clone(),
                    key,
                });
            }
        }
        (Op::Remove, Value::Array(a)) => {
            let idx = array_index(a, &key).map_err(|e| PatchError::Remove {
                path: o.path.clone(),
                problem: Box::new(e),
            })?;
            a.remove(idx);
        }
        _ => return Err(missing()),
    }
    Ok(())
}

/// An existing element's index; negative indices count from the end.
fn array_index(a: &[Value], key: &str) -> Result<usize, PatchError> {
    let len = a.len() as i64;
    let mut idx = atoi(key)?;
    if idx < 0 {
        if idx < -len {
            return Err(PatchError::InvalidIndex(idx));
        }
        idx += len;
    }
    if idx >= len {
        return Err(PatchError::InvalidIndex(idx));
    }
    Ok(idx as usize)
}

/// evanphx's `findObject`: the container holding the path's last segment
/// and that segment (decoded). The first segment is skipped unread; every
/// intermediate must exist and be an object or array (null counts as missing).
fn find_container<'a>(doc: &'a mut Value, path: &str) -> Option<(&'a mut Value, String)> {
    let split: Vec<&str> = path.split('/').collect();
    if split.len() < 2 {
        return None;
    }
    let mut current = doc;
    for part in &split[1..split.len() - 1] {
        let key = decode_key(part);
        let next = match current {
            Value::Object(m) => m.get_mut(&key)?,
            Value::Array(a) => {
                let idx = array_index(a, &key).ok()?;
                &mut a[idx]
            }
            _ => return None,
        };
        if !(next.is_object() || next.is_array()) {
            return None;
        }
        current = next;
    }
    Some((current, decode_key(split[split.len() - 1])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ov(op: &str, path: &str, value: Value) -> ClusterOverride {
        ClusterOverride {
            op: Op::parse(op).unwrap(),
            path: path.into(),
            value,
        }
    }

    fn base() -> Value {
        json!({"kind": "Deployment", "metadata": {"name": "web", "labels": {"a": "1"}},
               "spec": {"replicas": 1, "list": [1, 2, 3], "nested": {"x": null}}})
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Overrides by cluster label (ours): selector entries in list order,
    /// then the entry naming the cluster, which wins on a path both set.
    #[test]
    fn selector_entries_apply_in_order_and_the_named_entry_last() {
        let fed = json!({"spec": {"overrides": [
            {"clusterSelector": {"matchLabels": {"region": "eu"}},
             "clusterOverrides": [{"path": "/spec/replicas", "value": 3}, {"path": "/a", "value": "eu"}]},
            {"clusterName": "m1", "clusterOverrides": [{"path": "/spec/replicas", "value": 9}]},
            {"clusterSelector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
             "clusterOverrides": [{"path": "/b", "value": "tiered"}]}]}});
        let parsed = overrides_by_cluster(&fed).unwrap();
        assert!(parsed.has_selectors());
        struct Case {
            name: &'static str,
            labels: &'static [(&'static str, &'static str)],
            paths_and_values: &'static [(&'static str, i64)],
        }
        let cases = [
            Case {
                name: "m1",
                labels: &[("region", "eu")],
                paths_and_values: &[("/spec/replicas", 3), ("/a", 0), ("/spec/replicas", 9)],
            },
            Case {
                name: "m2",
                labels: &[("region", "eu"), ("tier", "web")],
                paths_and_values: &[("/spec/replicas", 3), ("/a", 0), ("/b", 0)],
            },
            Case {
                name: "m3",
                labels: &[("region", "us")],
                paths_and_values: &[],
            },
            Case {
                name: "m1",
                labels: &[],
                paths_and_values: &[("/spec/replicas", 9)],
            },
        ];
        for c in cases {
            let l = labels(c.labels);
            let got = parsed.for_cluster(MemberCluster {
                name: c.name,
                labels: &l,
            });
            let paths: Vec<&str> = got.iter().map(|o| o.path.as_str()).collect();
            let want: Vec<&str> = c.paths_and_values.iter().map(|(p, _)| *p).collect();
            assert_eq!(paths, want, "{} {:?}", c.name, c.labels);
        }
        let l = labels(&[("region", "eu")]);
        let mut obj = json!({"kind": "Deployment", "spec": {"replicas": 1}});
        apply_cluster_overrides(
            &mut obj,
            &fed,
            MemberCluster {
                name: "m1",
                labels: &l,
            },
        )
        .unwrap();
        assert_eq!(obj["spec"]["replicas"], 9, "the named entry wins");
        assert_eq!(obj["a"], "eu");
    }

    #[test]
    fn selector_entries_are_checked_and_named_in_errors() {
        let both = json!({"spec": {"overrides": [{"clusterName": "m1",
            "clusterSelector": {}, "clusterOverrides": []}]}});
        let e = overrides_by_cluster(&both).unwrap_err().to_string();
        assert!(
            e.contains("[0] has both clusterName and clusterSelector"),
            "{e}"
        );
        let bad = json!({"spec": {"overrides": [{"clusterSelector": {"matchLabels": {"a": 1}}}]}});
        let e = overrides_by_cluster(&bad).unwrap_err().to_string();
        assert!(e.contains("[0].clusterSelector"), "{e}");
        // Several selector entries are no duplicate (KubeFed would read each
        // as cluster "", docs/kubefed-differences.md); their paths are
        // checked per entry, as upstream checks a cluster's.
        let two = json!({"spec": {"overrides": [
            {"clusterSelector": {}, "clusterOverrides": [{"path": "/a", "value": 1}]},
            {"clusterSelector": {}, "clusterOverrides": [{"path": "/a", "value": 2}]}]}});
        assert!(validate_overrides(&two).is_ok());
        let dup = json!({"spec": {"overrides": [{"clusterSelector": {}, "clusterOverrides": [
            {"path": "/a", "value": 1}, {"path": "/a", "value": 2}]}]}});
        let e = validate_overrides(&dup).unwrap_err().to_string();
        assert!(e.contains("selected by [0].clusterSelector"), "{e}");
    }

    #[test]
    fn the_selection_digest_tells_one_choice_from_another() {
        let a = [ov("replace", "/spec/replicas", json!(3))];
        let b = [ov("replace", "/spec/replicas", json!(4))];
        assert_eq!(selected_digest(&a), selected_digest(&a.clone()));
        assert_ne!(selected_digest(&a), selected_digest(&b));
        assert_ne!(selected_digest(&a), selected_digest(&[]));
        assert_eq!(selected_digest(&[]).len(), 32);
    }

    #[test]
    fn evanphx_semantics_table() {
        // (op, path, value, Ok(expected value at pointer) | Err(substring))
        type Expected<'a> = Result<(&'a str, Value), &'a str>;
        let cases: Vec<(&str, &str, Value, Expected)> = vec![
            (
                "replace",
                "/spec/replicas",
                json!(5),
                Ok(("/spec/replicas", json!(5))),
            ),
            (
                "",
                "/spec/replicas",
                json!(5),
                Ok(("/spec/replicas", json!(5))),
            ),
            // replace on a missing member acts like add (v4.12 quirk)
            (
                "replace",
                "/spec/paused",
                json!(true),
                Ok(("/spec/paused", json!(true))),
            ),
            (
                "replace",
                "/spec/missing/deep",
                json!(1),
                Err("doc is missing path: /spec/missing/deep"),
            ),
            (
                "replace",
                "/spec/list/5",
                json!(9),
                Err("doc is missing key"),
            ),
            (
                "replace",
                "/spec/list/-1",
                json!(9),
                Ok(("/spec/list", json!([1, 2, 9]))),
            ),
            (
                "add",
                "/metadata/labels/b",
                json!("2"),
                Ok(("/metadata/labels", json!({"a": "1", "b": "2"}))),
            ),
            (
                "add",
                "/metadata/annotations/x",
                json!("y"),
                Err("add operation does not apply: doc is missing path"),
            ),
            (
                "add",
                "/metadata/annotations",
                json!({"x": "y"}),
                Ok(("/metadata/annotations/x", json!("y"))),
            ),
            (
                "add",
                "/spec/list/0",
                json!(0),
                Ok(("/spec/list", json!([0, 1, 2, 3]))),
            ),
            (
                "add",
                "/spec/list/3",
                json!(4),
                Ok(("/spec/list", json!([1, 2, 3, 4]))),
            ),
            (
                "add",
                "/spec/list/-",
                json!(4),
                Ok(("/spec/list", json!([1, 2, 3, 4]))),
            ),
            (
                "add",
                "/spec/list/-1",
                json!(4),
                Ok(("/spec/list", json!([1, 2, 3, 4]))),
            ),
            (
                "add",
                "/spec/list/-4",
                json!(0),
                Ok(("/spec/list", json!([0, 1, 2, 3]))),
            ),
            ("add", "/spec/list/5", json!(0), Err("invalid index")),
            (
                "remove",
                "/spec/list/1",
                Value::Null,
                Ok(("/spec/list", json!([1, 3]))),
            ),
            (
                "remove",
                "/spec/list/-1",
                Value::Null,
                Ok(("/spec/list", json!([1, 2]))),
            ),
            ("remove", "/spec/list/3", Value::Null, Err("invalid index")),
            (
                "remove",
                "/spec/gone",
                Value::Null,
                Err("Unable to remove nonexistent key: gone"),
            ),
            (
                "remove",
                "/spec/nested/x",
                Value::Null,
                Ok(("/spec/nested", json!({}))),
            ),
            // a null intermediate counts as missing
            (
                "add",
                "/spec/nested/x/y",
                json!(1),
                Err("doc is missing path"),
            ),
            // scalar intermediate
            (
                "add",
                "/spec/replicas/x",
                json!(1),
                Err("doc is missing path"),
            ),
            // value omitted → null written
            (
                "replace",
                "/spec/replicas",
                Value::Null,
                Ok(("/spec/replicas", Value::Null)),
            ),
            // JSON-pointer escaping
            (
                "add",
                "/metadata/labels/example.com~1x",
                json!("v"),
                Ok(("/metadata/labels/example.com~1x", json!("v"))),
            ),
            // numbers go through float64: 2.0 comes back as integer 2
            (
                "replace",
                "/spec/replicas",
                json!(2.0),
                Ok(("/spec/replicas", json!(2))),
            ),
            (
                "replace",
                "/spec/ratio",
                json!(0.5),
                Ok(("/spec/ratio", json!(0.5))),
            ),
            // first segment is not looked at
            (
                "replace",
                "spec/replicas",
                json!(7),
                Ok(("/replicas", json!(7))),
            ),
            (
                "replace",
                "spec.replicas",
                json!(7),
                Err("doc is missing path"),
            ),
            ("replace", "", json!(7), Err("value must be an object")),
            ("add", "", json!({"kind": "X"}), Err("doc is missing path")),
            ("remove", "", Value::Null, Err("doc is missing path")),
            // the whole document, as v4.12 does for an empty path
            (
                "replace",
                "",
                json!({"kind": "ConfigMap", "data": {"a": "b"}}),
                Ok(("/data/a", json!("b"))),
            ),
            ("replace", "", json!({"data": {}}), Err("Kind' is missing")),
        ];
        for (op, path, value, want) in cases {
            let mut obj = base();
            let result = apply_overrides(&mut obj, "c1", &[ov(op, path, value)]);
            match want {
                Ok((pointer, expected)) => {
                    result.unwrap_or_else(|e| panic!("{op} {path}: {e}"));
                    assert_eq!(obj.pointer(pointer), Some(&expected), "{op} {path}: {obj}");
                }
                Err(needle) => {
                    let err = result.expect_err(path).to_string();
                    assert!(err.contains(needle), "{op} {path}: {err}");
                    assert!(err.contains("\"c1\""), "names the cluster: {err}");
                    assert_eq!(obj, base(), "failed patch leaves the object unchanged");
                }
            }
        }
    }

    #[test]
    fn overrides_apply_in_order_and_all_or_nothing() {
        let mut obj = base();
        apply_overrides(
            &mut obj,
            "c1",
            &[
                ov("add", "/spec/x", json!({})),
                ov("add", "/spec/x/y", json!(1)),
            ],
        )
        .unwrap();
        assert_eq!(obj["spec"]["x"], json!({"y": 1}));
        let mut obj = base();
        let err = apply_overrides(
            &mut obj,
            "c1",
            &[
                ov("replace", "/spec/replicas", json!(3)),
                ov("remove", "/nope", Value::Null),
            ],
        );
        assert!(err.is_err());
        assert_eq!(obj["spec"]["replicas"], json!(1));
    }

    #[test]
    fn reading_overrides_for_a_cluster() {
        let fed = json!({"spec": {"overrides": [
            {"clusterName": "c1", "clusterOverrides": [{"path": "/spec/replicas", "value": 3}, {"op": "add", "path": "/a"}]},
            {"clusterName": "c2"}]}});
        let c1 = overrides_for_cluster(&fed, MemberCluster::named("c1")).unwrap();
        assert_eq!(
            c1,
            vec![
                ov("replace", "/spec/replicas", json!(3)),
                ov("add", "/a", Value::Null)
            ]
        );
        assert!(
            overrides_for_cluster(&fed, MemberCluster::named("c2"))
                .unwrap()
                .is_empty()
        );
        assert!(
            overrides_for_cluster(&fed, MemberCluster::named("c3"))
                .unwrap()
                .is_empty()
        );
        assert!(
            overrides_for_cluster(&json!({}), MemberCluster::named("c1"))
                .unwrap()
                .is_empty()
        );
        let mut obj = base();
        apply_cluster_overrides(&mut obj, &fed, MemberCluster::named("c1")).unwrap();
        assert_eq!(obj["spec"]["replicas"], json!(3));
        assert_eq!(obj["a"], Value::Null);
    }

    #[test]
    fn upstream_validation_errors() {
        let cases = [
            (
                json!([{"clusterName": "c1"}, {"clusterName": "c1"}]),
                "cluster \"c1\" appears more than once",
            ),
            (
                json!([{"clusterName": "c1", "clusterOverrides": [{"path": "/a"}, {"path": "/a", "op": "add"}]}]),
                "path \"/a\" appears more than once for cluster \"c1\"",
            ),
            (
                json!([{"clusterName": "c1", "clusterOverrides": [{"path": "/x"}, {"path": "/metadata/name"}]}]),
                "override[1] for cluster \"c1\" has an invalid path: /metadata/name",
            ),
            (
                json!([{"clusterName": "c1", "clusterOverrides": [{"path": "/kind"}]}]),
                "invalid path: /kind",
            ),
            (
                json!([{"clusterName": "c1", "clusterOverrides": [{"path": "/metadata/namespace"}]}]),
                "invalid path: /metadata/namespace",
            ),
            (
                json!([{"clusterName": "c1", "clusterOverrides": [{"path": "/metadata/generateName"}]}]),
                "invalid path: /metadata/generateName",
            ),
            (
                json!([{"clusterName": "c1", "clusterOverrides": [{"path": "/a", "op": "move"}]}]),
                "op \"move\"",
            ),
        ];
        for (overrides, want) in cases {
            let fed = json!({"spec": {"overrides": overrides}});
            // a problem anywhere fails every cluster, as upstream
            let err = overrides_for_cluster(&fed, MemberCluster::named("other"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err}");
            assert!(validate_overrides(&fed).is_err());
        }
    }

    #[test]
    fn member_values_expand_per_member_and_are_checked_offline() {
        let fed = json!({"spec": {"overrides": [
            {"clusterSelector": {}, "clusterOverrides": [
                {"op": "add", "path": "/metadata/annotations", "value": {"dns": "${MEMBER_NAME}.x"}}]},
            {"clusterName": "c1", "clusterOverrides": [{"path": "/data/r", "value": "${MEMBER_LABEL:region}"}]}]}});
        validate_overrides(&fed).unwrap();
        let parsed = overrides_by_cluster(&fed).unwrap();
        assert!(parsed.member_values && parsed.varies_by_member());
        let eu = labels(&[("region", "eu")]);
        let got = parsed
            .expanded_for_cluster(MemberCluster {
                name: "c1",
                labels: &eu,
            })
            .unwrap();
        assert_eq!(got[0].value, json!({"dns": "c1.x"}));
        assert_eq!(got[1].value, json!("eu"));
        // As written for everyone else (KubeFed's overrides hash reads these).
        assert_eq!(
            parsed.for_cluster(MemberCluster {
                name: "c1",
                labels: &eu
            })[1]
                .value,
            "${MEMBER_LABEL:region}"
        );
        let e = parsed
            .expanded_for_cluster(MemberCluster::named("c1"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "spec.overrides: the value of replace \"/data/r\" for member \"c1\": ${MEMBER_LABEL:region}: its KubeFedCluster has no label \"region\""
        );
        // Other members do not name the label.
        assert!(
            parsed
                .expanded_for_cluster(MemberCluster::named("c2"))
                .is_ok()
        );
        let broken = json!({"spec": {"overrides": [{"clusterName": "c1",
            "clusterOverrides": [{"path": "/data/r", "value": ["${MEMBER_LABEL:region"]}]}]}});
        let e = validate_overrides(&broken).unwrap_err().to_string();
        assert!(
            e.contains("override[0] for cluster \"c1\": value: ${MEMBER_LABEL:"),
            "{e}"
        );
        let plain = overrides_by_cluster(&json!({"spec": {"overrides": [{"clusterName": "c1",
            "clusterOverrides": [{"path": "/data/r", "value": "${HOME}"}]}]}}))
        .unwrap();
        assert!(!plain.varies_by_member());
    }

    #[test]
    fn api_version_may_be_overridden_and_paths_are_required_offline() {
        let fed = json!({"spec": {"overrides": [{"clusterName": "c1",
            "clusterOverrides": [{"path": "/apiVersion", "value": "apps/v1beta2"}]}]}});
        validate_overrides(&fed).unwrap();
        let mut obj = base();
        apply_cluster_overrides(&mut obj, &fed, MemberCluster::named("c1")).unwrap();
        assert_eq!(obj["apiVersion"], "apps/v1beta2");
        let no_path = json!({"spec": {"overrides": [{"clusterName": "c1", "clusterOverrides": [{"value": 1}]}]}});
        assert!(
            validate_overrides(&no_path)
                .unwrap_err()
                .to_string()
                .contains("path is required")
        );
        assert!(
            overrides_for_cluster(&no_path, MemberCluster::named("c1")).is_ok(),
            "run time tolerates it like upstream"
        );
    }
}
