//! Secret values never reach a plan: `data` and `stringData` are masked in
//! diffs and reports, as `kubectl diff` masks them
//! (`staging/src/k8s.io/kubectl/pkg/cmd/diff/diff.go`, `Masker`): `***`
//! when a value is the same on both sides, `*** (before)` and
//! `*** (after)` when it changed, so a review still sees *that* it changed.

use serde_json::{Map, Value, json};

const SECRET_FIELDS: [&str; 2] = ["data", "stringData"];

fn is_secret(obj: &Value) -> bool {
    obj["kind"] == "Secret" && obj["apiVersion"] == "v1"
}

/// Both sides of a change with their Secret values masked (objects that
/// are not core Secrets are returned as they are).
pub fn mask_pair(before: &Value, after: &Value) -> (Value, Value) {
    let (mut b, mut a) = (before.clone(), after.clone());
    if !is_secret(before) && !is_secret(after) {
        return (b, a);
    }
    for field in SECRET_FIELDS {
        let empty = Map::new();
        let old = before[field].as_object().unwrap_or(&empty);
        let new = after[field].as_object().unwrap_or(&empty);
        let mask = |values: &Map<String, Value>, other: &Map<String, Value>, tag: &str| {
            values
                .iter()
                .map(|(k, v)| {
                    let same = other.get(k) == Some(v);
                    let text = if same {
                        "***".to_string()
                    } else {
                        format!("*** ({tag})")
                    };
                    (k.clone(), json!(text))
                })
                .collect::<Map<String, Value>>()
        };
        if before[field].is_object() {
            b[field] = Value::Object(mask(old, new, "before"));
        }
        if after[field].is_object() {
            a[field] = Value::Object(mask(new, old, "after"));
        }
    }
    (b, a)
}

/// One object with its Secret values masked.
pub fn mask(obj: &Value) -> Value {
    mask_pair(obj, obj).0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": data})
    }

    #[test]
    fn values_are_masked_and_changes_still_show() {
        let before = secret(json!({"same": "YQ==", "changed": "Yg==", "gone": "Yw=="}));
        let mut after = secret(json!({"same": "YQ==", "changed": "ZA==", "new": "ZQ=="}));
        after["stringData"] = json!({"password": "hunter2"});
        let (b, a) = mask_pair(&before, &after);
        assert_eq!(
            b["data"],
            json!({"same": "***", "changed": "*** (before)", "gone": "*** (before)"})
        );
        assert_eq!(
            a["data"],
            json!({"same": "***", "changed": "*** (after)", "new": "*** (after)"})
        );
        assert_eq!(a["stringData"], json!({"password": "*** (after)"}));
        assert!(b.get("stringData").is_none());
        let text = format!("{b}{a}");
        for value in ["YQ==", "Yg==", "ZA==", "ZQ==", "hunter2"] {
            assert!(!text.contains(value), "{value} leaked: {text}");
        }
    }

    #[test]
    fn other_objects_are_left_alone() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"}});
        assert_eq!(mask(&cm), cm);
        // A custom kind that happens to be called Secret is not a core Secret.
        let custom = json!({"apiVersion": "example.com/v1", "kind": "Secret", "data": {"a": "1"}});
        assert_eq!(mask(&custom), custom);
        assert_eq!(mask(&secret(json!({"k": "dg=="})))["data"]["k"], "***");
    }
}
