//! A line diff of a member object, live against desired, for `--diff`.

use serde_json::Value;

/// `--- live` / `+++ desired` lines of the YAML texts (longest common
/// subsequence; objects are small).
pub fn unified(what: &str, cluster: &str, live: &Value, desired: &Value) -> String {
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
        crate::output::render(&v, crate::output::DocumentFormat::Yaml).unwrap_or_default()
    };
    let (a, b) = (strip(live), strip(desired));
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
    let mut out = format!("--- {what} in {cluster} (live)\n+++ {what} in {cluster} (desired)\n");
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
        let d = unified("ConfigMap ns/a", "m1", &live, &desired);
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
}
