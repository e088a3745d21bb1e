//! Health as GitOps tools read it: the Argo CD health check shipped in
//! `deploy/gitops/argocd-health.lua`, run (Lua 5.1 with Argo CD's default
//! libraries, base and `table`) against federated objects as the host
//! holds them after real runs: propagated, refused by a member, changed
//! but not yet propagated, and with `--wait-ready`'s `Ready` condition.

use crate::fixtures::*;
use mlua::{Lua, LuaOptions, LuaSerdeExt, SerializeOptions, StdLib};
use serde_json::{Value, json};
use testenv::TestEnv;

const SCRIPT: &str = include_str!("../../deploy/gitops/argocd-health.lua");

/// What Argo CD's health check says of `obj`: status and message.
fn argo_health(obj: &Value) -> (String, String) {
    let lua = Lua::new_with(StdLib::TABLE, LuaOptions::default()).unwrap();
    let options = SerializeOptions::new()
        .serialize_none_to_null(false)
        .serialize_unit_to_null(false);
    let value = lua.to_value_with(obj, options).unwrap();
    lua.globals().set("obj", value).unwrap();
    let hs: mlua::Table = lua.load(SCRIPT).eval().unwrap();
    (hs.get("status").unwrap(), hs.get("message").unwrap())
}

/// The shipped argocd-cm snippet holds the script as the file has it.
#[test]
fn the_argocd_cm_snippet_holds_the_health_script() {
    let text = std::fs::read_to_string(root().join("deploy/gitops/argocd-cm.yaml")).unwrap();
    let cm = &yaml_docs(&text)[0];
    let customizations = cm["data"]["resource.customizations"].as_str().unwrap();
    let inner = &yaml_docs(customizations)[0];
    assert_eq!(inner["types.kubefed.io/*"]["health.lua"], SCRIPT);
}

fn condition(obj: &Value, kind: &str) -> Value {
    obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind).cloned())
        .unwrap_or(Value::Null)
}

#[test]
fn argo_cd_reads_propagated_refused_and_pending_objects() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "gitops-p", &["configmaps"]);
    let (ns, m2) = (f.ns, f.cluster("m2"));
    let path = |name: &str| {
        format!(
            "/apis/{}/v1beta1/namespaces/{ns}/federatedconfigmaps/{name}",
            f.group
        )
    };
    let host = |name: &str| get(env, "host", &path(name)).unwrap();
    let every = json!({"clusterSelector": {}});
    f.create(
        env,
        "FederatedConfigMap",
        "good",
        json!({"template": {"data": {"k": "v"}}, "placement": every}),
    );
    // m2's copy is one no API server takes: ConfigMap data are strings.
    f.create(
        env,
        "FederatedConfigMap",
        "refused",
        json!({"template": {"data": {"k": "v"}}, "placement": every,
        "overrides": [{"clusterName": m2, "clusterOverrides": [{"path": "/data/k", "value": 1}]}]}),
    );

    let (status, message) = argo_health(&host("good"));
    assert_eq!(
        (status.as_str(), message.as_str()),
        ("Progressing", "Not propagated yet")
    );

    partial(f.reconcile(&[]));
    let good = host("good");
    assert_eq!(condition(&good, "Propagation")["status"], "True", "{good}");
    let (status, message) = argo_health(&good);
    assert_eq!(status, "Healthy", "{message}");
    assert_eq!(message, "Propagated to 2 member cluster(s)");

    let refused = host("refused");
    assert_eq!(
        condition(&refused, "Propagation")["reason"],
        "CheckClusters"
    );
    let (status, message) = argo_health(&refused);
    assert_eq!(status, "Degraded", "{message}");
    assert_eq!(
        message,
        format!("Propagation failed (CheckClusters): {m2}: CreationFailed")
    );

    // A new spec the host holds but no run has propagated yet.
    patch(
        env,
        "host",
        &path("good"),
        json!({"spec": {"template": {"data": {"k": "w"}}}}),
    );
    let (status, message) = argo_health(&host("good"));
    assert_eq!(status, "Progressing");
    assert_eq!(message, "Generation 2 not propagated yet (propagated: 1)");
    partial(f.reconcile(&[]));
    assert_eq!(argo_health(&host("good")).0, "Healthy");

    // Unplaced from m2: its copy is deleted, and Healthy again once gone.
    patch(
        env,
        "host",
        &path("good"),
        json!({"spec": {"placement": {"clusters": [{"name": f.cluster("m1")}]}}}),
    );
    partial(f.reconcile(&[]));
    let (status, message) = argo_health(&host("good"));
    assert_eq!(status, "Progressing");
    assert_eq!(
        message,
        format!("Waiting for member copies to go: {m2}: WaitingForRemoval")
    );
    partial(f.reconcile(&[]));
    let (status, message) = argo_health(&host("good"));
    assert_eq!(status, "Healthy");
    assert_eq!(message, "Propagated to 1 member cluster(s)");
}

/// A run that propagated some objects and failed others (exit 3).
fn partial(run: Run) {
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
}

/// A run whose --wait-ready ran out of time (exit 5).
fn not_ready(run: Run) {
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
}

#[test]
fn argo_cd_reads_the_ready_condition_wait_ready_records() {
    let env = TestEnv::shared();
    let f = Federation::new(env, "gitops-r", &["deployments.apps"]);
    let ns = f.ns;
    let fed_path = format!(
        "/apis/{}/v1beta1/namespaces/{ns}/federateddeployments/web",
        f.group
    );
    let host = || get(env, "host", &fed_path).unwrap();
    let deployment = format!("/apis/apps/v1/namespaces/{ns}/deployments/web");
    f.create_deployment(env, "web");

    // No deployment controller runs here: nothing becomes available.
    not_ready(f.reconcile(&["--wait-ready=4s"]));
    let web = host();
    assert_eq!(condition(&web, "Propagation")["status"], "True");
    let ready = condition(&web, "Ready");
    assert_eq!(
        (&ready["status"], &ready["reason"]),
        (&json!("False"), &json!("MembersNotReady")),
        "{web}"
    );
    let (status, message) = argo_health(&web);
    assert_eq!(status, "Progressing");
    assert_eq!(message, "Member copies not ready yet (MembersNotReady)");

    // The test is the deployment controller: m1's rollout is past its
    // deadline, which waiting cannot mend.
    let rollout = |member: &str, status: Value| {
        let generation = get(env, member, &deployment).unwrap()["metadata"]["generation"].clone();
        let mut status = status;
        status["observedGeneration"] = generation;
        patch(
            env,
            member,
            &format!("{deployment}/status"),
            json!({"status": status}),
        );
    };
    let available = json!({"replicas": 1, "updatedReplicas": 1, "readyReplicas": 1,
        "availableReplicas": 1, "unavailableReplicas": null,
        "conditions": [{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]});
    rollout("member2", available.clone());
    rollout(
        "member1",
        json!({"replicas": 1, "updatedReplicas": 1, "unavailableReplicas": 1,
        "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}),
    );
    not_ready(f.reconcile(&["--wait-ready=30s", "--all"]));
    let (status, message) = argo_health(&host());
    assert_eq!(status, "Degraded", "{message}");
    assert!(message.contains("MembersFailed"), "{message}");

    // Both available: ready, and a second check writes nothing new.
    rollout("member1", available);
    f.reconcile(&["--wait-ready=30s", "--all"]).ok();
    let web = host();
    let ready = condition(&web, "Ready");
    assert_eq!(
        (&ready["status"], &ready["reason"]),
        (&json!("True"), &json!("MembersReady"))
    );
    let (status, message) = argo_health(&web);
    assert_eq!(status, "Healthy");
    assert_eq!(message, "Propagated to and ready in 2 member cluster(s)");
    let version = web["metadata"]["resourceVersion"].clone();
    f.reconcile(&["--wait-ready=30s", "--all"]).ok();
    assert_eq!(
        host()["metadata"]["resourceVersion"],
        version,
        "nothing new: nothing written"
    );

    // A new template propagated without --wait-ready: readiness unknown.
    patch(
        env,
        "host",
        &fed_path,
        json!({"spec": {"template": {"spec": {"replicas": 2}}}}),
    );
    f.reconcile(&[]).ok();
    let web = host();
    assert_eq!(condition(&web, "Ready")["status"], "Unknown");
    assert_eq!(condition(&web, "Ready")["reason"], "NotChecked");
    let (status, message) = argo_health(&web);
    assert_eq!(status, "Progressing");
    assert_eq!(message, "Member copies not ready yet (NotChecked)");
}
