//! Real Kubernetes control planes on loopback for kubefedctl's tests.
//!
//! `hack/testenv.sh` builds kube-apiserver, kube-controller-manager and
//! etcd of the current release from Go modules, and 1.20.2 from Debian's
//! source package, once; [`TestEnv`] runs them (a [`Version`] per
//! cluster), one apiserver and controller-manager per cluster, and writes
//! kubeconfigs for them. [`proxy::Proxy`] stands in front of any
//! cluster to add latency, errors and outages, and to count requests.
//! [`kubefed_binary`] finds KubeFed v0.10.0's own programs, which the
//! script builds too, for tests that compare this tool with KubeFed, and
//! [`karmada_crds`] Karmada v1.13.0's CRDs, which `export karmada` is
//! checked against.

pub mod env;
pub mod http;
pub mod inventory;
pub mod karmada;
pub mod kubeconfig;
pub mod kubefed;
pub mod node;
pub mod pki;
pub mod process;
pub mod proxy;
pub mod skip;
pub mod version;

pub use env::{Cluster, SHARED_CLUSTERS, TestEnv, binaries_dir};
pub use inventory::{INVENTORY_VERSION, inventory_consumer, inventory_crd};
pub use karmada::{KARMADA_VERSION, KarmadaPlane, karmada_binary, karmada_crds};
pub use kubeconfig::KubeconfigBuilder;
pub use kubefed::{KUBEFED_VERSION, kubefed_binary, kubefed_missing, kubefed_source};
pub use proxy::{Faults, Mode, Proxy, RequestRecord};
pub use skip::skip;
pub use version::Version;
