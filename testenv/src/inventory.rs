//! SIG Multicluster's cluster inventory as its consumers use it:
//! `hack/testenv.sh` builds `testenv/go/inventory-consumer` against
//! `sigs.k8s.io/cluster-inventory-api` (its `pkg/access`, the library Kueue
//! and the Argo CD ClusterProfile syncer read profiles with) and leaves the
//! module, with its ClusterProfile CRD, in the module cache.

use crate::version::cache_root;
use std::path::PathBuf;

/// The module release `hack/testenv.sh` builds against.
pub const INVENTORY_VERSION: &str = "v0.1.2";

/// The built consumer. Panics, naming the fix, when it is missing: the
/// inventory tests never skip (`hack/testenv.sh` fails when it does not
/// build).
pub fn inventory_consumer() -> PathBuf {
    let path = cache_root()
        .join(format!("cluster-inventory-{INVENTORY_VERSION}"))
        .join("bin/inventory-consumer");
    assert!(
        path.is_file(),
        "{} is missing: run hack/testenv.sh",
        path.display()
    );
    path
}

/// The module's own ClusterProfile CRD (`config/crd/bases`).
pub fn inventory_crd() -> PathBuf {
    let path = cache_root()
        .join("gomod/sigs.k8s.io")
        .join(format!("cluster-inventory-api@{INVENTORY_VERSION}"))
        .join("config/crd/bases/multicluster.x-k8s.io_clusterprofiles.yaml");
    assert!(
        path.is_file(),
        "{} is missing: run hack/testenv.sh",
        path.display()
    );
    path
}
