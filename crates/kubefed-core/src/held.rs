//! An object as the watch holds it between rounds: its text, and a digest
//! of its essence (all but its status and what the API server bumps on
//! every write) so that a change can be told apart from a status update
//! without the object it replaces.
//!
//! A member copy is held as a *view*: only what decide and the passes read
//! of it (see [`member_view`]). A watch over 10,000 objects × 10 members
//! holds 100,000 copies, and most of a copy (a Deployment's pod template, a
//! ConfigMap's data) is never read: a change there shows as a new
//! resourceVersion or generation, and as a new essence digest, which is
//! what makes an edit by hand news.

use crate::object_text::ObjectText;
use serde_json::{Map, Value};
use std::hash::{DefaultHasher, Hash, Hasher};

/// An object's text, its essence's digest and its resourceVersion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub text: ObjectText,
    pub essence: u64,
    /// Its resourceVersion as a number (`None` when it is not one), read
    /// once here: the watch compares it with its own writes' answers on
    /// every event, and the text would have to be parsed for it.
    pub version: Option<u64>,
}

impl Held {
    /// A host object, held whole.
    pub fn whole(v: &Value) -> Held {
        Held {
            text: ObjectText::of(v),
            essence: essence_digest(v),
            version: resource_version(v),
        }
    }

    /// A member copy: its view, and the digest of the whole copy's essence.
    pub fn member_copy(v: &Value) -> Held {
        Held {
            text: ObjectText::of(&member_view(v)),
            essence: essence_digest(v),
            version: resource_version(v),
        }
    }

    /// What changed from `old` to this: news (`Some(true)`), the status
    /// or resourceVersion alone (`Some(false)`), or nothing (`None`).
    pub fn change_from(&self, old: &Held) -> Option<bool> {
        if self.essence != old.essence {
            Some(true)
        } else if self.text != old.text {
            Some(false)
        } else {
            None
        }
    }
}

/// An object's resourceVersion as a number: etcd's are, and for one
/// object they grow with each write (client-go's MutationCache compares
/// them so too). `None` when it is not one.
pub fn resource_version(v: &Value) -> Option<u64> {
    v["metadata"]["resourceVersion"].as_str()?.parse().ok()
}

/// The fields of a member copy's `spec` that are read: `retain` keeps
/// `replicas` (when replicas are retained), a Job's `selector` and template
/// labels, a Service's cluster IPs, node ports and health check node port;
/// an RSP reads `replicas` and `selector.matchLabels`; readiness (the
/// `--wait-ready` rules a rollout gates on) reads `replicas`, a Service's
/// `type` (a LoadBalancer waits for its address) and a Job's `completions`.
const SPEC_READ: [&str; 8] = [
    "replicas",
    "selector",
    "clusterIP",
    "clusterIPs",
    "ports",
    "healthCheckNodePort",
    "type",
    "completions",
];

/// What decide and the passes read of a member copy: its kind, its whole
/// metadata but managedFields (versions, labels, annotations, finalizers,
/// deletion, uid), its whole status (remote status, Service status, RSP
/// readiness), a ServiceAccount's `secrets`, and the [`SPEC_READ`] fields
/// of its spec (with `spec.template.metadata.labels`, a Job's generated
/// labels). Nothing else of a copy is read.
pub fn member_view(copy: &Value) -> Value {
    let Some(obj) = copy.as_object() else {
        return copy.clone();
    };
    let mut view = Map::new();
    for key in ["apiVersion", "kind", "status", "secrets"] {
        if let Some(v) = obj.get(key) {
            view.insert(key.into(), v.clone());
        }
    }
    if let Some(meta) = obj.get("metadata") {
        let mut meta = meta.clone();
        if let Some(m) = meta.as_object_mut() {
            m.remove("managedFields");
        }
        view.insert("metadata".into(), meta);
    }
    match obj.get("spec") {
        Some(Value::Object(spec)) => {
            let mut kept: Map<String, Value> = SPEC_READ
                .iter()
                .filter_map(|k| Some((k.to_string(), spec.get(*k)?.clone())))
                .collect();
            if let Some(labels) = spec
                .get("template")
                .and_then(|t| t.get("metadata"))
                .and_then(|m| m.get("labels"))
            {
                kept.insert(
                    "template".into(),
                    serde_json::json!({"metadata": {"labels": labels}}),
                );
            }
            view.insert("spec".into(), Value::Object(kept));
        }
        Some(other) => {
            view.insert("spec".into(), other.clone());
        }
        None => {}
    }
    Value::Object(view)
}

/// The digest of `v` without its status, resourceVersion and managedFields:
/// equal for two versions of an object that differ only in those.
pub fn essence_digest(v: &Value) -> u64 {
    let mut h = DefaultHasher::new();
    match v.as_object() {
        Some(obj) => {
            h.write_u8(b'{');
            for (k, field) in obj.iter().filter(|(k, _)| *k != "status") {
                k.hash(&mut h);
                match (k.as_str(), field) {
                    ("metadata", Value::Object(meta)) => {
                        h.write_u8(b'{');
                        for (mk, mv) in meta
                            .iter()
                            .filter(|(k, _)| *k != "resourceVersion" && *k != "managedFields")
                        {
                            mk.hash(&mut h);
                            hash_value(mv, &mut h);
                        }
                        h.write_u8(b'}');
                    }
                    _ => hash_value(field, &mut h),
                }
            }
            h.write_u8(b'}');
        }
        None => hash_value(v, &mut h),
    }
    h.finish()
}

/// Hashes a value with its shape: each kind of value and each container's
/// end is marked, so `["a","b"]` and `["ab"]` differ.
fn hash_value(v: &Value, h: &mut DefaultHasher) {
    match v {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => {
            h.write_u8(1);
            b.hash(h);
        }
        Value::Number(n) => {
            h.write_u8(2);
            n.to_string().hash(h);
        }
        Value::String(s) => {
            h.write_u8(3);
            s.hash(h);
        }
        Value::Array(a) => {
            h.write_u8(4);
            for x in a {
                hash_value(x, h);
            }
            h.write_u8(5);
        }
        Value::Object(o) => {
            h.write_u8(6);
            for (k, x) in o {
                k.hash(h);
                hash_value(x, h);
            }
            h.write_u8(7);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::propagation::deletion::deletion_decisions;
    use crate::propagation::desired::TargetType;
    use crate::propagation::federated::FederatedObject;
    use crate::propagation::member::{MemberState, SyncSettings, sync_decisions};
    use crate::propagation::readiness::{Readiness, readiness};
    use crate::scheduling::preference::observe_member;
    use proptest::prelude::*;
    use serde_json::json;
    use std::collections::BTreeSet;

    fn meta(name: &str) -> Value {
        json!({"name": name, "namespace": "shop", "uid": "u-1", "resourceVersion": "41",
               "generation": 3, "creationTimestamp": "2026-12-03T10:00:00Z",
               "labels": {"kubefed.io/managed": "true", "app": name},
               "annotations": {"a": "b"}, "finalizers": ["x/y"],
               "managedFields": [{"manager": "kubefedctl", "fieldsV1": {"f:data": {}}}]})
    }

    /// Member copies as the API servers return them, one per kind whose
    /// retention or passes read more than metadata.
    fn copies() -> Vec<(&'static str, Value)> {
        vec![
            (
                "Deployment",
                json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": meta("web"),
                "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                         "strategy": {"type": "RollingUpdate"},
                         "template": {"metadata": {"labels": {"app": "web"}},
                                      "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
                "status": {"replicas": 3, "readyReplicas": 2, "observedGeneration": 3}}),
            ),
            (
                "Service",
                json!({"apiVersion": "v1", "kind": "Service", "metadata": meta("svc"),
                "spec": {"type": "NodePort", "clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"],
                         "healthCheckNodePort": 31000, "sessionAffinity": "None",
                         "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}]},
                "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}),
            ),
            (
                "Job",
                json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("job"),
                "spec": {"selector": {"matchLabels": {"controller-uid": "u-9"}},
                         "completions": 3, "backoffLimit": 6,
                         "template": {"metadata": {"labels": {"controller-uid": "u-9",
                                                              "job-name": "job"}},
                                      "spec": {"containers": [{"name": "c"}]}}},
                "status": {"succeeded": 1}}),
            ),
            (
                "ServiceAccount",
                json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": meta("sa"), "secrets": [{"name": "sa-token-x"}],
                "imagePullSecrets": [{"name": "pull"}]}),
            ),
            (
                "ConfigMap",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("cm"),
                "data": {"k": "v".repeat(500)}}),
            ),
        ]
    }

    fn fed_of(kind: &str, copy: &Value, retain_replicas: bool) -> Value {
        let mut template = copy.clone();
        // What the API server fills in is not in a template: `retain`
        // takes it from the copy.
        let t = template.as_object_mut().unwrap();
        t.remove("status");
        t.remove("secrets");
        if let Some(spec) = t.get_mut("spec").and_then(Value::as_object_mut) {
            for k in ["clusterIP", "clusterIPs", "healthCheckNodePort", "replicas"] {
                spec.remove(k);
            }
            if kind == "Job" {
                spec.remove("selector");
                spec["template"]["metadata"]["labels"] = json!({"app": "job"});
            }
            if let Some(Value::Array(ports)) = spec.get_mut("ports") {
                ports
                    .iter_mut()
                    .for_each(|p| drop(p.as_object_mut().unwrap().remove("nodePort")));
            }
        }
        template["metadata"] = json!({"labels": {"app": "changed"}});
        json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": format!("Federated{kind}"),
               "metadata": {"name": copy["metadata"]["name"], "namespace": "shop"},
               "spec": {"template": template, "retainReplicas": retain_replicas,
                        "placement": {"clusters": [{"name": "a"}]},
                        "overrides": [{"clusterName": "a",
                                       "clusterOverrides": [{"path": "/metadata/labels/o",
                                                             "value": "1"}]}]}})
    }

    fn state(live: Value) -> MemberState<'static> {
        static NO_LABELS: std::collections::BTreeMap<String, String> =
            std::collections::BTreeMap::new();
        MemberState {
            cluster: "a",
            labels: &NO_LABELS,
            ready: true,
            live: Some(live),
            unobserved: None,
            is_host_namespace: false,
        }
    }

    /// Every decision and every pass reading a copy reads the same of its
    /// view as of the whole copy: the desired objects (with what `retain`
    /// keeps), versions, deletion, RSP replicas and remote status.
    #[test]
    fn decisions_and_passes_read_the_same_of_a_view_as_of_the_copy() {
        let placed = BTreeSet::from(["a".to_string()]);
        let settings = SyncSettings {
            adopt_resources: true,
            force_conflicts: false,
            report_only: false,
        };
        for (kind, copy) in copies() {
            let view = member_view(&copy);
            let target = TargetType::new("", "v1", kind);
            for retain in [false, true] {
                let fed = fed_of(kind, &copy, retain);
                for versions in [None, Some(json!({"clustersVersions": []}))] {
                    let decide = |live: &Value| {
                        let states = [state(live.clone())];
                        let d = sync_decisions(
                            FederatedObject::new(&fed),
                            &target,
                            &placed,
                            &states,
                            versions.as_ref(),
                            settings,
                            crate::propagation::strategy::Strategy::plain(settings.adopt_resources),
                        );
                        format!("{d:?}")
                    };
                    let (whole, of_view) = (decide(&copy), decide(&view));
                    assert_eq!(whole, of_view, "{kind}");
                }
                let mut deleting = fed.clone();
                deleting["metadata"]["deletionTimestamp"] = json!("2026-12-03T11:00:00Z");
                assert_eq!(
                    format!(
                        "{:?}",
                        deletion_decisions(
                            FederatedObject::new(&deleting),
                            &placed,
                            &[state(copy.clone())]
                        )
                    ),
                    format!(
                        "{:?}",
                        deletion_decisions(
                            FederatedObject::new(&deleting),
                            &placed,
                            &[state(view.clone())]
                        )
                    ),
                    "{kind}"
                );
            }
            assert_eq!(observe_member(&copy), observe_member(&view), "{kind}");
            assert_eq!(copy["status"], view["status"], "{kind}");
            let ready = |v: &Value| {
                let group = v["apiVersion"].as_str().unwrap().rsplit_once('/');
                let group = group.map_or("", |(g, _)| g);
                readiness(group, kind, v)
            };
            assert_eq!(ready(&copy), ready(&view), "{kind}");
            assert_eq!(
                crate::propagation::version::member_version(&copy),
                crate::propagation::version::member_version(&view),
                "{kind}"
            );
        }
    }

    #[test]
    fn a_view_leaves_out_what_is_never_read() {
        let views: Vec<(&str, Value)> =
            copies().iter().map(|(k, c)| (*k, member_view(c))).collect();
        for (kind, view) in &views {
            assert!(view["metadata"].get("managedFields").is_none(), "{kind}");
            assert_eq!(view["metadata"]["resourceVersion"], "41", "{kind}");
        }
        let deployment = &views[0].1;
        assert_eq!(
            deployment["spec"],
            json!({"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                   "template": {"metadata": {"labels": {"app": "web"}}}})
        );
        let config_map = &views[4].1;
        assert!(config_map.get("data").is_none());
        let service_account = &views[3].1;
        assert!(service_account.get("imagePullSecrets").is_none());
        assert_eq!(service_account["secrets"], json!([{"name": "sa-token-x"}]));
    }

    /// A rollout gates on readiness read from views: a LoadBalancer
    /// Service without an address is not ready, a Job counts its own
    /// completions.
    #[test]
    fn readiness_reads_a_view_as_the_copy() {
        let lb = json!({"apiVersion": "v1", "kind": "Service", "metadata": meta("lb"),
            "spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.8",
                     "ports": [{"port": 80, "nodePort": 30081}]},
            "status": {"loadBalancer": {}}});
        assert_eq!(
            readiness("", "Service", &member_view(&lb)),
            Readiness::Pending("no load balancer address yet".into())
        );
        let mut served = lb.clone();
        served["status"]["loadBalancer"]["ingress"] = json!([{"ip": "1.2.3.4"}]);
        assert_eq!(
            readiness("", "Service", &member_view(&served)),
            Readiness::Ready
        );
        let job = &copies()[2].1;
        assert_eq!(
            readiness("batch", "Job", &member_view(job)),
            Readiness::Pending("1/3 succeeded".into())
        );
    }

    #[test]
    fn a_change_is_news_unless_only_status_or_versions_moved() {
        for (kind, copy) in copies() {
            let held = Held::member_copy(&copy);
            assert_eq!(Held::member_copy(&copy).change_from(&held), None, "{kind}");

            let mut moved = copy.clone();
            moved["metadata"]["resourceVersion"] = json!("42");
            moved["metadata"]["managedFields"] = json!([]);
            moved["status"] = json!({"observedGeneration": 4});
            assert_eq!(
                Held::member_copy(&moved).change_from(&held),
                Some(false),
                "{kind}"
            );

            // An edit by hand of a field the view leaves out.
            let mut edited = copy.clone();
            edited["unread"] = json!("by hand");
            assert_eq!(
                Held::member_copy(&edited).change_from(&held),
                Some(true),
                "{kind}"
            );
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(|n| json!(n)),
            "[a-c]{0,3}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-c]{1,2}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Two objects have the same digest exactly when they are equal
        /// once status, resourceVersion and managedFields are left out.
        #[test]
        fn the_digest_follows_the_essence(
            a in json_value(), b in json_value(), status in json_value(), rv in json_value()
        ) {
            let obj = |spec: &Value, status: &Value, rv: &Value| json!({
                "metadata": {"name": "x", "resourceVersion": rv, "managedFields": status},
                "spec": spec, "status": status});
            prop_assert_eq!(
                essence_digest(&obj(&a, &status, &rv)),
                essence_digest(&obj(&a, &json!(null), &json!("1")))
            );
            prop_assert_eq!(
                essence_digest(&obj(&a, &status, &rv)) == essence_digest(&obj(&b, &status, &rv)),
                a == b
            );
        }
    }
}
