//! enable, disable and orphaning-deletion through the built binary against
//! real API servers, with a counting proxy where writes are counted.

use crate::fixtures::{assert_golden, create, get, kubefedctl, root, write_kubeconfig};
use serde_json::{Value, json};
use std::path::PathBuf;
use testenv::TestEnv;

fn init(env: &TestEnv, test: &str, ns: &str) -> PathBuf {
    let kc = write_kubeconfig(env, test, env.kubeconfig().current_context("host"));
    kubefedctl(&kc, &["init", "--kubefed-namespace", ns]).ok();
    kc
}

fn ftc(env: &TestEnv, ns: &str, name: &str) -> Value {
    get(
        env,
        "host",
        &format!("/apis/core.kubefed.io/v1beta1/namespaces/{ns}/federatedtypeconfigs/{name}"),
    )
    .unwrap_or_else(|| panic!("FTC {ns}/{name} missing"))
}

fn crd(env: &TestEnv, name: &str) -> Option<Value> {
    get(
        env,
        "host",
        &format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"),
    )
}

fn spec_schema(crd: &Value) -> &Value {
    &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
}

fn directives() -> String {
    root()
        .join("testdata/enabletypedirectives.yaml")
        .display()
        .to_string()
}

#[test]
fn every_default_type_is_enabled_served_and_idempotent() {
    let env = TestEnv::shared();
    init(env, "types-a-init", "types-a");
    let proxy = env.proxy("host").unwrap();
    let kc = write_kubeconfig(
        env,
        "types-a",
        env.kubeconfig()
            .current_context("host")
            .server("host", &proxy.url()),
    );
    let run = kubefedctl(
        &kc,
        &[
            "enable",
            "-f",
            &directives(),
            "--kubefed-namespace",
            "types-a",
        ],
    )
    .ok();
    assert_eq!(
        run.stdout
            .matches("federatedtypeconfig.core.kubefed.io/")
            .count(),
        10,
        "{}",
        run.stdout
    );

    // (FTC name, target group, kind, target scope, federated scope, short names, retainReplicas)
    let expected = [
        (
            "clusterroles.rbac.authorization.k8s.io",
            "rbac.authorization.k8s.io",
            "ClusterRole",
            "Cluster",
            "Cluster",
            json!(null),
            false,
        ),
        (
            "configmaps",
            "",
            "ConfigMap",
            "Namespaced",
            "Namespaced",
            json!(["fcm"]),
            false,
        ),
        (
            "deployments.apps",
            "apps",
            "Deployment",
            "Namespaced",
            "Namespaced",
            json!(["fdeploy"]),
            true,
        ),
        (
            "ingresses.networking.k8s.io",
            "networking.k8s.io",
            "Ingress",
            "Namespaced",
            "Namespaced",
            json!(["fing"]),
            false,
        ),
        (
            "jobs.batch",
            "batch",
            "Job",
            "Namespaced",
            "Namespaced",
            json!(null),
            false,
        ),
        (
            "namespaces",
            "",
            "Namespace",
            "Cluster",
            "Namespaced",
            json!(["fns"]),
            false,
        ),
        (
            "replicasets.apps",
            "apps",
            "ReplicaSet",
            "Namespaced",
            "Namespaced",
            json!(["frs"]),
            true,
        ),
        (
            "secrets",
            "",
            "Secret",
            "Namespaced",
            "Namespaced",
            json!(null),
            false,
        ),
        (
            "serviceaccounts",
            "",
            "ServiceAccount",
            "Namespaced",
            "Namespaced",
            json!(["fsa"]),
            false,
        ),
        (
            "services",
            "",
            "Service",
            "Namespaced",
            "Namespaced",
            json!(["fsvc"]),
            false,
        ),
    ];
    for (name, group, kind, target_scope, fed_scope, shorts, retain) in expected {
        let f = ftc(env, "types-a", name);
        let t = &f["spec"]["targetType"];
        assert_eq!(t["kind"], kind, "{name}");
        assert_eq!(t["group"].as_str().unwrap_or(""), group, "{name}");
        assert_eq!(t["scope"], target_scope, "{name}");
        assert_eq!(f["spec"]["propagation"], "Enabled");
        let fed = &f["spec"]["federatedType"];
        assert_eq!(fed["kind"], format!("Federated{kind}"));
        assert_eq!(fed["group"], "types.kubefed.io");
        assert_eq!(fed["version"], "v1beta1");
        assert_eq!(fed["scope"], fed_scope, "{name}");
        let plural = name.split('.').next().unwrap();
        let c = crd(env, &format!("federated{plural}.types.kubefed.io")).expect("federated CRD");
        assert_eq!(c["spec"]["scope"], fed_scope, "{name}");
        assert_eq!(c["spec"]["names"]["shortNames"], shorts, "{name}");
        assert_eq!(
            spec_schema(&c).get("retainReplicas").is_some(),
            retain,
            "{name}"
        );
        assert_eq!(
            spec_schema(&c)["template"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
    }

    // A federated object through the served CRD keeps its template.
    let (code, _) = create(
        env,
        "host",
        "/api/v1/namespaces",
        json!({"metadata": {"name": "types-a-objects"}}),
    );
    assert_eq!(code, 201);
    let (code, body) = create(
        env,
        "host",
        "/apis/types.kubefed.io/v1beta1/namespaces/types-a-objects/federateddeployments",
        json!({
            "apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedDeployment",
            "metadata": {"name": "web"},
            "spec": {
                "template": {"spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}}},
                "placement": {"clusters": [{"name": "member1"}]},
                "overrides": [{"clusterName": "member1", "clusterOverrides": [{"path": "/spec/replicas", "value": 5}]}],
                "retainReplicas": true
            }
        }),
    );
    assert_eq!(code, 201, "{body}");
    let back = get(
        env,
        "host",
        "/apis/types.kubefed.io/v1beta1/namespaces/types-a-objects/federateddeployments/web",
    )
    .unwrap();
    assert_eq!(back["spec"]["template"]["spec"]["replicas"], 3);
    assert_eq!(
        back["spec"]["overrides"][0]["clusterOverrides"][0]["value"],
        5
    );
    assert_eq!(back["spec"]["retainReplicas"], true);

    proxy.reset_records();
    let again = kubefedctl(
        &kc,
        &[
            "enable",
            "-f",
            &directives(),
            "--kubefed-namespace",
            "types-a",
        ],
    )
    .ok();
    assert_eq!(
        proxy.writes(),
        0,
        "re-enabling writes nothing: {:?}",
        proxy
            .records()
            .iter()
            .filter(|r| r.verb != "get" && r.verb != "list" && r.verb != "other")
            .collect::<Vec<_>>()
    );
    assert_eq!(again.stdout.matches(" unchanged (host)").count(), 20);
}

fn create_crd(env: &TestEnv, plural: &str, kind: &str, scope: &str, schema: Value) {
    let group = "types-test.example";
    let (code, body) = create(
        env,
        "host",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {
                "group": group, "scope": scope,
                "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "shortNames": [format!("{}x", &plural[..2])]},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}]
            }
        }),
    );
    assert_eq!(code, 201, "{body}");
    // Served once discovery lists it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while get(env, "host", &format!("/apis/{group}/v1/{plural}")).is_none() {
        assert!(std::time::Instant::now() < deadline, "{plural} not served");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn custom_resource_types_with_and_without_schema() {
    let env = TestEnv::shared();
    let kc = init(env, "types-b", "types-b");
    create_crd(
        env,
        "widgets",
        "Widget",
        "Namespaced",
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "size": {"type": "integer"}, "replicas": {"type": "integer", "format": "int32"}
        }}}}),
    );
    create_crd(
        env,
        "gadgets",
        "Gadget",
        "Cluster",
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    );

    kubefedctl(
        &kc,
        &["enable", "widgets", "--kubefed-namespace", "types-b"],
    )
    .ok();
    kubefedctl(
        &kc,
        &[
            "enable",
            "gadgets.types-test.example",
            "--kubefed-namespace",
            "types-b",
        ],
    )
    .ok();
    let w = ftc(env, "types-b", "widgets.types-test.example");
    assert_eq!(w["spec"]["targetType"]["group"], "types-test.example");
    assert_eq!(w["spec"]["targetType"]["version"], "v1");
    let g = ftc(env, "types-b", "gadgets.types-test.example");
    assert_eq!(g["spec"]["targetType"]["scope"], "Cluster");
    assert_eq!(g["spec"]["federatedType"]["scope"], "Cluster");
    let wc = crd(env, "federatedwidgets.types.kubefed.io").unwrap();
    assert_eq!(wc["spec"]["names"]["shortNames"], json!(["fwix"]));
    assert!(
        spec_schema(&wc).get("retainReplicas").is_some(),
        "int32 spec.replicas"
    );
    let gc = crd(env, "federatedgadgets.types.kubefed.io").unwrap();
    assert_eq!(gc["spec"]["scope"], "Cluster");
    assert!(spec_schema(&gc).get("retainReplicas").is_none());

    // A schema-less target still gets a template that is not pruned.
    let (code, body) = create(
        env,
        "host",
        "/apis/types.kubefed.io/v1beta1/federatedgadgets",
        json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedGadget", "metadata": {"name": "g1"},
               "spec": {"template": {"spec": {"anything": ["goes", 1]}}, "placement": {"clusterSelector": {}}}}),
    );
    assert_eq!(code, 201, "{body}");
    let back = get(
        env,
        "host",
        "/apis/types.kubefed.io/v1beta1/federatedgadgets/g1",
    )
    .unwrap();
    assert_eq!(
        back["spec"]["template"]["spec"]["anything"],
        json!(["goes", 1])
    );

    // --template-schema embed: the API server checks templates.
    kubefedctl(
        &kc,
        &[
            "enable",
            "widgets",
            "--template-schema",
            "embed",
            "--federated-group",
            "embed.kubefed.io",
            "--kubefed-namespace",
            "types-b-embed",
        ],
    )
    .fails();
    init(env, "types-b-embed", "types-b-embed");
    kubefedctl(
        &kc,
        &[
            "enable",
            "widgets",
            "--template-schema",
            "embed",
            "--federated-group",
            "embed.kubefed.io",
            "--kubefed-namespace",
            "types-b-embed",
        ],
    )
    .ok();
    let path = "/apis/embed.kubefed.io/v1beta1/namespaces/default/federatedwidgets";
    let widget = |size: Value| {
        json!({"apiVersion": "embed.kubefed.io/v1beta1", "kind": "FederatedWidget", "metadata": {"name": format!("w-{}", size.is_number())},
               "spec": {"template": {"spec": {"size": size}}, "placement": {"clusterSelector": {}}}})
    };
    let (bad, body) = create(env, "host", path, widget(json!("big")));
    assert_eq!(bad, 422, "a bad template is refused: {body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("spec.template.spec.size"),
        "{body}"
    );
    let (good, body) = create(env, "host", path, widget(json!(7)));
    assert_eq!(good, 201, "{body}");
}

#[test]
fn output_matches_golden_files_and_writes_nothing() {
    let env = TestEnv::shared();
    let proxy = env.proxy("host").unwrap();
    let kc = write_kubeconfig(
        env,
        "types-c",
        env.kubeconfig()
            .current_context("host")
            .server("host", &proxy.url()),
    );
    for name in ["configmaps", "deployments.apps", "namespaces"] {
        let run = kubefedctl(&kc, &["enable", name, "-o", "yaml"]).ok();
        assert_golden(&format!("enable-{name}.yaml"), &run.stdout);
    }
    let json_run = kubefedctl(&kc, &["enable", "configmaps", "-o", "json"]).ok();
    let list: Value = serde_json::from_str(&json_run.stdout).unwrap();
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"][0]["kind"], "FederatedTypeConfig");
    assert_eq!(list["items"][1]["kind"], "CustomResourceDefinition");
    assert_eq!(proxy.writes(), 0);
}

#[test]
fn disable_keeps_or_deletes_the_crd() {
    let env = TestEnv::shared();
    let kc = init(env, "types-d", "types-d");
    create_crd(
        env,
        "sprockets",
        "Sprocket",
        "Namespaced",
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    );
    fn with<'a>(args: &[&'a str]) -> Vec<&'a str> {
        [args, &["--kubefed-namespace", "types-d"][..]].concat()
    }
    kubefedctl(
        &kc,
        &with(&[
            "enable",
            "sprockets",
            "--federated-group",
            "disable.kubefed.io",
        ]),
    )
    .ok();
    let crd_name = "federatedsprockets.disable.kubefed.io";
    let (code, body) = create(
        env,
        "host",
        "/apis/disable.kubefed.io/v1beta1/namespaces/default/federatedsprockets",
        json!({"apiVersion": "disable.kubefed.io/v1beta1", "kind": "FederatedSprocket", "metadata": {"name": "s1"}, "spec": {"template": {}}}),
    );
    assert_eq!(code, 201, "{body}");

    let refused = kubefedctl(&kc, &with(&["disable", "sprockets", "--delete-crd"])).fails();
    assert!(
        refused
            .stderr
            .contains("while 1 FederatedSprocket object(s) exist"),
        "{}",
        refused.stderr
    );
    assert_eq!(
        ftc(env, "types-d", "sprockets.types-test.example")["spec"]["propagation"],
        "Enabled",
        "nothing changed"
    );

    let dry = kubefedctl(
        &kc,
        &with(&["disable", "sprockets.types-test.example", "--dry-run"]),
    )
    .ok();
    assert!(dry.stdout.contains("would be deleted"), "{}", dry.stdout);
    let run = kubefedctl(&kc, &with(&["disable", "sprockets.types-test.example"])).ok();
    assert!(run.stdout.contains(
        "Disabled propagation for FederatedTypeConfig \"types-d/sprockets.types-test.example\""
    ));
    assert!(get(env, "host", "/apis/core.kubefed.io/v1beta1/namespaces/types-d/federatedtypeconfigs/sprockets.types-test.example").is_none());
    assert!(
        crd(env, crd_name).is_some(),
        "without --delete-crd the CRD stays"
    );
    let again = kubefedctl(&kc, &with(&["disable", "sprockets.types-test.example"])).ok();
    assert!(again.stdout.contains("does not exist"));

    kubefedctl(
        &kc,
        &with(&[
            "disable",
            "sprockets",
            "--delete-crd",
            "--federated-group",
            "disable.kubefed.io",
            "--force",
            "--yes",
        ]),
    )
    .ok();
    let gone = crd(env, crd_name).is_none_or(|c| !c["metadata"]["deletionTimestamp"].is_null());
    assert!(gone, "the CRD is deleted");
}

#[test]
fn orphaning_deletion_sets_and_clears_the_annotation() {
    let env = TestEnv::shared();
    let kc = init(env, "types-e", "types-e");
    kubefedctl(
        &kc,
        &["enable", "secrets", "--kubefed-namespace", "types-e"],
    )
    .ok();
    let (code, body) = create(
        env,
        "host",
        "/apis/types.kubefed.io/v1beta1/namespaces/default/federatedsecrets",
        json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedSecret", "metadata": {"name": "orphan-me"}, "spec": {"template": {}}}),
    );
    assert_eq!(code, 201, "{body}");
    let status = || {
        kubefedctl(
            &kc,
            &[
                "orphaning-deletion",
                "status",
                "FederatedSecret",
                "orphan-me",
                "-n",
                "default",
            ],
        )
        .ok()
        .stdout
    };
    let annotation = || {
        get(
            env,
            "host",
            "/apis/types.kubefed.io/v1beta1/namespaces/default/federatedsecrets/orphan-me",
        )
        .unwrap()["metadata"]["annotations"]["kubefed.io/orphan"]
            .clone()
    };
    assert_eq!(status(), "Disabled\n");
    kubefedctl(
        &kc,
        &[
            "orphaning-deletion",
            "enable",
            "federatedsecrets.types.kubefed.io",
            "orphan-me",
            "-n",
            "default",
        ],
    )
    .ok();
    assert_eq!(annotation(), "true");
    assert_eq!(status(), "Enabled\n");
    kubefedctl(
        &kc,
        &[
            "orphaning-deletion",
            "disable",
            "FederatedSecret",
            "orphan-me",
            "-n",
            "default",
        ],
    )
    .ok();
    assert_eq!(annotation(), Value::Null);
    assert_eq!(status(), "Disabled\n");
    let missing = kubefedctl(
        &kc,
        &[
            "orphaning-deletion",
            "status",
            "FederatedSecret",
            "nope",
            "-n",
            "default",
        ],
    )
    .fails();
    assert!(
        missing
            .stderr
            .contains("FederatedSecret \"default/nope\" not found"),
        "{}",
        missing.stderr
    );
}

#[test]
fn unknown_and_ambiguous_names_are_clear_errors() {
    let env = TestEnv::shared();
    let kc = init(env, "types-f", "types-f");
    let unknown = kubefedctl(
        &kc,
        &[
            "enable",
            "flibbertigibbets",
            "--kubefed-namespace",
            "types-f",
        ],
    )
    .fails();
    assert_eq!(
        unknown.stderr,
        "error: no API resource named \"flibbertigibbets\"\n"
    );
    // Kubernetes 1.20 serves ingresses in extensions and networking.k8s.io;
    // 1.22+ only in the latter, so a CRD of the same plural stands in.
    let other = if env.version().minor >= 22 {
        create_crd(
            env,
            "ingresses",
            "Ingress",
            "Namespaced",
            json!({"type": "object"}),
        );
        "ingresses.types-test.example"
    } else {
        "ingresses.extensions"
    };
    let ambiguous = kubefedctl(
        &kc,
        &["enable", "ingresses", "--kubefed-namespace", "types-f"],
    );
    if env.version().minor >= 22 {
        let r = env
            .request(
                "host",
                "DELETE",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/ingresses.types-test.example",
                None,
            )
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let ambiguous = ambiguous.fails();
    let mut names = [other, "ingresses.networking.k8s.io"];
    names.sort();
    assert!(
        ambiguous.stderr.contains(&format!(
            "\"ingresses\" matches several API resources: {}",
            names.join(", ")
        )),
        "{}",
        ambiguous.stderr
    );
    let version = kubefedctl(
        &kc,
        &[
            "enable",
            "deployments.apps",
            "--version",
            "v9",
            "--kubefed-namespace",
            "types-f",
        ],
    )
    .fails();
    assert!(
        version.stderr.contains("in version v9 (served: apps/v1)"),
        "{}",
        version.stderr
    );
    // A non-preferred version is fine (upstream accepted only preferred ones).
    // 1.20 serves Ingress in networking.k8s.io v1 and v1beta1; 1.23+
    // serves HorizontalPodAutoscalers in autoscaling v2 and v1.
    let (resource, older) = if env.version().minor >= 23 {
        ("horizontalpodautoscalers.autoscaling", "v1")
    } else {
        ("ingresses.networking.k8s.io", "v1beta1")
    };
    let beta = kubefedctl(&kc, &["enable", resource, "--version", older, "-o", "json"]).ok();
    let list: Value = serde_json::from_str(&beta.stdout).unwrap();
    assert_eq!(list["items"][0]["spec"]["targetType"]["version"], older);
    assert!(
        get(
            env,
            "host",
            "/apis/core.kubefed.io/v1beta1/namespaces/types-f/federatedtypeconfigs"
        )
        .unwrap()["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

/// Discovery costs two requests where the server aggregates it (1.30+:
/// `/api` for the core group and `/apis` for the others, each answered in
/// aggregated form, as kubectl asks), and where it does not (1.20) those two
/// in the legacy form, then one per group version they list: each version
/// of `/api`, each group's preferred version of `/apis` (all versions only
/// with `--version`).
#[test]
fn discovery_is_aggregated_where_the_server_offers_it() {
    let env = TestEnv::shared();
    let host = env.proxy("host").unwrap();
    let kc = write_kubeconfig(
        env,
        "types-disc",
        env.kubeconfig()
            .current_context("host")
            .server("host", &host.url()),
    );
    kubefedctl(&kc, &["init", "--kubefed-namespace", "types-disc"]).ok();
    // The group versions the legacy form names, read before and after the
    // command: other tests on this shared host may add or remove a CRD's
    // group meanwhile, and only those may differ from the requests made.
    let listed = || -> std::collections::BTreeSet<String> {
        let core = get(env, "host", "/api").unwrap();
        let groups = get(env, "host", "/apis").unwrap();
        let core = core["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| format!("/api/{}", v.as_str().unwrap()));
        let groups = groups["groups"].as_array().unwrap().iter().map(|g| {
            format!(
                "/apis/{}",
                g["preferredVersion"]["groupVersion"].as_str().unwrap()
            )
        });
        core.chain(groups).collect()
    };
    let before = listed();
    host.reset_records();
    let out = kubefedctl(
        &kc,
        &[
            "enable",
            "deploy",
            "-o",
            "yaml",
            "--kubefed-namespace",
            "types-disc",
        ],
    )
    .ok();
    let after = listed();
    assert!(
        out.stdout.contains("kind: FederatedTypeConfig"),
        "{}",
        out.stdout
    );
    let roots = host.count(|r| r.path == "/api" || r.path == "/apis");
    let requested: Vec<String> = host
        .records()
        .into_iter()
        .filter(|r| r.verb == "other" && r.resource.is_empty() && !r.version.is_empty())
        .map(|r| r.path)
        .collect();
    assert_eq!(roots, 2, "{:?}", host.records());
    if env.version().minor >= 30 {
        assert_eq!(
            requested,
            Vec::<String>::new(),
            "one aggregated answer each"
        );
        return;
    }
    let distinct: std::collections::BTreeSet<String> = requested.iter().cloned().collect();
    assert_eq!(distinct.len(), requested.len(), "each once: {requested:?}");
    let both: std::collections::BTreeSet<String> = before.intersection(&after).cloned().collect();
    let either: std::collections::BTreeSet<String> = before.union(&after).cloned().collect();
    assert!(
        distinct.is_superset(&both) && distinct.is_subset(&either),
        "one request per listed group version\nrequested: {distinct:?}\nlisted: {before:?}"
    );
    if before == after {
        assert_eq!(requested.len(), before.len(), "{requested:?}");
    }
}
