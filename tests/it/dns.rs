//! Multi-cluster DNS through reconcile: member topology from Nodes, load
//! balancers from member Services (with ready Endpoints), the DNSEndpoint's
//! exact records, failover CNAMEs when a member is down, and garbage
//! collection with the record.

use crate::fixtures::{get, kubefedctl, namespace, post, write_kubeconfig};
use serde_json::json;
use std::time::{Duration, Instant};
use testenv::{Faults, Mode, TestEnv};

/// A member Service `web` with a load balancer and a ready endpoint.
fn member_service(env: &TestEnv, cluster: &str, ns: &str, ip: &str) {
    namespace(env, cluster, ns);
    let mut svc = post(
        env,
        cluster,
        &format!("/api/v1/namespaces/{ns}/services"),
        json!({"metadata": {"name": "web"}, "spec": {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": [{"port": 80}]}}),
    );
    svc["status"] = json!({"loadBalancer": {"ingress": [{"ip": ip}]}});
    let r = env
        .request(
            cluster,
            "PUT",
            &format!("/api/v1/namespaces/{ns}/services/web/status"),
            Some(&svc.to_string()),
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    ready_endpoint(env, cluster, ns);
}

/// A ready endpoint of Service `web`: an EndpointSlice where the member
/// serves them (1.21+; this environment runs no endpoint controllers, so
/// the test writes what they would) and an Endpoints object where it does
/// not (1.20). The DNS pass must read the one the member keeps current.
fn ready_endpoint(env: &TestEnv, cluster: &str, ns: &str) {
    if env.cluster(cluster).version.minor >= 21 {
        // Three slices, as a Service with many endpoints has, listed in
        // name order: the only ready endpoint is in the middle one, so a
        // pass that read the first or the last slice alone would find
        // none and leave this member's load balancer out of the records.
        // (Endpoint addresses are never published: a member counts, with
        // its load balancer's address, when one of them is ready.)
        for (name, address, ready) in [
            ("web-a", "10.1.2.1", false),
            ("web-b", "10.1.2.2", true),
            ("web-c", "10.1.2.3", false),
        ] {
            post(
                env,
                cluster,
                &format!("/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"),
                json!({"metadata": {"name": name, "labels": {"kubernetes.io/service-name": "web"}},
                       "addressType": "IPv4", "ports": [{"port": 80}],
                       "endpoints": [{"addresses": [address], "conditions": {"ready": ready}}]}),
            );
        }
    } else {
        post(
            env,
            cluster,
            &format!("/api/v1/namespaces/{ns}/endpoints"),
            json!({"metadata": {"name": "web"}, "subsets": [{"addresses": [{"ip": "10.1.2.3"}], "ports": [{"port": 80}]}]}),
        );
    }
}

fn endpoints(env: &TestEnv, ns: &str) -> Option<Vec<(String, String, Vec<String>)>> {
    let ep = get(
        env,
        "host",
        &format!(
            "/apis/multiclusterdns.kubefed.io/v1alpha1/namespaces/{ns}/dnsendpoints/service-web"
        ),
    )?;
    let mut out: Vec<(String, String, Vec<String>)> = ep["spec"]["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e["recordTTL"], 300);
            let targets = e["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_string())
                .collect();
            (
                e["dnsName"].as_str().unwrap().to_string(),
                e["recordType"].as_str().unwrap().to_string(),
                targets,
            )
        })
        .collect();
    out.sort();
    Some(out)
}

fn rec(name: &str, kind: &str, targets: &[&str]) -> (String, String, Vec<String>) {
    (
        name.to_string(),
        kind.to_string(),
        targets.iter().map(|t| t.to_string()).collect(),
    )
}

#[test]
fn service_records_follow_load_balancers_and_fail_over() {
    // Its own clusters: the topology-labelled Nodes it creates would show
    // in other tests' REGION/ZONES columns.
    let env = &TestEnv::start(&["host", "member1", "member2"]).unwrap();
    let down = env.proxy("member2").unwrap();
    let kc = write_kubeconfig(
        env,
        "dns",
        env.kubeconfig()
            .current_context("host")
            .server("member2", &down.url()),
    );
    let fed = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--kubefed-namespace", "dns-fed"]);
        kubefedctl(&kc, &all)
    };
    let plain = fed(&["init"]).ok();
    assert!(
        !plain.stdout.contains("dnsendpoints"),
        "DNS only with --with-dns"
    );
    fed(&["init", "--with-dns"]).ok();
    fed(&["join", "eu", "--cluster-context", "member1"]).ok();
    fed(&["join", "us", "--cluster-context", "member2"]).ok();
    for (cluster, region, zone) in [
        ("member1", "europe", "europe-1a"),
        ("member2", "america", "america-1b"),
    ] {
        post(
            env,
            cluster,
            "/api/v1/nodes",
            json!({"metadata": {"name": format!("{cluster}-node"),
            "labels": {"topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": zone}}}),
        );
    }
    let ns = "shop";
    member_service(env, "member1", ns, "192.0.2.10");
    member_service(env, "member2", ns, "198.51.100.20");
    namespace(env, "host", ns);
    post(
        env,
        "host",
        "/apis/multiclusterdns.kubefed.io/v1alpha1/namespaces/dns-fed/domains",
        json!({"apiVersion": "multiclusterdns.kubefed.io/v1alpha1", "kind": "Domain", "metadata": {"name": "galactic"}, "domain": "example.com"}),
    );
    post(
        env,
        "host",
        &format!("/apis/multiclusterdns.kubefed.io/v1alpha1/namespaces/{ns}/servicednsrecords"),
        json!({"apiVersion": "multiclusterdns.kubefed.io/v1alpha1", "kind": "ServiceDNSRecord", "metadata": {"name": "web"},
               "spec": {"domainRef": "galactic", "recordTTL": 300}}),
    );

    fed(&["reconcile", "-n", ns]).ok();
    if env.cluster("member2").version.minor >= 21 {
        assert_eq!(
            down.count(|r| r.resource == "endpoints"),
            0,
            "v1 Endpoints (deprecated, every read warns) are not read where slices are served"
        );
        assert!(down.count(|r| r.resource == "endpointslices" && r.verb == "list") >= 1);
    }
    let base = "web.shop.galactic.svc";
    let (g, eu, eu1, us, us1) = (
        format!("{base}.example.com"),
        format!("{base}.europe.example.com"),
        format!("{base}.europe-1a.europe.example.com"),
        format!("{base}.america.example.com"),
        format!("{base}.america-1b.america.example.com"),
    );
    let mut want = vec![
        rec(&g, "A", &["192.0.2.10", "198.51.100.20"]),
        rec(&eu, "A", &["192.0.2.10"]),
        rec(&eu1, "A", &["192.0.2.10"]),
        rec(&us, "A", &["198.51.100.20"]),
        rec(&us1, "A", &["198.51.100.20"]),
    ];
    want.sort();
    assert_eq!(endpoints(env, ns).expect("DNSEndpoint created"), want);
    let kfc = get(
        env,
        "host",
        "/apis/core.kubefed.io/v1beta1/namespaces/dns-fed/kubefedclusters/eu",
    )
    .unwrap();
    assert_eq!(
        (
            kfc["status"]["region"].clone(),
            kfc["status"]["zones"].clone()
        ),
        (json!("europe"), json!(["europe-1a"]))
    );
    let record = get(
        env,
        "host",
        &format!("/apis/multiclusterdns.kubefed.io/v1alpha1/namespaces/{ns}/servicednsrecords/web"),
    )
    .unwrap();
    assert_eq!(record["status"]["domain"], "example.com");
    assert_eq!(
        record["status"]["dns"][1]["loadBalancer"]["ingress"][0]["ip"],
        "198.51.100.20"
    );
    let table = fed(&["status", "dns", "-n", ns]).ok();
    assert!(
        table.stdout.contains(&us1) && table.stdout.contains("198.51.100.20"),
        "{}",
        table.stdout
    );

    // member2 goes down: its names CNAME up to the healthy cluster.
    down.set_faults(Faults {
        mode: Mode::Refuse,
        ..Faults::default()
    });
    let run = fed(&["reconcile", "-n", ns, "--probe-timeout", "2s"]);
    assert_eq!(run.code, 3, "a member is down: {}", run.stderr);
    let mut failover = vec![
        rec(&g, "A", &["192.0.2.10"]),
        rec(&eu, "A", &["192.0.2.10"]),
        rec(&eu1, "A", &["192.0.2.10"]),
        rec(&us, "CNAME", &[&g]),
        rec(&us1, "CNAME", &[&us]),
    ];
    failover.sort();
    assert_eq!(endpoints(env, ns).unwrap(), failover);
    down.clear_faults();

    // Deleting the record deletes its DNSEndpoint (owner reference).
    let r = env
        .request(
            "host",
            "DELETE",
            &format!(
                "/apis/multiclusterdns.kubefed.io/v1alpha1/namespaces/{ns}/servicednsrecords/web"
            ),
            None,
        )
        .unwrap();
    assert_eq!(r.status, 200);
    let deadline = Instant::now() + Duration::from_secs(30);
    while endpoints(env, ns).is_some() {
        assert!(
            Instant::now() < deadline,
            "the DNSEndpoint outlived its record"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}
