//! Stamps the binary with its git commit and build target for `kubefedctl version`.
use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=KUBEFEDCTL_GIT_COMMIT={commit}");
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=KUBEFEDCTL_BUILD_TARGET={target}");
    println!("cargo:rerun-if-changed=build.rs");
    // Re-stamp when HEAD moves (a new commit or another branch), not on
    // every edit. Ask git where HEAD and the refs live: in a worktree
    // `.git` is a file, HEAD is in the worktree's own git dir and the refs
    // in the common one. A path that does not exist would make cargo
    // rebuild every time, so only existing files are watched.
    let (Some(git_dir), Some(common)) = (
        git(&["rev-parse", "--absolute-git-dir"]),
        git(&["rev-parse", "--git-common-dir"]).map(PathBuf::from),
    ) else {
        return;
    };
    let git_dir = PathBuf::from(git_dir);
    let common = if common.is_absolute() {
        common
    } else {
        std::env::current_dir().unwrap_or_default().join(common)
    };
    let watch = |p: &Path| {
        if p.exists() {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    };
    let head = git_dir.join("HEAD");
    watch(&head);
    if let Ok(text) = std::fs::read_to_string(&head)
        && let Some(r) = text.strip_prefix("ref: ")
    {
        let loose = common.join(r.trim());
        if loose.exists() {
            watch(&loose);
        } else {
            // A packed ref: the next commit writes a loose one beside.
            watch(&common.join("packed-refs"));
            if let Some(dir) = loose.parent() {
                watch(dir);
            }
        }
    }
}
