use super::*;
use std::collections::BTreeMap;

fn endpoint() -> MemberEndpoint {
    MemberEndpoint {
        api_endpoint: "https://m1.example:6443".into(),
        ca_bundle: Some("Q0E=".into()),
        insecure_skip_tls_verify: false,
        proxy_url: Some("http://proxy:3128".into()),
    }
}

fn facts<'a>(ep: &'a MemberEndpoint, labels: &'a BTreeMap<String, String>) -> ProfileFacts<'a> {
    ProfileFacts {
        cluster: "m1",
        federation_namespace: "kube-federation-system",
        endpoint: ep,
        labels,
        clusterset: Some("prod"),
    }
}

fn ready() -> Health {
    Health::Ready {
        version: "v1.37.2".into(),
    }
}

#[test]
fn a_profile_names_its_manager_in_spec_and_label() {
    let p = profile("m1", "fleet");
    assert_eq!(p["spec"]["clusterManager"]["name"], MANAGER);
    assert_eq!(p["metadata"]["labels"][MANAGER_LABEL], MANAGER);
    assert_eq!(p["metadata"]["namespace"], "fleet");
    assert!(is_ours(&p));
    let theirs = json!({"spec": {"clusterManager": {"name": "open-cluster-management"}}});
    assert!(!is_ours(&theirs));
    assert_eq!(manager_of(&theirs), "open-cluster-management");
    assert_eq!(parse_ref("fleet/m1"), Some(("fleet", "m1")));
    for bad in ["m1", "/m1", "fleet/", "a/b/c"] {
        assert_eq!(parse_ref(bad), None, "{bad}");
    }
}

#[test]
fn the_status_says_health_version_endpoint_and_labels_never_a_token() {
    let ep = endpoint();
    let labels = BTreeMap::from([
        ("region".to_string(), "eu".to_string()),
        ("empty".to_string(), String::new()),
    ]);
    let s = status_after_probe(&json!({}), &ready(), &facts(&ep, &labels), "T0").unwrap();
    assert_eq!(s["conditions"][0]["type"], "ControlPlaneHealthy");
    assert_eq!(s["conditions"][0]["status"], "True");
    assert_eq!(s["conditions"][1]["type"], "Joined");
    assert_eq!(s["version"]["kubernetes"], "v1.37.2");
    let cluster = &s["accessProviders"][0]["cluster"];
    assert_eq!(s["accessProviders"][0]["name"], PROVIDER);
    assert_eq!(cluster["server"], "https://m1.example:6443");
    assert_eq!(cluster["certificate-authority-data"], "Q0E=");
    assert_eq!(cluster["proxy-url"], "http://proxy:3128");
    assert_eq!(cluster["extensions"][0]["name"], EXEC_EXTENSION);
    assert_eq!(cluster["extensions"][0]["extension"]["cluster"], "m1");
    assert!(!s.to_string().contains("token"), "{s}");
    let names: Vec<&str> = s["properties"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["clusterset.k8s.io", "label.kubefed.io/region"]);
}

#[test]
fn a_probe_that_changes_nothing_is_not_worth_a_write_and_times_are_kept() {
    let ep = endpoint();
    let labels = BTreeMap::from([("region".to_string(), "eu".to_string())]);
    let f = facts(&ep, &labels);
    let first = status_after_probe(&json!({}), &ready(), &f, "T0").unwrap();
    assert_eq!(status_after_probe(&first, &ready(), &f, "T1"), None);

    let down = Health::Offline {
        message: "gone".into(),
    };
    let after = status_after_probe(&first, &down, &f, "T2").unwrap();
    assert_eq!(after["conditions"][0]["status"], "Unknown");
    assert_eq!(after["conditions"][0]["lastTransitionTime"], "T2");
    assert_eq!(
        after["conditions"][1]["lastTransitionTime"], "T0",
        "still joined"
    );
    assert_eq!(after["version"]["kubernetes"], "v1.37.2", "kept while down");
    assert_eq!(after["properties"][1]["lastObservedTime"], "T0");

    let moved = BTreeMap::from([("region".to_string(), "us".to_string())]);
    let relabelled = status_after_probe(&first, &ready(), &facts(&ep, &moved), "T3").unwrap();
    assert_eq!(relabelled["properties"][1]["value"], "us");
    assert_eq!(relabelled["properties"][1]["lastObservedTime"], "T3");
}

#[test]
fn not_ready_is_false_and_unreachable_is_unknown() {
    let ep = endpoint();
    let labels = BTreeMap::new();
    let f = facts(&ep, &labels);
    let not_ready = Health::NotReady {
        message: "/healthz responded without ok".into(),
    };
    let s = status_after_probe(&json!({}), &not_ready, &f, "T").unwrap();
    assert_eq!(s["conditions"][0]["status"], "False");
    assert_eq!(s["conditions"][0]["reason"], "ClusterNotReady");
    assert!(s.get("version").is_none());
}

#[test]
fn the_credential_plugin_reads_its_member_from_the_extension() {
    let info = json!({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
        "spec": {"cluster": {"server": "https://x", "config": {"cluster": "m1", "federationNamespace": "fed"}}}});
    assert_eq!(
        credential_target(&info),
        Ok(CredentialTarget {
            cluster: "m1".into(),
            federation_namespace: "fed".into()
        })
    );
    let no_cluster = json!({"spec": {"interactive": false}});
    assert!(
        credential_target(&no_cluster)
            .unwrap_err()
            .contains("provideClusterInfo")
    );
    let foreign = json!({"spec": {"cluster": {"server": "https://x", "config": {"foo": 1}}}});
    assert!(
        credential_target(&foreign)
            .unwrap_err()
            .contains("\"cluster\"")
    );
    let c = exec_credential(
        "client.authentication.k8s.io/v1",
        "tok",
        "2026-12-05T00:00:00Z",
    );
    assert_eq!(c["status"]["expirationTimestamp"], "2026-12-05T00:00:00Z");
    assert_eq!(c["kind"], "ExecCredential");
}

#[test]
fn a_consumer_may_only_have_its_own_token_requested_by_the_federation() {
    let names = JoinNames::new("m1", "host", "fed");
    let objs = consumer_objects("argocd", &names, "fed", "view");
    let kinds: Vec<&str> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding"
        ]
    );
    assert_eq!(objs[1]["roleRef"]["name"], "view");
    assert_eq!(objs[2]["rules"][0]["resourceNames"], json!(["argocd"]));
    assert_eq!(objs[3]["subjects"][0]["name"], names.service_account);
}

#[test]
fn a_join_reads_the_endpoint_of_the_provider_asked_for() {
    let p = json!({"status": {
        "credentialProviders": [{"name": "old", "cluster": {"server": "https://old"}}],
        "accessProviders": [{"name": "ocm", "cluster": {"server": "https://m1", "certificate-authority-data": "Q0E=",
            "proxy-url": "socks5://p:1080", "insecure-skip-tls-verify": true}}]}});
    let ep = endpoint_of(&p, None).unwrap();
    assert_eq!(ep.api_endpoint, "https://m1");
    assert_eq!(ep.ca_bundle.as_deref(), Some("Q0E="));
    assert_eq!(ep.proxy_url.as_deref(), Some("socks5://p:1080"));
    assert!(ep.insecure_skip_tls_verify);
    assert_eq!(
        endpoint_of(&p, Some("old")).unwrap().api_endpoint,
        "https://old"
    );
    let e = endpoint_of(&p, Some("gke")).unwrap_err();
    assert!(e.contains("\"gke\"") && e.contains("ocm, old"), "{e}");
    assert!(
        endpoint_of(&json!({"status": {}}), None)
            .unwrap_err()
            .contains("accessProviders")
    );
    let no_server = json!({"status": {"accessProviders": [{"name": "x", "cluster": {}}]}});
    assert!(
        endpoint_of(&no_server, None)
            .unwrap_err()
            .contains("cluster.server")
    );
}

#[test]
fn placement_sees_labels_over_profile_properties() {
    let p = json!({"status": {"properties": [{"name": "clusterset.k8s.io", "value": "prod"},
        {"name": "region", "value": "us"}, {"name": "x"}]}});
    let labels = BTreeMap::from([("region".to_string(), "eu".to_string())]);
    let seen = selectable_labels(&labels, Some(&p));
    assert_eq!(seen["clusterset.k8s.io"], "prod");
    assert_eq!(seen["region"], "eu", "the KubeFedCluster's label wins");
    assert_eq!(seen.len(), 2, "a property without a value is none");
    assert_eq!(selectable_labels(&labels, None), labels);
}
