//! init, join and unjoin through the built binary against real API servers
//! (host, member1, member2), with counting proxies where requests count.
//! Each test has its own kubefed namespace and cluster names.

use crate::fixtures::{Federation, b64, get, gone, kubefedctl, post, write_kubeconfig, yaml_docs};
use serde_json::json;
use std::time::Duration;
use testenv::{Faults, Mode, TestEnv, http};

fn init(env: &TestEnv, test: &str, ns: &str, extra: &[&str]) -> std::path::PathBuf {
    let kc = write_kubeconfig(env, test, env.kubeconfig().current_context("host"));
    let mut args = vec!["init", "--kubefed-namespace", ns];
    args.extend_from_slice(extra);
    kubefedctl(&kc, &args).ok();
    kc
}

#[test]
fn init_creates_the_api_then_writes_nothing_and_output_needs_no_cluster() {
    let env = TestEnv::shared();
    let proxy = env.proxy("host").unwrap();
    let kc = write_kubeconfig(
        env,
        "init",
        env.kubeconfig()
            .current_context("host")
            .server("host", &proxy.url()),
    );
    let run = kubefedctl(&kc, &["init", "--kubefed-namespace", "fed-init"]).ok();
    assert!(
        run.stdout
            .contains("kubefedconfig.core.kubefed.io/kubefed created (host)"),
        "{}",
        run.stdout
    );
    for crd in [
        "kubefedclusters.core.kubefed.io",
        "federatedtypeconfigs.core.kubefed.io",
        "kubefedconfigs.core.kubefed.io",
        "propagatedversions.core.kubefed.io",
        "clusterpropagatedversions.core.kubefed.io",
        "replicaschedulingpreferences.scheduling.kubefed.io",
        "federatedservicestatuses.core.kubefed.io",
    ] {
        let c = get(
            env,
            "host",
            &format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}"),
        )
        .unwrap_or_else(|| panic!("{crd} missing"));
        assert!(
            c["status"]["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["type"] == "Established")
        );
    }
    let cfg = get(
        env,
        "host",
        "/apis/core.kubefed.io/v1beta1/namespaces/fed-init/kubefedconfigs/kubefed",
    )
    .unwrap();
    assert_eq!(cfg["spec"]["scope"], "Cluster");
    assert_eq!(cfg["spec"]["syncController"]["adoptResources"], "Enabled");

    proxy.reset_records();
    let again = kubefedctl(&kc, &["init", "--kubefed-namespace", "fed-init"]).ok();
    assert_eq!(
        proxy.writes(),
        0,
        "an initialised host gets no write: {:?}",
        proxy.records()
    );
    assert!(!again.stdout.contains(" created"), "{}", again.stdout);
    assert_eq!(again.stdout.matches(" unchanged (host)").count(), 9);

    let refused = kubefedctl(
        &kc,
        &[
            "init",
            "--kubefed-namespace",
            "fed-init",
            "--scope",
            "Namespaced",
        ],
    )
    .fails();
    assert!(
        refused.stderr.contains("has scope Cluster"),
        "{}",
        refused.stderr
    );

    proxy.reset_records();
    let yaml = kubefedctl(&kc, &["init", "-o", "yaml", "--kubefed-namespace", "x"]).ok();
    assert!(proxy.records().is_empty(), "-o yaml talks to no cluster");
    let docs = yaml_docs(&yaml.stdout);
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.len(), 9);
    assert_eq!(kinds[0], "Namespace");
    assert_eq!(kinds[8], "KubeFedConfig");
}

/// The token, endpoint and CA a join stored in the host, used on their own.
fn joined_credentials(env: &TestEnv, ns: &str, cluster: &str) -> (String, String, String) {
    let kfc = get(
        env,
        "host",
        &format!("/apis/core.kubefed.io/v1beta1/namespaces/{ns}/kubefedclusters/{cluster}"),
    )
    .expect("KubeFedCluster");
    let secret_name = kfc["spec"]["secretRef"]["name"].as_str().unwrap();
    let secret = get(
        env,
        "host",
        &format!("/api/v1/namespaces/{ns}/secrets/{secret_name}"),
    )
    .unwrap();
    let token = b64(secret["data"]["token"].as_str().unwrap());
    let ca = b64(kfc["spec"]["caBundle"].as_str().unwrap());
    assert_eq!(b64(secret["data"]["ca.crt"].as_str().unwrap()), ca);
    (
        kfc["spec"]["apiEndpoint"].as_str().unwrap().to_string(),
        ca,
        token,
    )
}

fn as_member(
    endpoint: &str,
    ca: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> u16 {
    http::request(
        method,
        &format!("{endpoint}{path}"),
        ca,
        Some(token),
        body,
        Duration::from_secs(10),
    )
    .unwrap()
    .status
}

const CONFIGMAP: &str =
    r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"probe"},"data":{"a":"b"}}"#;

#[test]
fn cluster_scoped_join_writes_every_object_and_its_token_works() {
    let env = TestEnv::shared();
    let kc = init(env, "join-a", "fed-a", &[]);
    let run = kubefedctl(
        &kc,
        &[
            "join",
            "m1a",
            "--cluster-context",
            "member1",
            "--kubefed-namespace",
            "fed-a",
            "--rbac",
            "admin",
        ],
    )
    .ok();
    assert!(
        run.stdout
            .contains("Cluster \"m1a\" joined host \"host\" (cluster-scoped"),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains("only reachable from this machine"),
        "loopback warning: {}",
        run.stderr
    );
    assert!(
        !run.stdout.contains("eyJ") && !run.stderr.contains("eyJ"),
        "no token in output"
    );

    let ns = get(env, "member1", "/api/v1/namespaces/fed-a").unwrap();
    assert_eq!(
        ns["metadata"]["annotations"]["kubefedctl.kubefed.io/created-by-join"],
        "true"
    );
    let sa = get(
        env,
        "member1",
        "/api/v1/namespaces/fed-a/serviceaccounts/m1a-host",
    )
    .unwrap();
    assert_eq!(sa["automountServiceAccountToken"], false);
    // KubeFed's annotation, deprecated (and answered with a Warning) from 1.32.
    let mountable = &sa["metadata"]["annotations"]["kubernetes.io/enforce-mountable-secrets"];
    if env.cluster("member1").version.minor >= 32 {
        assert!(mountable.is_null(), "{sa}");
    } else {
        assert_eq!(mountable, "true");
    }
    // A token Secret listed in `.secrets` is what 1.30+ invalidates after a
    // year unused (LegacyServiceAccountTokenCleanUp): never listed.
    assert!(
        sa["secrets"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|s| s["name"] != "m1a-host"),
        "{sa}"
    );
    let token_secret = get(env, "member1", "/api/v1/namespaces/fed-a/secrets/m1a-host").unwrap();
    assert_eq!(token_secret["type"], "kubernetes.io/service-account-token");
    let role = "kubefed-controller-manager:m1a-host";
    let cr = get(
        env,
        "member1",
        &format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{role}"),
    )
    .unwrap();
    assert_eq!(cr["rules"][0]["verbs"][0], "*");
    assert_eq!(cr["rules"][1]["nonResourceURLs"][0], "*");
    let crb = get(
        env,
        "member1",
        &format!("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{role}"),
    )
    .unwrap();
    assert_eq!(crb["subjects"][0]["name"], "m1a-host");
    assert_eq!(crb["subjects"][0]["namespace"], "fed-a");
    assert_eq!(crb["roleRef"]["name"], role);

    let kfc = get(
        env,
        "host",
        "/apis/core.kubefed.io/v1beta1/namespaces/fed-a/kubefedclusters/m1a",
    )
    .unwrap();
    assert_eq!(kfc["spec"]["apiEndpoint"], env.cluster("member1").url());
    assert!(kfc["spec"].get("disabledTLSValidations").is_none());
    assert!(
        kfc["spec"]["secretRef"]["name"]
            .as_str()
            .unwrap()
            .starts_with("m1a-")
    );

    let (endpoint, ca, token) = joined_credentials(env, "fed-a", "m1a");
    assert_eq!(ca.trim(), env.ca_pem().trim());
    assert_eq!(
        as_member(&endpoint, &ca, &token, "GET", "/api/v1/namespaces", None),
        200
    );
    assert_eq!(
        as_member(
            &endpoint,
            &ca,
            &token,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some(CONFIGMAP)
        ),
        201
    );
    assert_eq!(
        as_member(
            &endpoint,
            &ca,
            "not-a-token",
            "GET",
            "/api/v1/namespaces",
            None
        ),
        401
    );
}

#[test]
fn namespace_scoped_join_limits_the_token_to_the_kubefed_namespace() {
    let env = TestEnv::shared();
    let kc = init(env, "join-b", "fed-b", &["--scope", "Namespaced"]);
    // Least privilege (the default): the Role grants the enabled types'
    // verbs, in the federation namespace only.
    kubefedctl(
        &kc,
        &[
            "enable",
            "configmaps",
            "--kubefed-namespace",
            "fed-b",
            "--federated-group",
            "joinb.kubefed.io",
        ],
    )
    .ok();
    let run = kubefedctl(
        &kc,
        &[
            "join",
            "m2b",
            "--cluster-context",
            "member2",
            "--kubefed-namespace",
            "fed-b",
        ],
    )
    .ok();
    assert!(run.stdout.contains("namespace-scoped"), "{}", run.stdout);
    let role = "kubefed-controller-manager:m2b-host";
    assert!(
        get(
            env,
            "member2",
            &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/fed-b/roles/{role}")
        )
        .is_some()
    );
    assert!(
        get(
            env,
            "member2",
            &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/fed-b/rolebindings/{role}")
        )
        .is_some()
    );
    assert!(
        get(
            env,
            "member2",
            &format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{role}")
        )
        .is_none()
    );
    let health = "kubefed-controller-manager:fed-b:healthcheck-m2b-host";
    let hc = get(
        env,
        "member2",
        &format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{health}"),
    )
    .unwrap();
    assert_eq!(hc["rules"][1]["resources"][0], "nodes");

    let (endpoint, ca, token) = joined_credentials(env, "fed-b", "m2b");
    assert_eq!(
        as_member(
            &endpoint,
            &ca,
            &token,
            "POST",
            "/api/v1/namespaces/fed-b/configmaps",
            Some(CONFIGMAP)
        ),
        201
    );
    assert_eq!(
        as_member(
            &endpoint,
            &ca,
            &token,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some(CONFIGMAP)
        ),
        403
    );
    assert_eq!(
        as_member(&endpoint, &ca, &token, "GET", "/api/v1/namespaces", None),
        403
    );
    assert_eq!(
        as_member(&endpoint, &ca, &token, "GET", "/api/v1/nodes", None),
        200,
        "health check may list nodes"
    );
}

#[test]
fn dry_run_and_output_write_nothing_and_rejoin_is_idempotent() {
    let env = TestEnv::shared();
    init(env, "join-c-init", "fed-c", &[]);
    let host = env.proxy("host").unwrap();
    let member = env.proxy("member1").unwrap();
    let kc = write_kubeconfig(
        env,
        "join-c",
        env.kubeconfig()
            .current_context("host")
            .server("host", &host.url())
            .server("member1", &member.url())
            .alias("member1-insecure", "member1")
            .insecure("member1-insecure"),
    );
    let join = |extra: &[&str]| {
        let mut args = vec![
            "join",
            "m1c",
            "--cluster-context",
            "member1",
            "--kubefed-namespace",
            "fed-c",
        ];
        args.extend_from_slice(extra);
        kubefedctl(&kc, &args)
    };

    let dry = join(&["--dry-run"]).ok();
    assert!(
        dry.stdout
            .contains("serviceaccount/m1c-host would be created (m1c)"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout
            .contains("kubefedcluster.core.kubefed.io/m1c would be created (host)")
    );
    let yaml = join(&["-o", "yaml"]).ok();
    let kinds: Vec<String> = yaml_docs(&yaml.stdout)
        .iter()
        .map(|d| d["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "ServiceAccount",
            "Secret",
            "ClusterRole",
            "ClusterRoleBinding",
            "Secret",
            "KubeFedCluster"
        ]
    );
    assert_eq!(
        host.writes() + member.writes(),
        0,
        "dry run and -o write nothing"
    );
    assert!(
        get(
            env,
            "member1",
            "/api/v1/namespaces/fed-c/serviceaccounts/m1c-host"
        )
        .is_none()
    );

    join(&[]).ok();
    let first_secret = get(
        env,
        "host",
        "/apis/core.kubefed.io/v1beta1/namespaces/fed-c/kubefedclusters/m1c",
    )
    .unwrap()["spec"]["secretRef"]["name"]
        .clone();

    host.reset_records();
    member.reset_records();
    let again = join(&["--error-on-existing=false"]).ok();
    assert_eq!(
        host.writes() + member.writes(),
        0,
        "identical re-join writes nothing: {:?}",
        host.records()
    );
    assert_eq!(
        again.stdout.matches(" unchanged (").count(),
        7,
        "{}",
        again.stdout
    );

    let refused = join(&[]).fails();
    assert!(
        refused.stderr.contains("already exists"),
        "{}",
        refused.stderr
    );
    assert_eq!(host.writes() + member.writes(), 0);

    // A changed member (TLS verification off) updates in place, same Secret.
    let changed = kubefedctl(
        &kc,
        &[
            "join",
            "m1c",
            "--cluster-context",
            "member1-insecure",
            "--kubefed-namespace",
            "fed-c",
            "--error-on-existing=false",
        ],
    )
    .ok();
    assert!(
        changed
            .stdout
            .contains("kubefedcluster.core.kubefed.io/m1c updated (host)"),
        "{}",
        changed.stdout
    );
    let kfc = get(
        env,
        "host",
        "/apis/core.kubefed.io/v1beta1/namespaces/fed-c/kubefedclusters/m1c",
    )
    .unwrap();
    assert_eq!(
        kfc["spec"]["disabledTLSValidations"],
        serde_json::json!(["*"])
    );
    assert_eq!(
        kfc["spec"]["secretRef"]["name"], first_secret,
        "the host Secret is reused"
    );
    let secrets = get(env, "host", "/api/v1/namespaces/fed-c/secrets").unwrap();
    let ours = secrets["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["metadata"]["name"].as_str().unwrap().starts_with("m1c-"))
        .count();
    assert_eq!(ours, 1, "no leaked secrets");

    // Back to a verifying context: the spec is replaced, TLS checks are on again.
    let secure = join(&["--error-on-existing=false"]).ok();
    assert!(
        secure
            .stdout
            .contains("kubefedcluster.core.kubefed.io/m1c updated (host)"),
        "{}",
        secure.stdout
    );
    let kfc = get(
        env,
        "host",
        "/apis/core.kubefed.io/v1beta1/namespaces/fed-c/kubefedclusters/m1c",
    )
    .unwrap();
    assert!(
        kfc["spec"].get("disabledTLSValidations").is_none(),
        "disabledTLSValidations is gone: {}",
        kfc["spec"]
    );
    assert_eq!(kfc["spec"]["secretRef"]["name"], first_secret);
    let again = join(&["--error-on-existing=false"]).ok();
    assert_eq!(
        again.stdout.matches(" unchanged (").count(),
        7,
        "{}",
        again.stdout
    );
}

#[test]
fn a_failed_join_takes_back_what_it_created_in_both_clusters() {
    let env = TestEnv::shared();
    init(env, "join-d-init", "fed-d", &[]);
    let host = env.proxy("host").unwrap();
    host.set_faults(Faults {
        error_rate: 1.0,
        error_statuses: vec![500],
        only: Some(std::sync::Arc::new(|r: &testenv::RequestRecord| {
            r.verb == "create" && r.resource == "kubefedclusters"
        })),
        ..Faults::default()
    });
    let kc = write_kubeconfig(
        env,
        "join-d",
        env.kubeconfig()
            .current_context("host")
            .server("host", &host.url()),
    );
    let run = kubefedctl(
        &kc,
        &[
            "join",
            "m1d",
            "--cluster-context",
            "member1",
            "--kubefed-namespace",
            "fed-d",
        ],
    )
    .fails();
    assert!(
        run.stderr.contains("join \"m1d\" failed (removed the"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("rolled back: deleted serviceaccount/m1d-host in m1d"),
        "{}",
        run.stderr
    );
    assert_eq!(host.count(|r| r.injected), 1);

    assert!(
        get(
            env,
            "member1",
            "/api/v1/namespaces/fed-d/serviceaccounts/m1d-host"
        )
        .is_none()
    );
    assert!(
        get(
            env,
            "member1",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/kubefed-controller-manager:m1d-host"
        )
        .is_none()
    );
    assert!(gone(env, "member1", "/api/v1/namespaces/fed-d"));
    assert!(
        get(
            env,
            "host",
            "/apis/core.kubefed.io/v1beta1/namespaces/fed-d/kubefedclusters/m1d"
        )
        .is_none()
    );
    let secrets = get(env, "host", "/api/v1/namespaces/fed-d/secrets").unwrap();
    assert!(
        !secrets["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["metadata"]["name"].as_str().unwrap().starts_with("m1d-")),
        "the host secret was rolled back"
    );
}

#[test]
fn unjoin_removes_everything_and_a_second_unjoin_is_fine() {
    let env = TestEnv::shared();
    init(env, "unjoin-e-init", "fed-e", &[]);
    // The member's context lives in a kubeconfig file of its own.
    let kc = write_kubeconfig(
        env,
        "unjoin-e",
        env.kubeconfig().current_context("host").only(&["host"]),
    );
    let member_kc = write_kubeconfig(
        env,
        "unjoin-e-member",
        env.kubeconfig()
            .current_context("member2")
            .only(&["member2"]),
    );
    let member_kc = member_kc.to_str().unwrap();
    let without = kubefedctl(
        &kc,
        &[
            "join",
            "m2e",
            "--cluster-context",
            "member2",
            "--kubefed-namespace",
            "fed-e",
        ],
    )
    .fails();
    assert!(
        without.stderr.contains("context \"member2\" not found"),
        "{}",
        without.stderr
    );
    let member = [
        "--cluster-context",
        "member2",
        "--cluster-kubeconfig",
        member_kc,
        "--kubefed-namespace",
        "fed-e",
    ];
    let args = |verb: &'static str| [&[verb, "m2e"][..], &member[..]].concat();
    kubefedctl(&kc, &args("join")).ok();
    assert!(
        get(
            env,
            "member2",
            "/api/v1/namespaces/fed-e/serviceaccounts/m2e-host"
        )
        .is_some()
    );
    let kfc_path = "/apis/core.kubefed.io/v1beta1/namespaces/fed-e/kubefedclusters/m2e";
    let secret = get(env, "host", kfc_path).unwrap()["spec"]["secretRef"]["name"]
        .as_str()
        .unwrap()
        .to_string();

    let run = kubefedctl(&kc, &args("unjoin")).ok();
    assert!(
        run.stdout.contains("Cluster \"m2e\" unjoined"),
        "{}",
        run.stdout
    );
    assert!(
        get(
            env,
            "member2",
            "/api/v1/namespaces/fed-e/serviceaccounts/m2e-host"
        )
        .is_none()
    );
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    assert!(
        get(
            env,
            "member2",
            &format!("{rbac}/clusterrolebindings/kubefed-controller-manager:m2e-host")
        )
        .is_none()
    );
    assert!(
        get(
            env,
            "member2",
            &format!("{rbac}/clusterroles/kubefed-controller-manager:m2e-host")
        )
        .is_none()
    );
    assert!(
        gone(env, "member2", "/api/v1/namespaces/fed-e"),
        "join made it and it is empty"
    );
    assert!(get(env, "host", kfc_path).is_none());
    assert!(
        get(
            env,
            "host",
            &format!("/api/v1/namespaces/fed-e/secrets/{secret}")
        )
        .is_none()
    );

    let again = kubefedctl(&kc, &args("unjoin")).ok();
    assert!(again.stdout.contains("is not joined"), "{}", again.stdout);
}

#[test]
fn unjoin_of_an_unreachable_member_needs_force() {
    let env = TestEnv::shared();
    init(env, "unjoin-f-init", "fed-f", &[]);
    let member = env.proxy("member1").unwrap();
    let kc = write_kubeconfig(
        env,
        "unjoin-f",
        env.kubeconfig()
            .current_context("host")
            .server("member1", &member.url()),
    );
    kubefedctl(
        &kc,
        &[
            "join",
            "m1f",
            "--cluster-context",
            "member1",
            "--kubefed-namespace",
            "fed-f",
        ],
    )
    .ok();
    member.set_faults(Faults {
        mode: Mode::Refuse,
        ..Faults::default()
    });

    let unjoin = |extra: &[&str]| {
        let mut args = vec![
            "unjoin",
            "m1f",
            "--cluster-context",
            "member1",
            "--kubefed-namespace",
            "fed-f",
        ];
        args.extend_from_slice(extra);
        kubefedctl(&kc, &args)
    };
    let refused = unjoin(&[]).fails();
    assert!(
        refused.stderr.contains("cannot reach cluster \"m1f\""),
        "{}",
        refused.stderr
    );
    assert!(
        get(
            env,
            "host",
            "/apis/core.kubefed.io/v1beta1/namespaces/fed-f/kubefedclusters/m1f"
        )
        .is_some()
    );

    let forced = unjoin(&["--force"]).ok();
    assert!(
        forced
            .stderr
            .contains("left behind there: service account fed-f/m1f-host"),
        "{}",
        forced.stderr
    );
    assert!(
        get(
            env,
            "host",
            "/apis/core.kubefed.io/v1beta1/namespaces/fed-f/kubefedclusters/m1f"
        )
        .is_none()
    );
    member.clear_faults();
    assert!(
        get(
            env,
            "member1",
            "/api/v1/namespaces/fed-f/serviceaccounts/m1f-host"
        )
        .is_some(),
        "really left behind"
    );
}

#[test]
fn names_are_validated_and_contexts_sanitised() {
    let env = TestEnv::shared();
    init(env, "names-init", "fed-g", &[]);
    let kc = write_kubeconfig(
        env,
        "names",
        env.kubeconfig()
            .current_context("host")
            .alias("admin@hub", "host"),
    );

    let bad = kubefedctl(&kc, &["join", "Bad_Name", "--cluster-context", "member1"]).usage();
    assert!(
        bad.stderr
            .starts_with("error: invalid cluster name \"Bad_Name\""),
        "{}",
        bad.stderr
    );

    let missing = kubefedctl(
        &kc,
        &[
            "join",
            "m1x",
            "--cluster-context",
            "nope",
            "--kubefed-namespace",
            "fed-g",
        ],
    )
    .fails();
    assert!(
        missing.stderr.contains("context \"nope\" not found in kubeconfig (available: admin@hub, host, member1, member2)"),
        "{}",
        missing.stderr
    );

    let uninit = kubefedctl(
        &kc,
        &[
            "join",
            "m1x",
            "--cluster-context",
            "member1",
            "--host-cluster-context",
            "member2",
        ],
    )
    .fails();
    assert!(
        uninit
            .stderr
            .contains("host not initialised: run kubefedctl init"),
        "{}",
        uninit.stderr
    );

    let run = kubefedctl(
        &kc,
        &[
            "join",
            "m1g",
            "--cluster-context",
            "member1",
            "--host-cluster-context",
            "admin@hub",
            "--kubefed-namespace",
            "fed-g",
        ],
    )
    .ok();
    assert!(run.stderr.contains("using \"admin-hub\""), "{}", run.stderr);
    assert!(
        get(
            env,
            "member1",
            "/api/v1/namespaces/fed-g/serviceaccounts/m1g-admin-hub"
        )
        .is_some()
    );
}

/// `disabledTLSValidations` as KubeFed's `pkg/controller/util/cluster_util.go`
/// reads it: `SubjectName` and `ValidityPeriod` each skip only their own
/// check, and the chain is still verified against the caBundle. The member
/// is reached through proxies serving a certificate for another name, an
/// expired one, and one from another CA.
#[test]
fn tls_exceptions_skip_only_the_check_they_name() {
    use testenv::pki::{Ca, CertSpec};
    let env = TestEnv::shared();
    let f = crate::fixtures::Federation::new(env, "tls-x", &["configmaps"]);
    let serving = |ca: &Ca, spec: CertSpec| {
        env.proxy_serving("member1", ca.issue_cert(&spec).unwrap())
            .unwrap()
    };
    let wrong_name = serving(
        env.ca(),
        CertSpec {
            dns_names: vec!["elsewhere.invalid".into()],
            ..CertSpec::default()
        },
    );
    let expired = serving(
        env.ca(),
        CertSpec {
            loopback: true,
            validity: Some(((2020, 1, 1), (2021, 1, 1))),
            ..CertSpec::default()
        },
    );
    let foreign = serving(
        &Ca::new("another-ca").unwrap(),
        CertSpec {
            loopback: true,
            ..CertSpec::default()
        },
    );
    f.create(
        env,
        "FederatedConfigMap",
        "tls",
        serde_json::json!({"template": {"data": {"k": "v"}}, "placement": {"clusters": [{"name": f.cluster("m1")}]}}),
    );
    let kfc = format!(
        "/apis/core.kubefed.io/v1beta1/namespaces/{}/kubefedclusters/{}",
        f.fedns,
        f.cluster("m1")
    );
    let cases = [
        (&wrong_name, serde_json::json!([]), "Offline"),
        (
            &wrong_name,
            serde_json::json!(["ValidityPeriod"]),
            "Offline",
        ),
        (&wrong_name, serde_json::json!(["SubjectName"]), "Ready"),
        (&expired, serde_json::json!(["SubjectName"]), "Offline"),
        (&expired, serde_json::json!(["ValidityPeriod"]), "Ready"),
        (
            &foreign,
            serde_json::json!(["SubjectName", "ValidityPeriod"]),
            "Offline",
        ),
        (&foreign, serde_json::json!(["*"]), "Ready"),
        (
            &expired,
            serde_json::json!(["validityPeriod"]),
            "ConfigMalformed",
        ),
    ];
    for (i, (proxy, disabled, want)) in cases.iter().enumerate() {
        crate::fixtures::patch(
            env,
            "host",
            &kfc,
            serde_json::json!({"spec": {"apiEndpoint": proxy.url(), "disabledTLSValidations": disabled}}),
        );
        let run = f.reconcile(&[]);
        let reached = *want == "Ready";
        assert_eq!(
            run.code,
            if reached { 0 } else { 3 },
            "case {i} {disabled}: {}{}",
            run.stdout,
            run.stderr
        );
        let cluster = get(env, "host", &kfc).unwrap();
        assert_eq!(
            cluster["status"]["conditions"][0]["type"], *want,
            "case {i} {disabled}: {cluster}"
        );
        if i == 0 {
            assert!(
                crate::fixtures::cm(env, "member1", f.ns, "tls").is_none(),
                "nothing got through a wrong name"
            );
        }
        if i == 2 {
            assert!(
                crate::fixtures::cm(env, "member1", f.ns, "tls").is_some(),
                "propagated with SubjectName skipped"
            );
        }
        if *want == "ConfigMalformed" {
            let said = format!("{}{}", run.stdout, run.stderr);
            assert!(
                said.contains("spec.disabledTLSValidations: unknown value \"validityPeriod\""),
                "{said}"
            );
        }
    }
    // Each proxy saw requests only in the cases it was reachable or refused in a handshake.
    assert!(
        expired.records().iter().any(|r| r.status == 200),
        "the expired member answered once allowed"
    );
}

/// `kubectl auth can-i VERB RESOURCE` in member1 as the member identity of
/// a join (`<cluster>-host` in `fedns`).
fn member_can(kc: &std::path::Path, fedns: &str, sa: &str, verb: &str, resource: &str) -> bool {
    let out = std::process::Command::new("kubectl")
        .args(["--kubeconfig", kc.to_str().unwrap(), "--context", "member1"])
        .args(["auth", "can-i", verb, resource, "-A"])
        .arg(format!("--as=system:serviceaccount:{fedns}:{sa}"))
        .output()
        .expect("kubectl (installed by hack/testenv.sh)");
    match String::from_utf8_lossy(&out.stdout).trim() {
        "yes" => true,
        "no" => false,
        other => panic!(
            "kubectl auth can-i: {other:?} {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// `join --rbac least` (the default): the member identity may do what the
/// federation does with its enabled types and nothing else (ResourceQuotas
/// stand for a type enabled later: no other test federates them, so
/// their federated kind stays unambiguous for the others), `enable` and
/// `disable` keep its role in step, and a run propagates a type enabled
/// after the join with no other step.
#[test]
fn a_least_privilege_member_gets_the_types_verbs_and_follows_enable_and_disable() {
    let env = TestEnv::shared();
    let kc = init(env, "join-lp", "fed-lp", &[]);
    let fed = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--kubefed-namespace", "fed-lp"]);
        kubefedctl(&kc, &all)
    };
    fed(&["enable", "configmaps", "--federated-group", "lp.kubefed.io"]).ok();
    fed(&["join", "m1lp", "--cluster-context", "member1"]).ok();
    let kfc = || {
        get(
            env,
            "host",
            "/apis/core.kubefed.io/v1beta1/namespaces/fed-lp/kubefedclusters/m1lp",
        )
        .unwrap()
    };
    assert_eq!(
        kfc()["metadata"]["annotations"]["kubefedctl.kubefed.io/member-rbac"],
        "least"
    );
    let role = get(
        env,
        "member1",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/kubefed-controller-manager:m1lp-host",
    )
    .unwrap();
    assert!(
        !role["rules"].to_string().contains('*'),
        "no wildcard: {role}"
    );
    let status = fed(&["status", "-o", "json"]).ok();
    let status: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    let row = status["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "m1lp")
        .unwrap();
    assert_eq!(
        (row["identity"].as_str(), row["tokenExpires"].as_str()),
        (Some("least"), Some("never"))
    );
    let can = |verb: &str, resource: &str| member_can(&kc, "fed-lp", "m1lp-host", verb, resource);
    for (verb, resource) in [
        ("create", "configmaps"),
        ("delete", "configmaps"),
        ("watch", "namespaces"),
        ("list", "nodes"),
    ] {
        assert!(can(verb, resource), "may {verb} {resource}");
    }
    for (verb, resource) in [
        ("get", "secrets"),
        ("create", "clusterrolebindings"),
        ("create", "pods/exec"),
        ("create", "deployments.apps"),
    ] {
        assert!(!can(verb, resource), "may not {verb} {resource}");
    }

    // A type enabled after the join: the role follows, and so may a run.
    let enabled = fed(&[
        "enable",
        "resourcequotas",
        "--federated-group",
        "lp.kubefed.io",
    ])
    .ok();
    assert!(
        enabled.stdout.contains("clusterrole.rbac.authorization.k8s.io/kubefed-controller-manager:m1lp-host updated (m1lp)"),
        "{}",
        enabled.stdout
    );
    assert!(can("get", "resourcequotas"));
    fed(&["enable", "namespaces", "--federated-group", "lp.kubefed.io"]).ok();
    post(
        env,
        "host",
        "/api/v1/namespaces",
        json!({"metadata": {"name": "lp-objs"}}),
    );
    post(
        env,
        "host",
        "/apis/lp.kubefed.io/v1beta1/namespaces/lp-objs/federatednamespaces",
        json!({"apiVersion": "lp.kubefed.io/v1beta1", "kind": "FederatedNamespace",
               "metadata": {"name": "lp-objs"}, "spec": {"placement": {"clusters": [{"name": "m1lp"}]}}}),
    );
    post(
        env,
        "host",
        "/apis/lp.kubefed.io/v1beta1/namespaces/lp-objs/federatedresourcequotas",
        json!({"apiVersion": "lp.kubefed.io/v1beta1", "kind": "FederatedResourceQuota",
               "metadata": {"name": "s"}, "spec": {"template": {"spec": {"hard": {"pods": "10"}}},
               "placement": {"clusters": [{"name": "m1lp"}]}}}),
    );
    fed(&["reconcile", "-n", "lp-objs"]).ok();
    assert!(
        get(
            env,
            "member1",
            "/api/v1/namespaces/lp-objs/resourcequotas/s"
        )
        .is_some()
    );
    // A type federate enables on its way (--enable-type) is followed too.
    post(
        env,
        "host",
        "/api/v1/namespaces/lp-objs/podtemplates",
        json!({"metadata": {"name": "pt"}, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}),
    );
    assert!(!can("create", "podtemplates"));
    let federated = fed(&[
        "federate",
        "podtemplates",
        "pt",
        "-n",
        "lp-objs",
        "--enable-type",
    ])
    .ok();
    assert!(
        federated.stdout.contains("(m1lp)"),
        "the member's role is updated: {}",
        federated.stdout
    );
    assert!(can("create", "podtemplates"));
    fed(&["reconcile", "-n", "lp-objs"]).ok();
    assert!(get(env, "member1", "/api/v1/namespaces/lp-objs/podtemplates/pt").is_some());

    // A role that lags behind the types (cut here by hand): the run names
    // the member and what it may not do before any write, and the command
    // it names is the fix.
    let path =
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/kubefed-controller-manager:m1lp-host";
    let mut lagging = get(env, "member1", path).unwrap();
    for rule in lagging["rules"].as_array_mut().unwrap() {
        if rule["resources"]
            .as_array()
            .is_some_and(|r| r.contains(&json!("resourcequotas")))
        {
            // Listed and watched, not created.
            rule["verbs"]
                .as_array_mut()
                .unwrap()
                .retain(|v| v != "create");
        }
    }
    let (status, _) = crate::fixtures::request(env, "member1", "PUT", path, Some(lagging));
    assert_eq!(status, 200);
    post(
        env,
        "host",
        "/apis/lp.kubefed.io/v1beta1/namespaces/lp-objs/federatedresourcequotas",
        json!({"apiVersion": "lp.kubefed.io/v1beta1", "kind": "FederatedResourceQuota",
               "metadata": {"name": "s2"}, "spec": {"template": {"spec": {"hard": {"pods": "10"}}},
               "placement": {"clusters": [{"name": "m1lp"}]}}}),
    );
    for dry_run in [true, false] {
        let args: &[&str] = if dry_run {
            &["reconcile", "-n", "lp-objs", "--dry-run"]
        } else {
            &["reconcile", "-n", "lp-objs"]
        };
        let run = fed(args);
        assert_eq!(run.code, 3, "{}", run.stderr);
        assert!(
            run.stderr.contains(
                "failed: m1lp: not allowed to create resourcequotas (1 planned change(s) not made): run kubefedctl join m1lp --rbac least --error-on-existing=false"
            ),
            "{}",
            run.stderr
        );
        assert!(
            !run.stderr.contains("forbidden"),
            "asked, not refused: {}",
            run.stderr
        );
    }
    assert!(
        get(
            env,
            "member1",
            "/api/v1/namespaces/lp-objs/resourcequotas/s2"
        )
        .is_none()
    );
    fed(&[
        "join",
        "m1lp",
        "--cluster-context",
        "member1",
        "--error-on-existing=false",
    ])
    .ok();
    fed(&["reconcile", "-n", "lp-objs"]).ok();
    assert!(
        get(
            env,
            "member1",
            "/api/v1/namespaces/lp-objs/resourcequotas/s2"
        )
        .is_some()
    );

    // Disabled again: the verbs go with the type.
    fed(&["disable", "resourcequotas"]).ok();
    assert!(
        !can("get", "resourcequotas"),
        "disable takes the type's verbs back"
    );
    // KubeFed's `*` on a re-join, marked so that enable leaves it alone.
    fed(&[
        "join",
        "m1lp",
        "--cluster-context",
        "member1",
        "--rbac",
        "admin",
        "--error-on-existing=false",
    ])
    .ok();
    assert!(can("get", "secrets"));

    assert_eq!(
        kfc()["metadata"]["annotations"]["kubefedctl.kubefed.io/member-rbac"],
        "admin"
    );
}

/// One federated object of each default type, placed on both members, in
/// `f.ns` (a Namespace of its own, `<fedns>-gone`, for the namespaces
/// type), and a FederatedConfigMap `<fedns>-kept` that orphans; the
/// objects' namespace orphans too, so that what it keeps stays. Returns
/// each member object's path (the kept ones apart).
fn federate_one_of_each(env: &TestEnv, f: &Federation) -> (Vec<String>, Vec<String>) {
    use crate::parity::{TYPES, fixture, member_path};
    let placement = json!({"clusters": [{"name": f.cluster("m1")}, {"name": f.cluster("m2")}]});
    let gone = format!("{}-gone", f.fedns);
    let mut deleted = Vec::new();
    for t in TYPES {
        let (template, _) = fixture(t);
        let (name, ns) = match t.kind {
            "Namespace" => (gone.clone(), Some(gone.as_str())),
            _ if t.namespaced => (format!("{}-{}", f.fedns, t.plural), Some(f.ns)),
            _ => (format!("{}-{}", f.fedns, t.plural), None),
        };
        let mut meta = json!({"name": name});
        let path = match ns {
            Some(ns) => {
                crate::fixtures::namespace(env, "host", ns);
                meta["namespace"] = json!(ns);
                format!(
                    "/apis/{}/v1beta1/namespaces/{ns}/federated{}",
                    f.group, t.plural
                )
            }
            None => format!("/apis/{}/v1beta1/federated{}", f.group, t.plural),
        };
        post(
            env,
            "host",
            &path,
            json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": format!("Federated{}", t.kind),
                "metadata": meta, "spec": {"template": template, "placement": placement}}),
        );
        deleted.push(member_path(t, ns.unwrap_or(f.ns), &name));
    }
    let kept = format!("{}-kept", f.fedns);
    post(
        env,
        "host",
        &format!(
            "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps",
            f.group, f.ns
        ),
        json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": "FederatedConfigMap",
            "metadata": {"name": kept, "namespace": f.ns, "annotations": {"kubefed.io/orphan": "true"}},
            "spec": {"template": {"data": {"k": "v"}}, "placement": placement}}),
    );
    f.patch_federated_namespace(
        env,
        json!({"metadata": {"annotations": {"kubefed.io/orphan": "true"}}}),
    );
    let kept = vec![
        format!("/api/v1/namespaces/{}/configmaps/{kept}", f.ns),
        format!("/api/v1/namespaces/{}", f.ns),
    ];
    (deleted, kept)
}

fn managed_in(env: &TestEnv, cluster: &str, path: &str) -> bool {
    get(env, cluster, path).is_some_and(|o| o["metadata"]["labels"]["kubefed.io/managed"] == "true")
}

/// Whether a host object's status (`clusters` or `clusterVersions`) names `cluster`.
fn names_cluster(obj: &serde_json::Value, cluster: &str) -> bool {
    let status = &obj["status"];
    let entries = status["clusters"]
        .as_array()
        .into_iter()
        .chain(status["clusterVersions"].as_array())
        .flatten();
    entries
        .into_iter()
        .any(|e| e["name"] == cluster || e["clusterName"] == cluster)
}

/// Every federated object and (Cluster)PropagatedVersion of the federation.
fn host_records_of(env: &TestEnv, f: &Federation) -> Vec<serde_json::Value> {
    let mut paths: Vec<String> = crate::parity::TYPES
        .iter()
        .map(|t| format!("/apis/{}/v1beta1/federated{}", f.group, t.plural))
        .collect();
    paths.push("/apis/core.kubefed.io/v1alpha1/propagatedversions".into());
    paths.push("/apis/core.kubefed.io/v1alpha1/clusterpropagatedversions".into());
    paths
        .iter()
        .flat_map(|p| {
            get(env, "host", p).unwrap()["items"]
                .as_array()
                .unwrap()
                .clone()
        })
        .collect()
}

/// `unjoin --cleanup` with the ten default types: `--dry-run` lists type by
/// type and writes nothing; the run deletes every managed copy in that
/// member (orphaning ones unlabelled), namespaces last, leaves the other
/// member alone, and the host's statuses and PropagatedVersions stop
/// naming it; an unreachable member with `--force` is said to keep them.
/// An environment of its own: cleanup reaches every managed object of the
/// enabled types in a member, whichever test's federation put it there.
#[test]
fn unjoin_cleanup_removes_what_the_federation_manages() {
    let env = &TestEnv::private(&testenv::SHARED_CLUSTERS).unwrap();
    let names: Vec<&str> = crate::parity::TYPES.iter().map(|t| t.name).collect();
    let f = Federation::named(env, "unc", "types.kubefed.io", "unc-objs", &names);
    let (deleted, kept) = federate_one_of_each(env, &f);
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    let all = || deleted.iter().chain(&kept);
    for _ in 0..5 {
        f.run(&["reconcile", "--probe-timeout", "2s", "--timeout", "3s"])
            .ok();
        if all().all(|p| managed_in(env, "member1", p) && managed_in(env, "member2", p)) {
            break;
        }
    }
    for p in all() {
        assert!(
            managed_in(env, "member1", p) && managed_in(env, "member2", p),
            "{p}"
        );
    }
    let records = host_records_of(env, &f);
    assert!(records.iter().filter(|r| names_cluster(r, &m1)).count() >= 2 * 11);

    // --dry-run: listed type by type, nothing written.
    let unjoin = |cluster: &str, context: &str, extra: &[&str]| {
        let mut args = vec!["unjoin", cluster, "--cluster-context", context, "--cleanup"];
        args.extend_from_slice(extra);
        f.run(&args)
    };
    f.reset();
    let plan = unjoin(&m1, "member1", &["--dry-run"]).ok();
    assert!(f.writes().is_empty(), "{:?}", f.writes());
    for line in [
        "configmaps: 1 to delete, 1 to unlabel (unc-m1)",
        "  configmap unc-objs/unc-configmaps would be deleted",
        "  configmap unc-objs/unc-kept would be unlabelled: its federated object orphans it",
        "namespaces: 1 to delete, 1 to unlabel (unc-m1)",
        "  namespace unc-gone would be deleted",
        "  clusterrole.rbac.authorization.k8s.io unc-clusterroles would be deleted",
        "  job.batch unc-objs/unc-jobs would be deleted",
        "federatedsecret.types.kubefed.io unc-objs/unc-secrets: cluster \"unc-m1\" would be dropped from status.clusters (host)",
        "propagatedversion.core.kubefed.io unc-objs/secret-unc-secrets: cluster \"unc-m1\" would be dropped from status.clusterVersions (host)",
        "clusterpropagatedversion.core.kubefed.io clusterrole-unc-clusterroles: cluster \"unc-m1\" would be dropped from status.clusterVersions (host)",
    ] {
        assert!(plan.stdout.contains(line), "{line:?} in\n{}", plan.stdout);
    }
    for t in crate::parity::TYPES {
        let header = format!("{}: ", t.name);
        assert!(
            plan.stdout.lines().any(|l| l.starts_with(&header)),
            "{header:?} in\n{}",
            plan.stdout
        );
    }
    let namespaces_at = plan.stdout.find("\nnamespaces: ").unwrap();
    assert!(
        plan.stdout.find("\nsecrets: ").unwrap() < namespaces_at,
        "namespaces last"
    );

    // A reconcile holding the federation lock (any shard's too) would put
    // the objects back: refused, nothing written.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let leases = format!("/apis/coordination.k8s.io/v1/namespaces/{}/leases", f.fedns);
    for name in ["kubefedctl-reconcile-1-of-2", "kubefedctl-reconcile"] {
        let spec = json!({"holderIdentity": "another-run", "leaseDurationSeconds": 60,
            "renewTime": kubefedctl::core::run::lease::micro_time(now)});
        let path = format!("{leases}/{name}");
        if crate::fixtures::get(env, "host", &path).is_some() {
            crate::fixtures::patch(env, "host", &path, json!({ "spec": spec }));
        } else {
            crate::fixtures::post(
                env,
                "host",
                &leases,
                json!({"metadata": {"name": name}, "spec": spec}),
            );
        }
        f.reset();
        let refused = unjoin(&m1, "member1", &["--yes"]).fails();
        assert!(refused.stderr.contains("another-run"), "{}", refused.stderr);
        assert!(
            f.writes().iter().all(|r| r.resource == "leases"),
            "{:?}",
            f.writes()
        );
        let (code, _) = crate::fixtures::request(env, "host", "DELETE", &path, None);
        assert_eq!(code, 200);
    }

    // The cleanup: member1 loses every managed copy, member2 nothing.
    f.reset();
    let run = unjoin(&m1, "member1", &["--yes"]).ok();
    assert!(
        run.stdout.contains("namespace unc-gone deleted (unc-m1)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("Cluster \"unc-m1\" unjoined"),
        "{}",
        run.stdout
    );
    assert!(f.m2.records().is_empty(), "member2 is not asked anything");
    for p in &deleted {
        assert!(gone(env, "member1", p), "{p} is still in member1");
        assert!(managed_in(env, "member2", p), "{p} left member2");
    }
    for p in &kept {
        let obj = get(env, "member1", p).unwrap_or_else(|| panic!("{p} was kept"));
        assert!(obj["metadata"]["deletionTimestamp"].is_null(), "{p}");
        assert_eq!(
            obj["metadata"]["labels"]["kubefed.io/managed"],
            serde_json::Value::Null,
            "{p}"
        );
        assert!(managed_in(env, "member2", p), "{p} in member2");
    }
    for r in host_records_of(env, &f) {
        assert!(!names_cluster(&r, &m1), "still names {m1}: {r}");
    }
    assert!(
        host_records_of(env, &f)
            .iter()
            .filter(|r| names_cluster(r, &m2))
            .count()
            >= 2 * 11
    );

    // An unreachable member: refused, nothing written; with --force the
    // host forgets it and says what stayed there.
    f.m2.set_faults(Faults {
        mode: Mode::Refuse,
        ..Faults::default()
    });
    f.reset();
    let refused = unjoin(&m2, "member2", &["--yes"]).fails();
    assert!(
        refused.stderr.contains("cannot reach cluster \"unc-m2\""),
        "{}",
        refused.stderr
    );
    assert!(f.writes().is_empty(), "{:?}", f.writes());
    let forced = unjoin(&m2, "member2", &["--yes", "--force"]).ok();
    assert!(
        forced.stderr.contains(
            "left behind there: the objects the federation manages (labelled kubefed.io/managed=true)"
        ),
        "{}",
        forced.stderr
    );
    f.m2.clear_faults();
    for r in host_records_of(env, &f) {
        assert!(!names_cluster(&r, &m2), "still names {m2}: {r}");
    }
    for p in all() {
        assert!(
            managed_in(env, "member2", p),
            "{p} really stayed in member2"
        );
    }
}
