//! The triggers' tests: changes in, the keys they touch out; no I/O.

use super::*;
use crate::core::run::scope::RunScope;
use crate::core::run::settings::Settings;
use crate::sync::watch::cache::Cover;
use crate::sync::watch::cache::tests::{cache, ev, ftc, key, none_touched, obj};
use serde_json::{Value, json};

#[test]
fn a_malformed_kubefedconfig_leaves_the_last_settings() {
    let mut c = cache();
    let config = |spec: Value| {
        json!({"apiVersion": "core.kubefed.io/v1beta1", "kind": "KubeFedConfig",
            "metadata": {"name": "kubefed", "namespace": "fed"}, "spec": spec})
    };
    let d = c.apply(ev(
        Source::Config,
        Change::Applied(config(json!({"scope": "Namespaced"}))),
    ));
    assert!(d.structure, "a new scope re-plans everything");
    assert_eq!(
        c.settings.scope,
        crate::core::cluster::membership::Scope::Namespaced
    );
    let d = c.apply(ev(
        Source::Config,
        Change::Applied(config(json!({"scope": "Sideways"}))),
    ));
    assert!(!d.structure);
    assert_eq!(
        d.warnings,
        [
            "KubeFedConfig fed/kubefed: spec.scope: must be Cluster or Namespaced, not \"Sideways\"; the previous settings stay"
        ]
    );
    assert_eq!(
        c.settings.scope,
        crate::core::cluster::membership::Scope::Namespaced
    );
    let d = c.apply(ev(Source::Config, Change::Deleted(config(json!({})))));
    assert!(d.structure);
    assert_eq!(c.settings, Settings::default());
}

#[test]
fn changes_touch_their_federated_objects() {
    let mut c = cache();
    let cms = Source::Federated("configmaps".into());
    let d = c.apply(ev(
        cms.clone(),
        Change::replaced(vec![obj("FederatedConfigMap", "shop", "a", "1")]),
    ));
    assert_eq!(d.keys, [key("configmaps", "shop", "a")].into());
    // The same object again: nothing to do.
    let d = c.apply(ev(
        cms.clone(),
        Change::Applied(obj("FederatedConfigMap", "shop", "a", "1")),
    ));
    assert!(d.keys.is_empty());
    let d = c.apply(ev(
        cms,
        Change::Applied(obj("FederatedConfigMap", "shop", "a", "2")),
    ));
    assert_eq!(d.keys, [key("configmaps", "shop", "a")].into());

    // A member's copy (drift) touches its federated object; the first
    // listing of a member's type names the member (caught up once all
    // of its types have listed).
    let m = Source::Member("m1".into(), "configmaps".into());
    let d = c.apply(ev(
        m.clone(),
        Change::replaced(vec![obj("ConfigMap", "shop", "a", "1")]),
    ));
    assert_eq!(d.listed, ["m1".to_string()].into());
    let d = c.apply(ev(
        m,
        Change::Applied(obj("ConfigMap", "shop", "a", "hand-edited")),
    ));
    assert_eq!(d.keys, [key("configmaps", "shop", "a")].into());

    // A member Namespace belongs to its FederatedNamespace; a
    // FederatedNamespace touches everything in its namespace.
    let mut member_ns = obj("Namespace", "", "shop", "");
    member_ns["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("namespace");
    let mns = Source::Member("m1".into(), "namespaces".into());
    c.apply(ev(mns.clone(), Change::replaced(vec![])));
    let d = c.apply(ev(mns, Change::Applied(member_ns)));
    assert_eq!(d.keys, [key("namespaces", "shop", "shop")].into());
    let d = c.apply(ev(
        Source::Federated("namespaces".into()),
        Change::replaced(vec![obj("FederatedNamespace", "shop", "shop", "")]),
    ));
    assert_eq!(
        d.keys,
        [
            key("configmaps", "shop", "a"),
            key("namespaces", "shop", "shop")
        ]
        .into()
    );
}

#[test]
fn a_malformed_type_config_is_named_with_its_field_and_left_out() {
    let mut c = cache();
    let mut bad = ftc("secrets", "Secret", "secrets", "");
    bad["spec"]["federatedType"]["pluralName"] = json!(5);
    let d = c.apply(ev(Source::TypeConfigs, Change::Applied(bad)));
    assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
    assert!(
        d.warnings[0].starts_with(
            "FederatedTypeConfig \"fed/secrets\": spec.federatedType.pluralName: invalid type"
        ),
        "{}",
        d.warnings[0]
    );
    assert!(!c.ftcs.contains_key("secrets"));
    assert_eq!(c.ftcs.len(), 2, "the others stay");
}

#[test]
fn a_watch_that_failed_before_listing_is_not_synced() {
    let mut c = cache();
    let cms = Source::Federated("configmaps".into());
    let failed = || Change::Failed {
        not_served: false,
        message: "500 Internal Server Error".into(),
    };
    let d = c.apply(ev(cms.clone(), failed()));
    assert!(
        !c.host_synced(std::slice::from_ref(&cms)),
        "no round may take it for empty"
    );
    assert_eq!(
        d.warnings,
        ["watching the federated objects of configmaps: 500 Internal Server Error"]
    );
    c.apply(ev(
        cms.clone(),
        Change::replaced(vec![obj("FederatedConfigMap", "shop", "a", "1")]),
    ));
    assert!(c.host_synced(std::slice::from_ref(&cms)));
    // Failing later keeps what was listed until the watch lists again.
    c.apply(ev(cms.clone(), failed()));
    assert!(c.host_synced(std::slice::from_ref(&cms)));
    assert_eq!(c.full_round_keys("fed", &RunScope::default()).len(), 1);
}

#[test]
fn a_restarted_source_is_not_synced_and_forgets_what_it_saw() {
    let mut c = cache();
    let cms = Source::Federated("configmaps".into());
    c.apply(ev(
        cms.clone(),
        Change::replaced(vec![obj("FederatedConfigMap", "shop", "a", "1")]),
    ));
    assert!(c.host_synced(std::slice::from_ref(&cms)));
    c.forget(&cms);
    assert!(!c.host_synced(std::slice::from_ref(&cms)));
    assert!(
        c.full_round_keys("fed", &RunScope::default()).is_empty(),
        "objects seen before the restart are gone"
    );
    c.apply(ev(cms.clone(), Change::replaced(vec![])));
    assert!(c.host_synced(std::slice::from_ref(&cms)));
}

#[test]
fn our_own_write_backs_and_status_only_changes_are_no_news() {
    let mut c = cache();
    let kfc = json!({"metadata": {"name": "m1"}, "spec": {"apiEndpoint": "https://a"}, "status": {"conditions": []}});
    assert!(
        c.apply(ev(Source::Clusters, Change::replaced(vec![kfc.clone()])))
            .structure
    );
    let mut status_only = kfc.clone();
    status_only["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
    assert_eq!(
        c.apply(ev(Source::Clusters, Change::Applied(status_only))),
        Dirt::default()
    );
    let mut relabelled = kfc;
    relabelled["metadata"]["labels"] = json!({"region": "eu"});
    assert!(
        c.apply(ev(Source::Clusters, Change::Applied(relabelled)))
            .structure
    );

    let pv = json!({"metadata": {"name": "configmap-a", "namespace": "shop"}, "status": {}});
    assert_eq!(
        c.apply(ev(Source::Versions(false), Change::replaced(vec![pv]))),
        Dirt::default()
    );
    assert_eq!(c.versions.len(), 1);
    assert_eq!(
        c.apply(ev(Source::Versions(true), Change::replaced(vec![]))),
        Dirt::default()
    );
    assert_eq!(
        c.versions.len(),
        1,
        "a cluster-scoped relist keeps the namespaced versions"
    );

    // Federated objects and member copies: a status update (ours on
    // the host, a controller's in a member) is no news; the rest is.
    let fed = Source::Federated("configmaps".into());
    let a = obj("FederatedConfigMap", "shop", "a", "1");
    c.apply(ev(fed.clone(), Change::replaced(vec![a.clone()])));
    let mut written_back = a.clone();
    written_back["status"] = json!({"clusters": [{"name": "m1"}]});
    written_back["metadata"]["resourceVersion"] = json!("7");
    assert!(
        c.apply(ev(fed.clone(), Change::Applied(written_back.clone())))
            .keys
            .is_empty()
    );
    let seen = c.observe(
        "fed",
        none_touched(),
        &["configmaps".into()],
        &[],
        Cover::Everything,
    );
    assert_eq!(
        seen.types[0].objects[0], written_back,
        "the cache holds the latest copy"
    );
    let mut edited = written_back;
    edited["metadata"]["labels"] = json!({"team": "x"});
    assert_eq!(
        c.apply(ev(fed.clone(), Change::Applied(edited))).touched(),
        [key("configmaps", "shop", "a")].into()
    );
    let member = Source::Member("m1".into(), "configmaps".into());
    let copy = obj("ConfigMap", "shop", "a", "1");
    c.apply(ev(member.clone(), Change::replaced(vec![copy.clone()])));
    let mut status = copy.clone();
    status["status"] = json!({"observedGeneration": 2});
    let dirt = c.apply(ev(member.clone(), Change::Applied(status.clone())));
    assert!(dirt.keys.is_empty());
    // Said apart: news for an object whose rollout waits (`rollouts`).
    assert_eq!(dirt.status_only, [key("configmaps", "shop", "a")].into());
    // Unless an RSP schedules it: its replicas follow the members'.
    let rsp = json!({"apiVersion": "scheduling.kubefed.io/v1alpha1", "kind": "ReplicaSchedulingPreference",
                     "metadata": {"name": "a", "namespace": "shop"},
                     "spec": {"targetKind": "FederatedConfigMap", "totalReplicas": 3}});
    c.apply(ev(Source::Schedulings, Change::replaced(vec![rsp])));
    status["status"] = json!({"readyReplicas": 1});
    assert_eq!(
        c.apply(ev(member.clone(), Change::Applied(status))).keys,
        [key("configmaps", "shop", "a")].into()
    );
    // A member copy is held as the view decide reads, without its
    // data; an edit of the data by hand is news all the same.
    let mut drifted = copy;
    drifted["data"]["d"] = json!("by hand");
    assert_eq!(
        c.apply(ev(member.clone(), Change::Applied(drifted.clone())))
            .keys,
        [key("configmaps", "shop", "a")].into()
    );
    // As a member watch sends them: held in its own task.
    let kept = |v: &Value| Change::Kept(key_of(v), member.hold(v));
    assert!(c.apply(ev(member.clone(), kept(&drifted))).keys.is_empty());
    let mut edited_again = drifted.clone();
    edited_again["data"]["d"] = json!("by hand, again");
    assert_eq!(
        c.apply(ev(member.clone(), kept(&edited_again))).keys,
        [key("configmaps", "shop", "a")].into()
    );
    c.apply(ev(member.clone(), kept(&drifted)));
    let held = &c.members["m1"]["configmaps"].objects[&ObjectKey::new("shop", "a")];
    assert_eq!(
        held.text.value(),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "a", "namespace": "shop"}})
    );
}

/// A busy host's watch brings a round's own writes back late: the
/// cache holds them from the round's answers, and their older events
/// (the finalizer's before the status's) do not take it back.
#[test]
fn own_writes_are_held_ahead_of_their_late_events() {
    let mut c = cache();
    let fed = Source::Federated("configmaps".into());
    let at = |v: &Value, rv: &str| {
        let mut v = v.clone();
        v["metadata"]["resourceVersion"] = json!(rv);
        v
    };
    let a = at(&obj("FederatedConfigMap", "shop", "a", "1"), "10");
    c.apply(ev(fed.clone(), Change::replaced(vec![a.clone()])));
    c.apply(ev(Source::Versions(false), Change::replaced(vec![])));
    let held = |c: &Cache| {
        c.federated["configmaps"].objects[&ObjectKey::new("shop", "a")]
            .text
            .value()
    };
    // The round added the finalizer (11), wrote the status (12) and the
    // version (5, another object's count).
    let mut finalized = at(&a, "11");
    finalized["metadata"]["finalizers"] = json!(["kubefed.io/sync-controller"]);
    let mut statused = at(&finalized, "12");
    statused["status"] = json!({"clusters": [{"name": "m1"}]});
    statused["metadata"]["managedFields"] = json!([{"manager": "kubefedctl"}]);
    let pv = json!({"metadata": {"name": "configmap-a", "namespace": "shop", "resourceVersion": "5"}, "status": {"clusterVersions": []}});
    let (obj_a, obj_b) = (
        key("configmaps", "shop", "a"),
        key("configmaps", "shop", "b"),
    );
    for answer in [
        Answer::federated(finalized.clone()),
        Answer::federated(statused.clone()),
        Answer::version(pv.clone()),
    ] {
        c.hold_own_write(&obj_a, answer);
    }
    statused["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    assert_eq!(held(&c), statused, "held as its watch holds it");
    assert_eq!(
        c.versions[&ObjectKey::new("shop", "configmap-a")].value(),
        pv
    );
    // The finalizer's event, late: dropped, and no news.
    assert_eq!(
        c.apply(ev(fed.clone(), Change::Applied(finalized.clone()))),
        Dirt::default()
    );
    assert_eq!(held(&c), statused);
    // The status's event: the same object, no news; the hold ends.
    assert_eq!(
        c.apply(ev(fed.clone(), Change::Applied(statused.clone()))),
        Dirt::default()
    );
    assert_eq!(c.own_writes.len(), 1, "the version's event is to come");
    let versions = Source::Versions(false);
    assert_eq!(
        c.apply(ev(versions.clone(), Change::Applied(pv.clone()))),
        Dirt::default()
    );
    assert!(c.own_writes.is_empty());
    // A member copy created: held as its member's watch holds it; its
    // event is no news, nor is an older one (a round's update before).
    let member = Source::Member("m1".into(), "configmaps".into());
    c.apply(ev(member.clone(), Change::replaced(vec![])));
    let copy = at(&obj("ConfigMap", "shop", "a", "1"), "3");
    let answer = Answer::member("m1", &copy, false);
    c.hold_own_write(&obj_a, answer);
    let kept = |v: &Value| Change::Kept(key_of(v), member.hold(v));
    assert_eq!(
        c.apply(ev(member.clone(), kept(&at(&copy, "2")))),
        Dirt::default()
    );
    assert_eq!(c.own_writes.len(), 1);
    assert_eq!(c.apply(ev(member.clone(), kept(&copy))), Dirt::default());
    assert!(c.own_writes.is_empty());
    let mut by_hand = at(&copy, "4");
    by_hand["data"]["d"] = json!("by hand");
    assert_eq!(
        c.apply(ev(member.clone(), kept(&by_hand))).touched(),
        [obj_a.clone()].into(),
        "a change by someone else is news"
    );
    // A round's write whose event comes before its answer: the event
    // is news, named by the object written and its version, which the
    // answer names too (the loop then drops that news: `rounds`).
    let mut rewritten = at(&copy, "5");
    rewritten["data"]["d"] = json!("put back");
    let dirt = c.apply(ev(member.clone(), kept(&rewritten)));
    let answer = Answer::member("m1", &rewritten, false);
    let (written, rv) = c.hold_own_write(&obj_a, answer).unwrap();
    assert_eq!(dirt.written, [(obj_a.clone(), written, rv)]);
    assert!(dirt.keys.is_empty() && c.own_writes.is_empty());
    // A change after it is news as ever, and an answer older than what
    // is held changes nothing.
    let mut edited = at(&statused, "13");
    edited["metadata"]["labels"] = json!({"team": "x"});
    assert_eq!(
        c.apply(ev(fed.clone(), Change::Applied(edited.clone())))
            .written,
        [(
            obj_a.clone(),
            Written::Federated("configmaps".into(), ObjectKey::new("shop", "a")),
            13
        )]
    );
    c.hold_own_write(&obj_a, Answer::federated(statused.clone()));
    assert_eq!(held(&c), edited);
    assert!(c.own_writes.is_empty());
    // A version whose federated object is gone is not brought back,
    // and a new list ends every hold of its store.
    c.apply(ev(fed.clone(), Change::Deleted(edited)));
    c.apply(ev(versions, Change::Deleted(pv.clone())));
    c.hold_own_write(&obj_a, Answer::version(at(&pv, "6")));
    assert!(c.versions.is_empty());
    let b = at(&obj("FederatedConfigMap", "shop", "b", "1"), "20");
    c.apply(ev(fed.clone(), Change::Applied(b.clone())));
    c.hold_own_write(&obj_b, Answer::federated(at(&b, "21")));
    assert_eq!(c.own_writes.len(), 1);
    c.apply(ev(fed, Change::replaced(vec![b])));
    assert!(c.own_writes.is_empty());
}

/// The host's Namespaces touch only the FederatedNamespaces the watch
/// holds: one outside its reach (`-n`, a shard) or federated by nothing
/// starts no round.
#[test]
fn a_host_namespace_touches_only_a_held_federated_namespace() {
    let mut c = cache();
    let fed_ns = Source::Federated("namespaces".into());
    let shop = obj("FederatedNamespace", "shop", "shop", "");
    c.apply(ev(fed_ns.clone(), Change::replaced(vec![shop.clone()])));
    let ns = |name: &str, uid: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "uid": uid}});
    let d = c.apply(ev(
        Source::Namespaces,
        Change::replaced(vec![ns("shop", "1"), ns("other", "2")]),
    ));
    assert_eq!(d.keys, [key("namespaces", "shop", "shop")].into());
    assert_eq!(c.namespaces.len(), 2, "every namespace is still known");
    let d = c.apply(ev(Source::Namespaces, Change::Applied(ns("new", "3"))));
    assert!(d.keys.is_empty(), "{:?}", d.keys);
    let d = c.apply(ev(Source::Namespaces, Change::Deleted(ns("other", "2"))));
    assert!(d.keys.is_empty(), "{:?}", d.keys);
    let d = c.apply(ev(Source::Namespaces, Change::Applied(ns("shop", "4"))));
    assert_eq!(d.keys, [key("namespaces", "shop", "shop")].into());
    c.apply(ev(fed_ns, Change::Deleted(shop)));
    let d = c.apply(ev(Source::Namespaces, Change::Deleted(ns("shop", "4"))));
    assert!(d.keys.is_empty(), "{:?}", d.keys);
}

/// FederatedConfigMap shop/a's PropagatedVersion, with `approvals` in
/// its annotation (`rollout approve`'s).
fn approved(approvals: Option<&str>) -> Value {
    let mut pv = json!({"metadata": {"name": "configmap-a", "namespace": "shop",
        "ownerReferences": [{"kind": "FederatedConfigMap", "name": "a"}]}});
    if let Some(a) = approvals {
        pv["metadata"]["annotations"] =
            json!({crate::core::propagation::rollout::APPROVALS_ANNOTATION: a});
    }
    pv
}

/// One row of [`a_change_touches_what_the_cache_before_it_says`].
struct Row {
    what: &'static str,
    /// What the cache has seen, beyond `cache()`'s types.
    before: Vec<Event>,
    change: Event,
    keys: Vec<WorkKey>,
    structure: bool,
}

fn row(what: &'static str, before: Vec<Event>, change: Event, keys: Vec<WorkKey>) -> Row {
    Row {
        what,
        before,
        change,
        keys,
        structure: false,
    }
}

/// A change's keys are a pure function of the cache as it was before the
/// change and the change (`Cache::touched` takes `&Cache`: it cannot
/// update it), so they can use what the change replaces: a deleted
/// object's last state, a retargeted RSP's old type. Applying the change
/// says the same.
#[test]
fn a_change_touches_what_the_cache_before_it_says() {
    let cms = || Source::Federated("configmaps".into());
    let fed_ns = || Source::Federated("namespaces".into());
    let copies = || Source::Member("m1".into(), "configmaps".into());
    let a = || obj("FederatedConfigMap", "shop", "a", "1");
    let shop = || obj("FederatedNamespace", "shop", "shop", "");
    let cm_a = key("configmaps", "shop", "a");
    let ns_shop = key("namespaces", "shop", "shop");
    let rsp = |kind: Option<&str>| {
        let mut v = json!({"apiVersion": "scheduling.kubefed.io/v1alpha1", "kind": "ReplicaSchedulingPreference",
                           "metadata": {"name": "shop", "namespace": "shop"}, "spec": {"totalReplicas": 3}});
        if let Some(kind) = kind {
            v["spec"]["targetKind"] = json!(kind);
        }
        v
    };
    let rsps = |kind| ev(Source::Schedulings, Change::replaced(vec![rsp(kind)]));
    let ns = |uid: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "uid": uid}});
    let kfc = |labels: Value| json!({"metadata": {"name": "m1", "labels": labels}, "spec": {"apiEndpoint": "https://a"}});
    let listed = |source: Source, objects| ev(source, Change::replaced(objects));
    let copy = || obj("ConfigMap", "shop", "a", "1");
    let rows = [
        Row {
            structure: true,
            ..row(
                "a new type",
                vec![],
                ev(
                    Source::TypeConfigs,
                    Change::Applied(ftc("secrets", "Secret", "secrets", "")),
                ),
                vec![],
            )
        },
        Row {
            structure: true,
            ..row(
                "a cluster relabelled",
                vec![listed(Source::Clusters, vec![kfc(json!({}))])],
                ev(
                    Source::Clusters,
                    Change::Applied(kfc(json!({"region": "eu"}))),
                ),
                vec![],
            )
        },
        row(
            "a cluster as it was",
            vec![listed(Source::Clusters, vec![kfc(json!({}))])],
            ev(Source::Clusters, Change::Applied(kfc(json!({})))),
            vec![],
        ),
        Row {
            structure: true,
            ..row(
                "a cluster deleted",
                vec![listed(Source::Clusters, vec![kfc(json!({}))])],
                ev(Source::Clusters, Change::Deleted(kfc(json!({})))),
                vec![],
            )
        },
        row(
            "a new RSP: the type it targets",
            vec![],
            rsps(Some("FederatedConfigMap")),
            vec![key("configmaps", "shop", "shop")],
        ),
        row(
            "an RSP with no target: every type",
            vec![],
            rsps(None),
            vec![key("configmaps", "shop", "shop"), ns_shop.clone()],
        ),
        row(
            "an RSP deleted: the type it targeted",
            vec![rsps(Some("FederatedNamespace"))],
            ev(
                Source::Schedulings,
                Change::Deleted(rsp(Some("FederatedNamespace"))),
            ),
            vec![ns_shop.clone()],
        ),
        row(
            "an RSP retargeted: the type it targeted and the one it targets",
            vec![rsps(Some("FederatedNamespace"))],
            ev(
                Source::Schedulings,
                Change::Applied(rsp(Some("FederatedConfigMap"))),
            ),
            vec![key("configmaps", "shop", "shop"), ns_shop.clone()],
        ),
        row(
            "a version: our own write-back",
            vec![],
            ev(
                Source::Versions(false),
                Change::Applied(obj("PropagatedVersion", "shop", "v", "")),
            ),
            vec![],
        ),
        row(
            "a version given an approval (rollout approve): its owner",
            vec![listed(Source::Versions(false), vec![approved(None)])],
            ev(
                Source::Versions(false),
                Change::Applied(approved(Some("[{\"wave\":2}]"))),
            ),
            vec![key("configmaps", "shop", "a")],
        ),
        row(
            "a version with the same approvals: our own write-back",
            vec![listed(
                Source::Versions(false),
                vec![approved(Some("[{\"wave\":2}]"))],
            )],
            ev(
                Source::Versions(false),
                Change::Applied(approved(Some("[{\"wave\":2}]"))),
            ),
            vec![],
        ),
        row(
            "a namespace again: its FederatedNamespace",
            vec![
                listed(fed_ns(), vec![shop()]),
                listed(Source::Namespaces, vec![ns("1")]),
            ],
            ev(Source::Namespaces, Change::Applied(ns("2"))),
            vec![ns_shop.clone()],
        ),
        row(
            "a namespace as it was",
            vec![
                listed(fed_ns(), vec![shop()]),
                listed(Source::Namespaces, vec![ns("1")]),
            ],
            ev(Source::Namespaces, Change::replaced(vec![ns("1")])),
            vec![],
        ),
        row(
            "a federated object deleted: itself",
            vec![listed(cms(), vec![a()])],
            ev(cms(), Change::Deleted(a())),
            vec![cm_a.clone()],
        ),
        row(
            "a FederatedNamespace deleted: what was in it",
            vec![listed(cms(), vec![a()]), listed(fed_ns(), vec![shop()])],
            ev(fed_ns(), Change::replaced(vec![])),
            vec![cm_a.clone(), ns_shop.clone()],
        ),
        row(
            "a member copy deleted: its federated object",
            vec![listed(cms(), vec![a()]), listed(copies(), vec![copy()])],
            ev(copies(), Change::Deleted(copy())),
            vec![cm_a.clone()],
        ),
        row(
            "a member copy listed again as it was",
            vec![listed(cms(), vec![a()]), listed(copies(), vec![copy()])],
            listed(copies(), vec![copy()]),
            vec![],
        ),
        row(
            "a member's watch failing: every object of the type",
            vec![listed(cms(), vec![a()]), listed(copies(), vec![])],
            ev(
                copies(),
                Change::Failed {
                    not_served: false,
                    message: "refused".into(),
                },
            ),
            vec![cm_a.clone()],
        ),
    ];
    for Row {
        what,
        before,
        change,
        keys,
        structure,
    } in rows
    {
        let mut c = cache();
        for e in before {
            c.apply(e);
        }
        let Event { source, change } = change;
        let change = c.as_held(&source, change);
        let dirt = c.touched(&source, &change);
        assert_eq!(dirt.touched(), keys.into_iter().collect(), "{what}");
        assert_eq!(dirt.structure, structure, "{what}");
        assert_eq!(c.apply(Event { source, change }), dirt, "{what}: applied");
    }
}

/// A member's first list names the member (caught up once all of its
/// types have), touching nothing itself.
#[test]
fn a_members_first_list_names_it() {
    let c = cache();
    let source = Source::Member("m1".into(), "configmaps".into());
    let change = Change::replaced(vec![obj("ConfigMap", "shop", "a", "1")]);
    let dirt = c.touched(&source, &change);
    assert_eq!(dirt.listed, ["m1".to_string()].into());
    assert!(dirt.touched().is_empty());
    assert!(c.members.is_empty(), "read, not applied");
}
