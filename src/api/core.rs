//! `core.kubefed.io`: clusters, type configs, the control-plane config, and
//! the propagated-version bookkeeping of the sync machinery.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A member cluster registered with the host (`kubefedctl join`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "core.kubefed.io",
    version = "v1beta1",
    kind = "KubeFedCluster",
    namespaced,
    status = "KubeFedClusterStatus",
    shortname = "kfc",
    printcolumn = r#"{"name":"age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"ready","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"kubernetes-version","type":"string","jsonPath":".status.kubernetesVersion"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct KubeFedClusterSpec {
    /// The member's API server: URL, host or host:port.
    pub api_endpoint: String,
    /// PEM CA bundle of the member's API server, base64 in JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "byte"))]
    pub ca_bundle: Option<String>,
    /// Secret in the kubefed namespace whose `token` key authenticates to the member.
    pub secret_ref: LocalSecretReference,
    /// `*`, `SubjectName` or `ValidityPeriod`.
    #[serde(
        default,
        rename = "disabledTLSValidations",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub disabled_tls_validations: Vec<String>,
    /// Proxy to reach the member through (http, https or socks5).
    #[serde(default, rename = "proxyURL", skip_serializing_if = "Option::is_none")]
    pub proxy_url: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct LocalSecretReference {
    pub name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeFedClusterStatus {
    pub conditions: Vec<ClusterCondition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

/// `Ready`, `Offline` or `ConfigMalformed`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[schemars(extend("format" = "date-time"))]
    pub last_probe_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub last_transition_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Which API type is federated, and how (`kubefedctl enable`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "core.kubefed.io",
    version = "v1beta1",
    kind = "FederatedTypeConfig",
    namespaced,
    status = "FederatedTypeConfigStatus",
    shortname = "ftc"
)]
#[serde(rename_all = "camelCase")]
pub struct FederatedTypeConfigSpec {
    pub target_type: ApiResource,
    pub federated_type: ApiResource,
    /// `Enabled` or `Disabled`.
    pub propagation: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_type: Option<ApiResource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_collection: Option<String>,
}

impl FederatedTypeConfigSpec {
    /// Whether its type is propagated (`propagation: Enabled`); the one
    /// place that reads the field's value.
    pub fn is_enabled(&self) -> bool {
        self.propagation == "Enabled"
    }
}

/// KubeFed's `APIResource`: one served type.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiResource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub version: String,
    pub kind: String,
    pub plural_name: String,
    /// `Namespaced` or `Cluster`.
    pub scope: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FederatedTypeConfigStatus {
    pub observed_generation: i64,
    pub propagation_controller: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_controller: Option<String>,
}

/// The control plane's configuration; KubeFed reads the one named `kubefed`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "core.kubefed.io",
    version = "v1beta1",
    kind = "KubeFedConfig",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct KubeFedConfigSpec {
    /// `Cluster` or `Namespaced` (immutable).
    pub scope: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller_duration: Option<DurationConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_elect: Option<LeaderElectConfig>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feature_gates: Vec<FeatureGatesConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_health_check: Option<ClusterHealthCheckConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_controller: Option<SyncControllerConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_controller: Option<StatusControllerConfig>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DurationConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_delay: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_delay: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_sync_timeout: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeaderElectConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_duration: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_deadline: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_period: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_lock: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct FeatureGatesConfig {
    pub name: String,
    /// `Enabled` or `Disabled`.
    pub configuration: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterHealthCheckConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_threshold: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_threshold: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncControllerConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_reconciles: Option<i64>,
    /// `Enabled` or `Disabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt_resources: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusControllerConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_reconciles: Option<i64>,
}

impl KubeFedConfigSpec {
    /// The spec KubeFed's defaulting would produce for `scope`: every
    /// sub-struct filled, so a real controller accepts it as it is.
    pub fn defaults(scope: &str) -> KubeFedConfigSpec {
        let gate = |name: &str, on: bool| FeatureGatesConfig {
            name: name.into(),
            configuration: if on { "Enabled" } else { "Disabled" }.into(),
        };
        KubeFedConfigSpec {
            scope: scope.to_string(),
            controller_duration: Some(DurationConfig {
                available_delay: Some("20s".into()),
                unavailable_delay: Some("60s".into()),
                cache_sync_timeout: Some("5m0s".into()),
            }),
            leader_elect: Some(LeaderElectConfig {
                lease_duration: Some("15s".into()),
                renew_deadline: Some("10s".into()),
                // The tool's own value (upstream's default is 5s): init
                // writes what the run then uses (core::run::lease::LeaseTimings).
                retry_period: Some("2s".into()),
                resource_lock: Some("configmaps".into()),
            }),
            feature_gates: vec![
                gate("PushReconciler", true),
                gate("RawResourceStatusCollection", false),
                gate("SchedulerPreferences", true),
            ],
            cluster_health_check: Some(ClusterHealthCheckConfig {
                period: Some("10s".into()),
                failure_threshold: Some(3),
                success_threshold: Some(1),
                timeout: Some("3s".into()),
            }),
            sync_controller: Some(SyncControllerConfig {
                // The watch's requests in flight per member (upstream: 1
                // worker per type; here one queue serves every type).
                max_concurrent_reconciles: Some(8),
                adopt_resources: Some("Enabled".into()),
            }),
            status_controller: Some(StatusControllerConfig {
                max_concurrent_reconciles: Some(1),
            }),
        }
    }
}

/// KubeFed's `federatedservicestatuses.core.kubefed.io` (v1alpha1): what
/// upstream's status controller writes for `services` with a `statusType`
/// (`core::service_status`). No spec, so written by hand: `clusterStatus`
/// of `{clusterName, status}` with a member Service's status kept whole.
pub fn federated_service_status_crd() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "federatedservicestatuses.core.kubefed.io"},
        "spec": {
            "group": "core.kubefed.io",
            "names": {"kind": "FederatedServiceStatus", "listKind": "FederatedServiceStatusList",
                "plural": "federatedservicestatuses", "singular": "federatedservicestatus"},
            "scope": "Namespaced",
            "versions": [{"name": "v1alpha1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                    "clusterStatus": {"type": "array", "items": {
                        "type": "object",
                        "properties": {
                            "clusterName": {"type": "string"},
                            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                        }
                    }}
                }
            }}}]
        }
    })
}

/// Versions last propagated for a namespaced federated object.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "core.kubefed.io",
    version = "v1alpha1",
    kind = "PropagatedVersion",
    namespaced,
    status = "PropagatedVersionStatus"
)]
pub struct PropagatedVersionSpec {}

/// Versions last propagated for a cluster-scoped federated object.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "core.kubefed.io",
    version = "v1alpha1",
    kind = "ClusterPropagatedVersion",
    status = "PropagatedVersionStatus"
)]
pub struct ClusterPropagatedVersionSpec {}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PropagatedVersionStatus {
    pub template_version: String,
    /// KubeFed's JSON key ends in `s`.
    pub overrides_version: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_versions: Vec<ClusterObjectVersion>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterObjectVersion {
    pub cluster_name: String,
    pub version: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    fn spec_properties(crd: &serde_json::Value) -> Vec<String> {
        let props = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"];
        let mut keys: Vec<String> = props.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        keys
    }

    /// Field names must be KubeFed's exactly, or the API server prunes them.
    #[test]
    fn schemas_use_kubefed_field_names() {
        let kfc = serde_json::to_value(KubeFedCluster::crd()).unwrap();
        assert_eq!(
            spec_properties(&kfc),
            [
                "apiEndpoint",
                "caBundle",
                "disabledTLSValidations",
                "proxyURL",
                "secretRef"
            ]
        );
        let ftc = serde_json::to_value(FederatedTypeConfig::crd()).unwrap();
        assert_eq!(
            spec_properties(&ftc),
            [
                "federatedType",
                "propagation",
                "statusCollection",
                "statusType",
                "targetType"
            ]
        );
        let cfg = serde_json::to_value(KubeFedConfig::crd()).unwrap();
        assert_eq!(
            spec_properties(&cfg),
            [
                "clusterHealthCheck",
                "controllerDuration",
                "featureGates",
                "leaderElect",
                "scope",
                "statusController",
                "syncController"
            ]
        );
        let pv = serde_json::to_value(PropagatedVersion::crd()).unwrap();
        let status = &pv["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
            ["properties"];
        assert!(
            status.get("overridesVersion").is_some() && status.get("clusterVersions").is_some()
        );
    }
}
