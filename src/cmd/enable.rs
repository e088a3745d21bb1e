//! `kubefedctl enable (NAME | -f FILE)`: make an API type federated.
//!
//! Looks the type up through the host's discovery, generates its
//! `Federated<Kind>` CRD and its FederatedTypeConfig (`src/core/typegen.rs`),
//! and writes both, reading first: a type already enabled this way gets no
//! write request.

use crate::api::DEFAULT_FEDERATED_GROUP;
use crate::api::core::FederatedTypeConfig;
use crate::apply::{
    Journal, ObjectRef, OnExisting, Outcome, ensure, outcome_line, preview, resource_of,
};
use crate::cmd::options::GlobalOptions;
use crate::core::lookup::{self, ServedResource};
use crate::core::typegen::{self, FederatedNames, TemplateSchema};
use crate::discovery;
use crate::host::Host;
use crate::output::DocumentFormat;
use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{Value, json};
use std::path::PathBuf;

/// The default federated version, as KubeFed's.
pub const DEFAULT_FEDERATED_VERSION: &str = "v1beta1";

#[derive(Args, Debug)]
#[command(
    after_help = "NAME is what kubectl accepts: plural, singular, kind, short name or
plural.group (deployments, deploy, Deployment, deployments.apps, etcdclusters).

Examples:
  kubefedctl enable deployments.apps
  kubefedctl enable etcdclusters --template-schema embed
  kubefedctl enable -f testdata/enabletypedirectives.yaml     # KubeFed's ten default types
  kubefedctl enable configmaps -o yaml                        # print, write nothing"
)]
pub struct EnableOptions {
    /// The API type to federate
    #[arg(
        value_name = "NAME",
        required_unless_present = "filename",
        conflicts_with = "filename"
    )]
    pub name: Option<String>,

    /// Version of the target type (any served version) [default: the preferred one]
    #[arg(long = "version", value_name = "VERSION")]
    pub target_version: Option<String>,

    /// API group of the generated federated type
    #[arg(long, value_name = "GROUP", default_value = DEFAULT_FEDERATED_GROUP)]
    pub federated_group: String,

    /// Version of the generated federated type
    #[arg(long, value_name = "VERSION", default_value = DEFAULT_FEDERATED_VERSION)]
    pub federated_version: String,

    /// spec.template's schema: preserve (any object, as KubeFed) or embed (the target's own schema, so the API server rejects bad templates)
    #[arg(long, value_enum, value_name = "MODE", default_value = "preserve")]
    pub template_schema: TemplateSchema,

    /// Read EnableTypeDirectives (KubeFed's format; several documents allowed) from FILE
    #[arg(short = 'f', long = "filename", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub filename: Option<PathBuf>,

    /// Print the FederatedTypeConfig and CRD (yaml or json) instead of writing them
    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    pub output: Option<DocumentFormat>,

    /// Show what would change, writing nothing
    #[arg(long)]
    pub dry_run: bool,
}

/// One type to enable: a NAME with its flags, or one EnableTypeDirective.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Directive {
    pub name: String,
    pub target_version: Option<String>,
    pub federated_group: String,
    pub federated_version: String,
}

/// Parses EnableTypeDirective documents; errors name the file and document.
pub fn parse_directives(text: &str, source: &str) -> Result<Vec<Directive>> {
    let docs: Vec<Value> =
        crate::yaml::yaml_documents(text).map_err(|e| anyhow!("{source}: invalid YAML: {e}"))?;
    let mut out = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        let at = format!("{source}: document {}", i + 1);
        if doc["kind"] != "EnableTypeDirective" {
            bail!(
                "{at}: kind is {}, expected EnableTypeDirective",
                doc["kind"]
            );
        }
        let name = doc["metadata"]["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| anyhow!("{at}: metadata.name is required"))?;
        let text = |field: &str| {
            doc["spec"][field]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        out.push(Directive {
            name: name.to_string(),
            target_version: text("targetVersion"),
            federated_group: text("federatedGroup")
                .unwrap_or_else(|| DEFAULT_FEDERATED_GROUP.into()),
            federated_version: text("federatedVersion")
                .unwrap_or_else(|| DEFAULT_FEDERATED_VERSION.into()),
        });
    }
    if out.is_empty() {
        bail!("{source}: no EnableTypeDirective in the file");
    }
    Ok(out)
}

pub async fn run(global: &GlobalOptions, o: &EnableOptions) -> Result<()> {
    let directives = match (&o.filename, &o.name) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            parse_directives(&text, &path.display().to_string())?
        }
        (None, Some(name)) => vec![Directive {
            name: name.clone(),
            target_version: o.target_version.clone(),
            federated_group: o.federated_group.clone(),
            federated_version: o.federated_version.clone(),
        }],
        (None, None) => unreachable!("clap requires NAME or --filename"),
    };
    enable(global, o, &directives).await
}

/// A generated federated type, ready to write or print.
pub struct Generated {
    pub target: ServedResource,
    pub names: FederatedNames,
    pub type_config: Value,
    pub crd: Value,
}

/// Generates the FTC and CRD for each directive, reading discovery, the
/// target CRDs and (for built-in types) the OpenAPI document once.
pub async fn generate(
    host: &Host,
    directives: &[Directive],
    mode: TemplateSchema,
) -> Result<Vec<Generated>> {
    let all_versions = directives.iter().any(|d| d.target_version.is_some());
    let served = discovery::served_resources(&host.client, all_versions).await?;
    let mut openapi: Option<Value> = None;
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
                if openapi.is_none() {
                    openapi = Some(discovery::openapi_v2(&host.client).await?);
                }
                let doc = openapi.as_ref().expect("fetched");
                typegen::schema_from_openapi(doc, &target.group, &target.version, &target.kind)
            }
        };
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

async fn enable(global: &GlobalOptions, o: &EnableOptions, directives: &[Directive]) -> Result<()> {
    let factory = global.client_factory()?;
    let host = Host::connect(
        &factory,
        global.host_cluster_context.as_deref(),
        &global.kubefed_namespace,
    )
    .await?;
    if o.output.is_none() {
        host.require_initialised().await?;
    }
    let generated = generate(&host, directives, o.template_schema).await?;
    if let Some(format) = o.output {
        let docs: Vec<Value> = generated
            .iter()
            .flat_map(|g| [g.type_config.clone(), g.crd.clone()])
            .collect();
        return crate::output::print_objects(&docs, format);
    }
    let ns = host.object(resource_of::<Namespace>(), false, &host.namespace);
    if ns.get().await?.is_none() {
        bail!(
            "KubeFed namespace {:?} does not exist in the host: run kubefedctl init",
            host.namespace
        );
    }
    for g in &generated {
        write_type(&host, g, o.dry_run).await?;
    }
    Ok(())
}

/// Writes one federated type: checks first, then the CRD (waiting until it
/// is served), then the FTC.
pub async fn write_type(host: &Host, g: &Generated, dry_run: bool) -> Result<()> {
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
    }
    check_conflicts(host, g).await?;

    if dry_run {
        println!(
            "{}",
            outcome_line(
                &crd,
                preview(&crd, &g.crd, &OnExisting::Update).await?,
                true
            )
        );
        println!(
            "{}",
            outcome_line(
                &ftc,
                preview(&ftc, &ftc_body, &OnExisting::Update).await?,
                true
            )
        );
        return Ok(());
    }
    let mut journal = Journal::default();
    let result = async {
        let (outcome, _) = ensure(&crd, &g.crd, &OnExisting::Update, &mut journal).await?;
        println!("{}", outcome_line(&crd, outcome, false));
        if outcome != Outcome::Unchanged {
            wait_served(host, &g.names).await?;
        }
        let (outcome, _) = ensure(&ftc, &ftc_body, &OnExisting::Update, &mut journal).await?;
        println!("{}", outcome_line(&ftc, outcome, false));
        anyhow::Ok(())
    }
    .await;
    if let Err(e) = result {
        for line in journal.rollback().await {
            eprintln!("rolled back: {line}");
        }
        return Err(e.context(format!("enabling {ftc_name:?}")));
    }
    Ok(())
}

/// Another FTC must not federate an equivalent API, nor own this CRD name.
async fn check_conflicts(host: &Host, g: &Generated) -> Result<()> {
    let api: Api<FederatedTypeConfig> = Api::namespaced(host.client.clone(), &host.namespace);
    let ftcs = api
        .list(&ListParams::default())
        .await
        .map_err(crate::apply::api_error)?;
    let name = g.target.qualified_name();
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
        if t.plural_name == g.target.plural
            && lookup::equivalent(&t.plural_name, &g.target.api_version(), &other_gv)
        {
            bail!(
                "cannot enable {name:?}: the equivalent type {other_name:?} ({other_gv}) is already federated by FederatedTypeConfig {}/{other_name}",
                host.namespace
            );
        }
        let f = &other.spec.federated_type;
        if format!("{}.{}", f.plural_name, f.group.clone().unwrap_or_default())
            == g.names.crd_name()
        {
            bail!(
                "cannot enable {name:?}: FederatedTypeConfig {other_name:?} already uses the federated CRD {:?}; if these are distinct types sharing a kind, pass --federated-group",
                g.names.crd_name()
            );
        }
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_parse_with_defaults_and_clear_errors() {
        let text = "---\napiVersion: core.kubefed.io/v1beta1\nkind: EnableTypeDirective\nmetadata:\n  name: deployments.apps\n---\nkind: EnableTypeDirective\nmetadata:\n  name: widgets\nspec:\n  targetVersion: v2\n  federatedGroup: fed.example.com\n";
        let d = parse_directives(text, "d.yaml").unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].federated_group, "types.kubefed.io");
        assert_eq!(d[0].federated_version, "v1beta1");
        assert_eq!(d[1].target_version.as_deref(), Some("v2"));
        assert_eq!(d[1].federated_group, "fed.example.com");
        let e = parse_directives("kind: ConfigMap\n", "x.yaml")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "x.yaml: document 1: kind is \"ConfigMap\", expected EnableTypeDirective"
        );
        let e = parse_directives("kind: EnableTypeDirective\nmetadata: {}\n", "x.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("metadata.name is required"), "{e}");
        assert!(
            parse_directives(": :\n  - [", "bad.yaml")
                .unwrap_err()
                .to_string()
                .starts_with("bad.yaml: invalid YAML")
        );
    }

    #[test]
    fn the_shipped_directives_are_kubefeds_ten_defaults() {
        let text = include_str!("../../testdata/enabletypedirectives.yaml");
        let names: Vec<String> = parse_directives(text, "testdata")
            .unwrap()
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(
            names,
            [
                "clusterroles.rbac.authorization.k8s.io",
                "configmaps",
                "deployments.apps",
                "ingresses.networking.k8s.io",
                "jobs.batch",
                "namespaces",
                "replicasets.apps",
                "secrets",
                "serviceaccounts",
                "services"
            ]
        );
    }
}
