//! What one run covers, as its flags say (`--type`, `-n`, `--cluster`,
//! `-l`, `--shard`): built once by the command, carried by the
//! observation, and read by every step, so that "is this member, object or
//! record mine?" has one answer in the one-shot run, the watch, the decide
//! step and the passes.

use std::collections::BTreeSet;

use crate::run::shard::Shard;

/// The part of the federation one run covers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunScope {
    /// `--type`: FederatedTypeConfig names, target plurals or kinds; empty:
    /// every enabled type.
    pub types: Vec<String>,
    /// `-n`: only federated objects of this namespace (a namespace-scoped
    /// federation reads its own namespace whatever this says:
    /// [`crate::run::settings::objects_namespace`]).
    pub namespace: Option<String>,
    /// `--cluster`: only these members are written to (a watch round:
    /// those whose watches have listed); `None`: every member. Placement
    /// still sees every member.
    pub clusters: Option<BTreeSet<String>>,
    /// `-l`: only federated objects with these labels (members' labelled
    /// objects cannot then be matched to unlisted federated objects, so no
    /// orphan is cleaned up).
    pub selector: Option<String>,
    /// `--shard I/N`: only this shard's objects, orphans and records.
    pub shard: Option<Shard>,
}

impl RunScope {
    /// Whether the run may write to `cluster`.
    pub fn touches(&self, cluster: &str) -> bool {
        self.clusters.as_ref().is_none_or(|c| c.contains(cluster))
    }

    /// The members the run may write to; `None`: every member.
    pub fn touched(&self) -> Option<&BTreeSet<String>> {
        self.clusters.as_ref()
    }

    /// Whether the run writes what belongs to no object (KubeFedCluster
    /// health and topology): every unsharded run, and shard 0 of a
    /// sharded one.
    pub fn writes_cluster_state(&self) -> bool {
        self.shard.is_none_or(|s| s.writes_cluster_health())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_touches_its_clusters_and_one_shard_writes_cluster_state() {
        let every = RunScope::default();
        assert!(every.touches("m1"));
        assert_eq!(every.touched(), None);
        assert!(every.writes_cluster_state());
        let one = RunScope {
            clusters: Some(BTreeSet::from(["m2".to_string()])),
            ..RunScope::default()
        };
        assert!(!one.touches("m1"));
        assert!(one.touches("m2"));
        assert_eq!(one.touched().map(BTreeSet::len), Some(1));
        let none = RunScope {
            clusters: Some(BTreeSet::new()),
            ..RunScope::default()
        };
        assert!(
            !none.touches("m1"),
            "a watch round before any member listed"
        );
        let shards: Vec<bool> = (0..3)
            .map(|i| {
                RunScope {
                    shard: Some(Shard::parse(&format!("{i}/3")).unwrap()),
                    ..RunScope::default()
                }
                .writes_cluster_state()
            })
            .collect();
        assert_eq!(shards, [true, false, false], "shard 0 only");
    }
}
