//! `cargo bench --bench sweep`: how cost grows with objects and members
//! (issue 37, item 3). For each number of members and of federated
//! objects: the one-shot first run and the no-op run after it, then
//! `reconcile --watch` (its initial sync, idle CPU and memory, and the
//! latency of a burst of changes), each in a test environment of its own;
//! then the largest point once more across watch shards. Writes the
//! figures to docs/performance/sweep.csv and draws them as SVG charts
//! beside it (docs/performance/cost-curves.md embeds them).
//!
//! KUBEFEDCTL_SWEEP_OBJECTS (`1000,3000,10000` federated objects, half
//! FederatedDeployments, half FederatedConfigMaps), KUBEFEDCTL_SWEEP_MEMBERS
//! (`3,10`), KUBEFEDCTL_SWEEP_NAMESPACES (6 object namespaces, as many in
//! each shard), KUBEFEDCTL_SWEEP_SHARDS (3 watch shards for the sharded
//! row), KUBEFEDCTL_SWEEP_RATE (50 changes/s) for KUBEFEDCTL_SWEEP_SECONDS
//! (10 s), KUBEFEDCTL_SWEEP_IDLE (20 s of idle measured),
//! KUBEFEDCTL_SWEEP_OUT (`docs/performance`), KUBEFEDCTL_SWEEP_ONLY (a
//! comma-separated subset of oneshot, watch, sharded, plot; all by
//! default; `plot` alone draws the charts again from the CSV).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::*;

#[path = "sweep/plot.rs"]
mod plot;
#[path = "sweep/table.rs"]
mod table;
use table::{Row, Table};

struct Config {
    objects: Vec<usize>,
    members: Vec<usize>,
    namespaces: usize,
    shards: u32,
    rate: usize,
    seconds: usize,
    idle: u64,
    out: PathBuf,
    only: Option<String>,
}

impl Config {
    fn from_env() -> Config {
        let list = |name: &str, default: &[usize]| -> Vec<usize> {
            std::env::var(name).ok().map_or(default.to_vec(), |v| {
                v.split(',')
                    .map(|n| {
                        n.trim()
                            .parse()
                            .unwrap_or_else(|_| panic!("{name}: not a number: {n:?}"))
                    })
                    .collect()
            })
        };
        let out = std::env::var("KUBEFEDCTL_SWEEP_OUT").unwrap_or("docs/performance".into());
        Config {
            objects: list("KUBEFEDCTL_SWEEP_OBJECTS", &[1000, 3000, 10_000]),
            members: list("KUBEFEDCTL_SWEEP_MEMBERS", &[3, 10]),
            namespaces: env_usize("KUBEFEDCTL_SWEEP_NAMESPACES", 6).max(1),
            shards: env_usize("KUBEFEDCTL_SWEEP_SHARDS", 3).max(1) as u32,
            rate: env_usize("KUBEFEDCTL_SWEEP_RATE", 50).max(1),
            seconds: env_usize("KUBEFEDCTL_SWEEP_SECONDS", 10).max(1),
            idle: env_usize("KUBEFEDCTL_SWEEP_IDLE", 20).max(1) as u64,
            // Relative to the repository, wherever cargo runs the bench.
            out: Path::new(env!("CARGO_MANIFEST_DIR")).join(out),
            only: std::env::var("KUBEFEDCTL_SWEEP_ONLY").ok(),
        }
    }

    fn wants(&self, part: &str) -> bool {
        self.only
            .as_deref()
            .is_none_or(|o| o.split(',').any(|p| p.trim() == part))
    }
}

fn main() {
    let cfg = Config::from_env();
    std::fs::create_dir_all(&cfg.out).expect("the output folder");
    let mut table = Table::load(&cfg.out.join("sweep.csv"));
    let mut failed = Vec::new();
    let mut attempt = |what: String, table: &mut Table, f: &dyn Fn() -> Vec<Row>| {
        eprintln!("== {what}");
        let started = Instant::now();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(rows) => {
                table.put(rows);
                eprintln!("== {what}: {:.0} s", started.elapsed().as_secs_f64());
            }
            // The panic message is already on stderr; the other points go on.
            Err(_) => failed.push(what),
        }
    };
    for &members in &cfg.members {
        for &objects in &cfg.objects {
            if cfg.wants("oneshot") {
                let what = format!("one-shot, {objects} objects × {members} members");
                attempt(what, &mut table, &|| one_shot(&cfg, members, objects));
            }
            if cfg.wants("watch") {
                let what = format!("watch, {objects} objects × {members} members");
                attempt(what, &mut table, &|| watch(&cfg, members, objects, 1));
            }
        }
    }
    if cfg.wants("sharded") && cfg.shards > 1 {
        let members = cfg.members.iter().copied().max().unwrap_or(1);
        let objects = cfg.objects.iter().copied().max().unwrap_or(0);
        match watch_shards_refused(cfg.shards) {
            Some(why) => eprintln!(
                "== sharded watch skipped: this kubefedctl refuses `reconcile --watch --shard` ({why})"
            ),
            None => {
                let what = format!(
                    "watch, {objects} objects × {members} members, {} shards",
                    cfg.shards
                );
                attempt(what, &mut table, &|| {
                    watch(&cfg, members, objects, cfg.shards)
                });
            }
        }
    }
    if cfg.wants("plot") {
        plot::all(&table, &cfg.out).expect("drawing the charts");
    }
    table.print_summary();
    if !failed.is_empty() {
        eprintln!("failed: {}", failed.join("; "));
        std::process::exit(1);
    }
}

/// The object namespaces of every point, as many in each watch shard:
/// names whose shard (FNV-1a of the namespace modulo N, as `--shard I/N`
/// partitions) balances them, so that each shard has the same work.
fn namespaces(count: usize, shards: u32) -> Vec<String> {
    let per_shard = count.div_ceil(shards as usize);
    let mut taken = vec![0; shards as usize];
    let mut names = Vec::new();
    for k in 0.. {
        if names.len() == count {
            break;
        }
        let name = format!("sweep-{k:02}");
        let shard = (fnv1a64(name.as_bytes()) % u64::from(shards)) as usize;
        if taken[shard] < per_shard {
            taken[shard] += 1;
            names.push(name);
        }
    }
    names
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash: u64, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A fresh federation of `members` holding `objects` federated objects
/// (half Deployments, half ConfigMaps, spread over the namespaces), each
/// placed on every member. Returns it and the namespaces with how many
/// objects of each type each holds.
fn federation(cfg: &Config, members: usize, objects: usize) -> (Federation, Vec<(String, usize)>) {
    let fed = Federation::start(members, false, "sweep.kubeconfig");
    let names = namespaces(cfg.namespaces, cfg.shards);
    let per_type = objects / 2;
    let spread: Vec<(String, usize)> = names
        .into_iter()
        .enumerate()
        .map(|(k, ns)| {
            let n = per_type / cfg.namespaces + usize::from(k < per_type % cfg.namespaces);
            (ns, n)
        })
        .collect();
    let started = Instant::now();
    for (ns, n) in &spread {
        populate(&fed.env, ns, *n);
    }
    eprintln!(
        "{objects} federated objects created in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    (fed, spread)
}

/// The one-shot first run and the no-op run after it (product defaults:
/// every namespace, 8 requests in flight per member).
fn one_shot(cfg: &Config, members: usize, objects: usize) -> Vec<Row> {
    let (fed, _) = federation(cfg, members, objects);
    let row = Row::maker(members, objects, 1);
    let names: Vec<&str> = fed.member_names.iter().map(String::as_str).collect();
    let placed = 2 * (objects / 2) * members;

    fed.reset();
    let before = EnvCpu::now(&fed.env, &names);
    let (wall, out, rss) = measured(&fed.kc, &["reconcile"]);
    let env_cpu = EnvCpu::now(&fed.env, &names).since(before);
    ok("first run", &out);
    let cpu = LAST_CPU.with(|c| c.get());
    let k = counts(&fed.host, &fed.members);
    let created: usize = fed.members.iter().map(|p| p.count(is_object_create)).sum();
    assert_eq!(created, placed, "every member object created once");
    let (om, o) = ((objects * members).max(1) as f64, objects.max(1) as f64);
    let mut rows = vec![
        row("first_run.wall_s", wall.as_secs_f64(), "s"),
        row(
            "first_run.member_phase_s",
            k.member_phase.as_secs_f64(),
            "s",
        ),
        row("first_run.cpu_s", cpu, "s"),
        row("first_run.peak_rss_mib", rss, "MiB"),
        row(
            "first_run.member_writes",
            k.member_writes as f64,
            "requests",
        ),
        row(
            "first_run.member_requests",
            k.member_requests as f64,
            "requests",
        ),
        row("first_run.host_writes", k.host_writes as f64, "requests"),
        row(
            "first_run.host_requests",
            k.host_requests as f64,
            "requests",
        ),
        row("first_run.lock_writes", k.lock_writes as f64, "requests"),
        row(
            "first_run.member_writes_per_object_member",
            k.member_writes as f64 / om,
            "requests",
        ),
        row(
            "first_run.host_writes_per_object",
            k.host_writes as f64 / o,
            "requests",
        ),
        row(
            "first_run.ms_per_member_object",
            wall.as_secs_f64() * 1e3 / om,
            "ms",
        ),
        row("first_run.env_cpu_s", env_cpu.total() + cpu, "s"),
        row(
            "first_run.host_apiserver_cpu_s",
            env_cpu.host_apiserver,
            "s",
        ),
        row(
            "first_run.member_apiservers_cpu_s",
            env_cpu.member_apiservers,
            "s",
        ),
    ];
    eprintln!(
        "first run {:.1} s; CPU: {}",
        wall.as_secs_f64(),
        env_cpu.describe("kubefedctl", cpu)
    );

    fed.reset();
    let (wall, out, rss) = measured(&fed.kc, &["reconcile"]);
    ok("no-op run", &out);
    let cpu = LAST_CPU.with(|c| c.get());
    let k = counts(&fed.host, &fed.members);
    rows.extend([
        row("noop.wall_s", wall.as_secs_f64(), "s"),
        row("noop.cpu_s", cpu, "s"),
        row("noop.peak_rss_mib", rss, "MiB"),
        row("noop.member_requests", k.member_requests as f64, "requests"),
        row("noop.host_requests", k.host_requests as f64, "requests"),
        row(
            "noop.writes",
            (k.member_writes + k.host_writes) as f64,
            "requests",
        ),
    ]);
    rows
}

/// One `reconcile --watch` process (of a shard), stopped with SIGKILL if
/// the bench gives up on it.
struct Watcher {
    child: Option<Child>,
    log: PathBuf,
}

impl Watcher {
    fn spawn(kc: &Path, shard: Option<(u32, u32)>, log: PathBuf) -> Watcher {
        let mut cmd = Command::new(KUBEFEDCTL);
        cmd.arg("--kubeconfig")
            .arg(kc)
            .args(["reconcile", "--watch"]);
        if let Some((i, n)) = shard {
            cmd.args(["--shard", &format!("{i}/{n}")]);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("starting reconcile --watch");
        Watcher {
            child: Some(child),
            log,
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    fn alive(&mut self) {
        if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            panic!("reconcile --watch exited ({status}):\n{log}");
        }
    }

    /// SIGTERM; whether it exited 0.
    fn stop(&mut self) -> bool {
        self.child
            .take()
            .is_some_and(|c| common::stop(c).0.success())
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `reconcile --watch` (product defaults; `shards` processes started
/// together, `--shard I/N` each, when more than one): its initial sync,
/// idle CPU and memory, and a burst of changes.
fn watch(cfg: &Config, members: usize, objects: usize, shards: u32) -> Vec<Row> {
    let (fed, spread) = federation(cfg, members, objects);
    let row = Row::maker(members, objects, shards);
    let placed = 2 * (objects / 2) * members;
    fed.reset();
    let start = Instant::now();
    let mut watchers: Vec<Watcher> = (0..shards)
        .map(|i| {
            let shard = (shards > 1).then_some((i, shards));
            Watcher::spawn(&fed.kc, shard, fed.env.dir().join(format!("watch-{i}.log")))
        })
        .collect();
    let deadline = start + Duration::from_secs(3600);
    let wait = |watchers: &mut Vec<Watcher>, what: &str| {
        watchers.iter_mut().for_each(Watcher::alive);
        assert!(Instant::now() < deadline, "the watch: {what} after 1 h");
        std::thread::sleep(Duration::from_millis(500));
    };
    // Synced: the last member object's create answered (proxy clock).
    let synced = loop {
        match all_created(&fed.members, placed) {
            Some(at) => break at.duration_since(start),
            None => wait(&mut watchers, "not synced"),
        }
    };
    // Then no write but housekeeping for 5 s: the host write-backs are in.
    while last_sync_write(&fed.host, &fed.members)
        .is_some_and(|t| t.elapsed() < Duration::from_secs(5))
    {
        wait(&mut watchers, "still writing");
    }
    let pids: Vec<u32> = watchers.iter().map(Watcher::pid).collect();
    let sync_cpu: f64 = pids.iter().map(|p| process_cpu(*p)).sum();
    // Idle: past the next probe (10 s), which returns the freed heap.
    std::thread::sleep(Duration::from_secs(10));
    let before: f64 = pids.iter().map(|p| process_cpu(*p)).sum();
    let idle_from = Instant::now();
    std::thread::sleep(Duration::from_secs(cfg.idle));
    let idle_cpu = (pids.iter().map(|p| process_cpu(*p)).sum::<f64>() - before)
        / idle_from.elapsed().as_secs_f64()
        * 100.0;
    let rss: Vec<f64> = pids.iter().map(|p| status_mib(*p, "VmRSS:")).collect();

    // The burst: one FederatedConfigMap after another, namespaces in turn.
    let longest = spread.iter().map(|(_, n)| *n).max().unwrap_or(0);
    let targets: Vec<(String, String)> = (0..longest)
        .flat_map(|i| {
            spread
                .iter()
                .filter(move |(_, n)| i < *n)
                .map(move |(ns, _)| (ns.clone(), format!("cfg-{i:05}")))
        })
        .collect();
    // Where the cores went during the burst: the watch, the clusters'
    // control planes (API servers, controller managers, the one etcd they
    // share), this bench (its senders and the proxies).
    let control_planes: Vec<u32> = (fed.env.clusters().iter())
        .flat_map(|c| [Some(c.apiserver_pid()), c.controller_manager_pid()])
        .flatten()
        .chain([fed.env.etcd_pid()])
        .collect();
    let own = std::process::id();
    let cpu_of = |p: &[u32]| p.iter().map(|p| process_cpu(*p)).sum::<f64>();
    let cpu_before = (cpu_of(&pids), cpu_of(&control_planes), process_cpu(own));
    let busy_before = machine_cpu();
    let burst_from = Instant::now();
    let lat = changes(
        &fed.env,
        &fed.host,
        &fed.members,
        &targets,
        (cfg.rate, cfg.seconds),
        Duration::from_secs(120),
    );
    // Over the sending and the wait for the last changes alike.
    let burst_s = burst_from.elapsed().as_secs_f64();
    let cores = |before: f64, after: f64| (after - before) / burst_s;
    let burst_cores = (
        cores(cpu_before.0, cpu_of(&pids)),
        cores(cpu_before.1, cpu_of(&control_planes)),
        cores(cpu_before.2, process_cpu(own)),
        cores(busy_before, machine_cpu()),
    );
    watchers.iter_mut().for_each(Watcher::alive);
    let peak: Vec<f64> = pids.iter().map(|p| status_mib(*p, "VmHWM:")).collect();
    // Every one stopped, whatever the others' exits.
    let exits: Vec<bool> = watchers.iter_mut().map(Watcher::stop).collect();
    let exits_ok = exits.iter().all(|ok| *ok);
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    vec![
        row("watch.initial_sync_s", synced.as_secs_f64(), "s"),
        row("watch.sync_cpu_s", sync_cpu, "s"),
        row(
            "watch.ms_per_member_object",
            synced.as_secs_f64() * 1e3 / placed.max(1) as f64,
            "ms",
        ),
        row("watch.idle_cpu_pct", idle_cpu, "% of a core"),
        row("watch.idle_rss_mib", rss.iter().sum(), "MiB"),
        row("watch.idle_rss_max_mib", max(&rss), "MiB"),
        row("watch.peak_rss_mib", peak.iter().sum(), "MiB"),
        row("watch.peak_rss_max_mib", max(&peak), "MiB"),
        row("watch.rate_per_s", lat.rate, "changes/s"),
        row("watch.changes", lat.changes as f64, "changes"),
        row("watch.missing", lat.missing as f64, "changes"),
        row("watch.p50_s", lat.p50, "s"),
        row("watch.p99_s", lat.p99, "s"),
        row("watch.max_s", lat.max, "s"),
        row("watch.reaction_p50_s", lat.reaction.0, "s"),
        row("watch.reaction_p99_s", lat.reaction.1, "s"),
        row("watch.member_answer_p50_s", lat.member_answer.0, "s"),
        row("watch.member_answer_p99_s", lat.member_answer.1, "s"),
        row("watch.burst_watch_cores", burst_cores.0, "cores"),
        row("watch.burst_control_plane_cores", burst_cores.1, "cores"),
        row("watch.burst_bench_cores", burst_cores.2, "cores"),
        row("watch.burst_machine_cores", burst_cores.3, "cores"),
        row("watch.exit_ok", f64::from(u8::from(exits_ok)), "bool"),
    ]
}

/// Why this kubefedctl refuses `reconcile --watch --shard` (its argument
/// parser says so before it reads any kubeconfig), or None when it takes
/// it. Asked of a kubeconfig that does not exist, so that a binary that
/// takes it fails (or is stopped) without touching a cluster.
fn watch_shards_refused(shards: u32) -> Option<String> {
    let mut child = Command::new(KUBEFEDCTL)
        .args(["--kubeconfig", "/nonexistent/kubefedctl-sweep-probe"])
        .args(["reconcile", "--watch", "--shard", &format!("0/{shards}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running kubefedctl");
    let deadline = Instant::now() + Duration::from_secs(15);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            // Still running: it took the flags.
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code() == Some(2) && stderr.contains("cannot be used with"))
        .then(|| stderr.lines().next().unwrap_or_default().trim().to_string())
}
