//! Child processes that cannot outlive the test process.
//!
//! Every child is forked from one long-lived spawner thread and asks the
//! kernel for SIGKILL when its parent dies (`PR_SET_PDEATHSIG`). The signal
//! follows the *thread* that forked, so forking from short-lived test threads
//! would kill the control plane as soon as the first test returns.

use anyhow::{Context, Result, bail};
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{Sender, channel};

type SpawnRequest = (Command, Sender<std::io::Result<Child>>);

fn spawner() -> &'static std::sync::Mutex<Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<std::sync::Mutex<Sender<SpawnRequest>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("testenv-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
                // The channel never closes (the sender is static): this thread
                // lives, and so do its children, until the process exits.
            })
            .expect("spawning the testenv spawner thread");
        std::sync::Mutex::new(tx)
    })
}

/// A supervised child: killed and reaped on drop, its output in a log file.
pub struct Process {
    name: String,
    child: Child,
    log: PathBuf,
    program: PathBuf,
    args: Vec<String>,
}

impl Process {
    /// Starts `program args...`, stdout and stderr appended to `log`.
    pub fn spawn(name: &str, program: &Path, args: &[String], log: &Path) -> Result<Process> {
        let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        Self::spawn_logging(name, program, args, log, out)
    }

    /// Stops the process (SIGTERM, then SIGKILL after `grace`) and starts
    /// it again with the same arguments, its log appended to.
    pub fn restart(&mut self, grace: std::time::Duration) -> Result<()> {
        self.stop(grace);
        self.start_again()
    }

    /// Starts a stopped process again with the same arguments.
    pub fn start_again(&mut self) -> Result<()> {
        let out = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        let again = Self::spawn_logging(&self.name, &self.program, &self.args, &self.log, out)?;
        // The old child is reaped: replacing it must not signal anything.
        let old = std::mem::replace(self, again);
        std::mem::forget(old);
        Ok(())
    }

    fn spawn_logging(
        name: &str,
        program: &Path,
        args: &[String],
        log: &Path,
        out: File,
    ) -> Result<Process> {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        // SAFETY: prctl is async-signal-safe and touches no memory of ours.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let (tx, rx) = channel();
        spawner()
            .lock()
            .expect("spawner lock")
            .send((cmd, tx))
            .expect("spawner thread alive");
        let child = rx
            .recv()
            .expect("spawner answers")
            .with_context(|| format!("starting {name} ({})", program.display()))?;
        Ok(Process {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
            program: program.to_path_buf(),
            args: args.to_vec(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails with the end of the log when the process has exited.
    pub fn check_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "{} exited ({status}); last lines of {}:\n{}",
                self.name,
                self.log.display(),
                self.log_tail(30)
            );
        }
        Ok(())
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// SIGTERM, then SIGKILL if the process is still there after `grace`.
    pub fn stop(&mut self, grace: std::time::Duration) {
        if self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = std::time::Instant::now() + grace;
        while std::time::Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop(std::time::Duration::from_secs(2));
    }
}

/// Ports handed out for servers that bind them later: below Linux's
/// ephemeral range (32768–60999 by default), so that no outgoing connection
/// can take one between our check and the server's bind. A port from
/// `bind(":0")` comes from that very range and was seen taken by the time
/// KubeFed's controller-manager bound it.
const SERVER_PORTS: std::ops::Range<u16> = 20000..32000;

/// A free TCP port on 127.0.0.1 for a server started afterwards: each call
/// in this process returns a different one, and it was free when returned.
pub fn free_port() -> Result<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let span = u32::from(SERVER_PORTS.end - SERVER_PORTS.start);
    // Processes start apart from one another: two test runs at once rarely
    // try the same ports.
    let seed = std::process::id().wrapping_mul(7919);
    for _ in 0..span {
        let offset = seed.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        let port = SERVER_PORTS.start + offset as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_ports_differ_lie_outside_the_ephemeral_range_and_bind() {
        let ports: Vec<u16> = (0..50).map(|_| free_port().unwrap()).collect();
        let mut unique = ports.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ports.len(), "{ports:?}");
        for port in ports {
            assert!(SERVER_PORTS.contains(&port), "{port}");
            std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        }
    }
}
