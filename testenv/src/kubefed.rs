//! KubeFed v0.10.0 itself, the reference this tool is a successor of:
//! `hack/testenv.sh` builds its `kubefedctl`, `controller-manager` and e2e
//! test binary from the Go module proxy into the cache, beside the
//! Kubernetes releases, so that tests can run KubeFed next to us on the
//! same kind of cluster and compare what each writes.

use crate::version::cache_root;
use std::path::PathBuf;

/// The KubeFed release `hack/testenv.sh` builds.
pub const KUBEFED_VERSION: &str = "v0.10.0";

/// `${cache}/kubefed-v0.10.0`: `bin/` holds the programs.
fn kubefed_root() -> PathBuf {
    cache_root().join(format!("kubefed-{KUBEFED_VERSION}"))
}

/// One of KubeFed's programs (`kubefedctl`, `controller-manager`,
/// `e2e.test`) when `hack/testenv.sh` has built it; `None` otherwise, so a
/// test can say why it skips instead of failing on a machine without it.
pub fn kubefed_binary(name: &str) -> Option<PathBuf> {
    let path = kubefed_root().join("bin").join(name);
    path.is_file().then_some(path)
}

/// KubeFed's module source as the Go module proxy served it (in the build's
/// module cache): its Helm chart's CRDs and its shipped EnableTypeDirectives,
/// read as KubeFed itself ships them. `None` when it is not there.
pub fn kubefed_source() -> Option<PathBuf> {
    let dir = cache_root()
        .join("gomod/sigs.k8s.io")
        .join(format!("kubefed@{KUBEFED_VERSION}"));
    dir.join("go.mod").is_file().then_some(dir)
}

/// The line a test prints when it skips for want of KubeFed: what is
/// missing, and that `hack/testenv.sh` builds all three programs
/// (`kubefedctl`, `controller-manager`, `e2e.test`; it fails when one of
/// them does not build, so CI never runs without them).
pub fn kubefed_missing(what: &str) -> String {
    format!(
        "KubeFed {KUBEFED_VERSION}'s {what} is missing (run hack/testenv.sh: it builds KubeFed's kubefedctl, controller-manager and e2e.test from the Go module proxy into {})",
        kubefed_root().join("bin").display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_skip_message_names_the_script_and_the_place() {
        let m = kubefed_missing("kubefedctl");
        assert!(m.contains("hack/testenv.sh"), "{m}");
        assert!(m.contains("kubefed-v0.10.0"), "{m}");
        for program in ["kubefedctl", "controller-manager", "e2e.test"] {
            assert!(m.contains(program), "{m}");
        }
        assert!(kubefed_binary("no-such-program").is_none());
    }
}
