//! A quiet run (issue 59): every line a command prints on stderr is one the
//! user can act on. A federation's first-time steps repeated, and a
//! reconcile and a status with nothing to do, print nothing on stderr:
//! no `Warning:` about an API only the tool itself read (the KubeFed lock
//! check reads only the lock its KubeFedConfig names), no note about an
//! optional feature that is simply not set up (DNS).

use crate::fixtures::{Federation, Run};
use serde_json::json;
use testenv::TestEnv;

/// Its stderr is empty but for the one line a test environment on
/// loopback earns (`join` warns that a member on 127.0.0.1 cannot be
/// reached from a controller in the host: true, and actionable), or the
/// test says what it printed.
fn silent(what: &str, run: &Run) {
    let other: Vec<&str> = run.stderr.lines().filter(|l| !loopback(l)).collect();
    assert!(
        other.is_empty(),
        "{what} printed on stderr:\n{}",
        run.stderr
    );
}

fn loopback(line: &str) -> bool {
    line.starts_with("warning: member endpoint https://127.0.0.1:")
        && line.ends_with("is only reachable from this machine; a controller running in the host cluster could not reach it")
}

#[test]
fn no_op_commands_print_nothing_on_stderr() {
    let env = TestEnv::shared();
    // init, join, enable (configmaps and namespaces), as a user's first steps.
    let f = Federation::new(env, "quiet", &["configmaps"]);
    let (m1, group) = (f.cluster("m1"), f.group);

    silent("a repeated init", &f.run(&["init"]).ok());
    silent(
        "a repeated enable",
        &f.run(&["enable", "configmaps", "--federated-group", group])
            .ok(),
    );
    // A repeated join keeps its one error, as KubeFed's --error-on-existing
    // decides; with =false it updates in place, silently.
    let again = f
        .run(&["join", &m1, "--cluster-context", "member1"])
        .fails();
    let lines: Vec<&str> = again.stderr.lines().filter(|l| !loopback(l)).collect();
    assert_eq!(lines.len(), 1, "{}", again.stderr);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
    silent(
        "join --error-on-existing=false",
        &f.run(&[
            "join",
            &m1,
            "--cluster-context",
            "member1",
            "--error-on-existing=false",
        ])
        .ok(),
    );

    f.create(
        env,
        "FederatedConfigMap",
        "web",
        json!({"template": {"data": {"a": "1"}}, "placement": {"clusterSelector": {}}}),
    );
    // The first run propagates; it has nothing to warn about either.
    let first = f.run(&["reconcile", "-n", f.ns]).ok();
    silent("the first reconcile", &first);
    assert!(first.stdout.contains("CREATED"), "{}", first.stdout);
    f.reset();
    let again = f.run(&["reconcile", "-n", f.ns]).ok();
    silent("a no-op reconcile", &again);
    assert_eq!(f.member_writes(), 0, "a no-op writes nothing");
    // The KubeFed lock check read no v1 Endpoints (1.33+ warns about them).
    assert!(
        f.host.records().iter().all(|r| r.resource != "endpoints"),
        "{:?}",
        f.host.records()
    );
    let plan = f.run(&["reconcile", "-n", f.ns, "--dry-run"]).ok();
    silent("a no-op plan", &plan);

    // federate, as a user turns an existing object into a federated one.
    crate::fixtures::post(
        env,
        "host",
        &format!("/api/v1/namespaces/{}/configmaps", f.ns),
        json!({"metadata": {"name": "existing"}, "data": {"b": "2"}}),
    );
    silent(
        "federate",
        &f.run(&["federate", "configmaps", "existing", "-n", f.ns])
            .ok(),
    );

    silent("status", &f.run(&["status"]).ok());
    silent(
        "status of a type",
        &f.run(&["status", "configmaps", "-n", f.ns]).ok(),
    );
}
