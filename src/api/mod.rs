//! KubeFed v0.10's API as Rust types. The CRDs `init` installs are generated
//! from these types (kube's `CustomResource` derive), with the same groups,
//! versions, names, scopes, short names, printer columns and subresources as
//! KubeFed's own chart, so a real KubeFed controller can run on them later.

pub mod core;
pub mod dns;
pub mod scheduling;

/// KubeFed's core API group.
pub const CORE_GROUP: &str = "core.kubefed.io";
/// The seeds' older spelling of the core group, accepted on input.
pub const LEGACY_CORE_GROUP: &str = "core.kubefed.k8s.io";
pub use crate::core::typegen::DEFAULT_FEDERATED_GROUP;
/// Scheduling API group (ReplicaSchedulingPreference).
pub const SCHEDULING_GROUP: &str = "scheduling.kubefed.io";
/// The one `KubeFedConfig` KubeFed reads, in the kubefed namespace.
pub const KUBEFED_CONFIG_NAME: &str = "kubefed";
/// The federation's own namespace in the host, unless told otherwise (KubeFed's default).
pub const DEFAULT_KUBEFED_NAMESPACE: &str = "kube-federation-system";

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// The CRDs of a controller-less host, in installation order.
pub fn core_crds() -> Vec<CustomResourceDefinition> {
    vec![
        core::KubeFedCluster::crd(),
        core::FederatedTypeConfig::crd(),
        core::KubeFedConfig::crd(),
        core::PropagatedVersion::crd(),
        core::ClusterPropagatedVersion::crd(),
        scheduling::ReplicaSchedulingPreference::crd(),
    ]
}
