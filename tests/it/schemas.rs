//! `enable --template-schema embed` keeps the target's rich schema: a CRD's
//! own (its rules included) and a built-in's from OpenAPI v3, or v2 where
//! the host serves no v3 (1.20). The host then refuses a template as the
//! member would refuse the object.

use crate::fixtures::{create, get, kubefedctl, request, wait_until, write_kubeconfig};
use serde_json::{Value, json};
use std::path::PathBuf;
use testenv::{TestEnv, Version};

const FED_GROUP: &str = "schemas.kubefed.io";

/// A kubeconfig through a counting proxy of the host, and a kubefed
/// namespace made by `init`.
fn setup(env: &TestEnv, fedns: &str) -> (testenv::Proxy, PathBuf) {
    let proxy = env.proxy("host").unwrap();
    let kc = write_kubeconfig(
        env,
        fedns,
        env.kubeconfig()
            .current_context("host")
            .server("host", &proxy.url()),
    );
    kubefedctl(&kc, &["init", "--kubefed-namespace", fedns]).ok();
    (proxy, kc)
}

fn template_of(env: &TestEnv, crd: &str) -> Value {
    let c = get(
        env,
        "host",
        &format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}"),
    )
    .unwrap_or_else(|| panic!("CRD {crd} missing"));
    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["template"]
        .clone()
}

/// The release that enforces `x-kubernetes-validations` by default (1.20
/// stores CRDs without them: it drops the field it does not know).
fn has_rules(v: Version) -> bool {
    v.minor >= 25
}

fn gauge_crd() -> Value {
    let spec_properties = json!({
        "replicas": {"type": "integer", "format": "int32", "default": 1},
        "maxReplicas": {"type": "integer", "format": "int32", "default": 3},
        "mode": {"type": "string", "default": "fast"},
        "note": {"type": "string", "nullable": true},
        "surge": {"x-kubernetes-int-or-string": true,
                  "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "ports": {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["port", "protocol"],
            "items": {"type": "object", "required": ["port"], "properties": {
                "port": {"type": "integer"},
                "protocol": {"type": "string", "default": "TCP"}}}},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "labels": {"type": "object", "x-kubernetes-map-type": "granular",
            "additionalProperties": {"type": "string"}},
        "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
            "properties": {"app": {"type": "string"}}},
        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "embedded": {"type": "object", "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": true}
    });
    let schema = json!({"type": "object",
    "x-kubernetes-validations": [
        {"rule": "self.metadata.name.size() < 40", "message": "short names only"}],
    "properties": {
        "spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.replicas <= self.maxReplicas", "message": "replicas must not exceed maxReplicas"},
                {"rule": "self.mode == oldSelf.mode", "message": "mode is immutable"}],
            "properties": spec_properties},
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
    }});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gauges.schemas.example.com"},
        "spec": {"group": "schemas.example.com", "scope": "Namespaced",
            "names": {"kind": "Gauge", "plural": "gauges", "singular": "gauge"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": schema}}]}
    })
}

#[test]
fn a_crds_own_schema_keeps_every_keyword_and_the_host_enforces_its_rules() {
    let env = TestEnv::shared();
    let rules = has_rules(env.version());
    let (proxy, kc) = setup(env, "schemas-a");
    let (code, body) = create(
        env,
        "host",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        gauge_crd(),
    );
    assert_eq!(code, 201, "{body}");
    // A new CRD's storage may answer 429 for a moment (1.37).
    wait_until("gauges served", || {
        request(
            env,
            "host",
            "GET",
            "/apis/schemas.example.com/v1/gauges",
            None,
        )
        .0 == 200
    });

    let enable = [
        "enable",
        "gauges.schemas.example.com",
        "--template-schema",
        "embed",
        "--federated-group",
        FED_GROUP,
        "--kubefed-namespace",
        "schemas-a",
    ];
    let run = kubefedctl(&kc, &enable).ok();
    // The root's rule reads metadata, which a template does not carry.
    assert_eq!(
        run.stderr.contains(
            "leaves out rule \"self.metadata.name.size() < 40\" at the root: it reads metadata"
        ),
        rules,
        "{}",
        run.stderr
    );

    let t = template_of(env, "federatedgauges.schemas.kubefed.io");
    assert!(
        t.get("x-kubernetes-validations").is_none(),
        "the root's only rule is left out: {t}"
    );
    let spec = &t["properties"]["spec"];
    let p = &spec["properties"];
    assert_eq!(p["replicas"]["default"], 1);
    assert_eq!(p["mode"]["default"], "fast");
    assert_eq!(p["note"]["nullable"], true);
    assert_eq!(p["surge"]["x-kubernetes-int-or-string"], true);
    assert_eq!(p["ports"]["x-kubernetes-list-type"], "map");
    assert_eq!(
        p["ports"]["x-kubernetes-list-map-keys"],
        json!(["port", "protocol"])
    );
    assert_eq!(
        p["ports"]["items"]["properties"]["protocol"]["default"],
        "TCP"
    );
    assert_eq!(p["tags"]["x-kubernetes-list-type"], "set");
    assert_eq!(p["labels"]["x-kubernetes-map-type"], "granular");
    assert_eq!(p["selector"]["x-kubernetes-map-type"], "atomic");
    assert_eq!(p["extra"]["x-kubernetes-preserve-unknown-fields"], true);
    assert_eq!(p["embedded"]["x-kubernetes-embedded-resource"], true);
    let spec_rules: Vec<&str> = spec["x-kubernetes-validations"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["rule"].as_str()).collect())
        .unwrap_or_default();
    let want: &[&str] = if rules {
        &[
            "self.replicas <= self.maxReplicas",
            "self.mode == oldSelf.mode",
        ]
    } else {
        &[]
    };
    assert_eq!(spec_rules, want, "{spec}");

    // The host checks templates as a member checks Gauges.
    let path = "/apis/schemas.kubefed.io/v1beta1/namespaces/default/federatedgauges";
    let gauge = |name: &str, spec: Value| {
        json!({"apiVersion": "schemas.kubefed.io/v1beta1", "kind": "FederatedGauge",
               "metadata": {"name": name},
               "spec": {"template": {"spec": spec}, "placement": {"clusterSelector": {}}}})
    };
    let (code, body) = create(
        env,
        "host",
        path,
        gauge("schemas-too-many", json!({"replicas": 5, "maxReplicas": 3})),
    );
    if rules {
        assert_eq!(code, 422, "{body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("replicas must not exceed maxReplicas"),
            "{body}"
        );
    } else {
        assert_eq!(code, 201, "1.20 has no rules to check: {body}");
    }
    let (code, body) = create(
        env,
        "host",
        path,
        gauge(
            "schemas-ok",
            json!({"replicas": 2, "ports": [{"port": 80}]}),
        ),
    );
    assert_eq!(code, 201, "{body}");
    let stored = &body["spec"]["template"]["spec"];
    assert_eq!(stored["maxReplicas"], 3, "defaulted: {body}");
    assert_eq!(stored["mode"], "fast", "defaulted: {body}");
    assert_eq!(stored["ports"][0]["protocol"], "TCP", "defaulted: {body}");

    // The transition rule compares the new template with the last one.
    let (code, body) = request(
        env,
        "host",
        "PATCH",
        &format!("{path}/schemas-ok"),
        Some(json!({"spec": {"template": {"spec": {"mode": "slow"}}}})),
    );
    if rules {
        assert_eq!(code, 422, "{body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("mode is immutable"),
            "{body}"
        );
    } else {
        assert_eq!(code, 200, "{body}");
    }

    // What the host stored is what was generated: enabling again writes nothing.
    proxy.reset_records();
    let again = kubefedctl(&kc, &enable).ok();
    assert_eq!(proxy.writes(), 0, "{}", again.stdout);
    assert_eq!(again.stdout.matches(" unchanged (host)").count(), 2);
}

#[test]
fn a_built_in_types_schema_comes_from_openapi_v3_in_two_requests() {
    let env = TestEnv::shared();
    let v3 = env.version().minor >= 24;
    let (proxy, kc) = setup(env, "schemas-b");
    proxy.reset_records();
    kubefedctl(
        &kc,
        &[
            "enable",
            "deployments.apps",
            "--template-schema",
            "embed",
            "--federated-group",
            FED_GROUP,
            "--kubefed-namespace",
            "schemas-b",
        ],
    )
    .ok();
    let openapi: Vec<String> = proxy
        .records()
        .iter()
        .filter(|r| r.path.starts_with("/openapi"))
        .map(|r| format!("{} {}", r.path, r.status))
        .collect();
    let want = if v3 {
        // The index, then apps/v1's document alone.
        ["/openapi/v3 200", "/openapi/v3/apis/apps/v1 200"]
    } else {
        // 1.20 serves no v3: its 404, then the whole v2 document.
        ["/openapi/v3 404", "/openapi/v2 200"]
    };
    assert_eq!(openapi, want);
    assert_eq!(proxy.count(|r| r.path.starts_with("/openapi")), 2);

    let t = template_of(env, "federateddeployments.schemas.kubefed.io");
    let spec = &t["properties"]["spec"]["properties"];
    assert_eq!(
        spec["strategy"]["properties"]["rollingUpdate"]["properties"]["maxSurge"],
        json!({"x-kubernetes-int-or-string": true})
    );
    let pod = &spec["template"]["properties"]["spec"]["properties"];
    // Both releases say it in v2 and v3 alike.
    assert_eq!(
        pod["topologySpreadConstraints"]["x-kubernetes-list-map-keys"],
        json!(["topologyKey", "whenUnsatisfiable"])
    );
    let containers = &pod["containers"];
    let ports = &containers["items"]["properties"]["ports"];
    if v3 {
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
        assert_eq!(ports["x-kubernetes-list-type"], "map");
        assert_eq!(
            ports["x-kubernetes-list-map-keys"],
            json!(["containerPort", "protocol"])
        );
        assert_eq!(ports["items"]["properties"]["protocol"]["default"], "TCP");
        // Go's zero values are not stamped on every template.
        assert!(
            containers["items"]["properties"]["resources"]
                .get("default")
                .is_none()
        );
    } else {
        // 1.20's v2 has no list type for containers, and no default for a
        // port's protocol, which a map list's key needs: a plain list.
        assert!(
            containers.get("x-kubernetes-list-type").is_none(),
            "{containers}"
        );
        assert!(ports.get("x-kubernetes-list-type").is_none(), "{ports}");
    }

    // Duplicate container names: refused by the host where it knows the
    // list is a map, as the member refuses the Deployment.
    let path = "/apis/schemas.kubefed.io/v1beta1/namespaces/default/federateddeployments";
    let container = json!({"name": "app", "image": "nginx", "ports": [{"containerPort": 80}]});
    let (code, body) = create(
        env,
        "host",
        path,
        json!({"apiVersion": "schemas.kubefed.io/v1beta1", "kind": "FederatedDeployment",
               "metadata": {"name": "schemas-twins"},
               "spec": {"placement": {"clusterSelector": {}}, "template": {"spec": {
                   "selector": {"matchLabels": {"app": "a"}},
                   "template": {"metadata": {"labels": {"app": "a"}},
                                "spec": {"containers": [container.clone(), container]}}}}}}),
    );
    if v3 {
        assert_eq!(code, 422, "{body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("Duplicate value"),
            "{body}"
        );
    } else {
        assert_eq!(code, 201, "{body}");
    }
}
