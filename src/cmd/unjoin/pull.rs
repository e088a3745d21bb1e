//! What unjoin removes of a pull member (`join --mode pull`): in the
//! member its agent (Deployment, host Secret, account and RBAC), on the
//! host the agent's roles and bindings and its report namespace (its
//! account, Role and reports go with it). Which objects those are is
//! `core::cluster::pull::removal`'s, for both scopes.

use super::UnjoinOptions;
use crate::apply::{ObjectRef, resource_of};
use crate::clients::host::Host;
use crate::core::cluster::pull::{self, AGENT, HOST_SECRET};
use anyhow::Result;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use std::time::Duration;

/// How long unjoin waits for the agent's pods to go.
const AGENT_STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// Stops the agent first (with --dry-run, says it would): its Deployment
/// and pods gone before its identity goes. How many were deleted (0 or
/// 1); a failure stops unjoin, unless --force.
pub(super) async fn stop_agent(
    o: &UnjoinOptions,
    client: &kube::Client,
    ns: &str,
) -> Result<usize> {
    let label = o.cluster_name.as_str();
    let deployment = ObjectRef::new(label, client, resource_of::<Deployment>(), Some(ns), AGENT);
    if o.dry_run.mode().is_dry_run() {
        if deployment.get().await?.is_some() {
            println!("{} would be deleted ({label})", deployment.short());
        }
        return Ok(0);
    }
    match crate::pull_member::stop_agent(&deployment, AGENT_STOP_TIMEOUT).await {
        Ok(stopped) => {
            if stopped {
                println!("{} deleted ({label})", deployment.short());
            }
            Ok(usize::from(stopped))
        }
        Err(e) if o.force => {
            tracing::warn!("{}", crate::error::one_line(&e));
            Ok(0)
        }
        Err(e) => Err(e.context(format!(
            "cannot stop the agent in cluster {label:?}; nothing else was removed (use --force to remove the host records anyway)"
        ))),
    }
}

/// The agent's other objects in the member, and the member's federation
/// namespace (deleted only when join made it and it is empty).
pub(super) fn member_objects(
    o: &UnjoinOptions,
    client: &kube::Client,
    ns: &str,
) -> (Vec<ObjectRef>, ObjectRef) {
    let label = o.cluster_name.as_str();
    let (_, member) = pull::removal(&o.cluster_name, ns);
    let objects = (member.iter())
        .filter(|obj| obj["kind"] != "Deployment")
        .map(|obj| crate::pull_member::target(label, client, obj).expect("a kind join writes"))
        .collect();
    let namespace = ObjectRef::new(label, client, resource_of::<Namespace>(), None, ns);
    (objects, namespace)
}

/// The agent's host objects, its report namespace last.
pub(super) fn host_objects(host: &Host, cluster: &str) -> Vec<ObjectRef> {
    let (objects, _) = pull::removal(cluster, &host.namespace);
    (objects.iter())
        .map(|obj| {
            crate::pull_member::target("host", &host.client, obj).expect("a kind join writes")
        })
        .collect()
}

/// What `--force` leaves in a member it cannot reach.
pub(super) fn left_behind(ns: &str) -> String {
    let names = pull::member_names(ns);
    format!(
        "the agent (deployment {ns}/{AGENT}, secret {ns}/{HOST_SECRET}, service account {ns}/{AGENT}) and its RBAC objects {} / {}",
        names.role, names.health_check
    )
}
