//! Busy and starting servers: what client-go retries by itself (429 and
//! 5xx with `Retry-After`, up to ten times) every client of this tool
//! retries the same way, and nothing else; a lease renewed while it is
//! being released is released all the same. The proxy answers in the
//! servers' place, so each case is exact and counted.

use crate::fixtures::{Federation, holder, wait_until};
use crate::watch::{log, sigterm, spawn_watch};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use testenv::{Faults, RequestRecord, TestEnv};

/// Faults on the first `n` requests `which` accepts, none after.
fn first(
    n: u32,
    status: u16,
    retry_after: Option<u32>,
    which: fn(&RequestRecord) -> bool,
) -> Faults {
    let seen = Arc::new(AtomicU32::new(0));
    Faults {
        error_rate: 1.0,
        error_statuses: vec![status],
        retry_after_secs: retry_after,
        only: Some(Arc::new(move |r: &RequestRecord| {
            which(r) && seen.fetch_add(1, Ordering::SeqCst) < n
        })),
        ..Faults::default()
    }
}

fn clusters_listed(r: &RequestRecord) -> bool {
    r.verb == "list" && r.resource == "kubefedclusters"
}

#[test]
fn answers_with_retry_after_are_retried_as_client_go_retries_them() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "busy-a", &["configmaps"]);
    let reads = |p: &testenv::Proxy| p.count(clusters_listed);

    // A CRD's storage initialising (429) and a starting apiextensions
    // server (503), each with Retry-After: answered after the wait.
    for status in [429, 503] {
        f.host.reset_records();
        f.host
            .set_faults(first(3, status, Some(1), clusters_listed));
        let out = f.run(&["status", "clusters"]).ok();
        assert!(out.stdout.contains(&f.cluster("m1")), "{}", out.stdout);
        assert_eq!(
            reads(&f.host),
            4,
            "{status}: three answers retried, the fourth served"
        );
        assert_eq!(f.host.count(|r| r.injected), 3);
    }

    // No Retry-After: the server did not ask, the command decides (once).
    f.host.reset_records();
    f.host.set_faults(first(1, 503, None, clusters_listed));
    let out = f.run(&["status", "clusters"]).fails();
    assert!(out.stderr.contains("503"), "{}", out.stderr);
    assert_eq!(reads(&f.host), 1, "not retried behind the user's back");

    // A server that never stops asking: ten retries, then the error.
    f.host.reset_records();
    f.host.set_faults(first(100, 429, Some(0), clusters_listed));
    let out = f.run(&["status", "clusters"]).fails();
    assert!(out.stderr.contains("429"), "{}", out.stderr);
    assert_eq!(reads(&f.host), 11, "the first request and ten retries");
    f.host.clear_faults();

    // Members' clients too: a member write that is asked to wait lands.
    f.create(
        env,
        "FederatedConfigMap",
        "busy",
        serde_json::json!({"template": {"data": {"a": "1"}}, "placement": {"clusterSelector": {}}}),
    );
    f.m1.reset_records();
    f.m1.set_faults(first(2, 429, Some(1), |r| {
        r.verb == "create" && r.resource == "configmaps"
    }));
    f.reconcile(&["--attempts", "1"]).ok();
    assert_eq!(
        f.m1.count(|r| r.verb == "create" && r.resource == "configmaps"),
        3,
        "two answers retried in the client, one attempt of the command"
    );
    assert!(crate::fixtures::cm(env, "member1", f.ns, "busy").is_some());
    f.m1.clear_faults();
}

/// A renewal in flight when the watch stops can land between the release's
/// read and its write: the release reads again instead of failing.
#[test]
fn a_lease_renewed_during_its_release_is_released_all_the_same() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "busy-b", &["configmaps"]);
    let log_path = env.dir().join("busy-b.log");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &[]);
    wait_until("the watch leads", || {
        holder(env, f.fedns).contains(&format!("pid {}", watch.id()))
    });
    // The lease's next two writes answer 409, as a write after a renewal
    // that landed first does.
    f.host.set_faults(first(2, 409, None, |r| {
        r.verb == "patch" && r.resource == "leases"
    }));
    sigterm(&watch);
    let status = watch.wait().unwrap();
    f.host.clear_faults();
    assert!(status.success(), "{status:?}\n{}", log(&log_path));
    assert!(
        f.host.count(|r| r.injected && r.resource == "leases") >= 1,
        "a release met a conflict"
    );
    assert_eq!(holder(env, f.fedns), "", "released");
}

/// What a CI pipeline that creates clusters and federates them at once
/// meets: control planes just started, others busy on the same machine,
/// and each new CRD answering 429 `storage is (re)initializing` for a
/// moment. init, join, enable, federate (writing objects of the federated
/// types enable has just created) and the first reconcile all succeed.
///
/// Whether a server does answer 429 or 503 here depends on timing, so the
/// test does not require one: it counts the retries the commands log
/// (`-v 2`, `clients::server_retry`) and prints the count (see it with
/// `--nocapture`); a run that met none proves less, and says so.
#[test]
fn a_federation_is_set_up_right_after_its_control_planes_start() {
    let envs: Vec<TestEnv> = (0..2)
        .map(|_| TestEnv::private(&["host", "member1"]).unwrap())
        .collect();
    let retried = AtomicU32::new(0);
    std::thread::scope(|s| {
        for (i, env) in envs.iter().enumerate() {
            let retried = &retried;
            s.spawn(move || {
                let kc = crate::fixtures::write_kubeconfig(
                    env,
                    &format!("busy-fresh-{i}"),
                    env.kubeconfig().current_context("host"),
                );
                let run = |args: &[&str]| {
                    let mut all = vec!["-v", "2"];
                    all.extend_from_slice(args);
                    let out = crate::fixtures::kubefedctl(&kc, &all).ok();
                    for line in out
                        .stderr
                        .lines()
                        .filter(|l| l.contains("with Retry-After; again in"))
                    {
                        println!("busy_servers: {i}: {}: {line}", args.join(" "));
                        retried.fetch_add(1, Ordering::SeqCst);
                    }
                };
                crate::fixtures::namespace(env, "host", "busy");
                crate::fixtures::post(
                    env,
                    "host",
                    "/api/v1/namespaces/busy/configmaps",
                    serde_json::json!({"metadata": {"name": "settings"}, "data": {"a": "1"}}),
                );
                run(&["init"]);
                run(&["join", "member1", "--cluster-context", "member1"]);
                run(&["enable", "configmaps"]);
                run(&["enable", "namespaces"]);
                // The first objects of CRDs made a moment ago.
                run(&["federate", "namespaces", "busy"]);
                run(&["federate", "configmaps", "settings", "-n", "busy"]);
                run(&["reconcile"]);
                assert!(
                    crate::fixtures::cm(env, "member1", "busy", "settings").is_some(),
                    "propagated"
                );
            });
        }
    });
    let retried = retried.into_inner();
    println!(
        "busy_servers: {retried} request(s) retried at a server's Retry-After (429/503){}",
        if retried == 0 {
            "; none met this time, which proves less"
        } else {
            ""
        }
    );
}
