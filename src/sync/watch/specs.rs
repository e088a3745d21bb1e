//! Which watches the controller runs (the `Spec`s `sources` turns into
//! watchers): the run's scope for them (`WatchScope`: the cached types,
//! the members and `--type`, `--cluster`, `-l` and the namespace), which
//! each trigger turns into its watches (`cache::triggers::registry`); and
//! whether the watches rounds wait for have listed. Its own file because
//! what is watched follows from the run's scope, while `sources` only
//! runs what it is given.

use super::Controller;
use super::sources::{Source, Spec, WatchScope, WatchedMember};
use std::collections::BTreeMap;

impl Controller<'_> {
    /// The enabled types this run covers (`--type`).
    pub(super) fn types(&self) -> Vec<String> {
        let wanted = &self.o.run.selection.scope.types;
        self.intake
            .cache
            .ftcs
            .iter()
            .filter(|(_, f)| f.spec.is_enabled())
            .filter(|(_, f)| {
                wanted.is_empty()
                    || wanted
                        .iter()
                        .any(|w| crate::clients::host::names_federated_type(f, w))
            })
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// [`Self::types`] with what the watches need of each.
    fn observed_types(&self) -> Vec<(String, crate::sync::run::observe::ObservedType)> {
        self.types()
            .into_iter()
            .filter_map(|name| {
                let t = self.intake.cache.ftcs.get(&name)?;
                Some((name, crate::sync::run::observe::ObservedType::of(t)))
            })
            .collect()
    }

    pub(super) fn namespace(&self) -> Option<String> {
        self.intake.cache.settings.objects_namespace(
            &self.shared.host.namespace,
            self.o.run.selection.scope.namespace.as_deref(),
        )
    }

    /// The host's watches that rounds wait for.
    pub(super) fn host_sources(&self) -> Vec<Source> {
        self.intake
            .sources
            .running()
            .filter(|s| !matches!(s, Source::Member(..)))
            .cloned()
            .collect()
    }

    /// What the run's scope asks of the watches: the host's alone, or
    /// with the members' (`members`).
    fn watch_scope(&self, members: bool) -> WatchScope<'_> {
        let scope = &self.o.run.selection.scope;
        let members = (self.fleet.iter())
            .filter(|_| members)
            .filter(|m| self.touchable(&m.name))
            .filter_map(|m| {
                Some(WatchedMember {
                    name: &m.name,
                    client: m.watch_client.as_ref()?,
                    fingerprint: &m.fingerprint,
                })
            })
            .collect();
        WatchScope {
            host: &self.o.watch_client,
            federation_namespace: &self.shared.host.namespace,
            namespace: self.namespace(),
            selector: scope.selector.as_deref(),
            types: self.observed_types(),
            members,
            whole_copies: &self.intake.cache.whole_copies,
            pull_members: self.fleet.iter().any(|m| m.pull),
        }
    }

    /// The host's watches (each trigger's, `cache::triggers::registry`).
    pub(super) fn host_specs(&self) -> BTreeMap<Source, Spec> {
        crate::sync::watch::cache::watches(&self.watch_scope(false))
    }

    /// What belongs to no federated object (KubeFedClusters' health and
    /// Events, FederatedTypeConfigs' status, member tokens) is written by
    /// one watch: an unsharded one, or shard 0.
    pub(super) fn writes_cluster_state(&self) -> bool {
        self.o.run.selection.scope.writes_cluster_state()
    }

    /// `--cluster` limits which members are touched.
    pub(super) fn touchable(&self, cluster: &str) -> bool {
        self.o.run.selection.scope.touches(cluster)
    }

    /// Runs exactly the watches the cache's types and the members call for;
    /// a watch started now forgets what it saw until it lists. Returns the
    /// started ones.
    pub(super) fn sync_sources(&mut self) -> Vec<Source> {
        let wanted = crate::sync::watch::cache::watches(&self.watch_scope(true));
        let started = self.intake.sources.sync(wanted);
        for s in &started {
            self.intake.cache.forget(s);
        }
        started
    }

    /// Starts the watches `which` selects again, from a fresh list.
    pub(super) fn restart_sources(&mut self, which: impl Fn(&Source) -> bool) {
        for s in self.intake.sources.restart(which) {
            self.intake.cache.forget(&s);
        }
        self.sync_sources();
    }

    pub(super) fn members_synced(&self) -> bool {
        let types = self.types();
        (self.fleet.members().iter())
            .filter(|p| p.is_ready() && p.member.watch_client.is_some())
            .filter(|p| self.touchable(p.name()))
            .all(|p| self.intake.cache.member_synced(p.name(), &types))
    }
}
