//! What this binary is: version, commit and target, stamped by `build.rs`.

use serde::Serialize;

/// Client version information; JSON names follow KubeFed's `version.Info`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct VersionInfo {
    pub git_version: String,
    pub git_commit: String,
    pub platform: String,
}

impl VersionInfo {
    pub fn current() -> VersionInfo {
        VersionInfo {
            git_version: format!("v{}", env!("CARGO_PKG_VERSION")),
            git_commit: env!("KUBEFEDCTL_GIT_COMMIT").to_string(),
            platform: env!("KUBEFEDCTL_BUILD_TARGET").to_string(),
        }
    }
}
