//! What the watches of `reconcile --watch` have seen, in three parts, as
//! kube-runtime keeps its reflector's store apart from what a change
//! triggers: `store` (the objects each watch holds, a member's copies
//! among them), `triggers` (a change in, the keys it touches out, read
//! from the cache as it was before the change, which is applied after;
//! the controller's own writes told apart) and `observation` (a round's
//! [`Observation`](crate::sync::run::observe::Observation), built from
//! here with no request: the same input the one-shot run reads with
//! lists). A new trigger is one entry in `triggers::registry` (how its
//! source is watched beside what its changes touch) and its `Source`
//! variant. The `Cache` below is what the three share.

mod observation;
mod store;
mod triggers;

pub use observation::{Cover, Texts};
pub use store::{Store, StoreState};
pub use triggers::{Dirt, Written, watches};

use super::sources::Source;
use crate::api::core::FederatedTypeConfig;
use crate::core::describe::{FederatedRef, ObjectKey};
use crate::core::held::Held;
use crate::core::object_text::ObjectText;
use crate::core::run::settings::Settings;
use crate::sync::run::observe::ObservedType;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// (FederatedTypeConfig name, federated object key).
/// The queue's key: the federated object a change touches.
pub type WorkKey = FederatedRef;

/// The host's objects and every member's copies, as the watches hold them.
#[derive(Default)]
pub struct Cache {
    /// What the KubeFedConfig says (the last valid one).
    pub settings: Settings,
    pub ftcs: BTreeMap<String, FederatedTypeConfig>,
    pub clusters: BTreeMap<String, Value>,
    pub schedulings: BTreeMap<ObjectKey, Held>,
    pub versions: HashMap<ObjectKey, ObjectText>,
    pub namespaces: HashMap<String, String>,
    pub federated: BTreeMap<String, Store>,
    /// Cluster → FTC name → the member's managed objects of that type
    /// (nested, so that a lookup by `&str` allocates nothing).
    pub members: BTreeMap<String, BTreeMap<String, Store>>,
    /// The pull members' agents' reports (`core::propagation::report`),
    /// each kept only from its member's report namespace in the
    /// federation's (`federation_namespace`).
    pub reports: crate::core::propagation::report::Reports,
    pub federation_namespace: String,
    /// Host sources that have been listed.
    listed: BTreeSet<Source>,
    /// Types whose member copies are held whole ([`Cache::keeps_member_fields`]),
    /// as of the last rebuild.
    pub whole_copies: BTreeSet<String>,
    /// Host objects held as this controller's writes left them, ahead of
    /// those writes' events → the resourceVersion written. An event older
    /// than that is dropped (`behind_own_write`); the first one as new or
    /// newer takes over.
    own_writes: HashMap<Written, u64>,
}

impl Cache {
    /// The enabled types (FTC name → type), sorted by name.
    pub fn types(&self) -> Vec<(String, ObservedType)> {
        self.ftcs
            .iter()
            .filter(|(_, f)| f.spec.is_enabled())
            .map(|(name, f)| (name.clone(), ObservedType::of(f)))
            .collect()
    }

    /// The FTC of the namespaces type, if enabled.
    fn namespaces_type(&self) -> Option<String> {
        self.types()
            .into_iter()
            .find(|(_, t)| t.ty.target.is_namespace())
            .map(|(n, _)| n)
    }

    /// Whether every host source in `wanted` has been listed: no round runs
    /// before, or it would take a missing federated object for a deleted one.
    pub fn host_synced(&self, wanted: &[Source]) -> bool {
        wanted.iter().all(|s| self.listed.contains(s))
    }

    /// A member can be touched once every type's store is listed (or
    /// known not to be served).
    pub fn member_synced(&self, cluster: &str, types: &[String]) -> bool {
        types.iter().all(|t| {
            self.member_store(cluster, t)
                .is_some_and(|s| s.state != StoreState::Syncing)
        })
    }

    /// A member's store of a type's managed objects.
    pub fn member_store(&self, cluster: &str, ftc: &str) -> Option<&Store> {
        self.members.get(cluster)?.get(ftc)
    }

    /// Drops what a source saw: it is being (re)started and is not usable
    /// until it lists again (a type disabled and enabled again must not
    /// act on the objects seen before).
    pub fn forget(&mut self, source: &Source) {
        self.listed.remove(source);
        self.own_writes.retain(|w, _| !w.of(source));
        crate::sync::watch::memory::shrink_when_sparse(&mut self.own_writes);
        match source {
            Source::Federated(t) => {
                self.federated.remove(t);
            }
            Source::Member(c, t) => {
                if let Some(stores) = self.members.get_mut(c) {
                    stores.remove(t);
                    if stores.is_empty() {
                        self.members.remove(c);
                    }
                }
            }
            _ => {}
        }
    }

    /// Whether the type (its FederatedTypeConfig) or one of its federated
    /// objects keeps fields of the member copies, or compares them
    /// (report-only): they are held whole
    /// (`core::propagation::foreign`). It reads every federated object of
    /// the type: asked at rebuilds only ([`Cache::whole_copies`]), so an
    /// object that starts keeping them is followed from the next one.
    pub fn keeps_member_fields(&self, ftc: &str) -> bool {
        use crate::core::propagation::foreign::wants_whole_copies;
        let typed = self.ftcs.get(ftc).is_some_and(|f| {
            wants_whole_copies(&serde_json::to_value(&f.metadata.annotations).unwrap_or_default())
        });
        typed
            || self.federated.get(ftc).is_some_and(|store| {
                // Only an object whose text names the annotations is parsed.
                store.objects.values().any(|h| {
                    let text = h.text.as_str();
                    (text.contains("kubefedctl.kubefed.io/retain")
                        || text.contains("kubefedctl.kubefed.io/apply"))
                        && wants_whole_copies(&h.text.value()["metadata"]["annotations"])
                })
            })
    }

    fn type_keys(&self, ftc: &str) -> Vec<WorkKey> {
        self.federated
            .get(ftc)
            .map(|s| {
                let ftc = std::sync::Arc::from(ftc);
                s.objects
                    .keys()
                    .map(|k| FederatedRef::sharing(&ftc, k.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
pub(super) mod tests;
