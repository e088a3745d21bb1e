//! `status TYPE --drift`: how each member's copy differs from what a run
//! would write, field by field, as a table, in the JSON/YAML document
//! (`clusters[].drift`), or as a JUnit report (`-o junit`: one test case per
//! object and member, for GitLab's and GitHub's test report views).

use super::data::{DriftView, ObjectRow};
use crate::core::propagation::drift::FieldDrift;
use crate::sync::run::report::field_text;
use std::fmt::Write as _;

/// The table: one row per differing field (or whole copy) and member.
pub fn drift_table(rows: &[ObjectRow]) -> String {
    let mut t = crate::terminal::output::table(&[
        "NAMESPACE",
        "NAME",
        "CLUSTER",
        "PATH",
        "MEMBER",
        "DESIRED",
        "SINCE",
    ]);
    let mut any = false;
    for r in rows {
        for c in &r.clusters {
            let Some(d) = c.drift.as_ref().filter(|d| !d.is_in_sync()) else {
                continue;
            };
            any = true;
            let ns = if r.namespace.is_empty() {
                "-"
            } else {
                &r.namespace
            };
            if d.fields.is_empty() {
                let since = d.since.as_deref().unwrap_or("-");
                t.add_row(vec![
                    ns,
                    &r.name,
                    &c.name,
                    "(whole copy)",
                    d.state,
                    "",
                    since,
                ]);
            }
            for f in &d.fields {
                let (member, desired) = values(&f.field);
                let since = f.since.as_deref().unwrap_or("-");
                t.add_row(vec![
                    ns,
                    &r.name,
                    &c.name,
                    &f.field.path,
                    &member,
                    &desired,
                    since,
                ]);
            }
        }
    }
    if !any {
        return "No drift: every member's copy holds what a run would write.\n".into();
    }
    crate::terminal::output::table_text(&t)
}

/// A field's two values as cells: JSON, `(absent)`, or `(hidden)` for a Secret's.
fn values(f: &FieldDrift) -> (String, String) {
    let cell = |v: &Option<serde_json::Value>| match v {
        _ if f.hidden => "(hidden)".to_string(),
        Some(v) => serde_json::to_string(v).unwrap_or_default(),
        None => "(absent)".to_string(),
    };
    (cell(&f.member), cell(&f.desired))
}

/// A JUnit XML report (the schema Jenkins, GitLab and GitHub's reporters
/// read, `junit-10.xsd`): one test suite for the type, one test case per
/// object and member checked (`classname` the object, `name` the
/// member), failed when the copy differs.
pub fn junit(suite: &str, rows: &[ObjectRow], timestamp: &str) -> String {
    let mut cases = String::new();
    let (mut tests, mut failures) = (0, 0);
    for r in rows {
        let object = match r.namespace.as_str() {
            "" => r.name.clone(),
            ns => format!("{ns}/{}", r.name),
        };
        for c in &r.clusters {
            // Every member checked is a case; one without drift passes.
            if c.live.is_none() {
                continue;
            }
            tests += 1;
            let _ = write!(
                cases,
                "    <testcase classname=\"{}\" name=\"{}\" time=\"0\"",
                xml(&format!("{suite} {object}")),
                xml(&c.name)
            );
            let Some(d) = c.drift.as_ref().filter(|d| !d.is_in_sync()) else {
                cases.push_str("/>\n");
                continue;
            };
            failures += 1;
            let detail = failure_text(d);
            let first = detail.lines().next().unwrap_or_default().to_string();
            let _ = write!(
                cases,
                ">\n      <failure message=\"{}\" type=\"drift\">{}</failure>\n    </testcase>\n",
                xml(&format!("{} in {}: {first}", d.state, c.name)),
                xml(&detail)
            );
        }
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"0\" timestamp=\"{}\">\n{cases}  </testsuite>\n</testsuites>\n",
        xml(&format!("kubefedctl drift: {suite}")),
        xml(timestamp.trim_end_matches('Z')),
    )
}

/// The failure's body: one line per field (a Secret's: the path only).
fn failure_text(d: &DriftView) -> String {
    if d.fields.is_empty() {
        return match &d.since {
            Some(s) => format!("{} (since {s})", d.state),
            None => d.state.to_string(),
        };
    }
    let mut out = String::new();
    for f in &d.fields {
        out.push_str(&field_text(&f.field));
        if let Some(s) = &f.since {
            let _ = write!(out, " (since {s})");
        }
        out.push('\n');
    }
    out
}

/// Text for an XML attribute or element.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Characters XML 1.0 cannot hold at all.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::status::data::ClusterPropagation;
    use crate::core::propagation::drift::Drift;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn row(drift: Option<DriftView>) -> ObjectRow {
        ObjectRow {
            namespace: "shop".into(),
            name: "web<1>".into(),
            placement: String::new(),
            propagation: String::new(),
            reason: String::new(),
            clusters: vec![ClusterPropagation {
                name: "m1".into(),
                status: String::new(),
                live: Some("checked".into()),
                message: None,
                remote_status: None,
                ready: None,
                drift,
            }],
            created: String::new(),
            rollout: None,
        }
    }

    fn differs() -> DriftView {
        let field = FieldDrift {
            path: "/data/k".into(),
            member: Some(json!("a&b")),
            desired: Some(json!("c")),
            hidden: false,
        };
        let since = BTreeMap::from([("/data/k".to_string(), "2026-12-06T10:00:00Z".to_string())]);
        DriftView::of(&Drift::Fields(vec![field]), &since)
    }

    #[test]
    fn junit_has_one_failed_case_per_drifted_member_and_escapes_text() {
        let in_sync = DriftView::of(&Drift::Fields(vec![]), &BTreeMap::new());
        let mut unchecked = row(None);
        unchecked.clusters[0].live = None;
        let xml = junit(
            "configmaps",
            &[row(Some(differs())), row(Some(in_sync)), unchecked],
            "2026-12-06T10:00:00Z",
        );
        assert!(xml.contains("tests=\"2\" failures=\"1\""), "{xml}");
        assert!(
            xml.contains("classname=\"configmaps shop/web&lt;1&gt;\""),
            "{xml}"
        );
        assert!(xml.contains("/data/k: member &quot;a&amp;b&quot;, desired &quot;c&quot; (since 2026-12-06T10:00:00Z)"), "{xml}");
        assert!(xml.contains("timestamp=\"2026-12-06T10:00:00\""), "{xml}");
    }

    #[test]
    fn the_table_names_path_values_and_since() {
        let text = drift_table(&[row(Some(differs()))]);
        for want in ["/data/k", "\"a&b\"", "\"c\"", "2026-12-06T10:00:00Z", "m1"] {
            assert!(text.contains(want), "{want} in {text}");
        }
        assert!(drift_table(&[row(None)]).starts_with("No drift"));
    }
}
