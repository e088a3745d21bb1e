//! Every source the watch knows, each registered once ([`TRIGGERS`]): how
//! it is watched in the run's scope (`watches`: its API, namespace and
//! selector), beside what its changes touch (`touched`, a pure function
//! of the cache as it was before the change and the change) and how the
//! cache keeps them (`keep`, applied after). A new trigger is one entry
//! here, and its `Source` variant; the intake, the loop and `specs` take
//! it as any other.

use super::super::store::{apply_by_name, apply_keyed, apply_typed, name_of, news};
use super::{Cache, Dirt, Trigger, Written};
use crate::api::core::{
    ClusterPropagatedVersion, FederatedTypeConfig, KubeFedCluster, KubeFedConfig, PropagatedVersion,
};
use crate::api::scheduling::ReplicaSchedulingPreference;
use crate::apply::{api_resource, resource_of};
use crate::core::describe::{FederatedRef, ObjectKey, key_of};
use crate::core::object_text::ObjectText;
use crate::core::propagation::decide::federated_key;
use crate::core::run::settings::Settings;
use crate::sync::run::observe::ObservedType;
use crate::sync::watch::cache::{Store, StoreState};
use crate::sync::watch::sources::{Change, Source, Spec, WatchScope};
use kube::runtime::watcher::Config;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// The watch's triggers: one per kind of [`Source`].
pub(super) const TRIGGERS: &[Trigger] = &[
    // The KubeFedConfig: new settings re-plan everything.
    Trigger {
        is: |s| matches!(s, Source::Config),
        watches: |w| {
            let name = format!("metadata.name={}", crate::api::KUBEFED_CONFIG_NAME);
            let config = Config::default().fields(&name);
            let ns = Some(w.federation_namespace);
            let spec = Spec::new(w.host, &resource_of::<KubeFedConfig>(), ns, config);
            vec![(Source::Config, spec)]
        },
        by_key: false,
        touched: |c, _, change| match settings_after(change) {
            None => Dirt::default(),
            Some(Ok(settings)) => Dirt {
                structure: settings != c.settings,
                ..Dirt::default()
            },
            // Upstream would not start; a running watch keeps what it had.
            Some(Err(e)) => Dirt {
                warnings: vec![format!("{e:#}; the previous settings stay")],
                ..Dirt::default()
            },
        },
        keep: |c, _, change| {
            if let Some(Ok(settings)) = settings_after(&change) {
                c.settings = settings;
            }
        },
    },
    // FederatedTypeConfigs: a changed spec re-plans everything.
    Trigger {
        is: |s| matches!(s, Source::TypeConfigs),
        watches: |w| {
            let ar = resource_of::<FederatedTypeConfig>();
            let ns = Some(w.federation_namespace);
            vec![(
                Source::TypeConfigs,
                Spec::new(w.host, &ar, ns, Config::default()),
            )]
        },
        by_key: false,
        touched: |c, _, change| {
            let mut after = c.ftcs.clone();
            let warnings = apply_typed(&mut after, change);
            Dirt {
                structure: specs(&c.ftcs) != specs(&after),
                warnings,
                ..Dirt::default()
            }
        },
        keep: |c, _, change| {
            apply_typed(&mut c.ftcs, &change);
        },
    },
    // KubeFedClusters: a changed spec or labels re-plans everything;
    // status writes (ours, after each probe) are no news.
    Trigger {
        is: |s| matches!(s, Source::Clusters),
        watches: |w| {
            let ar = resource_of::<KubeFedCluster>();
            let ns = Some(w.federation_namespace);
            vec![(
                Source::Clusters,
                Spec::new(w.host, &ar, ns, Config::default()),
            )]
        },
        by_key: false,
        touched: |c, _, change| Dirt {
            structure: clusters_changed(&c.clusters, change),
            ..Dirt::default()
        },
        keep: |c, _, change| apply_by_name(&mut c.clusters, change),
    },
    // ReplicaSchedulingPreferences touch the objects they schedule.
    Trigger {
        is: |s| matches!(s, Source::Schedulings),
        watches: |w| {
            let ar = resource_of::<ReplicaSchedulingPreference>();
            let ns = w.namespace.as_deref();
            vec![(
                Source::Schedulings,
                Spec::new(w.host, &ar, ns, Config::default()),
            )]
        },
        by_key: true,
        touched: schedulings_touched,
        keep: |c, _, change| apply_keyed(&mut c.schedulings, change),
    },
    // (Cluster)PropagatedVersions: our own write-backs, what the next
    // round compares against, never a reason for one; but a new approval
    // (`rollout approve`, never the watch's own write) takes its object
    // again, whose rollout may be awaiting it.
    Trigger {
        is: |s| matches!(s, Source::Versions(_)),
        watches: |w| {
            let plain = Config::default;
            let (ns, cluster) = (
                w.namespace.as_deref(),
                resource_of::<ClusterPropagatedVersion>(),
            );
            vec![
                (
                    Source::Versions(false),
                    Spec::new(w.host, &resource_of::<PropagatedVersion>(), ns, plain()),
                ),
                (
                    Source::Versions(true),
                    Spec::new(w.host, &cluster, None, plain()),
                ),
            ]
        },
        by_key: false,
        touched: versions_touched,
        keep: versions_keep,
    },
    // The host's Namespaces touch their FederatedNamespaces.
    Trigger {
        is: |s| matches!(s, Source::Namespaces),
        watches: |w| {
            let ar = api_resource("", "v1", "Namespace", "namespaces");
            vec![(
                Source::Namespaces,
                Spec::new(w.host, &ar, None, Config::default()),
            )]
        },
        by_key: false,
        touched: namespaces_touched,
        keep: |c, _, change| match change {
            Change::Applied(v) => {
                c.namespaces.insert(name_of(&v), uid(&v));
            }
            Change::Deleted(v) => {
                c.namespaces.remove(&name_of(&v));
            }
            Change::Replaced(vs) => c.namespaces = uids(&vs),
            Change::Failed { .. } | Change::Kept(..) => {}
        },
    },
    // Federated objects touch themselves (a FederatedNamespace:
    // everything in it).
    Trigger {
        is: |s| matches!(s, Source::Federated(_)),
        watches: federated_watches,
        by_key: true,
        touched: federated_touched,
        keep: |c, source, change| {
            let Source::Federated(ftc) = source else {
                return;
            };
            c.federated.entry(ftc.clone()).or_default().apply(change);
        },
    },
    // A pull member's agent's report touches the object it reports on,
    // when it says something new: the host's record of that member.
    Trigger {
        is: |s| matches!(s, Source::Reports),
        watches: |w| {
            if !w.pull_members {
                return Vec::new();
            }
            use crate::core::propagation::report as r;
            let ar = api_resource(r::GROUP, r::VERSION, r::KIND, r::PLURAL);
            vec![(
                Source::Reports,
                Spec::new(w.host, &ar, None, Config::default()),
            )]
        },
        by_key: false,
        touched: reports_touched,
        keep: |c, _, change| {
            let namespace = c.federation_namespace.clone();
            let parsed = |vs: &[Value]| {
                crate::core::propagation::report::Reports::of(vs, |m| {
                    crate::core::cluster::pull::report_namespace(&namespace, m)
                })
            };
            match change {
                Change::Applied(v) => c
                    .reports
                    .extend(parsed(&[v]).iter().cloned().collect::<Vec<_>>()),
                Change::Deleted(v) => {
                    for r in parsed(&[v]).iter() {
                        c.reports.remove(r);
                    }
                }
                Change::Replaced(vs) => {
                    let all: Vec<Value> = vs.iter().map(|(_, held)| held.text.value()).collect();
                    c.reports = parsed(&all);
                }
                Change::Failed { .. } | Change::Kept(..) => {}
            }
        },
    },
    // A member's copies touch their federated objects.
    Trigger {
        is: |s| matches!(s, Source::Member(..)),
        watches: member_watches,
        by_key: true,
        touched: member_touched,
        keep: |c, source, change| {
            let Source::Member(cluster, ftc) = source else {
                return;
            };
            let stores = c.members.entry(cluster.clone()).or_default();
            stores.entry(ftc.clone()).or_default().apply(change);
        },
    },
];

/// The settings a KubeFedConfig change leaves (`None`: it says nothing),
/// or why it cannot be read.
fn settings_after(change: &Change) -> Option<anyhow::Result<Settings>> {
    let config = match change {
        Change::Applied(v) => Some(v.clone()),
        Change::Replaced(vs) => vs.first().map(|(_, held)| held.text.value()),
        Change::Deleted(_) => None,
        Change::Failed { .. } | Change::Kept(..) => return None,
    };
    let namespace = (config.as_ref())
        .and_then(|c| c["metadata"]["namespace"].as_str())
        .unwrap_or("");
    Some(crate::clients::host::settings_of(
        namespace,
        config.as_ref(),
    ))
}

fn specs(m: &BTreeMap<String, FederatedTypeConfig>) -> Vec<(String, Value)> {
    m.iter()
        .map(|(k, f)| (k.clone(), serde_json::to_value(&f.spec).unwrap_or_default()))
        .collect()
}

/// Whether a change of the KubeFedClusters changes a spec or labels.
fn clusters_changed(clusters: &BTreeMap<String, Value>, change: &Change) -> bool {
    let essence = |v: &Value| (v["spec"].clone(), v["metadata"]["labels"].clone());
    match change {
        Change::Applied(v) => clusters.get(&name_of(v)).map(essence) != Some(essence(v)),
        Change::Deleted(v) => clusters.contains_key(&name_of(v)),
        Change::Replaced(vs) => {
            let after: BTreeMap<String, _> = (vs.iter().map(|(_, held)| held.text.value()))
                .map(|v| (name_of(&v), essence(&v)))
                .collect();
            after.len() != clusters.len()
                || (clusters.iter()).any(|(name, v)| after.get(name) != Some(&essence(v)))
        }
        Change::Failed { .. } | Change::Kept(..) => false,
    }
}

/// An RSP touches the objects of its name in the type its target kind
/// names (every type, without one): as it was and as it is now, so that
/// one deleted or retargeted re-decides what it scheduled.
fn schedulings_touched(c: &Cache, _: &Source, change: &Change) -> Dirt {
    let kind = |v: &Value| v["spec"]["targetKind"].as_str().map(str::to_string);
    let brought: HashMap<ObjectKey, Option<String>> = match change {
        Change::Applied(v) => [(key_of(v), kind(v))].into(),
        Change::Kept(key, held) => [(key.clone(), kind(&held.text.value()))].into(),
        Change::Replaced(vs) => (vs.iter())
            .map(|(key, held)| (key.clone(), kind(&held.text.value())))
            .collect(),
        Change::Deleted(_) | Change::Failed { .. } => HashMap::new(),
    };
    let types = c.types();
    let mut dirt = Dirt::default();
    for key in news(&c.schedulings, change).0 {
        let was = c.schedulings.get(&key).map(|r| kind(&r.text.value()));
        let kinds: Vec<Option<String>> =
            was.into_iter().chain(brought.get(&key).cloned()).collect();
        for (name, t) in &types {
            let schedules = |k: &Option<String>| k.as_ref().is_none_or(|k| *k == t.federated.kind);
            if kinds.is_empty() || kinds.iter().any(schedules) {
                dirt.keys.insert(FederatedRef::new(name, key.clone()));
            }
        }
    }
    dirt
}

/// Reports that say something new touch the objects they report on.
fn reports_touched(c: &Cache, _: &Source, change: &Change) -> Dirt {
    let namespace = c.federation_namespace.clone();
    let after: Vec<Value> = match change {
        Change::Applied(v) | Change::Deleted(v) => vec![v.clone()],
        Change::Replaced(vs) => vs.iter().map(|(_, held)| held.text.value()).collect(),
        Change::Failed { .. } | Change::Kept(..) => Vec::new(),
    };
    let reports = crate::core::propagation::report::Reports::of(&after, |m| {
        crate::core::cluster::pull::report_namespace(&namespace, m)
    });
    let deleted = matches!(change, Change::Deleted(_));
    let mut dirt = Dirt::default();
    for r in reports.iter() {
        let before = c.reports.get(&r.cluster, &r.type_name, &r.key);
        if deleted || before.is_none_or(|b| !b.says_the_same_as(r)) {
            dirt.keys
                .insert(FederatedRef::new(&r.type_name, r.key.clone()));
        }
    }
    dirt
}

/// A (Cluster)PropagatedVersion whose approvals changed to something
/// (`rollout approve` wrote them) touches its owner, the federated object.
fn versions_touched(c: &Cache, _: &Source, change: &Change) -> Dirt {
    use crate::core::propagation::rollout::approvals_of;
    let after: Vec<Value> = match change {
        Change::Applied(v) => vec![v.clone()],
        Change::Replaced(vs) => vs.iter().map(|(_, held)| held.text.value()).collect(),
        Change::Deleted(_) | Change::Failed { .. } | Change::Kept(..) => Vec::new(),
    };
    let mut dirt = Dirt::default();
    let types = c.types();
    for v in &after {
        let Some(approvals) = approvals_of(v) else {
            continue;
        };
        let before = c.versions.get(&key_of(v)).map(ObjectText::value);
        if before.as_ref().and_then(approvals_of) == Some(approvals) {
            continue;
        }
        let owner = &v["metadata"]["ownerReferences"][0];
        let (Some(kind), Some(name)) = (owner["kind"].as_str(), owner["name"].as_str()) else {
            continue;
        };
        let namespace = v["metadata"]["namespace"].as_str().unwrap_or("");
        for (type_name, _) in types.iter().filter(|(_, t)| t.federated.kind == kind) {
            let key = ObjectKey::new(namespace, name);
            dirt.keys.insert(FederatedRef::new(type_name, key));
        }
    }
    dirt
}

fn versions_keep(c: &mut Cache, source: &Source, change: Change) {
    let cluster_scoped = matches!(source, Source::Versions(true));
    match change {
        Change::Applied(v) => {
            c.versions.insert(key_of(&v), ObjectText::of(&v));
        }
        Change::Deleted(v) => {
            c.versions.remove(&key_of(&v));
        }
        Change::Replaced(vs) => {
            (c.versions).retain(|k, _| k.namespace.is_empty() != cluster_scoped);
            (c.versions).extend(vs.into_iter().map(|(k, held)| (k, held.text)));
        }
        Change::Failed { .. } | Change::Kept(..) => {}
    }
}

fn uid(v: &Value) -> String {
    v["metadata"]["uid"].as_str().unwrap_or("").to_string()
}

fn uids(listed: &[(ObjectKey, crate::core::held::Held)]) -> HashMap<String, String> {
    (listed.iter().map(|(_, held)| held.text.value()))
        .map(|v| (name_of(&v), uid(&v)))
        .collect()
}

/// A host Namespace touches its FederatedNamespace, when it is new, gone
/// or another one (a new uid).
fn namespaces_touched(c: &Cache, _: &Source, change: &Change) -> Dirt {
    let touched: Vec<String> = match change {
        Change::Applied(v) => {
            let name = name_of(v);
            match c.namespaces.get(&name) != Some(&uid(v)) {
                true => vec![name],
                false => Vec::new(),
            }
        }
        Change::Deleted(v) => vec![name_of(v)],
        Change::Replaced(vs) => {
            let new = uids(vs);
            let gone_or_other = (c.namespaces.iter())
                .filter(|(n, u)| new.get(*n) != Some(*u))
                .map(|(n, _)| n.clone());
            let added = (new.keys()).filter(|n| !c.namespaces.contains_key(*n));
            gone_or_other.chain(added.cloned()).collect()
        }
        Change::Failed { .. } | Change::Kept(..) => Vec::new(),
    };
    let mut dirt = Dirt::default();
    let Some(ns_type) = c.namespaces_type() else {
        return dirt;
    };
    // Only a namespace whose FederatedNamespace is held: the host's
    // Namespaces are watched cluster-wide, and every other one (outside
    // `-n`, another shard's, one nothing federates) used to start a
    // round over a key no FederatedNamespace of the watch's has. Its
    // member copies' events and its FederatedNamespace's own touch it.
    let held = c.federated.get(&ns_type);
    for name in touched {
        let key = ObjectKey::new(name.clone(), name);
        if held.is_some_and(|s| s.objects.contains_key(&key)) {
            dirt.keys.insert(FederatedRef::new(&ns_type, key));
        }
    }
    dirt
}

/// A watch of each type's federated objects, in `-n` and by `-l` (a
/// FederatedNamespace, which federates a whole namespace, by no selector).
fn federated_watches(w: &WatchScope) -> Vec<(Source, Spec)> {
    let mut out = Vec::new();
    for (name, t) in &w.types {
        let mut config = Config::default();
        if let Some(sel) = w.selector
            && !t.ty.target.is_namespace()
        {
            config = config.labels(sel);
        }
        let in_ns = w.namespace.as_deref().filter(|_| t.federated_namespaced);
        let spec = Spec::new(w.host, &t.federated, in_ns, config);
        out.push((Source::Federated(name.clone()), spec));
    }
    out
}

/// A federated object touches itself; a FederatedNamespace, everything
/// in its namespace. Status updates are our own write-backs: no news.
fn federated_touched(c: &Cache, source: &Source, change: &Change) -> Dirt {
    let Source::Federated(ftc) = source else {
        return Dirt::default();
    };
    let (touched, _) = match c.federated.get(ftc) {
        Some(store) => store.news(change),
        None => news(&BTreeMap::new(), change),
    };
    let mut dirt = Dirt::default();
    let is_namespaces = c.namespaces_type().as_deref() == Some(ftc.as_str());
    for key in touched {
        if is_namespaces {
            // A FederatedNamespace places everything in it (what it adds
            // or removes of its own type is news itself).
            for (t, s) in &c.federated {
                for k in s.objects.keys().filter(|k| k.namespace == key.namespace) {
                    dirt.keys.insert(FederatedRef::new(t, k.clone()));
                }
            }
        }
        dirt.keys.insert(FederatedRef::new(ftc, key));
    }
    dirt
}

/// A watch of each member's managed copies of each type.
fn member_watches(w: &WatchScope) -> Vec<(Source, Spec)> {
    let managed = format!("{}=true", crate::core::propagation::desired::MANAGED_LABEL);
    let mut out = Vec::new();
    for m in &w.members {
        for (name, t) in &w.types {
            let in_ns = w.namespace.as_deref().filter(|_| t.ty.namespaced);
            let whole = w.whole_copies.contains(name);
            let config = Config::default().labels(&managed);
            let spec = Spec {
                fingerprint: format!("{}/{}/{whole}", m.fingerprint, in_ns.unwrap_or("")),
                whole,
                ..Spec::new(m.client, &t.target, in_ns, config)
            };
            out.push((Source::Member(m.name.to_string(), name.clone()), spec));
        }
    }
    out
}

/// A member's copy touches its federated object. Its first list names
/// the member instead (rounds left it out until now: `intake` catches it
/// up); a failing watch touches every object of the type (each shows it
/// there).
fn member_touched(c: &Cache, source: &Source, change: &Change) -> Dirt {
    let Source::Member(cluster, ftc) = source else {
        return Dirt::default();
    };
    let unseen = Store::default();
    let store = c.member_store(cluster, ftc).unwrap_or(&unseen);
    if matches!(change, Change::Replaced(_)) && store.state != StoreState::Listed {
        return Dirt {
            listed: [cluster.to_string()].into(),
            ..Dirt::default()
        };
    }
    let Some(t) = c.ftcs.get(ftc).map(ObservedType::of) else {
        return Dirt::default();
    };
    let (touched, status_only) = store.news(change);
    let mut dirt = Dirt::default();
    for key in touched {
        (dirt.keys).insert(FederatedRef::new(ftc, federated_key(&t.ty, &key)));
    }
    // A member's status is news only where an RSP schedules the
    // object: its replicas follow the members' ready ones (as
    // upstream's RSP controller, which watches member status).
    // Where the type's status is collected, a member's status is news too.
    let collected = c.reads_member_status(&t);
    for key in status_only {
        let work = FederatedRef::new(ftc, federated_key(&t.ty, &key));
        if collected || c.schedulings.contains_key(&work.key) {
            dirt.keys.insert(work);
        } else {
            dirt.status_only.insert(work);
        }
    }
    if !store.listed_after(change) {
        // Failing now: every object of the type shows it there.
        dirt.keys.extend(c.type_keys(ftc));
    }
    // A copy the controller may have written itself (`Dirt::written`).
    if let Change::Kept(key, held) = change
        && let Some(rv) = held.version
    {
        let work = FederatedRef::new(ftc, federated_key(&t.ty, key));
        let written = Written::Member(cluster.clone(), ftc.clone(), key.clone());
        dirt.maybe_own_write(work, written, rv);
    }
    dirt
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::watch::cache::tests::cache;
    use crate::sync::watch::cache::watches;
    use crate::sync::watch::sources::WatchedMember;

    /// Every kind of source has one trigger, and one only.
    #[test]
    fn every_source_is_registered_once() {
        let sources = [
            Source::Config,
            Source::TypeConfigs,
            Source::Clusters,
            Source::Schedulings,
            Source::Versions(false),
            Source::Versions(true),
            Source::Namespaces,
            Source::Federated("configmaps".into()),
            Source::Member("m1".into(), "configmaps".into()),
        ];
        for s in sources {
            let registered = TRIGGERS.iter().filter(|t| (t.is)(&s));
            assert_eq!(registered.count(), 1, "{s}");
        }
    }

    /// A pull member's report touches its object when it says something
    /// new, and only from its member's own report namespace.
    #[test]
    fn a_report_that_says_something_new_touches_its_object() {
        use crate::core::propagation::action::ClusterStatus;
        use crate::core::propagation::report::Report;
        let mut c = cache();
        c.federation_namespace = "fed".into();
        let key = ObjectKey {
            namespace: "shop".into(),
            name: "web".into(),
        };
        let report = Report {
            cluster: "edge".into(),
            type_name: "configmaps".into(),
            key: key.clone(),
            uid: "u1".into(),
            template_version: "t".into(),
            overrides_version: "o".into(),
            status: ClusterStatus::Ok,
            version: Some("rv:1".into()),
            removed: false,
            readiness: None,
            reported_at: "2026-12-06T10:00:00Z".into(),
        };
        let trigger = TRIGGERS.iter().find(|t| (t.is)(&Source::Reports)).unwrap();
        let own = report.to_object("fed-pull-edge");
        let dirt = (trigger.touched)(&c, &Source::Reports, &Change::Applied(own.clone()));
        assert_eq!(
            dirt.keys.into_iter().collect::<Vec<_>>(),
            [FederatedRef::new("configmaps", key.clone())]
        );
        (trigger.keep)(&mut c, &Source::Reports, Change::Applied(own));
        assert_eq!(c.reports.len(), 1);
        let later = Report {
            reported_at: "2026-12-06T11:00:00Z".into(),
            ..report.clone()
        };
        let same = (trigger.touched)(
            &c,
            &Source::Reports,
            &Change::Applied(later.to_object("fed-pull-edge")),
        );
        assert!(same.keys.is_empty(), "only its time changed");
        let forged = (trigger.touched)(
            &c,
            &Source::Reports,
            &Change::Applied(report.to_object("fed-pull-other")),
        );
        assert!(forged.keys.is_empty(), "another member's namespace");
        let gone = report.to_object("fed-pull-edge");
        assert_eq!(
            (trigger.touched)(&c, &Source::Reports, &Change::Deleted(gone.clone()))
                .keys
                .len(),
            1
        );
        (trigger.keep)(&mut c, &Source::Reports, Change::Deleted(gone));
        assert!(c.reports.is_empty());
    }

    /// The triggers' watches in a run's scope: the host's resources, a
    /// watch per type's federated objects (by `-l`, but a
    /// FederatedNamespace's) and per member and type; what each was started
    /// from (a new one restarts it).
    #[tokio::test]
    async fn each_trigger_says_what_it_watches_in_the_runs_scope() {
        let c = cache();
        let client =
            kube::Client::try_from(kube::Config::new("https://127.0.0.1:1".parse().unwrap()))
                .unwrap();
        let scope = |members| WatchScope {
            host: &client,
            federation_namespace: "fed",
            namespace: Some("shop".into()),
            selector: Some("team=x"),
            types: c.types(),
            members,
            whole_copies: &c.whole_copies,
            pull_members: false,
        };
        let host = watches(&scope(vec![]));
        let with_pull = watches(&WatchScope {
            pull_members: true,
            ..scope(vec![])
        });
        assert_eq!(with_pull.len(), host.len() + 1);
        assert_eq!(with_pull[&Source::Reports].kind, "PropagationReport");
        let seen: Vec<(String, String, String)> = (host.iter())
            .map(|(s, spec)| (s.to_string(), spec.kind.clone(), spec.fingerprint.clone()))
            .collect();
        let row = |s: &str, k: &str, f: &str| (s.to_string(), k.to_string(), f.to_string());
        assert_eq!(
            seen,
            [
                row("the KubeFedConfig", "KubeFedConfig", "fed"),
                row("FederatedTypeConfigs", "FederatedTypeConfig", "fed"),
                row("KubeFedClusters", "KubeFedCluster", "fed"),
                row(
                    "ReplicaSchedulingPreferences",
                    "ReplicaSchedulingPreference",
                    "shop"
                ),
                row("PropagatedVersions", "PropagatedVersion", "shop"),
                row("ClusterPropagatedVersions", "ClusterPropagatedVersion", ""),
                row("the host's Namespaces", "Namespace", ""),
                row(
                    "the federated objects of configmaps",
                    "FederatedConfigMap",
                    "shop"
                ),
                row(
                    "the federated objects of namespaces",
                    "FederatedNamespace",
                    "shop"
                ),
            ]
        );
        let labels = |s: &Source| host[s].config.label_selector.clone();
        assert_eq!(
            labels(&Source::Federated("configmaps".into())),
            Some("team=x".into())
        );
        assert_eq!(labels(&Source::Federated("namespaces".into())), None);
        let m1 = WatchedMember {
            name: "m1",
            client: &client,
            fingerprint: "m1-fp",
        };
        let all = watches(&scope(vec![m1]));
        let copies = Source::Member("m1".into(), "configmaps".into());
        assert_eq!(all.len(), host.len() + 2);
        assert_eq!(all[&copies].fingerprint, "m1-fp/shop/false");
        assert_eq!(
            all[&copies].config.label_selector.as_deref(),
            Some("kubefed.io/managed=true")
        );
        let namespaces = Source::Member("m1".into(), "namespaces".into());
        assert_eq!(
            all[&namespaces].fingerprint, "m1-fp//false",
            "cluster-scoped"
        );
    }
}
