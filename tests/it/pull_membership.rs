//! `join --mode pull`, `unjoin`, `rotate` and `status` of pull members
//! (issue #68) through the built binary against real API servers: what
//! each side holds, that the host holds nothing that can write to the
//! member, and what the agent's host token may and may not do. Each test
//! has its own federation namespace and cluster names; an agent's
//! cluster-wide names in a member carry the federation namespace, so the
//! tests' agents in member1 do not meet.

use crate::fixtures::{b64, get, gone, kubefedctl, wait_until, write_kubeconfig, yaml_docs};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use testenv::{Faults, Mode, TestEnv, http};

const IMAGE: &str = "example.com/kubefedctl:test";
const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";
const KFC: &str = "/apis/core.kubefed.io/v1beta1";

fn init(env: &TestEnv, test: &str, ns: &str) -> PathBuf {
    let kc = write_kubeconfig(env, test, env.kubeconfig().current_context("host"));
    kubefedctl(&kc, &["init", "--kubefed-namespace", ns]).ok();
    kc
}

/// `kubefedctl ARGS --kubefed-namespace NS`.
fn fed(kc: &Path, ns: &str, args: &[&str]) -> crate::fixtures::Run {
    let mut all = args.to_vec();
    all.extend(["--kubefed-namespace", ns]);
    kubefedctl(kc, &all)
}

/// `join CLUSTER --mode pull` from `context`.
fn join_pull(
    kc: &Path,
    ns: &str,
    cluster: &str,
    context: &str,
    extra: &[&str],
) -> crate::fixtures::Run {
    let mut args = vec![
        "join",
        cluster,
        "--mode",
        "pull",
        "--cluster-context",
        context,
        "--image",
        IMAGE,
    ];
    args.extend_from_slice(extra);
    fed(kc, ns, &args)
}

/// The kubeconfig in the agent's member Secret.
fn agent_kubeconfig(env: &TestEnv, member: &str, ns: &str) -> Value {
    let secret = get(
        env,
        member,
        &format!("/api/v1/namespaces/{ns}/secrets/kubefedctl-agent-host"),
    )
    .expect("the agent's host Secret");
    serde_json::from_str(&b64(secret["data"]["kubeconfig"].as_str().unwrap())).unwrap()
}

/// The agent's host token, from its member Secret.
fn agent_token(env: &TestEnv, member: &str, ns: &str) -> String {
    agent_kubeconfig(env, member, ns)["users"][0]["user"]["token"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A request to `cluster` with `token` alone; the status code.
fn with_token(
    env: &TestEnv,
    cluster: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> u16 {
    let url = format!("{}{path}", env.cluster(cluster).url());
    let body = body.map(|b| b.to_string());
    http::request(
        method,
        &url,
        env.ca_pem(),
        Some(token),
        body.as_deref(),
        Duration::from_secs(10),
    )
    .unwrap()
    .status
}

/// What `token` may write in `namespace` of `cluster` (and cluster-wide),
/// as the API server's SelfSubjectRulesReview says: each rule with a
/// writing verb, beyond the self-reviews every authenticated user may
/// create. A token the cluster does not accept may write nothing.
fn writes_allowed(env: &TestEnv, cluster: &str, token: &str, namespace: &str) -> Vec<String> {
    let url = format!(
        "{}/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        env.cluster(cluster).url()
    );
    let body = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                      "spec": {"namespace": namespace}});
    let r = http::request(
        "POST",
        &url,
        env.ca_pem(),
        Some(token),
        Some(&body.to_string()),
        Duration::from_secs(10),
    )
    .unwrap();
    if r.status == 401 {
        return Vec::new();
    }
    assert_eq!(r.status, 201, "{}", r.body);
    let review = r.json().unwrap();
    let writing = [
        "create",
        "update",
        "patch",
        "delete",
        "deletecollection",
        "*",
    ];
    let self_reviews = [
        "selfsubjectaccessreviews",
        "selfsubjectrulesreviews",
        "selfsubjectreviews",
    ];
    (review["status"]["resourceRules"]
        .as_array()
        .into_iter()
        .flatten())
    .filter(|rule| {
        (rule["verbs"].as_array().into_iter().flatten())
            .any(|v| writing.contains(&v.as_str().unwrap_or("")))
    })
    .filter(|rule| {
        !(rule["resources"].as_array().into_iter().flatten())
            .all(|r| self_reviews.contains(&r.as_str().unwrap_or("")))
    })
    .map(|rule| rule.to_string())
    .collect()
}

/// Every Secret of the host's federation (its namespace and the pull
/// members' report namespaces) that holds a token: name and token.
fn host_tokens(env: &TestEnv, namespaces: &[&str]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for ns in namespaces {
        let list = get(env, "host", &format!("/api/v1/namespaces/{ns}/secrets")).unwrap();
        for s in list["items"].as_array().unwrap() {
            if let Some(token) = s["data"]["token"].as_str() {
                let name = format!("{ns}/{}", s["metadata"]["name"].as_str().unwrap());
                out.push((name, b64(token)));
            }
        }
    }
    out
}

/// The lines of a run that say an object was created, sorted.
fn created(stdout: &str) -> Vec<String> {
    let mut lines: Vec<String> = (stdout.lines())
        .filter(|l| l.contains(" created ("))
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

/// join --mode pull writes exactly the agent's objects on each side, the
/// host holds no Secret that may write to the member (a push member's
/// Secret, beside it, may write to its own: the check can fail), status
/// says pull, and unjoin takes both sides back.
#[test]
fn a_pull_join_writes_each_side_and_unjoin_removes_both() {
    let env = TestEnv::shared();
    let ns = "fed-pa";
    let kc = init(env, "pull-a", ns);
    fed(
        &kc,
        ns,
        &["enable", "configmaps", "--federated-group", "pa.kubefed.io"],
    )
    .ok();
    fed(&kc, ns, &["join", "m2pa", "--cluster-context", "member2"]).ok();
    let run = join_pull(&kc, ns, "m1pa", "member1", &[]).ok();
    let role = "kubefedctl-agent:fed-pa:m1pa";
    let member_role = "kubefed-controller-manager:fed-pa:kubefedctl-agent";
    let mut expected: Vec<String> = [
        "namespace/fed-pa-pull-m1pa created (host)".to_string(),
        "serviceaccount/kubefedctl-agent created (host)".to_string(),
        format!("clusterrole.rbac.authorization.k8s.io/{role} created (host)"),
        format!("role.rbac.authorization.k8s.io/{role} created (host)"),
        format!("role.rbac.authorization.k8s.io/{role} created (host)"),
        format!("clusterrolebinding.rbac.authorization.k8s.io/{role} created (host)"),
        format!("rolebinding.rbac.authorization.k8s.io/{role} created (host)"),
        format!("rolebinding.rbac.authorization.k8s.io/{role} created (host)"),
        "kubefedcluster.core.kubefed.io/m1pa created (host)".to_string(),
        "namespace/fed-pa created (m1pa)".to_string(),
        "serviceaccount/kubefedctl-agent created (m1pa)".to_string(),
        format!("clusterrole.rbac.authorization.k8s.io/{member_role} created (m1pa)"),
        format!("clusterrolebinding.rbac.authorization.k8s.io/{member_role} created (m1pa)"),
        "secret/kubefedctl-agent-host created (m1pa)".to_string(),
        "deployment.apps/kubefedctl-agent created (m1pa)".to_string(),
    ]
    .into();
    expected.sort();
    // The CRD is the host's once, whichever test wrote it first.
    let crd_line =
        "customresourcedefinition.apiextensions.k8s.io/propagationreports.kubefedctl.kubefed.io";
    assert!(run.stdout.contains(crd_line), "{}", run.stdout);
    let written: Vec<String> = (created(&run.stdout).into_iter())
        .filter(|l| !l.starts_with(crd_line))
        .collect();
    assert_eq!(written, expected, "{}", run.stdout);
    assert!(
        run.stderr
            .contains("an agent running in cluster \"m1pa\" could not reach it"),
        "loopback host endpoint: {}",
        run.stderr
    );
    assert!(!run.stdout.contains("eyJ") && !run.stderr.contains("eyJ"));

    let crd = get(
        env,
        "host",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/propagationreports.kubefedctl.kubefed.io",
    )
    .unwrap();
    assert!(
        crd["status"]["conditions"]
            .to_string()
            .contains("Established")
    );
    let kfc = get(
        env,
        "host",
        &format!("{KFC}/namespaces/{ns}/kubefedclusters/m1pa"),
    )
    .unwrap();
    let annotations = &kfc["metadata"]["annotations"];
    assert_eq!(annotations["kubefedctl.kubefed.io/mode"], "pull");
    assert_eq!(
        annotations["kubefedctl.kubefed.io/token-ttl-seconds"],
        "86400"
    );
    assert!(annotations["kubefedctl.kubefed.io/token-expires-at"].is_string());
    assert_eq!(kfc["spec"]["apiEndpoint"], env.cluster("member1").url());
    assert_eq!(
        b64(kfc["spec"]["caBundle"].as_str().unwrap()).trim(),
        env.ca_pem().trim()
    );
    let absent = kfc["spec"]["secretRef"]["name"].as_str().unwrap();
    assert_eq!(absent, "m1pa-pull-no-credential");
    assert!(
        get(
            env,
            "host",
            &format!("/api/v1/namespaces/{ns}/secrets/{absent}")
        )
        .is_none()
    );
    let host_role = get(env, "host", &format!("{RBAC}/clusterroles/{role}")).unwrap();
    assert!(
        host_role["rules"].to_string().contains("pa.kubefed.io"),
        "the agent reads the enabled type's federated group: {host_role}"
    );

    // The member: the agent, its identity, its Secret with a working host token.
    let d = get(
        env,
        "member1",
        &format!("/apis/apps/v1/namespaces/{ns}/deployments/kubefedctl-agent"),
    )
    .unwrap();
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], IMAGE);
    assert_eq!(container["args"][0], "agent");
    let member_cr = get(
        env,
        "member1",
        &format!("{RBAC}/clusterroles/{member_role}"),
    )
    .unwrap();
    assert!(
        member_cr["rules"].to_string().contains("leases")
            && !member_cr["rules"].to_string().contains('*'),
        "least privilege, with the agents' Lease: {member_cr}"
    );
    let config = agent_kubeconfig(env, "member1", ns);
    assert_eq!(
        config["clusters"][0]["cluster"]["server"],
        env.cluster("host").url()
    );
    let token = agent_token(env, "member1", ns);
    assert_eq!(
        with_token(
            env,
            "host",
            &token,
            "GET",
            &format!("{KFC}/namespaces/{ns}/kubefedclusters/m1pa"),
            None
        ),
        200
    );

    // No Secret of the host may write to the pull member; the push
    // member's may write to its own.
    let tokens = host_tokens(env, &[ns, "fed-pa-pull-m1pa"]);
    assert!(!tokens.is_empty(), "the push member's Secret at least");
    for (name, token) in &tokens {
        for namespace in [ns, "default"] {
            let writes = writes_allowed(env, "member1", token, namespace);
            assert!(
                writes.is_empty(),
                "host Secret {name} may write to member1: {writes:?}"
            );
        }
    }
    assert!(
        tokens
            .iter()
            .any(|(_, t)| !writes_allowed(env, "member2", t, "default").is_empty()),
        "the push member's host Secret may write to member2"
    );

    let status = fed(&kc, ns, &["status", "clusters", "-o", "json"]).ok();
    let status: Value = serde_json::from_str(&status.stdout).unwrap();
    let mode = |name: &str| {
        status["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()["mode"]
            .clone()
    };
    assert_eq!((mode("m1pa"), mode("m2pa")), (json!("pull"), json!("push")));
    let wide = fed(&kc, ns, &["status", "clusters", "-o", "wide"]).ok();
    assert!(
        wide.stdout.lines().next().unwrap().contains("MODE"),
        "{}",
        wide.stdout
    );
    assert!(
        wide.stdout
            .lines()
            .any(|l| l.starts_with("m1pa") && l.contains(" pull ")),
        "{}",
        wide.stdout
    );

    let refused = fed(
        &kc,
        ns,
        &[
            "unjoin",
            "m1pa",
            "--cluster-context",
            "member1",
            "--cleanup",
        ],
    )
    .fails();
    assert!(
        refused.stderr.contains("--cleanup of pull member"),
        "{}",
        refused.stderr
    );
    let unjoin = fed(&kc, ns, &["unjoin", "m1pa", "--cluster-context", "member1"]).ok();
    assert!(
        unjoin.stdout.contains("Cluster \"m1pa\" unjoined"),
        "{}",
        unjoin.stdout
    );
    assert!(
        !unjoin.stdout.contains("secret/m1pa-pull-no-credential"),
        "{}",
        unjoin.stdout
    );
    for path in [
        format!("{KFC}/namespaces/{ns}/kubefedclusters/m1pa"),
        format!("{RBAC}/clusterroles/{role}"),
        format!("{RBAC}/clusterrolebindings/{role}"),
        format!("{RBAC}/namespaces/{ns}/roles/{role}"),
        format!("{RBAC}/namespaces/{ns}/rolebindings/{role}"),
    ] {
        assert!(
            get(env, "host", &path).is_none(),
            "{path} still in the host"
        );
    }
    assert!(gone(env, "host", "/api/v1/namespaces/fed-pa-pull-m1pa"));
    for path in [
        format!("/apis/apps/v1/namespaces/{ns}/deployments/kubefedctl-agent"),
        format!("/api/v1/namespaces/{ns}/secrets/kubefedctl-agent-host"),
        format!("/api/v1/namespaces/{ns}/serviceaccounts/kubefedctl-agent"),
        format!("{RBAC}/clusterroles/{member_role}"),
        format!("{RBAC}/clusterrolebindings/{member_role}"),
    ] {
        assert!(
            get(env, "member1", &path).is_none(),
            "{path} still in member1"
        );
    }
    assert!(
        gone(env, "member1", &format!("/api/v1/namespaces/{ns}")),
        "join made it and it is empty: {}",
        unjoin.stdout
    );
    // Its account goes with the namespace (the API server trusts a token
    // it has seen for up to 10 s more).
    let own = format!("{KFC}/namespaces/{ns}/kubefedclusters/m1pa");
    wait_until("the agent's host token to be refused", || {
        with_token(env, "host", &token, "GET", &own, None) == 401
    });
    // The push member is untouched.
    assert!(
        get(
            env,
            "host",
            &format!("{KFC}/namespaces/{ns}/kubefedclusters/m2pa")
        )
        .is_some()
    );
}

/// The agent's host token reads its share (the federated objects, its own
/// KubeFedCluster) and writes only its own reports and status: not
/// Secrets, not another pull member's KubeFedCluster or reports.
#[test]
fn the_agents_host_token_reads_its_share_and_writes_only_its_own() {
    let env = TestEnv::shared();
    let ns = "fed-pb";
    let kc = init(env, "pull-b", ns);
    join_pull(&kc, ns, "m1pb", "member1", &["--token-ttl", "1h"]).ok();
    join_pull(&kc, ns, "m2pb", "member2", &[]).ok();
    // A type enabled after the joins: each agent's host role reads its
    // federated group, its member role writes its resource and keeps the
    // agents' own rules.
    let enabled = fed(
        &kc,
        ns,
        &["enable", "configmaps", "--federated-group", "pb.kubefed.io"],
    )
    .ok();
    assert!(
        enabled.stdout.contains(
            "clusterrole.rbac.authorization.k8s.io/kubefedctl-agent:fed-pb:m1pb updated (host)"
        ),
        "{}",
        enabled.stdout
    );
    let member_role = get(
        env,
        "member1",
        &format!("{RBAC}/clusterroles/kubefed-controller-manager:fed-pb:kubefedctl-agent"),
    )
    .unwrap()["rules"]
        .to_string();
    assert!(
        member_role.contains("configmaps") && member_role.contains("leases"),
        "{member_role}"
    );
    let kfc = get(
        env,
        "host",
        &format!("{KFC}/namespaces/{ns}/kubefedclusters/m1pb"),
    )
    .unwrap();
    assert_eq!(
        kfc["metadata"]["annotations"]["kubefedctl.kubefed.io/token-ttl-seconds"],
        "3600"
    );
    let token = agent_token(env, "member1", ns);
    let call = |method: &str, path: &str, body: Option<Value>| {
        with_token(env, "host", &token, method, path, body)
    };
    let report = |reports_ns: &str| {
        json!({"apiVersion": "kubefedctl.kubefed.io/v1alpha1", "kind": "PropagationReport",
               "metadata": {"name": "configmaps.shop.web", "namespace": reports_ns},
               "spec": {"cluster": "m1pb", "federatedType": "configmaps", "namespace": "shop",
                        "name": "web", "uid": "u1", "status": "OK"}})
    };
    let reports = |reports_ns: &str| {
        format!("/apis/kubefedctl.kubefed.io/v1alpha1/namespaces/{reports_ns}/propagationreports")
    };
    let kfcs = format!("{KFC}/namespaces/{ns}/kubefedclusters");
    for (method, path, body, code) in [
        (
            "GET",
            "/apis/pb.kubefed.io/v1beta1/federatedconfigmaps".to_string(),
            None,
            200,
        ),
        (
            "GET",
            format!("{KFC}/namespaces/{ns}/federatedtypeconfigs"),
            None,
            200,
        ),
        ("GET", format!("{kfcs}/m1pb"), None, 200),
        (
            "PATCH",
            format!("{kfcs}/m1pb/status"),
            Some(json!({"status": {"conditions": [], "region": "edge"}})),
            200,
        ),
        ("GET", format!("{kfcs}/m2pb"), None, 403),
        (
            "PATCH",
            format!("{kfcs}/m2pb/status"),
            Some(json!({"status": {"conditions": [], "region": "x"}})),
            403,
        ),
        ("GET", kfcs.clone(), None, 403),
        ("GET", format!("/api/v1/namespaces/{ns}/secrets"), None, 403),
        (
            "GET",
            format!("/api/v1/namespaces/{ns}/secrets/anything"),
            None,
            403,
        ),
        ("GET", "/api/v1/secrets".to_string(), None, 403),
        (
            "POST",
            reports("fed-pb-pull-m2pb"),
            Some(report("fed-pb-pull-m2pb")),
            403,
        ),
        ("GET", reports("fed-pb-pull-m2pb"), None, 403),
        (
            "POST",
            reports("fed-pb-pull-m1pb"),
            Some(report("fed-pb-pull-m1pb")),
            201,
        ),
        (
            "POST",
            format!("{KFC}/namespaces/{ns}/federatedtypeconfigs"),
            Some(json!({})),
            403,
        ),
        // Its renewal: a new token for its own account, none for another's.
        (
            "POST",
            token_request(&format!("{ns}-pull-m1pb")),
            Some(json!({"spec": {"expirationSeconds": 600}})),
            201,
        ),
        (
            "POST",
            token_request(&format!("{ns}-pull-m2pb")),
            Some(json!({"spec": {"expirationSeconds": 600}})),
            403,
        ),
    ] {
        assert_eq!(call(method, &path, body), code, "{method} {path}");
    }
    // The same token means nothing to the member.
    assert!(writes_allowed(env, "member1", &token, ns).is_empty());
    // In the member, the agent's account may write the renewed token back
    // into its Secret, and no other Secret.
    for (secret, allowed) in [("kubefedctl-agent-host", true), ("other", false)] {
        assert_eq!(
            member_may(env, "member1", ns, ("patch", "secrets", secret)),
            allowed,
            "{secret}"
        );
    }
}

/// The TokenRequest path of the agent's host account in `namespace`.
fn token_request(namespace: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/serviceaccounts/kubefedctl-agent/token")
}

/// Whether the agent's account in `member` may `verb` the `resource`
/// `name` in `ns`, as the member's SubjectAccessReview says.
fn member_may(
    env: &TestEnv,
    member: &str,
    ns: &str,
    (verb, resource, name): (&str, &str, &str),
) -> bool {
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": format!("system:serviceaccount:{ns}:kubefedctl-agent"),
                 "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}")],
                 "resourceAttributes": {"namespace": ns, "verb": verb, "resource": resource,
                                        "name": name}}});
    let (code, answer) = crate::fixtures::create(
        env,
        member,
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        review,
    );
    assert_eq!(code, 201, "{answer}");
    answer["status"]["allowed"] == true
}

/// `-o yaml` prints the host's objects, then the member's, with no token;
/// `-o json` two Lists; `--dry-run` writes nothing; flags only push uses
/// are refused before any cluster is asked, and so is a second join.
#[test]
fn output_and_dry_run_write_nothing_and_refusals_come_first() {
    let env = TestEnv::shared();
    let ns = "fed-pc";
    init(env, "pull-c-init", ns);
    let host = env.proxy("host").unwrap();
    let member = env.proxy("member1").unwrap();
    let kc = write_kubeconfig(
        env,
        "pull-c",
        env.kubeconfig()
            .current_context("host")
            .server("host", &host.url())
            .server("member1", &member.url()),
    );
    let yaml = join_pull(&kc, ns, "m1pc", "member1", &["-o", "yaml"]).ok();
    let docs = yaml_docs(&yaml.stdout);
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "CustomResourceDefinition",
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "Role",
            "Role",
            "ClusterRoleBinding",
            "RoleBinding",
            "RoleBinding",
            "KubeFedCluster",
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Secret",
            "Deployment",
        ]
    );
    let host_note = yaml.stdout.find("# To the host cluster").unwrap();
    let member_note = yaml.stdout.find("# To member cluster \"m1pc\"").unwrap();
    assert!(host_note < member_note);
    let kubeconfig: Value =
        serde_json::from_str(docs[14]["stringData"]["kubeconfig"].as_str().unwrap()).unwrap();
    assert_eq!(
        kubeconfig["users"][0]["user"]["token"],
        "REPLACE-ME-kubefedctl-rotate-writes-the-token"
    );
    assert_eq!(kubeconfig["clusters"][0]["cluster"]["server"], host.url());
    assert!(!yaml.stdout.contains("eyJ"), "no token");
    let json_out = join_pull(&kc, ns, "m1pc", "member1", &["-o", "json"]).ok();
    let lists: Vec<Value> = serde_json::Deserializer::from_str(&json_out.stdout)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(lists.len(), 2);
    assert_eq!(lists[0]["items"].as_array().unwrap().len(), 10);
    assert_eq!(lists[1]["items"][0]["kind"], "Namespace");

    let dry = join_pull(&kc, ns, "m1pc", "member1", &["--dry-run"]).ok();
    for line in [
        "namespace/fed-pc-pull-m1pc would be created (host)",
        "kubefedcluster.core.kubefed.io/m1pc would be created (host)",
        "deployment.apps/kubefedctl-agent would be created (m1pc)",
    ] {
        assert!(dry.stdout.contains(line), "{line}: {}", dry.stdout);
    }
    assert_eq!(host.writes() + member.writes(), 0, "{:?}", host.records());

    // Refused before anything is read.
    host.reset_records();
    member.reset_records();
    for (extra, why) in [
        (
            &["--secret-name", "s"][..],
            "--secret-name is for a push member",
        ),
        (
            &["--host-cluster-name", "h"][..],
            "--host-cluster-name is for a push member",
        ),
        (
            &["--token-timeout", "1m"][..],
            "--token-timeout is for a push member",
        ),
        (
            &["--host-endpoint", "hub:6443"][..],
            "invalid --host-endpoint",
        ),
        (
            &["--agent-objects-namespace", "Shop"][..],
            "invalid --agent-objects-namespace",
        ),
    ] {
        let run = join_pull(&kc, ns, "m1pc", "member1", extra).usage();
        assert!(run.stderr.contains(why), "{why}: {}", run.stderr);
    }
    let long = "c".repeat(60);
    let run = join_pull(&kc, ns, &long, "member1", &[]).usage();
    assert!(run.stderr.contains("63 characters"), "{}", run.stderr);
    let run = fed(
        &kc,
        ns,
        &[
            "join",
            "m1pc",
            "--mode",
            "pull",
            "--cluster-context",
            "member1",
        ],
    )
    .usage();
    assert!(
        run.stderr.contains("--mode pull needs --image"),
        "{}",
        run.stderr
    );
    let run = fed(&kc, ns, &["join", "m1pc", "--image", IMAGE]).usage();
    assert!(
        run.stderr.contains("--image is for a pull member"),
        "{}",
        run.stderr
    );
    let run = fed(
        &kc,
        ns,
        &["join", "m1pc", "--agent-objects-namespace", "shop"],
    )
    .usage();
    assert!(
        run.stderr
            .contains("--agent-objects-namespace is for a pull member"),
        "{}",
        run.stderr
    );
    assert!(host.records().is_empty() && member.records().is_empty());

    // A member joined already: refused unless asked to update, and never
    // turned into a push member.
    join_pull(&kc, ns, "m1pc", "member1", &[]).ok();
    let again = join_pull(&kc, ns, "m1pc", "member1", &[]).fails();
    assert!(
        again
            .stderr
            .contains("service account kubefedctl-agent already exists"),
        "{}",
        again.stderr
    );
    let push = fed(
        &kc,
        ns,
        &[
            "join",
            "m1pc",
            "--cluster-context",
            "member1",
            "--error-on-existing=false",
        ],
    )
    .fails();
    assert!(
        push.stderr.contains("is joined as a pull member"),
        "{}",
        push.stderr
    );
    let before = agent_token(env, "member1", ns);
    let update = join_pull(&kc, ns, "m1pc", "member1", &["--error-on-existing=false"]).ok();
    assert!(!update.stdout.contains(" created ("), "{}", update.stdout);
    assert_ne!(
        agent_token(env, "member1", ns),
        before,
        "a re-join issues a new token"
    );
    fed(&kc, ns, &["unjoin", "m1pc", "--cluster-context", "member1"]).ok();
}

/// rotate gives the agent a new host token in its member Secret; the old
/// one stays valid until it expires, unless `--revoke` makes the account
/// again, which ends every older token. A push member refuses --revoke.
#[test]
fn rotate_writes_a_working_token_and_revoke_ends_the_old_ones() {
    let env = TestEnv::shared();
    let ns = "fed-pd";
    let kc = init(env, "pull-d", ns);
    join_pull(&kc, ns, "m1pd", "member1", &[]).ok();
    let own = format!("{KFC}/namespaces/{ns}/kubefedclusters/m1pd");
    let works = |token: &str| with_token(env, "host", token, "GET", &own, None);
    let first = agent_token(env, "member1", ns);
    assert_eq!(works(&first), 200);

    let dry = fed(&kc, ns, &["rotate", "m1pd", "--dry-run"]).ok();
    assert!(
        dry.stdout.contains("token would be rotated"),
        "{}",
        dry.stdout
    );
    assert_eq!(agent_token(env, "member1", ns), first);

    let run = fed(&kc, ns, &["rotate", "m1pd"]).ok();
    assert!(
        run.stdout
            .contains("kubefedcluster.core.kubefed.io/m1pd: token rotated"),
        "{}",
        run.stdout
    );
    let second = agent_token(env, "member1", ns);
    assert_ne!(second, first);
    assert_eq!(
        (works(&first), works(&second)),
        (200, 200),
        "the old one until it expires"
    );
    let config = agent_kubeconfig(env, "member1", ns);
    assert_eq!(
        config["clusters"][0]["cluster"]["server"],
        env.cluster("host").url(),
        "the rest kept"
    );

    fed(&kc, ns, &["rotate", "m1pd", "--revoke"]).ok();
    let third = agent_token(env, "member1", ns);
    assert_eq!(works(&third), 200);
    // The API server trusts a token it has seen for up to 10 s more.
    wait_until("the older tokens to be refused", || {
        (works(&first), works(&second)) == (401, 401)
    });
    let kfc = get(env, "host", &own).unwrap();
    assert!(kfc["metadata"]["annotations"]["kubefedctl.kubefed.io/token-expires-at"].is_string());

    fed(&kc, ns, &["join", "m2pd", "--cluster-context", "member2"]).ok();
    let push = fed(&kc, ns, &["rotate", "m2pd", "--revoke"]).exits(3);
    assert!(
        push.stderr.contains("--revoke is for pull members"),
        "{}",
        push.stderr
    );
}

/// A member that cannot be reached: unjoin refuses, then with --force
/// removes the host's records and says what stays in the member.
#[test]
fn unjoin_of_an_unreachable_pull_member_needs_force() {
    let env = TestEnv::shared();
    let ns = "fed-pe";
    init(env, "pull-e-init", ns);
    let member = env.proxy("member1").unwrap();
    let kc = write_kubeconfig(
        env,
        "pull-e",
        env.kubeconfig()
            .current_context("host")
            .server("member1", &member.url()),
    );
    join_pull(&kc, ns, "m1pe", "member1", &[]).ok();
    member.set_faults(Faults {
        mode: Mode::Refuse,
        ..Faults::default()
    });
    let unjoin = |extra: &[&str]| {
        let mut args = vec!["unjoin", "m1pe", "--cluster-context", "member1"];
        args.extend_from_slice(extra);
        fed(&kc, ns, &args)
    };
    let refused = unjoin(&[]).fails();
    assert!(
        refused.stderr.contains("cannot reach cluster \"m1pe\""),
        "{}",
        refused.stderr
    );
    assert!(
        get(
            env,
            "host",
            &format!("{KFC}/namespaces/{ns}/kubefedclusters/m1pe")
        )
        .is_some()
    );
    let forced = unjoin(&["--force"]).ok();
    assert!(
        forced
            .stderr
            .contains("left behind there: the agent (deployment fed-pe/kubefedctl-agent"),
        "{}",
        forced.stderr
    );
    assert!(
        get(
            env,
            "host",
            &format!("{KFC}/namespaces/{ns}/kubefedclusters/m1pe")
        )
        .is_none()
    );
    assert!(gone(env, "host", "/api/v1/namespaces/fed-pe-pull-m1pe"));
    member.clear_faults();
    assert!(
        get(
            env,
            "member1",
            &format!("/apis/apps/v1/namespaces/{ns}/deployments/kubefedctl-agent")
        )
        .is_some(),
        "really left behind"
    );
}
