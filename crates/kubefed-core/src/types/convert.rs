//! A target object → its `Federated<Kind>` object (what `federate` writes),
//! and which objects and types `federate` leaves out.
//!
//! As KubeFed (`FederatedResourceFromTargetResource` in upstream
//! `pkg/kubefedctl/federate/federate.go`): the template is the object
//! without apiVersion, kind, status and metadata other than labels;
//! annotations do not travel (a warning says which); Service `clusterIP` and
//! every port's `nodePort`, ServiceAccount `secrets` and Namespace
//! `spec.finalizers` are scrubbed. Ours, beyond KubeFed: Service
//! `clusterIPs` and `healthCheckNodePort` are scrubbed too (each member
//! allocates its own; see [`scrub`]), server-written annotations raise no
//! warning, and placement may be chosen (KubeFed: all clusters).

use crate::names::subdomain_error;
use crate::propagation::member::is_system_namespace;
use crate::types::lookup::ServedResource;
use crate::types::typegen::DEFAULT_FEDERATED_GROUP;
use serde_json::{Map, Value, json};

/// Where the federated object goes: its type's group/version/kind and scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FederatedResource {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
}

/// What federating an object does to the federated object already there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Federating {
    Create,
    /// The host's object already says everything the new one says.
    Unchanged,
    /// It differs: updated with `--overwrite`, else refused.
    Differs,
}

/// Compares a federated object to be written with the host's (`None`:
/// absent): only `spec` counts, and fields the host added are not a change.
pub fn federating(new: &Value, live: Option<&Value>) -> Federating {
    match live {
        None => Federating::Create,
        Some(l) if crate::propagation::compare::is_subset(&new["spec"], &l["spec"]) => {
            Federating::Unchanged
        }
        Some(_) => Federating::Differs,
    }
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
    fed: &FederatedResource,
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

/// Removes what each member must allocate or own itself. KubeFed removes
/// Namespace `spec.finalizers`, ServiceAccount `secrets`, Service
/// `spec.clusterIP` and each port's `nodePort`. Ours besides: Service
/// `spec.clusterIPs` (dual-stack, newer than KubeFed's federate: left in, a
/// member would be asked for the host's IPs) and `spec.healthCheckNodePort`
/// (allocated per cluster like a nodePort for `externalTrafficPolicy:
/// Local` load balancers: left in, a member would be asked for the host's
/// port, which may be taken or out of its range).
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
    // A Namespace's spec is left empty (`spec: {}`), not removed: KubeFed
    // writes it so, and the same template hashes to the same
    // `templateVersion` whichever tool federated it.
}

/// The warning for an object `federate` skips because a federated object
/// cannot carry its name, or `None` when the name is fine. As upstream
/// `getResourcesInNamespace` (`pkg/kubefedctl/federate/util.go`), which
/// skips contained objects whose name is not a DNS-1123 subdomain ("Skipping
/// resource ... because it does not conform to the DNS-1123 subdomain
/// spec"): federated types are custom resources, whose names must be DNS-1123
/// subdomains, while some built-in types accept more (RBAC names such as
/// `system:controller:x`). Ours applies it to every object federate reads.
pub fn invalid_name_warning(obj: &Value) -> Option<String> {
    let kind = obj["kind"].as_str().unwrap_or("");
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    let namespace = obj["metadata"]["namespace"].as_str().unwrap_or("");
    let error = subdomain_error(name)?;
    let qualified = if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    };
    Some(format!(
        "skipping {kind} {qualified:?} because its name does not conform to the DNS-1123 subdomain spec ({error}): a federated resource cannot be named so"
    ))
}

/// The note for federating a system namespace (`kube-system`,
/// `kube-public`, `default`, the federation's own), or `None`. Reconcile,
/// as KubeFed (`isSystemNamespace` in upstream
/// `pkg/controller/sync/accessor.go`), never propagates such a namespace
/// itself; the FederatedNamespace still places the resources federated
/// inside it.
pub fn system_namespace_note(name: &str, kubefed_namespace: &str) -> Option<String> {
    is_system_namespace(name, kubefed_namespace).then(|| {
        format!(
            "{name:?} is a system namespace: reconcile will not propagate the namespace itself (KubeFed ignores kube-system, kube-public, default and the federation namespace {kubefed_namespace:?}), but the federated resources inside it are still propagated"
        )
    })
}

/// Resources controllers create in every cluster: upstream's
/// `controllerCreatedAPIResourceNames` (`pkg/kubefedctl/federate/federate.go`),
/// matched as a `-s` name is (so `events` also covers `events.events.k8s.io`).
pub const CONTROLLER_CREATED: &[&str] = &[
    "endpoints",
    "events",
    "events.events.k8s.io",
    "propagatedversions.core.kubefed.io",
];

/// Ours, beyond upstream: EndpointSlices are derived from Services by each
/// cluster's endpointslice controller, as Endpoints are (KubeFed predates
/// them; its scripts pass `-s endpointslices`).
pub const ALSO_CONTROLLER_CREATED: &[&str] = &["endpointslices.discovery.k8s.io"];

/// Why an object of `group` and `kind` cannot be federated, or None: a
/// federated object is federated already (its federated form would be a
/// `FederatedFederatedConfigMap`), and KubeFed's own objects (clusters,
/// type configs, RSPs, DNS records) are the federation itself.
pub fn not_federatable(group: &str, kind: &str) -> Option<&'static str> {
    let kubefed = ["kubefed.io", "kubefed.k8s.io"]
        .iter()
        .any(|g| group == *g || group.ends_with(&format!(".{g}")));
    match (kubefed, kind.starts_with("Federated")) {
        (false, _) => None,
        (true, true) => Some("is federated already"),
        (true, false) => Some("is one of KubeFed's own objects, not a resource to federate"),
    }
}

/// Whether `federate --contents` leaves the resource type out. Upstream
/// (`namespacedAPIResourceMap` in `pkg/kubefedctl/federate/util.go`): a
/// group named by `-s`, the `extensions` group, cluster-scoped types,
/// federated types (`Federated*` kinds in `types.kubefed.io`),
/// [`CONTROLLER_CREATED`] and any type a `-s` name matches; empty names are
/// ignored. Ours besides, each with its reason in docs/federate.md:
/// [`ALSO_CONTROLLER_CREATED`]; every type of KubeFed's own API groups
/// (`*.kubefed.io`: the control plane's objects, which members do not
/// serve); types that cannot be listed (upstream lists them and drops the
/// error; we do not ask, so that other list errors can stop the command).
pub fn skipped_in_contents(r: &ServedResource, skip: &[String]) -> bool {
    let skip: Vec<&str> = skip
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    let federated = r.kind.starts_with("Federated") && r.group == DEFAULT_FEDERATED_GROUP;
    let kubefed_group = r.group == "kubefed.io" || r.group.ends_with(".kubefed.io");
    skip.contains(&r.group.as_str())
        || r.group == "extensions"
        || !r.namespaced
        || federated
        || kubefed_group
        || !r.verbs.iter().any(|v| v == "list")
        || CONTROLLER_CREATED
            .iter()
            .chain(ALSO_CONTROLLER_CREATED)
            .chain(skip.iter())
            .any(|s| r.matches(s))
}

/// Whether the cluster or a controller made `obj` (a Deployment's
/// ReplicaSets, a Job's Pods, service-account tokens, the
/// `kube-root-ca.crt` ConfigMap Kubernetes 1.20+ puts in every namespace):
/// federating it would fight whoever makes it, so `federate --contents`
/// leaves it out.
pub fn made_by_cluster(obj: &Value) -> bool {
    let owned = obj["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|refs| refs.iter().any(|r| r["controller"] == true));
    let root_ca = obj["kind"] == "ConfigMap"
        && obj["apiVersion"] == "v1"
        && obj["metadata"]["name"] == "kube-root-ca.crt";
    owned || root_ca || obj["type"] == "kubernetes.io/service-account-token"
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
mod federating_tests {
    use super::*;

    #[test]
    fn what_the_cluster_makes_is_left_out() {
        let cases = [
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt"}}),
                true,
            ),
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}),
                false,
            ),
            (
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"}, "type": "kubernetes.io/service-account-token"}),
                true,
            ),
            (
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kube-root-ca.crt"}}),
                false,
            ),
            (
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-1", "ownerReferences": [{"controller": true}]}}),
                true,
            ),
        ];
        for (obj, made) in cases {
            assert_eq!(made_by_cluster(&obj), made, "{obj}");
        }
    }

    #[test]
    fn only_a_spec_that_says_something_new_differs() {
        let new =
            json!({"spec": {"template": {"data": {"a": "1"}}, "placement": {"clusters": []}}});
        let same = json!({"metadata": {"resourceVersion": "7"}, "spec": {"template": {"data": {"a": "1"}}, "placement": {"clusters": []}, "overrides": []}});
        let other =
            json!({"spec": {"template": {"data": {"a": "2"}}, "placement": {"clusters": []}}});
        assert_eq!(federating(&new, None), Federating::Create);
        assert_eq!(federating(&new, Some(&same)), Federating::Unchanged);
        assert_eq!(federating(&new, Some(&other)), Federating::Differs);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn federated_and_kubefed_objects_are_not_federated_again() {
        assert_eq!(
            not_federatable("types.kubefed.io", "FederatedConfigMap"),
            Some("is federated already")
        );
        assert_eq!(
            not_federatable("types.kubefed.k8s.io", "FederatedDeployment"),
            Some("is federated already")
        );
        assert!(not_federatable("core.kubefed.io", "KubeFedCluster").is_some());
        assert!(not_federatable("scheduling.kubefed.io", "ReplicaSchedulingPreference").is_some());
        assert_eq!(not_federatable("", "ConfigMap"), None);
        assert_eq!(not_federatable("apps", "Deployment"), None);
        // A CRD of someone else's whose kind starts alike.
        assert_eq!(not_federatable("example.com", "FederatedWidget"), None);
        assert_eq!(not_federatable("notkubefed.io", "FederatedWidget"), None);
    }

    use super::*;

    fn fed(kind: &str, namespaced: bool) -> FederatedResource {
        FederatedResource {
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
                     "healthCheckNodePort": 31000,
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
        assert_eq!(obj["spec"]["template"], json!({"spec": {}}));
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

    #[test]
    fn names_that_are_not_dns_1123_subdomains_are_skipped_with_a_warning() {
        let cr = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                        "metadata": {"name": "system:controller:x"}});
        let w = invalid_name_warning(&cr).expect("a colon is not allowed");
        assert!(
            w.starts_with("skipping ClusterRole \"system:controller:x\" because its name does not conform to the DNS-1123 subdomain spec ("),
            "{w}"
        );
        assert!(w.contains("(found ':')"), "{w}");
        let role = json!({"kind": "Role", "metadata": {"name": "Reader", "namespace": "demo"}});
        assert!(
            invalid_name_warning(&role)
                .unwrap()
                .contains("Role \"demo/Reader\""),
            "names the namespace too"
        );
        for ok in ["web", "a.b-c", "kube-root-ca.crt", "x1"] {
            let cm = json!({"kind": "ConfigMap", "metadata": {"name": ok, "namespace": "d"}});
            assert_eq!(invalid_name_warning(&cm), None, "{ok}");
        }
        let long = json!({"kind": "Role", "metadata": {"name": "a".repeat(254)}});
        assert!(invalid_name_warning(&long).is_some());
    }

    #[test]
    fn system_namespaces_get_a_note() {
        for ns in ["default", "kube-system", "kube-public", "fed-system"] {
            let note = system_namespace_note(ns, "fed-system").expect(ns);
            assert!(
                note.starts_with(&format!("{ns:?} is a system namespace"))
                    && note.contains("will not propagate the namespace itself")
                    && note.contains("still propagated"),
                "{note}"
            );
        }
        assert_eq!(system_namespace_note("shop", "fed-system"), None);
        assert_eq!(
            system_namespace_note("kube-federation-system", "fed-system"),
            None,
            "only the federation namespace in use"
        );
    }

    fn served(group: &str, kind: &str, plural: &str, namespaced: bool) -> ServedResource {
        ServedResource {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
            preferred: true,
            verbs: vec!["list".into(), "create".into()],
            ..Default::default()
        }
    }

    #[test]
    fn contents_skip_list_is_upstreams_plus_ours() {
        let none: &[String] = &[];
        // Upstream's: controller-created types, matched as -s names are.
        assert!(skipped_in_contents(
            &served("", "Endpoints", "endpoints", true),
            none
        ));
        assert!(skipped_in_contents(
            &served("", "Event", "events", true),
            none
        ));
        assert!(skipped_in_contents(
            &served("events.k8s.io", "Event", "events", true),
            none
        ));
        assert!(skipped_in_contents(
            &served(
                "core.kubefed.io",
                "PropagatedVersion",
                "propagatedversions",
                true
            ),
            none
        ));
        // Upstream's: extensions, cluster-scoped, federated types.
        assert!(skipped_in_contents(
            &served("extensions", "Ingress", "ingresses", true),
            none
        ));
        assert!(skipped_in_contents(
            &served("", "Node", "nodes", false),
            none
        ));
        assert!(skipped_in_contents(
            &served(
                "types.kubefed.io",
                "FederatedConfigMap",
                "federatedconfigmaps",
                true
            ),
            none
        ));
        assert!(
            !skipped_in_contents(
                &served("example.com", "FederatedThing", "federatedthings", true),
                none
            ),
            "as upstream, only the default federated group counts as federated"
        );
        // Ours: EndpointSlices, KubeFed's own groups, types that cannot be listed.
        assert!(skipped_in_contents(
            &served("discovery.k8s.io", "EndpointSlice", "endpointslices", true),
            none
        ));
        assert!(skipped_in_contents(
            &served(
                "scheduling.kubefed.io",
                "ReplicaSchedulingPreference",
                "replicaschedulingpreferences",
                true
            ),
            none
        ));
        assert!(skipped_in_contents(
            &served(
                "multiclusterdns.kubefed.io",
                "ServiceDNSRecord",
                "servicednsrecords",
                true
            ),
            none
        ));
        assert!(skipped_in_contents(
            &served("core.kubefed.io", "KubeFedCluster", "kubefedclusters", true),
            none
        ));
        let mut binding = served("", "Binding", "bindings", true);
        binding.verbs = vec!["create".into()];
        assert!(skipped_in_contents(&binding, none));
        // What is left is federated.
        for r in [
            served("", "ConfigMap", "configmaps", true),
            served("", "Secret", "secrets", true),
            served("apps", "Deployment", "deployments", true),
            served("rbac.authorization.k8s.io", "Role", "roles", true),
            served("networking.k8s.io", "Ingress", "ingresses", true),
            served("example.com", "Gizmo", "gizmos", true),
        ] {
            assert!(!skipped_in_contents(&r, none), "{}", r.qualified_name());
        }
    }

    #[test]
    fn contents_skip_names_from_the_command_line() {
        let s = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let mut pods = served("", "Pod", "pods", true);
        pods.short_names = vec!["po".into()];
        let deploy = served("apps", "Deployment", "deployments", true);
        for key in ["pods", "pod", "Pod", "po"] {
            assert!(skipped_in_contents(&pods, &s(&[key])), "{key}");
        }
        assert!(skipped_in_contents(&deploy, &s(&["deployments.apps"])));
        assert!(skipped_in_contents(&deploy, &s(&["apps"])), "a whole group");
        assert!(!skipped_in_contents(&deploy, &s(&["pods"])));
        assert!(
            !skipped_in_contents(&pods, &s(&["", "apps", " "])),
            "an empty name (from `-s pods,`) does not name the core group"
        );
    }
}
