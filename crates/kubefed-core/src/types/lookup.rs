//! Finding the API resource a user means (`deployments`, `deploy`,
//! `Deployment`, `deployments.apps`, `etcdclusters`) among what discovery
//! lists, as KubeFed's lookup does, with two faults fixed: `--version`
//! accepts any served version (upstream: only the preferred one), and
//! `singular.group` (`deployment.apps`) is accepted as the docs promised.

use serde_json::Value;
use thiserror::Error;

/// A served API resource, as discovery lists it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ServedResource {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub namespaced: bool,
    /// The group's preferred version.
    pub preferred: bool,
    /// Verbs the resource supports (`list`, `create`...).
    pub verbs: Vec<String>,
}

impl ServedResource {
    /// `plural` for the core group, `plural.group` otherwise: the name of
    /// FederatedTypeConfigs and of CRDs.
    pub fn qualified_name(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// True when `key` names this resource (any of kubectl's spellings).
    pub fn matches(&self, key: &str) -> bool {
        let key = key.to_lowercase();
        let singular = if self.singular.is_empty() {
            self.kind.to_lowercase()
        } else {
            self.singular.clone()
        };
        key == self.plural
            || key == singular
            || key == self.kind.to_lowercase()
            || key == self.qualified_name()
            || (!self.group.is_empty() && key == format!("{singular}.{}", self.group))
            || self.short_names.iter().any(|s| s.to_lowercase() == key)
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum LookupError {
    #[error("no API resource named {key:?}{hint}")]
    NotFound { key: String, hint: String },
    #[error("{key:?} matches several API resources: {}; give a group-qualified plural name", candidates.join(", "))]
    Ambiguous {
        key: String,
        candidates: Vec<String>,
    },
}

/// The resource `key` names. Without `version`, only preferred versions
/// count (as upstream); with it, any served version. The core group wins
/// outright (discovery lists it first: `events` is the core one).
pub fn find(
    resources: &[ServedResource],
    key: &str,
    version: Option<&str>,
) -> Result<ServedResource, LookupError> {
    let eligible = |r: &&ServedResource| match version {
        Some(v) => r.version == v,
        None => r.preferred,
    };
    let matches: Vec<&ServedResource> = resources
        .iter()
        .filter(eligible)
        .filter(|r| r.matches(key))
        .collect();
    if let Some(core) = matches.iter().find(|r| r.group.is_empty()) {
        return Ok((*core).clone());
    }
    let mut names: Vec<String> = matches.iter().map(|r| r.qualified_name()).collect();
    names.sort();
    names.dedup();
    match names.len() {
        1 => Ok(matches[0].clone()),
        0 => {
            let hint = match version {
                Some(v) if resources.iter().any(|r| r.matches(key)) => {
                    let mut served: Vec<String> = resources
                        .iter()
                        .filter(|r| r.matches(key))
                        .map(|r| r.api_version())
                        .collect();
                    served.sort();
                    format!(" in version {v} (served: {})", served.join(", "))
                }
                _ => String::new(),
            };
            Err(LookupError::NotFound {
                key: key.to_string(),
                hint,
            })
        }
        _ => Err(LookupError::Ambiguous {
            key: key.to_string(),
            candidates: names,
        }),
    }
}

/// KubeFed's table of equivalent (deprecated) APIs, with
/// `networking.k8s.io/v1` ingresses added (upstream missed it).
const EQUIVALENT_APIS: &[(&str, &[&str])] = &[
    (
        "deployments",
        &[
            "apps/v1",
            "apps/v1beta1",
            "apps/v1beta2",
            "extensions/v1beta1",
        ],
    ),
    (
        "daemonsets",
        &[
            "apps/v1",
            "apps/v1beta1",
            "apps/v1beta2",
            "extensions/v1beta1",
        ],
    ),
    ("statefulsets", &["apps/v1", "apps/v1beta1", "apps/v1beta2"]),
    (
        "replicasets",
        &[
            "apps/v1",
            "apps/v1beta1",
            "apps/v1beta2",
            "extensions/v1beta1",
        ],
    ),
    (
        "networkpolicies",
        &["networking.k8s.io/v1", "extensions/v1beta1"],
    ),
    (
        "podsecuritypolicies",
        &["policy/v1beta1", "extensions/v1beta1"],
    ),
    (
        "ingresses",
        &[
            "networking.k8s.io/v1",
            "networking.k8s.io/v1beta1",
            "extensions/v1beta1",
        ],
    ),
];

/// True when `a` and `b` are the same resource served under another
/// group/version (enabling both would federate it twice).
pub fn equivalent(plural: &str, a_group_version: &str, b_group_version: &str) -> bool {
    a_group_version != b_group_version
        && EQUIVALENT_APIS
            .iter()
            .find(|(p, _)| *p == plural)
            .is_some_and(|(_, gvs)| {
                gvs.contains(&a_group_version) && gvs.contains(&b_group_version)
            })
}

/// What discovery answered for `/api` or `/apis`: the aggregated form
/// (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`, GA in 1.30: every
/// group's resources in one answer) or the legacy one (`APIVersions` /
/// `APIGroupList`: group versions, whose resources take one request each).
#[derive(Clone, Debug, PartialEq)]
pub enum DiscoveryRoot {
    Aggregated(Vec<ServedResource>),
    /// (group, group version, preferred) to list one by one; the core
    /// group's name is `""`.
    Legacy(Vec<(String, String, bool)>),
}

/// Reads an answer of `/api` or `/apis` (see [`DiscoveryRoot`]). With
/// `all_versions` false only each group's preferred version counts (the
/// first of an aggregated group's versions, as the server orders them).
/// `None`: neither form.
pub fn discovery_root(doc: &Value, all_versions: bool) -> Option<DiscoveryRoot> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    match doc["kind"].as_str()? {
        "APIGroupDiscoveryList" => {
            let mut out = Vec::new();
            for g in doc["items"].as_array()? {
                let group = text(&g["metadata"]["name"]);
                for (i, v) in g["versions"].as_array()?.iter().enumerate() {
                    if i > 0 && !all_versions {
                        break;
                    }
                    for r in v["resources"].as_array().into_iter().flatten() {
                        out.push(ServedResource {
                            group: group.clone(),
                            version: text(&v["version"]),
                            kind: text(&r["responseKind"]["kind"]),
                            plural: text(&r["resource"]),
                            singular: text(&r["singularResource"]),
                            short_names: strings(&r["shortNames"]),
                            namespaced: r["scope"] == "Namespaced",
                            preferred: i == 0,
                            verbs: strings(&r["verbs"]),
                        });
                    }
                }
            }
            Some(DiscoveryRoot::Aggregated(out))
        }
        "APIVersions" => Some(DiscoveryRoot::Legacy(
            doc["versions"]
                .as_array()?
                .iter()
                .map(|v| (String::new(), text(v), true))
                .collect(),
        )),
        "APIGroupList" => {
            let mut out = Vec::new();
            for g in doc["groups"].as_array()? {
                let preferred = text(&g["preferredVersion"]["groupVersion"]);
                for v in g["versions"].as_array()? {
                    let gv = text(&v["groupVersion"]);
                    let is_preferred = gv == preferred;
                    if all_versions || is_preferred {
                        out.push((text(&g["name"]), gv, is_preferred));
                    }
                }
            }
            Some(DiscoveryRoot::Legacy(out))
        }
        _ => None,
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(
        group: &str,
        version: &str,
        kind: &str,
        plural: &str,
        shorts: &[&str],
        preferred: bool,
    ) -> ServedResource {
        ServedResource {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            short_names: shorts.iter().map(|s| s.to_string()).collect(),
            namespaced: true,
            preferred,
            verbs: vec!["list".into()],
        }
    }

    fn served() -> Vec<ServedResource> {
        vec![
            r("", "v1", "ConfigMap", "configmaps", &["cm"], true),
            r("", "v1", "Event", "events", &["ev"], true),
            r("apps", "v1", "Deployment", "deployments", &["deploy"], true),
            r(
                "extensions",
                "v1beta1",
                "Deployment",
                "deployments",
                &["deploy"],
                true,
            ),
            r(
                "extensions",
                "v1beta1",
                "Ingress",
                "ingresses",
                &["ing"],
                true,
            ),
            r(
                "networking.k8s.io",
                "v1",
                "Ingress",
                "ingresses",
                &["ing"],
                true,
            ),
            r(
                "networking.k8s.io",
                "v1beta1",
                "Ingress",
                "ingresses",
                &["ing"],
                false,
            ),
            r("events.k8s.io", "v1", "Event", "events", &["ev"], true),
            r(
                "etcd.database.coreos.com",
                "v1beta2",
                "EtcdCluster",
                "etcdclusters",
                &["etcd"],
                true,
            ),
        ]
    }

    #[test]
    fn finds_by_every_spelling() {
        let s = served();
        for key in [
            "etcdclusters",
            "etcdcluster",
            "EtcdCluster",
            "etcd",
            "etcdclusters.etcd.database.coreos.com",
            "etcdcluster.etcd.database.coreos.com",
        ] {
            assert_eq!(find(&s, key, None).unwrap().kind, "EtcdCluster", "{key}");
        }
        assert_eq!(find(&s, "cm", None).unwrap().plural, "configmaps");
        assert_eq!(find(&s, "deployments.apps", None).unwrap().group, "apps");
    }

    #[test]
    fn core_wins_and_ambiguity_is_an_error() {
        let s = served();
        assert_eq!(find(&s, "events", None).unwrap().group, "");
        let err = find(&s, "deploy", None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "\"deploy\" matches several API resources: deployments.apps, deployments.extensions; give a group-qualified plural name"
        );
        assert!(matches!(
            find(&s, "ingresses", None),
            Err(LookupError::Ambiguous { .. })
        ));
    }

    #[test]
    fn version_selects_any_served_version() {
        let s = served();
        let ing = find(&s, "ingresses.networking.k8s.io", Some("v1beta1")).unwrap();
        assert_eq!(ing.version, "v1beta1");
        let err = find(&s, "deployments.apps", Some("v2"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "no API resource named \"deployments.apps\" in version v2 (served: apps/v1)"
        );
        assert_eq!(
            find(&s, "widgets", None).unwrap_err().to_string(),
            "no API resource named \"widgets\""
        );
    }

    #[test]
    fn equivalent_apis_follow_the_table() {
        for (plural, gvs) in EQUIVALENT_APIS {
            for other in &gvs[1..] {
                assert!(equivalent(plural, gvs[0], other), "{plural} {other}");
            }
            assert!(!equivalent(plural, gvs[0], gvs[0]));
        }
        assert!(equivalent(
            "ingresses",
            "networking.k8s.io/v1",
            "extensions/v1beta1"
        ));
        assert!(!equivalent("configmaps", "v1", "v2"));
    }

    #[test]
    fn discovery_roots_in_both_forms() {
        use serde_json::json;
        let aggregated = json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "items": [
            {"metadata": {"name": "autoscaling"}, "versions": [
                {"version": "v2", "resources": [{"resource": "horizontalpodautoscalers", "singularResource": "horizontalpodautoscaler",
                    "responseKind": {"group": "autoscaling", "version": "v2", "kind": "HorizontalPodAutoscaler"},
                    "scope": "Namespaced", "shortNames": ["hpa"], "verbs": ["get", "list"]}]},
                {"version": "v1", "resources": [{"resource": "horizontalpodautoscalers", "singularResource": "horizontalpodautoscaler",
                    "responseKind": {"group": "autoscaling", "version": "v1", "kind": "HorizontalPodAutoscaler"},
                    "scope": "Namespaced", "verbs": ["get"]}]}]},
            {"metadata": {}, "versions": [{"version": "v1", "resources": [{"resource": "nodes",
                "responseKind": {"group": "", "version": "v1", "kind": "Node"}, "scope": "Cluster", "verbs": ["list"]}]}]}
        ]});
        let Some(DiscoveryRoot::Aggregated(preferred)) = discovery_root(&aggregated, false) else {
            panic!("aggregated")
        };
        assert_eq!(preferred.len(), 2);
        assert_eq!(
            (
                preferred[0].version.as_str(),
                preferred[0].short_names.clone(),
                preferred[0].namespaced
            ),
            ("v2", vec!["hpa".to_string()], true)
        );
        assert_eq!(
            (
                preferred[1].group.as_str(),
                preferred[1].kind.as_str(),
                preferred[1].namespaced
            ),
            ("", "Node", false)
        );
        let Some(DiscoveryRoot::Aggregated(all)) = discovery_root(&aggregated, true) else {
            panic!("aggregated")
        };
        assert_eq!(all.len(), 3);
        assert!(!all[1].preferred && all[1].version == "v1");

        let groups = json!({"kind": "APIGroupList", "groups": [{"name": "networking.k8s.io",
            "versions": [{"groupVersion": "networking.k8s.io/v1"}, {"groupVersion": "networking.k8s.io/v1beta1"}],
            "preferredVersion": {"groupVersion": "networking.k8s.io/v1"}}]});
        assert_eq!(
            discovery_root(&groups, false),
            Some(DiscoveryRoot::Legacy(vec![(
                "networking.k8s.io".into(),
                "networking.k8s.io/v1".into(),
                true
            )]))
        );
        let Some(DiscoveryRoot::Legacy(both)) = discovery_root(&groups, true) else {
            panic!()
        };
        assert_eq!(both.len(), 2);
        assert_eq!(
            discovery_root(&json!({"kind": "APIVersions", "versions": ["v1"]}), false),
            Some(DiscoveryRoot::Legacy(vec![(
                String::new(),
                "v1".into(),
                true
            )]))
        );
        assert_eq!(discovery_root(&json!({"kind": "Status"}), false), None);
    }
}
