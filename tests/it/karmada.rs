//! `export karmada` against Karmada itself: a Karmada API server (a
//! kube-apiserver of the test environment's current release with Karmada
//! v1.13.0's CRDs, `hack/testenv.sh` keeps them) takes every exported
//! object as a server-side dry-run create with strict field validation, so
//! Karmada's own schemas (and CEL rules) and Kubernetes' validation of the
//! resource templates judge the output (Clusters: karmada-aggregated-apiserver's
//! own validation). Namespaces are created for real so that their contents
//! can be dry-run created in them.
//!
//! The same server runs Karmada's own controllers (`testenv::KarmadaPlane`):
//! a federation converged by `reconcile`, exported and applied there, is
//! taken over by Karmada without a member object being recreated.

use crate::fixtures::{
    Federation, KUBEFEDCTL, Run, get, namespace, patch, post, request, rfc3339_in, root, wait_until,
};
use crate::parity::{TYPES, fixture};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use testenv::TestEnv;

/// The Karmada control plane of this test binary: a kube-apiserver of the
/// current release as karmada-apiserver, with Karmada's CRDs, its
/// aggregated API server, webhook, controller-manager and scheduler
/// (`testenv::KarmadaPlane`).
fn karmada() -> &'static TestEnv {
    static ENV: OnceLock<(TestEnv, testenv::KarmadaPlane)> = OnceLock::new();
    &ENV.get_or_init(|| {
        // Karmada ships its own kube-apiserver: the current release, whatever
        // release the federation's clusters run (v1.20 in the compatibility set).
        let env = TestEnv::private_mixed(&[("karmada", testenv::Version::CURRENT)])
            .expect("starting the Karmada API server");
        let plane = testenv::KarmadaPlane::start(&env, "karmada").expect("starting Karmada");
        (env, plane)
    })
    .0
}

/// `kubefedctl export karmada ARGS` with no kubeconfig at all (offline).
fn export(args: &[&str]) -> Run {
    std::process::Command::new(KUBEFEDCTL)
        .args(["export", "karmada"])
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", "/nonexistent")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
        .into()
}

fn plural(kind: &str) -> String {
    match kind {
        "PropagationPolicy" => "propagationpolicies".into(),
        "ClusterPropagationPolicy" => "clusterpropagationpolicies".into(),
        "OverridePolicy" => "overridepolicies".into(),
        "ClusterOverridePolicy" => "clusteroverridepolicies".into(),
        "Ingress" => "ingresses".into(),
        k => format!("{}s", k.to_lowercase()),
    }
}

/// The collection an object is created in.
fn collection(obj: &Value) -> String {
    let api = obj["apiVersion"].as_str().unwrap();
    let prefix = if api == "v1" {
        "/api/v1".to_string()
    } else {
        format!("/apis/{api}")
    };
    let ns = match obj["metadata"]["namespace"].as_str() {
        Some(ns) => format!("/namespaces/{ns}"),
        None => String::new(),
    };
    format!("{prefix}{ns}/{}", plural(obj["kind"].as_str().unwrap()))
}

/// Every exported object to the Karmada API server: Namespaces created,
/// the rest dry-run created (Clusters by karmada-aggregated-apiserver,
/// through the aggregation layer); the refusals, one line each, and the
/// Clusters.
fn validate(env: &TestEnv, objects: &[Value]) -> (Vec<String>, Vec<Value>) {
    let mut refused = Vec::new();
    let mut clusters = Vec::new();
    post(
        env,
        "karmada",
        "/api/v1/namespaces",
        json!({"metadata": {"name": "karmada-cluster"}}),
    );
    for obj in objects {
        if obj["kind"] == "Cluster" {
            clusters.push(obj.clone());
        }
        let namespace = obj["kind"] == "Namespace";
        let query = if namespace {
            ""
        } else {
            "?dryRun=All&fieldValidation=Strict"
        };
        let path = format!("{}{query}", collection(obj));
        let (status, answer) = request(env, "karmada", "POST", &path, Some(obj.clone()));
        if status != 201 && !(namespace && status == 409) {
            refused.push(format!(
                "{} {}: {status} {}",
                obj["kind"].as_str().unwrap(),
                obj["metadata"]["name"],
                answer["message"]
            ));
        }
    }
    (refused, clusters)
}

/// KubeFed's e2e fixtures of the ten default types as federated objects
/// (placed on both clusters, the fixture's overrides on the first), as
/// `tests/it/parity.rs` makes them, in `ns` and its FederatedNamespace.
fn fixture_objects(ns: &str) -> Vec<Value> {
    let fed = |kind: &str, obj_ns: &str, name: &str, spec: Value| {
        json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": format!("Federated{kind}"),
               "metadata": {"name": name, "namespace": obj_ns}, "spec": spec})
    };
    let placement = json!({"clusters": [{"name": "cluster1"}, {"name": "cluster2"}]});
    let mut out = vec![fed("Namespace", ns, ns, json!({"placement": placement}))];
    for t in TYPES {
        let (template, overrides) = fixture(t);
        let spec = json!({
            "template": template,
            "placement": placement,
            // and, as upstream's update step, labels by override everywhere
            "overrides": [
                {"clusterName": "cluster1", "clusterOverrides": overrides},
                {"clusterName": "cluster2", "clusterOverrides": [{"path": "/metadata/labels", "value": {"updated": "true"}}]},
            ],
        });
        // The namespaces fixture is a FederatedNamespace of its own.
        let (obj_ns, name) = match t.kind {
            "Namespace" => (format!("{ns}-n"), format!("{ns}-n")),
            _ => (ns.to_string(), format!("fixture-{}", t.kind.to_lowercase())),
        };
        out.push(fed(t.kind, &obj_ns, &name, spec));
    }
    out
}

fn write_yaml(dir: &Path, name: &str, objects: &[Value]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    let text: String = objects
        .iter()
        .map(|o| format!("---\n{}", serde_saphyr::to_string(o).unwrap()))
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// `-o json`'s List: its items.
fn items(run: &Run) -> Vec<Value> {
    let list: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(list["kind"], "List");
    list["items"].as_array().unwrap().clone()
}

fn kinds(objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn kubefeds_fixtures_and_sample1_pass_karmadas_validation() {
    let env = karmada();
    let dir = std::env::temp_dir().join(format!("kx-fixtures-{}", std::process::id()));
    let fixtures = write_yaml(&dir, "fixtures.yaml", &fixture_objects("kx-fixtures"));
    let sample1 = testenv::kubefed_source()
        .expect("KubeFed's module source (hack/testenv.sh)")
        .join("example/sample1");
    let mut args: Vec<String> = vec!["-f".into(), fixtures.display().to_string()];
    for entry in std::fs::read_dir(&sample1).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("federated")
        {
            args.extend(["-f".into(), path.display().to_string()]);
        }
    }
    args.extend(["-o".into(), "json".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // Every fixture maps exactly: exit 0, and the report says so.
    let run = export(&args).ok();
    assert!(
        run.stderr.contains("0 approximated or not mapped"),
        "{}",
        run.stderr
    );
    let objects = items(&run);
    let all = kinds(&objects);
    for kind in [
        "Namespace",
        "ConfigMap",
        "Secret",
        "Service",
        "ServiceAccount",
        "Deployment",
        "ReplicaSet",
        "Job",
        "Ingress",
        "ClusterRole",
        "ClusterRoleBinding",
        "PropagationPolicy",
        "ClusterPropagationPolicy",
        "OverridePolicy",
        "ClusterOverridePolicy",
    ] {
        assert!(all.iter().any(|k| k == kind), "no {kind} in {all:?}");
    }
    let (refused, clusters) = validate(env, &objects);
    assert!(
        refused.is_empty(),
        "Karmada's API server refused:\n{}",
        refused.join("\n")
    );
    assert!(clusters.is_empty());
    // The same export as YAML, into a directory, reads the same objects.
    let out_dir = dir.join("out");
    let mut yaml_args = args[..args.len() - 2].to_vec();
    yaml_args.extend(["--output-dir", out_dir.to_str().unwrap()]);
    export(&yaml_args).ok();
    let files = std::fs::read_dir(&out_dir).unwrap().count();
    assert_eq!(
        files,
        objects.len() + 1,
        "one file per object and report.json"
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(report["exact"], true);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn approximations_are_reported_and_exit_6() {
    let env = karmada();
    let dir = std::env::temp_dir().join(format!("kx-approx-{}", std::process::id()));
    let ns = "kx-approx";
    let deployments = TYPES.iter().find(|t| t.kind == "Deployment").unwrap();
    let objects = vec![
        json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedNamespace",
               "metadata": {"name": ns, "namespace": ns}, "spec": {"placement": {"clusterSelector": {}}}}),
        json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedDeployment",
               "metadata": {"name": "web", "namespace": ns},
               "spec": {"template": fixture(deployments).0, "placement": {"clusterSelector": {}}}}),
        json!({"apiVersion": "scheduling.kubefed.io/v1alpha1", "kind": "ReplicaSchedulingPreference",
               "metadata": {"name": "web", "namespace": ns},
               "spec": {"targetKind": "FederatedDeployment", "totalReplicas": 9,
                        "clusters": {"*": {"weight": 1}, "cluster1": {"weight": 2, "minReplicas": 4, "maxReplicas": 6}}}}),
    ];
    let file = write_yaml(&dir, "in.yaml", &objects);
    let run = export(&[
        "-f",
        file.to_str().unwrap(),
        "-o",
        "json",
        "--report",
        "json",
    ])
    .exits(6);
    let report: Value =
        serde_json::from_str(&run.stderr[..run.stderr.rfind("}\n").unwrap() + 1]).unwrap();
    assert_eq!(report["exact"], false);
    let fields: Vec<&str> = report["objects"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|o| o["findings"].as_array().unwrap())
        .filter(|f| f["kind"] == "approximated")
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "ReplicaSchedulingPreference kx-approx/web: spec.clusters.cluster1.minReplicas",
            "ReplicaSchedulingPreference kx-approx/web: spec.clusters.cluster1.maxReplicas"
        ]
    );
    assert!(
        run.stderr
            .contains("error: 1 object(s) approximated or not mapped"),
        "{}",
        run.stderr
    );
    // What was written is still valid Karmada: the weights, the wildcard as
    // an exclusion, the replicas Karmada divides.
    let out = items(&run);
    let pp = out
        .iter()
        .find(|o| o["kind"] == "PropagationPolicy")
        .unwrap();
    assert_eq!(
        pp["spec"]["placement"]["replicaScheduling"]["weightPreference"]["staticWeightList"],
        json!([{"targetCluster": {"exclude": ["cluster1"]}, "weight": 1},
               {"targetCluster": {"clusterNames": ["cluster1"]}, "weight": 2}])
    );
    let (refused, _) = validate(env, &out);
    assert!(refused.is_empty(), "{}", refused.join("\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_custom_type_exports_offline_with_its_crd_from_the_files() {
    let env = karmada();
    let dir = std::env::temp_dir().join(format!("kx-offline-{}", std::process::id()));
    let ns = "kx-offline";
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "kxdials.kxoffline.example.com"},
        "spec": {"group": "kxoffline.example.com", "scope": "Namespaced",
            "names": {"kind": "KxDial", "plural": "kxdials", "singular": "kxdial"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema":
                {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}
    });
    // A fork's group, and no FederatedTypeConfig: the CRD alone names
    // the target.
    let placement = json!({"clusters": [{"name": "cluster1"}]});
    let federated = [
        json!({"apiVersion": "fork.kubefed.io/v1beta1", "kind": "FederatedNamespace",
               "metadata": {"name": ns, "namespace": ns}, "spec": {"placement": placement}}),
        json!({"apiVersion": "fork.kubefed.io/v1beta1", "kind": "FederatedKxDial",
               "metadata": {"name": "d", "namespace": ns},
               "spec": {"template": {"spec": {"size": 2}}, "placement": placement}}),
    ];
    write_yaml(&dir.join("in"), "crd.yaml", std::slice::from_ref(&crd));
    let fed_file = write_yaml(&dir.join("in"), "federated.yaml", &federated);
    // Without the CRD, the object cannot be mapped: exit 6, and the
    // report says what to give.
    let run = export(&["-f", fed_file.to_str().unwrap(), "-o", "json"]).exits(6);
    assert!(
        run.stderr.contains("its target's CustomResourceDefinition"),
        "{}",
        run.stderr
    );
    // With the directory: exact, the CRD first, then the template.
    let in_dir = dir.join("in");
    let run = export(&["-f", in_dir.to_str().unwrap(), "-o", "json"]).ok();
    let objects = items(&run);
    let at = |kind: &str| objects.iter().position(|o| o["kind"] == kind).unwrap();
    assert!(
        at("CustomResourceDefinition") < at("KxDial"),
        "{:?}",
        kinds(&objects)
    );
    let dial = &objects[at("KxDial")];
    assert_eq!(dial["apiVersion"], "kxoffline.example.com/v1");
    assert_eq!(dial["spec"], json!({"size": 2}));
    let pp = &objects[at("PropagationPolicy")];
    assert_eq!(
        pp["spec"]["resourceSelectors"][0],
        json!({"apiVersion": "kxoffline.example.com/v1", "kind": "KxDial", "name": "d"})
    );
    assert_eq!(objects[at("CustomResourceDefinition")]["spec"], crd["spec"]);
    // Karmada's API server takes them all: the CRD (created, so that the
    // template's kind is served), then the rest.
    post(
        env,
        "karmada",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        objects[at("CustomResourceDefinition")].clone(),
    );
    wait_until("kxdials served in Karmada", || {
        get(env, "karmada", "/apis/kxoffline.example.com/v1/kxdials").is_some()
    });
    let rest: Vec<Value> = objects
        .iter()
        .filter(|o| o["kind"] != "CustomResourceDefinition")
        .cloned()
        .collect();
    let (refused, _) = validate(env, &rest);
    assert!(refused.is_empty(), "{}", refused.join("\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_live_federation_exports_its_clusters_without_their_tokens() {
    let shared = TestEnv::shared();
    let f = Federation::new(shared, "kx-live", &["configmaps"]);
    f.create(shared, "FederatedConfigMap", "settings", json!({
        "template": {"data": {"a": "1"}},
        "placement": {"clusters": [{"name": f.cluster("m1")}]},
        "overrides": [{"clusterName": f.cluster("m1"), "clusterOverrides": [{"path": "/data/a", "value": "2"}]}]
    }));
    let run = f.run(&["export", "karmada", "-n", f.ns, "-o", "json"]).ok();
    let objects = items(&run);
    let (kfc, secret_path) = f.kubefed_cluster(shared, &f.cluster("m1"));
    let token = get(shared, "host", &secret_path).unwrap()["data"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !run.stdout.contains(&token),
        "a token was printed without --with-tokens"
    );
    assert!(run.stderr.contains("token not written"), "{}", run.stderr);
    let cluster = objects
        .iter()
        .find(|o| o["kind"] == "Cluster" && o["metadata"]["name"] == f.cluster("m1").as_str())
        .unwrap();
    assert_eq!(cluster["spec"]["syncMode"], "Push");
    assert_eq!(cluster["spec"]["apiEndpoint"], kfc["spec"]["apiEndpoint"]);
    assert_eq!(
        cluster["spec"]["secretRef"],
        json!({"namespace": "karmada-cluster", "name": f.cluster("m1")})
    );
    let secret = objects
        .iter()
        .find(|o| o["kind"] == "Secret" && o["metadata"]["name"] == f.cluster("m1").as_str())
        .unwrap();
    assert_eq!(secret["data"]["caBundle"], kfc["spec"]["caBundle"]);
    let cm = objects.iter().find(|o| o["kind"] == "ConfigMap").unwrap();
    assert_eq!(cm["data"], json!({"a": "1"}));
    let op = objects
        .iter()
        .find(|o| o["kind"] == "OverridePolicy")
        .unwrap();
    assert_eq!(
        op["spec"]["overrideRules"][0]["overriders"]["plaintext"],
        json!([{"path": "/data/a", "operator": "replace", "value": "2"}])
    );
    let (refused, clusters) = validate(karmada(), &objects);
    assert!(refused.is_empty(), "{}", refused.join("\n"));
    assert_eq!(clusters.len(), 2);
    // --with-tokens writes them.
    let run = f
        .run(&["export", "karmada", "-n", f.ns, "--with-tokens"])
        .ok();
    assert!(run.stdout.contains(&token));
    // -A is the default spelled out (every namespace, as reconcile), and
    // conflicts with -n as in kubectl.
    // (Exit 6 when another test's RSP, whose federated object is of
    // another federation's group, is listed beside ours.)
    let all = f.run(&["export", "karmada", "-A", "-o", "json"]);
    assert!(all.code == 0 || all.code == 6, "{}", all.stderr);
    assert!(
        items(&all)
            .iter()
            .any(|o| o["kind"] == "ConfigMap" && o["metadata"]["namespace"] == f.ns),
        "{}",
        all.stdout
    );
    f.run(&["export", "karmada", "-A", "-n", f.ns]).usage();
    // A member whose token expires (join --token-ttl): Karmada could not
    // renew it, so it is not handed over, and the report says how to fix it.
    let m2 = f.cluster("m2");
    f.run(&[
        "join",
        &m2,
        "--cluster-context",
        "member2",
        "--token-ttl",
        "1h",
        "--error-on-existing=false",
    ])
    .ok();
    let run = f
        .run(&[
            "export",
            "karmada",
            "-n",
            f.ns,
            "--with-tokens",
            "-o",
            "json",
        ])
        .exits(6);
    let secret = items(&run)
        .into_iter()
        .find(|o| o["kind"] == "Secret" && o["metadata"]["name"] == m2.as_str())
        .unwrap();
    assert!(secret["data"].get("token").is_none(), "{secret}");
    assert!(
        run.stderr
            .contains(&format!("the token of {m2} expires at"))
            && run.stderr.contains("without --token-ttl"),
        "{}",
        run.stderr
    );
    // Offline, tokens cannot be read: a usage error.
    let file = root().join("testdata/demo");
    f.run(&[
        "export",
        "karmada",
        "-f",
        file.to_str().unwrap(),
        "--with-tokens",
    ])
    .usage();
}

/// This federation's two members by name, its FederatedNamespace narrowed
/// to them: Karmada holds other tests' Clusters for the same members, and
/// `clusterSelector: {}` would select those too (one member under two
/// Cluster names, whose Works then conflict).
fn own_clusters(shared: &TestEnv, f: &Federation) -> Value {
    let both = json!([{"name": f.cluster("m1")}, {"name": f.cluster("m2")}]);
    f.patch_federated_namespace(
        shared,
        json!({"spec": {"placement": {"clusters": both, "clusterSelector": null}}}),
    );
    both
}

/// Creates `objects` in the Karmada API server (as `kubectl create -f`),
/// as docs/migrate-karmada.md says to: the Clusters (and their Secrets)
/// first, the rest once Karmada reports them Ready with their APIs
/// (its scheduler leaves out a Cluster without status, and does not
/// schedule again when the status comes).
fn apply(env: &TestEnv, objects: &[Value]) {
    post(
        env,
        "karmada",
        "/api/v1/namespaces",
        json!({"metadata": {"name": "karmada-cluster"}}),
    );
    let first =
        |o: &Value| o["kind"] == "Cluster" || o["metadata"]["namespace"] == "karmada-cluster";
    for obj in objects.iter().filter(|o| first(o)) {
        post(env, "karmada", &collection(obj), obj.clone());
    }
    for cluster in objects.iter().filter(|o| o["kind"] == "Cluster") {
        let path = format!(
            "/apis/cluster.karmada.io/v1alpha1/clusters/{}",
            cluster["metadata"]["name"].as_str().unwrap()
        );
        wait_until(&format!("Karmada's {path} Ready"), || {
            get(env, "karmada", &path).is_some_and(|c| {
                let status = &c["status"];
                status["apiEnablements"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty())
                    && status["conditions"].as_array().is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
            })
        });
    }
    for obj in objects.iter().filter(|o| !first(o)) {
        post(env, "karmada", &collection(obj), obj.clone());
    }
}

fn uid(env: &TestEnv, cluster: &str, path: &str) -> String {
    get(env, cluster, path).unwrap_or_else(|| panic!("{cluster}: {path} not found"))["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Every binding of `ns` (and the namespace's own) fully applied.
/// A namespace's ResourceBindings, one line each (name, clusters,
/// status), for a failure's message.
fn bindings_text(rbs: Option<&Value>) -> String {
    let Some(items) = rbs.and_then(|l| l["items"].as_array()) else {
        return String::new();
    };
    (items.iter())
        .map(|i| {
            format!(
                "{} {} {}",
                i["metadata"]["name"], i["spec"]["clusters"], i["status"]
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn fully_applied(env: &TestEnv, ns: &str) -> bool {
    let applied = |b: &Value| {
        b["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "FullyApplied" && c["status"] == "True")
    };
    let rbs = get(
        env,
        "karmada",
        &format!("/apis/work.karmada.io/v1alpha2/namespaces/{ns}/resourcebindings"),
    );
    let crb = get(
        env,
        "karmada",
        &format!("/apis/work.karmada.io/v1alpha2/clusterresourcebindings/{ns}-namespace"),
    );
    let items = rbs
        .map(|l| l["items"].as_array().cloned().unwrap_or_default())
        .unwrap_or_default();
    items.len() == 2 && items.iter().all(applied) && crb.as_ref().is_some_and(applied)
}

/// KubeFed's Deployment type, as its e2e fixtures hold it.
fn deployment_type() -> &'static crate::parity::Type {
    TYPES.iter().find(|t| t.kind == "Deployment").unwrap()
}

/// The objects both Karmada tests start from: ConfigMap `settings` on
/// both members with an override for the first, Deployment `web` (KubeFed's
/// fixture) on the first; the first member's name and both placements.
fn settings_and_web(shared: &TestEnv, f: &Federation) -> (String, Value) {
    let m1 = f.cluster("m1");
    let both = own_clusters(shared, f);
    f.create(shared, "FederatedConfigMap", "settings", json!({
        "template": {"data": {"a": "1"}},
        "placement": {"clusters": both.clone()},
        "overrides": [{"clusterName": m1, "clusterOverrides": [{"path": "/data/a", "value": "m1"}]}]
    }));
    f.create(
        shared,
        "FederatedDeployment",
        "web",
        json!({
            "template": fixture(deployment_type()).0,
            "placement": {"clusters": [{"name": m1}]}
        }),
    );
    (m1, both)
}

#[test]
fn karmadas_controllers_take_over_the_export_without_recreating_anything() {
    let shared = TestEnv::shared();
    let env = karmada();
    let f = Federation::new(shared, "kx-adopt", &["configmaps", "deployments.apps"]);
    settings_and_web(shared, &f);
    f.reconcile(&[]).ok();
    let ns = f.ns;
    let cm = format!("/api/v1/namespaces/{ns}/configmaps/settings");
    let deploy = format!("/apis/apps/v1/namespaces/{ns}/deployments/web");
    let namespace = format!("/api/v1/namespaces/{ns}");
    let watched = [
        ("member1", &cm),
        ("member2", &cm),
        ("member1", &deploy),
        ("member1", &namespace),
        ("member2", &namespace),
    ];
    let before: Vec<String> = watched.iter().map(|(c, p)| uid(shared, c, p)).collect();

    let run = f
        .run(&["export", "karmada", "-n", ns, "--with-tokens", "-o", "json"])
        .ok();
    apply(env, &items(&run));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    while !fully_applied(env, ns) {
        if std::time::Instant::now() > deadline {
            let clusters = get(env, "karmada", "/apis/cluster.karmada.io/v1alpha1/clusters");
            let rbs = get(
                env,
                "karmada",
                &format!("/apis/work.karmada.io/v1alpha2/namespaces/{ns}/resourcebindings"),
            );
            panic!(
                "Karmada's bindings not fully applied after 90s\nclusters: {}\nbindings: {}",
                clusters
                    .map(|c| c["items"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|i| format!("{} {}", i["metadata"]["name"], i["status"]["conditions"]))
                        .collect::<Vec<_>>()
                        .join("; "))
                    .unwrap_or_default(),
                bindings_text(rbs.as_ref()),
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    wait_until("Karmada's label on every member object", || {
        watched.iter().take(3).all(|(c, p)| {
            get(shared, c, p)
                .is_some_and(|o| o["metadata"]["labels"]["karmada.io/managed"] == "true")
        })
    });
    let after: Vec<String> = watched.iter().map(|(c, p)| uid(shared, c, p)).collect();
    assert_eq!(before, after, "a member object was recreated");
    // KubeFed's override is Karmada's OverridePolicy's now.
    assert_eq!(
        get(shared, "member1", &cm).unwrap()["data"],
        json!({"a": "m1"})
    );
    assert_eq!(
        get(shared, "member2", &cm).unwrap()["data"],
        json!({"a": "1"})
    );
    // Karmada owns them: a change to the resource template reaches both.
    patch(env, "karmada", &cm, json!({"data": {"b": "from-karmada"}}));
    wait_until("the template's change in both members", || {
        ["member1", "member2"]
            .iter()
            .all(|c| get(shared, c, &cm).is_some_and(|o| o["data"]["b"] == "from-karmada"))
    });
    assert_eq!(get(shared, "member1", &cm).unwrap()["data"]["a"], "m1");
    let after: Vec<String> = watched.iter().map(|(c, p)| uid(shared, c, p)).collect();
    assert_eq!(before, after);
}

#[test]
fn karmada_schedules_an_approximated_rsp_as_the_report_says() {
    let shared = TestEnv::shared();
    let env = karmada();
    let f = Federation::new(shared, "kx-rsp", &["deployments.apps"]);
    let both = own_clusters(shared, &f);
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    let ns = f.ns;
    // `capped`: a maximum KubeFed's planner honours (2 of 6 on the
    // first member) and Karmada cannot; `roomy`: a maximum never reached
    // (approximated, but the same replicas).
    let rsps = [
        (
            "capped",
            json!({m1.as_str(): {"weight": 1, "maxReplicas": 2}, m2.as_str(): {"weight": 1}}),
        ),
        (
            "roomy",
            json!({m1.as_str(): {"weight": 1, "maxReplicas": 5}, m2.as_str(): {"weight": 1}}),
        ),
    ];
    for (name, clusters) in &rsps {
        f.create(
            shared,
            "FederatedDeployment",
            name,
            json!({"template": fixture(deployment_type()).0, "placement": {"clusters": both.clone()}}),
        );
        post(
            shared,
            "host",
            &format!(
                "/apis/scheduling.kubefed.io/v1alpha1/namespaces/{ns}/replicaschedulingpreferences"
            ),
            json!({"apiVersion": "scheduling.kubefed.io/v1alpha1", "kind": "ReplicaSchedulingPreference",
                   "metadata": {"name": name, "namespace": ns},
                   "spec": {"targetKind": "FederatedDeployment", "totalReplicas": 6, "clusters": clusters}}),
        );
    }
    f.reconcile(&[]).ok();
    f.reconcile(&[]).ok();
    let replicas = |name: &str| {
        [
            f.replicas(shared, "member1", name),
            f.replicas(shared, "member2", name),
        ]
    };
    assert_eq!(replicas("capped"), [2, 4], "KubeFed's planner");
    assert_eq!(replicas("roomy"), [3, 3], "KubeFed's planner");
    let deploy = |name: &str| format!("/apis/apps/v1/namespaces/{ns}/deployments/{name}");
    let watched: Vec<(&str, String)> = ["member1", "member2"]
        .into_iter()
        .flat_map(|c| [(c, deploy("capped")), (c, deploy("roomy"))])
        .collect();
    let before: Vec<String> = watched.iter().map(|(c, p)| uid(shared, c, p)).collect();

    // The report names exactly the members whose replicas Karmada changes,
    // with both numbers: both members of `capped`, none of `roomy`.
    let run = f
        .run(&["export", "karmada", "-n", ns, "--with-tokens", "-o", "json"])
        .exits(6);
    let named: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains(": replicas."))
        .collect();
    assert_eq!(
        named,
        [
            format!(
                "FederatedDeployment {ns}/capped: approximated: ReplicaSchedulingPreference {ns}/capped: replicas.{m1}: replicas: KubeFed's planner gives 2 here, Karmada's static weights 3"
            ),
            format!(
                "FederatedDeployment {ns}/capped: approximated: ReplicaSchedulingPreference {ns}/capped: replicas.{m2}: replicas: KubeFed's planner gives 4 here, Karmada's static weights 3"
            ),
        ],
        "{}",
        run.stderr
    );
    // Karmada's scheduler does what the report said, without recreating
    // a Deployment.
    apply(env, &items(&run));
    let taken = || {
        watched.iter().all(|(c, p)| {
            get(shared, c, p)
                .is_some_and(|o| o["metadata"]["labels"]["karmada.io/managed"] == "true")
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    while !(replicas("capped") == [3, 3] && taken()) {
        if std::time::Instant::now() > deadline {
            let rbs = get(
                env,
                "karmada",
                &format!("/apis/work.karmada.io/v1alpha2/namespaces/{ns}/resourcebindings"),
            );
            panic!(
                "Karmada has not scheduled capped in 90s: capped {:?}, roomy {:?}, taken over {}\nbindings: {}",
                replicas("capped"),
                replicas("roomy"),
                taken(),
                bindings_text(rbs.as_ref())
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(replicas("roomy"), [3, 3], "roomy: not named, so unchanged");
    let after: Vec<String> = watched.iter().map(|(c, p)| uid(shared, c, p)).collect();
    assert_eq!(before, after, "a Deployment was recreated");
}

/// `kubefedctl ARGS` with the federation's kubeconfig and the Karmada
/// control plane's (context `karmada`) merged through `KUBECONFIG`.
fn with_karmada(f: &Federation, args: &[&str]) -> Run {
    karmada_command(f, args).output().unwrap().into()
}

/// The command [`with_karmada`] runs, to spawn (and kill) it.
fn karmada_command(f: &Federation, args: &[&str]) -> std::process::Command {
    let kc =
        f.kc.with_file_name(format!("{}-karmada.kubeconfig", f.fedns));
    karmada()
        .kubeconfig()
        .only(&["karmada"])
        .write(&kc)
        .unwrap();
    let mut cmd = std::process::Command::new(KUBEFEDCTL);
    cmd.args(args)
        .args(["--kubefed-namespace", f.fedns])
        .env("KUBECONFIG", format!("{}:{}", f.kc.display(), kc.display()))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

#[test]
fn migrate_hands_the_federation_to_karmada_and_releases_it() {
    let shared = TestEnv::shared();
    let env = karmada();
    let f = Federation::new(shared, "kx-mig", &["configmaps", "deployments.apps"]);
    let (m1, both) = settings_and_web(shared, &f);
    // An RSP whose mapping is exact (weights only): Karmada must schedule
    // what KubeFed's planner did.
    f.create(
        shared,
        "FederatedDeployment",
        "api",
        json!({
            "template": fixture(deployment_type()).0,
            "placement": {"clusters": both.clone()}
        }),
    );
    let m2 = f.cluster("m2");
    f.create_rsp(shared, "api", 6, &[(m1.as_str(), 2), (m2.as_str(), 1)]);
    // A CRD type, as operators and forks federate them: Karmada's API
    // server must serve it too (the export writes its CRD).
    gadgets_everywhere(shared);
    f.run(&[
        "enable",
        "kxgadgets.kxmig.example.com",
        "--federated-group",
        f.group,
    ])
    .ok();
    f.create(
        shared,
        "FederatedKxGadget",
        "w",
        json!({
            "template": {"spec": {"size": 3}},
            "placement": {"clusters": both.clone()}
        }),
    );
    f.reconcile(&[]).ok();
    f.reconcile(&[]).ok();
    let replicas = || {
        [
            f.replicas(shared, "member1", "api"),
            f.replicas(shared, "member2", "api"),
        ]
    };
    assert_eq!(replicas(), [4, 2], "KubeFed's planner");
    let ns = f.ns;
    let cm = format!("/api/v1/namespaces/{ns}/configmaps/settings");
    let deploy = format!("/apis/apps/v1/namespaces/{ns}/deployments/web");
    let api = format!("/apis/apps/v1/namespaces/{ns}/deployments/api");
    let widget = format!("/apis/kxmig.example.com/v1/namespaces/{ns}/kxgadgets/w");
    let watched = [
        ("member1", &cm),
        ("member2", &cm),
        ("member1", &deploy),
        ("member1", &api),
        ("member2", &api),
        ("member1", &widget),
        ("member2", &widget),
    ];
    let before: Vec<String> = watched.iter().map(|(c, p)| uid(shared, c, p)).collect();
    let written: Vec<Value> = watched
        .iter()
        .map(|(c, p)| essence(get(shared, c, p).unwrap()))
        .collect();
    let args = [
        "migrate",
        "karmada",
        "--karmada-context",
        "karmada",
        "-n",
        ns,
    ];
    // A federated object of another namespace, which `-n` leaves to
    // KubeFed: the KubeFedClusters stay while it is there.
    let other = "kx-mig-other";
    namespace(shared, "host", other);
    let other_cm = format!(
        "/apis/{}/v1beta1/namespaces/{other}/federatedconfigmaps/left",
        f.group
    );
    post(
        shared,
        "host",
        other_cm.rsplit_once('/').unwrap().0,
        json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": "FederatedConfigMap",
               "metadata": {"name": "left", "namespace": other},
               "spec": {"template": {"data": {"x": "1"}}, "placement": {"clusters": []}}}),
    );
    let kfcs = format!(
        "/apis/core.kubefed.io/v1beta1/namespaces/{}/kubefedclusters",
        f.fedns
    );
    let (_, secret1) = f.kubefed_cluster(shared, &f.cluster("m1"));
    let (_, secret2) = f.kubefed_cluster(shared, &f.cluster("m2"));
    let member_identity = format!(
        "/api/v1/namespaces/{}/serviceaccounts/{}-host",
        f.fedns,
        f.cluster("m1")
    );
    assert!(get(shared, "member1", &member_identity).is_some());

    // --dry-run plans it and writes nothing, in Karmada or the host.
    let mut dry = args.to_vec();
    dry.push("--dry-run");
    let plan = with_karmada(&f, &dry).ok();
    assert!(plan.stdout.contains("would apply"), "{}", plan.stdout);
    assert!(
        plan.stdout
            .contains("PropagationPolicy kx-mig-objs/settings-configmap"),
        "{}",
        plan.stdout
    );
    assert!(
        get(
            env,
            "karmada",
            &format!("/api/v1/namespaces/{ns}/configmaps/settings")
        )
        .is_none()
    );

    // Not beside KubeFed's controller-manager: its leader lock is live.
    let record = json!({"holderIdentity": "kubefed-cm-1", "leaseDurationSeconds": 60,
        "acquireTime": rfc3339_in(0), "renewTime": rfc3339_in(0), "leaderTransitions": 0});
    let lock = format!("/api/v1/namespaces/{}/configmaps", f.fedns);
    post(
        shared,
        "host",
        &lock,
        json!({"metadata": {"name": "kubefed-controller-manager",
        "annotations": {"control-plane.alpha.kubernetes.io/leader": record.to_string()}}}),
    );
    let refused = with_karmada(&f, &args).fails();
    assert!(
        refused.stderr.contains("kubefed-cm-1"),
        "{}",
        refused.stderr
    );
    request(
        shared,
        "host",
        "DELETE",
        &format!("{lock}/kubefed-controller-manager"),
        None,
    );
    // Nor beside a shard of a reconcile or watch.
    let leases = format!("/apis/coordination.k8s.io/v1/namespaces/{}/leases", f.fedns);
    let now = rfc3339_in(0).replace('Z', ".000000Z");
    post(
        shared,
        "host",
        &leases,
        json!({"metadata": {"name": "kubefedctl-reconcile-0-of-2"},
        "spec": {"holderIdentity": "watch-0", "leaseDurationSeconds": 60, "acquireTime": now, "renewTime": now}}),
    );
    let refused = with_karmada(&f, &args).fails();
    assert!(
        refused
            .stderr
            .contains("kubefedctl-reconcile-0-of-2 (watch-0)"),
        "{}",
        refused.stderr
    );
    request(
        shared,
        "host",
        "DELETE",
        &format!("{leases}/kubefedctl-reconcile-0-of-2"),
        None,
    );

    // Killed (by the hook) at each step boundary before the release: each
    // run leaves the members as they were, releases nothing, and the next
    // one carries on from there.
    let unchanged = |when: &str| {
        let now: Vec<String> = watched.iter().map(|(c, p)| uid(shared, c, p)).collect();
        assert_eq!(before, now, "{when}: a member object was recreated");
        for ((c, p), was) in watched.iter().zip(&written) {
            assert_eq!(
                &essence(get(shared, c, p).unwrap()),
                was,
                "{when}: {c}: {p}"
            );
        }
        assert_eq!(replicas(), [4, 2], "{when}: replicas");
    };
    let fed_cm = format!(
        "/apis/{}/v1beta1/namespaces/{ns}/federatedconfigmaps/settings",
        f.group
    );
    let planned: usize = plan
        .stdout
        .split_whitespace()
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    let partial = format!("applying#{}", planned - 2);
    for point in ["recorded", partial.as_str()] {
        killed_at(shared, &f, &args, point);
        unchanged(point);
        assert!(get(shared, "host", &fed_cm).is_some(), "{point}: released");
    }

    // Stopped after the apply (here by a timeout): nothing is released,
    // and the next run finishes the move.
    let mut stopped = args.to_vec();
    stopped.extend(["--timeout", "0s"]);
    let run = with_karmada(&f, &stopped).fails();
    assert!(run.stderr.contains("did not apply"), "{}", run.stderr);
    assert!(
        get(shared, "host", &fed_cm).is_some(),
        "released before Karmada applied"
    );
    for point in ["applied", "waited", "verified"] {
        killed_at(shared, &f, &args, point);
        unchanged(point);
        assert!(get(shared, "host", &fed_cm).is_some(), "{point}: released");
    }

    // Killed in the middle of the release (the order: settings, api, its
    // RSP, web, the gadget, the FederatedNamespace): one object released,
    // the next annotated only; then deleted with its finalizer still on;
    // then released without its RSP yet. Each time the members are as
    // they were, and the next run releases the rest.
    let fed_api = format!(
        "/apis/{}/v1beta1/namespaces/{ns}/federateddeployments/api",
        f.group
    );
    let rsp_api = format!(
        "/apis/scheduling.kubefed.io/v1alpha1/namespaces/{ns}/replicaschedulingpreferences/api"
    );
    killed_at(shared, &f, &args, "orphaned#2");
    unchanged("orphaned#2");
    assert!(get(shared, "host", &fed_cm).is_none());
    let api_obj = get(shared, "host", &fed_api).unwrap();
    assert_eq!(
        api_obj["metadata"]["annotations"]["kubefed.io/orphan"],
        "true"
    );
    assert!(api_obj["metadata"]["deletionTimestamp"].is_null());
    killed_at(shared, &f, &args, "deleted#1");
    unchanged("deleted#1");
    let api_obj = get(shared, "host", &fed_api).unwrap();
    assert!(!api_obj["metadata"]["deletionTimestamp"].is_null());
    killed_at(shared, &f, &args, "released#1");
    unchanged("released#1");
    assert!(get(shared, "host", &fed_api).is_none());
    assert!(
        get(shared, "host", &rsp_api).is_some(),
        "the RSP went first"
    );
    assert!(f.fed(shared, "federateddeployments", "web").is_some());

    // Killed (SIGKILL) while it works, the federation lock in hand: the
    // lease stays until it expires; the next run waits for it
    // (--lock-timeout) and finishes the move.
    let mut child = karmada_command(&f, &args).spawn().unwrap();
    let lease = format!(
        "/apis/coordination.k8s.io/v1/namespaces/{}/leases/kubefedctl-reconcile",
        f.fedns
    );
    let me = format!("pid {}", child.id());
    wait_until("the killed run's lease", || {
        get(shared, "host", &lease).is_some_and(|l| {
            l["spec"]["holderIdentity"]
                .as_str()
                .is_some_and(|h| h.contains(&me))
        })
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    let mut resumed = args.to_vec();
    resumed.extend(["--lock-timeout", "90s"]);
    let run = with_karmada(&f, &resumed).ok();
    assert!(
        run.stdout.contains("migrated to Karmada"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    let after: Vec<String> = watched.iter().map(|(c, p)| uid(shared, c, p)).collect();
    assert_eq!(before, after, "a member object was recreated");
    // Field for field what reconcile wrote, Karmada's own marks aside.
    for ((c, p), was) in watched.iter().zip(&written) {
        assert_eq!(&essence(get(shared, c, p).unwrap()), was, "{c}: {p}");
    }
    for (c, p) in watched {
        let obj = get(shared, c, p).unwrap();
        assert_eq!(
            obj["metadata"]["labels"]["karmada.io/managed"], "true",
            "{c}: {p}"
        );
    }
    assert_eq!(
        get(shared, "member1", &cm).unwrap()["data"],
        json!({"a": "m1"})
    );
    assert_eq!(
        replicas(),
        [4, 2],
        "Karmada's static weights schedule as KubeFed's RSP did"
    );
    // The host holds no federated object of the namespace any more.
    for plural in [
        "federatedconfigmaps",
        "federateddeployments",
        "federatednamespaces",
        "federatedkxgadgets",
    ] {
        let path = format!("/apis/{}/v1beta1/namespaces/{ns}/{plural}", f.group);
        let list = get(shared, "host", &path).unwrap();
        assert_eq!(list["items"], json!([]), "{plural}");
    }
    // The KubeFedClusters stay while KubeFed still has an object...
    assert!(
        run.stdout.contains(
            "2 KubeFedCluster(s) kept: 1 federated object(s) remain (namespaces: kx-mig-other)"
        ),
        "{}",
        run.stdout
    );
    let clusters_left = || {
        get(shared, "host", &kfcs).unwrap()["items"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(clusters_left(), 2);
    request(shared, "host", "DELETE", &other_cm, None);
    // ... or while a federated type cannot be listed (its objects may
    // remain): here an FTC whose federated CRD does not exist.
    let ftcs = format!(
        "/apis/core.kubefed.io/v1beta1/namespaces/{}/federatedtypeconfigs",
        f.fedns
    );
    post(
        shared,
        "host",
        &ftcs,
        json!({"apiVersion": "core.kubefed.io/v1beta1", "kind": "FederatedTypeConfig",
               "metadata": {"name": "kxnones.kxmig.example.com", "namespace": f.fedns},
               "spec": {"propagation": "Enabled",
                        "targetType": {"group": "kxmig.example.com", "version": "v1", "kind": "KxNone",
                                       "pluralName": "kxnones", "scope": "Namespaced"},
                        "federatedType": {"group": f.group, "version": "v1beta1", "kind": "FederatedKxNone",
                                          "pluralName": "federatedkxnones", "scope": "Namespaced"}}}),
    );
    let run = with_karmada(&f, &args).ok();
    assert!(
        run.stdout.contains(
            "2 KubeFedCluster(s) kept: federated type(s) not listed, objects may remain: kxnones.kxmig.example.com:"
        ),
        "{}",
        run.stdout
    );
    assert_eq!(clusters_left(), 2);
    request(
        shared,
        "host",
        "DELETE",
        &format!("{ftcs}/kxnones.kxmig.example.com"),
        None,
    );
    // ... or when kept.
    let mut keep = args.to_vec();
    keep.push("--keep-clusters");
    let run = with_karmada(&f, &keep).ok();
    assert!(
        run.stdout
            .contains("2 KubeFedCluster(s) kept (--keep-clusters)"),
        "{}",
        run.stdout
    );
    assert_eq!(clusters_left(), 2);
    // Otherwise they go, each after its Secret, once nothing federated is
    // left. Killed between the first Secret and its KubeFedCluster, the
    // next run does not apply a Secret without a token over Karmada's,
    // and finishes.
    killed_at(shared, &f, &args, "unjoining#1");
    assert_eq!(clusters_left(), 2);
    assert!(get(shared, "host", &secret1).is_none() || get(shared, "host", &secret2).is_none());
    let run = with_karmada(&f, &args).ok();
    assert!(
        run.stdout
            .contains("2 KubeFedCluster(s) and their Secrets removed from the host"),
        "{}",
        run.stdout
    );
    assert_eq!(clusters_left(), 0);
    assert!(get(shared, "host", &secret1).is_none());
    assert!(get(shared, "host", &secret2).is_none());
    // Nothing in a member: the identity Karmada uses is still there, and
    // so is the token Karmada holds.
    assert!(get(shared, "member1", &member_identity).is_some());
    for m in ["m1", "m2"] {
        let secret = get(
            env,
            "karmada",
            &format!(
                "/api/v1/namespaces/karmada-cluster/secrets/{}",
                f.cluster(m)
            ),
        )
        .unwrap();
        assert!(secret["data"]["token"].is_string(), "{m}: token lost");
    }
    unchanged("the KubeFedClusters removed");
    // Karmada owns the copies now.
    patch(
        env,
        "karmada",
        &cm,
        json!({"data": {"b": "after-migration"}}),
    );
    wait_until("Karmada's change in both members", || {
        ["member1", "member2"]
            .iter()
            .all(|c| get(shared, c, &cm).is_some_and(|o| o["data"]["b"] == "after-migration"))
    });
    // Run again (as after an interruption): nothing left to release, done.
    let again = with_karmada(&f, &args).ok();
    assert!(
        again.stdout.contains("0 KubeFed object(s) released"),
        "{}",
        again.stdout
    );
    let after: Vec<String> = watched.iter().map(|(c, p)| uid(shared, c, p)).collect();
    assert_eq!(before, after);
}

/// `migrate ARGS` stopped by its own hook at `point`
/// (`KUBEFEDCTL_MIGRATE_KILL_AT`): it died of SIGKILL there, the
/// federation lock still its own; the lock is then removed, as its expiry
/// would remove it (waiting for that is tested once, with a kill from
/// outside).
fn killed_at(shared: &TestEnv, f: &Federation, args: &[&str], point: &str) {
    use std::os::unix::process::ExitStatusExt;
    let mut cmd = karmada_command(f, args);
    cmd.env("KUBEFEDCTL_MIGRATE_KILL_AT", point);
    let child = cmd.spawn().unwrap();
    let me = format!("pid {}", child.id());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGKILL),
        "{point}: not killed there\n{}\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.contains(&format!("KUBEFEDCTL_MIGRATE_KILL_AT={point}: killed at")),
        "{stderr}"
    );
    let lease = format!(
        "/apis/coordination.k8s.io/v1/namespaces/{}/leases/kubefedctl-reconcile",
        f.fedns
    );
    let holder = get(shared, "host", &lease).unwrap()["spec"]["holderIdentity"].clone();
    assert!(
        holder.as_str().is_some_and(|h| h.contains(&me)),
        "{point}: the lease of {holder}"
    );
    request(shared, "host", "DELETE", &lease, None);
}

/// A member object as its writer made it: without what the server keeps
/// for itself (resourceVersion, managedFields, generation, status) and
/// without Karmada's own labels and annotations (`*.karmada.io/*`:
/// `karmada.io/managed`, `propagationpolicy.karmada.io/*`,
/// `resourcebinding.karmada.io/*`, `resourcetemplate.karmada.io/*`,
/// `work.karmada.io/*`).
fn essence(mut obj: Value) -> Value {
    let meta = obj["metadata"].as_object_mut().unwrap();
    for k in ["resourceVersion", "managedFields", "generation"] {
        meta.remove(k);
    }
    for k in ["labels", "annotations"] {
        if let Some(m) = meta.get_mut(k).and_then(Value::as_object_mut) {
            m.retain(|key, _| !key.split('/').next().unwrap_or("").ends_with("karmada.io"));
            if m.is_empty() {
                meta.remove(k);
            }
        }
    }
    obj.as_object_mut().unwrap().remove("status");
    obj
}

/// The KxGadget CRD (`kxgadgets.kxmig.example.com`) in the host and both
/// members, served.
fn gadgets_everywhere(shared: &TestEnv) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "kxgadgets.kxmig.example.com"},
        "spec": {"group": "kxmig.example.com", "scope": "Namespaced",
            "names": {"kind": "KxGadget", "plural": "kxgadgets", "singular": "kxgadget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema":
                {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}
    });
    for cluster in ["host", "member1", "member2"] {
        post(
            shared,
            cluster,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            crd.clone(),
        );
        wait_until(&format!("kxgadgets served in {cluster}"), || {
            get(shared, cluster, "/apis/kxmig.example.com/v1/kxgadgets").is_some()
        });
    }
}
