//! Federated types as the host holds them: generating a type's
//! `Federated<Kind>` CRD and FederatedTypeConfig from what the cluster
//! serves, and writing them (read before write, conflicts refused, served
//! before use). Shared by `enable`, `disable` and `federate`.

use crate::api::core::FederatedTypeConfig;
use crate::apply::{
    Journal, ObjectRef, OnExisting, Outcome, WriteMode, ensure, outcome_line, preview, resource_of,
};
use crate::clients::discovery;
use crate::clients::host::Host;
use crate::core::types::lookup::{self, ServedResource};
use crate::core::types::typegen::{self, FederatedNames, TemplateSchema};
use anyhow::{Result, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{Value, json};

/// The default federated version, as KubeFed's.
pub const DEFAULT_FEDERATED_VERSION: &str = "v1beta1";

/// One type to enable: a NAME with its flags, or one EnableTypeDirective.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Directive {
    pub name: String,
    pub target_version: Option<String>,
    pub federated_group: String,
    pub federated_version: String,
}

/// A generated federated type, ready to write or print.
pub struct Generated {
    pub target: ServedResource,
    pub names: FederatedNames,
    pub type_config: Value,
    pub crd: Value,
}

/// Generates the FTC and CRD for each directive, reading discovery, the
/// target CRDs and (for built-in types) each OpenAPI document once
/// ([`discovery::OpenApi`]).
pub async fn generate(
    host: &Host,
    directives: &[Directive],
    mode: TemplateSchema,
) -> Result<Vec<Generated>> {
    let all_versions = directives.iter().any(|d| d.target_version.is_some());
    let served = discovery::served_resources(&host.client, all_versions).await?;
    let mut openapi = discovery::OpenApi::default();
    let mut out = Vec::new();
    for d in directives {
        let target = lookup::find(&served, &d.name, d.target_version.as_deref())?;
        let schema = if target.group.is_empty() {
            None
        } else {
            let crd = host.object(
                resource_of::<CustomResourceDefinition>(),
                false,
                &target.qualified_name(),
            );
            crd.get()
                .await?
                .and_then(|c| typegen::schema_from_crd(&c, &target.version))
        };
        let schema = match schema {
            Some(s) => Some(s),
            None if is_custom(&target) => None,
            None => {
                let doc = openapi
                    .document(&host.client, &target.group, &target.version)
                    .await?;
                typegen::schema_from_openapi(doc, &target.group, &target.version, &target.kind)
            }
        };
        // Only an embedded schema has rules to leave out.
        if mode == TemplateSchema::Embed {
            for line in schema.iter().flat_map(|s| &s.dropped) {
                tracing::info!(
                    "note: the template of {} leaves out {line}",
                    target.qualified_name()
                );
            }
        }
        let schema = schema.map(|s| s.schema);
        let names = FederatedNames::new(&target, &d.federated_group, &d.federated_version);
        let type_config = typegen::federated_type_config(&target, &names);
        let crd = typegen::federated_crd(&target, &names, schema.as_ref(), mode);
        out.push(Generated {
            target,
            names,
            type_config,
            crd,
        });
    }
    Ok(out)
}

/// Built-in groups have no dots or end in `.k8s.io`; anything else is a
/// CRD (or aggregated API) with no model in the OpenAPI document worth
/// fetching 3 MB for.
fn is_custom(target: &ServedResource) -> bool {
    let g = &target.group;
    !(g.is_empty() || !g.contains('.') || g.ends_with(".k8s.io"))
}

/// Writes one federated type: checks first, then the CRD (waiting until it
/// is served), then the FTC.
pub async fn write_type(host: &Host, g: &Generated, mode: WriteMode) -> Result<()> {
    let ftc_name = g.target.qualified_name();
    let ftc = host.object(resource_of::<FederatedTypeConfig>(), true, &ftc_name);
    let mut ftc_body = g.type_config.clone();
    ftc_body["metadata"]["namespace"] = json!(host.namespace);
    let crd = host.object(
        resource_of::<CustomResourceDefinition>(),
        false,
        &g.names.crd_name(),
    );

    if let Some(existing) = ftc.get().await? {
        refuse_changed_federated_type(&ftc_name, &existing, g)?;
    }
    let moved_from = check_conflicts(host, g).await?;
    let old_ftc = moved_from
        .as_deref()
        .map(|name| host.object(resource_of::<FederatedTypeConfig>(), true, name));

    if mode.is_dry_run() {
        return preview_type(g, &ftc_name, (&crd, &ftc, &ftc_body), old_ftc.as_ref()).await;
    }
    let mut journal = Journal::default();
    let result = async {
        let (outcome, _) = ensure(&crd, &g.crd, &OnExisting::Update, &mut journal).await?;
        println!("{}", outcome_line(&crd, outcome, WriteMode::Write));
        if outcome != Outcome::Unchanged {
            wait_served(host, &g.names).await?;
        }
        let (outcome, _) = ensure(&ftc, &ftc_body, &OnExisting::Update, &mut journal).await?;
        println!("{}", outcome_line(&ftc, outcome, WriteMode::Write));
        // The federated CRD and its objects stay; only the target moves.
        if let Some(old) = &old_ftc
            && old.delete().await?
        {
            println!(
                "{} deleted (host): the type moved to {ftc_name}",
                old.short()
            );
        }
        anyhow::Ok(())
    }
    .await;
    if let Err(e) = result {
        for line in journal.rollback().await {
            tracing::info!("rolled back: {line}");
        }
        return Err(e.context(format!("enabling {ftc_name:?}")));
    }
    Ok(())
}

/// An enabled type keeps its federated type: another group, version or
/// plural for it is refused (disable it first), as upstream refuses it.
fn refuse_changed_federated_type(ftc_name: &str, existing: &Value, g: &Generated) -> Result<()> {
    let e = &existing["spec"]["federatedType"];
    if e["pluralName"] != g.names.plural
        || e["group"] != g.names.group
        || e["version"] != g.names.version
    {
        bail!(
            "federation is already enabled for {ftc_name:?} with federated type \"{}.{}/{}\"; changing it to \"{}/{}\" is not supported (disable it first)",
            e["pluralName"].as_str().unwrap_or(""),
            e["group"].as_str().unwrap_or(""),
            e["version"].as_str().unwrap_or(""),
            g.names.crd_name(),
            g.names.version
        );
    }
    Ok(())
}

/// `--dry-run`: what enabling would change (the federated CRD, the FTC,
/// and the FTC a moved type leaves).
async fn preview_type(
    g: &Generated,
    ftc_name: &str,
    (crd, ftc, ftc_body): (&ObjectRef, &ObjectRef, &Value),
    old_ftc: Option<&ObjectRef>,
) -> Result<()> {
    println!(
        "{}",
        outcome_line(
            crd,
            preview(crd, &g.crd, &OnExisting::Update).await?,
            WriteMode::DryRun
        )
    );
    println!(
        "{}",
        outcome_line(
            ftc,
            preview(ftc, ftc_body, &OnExisting::Update).await?,
            WriteMode::DryRun
        )
    );
    if let Some(old) = old_ftc {
        println!(
            "{} would be deleted (host): the type moves to {ftc_name}",
            old.short()
        );
    }
    Ok(())
}

/// Another FTC must not federate an equivalent API, nor own this CRD name;
/// except that an FTC of an equivalent API with the same federated CRD is
/// the type this one moves (Ingress `extensions/v1beta1`, removed in 1.22,
/// to `networking.k8s.io/v1`): its name, to delete once this one is
/// written. The federated objects are the CRD's and stay as they are.
async fn check_conflicts(host: &Host, g: &Generated) -> Result<Option<String>> {
    let api: Api<FederatedTypeConfig> = Api::namespaced(host.client.clone(), &host.namespace);
    let ftcs = api
        .list(&ListParams::default())
        .await
        .map_err(crate::apply::api_error)?;
    let name = g.target.qualified_name();
    let mut moved_from = None;
    for other in ftcs.items {
        let other_name = other.metadata.name.clone().unwrap_or_default();
        if other_name == name {
            continue;
        }
        let t = &other.spec.target_type;
        let other_gv = match &t.group {
            Some(group) if !group.is_empty() => format!("{group}/{}", t.version),
            _ => t.version.clone(),
        };
        let f = &other.spec.federated_type;
        let same_crd = format!("{}.{}", f.plural_name, f.group.clone().unwrap_or_default())
            == g.names.crd_name();
        if t.plural_name == g.target.plural
            && lookup::equivalent(&t.plural_name, &g.target.api_version(), &other_gv)
        {
            if same_crd {
                moved_from = Some(other_name);
                continue;
            }
            bail!(
                "cannot enable {name:?}: the equivalent type {other_name:?} ({other_gv}) is already federated by FederatedTypeConfig {}/{other_name}",
                host.namespace
            );
        }
        if same_crd {
            bail!(
                "cannot enable {name:?}: FederatedTypeConfig {other_name:?} already uses the federated CRD {:?}; if these are distinct types sharing a kind, pass --federated-group",
                g.names.crd_name()
            );
        }
    }
    Ok(moved_from)
}

/// A new or changed CRD is usable once its objects can be listed.
async fn wait_served(host: &Host, names: &FederatedNames) -> Result<()> {
    let ar = kube::api::ApiResource {
        group: names.group.clone(),
        version: names.version.clone(),
        api_version: format!("{}/{}", names.group, names.version),
        kind: names.kind.clone(),
        plural: names.plural.clone(),
    };
    let api: Api<DynamicObject> = Api::all_with(host.client.clone(), &ar);
    let served = crate::poll::poll_until(
        std::time::Duration::from_secs(30),
        std::time::Duration::from_millis(200),
        || async {
            Ok(api
                .list(&ListParams::default().limit(1))
                .await
                .ok()
                .map(|_| ()))
        },
    )
    .await?;
    if served.is_none() {
        bail!(
            "the API server did not serve {} within 30s",
            names.crd_name()
        );
    }
    Ok(())
}

/// Used by `disable --delete-crd` when no FTC says which CRD it was.
pub fn crd_object(host: &Host, names: &FederatedNames) -> ObjectRef {
    host.object(
        resource_of::<CustomResourceDefinition>(),
        false,
        &names.crd_name(),
    )
}

/// What follows types newly written (by `enable`, or `federate
/// --enable-type`): the in-cluster reconciler's rules, pull members'
/// agents' host roles and the roles of least-privilege members gain their
/// resources, so that the next
/// reconcile may propagate them. Returns the reconciler's lines and the
/// members' outcome, for the command to print.
pub async fn follow_new_types(
    host: &Host,
    factory: &crate::clients::ClientFactory,
    generated: &[Generated],
    mode: WriteMode,
) -> Result<(
    Vec<String>,
    (Vec<String>, Vec<crate::core::outcome::Failure>),
)> {
    use crate::core::cluster::rbac::SyncedResource;
    use crate::core::run::reconciler::FederatedResource;
    let added: Vec<FederatedResource> = generated
        .iter()
        .map(|g| {
            let fd = &g.type_config["spec"]["federatedType"];
            FederatedResource {
                group: fd["group"].as_str().unwrap_or_default().to_string(),
                plural: fd["pluralName"].as_str().unwrap_or_default().to_string(),
            }
        })
        .collect();
    let mut lines =
        crate::reconciler::refresh_rules(host, mode, |types| types.extend(added.clone())).await?;
    // Pull members' agents read the types' federated groups on the host.
    lines.extend(
        crate::pull_member::refresh_agent_roles(host, mode, |types| types.extend(added)).await?,
    );
    // Least-privilege members gain the types' resources (a dry run has not
    // written them yet).
    let targets = generated.iter().map(|g| {
        let t = &g.type_config["spec"]["targetType"];
        SyncedResource {
            group: t["group"].as_str().unwrap_or_default().to_string(),
            plural: t["pluralName"].as_str().unwrap_or_default().to_string(),
            namespaced: t["scope"] == "Namespaced",
        }
    });
    let members =
        crate::member_rbac::refresh(host, factory, mode, |resources| resources.extend(targets))
            .await?;
    Ok((lines, members))
}
