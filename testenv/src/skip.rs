//! A test that cannot run for want of something `hack/testenv.sh`
//! provisions (KubeFed's programs or source): on CI and under
//! `hack/test.sh`, which set [`REQUIRED`], that is a failure, so that a
//! provisioning gap never passes as green; on a developer's partial
//! environment the test says why it skips, on the real stderr (libtest
//! captures `println!`/`eprintln!` of passing tests and hides them).

use std::io::Write;

/// Set (to anything but `0`) by `.ci/run` and `hack/test.sh`.
pub const REQUIRED: &str = "KUBEFEDCTL_TESTENV_REQUIRED";

/// What a missing tool means for the test.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Fail(String),
    Skip(String),
}

/// The verdict for `reason`, `required` or not.
pub fn verdict(required: bool, reason: &str) -> Verdict {
    match required {
        true => Verdict::Fail(format!(
            "{reason} ({REQUIRED} is set: a provisioned tool is missing, which fails the test)"
        )),
        false => Verdict::Skip(format!("skipped: {reason}")),
    }
}

fn required() -> bool {
    std::env::var_os(REQUIRED).is_some_and(|v| v != "0")
}

/// Fails the test when [`REQUIRED`] is set; otherwise says on stderr that
/// it skips, and the caller returns.
pub fn skip(reason: &str) {
    match verdict(required(), reason) {
        Verdict::Fail(message) => panic!("{message}"),
        Verdict::Skip(line) => {
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_fails_and_otherwise_skips_saying_why() {
        let Verdict::Fail(m) = verdict(true, "KubeFed's kubefedctl is missing") else {
            panic!("required: a failure");
        };
        assert!(m.starts_with("KubeFed's kubefedctl is missing"), "{m}");
        assert!(m.contains(REQUIRED), "{m}");
        assert_eq!(
            verdict(false, "KubeFed's kubefedctl is missing"),
            Verdict::Skip("skipped: KubeFed's kubefedctl is missing".into())
        );
    }
}
