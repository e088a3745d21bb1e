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
pub use crate::core::types::typegen::DEFAULT_FEDERATED_GROUP;
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
        spec_optional(core::PropagatedVersion::crd()),
        spec_optional(core::ClusterPropagatedVersion::crd()),
        scheduling::ReplicaSchedulingPreference::crd(),
    ]
}

/// A CRD whose objects may come without `spec`. KubeFed's PropagatedVersion
/// and ClusterPropagatedVersion have no spec at all (only a status), so its
/// controller-manager creates them without one; the derive would require
/// the (empty) spec our types carry, and the API server would refuse every
/// version record KubeFed's controller writes on a host `init` set up. The
/// empty `spec` property stays: our reconciler writes `spec: {}`, which a
/// host initialised by an older kubefedctl requires.
fn spec_optional(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for v in &mut crd.spec.versions {
        if let Some(root) = v
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            && let Some(required) = root.required.as_mut()
        {
            required.retain(|r| r != "spec");
            if required.is_empty() {
                root.required = None;
            }
        }
    }
    crd
}

#[cfg(test)]
mod tests {
    use super::*;

    /// KubeFed's controller-manager creates version records without a spec.
    #[test]
    fn propagated_versions_need_no_spec() {
        for crd in core_crds() {
            let root = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
            let required = &root["openAPIV3Schema"]["required"];
            let name = crd.metadata.name.unwrap_or_default();
            if name.contains("propagatedversions") {
                assert!(required.is_null(), "{name}: {required}");
            } else if name.starts_with("kubefedclusters") {
                assert_eq!(required, &serde_json::json!(["spec"]), "{name}");
            }
        }
    }
}
