//! Measuring a long-running propagator (`reconcile --watch`, KubeFed's
//! controller-manager) from the proxies' records: when its first sync
//! ended, and the latency of a burst of changes.

use super::federation::FEDNS;
use super::{Usage, cpu_seconds};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};
use testenv::{Proxy, RequestRecord, TestEnv};

/// A member create of one of the federated objects' copies (configmaps
/// and deployments; the namespace apart) that made it: answered 201, or
/// 409 when an earlier try timed out (504) after the server had stored the
/// object (a busy API server does: seen at 10,000 × 10 with 3 shards), so
/// that one object counts once either way.
pub fn is_object_create(r: &RequestRecord) -> bool {
    r.verb == "create"
        && (r.status == 201 || r.status == 409)
        && matches!(r.resource.as_str(), "configmaps" | "deployments")
}

/// Writes that go on once a propagator is synced: its leader lock (our
/// Lease, KubeFed's ConfigMap in the federation namespace) and the
/// KubeFedClusters' health status.
pub fn housekeeping(r: &RequestRecord) -> bool {
    r.resource == "leases"
        || r.resource == "kubefedclusters"
        || (r.resource == "configmaps" && r.namespace == FEDNS)
}

/// When the last write of the sync (housekeeping aside) was answered.
pub fn last_sync_write(host: &Proxy, members: &[Proxy]) -> Option<Instant> {
    // Read through `count`, without copying the records: the bench shares
    // the 2 cores with what it measures.
    let last = std::cell::Cell::new(None);
    for p in std::iter::once(host).chain(members) {
        p.count(|r| {
            if r.is_write() && !housekeeping(r) {
                last.set(last.get().max(r.answered.or(r.received)));
            }
            false
        });
    }
    last.get()
}

/// When the last member object create was answered, once there are
/// `placed` of them (None before).
pub fn all_created(members: &[Proxy], placed: usize) -> Option<Instant> {
    let last = std::cell::Cell::new(None);
    let created: usize = members
        .iter()
        .map(|p| {
            p.count(|r| {
                let yes = is_object_create(r);
                if yes {
                    last.set(last.get().max(r.answered));
                }
                yes
            })
        })
        .sum();
    if created >= placed { last.get() } else { None }
}

/// The latencies of a burst of changes.
pub struct Latency {
    /// Changes per second actually written.
    pub rate: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    /// Where the time went, p50 and p99 of each part (s): from the PATCH
    /// answered to the first member write received (the host's watch
    /// event, the queue, the round's decide), and the slowest member's
    /// own answer to its write (received → answered at its proxy).
    pub reaction: (f64, f64),
    pub member_answer: (f64, f64),
    /// Changes made.
    pub changes: usize,
    /// Changes not on every member when the bench stopped waiting.
    pub missing: usize,
}

/// A FederatedConfigMap's template data set to `data`, through the host's
/// proxy (whose records time its answer: `patch_answered`); returns when
/// it was sent.
pub fn patch_through(
    env: &TestEnv,
    host: &Proxy,
    (ns, name): (&str, &str),
    data: Value,
) -> Instant {
    let url = format!(
        "{}/apis/types.kubefed.io/v1beta1/namespaces/{ns}/federatedconfigmaps/{name}",
        host.url()
    );
    let body = json!({"spec": {"template": {"data": data}}});
    let sent = Instant::now();
    let r = testenv::http::request(
        "PATCH",
        &url,
        env.ca_pem(),
        Some(&env.cluster("host").admin_token),
        Some(&body.to_string()),
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    sent
}

/// The host proxy's record of the first PATCH of FederatedConfigMap
/// `ns/name` received at `sent` or later.
pub fn patch_answered<'r>(
    records: &'r [RequestRecord],
    (ns, name): (&str, &str),
    sent: Instant,
) -> &'r RequestRecord {
    records
        .iter()
        .filter(|r| r.verb == "patch" && r.resource == "federatedconfigmaps")
        .filter(|r| r.subresource.is_empty() && r.namespace == ns && r.name == name)
        .find(|r| r.received.is_some_and(|t| t >= sent) && r.answered.is_some())
        .expect("the host proxy saw the PATCH")
}

/// How many threads send a burst's changes.
const SENDERS: usize = 4;

/// `rate` template changes a second for `seconds`, to the
/// FederatedConfigMaps `targets` (namespace, name) in turn, sent through
/// the host's proxy. The latency of each is from its PATCH answered at the
/// host proxy to the last of the members' writes of that ConfigMap
/// answered (on each member, its first write answered after the PATCH was
/// received), all from the proxies' clocks: the bench's own thread, on the
/// same 2 cores, may see the answer later than a fast propagator's member
/// writes. Waits up to `patience` for the last changes.
pub fn changes(
    env: &TestEnv,
    host: &Proxy,
    members: &[Proxy],
    targets: &[(String, String)],
    (rate, seconds): (usize, usize),
    patience: Duration,
) -> Latency {
    host.reset_records();
    members.iter().for_each(Proxy::reset_records);
    let n = rate * seconds;
    let interval = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
    let began = Instant::now();
    // (index in `targets`, PATCH sent). Each change is sent when it is due,
    // by one of a few senders: one PATCH (a fresh TLS connection) takes
    // ~30 ms on a busy host, so one sender alone could not keep 50/s, and a
    // late change must not delay the next (an open-loop load).
    let senders = SENDERS.min(n.max(1));
    let mut sent: Vec<(usize, Instant)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..senders)
            .map(|first| {
                s.spawn(move || {
                    (first..n)
                        .step_by(senders)
                        .map(|i| {
                            let due = began + interval * i as u32;
                            std::thread::sleep(due.saturating_duration_since(Instant::now()));
                            let (ns, name) = &targets[i % targets.len()];
                            let data = json!({"i": format!("changed-{i}")});
                            (i, patch_through(env, host, (ns, name), data))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a sender panicked"))
            .collect()
    });
    let rate = n as f64 / began.elapsed().as_secs_f64();
    sent.sort_by_key(|(i, _)| *i);
    let sent: Vec<(usize, Instant)> = sent
        .into_iter()
        .map(|(i, at)| (i % targets.len(), at))
        .collect();
    // The PATCHes as the host proxy saw them: (target, received, answered).
    let records = host.records();
    let written: Vec<(&(String, String), Instant, Instant)> = sent
        .iter()
        .map(|(t, at)| {
            let (ns, name) = &targets[*t];
            let r = patch_answered(&records, (ns, name), *at);
            (&targets[*t], r.received.unwrap(), r.answered.unwrap())
        })
        .collect();
    let deadline = Instant::now() + patience;
    loop {
        let (timings, missing) = match_changes(members, &written);
        if missing == 0 || Instant::now() > deadline {
            return percentiles(&timings, rate, missing);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn percentiles(timings: &[Timing], rate: f64, missing: usize) -> Latency {
    let sorted = |get: fn(&Timing) -> f64| {
        let mut l: Vec<f64> = timings.iter().map(get).collect();
        l.sort_by(f64::total_cmp);
        l
    };
    let pct = |l: &[f64], q: f64| {
        l.get(((l.len() as f64 * q).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(f64::NAN)
    };
    let total = sorted(|t| t.total);
    let reaction = sorted(|t| t.reaction);
    let answer = sorted(|t| t.member_answer);
    Latency {
        rate,
        p50: pct(&total, 0.5),
        p99: pct(&total, 0.99),
        max: total.last().copied().unwrap_or(f64::NAN),
        reaction: (pct(&reaction, 0.5), pct(&reaction, 0.99)),
        member_answer: (pct(&answer, 0.5), pct(&answer, 0.99)),
        changes: total.len() + missing,
        missing,
    }
}

/// One change's way to every member (s).
pub struct Timing {
    /// PATCH answered → the last member's write answered.
    pub total: f64,
    /// PATCH answered → the first member's write received (0 when a member
    /// received it before the host's answer reached its proxy).
    pub reaction: f64,
    /// The slowest member's answer to its write: received → answered.
    pub member_answer: f64,
}

/// The timing of each change ((namespace, name), PATCH received, PATCH
/// answered) on every member, and how many are not yet on every member.
pub fn match_changes(
    members: &[Proxy],
    written: &[(&(String, String), Instant, Instant)],
) -> (Vec<Timing>, usize) {
    // Per member: (namespace, ConfigMap name) → its writes, (answered,
    // received), in order.
    type Writes = HashMap<(String, String), Vec<(Instant, Instant)>>;
    let answered: Vec<Writes> = members
        .iter()
        .map(|m| {
            let mut by_name: Writes = HashMap::new();
            for r in m.records() {
                if r.is_write()
                    && r.resource == "configmaps"
                    && r.status < 300
                    && let (Some(at), Some(received)) = (r.answered, r.received)
                {
                    let writes = by_name.entry((r.namespace, r.name)).or_default();
                    writes.push((at, received));
                }
            }
            by_name.values_mut().for_each(|v| v.sort());
            by_name
        })
        .collect();
    let mut timings = Vec::new();
    let mut missing = 0;
    for (target, received, at) in written {
        // Each member's first write answered after the PATCH was received.
        let firsts: Option<Vec<(Instant, Instant)>> = (answered.iter())
            .map(|by_name| {
                let times = by_name.get(*target)?;
                let after = times.partition_point(|(t, _)| t < received);
                times[after..].first().copied()
            })
            .collect();
        let Some(firsts) = firsts else {
            missing += 1;
            continue;
        };
        let since = |t: Instant| t.saturating_duration_since(*at).as_secs_f64();
        let done = firsts.iter().map(|(a, _)| *a).max().unwrap_or(*at);
        let first_received = firsts.iter().map(|(_, r)| *r).min().unwrap_or(*at);
        let slowest = (firsts.iter())
            .map(|(a, r)| a.saturating_duration_since(*r).as_secs_f64())
            .fold(0.0, f64::max);
        timings.push(Timing {
            total: since(done),
            reaction: since(first_received),
            member_answer: slowest,
        });
    }
    (timings, missing)
}

/// A `/proc/PID/status` figure given in kB (VmRSS, VmHWM), in MiB.
pub fn status_mib(pid: u32, key: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// SIGTERM, then waits for it (SIGKILL after 30 s); its exit status and
/// its resource use (wait4 reaps it, so `Child::try_wait` may not).
#[allow(clippy::zombie_processes)] // reaped by wait4 below
pub fn stop(child: Child) -> (ExitStatus, Usage) {
    let pid = child.id() as i32;
    // SAFETY: signals our own child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child and fills structs we own.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let flags = if Instant::now() < deadline {
            libc::WNOHANG
        } else {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            0
        };
        let got = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
        if got == pid {
            use std::os::unix::process::ExitStatusExt;
            return (
                ExitStatus::from_raw(status),
                Usage {
                    cpu: cpu_seconds(&usage),
                    max_rss_mib: usage.ru_maxrss as f64 / 1024.0,
                },
            );
        }
        assert_eq!(got, 0, "wait4");
        std::thread::sleep(Duration::from_millis(50));
    }
}
