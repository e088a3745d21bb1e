//! Multi-cluster DNS (KubeFed v0.6.1, upstream `pkg/controller/dnsendpoint`): the `status.dns[]` the
//! ServiceDNS/IngressDNS controllers write into a record, and the
//! `DNSEndpoint` the DNSEndpoint controller derives from that status for
//! ExternalDNS' CRD source.
//!
//! Service names form a hierarchy `<svc>.<ns>.<federation>.svc[.<zone>.<region>].<domain>`:
//! a name with healthy load balancers gets an A record, a name without one
//! CNAMEs one level up (zone → region → global), which is how a lookup fails
//! over to the nearest healthy shard.
//!
//! Deliberate differences from upstream:
//! * an unready cluster keeps its `status.dns` entry with an empty load
//!   balancer (upstream meant to, but its code dropped the entry), so its
//!   zone and region names CNAME up to healthy clusters instead of
//!   disappearing;
//! * hostnames are never resolved (this module does no I/O). Per DNS name:
//!   IPs give an A record and hostname-only load balancers next to them are
//!   dropped with a warning; exactly one hostname and no IP gives a CNAME to
//!   it; several hostnames and no IP give a CNAME to the first (sorted) one
//!   and a warning naming the others. A load balancer entry that has an IP
//!   contributes only its IP (its hostname names the same machine).
//!
//! Everything is sorted, so unchanged input gives byte-identical output and
//! the engine writes the DNSEndpoint only when it really changes.
//!
//! The status and endpoint types are the wire types too: serde reads and
//! writes them with upstream's Go `omitempty` rules, and `api::dns` builds
//! the CRDs' schema from them. A doc comment on them would become a
//! description in that schema, so their notes are plain comments.

use crate::describe::{FieldError, FieldProblem, typed as parse};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

/// Multi-cluster DNS API groups accepted on input (current and older spelling).
pub const DNS_GROUPS: [&str; 2] = [
    "multiclusterdns.kubefed.io",
    "multiclusterdns.kubefed.k8s.io",
];
/// The group written when a record does not say which one it uses.
pub const DNS_GROUP: &str = "multiclusterdns.kubefed.io";
/// The only version the DNS types ever had.
pub const DNS_VERSION: &str = "v1alpha1";
/// TTL (seconds) when `spec.recordTTL` is 0 or absent.
pub const DEFAULT_TTL: i64 = 180;
/// Label put on every endpoint of a record with `externalName`, so the
/// records can be traced back to the Service.
pub const SERVICE_NAME_LABEL: &str = "serviceName";

/// Which record type drives the DNS names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// `ServiceDNSRecord`: zone/region/global names under the Domain.
    Service,
    /// `IngressDNSRecord`: one name per `spec.hosts` entry.
    Ingress,
}

impl RecordKind {
    pub fn kind(self) -> &'static str {
        match self {
            RecordKind::Service => "ServiceDNSRecord",
            RecordKind::Ingress => "IngressDNSRecord",
        }
    }

    /// Prefix of the DNSEndpoint name (`service-<name>`, `ingress-<name>`).
    pub fn endpoint_prefix(self) -> &'static str {
        match self {
            RecordKind::Service => "service",
            RecordKind::Ingress => "ingress",
        }
    }
}

/// A ServiceDNSRecord or IngressDNSRecord (metadata and spec).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsRecord {
    pub kind: RecordKind,
    /// The group of the input's apiVersion (written back on the DNSEndpoint).
    pub api_group: String,
    pub namespace: String,
    pub name: String,
    /// Service only: name of the Domain in the KubeFed namespace.
    pub domain_ref: String,
    /// Seconds; 0 means [`DEFAULT_TTL`].
    pub record_ttl: i64,
    /// Service only: extra `CNAME <dnsPrefix>.<domain>` → global name.
    pub dns_prefix: String,
    /// Service only: replaces the service name inside the DNS names.
    pub external_name: String,
    /// Service only: publish load balancers even without ready endpoints.
    pub allow_service_without_endpoints: bool,
    /// Ingress only: the DNS names to publish.
    pub hosts: Vec<String>,
}

impl DnsRecord {
    /// A service record with defaults, for callers that build records directly.
    pub fn service(namespace: &str, name: &str, domain_ref: &str) -> DnsRecord {
        DnsRecord {
            kind: RecordKind::Service,
            api_group: DNS_GROUP.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            domain_ref: domain_ref.to_string(),
            record_ttl: 0,
            dns_prefix: String::new(),
            external_name: String::new(),
            allow_service_without_endpoints: false,
            hosts: Vec::new(),
        }
    }

    /// An ingress record with defaults.
    pub fn ingress(namespace: &str, name: &str, hosts: &[&str]) -> DnsRecord {
        DnsRecord {
            kind: RecordKind::Ingress,
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            ..DnsRecord::service(namespace, name, "")
        }
    }

    /// Parse a ServiceDNSRecord or IngressDNSRecord object. The apiVersion,
    /// when present, must be in one of [`DNS_GROUPS`].
    pub fn from_value(obj: &Value) -> Result<DnsRecord, DnsError> {
        let object = crate::describe::quoted(obj, "object");
        let bad = |problem: String| DnsError::Invalid {
            object: object.clone(),
            problem,
        };
        let api_group = check_group(obj).map_err(|e| bad(e.to_string()))?;
        let kind = match obj.get("kind").and_then(Value::as_str) {
            Some("ServiceDNSRecord") => RecordKind::Service,
            Some("IngressDNSRecord") => RecordKind::Ingress,
            other => {
                return Err(bad(format!(
                    "kind {other:?} is neither ServiceDNSRecord nor IngressDNSRecord"
                )));
            }
        };
        let view: RecordView = parse(obj, "").map_err(|e| bad(e.to_string()))?;
        let (metadata, spec) = (
            view.metadata.unwrap_or_default(),
            view.spec.unwrap_or_default(),
        );
        let name = required(metadata.name, "metadata.name").map_err(|e| bad(e.to_string()))?;
        let namespace =
            required(metadata.namespace, "metadata.namespace").map_err(|e| bad(e.to_string()))?;
        let domain_ref = spec.domain_ref.unwrap_or_default();
        if kind == RecordKind::Service && domain_ref.is_empty() {
            return Err(bad("spec.domainRef is required".into()));
        }
        let record_ttl = spec.record_ttl.unwrap_or(0);
        if record_ttl < 0 {
            return Err(bad(format!(
                "spec.recordTTL must not be negative: {record_ttl}"
            )));
        }
        Ok(DnsRecord {
            kind,
            api_group,
            namespace,
            name,
            domain_ref,
            record_ttl,
            dns_prefix: spec.dns_prefix.unwrap_or_default(),
            external_name: spec.external_name.unwrap_or_default(),
            allow_service_without_endpoints: spec.allow_service_without_endpoints.unwrap_or(false),
            hosts: spec.hosts.unwrap_or_default(),
        })
    }

    /// `<kind> "<ns>/<name>"`, as messages name records.
    pub fn describe(&self) -> String {
        format!("{} \"{}/{}\"", self.kind.kind(), self.namespace, self.name)
    }

    /// `recordTTL`, or [`DEFAULT_TTL`] when 0.
    pub fn ttl(&self) -> i64 {
        if self.record_ttl == 0 {
            DEFAULT_TTL
        } else {
            self.record_ttl
        }
    }
}

/// A `Domain` (in the KubeFed namespace; no spec/status wrapper).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Domain {
    /// `metadata.name`: the federation name used inside service DNS names.
    pub name: String,
    /// The zone served for the federation, e.g. `example.com`.
    pub domain: String,
    /// Authoritative name server; informational only.
    pub name_server: Option<String>,
}

impl Domain {
    pub fn new(name: &str, domain: &str) -> Domain {
        Domain {
            name: name.to_string(),
            domain: domain.to_string(),
            name_server: None,
        }
    }

    /// Parse a Domain object (apiVersion, when present, in [`DNS_GROUPS`]).
    pub fn from_value(obj: &Value) -> Result<Domain, DnsError> {
        let object = crate::describe::quoted(obj, "object");
        let bad = |problem: String| DnsError::Invalid {
            object: object.clone(),
            problem,
        };
        check_group(obj).map_err(|e| bad(e.to_string()))?;
        if let Some(kind) = obj.get("kind").and_then(Value::as_str)
            && kind != "Domain"
        {
            return Err(bad(format!("kind {kind:?} is not Domain")));
        }
        let view: DomainView = parse(obj, "").map_err(|e| bad(e.to_string()))?;
        let name = view.metadata.unwrap_or_default().name;
        Ok(Domain {
            name: required(name, "metadata.name").map_err(|e| bad(e.to_string()))?,
            domain: required(view.domain, "domain").map_err(|e| bad(e.to_string()))?,
            name_server: view.name_server.filter(|s| !s.is_empty()),
        })
    }
}

// One `status.loadBalancer.ingress[]` entry of a member Service/Ingress.
// Nullable strings on the wire, empty when absent here.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub struct LbIngress {
    #[serde(
        default,
        deserialize_with = "or_default",
        skip_serializing_if = "String::is_empty"
    )]
    #[schemars(with = "Option<String>")]
    pub ip: String,
    #[serde(
        default,
        deserialize_with = "or_default",
        skip_serializing_if = "String::is_empty"
    )]
    #[schemars(with = "Option<String>")]
    pub hostname: String,
}

impl LbIngress {
    pub fn ip(ip: &str) -> LbIngress {
        LbIngress {
            ip: ip.to_string(),
            hostname: String::new(),
        }
    }

    pub fn hostname(hostname: &str) -> LbIngress {
        LbIngress {
            ip: String::new(),
            hostname: hostname.to_string(),
        }
    }
}

/// What the engine observed in one member cluster for one record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterObservation {
    pub cluster: String,
    /// The KubeFedCluster is Ready.
    pub ready: bool,
    /// `KubeFedCluster.status.region` (may be empty for an unready cluster).
    pub region: String,
    /// `KubeFedCluster.status.zones`.
    pub zones: Vec<String>,
    /// The member Service's (or Ingress') `status.loadBalancer.ingress`.
    pub load_balancer: Vec<LbIngress>,
    /// Service only: the member has a ready endpoint for it
    /// ([`slices_have_ready_endpoints`], or [`endpoints_have_ready_addresses`]
    /// where EndpointSlices are not served).
    pub has_ready_endpoints: bool,
}

/// Whether a Service's EndpointSlices (`discovery.k8s.io/v1`, every slice
/// labelled `kubernetes.io/service-name` with it: a Service may have
/// several) list an endpoint that is ready. A missing `ready` condition
/// means ready, as the EndpointSlice API defines it.
pub fn slices_have_ready_endpoints(slices: &[Value]) -> bool {
    slices
        .iter()
        .flat_map(|s| s["endpoints"].as_array().into_iter().flatten())
        .any(|e| e["conditions"]["ready"].as_bool() != Some(false))
}

/// Whether a v1 Endpoints object has a ready address in some subset (what
/// upstream's DNS controller reads; served before EndpointSlices were).
pub fn endpoints_have_ready_addresses(endpoints: &Value) -> bool {
    endpoints["subsets"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| s["addresses"].as_array().is_some_and(|a| !a.is_empty()))
}

/// One cluster's load balancer and topology.
// A `status.dns[]` entry; the line above is its description in the CRDs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDns {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    // Sorted by IP, then hostname. `loadBalancer: {ingress: [...]}` on the
    // wire, written even when empty (as upstream does).
    #[serde(default, with = "load_balancer")]
    #[schemars(with = "load_balancer::LoadBalancerStatus")]
    pub load_balancer: Vec<LbIngress>,
    // Service only; sorted (the health controller reports a set).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    // Service only.
    #[serde(
        default,
        deserialize_with = "or_default",
        skip_serializing_if = "String::is_empty"
    )]
    #[schemars(with = "Option<String>")]
    pub region: String,
}

// `status` of a ServiceDNSRecord (domain + dns) or IngressDNSRecord (dns).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RecordStatus {
    // Service only: the Domain's `domain`.
    #[serde(
        default,
        deserialize_with = "or_default",
        skip_serializing_if = "String::is_empty"
    )]
    #[schemars(with = "Option<String>")]
    pub domain: String,
    // Sorted by cluster name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns: Vec<ClusterDns>,
}

impl RecordStatus {
    /// The status as upstream serialises it.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a status serializes")
    }

    /// Parse a record's `status` (`null`/absent → empty).
    pub fn from_value(status: Option<&Value>) -> Result<RecordStatus, FieldError> {
        match status.filter(|s| !s.is_null()) {
            None => Ok(RecordStatus::default()),
            Some(status) => parse(status, "status"),
        }
    }
}

/// A status to write (or `None`: leave it alone) and what to tell the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusPlan {
    pub status: Option<RecordStatus>,
    pub warnings: Vec<String>,
}

/// Inputs the DNS code refuses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DnsError {
    #[error("{object}: {problem}")]
    Invalid { object: String, problem: String },
    /// Upstream fails the reconcile (and retries) with this message.
    #[error("{record}: Cluster {cluster:?} does not have Region or Zones Attributes")]
    MissingTopology { record: String, cluster: String },
}

/// The `status` the ServiceDNS or IngressDNS controller writes (upstream
/// `pkg/controller/servicedns`, `pkg/controller/ingressdns`).
///
/// `domain` is the Domain `<kubefed ns>/<domainRef>` (`None` when it does
/// not exist: a service record's status is then left alone, as upstream
/// does). `previous` is the record's current status: an unready cluster
/// whose KubeFedCluster no longer reports region/zones keeps them from its
/// previous entry.
///
/// Service records: a ready cluster must report region and zones; its
/// load balancer is published only when the member Endpoints have a ready
/// address or `allowServiceWithoutEndpoints` is set. An unready cluster
/// keeps an entry with an empty load balancer (upstream's intent, not its
/// dead code) so its names CNAME up; with no region/zones known at all it
/// is left out, with a warning. Ingress records list ready clusters only.
pub fn record_status(
    record: &DnsRecord,
    domain: Option<&Domain>,
    observations: &[ClusterObservation],
    previous: &RecordStatus,
) -> Result<StatusPlan, DnsError> {
    let mut warnings = Vec::new();
    let mut dns = Vec::new();
    let mut domain_name = String::new();
    match record.kind {
        RecordKind::Ingress => {
            for o in observations.iter().filter(|o| o.ready) {
                dns.push(ClusterDns {
                    cluster: o.cluster.clone(),
                    load_balancer: sorted_lb(&o.load_balancer),
                    ..ClusterDns::default()
                });
            }
        }
        RecordKind::Service => {
            let Some(domain) = domain else {
                warnings.push(format!(
                    "{}: Domain {:?} not found in the KubeFed namespace; status left unchanged",
                    record.describe(),
                    record.domain_ref
                ));
                return Ok(StatusPlan {
                    status: None,
                    warnings,
                });
            };
            if domain.name != record.domain_ref {
                return Err(DnsError::Invalid {
                    object: record.describe(),
                    problem: format!(
                        "spec.domainRef is {:?} but Domain {:?} was given",
                        record.domain_ref, domain.name
                    ),
                });
            }
            domain_name = domain.domain.clone();
            for o in observations {
                dns.extend(service_dns(record, o, previous, &mut warnings)?);
            }
        }
    }
    dns.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    Ok(StatusPlan {
        status: Some(RecordStatus {
            domain: domain_name,
            dns,
        }),
        warnings,
    })
}

/// A Service record's entry for one member: a ready member with its
/// topology (and its load balancer, when it has ready endpoints or the
/// record publishes without them); a member that is not ready without
/// addresses, under the topology it had, or left out (with a warning)
/// when that is unknown.
fn service_dns(
    record: &DnsRecord,
    o: &ClusterObservation,
    previous: &RecordStatus,
    warnings: &mut Vec<String>,
) -> Result<Option<ClusterDns>, DnsError> {
    if o.ready {
        if o.region.is_empty() || o.zones.is_empty() {
            return Err(DnsError::MissingTopology {
                record: record.describe(),
                cluster: o.cluster.clone(),
            });
        }
        let publish = o.has_ready_endpoints || record.allow_service_without_endpoints;
        return Ok(Some(ClusterDns {
            cluster: o.cluster.clone(),
            load_balancer: if publish {
                sorted_lb(&o.load_balancer)
            } else {
                Vec::new()
            },
            zones: sorted_zones(&o.zones),
            region: o.region.clone(),
        }));
    }
    let before = previous.dns.iter().find(|d| d.cluster == o.cluster);
    let (region, zones) = if !o.region.is_empty() && !o.zones.is_empty() {
        (o.region.clone(), sorted_zones(&o.zones))
    } else if let Some(b) = before.filter(|b| !b.region.is_empty() && !b.zones.is_empty()) {
        (b.region.clone(), b.zones.clone())
    } else {
        warnings.push(format!(
            "{}: cluster {:?} is not ready and its region/zones are unknown; left out of status.dns",
            record.describe(),
            o.cluster
        ));
        return Ok(None);
    };
    Ok(Some(ClusterDns {
        cluster: o.cluster.clone(),
        load_balancer: Vec::new(),
        zones,
        region,
    }))
}

/// A DNS record type KubeFed emits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RecordType {
    A,
    #[serde(rename = "CNAME")]
    Cname,
}

// One `DNSEndpoint.spec.endpoints[]` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    pub dns_name: String,
    // Sorted and unique.
    #[serde(default)]
    pub targets: Vec<String>,
    // A free string in the CRD (ExternalDNS knows more types).
    #[schemars(with = "String")]
    pub record_type: RecordType,
    // Always written; optional and nullable in the CRD, without a default.
    #[serde(default, rename = "recordTTL", deserialize_with = "or_default")]
    #[schemars(!default, with = "Option<i64>")]
    pub record_ttl: i64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

impl Endpoint {
    /// Upstream's JSON.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("an endpoint serializes")
    }
}

/// The DNSEndpoint for one record, and what to tell the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointsPlan {
    /// `<group>/v1alpha1`, the record's group.
    pub api_version: String,
    pub namespace: String,
    /// `service-<name>` or `ingress-<name>`.
    pub name: String,
    /// Sorted by DNS name.
    pub endpoints: Vec<Endpoint>,
    pub warnings: Vec<String>,
}

impl EndpointsPlan {
    /// `spec` of the DNSEndpoint.
    pub fn spec(&self) -> Value {
        json!({"endpoints": self.endpoints})
    }

    /// The whole DNSEndpoint object to create.
    pub fn object(&self) -> Value {
        json!({
            "apiVersion": self.api_version,
            "kind": "DNSEndpoint",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": self.spec(),
        })
    }

    /// Whether the live DNSEndpoint (`None` = absent) must be written:
    /// upstream updates only when `spec.endpoints` differ.
    pub fn needs_write(&self, live: Option<&Value>) -> bool {
        let Some(live) = live else {
            return true;
        };
        let empty = Value::Array(Vec::new());
        let have = live
            .get("spec")
            .and_then(|s| s.get("endpoints"))
            .filter(|e| !e.is_null())
            .unwrap_or(&empty);
        have != &self.spec()["endpoints"]
    }
}

/// The DNSEndpoint the DNSEndpoint controller (upstream
/// `pkg/controller/dnsendpoint`) derives from a record
/// and its status.
///
/// Service records: for each `status.dns` entry, zone names
/// `<prefix>.<zone>.<region>.<domain>`, the region name
/// `<prefix>.<region>.<domain>` and the global name `<prefix>.<domain>`
/// (`<prefix>` = `<name|externalName>.<ns>.<domainRef>.svc`) carry the
/// cluster's addresses, or CNAME one level up when it has none (the global
/// name then has no record). Entries for the same name are merged; an
/// address beats a CNAME up. `dnsPrefix` adds `CNAME <dnsPrefix>.<domain>`
/// → global name (always, as upstream). A service status without a domain
/// yields nothing, with a warning.
///
/// Ingress records: one record per host with the addresses of all clusters;
/// a host without any gets none.
pub fn dns_endpoints(record: &DnsRecord, status: &RecordStatus) -> EndpointsPlan {
    let mut names: BTreeMap<String, Candidates> = BTreeMap::new();
    let mut warnings = Vec::new();
    let mut labels = BTreeMap::new();
    match record.kind {
        RecordKind::Service if status.domain.is_empty() => {
            if !status.dns.is_empty() || !record.dns_prefix.is_empty() {
                warnings.push(format!(
                    "{}: status.domain is empty (Domain not resolved yet); no DNS records",
                    record.describe()
                ));
            }
        }
        RecordKind::Service => service_names(record, status, &mut names, &mut labels),
        RecordKind::Ingress => {
            for host in record.hosts.iter().filter(|h| !h.is_empty()) {
                let c = names.entry(host.clone()).or_default();
                for entry in &status.dns {
                    c.add(&entry.load_balancer, "");
                }
            }
        }
    }
    let ttl = record.ttl();
    let mut endpoints = Vec::new();
    for (dns_name, c) in names {
        let Some((record_type, targets)) = c.decide(&dns_name, &mut warnings) else {
            continue;
        };
        endpoints.push(Endpoint {
            dns_name,
            targets,
            record_type,
            record_ttl: ttl,
            labels: labels.clone(),
        });
    }
    let group: &str = if record.api_group.is_empty() {
        DNS_GROUP
    } else {
        &record.api_group
    };
    EndpointsPlan {
        api_version: format!("{group}/{DNS_VERSION}"),
        namespace: record.namespace.clone(),
        name: format!("{}-{}", record.kind.endpoint_prefix(), record.name),
        endpoints,
        warnings,
    }
}

/// The names a Service record publishes under its resolved domain
/// (KubeFed v0.6.1's `pkg/controller/dnsendpoint`): per zone, region
/// and globally, each falling back to the wider one when it has no
/// address, and the `dnsPrefix` CNAME; an `externalName` is published in
/// place of the Service's name, labelled with it.
fn service_names(
    record: &DnsRecord,
    status: &RecordStatus,
    names: &mut BTreeMap<String, Candidates>,
    labels: &mut BTreeMap<String, String>,
) {
    let d = &status.domain;
    let service = if record.external_name.is_empty() {
        &record.name
    } else {
        labels.insert(SERVICE_NAME_LABEL.to_string(), record.name.clone());
        &record.external_name
    };
    let prefix = format!("{service}.{}.{}.svc", record.namespace, record.domain_ref);
    let global = format!("{prefix}.{d}");
    for entry in &status.dns {
        let region = format!("{prefix}.{}.{d}", entry.region);
        for zone in &entry.zones {
            let name = format!("{prefix}.{zone}.{}.{d}", entry.region);
            names
                .entry(name)
                .or_default()
                .add(&entry.load_balancer, &region);
        }
        names
            .entry(region)
            .or_default()
            .add(&entry.load_balancer, &global);
        names
            .entry(global.clone())
            .or_default()
            .add(&entry.load_balancer, "");
    }
    if !record.dns_prefix.is_empty() {
        let name = format!("{}.{d}", record.dns_prefix);
        names.entry(name).or_default().up.insert(global);
    }
}

/// Everything that could answer for one DNS name, before choosing.
#[derive(Default)]
struct Candidates {
    ips: BTreeSet<String>,
    hostnames: BTreeSet<String>,
    /// CNAME targets one level up (from clusters with no address).
    up: BTreeSet<String>,
}

impl Candidates {
    fn add(&mut self, lbs: &[LbIngress], up: &str) {
        for lb in lbs {
            let values = [lb.ip.as_str(), lb.hostname.as_str()];
            let ips: Vec<&str> = values
                .iter()
                .copied()
                .filter(|v| v.parse::<IpAddr>().is_ok())
                .collect();
            if !ips.is_empty() {
                self.ips.extend(ips.into_iter().map(str::to_string));
            } else {
                let names = values.iter().filter(|v| !v.is_empty());
                self.hostnames.extend(names.map(|v| v.to_string()));
            }
        }
        // Used only when no cluster gives the name an address (see `decide`).
        if !up.is_empty() {
            self.up.insert(up.to_string());
        }
    }

    /// IPs → A; else one hostname → CNAME to it; else several hostnames →
    /// CNAME to the first; else CNAME up; else no record.
    fn decide(self, name: &str, warnings: &mut Vec<String>) -> Option<(RecordType, Vec<String>)> {
        let hostnames: Vec<String> = self.hostnames.into_iter().collect();
        if !self.ips.is_empty() {
            if !hostnames.is_empty() {
                warnings.push(format!(
                    "{name}: A record for the load balancer IPs; hostname load balancers {} dropped (names are not resolved)",
                    hostnames.join(", ")
                ));
            }
            return Some((RecordType::A, self.ips.into_iter().collect()));
        }
        if let Some(first) = hostnames.first() {
            if hostnames.len() > 1 {
                warnings.push(format!(
                    "{name}: a CNAME has one target; using {first}, dropping hostname load balancers {}",
                    hostnames[1..].join(", ")
                ));
            }
            return Some((RecordType::Cname, vec![first.clone()]));
        }
        let up: Vec<String> = self.up.into_iter().collect();
        if up.len() > 1 {
            // Cannot happen with KubeFed's naming (a name has one parent);
            // keep the first rather than emit an invalid CNAME.
            warnings.push(format!(
                "{name}: several parent names {}; using {}",
                up.join(", "),
                up[0]
            ));
        }
        up.into_iter().next().map(|t| (RecordType::Cname, vec![t]))
    }
}

/// Zones sorted and unique, so that the order a cluster reports them in
/// does not rewrite the status.
fn sorted_zones(zones: &[String]) -> Vec<String> {
    let set: BTreeSet<&String> = zones.iter().filter(|z| !z.is_empty()).collect();
    set.into_iter().cloned().collect()
}

fn lb_is_empty(lb: &LbIngress) -> bool {
    lb.ip.is_empty() && lb.hostname.is_empty()
}

/// Load balancer ingress sorted by IP, then hostname, without empty entries
/// or duplicates.
fn sorted_lb(lbs: &[LbIngress]) -> Vec<LbIngress> {
    let set: BTreeSet<&LbIngress> = lbs.iter().filter(|lb| !lb_is_empty(lb)).collect();
    set.into_iter().cloned().collect()
}

/// The group of `apiVersion` if it is a DNS group; absent means "trust the kind".
fn check_group(obj: &Value) -> Result<String, FieldError> {
    match obj.get("apiVersion").and_then(Value::as_str) {
        None => Ok(DNS_GROUP.to_string()),
        Some(av) => {
            let group = av.split_once('/').map(|(g, _)| g).unwrap_or("");
            if DNS_GROUPS.contains(&group) {
                Ok(group.to_string())
            } else {
                Err(FieldError::new(
                    "apiVersion",
                    FieldProblem::NotOneOf {
                        value: av.to_string(),
                        allowed: DNS_GROUPS.join(" or "),
                    },
                ))
            }
        }
    }
}

fn required(value: Option<String>, path: &str) -> Result<String, FieldError> {
    value
        .filter(|v| !v.is_empty())
        .ok_or_else(|| FieldError::new(path, FieldProblem::Required))
}

/// `null` reads as the zero value, as with Go's decoder: the CRDs mark
/// these fields nullable.
fn or_default<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(
    d: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// [`ClusterDns::load_balancer`] on the wire.
mod load_balancer {
    use super::LbIngress;
    use schemars::JsonSchema;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct LoadBalancerStatus {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ingress: Vec<LbIngress>,
    }

    pub fn serialize<S: Serializer>(ingress: &[LbIngress], s: S) -> Result<S::Ok, S::Error> {
        let ingress = ingress.to_vec();
        LoadBalancerStatus { ingress }.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<LbIngress>, D::Error> {
        Ok(LoadBalancerStatus::deserialize(d)?.ingress)
    }
}

// The parts of record and Domain objects the DNS code reads (their CRD
// types live in `api::dns`, with the kube derive). `null` reads as absent.

#[derive(Deserialize, Default)]
struct MetadataView {
    name: Option<String>,
    namespace: Option<String>,
}

#[derive(Deserialize)]
struct RecordView {
    metadata: Option<MetadataView>,
    spec: Option<RecordSpecView>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RecordSpecView {
    domain_ref: Option<String>,
    #[serde(rename = "recordTTL")]
    record_ttl: Option<i64>,
    dns_prefix: Option<String>,
    external_name: Option<String>,
    allow_service_without_endpoints: Option<bool>,
    hosts: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DomainView {
    metadata: Option<MetadataView>,
    domain: Option<String>,
    name_server: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    // Upstream fixture: ns `test`, name `nginx`, domainRef `galactic`,
    // domain `example.com`; c1 in us/us1, c2 in eu/eu1.
    const G: &str = "nginx.test.galactic.svc.example.com";
    const US: &str = "nginx.test.galactic.svc.us.example.com";
    const US1: &str = "nginx.test.galactic.svc.us1.us.example.com";
    const EU: &str = "nginx.test.galactic.svc.eu.example.com";
    const EU1: &str = "nginx.test.galactic.svc.eu1.eu.example.com";
    const LB1: &str = "10.20.30.1";
    const LB2: &str = "10.20.30.2";
    const LB3: &str = "10.20.30.3";

    fn record() -> DnsRecord {
        DnsRecord::service("test", "nginx", "galactic")
    }

    fn entry(cluster: &str, region: &str, zones: &[&str], lbs: &[LbIngress]) -> ClusterDns {
        ClusterDns {
            cluster: cluster.into(),
            load_balancer: lbs.to_vec(),
            zones: zones.iter().map(|z| z.to_string()).collect(),
            region: region.into(),
        }
    }

    fn c1(lbs: &[LbIngress]) -> ClusterDns {
        entry("c1", "us", &["us1"], lbs)
    }

    fn c2(lbs: &[LbIngress]) -> ClusterDns {
        entry("c2", "eu", &["eu1"], lbs)
    }

    fn status(dns: Vec<ClusterDns>) -> RecordStatus {
        RecordStatus {
            domain: "example.com".into(),
            dns,
        }
    }

    fn ips(list: &[&str]) -> Vec<LbIngress> {
        list.iter().map(|ip| LbIngress::ip(ip)).collect()
    }

    fn a(name: &str, targets: &[&str]) -> (String, RecordType, Vec<String>) {
        let t = targets.iter().map(|t| t.to_string()).collect();
        (name.to_string(), RecordType::A, t)
    }

    fn cname(name: &str, target: &str) -> (String, RecordType, Vec<String>) {
        (
            name.to_string(),
            RecordType::Cname,
            vec![target.to_string()],
        )
    }

    /// (dnsName, type, targets) of every endpoint, in output order.
    fn summary(plan: &EndpointsPlan) -> Vec<(String, RecordType, Vec<String>)> {
        plan.endpoints
            .iter()
            .map(|e| (e.dns_name.clone(), e.record_type, e.targets.clone()))
            .collect()
    }

    // Upstream dnsendpoint/service_test.go cases (hostname resolution is
    // replaced by the no-resolution rule, tested separately below).
    #[test]
    fn upstream_service_cases() {
        let cases = [
            ("no clusters", vec![], vec![]),
            (
                "one LB in c1",
                vec![c1(&ips(&[LB1]))],
                vec![a(G, &[LB1]), a(US, &[LB1]), a(US1, &[LB1])],
            ),
            (
                "LBs in both clusters",
                vec![c1(&ips(&[LB1])), c2(&ips(&[LB2]))],
                vec![
                    a(EU, &[LB2]),
                    a(EU1, &[LB2]),
                    a(G, &[LB1, LB2]),
                    a(US, &[LB1]),
                    a(US1, &[LB1]),
                ],
            ),
            (
                "no LB in c2: its names CNAME up",
                vec![c1(&ips(&[LB1])), c2(&[])],
                vec![
                    cname(EU, G),
                    cname(EU1, EU),
                    a(G, &[LB1]),
                    a(US, &[LB1]),
                    a(US1, &[LB1]),
                ],
            ),
            (
                "no LBs anywhere: only the 4 CNAMEs",
                vec![c1(&[]), c2(&[])],
                vec![cname(EU, G), cname(EU1, EU), cname(US, G), cname(US1, US)],
            ),
            (
                "several LBs per cluster",
                vec![c1(&ips(&[LB2, LB1])), c2(&ips(&[LB3]))],
                vec![
                    a(EU, &[LB3]),
                    a(EU1, &[LB3]),
                    a(G, &[LB1, LB2, LB3]),
                    a(US, &[LB1, LB2]),
                    a(US1, &[LB1, LB2]),
                ],
            ),
            (
                "multi-zone cluster: one A record per zone",
                vec![entry("c1", "us", &["us1", "us2"], &ips(&[LB1]))],
                vec![
                    a(G, &[LB1]),
                    a(US, &[LB1]),
                    a(US1, &[LB1]),
                    a("nginx.test.galactic.svc.us2.us.example.com", &[LB1]),
                ],
            ),
            (
                "two clusters in one zone share the names",
                vec![
                    c1(&ips(&[LB1])),
                    entry("c3", "us", &["us1"], &ips(&[LB1, LB2])),
                ],
                vec![a(G, &[LB1, LB2]), a(US, &[LB1, LB2]), a(US1, &[LB1, LB2])],
            ),
        ];
        for (what, dns, want) in cases {
            let plan = dns_endpoints(&record(), &status(dns));
            assert_eq!(summary(&plan), want, "{what}");
            assert_eq!(plan.name, "service-nginx", "{what}");
            assert_eq!(plan.namespace, "test", "{what}");
            assert!(plan.warnings.is_empty(), "{what}: {:?}", plan.warnings);
            assert!(
                plan.endpoints
                    .iter()
                    .all(|e| e.record_ttl == DEFAULT_TTL && e.labels.is_empty()),
                "{what}"
            );
        }
    }

    #[test]
    fn custom_ttl() {
        let mut r = record();
        r.record_ttl = 300;
        let plan = dns_endpoints(&r, &status(vec![c1(&ips(&[LB1])), c2(&[])]));
        assert_eq!(plan.endpoints.len(), 5);
        assert!(plan.endpoints.iter().all(|e| e.record_ttl == 300));
        assert_eq!(plan.spec()["endpoints"][0]["recordTTL"], json!(300));
    }

    #[test]
    fn dns_prefix_adds_a_cname_to_the_global_name() {
        let mut r = record();
        r.dns_prefix = "foo".into();
        let plan = dns_endpoints(&r, &status(vec![c1(&ips(&[LB1]))]));
        assert_eq!(
            summary(&plan),
            vec![
                cname("foo.example.com", G),
                a(G, &[LB1]),
                a(US, &[LB1]),
                a(US1, &[LB1])
            ]
        );
    }

    #[test]
    fn external_name_replaces_the_service_name_and_labels_endpoints() {
        let mut r = record();
        r.external_name = "foo".into();
        let plan = dns_endpoints(&r, &status(vec![c1(&ips(&[LB1]))]));
        assert_eq!(
            summary(&plan),
            vec![
                a("foo.test.galactic.svc.example.com", &[LB1]),
                a("foo.test.galactic.svc.us.example.com", &[LB1]),
                a("foo.test.galactic.svc.us1.us.example.com", &[LB1]),
            ]
        );
        for e in &plan.endpoints {
            assert_eq!(
                e.labels.get("serviceName").map(String::as_str),
                Some("nginx")
            );
            assert_eq!(e.to_value()["labels"], json!({"serviceName": "nginx"}));
        }
        assert_eq!(plan.name, "service-nginx");
    }

    fn observed(
        cluster: &str,
        ready: bool,
        region: &str,
        zones: &[&str],
        lbs: &[LbIngress],
    ) -> ClusterObservation {
        ClusterObservation {
            cluster: cluster.into(),
            ready,
            region: region.into(),
            zones: zones.iter().map(|z| z.to_string()).collect(),
            load_balancer: lbs.to_vec(),
            has_ready_endpoints: true,
        }
    }

    fn galactic() -> Domain {
        Domain::new("galactic", "example.com")
    }

    #[test]
    fn status_lists_ready_clusters_sorted_with_sorted_load_balancers() {
        let obs = [
            observed(
                "c2",
                true,
                "eu",
                &["eu1"],
                &[
                    LbIngress::hostname("b.elb"),
                    LbIngress::ip(LB2),
                    LbIngress::ip(LB1),
                    LbIngress::default(),
                ],
            ),
            observed("c1", true, "us", &["us1"], &ips(&[LB3])),
        ];
        let plan =
            record_status(&record(), Some(&galactic()), &obs, &RecordStatus::default()).unwrap();
        let st = plan.status.unwrap();
        assert_eq!(st.domain, "example.com");
        assert_eq!(
            st.dns,
            vec![
                c1(&ips(&[LB3])),
                c2(&[
                    LbIngress::hostname("b.elb"),
                    LbIngress::ip(LB1),
                    LbIngress::ip(LB2)
                ]),
            ]
        );
        assert!(plan.warnings.is_empty());
    }

    #[test]
    fn endpoints_not_ready_hide_the_load_balancer_unless_allowed() {
        let mut o = observed("c1", true, "us", &["us1"], &ips(&[LB1]));
        o.has_ready_endpoints = false;
        let mut r = record();
        let st = record_status(
            &r,
            Some(&galactic()),
            &[o.clone()],
            &RecordStatus::default(),
        )
        .unwrap()
        .status
        .unwrap();
        assert_eq!(st.dns, vec![c1(&[])]);
        assert_eq!(
            summary(&dns_endpoints(&r, &st)),
            vec![cname(US, G), cname(US1, US)]
        );

        r.allow_service_without_endpoints = true;
        let st = record_status(&r, Some(&galactic()), &[o], &RecordStatus::default())
            .unwrap()
            .status
            .unwrap();
        assert_eq!(st.dns, vec![c1(&ips(&[LB1]))]);
    }

    // The failover the seeds describe: an unready cluster keeps an entry
    // with no load balancer, so its zone and region names CNAME up to the
    // healthy clusters (upstream's dead code dropped it instead).
    #[test]
    fn unready_cluster_names_cname_up_to_healthy_clusters() {
        let obs = [
            observed("c1", true, "us", &["us1"], &ips(&[LB1])),
            observed("c2", false, "eu", &["eu1"], &ips(&[LB2])),
        ];
        let plan =
            record_status(&record(), Some(&galactic()), &obs, &RecordStatus::default()).unwrap();
        let st = plan.status.unwrap();
        assert_eq!(st.dns, vec![c1(&ips(&[LB1])), c2(&[])]);
        let plan = dns_endpoints(&record(), &st);
        assert_eq!(
            summary(&plan),
            vec![
                cname(EU, G),
                cname(EU1, EU),
                a(G, &[LB1]),
                a(US, &[LB1]),
                a(US1, &[LB1]),
            ]
        );
    }

    #[test]
    fn unready_cluster_without_topology_uses_previous_entry_or_is_dropped() {
        let obs = [
            observed("c1", true, "us", &["us1"], &ips(&[LB1])),
            observed("c2", false, "", &[], &[]),
        ];
        let previous = status(vec![c1(&ips(&[LB1])), c2(&ips(&[LB2]))]);
        let plan = record_status(&record(), Some(&galactic()), &obs, &previous).unwrap();
        assert_eq!(plan.status.unwrap().dns, vec![c1(&ips(&[LB1])), c2(&[])]);
        assert!(plan.warnings.is_empty());

        let plan =
            record_status(&record(), Some(&galactic()), &obs, &RecordStatus::default()).unwrap();
        assert_eq!(plan.status.unwrap().dns, vec![c1(&ips(&[LB1]))]);
        assert_eq!(plan.warnings.len(), 1);
        assert!(plan.warnings[0].contains("\"c2\""), "{:?}", plan.warnings);
    }

    #[test]
    fn ready_cluster_without_region_or_zones_is_an_error() {
        for (region, zones) in [("", vec!["us1"]), ("us", vec![])] {
            let o = observed("c1", true, region, &zones, &[]);
            let err = record_status(&record(), Some(&galactic()), &[o], &RecordStatus::default())
                .unwrap_err();
            assert_eq!(
                err.to_string(),
                "ServiceDNSRecord \"test/nginx\": Cluster \"c1\" does not have Region or Zones Attributes"
            );
        }
    }

    #[test]
    fn missing_domain_leaves_status_alone() {
        let o = observed("c1", true, "us", &["us1"], &ips(&[LB1]));
        let plan = record_status(
            &record(),
            None,
            std::slice::from_ref(&o),
            &RecordStatus::default(),
        )
        .unwrap();
        assert_eq!(plan.status, None);
        assert!(plan.warnings[0].contains("Domain \"galactic\" not found"));
        let other = Domain::new("other", "example.org");
        assert!(record_status(&record(), Some(&other), &[o], &RecordStatus::default()).is_err());
    }

    #[test]
    fn hostname_load_balancers_are_never_resolved() {
        let elb = "a1.elb.amazonaws.com";
        let elb2 = "b2.elb.amazonaws.com";
        // One hostname, no IP: CNAME to it.
        let plan = dns_endpoints(&record(), &status(vec![c1(&[LbIngress::hostname(elb)])]));
        assert_eq!(
            summary(&plan),
            vec![cname(G, elb), cname(US, elb), cname(US1, elb)]
        );
        assert!(plan.warnings.is_empty());

        // IPs and hostnames for one name: A for the IPs, hostname dropped.
        let plan = dns_endpoints(
            &record(),
            &status(vec![c1(&ips(&[LB1])), c2(&[LbIngress::hostname(elb)])]),
        );
        assert_eq!(
            summary(&plan),
            vec![
                cname(EU, elb),
                cname(EU1, elb),
                a(G, &[LB1]),
                a(US, &[LB1]),
                a(US1, &[LB1])
            ]
        );
        assert_eq!(plan.warnings.len(), 1);
        assert!(
            plan.warnings[0].starts_with(G) && plan.warnings[0].contains(elb),
            "{:?}",
            plan.warnings
        );

        // Several hostnames, no IP: CNAME to the first, the others reported.
        let plan = dns_endpoints(
            &record(),
            &status(vec![
                c1(&[LbIngress::hostname(elb2)]),
                c2(&[LbIngress::hostname(elb)]),
            ]),
        );
        assert_eq!(
            summary(&plan),
            vec![
                cname(EU, elb),
                cname(EU1, elb),
                cname(G, elb),
                cname(US, elb2),
                cname(US1, elb2)
            ]
        );
        assert_eq!(plan.warnings.len(), 1);
        assert!(plan.warnings[0].starts_with(G) && plan.warnings[0].contains(elb2));

        // An entry with both an IP and a hostname is one machine: IP only.
        let both = LbIngress {
            ip: LB1.into(),
            hostname: elb.into(),
        };
        let plan = dns_endpoints(&record(), &status(vec![c1(&[both])]));
        assert_eq!(
            summary(&plan),
            vec![a(G, &[LB1]), a(US, &[LB1]), a(US1, &[LB1])]
        );
        assert!(plan.warnings.is_empty());

        // An IP written in the hostname field is still an IP.
        let plan = dns_endpoints(&record(), &status(vec![c1(&[LbIngress::hostname(LB2)])]));
        assert_eq!(plan.endpoints[0].record_type, RecordType::A);
    }

    #[test]
    fn same_input_gives_byte_identical_output() {
        let obs = vec![
            observed(
                "c2",
                true,
                "eu",
                &["eu1"],
                &[LbIngress::hostname("x.elb"), LbIngress::ip(LB2)],
            ),
            observed("c1", true, "us", &["us1", "us2"], &ips(&[LB3, LB1])),
            observed("c3", false, "ap", &["ap1"], &[]),
        ];
        let mut r = record();
        r.dns_prefix = "www".into();
        let run = |obs: &[ClusterObservation]| {
            let st = record_status(&r, Some(&galactic()), obs, &RecordStatus::default())
                .unwrap()
                .status
                .unwrap();
            let plan = dns_endpoints(&r, &st);
            (
                serde_json::to_string(&st.to_value()).unwrap(),
                serde_json::to_string(&plan.object()).unwrap(),
                plan,
            )
        };
        let first = run(&obs);
        assert_eq!(first, run(&obs));
        let mut reversed = obs.clone();
        reversed.reverse();
        for o in &mut reversed {
            o.load_balancer.reverse();
            o.zones.reverse();
        }
        assert_eq!(
            first.0,
            run(&reversed).0,
            "status ignores observation order"
        );
        assert_eq!(
            first.1,
            run(&reversed).1,
            "endpoints ignore observation order"
        );
        let names: Vec<&str> = first
            .2
            .endpoints
            .iter()
            .map(|e| e.dns_name.as_str())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        assert!(!first.2.needs_write(Some(&first.2.object())));
        assert!(first.2.needs_write(None));
        assert!(
            first
                .2
                .needs_write(Some(&json!({"spec": {"endpoints": []}})))
        );
    }

    #[test]
    fn both_api_group_spellings_are_accepted() {
        for group in DNS_GROUPS {
            let obj = json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "ServiceDNSRecord",
                "metadata": {"name": "nginx", "namespace": "test"},
                "spec": {"domainRef": "galactic", "recordTTL": 300, "dnsPrefix": "foo",
                    "externalName": "bar", "allowServiceWithoutEndpoints": true}});
            let r = DnsRecord::from_value(&obj).unwrap();
            assert_eq!(r.api_group, group);
            assert_eq!(
                (
                    r.record_ttl,
                    r.dns_prefix.as_str(),
                    r.external_name.as_str()
                ),
                (300, "foo", "bar")
            );
            assert!(r.allow_service_without_endpoints);
            let plan = dns_endpoints(&r, &RecordStatus::default());
            assert_eq!(
                plan.object()["apiVersion"],
                json!(format!("{group}/v1alpha1"))
            );
            let d = json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "Domain",
                "metadata": {"name": "galactic", "namespace": "kube-federation-system"},
                "domain": "example.com", "nameServer": "ns1.example.com"});
            let d = Domain::from_value(&d).unwrap();
            assert_eq!(d.domain, "example.com");
            assert_eq!(d.name_server.as_deref(), Some("ns1.example.com"));
        }
        let bad = [
            json!({"apiVersion": "dns.example.com/v1alpha1", "kind": "ServiceDNSRecord",
                "metadata": {"name": "n", "namespace": "t"}, "spec": {"domainRef": "g"}}),
            json!({"kind": "ServiceDNSRecord", "metadata": {"name": "n", "namespace": "t"}, "spec": {}}),
            json!({"kind": "ServiceDNSRecord", "metadata": {"name": "n", "namespace": "t"},
                "spec": {"domainRef": "g", "recordTTL": -1}}),
            json!({"kind": "FederatedService", "metadata": {"name": "n", "namespace": "t"}}),
        ];
        for obj in bad {
            assert!(DnsRecord::from_value(&obj).is_err(), "{obj}");
        }
        assert!(Domain::from_value(&json!({"kind": "Domain", "metadata": {"name": "g"}})).is_err());
    }

    #[test]
    fn status_json_matches_upstream_and_round_trips() {
        let st = status(vec![
            c1(&[LbIngress::ip(LB1), LbIngress::hostname("h.elb")]),
            c2(&[]),
        ]);
        let v = st.to_value();
        assert_eq!(
            v,
            json!({"domain": "example.com", "dns": [
                {"cluster": "c1", "loadBalancer": {"ingress": [{"ip": LB1}, {"hostname": "h.elb"}]},
                 "zones": ["us1"], "region": "us"},
                {"cluster": "c2", "loadBalancer": {}, "zones": ["eu1"], "region": "eu"},
            ]})
        );
        assert_eq!(RecordStatus::from_value(Some(&v)).unwrap(), st);
        assert_eq!(
            RecordStatus::from_value(None).unwrap(),
            RecordStatus::default()
        );
        assert!(RecordStatus::from_value(Some(&json!({"dns": [{"zones": "us1"}]}))).is_err());
        assert_eq!(
            dns_endpoints(&record(), &st).endpoints[0].to_value(),
            json!({"dnsName": EU, "targets": [G], "recordType": "CNAME", "recordTTL": 180})
        );
    }

    #[test]
    fn type_errors_name_the_object_and_the_field_path() {
        let obj = json!({"kind": "ServiceDNSRecord", "metadata": {"name": "nginx", "namespace": "test"},
            "spec": {"domainRef": "galactic", "recordTTL": "x"}});
        assert_eq!(
            DnsRecord::from_value(&obj).unwrap_err().to_string(),
            "ServiceDNSRecord \"test/nginx\": spec.recordTTL: invalid type: string \"x\", expected i64"
        );
        let obj = json!({"kind": "IngressDNSRecord", "metadata": {"name": "web", "namespace": "test"},
            "spec": {"hosts": ["a.example.com", 5]}});
        let err = DnsRecord::from_value(&obj).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "IngressDNSRecord \"test/web\": spec.hosts[1]: invalid type: integer `5`"
            ),
            "{err}"
        );
        let d = json!({"kind": "Domain", "metadata": {"name": "galactic"}, "domain": "example.com",
            "nameServer": false});
        let err = Domain::from_value(&d).unwrap_err().to_string();
        assert!(
            err.starts_with("Domain \"galactic\": nameServer: invalid type: boolean"),
            "{err}"
        );

        let mut v = status(vec![c1(&ips(&[LB1])), c2(&ips(&[LB2]))]).to_value();
        v["dns"][1]["loadBalancer"]["ingress"][0]["ip"] = json!(5);
        assert_eq!(
            RecordStatus::from_value(Some(&v)).unwrap_err().to_string(),
            "status.dns[1].loadBalancer.ingress[0].ip: invalid type: integer `5`, expected a string"
        );
        let err = RecordStatus::from_value(Some(&json!("up")))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("status: invalid type: string"), "{err}");
    }

    // Go's decoder reads `null` as the zero value, and the CRDs mark these
    // fields nullable.
    #[test]
    fn null_reads_as_absent() {
        let obj = json!({"kind": "ServiceDNSRecord", "metadata": {"name": "nginx", "namespace": "test"},
            "spec": {"domainRef": "galactic", "recordTTL": null, "dnsPrefix": null,
                "externalName": null, "allowServiceWithoutEndpoints": null, "hosts": null}});
        assert_eq!(DnsRecord::from_value(&obj).unwrap(), record());
        let d = json!({"kind": "Domain", "metadata": {"name": "galactic"}, "domain": "example.com",
            "nameServer": null});
        assert_eq!(Domain::from_value(&d).unwrap(), galactic());
        let d = json!({"kind": "Domain", "metadata": {"name": "galactic"}, "domain": "example.com",
            "nameServer": ""});
        assert_eq!(Domain::from_value(&d).unwrap(), galactic());
        let v = json!({"domain": null, "dns": [{"cluster": "c1", "region": null,
            "loadBalancer": {"ingress": [{"ip": LB1, "hostname": null}]}}]});
        assert_eq!(
            RecordStatus::from_value(Some(&v)).unwrap(),
            RecordStatus {
                domain: String::new(),
                dns: vec![entry("c1", "", &[], &ips(&[LB1]))],
            }
        );
    }

    #[test]
    fn service_status_without_domain_gives_no_records() {
        let st = RecordStatus {
            domain: String::new(),
            dns: vec![c1(&ips(&[LB1]))],
        };
        let plan = dns_endpoints(&record(), &st);
        assert!(plan.endpoints.is_empty());
        assert_eq!(plan.warnings.len(), 1);
    }

    // Upstream dnsendpoint/ingress_test.go cases.
    #[test]
    fn upstream_ingress_cases() {
        let ing = |cluster: &str, lbs: &[LbIngress]| ClusterDns {
            cluster: cluster.into(),
            load_balancer: lbs.to_vec(),
            ..ClusterDns::default()
        };
        let st = |dns: Vec<ClusterDns>| RecordStatus {
            domain: String::new(),
            dns,
        };
        let one = DnsRecord::ingress("test", "ingress", &["foo.bar.test"]);
        let two = DnsRecord::ingress("test", "ingress", &["foo.bar.test", "bar.foo.test"]);
        let cases = [
            (&one, st(vec![]), vec![]),
            (&one, st(vec![ing("c1", &[])]), vec![]),
            (
                &one,
                st(vec![ing("c1", &ips(&[LB1]))]),
                vec![a("foo.bar.test", &[LB1])],
            ),
            (
                &one,
                st(vec![ing("c1", &ips(&[LB1])), ing("c2", &ips(&[LB2]))]),
                vec![a("foo.bar.test", &[LB1, LB2])],
            ),
            (
                &two,
                st(vec![ing("c1", &ips(&[LB1])), ing("c2", &ips(&[LB2]))]),
                vec![
                    a("bar.foo.test", &[LB1, LB2]),
                    a("foo.bar.test", &[LB1, LB2]),
                ],
            ),
            (
                &one,
                st(vec![ing("c1", &[LbIngress::hostname("x.elb")])]),
                vec![cname("foo.bar.test", "x.elb")],
            ),
        ];
        for (r, status, want) in cases {
            let plan = dns_endpoints(r, &status);
            assert_eq!(summary(&plan), want, "{status:?}");
            assert_eq!(plan.name, "ingress-ingress");
            assert!(plan.endpoints.iter().all(|e| e.record_ttl == DEFAULT_TTL));
        }
        let mut ttl = one.clone();
        ttl.record_ttl = 300;
        let plan = dns_endpoints(&ttl, &st(vec![ing("c1", &ips(&[LB1]))]));
        assert_eq!(plan.endpoints[0].record_ttl, 300);
    }

    #[test]
    fn ingress_status_lists_ready_clusters_only() {
        let r = DnsRecord::ingress("test", "ingress", &["foo.bar.test"]);
        let mut unready = observed("c2", false, "", &[], &ips(&[LB2]));
        unready.has_ready_endpoints = false;
        let obs = [unready, observed("c1", true, "", &[], &ips(&[LB1]))];
        let st = record_status(&r, None, &obs, &RecordStatus::default())
            .unwrap()
            .status
            .unwrap();
        assert_eq!(
            st.to_value(),
            json!({"dns": [{"cluster": "c1", "loadBalancer": {"ingress": [{"ip": LB1}]}}]})
        );
    }

    #[test]
    fn ready_endpoints_from_slices_and_from_endpoints() {
        let slice = |conds: Vec<Value>| json!({"endpoints": conds.into_iter().map(|c| json!({"addresses": ["10.0.0.1"], "conditions": c})).collect::<Vec<_>>()});
        assert!(!slices_have_ready_endpoints(&[]), "no slice");
        assert!(
            !slices_have_ready_endpoints(&[json!({"endpoints": null})]),
            "a slice without endpoints"
        );
        assert!(!slices_have_ready_endpoints(&[slice(vec![
            json!({"ready": false})
        ])]));
        assert!(
            slices_have_ready_endpoints(&[slice(vec![json!({})])]),
            "unknown is ready"
        );
        assert!(
            slices_have_ready_endpoints(&[
                slice(vec![json!({"ready": false})]),
                slice(vec![json!({"ready": false}), json!({"ready": true})])
            ]),
            "every slice of the Service counts"
        );
        assert!(!endpoints_have_ready_addresses(&json!({})));
        assert!(!endpoints_have_ready_addresses(
            &json!({"subsets": [{"notReadyAddresses": [{"ip": "10.0.0.1"}]}]})
        ));
        assert!(endpoints_have_ready_addresses(
            &json!({"subsets": [{"addresses": []}, {"addresses": [{"ip": "10.0.0.1"}]}]})
        ));
    }
}
