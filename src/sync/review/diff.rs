//! A line diff of a member object, live against desired, for `--diff`. A
//! new object shows whole (every line added), a deleted one whole (every
//! line removed), as `kubectl diff` and `terraform plan` show them.

use serde_json::Value;

/// `--- live` / `+++ desired` lines of the YAML texts (longest common
/// subsequence; objects are small). `None` live: the object is created
/// (`(absent)`); `None` desired: it is deleted (`(deleted)`).
pub fn unified(what: &str, cluster: &str, live: Option<&Value>, desired: Option<&Value>) -> String {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in [
                "resourceVersion",
                "uid",
                "creationTimestamp",
                "generation",
                "managedFields",
                "selfLink",
            ] {
                m.remove(k);
            }
        }
        if let Some(o) = v.as_object_mut() {
            o.remove("status");
        }
        crate::terminal::output::render(&v, crate::terminal::output::DocumentFormat::Yaml)
            .unwrap_or_default()
    };
    let text = |v: Option<&Value>| v.map(strip).unwrap_or_default();
    let (a, b) = (text(live), text(desired));
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (from, to) = (
        if live.is_some() { "live" } else { "absent" },
        if desired.is_some() {
            "desired"
        } else {
            "deleted"
        },
    );
    let mut out = format!("--- {what} in {cluster} ({from})\n+++ {what} in {cluster} ({to})\n");
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("+{}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("-{}\n", a[i]));
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shows_changed_lines_only() {
        let live = json!({"kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "5"}, "data": {"k": "old"}});
        let desired = json!({"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "new"}});
        let d = unified("ConfigMap ns/a", "m1", Some(&live), Some(&desired));
        assert!(
            d.contains("-  k: old\n") && d.contains("+  k: new\n"),
            "{d}"
        );
        assert!(!d.contains("resourceVersion"));
        assert_eq!(
            d.lines()
                .filter(|l| l.starts_with('+') || l.starts_with('-'))
                .count(),
            4
        );
    }

    #[test]
    fn a_created_or_deleted_object_shows_whole() {
        let obj =
            json!({"kind": "ConfigMap", "metadata": {"name": "a", "uid": "u"}, "data": {"k": "v"}});
        let created = unified("ConfigMap ns/a", "m1", None, Some(&obj));
        assert!(
            created.starts_with(
                "--- ConfigMap ns/a in m1 (absent)\n+++ ConfigMap ns/a in m1 (desired)\n"
            ),
            "{created}"
        );
        let body: Vec<&str> = created.lines().skip(2).collect();
        assert!(body.iter().all(|l| l.starts_with('+')), "{created}");
        assert!(
            body.contains(&"+  k: v") && body.contains(&"+kind: ConfigMap"),
            "{created}"
        );
        assert!(!created.contains("uid"), "{created}");
        let deleted = unified("ConfigMap ns/a", "m1", Some(&obj), None);
        assert!(
            deleted.contains("+++ ConfigMap ns/a in m1 (deleted)\n"),
            "{deleted}"
        );
        let body: Vec<&str> = deleted.lines().skip(2).collect();
        assert!(body.iter().all(|l| l.starts_with('-')), "{deleted}");
        assert!(body.contains(&"-  k: v"), "{deleted}");
    }
}
