//! Ingress templates of KubeFed's era (`extensions/v1beta1`,
//! `networking.k8s.io/v1beta1`: `serviceName`/`servicePort` backends, no
//! `pathType`) for `networking.k8s.io/v1`, the only version served since
//! Kubernetes 1.22, converted as the API server converted them.

use serde_json::{Value, json};

/// The served Ingress API.
pub const INGRESS_V1: &str = "networking.k8s.io/v1";

/// Whether `api_version`/`kind` is an Ingress of a removed version.
pub fn is_legacy(api_version: &str, kind: &str) -> bool {
    kind == "Ingress"
        && matches!(
            api_version,
            "extensions/v1beta1" | "networking.k8s.io/v1beta1"
        )
}

/// Converts `ingress` (an Ingress object) in place to
/// `networking.k8s.io/v1`; true when anything changed besides the version.
pub fn upgrade(ingress: &mut Value) -> bool {
    let mut changed = false;
    let Some(spec) = ingress.get_mut("spec").filter(|s| s.is_object()) else {
        return false;
    };
    if let Some(backend) = spec.as_object_mut().and_then(|s| s.remove("backend")) {
        spec["defaultBackend"] = backend;
        changed = true;
    }
    if let Some(backend) = spec.get_mut("defaultBackend") {
        changed |= upgrade_backend(backend);
    }
    let rules = spec
        .get_mut("rules")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten();
    let paths = rules.flat_map(|r| {
        r.get_mut("http")
            .and_then(|h| h.get_mut("paths"))
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
    });
    for path in paths {
        if path.get("pathType").is_none_or(Value::is_null) {
            path["pathType"] = json!("ImplementationSpecific");
            changed = true;
        }
        if let Some(backend) = path.get_mut("backend") {
            changed |= upgrade_backend(backend);
        }
    }
    changed
}

fn upgrade_backend(backend: &mut Value) -> bool {
    let Some(b) = backend.as_object_mut() else {
        return false;
    };
    let name = b.remove("serviceName");
    let port = b.remove("servicePort");
    if name.is_none() && port.is_none() {
        return false;
    }
    let mut service = json!({"name": name.unwrap_or(Value::Null)});
    match port {
        Some(Value::Number(n)) => service["port"] = json!({"number": n}),
        Some(Value::String(s)) => match s.parse::<i64>() {
            Ok(n) => service["port"] = json!({"number": n}),
            Err(_) => service["port"] = json!({"name": s}),
        },
        _ => {}
    }
    b.insert("service".into(), service);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_backends_become_v1_services() {
        let cases = [
            (
                json!({"spec": {"backend": {"serviceName": "s", "servicePort": 80}}}),
                json!({"spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}}),
                true,
            ),
            (
                json!({"spec": {"rules": [{"host": "h", "http": {"paths": [{"path": "/", "backend": {"serviceName": "s", "servicePort": "http"}}]}}]}}),
                json!({"spec": {"rules": [{"host": "h", "http": {"paths": [{"path": "/", "pathType": "ImplementationSpecific", "backend": {"service": {"name": "s", "port": {"name": "http"}}}}]}}]}}),
                true,
            ),
            (
                json!({"spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}}),
                json!({"spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}}),
                false,
            ),
        ];
        for (mut input, want, changed) in cases {
            assert_eq!(upgrade(&mut input), changed);
            assert_eq!(input, want);
        }
        assert!(is_legacy("extensions/v1beta1", "Ingress"));
        assert!(!is_legacy(INGRESS_V1, "Ingress"));
    }
}
