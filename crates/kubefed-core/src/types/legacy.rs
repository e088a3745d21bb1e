//! Older spellings, accepted on offline input so the seed documents work
//! verbatim: `*.kubefed.k8s.io` groups (KubeFed before v0.1), dotted
//! override paths (`spec.replicas`, KubeFed's first notation), and `...`
//! standing for elided template content in documentation (read as `{}`).

use serde_json::Value;

/// RSP API groups accepted on input (current and pre-v0.1 spelling).
pub const SCHEDULING_GROUPS: [&str; 2] = ["scheduling.kubefed.io", "scheduling.kubefed.k8s.io"];
/// Federated type groups of the default FTCs (current and older spelling).
pub const TYPES_GROUPS: [&str; 2] = ["types.kubefed.io", "types.kubefed.k8s.io"];

/// The object in today's spelling, and a note per rewrite.
pub fn normalize(obj: Value) -> (Value, Vec<String>) {
    let mut out = obj;
    let mut notes = Vec::new();
    if let Some(av) = out["apiVersion"].as_str()
        && let Some((group, version)) = av.split_once('/')
        && let Some(prefix) = group.strip_suffix(".kubefed.k8s.io")
    {
        out["apiVersion"] = Value::String(format!("{prefix}.kubefed.io/{version}"));
    }
    // get_mut, not indexing: `v["k"]` on a missing key would insert a null.
    if let Some(overrides) = out
        .get_mut("spec")
        .and_then(|s| s.get_mut("overrides"))
        .and_then(Value::as_array_mut)
    {
        for o in overrides.iter_mut() {
            let cluster = o["clusterName"].as_str().unwrap_or("").to_string();
            if let Some(list) = o.get_mut("clusterOverrides").and_then(Value::as_array_mut) {
                for co in list.iter_mut() {
                    if let Some(p) = co["path"].as_str()
                        && !p.is_empty()
                        && !p.starts_with('/')
                    {
                        let pointer = format!("/{}", p.replace('.', "/"));
                        notes.push(format!(
                            "override path {p:?} for cluster {cluster:?} read as {pointer:?}"
                        ));
                        co["path"] = Value::String(pointer);
                    }
                }
            }
        }
    }
    if let Some(template) = out.get_mut("spec").and_then(|s| s.get_mut("template")) {
        drop_elisions(template);
    }
    (out, notes)
}

/// `...` means "content left out": an empty object, so that overrides
/// below it (the seed's `spec.replicas`) still have a parent.
fn drop_elisions(v: &mut Value) {
    if let Value::Object(map) = v {
        for x in map.values_mut() {
            if x.as_str() == Some("...") {
                *x = Value::Object(Default::default());
            } else {
                drop_elisions(x);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn seed_spellings_become_current_ones() {
        let seed = json!({
            "apiVersion": "types.kubefed.k8s.io/v1beta1", "kind": "FederatedDeployment",
            "spec": {
                "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": "..."},
                "overrides": [{"clusterName": "cluster2", "clusterOverrides": [{"path": "spec.replicas", "value": 5}, {"path": "/a/b"}]}]
            }
        });
        let (out, notes) = normalize(seed.clone());
        assert_eq!(out["apiVersion"], "types.kubefed.io/v1beta1");
        assert_eq!(
            out["spec"]["overrides"][0]["clusterOverrides"][0]["path"],
            "/spec/replicas"
        );
        assert_eq!(
            out["spec"]["overrides"][0]["clusterOverrides"][1]["path"],
            "/a/b"
        );
        assert_eq!(
            out["spec"]["template"],
            json!({"metadata": {"labels": {"app": "nginx"}}, "spec": {}})
        );
        assert_eq!(notes.len(), 1);
        let rsp = json!({"apiVersion": "scheduling.kubefed.k8s.io/v1alpha1"});
        assert_eq!(
            normalize(rsp.clone()).0["apiVersion"],
            "scheduling.kubefed.io/v1alpha1"
        );
        let plain = json!({"apiVersion": "apps/v1", "kind": "Deployment"});
        assert_eq!(normalize(plain.clone()).0, plain);
    }
}
