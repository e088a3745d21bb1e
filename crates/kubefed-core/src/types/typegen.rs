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

use crate::types::lookup::ServedResource;
use serde_json::{Map, Value, json};

/// Default group of generated federated types.
pub const DEFAULT_FEDERATED_GROUP: &str = "types.kubefed.io";

/// What `spec.template` of the federated CRD says about its content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
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
        "clusterSelector": label_selector_schema()
    }})
}

/// A `metav1.LabelSelector` as KubeFed's placement schema spells it.
fn label_selector_schema() -> Value {
    json!({"type": "object", "properties": {
        "matchExpressions": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "key": {"type": "string"}, "operator": {"type": "string"},
                "values": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["key", "operator"]
        }},
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}
    }})
}

/// KubeFed's overrides, and `clusterSelector` (ours: an entry may choose
/// clusters by label instead of naming one; KubeFed's controller ignores
/// it, docs/kubefed-differences.md).
fn overrides_schema() -> Value {
    json!({"type": "array", "items": {"type": "object", "properties": {
        "clusterName": {"type": "string"},
        "clusterSelector": label_selector_schema(),
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

/// A target's schema for `spec.template`, and what was left out of it.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetSchema {
    pub schema: Value,
    /// One line per validation rule left out, naming it and saying why.
    pub dropped: Vec<String>,
}

impl TargetSchema {
    fn new(mut schema: Value) -> TargetSchema {
        if let Some(Value::Object(props)) = schema.get_mut("properties") {
            props.remove("status");
        }
        let dropped = drop_rules_outside_template(&mut schema);
        TargetSchema { schema, dropped }
    }
}

/// The schema of `version` in a CRD (falling back to its first version),
/// without `status`. Kept as the CRD has it — every keyword, its
/// `x-kubernetes-validations` included — since the host already accepted
/// it: only the rules [`drop_rules_outside_template`] names go.
pub fn schema_from_crd(crd: &Value, version: &str) -> Option<TargetSchema> {
    let versions = crd["spec"]["versions"].as_array()?;
    let v = versions
        .iter()
        .find(|v| v["name"] == version)
        .or_else(|| versions.first())?;
    let schema = v["schema"]["openAPIV3Schema"].clone();
    if schema.is_null() {
        return None;
    }
    Some(TargetSchema::new(schema))
}

/// What the object's root has that its template does not: the template
/// carries no name, namespace or status of its own, and usually no
/// `apiVersion`/`kind` either.
const NOT_IN_TEMPLATE: [&str; 4] = ["metadata", "status", "apiVersion", "kind"];

/// Takes out the root's validation rules that cannot hold inside a
/// federated template and says why, one line each.
///
/// A rule's `self` is the node it sits on, so only the root's rules can
/// read what a template lacks ([`NOT_IN_TEMPLATE`]); a root rule whose
/// `rule`, `messageExpression` or `fieldPath` names one of those as a word
/// goes (a string literal that happens to name one too: simple beats
/// clever, and the member still checks it). Rules deeper down stay.
///
/// Transition rules (`oldSelf`) stay: the host then compares the new
/// template with the previous one, as each member compares its object with
/// the update the template becomes, so an update every member would refuse
/// (`self == oldSelf`: immutable) is refused once, at the host. The schema
/// moves under `spec.template` through object properties only, so a rule
/// the host accepted where it was can still correlate old and new there.
pub fn drop_rules_outside_template(schema: &mut Value) -> Vec<String> {
    let Some(Value::Array(rules)) = schema.get_mut("x-kubernetes-validations") else {
        return Vec::new();
    };
    let mut dropped = Vec::new();
    rules.retain(|r| {
        let texts = ["rule", "messageExpression", "fieldPath"].map(|k| r[k].as_str().unwrap_or(""));
        let Some(word) = NOT_IN_TEMPLATE
            .into_iter()
            .find(|w| texts.iter().any(|t| names_word(t, w)))
        else {
            return true;
        };
        dropped.push(format!(
            "rule {:?} at the root: it reads {word}, which a template does not carry",
            r["rule"].as_str().unwrap_or("")
        ));
        false
    });
    if rules.is_empty() {
        schema
            .as_object_mut()
            .map(|o| o.remove("x-kubernetes-validations"));
    }
    dropped
}

/// `word` occurs in `text` as a whole identifier.
fn names_word(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).any(|(i, _)| {
        !text[..i].chars().next_back().is_some_and(ident)
            && !text[i + word.len()..].chars().next().is_some_and(ident)
    })
}

/// The structural schema of `group/version, kind` from an OpenAPI document:
/// v3 (`components.schemas`, one group version's document) or v2
/// (`definitions`, what Kubernetes 1.20 serves). `None` when the document
/// has no such model.
pub fn schema_from_openapi(
    doc: &Value,
    group: &str,
    version: &str,
    kind: &str,
) -> Option<TargetSchema> {
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
    Some(TargetSchema::new(conv.convert(model, &mut stack)))
}

/// OpenAPI models → structural schemas that an API server accepts in a CRD.
struct Converter<'a> {
    defs: &'a Map<String, Value>,
    prefix: &'a str,
}

fn preserve() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// Keywords a node keeps from its model as they are: how the API server
/// merges (list and map types), what it keeps (unknown fields, embedded
/// objects) and checks (rules), and `nullable`/`default`, which
/// [`Converter::annotate`] and [`sanitize`] check first.
const KEPT: [&str; 5] = [
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
    "x-kubernetes-embedded-resource",
];

/// IntOrString and Quantity: `format: int-or-string`, the extension, or
/// v3's `oneOf`/`anyOf` of a number and a string.
fn is_int_or_string(s: &Value) -> bool {
    if s["format"] == "int-or-string" || s["x-kubernetes-int-or-string"] == true {
        return true;
    }
    let types = |k: &str| -> Option<Vec<&str>> {
        s[k].as_array()?
            .iter()
            .map(|b| b["type"].as_str())
            .collect::<Option<Vec<_>>>()
    };
    ["oneOf", "anyOf"].iter().filter_map(|k| types(k)).any(|t| {
        t.len() == 2 && t.contains(&"string") && (t.contains(&"integer") || t.contains(&"number"))
    })
}

impl Converter<'_> {
    fn convert(&self, s: &Value, stack: &mut Vec<String>) -> Value {
        let mut out = self.shape(s, stack);
        self.annotate(s, &mut out);
        sanitize(&mut out);
        out
    }

    /// The node's type and content, without its annotations.
    fn shape(&self, s: &Value, stack: &mut Vec<String>) -> Value {
        // v3 wraps references as allOf: [{$ref}] to attach defaults; the
        // wrapper's own keywords are annotated over the model's.
        if let Some([only]) = s["allOf"].as_array().map(Vec::as_slice) {
            return self.convert(only, stack);
        }
        if let Some(r) = s["$ref"].as_str() {
            let name = r.trim_start_matches(self.prefix);
            return self.reference(name, stack);
        }
        if is_int_or_string(s) {
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

    /// Copies the node's own [`KEPT`] keywords, `nullable: true`,
    /// `x-kubernetes-preserve-unknown-fields: true` and its `default`
    /// unless that is a zero value (`{}`, `""`, `0`, `false`, `[]`): v3
    /// states Go's zero value for most fields, which the member's decoding
    /// gives anyway, and stamping `resources: {}` on every container of
    /// every stored template would change what users read back (1.20 also
    /// refuses `default: ""`).
    fn annotate(&self, s: &Value, out: &mut Value) {
        let Some(obj) = out.as_object_mut() else {
            return;
        };
        for k in KEPT {
            if let Some(v) = s.get(k) {
                obj.insert(k.into(), v.clone());
            }
        }
        for k in ["nullable", "x-kubernetes-preserve-unknown-fields"] {
            if s[k] == true {
                obj.insert(k.into(), json!(true));
            }
        }
        if let Some(d) = s.get("default").filter(|d| !is_zero(d)) {
            obj.insert("default".into(), d.clone());
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

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Null => false,
    }
}

/// Takes out what the API server would refuse in a CRD (each tried on
/// 1.20 and 1.37): a `default` the node's own schema refuses (a missing
/// required field, a value outside `enum`), a map list whose key is
/// neither required nor defaulted, a set of non-atomic items, and the
/// map keys or map type of a node they do not fit. What goes is only
/// precision: the list merges atomically, the field is not defaulted.
fn sanitize(out: &mut Value) {
    let Some(obj) = out.as_object_mut() else {
        return;
    };
    if let Some(d) = obj.get("default") {
        let node = Value::Object(obj.clone());
        // A rule would check the default too; not worth evaluating here.
        if !fits(&node, d) || obj.contains_key("x-kubernetes-validations") {
            obj.remove("default");
        }
    }
    let is = |o: &Map<String, Value>, k: &str, v: &str| o.get(k).and_then(Value::as_str) == Some(v);
    let list_ok = match obj.get("x-kubernetes-list-type").and_then(Value::as_str) {
        None | Some("atomic") => true,
        Some("map") => {
            let items = &obj["items"];
            let keys = obj
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array);
            items["type"] == "object"
                && keys.is_some_and(|keys| {
                    !keys.is_empty()
                        && keys.iter().all(|k| {
                            let p = &items["properties"][k.as_str().unwrap_or("")];
                            let scalar = matches!(
                                p["type"].as_str(),
                                Some("string" | "integer" | "number" | "boolean")
                            );
                            let required =
                                items["required"].as_array().is_some_and(|r| r.contains(k));
                            scalar
                                && p["nullable"] != true
                                && (required || p.get("default").is_some())
                        })
                })
        }
        Some("set") => {
            let items = obj.get("items").and_then(Value::as_object);
            items.is_some_and(|i| match i.get("type").and_then(Value::as_str) {
                Some("object") => is(i, "x-kubernetes-map-type", "atomic"),
                Some("array") => is(i, "x-kubernetes-list-type", "atomic"),
                Some(_) => true,
                None => false,
            })
        }
        Some(_) => false,
    };
    if !list_ok || !is(obj, "type", "array") {
        obj.remove("x-kubernetes-list-type");
    }
    if !is(obj, "x-kubernetes-list-type", "map") {
        obj.remove("x-kubernetes-list-map-keys");
    }
    if !is(obj, "type", "object") {
        obj.remove("x-kubernetes-map-type");
        obj.remove("x-kubernetes-embedded-resource");
    }
}

/// Whether the API server takes `v` as the default of node `s`: its type,
/// `enum` and `required`, down through the value; a string
/// with a `format` is not checked against it, so it does not fit.
fn fits(s: &Value, v: &Value) -> bool {
    // JSON's `default: null` is no default at all to the API server.
    if v.is_null() {
        return false;
    }
    if s["enum"].as_array().is_some_and(|e| !e.contains(v)) {
        return false;
    }
    if s["x-kubernetes-int-or-string"] == true {
        return v.is_i64() || v.is_u64() || v.is_string();
    }
    match s["type"].as_str() {
        Some("string") => v.is_string() && s.get("format").is_none(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("number") => v.is_number(),
        Some("boolean") => v.is_boolean(),
        Some("array") => v
            .as_array()
            .is_some_and(|a| a.iter().all(|i| fits(&s["items"], i))),
        Some("object") => v.as_object().is_some_and(|m| {
            let required = s["required"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            required
                .iter()
                .all(|r| r.as_str().is_some_and(|r| m.contains_key(r)))
                && m.iter().all(|(k, x)| match s["properties"].get(k) {
                    Some(p) => fits(p, x),
                    None if s["additionalProperties"].is_object() => {
                        fits(&s["additionalProperties"], x)
                    }
                    None => s["x-kubernetes-preserve-unknown-fields"] == true,
                })
        }),
        _ => s["x-kubernetes-preserve-unknown-fields"] == true,
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

    /// The `Ready` condition `--wait-ready` writes is kept whole by the
    /// federated CRDs (ours, and KubeFed's, whose condition schema is the
    /// same: `pkg/kubefedctl/enable/validation.go`): every field it has is
    /// declared, and a condition's type is any string.
    #[test]
    fn the_status_schema_keeps_a_ready_condition_whole() {
        use crate::propagation::status::{ReadyState, with_ready};
        let d = deployment();
        let fed = FederatedNames::new(&d, "types.kubefed.io", "v1beta1");
        let crd = federated_crd(&d, &fed, None, TemplateSchema::Preserve);
        let status =
            &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"];
        let item = &status["properties"]["conditions"]["items"];
        assert!(item["properties"]["type"].get("enum").is_none());
        let written = with_ready(&json!({}), ReadyState::NotReady, "2024-01-01T00:00:00Z").unwrap();
        let ready = written["conditions"][0].as_object().unwrap();
        for field in ready.keys() {
            assert!(
                item["properties"].get(field).is_some(),
                "{field} would be pruned"
            );
        }
        for required in item["required"].as_array().unwrap() {
            assert!(ready.contains_key(required.as_str().unwrap()));
        }
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
        let with_schema = schema_from_openapi(&v2_doc(), "apps", "v1", "Deployment")
            .unwrap()
            .schema;
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
        let s = schema_from_openapi(&v2_doc(), "apps", "v1", "Deployment")
            .unwrap()
            .schema;
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
            schema_from_openapi(&v3, "apps", "v1", "Deployment")
                .unwrap()
                .schema,
            schema_from_openapi(&v2, "apps", "v1", "Deployment")
                .unwrap()
                .schema
        );
    }

    #[test]
    fn embed_puts_the_target_schema_under_template() {
        let d = deployment();
        let fed = FederatedNames::new(&d, "types.kubefed.io", "v1beta1");
        let s = schema_from_openapi(&v2_doc(), "apps", "v1", "Deployment")
            .unwrap()
            .schema;
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
        let v2 = schema_from_crd(&crd, "v2").unwrap().schema;
        assert!(v2["properties"].get("b").is_some());
        let v1 = schema_from_crd(&crd, "v1").unwrap().schema;
        assert!(v1["properties"].get("status").is_none());
        assert!(schema_from_crd(&json!({"spec": {"versions": [{"name": "v1"}]}}), "v1").is_none());
    }

    /// A v3 group version's document, as 1.37 serves it: references
    /// wrapped in `allOf` with the wrapper's own keywords beside.
    fn v3_doc() -> Value {
        let r = |name: &str| json!([{"$ref": format!("#/components/schemas/{name}")}]);
        json!({"openapi": "3.0.0", "components": {"schemas": {
            "io.example.v1.Thing": {
                "x-kubernetes-group-version-kind": [{"group": "example.io", "version": "v1", "kind": "Thing"}],
                "type": "object",
                "properties": {
                    "metadata": {"default": {}, "allOf": r("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")},
                    "spec": {"default": {}, "allOf": r("io.example.v1.ThingSpec")}
                }
            },
            "io.example.v1.ThingSpec": {
                "type": "object",
                "required": ["name"],
                "x-kubernetes-validations": [{"rule": "self.name != 'x'"}],
                "properties": {
                    "name": {"type": "string", "default": ""},
                    "note": {"type": "string", "nullable": true},
                    "protocol": {"type": "string", "default": "TCP", "enum": ["SCTP", "TCP", "UDP"]},
                    "surge": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
                    "resources": {"default": {}, "allOf": r("io.example.v1.Resources")},
                    "ports": {"type": "array", "items": {"allOf": r("io.example.v1.Port")},
                        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"]},
                    "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                    "selector": {"allOf": r("io.example.v1.Selector"), "x-kubernetes-map-type": "atomic"},
                    "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                        "properties": {"kind": {"type": "string"}}},
                    "object": {"type": "object", "x-kubernetes-embedded-resource": true,
                        "x-kubernetes-preserve-unknown-fields": true}
                }
            },
            "io.example.v1.Port": {"type": "object", "required": ["port"], "properties": {
                "port": {"type": "integer", "format": "int32", "default": 0},
                "protocol": {"type": "string", "default": "TCP"}}},
            "io.example.v1.Selector": {"type": "object", "properties": {"app": {"type": "string"}}},
            "io.example.v1.Resources": {"type": "object", "properties": {"cpu": {"type": "string"}}},
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object", "properties": {"name": {"type": "string"}}}
        }}})
    }

    fn thing_spec() -> Value {
        let s = schema_from_openapi(&v3_doc(), "example.io", "v1", "Thing").unwrap();
        assert!(s.dropped.is_empty(), "{:?}", s.dropped);
        s.schema["properties"]["spec"].clone()
    }

    #[test]
    fn v3_keeps_nullable_and_int_or_string() {
        let p = &thing_spec()["properties"];
        assert_eq!(p["note"], json!({"type": "string", "nullable": true}));
        assert_eq!(
            p["surge"],
            json!({"x-kubernetes-int-or-string": true}),
            "v3's oneOf of integer and string"
        );
    }

    #[test]
    fn v3_keeps_defaults_but_not_go_zero_values() {
        let spec = thing_spec();
        let p = &spec["properties"];
        assert_eq!(p["protocol"]["default"], "TCP");
        assert_eq!(
            p["ports"]["items"]["properties"]["protocol"]["default"],
            "TCP"
        );
        for zero in [
            &p["name"],
            &p["resources"],
            &p["ports"]["items"]["properties"]["port"],
        ] {
            assert!(zero.get("default").is_none(), "{zero}");
        }
        assert!(spec.get("default").is_none(), "the allOf wrapper's {{}}");
    }

    #[test]
    fn v3_keeps_list_and_map_types() {
        let p = &thing_spec()["properties"];
        assert_eq!(p["ports"]["x-kubernetes-list-type"], "map");
        assert_eq!(
            p["ports"]["x-kubernetes-list-map-keys"],
            json!(["port", "protocol"])
        );
        assert_eq!(p["tags"]["x-kubernetes-list-type"], "set");
        assert_eq!(
            p["selector"],
            json!({"type": "object", "x-kubernetes-map-type": "atomic",
                   "properties": {"app": {"type": "string"}}}),
            "the wrapper's map type over the model"
        );
    }

    #[test]
    fn v3_keeps_unknown_fields_embedded_objects_and_rules() {
        let spec = thing_spec();
        let p = &spec["properties"];
        assert_eq!(p["raw"]["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(p["raw"]["properties"]["kind"]["type"], "string");
        assert_eq!(p["object"]["x-kubernetes-embedded-resource"], true);
        assert_eq!(p["object"]["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(
            spec["x-kubernetes-validations"],
            json!([{"rule": "self.name != 'x'"}])
        );
    }

    #[test]
    fn defaults_the_server_would_refuse_are_left_out() {
        let doc = json!({"definitions": {"T": {
            "x-kubernetes-group-version-kind": [{"group": "g", "version": "v1", "kind": "T"}],
            "properties": {"spec": {"properties": {
                "op": {"type": "string", "default": "Maybe", "enum": ["In", "NotIn"]},
                "sel": {"type": "object", "default": {"b": "x"}, "required": ["a"],
                        "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
                "pruned": {"type": "object", "default": {"c": 1}, "properties": {"a": {"type": "string"}}},
                "when": {"type": "string", "format": "date-time", "default": "soon"},
                "count": {"type": "integer", "default": "three"},
                "ok": {"type": "object", "default": {"a": "x"}, "required": ["a"],
                       "properties": {"a": {"type": "string"}}},
                "ruled": {"type": "integer", "default": 4,
                          "x-kubernetes-validations": [{"rule": "self < 3"}]}
            }}}
        }}});
        let s = schema_from_openapi(&doc, "g", "v1", "T").unwrap().schema;
        let p = &s["properties"]["spec"]["properties"];
        for gone in ["op", "sel", "pruned", "when", "count", "ruled"] {
            assert!(p[gone].get("default").is_none(), "{gone}: {}", p[gone]);
        }
        assert_eq!(p["ok"]["default"], json!({"a": "x"}));
    }

    #[test]
    fn map_lists_whose_keys_may_be_missing_become_plain_lists() {
        // 1.20's v2: a port's protocol is neither required nor defaulted,
        // and 1.20 and 1.37 both refuse such a key.
        let doc = json!({"definitions": {"T": {
            "x-kubernetes-group-version-kind": [{"group": "g", "version": "v1", "kind": "T"}],
            "properties": {
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["port", "protocol"],
                    "items": {"required": ["port"], "properties": {
                        "port": {"type": "integer"}, "protocol": {"type": "string"}}}},
                "named": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"required": ["name"], "properties": {"name": {"type": "string"}}}},
                "objects": {"type": "array", "x-kubernetes-list-type": "set",
                    "items": {"properties": {"a": {"type": "string"}}}},
                "atomics": {"type": "array", "x-kubernetes-list-type": "set",
                    "items": {"x-kubernetes-map-type": "atomic", "properties": {"a": {"type": "string"}}}},
                "scalar": {"type": "string", "x-kubernetes-list-type": "atomic", "x-kubernetes-map-type": "atomic"}
            }
        }}});
        let s = schema_from_openapi(&doc, "g", "v1", "T").unwrap().schema;
        let p = &s["properties"];
        assert_eq!(
            p["ports"],
            json!({"type": "array", "items": {"type": "object", "required": ["port"], "properties": {
                "port": {"type": "integer"}, "protocol": {"type": "string"}}}})
        );
        assert_eq!(p["named"]["x-kubernetes-list-type"], "map");
        assert_eq!(p["named"]["x-kubernetes-list-map-keys"], json!(["name"]));
        assert!(p["objects"].get("x-kubernetes-list-type").is_none());
        assert_eq!(p["atomics"]["x-kubernetes-list-type"], "set");
        assert_eq!(p["scalar"], json!({"type": "string"}));
    }

    #[test]
    fn crd_schemas_keep_every_keyword_and_only_root_rules_reading_what_templates_lack_go() {
        let spec = json!({"type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.replicas <= self.maxReplicas"},
            {"rule": "self.mode == oldSelf.mode", "message": "immutable"}],
        "properties": {
            "replicas": {"type": "integer", "default": 1},
            "maxReplicas": {"type": "integer", "nullable": true},
            "mode": {"type": "string"},
            "surge": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"],
                      "items": {"type": "object", "required": ["port"], "properties": {"port": {"type": "integer"}}}},
            "labels": {"type": "object", "x-kubernetes-map-type": "granular", "additionalProperties": {"type": "string"}},
            "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "x-kubernetes-embedded-resource": true}
        }});
        let root_rules = json!([
            {"rule": "self.metadata.name.size() < 40"},
            {"rule": "!has(self.status) || self.status.ready"},
            {"rule": "self.kind == 'Widget'"},
            {"rule": "true", "fieldPath": ".status.ready"},
            {"rule": "self.spec.replicas > 0", "messageExpression": "'bad ' + self.metadata.name"},
            {"rule": "has(self.spec) && self.spec.statusCode >= 0"},
            {"rule": "self.spec == oldSelf.spec"}
        ]);
        let crd = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
            "type": "object",
            "x-kubernetes-validations": root_rules,
            "properties": {"spec": spec, "status": {"type": "object"}}
        }}}]}});
        let s = schema_from_crd(&crd, "v1").unwrap();
        assert_eq!(
            s.schema["properties"]["spec"], spec,
            "kept as the CRD has it"
        );
        assert_eq!(
            s.schema["x-kubernetes-validations"],
            json!([{"rule": "has(self.spec) && self.spec.statusCode >= 0"}, {"rule": "self.spec == oldSelf.spec"}]),
            "statusCode is not status; a transition rule stays"
        );
        assert_eq!(s.dropped.len(), 5, "{:?}", s.dropped);
        assert_eq!(
            s.dropped[0],
            "rule \"self.metadata.name.size() < 40\" at the root: it reads metadata, which a template does not carry"
        );
        assert!(
            s.dropped[3].contains("reads status"),
            "fieldPath: {}",
            s.dropped[3]
        );
        assert!(
            s.dropped[4].contains("reads metadata"),
            "messageExpression: {}",
            s.dropped[4]
        );

        // The template carries them under spec.template, rules and all.
        let d = deployment();
        let fed = FederatedNames::new(&d, "types.kubefed.io", "v1beta1");
        let crd = federated_crd(&d, &fed, Some(&s.schema), TemplateSchema::Embed);
        let t = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["template"];
        assert_eq!(t["properties"]["spec"], spec);
        assert_eq!(t["x-kubernetes-validations"].as_array().unwrap().len(), 2);
    }

    mod defaults {
        use super::super::*;
        use proptest::prelude::*;

        fn value() -> impl Strategy<Value = Value> {
            prop_oneof![
                Just(json!(null)),
                Just(json!("")),
                Just(json!("TCP")),
                Just(json!("UDP")),
                Just(json!(0)),
                Just(json!(7)),
                Just(json!(1.5)),
                Just(json!(false)),
                Just(json!(true)),
                Just(json!({})),
                Just(json!({"a": "x"})),
                Just(json!([])),
            ]
        }

        proptest! {
            /// A scalar's default is kept exactly when it is no zero value,
            /// has the node's type and is one of its `enum` (`null` is no
            /// default, nullable or not).
            #[test]
            fn a_default_is_kept_when_nonzero_typed_and_allowed(
                ty in prop::sample::select(vec!["string", "integer", "number", "boolean"]),
                default in value(),
                with_enum in any::<bool>(),
                nullable in any::<bool>(),
            ) {
                let mut node = json!({"type": ty, "default": default});
                if with_enum {
                    node["enum"] = json!(["TCP", 7]);
                }
                if nullable {
                    node["nullable"] = json!(true);
                }
                let doc = json!({"definitions": {"T": {
                    "x-kubernetes-group-version-kind": [{"group": "g", "version": "v1", "kind": "T"}],
                    "properties": {"f": node}
                }}});
                let s = schema_from_openapi(&doc, "g", "v1", "T").unwrap().schema;
                let typed = match ty {
                    "string" => default.is_string(),
                    "integer" => default.is_i64(),
                    "number" => default.is_number(),
                    _ => default.is_boolean(),
                };
                let allowed = !with_enum || default == json!("TCP") || default == json!(7);
                let zero = matches!(&default, Value::String(s) if s.is_empty())
                    || default == json!(0) || default == json!(false)
                    || default == json!({}) || default == json!([]);
                let kept = s["properties"]["f"].get("default").cloned();
                prop_assert_eq!(kept.is_some(), !zero && typed && allowed, "{}", s);
                if let Some(k) = kept {
                    prop_assert_eq!(k, default);
                }
            }
        }
    }
}
