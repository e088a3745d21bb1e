//! SIGTERM and Ctrl-C (SIGINT), registered once so that none is missed
//! while a run or a round is busy; one helper for the one-shot reconcile and
//! the watch.

use anyhow::Result;
use tokio::signal::unix::{Signal, SignalKind, signal};

/// The stop signals of this process.
pub struct Signals {
    term: Signal,
    int: Signal,
}

impl Signals {
    pub fn new() -> Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// The next stop signal: its number (2 for Ctrl-C, 15 for SIGTERM), so
    /// that an interrupted command exits `128 + N` as a shell expects.
    pub async fn next(&mut self) -> u8 {
        tokio::select! {
            _ = self.int.recv() => 2,
            _ = self.term.recv() => 15,
        }
    }
}
