//! The Kubernetes releases the environment runs, and where their binaries
//! live. The current release is the primary target; 1.20.2 is the
//! compatibility one (the oldest this tool supports, and KubeFed v0.10's
//! own era). `hack/testenv.sh` builds both into the cache.

use anyhow::{Result, bail};
use std::path::PathBuf;

/// One Kubernetes release of the test environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// Minor version: what flags and behaviour depend on.
    pub minor: u32,
    /// The release as `/version` reports it (`v1.37.2`).
    pub tag: &'static str,
}

impl Version {
    /// The newest release the Go module proxy serves (`k8s.io/kubernetes`),
    /// built from Go modules with its own etcd.
    pub const CURRENT: Version = Version {
        minor: 37,
        tag: "v1.37.2",
    };
    /// Built from Debian bookworm's `kubernetes` source package, with
    /// Debian's etcd 3.4.
    pub const V1_20: Version = Version {
        minor: 20,
        tag: "v1.20.2",
    };
    /// Every release the environment can run, newest first.
    pub const ALL: [Version; 2] = [Version::CURRENT, Version::V1_20];

    /// `KUBEFEDCTL_TESTENV_VERSION` (`v1.37.2`, `1.37`, `1.20`...), else
    /// the current release.
    pub fn from_env() -> Result<Version> {
        match std::env::var("KUBEFEDCTL_TESTENV_VERSION") {
            Ok(v) if !v.trim().is_empty() => Version::parse(&v),
            _ => Ok(Version::CURRENT),
        }
    }

    /// `v1.37.2`, `1.37.2`, `1.37` or `v1.37`: one of [`Version::ALL`].
    pub fn parse(text: &str) -> Result<Version> {
        let t = text.trim().trim_start_matches('v');
        for v in Version::ALL {
            let full = v.tag.trim_start_matches('v');
            if t == full || format!("1.{}", v.minor) == t {
                return Ok(v);
            }
        }
        let known: Vec<&str> = Version::ALL.iter().map(|v| v.tag).collect();
        bail!(
            "KUBEFEDCTL_TESTENV_VERSION={text:?}: the test environment runs {}",
            known.join(" or ")
        )
    }

    /// Where `hack/testenv.sh` caches this release's binaries:
    /// `$KUBEFEDCTL_TESTENV_BIN` for the default release when set, else
    /// `${KUBEFEDCTL_TESTENV_CACHE:-~/.cache/kubefedctl/testenv}/<tag>/bin`.
    pub fn binaries_dir(self) -> PathBuf {
        if let Some(dir) = std::env::var_os("KUBEFEDCTL_TESTENV_BIN")
            && Version::from_env().ok() == Some(self)
        {
            return PathBuf::from(dir);
        }
        cache_root().join(self.tag).join("bin")
    }

    /// The API server's insecure port flag was removed in 1.24 (and the
    /// controller-manager's `--port` with it).
    pub fn has_insecure_ports(self) -> bool {
        self.minor < 24
    }
}

/// Where `hack/testenv.sh` caches what it builds:
/// `${KUBEFEDCTL_TESTENV_CACHE:-~/.cache/kubefedctl/testenv}`.
pub fn cache_root() -> PathBuf {
    std::env::var_os("KUBEFEDCTL_TESTENV_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            PathBuf::from(home).join(".cache/kubefedctl/testenv")
        })
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_in_every_spelling_and_unknown_ones_are_named() {
        for (text, want) in [
            ("v1.37.2", Version::CURRENT),
            ("1.37", Version::CURRENT),
            ("v1.20", Version::V1_20),
            (" 1.20.2 ", Version::V1_20),
        ] {
            assert_eq!(Version::parse(text).unwrap(), want, "{text}");
        }
        let err = Version::parse("1.29").unwrap_err().to_string();
        assert!(err.contains("v1.37.2 or v1.20.2"), "{err}");
        assert!(Version::V1_20.has_insecure_ports());
        assert!(!Version::CURRENT.has_insecure_ports());
    }
}
