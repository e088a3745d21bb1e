//! The object a member cluster should hold for a federated object
//! (upstream `pkg/controller/sync/resource.go`, `dispatch/retain.go`):
//! template, identity, retention (updates only), overrides, managed label —
//! in that order, so overrides beat retention and nothing removes the label.

use serde_json::{Map, Value};
use std::borrow::Cow;
use std::sync::Arc;

use crate::describe::describe_federated;
use crate::propagation::federated::FederatedObject;

use crate::propagation::overrides::{
    ClusterOverride, MemberCluster, OverrideError, ParsedOverrides, SELECTED_OVERRIDES_ANNOTATION,
    apply_overrides, overrides_by_cluster, patched, selected_digest,
};
use crate::propagation::retain::{RetainError, retain_fields};

/// Label that marks member objects as managed by federation.
pub const MANAGED_LABEL: &str = "kubefed.io/managed";

/// The target type of a FederatedTypeConfig (what members hold).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetType {
    /// `""` for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    /// The FederatedTypeConfig's annotations (`null` when none): what the
    /// type keeps of fields other managers own (`foreign::Policy`).
    pub type_annotations: Value,
}

impl TargetType {
    pub fn new(group: &str, version: &str, kind: &str) -> TargetType {
        TargetType {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            type_annotations: Value::Null,
        }
    }

    /// `group/version`, or just `version` for the core group (upstream
    /// renders `/v1`; the API server accepts both, `v1` is the real name).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn is_namespace(&self) -> bool {
        self.group.is_empty() && self.kind == "Namespace"
    }
}

/// Template fields dropped with a Warning event upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateWarning {
    /// `AnnotationsNotSupported`
    AnnotationsNotSupported,
    /// `FinalizersNotSupported`
    FinalizersNotSupported,
}

impl TemplateWarning {
    /// Event reason, as upstream.
    pub fn reason(self) -> &'static str {
        match self {
            TemplateWarning::AnnotationsNotSupported => "AnnotationsNotSupported",
            TemplateWarning::FinalizersNotSupported => "FinalizersNotSupported",
        }
    }

    /// Event message, as upstream.
    pub fn message(self) -> &'static str {
        match self {
            TemplateWarning::AnnotationsNotSupported => {
                "metadata.annotations cannot be set via template to avoid conflicting with controllers in member clusters. Consider using an override to add or remove elements from this collection."
            }
            TemplateWarning::FinalizersNotSupported => {
                "metadata.finalizers cannot be set via template to avoid conflicting with controllers in member clusters. Consider using an override to add or remove elements from this collection."
            }
        }
    }
}

/// The template metadata upstream drops with a Warning
/// ([`rendered_template`]'s rule), read without rendering.
pub fn template_warnings(fed: &Value) -> Vec<TemplateWarning> {
    let meta = FederatedObject::new(fed)
        .template()
        .and_then(|t| t.get("metadata"));
    let field = |k: &str| meta.and_then(|m| m.get(k));
    let mut out = Vec::new();
    if field("annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| !a.is_empty())
    {
        out.push(TemplateWarning::AnnotationsNotSupported);
    }
    if field("finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
    {
        out.push(TemplateWarning::FinalizersNotSupported);
    }
    out
}

/// Why no desired object could be computed; [`DesiredError::status`] is the
/// per-cluster status upstream records.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum DesiredError {
    #[error("{object}: spec.template is not an object")]
    TemplateNotObject { object: String },
    #[error("{object}: {source}")]
    Retention {
        object: String,
        #[source]
        source: RetainError,
    },
    #[error("{object}: {source}")]
    Overrides {
        object: String,
        #[source]
        source: OverrideError,
    },
}

impl DesiredError {
    pub fn status(&self) -> &'static str {
        match self {
            DesiredError::TemplateNotObject { .. } => "ComputeResourceFailed",
            DesiredError::Retention { .. } => "FieldRetentionFailed",
            DesiredError::Overrides { .. } => "ApplyOverridesFailed",
        }
    }
}

/// Steps 1–4: the template with non-empty annotations/finalizers dropped,
/// the federated object's name and namespace (cluster-scoped objects: none;
/// Namespace targets: the template's, untouched), `kind`, and `apiVersion`
/// unless the template pins one. Returns the warnings upstream would emit as events.
pub fn rendered_template(
    fed: &Value,
    target: &TargetType,
) -> Result<(Value, Vec<TemplateWarning>), DesiredError> {
    let fed = FederatedObject::new(fed);
    let mut obj = match fed.template() {
        None => Value::Object(Map::new()),
        Some(t @ Value::Object(_)) => t.clone(),
        Some(_) => {
            return Err(DesiredError::TemplateNotObject {
                object: fed.describe(),
            });
        }
    };
    let mut warnings = Vec::new();
    let root = obj.as_object_mut().expect("template is an object");
    let meta = match root.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => {
            root.insert("metadata".into(), Value::Object(Map::new()));
            root["metadata"].as_object_mut().expect("just inserted")
        }
    };
    // Upstream strips them only when non-empty (an empty map stays).
    if meta
        .get("annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| !a.is_empty())
    {
        meta.remove("annotations");
        warnings.push(TemplateWarning::AnnotationsNotSupported);
    }
    if meta
        .get("finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
    {
        meta.remove("finalizers");
        warnings.push(TemplateWarning::FinalizersNotSupported);
    }
    let name = fed.name().unwrap_or("");
    meta.insert("name".into(), Value::String(name.to_string()));
    // Namespace targets keep whatever the template says (upstream does not
    // touch it); every other target gets the federated object's namespace,
    // i.e. none for cluster-scoped objects.
    let namespace = fed.namespace().unwrap_or("");
    if !target.is_namespace() {
        if namespace.is_empty() {
            meta.remove("namespace");
        } else {
            meta.insert("namespace".into(), Value::String(namespace.to_string()));
        }
    }
    root.insert("kind".into(), Value::String(target.kind.clone()));
    let has_api_version = root
        .get("apiVersion")
        .and_then(Value::as_str)
        .is_some_and(|v| !v.is_empty());
    if !has_api_version {
        root.insert("apiVersion".into(), Value::String(target.api_version()));
    }
    Ok((obj, warnings))
}

/// The full desired object for `cluster`: [`rendered_template`], then
/// retention from `live` when updating (`Some`), then the cluster's
/// overrides, then the managed label.
pub fn desired_for_cluster(
    fed: &Value,
    target: &TargetType,
    cluster: MemberCluster,
    live: Option<&Value>,
) -> Result<Value, DesiredError> {
    let (mut obj, _) = rendered_template(fed, target)?;
    if let Some(live) = live {
        let retain_replicas = match FederatedObject::new(fed).retain_replicas() {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(DesiredError::Retention {
                    object: describe_federated(fed),
                    source: RetainError {
                        kind: target.kind.clone(),
                        field: "spec.retainReplicas".into(),
                        problem: "the federated object's value is not a boolean".into(),
                    },
                });
            }
        };
        retain_fields(&mut obj, live, &target.kind, retain_replicas).map_err(|source| {
            DesiredError::Retention {
                object: describe_federated(fed),
                source,
            }
        })?;
    }
    let overrides_error = |source| DesiredError::Overrides {
        object: describe_federated(fed),
        source,
    };
    let parsed = overrides_by_cluster(fed).map_err(overrides_error)?;
    let list = parsed
        .expanded_for_cluster(cluster)
        .map_err(overrides_error)?;
    apply_overrides(&mut obj, cluster.name, &list).map_err(overrides_error)?;
    set_managed_label(&mut obj);
    if parsed.varies_by_member() {
        set_selected_digest(&mut obj, &list);
    }
    Ok(obj)
}

/// Records on a member object which overrides it got, member variables
/// expanded ([`SELECTED_OVERRIDES_ANNOTATION`]), for objects whose overrides
/// choose clusters by label or name member variables: a member whose labels
/// change then gets its new values (the PropagatedVersion cannot tell).
pub fn set_selected_digest(obj: &mut Value, overrides: &[ClusterOverride]) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if !annotations.is_object() {
            *annotations = Value::Object(Map::new());
        }
        annotations[SELECTED_OVERRIDES_ANNOTATION] = Value::String(selected_digest(overrides));
    }
}

/// One federated object's desired objects for many clusters, each equal to
/// [`desired_for_cluster`] without a live object. The template is rendered
/// and the overrides parsed once, and every cluster without overrides
/// shares one object: an offline render of thousands of objects × clusters
/// then copies only what differs.
#[derive(Debug)]
pub struct DesiredObjects {
    object: String,
    /// The object of every cluster without overrides.
    shared: Arc<Value>,
    /// The rendered template before the managed label, kept only when
    /// some cluster has overrides.
    template: Option<Value>,
    overrides: ParsedOverrides,
}

impl DesiredObjects {
    pub fn new(fed: &Value, target: &TargetType) -> Result<DesiredObjects, DesiredError> {
        let (template, _) = rendered_template(fed, target)?;
        let overrides: ParsedOverrides =
            overrides_by_cluster(fed).map_err(|source| DesiredError::Overrides {
                object: describe_federated(fed),
                source,
            })?;
        let mut shared = template.clone();
        set_managed_label(&mut shared);
        if overrides.varies_by_member() {
            set_selected_digest(&mut shared, &[]);
        }
        Ok(DesiredObjects {
            object: describe_federated(fed),
            shared: Arc::new(shared),
            template: (!overrides.is_empty()).then_some(template),
            overrides,
        })
    }

    /// The object of every cluster without overrides.
    pub fn shared(&self) -> &Value {
        &self.shared
    }

    /// The shared object itself (clusters holding it compare `Arc::ptr_eq`).
    pub fn shared_arc(&self) -> &Arc<Value> {
        &self.shared
    }

    /// The desired object for `cluster`: borrowed when it is the shared one.
    pub fn for_cluster(&self, cluster: MemberCluster) -> Result<Cow<'_, Value>, DesiredError> {
        let Some(template) = &self.template else {
            return Ok(Cow::Borrowed(&self.shared));
        };
        let overrides_error = |source| DesiredError::Overrides {
            object: self.object.clone(),
            source,
        };
        let overrides = self
            .overrides
            .expanded_for_cluster(cluster)
            .map_err(overrides_error)?;
        if overrides.is_empty() {
            return Ok(Cow::Borrowed(&self.shared));
        }
        let mut obj =
            patched(template.clone(), cluster.name, &overrides).map_err(overrides_error)?;
        set_managed_label(&mut obj);
        if self.overrides.varies_by_member() {
            set_selected_digest(&mut obj, &overrides);
        }
        Ok(Cow::Owned(obj))
    }

    /// [`Self::for_cluster`] as a shared pointer: clusters without overrides
    /// get the one shared object, others their own.
    pub fn for_cluster_shared(&self, cluster: MemberCluster) -> Result<Arc<Value>, DesiredError> {
        Ok(match self.for_cluster(cluster)? {
            Cow::Borrowed(_) => Arc::clone(&self.shared),
            Cow::Owned(own) => Arc::new(own),
        })
    }
}

/// Add `kubefed.io/managed: "true"` (creating metadata/labels if needed).
pub fn set_managed_label(obj: &mut Value) {
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let labels = meta
        .as_object_mut()
        .expect("metadata is an object")
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if !labels.is_object() {
        *labels = Value::Object(Map::new());
    }
    labels
        .as_object_mut()
        .expect("labels is an object")
        .insert(MANAGED_LABEL.into(), Value::String("true".into()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> TargetType {
        TargetType::new("apps", "v1", "Deployment")
    }

    #[test]
    fn a_member_chosen_by_label_records_its_overrides_others_do_not_carry_it() {
        let mut fed = fed_deploy();
        fed["spec"]["overrides"]
            .as_array_mut()
            .unwrap()
            .push(json!({"clusterSelector": {"matchLabels": {"region": "eu"}},
                         "clusterOverrides": [{"path": "/spec/replicas", "value": 7}]}));
        let eu: std::collections::BTreeMap<String, String> =
            [("region".to_string(), "eu".to_string())].into();
        let none = std::collections::BTreeMap::new();
        let at = |labels| MemberCluster { name: "c1", labels };
        let chosen = desired_for_cluster(&fed, &deployment(), at(&eu), None).unwrap();
        let other = desired_for_cluster(&fed, &deployment(), at(&none), None).unwrap();
        assert_eq!(chosen["spec"]["replicas"], 7);
        assert_eq!(other["spec"]["replicas"], 2);
        let digest =
            |o: &Value| o["metadata"]["annotations"][SELECTED_OVERRIDES_ANNOTATION].clone();
        assert_ne!(digest(&chosen), digest(&other));
        assert!(
            digest(&other).is_string(),
            "every member of such an object says what it got"
        );
        let many = DesiredObjects::new(&fed, &deployment()).unwrap();
        assert_eq!(*many.for_cluster(at(&eu)).unwrap(), chosen);
        assert_eq!(*many.for_cluster(at(&none)).unwrap(), other);
        let plain = desired_for_cluster(&fed_deploy(), &deployment(), at(&eu), None).unwrap();
        assert!(
            plain["metadata"]["annotations"]
                .get(SELECTED_OVERRIDES_ANNOTATION)
                .is_none()
        );
    }

    fn fed_deploy() -> Value {
        json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedDeployment",
            "metadata": {"name": "web", "namespace": "demo", "uid": "u1"},
            "spec": {
                "template": {"metadata": {"labels": {"app": "web"}, "annotations": {"a": "1"},
                                          "finalizers": ["x"], "name": "ignored", "namespace": "other"},
                             "spec": {"replicas": 2}},
                "overrides": [{"clusterName": "c2", "clusterOverrides": [
                    {"path": "/spec/replicas", "value": 5},
                    {"op": "add", "path": "/metadata/annotations", "value": {"o": "v"}},
                    {"op": "remove", "path": "/metadata/labels/app"}]}]}})
    }

    #[test]
    fn renders_identity_and_drops_template_annotations() {
        let (obj, warnings) = rendered_template(&fed_deploy(), &deployment()).unwrap();
        assert_eq!(
            obj,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "demo", "labels": {"app": "web"}},
                "spec": {"replicas": 2}})
        );
        assert_eq!(
            warnings,
            vec![
                TemplateWarning::AnnotationsNotSupported,
                TemplateWarning::FinalizersNotSupported
            ]
        );
        assert_eq!(
            template_warnings(&fed_deploy()),
            warnings,
            "the same rule unrendered"
        );
        let empty =
            json!({"spec": {"template": {"metadata": {"annotations": {}, "finalizers": []}}}});
        assert!(template_warnings(&empty).is_empty());
        assert!(template_warnings(&json!({"spec": "odd"})).is_empty());
    }

    #[test]
    fn api_version_defaults_per_group_and_template_may_pin_it() {
        let cm = TargetType::new("", "v1", "ConfigMap");
        let fed = json!({"metadata": {"name": "c", "namespace": "n"}, "spec": {"template": {"data": {"k": "v"}}}});
        assert_eq!(rendered_template(&fed, &cm).unwrap().0["apiVersion"], "v1");
        let pinned = json!({"metadata": {"name": "c"}, "spec": {"template": {"apiVersion": "apps/v1beta2"}}});
        assert_eq!(
            rendered_template(&pinned, &deployment()).unwrap().0["apiVersion"],
            "apps/v1beta2"
        );
    }

    #[test]
    fn namespaces_and_cluster_scoped_objects_have_no_namespace() {
        let ns = TargetType::new("", "v1", "Namespace");
        let fed_ns = json!({"kind": "FederatedNamespace", "metadata": {"name": "demo", "namespace": "demo"}});
        let (obj, warnings) = rendered_template(&fed_ns, &ns).unwrap();
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
        );
        assert!(warnings.is_empty());
        let empty_annotations = json!({"metadata": {"name": "demo", "namespace": "demo"},
            "spec": {"template": {"metadata": {"annotations": {}, "finalizers": []}}}});
        let (obj, warnings) = rendered_template(&empty_annotations, &ns).unwrap();
        assert!(warnings.is_empty(), "empty collections are not reported");
        assert_eq!(obj["metadata"]["annotations"], json!({}));
        let cr = TargetType::new("rbac.authorization.k8s.io", "v1", "ClusterRole");
        let fed_cr = json!({"metadata": {"name": "reader"}, "spec": {"template": {"metadata": {"namespace": "x"}, "rules": []}}});
        let obj = desired_for_cluster(&fed_cr, &cr, MemberCluster::named("c1"), None).unwrap();
        assert!(obj["metadata"].get("namespace").is_none());
        assert_eq!(obj["metadata"]["labels"][MANAGED_LABEL], "true");
    }

    #[test]
    fn per_cluster_overrides_then_managed_label() {
        let c1 = desired_for_cluster(
            &fed_deploy(),
            &deployment(),
            MemberCluster::named("c1"),
            None,
        )
        .unwrap();
        assert_eq!(c1["spec"]["replicas"], 2);
        assert_eq!(
            c1["metadata"]["labels"],
            json!({"app": "web", MANAGED_LABEL: "true"})
        );
        let c2 = desired_for_cluster(
            &fed_deploy(),
            &deployment(),
            MemberCluster::named("c2"),
            None,
        )
        .unwrap();
        assert_eq!(c2["spec"]["replicas"], 5);
        assert_eq!(c2["metadata"]["annotations"], json!({"o": "v"}));
        assert_eq!(c2["metadata"]["labels"], json!({MANAGED_LABEL: "true"}));
        // an override cannot remove the managed label
        let fed = json!({"metadata": {"name": "w"}, "spec": {"template": {"metadata": {"labels": {MANAGED_LABEL: "true"}}},
            "overrides": [{"clusterName": "c1", "clusterOverrides": [{"op": "remove", "path": "/metadata/labels"}]}]}});
        let obj =
            desired_for_cluster(&fed, &deployment(), MemberCluster::named("c1"), None).unwrap();
        assert_eq!(obj["metadata"]["labels"][MANAGED_LABEL], "true");
    }

    #[test]
    fn retention_happens_before_overrides() {
        let mut fed = fed_deploy();
        fed["spec"]["retainReplicas"] = json!(true);
        let live = json!({"metadata": {"resourceVersion": "9", "annotations": {"deployment.kubernetes.io/revision": "3"}},
            "spec": {"replicas": 8}});
        let c1 = desired_for_cluster(&fed, &deployment(), MemberCluster::named("c1"), Some(&live))
            .unwrap();
        assert_eq!(c1["spec"]["replicas"], 8, "retained");
        assert_eq!(c1["metadata"]["resourceVersion"], "9");
        assert_eq!(
            c1["metadata"]["annotations"],
            json!({"deployment.kubernetes.io/revision": "3"})
        );
        let c2 = desired_for_cluster(&fed, &deployment(), MemberCluster::named("c2"), Some(&live))
            .unwrap();
        assert_eq!(c2["spec"]["replicas"], 5, "override beats retention");
        assert_eq!(
            c2["metadata"]["annotations"],
            json!({"o": "v"}),
            "override replaced the retained annotations"
        );
    }

    #[test]
    fn errors_carry_upstream_statuses_and_names() {
        let bad_template = json!({"kind": "FederatedDeployment", "metadata": {"name": "w", "namespace": "d"}, "spec": {"template": "x"}});
        let e = desired_for_cluster(
            &bad_template,
            &deployment(),
            MemberCluster::named("c1"),
            None,
        )
        .unwrap_err();
        assert_eq!(e.status(), "ComputeResourceFailed");
        assert!(e.to_string().contains("FederatedDeployment \"d/w\""));
        let bad_override = json!({"kind": "FederatedDeployment", "metadata": {"name": "w", "namespace": "d"},
            "spec": {"overrides": [{"clusterName": "c1", "clusterOverrides": [{"path": "/spec/x/y", "value": 1}]}]}});
        let e = desired_for_cluster(
            &bad_override,
            &deployment(),
            MemberCluster::named("c1"),
            None,
        )
        .unwrap_err();
        assert_eq!(e.status(), "ApplyOverridesFailed");
        assert!(
            e.to_string().contains("/spec/x/y") && e.to_string().contains("\"c1\""),
            "{e}"
        );
        let live = json!({"spec": {"clusterIP": 5}});
        let svc = TargetType::new("", "v1", "Service");
        let e = desired_for_cluster(
            &json!({"metadata": {"name": "s"}}),
            &svc,
            MemberCluster::named("c1"),
            Some(&live),
        )
        .unwrap_err();
        assert_eq!(e.status(), "FieldRetentionFailed");
    }

    /// Rendering once for many clusters gives, cluster by cluster, exactly
    /// what `desired_for_cluster` gives, including overrides that touch the
    /// labels before the managed label is added, and the same errors.
    #[test]
    fn desired_objects_equal_desired_for_cluster() {
        let fed = json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedDeployment",
        "metadata": {"name": "web", "namespace": "demo"},
        "spec": {
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"replicas": 1}},
            "overrides": [
                {"clusterName": "a", "clusterOverrides": [{"path": "/spec/replicas", "value": 5}]},
                {"clusterName": "b", "clusterOverrides": [{"path": "/metadata/labels", "value": {"only": "b"}}]},
                {"clusterName": "c", "clusterOverrides": []},
                {"clusterName": "d", "clusterOverrides": [{"op": "remove", "path": "/spec/missing"}]}
            ]
        }});
        let target = deployment();
        let many = DesiredObjects::new(&fed, &target).unwrap();
        for cluster in ["a", "b", "c", "e"] {
            assert_eq!(
                *many.for_cluster(MemberCluster::named(cluster)).unwrap(),
                desired_for_cluster(&fed, &target, MemberCluster::named(cluster), None).unwrap(),
                "cluster {cluster}"
            );
        }
        assert_eq!(
            many.for_cluster(MemberCluster::named("a")).unwrap()["spec"]["replicas"],
            5
        );
        // Clusters without overrides (none, or an empty list) share one object.
        assert!(matches!(
            many.for_cluster(MemberCluster::named("c")).unwrap(),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            many.for_cluster(MemberCluster::named("e")).unwrap(),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            many.for_cluster(MemberCluster::named("a")).unwrap(),
            Cow::Owned(_)
        ));
        assert_eq!(
            many.for_cluster(MemberCluster::named("b")).unwrap()["metadata"]["labels"],
            json!({"only": "b", MANAGED_LABEL: "true"})
        );
        assert_eq!(
            many.for_cluster(MemberCluster::named("d"))
                .unwrap_err()
                .to_string(),
            desired_for_cluster(&fed, &target, MemberCluster::named("d"), None)
                .unwrap_err()
                .to_string()
        );
    }
}
