//! Generating a federated type: its `FederatedTypeConfig` and its
//! `Federated<Kind>` CRD, from the target API resource and (optionally) the
//! target's schema.
//!
//! The CRD's shape is KubeFed's: `template`, `placement` (clusters,
//! clusterSelector), `overrides`, `retainReplicas` when the target has an
//! int32 `spec.replicas`, and the status KubeFed writes. Fixed on purpose:
//! `spec.template` is always there (upstream dropped it for targets without
//! a schema, so the API server pruned every template). Beyond upstream:
//! [`TemplateSchema::Embed`] puts the target's real structural schema under
//! `spec.template`, so a bad template is refused at `kubectl apply` time.

use crate::core::lookup::ServedResource;
use serde_json::{Map, Value, json};

/// Default group of generated federated types.
pub const DEFAULT_FEDERATED_GROUP: &str = "types.kubefed.io";

/// What `spec.template` of the federated CRD says about its content.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TemplateSchema {
    /// Any object (`x-kubernetes-preserve-unknown-fields`), as KubeFed.
    #[default]
    Preserve,
    /// The target type's own structural schema.
    Embed,
}

/// The federated type's names, derived from the target as KubeFed does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FederatedNames {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
}

/// The status a FederatedTypeConfig gets from a running controller
/// (`pkg/controller/federatedtypeconfig/controller.go`): its generation
/// observed, the propagation controller `Running` while the type is
/// propagated, and the status controller `Running` while FederatedService
/// Statuses are written for it (`Settings::writes_service_status`). `None`
/// when `current` already says it.
pub fn ftc_status(
    current: &serde_json::Value,
    generation: i64,
    propagating: bool,
    status_controller: bool,
) -> Option<serde_json::Value> {
    let running = |on: bool| if on { "Running" } else { "NotRunning" };
    let want = serde_json::json!({
        "observedGeneration": generation,
        "propagationController": running(propagating),
        "statusController": running(propagating && status_controller),
    });
    (current != &want).then_some(want)
}

/// `FederatedDeployment` for `Deployment`, as `kubefedctl enable` names it.
pub fn federated_kind(target_kind: &str) -> String {
    format!("Federated{target_kind}")
}

/// `federateddeployments` for `deployments`, as `kubefedctl enable` names it.
pub fn federated_plural(target_plural: &str) -> String {
    format!("federated{target_plural}")
}

impl FederatedNames {
    pub fn new(target: &ServedResource, group: &str, version: &str) -> FederatedNames {
        FederatedNames {
            group: group.to_string(),
            version: version.to_string(),
            kind: federated_kind(&target.kind),
            plural: federated_plural(&target.plural),
            // A FederatedNamespace lives in the namespace it federates.
            namespaced: target.namespaced
                || (target.group.is_empty() && target.plural == "namespaces"),
        }
    }

    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }
}

fn scope(namespaced: bool) -> &'static str {
    if namespaced { "Namespaced" } else { "Cluster" }
}

/// The FederatedTypeConfig (no namespace: the caller places it).
pub fn federated_type_config(target: &ServedResource, fed: &FederatedNames) -> Value {
    let mut target_type = json!({
        "version": target.version, "kind": target.kind,
        "pluralName": target.plural, "scope": scope(target.namespaced)
    });
    if !target.group.is_empty() {
        target_type["group"] = json!(target.group);
    }
    json!({
        "apiVersion": "core.kubefed.io/v1beta1",
        "kind": "FederatedTypeConfig",
        "metadata": {"name": target.qualified_name()},
        "spec": {
            "targetType": target_type,
            "federatedType": {
                "group": fed.group, "version": fed.version, "kind": fed.kind,
                "pluralName": fed.plural, "scope": scope(fed.namespaced)
            },
            "propagation": "Enabled"
        }
    })
}

/// The `Federated<Kind>` CRD. `target_schema` is the target's structural
/// schema (from [`schema_from_openapi`] or [`schema_from_crd`]), if known.
pub fn federated_crd(
    target: &ServedResource,
    fed: &FederatedNames,
    target_schema: Option<&Value>,
    mode: TemplateSchema,
) -> Value {
    let template = match (mode, target_schema) {
        (TemplateSchema::Embed, Some(schema)) => template_schema(schema),
        _ => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    };
    let mut spec_props = json!({
        "placement": placement_schema(),
        "overrides": overrides_schema(),
        "template": template,
    });
    if target_schema.is_some_and(has_int32_replicas) {
        spec_props["retainReplicas"] = json!({"type": "boolean"});
    }
    let mut names = json!({"kind": fed.kind, "plural": fed.plural});
    if !target.short_names.is_empty() {
        names["shortNames"] = json!(
            target
                .short_names
                .iter()
                .map(|s| format!("f{s}"))
                .collect::<Vec<_>>()
        );
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": fed.crd_name()},
        "spec": {
            "group": fed.group,
            "names": names,
            "scope": scope(fed.namespaced),
            "versions": [{
                "name": fed.version, "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": {"type": "object", "properties": spec_props},
                        "status": status_schema()
                    },
                    "required": ["spec"]
                }}
            }]
        }
    })
}

fn placement_schema() -> Value {
    json!({"type": "object", "properties": {
        "clusters": {"type": "array", "items": {
            "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]
        }},
        "clusterSelector": {"type": "object", "properties": {
            "matchExpressions": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "key": {"type": "string"}, "operator": {"type": "string"},
                    "values": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["key", "operator"]
            }},
            "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}
        }}
    }})
}

fn overrides_schema() -> Value {
    json!({"type": "array", "items": {"type": "object", "properties": {
        "clusterName": {"type": "string"},
        "clusterOverrides": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "op": {"type": "string", "pattern": "^(add|remove|replace)?$"},
                "path": {"type": "string"},
                "value": {"x-kubernetes-preserve-unknown-fields": true}
            },
            "required": ["path"]
        }}
    }}})
}

fn status_schema() -> Value {
    json!({"type": "object", "properties": {
        "conditions": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "type": {"type": "string"}, "status": {"type": "string"}, "reason": {"type": "string"},
                "lastUpdateTime": {"type": "string", "format": "date-time"},
                "lastTransitionTime": {"type": "string", "format": "date-time"}
            },
            "required": ["type", "status"]
        }},
        "clusters": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "name": {"type": "string"}, "status": {"type": "string"},
                "remoteStatus": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            },
            "required": ["name"]
        }},
        "observedGeneration": {"type": "integer", "format": "int64"}
    }})
}

/// The template's schema: the target's, without `status`, with free
/// metadata (labels and the like) and nothing required at the top.
fn template_schema(target: &Value) -> Value {
    let mut t = target.clone();
    if let Some(obj) = t.as_object_mut() {
        obj.remove("required");
        if let Some(Value::Object(props)) = obj.get_mut("properties") {
            props.remove("status");
            props.insert(
                "metadata".into(),
                json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            );
        }
        obj.insert("type".into(), json!("object"));
    }
    t
}

/// True when the schema has `spec.replicas` of type integer, format int32.
pub fn has_int32_replicas(schema: &Value) -> bool {
    let r = &schema["properties"]["spec"]["properties"]["replicas"];
    r["type"] == "integer" && r["format"] == "int32"
}

/// The schema of `version` in a CRD (falling back to its first version),
/// without `status`.
pub fn schema_from_crd(crd: &Value, version: &str) -> Option<Value> {
    let versions = crd["spec"]["versions"].as_array()?;
    let v = versions
        .iter()
        .find(|v| v["name"] == version)
        .or_else(|| versions.first())?;
    let mut schema = v["schema"]["openAPIV3Schema"].clone();
    if schema.is_null() {
        return None;
    }
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.remove("status");
    }
    Some(schema)
}

/// The structural schema of `group/version, kind` from an OpenAPI document:
/// v2 (`definitions`, what Kubernetes 1.20 serves) or v3
/// (`components.schemas`). `None` when the document has no such model.
pub fn schema_from_openapi(doc: &Value, group: &str, version: &str, kind: &str) -> Option<Value> {
    let (defs, prefix) = match doc.get("definitions") {
        Some(Value::Object(d)) => (d, "#/definitions/"),
        _ => match &doc["components"]["schemas"] {
            Value::Object(d) => (d, "#/components/schemas/"),
            _ => return None,
        },
    };
    let (name, model) = defs.iter().find(|(_, m)| {
        m["x-kubernetes-group-version-kind"]
            .as_array()
            .is_some_and(|gvks| {
                gvks.iter()
                    .any(|g| g["group"] == group && g["version"] == version && g["kind"] == kind)
            })
    })?;
    let conv = Converter { defs, prefix };
    let mut stack = vec![name.clone()];
    let mut schema = conv.convert(model, &mut stack);
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.remove("status");
    }
    Some(schema)
}

/// OpenAPI models → structural schemas that an API server accepts in a CRD.
struct Converter<'a> {
    defs: &'a Map<String, Value>,
    prefix: &'a str,
}

fn preserve() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

impl Converter<'_> {
    fn convert(&self, s: &Value, stack: &mut Vec<String>) -> Value {
        // v3 wraps references as allOf: [{$ref}] to attach defaults.
        if let Some([only]) = s["allOf"].as_array().map(Vec::as_slice) {
            return self.convert(only, stack);
        }
        if let Some(r) = s["$ref"].as_str() {
            let name = r.trim_start_matches(self.prefix);
            return self.reference(name, stack);
        }
        if s["format"] == "int-or-string" || s["x-kubernetes-int-or-string"] == true {
            return json!({"x-kubernetes-int-or-string": true});
        }
        match s["type"].as_str() {
            Some("array") => json!({"type": "array", "items": self.convert(&s["items"], stack)}),
            Some("object") | None => {
                if let Some(Value::Object(props)) = s.get("properties") {
                    let mut out = Map::new();
                    for (k, v) in props {
                        out.insert(k.clone(), self.convert(v, stack));
                    }
                    let mut obj = json!({"type": "object", "properties": out});
                    if let Some(req) = s
                        .get("required")
                        .filter(|r| r.as_array().is_some_and(|a| !a.is_empty()))
                    {
                        obj["required"] = req.clone();
                    }
                    obj
                } else if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
                    json!({"type": "object", "additionalProperties": self.convert(ap, stack)})
                } else {
                    preserve()
                }
            }
            Some(t) => {
                let mut out = json!({"type": t});
                if let Some(f) = s["format"].as_str() {
                    out["format"] = json!(f);
                }
                if let Some(e) = s.get("enum") {
                    out["enum"] = e.clone();
                }
                out
            }
        }
    }

    fn reference(&self, name: &str, stack: &mut Vec<String>) -> Value {
        match name {
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
            | "io.k8s.apimachinery.pkg.api.resource.Quantity" => {
                return json!({"x-kubernetes-int-or-string": true});
            }
            "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
            | "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime" => {
                return json!({"type": "string", "format": "date-time"});
            }
            _ => {}
        }
        // Recursive models (JSONSchemaProps) cannot be unrolled.
        if stack.iter().any(|s| s == name) {
            return preserve();
        }
        let Some(model) = self.defs.get(name) else {
            return preserve();
        };
        stack.push(name.to_string());
        let out = self.convert(model, stack);
        stack.pop();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_type_configs_status_says_whether_it_is_propagated() {
        let running = ftc_status(&serde_json::Value::Null, 3, true, false).unwrap();
        assert_eq!(running["propagationController"], "Running");
        assert_eq!(running["observedGeneration"], 3);
        assert_eq!(
            ftc_status(&running, 3, true, false),
            None,
            "unchanged: no write"
        );
        let services = ftc_status(&running, 3, true, true).unwrap();
        assert_eq!(services["statusController"], "Running");
        let stopped = ftc_status(&services, 4, false, true).unwrap();
        assert_eq!(stopped["statusController"], "NotRunning");
        assert_eq!(stopped["propagationController"], "NotRunning");
        assert_eq!(stopped["statusController"], "NotRunning");
    }

    fn deployment() -> ServedResource {
        ServedResource {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            plural: "deployments".into(),
            singular: "deployment".into(),
            short_names: vec!["deploy".into()],
            namespaced: true,
            preferred: true,
            verbs: vec![],
        }
    }

    fn namespaces() -> ServedResource {
        ServedResource {
            version: "v1".into(),
            kind: "Namespace".into(),
            plural: "namespaces".into(),
            singular: "namespace".into(),
            short_names: vec!["ns".into()],
            namespaced: false,
            ..Default::default()
        }
    }

    /// A tiny OpenAPI v2 document: a Deployment-like model with refs,
    /// int-or-string, a map, a Time, and a recursive model.
    fn v2_doc() -> Value {
        json!({"definitions": {
            "io.k8s.api.apps.v1.Deployment": {
                "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Deployment"}],
                "properties": {
                    "apiVersion": {"type": "string"},
                    "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
                    "spec": {"$ref": "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"},
                    "status": {"type": "object"}
                }
            },
            "io.k8s.api.apps.v1.DeploymentSpec": {
                "required": ["selector"],
                "properties": {
                    "replicas": {"type": "integer", "format": "int32"},
                    "maxSurge": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "started": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Time"},
                    "props": {"$ref": "#/definitions/Props"},
                    "ports": {"type": "array", "items": {"properties": {"port": {"type": "integer", "format": "int32"}}, "required": ["port"]}}
                }
            },
            "Props": {"properties": {"not": {"$ref": "#/definitions/Props"}, "title": {"type": "string"}}},
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"properties": {"name": {"type": "string"}}},
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"}
        }})
    }

    #[test]
    fn type_config_follows_kubefed() {
        let d = deployment();
        let fed = FederatedNames::new(&d, "types.kubefed.io", "v1beta1");
        let ftc = federated_type_config(&d, &fed);
        assert_eq!(ftc["metadata"]["name"], "deployments.apps");
        assert_eq!(
            ftc["spec"]["targetType"],
            json!({"group": "apps", "version": "v1", "kind": "Deployment", "pluralName": "deployments", "scope": "Namespaced"})
        );
        assert_eq!(ftc["spec"]["federatedType"]["kind"], "FederatedDeployment");
        assert_eq!(
            ftc["spec"]["federatedType"]["pluralName"],
            "federateddeployments"
        );
        assert_eq!(ftc["spec"]["propagation"], "Enabled");

        let ns = namespaces();
        let fed_ns = FederatedNames::new(&ns, "types.kubefed.io", "v1beta1");
        let ftc = federated_type_config(&ns, &fed_ns);
        assert!(
            ftc["spec"]["targetType"].get("group").is_none(),
            "core types have no group key"
        );
        assert_eq!(ftc["spec"]["targetType"]["scope"], "Cluster");
        assert_eq!(
            ftc["spec"]["federatedType"]["scope"], "Namespaced",
            "FederatedNamespace is namespaced"
        );
    }

    #[test]
    fn crd_has_kubefeds_shape_and_always_a_template() {
        let d = deployment();
        let fed = FederatedNames::new(&d, "types.kubefed.io", "v1beta1");
        let crd = federated_crd(&d, &fed, None, TemplateSchema::Preserve);
        assert_eq!(
            crd["metadata"]["name"],
            "federateddeployments.types.kubefed.io"
        );
        assert_eq!(crd["spec"]["names"]["shortNames"], json!(["fdeploy"]));
        let v = &crd["spec"]["versions"][0];
        assert_eq!(v["subresources"]["status"], json!({}));
        let spec = &v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert_eq!(
            spec["template"]["x-kubernetes-preserve-unknown-fields"], true,
            "fix of upstream's pruning"
        );
        assert!(
            spec.get("retainReplicas").is_none(),
            "unknown schema: no retainReplicas"
        );
        assert_eq!(
            spec["overrides"]["items"]["properties"]["clusterOverrides"]["items"]["required"],
            json!(["path"])
        );
        let with_schema = schema_from_openapi(&v2_doc(), "apps", "v1", "Deployment").unwrap();
        let crd = federated_crd(&d, &fed, Some(&with_schema), TemplateSchema::Preserve);
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert_eq!(spec["retainReplicas"], json!({"type": "boolean"}));
        assert_eq!(
            spec["template"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
    }

    #[test]
    fn openapi_v2_models_become_structural_schemas() {
        let s = schema_from_openapi(&v2_doc(), "apps", "v1", "Deployment").unwrap();
        assert!(s["properties"].get("status").is_none());
        let spec = &s["properties"]["spec"];
        assert_eq!(spec["required"], json!(["selector"]));
        assert_eq!(
            spec["properties"]["replicas"],
            json!({"type": "integer", "format": "int32"})
        );
        assert_eq!(
            spec["properties"]["maxSurge"],
            json!({"x-kubernetes-int-or-string": true})
        );
        assert_eq!(
            spec["properties"]["labels"]["additionalProperties"],
            json!({"type": "string"})
        );
        assert_eq!(spec["properties"]["started"]["format"], "date-time");
        assert_eq!(
            spec["properties"]["ports"]["items"]["required"],
            json!(["port"])
        );
        let props = &spec["properties"]["props"];
        assert_eq!(props["properties"]["title"]["type"], "string");
        assert_eq!(
            props["properties"]["not"]["x-kubernetes-preserve-unknown-fields"], true,
            "recursion stops"
        );
        assert!(has_int32_replicas(&s));
        assert!(schema_from_openapi(&v2_doc(), "apps", "v1", "StatefulSet").is_none());
    }

    #[test]
    fn openapi_v3_documents_work_too() {
        let v2 = v2_doc();
        let text = v2["definitions"]
            .to_string()
            .replace("#/definitions/", "#/components/schemas/");
        let mut schemas: Value = serde_json::from_str(&text).unwrap();
        // v3 wraps references in allOf to attach defaults.
        schemas["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"] = json!({"allOf": [{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}], "default": {}});
        let v3 = json!({"openapi": "3.0.0", "components": {"schemas": schemas}});
        assert_eq!(
            schema_from_openapi(&v3, "apps", "v1", "Deployment").unwrap(),
            schema_from_openapi(&v2, "apps", "v1", "Deployment").unwrap()
        );
    }

    #[test]
    fn embed_puts_the_target_schema_under_template() {
        let d = deployment();
        let fed = FederatedNames::new(&d, "types.kubefed.io", "v1beta1");
        let s = schema_from_openapi(&v2_doc(), "apps", "v1", "Deployment").unwrap();
        let crd = federated_crd(&d, &fed, Some(&s), TemplateSchema::Embed);
        let t = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["template"];
        assert_eq!(
            t["properties"]["spec"]["properties"]["replicas"]["format"],
            "int32"
        );
        assert_eq!(
            t["properties"]["metadata"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
        assert!(t.get("x-kubernetes-preserve-unknown-fields").is_none());
    }

    #[test]
    fn crd_schemas_pick_the_requested_version() {
        let crd = json!({"spec": {"versions": [
            {"name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "properties": {"a": {"type": "string"}, "status": {}}}}},
            {"name": "v2", "schema": {"openAPIV3Schema": {"type": "object", "properties": {"b": {"type": "string"}}}}}
        ]}});
        let v2 = schema_from_crd(&crd, "v2").unwrap();
        assert!(v2["properties"].get("b").is_some());
        let v1 = schema_from_crd(&crd, "v1").unwrap();
        assert!(v1["properties"].get("status").is_none());
        assert!(schema_from_crd(&json!({"spec": {"versions": [{"name": "v1"}]}}), "v1").is_none());
    }
}
