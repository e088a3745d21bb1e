//! Taking over the fields `kubectl apply` (client-side) wrote, as kubectl
//! itself does when a user moves to `--server-side` (client-go's
//! `util/csaupgrade/upgrade.go`, `UpgradeManagedFields`): the entry of
//! the client-side manager (operation `Update`) is merged into the
//! server-side manager's `Apply` entry, or becomes it, so that the next
//! server-side apply owns those fields instead of conflicting with them.
//! Fields of any other manager stay theirs.

use serde_json::{Map, Value};

/// The field manager `kubectl apply` writes as (client-side).
pub const KUBECTL_CLIENT_SIDE_APPLY: &str = "kubectl-client-side-apply";

/// `managedFields` with the `csa` manager's fields of the main resource
/// owned by `ssa`'s `Apply` entry instead; `None` when `csa` owns none
/// (nothing to take over).
pub fn take_over(managed_fields: &[Value], csa: &str, ssa: &str) -> Option<Vec<Value>> {
    let is = |e: &Value, manager: &str, operation: &str| {
        e["manager"] == manager
            && e["operation"] == operation
            && e["subresource"].as_str().unwrap_or("").is_empty()
    };
    let csa_at = managed_fields.iter().position(|e| is(e, csa, "Update"))?;
    let mut out = managed_fields.to_vec();
    let csa_entry = out[csa_at].clone();
    match out.iter().position(|e| is(e, ssa, "Apply")) {
        Some(ssa_at) => {
            // Upstream unions only an entry of the same apiVersion.
            if out[ssa_at]["apiVersion"] == csa_entry["apiVersion"] {
                let mut fields = out[ssa_at]["fieldsV1"].take();
                union(&mut fields, &csa_entry["fieldsV1"]);
                out[ssa_at]["fieldsV1"] = fields;
            }
        }
        None => {
            let mut entry = csa_entry;
            entry["manager"] = ssa.into();
            entry["operation"] = "Apply".into();
            out.push(entry);
        }
    }
    out.retain(|e| !is(e, csa, "Update"));
    Some(out)
}

/// A field set (`fieldsV1`: a trie of `f:`/`k:`/`v:`/`i:` keys, `.` for
/// the node itself) extended by another: the union of two tries.
fn union(into: &mut Value, other: &Value) {
    let Some(theirs) = other.as_object() else {
        return;
    };
    if !into.is_object() {
        *into = Value::Object(Map::new());
    }
    let mine = into.as_object_mut().expect("made an object above");
    for (k, v) in theirs {
        union(
            mine.entry(k.clone())
                .or_insert_with(|| Value::Object(Map::new())),
            v,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(manager: &str, operation: &str, fields: Value) -> Value {
        json!({"manager": manager, "operation": operation, "apiVersion": "types.kubefed.io/v1beta1",
               "fieldsType": "FieldsV1", "fieldsV1": fields, "time": "2026-01-01T00:00:00Z"})
    }

    #[test]
    fn the_client_side_entry_becomes_the_server_side_apply() {
        let csa = entry(
            KUBECTL_CLIENT_SIDE_APPLY,
            "Update",
            json!({"f:spec": {".": {}, "f:template": {"f:data": {"f:a": {}}}}}),
        );
        let other = entry("kube-controller-manager", "Update", json!({"f:status": {}}));
        let out = take_over(
            &[csa, other.clone()],
            KUBECTL_CLIENT_SIDE_APPLY,
            "kubefedctl",
        )
        .unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0], other, "other managers keep their fields");
        assert_eq!(out[1]["manager"], "kubefedctl");
        assert_eq!(out[1]["operation"], "Apply");
        assert_eq!(
            out[1]["fieldsV1"]["f:spec"]["f:template"]["f:data"],
            json!({"f:a": {}})
        );
    }

    #[test]
    fn an_existing_apply_entry_gains_the_client_side_fields() {
        let csa = entry(
            KUBECTL_CLIENT_SIDE_APPLY,
            "Update",
            json!({"f:spec": {"f:template": {"f:data": {"f:a": {}}}}}),
        );
        let ssa = entry(
            "kubefedctl",
            "Apply",
            json!({"f:spec": {"f:template": {"f:data": {"f:b": {}}}, "f:placement": {}}}),
        );
        let out = take_over(&[ssa, csa], KUBECTL_CLIENT_SIDE_APPLY, "kubefedctl").unwrap();
        assert_eq!(out.len(), 1, "the client-side entry is gone");
        assert_eq!(
            out[0]["fieldsV1"],
            json!({"f:spec": {"f:template": {"f:data": {"f:a": {}, "f:b": {}}}, "f:placement": {}}})
        );
    }

    #[test]
    fn nothing_to_take_over_without_a_client_side_entry() {
        let ssa = entry("kubefedctl", "Apply", json!({"f:spec": {}}));
        let status = json!({"manager": KUBECTL_CLIENT_SIDE_APPLY, "operation": "Update", "subresource": "status", "fieldsV1": {}});
        assert_eq!(
            take_over(&[ssa, status], KUBECTL_CLIENT_SIDE_APPLY, "kubefedctl"),
            None
        );
        assert_eq!(
            take_over(&[], KUBECTL_CLIENT_SIDE_APPLY, "kubefedctl"),
            None
        );
    }
}
