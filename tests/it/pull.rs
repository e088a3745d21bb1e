//! Pull members (issue #68) through the built binary: member2 joined with
//! `--mode pull`, its agent (`kubefedctl agent`) run as a child process
//! that reaches member2 through a proxy of its own and the host with the
//! identity join wrote into member2's Secret. The federation's own proxy
//! in front of member2 counts every request the host side makes to it:
//! none, ever.

use crate::fixtures::{
    Federation, KUBEFEDCTL, Run, b64, cm, get, kubefedctl, request, seconds_until, wait_until,
    write_kubeconfig,
};
use serde_json::{Value, json};
use std::path::PathBuf;
use testenv::{Faults, Mode, Proxy, TestEnv};

/// A pull member's agent as a test runs it.
struct Agent {
    cluster: String,
    fedns: &'static str,
    ns: &'static str,
    /// member2 through the agent's own proxy.
    kc: PathBuf,
    /// The host kubeconfig join wrote into member2's Secret.
    host_kc: PathBuf,
    proxy: Proxy,
}

impl Agent {
    fn of(env: &TestEnv, f: &Federation, short: &str) -> Agent {
        let proxy = env.proxy("member2").unwrap();
        let name = format!("{}-agent", f.fedns);
        let kc = write_kubeconfig(
            env,
            &name,
            env.kubeconfig()
                .current_context("member2")
                .server("member2", &proxy.url()),
        );
        let host_kc = kc.with_file_name(format!("{name}-host.kubeconfig"));
        std::fs::write(&host_kc, host_kubeconfig(env, f)).unwrap();
        Agent {
            cluster: f.cluster(short),
            fedns: f.fedns,
            ns: f.ns,
            kc,
            host_kc,
            proxy,
        }
    }

    fn args(&self) -> Vec<String> {
        [
            "agent",
            "--cluster",
            &self.cluster,
            "--host-kubeconfig",
            self.host_kc.to_str().unwrap(),
            "--kubefed-namespace",
            self.fedns,
            // member2 is shared with other tests' federations.
            "-n",
            self.ns,
        ]
        .map(String::from)
        .to_vec()
    }

    /// One heartbeat and one round.
    fn once(&self) -> Run {
        let mut args = self.args();
        args.push("--once".into());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kubefedctl(&self.kc, &args)
    }

    /// The agent as it runs in its pod: a round every `interval`; killed
    /// when the test ends, failed or not.
    fn spawn(&self, interval: &str) -> Running {
        self.spawn_with(interval, &[])
    }

    /// [`Agent::spawn`] with more flags.
    fn spawn_with(&self, interval: &str, extra: &[&str]) -> Running {
        let child = std::process::Command::new(KUBEFEDCTL)
            .arg("--kubeconfig")
            .arg(&self.kc)
            .args(self.args())
            .args(["--interval", interval])
            .args(extra)
            .env_remove("KUBECONFIG")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        Running(child)
    }

    /// Its report on the FederatedConfigMap `name`.
    fn report(&self, env: &TestEnv, ns: &str, name: &str) -> Option<Value> {
        get(
            env,
            "host",
            &format!(
                "/apis/kubefedctl.kubefed.io/v1alpha1/namespaces/{}-pull-{}/propagationreports/configmaps.{ns}.{name}",
                self.fedns, self.cluster
            ),
        )
    }
}

/// A process a test started, killed at the end of the test whatever
/// became of it (a failed assertion leaves no agent or watch running).
struct Running(std::process::Child);

impl Running {
    fn id(&self) -> u32 {
        self.0.id()
    }

    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The member statuses a federated object records, by cluster.
fn statuses(fed: &Value) -> Vec<(String, String)> {
    (fed["status"]["clusters"].as_array().into_iter().flatten())
        .map(|c| {
            let status = c["status"].as_str().unwrap_or("OK");
            (c["name"].as_str().unwrap().to_string(), status.to_string())
        })
        .collect()
}

fn propagation(fed: &Value) -> (String, String) {
    let c = &fed["status"]["conditions"][0];
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    (text(&c["status"]), text(&c["reason"]))
}

fn set_data(env: &TestEnv, f: &Federation, name: &str, value: &str) {
    let (code, body) = request(
        env,
        "host",
        "PATCH",
        &f.fed_path("federatedconfigmaps", name),
        Some(json!({"spec": {"template": {"data": {"k": value}}}})),
    );
    assert_eq!(code, 200, "{body}");
}

#[test]
fn a_pull_member_converges_through_its_agent_and_the_host_never_calls_it() {
    let env = TestEnv::shared();
    let f = Federation::with_pull(env, "pl-a", &["configmaps"]);
    let agent = Agent::of(env, &f, "m2");
    let m2 = f.cluster("m2");
    f.create(
        env,
        "FederatedConfigMap",
        "web",
        json!({"template": {"data": {"k": "v1"}}, "placement": {"clusterSelector": {}}}),
    );
    f.reset();

    // The host's run writes to member1 and leaves member2 to its agent.
    let run = f.reconcile(&[]).ok();
    assert!(
        run.stderr
            .contains(&format!("{m2}: pull member, left to its agent")),
        "{}",
        run.stderr
    );
    assert!(cm(env, "member1", f.ns, "web").is_some());
    assert!(cm(env, "member2", f.ns, "web").is_none());
    // --cluster may not name it: one-shot or watch, such a run would
    // write nothing.
    for watch in [false, true] {
        let mut args = vec!["--cluster", m2.as_str()];
        if watch {
            args.push("--watch");
        }
        let refused = f.reconcile(&args);
        assert_eq!(refused.code, 1, "{}", refused.stderr);
        assert!(
            refused.stderr.contains(&format!("{m2} is a pull member")),
            "{}",
            refused.stderr
        );
    }
    let fed = f.fed(env, "federatedconfigmaps", "web").unwrap();
    assert_eq!(
        propagation(&fed),
        ("False".into(), "CheckClusters".into()),
        "member2 has not reported the object yet: {fed}"
    );

    // One round of the agent: the copy, and its report.
    let round = agent.once().ok();
    assert!(
        round.stdout.contains("report(s) written"),
        "{}",
        round.stdout
    );
    let copy = cm(env, "member2", f.ns, "web").expect("the agent's copy");
    assert_eq!(copy["data"]["k"], "v1");
    assert_eq!(copy["metadata"]["labels"]["kubefed.io/managed"], "true");
    let report = agent.report(env, f.ns, "web").expect("a report");
    assert_eq!(report["spec"]["status"], "OK");

    // The host's next run reads member2 as it reads a push member.
    f.reconcile(&[]).ok();
    let fed = f.fed(env, "federatedconfigmaps", "web").unwrap();
    assert_eq!(
        statuses(&fed),
        [(f.cluster("m1"), "OK".into()), (m2.clone(), "OK".into())]
    );
    assert_eq!(propagation(&fed).0, "True", "{fed}");
    let pv = get(
        env,
        "host",
        &format!(
            "/apis/core.kubefed.io/v1alpha1/namespaces/{}/propagatedversions/configmap-web",
            f.ns
        ),
    )
    .unwrap();
    let recorded: Vec<&Value> = pv["status"]["clusterVersions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["clusterName"] == m2.as_str())
        .collect();
    let rv = copy["metadata"]["resourceVersion"].as_str().unwrap();
    assert_eq!(recorded[0]["version"], format!("rv:{rv}"));

    // A second round writes nothing to the member, nor a report.
    agent.proxy.reset_records();
    let again = agent.once().ok();
    assert!(
        again.stdout.contains("0 report(s) written"),
        "{}",
        again.stdout
    );
    assert_eq!(
        configmap_writes(&agent.proxy),
        0,
        "{:?}",
        agent.proxy.records()
    );

    // A change reaches it at its next round.
    set_data(env, &f, "web", "v2");
    agent.once().ok();
    assert_eq!(cm(env, "member2", f.ns, "web").unwrap()["data"]["k"], "v2");
    f.reconcile(&[]).ok();
    let fed = f.fed(env, "federatedconfigmaps", "web").unwrap();
    assert_eq!(propagation(&fed).0, "True", "{fed}");

    // Deletion: the host holds the finalizer until the agent reports the
    // copy removed.
    let (code, _) = request(
        env,
        "host",
        "DELETE",
        &f.fed_path("federatedconfigmaps", "web"),
        None,
    );
    assert_eq!(code, 200);
    let run = f.reconcile(&[]).ok();
    assert!(
        run.stderr.contains("its agent has not reported"),
        "{}",
        run.stderr
    );
    assert!(f.fed(env, "federatedconfigmaps", "web").is_some());
    assert!(cm(env, "member1", f.ns, "web").is_none());
    agent.once().ok();
    assert!(cm(env, "member2", f.ns, "web").is_none());
    assert_eq!(
        agent.report(env, f.ns, "web").unwrap()["spec"]["removed"],
        true
    );
    f.reconcile(&[]).ok();
    assert!(f.fed(env, "federatedconfigmaps", "web").is_none());
    agent.once().ok();
    assert!(
        agent.report(env, f.ns, "web").is_none(),
        "a report of an object gone"
    );

    // Orphaning: the agent unlabels its copy and reports it removed; the
    // host then lets the object go, and the copy stays.
    f.create(
        env,
        "FederatedConfigMap",
        "kept",
        json!({"template": {"data": {"k": "v1"}}, "placement": {"clusters": [{"name": m2}]}}),
    );
    agent.once().ok();
    assert!(cm(env, "member2", f.ns, "kept").is_some());
    let kept = f.fed_path("federatedconfigmaps", "kept");
    crate::fixtures::patch(
        env,
        "host",
        &kept,
        json!({"metadata": {"annotations": {"kubefed.io/orphan": "true"}}}),
    );
    f.reconcile(&[]).ok();
    assert_eq!(request(env, "host", "DELETE", &kept, None).0, 200);
    f.reconcile(&[]).ok();
    assert!(
        f.fed(env, "federatedconfigmaps", "kept").is_some(),
        "held until the agent reports"
    );
    agent.once().ok();
    let copy = cm(env, "member2", f.ns, "kept").expect("an orphaned copy stays");
    assert!(
        copy["metadata"]["labels"]
            .get("kubefed.io/managed")
            .is_none(),
        "{copy}"
    );
    assert_eq!(
        agent.report(env, f.ns, "kept").unwrap()["spec"]["removed"],
        true
    );
    f.reconcile(&[]).ok();
    assert!(f.fed(env, "federatedconfigmaps", "kept").is_none());

    assert!(
        f.m2.records().is_empty(),
        "the host side never calls a pull member: {:?}",
        f.m2.records()
    );
    // Unreachable from the host, it changes nothing for the host's runs.
    f.m2.set_faults(Faults {
        mode: Mode::Refuse,
        ..Faults::default()
    });
    f.reconcile(&[]).ok();
    f.run(&["status"]).ok();
}

#[test]
fn the_watch_records_what_a_running_agent_applies() {
    let env = TestEnv::shared();
    let f = Federation::with_pull(env, "pl-w", &["configmaps"]);
    let agent = Agent::of(env, &f, "m2");
    let m2 = f.cluster("m2");
    f.reset();
    let mut watch = Running(f.spawn_reconcile(&["--watch"]));
    let mut running = agent.spawn("1s");
    f.create(
        env,
        "FederatedConfigMap",
        "live",
        json!({"template": {"data": {"k": "v1"}}, "placement": {"clusters": [{"name": m2}]}}),
    );
    wait_until("the agent's copy and the watch's record of it", || {
        let fed = f.fed(env, "federatedconfigmaps", "live").unwrap();
        cm(env, "member2", f.ns, "live").is_some()
            && statuses(&fed) == [(m2.clone(), "OK".to_string())]
            && propagation(&fed).0 == "True"
    });
    // The heartbeat: its KubeFedCluster says Ready, written by the agent.
    let kfc = get(
        env,
        "host",
        &format!(
            "/apis/core.kubefed.io/v1beta1/namespaces/{}/kubefedclusters/{m2}",
            f.fedns
        ),
    )
    .unwrap();
    assert_eq!(kfc["status"]["conditions"][0]["type"], "Ready", "{kfc}");
    let status = f.run(&["status", "clusters", "-o", "json"]).ok();
    assert!(status.stdout.contains(&m2), "{}", status.stdout);

    // A rollout: the watch admits member2 once the canary soaked, and is
    // done once the agent's report says member2's copy is ready.
    create_rolling(env, &f, "rolled");
    let pv_path = pv_path(&f, "rolled");
    let rolled_out = |v: &str| {
        cm(env, "member2", f.ns, "rolled").is_some_and(|c| c["data"]["k"] == v)
            && get(env, "host", &pv_path).is_some()
            && rollout_record(env, &pv_path).is_none()
    };
    wait_until("the new object rolled out to both waves", || {
        rolled_out("v1")
    });
    set_data(env, &f, "rolled", "v2");
    wait_until("the change rolled out to both waves", || rolled_out("v2"));
    let written_at = |cluster: &str| {
        let copy = cm(env, cluster, f.ns, "rolled").unwrap();
        (copy["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten())
        .filter_map(|m| m["time"].as_str())
        .max()
        .map(seconds_until)
        .unwrap()
    };
    assert!(
        written_at("member2") - written_at("member1") >= 2,
        "member2 after the canary's 2 s soak"
    );
    let report = agent.report(env, f.ns, "rolled").unwrap();
    assert_eq!(report["spec"]["readiness"], "Ready", "{report}");
    running.kill();
    watch.kill();
    assert!(f.m2.records().is_empty(), "{:?}", f.m2.records());
}

/// Writes to the member's ConfigMaps an agent made through its proxy.
fn configmap_writes(proxy: &Proxy) -> usize {
    proxy.count(|r| r.is_write() && r.resource == "configmaps")
}

/// Writes of the report on ConfigMap `name` through the federation's
/// host proxy.
fn report_writes(f: &Federation, name: &str) -> usize {
    let report = format!("configmaps.{}.{name}", f.ns);
    f.host
        .count(|r| r.is_write() && r.resource == "propagationreports" && r.name == report)
}

#[test]
fn through_a_host_outage_the_agent_keeps_what_it_applied_and_catches_up_once() {
    let env = TestEnv::shared();
    let f = Federation::with_pull(env, "pl-o", &["configmaps"]);
    let agent = Agent::of(env, &f, "m2");
    let m2 = f.cluster("m2");
    f.create(
        env,
        "FederatedConfigMap",
        "steady",
        json!({"template": {"data": {"k": "v1"}}, "placement": {"clusters": [{"name": m2}]}}),
    );
    let mut running = agent.spawn("2s");
    wait_until("the agent's first round", || {
        agent.report(env, f.ns, "steady").is_some()
    });

    // The host goes away for a minute; meanwhile the template changes
    // (written past the proxy, as another client would).
    f.host.set_faults(Faults {
        mode: Mode::Refuse,
        ..Faults::default()
    });
    set_data(env, &f, "steady", "v2");
    agent.proxy.reset_records();
    std::thread::sleep(std::time::Duration::from_secs(60));
    let kept = cm(env, "member2", f.ns, "steady").expect("kept through the outage");
    assert_eq!(kept["data"]["k"], "v1");
    assert_eq!(
        configmap_writes(&agent.proxy),
        0,
        "{:?}",
        agent.proxy.records()
    );

    // Back: the change lands once, and is reported once.
    f.host.reset_records();
    f.host.clear_faults();
    wait_until("the change after the outage", || {
        cm(env, "member2", f.ns, "steady").is_some_and(|c| c["data"]["k"] == "v2")
            && agent.report(env, f.ns, "steady").is_some_and(|r| {
                r["spec"]["version"].as_str().is_some_and(|v| {
                    let copy = cm(env, "member2", f.ns, "steady").unwrap();
                    v == format!(
                        "rv:{}",
                        copy["metadata"]["resourceVersion"].as_str().unwrap()
                    )
                })
            })
    });
    // A few more rounds: nothing written twice.
    std::thread::sleep(std::time::Duration::from_secs(5));
    assert_eq!(
        configmap_writes(&agent.proxy),
        1,
        "{:?}",
        agent.proxy.records()
    );
    assert_eq!(report_writes(&f, "steady"), 1, "{:?}", f.host.records());
    running.kill();
}

/// Whether a Lease holder (`host (pid N[, job J])`) is process `pid`.
fn holds(holder: &str, pid: u32) -> bool {
    holder.contains(&format!("pid {pid})")) || holder.contains(&format!("pid {pid},"))
}

#[test]
fn two_agents_of_one_member_elect_one_writer() {
    let env = TestEnv::shared();
    let f = Federation::with_pull(env, "pl-l", &["configmaps"]);
    let agent = Agent::of(env, &f, "m2");
    let m2 = f.cluster("m2");
    let lease_path = format!(
        "/apis/coordination.k8s.io/v1/namespaces/{}/leases/kubefedctl-agent",
        f.fedns
    );
    let holder = || {
        get(env, "member2", &lease_path)
            .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let mut first = agent.spawn("1s");
    wait_until("the first agent to lead", || holds(&holder(), first.id()));
    let mut second = agent.spawn("1s");
    agent.proxy.reset_records();
    f.host.reset_records();
    f.create(
        env,
        "FederatedConfigMap",
        "once",
        json!({"template": {"data": {"k": "v1"}}, "placement": {"clusters": [{"name": m2}]}}),
    );
    wait_until("the leader's copy", || {
        agent.report(env, f.ns, "once").is_some()
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(
        configmap_writes(&agent.proxy),
        1,
        "one writer: {:?}",
        agent.proxy.records()
    );
    assert_eq!(report_writes(&f, "once"), 1);

    // The leader dies without a word: the standby takes over once the
    // Lease expires, and goes on.
    first.kill();
    set_data(env, &f, "once", "v2");
    wait_until("the standby to lead", || holds(&holder(), second.id()));
    wait_until("the new leader's change", || {
        cm(env, "member2", f.ns, "once").is_some_and(|c| c["data"]["k"] == "v2")
    });
    second.kill();
}

#[test]
fn an_rsp_over_push_and_pull_members_gives_the_pull_member_its_share() {
    let env = TestEnv::shared();
    let f = Federation::with_pull(env, "pl-r", &["deployments.apps"]);
    let agent = Agent::of(env, &f, "m2");
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    f.create_deployment(env, "web");
    f.create_rsp(env, "web", 6, &[(m1.as_str(), 1), (m2.as_str(), 2)]);
    // Its first heartbeat makes member2 ready: RSPs schedule over ready
    // members only, as KubeFed's.
    agent.once().ok();
    f.reset();
    // The host schedules into the federated object's spec and writes
    // member1's share; member2's is its agent's to apply.
    f.reconcile(&[]).ok();
    assert_eq!(f.replicas(env, "member1", "web"), 2);
    agent.once().ok();
    assert_eq!(f.replicas(env, "member2", "web"), 4);
    f.reconcile(&[]).ok();
    let fed = f.fed(env, "federateddeployments", "web").unwrap();
    assert_eq!(
        statuses(&fed),
        [(m1.clone(), "OK".into()), (m2.clone(), "OK".into())]
    );
    assert!(f.m2.records().is_empty(), "{:?}", f.m2.records());
}

/// Its member's API server restarting (stopped, then started again on its
/// port): the agent's rounds fail and back off, its heartbeat says the
/// member is away, and once the server is back a change made meanwhile
/// lands. An environment of its own: the shared member2 serves every
/// other test.
#[test]
fn the_agent_carries_on_after_its_members_api_server_restarted() {
    let mut env = TestEnv::private(&testenv::SHARED_CLUSTERS).unwrap();
    let f = Federation::with_pull(&env, "pl-m", &["configmaps"]);
    let agent = Agent::of(&env, &f, "m2");
    let m2 = f.cluster("m2");
    f.create(
        &env,
        "FederatedConfigMap",
        "through",
        json!({"template": {"data": {"k": "v1"}}, "placement": {"clusters": [{"name": m2}]}}),
    );
    let mut running = agent.spawn("1s");
    wait_until("the agent's first round", || {
        agent.report(&env, f.ns, "through").is_some()
    });
    env.stop_apiserver("member2");
    set_data(&env, &f, "through", "v2");
    let kfc = format!(
        "/apis/core.kubefed.io/v1beta1/namespaces/{}/kubefedclusters/{m2}",
        f.fedns
    );
    // Through the agent's proxy, whose upstream is gone: not ready (a
    // refused connection, without it, says Offline).
    // Whether the heartbeat wrote condition `kind` with `status`.
    fn says(env: &TestEnv, kfc: &str, kind: &str, status: &str) -> bool {
        get(env, "host", kfc).is_some_and(|c| {
            (c["status"]["conditions"].as_array().into_iter().flatten())
                .any(|c| c["type"] == kind && c["status"] == status)
        })
    }
    wait_until("the heartbeat to say the member is away", || {
        says(&env, &kfc, "Offline", "True") || says(&env, &kfc, "Ready", "False")
    });
    env.start_apiserver("member2").unwrap();
    wait_until("the change once the member is back", || {
        cm(&env, "member2", f.ns, "through").is_some_and(|c| c["data"]["k"] == "v2")
    });
    wait_until("the heartbeat to say the member is ready again", || {
        says(&env, &kfc, "Ready", "True")
    });
    running.kill();
}

/// FederatedConfigMap `name` on every member, `k: v1`, rolled out to
/// member1 (the canary) first, then to member2 once the canary has been
/// ready for 2 s.
fn create_rolling(env: &TestEnv, f: &Federation, name: &str) {
    let policy = json!({"waves": [{"clusters": [f.cluster("m1")]}], "minSuccessTime": "2s",
                        "progressDeadline": "60s"});
    let path = f.fed_path("federatedconfigmaps", "");
    let body = json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": "FederatedConfigMap",
        "metadata": {"name": name, "namespace": f.ns,
                     "annotations": {"kubefedctl.kubefed.io/rollout": policy.to_string()}},
        "spec": {"template": {"data": {"k": "v1"}}, "placement": {"clusterSelector": {}}}});
    let (code, answer) = crate::fixtures::create(env, "host", &path, body);
    assert_eq!(code, 201, "{answer}");
}

fn pv_path(f: &Federation, name: &str) -> String {
    format!(
        "/apis/core.kubefed.io/v1alpha1/namespaces/{}/propagatedversions/configmap-{name}",
        f.ns
    )
}

/// The rollout record on the PropagatedVersion at `pv_path`, if any.
fn rollout_record(env: &TestEnv, pv_path: &str) -> Option<Value> {
    let pv = get(env, "host", pv_path)?;
    let text = pv["metadata"]["annotations"]["kubefedctl.kubefed.io/rollout-status"].as_str()?;
    Some(serde_json::from_str(text).unwrap())
}

/// A progressive rollout over a push member (member1, the canary) and a
/// pull member (member2, the second wave): the host's run keeps the
/// record and admits member2 in its wave; its agent applies the new
/// version only once admitted, and its reports (readiness included) are
/// what the host's run waits on, as it waits on a push member's copy.
#[test]
fn a_rollout_admits_a_pull_member_in_its_wave_and_waits_on_its_agents_reports() {
    let env = TestEnv::shared();
    let f = Federation::with_pull(env, "pl-p", &["configmaps"]);
    let agent = Agent::of(env, &f, "m2");
    let (m1, m2) = (f.cluster("m1"), f.cluster("m2"));
    create_rolling(env, &f, "wave");
    let pv_path = pv_path(&f, "wave");
    let record = || rollout_record(env, &pv_path);
    f.reset();

    // With its agent running, one host run takes the new object through
    // both waves: member2's copy comes from its agent.
    let mut running = agent.spawn("1s");
    let run = f.reconcile(&["--wait-ready=90s"]).ok();
    assert!(run.stderr.contains("complete"), "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("admitted {m2} (its agent applies)")),
        "{}",
        run.stderr
    );
    assert_eq!(cm(env, "member2", f.ns, "wave").unwrap()["data"]["k"], "v1");
    assert!(record().is_none(), "rolled out: no record left");
    running.kill();

    // A change: a run that stops before the second wave leaves member2
    // out of the record, and its agent leaves its copy as it is.
    set_data(env, &f, "wave", "v2");
    let run = f.reconcile(&["--wait-ready=1s"]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(cm(env, "member1", f.ns, "wave").unwrap()["data"]["k"], "v2");
    let rec = record().expect("a rollout record");
    assert!(rec["members"][&m1].is_object(), "{rec}");
    assert!(rec["members"].get(&m2).is_none(), "{rec}");
    agent.proxy.reset_records();
    let held = agent.once().ok();
    assert!(
        held.stderr.contains(&format!("waiting for {m2}'s wave")),
        "{}",
        held.stderr
    );
    assert_eq!(cm(env, "member2", f.ns, "wave").unwrap()["data"]["k"], "v1");
    assert_eq!(
        configmap_writes(&agent.proxy),
        0,
        "{:?}",
        agent.proxy.records()
    );

    // The canary has soaked: the next run admits member2, the agent
    // applies and reports, the run waits for its report to say ready.
    let mut running = agent.spawn("1s");
    let run = f.reconcile(&["--wait-ready=90s"]).ok();
    assert!(run.stderr.contains("complete"), "{}", run.stderr);
    running.kill();
    let copy = cm(env, "member2", f.ns, "wave").unwrap();
    assert_eq!(copy["data"]["k"], "v2");
    assert!(record().is_none());
    let report = agent.report(env, f.ns, "wave").unwrap();
    assert_eq!(report["spec"]["readiness"], "Ready", "{report}");
    let pv = get(env, "host", &pv_path).unwrap();
    let m2_version = (pv["status"]["clusterVersions"]
        .as_array()
        .into_iter()
        .flatten())
    .find(|v| v["clusterName"] == m2.as_str())
    .map(|v| v["version"].clone());
    let rv = copy["metadata"]["resourceVersion"].as_str().unwrap();
    assert_eq!(m2_version, Some(json!(format!("rv:{rv}"))), "{pv}");
    assert!(f.m2.records().is_empty(), "{:?}", f.m2.records());
}

/// The agent's host kubeconfig, as join (or the agent's renewal) wrote
/// it into member2's Secret.
fn host_kubeconfig(env: &TestEnv, f: &Federation) -> String {
    let path = format!(
        "/api/v1/namespaces/{}/secrets/kubefedctl-agent-host",
        f.fedns
    );
    let secret = get(env, "member2", &path)
        .expect("join --mode pull writes the agent's host kubeconfig into the member");
    b64(secret["data"]["kubeconfig"].as_str().unwrap())
}

/// The agent's host token as its member Secret holds it.
fn secret_token(env: &TestEnv, f: &Federation) -> String {
    let kubeconfig: Value = serde_json::from_str(&host_kubeconfig(env, f)).unwrap();
    kubeconfig["users"][0]["user"]["token"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A token's claims (read, not verified: the host verifies them).
fn claims(token: &str) -> Value {
    use base64::Engine;
    let part = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// The agent renews its host token (`--renew-before`, here 15 s after it
/// was issued): a new token of the same lifetime for its own account,
/// written back into its member Secret, and used at once: a change made
/// after the renewal lands.
#[test]
fn the_agent_renews_its_host_token_and_goes_on_with_the_new_one() {
    let env = TestEnv::shared();
    let f = Federation::with_pull(env, "pl-t", &["configmaps"]);
    let agent = Agent::of(env, &f, "m2");
    let m2 = f.cluster("m2");
    let first = secret_token(env, &f);
    f.create(
        env,
        "FederatedConfigMap",
        "renewed",
        json!({"template": {"data": {"k": "v1"}}, "placement": {"clusters": [{"name": m2}]}}),
    );
    let life = |c: &Value| c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap();
    let ttl = life(&claims(&first));
    let before = format!("{}s", ttl - 15);
    let mut running = agent.spawn_with("1s", &["--renew-before", &before]);
    wait_until("a renewed token in the member Secret", || {
        secret_token(env, &f) != first
    });
    let renewed = claims(&secret_token(env, &f));
    assert_eq!(life(&renewed), ttl, "{renewed}");
    assert_eq!(
        renewed["sub"],
        format!(
            "system:serviceaccount:{}-pull-{m2}:kubefedctl-agent",
            f.fedns
        ),
        "{renewed}"
    );
    set_data(env, &f, "renewed", "v2");
    wait_until("the change, read with the new token", || {
        cm(env, "member2", f.ns, "renewed").is_some_and(|c| c["data"]["k"] == "v2")
    });
    running.kill();
    // Longer than the token lives: refused before anything is written.
    let refused = kubefedctl(
        &agent.kc,
        &[
            "agent",
            "--cluster",
            &agent.cluster,
            "--host-kubeconfig",
            agent.host_kc.to_str().unwrap(),
            "--kubefed-namespace",
            agent.fedns,
            "--renew-before",
            &format!("{}s", ttl + 1),
            "--once",
        ],
    );
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("not shorter than the host token's lifetime"),
        "{}",
        refused.stderr
    );
}
