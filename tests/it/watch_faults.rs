//! `reconcile --watch` under faults, in an environment of its own whose API
//! servers the tests stop, restart and freeze: a host outage longer than
//! the lease (the watch pauses its writes and resumes without a second
//! writer, also with a standby started during the outage), etcd compaction
//! with a member API server restarted (its watches list again), and a
//! frozen member (the other member is not held back; one full round
//! catches it up). Bounds are generous
//! (`wait_until`, 60 s): no wall-clock asserts beyond "before the fault
//! ends".

use crate::fixtures::{Federation, cm, holder, wait_until};
use crate::watch::{free_port, http_get, log, samples, sigterm, spawn_watch};
use serde_json::json;
use std::process::Child;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use testenv::TestEnv;

/// The environment these tests break; one test at a time.
fn fault_env() -> MutexGuard<'static, TestEnv> {
    static ENV: OnceLock<Mutex<TestEnv>> = OnceLock::new();
    ENV.get_or_init(|| {
        Mutex::new(
            TestEnv::private(&["host", "member1", "member2"])
                .unwrap_or_else(|e| panic!("starting the fault environment: {e:#}")),
        )
    })
    .lock()
    // A failed test leaves the environment as usable as any other.
    .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn alive(child: &mut Child) -> bool {
    child.try_wait().unwrap().is_none()
}

fn metrics(port: u16) -> std::collections::BTreeMap<String, f64> {
    samples(&http_get(port, "/metrics").1)
}

fn set_cm(env: &TestEnv, f: &Federation, name: &str, v: &str) {
    crate::fixtures::patch(
        env,
        "host",
        &format!(
            "/apis/{}/v1beta1/namespaces/{}/federatedconfigmaps/{name}",
            f.group, f.ns
        ),
        json!({"spec": {"template": {"data": {"v": v}}}}),
    );
}

fn member_value(env: &TestEnv, cluster: &str, f: &Federation, name: &str) -> Option<String> {
    cm(env, cluster, f.ns, name).and_then(|o| o["data"]["v"].as_str().map(str::to_string))
}

fn create_cm(env: &TestEnv, f: &Federation, name: &str, v: &str) {
    f.create(
        env,
        "FederatedConfigMap",
        name,
        json!({"template": {"data": {"v": v}}, "placement": {"clusterSelector": {}}}),
    );
}

/// Writes through a proxy other than to the lock's Lease.
fn non_lease_writes(p: &testenv::Proxy, after: Instant) -> Vec<String> {
    p.records()
        .iter()
        .filter(|r| r.is_write() && r.resource != "leases")
        .filter(|r| r.received.is_some_and(|t| t >= after))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

#[test]
fn a_host_outage_longer_than_the_lease_pauses_writes_and_the_watch_resumes() {
    let mut env = fault_env();
    let f = Federation::new(&env, "wf-a", &["configmaps"]);
    let port = free_port();
    let log_path = env.dir().join("watch-fault-a.log");
    let addr = format!("127.0.0.1:{port}");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &["--metrics-bind-address", &addr]);
    create_cm(&env, &f, "before", "1");
    wait_until("both members get the object", || {
        member_value(&env, "member1", &f, "before").as_deref() == Some("1")
            && member_value(&env, "member2", &f, "before").as_deref() == Some("1")
    });
    wait_until("the watch is ready", || http_get(port, "/readyz").0 == 200);

    env.stop_apiserver("host");
    let stopped = Instant::now();
    // Past the renew deadline (10 s) the watch writes nothing: a member
    // copy edited by hand now is not repaired while the host is away.
    wait_until("/readyz to say the lock is not renewed", || {
        let (status, body) = http_get(port, "/readyz");
        status == 503 && body.contains("lock: not renewed for")
    });
    let paused = Instant::now();
    let (status, body) = http_get(port, "/healthz");
    assert!(status == 200, "not wedged: {status} {body}");
    crate::fixtures::patch(
        &env,
        "member1",
        &format!("/api/v1/namespaces/{}/configmaps/before", f.ns),
        json!({"data": {"v": "drifted"}}),
    );
    // Longer than the lease (15 s) in all.
    std::thread::sleep(Duration::from_secs(20).saturating_sub(stopped.elapsed()));
    assert!(
        alive(&mut watch),
        "the watch outlives the outage:\n{}",
        log(&log_path)
    );
    let paused_writes: Vec<String> = [&f.m1, &f.m2]
        .iter()
        .flat_map(|p| non_lease_writes(p, paused))
        .collect();
    assert!(
        paused_writes.is_empty(),
        "no member write after the renew deadline: {paused_writes:?}"
    );
    assert_eq!(
        member_value(&env, "member1", &f, "before").as_deref(),
        Some("drifted")
    );

    env.start_apiserver("host").unwrap();
    wait_until("the lock is renewed", || {
        log(&log_path).contains("; resuming")
    });
    let text = log(&log_path);
    assert!(
        text.lines()
            .any(|l| l.starts_with("lock: renewed after ")
                && l.ends_with("s without contact; resuming")),
        "{text}"
    );
    // What the watches missed is listed again and everything re-decided:
    // the drift is repaired, and changes made now propagate.
    wait_until("the drift is repaired", || {
        member_value(&env, "member1", &f, "before").as_deref() == Some("1")
    });
    // Only the host's watches listed again: the members' went on (the
    // drift came through member1's while the host was away).
    let member_lists: Vec<String> = [&f.m1, &f.m2]
        .iter()
        .flat_map(|p| p.records())
        .filter(|r| r.verb == "list" && r.received.is_some_and(|t| t >= paused))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(
        member_lists.is_empty(),
        "member lists after the outage: {member_lists:?}"
    );
    create_cm(&env, &f, "after", "2");
    set_cm(&env, &f, "before", "3");
    wait_until("changes after the outage reach both members", || {
        ["member1", "member2"].iter().all(|c| {
            member_value(&env, c, &f, "after").as_deref() == Some("2")
                && member_value(&env, c, &f, "before").as_deref() == Some("3")
        })
    });
    assert!(holder(&env, f.fedns).contains(&format!("pid {}", watch.id())));
    wait_until("/readyz is ok again", || http_get(port, "/readyz").0 == 200);
    let m = metrics(port);
    assert_eq!(m["kubefedctl_leader"], 1.0);
    assert!(
        m.iter().any(
            |(k, v)| k.starts_with("kubefedctl_watch_restarts_total{source=\"host: ") && *v >= 1.0
        ),
        "the host's watches were restarted: {m:?}"
    );
    sigterm(&watch);
    let status = watch.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log(&log_path));
}

#[test]
fn a_standby_started_during_a_host_outage_never_writes_beside_the_leader() {
    let mut env = fault_env();
    let f = Federation::new(&env, "wf-b", &["configmaps"]);
    // Each instance reaches the host through a proxy of its own, so their
    // host requests can be told apart.
    let (b_host, b_kc) = crate::fixtures::own_host_kubeconfig(&env, "wf-b-standby");
    let (log_a, log_b) = (
        env.dir().join("watch-fault-b1.log"),
        env.dir().join("watch-fault-b2.log"),
    );
    let (port_a, port_b) = (free_port(), free_port());
    let mut a = spawn_watch(
        &f.kc,
        &f,
        &log_a,
        &[
            "--leader-elect",
            "--metrics-bind-address",
            &format!("127.0.0.1:{port_a}"),
        ],
    );
    wait_until("the first instance leads", || {
        holder(&env, f.fedns).contains(&format!("pid {}", a.id()))
    });
    create_cm(&env, &f, "one", "1");
    wait_until("the leader propagates", || {
        member_value(&env, "member2", &f, "one").as_deref() == Some("1")
    });

    env.stop_apiserver("host");
    let mut b = spawn_watch(
        &b_kc,
        &f,
        &log_b,
        &[
            "--leader-elect",
            "--metrics-bind-address",
            &format!("127.0.0.1:{port_b}"),
        ],
    );
    // A third instance, stopped while it still waits for the host (a pod
    // deleted during the outage), ends cleanly rather than by the signal.
    let log_c = env.dir().join("watch-fault-b3.log");
    let mut c = spawn_watch(&f.kc, &f, &log_c, &["--leader-elect"]);
    wait_until("the third instance waits for the host", || {
        log(&log_c).contains("waiting for it (--leader-elect)")
    });
    sigterm(&c);
    let status = c.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log(&log_c));
    assert!(
        log(&log_c).contains("stopped while starting"),
        "{}",
        log(&log_c)
    );

    std::thread::sleep(Duration::from_secs(20));
    assert!(alive(&mut a), "{}", log(&log_a));
    assert!(
        alive(&mut b),
        "the standby waits out the outage: {}",
        log(&log_b)
    );
    env.start_apiserver("host").unwrap();
    let back = Instant::now();

    // One of them leads afterwards; the other stands by. An instance still
    // waiting for the host serves no metrics yet: both must be up.
    let leader_says = |port: u16| {
        std::net::TcpStream::connect(("127.0.0.1", port))
            .ok()
            .and_then(|_| metrics(port).get("kubefedctl_leader").copied())
    };
    wait_until("exactly one leader, the other standing by", || {
        let h = holder(&env, f.fedns);
        let (la, lb) = (leader_says(port_a), leader_says(port_b));
        (h.contains(&format!("pid {}", a.id())) && la == Some(1.0) && lb == Some(0.0))
            || (h.contains(&format!("pid {}", b.id())) && lb == Some(1.0) && la == Some(0.0))
    });
    let a_leads = holder(&env, f.fedns).contains(&format!("pid {}", a.id()));
    create_cm(&env, &f, "two", "2");
    wait_until("the leader propagates after the outage", || {
        ["member1", "member2"]
            .iter()
            .all(|c| member_value(&env, c, &f, "two").as_deref() == Some("2"))
    });
    let (leader_host, other_host, other_log) = if a_leads {
        (&f.host, &b_host, &log_b)
    } else {
        (&b_host, &f.host, &log_a)
    };
    assert!(
        !non_lease_writes(leader_host, back).is_empty(),
        "the leader writes the host (status, versions)"
    );
    let other = non_lease_writes(other_host, back);
    assert!(other.is_empty(), "the other instance wrote: {other:?}");
    if !a_leads {
        assert!(
            log(other_log).contains("holds the federation lock now; standing by"),
            "{}",
            log(other_log)
        );
    }
    for (child, path) in [(&mut a, &log_a), (&mut b, &log_b)] {
        sigterm(child);
        let status = child.wait().unwrap();
        assert!(status.success(), "{status:?}\n{}", log(path));
    }
}

#[test]
fn a_lost_lock_without_leader_election_exits_naming_the_new_holder() {
    let env = fault_env();
    let f = Federation::new(&env, "wf-c", &["configmaps"]);
    let log_path = env.dir().join("watch-fault-c.log");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &[]);
    wait_until("the watch holds the lock", || {
        holder(&env, f.fedns).contains(&format!("pid {}", watch.id()))
    });
    // Another holder takes the lease (as one would after an expiry the
    // watch did not see): the next renewal finds it.
    crate::fixtures::patch(
        &env,
        "host",
        &format!(
            "/apis/coordination.k8s.io/v1/namespaces/{}/leases/kubefedctl-reconcile",
            f.fedns
        ),
        json!({"spec": {"holderIdentity": "elsewhere (pid 7)", "leaseTransitions": 99}}),
    );
    let status = {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(s) = watch.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "{}", log(&log_path));
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    assert_eq!(status.code(), Some(1), "{}", log(&log_path));
    let text = log(&log_path);
    assert!(
        text.contains("error: lost the federation lock to elsewhere (pid 7)"),
        "{text}"
    );
    assert_eq!(
        holder(&env, f.fedns),
        "elsewhere (pid 7)",
        "not released: not ours"
    );
}

#[test]
fn compacted_history_and_a_restarted_member_make_its_watches_list_again() {
    let mut env = fault_env();
    let f = Federation::new(&env, "wf-d", &["configmaps"]);
    let port = free_port();
    let log_path = env.dir().join("watch-fault-d.log");
    let addr = format!("127.0.0.1:{port}");
    let mut watch = spawn_watch(
        &f.kc,
        &f,
        &log_path,
        &["--metrics-bind-address", &addr, "-v", "2"],
    );
    create_cm(&env, &f, "web", "1");
    wait_until("member1 gets web", || {
        member_value(&env, "member1", &f, "web").as_deref() == Some("1")
    });
    // Some history for the compaction to remove.
    for i in 0..20 {
        crate::fixtures::patch(
            &env,
            "host",
            &format!("/api/v1/namespaces/{}", f.ns),
            json!({"metadata": {"annotations": {"churn": i.to_string()}}}),
        );
    }
    let source = format!(
        "kubefedctl_watch_restarts_total{{source=\"{}: ConfigMap\"}}",
        f.cluster("m1")
    );
    let before = metrics(port).get(&source).copied().unwrap_or(0.0);
    env.stop_apiserver("member1");
    env.compact_etcd().unwrap();
    env.start_apiserver("member1").unwrap();
    wait_until("member1's watch starts over", || {
        metrics(port).get(&source).copied().unwrap_or(0.0) > before
    });
    // Drift and changes on member1 are handled again.
    crate::fixtures::patch(
        &env,
        "member1",
        &format!("/api/v1/namespaces/{}/configmaps/web", f.ns),
        json!({"data": {"v": "drifted"}}),
    );
    wait_until("the drift is repaired", || {
        member_value(&env, "member1", &f, "web").as_deref() == Some("1")
    });
    set_cm(&env, &f, "web", "2");
    wait_until("the change reaches member1", || {
        member_value(&env, "member1", &f, "web").as_deref() == Some("2")
    });
    wait_until("/readyz is ok", || http_get(port, "/readyz").0 == 200);
    assert!(alive(&mut watch));
    sigterm(&watch);
    assert!(watch.wait().unwrap().success(), "{}", log(&log_path));
}

#[test]
fn a_frozen_member_holds_nobody_back_and_catches_up_in_one_full_round() {
    let env = fault_env();
    let f = Federation::new(&env, "wf-e", &["configmaps"]);
    let names: Vec<String> = (0..50).map(|i| format!("obj-{i:02}")).collect();
    for n in &names {
        create_cm(&env, &f, n, "0");
    }
    let log_path = env.dir().join("watch-fault-e.log");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &["--metrics-bind-address", &addr]);
    wait_until("every object on both members", || {
        names.iter().all(|n| {
            member_value(&env, "member1", &f, n).as_deref() == Some("0")
                && member_value(&env, "member2", &f, n).as_deref() == Some("0")
        })
    });

    // member2's API server stops answering (connections still accepted).
    let pid = env.cluster("member2").apiserver_pid().to_string();
    let signal = |sig: &str| {
        assert!(
            std::process::Command::new("kill")
                .args([sig, &pid])
                .status()
                .unwrap()
                .success()
        );
    };
    signal("-STOP");
    // The first change finds member2 frozen: its request times out (3 s
    // here) and marks member2 as not answering.
    let (first, rest) = names.split_first().unwrap();
    set_cm(&env, &f, first, "1");
    wait_until("the first change reaches member1", || {
        member_value(&env, "member1", &f, first).as_deref() == Some("1")
    });
    wait_for("member2 marked not ready", Duration::from_secs(60), || {
        log(&log_path).contains(&format!("{}: not ready", f.cluster("m2")))
    });
    // Then no round sends member2 anything to wait for: the 49 changes
    // reach member1 with not one write to member2. Before, every round
    // wrote to member2 and waited for its timeout (50 changes took ~48 s).
    // Counted, not timed: a busy machine changes no count.
    f.m2.reset_records();
    for n in rest {
        set_cm(&env, &f, n, "1");
        wait_until("the change reaches member1", || {
            member_value(&env, "member1", &f, n).as_deref() == Some("1")
        });
    }
    let written = f.m2.count(|r| r.is_write());
    assert_eq!(
        written,
        0,
        "writes to the frozen member2: {:?}\n{}",
        f.m2.records()
            .iter()
            .filter(|r| r.is_write())
            .map(|r| format!("{} {}", r.method, r.path))
            .collect::<Vec<_>>(),
        log(&log_path)
    );
    assert!(alive(&mut watch), "{}", log(&log_path));
    let full_rounds = || metrics(port)["kubefedctl_reconcile_full_rounds_total"];
    let before = full_rounds();
    signal("-CONT");
    wait_until("member2 catches up", || {
        names
            .iter()
            .all(|n| member_value(&env, "member2", &f, n).as_deref() == Some("1"))
    });
    // One full round catches member2 up, once its watches have listed
    // again. Before, its probe started one at once, which left member2
    // out (it had not listed yet), and its watch's listing another.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(full_rounds() - before, 1.0, "{}", log(&log_path));
    sigterm(&watch);
    assert!(watch.wait().unwrap().success(), "{}", log(&log_path));
}

/// Polls `done` every 100 ms for up to `limit`.
fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sets `v` of every named FederatedConfigMap, from four threads.
fn burst(env: &TestEnv, f: &Federation, names: &[String], v: &str) {
    std::thread::scope(|s| {
        for chunk in names.chunks(names.len().div_ceil(4)) {
            s.spawn(move || {
                for n in chunk {
                    set_cm(env, f, n, v);
                }
            });
        }
    });
}

#[test]
fn thousands_of_changes_leave_no_object_behind_and_nothing_growing() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "wf-churn", &["configmaps"]);
    let names: Vec<String> = (0..100).map(|i| format!("c-{i:03}")).collect();
    for n in &names {
        create_cm(env, &f, n, "0");
    }
    let port = free_port();
    let log_path = env.dir().join("watch-churn.log");
    let addr = format!("127.0.0.1:{port}");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &["--metrics-bind-address", &addr]);
    let everywhere = |v: &str| {
        names.iter().all(|n| {
            member_value(env, "member1", &f, n).as_deref() == Some(v)
                && member_value(env, "member2", &f, n).as_deref() == Some(v)
        })
    };
    let idle = || {
        let m = metrics(port);
        m.get("kubefedctl_queue_depth") == Some(&0.0)
            && m.get("kubefedctl_rounds_in_flight") == Some(&0.0)
            && m.get("kubefedctl_watches_down") == Some(&0.0)
    };
    wait_until("the initial sync", || everywhere("0"));
    wait_until("the watch is idle", idle);
    // A probe interval (1 s here) after activity, freed heap is returned.
    std::thread::sleep(Duration::from_secs(3));
    let synced_rss = metrics(port)["process_resident_memory_bytes"];

    // One small burst first: what is paid once for concurrent rounds (the
    // client's connection pools filled to their bound, the worker threads'
    // stacks and allocator arenas) is in the idle levels compared below.
    burst(env, &f, &names, "warm");
    wait_until("the warm-up burst everywhere", || everywhere("warm"));
    wait_until("the watch is idle after the warm-up", idle);
    std::thread::sleep(Duration::from_secs(3));
    let warm = metrics(port);
    let (idle_rss, idle_tasks) = (
        warm["process_resident_memory_bytes"],
        warm["kubefedctl_tasks"],
    );

    // 3,000 changes: 30 bursts over the 100 objects, in two halves (the
    // soak of 10,000 at scale is the faults bench's, docs/performance.md).
    // A leak grows with the changes; what the allocator keeps after
    // activity (arenas, fragmentation) does not grow from one half to the
    // next.
    const HALF: usize = 15;
    let half = |from: usize| {
        for round in from..from + HALF {
            burst(env, &f, &names, &format!("v{round}"));
        }
        let last = format!("v{}", from + HALF - 1);
        wait_for(
            "every member copy at its last value",
            Duration::from_secs(300),
            || everywhere(&last),
        );
        wait_for("the watch to be idle", Duration::from_secs(60), idle);
        // A probe interval (1 s here) after activity, freed heap is returned.
        std::thread::sleep(Duration::from_secs(3));
        metrics(port)
    };
    let first = half(0)["process_resident_memory_bytes"];
    half(HALF);
    let deadline = Instant::now() + Duration::from_secs(30);
    let last = loop {
        let m = metrics(port);
        let (rss, tasks) = (m["process_resident_memory_bytes"], m["kubefedctl_tasks"]);
        if rss <= (first * 1.1).max(idle_rss * 1.3) && tasks <= idle_tasks + 4.0 {
            break m;
        }
        assert!(
            Instant::now() < deadline,
            "still growing: RSS {rss} (after the first half {first}, idle {idle_rss}, after the sync {synced_rss}), tasks {tasks} (idle {idle_tasks})\n{}",
            log(&log_path)
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    eprintln!(
        "churn: RSS after the sync {synced_rss}, idle after a first burst {idle_rss}, after the first half {first}, after both {}",
        last["process_resident_memory_bytes"]
    );
    assert!(last["kubefedctl_reconcile_rounds_total"] >= 2.0, "{last:?}");
    assert!(alive(&mut watch));
    sigterm(&watch);
    assert!(watch.wait().unwrap().success(), "{}", log(&log_path));
}

#[test]
fn rotated_credentials_in_the_clusters_secret_are_taken_without_a_restart() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "wf-rot", &["configmaps"]);
    let m1 = f.cluster("m1");
    let log_path = env.dir().join("watch-rot.log");
    let mut watch = spawn_watch(&f.kc, &f, &log_path, &[]);
    create_cm(env, &f, "web", "1");
    wait_until("member1 gets web", || {
        member_value(env, "member1", &f, "web").as_deref() == Some("1")
    });
    // The member's join token, and a second token of the same service
    // account issued by its token controller.
    let secrets = format!("/api/v1/namespaces/{}/secrets", f.fedns);
    let list = crate::fixtures::get(env, "member1", &secrets).unwrap();
    let old = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["type"] == "kubernetes.io/service-account-token"
                && s["metadata"]["annotations"]["kubernetes.io/service-account.name"]
                    .as_str()
                    .is_some_and(|sa| sa.starts_with(&m1))
        })
        .unwrap_or_else(|| panic!("no token secret for {m1}: {list}"))
        .clone();
    let sa = old["metadata"]["annotations"]["kubernetes.io/service-account.name"]
        .as_str()
        .unwrap()
        .to_string();
    let rotated = format!("{sa}-rotated");
    crate::fixtures::post(
        env,
        "member1",
        &secrets,
        json!({"metadata": {"name": rotated, "annotations": {"kubernetes.io/service-account.name": sa}},
               "type": "kubernetes.io/service-account-token"}),
    );
    let mut token = String::new();
    wait_until("the token controller fills the new token", || {
        token = crate::fixtures::get(env, "member1", &format!("{secrets}/{rotated}"))
            .and_then(|s| s["data"]["token"].as_str().map(str::to_string))
            .unwrap_or_default();
        !token.is_empty()
    });
    // The KubeFedCluster's Secret gets the new token, then the old one is
    // revoked (its Secret deleted in the member).
    let kfc = crate::fixtures::get(
        env,
        "host",
        &format!(
            "/apis/core.kubefed.io/v1beta1/namespaces/{}/kubefedclusters/{m1}",
            f.fedns
        ),
    )
    .unwrap();
    let host_secret = kfc["spec"]["secretRef"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    crate::fixtures::patch(
        env,
        "host",
        &format!("{secrets}/{host_secret}"),
        json!({"data": {"token": token}}),
    );
    let old_name = old["metadata"]["name"].as_str().unwrap();
    assert_eq!(
        env.request("member1", "DELETE", &format!("{secrets}/{old_name}"), None)
            .unwrap()
            .status,
        200
    );
    let old_token = crate::fixtures::b64(old["data"]["token"].as_str().unwrap());
    wait_until("the member refuses the old token", || {
        testenv::http::request(
            "GET",
            &format!("{}/api", env.cluster("member1").url()),
            env.ca_pem(),
            Some(&old_token),
            None,
            Duration::from_secs(5),
        )
        .is_ok_and(|r| r.status == 401)
    });
    wait_until("the watch notices", || {
        log(&log_path).contains(&format!("{m1}: not ready"))
    });
    // Drift and changes on member1 are handled with the new credentials.
    set_cm(env, &f, "web", "2");
    wait_until("the change reaches member1 with the new token", || {
        member_value(env, "member1", &f, "web").as_deref() == Some("2")
    });
    crate::fixtures::patch(
        env,
        "member1",
        &format!("/api/v1/namespaces/{}/configmaps/web", f.ns),
        json!({"data": {"v": "drifted"}}),
    );
    wait_until("the drift is repaired: member1's watch is back", || {
        member_value(env, "member1", &f, "web").as_deref() == Some("2")
    });
    assert!(alive(&mut watch), "{}", log(&log_path));
    sigterm(&watch);
    assert!(watch.wait().unwrap().success(), "{}", log(&log_path));
}
