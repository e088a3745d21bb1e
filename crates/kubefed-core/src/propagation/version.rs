//! Version bookkeeping as KubeFed's sync controller keeps it: the template
//! and overrides hashes stored in a `PropagatedVersion`, the per-cluster
//! version strings of member objects, and the merge of both after a pass.
//!
//! The hashes are byte-compatible with KubeFed v0.10 so that a
//! `PropagatedVersion` written by us is trusted by the Go controller (and
//! the other way round): a mismatch would not break anything, but it would
//! cost one needless update per cluster. That needs Go's `encoding/json`
//! bytes exactly: keys sorted, compact, `<` `>` `&` U+2028 U+2029 escaped,
//! Go's float formatting, and the trailing newline of `json.Encoder`.

use std::collections::{BTreeMap, BTreeSet};

use md5::{Digest, Md5};
use serde_json::{Map, Number, Value, json};

use crate::describe::{FieldError, FieldProblem, ObjectKey};
use crate::propagation::federated::FederatedObject;

/// Why a hash could not be computed (the shape of the federated object is
/// wrong where KubeFed's typed decoding would also fail).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VersionError {
    #[error("spec.template of {object} is not an object")]
    TemplateNotObject { object: String },
    #[error("spec of {object} is not an object")]
    SpecNotObject { object: String },
    #[error("spec.overrides of {object}: {problem}")]
    BadOverrides { object: String, problem: String },
}

/// `templateVersion`: hex MD5 of Go's JSON encoding of `spec.template`
/// plus a newline; `""` for an object without a template, as KubeFed
/// records it (upstream `pkg/controller/sync/version/...`'s
/// `GetTemplateHash` hashes only a template that is there). Earlier builds
/// of this tool recorded the hash of `{}` there instead; both are read as
/// the same ([`recorded_version`]), so no record they left makes a member
/// write.
pub fn template_version(fed: &Value) -> Result<String, VersionError> {
    let fed = FederatedObject::new(fed);
    match fed.template() {
        None | Some(Value::Null) => Ok(String::new()),
        Some(t @ Value::Object(_)) => Ok(md5_hex(&go_json_line(t))),
        Some(_) => Err(VersionError::TemplateNotObject {
            object: fed.describe(),
        }),
    }
}

/// `overridesVersion`: hex MD5 of `{"overrides": <spec.overrides>}` as Go
/// re-encodes it through its typed struct (field order `clusterName`,
/// `clusterOverrides`; `op`, `path`, `value`; empty fields omitted; numbers
/// through float64), plus a newline. `""` when the object has no `spec`.
pub fn overrides_version(fed: &Value) -> Result<String, VersionError> {
    let fed = FederatedObject::new(fed);
    match fed.spec() {
        None | Some(Value::Null) => return Ok(String::new()),
        Some(Value::Object(_)) => {}
        Some(_) => {
            return Err(VersionError::SpecNotObject {
                object: fed.describe(),
            });
        }
    }
    let bad = |problem: String| VersionError::BadOverrides {
        object: fed.describe(),
        problem,
    };
    let mut out = String::from("{\"overrides\":");
    match fed.overrides() {
        None | Some(Value::Null) => out.push_str("null"),
        Some(Value::Array(items)) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                encode_override_item(item, &mut out).map_err(|e| bad(format!("item {i}: {e}")))?;
            }
            out.push(']');
        }
        Some(_) => return Err(bad("not a list".into())),
    }
    out.push_str("}\n");
    Ok(md5_hex(&out))
}

fn encode_override_item(item: &Value, out: &mut String) -> Result<(), FieldError> {
    let Value::Object(m) = item else {
        return Err(FieldError::new("", FieldProblem::NotA("an object")));
    };
    out.push_str("{\"clusterName\":");
    push_go_string(out, opt_str(m, "clusterName")?);
    match m.get("clusterOverrides") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) if list.is_empty() => {}
        Some(Value::Array(list)) => {
            out.push_str(",\"clusterOverrides\":[");
            for (i, o) in list.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let Value::Object(o) = o else {
                    return Err(FieldError::new(
                        format!("clusterOverrides[{i}]"),
                        FieldProblem::NotA("an object"),
                    ));
                };
                out.push('{');
                let op = opt_str(o, "op")?;
                if !op.is_empty() {
                    out.push_str("\"op\":");
                    push_go_string(out, op);
                    out.push(',');
                }
                out.push_str("\"path\":");
                push_go_string(out, opt_str(o, "path")?);
                match o.get("value") {
                    None | Some(Value::Null) => {}
                    Some(v) => {
                        out.push_str(",\"value\":");
                        encode(&floats_only(v), out);
                    }
                }
                out.push('}');
            }
            out.push(']');
        }
        Some(_) => {
            return Err(FieldError::new(
                "clusterOverrides",
                FieldProblem::NotA("a list"),
            ));
        }
    }
    out.push('}');
    Ok(())
}

fn opt_str<'a>(m: &'a Map<String, Value>, key: &str) -> Result<&'a str, FieldError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(FieldError::new(key, FieldProblem::NotA("a string"))),
    }
}

/// Member object version as recorded by KubeFed: `gen:<generation>` when
/// the object has a non-zero `metadata.generation` (spec changes bump it),
/// else `rv:<resourceVersion>`.
pub fn member_version(obj: &Value) -> String {
    let meta = obj.get("metadata");
    let generation = meta
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if generation != 0 {
        return format!("gen:{generation}");
    }
    let rv = meta
        .and_then(|m| m.get("resourceVersion"))
        .and_then(Value::as_str)
        .unwrap_or("");
    format!("rv:{rv}")
}

/// Name of the (Cluster)PropagatedVersion of a federated object:
/// `<lowercase target kind>-<federated name>` (kind only, no group: two
/// same-kind types share the prefix, as upstream).
pub fn propagated_version_name(target_kind: &str, federated_name: &str) -> String {
    format!("{}-{federated_name}", target_kind.to_lowercase())
}

/// Where the (Cluster)PropagatedVersion of the federated object `key`
/// lives: its namespace (none when cluster-scoped) and
/// [`propagated_version_name`].
pub fn propagated_version_key(target_kind: &str, key: &ObjectKey) -> ObjectKey {
    ObjectKey {
        namespace: key.namespace.clone(),
        name: propagated_version_name(target_kind, &key.name),
    }
}

/// The version recorded for `cluster`, trusted only when the stored
/// hashes equal the current ones (else any edit of template or overrides
/// would go unnoticed). `status` is the PropagatedVersion's `status`.
pub fn recorded_version(
    status: Option<&Value>,
    template_version: &str,
    overrides_version: &str,
    cluster: &str,
) -> Option<String> {
    let status = status?;
    if !hashes_match(status, template_version, overrides_version) {
        return None;
    }
    status
        .get("clusterVersions")?
        .as_array()?
        .iter()
        .find(|cv| cv.get("clusterName").and_then(Value::as_str) == Some(cluster))
        .and_then(|cv| cv.get("version"))
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

/// The PropagatedVersion `status` after a pass (upstream
/// `pkg/controller/sync/version/manager.go`): with unchanged hashes
/// the old entries of still-selected clusters that were not re-recorded
/// survive; with changed hashes only this pass's versions count. Entries
/// with an empty version are dropped; `clusterVersions` sorted by name.
pub fn merged_status(
    existing: Option<&Value>,
    template_version: &str,
    overrides_version: &str,
    selected: &BTreeSet<String>,
    recorded: &BTreeMap<String, String>,
) -> Value {
    let mut versions: BTreeMap<String, String> = BTreeMap::new();
    if let Some(old) = existing.filter(|s| hashes_match(s, template_version, overrides_version)) {
        for cv in old
            .get("clusterVersions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (Some(name), Some(version)) = (
                cv.get("clusterName").and_then(Value::as_str),
                cv.get("version").and_then(Value::as_str),
            ) else {
                continue;
            };
            if selected.contains(name) {
                versions.insert(name.to_string(), version.to_string());
            }
        }
    }
    for (c, v) in recorded {
        versions.insert(c.clone(), v.clone());
    }
    let cluster_versions: Vec<Value> = versions
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(c, v)| json!({"clusterName": c, "version": v}))
        .collect();
    json!({
        "templateVersion": template_version,
        "overridesVersion": overrides_version,
        "clusterVersions": cluster_versions,
    })
}

/// Whether `status` was recorded for these hashes. KubeFed records `""`
/// as the template version of an object without a template (upstream
/// `GetTemplateHash`), where we record the hash of `{}`: both render the
/// same member object, so a version KubeFed recorded there is trusted,
/// and taking a federation over from KubeFed rewrites no member object
/// (tests/it/handover.rs).
fn hashes_match(status: &Value, template_version: &str, overrides_version: &str) -> bool {
    let get = |k: &str| status.get(k).and_then(Value::as_str).unwrap_or("");
    // No template (`""`) and an empty one (the hash of `{}`) render the
    // same object: a record of either stands for the other.
    let no_template = |v: &str| v.is_empty() || v == md5_hex("{}\n");
    let template = get("templateVersion");
    let same_template =
        template == template_version || (no_template(template) && no_template(template_version));
    same_template && get("overridesVersion") == overrides_version
}

fn md5_hex(text: &str) -> String {
    let digest = Md5::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Go's `json.Marshal` of a decoded value: compact, object keys sorted
/// byte-wise, HTML-safe escaping, Go float formatting. Integers print as
/// integers (Kubernetes' unstructured decoding keeps them as int64).
pub fn go_json(value: &Value) -> String {
    let mut out = String::new();
    encode(value, &mut out);
    out
}

/// [`go_json`] plus the newline `json.Encoder.Encode` appends, which is
/// what KubeFed hashes.
pub fn go_json_line(value: &Value) -> String {
    let mut out = go_json(value);
    out.push('\n');
    out
}

fn encode(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&go_number(n)),
        Value::String(s) => push_go_string(out, s),
        Value::Array(a) => {
            out.push('[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                encode(v, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_go_string(out, k);
                out.push(':');
                encode(&m[k], out);
            }
            out.push('}');
        }
    }
}

fn go_number(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else {
        // u64 beyond i64 and real floats: Go decodes both as float64.
        go_float(n.as_f64().unwrap_or(0.0))
    }
}

/// Go's `encoding/json` float64 formatting: shortest digits, plain
/// notation for 1e-6 <= |f| < 1e21, else `1e+21` / `1e-7` style.
pub fn go_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let s = format!("{f:e}");
        let (mantissa, exp) = s.split_once('e').expect("{:e} has an exponent");
        let exp: i32 = exp.parse().expect("exponent is an integer");
        if exp < 0 {
            format!("{mantissa}e-{}", -exp)
        } else {
            format!("{mantissa}e+{exp:02}")
        }
    } else {
        format!("{f}")
    }
}

/// Numbers as Go sees them after decoding into `interface{}`: float64.
pub fn floats_only(v: &Value) -> Value {
    match v {
        Value::Number(n) => Number::from_f64(n.as_f64().unwrap_or(0.0))
            .map(Value::Number)
            .unwrap_or(Value::Null),
        Value::Array(a) => Value::Array(a.iter().map(floats_only).collect()),
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), floats_only(v))).collect())
        }
        other => other.clone(),
    }
}

/// Go's string encoding with HTML escaping (as of the Go releases KubeFed
/// v0.10 was built with: `\b` and `\f` as `\u0008`/`\u000c`).
fn push_go_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{0}'..='\u{1f}' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    // Found by fuzzing (hack/fuzz.sh, target go_json): without serde_json's
    // correctly rounded float parsing, `3.222222222222e+36` read back one
    // unit in the last place off, so a hash could differ from Go's.
    #[test]
    fn go_json_reads_back_exactly() {
        for text in [
            "3222222222222000012743110316963455889",
            "1e21",
            "5e-324",
            "0.1",
            "123456789012345680000",
        ] {
            let v: Value = serde_json::from_str(text).unwrap();
            let back: Value = serde_json::from_str(&go_json(&v)).unwrap();
            assert_eq!(back.as_f64(), v.as_f64(), "{text} -> {}", go_json(&v));
        }
    }

    // Upstream sync/resource_test.go: the template hash vector.
    #[test]
    fn template_hash_matches_upstream_vector() {
        let fed = json!({"spec": {"template": {"spec": {"foo": null}}}});
        assert_eq!(
            template_version(&fed).unwrap(),
            "a5b8d4352d5aed51c51b93900258ccf3"
        );
        assert_eq!(
            md5_hex("{\"spec\":{\"foo\":null}}\n"),
            "a5b8d4352d5aed51c51b93900258ccf3"
        );
    }

    #[test]
    fn no_template_is_kubefeds_empty_version_and_non_objects_are_errors() {
        let empty = template_version(&json!({"spec": {"template": {}}})).unwrap();
        assert_eq!(
            empty, "8a80554c91d9fca8acb82f023de02f11",
            "md5 of \"{{}}\\n\""
        );
        assert_eq!(template_version(&json!({"spec": {}})).unwrap(), "");
        assert_eq!(template_version(&json!({})).unwrap(), "");
        assert!(template_version(&json!({"spec": {"template": [1]}})).is_err());
    }

    /// A federated object without a template: KubeFed records `""`, as we
    /// do now; records of the hash of `{}` (ours before) are trusted as
    /// well (no rewrite after an upgrade), but not for an object with a
    /// template.
    #[test]
    fn empty_and_no_template_records_are_trusted_for_no_template() {
        let none = template_version(&json!({"spec": {}})).unwrap();
        let some = template_version(&json!({"spec": {"template": {"data": {}}}})).unwrap();
        for recorded in ["", "8a80554c91d9fca8acb82f023de02f11"] {
            let status = json!({"templateVersion": recorded, "overridesVersion": "o",
                "clusterVersions": [{"clusterName": "m1", "version": "rv:7"}]});
            assert_eq!(
                recorded_version(Some(&status), &none, "o", "m1").as_deref(),
                Some("rv:7"),
                "{recorded:?}"
            );
            let merged = merged_status(
                Some(&status),
                &none,
                "o",
                &["m1".to_string()].into(),
                &BTreeMap::new(),
            );
            assert_eq!(merged["clusterVersions"][0]["version"], "rv:7");
            assert_eq!(recorded_version(Some(&status), &some, "o", "m1"), None);
        }
    }

    #[test]
    fn go_json_sorts_keys_and_escapes_like_go() {
        let cases = [
            (
                json!({"b": 1, "a": {"d": [1, 2], "c": true}}),
                r#"{"a":{"c":true,"d":[1,2]},"b":1}"#,
            ),
            (json!({"x": "<a&b>"}), r#"{"x":"\u003ca\u0026b\u003e"}"#),
            (
                json!("line\nq\"\\\u{1}\u{8}\u{c}\t\r"),
                r#""line\nq\"\\\u0001\u0008\u000c\t\r""#,
            ),
            (
                json!("\u{2028}\u{2029}é\u{7f}"),
                "\"\\u2028\\u2029é\u{7f}\"",
            ),
            (json!({"B": 1, "a": 2, "_": 3}), r#"{"B":1,"_":3,"a":2}"#),
            (json!(1.0), "1"),
            (json!(1.5), "1.5"),
            (json!(-0.25), "-0.25"),
            (json!(1e21), "1e+21"),
            (json!(1e20), "100000000000000000000"),
            (json!(0.000001), "0.000001"),
            (json!(1e-7), "1e-7"),
            (json!(1.5e-10), "1.5e-10"),
            (json!(1.2345e300), "1.2345e+300"),
            (json!(u64::MAX), "18446744073709552000"),
            (json!(-42), "-42"),
        ];
        for (value, want) in cases {
            assert_eq!(go_json(&value), want, "{value}");
        }
    }

    #[test]
    fn html_characters_change_the_template_hash() {
        // Escaped and unescaped encodings must hash differently, so the
        // escaping is what makes the hash Go-compatible.
        let fed = json!({"spec": {"template": {"data": {"k": "<>"}}}});
        assert_eq!(
            template_version(&fed).unwrap(),
            md5_hex("{\"data\":{\"k\":\"\\u003c\\u003e\"}}\n")
        );
        assert_ne!(
            template_version(&fed).unwrap(),
            md5_hex("{\"data\":{\"k\":\"<>\"}}\n")
        );
    }

    #[test]
    fn overrides_hash_uses_struct_order_and_omits_empty_fields() {
        let fed = json!({"spec": {"overrides": [
            {"clusterOverrides": [{"value": 5, "path": "/spec/replicas"},
                                  {"path": "/x", "op": "add", "value": {"b": 1, "a": "<"}},
                                  {"path": "/y", "op": "", "value": null}],
             "clusterName": "c1", "ignored": 1},
            {"clusterName": "c2", "clusterOverrides": []}
        ]}});
        let want = concat!(
            r#"{"overrides":[{"clusterName":"c1","clusterOverrides":["#,
            r#"{"path":"/spec/replicas","value":5},"#,
            r#"{"op":"add","path":"/x","value":{"a":"\u003c","b":1}},"#,
            r#"{"path":"/y"}]},{"clusterName":"c2"}]}"#,
            "\n"
        );
        assert_eq!(overrides_version(&fed).unwrap(), md5_hex(want));
    }

    #[test]
    fn overrides_hash_without_spec_or_overrides() {
        assert_eq!(overrides_version(&json!({})).unwrap(), "");
        assert_eq!(
            overrides_version(&json!({"spec": {}})).unwrap(),
            md5_hex("{\"overrides\":null}\n")
        );
        assert!(overrides_version(&json!({"spec": {"overrides": {}}})).is_err());
        let err = overrides_version(
            &json!({"kind": "FederatedX", "metadata": {"name": "n", "namespace": "ns"},
            "spec": {"overrides": [{"clusterName": 3}]}}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("FederatedX \"ns/n\""), "{err}");
    }

    #[test]
    fn member_versions_and_names() {
        let cases = [
            (
                json!({"metadata": {"generation": 3, "resourceVersion": "9"}}),
                "gen:3",
            ),
            (
                json!({"metadata": {"generation": 0, "resourceVersion": "9"}}),
                "rv:9",
            ),
            (json!({"metadata": {"resourceVersion": "12"}}), "rv:12"),
            (json!({}), "rv:"),
        ];
        for (obj, want) in cases {
            assert_eq!(member_version(&obj), want);
        }
        assert_eq!(
            propagated_version_name("Deployment", "web"),
            "deployment-web"
        );
        assert_eq!(
            propagated_version_name("Namespace", "myns"),
            "namespace-myns"
        );
        assert_eq!(
            propagated_version_key("Deployment", &ObjectKey::new("shop", "web")),
            ObjectKey::new("shop", "deployment-web")
        );
    }

    #[test]
    fn recorded_versions_are_trusted_only_with_matching_hashes() {
        let status = json!({"templateVersion": "t", "overridesVersion": "o",
            "clusterVersions": [{"clusterName": "c1", "version": "gen:2"}]});
        assert_eq!(
            recorded_version(Some(&status), "t", "o", "c1").as_deref(),
            Some("gen:2")
        );
        assert_eq!(recorded_version(Some(&status), "t", "o", "c2"), None);
        assert_eq!(recorded_version(Some(&status), "t2", "o", "c1"), None);
        assert_eq!(recorded_version(Some(&status), "t", "o2", "c1"), None);
        assert_eq!(recorded_version(None, "t", "o", "c1"), None);
    }

    #[test]
    fn merged_status_keeps_selected_old_entries_only_with_same_hashes() {
        let old = json!({"templateVersion": "t", "overridesVersion": "o", "clusterVersions": [
            {"clusterName": "a", "version": "gen:1"},
            {"clusterName": "b", "version": "rv:5"},
            {"clusterName": "gone", "version": "rv:7"}]});
        let selected: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
        let recorded: BTreeMap<String, String> = [
            ("c".to_string(), "gen:9".to_string()),
            ("b".to_string(), "rv:6".to_string()),
        ]
        .into();
        let same = merged_status(Some(&old), "t", "o", &selected, &recorded);
        assert_eq!(
            same["clusterVersions"],
            json!([{"clusterName": "a", "version": "gen:1"},
                   {"clusterName": "b", "version": "rv:6"},
                   {"clusterName": "c", "version": "gen:9"}])
        );
        let changed = merged_status(Some(&old), "t2", "o", &selected, &recorded);
        assert_eq!(
            changed,
            json!({"templateVersion": "t2", "overridesVersion": "o", "clusterVersions": [
                {"clusterName": "b", "version": "rv:6"},
                {"clusterName": "c", "version": "gen:9"}]})
        );
        let empty_dropped = merged_status(
            None,
            "t",
            "o",
            &selected,
            &[("a".to_string(), String::new())].into(),
        );
        assert_eq!(empty_dropped["clusterVersions"], json!([]));
    }
}
