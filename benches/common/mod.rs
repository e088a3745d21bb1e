//! Helpers the benches share (`mod common;` in each): running kubefedctl
//! and reading what a process used, filling the host with federated
//! objects, printing the table; a federation behind counting proxies and
//! what they counted (`federation`); the first sync and change latency of
//! a long-running propagator (`watch`).

// Each bench compiles this module on its own and uses only part of it.
#![allow(dead_code)]

pub mod federation;
pub mod watch;
// A bench may use none of one module's items.
#[allow(unused_imports)]
pub use federation::*;
#[allow(unused_imports)]
pub use watch::*;

use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use testenv::TestEnv;

pub const KUBEFEDCTL: &str = env!("CARGO_BIN_EXE_kubefedctl");

pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn kubefedctl(kc: &Path, args: &[&str]) -> (Duration, std::process::Output) {
    let (time, out, _) = measured(kc, args);
    (time, out)
}

/// Runs kubefedctl and returns its wall time, output and own peak RSS in
/// MiB (wait4 on that child alone; RUSAGE_CHILDREN would mix all runs).
pub fn measured(kc: &Path, args: &[&str]) -> (Duration, std::process::Output, f64) {
    let dir = std::env::temp_dir();
    let out_path = dir.join(format!("kfb-out-{}", std::process::id()));
    let err_path = dir.join(format!("kfb-err-{}", std::process::id()));
    let start = Instant::now();
    let child = Command::new(KUBEFEDCTL)
        .arg("--kubeconfig")
        .arg(kc)
        .args(args)
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("running kubefedctl");
    let (status, usage) = wait_with_usage(child);
    let elapsed = start.elapsed();
    let out = std::process::Output {
        status,
        stdout: std::fs::read(&out_path).unwrap(),
        stderr: std::fs::read(&err_path).unwrap(),
    };
    LAST_CPU.with(|c| c.set(usage.cpu));
    (elapsed, out, usage.max_rss_mib)
}

/// What wait4 tells of one child.
pub struct Usage {
    /// CPU seconds, user + system.
    pub cpu: f64,
    pub max_rss_mib: f64,
}

/// Waits for `child` and returns its exit status and its own resource use.
#[allow(clippy::zombie_processes)] // reaped by wait4, which also gives its rusage
pub fn wait_with_usage(child: std::process::Child) -> (std::process::ExitStatus, Usage) {
    use std::os::unix::process::ExitStatusExt;
    let mut status = 0;
    // SAFETY: waits for our own child and fills structs we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4");
    (
        std::process::ExitStatus::from_raw(status),
        Usage {
            cpu: cpu_seconds(&usage),
            max_rss_mib: usage.ru_maxrss as f64 / 1024.0,
        },
    )
}

thread_local! {
    /// CPU seconds (user + system) of the last `measured` run.
    pub static LAST_CPU: std::cell::Cell<f64> = const { std::cell::Cell::new(0.0) };
}

/// User + system CPU seconds of a rusage.
pub fn cpu_seconds(usage: &libc::rusage) -> f64 {
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// The machine's busy CPU time so far (s, all cores), from `/proc/stat`:
/// user to steal, but idle and iowait (guest time is counted in user).
pub fn machine_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|v| v.parse().ok())
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let total: f64 = ticks.iter().sum();
    let idle = ticks.get(3).unwrap_or(&0.0) + ticks.get(4).unwrap_or(&0.0);
    (total - idle) / hz
}

/// CPU seconds (user + system) a running process has used so far
/// (/proc/PID/stat, fields 14 and 15).
pub fn process_cpu(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    // Counted from the field after the command: state is 3, utime 14, stime 15.
    (ticks(11).unwrap_or(0.0) + ticks(12).unwrap_or(0.0)) / hz
}

pub fn ok(what: &str, out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// POSTs `bodies` to the host from a few threads (setup, not measured).
pub fn create_all(env: &TestEnv, path: &str, bodies: Vec<String>) {
    let chunks: Vec<Vec<String>> = bodies
        .chunks(bodies.len().div_ceil(4).max(1))
        .map(|c| c.to_vec())
        .collect();
    std::thread::scope(|s| {
        for chunk in chunks {
            s.spawn(move || {
                for b in chunk {
                    let r = env.request("host", "POST", path, Some(&b)).unwrap();
                    assert_eq!(r.status, 201, "{}", r.body);
                }
            });
        }
    });
}

pub fn populate(env: &TestEnv, ns: &str, objects: usize) {
    assert_eq!(
        env.request(
            "host",
            "POST",
            "/api/v1/namespaces",
            Some(&json!({"metadata": {"name": ns}}).to_string())
        )
        .unwrap()
        .status,
        201
    );
    let base = format!("/apis/types.kubefed.io/v1beta1/namespaces/{ns}");
    let fns = json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedNamespace", "metadata": {"name": ns}, "spec": {"placement": {"clusterSelector": {}}}});
    create_all(
        env,
        &format!("{base}/federatednamespaces"),
        vec![fns.to_string()],
    );
    let deployments = (0..objects)
        .map(|i| {
            json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedDeployment", "metadata": {"name": format!("web-{i:05}")},
                "spec": {"placement": {"clusterSelector": {}}, "template": {"spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}}}}})
            .to_string()
        })
        .collect();
    create_all(env, &format!("{base}/federateddeployments"), deployments);
    let configmaps = (0..objects)
        .map(|i| json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedConfigMap", "metadata": {"name": format!("cfg-{i:05}")},
            "spec": {"placement": {"clusterSelector": {}}, "template": {"data": {"i": i.to_string()}}}}).to_string())
        .collect();
    create_all(env, &format!("{base}/federatedconfigmaps"), configmaps);
}

pub fn print_rows(rows: Vec<(String, String, String)>) {
    println!("\n| measure | result | notes |\n|---|---|---|");
    for (a, b, n) in rows {
        println!("| {a} | {b} | {n} |");
    }
}
