//! Drift you can read: how a member's copy differs from what a run would
//! write to it, field by field (the JSON pointer, the member's value, the
//! desired value), and since when each difference has been seen.
//!
//! The comparison is [`compare::is_subset`]'s, spelled out: only the
//! fields the desired object sets count (server defaults, status and
//! metadata the server owns do not), and the desired object is the one the
//! decide step would write, after the retain rules (upstream's and
//! `kubefedctl.kubefed.io/retain-fields` / `retain-foreign-fields`), so
//! fields kept for other managers are never drift. The paths and values
//! follow KubeFleet's drift details (`observedDrifts[].path`, JSON pointers).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::propagation::desired::MANAGED_LABEL;
use crate::propagation::overrides::SELECTED_OVERRIDES_ANNOTATION;

/// The annotation of a (Cluster)PropagatedVersion recording since when
/// each difference of a report-only object has been seen, as JSON:
/// `{"member1": {"/data/k": "2026-12-06T10:00:00Z"}}` (`""`: the whole copy).
/// KubeFed's controller neither reads nor removes it.
pub const DRIFT_ANNOTATION: &str = "kubefedctl.kubefed.io/drift";

/// At most this many differences of one object are recorded with their
/// first-seen time (an annotation must stay small); the rest are still
/// reported, without one.
pub const MAX_RECORDED: usize = 64;

/// One differing field.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FieldDrift {
    /// A JSON pointer (RFC 6901): `/spec/replicas`, `/data/a~1b`.
    pub path: String,
    /// The member's value; absent: the member does not have the field (or
    /// the value is hidden).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member: Option<Value>,
    /// The value a run would write; absent when hidden.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired: Option<Value>,
    /// A Secret's value: the path only, never the values.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
}

/// How one member's copy differs from what a run would make of it.
#[derive(Clone, Debug, PartialEq)]
pub enum Drift {
    /// Placed there, but the member holds no managed copy.
    Missing,
    /// Not placed there, but the member holds a managed copy (a run would
    /// delete it).
    Unplaced,
    /// Present and placed: the differing fields (none: in sync).
    Fields(Vec<FieldDrift>),
}

impl Drift {
    pub fn is_in_sync(&self) -> bool {
        matches!(self, Drift::Fields(f) if f.is_empty())
    }

    /// The paths recorded for it: `""` for a whole copy missing or unplaced.
    pub fn paths(&self) -> Vec<&str> {
        match self {
            Drift::Missing | Drift::Unplaced => vec![""],
            Drift::Fields(f) => f.iter().map(|d| d.path.as_str()).collect(),
        }
    }

    /// One line: `missing`, `not placed`, or the paths.
    pub fn summary(&self) -> String {
        match self {
            Drift::Missing => "missing".into(),
            Drift::Unplaced => "not placed, but a managed copy is there".into(),
            Drift::Fields(f) if f.is_empty() => "in sync".into(),
            Drift::Fields(f) => f
                .iter()
                .map(|d| d.path.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

/// The fields of `desired` that `live` does not hold with the same value
/// (the differences [`compare::is_subset`] finds), leaving out the
/// federation's own bookkeeping (the managed label, the selected-overrides
/// digest): a copy not yet managed lacks them and is still "the same".
/// A Secret's values (`kind` `Secret`) are hidden.
///
/// [`compare::is_subset`]: crate::propagation::compare::is_subset
pub fn differences(desired: &Value, live: &Value, kind: &str) -> Vec<FieldDrift> {
    let mut out = Vec::new();
    walk(desired, live, &mut String::new(), &mut out);
    out.retain(|d| !is_bookkeeping(&d.path));
    if kind == "Secret" {
        for d in &mut out {
            d.member = None;
            d.desired = None;
            d.hidden = true;
        }
    }
    out
}

/// The federation's own marks, and the type (a listed copy carries no
/// kind: its list does).
fn is_bookkeeping(path: &str) -> bool {
    matches!(path, "/kind" | "/apiVersion")
        || path == format!("/metadata/labels/{}", escape(MANAGED_LABEL))
        || path
            == format!(
                "/metadata/annotations/{}",
                escape(SELECTED_OVERRIDES_ANNOTATION)
            )
}

/// The recursion of [`differences`], with `path` the pointer so far.
fn walk(desired: &Value, live: &Value, path: &mut String, out: &mut Vec<FieldDrift>) {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => walk_object(d, Some(l), path, out),
        (Value::Array(d), Value::Array(l)) if d.len() == l.len() => {
            for (i, (dv, lv)) in d.iter().zip(l).enumerate() {
                let len = path.len();
                path.push_str(&format!("/{i}"));
                walk(dv, lv, path, out);
                path.truncate(len);
            }
        }
        (d, l) if d == l => {}
        (d, l) => out.push(FieldDrift {
            path: path.clone(),
            member: Some(l.clone()),
            desired: Some(d.clone()),
            hidden: false,
        }),
    }
}

fn walk_object(
    d: &Map<String, Value>,
    l: Option<&Map<String, Value>>,
    path: &mut String,
    out: &mut Vec<FieldDrift>,
) {
    for (k, dv) in d {
        let len = path.len();
        path.push('/');
        path.push_str(&escape(k));
        match l.and_then(|l| l.get(k)) {
            Some(lv) => walk(dv, lv, path, out),
            None if dv.is_null() => {}
            // Each field of a missing object, so that bookkeeping can be told apart.
            None if dv.as_object().is_some_and(|m| !m.is_empty()) => {
                walk_object(dv.as_object().expect("an object"), None, path, out)
            }
            None => out.push(FieldDrift {
                path: path.clone(),
                member: None,
                desired: Some(dv.clone()),
                hidden: false,
            }),
        }
        path.truncate(len);
    }
}

/// A JSON pointer's reference token (RFC 6901: `~` → `~0`, `/` → `~1`).
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// First-seen times as recorded: member → path → RFC 3339.
pub type FirstSeen = BTreeMap<String, BTreeMap<String, String>>;

/// The record in a PropagatedVersion's [`DRIFT_ANNOTATION`] (empty when
/// absent or unreadable: a hand-edited record only loses its times).
pub fn first_seen(annotation: Option<&str>) -> FirstSeen {
    annotation
        .and_then(|a| serde_json::from_str(a).ok())
        .unwrap_or_default()
}

/// The record after a run that saw `now` the drift in `current` (member →
/// paths): a difference seen before keeps its time, a new one gets `now`,
/// one gone is dropped, at most [`MAX_RECORDED`] in all (members and paths
/// in order). `None`: nothing to record (the annotation goes).
pub fn next_record(
    old: &FirstSeen,
    current: &BTreeMap<String, Vec<&str>>,
    now: &str,
) -> Option<String> {
    let mut out = FirstSeen::new();
    let mut n = 0;
    for (member, paths) in current {
        for path in paths {
            if n == MAX_RECORDED {
                break;
            }
            let since = (old.get(member).and_then(|p| p.get(*path))).map_or(now, String::as_str);
            out.entry(member.clone())
                .or_default()
                .insert(path.to_string(), since.to_string());
            n += 1;
        }
    }
    (!out.is_empty()).then(|| serde_json::to_string(&out).expect("strings serialise"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_fields_the_desired_object_sets_are_compared() {
        let desired = json!({"metadata": {"name": "a", "labels": {MANAGED_LABEL: "true", "app": "web"}},
            "data": {"k": "v", "a/b": "1", "gone": null}, "spec": {"ports": [{"port": 80}, {"port": 81}]}});
        let live = json!({"metadata": {"name": "a", "uid": "u", "labels": {"app": "shop"}},
            "data": {"k": "v", "a/b": "2", "extra": "x"}, "spec": {"ports": [{"port": 80, "protocol": "TCP"}, {"port": 82}]},
            "status": {"ready": true}});
        let d = differences(&desired, &live, "ConfigMap");
        let paths: Vec<&str> = d.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(
            paths,
            ["/data/a~1b", "/metadata/labels/app", "/spec/ports/1/port"]
        );
        assert_eq!(d[1].member, Some(json!("shop")));
        assert_eq!(d[1].desired, Some(json!("web")));
    }

    #[test]
    fn a_missing_field_and_a_list_of_another_length_are_one_difference_each() {
        let desired = json!({"spec": {"replicas": 3, "args": ["a", "b"]}});
        let live = json!({"spec": {"args": ["a"]}});
        let d = differences(&desired, &live, "Deployment");
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].path, "/spec/args");
        assert_eq!(d[0].member, Some(json!(["a"])));
        assert_eq!(
            (d[1].path.as_str(), &d[1].member),
            ("/spec/replicas", &None)
        );
    }

    #[test]
    fn equal_copies_have_no_differences_even_without_the_federations_bookkeeping() {
        let desired = json!({"metadata": {"labels": {MANAGED_LABEL: "true"},
            "annotations": {SELECTED_OVERRIDES_ANNOTATION: "x"}}, "data": {"k": "v"}});
        let unmanaged = json!({"metadata": {"labels": {"other": "1"}}, "data": {"k": "v"}});
        assert!(differences(&desired, &unmanaged, "ConfigMap").is_empty());
        assert!(crate::propagation::compare::is_subset(
            &json!({"data": {"k": "v"}}),
            &unmanaged
        ));
    }

    #[test]
    fn a_secrets_values_are_hidden() {
        let d = differences(
            &json!({"data": {"token": "bmV3"}}),
            &json!({"data": {"token": "b2xk"}}),
            "Secret",
        );
        assert_eq!(d.len(), 1);
        assert!(d[0].hidden && d[0].member.is_none() && d[0].desired.is_none());
        let text = serde_json::to_string(&d).unwrap();
        assert!(!text.contains("bmV3") && !text.contains("b2xk"), "{text}");
    }

    #[test]
    fn first_seen_times_are_kept_new_ones_added_gone_ones_dropped() {
        let old = first_seen(Some(r#"{"m1": {"/data/a": "T0", "/data/gone": "T0"}}"#));
        let current = BTreeMap::from([
            ("m1".to_string(), vec!["/data/a", "/data/b"]),
            ("m2".to_string(), vec![""]),
        ]);
        let next = first_seen(next_record(&old, &current, "T1").as_deref());
        assert_eq!(next["m1"]["/data/a"], "T0");
        assert_eq!(next["m1"]["/data/b"], "T1");
        assert_eq!(next["m2"][""], "T1");
        assert!(!next["m1"].contains_key("/data/gone"));
        assert_eq!(next_record(&old, &BTreeMap::new(), "T1"), None);
    }

    #[test]
    fn the_record_is_bounded() {
        let paths: Vec<String> = (0..200).map(|i| format!("/data/k{i}")).collect();
        let current =
            BTreeMap::from([("m".to_string(), paths.iter().map(String::as_str).collect())]);
        let next = first_seen(next_record(&FirstSeen::new(), &current, "T").as_deref());
        assert_eq!(next["m"].len(), MAX_RECORDED);
        assert_eq!(first_seen(Some("not json")), FirstSeen::new());
    }
}
