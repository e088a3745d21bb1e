//! When a member object is ready, by the rules `kubectl rollout status`
//! and kstatus use (`sigs.k8s.io/cli-utils/pkg/kstatus/status/core.go`):
//! workloads by their observed generation and updated/available replicas,
//! Jobs by their Complete/Failed conditions, claims bound, load balancers
//! with an address, custom resources by a `Ready` condition when they have
//! one; anything else once it exists.

use serde_json::Value;

/// What a member object's status says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Not yet; why, in a few words (`0/3 available`).
    Pending(String),
    /// It will not become ready by waiting (a failed Job, a Deployment past
    /// its progress deadline).
    Failed(String),
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// The status of condition `kind`, and its reason.
fn condition<'v>(obj: &'v Value, kind: &str) -> Option<(&'v str, &'v str)> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or(""),
            )
        })
}

/// Why the controller cannot create the Pods it wants: a `ReplicaFailure`
/// condition that is True (a ReplicaSet's, or the one its Deployment copies
/// from it), as `reason: message`. A refusal by PodSecurity admission
/// (GA in 1.25) does not pass by waiting: the namespace's level or the
/// Pod template must change.
fn replica_failure(obj: &Value) -> Option<(String, bool)> {
    let c = obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "ReplicaFailure" && c["status"] == "True")?;
    let message = c["message"].as_str().unwrap_or("");
    let reason = c["reason"].as_str().unwrap_or("ReplicaFailure");
    Some((
        format!("{reason}: {message}"),
        message.contains("violates PodSecurity"),
    ))
}

/// A workload whose Pods are refused: failed when the refusal is final,
/// pending with the server's reason otherwise.
fn refused(obj: &Value, progress: String) -> Option<Readiness> {
    let (why, is_final) = replica_failure(obj)?;
    let line = format!("{progress} ({why})");
    Some(if is_final {
        Readiness::Failed(line)
    } else {
        Readiness::Pending(line)
    })
}

/// The controller has seen the latest spec.
fn observed(obj: &Value) -> bool {
    let generation = &obj["metadata"]["generation"];
    generation.is_null() || int(&obj["status"]["observedGeneration"]) >= int(generation)
}

/// The readiness of a member object of `group`/`kind`.
pub fn readiness(group: &str, kind: &str, obj: &Value) -> Readiness {
    let status = &obj["status"];
    let wanted = obj["spec"]["replicas"].as_i64().unwrap_or(1);
    match (group, kind) {
        ("apps", "Deployment") => deployment(obj, wanted),
        ("apps", "ReplicaSet") | ("", "ReplicationController") => {
            let available = int(&status["availableReplicas"]);
            if let Some(r) = refused(obj, format!("{available}/{wanted} available")) {
                r
            } else if !observed(obj) {
                Readiness::Pending("not observed yet".into())
            } else if available < wanted {
                Readiness::Pending(format!("{available}/{wanted} available"))
            } else {
                Readiness::Ready
            }
        }
        ("apps", "StatefulSet") => stateful_set(obj, wanted),
        ("apps", "DaemonSet") => daemon_set(obj),
        ("batch", "Job") => match (condition(obj, "Complete"), condition(obj, "Failed")) {
            (Some(("True", _)), _) => Readiness::Ready,
            (_, Some(("True", reason))) => Readiness::Failed(format!("failed ({reason})")),
            _ => Readiness::Pending(format!(
                "{}/{} succeeded",
                int(&status["succeeded"]),
                obj["spec"]["completions"].as_i64().unwrap_or(1)
            )),
        },
        ("", "PersistentVolumeClaim") => match status["phase"].as_str() {
            Some("Bound") => Readiness::Ready,
            phase => Readiness::Pending(format!("{} (not bound)", phase.unwrap_or("Pending"))),
        },
        ("", "Service") if obj["spec"]["type"] == "LoadBalancer" => {
            let has_address = status["loadBalancer"]["ingress"]
                .as_array()
                .is_some_and(|i| !i.is_empty());
            if has_address {
                Readiness::Ready
            } else {
                Readiness::Pending("no load balancer address yet".into())
            }
        }
        _ => match condition(obj, "Ready") {
            Some(("True", _)) | None => Readiness::Ready,
            Some((_, reason)) if !reason.is_empty() => {
                Readiness::Pending(format!("not Ready ({reason})"))
            }
            Some(_) => Readiness::Pending("not Ready".into()),
        },
    }
}

/// kstatus for a Deployment: failed past its progress deadline or when
/// the member refuses its Pods, else every replica updated and available
/// and no old one left.
fn deployment(obj: &Value, wanted: i64) -> Readiness {
    let status = &obj["status"];
    if condition(obj, "Progressing") == Some(("False", "ProgressDeadlineExceeded")) {
        return Readiness::Failed(format!(
            "{}/{wanted} available (ProgressDeadlineExceeded)",
            int(&status["availableReplicas"])
        ));
    }
    let available_now = format!("{}/{wanted} available", int(&status["availableReplicas"]));
    if let Some(r) = refused(obj, available_now) {
        return r;
    }
    if !observed(obj) {
        return Readiness::Pending("rollout not observed yet".into());
    }
    let (updated, available) = (
        int(&status["updatedReplicas"]),
        int(&status["availableReplicas"]),
    );
    if updated < wanted {
        return Readiness::Pending(format!("{updated}/{wanted} updated"));
    }
    if int(&status["replicas"]) > updated {
        return Readiness::Pending(format!(
            "{} old replicas pending termination",
            int(&status["replicas"]) - updated
        ));
    }
    if available < wanted {
        return Readiness::Pending(format!("{available}/{wanted} available"));
    }
    Readiness::Ready
}

/// kstatus for a StatefulSet: every replica ready, on the update revision.
fn stateful_set(obj: &Value, wanted: i64) -> Readiness {
    let status = &obj["status"];
    let ready = int(&status["readyReplicas"]);
    if !observed(obj) {
        Readiness::Pending("rollout not observed yet".into())
    } else if ready < wanted {
        Readiness::Pending(format!("{ready}/{wanted} ready"))
    } else if status["updateRevision"] != status["currentRevision"]
        && !status["updateRevision"].is_null()
    {
        Readiness::Pending(format!(
            "{}/{wanted} updated",
            int(&status["updatedReplicas"])
        ))
    } else {
        Readiness::Ready
    }
}

/// kstatus for a DaemonSet: every scheduled pod updated and available.
fn daemon_set(obj: &Value) -> Readiness {
    let status = &obj["status"];
    let desired = int(&status["desiredNumberScheduled"]);
    let (updated, available) = (
        int(&status["updatedNumberScheduled"]),
        int(&status["numberAvailable"]),
    );
    if !observed(obj) {
        Readiness::Pending("rollout not observed yet".into())
    } else if updated < desired {
        Readiness::Pending(format!("{updated}/{desired} updated"))
    } else if available < desired {
        Readiness::Pending(format!("{available}/{desired} available"))
    } else {
        Readiness::Ready
    }
}

/// kubectl's READY column for a workload from its `.status` alone (what
/// KubeFed collects as `remoteStatus`): `ready/desired` replicas for
/// Deployments, ReplicaSets and StatefulSets, `ready/desired` pods for
/// DaemonSets; None for other kinds.
pub fn ready_column(kind: &str, status: &Value) -> Option<String> {
    let count = |field: &str| int(&status[field]);
    let (ready, of) = match kind {
        "Deployment" | "ReplicaSet" | "StatefulSet" => (count("readyReplicas"), count("replicas")),
        "DaemonSet" => (count("numberReady"), count("desiredNumberScheduled")),
        _ => return None,
    };
    Some(format!("{ready}/{of}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_columns_read_like_kubectl() {
        let cases = [
            (
                "Deployment",
                json!({"replicas": 3, "readyReplicas": 2}),
                Some("2/3"),
            ),
            ("ReplicaSet", json!({"replicas": 2}), Some("0/2")),
            (
                "StatefulSet",
                json!({"replicas": 1, "readyReplicas": 1}),
                Some("1/1"),
            ),
            (
                "DaemonSet",
                json!({"desiredNumberScheduled": 4, "numberReady": 4}),
                Some("4/4"),
            ),
            ("Job", json!({"succeeded": 1}), None),
            ("ConfigMap", json!({}), None),
        ];
        for (kind, status, want) in cases {
            assert_eq!(ready_column(kind, &status).as_deref(), want, "{kind}");
        }
    }
    use serde_json::json;

    fn deployment(generation: i64, status: Value) -> Value {
        json!({"metadata": {"generation": generation}, "spec": {"replicas": 3}, "status": status})
    }

    #[test]
    fn workloads_follow_rollout_status() {
        let p = |s: &str| Readiness::Pending(s.into());
        let cases = [
            (
                "deployment done",
                "apps",
                "Deployment",
                deployment(
                    2,
                    json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}),
                ),
                Readiness::Ready,
            ),
            (
                "deployment not observed",
                "apps",
                "Deployment",
                deployment(
                    3,
                    json!({"observedGeneration": 2, "updatedReplicas": 3, "availableReplicas": 3}),
                ),
                p("rollout not observed yet"),
            ),
            (
                "deployment rolling",
                "apps",
                "Deployment",
                deployment(
                    2,
                    json!({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 2, "availableReplicas": 3}),
                ),
                p("2/3 updated"),
            ),
            (
                "deployment old pods",
                "apps",
                "Deployment",
                deployment(
                    2,
                    json!({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 3, "availableReplicas": 3}),
                ),
                p("1 old replicas pending termination"),
            ),
            (
                "deployment unavailable",
                "apps",
                "Deployment",
                deployment(
                    2,
                    json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3}),
                ),
                p("0/3 available"),
            ),
            (
                "deployment past its deadline",
                "apps",
                "Deployment",
                deployment(
                    2,
                    json!({"observedGeneration": 2, "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}),
                ),
                Readiness::Failed("0/3 available (ProgressDeadlineExceeded)".into()),
            ),
            (
                "zero replicas",
                "apps",
                "Deployment",
                json!({"metadata": {"generation": 1}, "spec": {"replicas": 0}, "status": {"observedGeneration": 1}}),
                Readiness::Ready,
            ),
            (
                "replicaset",
                "apps",
                "ReplicaSet",
                json!({"spec": {"replicas": 2}, "status": {"availableReplicas": 1}}),
                p("1/2 available"),
            ),
            (
                "statefulset",
                "apps",
                "StatefulSet",
                json!({"metadata": {"generation": 1}, "spec": {"replicas": 2}, "status": {"observedGeneration": 1, "readyReplicas": 2, "currentRevision": "a", "updateRevision": "b", "updatedReplicas": 1}}),
                p("1/2 updated"),
            ),
            (
                "daemonset",
                "apps",
                "DaemonSet",
                json!({"status": {"desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2}}),
                Readiness::Ready,
            ),
            (
                "job running",
                "batch",
                "Job",
                json!({"spec": {"completions": 2}, "status": {"succeeded": 1}}),
                p("1/2 succeeded"),
            ),
            (
                "job complete",
                "batch",
                "Job",
                json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}),
                Readiness::Ready,
            ),
            (
                "job failed",
                "batch",
                "Job",
                json!({"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}}),
                Readiness::Failed("failed (BackoffLimitExceeded)".into()),
            ),
            (
                "claim bound",
                "",
                "PersistentVolumeClaim",
                json!({"status": {"phase": "Bound"}}),
                Readiness::Ready,
            ),
            (
                "claim pending",
                "",
                "PersistentVolumeClaim",
                json!({"status": {"phase": "Pending"}}),
                p("Pending (not bound)"),
            ),
            (
                "load balancer waiting",
                "",
                "Service",
                json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {}}}),
                p("no load balancer address yet"),
            ),
            (
                "load balancer up",
                "",
                "Service",
                json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}),
                Readiness::Ready,
            ),
            (
                "cluster IP service",
                "",
                "Service",
                json!({"spec": {"type": "ClusterIP"}}),
                Readiness::Ready,
            ),
            (
                "configmap",
                "",
                "ConfigMap",
                json!({"data": {}}),
                Readiness::Ready,
            ),
            (
                "custom resource not ready",
                "example.com",
                "Gizmo",
                json!({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Provisioning"}]}}),
                p("not Ready (Provisioning)"),
            ),
            (
                "custom resource ready",
                "example.com",
                "Gizmo",
                json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
                Readiness::Ready,
            ),
        ];
        for (name, group, kind, obj, want) in cases {
            assert_eq!(readiness(group, kind, &obj), want, "{name}");
        }
    }

    #[test]
    fn refused_pods_are_named_with_the_servers_reason() {
        let deployment = |message: &str| {
            json!({"metadata": {"generation": 1}, "spec": {"replicas": 2},
                   "status": {"observedGeneration": 1, "availableReplicas": 0,
                              "conditions": [{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": message}]}})
        };
        let psa = "pods \"web-1\" is forbidden: violates PodSecurity \"restricted:latest\": runAsNonRoot != true";
        assert_eq!(
            readiness("apps", "Deployment", &deployment(psa)),
            Readiness::Failed(format!("0/2 available (FailedCreate: {psa})"))
        );
        let quota = "pods \"web-1\" is forbidden: exceeded quota: compute";
        assert_eq!(
            readiness("apps", "ReplicaSet", &deployment(quota)),
            Readiness::Pending(format!("0/2 available (FailedCreate: {quota})"))
        );
        let mut resolved = deployment(psa);
        resolved["status"]["conditions"][0]["status"] = json!("False");
        assert_eq!(
            readiness("apps", "ReplicaSet", &resolved),
            Readiness::Pending("0/2 available".into())
        );
    }
}
