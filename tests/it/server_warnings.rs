//! What the API servers warn about reaches the user as kubectl shows it:
//! one `Warning:` line per member and text however many objects draw it,
//! and the watch counts them in `/metrics`. v1 Endpoints warn on every
//! write from 1.33; 1.20 warns about none of what is written here.

use crate::fixtures::{Federation, wait_until};
use crate::watch::{free_port, http_get, log, samples, sigterm, spawn_watch};
use serde_json::json;
use testenv::TestEnv;

#[test]
fn member_warnings_are_shown_once_per_member_and_counted_by_the_watch() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "warn-a", &["endpoints"]);
    for name in ["a", "b", "c"] {
        f.create(
            env,
            "FederatedEndpoints",
            name,
            json!({"template": {"subsets": [{"addresses": [{"ip": "10.1.2.3"}], "ports": [{"port": 80}]}]},
                   "placement": {"clusterSelector": {}}}),
        );
    }
    let run = f.reconcile(&[]).ok();
    let warns = env.cluster("member1").version.minor >= 33;
    for member in [f.cluster("m1"), f.cluster("m2")] {
        let lines: Vec<&str> = run
            .stderr
            .lines()
            .filter(|l| l.starts_with(&format!("Warning: {member}: ")))
            .collect();
        if warns {
            assert_eq!(lines.len(), 1, "once for three objects:\n{}", run.stderr);
            assert!(
                lines[0].contains("v1 Endpoints is deprecated"),
                "{}",
                lines[0]
            );
        } else {
            assert!(lines.is_empty(), "{}", run.stderr);
        }
    }

    // The watch counts every one of them.
    let port = free_port();
    let log_path = env.dir().join("warn-a.log");
    let mut watch = spawn_watch(
        &f.kc,
        &f,
        &log_path,
        &[
            "--metrics-bind-address",
            &format!("127.0.0.1:{port}"),
            "--log-format",
            "json",
        ],
    );
    crate::fixtures::patch(
        env,
        "host",
        &format!(
            "/apis/{}/v1beta1/namespaces/{}/federatedendpoints/a",
            f.group, f.ns
        ),
        json!({"spec": {"template": {"subsets": [{"addresses": [{"ip": "10.1.2.4"}], "ports": [{"port": 80}]}]}}}),
    );
    let series = format!(
        "kubefedctl_api_warnings_total{{cluster=\"{}\"}}",
        f.cluster("m1")
    );
    wait_until("the change is written", || {
        crate::fixtures::get(
            env,
            "member1",
            &format!("/api/v1/namespaces/{}/endpoints/a", f.ns),
        )
        .is_some_and(|e| e["subsets"][0]["addresses"][0]["ip"] == "10.1.2.4")
    });
    let counted = samples(&http_get(port, "/metrics").1).get(&series).copied();
    sigterm(&watch);
    assert!(watch.wait().unwrap().success(), "{}", log(&log_path));
    // In JSON logs a server's warning is a warning, as a collector files it.
    let logged = std::fs::read_to_string(&log_path).unwrap();
    let warning_lines: Vec<serde_json::Value> = logged
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| {
            v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Warning: "))
        })
        .collect();
    if warns {
        assert!(counted.is_some_and(|n| n >= 1.0), "{series}: {counted:?}");
        assert!(!warning_lines.is_empty(), "{logged}");
        for line in &warning_lines {
            assert_eq!(line["level"], "warn", "{line}");
        }
    } else {
        assert_eq!(counted, None, "no warning, no series");
        assert!(warning_lines.is_empty(), "{logged}");
    }
}
