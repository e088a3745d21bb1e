//! The ReplicaSchedulingPreference planner: how many replicas each cluster
//! gets, exactly as KubeFed's `planner.go` computes it.
//!
//! Exactness matters more than elegance here: a Go controller and this one
//! must agree on every plan, or they would fight over the same overrides.
//! Ties are broken by an FNV-1 (not FNV-1a) hash of the cluster name and
//! the RSP key, so among equal weights the order looks arbitrary but is
//! stable; the upstream test table below pins it.

use crate::describe::{FieldError, FieldProblem};
use std::collections::BTreeMap;

use serde_json::Value;

/// One entry of `spec.clusters` (`*` is the default for unlisted clusters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClusterPreferences {
    pub min_replicas: i64,
    /// `None` = unbounded.
    pub max_replicas: Option<i64>,
    pub weight: i64,
}

/// The planner's part of an RSP spec.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Preferences {
    pub total_replicas: i64,
    pub rebalance: bool,
    pub clusters: BTreeMap<String, ClusterPreferences>,
}

impl Preferences {
    /// Read an RSP `spec` (as stored: `totalReplicas`, `rebalance`,
    /// `clusters` map). Errors name the field that is wrong.
    pub fn from_spec(spec: &Value) -> Result<Preferences, FieldError> {
        let int = |v: Option<&Value>, what: &str| -> Result<Option<i64>, FieldError> {
            match v {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v
                    .as_i64()
                    .map(Some)
                    .ok_or_else(|| FieldError::new(what, FieldProblem::NotA("an integer"))),
            }
        };
        const TOTAL: &str = "spec.totalReplicas";
        let total_replicas = int(spec.get("totalReplicas"), TOTAL)?
            .ok_or_else(|| FieldError::new(TOTAL, FieldProblem::Required))?;
        if !(0..=i64::from(i32::MAX)).contains(&total_replicas) {
            return Err(FieldError::new(
                TOTAL,
                FieldProblem::OutOfRange(total_replicas),
            ));
        }
        let rebalance = match spec.get("rebalance") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(FieldError::new(
                    "spec.rebalance",
                    FieldProblem::NotA("a boolean"),
                ));
            }
        };
        let mut clusters = BTreeMap::new();
        match spec.get("clusters") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (name, p) in m {
                    let field = |f: &str| format!("spec.clusters[{name}].{f}");
                    clusters.insert(
                        name.clone(),
                        ClusterPreferences {
                            min_replicas: int(p.get("minReplicas"), &field("minReplicas"))?
                                .unwrap_or(0),
                            max_replicas: int(p.get("maxReplicas"), &field("maxReplicas"))?,
                            weight: int(p.get("weight"), &field("weight"))?.unwrap_or(0),
                        },
                    );
                }
            }
            Some(_) => {
                return Err(FieldError::new(
                    "spec.clusters",
                    FieldProblem::NotA("a map"),
                ));
            }
        }
        Ok(Preferences {
            total_replicas,
            rebalance,
            clusters,
        })
    }
}

/// The planner's output: replicas per cluster, and replicas that did not
/// fit a cluster's estimated capacity.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Distribution {
    pub replicas: BTreeMap<String, i64>,
    pub overflow: BTreeMap<String, i64>,
}

/// FNV-1 32-bit (multiply, then XOR), as Go's `hash/fnv.New32`.
pub fn fnv1_32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(2_166_136_261u32, |h, b| {
        h.wrapping_mul(16_777_619) ^ u32::from(*b)
    })
}

struct Named<'a> {
    name: &'a str,
    hash: u32,
    prefs: ClusterPreferences,
}

/// Distribute `prefs.total_replicas` over `available` (upstream
/// `pkg/controller/util/planner/planner.go`).
/// `current`/`capacity` are optional per cluster; `key` is the RSP's
/// `<namespace>/<name>` (upstream's unit tests use `""`). Never fails.
pub fn distribute(
    prefs: &Preferences,
    available: &[String],
    current: &BTreeMap<String, i64>,
    capacity: &BTreeMap<String, i64>,
    key: &str,
) -> Distribution {
    let (ordered, mut plan) = order_clusters(prefs, available, key);
    let mut remaining = allocate_minimums(&ordered, capacity, &mut plan, prefs.total_replicas);
    let mut preallocated: BTreeMap<&str, i64> = BTreeMap::new();
    if !prefs.rebalance {
        remaining = preallocate_current(
            &ordered,
            current,
            capacity,
            &mut plan,
            &mut preallocated,
            remaining,
        );
    }
    let mut overflow: BTreeMap<String, i64> = BTreeMap::new();
    remaining = distribute_by_weight(
        &ordered,
        capacity,
        &mut plan,
        &mut overflow,
        &mut preallocated,
        remaining,
    );
    if !prefs.rebalance {
        overflow = trim_overflow(overflow, remaining);
    }
    Distribution {
        replicas: plan,
        overflow,
    }
}

/// Clusters with preferences, by weight then hash; clusters without any are planned 0.
fn order_clusters<'a>(
    prefs: &Preferences,
    available: &'a [String],
    key: &str,
) -> (Vec<Named<'a>>, BTreeMap<String, i64>) {
    let mut plan: BTreeMap<String, i64> = BTreeMap::new();
    let mut ordered: Vec<Named> = Vec::new();
    for c in available {
        match prefs.clusters.get(c).or_else(|| prefs.clusters.get("*")) {
            Some(p) => {
                let mut bytes = c.as_bytes().to_vec();
                bytes.extend_from_slice(key.as_bytes());
                ordered.push(Named {
                    name: c,
                    hash: fnv1_32(&bytes),
                    prefs: *p,
                });
            }
            None => {
                plan.insert(c.clone(), 0);
            }
        }
    }
    ordered.sort_by(|a, b| {
        b.prefs
            .weight
            .cmp(&a.prefs.weight)
            .then(a.hash.cmp(&b.hash))
    });
    (ordered, plan)
}

/// First each cluster's minimum, within what is left and its capacity; returns what is left.
fn allocate_minimums(
    ordered: &[Named],
    capacity: &BTreeMap<String, i64>,
    plan: &mut BTreeMap<String, i64>,
    total: i64,
) -> i64 {
    let mut remaining = total;
    for n in ordered {
        let mut m = n.prefs.min_replicas.min(remaining);
        if let Some(cap) = capacity.get(n.name) {
            m = m.min(*cap);
        }
        remaining -= m;
        plan.insert(n.name.to_string(), m);
    }
    remaining
}

/// No rebalance: clusters keep what they run, within max and capacity; returns what is left.
fn preallocate_current<'a>(
    ordered: &[Named<'a>],
    current: &BTreeMap<String, i64>,
    capacity: &BTreeMap<String, i64>,
    plan: &mut BTreeMap<String, i64>,
    preallocated: &mut BTreeMap<&'a str, i64>,
    remaining: i64,
) -> i64 {
    let mut remaining = remaining;
    for n in ordered {
        let planned = plan[n.name];
        if let Some(&count) = current.get(n.name)
            && count > planned
        {
            let mut target = count;
            if let Some(max) = n.prefs.max_replicas {
                target = target.min(max);
            }
            if let Some(cap) = capacity.get(n.name) {
                target = target.min(*cap);
            }
            let extra = (target - planned).min(remaining).max(0);
            remaining -= extra;
            preallocated.insert(n.name, extra);
            plan.insert(n.name.to_string(), planned + extra);
        }
    }
    remaining
}

/// The rest by weight, round after round, until no cluster takes more; returns what is left.
fn distribute_by_weight<'a>(
    ordered: &'a [Named<'a>],
    capacity: &BTreeMap<String, i64>,
    plan: &mut BTreeMap<String, i64>,
    overflow: &mut BTreeMap<String, i64>,
    preallocated: &mut BTreeMap<&'a str, i64>,
    remaining: i64,
) -> i64 {
    let mut remaining = remaining;
    let mut active: Vec<&Named> = ordered.iter().collect();
    let mut modified = true;
    while modified && remaining > 0 {
        modified = false;
        let weight_sum: i64 = active.iter().map(|n| n.prefs.weight).sum();
        let distribute = remaining;
        let mut next = Vec::new();
        for n in &active {
            if weight_sum <= 0 {
                break;
            }
            let start = plan[n.name];
            let mut extra = (distribute * n.prefs.weight + weight_sum - 1) / weight_sum;
            extra = extra.min(remaining);
            let prealloc = preallocated.get(n.name).copied().unwrap_or(0);
            let used = extra.min(prealloc);
            preallocated.insert(n.name, prealloc - used);
            extra -= used;
            if used > 0 {
                modified = true;
            }
            let (total, full) = clamp_to_limits(n, start + extra, capacity, overflow);
            if !full {
                next.push(*n);
            }
            remaining -= total - start;
            plan.insert(n.name.to_string(), total);
            if total > start {
                modified = true;
            }
        }
        active = next;
    }
    remaining
}

/// A total cut to max and capacity (excess over capacity overflows), and whether it is full.
fn clamp_to_limits(
    n: &Named,
    total: i64,
    capacity: &BTreeMap<String, i64>,
    overflow: &mut BTreeMap<String, i64>,
) -> (i64, bool) {
    let mut total = total;
    let mut full = false;
    if let Some(max) = n.prefs.max_replicas
        && total > max
    {
        total = max;
        full = true;
    }
    if let Some(&cap) = capacity.get(n.name)
        && total > cap
    {
        overflow.insert(n.name.to_string(), total - cap);
        total = cap;
        full = true;
    }
    (total, full)
}

/// Without rebalancing, overflow is only what could not be placed anywhere, and only when positive.
fn trim_overflow(overflow: BTreeMap<String, i64>, remaining: i64) -> BTreeMap<String, i64> {
    overflow
        .into_iter()
        .map(|(c, v)| (c, v.min(remaining)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(min: i64, max: Option<i64>, weight: i64) -> ClusterPreferences {
        ClusterPreferences {
            min_replicas: min,
            max_replicas: max,
            weight,
        }
    }
    fn w(weight: i64) -> ClusterPreferences {
        p(0, None, weight)
    }
    fn prefs(list: &[(&str, ClusterPreferences)], total: i64, rebalance: bool) -> Preferences {
        Preferences {
            total_replicas: total,
            rebalance,
            clusters: list.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }
    }
    fn map(list: &[(&str, i64)]) -> BTreeMap<String, i64> {
        list.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }
    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn fnv1_matches_known_values() {
        assert_eq!(fnv1_32(b""), 0x811c9dc5);
        assert_eq!(fnv1_32(b"a"), 0x050c5d7e);
        assert_eq!(fnv1_32(b"foobar"), 0x31f0b262);
        let expected = [
            ("A", 84696414),
            ("B", 84696413),
            ("C", 84696412),
            ("D", 84696411),
            ("E", 84696410),
        ];
        for (name, hash) in expected {
            assert_eq!(fnv1_32(name.as_bytes()), hash, "{name}");
        }
    }

    // Ported from upstream util/planner/planner_test.go: TestEqual, TestMin,
    // TestMax, TestWeight (doCheck: no current, no capacity, key "",
    // overflow must be empty).
    #[test]
    fn upstream_plans_without_current_or_capacity() {
        let star = |c: ClusterPreferences| vec![("*", c)];
        type Case<'a> = (
            Vec<(&'a str, ClusterPreferences)>,
            i64,
            Vec<&'a str>,
            Vec<(&'a str, i64)>,
        );
        let cases: Vec<Case> = vec![
            // TestEqual
            (
                star(w(1)),
                50,
                vec!["A", "B", "C"],
                vec![("A", 16), ("B", 17), ("C", 17)],
            ),
            (star(w(1)), 50, vec!["A", "B"], vec![("A", 25), ("B", 25)]),
            (star(w(1)), 1, vec!["A", "B"], vec![("A", 0), ("B", 1)]),
            (
                star(w(1)),
                1,
                vec!["A", "B", "C", "D"],
                vec![("A", 0), ("B", 0), ("C", 0), ("D", 1)],
            ),
            (star(w(1)), 1, vec!["A"], vec![("A", 1)]),
            (star(w(1)), 1, vec![], vec![]),
            // TestMin
            (
                star(p(2, None, 0)),
                50,
                vec!["A", "B", "C"],
                vec![("A", 2), ("B", 2), ("C", 2)],
            ),
            (
                star(p(20, None, 0)),
                50,
                vec!["A", "B", "C"],
                vec![("A", 10), ("B", 20), ("C", 20)],
            ),
            (
                vec![("*", p(20, None, 0)), ("A", p(100, None, 1))],
                50,
                vec!["A", "B", "C"],
                vec![("A", 50), ("B", 0), ("C", 0)],
            ),
            (
                star(p(10, Some(12), 1)),
                50,
                vec!["A", "B", "C"],
                vec![("A", 12), ("B", 12), ("C", 12)],
            ),
            // TestMax
            (
                star(p(0, Some(2), 1)),
                50,
                vec!["A", "B", "C"],
                vec![("A", 2), ("B", 2), ("C", 2)],
            ),
            (
                star(p(0, Some(2), 0)),
                50,
                vec!["A", "B", "C"],
                vec![("A", 0), ("B", 0), ("C", 0)],
            ),
            // TestWeight
            (
                vec![("A", w(1)), ("B", w(2))],
                60,
                vec!["A", "B", "C"],
                vec![("A", 20), ("B", 40), ("C", 0)],
            ),
            (
                vec![("A", w(10000)), ("B", w(1))],
                50,
                vec!["A", "B", "C"],
                vec![("A", 50), ("B", 0), ("C", 0)],
            ),
            (
                vec![("A", w(10000)), ("B", w(1))],
                50,
                vec!["B", "C"],
                vec![("B", 50), ("C", 0)],
            ),
            (
                vec![("A", p(0, Some(10), 10000)), ("B", w(1)), ("C", w(1))],
                50,
                vec!["A", "B", "C"],
                vec![("A", 10), ("B", 20), ("C", 20)],
            ),
            (
                vec![
                    ("A", p(0, Some(10), 10000)),
                    ("B", w(1)),
                    ("C", p(0, Some(10), 1)),
                ],
                50,
                vec!["A", "B", "C"],
                vec![("A", 10), ("B", 30), ("C", 10)],
            ),
            (
                vec![
                    ("A", p(0, Some(10), 10000)),
                    ("B", w(1)),
                    ("C", p(0, Some(21), 1)),
                    ("D", p(0, Some(10), 1)),
                ],
                71,
                vec!["A", "B", "C", "D"],
                vec![("A", 10), ("B", 30), ("C", 21), ("D", 10)],
            ),
            (
                vec![
                    ("A", p(0, Some(10), 10000)),
                    ("B", w(1)),
                    ("C", p(0, Some(21), 1)),
                    ("D", p(0, Some(10), 1)),
                    ("E", w(1)),
                ],
                91,
                vec!["A", "B", "C", "D", "E"],
                vec![("A", 10), ("B", 25), ("C", 21), ("D", 10), ("E", 25)],
            ),
        ];
        for (i, (pr, total, avail, want)) in cases.into_iter().enumerate() {
            let got = distribute(
                &prefs(&pr, total, false),
                &names(&avail),
                &map(&[]),
                &map(&[]),
                "",
            );
            assert_eq!(got.replicas, map(&want), "case {i}");
            assert!(got.overflow.is_empty(), "case {i}");
        }
    }

    // Ported from upstream TestEqualWithExisting (doCheckWithExisting).
    #[test]
    fn upstream_plans_with_existing_replicas() {
        type Case<'a> = (i64, Vec<&'a str>, Vec<(&'a str, i64)>, Vec<(&'a str, i64)>);
        let cases: Vec<Case> = vec![
            (
                50,
                vec!["A", "B", "C"],
                vec![("C", 30)],
                vec![("A", 10), ("B", 10), ("C", 30)],
            ),
            (
                50,
                vec!["A", "B"],
                vec![("A", 30)],
                vec![("A", 30), ("B", 20)],
            ),
            (
                15,
                vec!["A", "B"],
                vec![("A", 0), ("B", 8)],
                vec![("A", 7), ("B", 8)],
            ),
            (
                15,
                vec!["A", "B"],
                vec![("A", 1), ("B", 8)],
                vec![("A", 7), ("B", 8)],
            ),
            (
                15,
                vec!["A", "B"],
                vec![("A", 4), ("B", 8)],
                vec![("A", 7), ("B", 8)],
            ),
            (
                15,
                vec!["A", "B"],
                vec![("A", 5), ("B", 8)],
                vec![("A", 7), ("B", 8)],
            ),
            (
                15,
                vec!["A", "B"],
                vec![("A", 6), ("B", 8)],
                vec![("A", 7), ("B", 8)],
            ),
            (
                15,
                vec!["A", "B"],
                vec![("A", 7), ("B", 8)],
                vec![("A", 7), ("B", 8)],
            ),
            (
                500000,
                vec!["A", "B"],
                vec![("A", 300000)],
                vec![("A", 300000), ("B", 200000)],
            ),
            (
                50,
                vec!["A", "B"],
                vec![("A", 10)],
                vec![("A", 25), ("B", 25)],
            ),
            (
                50,
                vec!["A", "B"],
                vec![("A", 10), ("B", 70)],
                vec![("A", 0), ("B", 50)],
            ),
            (1, vec!["A", "B"], vec![("A", 30)], vec![("A", 1), ("B", 0)]),
            (
                50,
                vec!["A", "B"],
                vec![("A", 10), ("B", 20)],
                vec![("A", 25), ("B", 25)],
            ),
        ];
        for (i, (total, avail, existing, want)) in cases.into_iter().enumerate() {
            let got = distribute(
                &prefs(&[("*", w(1))], total, false),
                &names(&avail),
                &map(&existing),
                &map(&[]),
                "",
            );
            assert_eq!(got.replicas, map(&want), "case {i}");
            assert!(got.overflow.is_empty(), "case {i}");
        }
    }

    // Ported from upstream TestWithExistingAndCapacity.
    #[test]
    fn upstream_plans_with_capacity() {
        type Case<'a> = (
            bool,
            Vec<(&'a str, ClusterPreferences)>,
            i64,
            Vec<&'a str>,
            Vec<(&'a str, i64)>,
            Vec<(&'a str, i64)>,
            Vec<(&'a str, i64)>,
        );
        let cases: Vec<Case> = vec![
            (
                true,
                vec![("*", w(1))],
                50,
                vec!["A", "B", "C"],
                vec![("C", 10)],
                vec![("A", 20), ("B", 20), ("C", 10)],
                vec![("C", 7)],
            ),
            (
                true,
                vec![("A", w(10000)), ("B", w(1))],
                50,
                vec!["B", "C"],
                vec![("B", 10)],
                vec![("B", 10), ("C", 0)],
                vec![("B", 40)],
            ),
            (
                true,
                vec![("A", w(1)), ("B", w(2))],
                60,
                vec!["A", "B", "C"],
                vec![("B", 10)],
                vec![("A", 50), ("B", 10), ("C", 0)],
                vec![("B", 30)],
            ),
            (
                true,
                vec![
                    ("A", p(0, Some(10), 10000)),
                    ("B", w(1)),
                    ("C", p(0, Some(21), 1)),
                    ("D", p(0, Some(10), 1)),
                ],
                71,
                vec!["A", "B", "C", "D"],
                vec![("C", 10)],
                vec![("A", 10), ("B", 41), ("C", 10), ("D", 10)],
                vec![("C", 11)],
            ),
            (
                false,
                vec![("A", w(1)), ("B", w(1))],
                60,
                vec!["A", "B", "C"],
                vec![("A", 10), ("B", 10)],
                vec![("A", 10), ("B", 10), ("C", 0)],
                vec![("A", 20), ("B", 20)],
            ),
            (
                false,
                vec![("A", w(1)), ("B", w(5))],
                60,
                vec!["A", "B", "C"],
                vec![("B", 10)],
                vec![("A", 50), ("B", 10), ("C", 0)],
                vec![],
            ),
            (
                false,
                vec![("*", p(20, None, 0))],
                50,
                vec!["A", "B", "C"],
                vec![("B", 10)],
                vec![("A", 20), ("B", 10), ("C", 20)],
                vec![],
            ),
            (
                true,
                vec![("*", p(20, None, 1))],
                60,
                vec!["A", "B"],
                vec![("B", 10)],
                vec![("A", 50), ("B", 10)],
                vec![("B", 15)],
            ),
        ];
        for (i, (rebalance, pr, total, avail, cap, want, want_overflow)) in
            cases.into_iter().enumerate()
        {
            let got = distribute(
                &prefs(&pr, total, rebalance),
                &names(&avail),
                &map(&[]),
                &map(&cap),
                "",
            );
            assert_eq!(got.replicas, map(&want), "case {i}");
            assert_eq!(got.overflow, map(&want_overflow), "case {i}");
        }
    }

    // Seed 002: 15 replicas, "*" weight 2 max 12, ap-northeast min 1 max 3 weight 1.
    #[test]
    fn seed_example_three_regions() {
        let pr = prefs(
            &[("*", p(0, Some(12), 2)), ("ap-northeast", p(1, Some(3), 1))],
            15,
            false,
        );
        let got = distribute(
            &pr,
            &names(&["ap-northeast", "us-east", "us-west"]),
            &map(&[]),
            &map(&[]),
            "",
        );
        assert_eq!(
            got.replicas,
            map(&[("ap-northeast", 3), ("us-east", 6), ("us-west", 6)])
        );
    }

    #[test]
    fn fnv1_ties_depend_on_the_key() {
        let pr = prefs(&[("*", w(1))], 1, false);
        let avail = names(&["A", "B"]);
        // Empty key: B hashes lower than A, so B wins the single replica
        // (FNV-1a would pick A: the variant matters).
        let got = distribute(&pr, &avail, &map(&[]), &map(&[]), "");
        assert_eq!(got.replicas, map(&[("A", 0), ("B", 1)]));
        // With a key the winner is the lower hash of name+key.
        for key in ["ns/web", "demo/app", "x"] {
            let ha = fnv1_32(format!("A{key}").as_bytes());
            let hb = fnv1_32(format!("B{key}").as_bytes());
            assert_ne!(ha, hb);
            let winner = if ha < hb { "A" } else { "B" };
            let got = distribute(&pr, &avail, &map(&[]), &map(&[]), key);
            assert_eq!(got.replicas[winner], 1, "key {key}");
        }
        // 3 replicas over 5 equal clusters go to the three lowest hashes: E, D, C.
        let got = distribute(
            &pr_total(3),
            &names(&["A", "B", "C", "D", "E"]),
            &map(&[]),
            &map(&[]),
            "",
        );
        assert_eq!(
            got.replicas,
            map(&[("A", 0), ("B", 0), ("C", 1), ("D", 1), ("E", 1)])
        );
    }

    fn pr_total(total: i64) -> Preferences {
        prefs(&[("*", w(1))], total, false)
    }

    #[test]
    fn properties_hold_over_many_inputs() {
        let avail = names(&["a", "b", "c", "d"]);
        for total in [0, 1, 7, 40, 101] {
            for (pa, pb) in [
                (w(1), w(3)),
                (p(5, Some(8), 1), w(0)),
                (p(0, Some(3), 2), p(50, None, 1)),
            ] {
                let pr = prefs(&[("a", pa), ("b", pb), ("c", w(1))], total, false);
                let got = distribute(&pr, &avail, &map(&[]), &map(&[]), "k");
                let sum: i64 = got.replicas.values().sum();
                assert!(sum <= total, "{got:?}");
                assert_eq!(got.replicas["d"], 0, "no preference → 0");
                assert_eq!(got.replicas.len(), 4);
            }
        }
    }

    #[test]
    fn reads_rsp_specs() {
        let spec = serde_json::json!({"totalReplicas": 9, "rebalance": true,
            "clusters": {"*": {"weight": 2}, "c1": {"minReplicas": 1, "maxReplicas": 3}}});
        let pr = Preferences::from_spec(&spec).unwrap();
        assert_eq!(pr.total_replicas, 9);
        assert!(pr.rebalance);
        assert_eq!(pr.clusters["*"], w(2));
        assert_eq!(pr.clusters["c1"], p(1, Some(3), 0));
        assert!(Preferences::from_spec(&serde_json::json!({})).is_err());
        let err = Preferences::from_spec(
            &serde_json::json!({"totalReplicas": 1, "clusters": {"c": {"weight": "x"}}}),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "spec.clusters[c].weight is not an integer");
        assert_eq!(
            Preferences::from_spec(&serde_json::json!({})).unwrap_err(),
            FieldError::new("spec.totalReplicas", FieldProblem::Required)
        );
    }
}
