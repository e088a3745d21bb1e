//! `cargo bench --bench kubefed`: KubeFed v0.10.0's own controller-manager
//! beside `kubefedctl reconcile --watch` and the one-shot `kubefedctl
//! reconcile` (issue 33, item 5), one after another on the same federation:
//! a host and 3 members (real kube-apiservers, one etcd), each behind a
//! counting proxy, and 1,000 FederatedDeployments + 1,000 FederatedConfigMaps
//! in one namespace, placed on every member. Prints a table; the last one
//! measured is in docs/performance/kubefed.md.
//!
//! KubeFed runs twice: with its own default of one sync worker per type
//! (its chart's and its defaulting's `maxConcurrentReconciles: 1`), and
//! with the KubeFedConfig `kubefedctl init` writes (8, which our watch
//! also reads as its requests in flight per member). Both keep its client
//! defaults (QPS 100 to the host, 20 per member and type).
//!
//! Equal conditions: each propagator gets an object namespace of its own,
//! filled on the host before it starts; once it is stopped, that namespace
//! is removed from the host (finalizers taken off) and from every member,
//! so the next one starts on a federation as empty as the first did;
//! KubeFed's leader lock, which it does not release, goes with it.
//!
//! KUBEFEDCTL_BENCH_KUBEFED_OBJECTS (1000 of each type),
//! KUBEFEDCTL_BENCH_KUBEFED_RATE (20 changes/s) and
//! KUBEFEDCTL_BENCH_KUBEFED_SECONDS (30 s of changes). Skips, saying why,
//! when `hack/testenv.sh` has not built KubeFed.

use serde_json::json;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use testenv::{Proxy, RequestRecord, TestEnv, kubefed_binary, kubefed_missing};

mod common;
use common::*;

const MEMBERS: [&str; 3] = ["m01", "m02", "m03"];
/// Quiet this long (housekeeping aside) ends a first sync.
const QUIET: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, PartialEq)]
enum Propagator {
    /// KubeFed's controller-manager with this many sync workers per type.
    KubeFed(u64),
    Watch,
    OneShot,
}

impl Propagator {
    fn label(self) -> String {
        match self {
            Propagator::KubeFed(1) => "KubeFed, 1 worker (its default)".into(),
            Propagator::KubeFed(n) => format!("KubeFed, {n} workers (init's config)"),
            Propagator::Watch => "reconcile --watch".into(),
            Propagator::OneShot => "one-shot reconcile".into(),
        }
    }

    /// Its own object namespace.
    fn ns(self) -> String {
        match self {
            Propagator::KubeFed(n) => format!("kf-kubefed-{n}"),
            Propagator::Watch => "kf-watch".into(),
            Propagator::OneShot => "kf-oneshot".into(),
        }
    }

    fn long_running(self) -> bool {
        self != Propagator::OneShot
    }
}

struct Scale {
    per_type: usize,
    rate: usize,
    seconds: usize,
}

/// What one propagator measured.
struct Figures {
    /// Process start → last member create answered.
    first_sync: Duration,
    /// Process start → first member create answered (start-up).
    first_create: Duration,
    /// Member objects created (of `placed`).
    created: usize,
    /// Process start → last write of the first sync (the window the
    /// request counts cover; the process's exit for the one-shot).
    window: Duration,
    member_requests: usize,
    member_writes: usize,
    host_requests: usize,
    host_writes: usize,
    /// The host writes by verb and resource, e.g. `update federatedconfigmaps/status 1000`.
    host_writes_by_kind: String,
    /// The member writes by verb, resource and status, e.g. `create configmaps 201: 3000`.
    member_writes_by_kind: String,
    sync_cpu: f64,
    total_cpu: f64,
    peak_rss: f64,
    /// VmRSS and CPU % of a core over ~10 s idle after the first sync.
    idle: Option<(f64, f64)>,
    latency: Option<Latency>,
    exit: String,
}

fn main() {
    let Some(kubefed) = kubefed_binary("controller-manager") else {
        println!("{}", kubefed_missing("controller-manager"));
        return;
    };
    let scale = Scale {
        per_type: env_usize("KUBEFEDCTL_BENCH_KUBEFED_OBJECTS", 1000),
        rate: env_usize("KUBEFEDCTL_BENCH_KUBEFED_RATE", 20).max(1),
        seconds: env_usize("KUBEFEDCTL_BENCH_KUBEFED_SECONDS", 30),
    };
    let fed = Federation::start(MEMBERS.len(), true, "kubefed-bench.kubeconfig");
    let (env, host, members, kc_path) = (&fed.env, &fed.host, &fed.members, &fed.kc);
    let config = format!("/apis/core.kubefed.io/v1beta1/namespaces/{FEDNS}/kubefedconfigs/kubefed");
    let r = env.request("host", "GET", &config, None).unwrap();
    let init_workers = r.json().unwrap()["spec"]["syncController"]["maxConcurrentReconciles"]
        .as_u64()
        .unwrap_or(1);
    let set_workers = |n: u64| {
        let body = json!({"spec": {"syncController": {"maxConcurrentReconciles": n}}});
        let r = env
            .request("host", "PATCH", &config, Some(&body.to_string()))
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    };
    let mut propagators = vec![Propagator::KubeFed(1)];
    if init_workers != 1 {
        propagators.push(Propagator::KubeFed(init_workers));
    }
    propagators.extend([Propagator::Watch, Propagator::OneShot]);

    let mut results = Vec::new();
    for p in propagators {
        eprintln!("{}: {} objects per type", p.label(), scale.per_type);
        // The KubeFedConfig is read at start: KubeFed's workers for its
        // runs, init's value back for ours.
        set_workers(match p {
            Propagator::KubeFed(n) => n,
            _ => init_workers,
        });
        let figures = run(env, kc_path, host, members, p, &scale, &kubefed);
        empty_namespace(env, &p.ns());
        results.push((p, figures));
    }
    print_table(&scale, &results);
}

/// Fills `p`'s namespace, runs `p` through its first sync (and, when it
/// keeps running, idle and the changes), stops it.
fn run(
    env: &TestEnv,
    kc: &Path,
    host: &Proxy,
    members: &[Proxy],
    p: Propagator,
    scale: &Scale,
    kubefed: &Path,
) -> Figures {
    let ns = p.ns();
    populate(env, &ns, scale.per_type);
    let placed = 2 * scale.per_type * MEMBERS.len();
    host.reset_records();
    members.iter().for_each(Proxy::reset_records);
    let log = env.dir().join(format!("{ns}.log"));
    let start = Instant::now();
    let mut child = spawn(p, kc, &ns, kubefed, &log);
    let pid = child.id();
    let creates = || -> usize { members.iter().map(|m| m.count(is_object_create)).sum() };

    if !p.long_running() {
        let (status, usage) = wait_with_usage(child);
        let window = start.elapsed();
        assert!(status.success(), "{} failed:\n{}", p.label(), read(&log));
        let mut f = sync_figures(host, members, start, start + window, placed);
        f.sync_cpu = usage.cpu;
        f.total_cpu = usage.cpu;
        f.peak_rss = usage.max_rss_mib;
        f.exit = "exit 0".into();
        return f;
    }

    // KubeFed's clients send at most 20 requests/s to a member per type:
    // 1,000 objects of a type take it 50 s at least; the deadline leaves
    // room for slower machines.
    let deadline = start + Duration::from_secs(1800);
    while creates() < placed {
        alive(&mut child, p, &log);
        assert!(
            Instant::now() < deadline,
            "{}: {} of {placed} member objects after 30 min",
            p.label(),
            creates()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The first sync ends when no write but housekeeping (leader locks,
    // cluster status) has come for QUIET: the host write-backs of the
    // last objects are in it.
    let settled = loop {
        alive(&mut child, p, &log);
        let last = last_sync_write(host, members).unwrap_or(start);
        if last.elapsed() >= QUIET {
            break last;
        }
        assert!(
            Instant::now() < deadline,
            "{}: still writing after 30 min",
            p.label()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    let sync_cpu = process_cpu(pid);
    let mut f = sync_figures(host, members, start, settled, placed);
    f.sync_cpu = sync_cpu;

    // Idle, ~10 s after the sync settled.
    let before = process_cpu(pid);
    let idle_from = Instant::now();
    std::thread::sleep(Duration::from_secs(10));
    let idle_cpu = (process_cpu(pid) - before) / idle_from.elapsed().as_secs_f64() * 100.0;
    f.idle = Some((status_mib(pid, "VmRSS:"), idle_cpu));

    // One change to each FederatedConfigMap in turn; KubeFed may queue
    // them: up to 5 minutes for the last.
    let targets: Vec<(String, String)> = (0..scale.per_type)
        .map(|i| (ns.clone(), format!("cfg-{i:05}")))
        .collect();
    f.latency = Some(changes(
        env,
        host,
        members,
        &targets,
        (scale.rate, scale.seconds),
        Duration::from_secs(300),
    ));
    alive(&mut child, p, &log);
    f.peak_rss = status_mib(pid, "VmHWM:");
    let (status, usage) = stop(child);
    f.total_cpu = usage.cpu;
    f.exit = match status.code() {
        Some(0) => "exit 0".into(),
        // What it said last says why.
        _ => format!(
            "{status}: `{}`",
            read(&log).lines().last().unwrap_or_default().trim()
        ),
    };
    if let Propagator::KubeFed(_) = p {
        remove_kubefed_lock(env);
    }
    f
}

fn spawn(p: Propagator, kc: &Path, ns: &str, kubefed: &Path, log: &Path) -> Child {
    let mut cmd = match p {
        // Its own defaults otherwise (client QPS 100 to the host, 20 per
        // member): what its users run.
        Propagator::KubeFed(_) => {
            let mut c = Command::new(kubefed);
            c.arg(format!("--kubeconfig={}", kc.display()))
                .arg(format!("--kubefed-namespace={FEDNS}"))
                // Not the defaults (:8080, :9090), which may be taken.
                .args(["--healthz-addr=127.0.0.1:0", "--metrics-addr=127.0.0.1:0"])
                .env_remove("KUBECONFIG");
            c
        }
        Propagator::Watch | Propagator::OneShot => {
            let mut c = Command::new(KUBEFEDCTL);
            c.arg("--kubeconfig").arg(kc).arg("reconcile");
            if p == Propagator::Watch {
                c.arg("--watch");
            }
            c.args(["-n", ns]);
            c
        }
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", p.label()))
}

fn read(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

fn alive(child: &mut Child, p: Propagator, log: &Path) {
    if let Some(status) = child.try_wait().unwrap() {
        panic!("{} exited ({status}):\n{}", p.label(), read(log));
    }
}

/// The first sync's figures from the proxies' records received up to `end`.
fn sync_figures(
    host: &Proxy,
    members: &[Proxy],
    start: Instant,
    end: Instant,
    placed: usize,
) -> Figures {
    let within = |r: &RequestRecord| r.received.is_some_and(|t| t <= end);
    let member_records: Vec<RequestRecord> = members
        .iter()
        .flat_map(Proxy::records)
        .filter(within)
        .collect();
    let host_records: Vec<RequestRecord> = host.records().into_iter().filter(within).collect();
    let creates: Vec<&RequestRecord> = member_records
        .iter()
        .filter(|r| is_object_create(r))
        .collect();
    let last_create = creates.iter().filter_map(|r| r.answered).max();
    let first_create = creates.iter().filter_map(|r| r.answered).min();
    assert_eq!(creates.len(), placed, "every member object created once");
    let host_writes_by_kind = by_kind(&host_records, false);
    let member_writes_by_kind = by_kind(&member_records, true);
    Figures {
        host_writes_by_kind,
        member_writes_by_kind,
        first_sync: last_create.map_or(Duration::ZERO, |t| t.duration_since(start)),
        first_create: first_create.map_or(Duration::ZERO, |t| t.duration_since(start)),
        created: creates.len(),
        window: end.duration_since(start),
        member_requests: member_records.len(),
        member_writes: member_records.iter().filter(|r| r.is_write()).count(),
        host_requests: host_records.len(),
        host_writes: host_records.iter().filter(|r| r.is_write()).count(),
        sync_cpu: 0.0,
        total_cpu: 0.0,
        peak_rss: 0.0,
        idle: None,
        latency: None,
        exit: String::new(),
    }
}

/// The writes among `records` counted by verb and resource (and status),
/// e.g. `update federatedconfigmaps/status: 1000`.
fn by_kind(records: &[RequestRecord], status: bool) -> String {
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for r in records.iter().filter(|r| r.is_write()) {
        let sub = if r.subresource.is_empty() {
            String::new()
        } else {
            format!("/{}", r.subresource)
        };
        let status = if status {
            format!(" {}", r.status)
        } else {
            String::new()
        };
        *kinds
            .entry(format!("{} {}{sub}{status}", r.verb, r.resource))
            .or_default() += 1;
    }
    kinds
        .iter()
        .map(|(k, n)| format!("{k}: {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// KubeFed does not release its leader lock when it stops. Its record
/// would keep our runs out until it expires, and would hold the next
/// KubeFed back for a whole lease (client-go takes over a record only once
/// it has seen it unchanged for `leaseDuration`): removed, as on a fresh
/// federation, once KubeFed has exited.
fn remove_kubefed_lock(env: &TestEnv) {
    for path in [
        format!("/api/v1/namespaces/{FEDNS}/configmaps/kubefed-controller-manager"),
        format!(
            "/apis/coordination.k8s.io/v1/namespaces/{FEDNS}/leases/kubefed-controller-manager"
        ),
    ] {
        let r = env.request("host", "DELETE", &path, None).unwrap();
        assert!(matches!(r.status, 200 | 202 | 404), "{}", r.body);
    }
}

/// Removes `ns` from the host and every member and waits until it is gone
/// everywhere, so that the next propagator starts on a federation as empty
/// as the first one did. The host's federated objects hold the sync
/// controller's finalizer, which no controller is left to take off.
fn empty_namespace(env: &TestEnv, ns: &str) {
    let base = format!("/apis/types.kubefed.io/v1beta1/namespaces/{ns}");
    for plural in [
        "federatedconfigmaps",
        "federateddeployments",
        "federatednamespaces",
    ] {
        let list = env
            .request("host", "GET", &format!("{base}/{plural}"), None)
            .unwrap()
            .json()
            .unwrap();
        let names: Vec<String> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        std::thread::scope(|s| {
            for part in 0..4 {
                let (names, base) = (&names, &base);
                s.spawn(move || {
                    for name in names.iter().skip(part).step_by(4) {
                        let body = json!({"metadata": {"finalizers": null}}).to_string();
                        let path = format!("{base}/{plural}/{name}");
                        let r = env.request("host", "PATCH", &path, Some(&body)).unwrap();
                        assert_eq!(r.status, 200, "{}", r.body);
                    }
                });
            }
        });
    }
    let path = format!("/api/v1/namespaces/{ns}");
    let clusters: Vec<&str> = std::iter::once("host").chain(MEMBERS).collect();
    for c in &clusters {
        let r = env.request(c, "DELETE", &path, None).unwrap();
        assert!(matches!(r.status, 200 | 202 | 404), "{}", r.body);
    }
    let deadline = Instant::now() + Duration::from_secs(600);
    for c in &clusters {
        while env.request(c, "GET", &path, None).unwrap().status != 404 {
            assert!(Instant::now() < deadline, "{ns} still in {c} after 10 min");
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

fn print_table(scale: &Scale, results: &[(Propagator, Figures)]) {
    let placed = 2 * scale.per_type * MEMBERS.len();
    let row = |what: &str, f: &dyn Fn(&Figures) -> String| {
        let cells: Vec<String> = results.iter().map(|(_, r)| f(r)).collect();
        println!("| {what} | {} |", cells.join(" | "));
    };
    let lat = |f: &Figures, get: fn(&Latency) -> f64| {
        f.latency
            .as_ref()
            .map_or("—".to_string(), |l| format!("{:.3} s", get(l)))
    };
    println!(
        "\n{} FederatedDeployments + {} FederatedConfigMaps × {} members ({placed} member objects)\n",
        scale.per_type,
        scale.per_type,
        MEMBERS.len()
    );
    let labels: Vec<String> = results.iter().map(|(p, _)| p.label()).collect();
    println!(
        "| measure | {} |\n|---|{}",
        labels.join(" | "),
        "---|".repeat(labels.len())
    );
    row("first sync: start → last member create answered", &|f| {
        format!("{:.1} s", f.first_sync.as_secs_f64())
    });
    row("start → first member create answered", &|f| {
        format!("{:.1} s", f.first_create.as_secs_f64())
    });
    row("member objects created", &|f| {
        format!("{} of {placed}", f.created)
    });
    row(
        "first sync window: start → its last write (exit for the one-shot)",
        &|f| format!("{:.1} s", f.window.as_secs_f64()),
    );
    row("first sync: member requests (writes)", &|f| {
        format!("{} ({})", f.member_requests, f.member_writes)
    });
    row("first sync: host requests (writes)", &|f| {
        format!("{} ({})", f.host_requests, f.host_writes)
    });
    row("first sync: member writes by kind and status", &|f| {
        f.member_writes_by_kind.clone()
    });
    row("first sync: host writes by kind", &|f| {
        f.host_writes_by_kind.clone()
    });
    row("CPU: first sync / to the end of the changes", &|f| {
        if f.latency.is_some() {
            format!("{:.1} s / {:.1} s", f.sync_cpu, f.total_cpu)
        } else {
            format!("{:.1} s", f.sync_cpu)
        }
    });
    row("peak RSS (VmHWM; wait4 for the one-shot)", &|f| {
        format!("{:.0} MiB", f.peak_rss)
    });
    row("idle 10 s after the sync: RSS, CPU", &|f| {
        f.idle.map_or("—".into(), |(rss, cpu)| {
            format!("{rss:.0} MiB, {cpu:.1} % of a core")
        })
    });
    let changes = scale.rate * scale.seconds;
    row(
        &format!("change latency p50 ({changes} changes at {}/s)", scale.rate),
        &|f| lat(f, |l| l.p50),
    );
    row("change latency p99", &|f| lat(f, |l| l.p99));
    row("change latency max", &|f| lat(f, |l| l.max));
    row(
        "changes written per second / not on every member after 5 min",
        &|f| {
            f.latency
                .as_ref()
                .map_or("—".into(), |l| format!("{:.1} / {}", l.rate, l.missing))
        },
    );
    row("exit on SIGTERM", &|f| f.exit.clone());

    let met = |ok: bool| if ok { "met" } else { "MISSED" };
    let ratio = |a: f64, b: f64| a / b.max(f64::EPSILON);
    let first = |f: &Figures| f.first_sync.as_secs_f64();
    let is_kubefed = |p: &Propagator| matches!(p, Propagator::KubeFed(_));
    let ours: Vec<(String, &Figures)> = results
        .iter()
        .filter(|(p, _)| !is_kubefed(p))
        .map(|(p, f)| (p.label(), f))
        .collect();
    let mut rows = Vec::new();
    for (p, k) in results.iter().filter(|(p, _)| is_kubefed(p)) {
        let base = p.label();
        for (name, f) in &ours {
            let r = ratio(first(f), first(k));
            rows.push((
                format!("goal: first sync ≤ 0.5× {base}: {name}"),
                format!("{r:.2}×"),
                format!("{:.1} s vs {:.1} s: {}", first(f), first(k), met(r <= 0.5)),
            ));
        }
        for (name, f) in &ours {
            if let (Some(w), Some(kl)) = (&f.latency, &k.latency) {
                let r = ratio(w.p99, kl.p99);
                rows.push((
                    format!("goal: change p99 ≤ 0.1× {base}: {name}"),
                    format!("{r:.2}×"),
                    format!(
                        "{:.3} s vs {:.3} s: {}",
                        w.p99,
                        kl.p99,
                        met(r <= 0.1 && w.missing == 0)
                    ),
                ));
            }
        }
        for (name, f) in &ours {
            let r = ratio(f.peak_rss, k.peak_rss);
            rows.push((
                format!("goal: peak RSS ≤ 0.5× {base}: {name}"),
                format!("{r:.2}×"),
                format!(
                    "{:.0} MiB vs {:.0} MiB: {}",
                    f.peak_rss,
                    k.peak_rss,
                    met(r <= 0.5)
                ),
            ));
        }
    }
    print_rows(rows);
}
