//! Offline reconcile: federated objects, FederatedNamespaces, RSPs and
//! KubeFedClusters from files → the objects each member cluster would hold.

use crate::core::builtin_types::{builtin_by_kind, builtin_version};
use crate::core::desired::{TargetType, describe, desired_for_cluster};
use crate::core::legacy;
use crate::core::membership::Scope;
use crate::core::overrides::validate_overrides;
use crate::core::placement::{Cluster, is_federated_namespace, sync_placement};
use crate::core::scheduling::{Scheduled, schedule};
use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

/// One input object and where it came from (for error messages).
#[derive(Clone, Debug)]
pub struct Sourced {
    pub source: String,
    pub object: Value,
}

/// Everything read from the input files, sorted by role.
#[derive(Default, Debug)]
pub struct Inputs {
    pub clusters: Vec<Sourced>,
    pub federated: Vec<Sourced>,
    pub rsps: Vec<Sourced>,
    /// Domains, ServiceDNSRecords and IngressDNSRecords.
    pub dns: Vec<Sourced>,
    /// Member Services/Ingresses (annotated with their cluster) carrying
    /// `status.loadBalancer`, for the DNS records.
    pub member_status: Vec<Sourced>,
    pub notes: Vec<String>,
}

/// Annotation naming the member a Service or Ingress document was read from.
pub const CLUSTER_ANNOTATION: &str = "kubefedctl.kubefed.io/cluster";

/// Reads YAML/JSON files, directories (recursively, `*.yaml`, `*.yml`,
/// `*.json`, in name order) or `-` (stdin).
pub fn load(paths: &[PathBuf]) -> Result<Inputs> {
    let mut inputs = Inputs::default();
    for path in paths {
        for file in files(path)? {
            let (name, text) = if file.as_os_str() == "-" {
                let mut s = String::new();
                std::io::stdin()
                    .read_to_string(&mut s)
                    .context("reading stdin")?;
                ("stdin".to_string(), s)
            } else {
                let text = std::fs::read_to_string(&file)
                    .with_context(|| format!("reading {}", file.display()))?;
                (file.display().to_string(), text)
            };
            add_documents(&mut inputs, &name, &text)?;
        }
    }
    Ok(inputs)
}

fn files(path: &Path) -> Result<Vec<PathBuf>> {
    if path.as_os_str() == "-" || path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    if !path.is_dir() {
        bail!("{}: no such file or directory", path.display());
    }
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("reading {}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            out.extend(files(&p)?);
        } else if p
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            out.push(p);
        }
    }
    Ok(out)
}

/// Sorts the documents of one file into [`Inputs`].
pub fn add_documents(inputs: &mut Inputs, source: &str, text: &str) -> Result<()> {
    let docs: Vec<Value> =
        crate::output::yaml_documents(text).map_err(|e| anyhow!("{source}: invalid YAML: {e}"))?;
    for (i, doc) in docs.into_iter().enumerate() {
        let at = format!("{source}: document {}", i + 1);
        let items = if doc["kind"] == "List" {
            doc["items"].as_array().cloned().unwrap_or_default()
        } else {
            vec![doc]
        };
        for obj in items {
            let (obj, notes) = legacy::normalize(&obj);
            inputs
                .notes
                .extend(notes.into_iter().map(|n| format!("{at}: {n}")));
            let kind = obj["kind"].as_str().unwrap_or("").to_string();
            let group = obj["apiVersion"]
                .as_str()
                .and_then(|a| a.split_once('/'))
                .map(|(g, _)| g)
                .unwrap_or("");
            if obj["metadata"]["name"].as_str().is_none_or(str::is_empty) {
                bail!(
                    "{at}: {} has no metadata.name",
                    if kind.is_empty() { "the object" } else { &kind }
                );
            }
            let sourced = Sourced {
                source: at.clone(),
                object: obj.clone(),
            };
            let member = obj["metadata"]["annotations"][CLUSTER_ANNOTATION]
                .as_str()
                .is_some();
            match (group, kind.as_str()) {
                ("core.kubefed.io", "KubeFedCluster") => inputs.clusters.push(sourced),
                (
                    "multiclusterdns.kubefed.io",
                    "Domain" | "ServiceDNSRecord" | "IngressDNSRecord",
                ) => inputs.dns.push(sourced),
                ("", "Service") | ("networking.k8s.io", "Ingress") if member => {
                    inputs.member_status.push(sourced)
                }
                ("scheduling.kubefed.io", "ReplicaSchedulingPreference") => {
                    inputs.rsps.push(sourced)
                }
                ("core.kubefed.io", _) => {
                    inputs
                        .notes
                        .push(format!("{at}: {kind} is not used when rendering; skipped"));
                }
                (_, k) if k.starts_with("Federated") && group.ends_with("kubefed.io") => {
                    inputs.federated.push(sourced)
                }
                _ => bail!(
                    "{at}: {kind:?} ({}) is not a federated object, ReplicaSchedulingPreference or KubeFedCluster",
                    obj["apiVersion"].as_str().unwrap_or("no apiVersion")
                ),
            }
        }
    }
    Ok(())
}

/// `name` or `name:k=v,k2=v2` from `--cluster`.
pub fn parse_cluster_flag(text: &str) -> Result<Cluster> {
    let (name, labels) = text.split_once(':').unwrap_or((text, ""));
    if let Some(e) = crate::core::names::subdomain_error(name) {
        bail!("--cluster {text:?}: invalid cluster name: {e}");
    }
    let labels = crate::core::convert::parse_labels(labels)
        .map_err(|e| anyhow!("--cluster {text:?}: {e}"))?;
    Ok(Cluster {
        name: name.to_string(),
        labels: labels.into_iter().collect(),
        ready: true,
    })
}

/// What a render produced.
#[derive(Debug, Default)]
pub struct Rendered {
    /// Cluster → its objects, in apply order (namespaces first).
    pub clusters: BTreeMap<String, Vec<Value>>,
    /// Objects for the host itself (DNSEndpoints).
    pub host: Vec<Value>,
    /// One line per RSP decision: `test-ns/web: ap-northeast=3, us-east=6`.
    pub scheduling: Vec<String>,
    pub notes: Vec<String>,
}

/// Runs RSP scheduling, placement, overrides and desired objects over the
/// inputs. Every error names the file/document, object, cluster or field.
pub fn render(inputs: &Inputs, extra_clusters: &[Cluster]) -> Result<Rendered> {
    let mut out = Rendered {
        notes: inputs.notes.clone(),
        ..Default::default()
    };
    let mut clusters: Vec<Cluster> = Vec::new();
    for c in &inputs.clusters {
        clusters.push(Cluster {
            name: c.object["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            labels: c.object["metadata"]["labels"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                        .collect()
                })
                .unwrap_or_default(),
            ready: true,
        });
    }
    clusters.extend(extra_clusters.iter().cloned());
    let mut seen = BTreeSet::new();
    for c in &clusters {
        if !seen.insert(c.name.clone()) {
            bail!(
                "cluster {:?} is named twice (KubeFedCluster files and --cluster)",
                c.name
            );
        }
    }
    if clusters.is_empty() {
        bail!("no clusters: give KubeFedCluster objects in the input, or --cluster NAME[:k=v,...]");
    }
    clusters.sort_by(|a, b| a.name.cmp(&b.name));
    for c in &clusters {
        out.clusters.insert(c.name.clone(), Vec::new());
    }

    let mut federated: Vec<Sourced> = inputs.federated.clone();
    let key = |o: &Value| {
        (
            o["metadata"]["namespace"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            o["metadata"]["name"].as_str().unwrap_or("").to_string(),
        )
    };
    let mut names = BTreeSet::new();
    for f in &federated {
        let (ns, name) = key(&f.object);
        if !names.insert((
            f.object["kind"].as_str().unwrap_or("").to_string(),
            ns,
            name,
        )) {
            bail!(
                "{}: {} {:?} is given twice",
                f.source,
                f.object["kind"].as_str().unwrap_or(""),
                describe(&f.object)
            );
        }
        validate_overrides(&f.object)
            .map_err(|e| anyhow!("{}: {}: {e}", f.source, describe(&f.object)))?;
    }
    let fed_namespaces: BTreeMap<String, Value> = federated
        .iter()
        .filter(|f| is_federated_namespace(&f.object))
        .map(|f| {
            (
                f.object["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                f.object.clone(),
            )
        })
        .collect();
    // Without any FederatedNamespace in the input, namespaces are not a
    // constraint (as in a namespace-scoped control plane).
    let scope = if fed_namespaces.is_empty() {
        Scope::Namespaced
    } else {
        Scope::Cluster
    };

    // RSP pass first: it rewrites placement and replicas overrides.
    for rsp in &inputs.rsps {
        let (ns, name) = key(&rsp.object);
        let target_kind = rsp.object["spec"]["targetKind"].as_str().unwrap_or("");
        let Some(fed) = federated.iter_mut().find(|f| {
            key(&f.object) == (ns.clone(), name.clone()) && f.object["kind"] == target_kind
        }) else {
            out.notes.push(format!("{}: no {target_kind} {ns}/{name} in the input for this ReplicaSchedulingPreference", rsp.source));
            continue;
        };
        let fedns = fed_namespaces.get(&ns);
        match schedule(
            &rsp.object,
            &fed.object,
            fedns,
            &clusters,
            &BTreeMap::new(),
            &BTreeMap::new(),
        )
        .map_err(|e| anyhow!("{}: {e}", rsp.source))?
        {
            Scheduled::Updated(obj) => fed.object = obj,
            Scheduled::Unchanged => {}
        }
        out.scheduling
            .push(format!("{ns}/{name}: {}", replicas_summary(&fed.object)));
    }

    for f in &federated {
        let obj = &f.object;
        let target = target_type(obj).map_err(|e| anyhow!("{}: {e}", f.source))?;
        let namespaced_type = builtin_by_kind(&target.kind)
            .map_or(obj["metadata"]["namespace"].is_string(), |b| b.namespaced);
        let ns = obj["metadata"]["namespace"].as_str().unwrap_or("");
        let fedns = if namespaced_type {
            fed_namespaces.get(ns)
        } else {
            None
        };
        let placement = sync_placement(
            obj,
            fedns,
            &clusters,
            scope,
            namespaced_type && !target.is_namespace(),
        )
        .map_err(|e| anyhow!("{}: {e}", f.source))?;
        if placement.namespace_not_federated {
            out.notes.push(format!(
                "{}: {} is not placed: namespace {ns:?} has no FederatedNamespace in the input",
                f.source,
                describe(obj)
            ));
        }
        for cluster in &placement.clusters {
            let desired = desired_for_cluster(obj, &target, cluster, None)
                .map_err(|e| anyhow!("{}: cluster {cluster:?}: {e}", f.source))?;
            out.clusters
                .get_mut(cluster)
                .expect("known cluster")
                .push(desired);
        }
    }
    out.host = render_dns(inputs, &clusters, &mut out.notes)?;
    for objs in out.clusters.values_mut() {
        objs.sort_by_key(|o| {
            (
                o["kind"] != "Namespace",
                o["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                o["kind"].as_str().unwrap_or("").to_string(),
                o["metadata"]["name"].as_str().unwrap_or("").to_string(),
            )
        });
    }
    Ok(out)
}

/// The target of a federated object: `Federated<Kind>` → Kind, with the
/// group/version of the built-in type, or the template's own apiVersion.
pub fn target_type(fed: &Value) -> Result<TargetType> {
    let kind = fed["kind"]
        .as_str()
        .and_then(|k| k.strip_prefix("Federated"))
        .unwrap_or("");
    if kind.is_empty() {
        bail!("{}: not a Federated<Kind>", describe(fed));
    }
    if let Some(av) = fed["spec"]["template"]["apiVersion"]
        .as_str()
        .filter(|a| !a.is_empty())
    {
        let (group, version) = av.split_once('/').unwrap_or(("", av));
        return Ok(TargetType::new(group, version, kind));
    }
    match builtin_by_kind(kind) {
        Some(b) => Ok(TargetType::new(b.group, builtin_version(b.group), kind)),
        None => bail!(
            "{}: {kind} is not a built-in type; set spec.template.apiVersion to say which group/version it is",
            describe(fed)
        ),
    }
}

/// `ap-northeast=3, us-east=6` from a federated object's replicas overrides.
fn replicas_summary(fed: &Value) -> String {
    let mut parts = Vec::new();
    for o in fed["spec"]["overrides"].as_array().into_iter().flatten() {
        for co in o["clusterOverrides"].as_array().into_iter().flatten() {
            if co["path"] == "/spec/replicas" {
                parts.push(format!(
                    "{}={}",
                    o["clusterName"].as_str().unwrap_or(""),
                    co["value"]
                ));
            }
        }
    }
    parts.sort();
    if parts.is_empty() {
        "no replicas scheduled".into()
    } else {
        parts.join(", ")
    }
}

/// DNSEndpoints for the DNS records in the input: region and zones from
/// the KubeFedClusters' status, load balancers from the member Services
/// annotated with their cluster (offline, every such Service counts as
/// having ready endpoints).
fn render_dns(
    inputs: &Inputs,
    clusters: &[Cluster],
    notes: &mut Vec<String>,
) -> Result<Vec<Value>> {
    use crate::core::dns::{
        ClusterObservation, DnsRecord, Domain, LbIngress, RecordStatus, dns_endpoints,
        record_status,
    };
    let domains: Vec<Domain> = inputs
        .dns
        .iter()
        .filter(|d| d.object["kind"] == "Domain")
        .map(|d| Domain::from_value(&d.object).map_err(|e| anyhow!("{}: {e}", d.source)))
        .collect::<Result<_>>()?;
    let mut out = Vec::new();
    for r in inputs.dns.iter().filter(|d| d.object["kind"] != "Domain") {
        let record = DnsRecord::from_value(&r.object).map_err(|e| anyhow!("{}: {e}", r.source))?;
        let member_kind = if record.kind == crate::core::dns::RecordKind::Service {
            "Service"
        } else {
            "Ingress"
        };
        let observations: Vec<ClusterObservation> = clusters
            .iter()
            .map(|c| {
                let kfc = inputs
                    .clusters
                    .iter()
                    .find(|k| k.object["metadata"]["name"] == c.name.as_str());
                let status = kfc
                    .map(|k| k.object["status"].clone())
                    .unwrap_or(Value::Null);
                let lb: Vec<LbIngress> = inputs
                    .member_status
                    .iter()
                    .filter(|m| {
                        m.object["kind"] == member_kind
                            && m.object["metadata"]["annotations"][CLUSTER_ANNOTATION]
                                == c.name.as_str()
                            && m.object["metadata"]["name"] == record.name.as_str()
                            && m.object["metadata"]["namespace"]
                                .as_str()
                                .unwrap_or("default")
                                == record.namespace
                    })
                    .flat_map(|m| {
                        m.object["status"]["loadBalancer"]["ingress"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default()
                    })
                    .map(|i| LbIngress {
                        ip: i["ip"].as_str().unwrap_or("").into(),
                        hostname: i["hostname"].as_str().unwrap_or("").into(),
                    })
                    .collect();
                ClusterObservation {
                    cluster: c.name.clone(),
                    ready: true,
                    region: status["region"].as_str().unwrap_or("").into(),
                    zones: status["zones"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|z| z.as_str().map(String::from))
                        .collect(),
                    has_ready_endpoints: !lb.is_empty(),
                    load_balancer: lb,
                }
            })
            .collect();
        let domain = domains.iter().find(|d| d.name == record.domain_ref);
        let plan = record_status(&record, domain, &observations, &RecordStatus::default())
            .map_err(|e| anyhow!("{}: {e}", r.source))?;
        notes.extend(plan.warnings.iter().map(|w| format!("{}: {w}", r.source)));
        if let Some(status) = plan.status {
            let endpoints = dns_endpoints(&record, &status);
            notes.extend(
                endpoints
                    .warnings
                    .iter()
                    .map(|w| format!("{}: {w}", r.source)),
            );
            out.push(endpoints.object());
        }
    }
    Ok(out)
}

/// A multi-document stream, each object preceded by `# cluster: NAME`
/// (`# host` for the host's own objects, DNSEndpoints).
pub fn to_stream(r: &Rendered) -> Result<String> {
    let mut text = String::new();
    for obj in &r.host {
        text.push_str("---\n# host\n");
        text.push_str(&crate::output::render(
            obj,
            crate::output::DocumentFormat::Yaml,
        )?);
    }
    for (cluster, objs) in &r.clusters {
        for obj in objs {
            text.push_str(&format!("---\n# cluster: {cluster}\n"));
            text.push_str(&crate::output::render(
                obj,
                crate::output::DocumentFormat::Yaml,
            )?);
        }
    }
    Ok(text)
}

/// Marks a directory as ours, so a re-render may replace it.
pub const RENDER_MARKER: &str = ".kubefedctl-render";

/// Writes `DIR/<cluster>/<namespace or _cluster>/<kind>-<name>.yaml`,
/// all or nothing: into a new directory, renamed into place at the end.
pub fn write_dir(r: &Rendered, dir: &Path) -> Result<usize> {
    if dir.exists() {
        let ours = dir.join(RENDER_MARKER).exists();
        let empty = std::fs::read_dir(dir)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if !ours && !empty {
            bail!(
                "{} exists and was not written by kubefedctl reconcile --output-dir: refusing to replace it",
                dir.display()
            );
        }
    }
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let staging = parent.join(format!(
        ".{}.tmp-{}",
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("render"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&staging);
    let result = (|| -> Result<usize> {
        let mut count = 0;
        std::fs::create_dir_all(&staging)?;
        std::fs::write(
            staging.join(RENDER_MARKER),
            "rendered by kubefedctl reconcile --from\n",
        )?;
        let host = ("_host".to_string(), r.host.clone());
        for (cluster, objs) in r.clusters.iter().chain(std::iter::once((&host.0, &host.1))) {
            for obj in objs {
                let ns = obj["metadata"]["namespace"].as_str().unwrap_or("_cluster");
                let file = staging.join(cluster).join(ns).join(format!(
                    "{}-{}.yaml",
                    obj["kind"].as_str().unwrap_or("object").to_lowercase(),
                    obj["metadata"]["name"].as_str().unwrap_or("")
                ));
                std::fs::create_dir_all(file.parent().expect("has a parent"))?;
                std::fs::write(
                    &file,
                    crate::output::render(obj, crate::output::DocumentFormat::Yaml)?,
                )?;
                count += 1;
            }
        }
        Ok(count)
    })();
    match result {
        Ok(count) => {
            if dir.exists() {
                std::fs::remove_dir_all(dir)
                    .with_context(|| format!("replacing {}", dir.display()))?;
            }
            std::fs::rename(&staging, dir)
                .with_context(|| format!("moving the output into {}", dir.display()))?;
            Ok(count)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(e.context(format!("writing {}", dir.display())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_records_render_from_annotated_member_services() {
        let text = r#"
apiVersion: core.kubefed.io/v1beta1
kind: KubeFedCluster
metadata: {name: eu1}
spec: {apiEndpoint: "https://eu1", secretRef: {name: s}}
status: {region: europe, zones: [europe-1a], conditions: []}
---
apiVersion: core.kubefed.io/v1beta1
kind: KubeFedCluster
metadata: {name: us1}
spec: {apiEndpoint: "https://us1", secretRef: {name: s}}
status: {region: america, zones: [america-1b], conditions: []}
---
apiVersion: multiclusterdns.kubefed.k8s.io/v1alpha1
kind: Domain
metadata: {name: galactic, namespace: kube-federation-system}
domain: example.com
---
apiVersion: multiclusterdns.kubefed.io/v1alpha1
kind: ServiceDNSRecord
metadata: {name: web, namespace: shop}
spec: {domainRef: galactic}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop, annotations: {kubefedctl.kubefed.io/cluster: eu1}}
status: {loadBalancer: {ingress: [{ip: 192.0.2.10}]}}
"#;
        let r = render(&inputs(text), &[]).unwrap();
        assert_eq!(r.host.len(), 1);
        let ep = &r.host[0];
        assert_eq!(ep["kind"], "DNSEndpoint");
        assert_eq!(ep["metadata"]["name"], "service-web");
        let names: Vec<(&str, &str)> = ep["spec"]["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["dnsName"].as_str().unwrap(),
                    e["recordType"].as_str().unwrap(),
                )
            })
            .collect();
        assert!(
            names.contains(&("web.shop.galactic.svc.europe-1a.europe.example.com", "A")),
            "{names:?}"
        );
        assert!(
            names.contains(&("web.shop.galactic.svc.america.example.com", "CNAME")),
            "us1 has no load balancer: {names:?}"
        );
        assert!(to_stream(&r).unwrap().starts_with("---\n# host\n"));
    }

    fn inputs(text: &str) -> Inputs {
        let mut i = Inputs::default();
        add_documents(&mut i, "in.yaml", text).unwrap();
        i
    }

    const SEED_RSP: &str = r#"
apiVersion: scheduling.kubefed.k8s.io/v1alpha1
kind: ReplicaSchedulingPreference
metadata: {name: test-deployment, namespace: test-ns}
spec:
  targetKind: FederatedDeployment
  totalReplicas: 15
  clusters:
    "*": {weight: 2, maxReplicas: 12}
    ap-northeast: {minReplicas: 1, maxReplicas: 3, weight: 1}
---
apiVersion: types.kubefed.k8s.io/v1beta1
kind: FederatedDeployment
metadata: {name: test-deployment, namespace: test-ns}
spec:
  template:
    spec:
      selector: {matchLabels: {app: nginx}}
      template:
        metadata: {labels: {app: nginx}}
        spec: {containers: [{name: nginx, image: nginx}]}
  placement: {clusterSelector: {}}
"#;

    #[test]
    fn the_seed_rsp_gives_3_6_6() {
        let clusters: Vec<Cluster> = ["ap-northeast", "us-east", "us-west"]
            .iter()
            .map(|c| parse_cluster_flag(c).unwrap())
            .collect();
        let r = render(&inputs(SEED_RSP), &clusters).unwrap();
        let replicas: Vec<(String, i64)> = r
            .clusters
            .iter()
            .map(|(c, objs)| (c.clone(), objs[0]["spec"]["replicas"].as_i64().unwrap()))
            .collect();
        assert_eq!(
            replicas,
            [
                ("ap-northeast".into(), 3),
                ("us-east".into(), 6),
                ("us-west".into(), 6)
            ]
        );
        assert_eq!(
            r.scheduling,
            ["test-ns/test-deployment: ap-northeast=3, us-east=6, us-west=6"]
        );
        let d = &r.clusters["us-east"][0];
        assert_eq!(d["apiVersion"], "apps/v1");
        assert_eq!(d["kind"], "Deployment");
        assert_eq!(d["metadata"]["namespace"], "test-ns");
        assert_eq!(d["metadata"]["labels"]["kubefed.io/managed"], "true");
    }

    #[test]
    fn labels_select_clusters_and_federated_namespaces_narrow() {
        let text = r#"
apiVersion: core.kubefed.io/v1beta1
kind: KubeFedCluster
metadata: {name: eu1, labels: {region: eu}}
spec: {apiEndpoint: "https://eu1", secretRef: {name: s}}
---
apiVersion: core.kubefed.io/v1beta1
kind: KubeFedCluster
metadata: {name: us1, labels: {region: us}}
spec: {apiEndpoint: "https://us1", secretRef: {name: s}}
---
apiVersion: types.kubefed.io/v1beta1
kind: FederatedNamespace
metadata: {name: shop, namespace: shop}
spec: {placement: {clusters: [{name: eu1}, {name: us1}]}}
---
apiVersion: types.kubefed.io/v1beta1
kind: FederatedConfigMap
metadata: {name: cfg, namespace: shop}
spec:
  template: {data: {colour: blue}}
  placement: {clusterSelector: {matchLabels: {region: eu}}}
  overrides:
  - clusterName: eu1
    clusterOverrides: [{path: /data/colour, value: green}]
"#;
        let r = render(&inputs(text), &[]).unwrap();
        let kinds = |c: &str| {
            r.clusters[c]
                .iter()
                .map(|o| o["kind"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(kinds("eu1"), ["Namespace", "ConfigMap"]);
        assert_eq!(kinds("us1"), ["Namespace"]);
        assert_eq!(r.clusters["eu1"][1]["data"]["colour"], "green");
        assert!(r.clusters["eu1"][0]["metadata"].get("namespace").is_none());
    }

    #[test]
    fn bad_input_names_file_object_and_field() {
        let dup = format!(
            "{SEED_RSP}---\napiVersion: core.kubefed.io/v1beta1\nkind: KubeFedCluster\nmetadata: {{name: us-east}}\nspec: {{}}\n"
        );
        let e = render(&inputs(&dup), &[parse_cluster_flag("us-east").unwrap()])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "cluster \"us-east\" is named twice (KubeFedCluster files and --cluster)"
        );

        let forbidden = "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {name: c, namespace: ns1}\nspec:\n  placement: {clusterSelector: {}}\n  overrides:\n  - clusterName: a\n    clusterOverrides: [{path: /metadata/name, value: x}]\n";
        let e = render(&inputs(forbidden), &[parse_cluster_flag("a").unwrap()])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("in.yaml: document 1: FederatedConfigMap \"ns1/c\": "),
            "{e}"
        );
        assert!(e.contains("/metadata/name"), "{e}");

        let remove_missing = "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {name: c, namespace: ns1}\nspec:\n  template: {data: {}}\n  placement: {clusterSelector: {}}\n  overrides:\n  - clusterName: a\n    clusterOverrides: [{op: remove, path: /data/nothing}]\n";
        let e = render(&inputs(remove_missing), &[parse_cluster_flag("a").unwrap()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cluster \"a\"") && e.contains("/data/nothing"),
            "{e}"
        );

        let mut i = Inputs::default();
        let e = add_documents(
            &mut i,
            "x.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "x.yaml: document 1: \"ConfigMap\" (v1) is not a federated object, ReplicaSchedulingPreference or KubeFedCluster"
        );
        let e = target_type(
            &serde_json::json!({"kind": "FederatedGizmo", "metadata": {"name": "g"}, "spec": {}}),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("set spec.template.apiVersion"), "{e}");
        assert!(parse_cluster_flag("Bad_Name").is_err());
        assert_eq!(
            parse_cluster_flag("eu1:region=eu,tier=web")
                .unwrap()
                .labels
                .len(),
            2
        );
    }
}
