//! The Events of a run ([`super::record`]) and their correlation
//! ([`super::correlator`]), against upstream's cases.

use super::correlator::*;
use super::record::*;
use crate::cluster::health::Health;
use crate::propagation::action::{Action, ClusterStatus};
use crate::propagation::desired::TemplateWarning;
use crate::propagation::record::Done;
use crate::propagation::record::{Effect, MemberResult};
use serde_json::{Value, json};
#[allow(unused_imports)]
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

fn fed() -> Value {
    json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedConfigMap",
           "metadata": {"name": "web", "namespace": "shop", "uid": "u-1", "resourceVersion": "42"}})
}

fn ok(effect: Effect) -> MemberResult {
    Ok(Done {
        effect,
        version: None,
    })
}

fn events_of(
    action: &Action,
    result: &MemberResult,
    warnings: &[TemplateWarning],
) -> Vec<(EventType, String, String)> {
    let fed = fed();
    let run = ObjectRun {
        fed: &fed,
        target_kind: "ConfigMap",
        deleting: false,
        orphaning: false,
        attempts: vec![Attempt {
            cluster: "m1",
            action,
            target_name: qualified_name("shop", "web"),
            result,
        }],
        pending: &[],
        template_warnings: warnings,
    };
    object_events(&run)
        .into_iter()
        .map(|e| {
            assert_eq!(e.component, "federatedconfigmap-controller");
            assert_eq!(e.involved, InvolvedObject::of(&fed));
            (e.event_type, e.reason, e.message)
        })
        .collect()
}

type Case<'a> = (
    &'a str,
    &'a Action,
    MemberResult,
    Vec<(EventType, &'a str, String)>,
);

const N: EventType = EventType::Normal;
const W: EventType = EventType::Warning;

#[test]
fn member_requests_give_upstreams_reasons_and_messages() {
    let create = Action::Create(Arc::new(json!({})));
    let update = Action::Update {
        object: json!({}),
        adopt: false,
    };
    let delete = Action::Delete { options: None };
    let unlabel = Action::RemoveManagedLabel;
    let creating = r#"Creating ConfigMap "shop/web" in cluster "m1""#;
    let updating = r#"Updating ConfigMap "shop/web" in cluster "m1""#;
    let failed = |s: ClusterStatus, m: &str| -> MemberResult { Err((s, m.to_string())) };
    let cases: Vec<Case> = vec![
        ("created", &create, ok(Effect::Created), vec![(N, "CreateInCluster", creating.into())]),
        ("create failed", &create, failed(ClusterStatus::CreationFailed, "boom"), vec![
            (N, "CreateInCluster", creating.into()),
            (W, "CreateInClusterFailed", r#"Failed to create ConfigMap "shop/web" in cluster "m1": boom"#.into()),
        ]),
        ("adopted after 409", &create, ok(Effect::Updated), vec![
            (N, "CreateInCluster", creating.into()),
            (W, "CreateInClusterFailed", format!(r#"Failed to create ConfigMap "shop/web" in cluster "m1": {ADOPTION}"#)),
            (N, "UpdateInCluster", updating.into()),
        ]),
        ("adoption disabled", &create, failed(ClusterStatus::AlreadyExists, "x"), vec![
            (N, "CreateInCluster", creating.into()),
            (W, "CreateInClusterFailed", r#"Failed to create ConfigMap "shop/web" in cluster "m1": Resource pre-exist in cluster"#.into()),
        ]),
        ("managed=false met by a create", &create, failed(ClusterStatus::ManagedLabelFalse, "x"), vec![
            (N, "CreateInCluster", creating.into()),
            (W, "CreateInClusterFailed", format!(r#"Failed to create ConfigMap "shop/web" in cluster "m1": {ADOPTION}"#)),
            (W, "UpdateInClusterFailed", format!(r#"Failed to update ConfigMap "shop/web" in cluster "m1": {UNMANAGED}"#)),
        ]),
        ("adoption read failed", &create, failed(ClusterStatus::RetrievalFailed, "gone"), vec![
            (N, "CreateInCluster", creating.into()),
            (W, "CreateInClusterFailed", r#"Failed to create ConfigMap "shop/web" in cluster "m1": failed to retrieve object potentially requiring adoption: gone"#.into()),
        ]),
        ("updated", &update, ok(Effect::Updated), vec![(N, "UpdateInCluster", updating.into())]),
        ("update failed", &update, failed(ClusterStatus::UpdateFailed, "no"), vec![
            (N, "UpdateInCluster", updating.into()),
            (W, "UpdateInClusterFailed", r#"Failed to update ConfigMap "shop/web" in cluster "m1": no"#.into()),
        ]),
        ("deleted (unplaced)", &delete, ok(Effect::Deleted { gone: true }), vec![
            (N, "DeleteInCluster", r#"Deleting ConfigMap "shop/web" in cluster "m1""#.into()),
        ]),
        ("delete failed", &delete, failed(ClusterStatus::DeletionFailed, "no"), vec![
            (N, "DeleteInCluster", r#"Deleting ConfigMap "shop/web" in cluster "m1""#.into()),
            (W, "DeleteInClusterFailed", r#"Failed to delete ConfigMap "shop/web" in cluster "m1": no"#.into()),
        ]),
        ("unlabelled", &unlabel, ok(Effect::Unlabelled), vec![
            (N, "RemoveManagedLabelFromInCluster", r#"Removing managed label from ConfigMap "shop/web" in cluster "m1""#.into()),
        ]),
        ("unlabel failed", &unlabel, failed(ClusterStatus::LabelRemovalFailed, "no"), vec![
            (N, "RemoveManagedLabelFromInCluster", r#"Removing managed label from ConfigMap "shop/web" in cluster "m1""#.into()),
            (W, "RemoveManagedLabelFromInClusterFailed", r#"Failed to remove managed label from ConfigMap "shop/web" in cluster "m1": no"#.into()),
        ]),
        ("await removal: none", &Action::AwaitRemoval, ok(Effect::Deleted { gone: false }), vec![]),
    ];
    for (name, action, result, want) in cases {
        let want: Vec<_> = want
            .into_iter()
            .map(|(t, r, m)| (t, r.to_string(), m))
            .collect();
        assert_eq!(events_of(action, &result, &[]), want, "{name}");
    }
}

#[test]
fn template_metadata_warns_on_each_create_or_update() {
    let create = Action::Create(Arc::new(json!({})));
    let warnings = [
        TemplateWarning::AnnotationsNotSupported,
        TemplateWarning::FinalizersNotSupported,
    ];
    let got = events_of(&create, &ok(Effect::Created), &warnings);
    let reasons: Vec<&str> = got.iter().map(|(_, r, _)| r.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "CreateInCluster",
            "AnnotationsNotSupported",
            "FinalizersNotSupported"
        ]
    );
    assert_eq!(got[1].0, W);
    assert!(
        got[1]
            .2
            .starts_with("metadata.annotations cannot be set via template")
    );
    let delete = Action::Delete { options: None };
    let got = events_of(&delete, &ok(Effect::Deleted { gone: true }), &warnings);
    assert_eq!(got.len(), 1, "no template is rendered for a delete");
}

#[test]
fn one_operation_event_per_object_and_run_names_its_members() {
    let fed = fed();
    let create = Action::Create(Arc::new(json!({})));
    let (done, boom) = (
        ok(Effect::Created),
        Err((ClusterStatus::CreationFailed, "boom".into())),
    );
    let warnings = [TemplateWarning::AnnotationsNotSupported];
    let attempt = |cluster, result| Attempt {
        cluster,
        action: &create,
        target_name: qualified_name("shop", "web"),
        result,
    };
    let run = ObjectRun {
        fed: &fed,
        target_kind: "ConfigMap",
        deleting: false,
        orphaning: false,
        attempts: vec![
            attempt("m3", &done),
            attempt("m1", &done),
            attempt("m2", &boom),
        ],
        pending: &[],
        template_warnings: &warnings,
    };
    let got: Vec<(EventType, String, String)> = object_events(&run)
        .into_iter()
        .map(|e| (e.event_type, e.reason, e.message))
        .collect();
    assert_eq!(
        got,
        [
            (
                N,
                "CreateInCluster".into(),
                r#"Creating ConfigMap "shop/web" in clusters "m1", "m2", "m3""#.into()
            ),
            (
                W,
                "AnnotationsNotSupported".into(),
                TemplateWarning::AnnotationsNotSupported
                    .message()
                    .to_string()
            ),
            (
                W,
                "CreateInClusterFailed".into(),
                r#"Failed to create ConfigMap "shop/web" in cluster "m2": boom"#.into()
            ),
        ]
    );
}

#[test]
fn a_deletion_records_only_the_clusters_it_waits_for() {
    let fed = fed();
    let delete = Action::Delete { options: None };
    let done = ok(Effect::Deleted { gone: false });
    let pending = ["m2".to_string(), "m1".to_string()];
    let cases = [
        (
            "waiting",
            false,
            &pending[..],
            vec!["Waiting for managed resources to be removed from the following clusters: m1, m2"],
        ),
        ("all gone", false, &[][..], vec![]),
        ("orphaning", true, &pending[..], vec![]),
    ];
    for (name, orphaning, pending, want) in cases {
        let run = ObjectRun {
            fed: &fed,
            target_kind: "ConfigMap",
            deleting: true,
            orphaning,
            attempts: vec![Attempt {
                cluster: "m1",
                action: &delete,
                target_name: "shop/web".into(),
                result: &done,
            }],
            pending,
            template_warnings: &[],
        };
        let got: Vec<String> = object_events(&run)
            .into_iter()
            .map(|e| {
                assert_eq!(e.reason, "WaitForRemovalInCluster");
                assert_eq!(e.event_type, N);
                e.message
            })
            .collect();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn names_and_references_as_client_go() {
    assert_eq!(go_quote("a\"b\\c\n"), r#""a\"b\\c\n""#);
    assert_eq!(qualified_name("", "ns1"), "ns1");
    assert_eq!(title("remove managed label from"), "RemoveManagedLabelFrom");
    assert_eq!(
        sync_component("FederatedDeployment"),
        "federateddeployment-controller"
    );
    let cluster = json!({"apiVersion": "core.kubefed.io/v1beta1", "kind": "KubeFedCluster",
                         "metadata": {"name": "m1", "namespace": "kube-federation-system", "uid": "u"}});
    let r = InvolvedObject::of(&cluster);
    assert_eq!(r.event_namespace(), "kube-federation-system");
    assert_eq!(
        r.to_json(),
        json!({"kind": "KubeFedCluster", "namespace": "kube-federation-system",
        "name": "m1", "uid": "u", "apiVersion": "core.kubefed.io/v1beta1"})
    );
    let ns =
        InvolvedObject::of(&json!({"kind": "FederatedClusterThing", "metadata": {"name": "x"}}));
    assert_eq!(
        ns.event_namespace(),
        "default",
        "cluster-scoped: default, as client-go"
    );
}

#[test]
fn cluster_probes_record_upstreams_warnings() {
    let cluster = json!({"kind": "KubeFedCluster", "metadata": {"name": "m1", "namespace": "f"}});
    let cases = [
        (
            Health::Ready {
                version: "v1".into(),
            },
            None,
        ),
        (
            Health::NotReady {
                message: "x".into(),
            },
            None,
        ),
        (
            Health::Offline {
                message: "refused".into(),
            },
            Some((
                "RetrievingClusterHealthFailed",
                "Failed to retrieve health of the cluster: refused",
            )),
        ),
        (
            Health::ConfigMalformed {
                message: "no secret".into(),
            },
            Some((
                "MalformedClusterConfig",
                "The configuration for this cluster may be malformed: no secret",
            )),
        ),
    ];
    for (health, want) in cases {
        let got = cluster_event(&cluster, &health);
        assert_eq!(
            got.as_ref()
                .map(|e| (e.reason.as_str(), e.message.as_str())),
            want,
            "{health:?}"
        );
        if let Some(e) = got {
            assert_eq!(e.event_type, W);
            assert_eq!(e.component, CLUSTER_COMPONENT);
        }
    }
}

fn ev(reason: &str, message: &str) -> Event {
    Event {
        involved: InvolvedObject::of(&fed()),
        event_type: N,
        reason: reason.into(),
        message: message.into(),
        component: "federatedconfigmap-controller".into(),
    }
}

const SEC: i64 = 1_000_000_000;
const T0: i64 = 1_700_000_000 * SEC;

#[test]
fn the_same_event_bumps_count_with_a_patch() {
    let mut c = Correlator::new();
    let first = c.correlate(&ev("CreateInCluster", "a"), T0).unwrap();
    let Write::Create { namespace, body } = &first.write else {
        panic!("first is a create: {first:?}")
    };
    assert_eq!(namespace, "shop");
    assert_eq!(body["metadata"]["name"], format!("web.{:x}", T0));
    assert_eq!(body["count"], 1);
    assert_eq!(body["firstTimestamp"], "2023-11-14T22:13:20Z");
    assert_eq!(
        body["source"],
        json!({"component": "federatedconfigmap-controller"})
    );
    assert_eq!(body["involvedObject"]["resourceVersion"], "42");
    let second = c
        .correlate(&ev("CreateInCluster", "a"), T0 + 5 * SEC)
        .unwrap();
    assert_eq!(second.key, first.key);
    let Write::Patch {
        name, patch, body, ..
    } = &second.write
    else {
        panic!("same event: a patch: {second:?}")
    };
    assert_eq!(name, &format!("web.{:x}", T0));
    assert_eq!(
        patch,
        &json!({"count": 2, "lastTimestamp": "2023-11-14T22:13:25Z", "message": "a"})
    );
    assert_eq!(
        body["firstTimestamp"], "2023-11-14T22:13:20Z",
        "the fallback keeps the first time"
    );
    // Another message, type or reason is another Event.
    for other in [
        ev("CreateInCluster", "b"),
        ev("UpdateInCluster", "a"),
        Event {
            event_type: W,
            ..ev("CreateInCluster", "a")
        },
    ] {
        assert!(
            matches!(
                c.correlate(&other, T0 + 6 * SEC).unwrap().write,
                Write::Create { .. }
            ),
            "{other:?}"
        );
    }
    // The server's answer names the Event (e.g. created again after a 404).
    c.written(&first.key, &json!({"metadata": {"name": "web.new"}, "firstTimestamp": "2023-11-14T22:13:30Z", "count": 1}));
    let third = c
        .correlate(&ev("CreateInCluster", "a"), T0 + 7 * SEC)
        .unwrap();
    assert!(
        matches!(&third.write, Write::Patch { name, patch, .. } if name == "web.new" && patch["count"] == 2),
        "{third:?}"
    );
}

#[test]
fn names_never_repeat_within_one_nanosecond() {
    let mut c = Correlator::new();
    let a = c.correlate(&ev("R", "a"), T0).unwrap();
    let b = c.correlate(&ev("R", "b"), T0).unwrap();
    let name = |w: &Correlated| match &w.write {
        Write::Create { body, .. } => body["metadata"]["name"].as_str().unwrap().to_string(),
        other => panic!("{other:?}"),
    };
    assert_ne!(name(&a), name(&b));
}

#[test]
fn ten_messages_of_one_reason_are_combined() {
    let mut c = Correlator::new();
    let mut writes = Vec::new();
    for i in 0..12 {
        writes.push(
            c.correlate(&ev("CreateInCluster", &format!("m{i}")), T0 + i * SEC)
                .unwrap(),
        );
    }
    for w in &writes[..9] {
        assert!(
            matches!(&w.write, Write::Create { body, .. } if !body["message"].as_str().unwrap().starts_with(COMBINED_PREFIX))
        );
    }
    let Write::Create { body, .. } = &writes[9].write else {
        panic!()
    };
    assert_eq!(body["message"], format!("{COMBINED_PREFIX}m9"));
    for (i, w) in writes[10..].iter().enumerate() {
        let Write::Patch { patch, .. } = &w.write else {
            panic!("{w:?}")
        };
        assert_eq!(patch["count"], i + 2);
        assert_eq!(patch["message"], format!("{COMBINED_PREFIX}m{}", i + 10));
    }
    // Ten minutes later the record starts over.
    let later = c
        .correlate(&ev("CreateInCluster", "m99"), T0 + 700 * SEC)
        .unwrap();
    assert!(matches!(&later.write, Write::Create { body, .. } if body["message"] == "m99"));
}

#[test]
fn the_spam_filter_lets_25_through_then_one_per_five_minutes() {
    let mut c = Correlator::new();
    let through = (0..30)
        .filter(|i| c.correlate(&ev("R", "same"), T0 + i).is_some())
        .count();
    assert_eq!(through, 25);
    assert!(c.correlate(&ev("R", "same"), T0 + 100 * SEC).is_none());
    let after = c.correlate(&ev("R", "same"), T0 + 301 * SEC).unwrap();
    // Filtered events were still counted, as client-go's cache counts them.
    assert!(
        matches!(&after.write, Write::Patch { patch, .. } if patch["count"] == 32),
        "{after:?}"
    );
}
