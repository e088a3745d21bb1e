//! Stamps the binary with its git commit and build target for `kubefedctl version`.
use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=KUBEFEDCTL_GIT_COMMIT={commit}");
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=KUBEFEDCTL_BUILD_TARGET={target}");
    // Re-stamp when HEAD moves (a new commit or another branch), not on every edit.
    println!("cargo:rerun-if-changed=.git/HEAD");
    if let Ok(head) = std::fs::read_to_string(".git/HEAD")
        && let Some(r) = head.strip_prefix("ref: ")
    {
        println!("cargo:rerun-if-changed=.git/{}", r.trim());
    }
    println!("cargo:rerun-if-changed=build.rs");
}
