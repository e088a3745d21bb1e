//! The DNS pass of reconcile (after the sync pass): cluster topology from
//! member Nodes, each ServiceDNSRecord's/IngressDNSRecord's status from the
//! members' load balancers, and the DNSEndpoint that ExternalDNS turns into
//! records — written only when they change.

use crate::apply::{api_error, api_resource, dynamic_api};
use crate::clients::host::Host;
use crate::clients::members::{Health, Member, ProbedMember};
use crate::core::dns::{
    ClusterObservation, DnsRecord, Domain, LbIngress, RecordKind, RecordStatus, dns_endpoints,
    endpoints_have_ready_addresses, record_status, slices_have_ready_endpoints,
};
use crate::core::outcome::{Change, Failure, Place};
use crate::core::run::shard::{self};
use crate::sync::run::mode::HostWriter;
use crate::sync::run::observe::Observation;
use crate::sync::run::report::Report;
use anyhow::Result;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

const GROUP: &str = "multiclusterdns.kubefed.io";

/// A resource of the DNS API.
fn ar(kind: &str, plural: &str) -> ApiResource {
    api_resource(GROUP, "v1alpha1", kind, plural)
}

/// Region and zones of a member from its Nodes' labels (the newer
/// `topology.kubernetes.io/*` first, then `failure-domain.beta...`).
pub fn topology(nodes: &[Value]) -> (Option<String>, Vec<String>) {
    let label = |n: &Value, k: &str| {
        n["metadata"]["labels"][format!("topology.kubernetes.io/{k}")]
            .as_str()
            .or_else(|| {
                n["metadata"]["labels"][format!("failure-domain.beta.kubernetes.io/{k}")].as_str()
            })
            .map(str::to_string)
    };
    let region = nodes.iter().find_map(|n| label(n, "region"));
    let zones: BTreeSet<String> = nodes.iter().filter_map(|n| label(n, "zone")).collect();
    (region, zones.into_iter().collect())
}

/// Records the members' topology in their KubeFedCluster status. Node
/// labels win; a cluster whose Nodes carry none keeps what its status says
/// (so it can be set by hand). Returns (region, zones) per cluster.
pub async fn refresh_topology(
    host: &Host,
    members: &[ProbedMember],
    writes: bool,
    report: &mut Report,
) -> BTreeMap<String, (String, Vec<String>)> {
    let kfc = api_resource(
        "core.kubefed.io",
        "v1beta1",
        "KubeFedCluster",
        "kubefedclusters",
    );
    let mut out = BTreeMap::new();
    for ProbedMember {
        member: m,
        health: h,
    } in members
    {
        let status = m.cluster.status.clone().unwrap_or_default();
        let mut region = status.region.clone().unwrap_or_default();
        let mut zones = status.zones.clone();
        if let (true, Ok(client)) = (h.is_ready(), &m.client) {
            let nodes = dynamic_api(client, None, &api_resource("", "v1", "Node", "nodes"));
            match nodes.list(&ListParams::default()).await {
                Ok(list) => {
                    let nodes: Vec<Value> = list
                        .items
                        .into_iter()
                        .map(|n| serde_json::to_value(n).unwrap_or_default())
                        .collect();
                    let (r, z) = topology(&nodes);
                    if r.is_some() || !z.is_empty() {
                        let (r, z) = (r.unwrap_or_default(), z);
                        if (r.as_str(), &z) != (region.as_str(), &zones) && writes {
                            let patch = json!({"status": {"region": r, "zones": z}});
                            let api = dynamic_api(&host.client, Some(&host.namespace), &kfc);
                            match api
                                .patch_status(
                                    &m.name,
                                    &PatchParams::default(),
                                    &Patch::Merge(&patch),
                                )
                                .await
                            {
                                Ok(_) => report.host_writes += 1,
                                Err(e) => report.failures.push(Failure::at(
                                    Place::Host,
                                    format!(
                                        "topology of {}: {}",
                                        m.name,
                                        crate::error::one_line(&api_error(e))
                                    ),
                                )),
                            }
                        }
                        region = r;
                        zones = z;
                    }
                }
                Err(e) => report.warnings.push(format!(
                    "{}: cannot list nodes for topology: {}",
                    m.name,
                    crate::error::one_line(&api_error(e))
                )),
            }
        }
        out.insert(m.name.clone(), (region, zones));
    }
    out
}

/// The DNS pass over every record in the run's scope: those of its
/// namespace (`-n`, or a namespace-scoped federation's own) and shard. The
/// members' topology goes into their KubeFedClusters when the run writes
/// cluster state (not in dry runs, and in one shard only).
pub async fn dns_pass(w: HostWriter<'_>, seen: &Observation, report: &mut Report) -> Result<()> {
    let (host, members) = (w.host, &seen.members);
    let writes_topology = !w.plans() && seen.scope.writes_cluster_state();
    let topology = refresh_topology(host, members, writes_topology, report).await;
    let domains: Vec<Value> = dynamic_api(
        &host.client,
        Some(&host.namespace),
        &ar("Domain", "domains"),
    )
    .list(&ListParams::default())
    .await
    .map_err(api_error)?
    .items
    .into_iter()
    .map(|d| serde_json::to_value(d).unwrap_or_default())
    .collect();
    for (kind, plural, member_ar) in [
        (
            "ServiceDNSRecord",
            "servicednsrecords",
            api_resource("", "v1", "Service", "services"),
        ),
        (
            "IngressDNSRecord",
            "ingressdnsrecords",
            api_resource("networking.k8s.io", "v1", "Ingress", "ingresses"),
        ),
    ] {
        let records_api = dynamic_api(&host.client, seen.namespace.as_deref(), &ar(kind, plural));
        let records = records_api
            .list(&ListParams::default())
            .await
            .map_err(api_error)?
            .items
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<Vec<_>, _>>()?;
        for obj in shard::retain_owned(seen.scope.shard, records) {
            if let Err(e) =
                one_record(w, members, &topology, &domains, &obj, &member_ar, report).await
            {
                report.failures.push(Failure::of(
                    Place::Host,
                    format!(
                        "{kind} {}/{}",
                        obj["metadata"]["namespace"].as_str().unwrap_or(""),
                        obj["metadata"]["name"].as_str().unwrap_or(""),
                    ),
                    crate::error::one_line(&e),
                ));
            }
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn one_record(
    w: HostWriter<'_>,
    members: &[ProbedMember],
    topology: &BTreeMap<String, (String, Vec<String>)>,
    domains: &[Value],
    obj: &Value,
    member_ar: &ApiResource,
    report: &mut Report,
) -> Result<()> {
    let record = DnsRecord::from_value(obj)?;
    let domain = domains
        .iter()
        .find(|d| d["metadata"]["name"].as_str() == Some(record.domain_ref.as_str()))
        .map(Domain::from_value)
        .transpose()?;
    let mut observations = Vec::new();
    for ProbedMember {
        member: m,
        health: h,
    } in members
    {
        observations.push(observe_member(m, h, topology, &record, member_ar).await?);
    }
    let previous = RecordStatus::from_value(obj.get("status")).map_err(|e| anyhow::anyhow!(e))?;
    let plan = record_status(&record, domain.as_ref(), &observations, &previous)?;
    report.warnings.extend(
        plan.warnings
            .iter()
            .map(|w| format!("{}: {w}", record.describe())),
    );
    let Some(status) = plan.status else {
        return Ok(());
    };
    let records_api = dynamic_api(
        &w.host.client,
        Some(&record.namespace),
        &ar(
            record.kind.kind(),
            &crate::core::types::builtin::plural_of(record.kind.kind()),
        ),
    );
    // A plan does not list the records' statuses among its changes.
    if status != previous && !w.plans() {
        let mut with_status = obj.clone();
        with_status["status"] = status.to_value();
        let body: DynamicObject = serde_json::from_value(with_status)?;
        records_api
            .replace_status(&record.name, &PostParams::default(), &body)
            .await
            .map_err(api_error)?;
        report.host_writes += 1;
    }
    write_endpoints(w, obj, &record, &status, report).await
}

/// What one member says of a record's Service or Ingress: its load
/// balancer and (Services) whether it has ready endpoints.
async fn observe_member(
    m: &Member,
    h: &Health,
    topology: &BTreeMap<String, (String, Vec<String>)>,
    record: &DnsRecord,
    member_ar: &ApiResource,
) -> Result<ClusterObservation> {
    let (region, zones) = topology.get(&m.name).cloned().unwrap_or_default();
    let mut o = ClusterObservation {
        cluster: m.name.clone(),
        ready: h.is_ready(),
        region,
        zones,
        load_balancer: Vec::new(),
        has_ready_endpoints: false,
    };
    if let (true, Ok(client)) = (h.is_ready(), &m.client) {
        let api = dynamic_api(client, Some(&record.namespace), member_ar);
        if let Some(svc) = api.get_opt(&record.name).await.map_err(api_error)? {
            let svc = serde_json::to_value(svc)?;
            for i in svc["status"]["loadBalancer"]["ingress"]
                .as_array()
                .into_iter()
                .flatten()
            {
                o.load_balancer.push(LbIngress {
                    ip: i["ip"].as_str().unwrap_or("").into(),
                    hostname: i["hostname"].as_str().unwrap_or("").into(),
                });
            }
        }
        if record.kind == RecordKind::Service {
            o.has_ready_endpoints = has_ready_endpoints(client, record).await?;
        }
    }
    Ok(o)
}

/// Whether the member has a ready endpoint for the record's Service: its
/// EndpointSlices where the member serves `discovery.k8s.io/v1` (1.21+;
/// one list by the `kubernetes.io/service-name` label), its v1 Endpoints
/// only where it does not (1.20). v1 Endpoints are deprecated since 1.33,
/// every read of them warns, and a Service's slices are what its
/// controllers keep current. Upstream reads Endpoints
/// (`pkg/controller/servicedns`), a deliberate difference.
async fn has_ready_endpoints(client: &kube::Client, record: &DnsRecord) -> Result<bool> {
    let ns = Some(record.namespace.as_str());
    let slices = dynamic_api(
        client,
        ns,
        &api_resource("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices"),
    );
    let by_service =
        ListParams::default().labels(&format!("kubernetes.io/service-name={}", record.name));
    match slices.list(&by_service).await {
        Ok(list) => {
            let items: Vec<Value> = list
                .items
                .into_iter()
                .map(|s| serde_json::to_value(s).unwrap_or_default())
                .collect();
            Ok(slices_have_ready_endpoints(&items))
        }
        Err(kube::Error::Api(s)) if s.code == 404 => {
            let eps = dynamic_api(
                client,
                ns,
                &api_resource("", "v1", "Endpoints", "endpoints"),
            );
            let e = eps.get_opt(&record.name).await.map_err(api_error)?;
            Ok(e.map(serde_json::to_value)
                .transpose()?
                .is_some_and(|e| endpoints_have_ready_addresses(&e)))
        }
        Err(e) => Err(api_error(e)),
    }
}

/// The record's DNSEndpoint (owned by the record), written when it changed.
async fn write_endpoints(
    w: HostWriter<'_>,
    obj: &Value,
    record: &DnsRecord,
    status: &RecordStatus,
    report: &mut Report,
) -> Result<()> {
    let endpoints = dns_endpoints(record, status);
    report.warnings.extend(
        endpoints
            .warnings
            .iter()
            .map(|w| format!("{}: {w}", record.describe())),
    );
    let ep_api = dynamic_api(
        &w.host.client,
        Some(&record.namespace),
        &ar("DNSEndpoint", "dnsendpoints"),
    );
    let live = ep_api
        .get_opt(&endpoints.name)
        .await
        .map_err(api_error)?
        .map(|l| serde_json::to_value(l).unwrap_or_default());
    if !endpoints.needs_write(live.as_ref()) {
        return Ok(());
    }
    let verb = if live.is_some() { "update" } else { "create" };
    let what = format!("DNSEndpoint {}/{}", record.namespace, endpoints.name);
    let planned = || Change::new(Place::Host, verb, what);
    let mut desired = endpoints.object();
    // Owned by its record: deleting the record deletes the DNSEndpoint.
    desired["metadata"]["ownerReferences"] = json!([{
        "apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": record.name,
        "uid": obj["metadata"]["uid"], "controller": true, "blockOwnerDeletion": false
    }]);
    let write = async {
        match live {
            Some(mut l) => {
                l["spec"] = desired["spec"].clone();
                let body: DynamicObject = serde_json::from_value(l)?;
                let pp = PostParams::default();
                ep_api.replace(&endpoints.name, &pp, &body).await
            }
            None => {
                let body: DynamicObject = serde_json::from_value(desired)?;
                ep_api.create(&PostParams::default(), &body).await
            }
        }
        .map_err(api_error)
    };
    w.write(report, planned, write).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_prefers_current_labels_and_collects_zones() {
        let node = |labels: Value| json!({"metadata": {"labels": labels}});
        let nodes = vec![
            node(
                json!({"topology.kubernetes.io/region": "eu", "topology.kubernetes.io/zone": "eu-b"}),
            ),
            node(
                json!({"failure-domain.beta.kubernetes.io/region": "old", "failure-domain.beta.kubernetes.io/zone": "eu-a"}),
            ),
            node(json!({"topology.kubernetes.io/zone": "eu-b"})),
        ];
        assert_eq!(
            topology(&nodes),
            (Some("eu".into()), vec!["eu-a".into(), "eu-b".into()])
        );
        assert_eq!(topology(&[node(json!({}))]), (None, vec![]));
    }
}
