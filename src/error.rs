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

/// `export karmada`: the output is written, and some objects were
/// approximated or not mapped (each named in the report).
pub const EXIT_APPROXIMATED: u8 = 6;

/// `reconcile`: a progressive rollout halted (a wave with more failed
/// members than it tolerates); later waves keep the previous version. Also
/// a run of a version aborted with `--rollout-abort --previous`: nothing
/// of it is written until the template changes.
pub const EXIT_ROLLOUT_HALTED: u8 = 7;

/// `reconcile`: a progressive rollout stopped before a wave that asks for
/// an approval (`"approval": true`) not given for its version; later
/// waves keep the previous version until `kubefedctl rollout approve`.
pub const EXIT_ROLLOUT_AWAITING_APPROVAL: u8 = 8;

/// The exit-code table, as help texts and man pages print it.
pub const EXIT_CODES_HELP: &str =
    "Exit codes: 0 success; 1 error; 2 usage error (nothing read or written);
3 some objects or clusters failed (the rest done); 4 changes pending
(--dry-run --exit-code); 5 not ready (--wait-ready, status --exit-code);
6 approximations present (export karmada: written, see the report);
7 rollout halted or aborted (reconcile: later waves untouched);
8 rollout awaiting approval (reconcile: kubefedctl rollout approve);
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

/// A request that got no answer from a server, said in one line that names
/// the server and what happened (`the connection to the server
/// https://127.0.0.1:1 was refused (context "host")`). The clients' layer
/// `clients::no_answer` makes it from the HTTP and TLS libraries' error,
/// which stays its source for code that looks further; the words shown are
/// this line alone, without the libraries' wrappers around it.
#[derive(Debug)]
pub struct NoAnswer {
    pub line: String,
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl fmt::Display for NoAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.line)
    }
}

impl std::error::Error for NoAnswer {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The [`NoAnswer`] in an error's chain, if any.
pub fn no_answer<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a NoAnswer> {
    let mut link = Some(e);
    while let Some(e) = link {
        if let Some(found) = e.downcast_ref::<NoAnswer>() {
            return Some(found);
        }
        link = e.source();
    }
    None
}

/// The one line printed for an error: the context chain joined with ": ".
/// Of a server that did not answer, its [`NoAnswer`] line ends it: the
/// libraries' errors around it (kube's `ServiceError: ...`, which quote
/// it) and below it are left out; contexts of ours stay.
pub fn one_line(err: &anyhow::Error) -> String {
    let links: Vec<&(dyn std::error::Error + 'static)> = err.chain().collect();
    if let Some(at) = links.iter().position(|l| l.is::<NoAnswer>()) {
        let line = links[at].to_string();
        let mut parts: Vec<String> = links[..at]
            .iter()
            .map(|l| l.to_string())
            .filter(|text| !text.contains(&line))
            .collect();
        parts.push(line);
        return parts.join(": ");
    }
    // A library error that quotes its source (kube's `auth error: {0}`)
    // would say that source twice: each text is said once.
    let mut out = String::new();
    for text in err.chain().map(|l| l.to_string().replace('\n', " ")) {
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// An error and its sources on one line, without repeating a source that
/// its wrapper already quotes; a [`NoAnswer`] among them is the line.
pub fn source_chain(e: &(dyn std::error::Error + 'static)) -> String {
    if let Some(found) = no_answer(e) {
        return found.line.clone();
    }
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

    /// A library error quoting the error below it, as kube's
    /// `ServiceError: {0}` does.
    #[derive(Debug)]
    struct Wrapper(Box<dyn std::error::Error + Send + Sync>);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "ServiceError: {}", self.0)
        }
    }

    impl std::error::Error for Wrapper {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&*self.0)
        }
    }

    #[test]
    fn a_server_that_did_not_answer_is_said_in_its_own_line_alone() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let line =
            "the connection to the server https://127.0.0.1:1 was refused (context \"host\")";
        let wrapped = Wrapper(Box::new(NoAnswer {
            line: line.into(),
            source: Some(Box::new(refused)),
        }));
        assert_eq!(source_chain(&wrapped), line);
        let e = anyhow::Error::new(wrapped);
        assert_eq!(one_line(&e), line);
        // Contexts of ours stay, the library's wrapper goes.
        let e = Err::<(), _>(e)
            .context("cannot reach cluster \"m1\" to clean it up")
            .unwrap_err();
        assert_eq!(
            one_line(&e),
            format!("cannot reach cluster \"m1\" to clean it up: {line}")
        );
        assert_eq!(
            format!("error: {}", one_line(&e)).matches("error:").count(),
            1
        );
        // The library's error stays reachable below it.
        let found = e
            .chain()
            .find_map(|e| e.downcast_ref::<NoAnswer>())
            .unwrap();
        let io = std::error::Error::source(found).unwrap();
        assert!(io.downcast_ref::<std::io::Error>().is_some());
        // Other chains are as before, each cause said once.
        let plain = Wrapper("boom".into());
        assert_eq!(source_chain(&plain), "ServiceError: boom");
        let quoted = Err::<(), _>(anyhow::Error::new(Wrapper(Box::new(Wrapper(
            "boom".into(),
        )))))
        .context("building a client")
        .unwrap_err();
        assert_eq!(
            format!("{quoted:#}"),
            "building a client: ServiceError: ServiceError: boom: ServiceError: boom: boom"
        );
        assert_eq!(
            one_line(&quoted),
            "building a client: ServiceError: ServiceError: boom"
        );
    }
}
