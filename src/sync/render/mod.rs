//! Offline reconcile: federated objects, FederatedNamespaces, RSPs and
//! KubeFedClusters from files → the objects each member cluster would hold.

use crate::core::propagation::action::Action;
use crate::core::propagation::decide::ObjectPlan;
use crate::core::propagation::placement::Cluster;
use anyhow::Result;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

mod load;
mod plan;
mod write;

pub use load::{add_documents, load, load_with, parse_cluster_flag};
pub use plan::{check_federated, plan, target_type};
pub use write::{RENDER_MARKER, write_dir, write_json, write_stream};

/// One input object and where it came from (for error messages).
#[derive(Clone, Debug)]
pub struct Sourced {
    pub source: String,
    pub object: Value,
}

/// Everything read from the input files, sorted by role.
#[derive(Clone, Default, Debug)]
pub struct Inputs {
    pub clusters: Vec<Sourced>,
    pub federated: Vec<Sourced>,
    pub rsps: Vec<Sourced>,
    /// Domains, ServiceDNSRecords and IngressDNSRecords.
    pub dns: Vec<Sourced>,
    /// Member Services/Ingresses (annotated with their cluster) carrying
    /// `status.loadBalancer`, for the DNS records.
    pub member_status: Vec<Sourced>,
    /// The KubeFedConfig, when the input has one: its settings apply as
    /// they do to a live run.
    pub config: Option<Sourced>,
    /// FederatedTypeConfigs: a render does not use them (it is told so),
    /// `export karmada` reads a fork's types from them.
    pub type_configs: Vec<Sourced>,
    /// CustomResourceDefinitions: a render does not use them (it is told
    /// so), `export karmada` finds the targets of custom types in them.
    pub crds: Vec<Sourced>,
    pub notes: Vec<String>,
}

/// Annotation naming the member a Service or Ingress document was read from.
pub const CLUSTER_ANNOTATION: &str = "kubefedctl.kubefed.io/cluster";

/// Everything a render decided before building any member object: the
/// clusters, each federated object's target and placement (after the RSP
/// pass) and the host's own objects. Member objects are built per cluster
/// ([`RenderPlan::cluster_objects`]), on all cores, so a large render never
/// holds every cluster's objects at once.
#[derive(Debug)]
pub struct RenderPlan {
    /// Sorted by name.
    pub clusters: Vec<Cluster>,
    placed: Vec<Placed>,
    /// Cluster name → indices into `placed`, in input order.
    by_cluster: BTreeMap<String, Vec<usize>>,
    /// Objects for the host itself (DNSEndpoints).
    pub host: Vec<Value>,
    /// One line per RSP decision: `test-ns/web: ap-northeast=3, us-east=6`.
    pub scheduling: Vec<String>,
    pub notes: Vec<String>,
}

/// A federated object placed on at least one cluster: what the decide
/// step creates in each (members hold nothing offline).
#[derive(Debug)]
struct Placed {
    /// Cluster → the object to create there.
    objects: BTreeMap<String, Arc<Value>>,
    /// The object several clusters share (no overrides), if any.
    shared: Option<Arc<Value>>,
}

impl Placed {
    fn new(plan: ObjectPlan) -> Placed {
        let objects: BTreeMap<String, Arc<Value>> = plan
            .decisions
            .into_iter()
            .filter_map(|d| match d.action {
                Action::Create(obj) => Some((d.cluster, obj)),
                _ => None,
            })
            .collect();
        let all: Vec<&Arc<Value>> = objects.values().collect();
        let shared = all
            .iter()
            .enumerate()
            .find(|(i, a)| all[i + 1..].iter().any(|b| Arc::ptr_eq(a, b)))
            .map(|(_, a)| Arc::clone(a));
        Placed { objects, shared }
    }
}

/// One object of one member cluster: its federated object's shared object
/// or this cluster's own (overridden) copy.
pub struct MemberObject<'a> {
    /// The federated object's index in the plan.
    placed: usize,
    object: &'a Arc<Value>,
    shared: bool,
}

impl MemberObject<'_> {
    pub fn value(&self) -> &Value {
        self.object
    }

    /// The object as text: a shared object's from `shared` (written once
    /// for every cluster, see [`RenderPlan::shared_texts`]), an own copy
    /// written now.
    fn text<'t>(
        &'t self,
        shared: &'t [String],
        write: impl Fn(&Value) -> Result<String>,
    ) -> Result<Cow<'t, str>> {
        if self.shared {
            Ok(Cow::Borrowed(&shared[self.placed]))
        } else {
            Ok(Cow::Owned(write(self.object)?))
        }
    }
}

/// Every cluster's objects in memory (small renders, tests).
#[derive(Debug, Default)]
pub struct Rendered {
    /// Cluster → its objects, in apply order (namespaces first).
    pub clusters: BTreeMap<String, Vec<Value>>,
    /// Objects for the host itself (DNSEndpoints).
    pub host: Vec<Value>,
    /// One line per RSP decision.
    pub scheduling: Vec<String>,
    pub notes: Vec<String>,
}

/// [`plan`], then every cluster's objects.
pub fn render(inputs: Inputs, extra_clusters: &[Cluster]) -> Result<Rendered> {
    let plan = plan(inputs, extra_clusters)?;
    let clusters = plan.per_cluster(|cluster, objects| {
        let objects = objects.into_iter().map(|o| o.value().clone()).collect();
        Ok((cluster.to_string(), objects))
    })?;
    Ok(Rendered {
        clusters: clusters.into_iter().collect(),
        host: plan.host,
        scheduling: plan.scheduling,
        notes: plan.notes,
    })
}

impl RenderPlan {
    /// The objects for `cluster`, in apply order (namespaces first, then by
    /// namespace, kind and name).
    fn build(&self, cluster: &str) -> Vec<MemberObject<'_>> {
        let indices = self.by_cluster.get(cluster).map_or(&[][..], Vec::as_slice);
        let objects = indices
            .iter()
            .map(|&i| {
                let placed = &self.placed[i];
                let object = &placed.objects[cluster];
                let shared = placed
                    .shared
                    .as_ref()
                    .is_some_and(|s| Arc::ptr_eq(s, object));
                MemberObject {
                    placed: i,
                    object,
                    shared,
                }
            })
            .collect();
        in_apply_order(objects)
    }

    /// Every federated object's shared object as text, on all cores: most
    /// clusters share it, so it is written once, not once per cluster.
    fn shared_texts(&self, write: impl Fn(&Value) -> Result<String> + Sync) -> Result<Vec<String>> {
        crate::parallel::map(&self.placed, |p| match &p.shared {
            Some(shared) => write(shared),
            None => Ok(String::new()),
        })
        .into_iter()
        .collect()
    }

    /// Builds every cluster's objects and hands them to `work`, clusters
    /// spread over all cores; results come back in cluster order (on
    /// failure, the first cluster's error).
    pub fn per_cluster<T: Send>(
        &self,
        work: impl Fn(&str, Vec<MemberObject<'_>>) -> Result<T> + Sync,
    ) -> Result<Vec<T>> {
        crate::parallel::map(&self.clusters, |c| work(&c.name, self.build(&c.name)))
            .into_iter()
            .collect()
    }
}

/// `objects` sorted (stably) by [`apply_order`], each key computed once.
fn in_apply_order(objects: Vec<MemberObject<'_>>) -> Vec<MemberObject<'_>> {
    let order: Vec<usize> = {
        let keys: Vec<_> = objects.iter().map(|o| apply_order(o.value())).collect();
        if keys.is_sorted() {
            return objects;
        }
        let mut order: Vec<usize> = (0..objects.len()).collect();
        order.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
        order
    };
    let mut slots: Vec<Option<MemberObject>> = objects.into_iter().map(Some).collect();
    order
        .into_iter()
        .map(|i| slots[i].take().expect("each index once"))
        .collect()
}

/// Namespaces first, then namespace, kind, name.
fn apply_order(o: &Value) -> (bool, &str, &str, &str) {
    (
        o["kind"] != "Namespace",
        o["metadata"]["namespace"].as_str().unwrap_or(""),
        o["kind"].as_str().unwrap_or(""),
        o["metadata"]["name"].as_str().unwrap_or(""),
    )
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
        let r = render(inputs(text), &[]).unwrap();
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
        let mut stream = Vec::new();
        write_stream(&plan(inputs(text), &[]).unwrap(), &mut stream).unwrap();
        assert!(
            String::from_utf8(stream)
                .unwrap()
                .starts_with("---\n# host\n")
        );
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
        let r = render(inputs(SEED_RSP), &clusters).unwrap();
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
        let r = render(inputs(text), &[]).unwrap();
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
        let e = render(inputs(&dup), &[parse_cluster_flag("us-east").unwrap()])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "cluster \"us-east\" is named twice (KubeFedCluster files and --cluster)"
        );

        let forbidden = "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {name: c, namespace: ns1}\nspec:\n  placement: {clusterSelector: {}}\n  overrides:\n  - clusterName: a\n    clusterOverrides: [{path: /metadata/name, value: x}]\n";
        let e = render(inputs(forbidden), &[parse_cluster_flag("a").unwrap()])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("in.yaml: document 1: FederatedConfigMap \"ns1/c\": "),
            "{e}"
        );
        assert!(e.contains("/metadata/name"), "{e}");

        let remove_missing = "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {name: c, namespace: ns1}\nspec:\n  template: {data: {}}\n  placement: {clusterSelector: {}}\n  overrides:\n  - clusterName: a\n    clusterOverrides: [{op: remove, path: /data/nothing}]\n";
        let e = render(inputs(remove_missing), &[parse_cluster_flag("a").unwrap()])
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
            "x.yaml: document 1: \"ConfigMap\" (v1) is not a federated object, ReplicaSchedulingPreference, KubeFedCluster or CustomResourceDefinition"
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

    /// The JSON written from per-cluster pieces is byte for byte what
    /// serde_json's pretty printer writes for the whole map: clusters with
    /// and without overrides, an empty cluster, host objects, and a cluster
    /// name that sorts before `_host`.
    #[test]
    fn json_from_pieces_equals_the_pretty_printed_map() {
        let text = r#"
apiVersion: types.kubefed.io/v1beta1
kind: FederatedConfigMap
metadata: {name: cfg, namespace: shop}
spec:
  template: {data: {colour: "blue \"sky\"\nline", n: 1.5}}
  placement: {clusters: [{name: 0a}, {name: eu1}]}
  overrides:
  - clusterName: eu1
    clusterOverrides: [{path: /data/colour, value: green}]
---
apiVersion: types.kubefed.io/v1beta1
kind: FederatedSecret
metadata: {name: empty, namespace: shop}
spec: {template: {}, placement: {clusters: [{name: 0a}]}}
"#;
        let flags: Vec<Cluster> = ["0a", "eu1", "idle"]
            .iter()
            .map(|c| parse_cluster_flag(c).unwrap())
            .collect();
        let mut with_dns = inputs(text);
        for c in ["0a", "eu1", "idle"] {
            add_documents(
                &mut with_dns,
                "clusters.yaml",
                &format!("apiVersion: core.kubefed.io/v1beta1\nkind: KubeFedCluster\nmetadata: {{name: {c}}}\nspec: {{}}\nstatus: {{region: r{c}, zones: [z{c}]}}\n"),
            )
            .unwrap();
        }
        add_documents(
            &mut with_dns,
            "dns.yaml",
            "apiVersion: multiclusterdns.kubefed.io/v1alpha1\nkind: Domain\nmetadata: {name: d, namespace: kube-federation-system}\ndomain: example.com\n---\napiVersion: multiclusterdns.kubefed.io/v1alpha1\nkind: ServiceDNSRecord\nmetadata: {name: web, namespace: shop}\nspec: {domainRef: d}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop, annotations: {kubefedctl.kubefed.io/cluster: eu1}}\nstatus: {loadBalancer: {ingress: [{ip: 192.0.2.1}]}}\n",
        )
        .unwrap();
        let mut hosts = Vec::new();
        for (inputs_now, clusters) in [(inputs(text), flags), (with_dns, Vec::new())] {
            let again = inputs_now.clone();
            let whole = render(inputs_now, &clusters).unwrap();
            let mut map: serde_json::Map<String, Value> = whole
                .clusters
                .iter()
                .map(|(c, objs)| (c.clone(), Value::Array(objs.clone())))
                .collect();
            if !whole.host.is_empty() {
                map.insert("_host".into(), Value::Array(whole.host.clone()));
            }
            let expected = serde_json::to_string_pretty(&map).unwrap() + "\n";
            let mut written = Vec::new();
            write_json(&plan(again, &clusters).unwrap(), &mut written).unwrap();
            assert_eq!(String::from_utf8(written).unwrap(), expected);
            assert_eq!(whole.clusters["eu1"][0]["data"]["colour"], "green");
            assert!(whole.clusters["idle"].is_empty());
            hosts.push(whole.host.len());
        }
        assert_eq!(
            hosts,
            [0, 1],
            "the second case has a DNSEndpoint for the host"
        );
    }

    /// Clusters are built in parallel, yet the error is the one a
    /// sequential pass over the objects meets first: the earliest object.
    #[test]
    fn the_first_failing_object_is_reported_whatever_the_cluster() {
        let failing = |name: &str, cluster: &str| {
            format!(
                "---\napiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {{name: {name}, namespace: ns1}}\nspec:\n  template: {{data: {{}}}}\n  placement: {{clusterSelector: {{}}}}\n  overrides:\n  - clusterName: {cluster}\n    clusterOverrides: [{{op: remove, path: /data/nothing}}]\n"
            )
        };
        // The first object fails only in the last cluster, the second in
        // the first cluster.
        let text = failing("first", "z") + &failing("second", "a");
        let clusters: Vec<Cluster> = ["a", "m", "z"]
            .iter()
            .map(|c| parse_cluster_flag(c).unwrap())
            .collect();
        let e = render(inputs(&text), &clusters).unwrap_err().to_string();
        assert!(e.starts_with("in.yaml: document 1: cluster \"z\": "), "{e}");
        // The decide step finds it, before anything can be written.
        let e = plan(inputs(&text), &clusters).unwrap_err().to_string();
        assert!(e.starts_with("in.yaml: document 1: cluster \"z\": "), "{e}");
    }
}

/// Properties of the render over generated federations (proptest).
#[cfg(test)]
mod properties {
    use super::*;
    use crate::core::cluster::membership::Scope;
    use crate::core::propagation::decide::{self, FederatedType, Listing};
    use crate::core::propagation::desired::TargetType;
    use crate::core::propagation::desired::desired_for_cluster;
    use crate::core::propagation::overrides::MemberCluster;
    use crate::core::run::settings::Settings;
    use proptest::prelude::*;
    use serde_json::json;
    use std::collections::{BTreeSet, HashMap};

    const CLUSTERS: [&str; 4] = ["a", "b", "c", "d"];

    /// A FederatedConfigMap: name index, data, placement (explicit list or
    /// a selector on `tier`), overrides per cluster.
    fn federated() -> impl Strategy<Value = Value> {
        (
            0u8..40,
            proptest::collection::btree_map("[a-z]{1,3}", "[a-z0-9]{0,4}", 0..3),
            prop_oneof![
                proptest::sample::subsequence(CLUSTERS.to_vec(), 0..=4)
                    .prop_map(|cs| json!({"clusters": cs.iter().map(|c| json!({"name": c})).collect::<Vec<_>>()})),
                Just(json!({"clusterSelector": {}})),
                Just(json!({"clusterSelector": {"matchLabels": {"tier": "gold"}}})),
            ],
            proptest::collection::btree_map(
                proptest::sample::select(CLUSTERS.to_vec()),
                "[a-z0-9]{0,4}",
                0..3,
            ),
        )
            .prop_map(|(i, data, placement, overrides)| {
                let overrides: Vec<Value> = overrides
                    .into_iter()
                    .map(|(c, v)| json!({"clusterName": c, "clusterOverrides": [{"path": "/data/extra", "value": v}]}))
                    .collect();
                json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedConfigMap",
                       "metadata": {"name": format!("cm-{i}"), "namespace": "shop"},
                       "spec": {"template": {"data": data}, "placement": placement, "overrides": overrides}})
            })
    }

    fn inputs(objects: &[Value]) -> Inputs {
        let mut seen = BTreeSet::new();
        let federated = objects
            .iter()
            .filter(|o| seen.insert(o["metadata"]["name"].to_string()))
            .map(|o| Sourced {
                source: "gen.yaml".into(),
                object: o.clone(),
            })
            .collect();
        let clusters = CLUSTERS
            .iter()
            .enumerate()
            .map(|(i, c)| Sourced {
                source: "clusters.yaml".into(),
                object: json!({"apiVersion": "core.kubefed.io/v1beta1", "kind": "KubeFedCluster",
                    "metadata": {"name": c, "labels": if i % 2 == 0 { json!({"tier": "gold"}) } else { json!({}) }}}),
            })
            .collect();
        Inputs {
            clusters,
            federated,
            ..Inputs::default()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The same input renders the same bytes, and every member object is
        /// what the per-cluster desired-object function (an independent path
        /// from the decide step's shared objects) says — nothing more, nothing less.
        #[test]
        fn render_is_deterministic_and_agrees_with_desired_for_cluster(
            objects in proptest::collection::vec(federated(), 0..12)
        ) {
            let stream = |objects: &[Value]| {
                let mut out = Vec::new();
                write_stream(&plan(inputs(objects), &[]).unwrap(), &mut out).unwrap();
                out
            };
            prop_assert_eq!(stream(&objects), stream(&objects));

            let rendered = render(inputs(&objects), &[]).unwrap();
            let clusters: Vec<Cluster> = CLUSTERS
                .iter()
                .enumerate()
                .map(|(i, c)| Cluster::new(c, if i % 2 == 0 { &[("tier", "gold")] } else { &[] }, true))
                .collect();
            let target = TargetType::new("", "v1", "ConfigMap");
            for c in &clusters {
                let mut want: Vec<Value> = inputs(&objects)
                    .federated
                    .iter()
                    .filter(|f| {
                        crate::core::propagation::placement::selected_clusters(&f.object, &clusters)
                            .unwrap()
                            .contains(&c.name)
                    })
                    .map(|f| desired_for_cluster(&f.object, &target, MemberCluster { name: &c.name, labels: &c.labels }, None).unwrap())
                    .collect();
                // The decide step itself, object by object, with empty members.
                let federation = crate::core::propagation::decide::Federation {
                    kubefed_namespace: crate::api::DEFAULT_KUBEFED_NAMESPACE,
                    scope: Scope::Namespaced,
                    settings: Settings::default().sync,
                    clusters: &clusters,
                    run: &crate::core::run::scope::RunScope::default(),
                    fed_namespaces: &BTreeMap::new(),
                    host_namespaces: &HashMap::new(),
                    versions: &HashMap::new(),
                };
                let empty: BTreeMap<String, Listing> = clusters
                    .iter()
                    .map(|c| (c.name.clone(), Listing::Listed(HashMap::new())))
                    .collect();
                let t = FederatedType {
                    target: target.clone(),
                    federated_kind: "FederatedConfigMap".into(),
                    target_plural: "configmaps".into(),
                    namespaced: true,
                };
                let mut decided: Vec<Value> = inputs(&objects)
                    .federated
                    .iter()
                    .flat_map(|f| decide::decide_object(&federation, &t, &f.object, &empty).decisions)
                    .filter(|d| d.cluster == c.name)
                    .filter_map(|d| match d.action {
                        Action::Create(o) => Some((*o).clone()),
                        _ => None,
                    })
                    .collect();
                let mut got = rendered.clusters.get(&c.name).cloned().unwrap_or_default();
                let name = |o: &Value| o["metadata"]["name"].as_str().unwrap_or("").to_string();
                want.sort_by_key(name);
                got.sort_by_key(name);
                decided.sort_by_key(name);
                prop_assert_eq!(&got, &want, "cluster {}", c.name);
                prop_assert_eq!(&decided, &want, "cluster {}: the decide step", c.name);
            }
        }
    }
}
