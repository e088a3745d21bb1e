use super::*;
use serde_json::json;

fn policy() -> Policy {
    Policy {
        foreign: true,
        paths: Vec::new(),
    }
}

/// A member ValidatingWebhookConfiguration whose caBundle cert-manager's
/// cainjector injected, and the Deployment an HPA scales.
fn webhook_live() -> Value {
    json!({"metadata": {"name": "hook", "managedFields": [
        {"manager": "kubefedctl", "operation": "Update", "fieldsV1": {"f:webhooks": {
            "k:{\"name\":\"w.example.com\"}": {".": {}, "f:name": {}, "f:clientConfig": {"f:service": {}}}}}},
        {"manager": "cainjector", "operation": "Update", "fieldsV1": {"f:webhooks": {
            "k:{\"name\":\"w.example.com\"}": {"f:clientConfig": {"f:caBundle": {}}}}}}]},
        "webhooks": [{"name": "w.example.com", "clientConfig": {"service": {"name": "s"}, "caBundle": "Q0E="}}]})
}

#[test]
fn a_field_another_manager_injected_is_kept_when_the_template_does_not_set_it() {
    let mut desired = json!({"metadata": {"name": "hook"},
        "webhooks": [{"name": "w.example.com", "clientConfig": {"service": {"name": "s"}}}]});
    let conflicts = keep_theirs(&mut desired, &webhook_live(), &policy(), false);
    assert!(conflicts.is_empty(), "{conflicts:?}");
    assert_eq!(desired["webhooks"][0]["clientConfig"]["caBundle"], "Q0E=");
    // Off (KubeFed's behaviour): the template wins, the field goes.
    let mut plain = json!({"webhooks": [{"name": "w.example.com", "clientConfig": {}}]});
    assert!(keep_theirs(&mut plain, &webhook_live(), &Policy::default(), false).is_empty());
    assert!(
        plain["webhooks"][0]["clientConfig"]
            .get("caBundle")
            .is_none()
    );
}

#[test]
fn the_scale_subresource_owner_keeps_replicas_unless_the_template_fights_it() {
    let live = json!({"metadata": {"managedFields": [
        {"manager": "kube-controller-manager", "operation": "Update", "subresource": "scale",
         "fieldsV1": {"f:spec": {"f:replicas": {}}}},
        {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status",
         "fieldsV1": {"f:status": {"f:replicas": {}}}}]},
        "spec": {"replicas": 5}, "status": {"replicas": 5}});
    struct Case {
        template_replicas: Option<i64>,
        force: bool,
        want: i64,
        conflict: bool,
    }
    for c in [
        Case {
            template_replicas: None,
            force: false,
            want: 5,
            conflict: false,
        },
        Case {
            template_replicas: Some(5),
            force: false,
            want: 5,
            conflict: false,
        },
        Case {
            template_replicas: Some(2),
            force: false,
            want: 5,
            conflict: true,
        },
        Case {
            template_replicas: Some(2),
            force: true,
            want: 2,
            conflict: true,
        },
    ] {
        let mut desired = json!({"spec": {}});
        if let Some(r) = c.template_replicas {
            desired["spec"]["replicas"] = json!(r);
        }
        let conflicts = keep_theirs(&mut desired, &live, &policy(), c.force);
        assert_eq!(
            desired["spec"]["replicas"], c.want,
            "{:?}",
            c.template_replicas
        );
        assert_eq!(!conflicts.is_empty(), c.conflict);
        if c.conflict {
            assert_eq!(conflicts[0].path, "spec.replicas");
            assert_eq!(conflicts[0].managers, ["kube-controller-manager"]);
        }
        assert!(desired.get("status").is_none(), "status is never copied");
    }
}

#[test]
fn injected_list_elements_labels_and_set_values_stay() {
    let live = json!({"metadata": {"labels": {"app": "web", "mesh": "on"}, "finalizers": ["x/y"],
        "managedFields": [{"manager": "injector", "operation": "Update", "fieldsV1": {
            "f:metadata": {"f:labels": {"f:mesh": {}}, "f:finalizers": {"v:\"x/y\"": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"proxy\"}": {".": {}, "f:name": {}, "f:image": {}}}}}}]},
        "spec": {"containers": [{"name": "web", "image": "web:1"}, {"name": "proxy", "image": "proxy:1"}]}});
    let mut desired = json!({"metadata": {"labels": {"app": "web"}, "finalizers": []},
        "spec": {"containers": [{"name": "web", "image": "web:2"}]}});
    assert!(keep_theirs(&mut desired, &live, &policy(), false).is_empty());
    assert_eq!(
        desired["metadata"]["labels"],
        json!({"app": "web", "mesh": "on"})
    );
    assert_eq!(desired["metadata"]["finalizers"], json!(["x/y"]));
    assert_eq!(
        desired["spec"]["containers"],
        json!([{"name": "web", "image": "web:2"}, {"name": "proxy", "image": "proxy:1"}]),
        "the template's change stays; the injected container too"
    );
}

#[test]
fn listed_paths_keep_the_members_value_without_managed_fields() {
    let live = json!({"spec": {"replicas": 7},
        "webhooks": [{"name": "a", "clientConfig": {"caBundle": "QQ=="}}, {"name": "b", "clientConfig": {"caBundle": "Qg=="}}]});
    let mut desired = json!({"spec": {"replicas": 1},
        "webhooks": [{"name": "b", "clientConfig": {}}, {"name": "a", "clientConfig": {}}]});
    let p = Policy {
        foreign: false,
        paths: parse_paths("spec.replicas, webhooks[*].clientConfig.caBundle").unwrap(),
    };
    assert!(keep_theirs(&mut desired, &live, &p, false).is_empty());
    assert_eq!(desired["spec"]["replicas"], 7);
    assert_eq!(
        desired["webhooks"][0]["clientConfig"]["caBundle"], "Qg==",
        "paired by name"
    );
    assert_eq!(desired["webhooks"][1]["clientConfig"]["caBundle"], "QQ==");
}

#[test]
fn the_policy_comes_from_the_type_and_the_object_and_bad_values_are_named() {
    let on = json!({RETAIN_FOREIGN_ANNOTATION: "true", RETAIN_FIELDS_ANNOTATION: "spec.replicas"});
    let off_here = json!({"metadata": {"annotations": {RETAIN_FOREIGN_ANNOTATION: "false",
        RETAIN_FIELDS_ANNOTATION: "data.x"}}});
    let p = Policy::of(&on, &off_here).unwrap();
    assert!(!p.foreign, "the object's own word wins");
    assert_eq!(p.paths.len(), 2, "paths add up");
    assert!(Policy::of(&on, &json!({})).unwrap().foreign);
    assert!(!Policy::of(&json!({}), &json!({})).unwrap().is_active());
    let bad = json!({"metadata": {"annotations": {RETAIN_FOREIGN_ANNOTATION: "yes"}}});
    assert!(
        Policy::of(&json!({}), &bad)
            .unwrap_err()
            .contains(RETAIN_FOREIGN_ANNOTATION)
    );
    for path in ["spec..replicas", "a[0].b", "*"] {
        assert!(parse_paths(path).is_err(), "{path}");
    }
    assert_eq!(
        parse_paths("webhooks[*].clientConfig").unwrap()[0],
        [
            Step::Field("webhooks".into()),
            Step::Each,
            Step::Field("clientConfig".into())
        ]
    );
}

#[test]
fn the_federations_own_fields_are_never_kept_against_the_template() {
    let live = json!({"metadata": {"managedFields": [
        {"manager": "controller-manager", "operation": "Update", "fieldsV1": {"f:data": {"f:a": {}}}},
        {"manager": FIELD_MANAGER, "operation": "Update", "fieldsV1": {"f:data": {"f:b": {}}}}]},
        "data": {"a": "old", "b": "old"}});
    let mut desired = json!({"data": {"a": "new"}});
    assert!(keep_theirs(&mut desired, &live, &policy(), false).is_empty());
    assert_eq!(
        desired["data"],
        json!({"a": "new"}),
        "b was ours: it goes, as the template says"
    );
}
