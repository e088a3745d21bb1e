//! Karmada v1.13.0, the system `export karmada` writes for: `hack/testenv.sh`
//! builds its `karmada-controller-manager`, `karmada-scheduler` and
//! `karmada-aggregated-apiserver` from the Go module proxy and keeps its
//! CRDs (`charts/karmada/_crds/bases/`) beside them, so that tests check
//! the export against Karmada's own schemas on a real API server.

use crate::version::cache_root;
use anyhow::{Context, Result, bail};
use std::path::PathBuf;

/// The Karmada release `hack/testenv.sh` builds.
pub const KARMADA_VERSION: &str = "v1.13.0";

/// `${cache}/karmada-v1.13.0`: `bin/` and `crds/`.
fn karmada_root() -> PathBuf {
    cache_root().join(format!("karmada-{KARMADA_VERSION}"))
}

/// One of Karmada's programs (`karmada-scheduler`, ...), if built.
pub fn karmada_binary(name: &str) -> Option<PathBuf> {
    let path = karmada_root().join("bin").join(name);
    path.is_file().then_some(path)
}

/// Karmada's CRDs as YAML texts, sorted by file name; an error naming
/// `hack/testenv.sh` when they are not there (the script requires them,
/// so a test never skips for want of them).
pub fn karmada_crds() -> Result<Vec<(String, String)>> {
    let dir = karmada_root().join("crds");
    let entries = std::fs::read_dir(&dir).with_context(|| {
        format!(
            "Karmada {KARMADA_VERSION}'s CRDs are missing from {}: run hack/testenv.sh",
            dir.display()
        )
    })?;
    let mut out = Vec::new();
    for e in entries {
        let path = e?.path();
        if path.extension().is_some_and(|x| x == "yaml") {
            let name = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            out.push((name, std::fs::read_to_string(&path)?));
        }
    }
    out.sort();
    if out.is_empty() {
        bail!("no CRD in {}: run hack/testenv.sh", dir.display());
    }
    Ok(out)
}
