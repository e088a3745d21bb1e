//! A target object → its `Federated<Kind>` object (what `federate` writes).
//!
//! As KubeFed: the template is the object without apiVersion, kind, status
//! and server metadata (labels stay); what a member must allocate itself is
//! scrubbed (Service clusterIP(s), nodePorts and healthCheckNodePort,
//! ServiceAccount secrets, Namespace finalizers); annotations do not travel
//! (a warning says which). Placement: all clusters unless told otherwise.

use serde_json::{Map, Value, json};

/// Where the federated object goes: its type's group/version/kind and scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FederatedType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
}

/// `spec.placement` of a new federated object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// `clusterSelector: {matchLabels: {}}`: every cluster (KubeFed's default).
    #[default]
    AllClusters,
    /// `clusters: [{name}...]`.
    Clusters(Vec<String>),
    /// `clusterSelector: {matchLabels: {...}}`.
    Labels(Vec<(String, String)>),
}

impl Placement {
    pub fn to_json(&self) -> Value {
        match self {
            Placement::AllClusters => json!({"clusterSelector": {"matchLabels": {}}}),
            Placement::Clusters(names) => {
                json!({"clusters": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()})
            }
            Placement::Labels(pairs) => {
                let labels: Map<String, Value> =
                    pairs.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                json!({"clusterSelector": {"matchLabels": labels}})
            }
        }
    }
}

/// The federated object, and warnings about what did not travel.
pub fn federated_object(
    target: &Value,
    fed: &FederatedType,
    placement: &Placement,
) -> (Value, Vec<String>) {
    let kind = target["kind"].as_str().unwrap_or("");
    let name = target["metadata"]["name"].as_str().unwrap_or("");
    let namespace = target["metadata"]["namespace"].as_str().unwrap_or("");
    let qualified = if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    };
    let mut warnings = Vec::new();

    let mut template = target.as_object().cloned().unwrap_or_default();
    for k in ["apiVersion", "kind", "status", "metadata"] {
        template.remove(k);
    }
    if let Some(Value::Object(labels)) = target["metadata"].get("labels")
        && !labels.is_empty()
    {
        template.insert("metadata".into(), json!({"labels": labels}));
    }
    if let Some(Value::Object(ann)) = target["metadata"].get("annotations") {
        let mut keys: Vec<&String> = ann.keys().filter(|k| !is_server_annotation(k)).collect();
        keys.sort();
        if !keys.is_empty() {
            let keys: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
            warnings.push(format!(
                "annotations of {kind} {qualified:?} do not travel to the template (use an override): {}",
                keys.join(", ")
            ));
        }
    }
    scrub(kind, &mut template);

    let fed_namespace = if !fed.namespaced {
        None
    } else if kind == "Namespace" {
        Some(name)
    } else {
        Some(namespace)
    };
    let mut metadata = json!({"name": name});
    if let Some(ns) = fed_namespace.filter(|n| !n.is_empty()) {
        metadata["namespace"] = json!(ns);
    }
    let obj = json!({
        "apiVersion": format!("{}/{}", fed.group, fed.version),
        "kind": fed.kind,
        "metadata": metadata,
        "spec": {"template": Value::Object(template), "placement": placement.to_json()}
    });
    (obj, warnings)
}

/// Annotations servers and kubectl write, not worth a warning.
fn is_server_annotation(key: &str) -> bool {
    key == "kubectl.kubernetes.io/last-applied-configuration"
        || key.starts_with("deployment.kubernetes.io/")
        || key.starts_with("kubernetes.io/service-account")
}

/// Removes what each member must allocate or own itself.
fn scrub(kind: &str, template: &mut Map<String, Value>) {
    match kind {
        "Namespace" => {
            if let Some(Value::Object(spec)) = template.get_mut("spec") {
                spec.remove("finalizers");
            }
        }
        "ServiceAccount" => {
            template.remove("secrets");
        }
        "Service" => {
            if let Some(Value::Object(spec)) = template.get_mut("spec") {
                spec.remove("clusterIP");
                spec.remove("clusterIPs");
                spec.remove("healthCheckNodePort");
                if let Some(Value::Array(ports)) = spec.get_mut("ports") {
                    for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                        p.remove("nodePort");
                    }
                }
            }
        }
        _ => {}
    }
    // An empty spec (a Namespace without finalizers) says nothing.
    if template
        .get("spec")
        .is_some_and(|s| s.as_object().is_some_and(Map::is_empty))
    {
        template.remove("spec");
    }
}

/// Parses `a,b,c` cluster names and `k=v,k2=v2` selectors from flags.
pub fn parse_labels(text: &str) -> Result<Vec<(String, String)>, String> {
    text.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                Ok((k.trim().to_string(), v.trim().to_string()))
            }
            _ => Err(format!("invalid label {pair:?}: expected key=value")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fed(kind: &str, namespaced: bool) -> FederatedType {
        FederatedType {
            group: "types.kubefed.io".into(),
            version: "v1beta1".into(),
            kind: format!("Federated{kind}"),
            plural: format!("federated{}s", kind.to_lowercase()),
            namespaced,
        }
    }

    #[test]
    fn service_loses_what_members_allocate() {
        let svc = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "demo", "uid": "u", "resourceVersion": "5",
                         "labels": {"app": "web"}, "annotations": {"team": "a"}},
            "spec": {"type": "NodePort", "clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"],
                     "ports": [{"port": 80, "nodePort": 30080}], "selector": {"app": "web"}},
            "status": {"loadBalancer": {}}
        });
        let (obj, warnings) =
            federated_object(&svc, &fed("Service", true), &Placement::AllClusters);
        assert_eq!(obj["apiVersion"], "types.kubefed.io/v1beta1");
        assert_eq!(obj["kind"], "FederatedService");
        assert_eq!(obj["metadata"], json!({"name": "web", "namespace": "demo"}));
        assert_eq!(
            obj["spec"]["template"],
            json!({"metadata": {"labels": {"app": "web"}},
                   "spec": {"type": "NodePort", "ports": [{"port": 80}], "selector": {"app": "web"}}})
        );
        assert_eq!(
            obj["spec"]["placement"],
            json!({"clusterSelector": {"matchLabels": {}}})
        );
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("Service \"demo/web\"") && warnings[0].ends_with(": team"),
            "{warnings:?}"
        );
    }

    #[test]
    fn namespaces_and_service_accounts_are_scrubbed() {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}, "spec": {"finalizers": ["kubernetes"]}});
        let (obj, _) = federated_object(&ns, &fed("Namespace", true), &Placement::AllClusters);
        assert_eq!(
            obj["metadata"],
            json!({"name": "demo", "namespace": "demo"}),
            "FederatedNamespace lives in itself"
        );
        assert_eq!(obj["spec"]["template"], json!({}));
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bot", "namespace": "d"},
                        "secrets": [{"name": "bot-token-x"}], "automountServiceAccountToken": false});
        let (obj, _) = federated_object(&sa, &fed("ServiceAccount", true), &Placement::AllClusters);
        assert_eq!(
            obj["spec"]["template"],
            json!({"automountServiceAccountToken": false})
        );
    }

    #[test]
    fn placement_choices_and_cluster_scoped_objects() {
        let cr = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}, "rules": []});
        let (obj, w) = federated_object(
            &cr,
            &fed("ClusterRole", false),
            &Placement::Clusters(vec!["a".into(), "b".into()]),
        );
        assert!(obj["metadata"].get("namespace").is_none());
        assert_eq!(
            obj["spec"]["placement"],
            json!({"clusters": [{"name": "a"}, {"name": "b"}]})
        );
        assert!(w.is_empty());
        let labels = parse_labels("region=eu, tier=web").unwrap();
        assert_eq!(
            Placement::Labels(labels).to_json(),
            json!({"clusterSelector": {"matchLabels": {"region": "eu", "tier": "web"}}})
        );
        assert!(parse_labels("novalue").is_err());
    }
}
