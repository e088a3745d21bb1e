//! Exit codes, and an error that carries its own. One table for every
//! command (README, each man page's EXIT STATUS), so that a pipeline can
//! tell "the plan has changes" and "not ready yet" from a failure.

use std::fmt;

/// Success.
pub const EXIT_OK: u8 = 0;
/// Any error (bad input, unreachable cluster, refused request...).
pub const EXIT_ERROR: u8 = 1;
/// A usage error (unknown flag, missing argument, a value out of range, a
/// malformed name, selector or duration), before any connection: clap's own
/// code.
pub const EXIT_USAGE: u8 = 2;
/// Some objects or clusters failed; the rest were done.
pub const EXIT_PARTIAL: u8 = 3;
/// `reconcile --dry-run --exit-code`: changes are pending.
pub const EXIT_CHANGES_PENDING: u8 = 4;
/// Not ready: `--wait-ready` ran out of time (or a rollout failed), or
/// `status --exit-code` found a cluster not ready or an object not
/// propagated.
pub const EXIT_NOT_READY: u8 = 5;

/// The exit-code table, as help texts and man pages print it.
pub const EXIT_CODES_HELP: &str =
    "Exit codes: 0 success; 1 error; 2 usage error (nothing read or written);
3 some objects or clusters failed (the rest done); 4 changes pending
(--dry-run --exit-code); 5 not ready (--wait-ready, status --exit-code);
130/143 interrupted (Ctrl-C/SIGTERM).";

/// A usage error: a flag's value or a name that is not valid, found before
/// anything is read; exits [`EXIT_USAGE`] like clap's own.
pub fn usage(message: impl fmt::Display) -> anyhow::Error {
    ExitWith {
        code: EXIT_USAGE,
        message: message.to_string(),
    }
    .into()
}

/// [`usage`] of an error: its one line.
pub fn usage_of(err: anyhow::Error) -> anyhow::Error {
    if exit_code(&err) == EXIT_USAGE {
        return err;
    }
    usage(one_line(&err))
}

/// An error that asks for a specific exit code. Commands return it inside
/// `anyhow::Error`; [`crate::cli`] finds it with `downcast_ref`.
#[derive(Debug)]
pub struct ExitWith {
    pub code: u8,
    pub message: String,
}

impl fmt::Display for ExitWith {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExitWith {}

/// The exit code for an error: its own when it carries one, else 1.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    err.chain()
        .find_map(|e| e.downcast_ref::<ExitWith>())
        .map_or(EXIT_ERROR, |e| e.code)
}

/// The one line printed for an error: the context chain joined with ": ".
pub fn one_line(err: &anyhow::Error) -> String {
    format!("{err:#}").replace('\n', " ")
}

/// An error and its sources on one line, without repeating a source that
/// its wrapper already quotes.
pub fn source_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        src = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn finds_the_exit_code_through_context() {
        let e: anyhow::Error = ExitWith {
            code: EXIT_PARTIAL,
            message: "partial".into(),
        }
        .into();
        let e = Err::<(), _>(e).context("reconcile").unwrap_err();
        assert_eq!(exit_code(&e), 3);
        assert_eq!(exit_code(&anyhow::anyhow!("plain")), EXIT_ERROR);
        assert_eq!(one_line(&e), "reconcile: partial");
    }
}
