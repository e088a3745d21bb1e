//! Real Kubernetes control planes on loopback for kubefedctl's tests.
//!
//! `hack/testenv.sh` builds kube-apiserver and kube-controller-manager
//! v1.20.2 from Debian's source package once; [`TestEnv`] runs them with
//! Debian's etcd, one apiserver and controller-manager per cluster, and
//! writes kubeconfigs for them. [`proxy::Proxy`] stands in front of any
//! cluster to add latency, errors and outages, and to count requests.

pub mod env;
pub mod http;
pub mod kubeconfig;
pub mod pki;
pub mod process;
pub mod proxy;

pub use env::{Cluster, KUBERNETES_VERSION, SHARED_CLUSTERS, TestEnv, binaries_dir};
pub use kubeconfig::KubeconfigBuilder;
pub use proxy::{Faults, Mode, Proxy, RequestRecord};
