//! Least-privilege member identities (`join --rbac least`): what their
//! rules are made from (the host's enabled FederatedTypeConfigs and
//! whether it has multi-cluster DNS), and keeping every such member's role
//! in step when `enable` or `disable` changes the types. What the rules
//! say is `core::cluster::rbac`'s.

use crate::api::core::KubeFedCluster;
use crate::apply::{
    Journal, ObjectRef, OnExisting, WriteMode, api_error, ensure, outcome_line, resource_of,
};
use crate::clients::ClientFactory;
use crate::clients::host::Host;
use crate::core::cluster::membership::{self, JoinNames, Scope};
use crate::core::cluster::rbac::{
    HostFeatures, MEMBER_CONTEXT_ANNOTATION, MemberRbac, SyncedResource, least_rules,
};
use crate::core::outcome::{Failure, Place};
use anyhow::Result;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use kube::api::{Api, ListParams};
use serde_json::Value;

/// The resources the host propagates now: the targets of its enabled
/// FederatedTypeConfigs.
pub async fn synced_resources(host: &Host) -> Result<Vec<SyncedResource>> {
    Ok(host
        .type_configs()
        .await?
        .into_iter()
        .filter(|f| f.spec.is_enabled())
        .map(|f| SyncedResource {
            group: f.spec.target_type.group.unwrap_or_default(),
            plural: f.spec.target_type.plural_name,
            namespaced: f.spec.target_type.scope == "Namespaced",
        })
        .collect())
}

/// The rules of a least-privilege member of `host` for `resources`.
pub async fn rules(host: &Host, scope: Scope, resources: &[SyncedResource]) -> Result<Vec<Value>> {
    let features = HostFeatures {
        dns: host.dns_installed().await?,
    };
    Ok(least_rules(resources, scope, features))
}

/// After `enable` or `disable`: every least-privilege member's role gets
/// the rules of the types enabled now, all members at once. The roles are
/// written with the operator's own kubeconfig context of each member (the
/// one `join` recorded; the member identity may not change its own role).
/// `adjust` applies the command's change to the listed types (a dry run
/// has not written it). A member that cannot be reached or updated is a
/// failure of its own; the others are updated all the same. Returns the
/// lines to print (nothing changed: none) and the failures.
pub async fn refresh(
    host: &Host,
    factory: &ClientFactory,
    mode: WriteMode,
    adjust: impl FnOnce(&mut Vec<SyncedResource>),
) -> Result<(Vec<String>, Vec<Failure>)> {
    let clusters: Api<KubeFedCluster> = Api::namespaced(host.client.clone(), &host.namespace);
    let items = match clusters.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
        Err(e) => return Err(api_error(e)),
    };
    // Least-privilege members: name, service account, context, and
    // whether it is a pull member (whose agent's role has more rules).
    let mut least: Vec<(String, String, String, bool)> = Vec::new();
    for c in items {
        let v = serde_json::to_value(&c)?;
        let context = v["metadata"]["annotations"][MEMBER_CONTEXT_ANNOTATION].as_str();
        if let ((MemberRbac::Least, Some(sa)), Some(name)) =
            (MemberRbac::of_cluster(&v), &c.metadata.name)
        {
            let context = context.unwrap_or(name).to_string();
            let pull = crate::core::cluster::pull::is_pull_value(&v);
            least.push((name.clone(), sa.to_string(), context, pull));
        }
    }
    if least.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let mut resources = synced_resources(host).await?;
    adjust(&mut resources);
    let scope = host.scope().await?;
    let rules = rules(host, scope, &resources).await?;
    let updates = least.iter().map(|(name, sa, context, pull)| {
        let rules = match pull {
            true => crate::core::cluster::pull::member_role_rules(&rules),
            false => rules.clone(),
        };
        let names = match pull {
            true => crate::core::cluster::pull::member_names(&host.namespace),
            false => JoinNames::of_service_account(sa, &host.namespace),
        };
        async move {
            let written = async {
                let client = factory.client(context).await?;
                update_role(host, name, &client, &names, scope, rules, mode).await
            };
            written.await.map_err(|e| {
                Failure::at(
                    Place::member(name),
                    format!(
                        "its least-privilege role was not updated through context {context:?}: {}; once it answers, run kubefedctl join {name} --cluster-context CONTEXT --error-on-existing=false",
                        crate::error::one_line(&e)
                    ),
                )
            })
        }
    });
    let mut lines = Vec::new();
    let mut failures = Vec::new();
    for result in futures::future::join_all(updates).await {
        match result {
            Ok(Some(line)) => lines.push(line),
            Ok(None) => {}
            Err(f) => failures.push(f),
        }
    }
    Ok((lines, failures))
}

/// Writes `rules` into one member's main role; the line to print when it
/// changed.
async fn update_role(
    host: &Host,
    member: &str,
    client: &kube::Client,
    names: &JoinNames,
    scope: Scope,
    rules: Vec<Value>,
    mode: WriteMode,
) -> Result<Option<String>> {
    let (resource, namespace) = match scope {
        Scope::Cluster => (resource_of::<ClusterRole>(), None),
        Scope::Namespaced => (resource_of::<Role>(), Some(host.namespace.as_str())),
    };
    let target = ObjectRef::new(member, client, resource, namespace, &names.role);
    // The main role, as `join` writes it: the first of its RBAC objects.
    let body = membership::rbac(names, &host.namespace, scope, Some(&rules)).swap_remove(0);
    let outcome = match mode {
        WriteMode::DryRun => crate::apply::preview(&target, &body, &OnExisting::Update).await?,
        WriteMode::Write => {
            ensure(&target, &body, &OnExisting::Update, &mut Journal::default())
                .await?
                .0
        }
    };
    Ok((outcome != crate::apply::Outcome::Unchanged).then(|| outcome_line(&target, outcome, mode)))
}
