//! Replicas under Karmada's static weights beside KubeFed's planner: for
//! each RSP, `export karmada` divides its total as Karmada v1.13's
//! scheduler will (`assignByStaticWeightStrategy`, `Dispenser.TakeByWeight`)
//! and as KubeFed's planner does (`scheduling::replicas::distribute`), and
//! names every member whose replicas change.

use crate::scheduling::replicas::{Preferences, distribute};
use serde_json::Value;
use std::collections::BTreeMap;

/// What Karmada's scheduler may give each cluster of `weights` (cluster →
/// weight; a cluster of weight 0 or missing gets nothing), for a new
/// binding: each its floor share `weight * total / sum`, then the remainder
/// one by one in order of weight. Equal weights are ordered at random by
/// Karmada (a new binding has no earlier result to keep), so a cluster of
/// a group that shares the last of the remainder may get either; hence
/// `(least, most)`.
pub fn karmada_static(total: i64, weights: &BTreeMap<String, i64>) -> BTreeMap<String, (i64, i64)> {
    let positive: BTreeMap<&String, i64> = weights
        .iter()
        .filter(|(_, w)| **w > 0)
        .map(|(c, w)| (c, *w))
        .collect();
    let sum: i64 = positive.values().sum();
    if sum == 0 || total <= 0 {
        return positive.keys().map(|c| ((*c).clone(), (0, 0))).collect();
    }
    let mut out: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    let mut remain = total;
    for (c, w) in &positive {
        let share = w * total / sum;
        out.insert((*c).clone(), (share, share));
        remain -= share;
    }
    let mut groups: BTreeMap<std::cmp::Reverse<i64>, Vec<&String>> = BTreeMap::new();
    for (c, w) in &positive {
        groups.entry(std::cmp::Reverse(*w)).or_default().push(c);
    }
    for group in groups.values() {
        if remain <= 0 {
            break;
        }
        let n = group.len() as i64;
        for c in group {
            let e = out.get_mut(*c).expect("every positive cluster has a share");
            e.1 += 1;
            if remain >= n {
                e.0 += 1;
            }
        }
        remain -= n.min(remain);
    }
    out
}

/// Karmada's weight of each candidate: its own RSP entry, else `"*"`'s
/// (the exported `staticWeightList` gives exactly that); every candidate
/// weight 1 when none has a weight (Karmada's fallback).
pub fn karmada_weights(prefs: &Preferences, candidates: &[String]) -> BTreeMap<String, i64> {
    let weight = |c: &String| {
        prefs
            .clusters
            .get(c)
            .or_else(|| prefs.clusters.get("*"))
            .map_or(0, |p| p.weight.max(0))
    };
    let weights: BTreeMap<String, i64> =
        candidates.iter().map(|c| (c.clone(), weight(c))).collect();
    if weights.values().all(|w| *w == 0) {
        return candidates.iter().map(|c| (c.clone(), 1)).collect();
    }
    weights
}

/// A member whose replicas change under Karmada.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    pub cluster: String,
    /// What KubeFed's planner gives it (0 where the object is not placed).
    pub kubefed: i64,
    /// What Karmada may give it, `(least, most)`.
    pub karmada: (i64, i64),
}

impl Difference {
    /// `KubeFed's planner: 2, Karmada's static weights: 3`.
    pub fn message(&self) -> String {
        let karmada = match self.karmada {
            (a, b) if a == b => a.to_string(),
            (a, b) => format!("{a} or {b} (equal weights share the remainder in a random order)"),
        };
        format!(
            "replicas: KubeFed's planner gives {} here, Karmada's static weights {karmada}",
            self.kubefed
        )
    }
}

/// The members whose replicas differ, by name: KubeFed's planner over
/// `kubefed_clusters` (every cluster, or in intersect mode the selected
/// ones) for a fresh schedule (no current replicas or capacity), where
/// only `placed` receive the object; Karmada's division over `placed`
/// (the exported `clusterAffinity`'s clusters).
pub fn differences(
    prefs: &Preferences,
    key: &str,
    kubefed_clusters: &[String],
    placed: &[String],
) -> Vec<Difference> {
    let planned = distribute(
        prefs,
        kubefed_clusters,
        &BTreeMap::new(),
        &BTreeMap::new(),
        key,
    );
    let karmada = karmada_static(prefs.total_replicas, &karmada_weights(prefs, placed));
    let mut clusters: Vec<&String> = kubefed_clusters.iter().chain(placed).collect();
    clusters.sort();
    clusters.dedup();
    clusters
        .into_iter()
        .filter_map(|c| {
            let kubefed = match placed.contains(c) {
                true => planned.replicas.get(c).copied().unwrap_or(0),
                false => 0,
            };
            let karmada = karmada.get(c).copied().unwrap_or((0, 0));
            (karmada != (kubefed, kubefed)).then(|| Difference {
                cluster: c.clone(),
                kubefed,
                karmada,
            })
        })
        .collect()
}

/// The clusters of `exported` (Karmada Cluster objects, with their labels)
/// that a `clusterAffinity` selects: its `clusterNames` and its
/// `labelSelector` both hold (Karmada ANDs them); `None`: every cluster.
pub fn affinity_clusters(affinity: Option<&Value>, exported: &[(String, Value)]) -> Vec<String> {
    use crate::propagation::placement::Selector;
    let names = affinity.and_then(|a| a["clusterNames"].as_array());
    let selector = affinity
        .map(|a| &a["labelSelector"])
        .filter(|s| !s.is_null())
        .map(Selector::parse);
    exported
        .iter()
        .filter(|(name, labels)| {
            let named = names.is_none_or(|n| n.iter().any(|x| x == name.as_str()));
            let labels: BTreeMap<String, String> = labels
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect();
            let selected = match &selector {
                None => true,
                Some(Ok(s)) => s.matches(&labels),
                Some(Err(_)) => false,
            };
            named && selected
        })
        .map(|(name, _)| name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn weights(list: &[(&str, i64)]) -> BTreeMap<String, i64> {
        list.iter().map(|(c, w)| (c.to_string(), *w)).collect()
    }

    /// (total, weights, what each cluster may get).
    type Case<'a> = (i64, &'a [(&'a str, i64)], &'a [(&'a str, (i64, i64))]);

    #[test]
    fn karmadas_division_floors_then_gives_the_remainder_by_weight() {
        let cases: [Case; 6] = [
            // Karmada's own examples (assignment.go): 9 over 1:2 → 3:6, 1:3 → 2:7.
            (9, &[("a", 1), ("b", 2)], &[("a", (3, 3)), ("b", (6, 6))]),
            (9, &[("a", 1), ("b", 3)], &[("a", (2, 2)), ("b", (7, 7))]),
            // 7 over 1:1: one of them gets the odd replica, at random.
            (7, &[("a", 1), ("b", 1)], &[("a", (3, 4)), ("b", (3, 4))]),
            // 8 over 2:1:1 → 4:2:2 exactly.
            (
                8,
                &[("a", 2), ("b", 1), ("c", 1)],
                &[("a", (4, 4)), ("b", (2, 2)), ("c", (2, 2))],
            ),
            // 5 over 1:1:1: both remainders go to the group; 1 or 2 each.
            (
                5,
                &[("a", 1), ("b", 1), ("c", 1)],
                &[("a", (1, 2)), ("b", (1, 2)), ("c", (1, 2))],
            ),
            // Weight 0 gets nothing.
            (4, &[("a", 0), ("b", 1)], &[("b", (4, 4))]),
        ];
        for (total, w, want) in cases {
            let want: BTreeMap<String, (i64, i64)> =
                want.iter().map(|(c, r)| (c.to_string(), *r)).collect();
            assert_eq!(
                karmada_static(total, &weights(w)),
                want,
                "{total} over {w:?}"
            );
        }
    }

    fn prefs(total: i64, clusters: serde_json::Value) -> Preferences {
        Preferences::from_spec(&json!({"totalReplicas": total, "clusters": clusters})).unwrap()
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn members_whose_replicas_change_are_named() {
        let both = names(&["m1", "m2"]);
        // Weights only, even: nothing changes.
        let p = prefs(6, json!({"m1": {"weight": 2}, "m2": {"weight": 1}}));
        assert_eq!(differences(&p, "ns/web", &both, &both), []);
        // A maximum KubeFed honours and Karmada cannot: both change.
        let p = prefs(
            6,
            json!({"m1": {"weight": 1, "maxReplicas": 2}, "m2": {"weight": 1}}),
        );
        assert_eq!(
            differences(&p, "ns/web", &both, &both),
            [
                Difference {
                    cluster: "m1".into(),
                    kubefed: 2,
                    karmada: (3, 3)
                },
                Difference {
                    cluster: "m2".into(),
                    kubefed: 4,
                    karmada: (3, 3)
                },
            ]
        );
        // A maximum never reached: nothing changes.
        let p = prefs(
            6,
            json!({"m1": {"weight": 1, "maxReplicas": 5}, "m2": {"weight": 1}}),
        );
        assert_eq!(differences(&p, "ns/web", &both, &both), []);
        // A minimum the weights would meet anyway still moves KubeFed's
        // planner (the minimum first, then the rest by weight: 5 and 1).
        let p = prefs(
            6,
            json!({"m1": {"weight": 2, "minReplicas": 1}, "m2": {"weight": 1}}),
        );
        assert_eq!(
            differences(&p, "ns/web", &both, &both),
            [
                Difference {
                    cluster: "m1".into(),
                    kubefed: 5,
                    karmada: (4, 4)
                },
                Difference {
                    cluster: "m2".into(),
                    kubefed: 1,
                    karmada: (2, 2)
                },
            ]
        );
        // "*" with no weight anywhere: KubeFed by minimums, Karmada equally.
        let p = prefs(
            6,
            json!({"*": {"minReplicas": 1}, "m1": {"minReplicas": 5}}),
        );
        let d = differences(&p, "ns/web", &both, &both);
        assert_eq!(
            d.iter().map(|d| d.cluster.as_str()).collect::<Vec<_>>(),
            ["m1", "m2"]
        );
        // KubeFed plans a cluster the namespace does not place on: that
        // member gets nothing either way, the other changes.
        let p = prefs(6, json!({"*": {"weight": 1}}));
        let d = differences(&p, "ns/web", &both, &names(&["m1"]));
        assert_eq!(
            d,
            [Difference {
                cluster: "m1".into(),
                kubefed: 3,
                karmada: (6, 6)
            }]
        );
        assert_eq!(
            d[0].message(),
            "replicas: KubeFed's planner gives 3 here, Karmada's static weights 6"
        );
    }

    #[test]
    fn an_affinity_selects_by_names_and_labels_together() {
        let exported = [
            ("a".to_string(), json!({"region": "eu"})),
            ("b".to_string(), json!({"region": "us"})),
            ("c".to_string(), json!({})),
        ];
        assert_eq!(affinity_clusters(None, &exported), ["a", "b", "c"]);
        let names = json!({"clusterNames": ["a", "c"]});
        assert_eq!(affinity_clusters(Some(&names), &exported), ["a", "c"]);
        let eu = json!({"labelSelector": {"matchLabels": {"region": "eu"}}});
        assert_eq!(affinity_clusters(Some(&eu), &exported), ["a"]);
        let both =
            json!({"clusterNames": ["b", "c"], "labelSelector": {"matchLabels": {"region": "eu"}}});
        assert!(affinity_clusters(Some(&both), &exported).is_empty());
    }
}
