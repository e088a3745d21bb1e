//! `scheduling.kubefed.io`: ReplicaSchedulingPreference, which spreads a
//! FederatedDeployment's or FederatedReplicaSet's replicas over clusters.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "scheduling.kubefed.io",
    version = "v1alpha1",
    kind = "ReplicaSchedulingPreference",
    namespaced,
    shortname = "rsp"
)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSchedulingPreferenceSpec {
    /// `FederatedDeployment` or `FederatedReplicaSet`.
    pub target_kind: String,
    pub total_replicas: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebalance: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intersect_with_cluster_selector: Option<bool>,
    /// Per cluster name, or `*` for every cluster.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub clusters: BTreeMap<String, ClusterPreferences>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPreferences {
    #[serde(default)]
    pub min_replicas: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i64>,
}
