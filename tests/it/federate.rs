//! federate through the built binary: live resources of each default type,
//! a namespace with its contents, files and stdin (offline), idempotence.

use crate::fixtures::{assert_golden, get, kubefedctl, post, root, write_kubeconfig, yaml_docs};
use serde_json::{Value, json};
use std::io::Write;
use std::process::{Command, Stdio};
use testenv::TestEnv;

/// kubefedctl with `input` on stdin (no kubeconfig needed).
fn with_stdin(args: &[&str], input: &[u8]) -> std::process::Output {
    let mut child = Command::new(crate::fixtures::KUBEFEDCTL)
        .args(args)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

fn setup(env: &TestEnv, test: &str, kubefed_ns: &str, source_ns: &str) -> std::path::PathBuf {
    let kc = write_kubeconfig(env, test, env.kubeconfig().current_context("host"));
    kubefedctl(&kc, &["init", "--kubefed-namespace", kubefed_ns]).ok();
    let directives = crate::fixtures::root().join("testdata/enabletypedirectives.yaml");
    kubefedctl(
        &kc,
        &[
            "enable",
            "-f",
            directives.to_str().unwrap(),
            "--kubefed-namespace",
            kubefed_ns,
        ],
    )
    .ok();
    post(
        env,
        "host",
        "/api/v1/namespaces",
        json!({"metadata": {"name": source_ns, "labels": {"team": "a"}}}),
    );
    kc
}

#[test]
fn one_resource_of_each_default_type() {
    let env = TestEnv::shared();
    let kc = setup(env, "federate-a", "federate-a", "src-a");
    let ns = "src-a";
    post(
        env,
        "host",
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        json!({"metadata": {"name": "cm", "labels": {"app": "x"}, "annotations": {"note": "n"}}, "data": {"k": "v"}}),
    );
    post(
        env,
        "host",
        &format!("/api/v1/namespaces/{ns}/secrets"),
        json!({"metadata": {"name": "s"}, "stringData": {"p": "q"}}),
    );
    post(
        env,
        "host",
        &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
        json!({"metadata": {"name": "bot"}}),
    );
    post(
        env,
        "host",
        &format!("/api/v1/namespaces/{ns}/services"),
        json!({"metadata": {"name": "svc"}, "spec": {"type": "NodePort", "selector": {"app": "x"}, "ports": [{"port": 80}]}}),
    );
    let pod = json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let job_pod = json!({"spec": {"containers": [{"name": "c", "image": "nginx"}], "restartPolicy": "Never"}});
    post(
        env,
        "host",
        &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": pod}}),
    );
    post(
        env,
        "host",
        &format!("/apis/apps/v1/namespaces/{ns}/replicasets"),
        json!({"metadata": {"name": "rs"}, "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": pod}}),
    );
    post(
        env,
        "host",
        &format!("/apis/batch/v1/namespaces/{ns}/jobs"),
        json!({"metadata": {"name": "j"}, "spec": {"template": job_pod}}),
    );
    post(
        env,
        "host",
        &format!("/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses"),
        json!({"metadata": {"name": "i"}, "spec": {"defaultBackend": {"service": {"name": "svc", "port": {"number": 80}}}}}),
    );
    post(
        env,
        "host",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"metadata": {"name": "federate-a-role"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
    );

    let federate = |args: &[&str]| {
        kubefedctl(
            &kc,
            &[
                &["federate"][..],
                args,
                &["--kubefed-namespace", "federate-a"][..],
            ]
            .concat(),
        )
    };
    for (t, name) in [
        ("configmaps", "cm"),
        ("secrets", "s"),
        ("serviceaccounts", "bot"),
        ("services", "svc"),
        ("deployments.apps", "d"),
        ("replicasets.apps", "rs"),
        ("jobs.batch", "j"),
        ("ingresses.networking.k8s.io", "i"),
        ("clusterroles.rbac.authorization.k8s.io", "federate-a-role"),
        ("namespaces", ns),
    ] {
        let run = federate(&[t, name, "-n", ns]).ok();
        assert!(run.stdout.contains(" created"), "{t}: {}", run.stdout);
    }
    let fed = |path: &str| {
        get(
            env,
            "host",
            &format!("/apis/types.kubefed.io/v1beta1/{path}"),
        )
        .unwrap()
    };
    let cm = fed(&format!("namespaces/{ns}/federatedconfigmaps/cm"));
    assert_eq!(
        cm["spec"]["template"],
        json!({"data": {"k": "v"}, "metadata": {"labels": {"app": "x"}}})
    );
    assert_eq!(
        cm["spec"]["placement"],
        json!({"clusterSelector": {"matchLabels": {}}})
    );
    let svc = fed(&format!("namespaces/{ns}/federatedservices/svc"));
    assert!(svc["spec"]["template"]["spec"].get("clusterIP").is_none());
    assert!(
        svc["spec"]["template"]["spec"]["ports"][0]
            .get("nodePort")
            .is_none()
    );
    let sa = fed(&format!("namespaces/{ns}/federatedserviceaccounts/bot"));
    assert!(sa["spec"]["template"].get("secrets").is_none());
    let fns = fed(&format!("namespaces/{ns}/federatednamespaces/{ns}"));
    // 1.22+ labels every Namespace `kubernetes.io/metadata.name`; the
    // template keeps the Namespace's labels as KubeFed's federate does.
    let mut labels = json!({"team": "a"});
    if env.version().minor >= 22 {
        labels["kubernetes.io/metadata.name"] = json!(ns);
    }
    // Its spec is left empty once the finalizers are scrubbed, as KubeFed's.
    assert_eq!(
        fns["spec"]["template"],
        json!({"metadata": {"labels": labels}, "spec": {}})
    );
    let role = fed("federatedclusterroles/federate-a-role");
    assert_eq!(
        role["spec"]["template"]["rules"][0]["verbs"],
        json!(["get"])
    );
    let d = fed(&format!("namespaces/{ns}/federateddeployments/d"));
    assert_eq!(
        d["spec"]["template"]["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx"
    );

    // Idempotent: unchanged; a changed source needs --overwrite.
    let again = federate(&["configmaps", "cm", "-n", ns]).ok();
    assert!(again.stdout.contains("unchanged"), "{}", again.stdout);
    let r = env
        .request(
            "host",
            "PATCH",
            &format!("/api/v1/namespaces/{ns}/configmaps/cm"),
            Some(r#"{"data":{"k":"changed"}}"#),
        )
        .unwrap();
    assert_eq!(r.status, 200);
    let refused = federate(&["configmaps", "cm", "-n", ns]).fails();
    assert!(
        refused.stderr.contains("pass --overwrite"),
        "{}",
        refused.stderr
    );
    federate(&["configmaps", "cm", "-n", ns, "--overwrite"]).ok();
    assert_eq!(
        fed(&format!("namespaces/{ns}/federatedconfigmaps/cm"))["spec"]["template"]["data"]["k"],
        "changed"
    );
}

#[test]
fn a_namespace_with_contents_skips_types_that_are_not_federated() {
    let env = TestEnv::shared();
    let kc = setup(env, "federate-b", "federate-b", "src-b");
    let ns = "src-b";
    post(
        env,
        "host",
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        json!({"metadata": {"name": "b-config"}, "data": {"x": "1"}}),
    );
    post(
        env,
        "host",
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        json!({"metadata": {"name": "a-config"}, "data": {"x": "2"}}),
    );
    // What Kubernetes 1.21+ puts in every namespace (made here by hand).
    post(
        env,
        "host",
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        json!({"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "x"}}),
    );
    post(
        env,
        "host",
        &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"),
        json!({"metadata": {"name": "reader"}, "rules": []}),
    );
    let proxy = env.proxy("host").unwrap();
    let kcp = write_kubeconfig(
        env,
        "federate-b-proxy",
        env.kubeconfig()
            .current_context("host")
            .server("host", &proxy.url()),
    );

    let run = kubefedctl(
        &kcp,
        &[
            "federate",
            "namespaces",
            ns,
            "--contents",
            "-o",
            "yaml",
            "--kubefed-namespace",
            "federate-b",
        ],
    )
    .ok();
    let objs = yaml_docs(&run.stdout);
    let names: Vec<String> = objs
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            "FederatedNamespace/src-b",
            "FederatedConfigMap/a-config",
            "FederatedConfigMap/b-config",
            "FederatedRole/reader",
            "FederatedServiceAccount/default"
        ],
        "stable order: the namespace, then by type and name"
    );
    assert!(
        run.stderr
            .contains(&format!("ConfigMap {ns}/kube-root-ca.crt"))
            && run.stderr.contains("left out"),
        "the cluster's own objects are named as left out: {}",
        run.stderr
    );
    assert_eq!(proxy.writes(), 0, "-o writes nothing");

    let live = kubefedctl(
        &kcp,
        &[
            "federate",
            "namespaces",
            ns,
            "--contents",
            "--kubefed-namespace",
            "federate-b",
        ],
    )
    .ok();
    assert!(
        live.stderr
            .contains("skipped types with no FederatedTypeConfig"),
        "{}",
        live.stderr
    );
    assert!(
        live.stderr
            .contains("roles.rbac.authorization.k8s.io (1 object(s))"),
        "{}",
        live.stderr
    );
    assert!(
        get(
            env,
            "host",
            &format!("/apis/types.kubefed.io/v1beta1/namespaces/{ns}/federatedconfigmaps/a-config")
        )
        .is_some()
    );
    assert!(
        get(
            env,
            "host",
            &format!("/apis/types.kubefed.io/v1beta1/namespaces/{ns}/federatednamespaces/{ns}")
        )
        .is_some()
    );

    proxy.reset_records();
    let dry = kubefedctl(
        &kcp,
        &[
            "federate",
            "namespaces",
            ns,
            "--contents",
            "-t",
            "--dry-run",
            "--kubefed-namespace",
            "federate-b",
        ],
    )
    .ok();
    assert!(
        dry.stdout
            .contains("federatedrole.types.kubefed.io/reader in namespace src-b would be created"),
        "{}",
        dry.stdout
    );
    assert_eq!(proxy.writes(), 0, "--dry-run writes nothing");
    let with_t = kubefedctl(
        &kcp,
        &[
            "federate",
            "namespaces",
            ns,
            "--contents",
            "-t",
            "--kubefed-namespace",
            "federate-b",
        ],
    )
    .ok();
    assert!(
        with_t.stdout.contains(
            "federatedtypeconfig.core.kubefed.io/roles.rbac.authorization.k8s.io created"
        ),
        "{}",
        with_t.stdout
    );
    assert!(
        get(
            env,
            "host",
            &format!("/apis/types.kubefed.io/v1beta1/namespaces/{ns}/federatedroles/reader")
        )
        .is_some()
    );

    let wrong = kubefedctl(
        &kc,
        &["federate", "configmaps", "a-config", "-n", ns, "--contents"],
    )
    .usage();
    assert!(
        wrong
            .stderr
            .contains("--contents can only be used with type namespaces")
    );
}

#[test]
fn files_and_stdin_need_no_cluster_and_match_the_golden_file() {
    let input = root().join("testdata/federate/app.yaml");
    let no_kubeconfig = root().join("testdata/federate/does-not-exist.kubeconfig");
    let run = kubefedctl(&no_kubeconfig, &["federate", "-f", input.to_str().unwrap()]).ok();
    assert_golden("federate-app.yaml", &run.stdout);
    let objs = yaml_docs(&run.stdout);
    assert_eq!(objs.len(), 3);
    assert!(
        objs[1]["metadata"].get("namespace").is_none(),
        "a Deployment without namespace stays namespaced (no guess)"
    );
    assert!(
        run.stderr
            .contains("annotations of ConfigMap \"demo/web-config\""),
        "{}",
        run.stderr
    );

    // stdin, JSON out, a placement.
    let out = with_stdin(
        &[
            "federate",
            "-f",
            "-",
            "-o",
            "json",
            "--placement-clusters",
            "member1,member2",
        ],
        b"apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: n}\ndata: {k: dg==}\n",
    );
    assert!(out.status.success());
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list["items"][0]["kind"], "FederatedSecret");
    assert_eq!(
        list["items"][0]["spec"]["placement"],
        json!({"clusters": [{"name": "member1"}, {"name": "member2"}]})
    );

    let bad = crate::fixtures::kubefedctl(
        &no_kubeconfig,
        &[
            "federate",
            "-f",
            root().join("Cargo.toml").to_str().unwrap(),
        ],
    )
    .fails();
    assert!(
        bad.stderr.contains("Cargo.toml"),
        "the file is named: {}",
        bad.stderr
    );
}

#[test]
fn names_that_are_not_dns_1123_subdomains_are_skipped_with_a_warning() {
    let env = TestEnv::shared();
    let kc = setup(env, "federate-c", "federate-c", "src-c");
    let ns = "src-c";
    post(
        env,
        "host",
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        json!({"metadata": {"name": "settings"}, "data": {"k": "v"}}),
    );
    // RBAC names may hold colons; a federated (custom) resource's may not.
    post(
        env,
        "host",
        &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"),
        json!({"metadata": {"name": "system:reader"}, "rules": []}),
    );
    post(
        env,
        "host",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"metadata": {"name": "system:controller:federate-c"}, "rules": []}),
    );
    let federate = |args: &[&str]| {
        kubefedctl(
            &kc,
            &[
                &["federate"][..],
                args,
                &["--kubefed-namespace", "federate-c"][..],
            ]
            .concat(),
        )
    };

    // --contents: the Role is left out with a warning, the rest goes on.
    let out = federate(&["namespaces", ns, "--contents", "-o", "yaml"]).ok();
    let kinds: Vec<String> = yaml_docs(&out.stdout)
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        kinds.contains(&"FederatedConfigMap/settings".to_string())
            && !kinds.iter().any(|k| k.starts_with("FederatedRole/")),
        "{kinds:?}"
    );
    assert!(
        out.stderr.contains(
            "warning: skipping Role \"src-c/system:reader\" because its name does not conform to the DNS-1123 subdomain spec"
        ),
        "{}",
        out.stderr
    );
    let live = federate(&["namespaces", ns, "--contents"]).ok();
    assert!(
        live.stderr
            .contains("skipping Role \"src-c/system:reader\"")
            && !live.stderr.contains("roles.rbac.authorization.k8s.io ("),
        "a skipped object does not count as unfederated: {}",
        live.stderr
    );
    assert!(
        live.stdout
            .contains("federatedconfigmap.types.kubefed.io/settings in namespace src-c created"),
        "{}",
        live.stdout
    );

    // One named object: skipped with a warning, nothing written.
    let one = federate(&[
        "clusterroles.rbac.authorization.k8s.io",
        "system:controller:federate-c",
    ])
    .ok();
    assert!(
        one.stderr.contains(
            "warning: skipping ClusterRole \"system:controller:federate-c\" because its name does not conform to the DNS-1123 subdomain spec"
        ),
        "{}",
        one.stderr
    );
    assert!(one.stdout.trim().is_empty(), "{}", one.stdout);
    let fcrs = get(
        env,
        "host",
        "/apis/types.kubefed.io/v1beta1/federatedclusterroles",
    )
    .unwrap();
    assert!(
        !fcrs["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["metadata"]["name"] == "system:controller:federate-c")
    );

    // -f (offline): the same rule, the file's other objects still federated.
    let out = with_stdin(&["federate", "-f", "-"], b"apiVersion: v1\nkind: List\nitems:\n- apiVersion: rbac.authorization.k8s.io/v1\n  kind: ClusterRole\n  metadata: {name: 'system:controller:x'}\n  rules: []\n- apiVersion: rbac.authorization.k8s.io/v1\n  kind: ClusterRole\n  metadata: {name: viewer}\n  rules: []\n");
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let objs = yaml_docs(&stdout);
    assert_eq!(objs.len(), 1, "{stdout}");
    assert_eq!(objs[0]["metadata"]["name"], "viewer");
    assert!(
        stderr.contains(
            "warning: stdin: document 1: skipping ClusterRole \"system:controller:x\" because its name does not conform to the DNS-1123 subdomain spec"
        ),
        "{stderr}"
    );
}

#[test]
fn system_namespaces_get_a_note_that_reconcile_leaves_them_alone() {
    let env = TestEnv::shared();
    let kc = setup(env, "federate-d", "federate-d", "src-d");
    let proxy = env.proxy("host").unwrap();
    let kcp = write_kubeconfig(
        env,
        "federate-d-proxy",
        env.kubeconfig()
            .current_context("host")
            .server("host", &proxy.url()),
    );
    let note = |ns: &str| {
        format!(
            "note: {ns:?} is a system namespace: reconcile will not propagate the namespace itself"
        )
    };

    // default, with its contents: the note, and the FederatedNamespace is still made.
    let dry = kubefedctl(
        &kcp,
        &[
            "federate",
            "namespaces",
            "default",
            "--contents",
            "--dry-run",
            "--kubefed-namespace",
            "federate-d",
        ],
    )
    .ok();
    assert!(dry.stderr.contains(&note("default")), "{}", dry.stderr);
    assert!(
        dry.stderr
            .contains("but the federated resources inside it are still propagated"),
        "{}",
        dry.stderr
    );
    assert!(
        dry.stdout
            .contains("federatednamespace.types.kubefed.io/default in namespace default"),
        "{}",
        dry.stdout
    );
    assert_eq!(proxy.writes(), 0, "--dry-run writes nothing");

    // The other system namespaces, and the federation's own (--kubefed-namespace).
    for ns in ["kube-system", "kube-public", "federate-d"] {
        let out = kubefedctl(
            &kc,
            &[
                "federate",
                "namespaces",
                ns,
                "--contents",
                "-o",
                "yaml",
                "--kubefed-namespace",
                "federate-d",
            ],
        )
        .ok();
        assert!(out.stderr.contains(&note(ns)), "{ns}: {}", out.stderr);
        assert_eq!(
            yaml_docs(&out.stdout)[0]["kind"],
            "FederatedNamespace",
            "{ns}: still federated"
        );
    }

    // Any other namespace: no note.
    let plain = kubefedctl(
        &kc,
        &[
            "federate",
            "namespaces",
            "src-d",
            "-o",
            "yaml",
            "--kubefed-namespace",
            "federate-d",
        ],
    )
    .ok();
    assert!(
        !plain.stderr.contains("system namespace"),
        "{}",
        plain.stderr
    );
}
