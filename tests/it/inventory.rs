//! The cluster inventory (SIG Multicluster's ClusterProfile API, the
//! upstream CRD of `sigs.k8s.io/cluster-inventory-api` v0.1.2): profiles
//! published by join and kept true by reconcile, read by the inventory's own
//! consumer library with short-lived credentials, and members joined from a
//! profile. Their own clusters: a host that serves ClusterProfiles makes
//! every join publish one, which other tests' hosts must not.

use crate::fixtures::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use testenv::TestEnv;

fn env() -> &'static TestEnv {
    static ENV: OnceLock<TestEnv> = OnceLock::new();
    ENV.get_or_init(|| TestEnv::start(&["host", "member1", "member2"]).unwrap())
}

const PROFILES: &str = "/apis/multicluster.x-k8s.io/v1alpha1/namespaces";

fn profile(env: &TestEnv, ns: &str, name: &str) -> Option<Value> {
    get(
        env,
        "host",
        &format!("{PROFILES}/{ns}/clusterprofiles/{name}"),
    )
}

fn condition<'a>(p: &'a Value, t: &str) -> &'a Value {
    p["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == t))
        .unwrap_or(&Value::Null)
}

fn property(p: &Value, name: &str) -> Option<String> {
    p["status"]["properties"]
        .as_array()?
        .iter()
        .find(|x| x["name"] == name)
        .map(|x| x["value"].as_str().unwrap().to_string())
}

/// A profile another cluster manager wrote (Open Cluster Management, say),
/// with the member's server and CA under its own provider.
fn foreign_profile(env: &TestEnv, ns: &str, name: &str, server: &str) {
    namespace(env, "host", ns);
    post(
        env,
        "host",
        &format!("{PROFILES}/{ns}/clusterprofiles"),
        json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
               "metadata": {"name": name, "labels": {"x-k8s.io/cluster-manager": "ocm"}},
               "spec": {"displayName": name, "clusterManager": {"name": "ocm"}}}),
    );
    let status = json!({"status": {"conditions": [], "accessProviders": [{"name": "ocm", "cluster": {
        "server": server, "certificate-authority-data": b64_encode(env.ca_pem())}}],
        "properties": [{"name": "location.topology.k8s.io", "value": "edge-eu"}]}});
    patch(
        env,
        "host",
        &format!("{PROFILES}/{ns}/clusterprofiles/{name}/status"),
        status,
    );
}

#[test]
fn init_installs_the_upstream_crd_as_the_module_ships_it() {
    let env = env();
    let kc = write_kubeconfig(env, "inv-crd", env.kubeconfig());
    let printed = kubefedctl(&kc, &["init", "--cluster-inventory", "-o", "yaml"]).ok();
    let upstream = yaml_docs(&std::fs::read_to_string(testenv::inventory_crd()).unwrap());
    let ours = yaml_docs(&printed.stdout);
    let crd = ours
        .iter()
        .find(|d| d["metadata"]["name"] == "clusterprofiles.multicluster.x-k8s.io")
        .expect("init -o yaml prints the ClusterProfile CRD");
    assert_eq!(crd, &upstream[0], "the module's own CRD, unchanged");
    let plain = kubefedctl(&kc, &["init", "-o", "yaml"]).ok();
    assert!(!plain.stdout.contains("clusterprofiles"), "only when asked");
}

#[test]
fn profiles_follow_their_members_and_another_managers_are_left_alone() {
    let env = env();
    let m1 = env.proxy("member1").unwrap();
    let kc = write_kubeconfig(
        env,
        "inv-a",
        env.kubeconfig()
            .current_context("host")
            .server("member1", &m1.url()),
    );
    let fed = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--kubefed-namespace", "inv-a"]);
        kubefedctl(&kc, &all)
    };
    fed(&["init", "--cluster-inventory"]).ok();
    // The federation namespace names a ClusterSet; another manager already
    // has a profile for the cluster about to be joined as inv-a-m2.
    namespace(env, "host", "inv-a");
    patch(
        env,
        "host",
        "/api/v1/namespaces/inv-a",
        json!({"metadata": {"labels": {"multicluster.x-k8s.io/clusterset": "prod"}}}),
    );
    foreign_profile(env, "inv-a", "inv-a-m2", &env.cluster("member2").url());
    let theirs = profile(env, "inv-a", "inv-a-m2").unwrap();

    fed(&["join", "inv-a-m1", "--cluster-context", "member1"]).ok();
    let joined = fed(&["join", "inv-a-m2", "--cluster-context", "member2"]).ok();
    assert!(
        joined.stderr.contains("belongs to cluster manager \"ocm\""),
        "{}",
        joined.stderr
    );
    assert_eq!(
        profile(env, "inv-a", "inv-a-m2").unwrap(),
        theirs,
        "another manager's profile is never touched"
    );

    let p = profile(env, "inv-a", "inv-a-m1").expect("join publishes the member");
    assert_eq!(p["spec"]["clusterManager"]["name"], "kubefed");
    assert_eq!(p["spec"]["displayName"], "inv-a-m1");
    assert_eq!(
        p["metadata"]["labels"]["x-k8s.io/cluster-manager"],
        "kubefed"
    );
    assert_eq!(condition(&p, "ControlPlaneHealthy")["status"], "True");
    assert_eq!(condition(&p, "Joined")["status"], "True");
    let version = get(env, "member1", "/version").unwrap();
    assert_eq!(p["status"]["version"]["kubernetes"], version["gitVersion"]);
    let provider = &p["status"]["accessProviders"][0];
    assert_eq!(provider["name"], "kubefed");
    assert_eq!(provider["cluster"]["server"], m1.url());
    assert_eq!(
        provider["cluster"]["certificate-authority-data"],
        b64_encode(env.ca_pem())
    );
    let ext = &provider["cluster"]["extensions"][0];
    assert_eq!(ext["name"], "client.authentication.k8s.io/exec");
    assert_eq!(ext["extension"]["cluster"], "inv-a-m1");
    assert_eq!(ext["extension"]["federationNamespace"], "inv-a");
    assert_eq!(property(&p, "clusterset.k8s.io").as_deref(), Some("prod"));
    let (kfc, secret_path) = fed_cluster(env, "inv-a", "inv-a-m1");
    let token = get(env, "host", &secret_path).unwrap()["data"]["token"].clone();
    assert!(
        !p.to_string().contains(token.as_str().unwrap()),
        "never a token"
    );
    assert_eq!(
        kfc["metadata"]["annotations"]["kubefedctl.kubefed.io/cluster-profile"],
        "inv-a/inv-a-m1"
    );

    // The KubeFedCluster's labels become properties; the member going down
    // and up is followed by the runs that probe it.
    patch(
        env,
        "host",
        "/apis/core.kubefed.io/v1beta1/namespaces/inv-a/kubefedclusters/inv-a-m1",
        json!({"metadata": {"labels": {"region": "eu"}}}),
    );
    fed(&["reconcile"]).ok();
    let p = profile(env, "inv-a", "inv-a-m1").unwrap();
    assert_eq!(
        property(&p, "label.kubefed.io/region").as_deref(),
        Some("eu")
    );
    m1.set_faults(testenv::Faults {
        mode: testenv::Mode::Refuse,
        ..Default::default()
    });
    fed(&["reconcile"]);
    let p = profile(env, "inv-a", "inv-a-m1").unwrap();
    assert_eq!(
        condition(&p, "ControlPlaneHealthy")["status"],
        "Unknown",
        "{p}"
    );
    m1.clear_faults();
    fed(&["reconcile"]).ok();
    let p = profile(env, "inv-a", "inv-a-m1").unwrap();
    assert_eq!(condition(&p, "ControlPlaneHealthy")["status"], "True");
    let wide = fed(&["status", "-o", "wide"]).ok();
    assert!(
        wide.stdout.contains("published inv-a/inv-a-m1"),
        "{}",
        wide.stdout
    );

    // The watch keeps it true too, with every probe that changes readiness.
    patch(
        env,
        "host",
        "/apis/core.kubefed.io/v1beta1/namespaces/inv-a/kubefedconfigs/kubefed",
        json!({"spec": {"clusterHealthCheck": {"periodSeconds": 1, "failureThreshold": 1}}}),
    );
    let watch = KillOnDrop(
        Command::new(KUBEFEDCTL)
            .args(["--kubeconfig"])
            .arg(&kc)
            .args(["reconcile", "--watch", "--kubefed-namespace", "inv-a"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let health = || {
        condition(
            &profile(env, "inv-a", "inv-a-m1").unwrap(),
            "ControlPlaneHealthy",
        )["status"]
            .clone()
    };
    m1.set_faults(testenv::Faults {
        mode: testenv::Mode::Refuse,
        ..Default::default()
    });
    wait_until("the watch to record member1 down", || health() == "Unknown");
    m1.clear_faults();
    wait_until("the watch to record member1 up", || health() == "True");
    drop(watch);

    fed(&[
        "unjoin",
        "inv-a-m1",
        "--cluster-context",
        "member1",
        "--yes",
    ])
    .ok();
    fed(&[
        "unjoin",
        "inv-a-m2",
        "--cluster-context",
        "member2",
        "--yes",
    ])
    .ok();
    assert!(
        profile(env, "inv-a", "inv-a-m1").is_none(),
        "unjoin takes it away"
    );
    assert_eq!(profile(env, "inv-a", "inv-a-m2").unwrap(), theirs);
}

fn fed_cluster(env: &TestEnv, fedns: &str, name: &str) -> (Value, String) {
    let kfc = get(
        env,
        "host",
        &format!("/apis/core.kubefed.io/v1beta1/namespaces/{fedns}/kubefedclusters/{name}"),
    )
    .unwrap();
    let secret = kfc["spec"]["secretRef"]["name"].as_str().unwrap();
    let path = format!("/api/v1/namespaces/{fedns}/secrets/{secret}");
    (kfc, path)
}

/// A `kubefedctl` on PATH that counts its runs, as a consumer's machine has
/// the plugin the provider file names.
fn counting_plugin(dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let script = dir.join("kubefedctl");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho run >> {}\nexec {KUBEFEDCTL} \"$@\"\n",
            dir.join("runs").display()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .args(["+x"])
        .arg(&script)
        .status()
        .unwrap();
    dir.join("runs")
}

fn runs(counter: &Path) -> usize {
    std::fs::read_to_string(counter).map_or(0, |s| s.lines().count())
}

#[test]
fn consumers_read_a_profile_with_the_inventory_library_and_short_lived_tokens() {
    let env = env();
    let kc = write_kubeconfig(env, "inv-b", env.kubeconfig().current_context("host"));
    let fed = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--kubefed-namespace", "inv-b"]);
        kubefedctl(&kc, &all)
    };
    fed(&["init", "--cluster-inventory"]).ok();
    let joined = fed(&[
        "join",
        "inv-b-m1",
        "--cluster-context",
        "member1",
        "--consumer",
        "reader",
    ])
    .ok();
    assert!(
        joined
            .stdout
            .contains("serviceaccount/reader created (inv-b-m1)"),
        "{}",
        joined.stdout
    );

    let dir = std::env::temp_dir().join(format!("inv-b-plugin-{}", std::process::id()));
    let counter = counting_plugin(&dir);
    // The shipped provider file, naming the consumer this test made.
    let mut provider: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("deploy/inventory/provider.json")).unwrap(),
    )
    .unwrap();
    provider["providers"][0]["execConfig"]["args"] = json!(["credential", "--consumer", "reader"]);
    let provider_file = dir.join("provider.json");
    std::fs::write(&provider_file, provider.to_string()).unwrap();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut consumer = Command::new(testenv::inventory_consumer())
        .args(["-kubeconfig"])
        .arg(&kc)
        .args([
            "-context",
            "host",
            "-profile",
            "inv-b/inv-b-m1",
            "-provider-file",
        ])
        .arg(&provider_file)
        .arg("-pause")
        .env("PATH", &path)
        .env("KUBECONFIG", &kc)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(consumer.stdout.take().unwrap()).lines();
    let mut next = || lines.next().map(|l| l.unwrap()).unwrap_or_default();
    let first = next();
    assert!(first.starts_with("namespaces "), "{first}");
    assert_ne!(first, "namespaces 0");
    assert_eq!(next(), "secrets forbidden", "the consumer may only view");
    assert_eq!(next(), "paused");
    assert_eq!(runs(&counter), 1, "one credential for both requests");

    // The consumer's token stops working (its account made again, as a
    // rotation or revocation would): client-go asks the plugin again.
    let sa = "/api/v1/namespaces/inv-b/serviceaccounts/reader";
    let old = token_of(env, sa);
    // Used once before, as the consumer's was: the server's cache of
    // accepted tokens then forgets both by the time it refuses this one.
    assert_eq!(bearer_status(env, &old), 200);
    let (status, _) = request(env, "member1", "DELETE", sa, None);
    assert_eq!(status, 200);
    post(
        env,
        "member1",
        "/api/v1/namespaces/inv-b/serviceaccounts",
        json!({"metadata": {"name": "reader"}}),
    );
    wait_until("the old token to be refused", || {
        bearer_status(env, &old) == 401
    });
    consumer.stdin.take().unwrap().write_all(b"\n").unwrap();
    let mut rest = Vec::new();
    loop {
        let l = next();
        if l.is_empty() {
            break;
        }
        rest.push(l);
    }
    let out = consumer.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{rest:?} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        rest.last().unwrap().starts_with("namespaces-again "),
        "{rest:?}"
    );
    assert_eq!(runs(&counter), 2, "a fresh credential after the refusal");

    // The plugin by hand: an ExecCredential with the token's expiry.
    let info = json!({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
        "spec": {"interactive": false, "cluster": {"server": env.cluster("member1").url(),
        "config": {"cluster": "inv-b-m1", "federationNamespace": "inv-b"}}}});
    let out = Command::new(KUBEFEDCTL)
        .args(["credential", "--consumer", "reader", "--expiration", "20m"])
        .env("KUBECONFIG", &kc)
        .env("KUBERNETES_EXEC_INFO", info.to_string())
        .output()
        .unwrap();
    let cred: Value = serde_json::from_slice(&out.stdout).unwrap();
    let left = seconds_until(cred["status"]["expirationTimestamp"].as_str().unwrap());
    assert!((1100..=1200).contains(&left), "{left}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bare = Command::new(KUBEFEDCTL)
        .arg("credential")
        .env_remove("KUBERNETES_EXEC_INFO")
        .output()
        .unwrap();
    assert_eq!(bare.status.code(), Some(2));

    fed(&[
        "unjoin",
        "inv-b-m1",
        "--cluster-context",
        "member1",
        "--yes",
    ])
    .ok();
    assert!(gone(env, "member1", sa), "unjoin takes the consumer away");
    assert!(profile(env, "inv-b", "inv-b-m1").is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A token of the service account at `sa` in member1, issued now.
fn token_of(env: &TestEnv, sa: &str) -> String {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 600}});
    let (status, answer) = request(env, "member1", "POST", &format!("{sa}/token"), Some(body));
    assert_eq!(status, 201, "{answer}");
    answer["status"]["token"].as_str().unwrap().to_string()
}

/// What member1 answers `token` on a namespace list.
fn bearer_status(env: &TestEnv, token: &str) -> u16 {
    testenv::http::request(
        "GET",
        &format!("{}/api/v1/namespaces", env.cluster("member1").url()),
        env.ca_pem(),
        Some(token),
        None,
        std::time::Duration::from_secs(10),
    )
    .map(|r| r.status)
    .unwrap_or(0)
}

#[test]
fn a_member_joined_from_a_profile_propagates_like_any_other() {
    let env = env();
    let kc = write_kubeconfig(env, "inv-c", env.kubeconfig().current_context("host"));
    let fed = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--kubefed-namespace", "inv-c"]);
        kubefedctl(&kc, &all)
    };
    fed(&["init", "--cluster-inventory"]).ok();
    foreign_profile(env, "inv-c-fleet", "edge", &env.cluster("member2").url());
    let theirs = profile(env, "inv-c-fleet", "edge").unwrap();
    let missing = fed(&["join", "edge", "--from-cluster-profile", "inv-c-fleet/none"]).fails();
    assert!(
        missing
            .stderr
            .contains("ClusterProfile inv-c-fleet/none not found"),
        "{}",
        missing.stderr
    );
    let bad = fed(&["join", "edge", "--from-cluster-profile", "edge"]).usage();
    assert!(bad.stderr.contains("NAMESPACE/NAME"), "{}", bad.stderr);
    let no_provider = fed(&[
        "join",
        "edge",
        "--from-cluster-profile",
        "inv-c-fleet/edge",
        "--cluster-profile-provider",
        "gke",
        "--cluster-context",
        "member2",
    ])
    .fails();
    assert!(no_provider.stderr.contains("no access provider \"gke\""));

    fed(&[
        "join",
        "edge",
        "--from-cluster-profile",
        "inv-c-fleet/edge",
        "--cluster-context",
        "member2",
    ])
    .ok();
    let (kfc, _) = fed_cluster(env, "inv-c", "edge");
    assert_eq!(kfc["spec"]["apiEndpoint"], env.cluster("member2").url());
    assert_eq!(
        kfc["metadata"]["annotations"]["kubefedctl.kubefed.io/from-cluster-profile"],
        "inv-c-fleet/edge"
    );
    assert!(
        profile(env, "inv-c", "edge").is_none(),
        "already in an inventory"
    );

    for t in ["configmaps", "namespaces"] {
        fed(&["enable", t, "--federated-group", "invc.kubefed.io"]).ok();
    }
    namespace(env, "host", "inv-c-objs");
    post(
        env,
        "host",
        "/apis/invc.kubefed.io/v1beta1/namespaces/inv-c-objs/federatednamespaces",
        json!({"apiVersion": "invc.kubefed.io/v1beta1", "kind": "FederatedNamespace",
               "metadata": {"name": "inv-c-objs"}, "spec": {"placement": {"clusterSelector": {}}}}),
    );
    post(
        env,
        "host",
        "/apis/invc.kubefed.io/v1beta1/namespaces/inv-c-objs/federatedconfigmaps",
        json!({"apiVersion": "invc.kubefed.io/v1beta1", "kind": "FederatedConfigMap",
               "metadata": {"name": "hello"},
               "spec": {"template": {"data": {"a": "b"}}, "placement": {"clusters": [{"name": "edge"}]}}}),
    );
    // Placement by the inventory's properties (our extension).
    for (name, location) in [("by-property", "edge-eu"), ("elsewhere", "us")] {
        post(
            env,
            "host",
            "/apis/invc.kubefed.io/v1beta1/namespaces/inv-c-objs/federatedconfigmaps",
            json!({"apiVersion": "invc.kubefed.io/v1beta1", "kind": "FederatedConfigMap",
                   "metadata": {"name": name},
                   "spec": {"template": {"data": {"a": "b"}}, "placement": {"clusterSelector": {
                       "matchLabels": {"location.topology.k8s.io": location}}}}}),
        );
    }
    fed(&["reconcile"]).ok();
    let cm = |name: &str| {
        get(
            env,
            "member2",
            &format!("/api/v1/namespaces/inv-c-objs/configmaps/{name}"),
        )
    };
    assert_eq!(cm("hello").unwrap()["data"]["a"], "b");
    assert!(
        cm("by-property").is_some(),
        "selected by the profile's property"
    );
    assert!(cm("elsewhere").is_none());
    let wide = fed(&["status", "-o", "wide"]).ok();
    assert!(
        wide.stdout.contains("from inv-c-fleet/edge"),
        "{}",
        wide.stdout
    );

    fed(&["unjoin", "edge", "--cluster-context", "member2", "--yes"]).ok();
    assert_eq!(profile(env, "inv-c-fleet", "edge").unwrap(), theirs);
}

/// A child process killed when the test ends, however it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
