//! Does a live object already say everything we want it to say?
//!
//! API servers add defaults, metadata and status to what they are given, so
//! "unchanged" means *the desired fields are all present with equal values*,
//! not equality. This is what keeps re-runs at zero write requests.

use serde_json::{Map, Value};

/// `desired` ⊆ `live`: every field of `desired` exists in `live` with an
/// equal value; objects compare recursively, arrays element-wise with the
/// same length (each element by the same rule), scalars by equality.
/// An explicit `null` in `desired` means "absent or null" in `live`.
pub fn is_subset(desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => d.iter().all(|(k, dv)| match l.get(k) {
            Some(lv) => is_subset(dv, lv),
            None => dv.is_null(),
        }),
        (Value::Array(d), Value::Array(l)) => {
            d.len() == l.len() && d.iter().zip(l).all(|(dv, lv)| is_subset(dv, lv))
        }
        (Value::Null, Value::Null) => true,
        (d, l) => d == l,
    }
}

/// `live` with the top-level fields of `desired` (other than `metadata`)
/// replaced, and `desired`'s labels and annotations merged into its
/// metadata: the body of an update that keeps what the server owns
/// (resourceVersion, uid, other labels).
pub fn overlay(live: &Value, desired: &Value) -> Value {
    let mut out = live.clone();
    let (Some(out_map), Some(d)) = (out.as_object_mut(), desired.as_object()) else {
        return desired.clone();
    };
    for (k, v) in d {
        if k == "metadata" {
            let meta = out_map
                .entry("metadata")
                .or_insert_with(|| Value::Object(Map::new()));
            // A live `metadata: null` (never from an API server) reads as
            // empty rather than stopping the run.
            if !meta.is_object() {
                *meta = Value::Object(Map::new());
            }
            for key in ["labels", "annotations"] {
                if let Some(Value::Object(add)) = v.get(key) {
                    let target = meta
                        .as_object_mut()
                        .expect("made an object above")
                        .entry(key)
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Some(t) = target.as_object_mut() {
                        for (ak, av) in add {
                            t.insert(ak.clone(), av.clone());
                        }
                    }
                }
            }
        } else {
            out_map.insert(k.clone(), v.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn server_defaults_and_metadata_do_not_count_as_changes() {
        let desired =
            json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"scope": "Cluster"}});
        let live = json!({
            "metadata": {"name": "a", "uid": "u", "resourceVersion": "7", "labels": {"x": "1", "y": "2"}},
            "spec": {"scope": "Cluster", "conversion": {"strategy": "None"}},
            "status": {"acceptedNames": {}}
        });
        assert!(is_subset(&desired, &live));
    }

    #[test]
    fn a_changed_or_missing_field_is_a_change() {
        let live = json!({"spec": {"rules": [{"verbs": ["*"], "apiGroups": ["*"]}]}});
        assert!(!is_subset(
            &json!({"spec": {"rules": [{"verbs": ["get"]}]}}),
            &live
        ));
        assert!(!is_subset(&json!({"spec": {"extra": 1}}), &live));
        assert!(
            !is_subset(&json!({"spec": {"rules": []}}), &live),
            "array length counts"
        );
        assert!(is_subset(
            &json!({"spec": {"rules": [{"verbs": ["*"]}]}}),
            &live
        ));
        assert!(is_subset(&json!({"spec": {"gone": null}}), &live));
        assert!(!is_subset(
            &json!({"data": {"token": "b"}}),
            &json!({"data": {"token": "a"}})
        ));
    }

    #[test]
    fn overlay_replaces_fields_and_merges_labels() {
        let live = json!({"metadata": {"name": "r", "resourceVersion": "9", "labels": {"keep": "y"}}, "rules": [1], "other": true});
        let desired = json!({"metadata": {"name": "r", "labels": {"new": "z"}}, "rules": [2]});
        let out = overlay(&live, &desired);
        assert_eq!(out["rules"], json!([2]));
        assert_eq!(out["other"], json!(true));
        assert_eq!(out["metadata"]["resourceVersion"], "9");
        assert_eq!(out["metadata"]["labels"], json!({"keep": "y", "new": "z"}));
    }

    #[test]
    fn overlay_of_a_live_object_with_null_metadata_takes_the_labels() {
        let live = json!({"metadata": null, "data": {"a": "1"}});
        let desired = json!({"metadata": {"labels": {"new": "z"}}, "data": {"a": "2"}});
        let out = overlay(&live, &desired);
        assert_eq!(out["metadata"]["labels"], json!({"new": "z"}));
        assert_eq!(out["data"], json!({"a": "2"}));
    }
}
