//! `multiclusterdns.kubefed.io/v1alpha1`: cross-cluster service discovery,
//! removed from KubeFed in v0.7 and brought back for the one-shot reconcile.
//! `reconcile` fills the records' status and writes `DNSEndpoint`s, which
//! ExternalDNS (`--source=crd`) turns into DNS records. The status and
//! endpoint types are the core's, which reads and writes them.

use crate::core::dns::{ClusterDns, Endpoint, RecordStatus};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The CRD of `Domain`: the DNS zone the federation serves, its name the
/// federation's name in record names. It has no spec wrapper (top-level
/// `domain`, `nameServer`, as KubeFed's), so it is written out here.
pub fn domain_crd() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "domains.multiclusterdns.kubefed.io"},
        "spec": {
            "group": "multiclusterdns.kubefed.io",
            "names": {"kind": "Domain", "listKind": "DomainList", "plural": "domains", "singular": "domain"},
            "scope": "Namespaced",
            "versions": [{"name": "v1alpha1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                    "domain": {"type": "string"}, "nameServer": {"type": "string"}
                },
                "required": ["domain"]
            }}}]
        }
    })
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "multiclusterdns.kubefed.io",
    version = "v1alpha1",
    kind = "ServiceDNSRecord",
    namespaced,
    status = "RecordStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct ServiceDNSRecordSpec {
    pub domain_ref: String,
    #[serde(default, rename = "recordTTL", skip_serializing_if = "Option::is_none")]
    pub record_ttl: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_service_without_endpoints: Option<bool>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "multiclusterdns.kubefed.io",
    version = "v1alpha1",
    kind = "IngressDNSRecord",
    namespaced,
    status = "IngressDNSRecordStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct IngressDNSRecordSpec {
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default, rename = "recordTTL", skip_serializing_if = "Option::is_none")]
    pub record_ttl: Option<i64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct IngressDNSRecordStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns: Vec<ClusterDns>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "multiclusterdns.kubefed.io",
    version = "v1alpha1",
    kind = "DNSEndpoint",
    namespaced,
    status = "DNSEndpointStatus"
)]
pub struct DNSEndpointSpec {
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DNSEndpointStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The four CRDs `init --with-dns` installs.
pub fn dns_crds() -> Vec<serde_json::Value> {
    use kube::CustomResourceExt;
    let mut out = vec![domain_crd()];
    for crd in [
        ServiceDNSRecord::crd(),
        IngressDNSRecord::crd(),
        DNSEndpoint::crd(),
    ] {
        out.push(serde_json::to_value(crd).expect("CRDs serialize"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crds_use_kubefeds_names_and_fields() {
        let crds = dns_crds();
        let names: Vec<&str> = crds
            .iter()
            .map(|c| c["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "domains.multiclusterdns.kubefed.io",
                "servicednsrecords.multiclusterdns.kubefed.io",
                "ingressdnsrecords.multiclusterdns.kubefed.io",
                "dnsendpoints.multiclusterdns.kubefed.io"
            ]
        );
        let props = |i: usize, path: &str| {
            crds[i]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][path]["properties"].clone()
        };
        let spec = props(1, "spec");
        for k in [
            "domainRef",
            "recordTTL",
            "dnsPrefix",
            "externalName",
            "allowServiceWithoutEndpoints",
        ] {
            assert!(spec.get(k).is_some(), "ServiceDNSRecord spec.{k}");
        }
        let ep = &props(3, "spec")["endpoints"]["items"]["properties"];
        for k in ["dnsName", "targets", "recordType", "recordTTL", "labels"] {
            assert!(ep.get(k).is_some(), "DNSEndpoint endpoint {k}");
        }
        assert_eq!(
            crds[1]["spec"]["versions"][0]["subresources"]["status"],
            serde_json::json!({})
        );
    }
}
