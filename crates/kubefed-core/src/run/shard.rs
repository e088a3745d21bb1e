//! `reconcile --shard I/N`: a stable partition of the federated objects.
//!
//! Objects are partitioned by namespace (cluster-scoped objects by name), so
//! a namespace, its FederatedNamespace and everything in it land in the same
//! shard, and so do an RSP and the FederatedDeployment it schedules. The
//! partition is FNV-1a (64 bit) of that key modulo N: it depends on nothing
//! but the names, so every shard computes the same partition, and the union
//! of shards `0/N` … `N-1/N` is exactly one unsharded run.

use crate::describe::{ObjectKey, key_of};
use serde_json::Value;
use std::fmt;

/// Shard `index` of `count` (`0 <= index < count`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

/// A `--shard-from-hostname` whose host name has no ordinal.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error(
    "host name {0:?} does not end in -ORDINAL, as a StatefulSet's pods do (kubefedctl-reconciler-2)"
)]
pub struct NoOrdinal(String);

/// A `--shard` that is not `I/N` with `0 <= I < N`.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("invalid shard {0:?}: expected I/N with 0 <= I < N, e.g. 0/3")]
pub struct ShardError(String);

impl Shard {
    /// Parses `I/N` as `--shard` takes it.
    pub fn parse(text: &str) -> Result<Shard, ShardError> {
        let bad = || ShardError(text.to_string());
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// The shard of a StatefulSet's pod named `hostname` (`…-ORDINAL`):
    /// the ordinal modulo `count`, so that `count` replicas run one shard
    /// each and `2 × count` give each shard a standby.
    pub fn from_hostname(hostname: &str, count: u32) -> Result<Shard, NoOrdinal> {
        let none = || NoOrdinal(hostname.to_string());
        let (_, ordinal) = hostname.trim().rsplit_once('-').ok_or_else(none)?;
        let ordinal: u64 = ordinal.parse().map_err(|_| none())?;
        if count == 0 {
            return Err(none());
        }
        Ok(Shard {
            index: (ordinal % u64::from(count)) as u32,
            count,
        })
    }

    /// Whether this shard owns the object with `key` (a FederatedNamespace
    /// is keyed `name/name`, a cluster-scoped object has namespace `""`).
    pub fn owns(&self, ObjectKey { namespace, name }: &ObjectKey) -> bool {
        let by = if namespace.is_empty() {
            name
        } else {
            namespace
        };
        self.of(by) == self.index
    }

    /// The shard of a partition key.
    fn of(&self, key: &str) -> u32 {
        (fnv1a64(key.as_bytes()) % u64::from(self.count)) as u32
    }

    /// The run lock of this shard: shards of one federation never wait for
    /// each other (`kubefedctl-reconcile-1-of-3`).
    pub fn lease_name(&self, base: &str) -> String {
        format!("{base}-{}-of-{}", self.index, self.count)
    }

    /// Only one shard writes what belongs to no object (KubeFedCluster
    /// health), so N shards do not write it N times.
    pub fn writes_cluster_health(&self) -> bool {
        self.index == 0
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Whether `shard` (none: an unsharded run) owns `key`.
pub fn owned(shard: Option<Shard>, key: &ObjectKey) -> bool {
    shard.is_none_or(|s| s.owns(key))
}

/// The run lock of a run: the federation's, or its shard's.
pub fn lease_of(shard: Option<Shard>, base: &str) -> String {
    shard.map_or(base.to_string(), |s| s.lease_name(base))
}

/// The objects (federated objects, RSPs, DNS records) `shard` owns.
pub fn retain_owned(shard: Option<Shard>, mut objects: Vec<Value>) -> Vec<Value> {
    if shard.is_some() {
        objects.retain(|o| owned(shard, &key_of(o)));
    }
    objects
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ns: &str, name: &str) -> ObjectKey {
        ObjectKey::new(ns, name)
    }

    #[test]
    fn parses_i_of_n_and_refuses_the_rest() {
        assert_eq!(Shard::parse("1/3"), Ok(Shard { index: 1, count: 3 }));
        assert_eq!(Shard::parse("0/1").unwrap().to_string(), "0/1");
        for bad in ["3/3", "0/0", "1", "-1/3", "a/3", "1/b", "", "1/3/4"] {
            let e = Shard::parse(bad).unwrap_err().to_string();
            assert!(e.contains("expected I/N"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_statefulset_pods_ordinal_is_its_shard() {
        let shard = |h: &str, n| Shard::from_hostname(h, n).map(|s| s.to_string());
        assert_eq!(shard("kubefedctl-reconciler-0", 3), Ok("0/3".into()));
        assert_eq!(shard("kubefedctl-reconciler-2", 3), Ok("2/3".into()));
        // A second set of replicas stands by for the first.
        assert_eq!(shard("kubefedctl-reconciler-4", 3), Ok("1/3".into()));
        assert_eq!(shard("web-12\n", 5), Ok("2/5".into()));
        for bad in ["reconciler", "reconciler-", "reconciler-a", "-x", ""] {
            let e = Shard::from_hostname(bad, 3).unwrap_err().to_string();
            assert!(e.contains("does not end in -ORDINAL"), "{bad}: {e}");
        }
        assert!(Shard::from_hostname("r-1", 0).is_err());
        assert_eq!(lease_of(None, "l"), "l");
        assert_eq!(lease_of(shard_of("1/3"), "l"), "l-1-of-3");
    }

    fn shard_of(s: &str) -> Option<Shard> {
        Shard::parse(s).ok()
    }

    #[test]
    fn fnv1a64_matches_the_reference_vectors() {
        // Test vectors of the FNV reference implementation.
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn a_namespace_and_everything_in_it_share_a_shard() {
        for n in 1..=7 {
            let owners = |k: &ObjectKey| {
                (0..n)
                    .filter(|i| {
                        Shard {
                            index: *i,
                            count: n,
                        }
                        .owns(k)
                    })
                    .collect::<Vec<_>>()
            };
            for ns in ["shop", "team-a", "b", "kube-federation-system"] {
                let own = owners(&key(ns, ns));
                assert_eq!(own.len(), 1, "exactly one shard owns {ns}");
                assert_eq!(owners(&key(ns, "web")), own);
                assert_eq!(owners(&key(ns, "db-0")), own);
                // A cluster-scoped object named like the namespace, and the
                // member Namespace itself, go with it too.
                assert_eq!(owners(&key("", ns)), own);
            }
        }
    }

    #[test]
    fn the_partition_spreads_namespaces_and_is_stable() {
        let shards = 4;
        let mut per = [0usize; 4];
        for i in 0..400 {
            let k = key(&format!("ns-{i}"), "x");
            let owner = (0..shards)
                .find(|s| {
                    Shard {
                        index: *s,
                        count: shards,
                    }
                    .owns(&k)
                })
                .unwrap();
            per[owner as usize] += 1;
        }
        assert!(per.iter().all(|c| (60..=140).contains(c)), "{per:?}");
        // Pinned: a change of the hash would move objects between shards.
        let s = |i| Shard { index: i, count: 3 };
        let owner = |ns: &str| (0..3).find(|i| s(*i).owns(&key(ns, "x"))).unwrap();
        assert_eq!(
            [owner("shop"), owner("team-a"), owner("default")],
            [2, 1, 0]
        );
        assert_eq!(
            s(1).lease_name("kubefedctl-reconcile"),
            "kubefedctl-reconcile-1-of-3"
        );
        assert!(owned(None, &key("any", "x")));
    }
}
