//! Per-member values in overrides (ours; issue 67): the strings of an
//! override's `value` may say `${MEMBER_NAME}` and `${MEMBER_LABEL:key}`,
//! the member's KubeFedCluster name and one of its labels, expanded for
//! each member before the override applies.
//!
//! The model is KubeFleet's reserved variables (`${MEMBER-CLUSTER-NAME}`,
//! `${MEMBER-CLUSTER-LABEL-KEY-key}`, `applyJSONPatchOverride` in its
//! `pkg/controllers/workgenerator/override.go`), with its rules: every
//! string inside the value is expanded (nested in objects and arrays too;
//! KubeFleet replaces in the value's JSON text, so object keys as well: ours
//! are not), any other `${...}` is left as written,
//! and a label the member does not have is an error, never an empty string.
//! Ours adds one escape: `$${MEMBER_NAME}` writes `${MEMBER_NAME}` (and
//! `$${MEMBER_LABEL:` writes `${MEMBER_LABEL:`); every other `$` is kept, so
//! values that never name one of the two variables are exactly as before.
//! KubeFed's controller (`ApplyJSONPatch` in `pkg/controller/util/overrides.go`) knows none of
//! this and writes the text as it is (docs/kubefed-differences.md).

use std::collections::BTreeMap;

use serde_json::Value;

const NAME: &str = "${MEMBER_NAME}";
const LABEL: &str = "${MEMBER_LABEL:";

/// Why a value could not be expanded for a member.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum MemberValueError {
    #[error("${{MEMBER_LABEL:{key}}}: its KubeFedCluster has no label {key:?}")]
    MissingLabel { key: String },
    #[error("${{MEMBER_LABEL:... has no closing \"}}\"")]
    Unterminated,
    #[error("${{MEMBER_LABEL:}} names no label")]
    EmptyKey,
}

/// Whether any string in `value` names a member variable (or escapes one).
pub fn has_member_values(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains(NAME) || s.contains(LABEL),
        Value::Array(items) => items.iter().any(has_member_values),
        Value::Object(m) => m.values().any(has_member_values),
        _ => false,
    }
}

/// `value` with every string expanded for the member `name` with `labels`.
pub fn expand(
    value: &mut Value,
    name: &str,
    labels: &BTreeMap<String, String>,
) -> Result<(), MemberValueError> {
    match value {
        Value::String(s) if s.contains(NAME) || s.contains(LABEL) => {
            *s = expand_str(
                s,
                |key| {
                    labels.get(key).map(String::as_str).ok_or_else(|| {
                        MemberValueError::MissingLabel {
                            key: key.to_string(),
                        }
                    })
                },
                name,
            )?;
            Ok(())
        }
        Value::Array(items) => items.iter_mut().try_for_each(|v| expand(v, name, labels)),
        Value::Object(m) => m.values_mut().try_for_each(|v| expand(v, name, labels)),
        _ => Ok(()),
    }
}

/// The syntax of every variable in `value`, checked without a member
/// (offline validation): a `${MEMBER_LABEL:` closed and naming a label.
pub fn check_syntax(value: &Value) -> Result<(), MemberValueError> {
    match value {
        Value::String(s) if s.contains(LABEL) => expand_str(s, |_| Ok(""), "").map(|_| ()),
        Value::Array(items) => items.iter().try_for_each(check_syntax),
        Value::Object(m) => m.values().try_for_each(check_syntax),
        _ => Ok(()),
    }
}

/// One string expanded: `label` gives a label's value, `name` is the member's.
fn expand_str<'l>(
    s: &str,
    label: impl Fn(&str) -> Result<&'l str, MemberValueError>,
    name: &str,
) -> Result<String, MemberValueError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix('$')
            && (after.starts_with(NAME) || after.starts_with(LABEL))
        {
            // The escape: `$${...` is the text `${...`, not a variable.
            out.push_str("${");
            rest = &after[2..];
        } else if let Some(after) = rest.strip_prefix(NAME) {
            out.push_str(name);
            rest = after;
        } else if let Some(after) = rest.strip_prefix(LABEL) {
            let end = after.find('}').ok_or(MemberValueError::Unterminated)?;
            let key = &after[..end];
            if key.is_empty() {
                return Err(MemberValueError::EmptyKey);
            }
            out.push_str(label(key)?);
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &rest[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels() -> BTreeMap<String, String> {
        [("region", "eu-west"), ("kubefed.io/tier", "gold")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expanded(v: Value) -> Result<Value, MemberValueError> {
        let mut v = v;
        expand(&mut v, "m1", &labels()).map(|_| v)
    }

    #[test]
    fn strings_are_expanded_per_member() {
        let cases = [
            (json!("${MEMBER_NAME}"), json!("m1")),
            (
                json!("db.${MEMBER_LABEL:region}.example"),
                json!("db.eu-west.example"),
            ),
            (
                json!("${MEMBER_NAME}-${MEMBER_LABEL:kubefed.io/tier}-${MEMBER_NAME}"),
                json!("m1-gold-m1"),
            ),
            // Nested strings too; keys are not expanded.
            (
                json!({"${MEMBER_NAME}": ["a-${MEMBER_NAME}", 3, {"x": "${MEMBER_LABEL:region}"}]}),
                json!({"${MEMBER_NAME}": ["a-m1", 3, {"x": "eu-west"}]}),
            ),
            // Other variables and dollars are left as written (KubeFleet's rule).
            (
                json!("${HOME} $5 $$ ${MEMBER-CLUSTER-NAME} $"),
                json!("${HOME} $5 $$ ${MEMBER-CLUSTER-NAME} $"),
            ),
            (json!("${MEMBER_NAME"), json!("${MEMBER_NAME")),
            // The escape.
            (
                json!("$${MEMBER_NAME} is ${MEMBER_NAME}"),
                json!("${MEMBER_NAME} is m1"),
            ),
            (
                json!("$${MEMBER_LABEL:region}"),
                json!("${MEMBER_LABEL:region}"),
            ),
            (json!("$$${MEMBER_NAME}"), json!("$${MEMBER_NAME}")),
            (json!(7), json!(7)),
            (Value::Null, Value::Null),
        ];
        for (input, want) in cases {
            assert_eq!(expanded(input.clone()).unwrap(), want, "{input}");
        }
    }

    #[test]
    fn a_missing_label_or_a_broken_variable_is_an_error() {
        let e = expanded(json!({"a": ["${MEMBER_LABEL:zone}"]})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "${MEMBER_LABEL:zone}: its KubeFedCluster has no label \"zone\""
        );
        assert_eq!(
            expanded(json!("${MEMBER_LABEL:region")).unwrap_err(),
            MemberValueError::Unterminated
        );
        assert_eq!(
            expanded(json!("${MEMBER_LABEL:}")).unwrap_err(),
            MemberValueError::EmptyKey
        );
        assert!(check_syntax(&json!(["${MEMBER_LABEL:zone}", "${MEMBER_NAME}"])).is_ok());
        assert_eq!(
            check_syntax(&json!({"x": "${MEMBER_LABEL:"})).unwrap_err(),
            MemberValueError::Unterminated
        );
    }

    #[test]
    fn only_the_two_variables_count() {
        assert!(has_member_values(&json!({"a": ["x${MEMBER_NAME}"]})));
        assert!(has_member_values(&json!("${MEMBER_LABEL:r}")));
        assert!(!has_member_values(&json!({"${MEMBER_NAME}": "${HOME}"})));
        assert!(!has_member_values(&json!(1)));
    }
}
