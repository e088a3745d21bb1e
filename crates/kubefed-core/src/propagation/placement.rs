//! Which member clusters a federated object selects (KubeFed's placement).
//!
//! An explicit `spec.placement.clusters` list always wins, even when empty
//! (that is how users say "nowhere"); only without it does the label
//! selector apply, and an absent selector selects nothing, so that a
//! forgotten placement never spreads an object everywhere. Names that are
//! not registered clusters are dropped; readiness is not part of placement.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::propagation::federated::FederatedObject;

use crate::cluster::membership::Scope;

/// A registered member cluster as the pure core sees it (a `KubeFedCluster`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cluster {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// `status.conditions` says Ready (decided by the caller).
    pub ready: bool,
}

impl Cluster {
    pub fn new(name: &str, labels: &[(&str, &str)], ready: bool) -> Cluster {
        Cluster {
            name: name.to_string(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ready,
        }
    }
}

/// A placement that cannot be computed (upstream: `ComputePlacementFailed`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlacementError {
    #[error("{object}: invalid spec.placement.clusterSelector: {problem}")]
    InvalidSelector {
        object: String,
        problem: SelectorError,
    },
    #[error("{object}: invalid spec.placement: {problem}")]
    InvalidPlacement { object: String, problem: String },
}

/// Selected cluster names (upstream `pkg/controller/util/placement.go`): explicit list if present,
/// else the selector, intersected with the registered clusters.
pub fn selected_clusters(
    fed: &Value,
    clusters: &[Cluster],
) -> Result<BTreeSet<String>, PlacementError> {
    compute(FederatedObject::new(fed), clusters, false)
}

/// The RSP's selector-only variant (upstream
/// `pkg/controller/schedulingpreference`): `clusters` lists are ignored,
/// an absent selector selects nothing, `{}` selects all.
pub fn selector_only_clusters(
    fed: &Value,
    clusters: &[Cluster],
) -> Result<BTreeSet<String>, PlacementError> {
    compute(FederatedObject::new(fed), clusters, true)
}

/// Placement of a namespaced federated object (upstream
/// `pkg/controller/sync/placement.go`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespacedPlacement {
    pub clusters: BTreeSet<String>,
    /// Cluster-scoped control plane and no FederatedNamespace: the object
    /// is placed nowhere and the Propagation reason is `NamespaceNotFederated`.
    pub namespace_not_federated: bool,
}

/// Narrow a namespaced object's own placement by its FederatedNamespace's
/// placement (`federated_namespace` = the clusters selected by
/// `<ns>/<ns>`, `None` when it does not exist). A cluster-scoped plane
/// without FederatedNamespace places nothing; a namespace-scoped plane then
/// uses the object's placement verbatim.
pub fn namespaced_placement(
    resource: BTreeSet<String>,
    federated_namespace: Option<&BTreeSet<String>>,
    scope: Scope,
) -> NamespacedPlacement {
    match (federated_namespace, scope) {
        (Some(ns), _) => NamespacedPlacement {
            clusters: resource.intersection(ns).cloned().collect(),
            namespace_not_federated: false,
        },
        (None, Scope::Namespaced) => NamespacedPlacement {
            clusters: resource,
            namespace_not_federated: false,
        },
        (None, Scope::Cluster) => NamespacedPlacement {
            clusters: BTreeSet::new(),
            namespace_not_federated: true,
        },
    }
}

/// The placement the sync controller uses for `fed`: its
/// own placement, and for namespaced types other than FederatedNamespace
/// the intersection with `federated_namespace` (the `<ns>/<ns>` object, or
/// `None` when it does not exist) as [`namespaced_placement`] decides.
pub fn sync_placement(
    fed: FederatedObject,
    federated_namespace: Option<&Value>,
    clusters: &[Cluster],
    scope: Scope,
    namespaced_type: bool,
) -> Result<NamespacedPlacement, PlacementError> {
    let own = compute(fed, clusters, false)?;
    if !namespaced_type || federated_namespace_kind(fed) {
        return Ok(NamespacedPlacement {
            clusters: own,
            namespace_not_federated: false,
        });
    }
    let ns = federated_namespace
        .map(|ns| selected_clusters(ns, clusters))
        .transpose()?;
    Ok(namespaced_placement(own, ns.as_ref(), scope))
}

/// `FederatedNamespace` in either API group spelling (`types.kubefed.io`
/// or the older `types.kubefed.k8s.io`); no apiVersion means "trust the kind".
pub fn is_federated_namespace(fed: &Value) -> bool {
    federated_namespace_kind(FederatedObject::new(fed))
}

fn federated_namespace_kind(fed: FederatedObject) -> bool {
    let kind_ok = fed.kind() == Some("FederatedNamespace");
    let group_ok = match fed.api_version() {
        None => true,
        Some(av) => {
            let group = av.split_once('/').map(|(g, _)| g).unwrap_or("");
            crate::types::legacy::TYPES_GROUPS.contains(&group)
        }
    };
    kind_ok && group_ok
}

fn compute(
    fed: FederatedObject,
    clusters: &[Cluster],
    selector_only: bool,
) -> Result<BTreeSet<String>, PlacementError> {
    let object = fed.describe();
    let listed = fed.placement_clusters();
    let registered: BTreeSet<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
    if let (Some(list), false) = (listed, selector_only) {
        let Value::Array(items) = list else {
            return Err(PlacementError::InvalidPlacement {
                object,
                problem: "clusters is not a list".into(),
            });
        };
        let mut out = BTreeSet::new();
        for (i, item) in items.iter().enumerate() {
            let Some(name) = item.get("name").and_then(Value::as_str) else {
                return Err(PlacementError::InvalidPlacement {
                    object,
                    problem: format!("clusters[{i}].name is not a string"),
                });
            };
            if registered.contains(name) {
                out.insert(name.to_string());
            }
        }
        return Ok(out);
    }
    let Some(selector) = fed.cluster_selector() else {
        return Ok(BTreeSet::new());
    };
    let selector = Selector::parse(selector)
        .map_err(|problem| PlacementError::InvalidSelector { object, problem })?;
    Ok(clusters
        .iter()
        .filter(|c| selector.matches(&c.labels))
        .map(|c| c.name.clone())
        .collect())
}

/// What is wrong with a label selector, worded as Kubernetes' validation
/// words it.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum SelectorError {
    #[error("not an object")]
    NotAnObject,
    #[error("matchLabels[{0}] is not a string")]
    LabelNotAString(String),
    #[error("matchLabels is not an object")]
    LabelsNotAnObject,
    #[error("matchExpressions is not a list")]
    ExpressionsNotAList,
    #[error("matchExpressions[{index}]: {problem}")]
    Expression {
        index: usize,
        problem: Box<SelectorError>,
    },
    #[error("key is required")]
    NoKey,
    #[error("operator is required")]
    NoOperator,
    #[error("values must be strings")]
    ValueNotAString,
    #[error("values is not a list")]
    ValuesNotAList,
    #[error("for 'in', 'notin' operators, values set can't be empty (operator {0})")]
    NoValues(String),
    #[error("values set must be empty for exists and does not exist (operator {0})")]
    UnwantedValues(String),
    #[error("{0:?} is not a valid label selector operator")]
    UnknownOperator(String),
    /// `-l`: a set without its closing parenthesis.
    #[error("{0:?}: no closing parenthesis")]
    Unclosed(String),
    /// `-l`: set values not in parentheses.
    #[error("{0:?}: values must be in parentheses")]
    NotParenthesised(String),
    #[error("invalid label key {key:?}: {problem}")]
    Key { key: String, problem: String },
    #[error("invalid label value {value:?}: {problem}")]
    Value {
        value: String,
        problem: &'static str,
    },
}

/// A parsed `metav1.LabelSelector` (matchLabels AND matchExpressions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Selector {
    /// Parse a label selector object; `{}` matches everything. Errors say
    /// which part is wrong, as Kubernetes' validation would reject it.
    pub fn parse(selector: &Value) -> Result<Selector, SelectorError> {
        let Value::Object(m) = selector else {
            return Err(SelectorError::NotAnObject);
        };
        let mut requirements = Vec::new();
        match m.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(labels)) => {
                for (k, v) in labels {
                    let Some(v) = v.as_str() else {
                        return Err(SelectorError::LabelNotAString(k.clone()));
                    };
                    check_key(k)?;
                    check_value(v)?;
                    requirements.push(Requirement::In(k.clone(), [v.to_string()].into()));
                }
            }
            Some(_) => return Err(SelectorError::LabelsNotAnObject),
        }
        match m.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(exprs)) => {
                for (i, e) in exprs.iter().enumerate() {
                    requirements.push(parse_expression(e).map_err(|p| {
                        SelectorError::Expression {
                            index: i,
                            problem: Box::new(p),
                        }
                    })?);
                }
            }
            Some(_) => return Err(SelectorError::ExpressionsNotAList),
        }
        Ok(Selector { requirements })
    }

    /// Parse kubectl's `-l` syntax (`a=b,c!=d,e in (x,y),f notin (z),g,!h`;
    /// `==` as `=`), as the API server reads a `labelSelector` query.
    pub fn parse_flag(text: &str) -> Result<Selector, SelectorError> {
        let mut requirements = Vec::new();
        let mut rest = text.trim();
        while !rest.is_empty() {
            // A set's values may hold commas: cut at the closing parenthesis.
            let end = match (rest.find('('), rest.find(',')) {
                (Some(open), Some(comma)) if open < comma => {
                    let close = rest
                        .find(')')
                        .ok_or_else(|| SelectorError::Unclosed(rest.to_string()))?;
                    rest[close..].find(',').map_or(rest.len(), |c| close + c)
                }
                (_, Some(comma)) => comma,
                _ => rest.len(),
            };
            let part = rest[..end].trim();
            rest = rest[end..].trim_start_matches(',').trim();
            requirements.push(parse_flag_requirement(part)?);
        }
        Ok(Selector { requirements })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

/// One requirement of a `-l` selector.
fn parse_flag_requirement(part: &str) -> Result<Requirement, SelectorError> {
    let set = |values: &str| -> Result<BTreeSet<String>, SelectorError> {
        let inner = values
            .trim()
            .strip_prefix('(')
            .and_then(|v| v.strip_suffix(')'))
            .ok_or_else(|| SelectorError::NotParenthesised(part.to_string()))?;
        inner
            .split(',')
            .map(|v| {
                let v = v.trim();
                check_value(v).map(|()| v.to_string())
            })
            .collect()
    };
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if let [key, rest] = words[..] {
        let rest = rest.trim();
        if let Some(values) = rest.strip_prefix("notin") {
            check_key(key)?;
            return Ok(Requirement::NotIn(key.to_string(), set(values)?));
        }
        if let Some(values) = rest.strip_prefix("in") {
            check_key(key)?;
            return Ok(Requirement::In(key.to_string(), set(values)?));
        }
    }
    let pair = |op: &str| part.split_once(op).map(|(k, v)| (k.trim(), v.trim()));
    if let Some((k, v)) = pair("!=") {
        check_key(k)?;
        check_value(v)?;
        return Ok(Requirement::NotIn(k.to_string(), [v.to_string()].into()));
    }
    if let Some((k, v)) = pair("==").or_else(|| pair("=")) {
        check_key(k)?;
        check_value(v)?;
        return Ok(Requirement::In(k.to_string(), [v.to_string()].into()));
    }
    if let Some(k) = part.strip_prefix('!') {
        check_key(k.trim())?;
        return Ok(Requirement::DoesNotExist(k.trim().to_string()));
    }
    check_key(part)?;
    Ok(Requirement::Exists(part.to_string()))
}

fn parse_expression(e: &Value) -> Result<Requirement, SelectorError> {
    let key = e
        .get("key")
        .and_then(Value::as_str)
        .ok_or(SelectorError::NoKey)?
        .to_string();
    check_key(&key)?;
    let op = e
        .get("operator")
        .and_then(Value::as_str)
        .ok_or(SelectorError::NoOperator)?;
    let values: BTreeSet<String> = match e.get("values") {
        None | Some(Value::Null) => BTreeSet::new(),
        Some(Value::Array(vs)) => vs
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or(SelectorError::ValueNotAString)
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(SelectorError::ValuesNotAList),
    };
    for v in &values {
        check_value(v)?;
    }
    match op {
        "In" | "NotIn" if values.is_empty() => Err(SelectorError::NoValues(op.to_string())),
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            Err(SelectorError::UnwantedValues(op.to_string()))
        }
        "In" => Ok(Requirement::In(key, values)),
        "NotIn" => Ok(Requirement::NotIn(key, values)),
        "Exists" => Ok(Requirement::Exists(key)),
        "DoesNotExist" => Ok(Requirement::DoesNotExist(key)),
        other => Err(SelectorError::UnknownOperator(other.to_string())),
    }
}

/// Kubernetes' label-key rule: optional DNS-subdomain prefix and `/`, then
/// a name of at most 63 characters of alphanumerics, `-`, `_`, `.`, starting
/// and ending alphanumeric.
fn check_key(key: &str) -> Result<(), SelectorError> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && let Some(e) = crate::names::subdomain_error(p)
    {
        return Err(SelectorError::Key {
            key: key.to_string(),
            problem: format!("prefix {e}"),
        });
    }
    if name.is_empty() {
        return Err(SelectorError::Key {
            key: key.to_string(),
            problem: "name part must not be empty".into(),
        });
    }
    check_name_part(name).map_err(|e| SelectorError::Key {
        key: key.to_string(),
        problem: e.into(),
    })
}

/// Kubernetes' label-value rule: empty, or a name part as in keys.
fn check_value(value: &str) -> Result<(), SelectorError> {
    if value.is_empty() {
        return Ok(());
    }
    check_name_part(value).map_err(|problem| SelectorError::Value {
        value: value.to_string(),
        problem,
    })
}

fn check_name_part(part: &str) -> Result<(), &'static str> {
    if part.len() > 63 {
        return Err("must be no more than 63 characters");
    }
    let ok_inner = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let first_last_ok = part.starts_with(|c: char| c.is_ascii_alphanumeric())
        && part.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !part.chars().all(ok_inner) || !first_last_ok {
        return Err(
            "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each error is worded as Kubernetes' validation words it.
    #[test]
    fn selector_errors_say_what_is_wrong() {
        let long = "v".repeat(64);
        let cases: Vec<(Result<Selector, SelectorError>, String)> = vec![
            (Selector::parse(&json!("x")), "not an object".into()),
            (
                Selector::parse(&json!({"matchLabels": {"a": 1}})),
                "matchLabels[a] is not a string".into(),
            ),
            (
                Selector::parse(&json!({"matchExpressions": [{"key": "a", "operator": "In"}]})),
                "matchExpressions[0]: for 'in', 'notin' operators, values set can't be empty (operator In)".into(),
            ),
            (
                Selector::parse(&json!({"matchExpressions": [{"key": "a", "operator": "Near"}]})),
                "matchExpressions[0]: \"Near\" is not a valid label selector operator".into(),
            ),
            (
                Selector::parse_flag("a in (x"),
                "\"a in (x\": values must be in parentheses".into(),
            ),
            (
                Selector::parse_flag("-bad=x"),
                "invalid label key \"-bad\": must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character".into(),
            ),
            (
                Selector::parse_flag(&format!("a={long}")),
                format!("invalid label value {long:?}: must be no more than 63 characters"),
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got.unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn flag_selectors_read_as_kubectl_writes_them() {
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let shop = labels(&[("team", "shop"), ("tier", "web")]);
        let cases = [
            ("team=shop", true),
            ("team==shop", true),
            ("team=ops", false),
            ("team!=ops", true),
            ("team=shop,tier=db", false),
            ("tier in (web, db)", true),
            ("tier in (db),team=shop", false),
            ("tier notin (db,cache), team", true),
            ("!owner", true),
            ("owner", false),
            ("app.kubernetes.io/part-of!=shop", true),
        ];
        for (text, want) in cases {
            let s = Selector::parse_flag(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(s.matches(&shop), want, "{text}");
        }
        for bad in ["tier in web", "tier in (web", "Bad Key=x", "a=b c"] {
            assert!(Selector::parse_flag(bad).is_err(), "{bad} is refused");
        }
    }
    use serde_json::json;

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn two_clusters() -> Vec<Cluster> {
        vec![
            Cluster::new("cluster1", &[], true),
            Cluster::new("cluster2", &[("foo", "bar")], false),
        ]
    }

    // Upstream util/placement_test.go: the 5 cases.
    #[test]
    fn upstream_placement_cases() {
        let cases = [
            (
                json!({"clusters": [{"name": "cluster1"}], "clusterSelector": {}}),
                names(&["cluster1"]),
            ),
            (json!({}), names(&[])),
            (
                json!({"clusters": [], "clusterSelector": {"matchLabels": {"foo": "bar"}}}),
                names(&[]),
            ),
            (
                json!({"clusterSelector": {}}),
                names(&["cluster1", "cluster2"]),
            ),
            (
                json!({"clusterSelector": {"matchLabels": {"foo": "bar"}}}),
                names(&["cluster2"]),
            ),
        ];
        for (placement, want) in cases {
            let fed = json!({"spec": {"placement": placement}});
            assert_eq!(
                selected_clusters(&fed, &two_clusters()).unwrap(),
                want,
                "{placement}"
            );
        }
    }

    #[test]
    fn explicit_names_are_intersected_with_registered_clusters() {
        let fed =
            json!({"spec": {"placement": {"clusters": [{"name": "cluster2"}, {"name": "ghost"}]}}});
        assert_eq!(
            selected_clusters(&fed, &two_clusters()).unwrap(),
            names(&["cluster2"])
        );
        let null_list = json!({"spec": {"placement": {"clusters": null, "clusterSelector": {}}}});
        assert_eq!(
            selected_clusters(&null_list, &two_clusters())
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            selected_clusters(&json!({}), &two_clusters()).unwrap(),
            names(&[])
        );
    }

    #[test]
    fn match_expressions() {
        let clusters = vec![
            Cluster::new("a", &[("region", "eu"), ("tier", "gold")], true),
            Cluster::new("b", &[("region", "us")], true),
            Cluster::new("c", &[], true),
        ];
        let cases = [
            (
                json!({"matchExpressions": [{"key": "region", "operator": "In", "values": ["eu", "ap"]}]}),
                vec!["a"],
            ),
            (
                json!({"matchExpressions": [{"key": "region", "operator": "NotIn", "values": ["eu"]}]}),
                vec!["b", "c"],
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
                vec!["a"],
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
                vec!["b", "c"],
            ),
            (
                json!({"matchLabels": {"region": "us"}, "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
                vec!["b"],
            ),
            (json!({"matchLabels": {}}), vec!["a", "b", "c"]),
            (
                json!({"matchLabels": {"region": "eu"}, "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gold"]}]}),
                vec![],
            ),
        ];
        for (selector, want) in cases {
            let fed = json!({"spec": {"placement": {"clusterSelector": selector}}});
            assert_eq!(
                selected_clusters(&fed, &clusters).unwrap(),
                names(&want),
                "{selector}"
            );
        }
    }

    #[test]
    fn invalid_selectors_are_errors_naming_the_object() {
        let bad = [
            json!({"matchExpressions": [{"key": "a", "operator": "Like", "values": ["x"]}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
            json!({"matchLabels": {"a": 1}}),
            json!("foo=bar"),
        ];
        for selector in bad {
            let fed = json!({"kind": "FederatedConfigMap", "metadata": {"name": "n", "namespace": "ns"},
                "spec": {"placement": {"clusterSelector": selector}}});
            let err = selected_clusters(&fed, &two_clusters()).unwrap_err();
            assert!(
                err.to_string().contains("FederatedConfigMap \"ns/n\""),
                "{err}"
            );
        }
    }

    #[test]
    fn label_syntax_is_validated() {
        let bad = [
            json!({"matchLabels": {"foo bar": "x"}}),
            json!({"matchLabels": {"foo": "-x"}}),
            json!({"matchLabels": {"Bad_Prefix/foo": "x"}}),
            json!({"matchLabels": {"example.com/": "x"}}),
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["ok", "not ok"]}]}),
        ];
        for selector in bad {
            assert!(Selector::parse(&selector).is_err(), "{selector}");
        }
        let good = json!({"matchLabels": {"example.com/zone-a": "eu_1.b", "x": ""}});
        assert!(Selector::parse(&good).is_ok());
    }

    #[test]
    fn sync_placement_combines_object_and_namespace() {
        let clusters = two_clusters();
        let cm =
            json!({"kind": "FederatedConfigMap", "spec": {"placement": {"clusterSelector": {}}}});
        let fed_ns = json!({"apiVersion": "types.kubefed.k8s.io/v1beta1", "kind": "FederatedNamespace",
            "spec": {"placement": {"clusters": [{"name": "cluster2"}]}}});
        let p = sync_placement(
            FederatedObject::new(&cm),
            Some(&fed_ns),
            &clusters,
            Scope::Cluster,
            true,
        )
        .unwrap();
        assert_eq!(p.clusters, names(&["cluster2"]));
        let p = sync_placement(
            FederatedObject::new(&cm),
            None,
            &clusters,
            Scope::Cluster,
            true,
        )
        .unwrap();
        assert!(p.namespace_not_federated && p.clusters.is_empty());
        let p = sync_placement(
            FederatedObject::new(&fed_ns),
            None,
            &clusters,
            Scope::Cluster,
            true,
        )
        .unwrap();
        assert_eq!(
            p.clusters,
            names(&["cluster2"]),
            "a FederatedNamespace is not narrowed by itself"
        );
        let cr =
            json!({"kind": "FederatedClusterRole", "spec": {"placement": {"clusterSelector": {}}}});
        let p = sync_placement(
            FederatedObject::new(&cr),
            None,
            &clusters,
            Scope::Cluster,
            false,
        )
        .unwrap();
        assert_eq!(p.clusters.len(), 2);
        assert!(is_federated_namespace(
            &json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedNamespace"})
        ));
        assert!(!is_federated_namespace(
            &json!({"apiVersion": "example.com/v1", "kind": "FederatedNamespace"})
        ));
    }

    #[test]
    fn selector_only_mode_ignores_lists() {
        let fed = json!({"spec": {"placement": {"clusters": [{"name": "cluster1"}],
            "clusterSelector": {"matchLabels": {"foo": "bar"}}}}});
        assert_eq!(
            selector_only_clusters(&fed, &two_clusters()).unwrap(),
            names(&["cluster2"])
        );
        let list_only = json!({"spec": {"placement": {"clusters": [{"name": "cluster1"}]}}});
        assert_eq!(
            selector_only_clusters(&list_only, &two_clusters()).unwrap(),
            names(&[])
        );
    }

    #[test]
    fn federated_namespace_narrows_namespaced_objects() {
        let resource = names(&["a", "b", "c"]);
        let ns = names(&["b", "c", "d"]);
        let both = namespaced_placement(resource.clone(), Some(&ns), Scope::Cluster);
        assert_eq!(both.clusters, names(&["b", "c"]));
        assert!(!both.namespace_not_federated);
        let limited = namespaced_placement(resource.clone(), Some(&ns), Scope::Namespaced);
        assert_eq!(limited.clusters, names(&["b", "c"]));
        let missing = namespaced_placement(resource.clone(), None, Scope::Cluster);
        assert_eq!(missing.clusters, names(&[]));
        assert!(missing.namespace_not_federated);
        let verbatim = namespaced_placement(resource.clone(), None, Scope::Namespaced);
        assert_eq!(verbatim.clusters, resource);
        assert!(!verbatim.namespace_not_federated);
    }
}
