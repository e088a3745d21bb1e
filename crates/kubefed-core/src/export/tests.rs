//! Table tests of the Karmada export.

use serde_json::{Value, json};

use super::FindingKind;
use super::karmada::{Affinity, FederatedType, Input, cluster, export};
use crate::cluster::membership::Scope;

fn deployment_type() -> FederatedType {
    FederatedType::builtin("types.kubefed.io", "FederatedDeployment").unwrap()
}

fn fed(kind: &str, ns: &str, name: &str, spec: Value) -> Value {
    let mut metadata = json!({"name": name});
    if !ns.is_empty() {
        metadata["namespace"] = json!(ns);
    }
    json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": kind, "metadata": metadata, "spec": spec})
}

fn fed_ns(name: &str, placement: Value) -> Value {
    fed(
        "FederatedNamespace",
        name,
        name,
        json!({"placement": placement}),
    )
}

fn run(federated: &[Value], rsps: &[Value], scope: Scope) -> super::karmada::Export {
    let types = vec![
        deployment_type(),
        FederatedType::builtin("types.kubefed.io", "FederatedNamespace").unwrap(),
        FederatedType::builtin("types.kubefed.io", "FederatedClusterRole").unwrap(),
        FederatedType::builtin("types.kubefed.io", "FederatedConfigMap").unwrap(),
    ];
    export(&Input {
        clusters: &[],
        secrets: &[],
        type_configs: &[],
        types: &types,
        federated,
        rsps,
        crds: &[],
        scope,
        with_tokens: false,
    })
}

fn find<'a>(objects: &'a [Value], kind: &str) -> Option<&'a Value> {
    objects.iter().find(|o| o["kind"] == kind)
}

#[test]
fn builtin_types_are_named_by_their_federated_kind() {
    let cases = [
        ("FederatedDeployment", "apps/v1", "Deployment", true),
        ("FederatedNamespace", "v1", "Namespace", false),
        (
            "FederatedClusterRole",
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            false,
        ),
        ("FederatedIngress", "networking.k8s.io/v1", "Ingress", true),
        ("FederatedJob", "batch/v1", "Job", true),
    ];
    for (kind, api, target, namespaced) in cases {
        let t = FederatedType::builtin("types.kubefed.io", kind).unwrap();
        assert_eq!(
            (
                t.target_api_version.as_str(),
                t.target_kind.as_str(),
                t.namespaced
            ),
            (api, target, namespaced),
            "{kind}"
        );
    }
    assert!(FederatedType::builtin("types.kubefed.io", "FederatedEtcdCluster").is_none());
    assert!(FederatedType::builtin("types.kubefed.io", "Deployment").is_none());
}

#[test]
fn a_fork_type_comes_from_its_federated_type_config() {
    let ftc = json!({
        "metadata": {"name": "etcdclusters.etcd.database.coreos.com"},
        "spec": {
            "targetType": {"group": "etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdCluster", "pluralName": "etcdclusters", "scope": "Namespaced"},
            "federatedType": {"group": "types.fork.example", "version": "v1", "kind": "FederatedEtcdCluster", "pluralName": "federatedetcdclusters", "scope": "Namespaced"}
        }
    });
    let t = FederatedType::from_ftc(&ftc).unwrap();
    assert_eq!(t.target_api_version, "etcd.database.coreos.com/v1beta2");
    assert_eq!(t.federated_group, "types.fork.example");
    assert!(t.namespaced);
    let obj = json!({"apiVersion": "types.fork.example/v1", "kind": "FederatedEtcdCluster",
        "metadata": {"name": "e", "namespace": "n"},
        "spec": {"template": {"spec": {"size": 3}}, "placement": {"clusters": [{"name": "a"}]}}});
    let out = export(&Input {
        clusters: &[],
        secrets: &[],
        type_configs: std::slice::from_ref(&ftc),
        types: &[t],
        federated: std::slice::from_ref(&obj),
        rsps: &[],
        crds: &[],
        scope: Scope::Namespaced,
        with_tokens: false,
    });
    let template = find(&out.objects, "EtcdCluster").unwrap();
    assert_eq!(template["apiVersion"], "etcd.database.coreos.com/v1beta2");
    assert_eq!(template["spec"]["size"], 3);
    let pp = find(&out.objects, "PropagationPolicy").unwrap();
    assert_eq!(
        pp["spec"]["placement"]["clusterAffinity"]["clusterNames"],
        json!(["a"])
    );
    // The FTC is listed, with a note only.
    let listed = out
        .reports
        .iter()
        .find(|r| r.object.starts_with("FederatedTypeConfig"))
        .unwrap();
    assert!(!listed.inexact());
    assert!(!out.inexact(), "{:?}", out.reports);
}

#[test]
fn placements_become_cluster_affinities() {
    let sel = json!({"matchLabels": {"region": "eu"}});
    let cases: Vec<(Value, Result<Affinity, ()>)> = vec![
        (
            json!({"clusters": [{"name": "a"}, {"name": "b"}]}),
            Ok(Affinity::Names(["a".into(), "b".into()].into())),
        ),
        // An explicit list wins over the selector, even when empty.
        (
            json!({"clusters": [], "clusterSelector": sel}),
            Ok(Affinity::Nowhere),
        ),
        (
            json!({"clusterSelector": sel}),
            Ok(Affinity::Selector(sel.clone())),
        ),
        (
            json!({"clusterSelector": {}}),
            Ok(Affinity::Selector(json!({}))),
        ),
        (json!({}), Ok(Affinity::Nowhere)),
        (json!({"clusters": "a"}), Err(())),
        (
            json!({"clusterSelector": {"matchExpressions": [{"key": "k", "operator": "Bogus"}]}}),
            Err(()),
        ),
    ];
    for (placement, want) in cases {
        let got = Affinity::of(&json!({"spec": {"placement": placement}}), false).map_err(|_| ());
        assert_eq!(got, want, "{placement}");
    }
}

#[test]
fn a_federated_namespace_narrows_its_contents_exactly() {
    let names = |n: &[&str]| Affinity::Names(n.iter().map(|s| s.to_string()).collect());
    let eu = json!({"matchLabels": {"region": "eu"}});
    let prod = json!({"matchLabels": {"env": "prod"}, "matchExpressions": [{"key": "x", "operator": "Exists"}]});
    let cases = vec![
        (names(&["a", "b"]), names(&["b", "c"]), names(&["b"])),
        (names(&["a"]), names(&["c"]), Affinity::Nowhere),
        (
            names(&["a"]),
            Affinity::Selector(eu.clone()),
            Affinity::Both(["a".into()].into(), eu.clone()),
        ),
        (
            Affinity::Selector(eu.clone()),
            Affinity::Selector(prod.clone()),
            Affinity::Selector(
                json!({"matchLabels": {"region": "eu", "env": "prod"}, "matchExpressions": [{"key": "x", "operator": "Exists"}]}),
            ),
        ),
        (
            Affinity::Selector(eu.clone()),
            Affinity::Selector(json!({"matchLabels": {"region": "us"}})),
            Affinity::Nowhere,
        ),
        (Affinity::All, names(&["a"]), names(&["a"])),
        (Affinity::All, Affinity::All, Affinity::All),
        (Affinity::Nowhere, Affinity::All, Affinity::Nowhere),
    ];
    for (a, b, want) in cases {
        assert_eq!(a.clone().intersect(b.clone()), want, "{a:?} ∩ {b:?}");
    }
}

#[test]
fn a_deployment_gets_a_template_a_policy_and_an_override_policy() {
    let d = fed(
        "FederatedDeployment",
        "shop",
        "web",
        json!({
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"replicas": 2}},
            "placement": {"clusters": [{"name": "a"}, {"name": "b"}]},
            "overrides": [{"clusterName": "a", "clusterOverrides": [
                {"path": "/spec/replicas", "value": 1},
                {"path": "/spec/paused", "value": true},
                {"path": "/metadata/labels/app", "op": "remove"},
                {"path": "spec/replicas", "op": "add", "value": 5}
            ]}]
        }),
    );
    let out = run(
        &[d, fed_ns("shop", json!({"clusterSelector": {}}))],
        &[],
        Scope::Cluster,
    );
    let t = find(&out.objects, "Deployment").unwrap();
    assert_eq!(t["apiVersion"], "apps/v1");
    assert_eq!(
        t["metadata"],
        json!({"name": "web", "namespace": "shop", "labels": {"app": "web"}})
    );
    let pp = find(&out.objects, "PropagationPolicy").unwrap();
    assert_eq!(
        pp["metadata"],
        json!({"name": "web-deployment", "namespace": "shop"})
    );
    assert_eq!(pp["spec"]["conflictResolution"], "Overwrite");
    assert_eq!(
        pp["spec"]["resourceSelectors"],
        json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}])
    );
    assert_eq!(
        pp["spec"]["placement"]["clusterAffinity"],
        json!({"clusterNames": ["a", "b"], "labelSelector": {}})
    );
    let op = find(&out.objects, "OverridePolicy").unwrap();
    let rules = &op["spec"]["overrideRules"];
    assert_eq!(rules[0]["targetCluster"], json!({"clusterNames": ["a"]}));
    assert_eq!(
        rules[0]["overriders"]["plaintext"],
        json!([
            {"path": "/spec/replicas", "operator": "replace", "value": 1},
            // replace of a field the template lacks: KubeFed's engine added it
            {"path": "/spec/paused", "operator": "add", "value": true},
            {"path": "/metadata/labels/app", "operator": "remove"},
            // the first segment of a relative path is dropped, as KubeFed did
            {"path": "/replicas", "operator": "add", "value": 5}
        ])
    );
    assert!(!out.inexact(), "{:?}", out.reports);
    let report = out
        .reports
        .iter()
        .find(|r| r.object == "FederatedDeployment shop/web")
        .unwrap();
    assert_eq!(
        report.produced,
        [
            "apps/v1 Deployment shop/web",
            "policy.karmada.io/v1alpha1 PropagationPolicy shop/web-deployment",
            "policy.karmada.io/v1alpha1 OverridePolicy shop/web-deployment"
        ]
    );
    // Objects come in the order to apply them: namespace, templates,
    // overrides, then placements (no copy is ever written without its
    // overrides).
    let kinds: Vec<&str> = out
        .objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "Deployment",
            "OverridePolicy",
            "PropagationPolicy",
            "ClusterPropagationPolicy"
        ]
    );
}

#[test]
fn nowhere_and_namespaces_without_federated_namespace_write_no_policy() {
    let cm = |ns: &str, placement: Value| {
        fed(
            "FederatedConfigMap",
            ns,
            "c",
            json!({"template": {"data": {"k": "v"}}, "placement": placement}),
        )
    };
    let cases = [
        // (object, its FederatedNamespace, scope, policy written)
        (
            cm("x", json!({"clusters": []})),
            Some(json!({"clusterSelector": {}})),
            Scope::Cluster,
            false,
        ),
        (
            cm("x", json!({"clusterSelector": {}})),
            None,
            Scope::Cluster,
            false,
        ),
        (
            cm("x", json!({"clusterSelector": {}})),
            None,
            Scope::Namespaced,
            true,
        ),
        (
            cm("x", json!({"clusters": [{"name": "a"}]})),
            Some(json!({"clusters": [{"name": "b"}]})),
            Scope::Cluster,
            false,
        ),
        (
            cm("x", json!({"clusters": [{"name": "a"}]})),
            Some(json!({"clusters": [{"name": "a"}]})),
            Scope::Cluster,
            true,
        ),
    ];
    for (obj, ns, scope, policy) in cases {
        let mut input = vec![obj.clone()];
        input.extend(ns.clone().map(|p| fed_ns("x", p)));
        let out = run(&input, &[], scope);
        let pp = out.objects.iter().any(|o| o["kind"] == "PropagationPolicy");
        assert_eq!(pp, policy, "{obj} with {ns:?} in {scope:?}");
        assert!(
            find(&out.objects, "ConfigMap").is_some(),
            "the template is always written"
        );
        assert!(!out.inexact(), "nowhere is exact: {:?}", out.reports);
    }
}

#[test]
fn a_federated_namespace_is_kept_out_of_automatic_propagation() {
    let out = run(
        &[fed_ns("shop", json!({"clusters": [{"name": "a"}]}))],
        &[],
        Scope::Cluster,
    );
    let ns = find(&out.objects, "Namespace").unwrap();
    assert_eq!(ns["apiVersion"], "v1");
    assert_eq!(
        ns["metadata"],
        json!({"name": "shop", "labels": {"namespace.karmada.io/skip-auto-propagation": "true"}})
    );
    let cpp = find(&out.objects, "ClusterPropagationPolicy").unwrap();
    // No permanent-id label: Karmada's webhook sets its own at creation
    // and refuses any other value afterwards.
    assert_eq!(cpp["metadata"], json!({"name": "shop-namespace"}));
    assert_eq!(
        cpp["spec"]["resourceSelectors"],
        json!([{"apiVersion": "v1", "kind": "Namespace", "name": "shop"}])
    );
    assert_eq!(
        cpp["spec"]["placement"]["clusterAffinity"],
        json!({"clusterNames": ["a"]})
    );
}

#[test]
fn a_cluster_scoped_type_gets_cluster_policies() {
    let cr = fed(
        "FederatedClusterRole",
        "",
        "viewer",
        json!({
            "template": {"rules": []},
            "placement": {"clusterSelector": {"matchLabels": {"env": "prod"}}},
            "overrides": [{"clusterName": "a", "clusterOverrides": [{"path": "/rules", "value": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}]}]
        }),
    );
    let out = run(&[cr], &[], Scope::Cluster);
    let t = find(&out.objects, "ClusterRole").unwrap();
    assert_eq!(t["metadata"], json!({"name": "viewer"}));
    let cpp = find(&out.objects, "ClusterPropagationPolicy").unwrap();
    assert_eq!(
        cpp["spec"]["placement"]["clusterAffinity"],
        json!({"labelSelector": {"matchLabels": {"env": "prod"}}})
    );
    assert!(find(&out.objects, "ClusterOverridePolicy").is_some());
}

fn rsp(spec: Value) -> Value {
    json!({"apiVersion": "scheduling.kubefed.io/v1alpha1", "kind": "ReplicaSchedulingPreference",
        "metadata": {"name": "web", "namespace": "shop"}, "spec": spec})
}

fn scheduled(spec: Value, placement: Value) -> (super::karmada::Export, Value) {
    let d = fed(
        "FederatedDeployment",
        "shop",
        "web",
        json!({
            "template": {"spec": {"replicas": 1}},
            "placement": placement,
            "overrides": [{"clusterName": "a", "clusterOverrides": [{"path": "/spec/replicas", "value": 4}]}]
        }),
    );
    let out = run(&[d], &[rsp(spec)], Scope::Namespaced);
    let pp = find(&out.objects, "PropagationPolicy")
        .cloned()
        .unwrap_or(Value::Null);
    (out, pp)
}

#[test]
fn an_rsp_becomes_static_weights() {
    let (out, pp) = scheduled(
        json!({"targetKind": "FederatedDeployment", "totalReplicas": 9, "clusters": {"a": {"weight": 2}, "b": {"weight": 1}, "c": {"weight": 0}}}),
        json!({"clusters": [{"name": "a"}]}),
    );
    assert_eq!(
        find(&out.objects, "Deployment").unwrap()["spec"]["replicas"],
        9
    );
    // Without intersectWithClusterSelector KubeFed schedules over every cluster.
    assert_eq!(pp["spec"]["placement"]["clusterAffinity"], json!({}));
    assert_eq!(
        pp["spec"]["placement"]["replicaScheduling"],
        json!({
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "Weighted",
            "weightPreference": {"staticWeightList": [
                {"targetCluster": {"clusterNames": ["a"]}, "weight": 2},
                {"targetCluster": {"clusterNames": ["b"]}, "weight": 1}
            ]}
        })
    );
    // The RSP's own replicas override is left to Karmada's scheduler.
    assert!(find(&out.objects, "OverridePolicy").is_none());
    assert!(!out.inexact(), "{:?}", out.reports);
}

#[test]
fn rsp_fields_without_equivalent_are_reported() {
    let cases: Vec<(Value, &[&str])> = vec![
        (
            json!({"a": {"weight": 1, "minReplicas": 2}}),
            &["spec.clusters.a.minReplicas"],
        ),
        (
            json!({"a": {"weight": 1, "maxReplicas": 3}}),
            &["spec.clusters.a.maxReplicas"],
        ),
        (
            json!({"a": {"minReplicas": 3}}),
            &["spec.clusters.a.minReplicas", "spec.clusters"],
        ),
        (json!({"*": {"weight": 1}}), &[]),
    ];
    for (clusters, fields) in cases {
        let (out, _) = scheduled(
            json!({"targetKind": "FederatedDeployment", "totalReplicas": 5, "clusters": clusters}),
            json!({}),
        );
        let found: Vec<String> = out
            .reports
            .iter()
            .flat_map(|r| &r.findings)
            .filter(|f| f.kind == FindingKind::Approximated)
            .map(|f| f.field.rsplit(": ").next().unwrap().to_string())
            .collect();
        assert_eq!(found, fields, "{clusters}");
    }
    let (out, _) = scheduled(
        json!({"targetKind": "FederatedDeployment", "totalReplicas": 5, "rebalance": true}),
        json!({}),
    );
    assert!(out.inexact());
}

#[test]
fn the_rsp_wildcard_excludes_the_named_clusters() {
    let (_, pp) = scheduled(
        json!({"targetKind": "FederatedDeployment", "totalReplicas": 6, "intersectWithClusterSelector": true,
               "clusters": {"*": {"weight": 1}, "a": {"weight": 3}}}),
        json!({"clusters": [{"name": "ignored"}], "clusterSelector": {"matchLabels": {"tier": "1"}}}),
    );
    assert_eq!(
        pp["spec"]["placement"]["replicaScheduling"]["weightPreference"]["staticWeightList"],
        json!([
            {"targetCluster": {"exclude": ["a"]}, "weight": 1},
            {"targetCluster": {"clusterNames": ["a"]}, "weight": 3}
        ])
    );
    // In intersect mode the RSP reads only the selector, as KubeFed does.
    assert_eq!(
        pp["spec"]["placement"]["clusterAffinity"],
        json!({"labelSelector": {"matchLabels": {"tier": "1"}}})
    );
}

#[test]
fn unknown_types_and_fork_fields_are_not_mapped() {
    let unknown = json!({"apiVersion": "types.fork.example/v1", "kind": "FederatedWidget", "metadata": {"name": "w", "namespace": "n"}, "spec": {}});
    let extra = fed(
        "FederatedConfigMap",
        "n",
        "c",
        json!({"template": {}, "placement": {"clusters": []}, "retention": {"x": 1}}),
    );
    let out = run(&[unknown, extra], &[], Scope::Namespaced);
    let fields: Vec<(&str, FindingKind)> = out
        .reports
        .iter()
        .flat_map(|r| &r.findings)
        .map(|f| (f.field.as_str(), f.kind))
        .filter(|(_, k)| *k == FindingKind::NotMapped)
        .collect();
    assert_eq!(
        fields,
        [
            ("", FindingKind::NotMapped),
            ("spec.retention", FindingKind::NotMapped)
        ]
    );
    assert!(out.inexact());
}

#[test]
fn a_kubefed_cluster_becomes_a_push_cluster_without_its_token() {
    let kfc = json!({"metadata": {"name": "member1", "namespace": "kube-federation-system", "labels": {"region": "eu"}},
        "spec": {"apiEndpoint": "https://10.0.0.1:6443", "caBundle": "Q0E=", "secretRef": {"name": "member1-x"}, "proxyURL": "", "disabledTLSValidations": ["*"]}});
    let secret = json!({"metadata": {"name": "member1-x", "namespace": "kube-federation-system"}, "data": {"token": "c2VjcmV0"}});
    let (objects, report) = cluster(&kfc, std::slice::from_ref(&secret), false);
    assert_eq!(
        objects[1],
        json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": "member1", "labels": {"region": "eu"}},
        "spec": {"syncMode": "Push", "apiEndpoint": "https://10.0.0.1:6443",
                 "secretRef": {"namespace": "karmada-cluster", "name": "member1"},
                 "insecureSkipTLSVerification": true}})
    );
    assert_eq!(objects[0]["data"], json!({"caBundle": "Q0E="}));
    assert!(
        !serde_json::to_string(&objects)
            .unwrap()
            .contains("c2VjcmV0")
    );
    assert!(!report.inexact());
    assert!(
        report.findings[0]
            .message
            .contains("kube-federation-system/member1-x")
    );
    let (objects, _) = cluster(&kfc, &[secret], true);
    assert_eq!(objects[0]["data"]["token"], "c2VjcmV0");
    let mut partial = kfc.clone();
    partial["spec"]["disabledTLSValidations"] = json!(["SubjectName"]);
    let (objects, report) = cluster(&partial, &[], false);
    assert!(
        objects[1]["spec"]
            .get("insecureSkipTLSVerification")
            .is_none()
    );
    assert!(report.inexact());
}

#[test]
fn an_expiring_token_is_not_handed_to_karmada_and_migrate_refuses_it() {
    use crate::cluster::token::{TOKEN_EXPIRES_ANNOTATION, TOKEN_TTL_ANNOTATION};
    let lasting = json!({"metadata": {"name": "member1", "namespace": "fed"},
        "spec": {"apiEndpoint": "https://10.0.0.1:6443", "secretRef": {"name": "member1-x"}}});
    let mut expiring = lasting.clone();
    expiring["metadata"]["name"] = json!("member2");
    expiring["spec"]["secretRef"]["name"] = json!("member2-x");
    expiring["metadata"]["annotations"] = json!({
        TOKEN_TTL_ANNOTATION: "3600", TOKEN_EXPIRES_ANNOTATION: "2026-12-06T05:00:00Z"});
    let secret = |name: &str| json!({"metadata": {"name": name, "namespace": "fed"}, "data": {"token": "c2VjcmV0"}});
    let (objects, report) = cluster(&expiring, &[secret("member2-x")], true);
    assert!(objects[0]["data"].get("token").is_none(), "{}", objects[0]);
    assert!(report.inexact());
    let message = &report.findings[0].message;
    assert!(message.contains("2026-12-06T05:00:00Z"), "{message}");
    assert!(message.contains("kubefedctl join member2"), "{message}");
    let (objects, report) = cluster(&lasting, &[secret("member1-x")], true);
    assert_eq!(objects[0]["data"]["token"], "c2VjcmV0");
    assert!(!report.inexact());
    let refused = super::karmada::expiring_tokens(&[lasting, expiring]);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].starts_with("the token of member2 expires"),
        "{refused:?}"
    );
}

#[test]
fn a_fork_group_federated_namespace_still_narrows_its_contents() {
    // `enable --federated-group` puts every federated type, the
    // FederatedNamespace included, in a group of the user's choice.
    let group = "fed.example.com";
    let types = vec![
        FederatedType::builtin(group, "FederatedNamespace").unwrap(),
        FederatedType::builtin(group, "FederatedConfigMap").unwrap(),
    ];
    let with_group = |mut v: Value| {
        v["apiVersion"] = json!(format!("{group}/v1beta1"));
        v
    };
    let objects = vec![
        with_group(fed_ns("x", json!({"clusters": [{"name": "a"}]}))),
        with_group(fed(
            "FederatedConfigMap",
            "x",
            "c",
            json!({"template": {}, "placement": {"clusterSelector": {}}}),
        )),
    ];
    let out = export(&Input {
        clusters: &[],
        secrets: &[],
        type_configs: &[],
        types: &types,
        federated: &objects,
        rsps: &[],
        crds: &[],
        scope: Scope::Cluster,
        with_tokens: false,
    });
    let pp = find(&out.objects, "PropagationPolicy").expect("the namespace is federated");
    assert_eq!(
        pp["spec"]["placement"]["clusterAffinity"],
        json!({"clusterNames": ["a"], "labelSelector": {}})
    );
    let ns = find(&out.objects, "Namespace").unwrap();
    assert_eq!(
        ns["metadata"]["labels"]["namespace.karmada.io/skip-auto-propagation"],
        "true"
    );
}

#[test]
fn a_target_crd_is_written_before_its_templates() {
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com", "uid": "u", "resourceVersion": "9", "generation": 1},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"kind": "Widget", "plural": "widgets"}, "versions": []},
        "status": {"conditions": []}});
    let out = export(&Input {
        clusters: &[],
        secrets: &[],
        type_configs: &[],
        types: &[deployment_type()],
        federated: &[fed(
            "FederatedDeployment",
            "n",
            "d",
            json!({"template": {}, "placement": {"clusters": [{"name": "a"}]}}),
        )],
        rsps: &[],
        crds: std::slice::from_ref(&crd),
        scope: Scope::Namespaced,
        with_tokens: false,
    });
    let kinds: Vec<&str> = out
        .objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "CustomResourceDefinition",
            "Deployment",
            "PropagationPolicy"
        ]
    );
    assert_eq!(
        out.objects[0]["metadata"],
        json!({"name": "widgets.example.com"})
    );
    assert!(out.objects[0].get("status").is_none());
    assert_eq!(out.objects[0]["spec"], crd["spec"]);
    assert!(!out.inexact());
}

#[test]
fn policy_names_are_karmadas_binding_names() {
    let role = FederatedType::builtin("types.kubefed.io", "FederatedClusterRole").unwrap();
    let cases = [
        ("viewer", "viewer-clusterrole"),
        (
            "system:aggregate-to-view",
            "system.aggregate-to-view-clusterrole",
        ),
    ];
    for (name, want) in cases {
        let obj = fed("FederatedClusterRole", "", name, json!({}));
        assert_eq!(super::karmada::policy_name(&obj, &role), want);
    }
}

/// Overrides chosen by cluster label (ours) become Karmada rules with a
/// `labelSelector`, before the named ones, which so still win.
#[test]
fn overrides_chosen_by_label_become_label_selector_rules_first() {
    let d = fed(
        "FederatedDeployment",
        "shop",
        "web",
        json!({
            "template": {"spec": {"replicas": 2}},
            "placement": {"clusterSelector": {}},
            "overrides": [
                {"clusterName": "a", "clusterOverrides": [{"path": "/spec/replicas", "value": 9}]},
                {"clusterSelector": {"matchLabels": {"region": "eu"}},
                 "clusterOverrides": [{"path": "/spec/replicas", "value": 5}]}
            ]
        }),
    );
    let out = run(
        &[d, fed_ns("shop", json!({"clusterSelector": {}}))],
        &[],
        Scope::Cluster,
    );
    let op = find(&out.objects, "OverridePolicy").unwrap();
    let rules = op["spec"]["overrideRules"].as_array().unwrap();
    assert_eq!(rules.len(), 2);
    assert_eq!(
        rules[0]["targetCluster"],
        json!({"labelSelector": {"matchLabels": {"region": "eu"}}})
    );
    assert_eq!(rules[0]["overriders"]["plaintext"][0]["value"], 5);
    assert_eq!(rules[1]["targetCluster"], json!({"clusterNames": ["a"]}));
}

fn crd(group: &str, kind: &str, scope: &str, versions: Value) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": format!("{}s.{group}", kind.to_lowercase())},
           "spec": {"group": group, "scope": scope,
                    "names": {"kind": kind, "plural": format!("{}s", kind.to_lowercase())},
                    "versions": versions}})
}

#[test]
fn a_crd_of_the_input_defines_the_target_of_a_custom_type() {
    let v1 = json!([{"name": "v1beta1", "served": true, "storage": false},
                    {"name": "v1", "served": true, "storage": true}]);
    let widgets = crd("example.com", "Widget", "Namespaced", v1.clone());
    let crds = [
        widgets.clone(),
        // KubeFed's own federated CRD is never a target.
        crd("types.kubefed.io", "Widget", "Namespaced", v1.clone()),
        crd(
            "example.com",
            "Knob",
            "Cluster",
            json!([{"name": "v2", "served": true, "storage": true}]),
        ),
        // Two groups define Gauge: which one is meant cannot be told.
        crd("a.example.com", "Gauge", "Namespaced", v1.clone()),
        crd("b.example.com", "Gauge", "Namespaced", v1),
    ];
    let t = FederatedType::from_crd("types.kubefed.io", "FederatedWidget", &crds).unwrap();
    assert_eq!(t.name, "widgets.example.com");
    assert_eq!(t.target_api_version, "example.com/v1");
    assert_eq!(t.target_kind, "Widget");
    assert!(t.namespaced);
    assert!(t.targets_crd(&widgets));
    assert!(!t.targets_crd(&crds[1]));
    let knob = FederatedType::from_crd("fork.kubefed.io", "FederatedKnob", &crds).unwrap();
    assert_eq!(knob.target_api_version, "example.com/v2");
    assert!(!knob.namespaced);
    assert!(FederatedType::from_crd("types.kubefed.io", "FederatedGauge", &crds).is_none());
    assert!(FederatedType::from_crd("types.kubefed.io", "FederatedDial", &crds).is_none());
    assert!(FederatedType::from_crd("types.kubefed.io", "Widget", &crds).is_none());
    // Built-in types have no CRD.
    assert!(!deployment_type().targets_crd(&widgets));
}

#[test]
fn members_whose_replicas_karmada_changes_are_named_in_the_report() {
    let kfc = |name: &str| {
        json!({"apiVersion": "core.kubefed.io/v1beta1", "kind": "KubeFedCluster",
               "metadata": {"name": name, "namespace": "kube-federation-system"},
               "spec": {"apiEndpoint": "https://x", "secretRef": {"name": name}}})
    };
    let clusters = [kfc("m1"), kfc("m2")];
    let web = fed(
        "FederatedDeployment",
        "shop",
        "web",
        json!({"template": {"spec": {"replicas": 1}}, "placement": {"clusters": [{"name": "m1"}]}}),
    );
    let types = vec![
        deployment_type(),
        FederatedType::builtin("types.kubefed.io", "FederatedNamespace").unwrap(),
    ];
    let federated = [fed_ns("shop", json!({"clusterSelector": {}})), web];
    let fields = |rsp_clusters: Value| -> Vec<String> {
        let rsp = json!({"apiVersion": "scheduling.kubefed.io/v1alpha1", "kind": "ReplicaSchedulingPreference",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"targetKind": "FederatedDeployment", "totalReplicas": 6, "clusters": rsp_clusters}});
        let out = export(&Input {
            clusters: &clusters,
            secrets: &[],
            type_configs: &[],
            types: &types,
            federated: &federated,
            rsps: &[rsp],
            crds: &[],
            scope: Scope::Cluster,
            with_tokens: false,
        });
        out.reports
            .iter()
            .flat_map(|r| &r.findings)
            .filter(|f| f.field.contains(": replicas."))
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect()
    };
    // Exact weights: nothing named.
    assert!(fields(json!({"m1": {"weight": 2}, "m2": {"weight": 1}})).is_empty());
    // A maximum: both members, with both numbers.
    assert_eq!(
        fields(json!({"m1": {"weight": 1, "maxReplicas": 2}, "m2": {"weight": 1}})),
        [
            "ReplicaSchedulingPreference shop/web: replicas.m1: replicas: KubeFed's planner gives 2 here, Karmada's static weights 3",
            "ReplicaSchedulingPreference shop/web: replicas.m2: replicas: KubeFed's planner gives 4 here, Karmada's static weights 3",
        ]
    );
    // A maximum never reached: approximated, but nothing changes.
    assert!(fields(json!({"m1": {"weight": 1, "maxReplicas": 5}, "m2": {"weight": 1}})).is_empty());
}
