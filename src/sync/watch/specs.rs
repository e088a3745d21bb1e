//! Which watches the controller runs (the `Spec`s `sources` turns into
//! watchers): the host's resources and federated types, and each member's
//! managed objects, as the cached types, the members and `--type`,
//! `--cluster`, `-l` and the namespace call for; and whether the watches
//! rounds wait for have listed. Its own file because what is watched
//! follows from the run's scope, while `sources` only runs what it is given.

use super::Controller;
use super::sources::{Source, Spec};
use crate::apply::{api_resource, dynamic_api, resource_of};
use kube::runtime::watcher;
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

    pub(super) fn host_specs(&self) -> BTreeMap<Source, Spec> {
        use crate::api::core::{
            ClusterPropagatedVersion, FederatedTypeConfig, KubeFedCluster, KubeFedConfig,
            PropagatedVersion,
        };
        use crate::api::scheduling::ReplicaSchedulingPreference;
        let client = &self.o.watch_client;
        let fedns = Some(self.shared.host.namespace.as_str());
        let ns = self.namespace();
        let spec =
            |ar: kube::api::ApiResource, namespace: Option<&str>, config: watcher::Config| Spec {
                api: dynamic_api(client, namespace, &ar),
                config,
                api_version: ar.api_version.clone(),
                kind: ar.kind.clone(),
                fingerprint: namespace.unwrap_or("").to_string(),
                whole: false,
            };
        let plain = watcher::Config::default;
        let mut out = BTreeMap::from([
            (
                Source::Config,
                spec(
                    resource_of::<KubeFedConfig>(),
                    fedns,
                    plain().fields(&format!(
                        "metadata.name={}",
                        crate::api::KUBEFED_CONFIG_NAME
                    )),
                ),
            ),
            (
                Source::TypeConfigs,
                spec(resource_of::<FederatedTypeConfig>(), fedns, plain()),
            ),
            (
                Source::Clusters,
                spec(resource_of::<KubeFedCluster>(), fedns, plain()),
            ),
            (
                Source::Schedulings,
                spec(
                    resource_of::<ReplicaSchedulingPreference>(),
                    ns.as_deref(),
                    plain(),
                ),
            ),
            (
                Source::Versions(false),
                spec(resource_of::<PropagatedVersion>(), ns.as_deref(), plain()),
            ),
            (
                Source::Versions(true),
                spec(resource_of::<ClusterPropagatedVersion>(), None, plain()),
            ),
            (
                Source::Namespaces,
                spec(
                    api_resource("", "v1", "Namespace", "namespaces"),
                    None,
                    plain(),
                ),
            ),
        ]);
        for (name, t) in self.observed_types() {
            let mut config = plain();
            if let Some(sel) = &self.o.run.selection.scope.selector
                && !t.ty.target.is_namespace()
            {
                config = config.labels(sel);
            }
            let in_ns = ns.as_deref().filter(|_| t.federated_namespaced);
            out.insert(Source::Federated(name), spec(t.federated, in_ns, config));
        }
        out
    }

    fn member_specs(&self) -> BTreeMap<Source, Spec> {
        let ns = self.namespace();
        let mut out = BTreeMap::new();
        for m in self.fleet.iter() {
            let Some(client) = &m.watch_client else {
                continue;
            };
            if !self.touchable(&m.name) {
                continue;
            }
            for (name, t) in self.observed_types() {
                let in_ns = ns.as_deref().filter(|_| t.ty.namespaced);
                let whole = self.intake.cache.whole_copies.contains(&name);
                out.insert(
                    Source::Member(m.name.clone(), name),
                    Spec {
                        api: dynamic_api(client, in_ns, &t.target),
                        config: watcher::Config::default().labels(&format!(
                            "{}=true",
                            crate::core::propagation::desired::MANAGED_LABEL
                        )),
                        api_version: t.target.api_version.clone(),
                        kind: t.target.kind.clone(),
                        fingerprint: format!("{}/{}/{whole}", m.fingerprint, in_ns.unwrap_or("")),
                        whole,
                    },
                );
            }
        }
        out
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
        let mut wanted = self.host_specs();
        wanted.extend(self.member_specs());
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
