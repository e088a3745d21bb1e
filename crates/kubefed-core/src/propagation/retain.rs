//! Field retention on update: what the desired member object takes over
//! from the live one before it is PUT (KubeFed's `RetainClusterFields`).
//!
//! Member clusters own some fields: the API server allocates cluster IPs
//! and node ports, controllers add finalizers and annotations, the token
//! controller fills a ServiceAccount's secrets, an HPA scales replicas.
//! Overwriting them would fail (immutable fields) or fight those owners.

use serde_json::{Map, Value};

/// A live field has a type upstream cannot read (`FieldRetentionFailed`).
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error("field retention for {kind}: {field}: {problem}")]
pub struct RetainError {
    pub kind: String,
    pub field: String,
    pub problem: String,
}

/// Copy into `desired` what upstream keeps from `live` on update, in
/// upstream's order: resourceVersion; finalizers and annotations (replaced
/// wholesale, absent when the live object has none); then per kind —
/// Service: healthCheckNodePort (> 0), clusterIP, clusterIPs, node ports of
/// matching ports; ServiceAccount: secrets when desired has none; every
/// other kind: `spec.replicas` when `retain_replicas`.
pub fn retain_fields(
    desired: &mut Value,
    live: &Value,
    target_kind: &str,
    retain_replicas: bool,
) -> Result<(), RetainError> {
    let err = |field: &str, problem: &str| RetainError {
        kind: target_kind.to_string(),
        field: field.to_string(),
        problem: problem.to_string(),
    };
    let live_meta = live.get("metadata");
    for key in ["resourceVersion", "finalizers", "annotations"] {
        let value = live_meta.and_then(|m| m.get(key)).filter(|v| !is_empty(v));
        let meta = ensure_object(desired, "metadata")
            .ok_or_else(|| err("metadata", "desired metadata is not an object"))?;
        match value {
            Some(v) => {
                meta.insert(key.to_string(), v.clone());
            }
            None => {
                meta.remove(key);
            }
        }
    }
    match target_kind {
        "Service" => retain_service(desired, live, &err),
        "Job" => {
            retain_job_selector(desired, live);
            Ok(())
        }
        "ServiceAccount" => {
            let desired_empty = match desired.get("secrets") {
                None | Some(Value::Null) => true,
                Some(Value::Array(a)) => a.is_empty(),
                Some(_) => return Err(err("secrets", "desired secrets is not a list")),
            };
            if !desired_empty {
                return Ok(());
            }
            let live_secrets = match live.get("secrets") {
                None | Some(Value::Null) => return Ok(()),
                Some(Value::Array(a)) => a,
                Some(_) => return Err(err("secrets", "not a list")),
            };
            if !live_secrets.is_empty()
                && let Some(d) = desired.as_object_mut()
            {
                d.insert("secrets".into(), Value::Array(live_secrets.clone()));
            }
            Ok(())
        }
        _ => {
            if !retain_replicas {
                return Ok(());
            }
            match live.get("spec").and_then(|s| s.get("replicas")) {
                None | Some(Value::Null) => Ok(()),
                Some(r) if r.is_i64() => {
                    let spec = ensure_object(desired, "spec")
                        .ok_or_else(|| err("spec", "desired spec is not an object"))?;
                    spec.insert("replicas".into(), r.clone());
                    Ok(())
                }
                Some(_) => Err(err("spec.replicas", "not an integer")),
            }
        }
    }
}

/// The labels the Job controller adds to a Job's pod template (and its
/// selector) when the Job does not choose its own (`manualSelector`).
const JOB_GENERATED_LABELS: [&str; 4] = [
    "controller-uid",
    "job-name",
    "batch.kubernetes.io/controller-uid",
    "batch.kubernetes.io/job-name",
];

/// A Job's `spec.selector` and the template labels the API server generated
/// for it, kept when the template does not set them. Differs on purpose from
/// upstream (`pkg/controller/sync/dispatch/retain.go` keeps nothing for
/// Jobs): there, once a Job's status changed its resourceVersion, every
/// update was refused (`spec.selector: field is immutable`, KubeFed issue
/// #574), so a FederatedJob stayed failed for ever.
fn retain_job_selector(desired: &mut Value, live: &Value) {
    let live_spec = &live["spec"];
    let desired_spec = &desired["spec"];
    if desired_spec["manualSelector"] == Value::Bool(true)
        || !desired_spec["selector"].is_null()
        || live_spec["selector"].is_null()
    {
        return;
    }
    let live_labels = live_spec["template"]["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let Some(spec) = ensure_object(desired, "spec") else {
        return;
    };
    spec.insert("selector".into(), live_spec["selector"].clone());
    let Some(template) = ensure_object_in(spec, "template") else {
        return;
    };
    let Some(meta) = ensure_object_in(template, "metadata") else {
        return;
    };
    let Some(labels) = ensure_object_in(meta, "labels") else {
        return;
    };
    for key in JOB_GENERATED_LABELS {
        if let (false, Some(v)) = (labels.contains_key(key), live_labels.get(key)) {
            labels.insert(key.to_string(), v.clone());
        }
    }
}

/// `map[key]` as an object, created when absent; None when it is another type.
fn ensure_object_in<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    map.entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
}

fn retain_service(
    desired: &mut Value,
    live: &Value,
    err: &dyn Fn(&str, &str) -> RetainError,
) -> Result<(), RetainError> {
    let live_spec = live.get("spec");
    let get = |k: &str| live_spec.and_then(|s| s.get(k)).filter(|v| !v.is_null());
    let health = match get("healthCheckNodePort") {
        None => None,
        Some(v) => Some(
            v.as_i64()
                .ok_or_else(|| err("spec.healthCheckNodePort", "not an integer"))?,
        ),
    };
    let cluster_ip = match get("clusterIP") {
        None => None,
        Some(v) => Some(
            v.as_str()
                .ok_or_else(|| err("spec.clusterIP", "not a string"))?,
        ),
    };
    let cluster_ips = match get("clusterIPs") {
        None => None,
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => Some(a),
        Some(_) => return Err(err("spec.clusterIPs", "not a list of strings")),
    };
    let live_ports = match get("ports") {
        None => None,
        Some(Value::Array(a)) => Some(a),
        Some(_) => return Err(err("spec.ports", "not a list")),
    };
    let spec = ensure_object(desired, "spec")
        .ok_or_else(|| err("spec", "desired spec is not an object"))?;
    if let Some(h) = health.filter(|h| *h > 0) {
        spec.insert("healthCheckNodePort".into(), Value::from(h));
    }
    if let Some(ip) = cluster_ip.filter(|ip| !ip.is_empty()) {
        spec.insert("clusterIP".into(), Value::from(ip));
    }
    if let Some(ips) = cluster_ips.filter(|ips| !ips.is_empty()) {
        spec.insert("clusterIPs".into(), Value::Array(ips.clone()));
    }
    let Some(live_ports) = live_ports else {
        return Ok(());
    };
    // Upstream always writes spec.ports back once the live object has
    // ports, so a desired Service without ports gets `ports: []`.
    let mut ports = match spec.get("ports") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(_) => return Err(err("spec.ports", "desired ports is not a list")),
    };
    for port in &mut ports {
        let Some(port) = port.as_object_mut() else {
            return Err(err("spec.ports", "desired port is not an object"));
        };
        for live_port in live_ports {
            let Some(lp) = live_port.as_object() else {
                return Err(err("spec.ports", "live port is not an object"));
            };
            let same = ["name", "protocol", "port"]
                .iter()
                .all(|k| port.get(*k) == lp.get(*k));
            if same && let Some(np) = lp.get("nodePort") {
                port.insert("nodePort".into(), np.clone());
            }
        }
    }
    spec.insert("ports".into(), Value::Array(ports));
    Ok(())
}

/// Go's Set* helpers treat nil/empty strings, lists and maps as "remove".
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

fn ensure_object<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let map = obj.as_object_mut()?;
    let entry = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if entry.is_null() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(spec: Value) -> Value {
        json!({"kind": "Service", "metadata": {"name": "s"}, "spec": spec})
    }

    #[test]
    fn metadata_is_taken_from_the_live_object() {
        let mut desired = json!({"metadata": {"name": "x", "annotations": {"mine": "1"}, "finalizers": ["f"]}, "data": {}});
        let live = json!({"metadata": {"name": "x", "resourceVersion": "42",
            "annotations": {"theirs": "2"}, "finalizers": ["live/f"]}});
        retain_fields(&mut desired, &live, "ConfigMap", false).unwrap();
        assert_eq!(desired["metadata"]["resourceVersion"], "42");
        assert_eq!(desired["metadata"]["annotations"], json!({"theirs": "2"}));
        assert_eq!(desired["metadata"]["finalizers"], json!(["live/f"]));

        let mut desired =
            json!({"metadata": {"name": "x", "annotations": {"mine": "1"}, "finalizers": ["f"]}});
        retain_fields(
            &mut desired,
            &json!({"metadata": {"resourceVersion": "1"}}),
            "ConfigMap",
            false,
        )
        .unwrap();
        assert_eq!(
            desired["metadata"],
            json!({"name": "x", "resourceVersion": "1"})
        );
    }

    // Upstream dispatch/retain_test.go: replicas retention on/off.
    #[test]
    fn a_jobs_generated_selector_and_labels_are_kept() {
        let live = json!({"metadata": {"resourceVersion": "9"}, "spec": {
            "selector": {"matchLabels": {"controller-uid": "u-1"}},
            "template": {"metadata": {"labels": {"controller-uid": "u-1", "job-name": "batch", "app": "w"}},
                "spec": {"restartPolicy": "Never"}}}});
        let mut desired = json!({"metadata": {}, "spec": {"template": {
            "metadata": {"labels": {"app": "w"}}, "spec": {"restartPolicy": "Never"}}}});
        retain_fields(&mut desired, &live, "Job", false).unwrap();
        assert_eq!(desired["spec"]["selector"], live["spec"]["selector"]);
        assert_eq!(desired["spec"]["template"], live["spec"]["template"]);
        // A template without labels gets them too.
        let mut bare = json!({"spec": {"template": {"spec": {}}}});
        retain_fields(&mut bare, &live, "Job", false).unwrap();
        assert_eq!(
            bare["spec"]["template"]["metadata"]["labels"]["job-name"],
            "batch"
        );
        // A Job choosing its own selector keeps its own.
        let mut manual = json!({"spec": {"manualSelector": true,
            "selector": {"matchLabels": {"app": "w"}},
            "template": {"metadata": {"labels": {"app": "w"}}}}});
        let before = manual.clone();
        retain_fields(&mut manual, &live, "Job", false).unwrap();
        assert_eq!(manual["spec"], before["spec"]);
    }

    #[test]
    fn replicas_are_kept_only_when_asked() {
        let live = json!({"metadata": {}, "spec": {"replicas": 7}});
        for (retain, want) in [(true, 7), (false, 2)] {
            let mut desired = json!({"metadata": {}, "spec": {"replicas": 2}});
            retain_fields(&mut desired, &live, "Deployment", retain).unwrap();
            assert_eq!(desired["spec"]["replicas"], want, "retain={retain}");
        }
        let mut desired = json!({"metadata": {}, "spec": {"replicas": 2}});
        retain_fields(&mut desired, &json!({"spec": {}}), "Deployment", true).unwrap();
        assert_eq!(desired["spec"]["replicas"], 2, "nothing live to keep");
        let mut desired = json!({"metadata": {}, "spec": {"replicas": 2}});
        retain_fields(
            &mut desired,
            &json!({"spec": {"replicas": 7}}),
            "Service",
            true,
        )
        .unwrap();
        assert_eq!(desired["spec"]["replicas"], 2, "not applied to Services");
    }

    // Upstream dispatch/retain_test.go: healthCheckNodePort cases.
    #[test]
    fn health_check_node_port() {
        let cases: Vec<(Value, Result<Option<Value>, ()>)> = vec![
            (json!({}), Ok(None)),
            (json!({"healthCheckNodePort": "invalid string"}), Err(())),
            (json!({"healthCheckNodePort": 0}), Ok(None)),
            (json!({"healthCheckNodePort": 1000}), Ok(Some(json!(1000)))),
        ];
        for (live_spec, want) in cases {
            let mut desired = svc(json!({}));
            let result = retain_fields(&mut desired, &svc(live_spec.clone()), "Service", false);
            match want {
                Ok(v) => {
                    result.unwrap();
                    assert_eq!(
                        desired["spec"].get("healthCheckNodePort"),
                        v.as_ref(),
                        "{live_spec}"
                    );
                }
                Err(()) => {
                    let e = result.unwrap_err().to_string();
                    assert!(e.contains("healthCheckNodePort"), "{e}");
                }
            }
        }
    }

    // Upstream dispatch/retain_test.go: clusterIP / clusterIPs cases.
    #[test]
    fn cluster_ips() {
        type Ips = Result<(Option<Value>, Option<Value>), ()>;
        let cases: Vec<(Value, Ips)> = vec![
            (json!({}), Ok((None, None))),
            (json!({"clusterIP": -1000}), Err(())),
            (
                json!({"clusterIP": "1.2.3.4"}),
                Ok((Some(json!("1.2.3.4")), None)),
            ),
            (
                json!({"clusterIPs": ["1.2.3.4"]}),
                Ok((None, Some(json!(["1.2.3.4"])))),
            ),
            (
                json!({"clusterIP": "1.2.3.4", "clusterIPs": ["1.2.3.4", "fd00::1"]}),
                Ok((Some(json!("1.2.3.4")), Some(json!(["1.2.3.4", "fd00::1"])))),
            ),
            (json!({"clusterIP": ""}), Ok((None, None))),
        ];
        for (live_spec, want) in cases {
            let mut desired = svc(json!({}));
            let result = retain_fields(&mut desired, &svc(live_spec.clone()), "Service", false);
            match want {
                Ok((ip, ips)) => {
                    result.unwrap();
                    assert_eq!(desired["spec"].get("clusterIP"), ip.as_ref(), "{live_spec}");
                    assert_eq!(
                        desired["spec"].get("clusterIPs"),
                        ips.as_ref(),
                        "{live_spec}"
                    );
                }
                Err(()) => assert!(result.is_err(), "{live_spec}"),
            }
        }
    }

    #[test]
    fn node_ports_follow_matching_ports() {
        let live = svc(json!({"ports": [
            {"name": "http", "protocol": "TCP", "port": 80, "nodePort": 30080},
            {"name": "https", "protocol": "TCP", "port": 443, "nodePort": 30443}]}));
        let mut desired = svc(json!({"ports": [
            {"name": "http", "protocol": "TCP", "port": 80},
            {"name": "https", "protocol": "TCP", "port": 8443},
            {"name": "dns", "protocol": "UDP", "port": 53}]}));
        retain_fields(&mut desired, &live, "Service", false).unwrap();
        assert_eq!(desired["spec"]["ports"][0]["nodePort"], 30080);
        assert!(
            desired["spec"]["ports"][1].get("nodePort").is_none(),
            "port changed"
        );
        assert!(desired["spec"]["ports"][2].get("nodePort").is_none());
        let mut no_ports = svc(json!({}));
        retain_fields(&mut no_ports, &live, "Service", false).unwrap();
        assert_eq!(no_ports["spec"]["ports"], json!([]), "upstream quirk");
    }

    #[test]
    fn service_account_secrets() {
        let live = json!({"metadata": {}, "secrets": [{"name": "tok"}]});
        for desired_secrets in [None, Some(json!([]))] {
            let mut desired = json!({"metadata": {}});
            if let Some(s) = desired_secrets {
                desired["secrets"] = s;
            }
            retain_fields(&mut desired, &live, "ServiceAccount", true).unwrap();
            assert_eq!(desired["secrets"], json!([{"name": "tok"}]));
        }
        let mut desired = json!({"metadata": {}, "secrets": [{"name": "mine"}]});
        retain_fields(&mut desired, &live, "ServiceAccount", true).unwrap();
        assert_eq!(desired["secrets"], json!([{"name": "mine"}]));
        let mut desired = json!({"metadata": {}});
        retain_fields(
            &mut desired,
            &json!({"secrets": []}),
            "ServiceAccount",
            true,
        )
        .unwrap();
        assert!(
            desired.get("secrets").is_none(),
            "an empty live list is not copied"
        );
    }
}
