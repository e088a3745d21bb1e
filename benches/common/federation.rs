//! A federation to measure: a host and members behind counting proxies,
//! made by `kubefedctl init`, `join` and `enable`, and what the proxies
//! counted of a run.

use super::{kubefedctl, ok, process_cpu};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use testenv::{Proxy, TestEnv};

/// `init`'s default federation namespace, and KubeFed's.
pub const FEDNS: &str = "kube-federation-system";

/// A test environment of `host` and members `m01`, `m02`, ..., every
/// cluster behind a counting proxy (kubefedctl reaches them only through
/// it: the kubeconfig names the proxies, and `join` records their URLs),
/// with namespaces, configmaps and deployments.apps enabled.
pub struct Federation {
    /// The proxies first: they stop before the clusters they forward to.
    pub host: Proxy,
    pub members: Vec<Proxy>,
    /// `m01`, `m02`, ...
    pub member_names: Vec<String>,
    /// The kubeconfig of the proxies, contexts named as the clusters.
    pub kc: PathBuf,
    pub env: TestEnv,
}

impl Federation {
    /// Starts the clusters (`private`: an environment the process may stop
    /// and start again, removed at exit) and makes the federation;
    /// `kubeconfig` is the file name of its kubeconfig in the environment's
    /// directory.
    pub fn start(n_members: usize, private: bool, kubeconfig: &str) -> Federation {
        let member_names: Vec<String> = (1..=n_members).map(|i| format!("m{i:02}")).collect();
        let names: Vec<&str> = std::iter::once("host")
            .chain(member_names.iter().map(String::as_str))
            .collect();
        let started = Instant::now();
        let env = if private {
            TestEnv::private(&names)
        } else {
            TestEnv::start(&names)
        }
        .expect("test environment");
        eprintln!(
            "{} clusters up in {:.1}s",
            names.len(),
            started.elapsed().as_secs_f64()
        );
        let host = env.proxy("host").unwrap();
        let members: Vec<Proxy> = member_names.iter().map(|m| env.proxy(m).unwrap()).collect();
        let mut k = env
            .kubeconfig()
            .current_context("host")
            .server("host", &host.url());
        for (m, p) in member_names.iter().zip(&members) {
            k = k.server(m, &p.url());
        }
        let kc = env.dir().join(kubeconfig);
        k.write(&kc).unwrap();
        ok("init", &kubefedctl(&kc, &["init"]).1);
        for m in &member_names {
            ok("join", &kubefedctl(&kc, &["join", m]).1);
        }
        // KubeFed syncs namespaced types only once the namespaces type is on.
        for t in ["namespaces", "configmaps", "deployments.apps"] {
            ok("enable", &kubefedctl(&kc, &["enable", t]).1);
        }
        Federation {
            host,
            members,
            member_names,
            kc,
            env,
        }
    }

    /// Forgets what the proxies recorded so far.
    pub fn reset(&self) {
        reset(&self.host, &self.members);
    }
}

/// What the proxies counted of a run.
pub struct Counts {
    pub member_requests: usize,
    pub member_writes: usize,
    pub host_requests: usize,
    /// Host writes other than the run lock's.
    pub host_writes: usize,
    /// Writes of the run lock (Lease): take, renewals, release.
    pub lock_writes: usize,
    /// From the first member write received to the last one answered.
    pub member_phase: Duration,
}

pub fn counts(host: &Proxy, members: &[Proxy]) -> Counts {
    // The member phase: from the first member write received to the last
    // one answered, all members together (the host's write-back, which
    // follows, is not in it).
    let writes: Vec<_> = members
        .iter()
        .flat_map(Proxy::records)
        .filter(|r| r.is_write())
        .collect();
    let first = writes.iter().filter_map(|r| r.received).min();
    let last = writes.iter().filter_map(|r| r.answered).max();
    Counts {
        member_requests: members.iter().map(|p| p.records().len()).sum(),
        member_writes: members.iter().map(Proxy::writes).sum(),
        host_requests: host.count(|_| true),
        host_writes: host.count(|r| r.is_write() && r.resource != "leases"),
        lock_writes: host.count(|r| r.is_write() && r.resource == "leases"),
        member_phase: match (first, last) {
            (Some(first), Some(last)) => last.saturating_duration_since(first),
            _ => Duration::ZERO,
        },
    }
}

pub fn reset(host: &Proxy, members: &[Proxy]) {
    host.reset_records();
    members.iter().for_each(Proxy::reset_records);
}

/// CPU seconds the test environment's processes have used, by role. Two
/// snapshots around a run say where its CPU went on the shared cores.
#[derive(Clone, Copy, Default)]
pub struct EnvCpu {
    pub host_apiserver: f64,
    /// The apiservers of the members the run writes to.
    pub member_apiservers: f64,
    pub etcd: f64,
    pub controller_managers: f64,
    /// This process: the counting proxies (the bench itself waits meanwhile).
    pub proxies: f64,
    /// Apiservers of the clusters the run does not touch (idle load).
    pub other_apiservers: f64,
}

impl EnvCpu {
    pub fn now(env: &TestEnv, members: &[&str]) -> EnvCpu {
        let mut cpu = EnvCpu {
            etcd: process_cpu(env.etcd_pid()),
            ..EnvCpu::default()
        };
        for c in env.clusters() {
            let apiserver = process_cpu(c.apiserver_pid());
            if c.name == "host" {
                cpu.host_apiserver = apiserver;
            } else if members.contains(&c.name.as_str()) {
                cpu.member_apiservers += apiserver;
            } else {
                cpu.other_apiservers += apiserver;
            }
            cpu.controller_managers += c.controller_manager_pid().map_or(0.0, process_cpu);
        }
        // SAFETY: fills a struct we own.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
        cpu.proxies = super::cpu_seconds(&usage);
        cpu
    }

    pub fn since(self, before: EnvCpu) -> EnvCpu {
        EnvCpu {
            host_apiserver: self.host_apiserver - before.host_apiserver,
            member_apiservers: self.member_apiservers - before.member_apiservers,
            etcd: self.etcd - before.etcd,
            controller_managers: self.controller_managers - before.controller_managers,
            proxies: self.proxies - before.proxies,
            other_apiservers: self.other_apiservers - before.other_apiservers,
        }
    }

    pub fn total(&self) -> f64 {
        self.host_apiserver
            + self.member_apiservers
            + self.etcd
            + self.controller_managers
            + self.proxies
            + self.other_apiservers
    }

    /// `host apiserver 16.4 s (47 %), member apiservers 8.1 s, ...`, with
    /// the client's own CPU last; shares are of everything listed.
    pub fn describe(&self, client: &str, client_cpu: f64) -> String {
        let all = self.total() + client_cpu;
        let pct = |v: f64| 100.0 * v / all.max(f64::EPSILON);
        format!(
            "host apiserver {:.1} s ({:.0} %), member apiservers {:.1} s ({:.0} %), etcd {:.1} s, controller-managers {:.1} s, proxies {:.1} s, idle clusters {:.1} s, {client} {client_cpu:.1} s ({:.0} %); {all:.1} core-s in all",
            self.host_apiserver,
            pct(self.host_apiserver),
            self.member_apiservers,
            pct(self.member_apiservers),
            self.etcd,
            self.controller_managers,
            self.proxies,
            self.other_apiservers,
            pct(client_cpu),
        )
    }
}
