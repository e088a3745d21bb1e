//! A round's observation, built from the cache with no request: every
//! object, or the keys a round covers; the federated objects and their
//! versions as texts, which the round parses off the watch's loop.

use super::store::{Store, StoreState};
use super::{Cache, WorkKey};
use crate::clients::members::ProbedMember;
use crate::core::describe::{FederatedRef, ObjectKey};
use crate::core::object_text::ObjectText;
use crate::core::propagation::decide::{Listing, federated_key, in_reach, member_key};
use crate::core::run::scope::RunScope;
use crate::core::run::shard;
use crate::sync::run::observe::{self, Observation, ObservedType};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// What a round's observation covers.
#[derive(Clone, Copy, Debug)]
pub enum Cover<'a> {
    /// Every object: a full round small enough to be one round.
    Everything,
    /// These keys only: a round over marked keys, or a slice of a full round.
    Keys(&'a BTreeSet<WorkKey>),
    /// The last slice of a full round: its keys, and every type's failing
    /// member listings.
    LastSlice(&'a BTreeSet<WorkKey>),
}

impl<'a> Cover<'a> {
    fn keys(self) -> Option<&'a BTreeSet<WorkKey>> {
        match self {
            Cover::Everything => None,
            Cover::Keys(k) | Cover::LastSlice(k) => Some(k),
        }
    }
}

impl Cache {
    /// Every key a full round covers: each federated object's, and each
    /// its members' copies name within the run's reach (`-n`, its shard;
    /// the orphans are looked for among them, and none with `-l`).
    pub fn full_round_keys(&self, host_namespace: &str, scope: &RunScope) -> BTreeSet<WorkKey> {
        let mut keys: BTreeSet<WorkKey> = self
            .federated
            .iter()
            .flat_map(|(t, s)| {
                let t = std::sync::Arc::from(t.as_str());
                s.objects
                    .keys()
                    .map(move |k| FederatedRef::sharing(&t, k.clone()))
            })
            .collect();
        if scope.selector.is_some() {
            return keys;
        }
        let namespace =
            (self.settings).objects_namespace(host_namespace, scope.namespace.as_deref());
        for (ftc, s) in self.members.values().flatten() {
            let Some(t) = self.ftcs.get(ftc).map(ObservedType::of) else {
                continue;
            };
            keys.extend(
                (s.objects.keys())
                    .filter(|k| in_reach(&t.ty, k, namespace.as_deref()))
                    .map(|k| federated_key(&t.ty, k))
                    .filter(|k| shard::owned(scope.shard, k))
                    .map(|k| FederatedRef::sharing(&t.name, k)),
            );
        }
        keys
    }

    /// [`Self::observe_texts`], parsed at once.
    #[cfg(test)]
    pub fn observe(
        &self,
        host_namespace: &str,
        scope: RunScope,
        types: &[String],
        members: &[ProbedMember],
        cover: Cover,
    ) -> Observation {
        let (mut seen, texts) = self.observe_texts(host_namespace, scope, types, members, cover);
        texts.parse_into(&mut seen);
        seen
    }

    /// The observation of a round over `types` (FTC names): every object,
    /// or some keys only (`cover`). `scope` is the run's, its
    /// `clusters` the members the round may write to. The federated
    /// objects and their versions come as texts, for the round to parse.
    pub fn observe_texts(
        &self,
        host_namespace: &str,
        scope: RunScope,
        types: &[String],
        members: &[ProbedMember],
        cover: Cover,
    ) -> (Observation, Texts) {
        let keys = cover.keys();
        let settings = self.settings;
        let namespace = settings.objects_namespace(host_namespace, scope.namespace.as_deref());
        let touched = scope.clusters.clone().unwrap_or_default();
        let ready: BTreeSet<&str> = (members.iter())
            .filter(|p| p.is_ready())
            .map(|p| p.name())
            .collect();
        let wanted_types = types;
        let mut types = Vec::new();
        let mut texts = Texts::default();
        for (name, mut t) in self.types() {
            if !wanted_types.contains(&name) {
                continue;
            }
            let wanted: BTreeSet<ObjectKey> = match keys {
                Some(keys) => keys
                    .iter()
                    .filter(|r| *r.type_name == *name)
                    .map(|r| r.key.clone())
                    .collect(),
                None => BTreeSet::new(),
            };
            let only = keys.is_some().then_some(&wanted);
            texts
                .objects
                .push(self.fill_type(&name, &mut t, only, &ready, &touched));
            if matches!(cover, Cover::LastSlice(_)) && wanted.is_empty() {
                self.fill_failing_listings(&name, &mut t, &ready, &touched);
            }
            t.only = keys.is_some().then_some(wanted);
            types.push(t);
        }
        let fed_namespaces = self.fed_namespaces();
        texts.versions = match keys {
            None => (self.versions.iter())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            Some(_) => self.versions_of(&types),
        };
        let rsps = self.rsps_in(namespace.as_deref());
        let mut seen = Observation::new(settings, members.to_vec(), scope, namespace);
        seen.types = types;
        seen.fed_namespaces = fed_namespaces;
        seen.host_namespaces = self.namespaces.clone();
        seen.rsps = rsps;
        seen.reports = self.reports.clone();
        // What the cache does not hold (the RSPs' pods, whether the host
        // has the DNS API) is read by the round's own observe step
        // (`observe::finish_from_cache`).
        (seen, texts)
    }
}

/// The texts of an observation that its round parses, off the watch's
/// loop: each type's federated objects and their PropagatedVersions. A
/// slice of 1,000 FederatedDeployments is 1,000 objects of each to parse.
#[derive(Default)]
pub struct Texts {
    /// Aligned with the observation's types.
    objects: Vec<Vec<ObjectText>>,
    versions: Vec<(ObjectKey, ObjectText)>,
}

impl Texts {
    pub fn parse_into(self, seen: &mut Observation) {
        for (t, texts) in seen.types.iter_mut().zip(self.objects) {
            t.objects = texts.iter().map(ObjectText::value).collect();
        }
        seen.versions = (self.versions.into_iter())
            .map(|(k, v)| (k, v.value()))
            .collect();
    }
}

impl Cache {
    /// One type of a round's observation: the listings of the ready
    /// members the round touches, and the texts of its federated objects
    /// (`only` those keys, when the round covers some). A round over other
    /// types' objects (`only` empty) needs none of this type's listings.
    fn fill_type(
        &self,
        name: &str,
        t: &mut ObservedType,
        only: Option<&BTreeSet<ObjectKey>>,
        ready: &BTreeSet<&str>,
        touched: &BTreeSet<String>,
    ) -> Vec<ObjectText> {
        let objects = match (self.federated.get(name), only) {
            (None, _) => Vec::new(),
            (Some(store), None) => (store.objects.values()).map(|v| v.text.clone()).collect(),
            (Some(store), Some(only)) => (only.iter())
                .filter_map(|k| store.objects.get(k))
                .map(|v| v.text.clone())
                .collect(),
        };
        if only.is_some_and(BTreeSet::is_empty) {
            return objects;
        }
        for cluster in ready.iter().filter(|c| touched.contains(**c)) {
            let Some(s) = self.member_store(cluster, name) else {
                continue;
            };
            if let Some(listing) = member_listing(s, t, only) {
                t.members.insert(cluster.to_string(), listing);
            }
        }
        objects
    }

    /// The members where a type is not served or its watch fails, each
    /// without objects: the last slice of a full round says so for the
    /// types it covers no key of (and for those with no object at all, no
    /// slice would).
    fn fill_failing_listings(
        &self,
        name: &str,
        t: &mut ObservedType,
        ready: &BTreeSet<&str>,
        touched: &BTreeSet<String>,
    ) {
        for cluster in ready.iter().filter(|c| touched.contains(**c)) {
            let Some(s) = self.member_store(cluster, name) else {
                continue;
            };
            if matches!(s.state, StoreState::Listed) {
                continue;
            }
            if let Some(listing) = member_listing(s, t, Some(&BTreeSet::new())) {
                t.members.insert(cluster.to_string(), listing);
            }
        }
    }

    /// Every FederatedNamespace, whatever a round covers: placement of
    /// any object reads its namespace's.
    fn fed_namespaces(&self) -> BTreeMap<String, Value> {
        observe::federated_namespaces(
            &self
                .types()
                .into_iter()
                .filter(|(_, t)| t.ty.target.is_namespace())
                .map(|(name, mut t)| {
                    t.objects = self
                        .federated
                        .get(&name)
                        .map(|s| s.objects.values().map(|o| o.text.value()).collect())
                        .unwrap_or_default();
                    t
                })
                .collect::<Vec<_>>(),
        )
    }

    /// The PropagatedVersions of a partial round's keys only, looked up as
    /// decide does.
    fn versions_of(&self, types: &[ObservedType]) -> Vec<(ObjectKey, ObjectText)> {
        types
            .iter()
            .flat_map(|t| {
                t.only.iter().flatten().filter_map(
                    |ObjectKey {
                         namespace: ns,
                         name,
                     }| {
                        let k = ObjectKey::new(
                            ns.clone(),
                            crate::core::propagation::version::propagated_version_name(
                                &t.ty.target.kind,
                                name,
                            ),
                        );
                        self.versions.get(&k).map(|v| (k, v.clone()))
                    },
                )
            })
            .collect()
    }

    /// The RSPs of the observed namespace (all, when cluster-wide).
    fn rsps_in(&self, namespace: Option<&str>) -> Vec<Value> {
        self.schedulings
            .iter()
            .filter(|(k, _)| namespace.is_none_or(|ns| ns == k.namespace))
            .map(|(_, v)| v.text.value())
            .collect()
    }
}

/// A ready member's objects of a type as a round needs them: a partial
/// round (`only` its keys) decides and looks for orphans among its keys
/// only, so it needs their member copies, not the whole listing. `None`
/// while the member's watch has not listed.
fn member_listing(
    s: &Store,
    t: &ObservedType,
    only: Option<&BTreeSet<ObjectKey>>,
) -> Option<Listing> {
    Some(match &s.state {
        StoreState::Listed => Listing::Listed(match only {
            None => (s.objects.iter())
                .map(|(k, v)| (k.clone(), v.text.clone()))
                .collect(),
            // Each key is looked up: a scan made a slice of 1,000 keys go
            // over all 10,000 copies of each member, in the watch's loop.
            Some(only) => (only.iter())
                .filter_map(|key| {
                    let at = member_key(&t.ty, key);
                    let held = s.objects.get(&at)?;
                    (federated_key(&t.ty, &at) == *key).then(|| (at, held.text.clone()))
                })
                .collect(),
        }),
        StoreState::NotServed(_) => Listing::NotServed(Vec::new()),
        StoreState::Failed(why) => Listing::Failed(why.clone()),
        StoreState::Syncing => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::watch::cache::tests::{cache, ev, key, none_touched, obj};
    use crate::sync::watch::sources::{Change, Source};
    use serde_json::json;

    #[test]
    fn a_round_observes_only_its_keys_and_only_listed_members() {
        let mut c = cache();
        c.apply(ev(
            Source::Federated("configmaps".into()),
            Change::replaced(vec![
                obj("FederatedConfigMap", "shop", "a", "1"),
                obj("FederatedConfigMap", "shop", "b", "1"),
            ]),
        ));
        c.apply(ev(
            Source::Member("m1".into(), "configmaps".into()),
            Change::Failed {
                not_served: true,
                message: "404".into(),
            },
        ));
        let pv = |name: &str| {
            json!({"apiVersion": "core.kubefed.io/v1alpha1", "kind": "PropagatedVersion",
                   "metadata": {"name": name, "namespace": "shop"}, "status": {}})
        };
        c.apply(ev(
            Source::Versions(false),
            Change::replaced(vec![pv("configmap-a"), pv("configmap-b")]),
        ));
        let keys: BTreeSet<WorkKey> = [key("configmaps", "shop", "b")].into();
        let types = ["configmaps".to_string(), "namespaces".to_string()];
        let seen = c.observe("fed", none_touched(), &types, &[], Cover::Keys(&keys));
        let cms = &seen.types[0];
        assert_eq!(cms.objects.len(), 1);
        assert_eq!(cms.objects[0]["metadata"]["name"], "b");
        assert_eq!(
            *seen.types[0].only.as_ref().unwrap(),
            [ObjectKey::new("shop", "b")].into()
        );
        assert_eq!(
            seen.versions.keys().collect::<Vec<_>>(),
            [&ObjectKey::new("shop", "configmap-b")],
            "the versions of the round's keys only"
        );
        let all = c.observe("fed", none_touched(), &types, &[], Cover::Everything);
        assert_eq!(all.types[0].objects.len(), 2);
        assert_eq!(all.versions.len(), 2);
        assert!(all.types.iter().all(|t| t.only.is_none()));
        assert!(!c.member_synced("m2", &["configmaps".into()]));
        assert!(
            c.member_synced("m1", &["configmaps".into()]),
            "not served counts as known"
        );
    }

    /// A member named `name`, ready, with no client (none is used).
    fn member(name: &str) -> ProbedMember {
        ProbedMember {
            member: crate::clients::members::Member::without_client(name),
            health: crate::clients::members::Health::Ready {
                version: "v1.37.2".into(),
            },
        }
    }

    /// `c`'s observation of both types for a round that touches m1, ready.
    fn observe_touching_m1(c: &Cache, cover: Cover) -> Observation {
        let m1 = member("m1");
        let members = std::slice::from_ref(&m1);
        let touched = RunScope {
            clusters: Some(["m1".to_string()].into()),
            ..RunScope::default()
        };
        let types = ["configmaps".to_string(), "namespaces".to_string()];
        c.observe("fed", touched, &types, members, cover)
    }

    #[test]
    fn a_full_round_in_slices_covers_orphans_and_every_failing_listing() {
        let mut c = cache();
        c.apply(ev(
            Source::Federated("configmaps".into()),
            Change::replaced(vec![obj("FederatedConfigMap", "shop", "a", "1")]),
        ));
        c.apply(ev(
            Source::Member("m1".into(), "configmaps".into()),
            Change::replaced(vec![
                obj("ConfigMap", "shop", "a", "1"),
                obj("ConfigMap", "shop", "gone", "1"),
            ]),
        ));
        c.apply(ev(
            Source::Member("m1".into(), "namespaces".into()),
            Change::Failed {
                not_served: false,
                message: "500".into(),
            },
        ));
        assert_eq!(
            c.full_round_keys("fed", &RunScope::default()),
            [
                key("configmaps", "shop", "a"),
                key("configmaps", "shop", "gone")
            ]
            .into(),
            "a member copy without its federated object is looked at too"
        );
        let elsewhere = RunScope {
            namespace: Some("other".into()),
            ..RunScope::default()
        };
        assert_eq!(
            c.full_round_keys("fed", &elsewhere),
            [key("configmaps", "shop", "a")].into(),
            "member copies outside -n are left out (the federated objects are watched in it)"
        );

        let slice: BTreeSet<WorkKey> = [key("configmaps", "shop", "gone")].into();
        let middle = observe_touching_m1(&c, Cover::Keys(&slice));
        let last = observe_touching_m1(&c, Cover::LastSlice(&slice));
        for seen in [&middle, &last] {
            let Listing::Listed(copies) = &seen.types[0].members["m1"] else {
                panic!("configmaps are listed in m1");
            };
            assert_eq!(
                copies.keys().collect::<Vec<_>>(),
                [&ObjectKey::new("shop", "gone")],
                "only the slice's copies"
            );
        }
        assert!(
            middle.types[1].members.is_empty(),
            "a slice without namespaces leaves their listings to the last"
        );
        assert!(
            matches!(&last.types[1].members["m1"], Listing::Failed(why) if why == "500"),
            "the last slice says where a type with no object fails: {:?}",
            last.types[1].members
        );
    }

    /// A round over some keys looks each up in a member's copies: a
    /// Namespace by its own key, nothing for a key whose federated object
    /// would have another name.
    #[test]
    fn a_round_over_keys_lists_only_its_copies_of_either_scope() {
        let mut c = cache();
        let namespace = |name: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        c.apply(ev(
            Source::Member("m1".into(), "configmaps".into()),
            Change::replaced(vec![
                obj("ConfigMap", "shop", "a", "1"),
                obj("ConfigMap", "shop", "b", "1"),
                obj("ConfigMap", "mall", "a", "1"),
            ]),
        ));
        c.apply(ev(
            Source::Member("m1".into(), "namespaces".into()),
            Change::replaced(vec![namespace("shop"), namespace("mall")]),
        ));
        let keys: BTreeSet<WorkKey> = [
            key("configmaps", "shop", "a"),
            key("configmaps", "shop", "missing"),
            key("namespaces", "shop", "shop"),
            // Not a FederatedNamespace's key (its name is its namespace's).
            key("namespaces", "mall", "shop"),
        ]
        .into();
        let seen = observe_touching_m1(&c, Cover::Keys(&keys));
        let listed = |t: usize| {
            let Listing::Listed(copies) = &seen.types[t].members["m1"] else {
                panic!("type {t} is listed in m1");
            };
            copies.keys().cloned().collect::<BTreeSet<_>>()
        };
        let k = |ns: &str, name: &str| ObjectKey::new(ns, name);
        assert_eq!(listed(0), [k("shop", "a")].into());
        assert_eq!(
            listed(1),
            [k("", "shop")].into(),
            "a Namespace by its own key"
        );
    }
}
