//! `kubefedctl enable (NAME | -f FILE)`: make an API type federated.
//!
//! Looks the type up through the host's discovery, generates its
//! `Federated<Kind>` CRD and its FederatedTypeConfig (`core::types::typegen`),
//! and writes both, reading first: a type already enabled this way gets no
//! write request.

use crate::api::DEFAULT_FEDERATED_GROUP;
use crate::apply::resource_of;
use crate::cmd::options::{GlobalOptions, TemplateSchemaFlag};
use crate::federated_types::{DEFAULT_FEDERATED_VERSION, Directive, generate, write_type};
use crate::terminal::output::DocumentFormat;
use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use k8s_openapi::api::core::v1::Namespace;
use serde_json::Value;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(
    after_help = "NAME is what kubectl accepts: plural, singular, kind, short name or
plural.group (deployments, deploy, Deployment, deployments.apps, etcdclusters).

Examples:
  kubefedctl enable deployments.apps
  kubefedctl enable etcdclusters --template-schema embed
  # KubeFed's ten default types
  kubefedctl enable -f testdata/enabletypedirectives.yaml
  # Print, write nothing
  kubefedctl enable configmaps -o yaml"
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
    pub template_schema: TemplateSchemaFlag,

    /// Read EnableTypeDirectives (KubeFed's format; several documents allowed) from FILE
    #[arg(short = 'f', long = "filename", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub filename: Option<PathBuf>,

    /// Print the FederatedTypeConfig and CRD (yaml or json) instead of writing them
    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    pub output: Option<DocumentFormat>,

    #[command(flatten)]
    pub dry_run: crate::cmd::options::DryRunFlag,
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

async fn enable(global: &GlobalOptions, o: &EnableOptions, directives: &[Directive]) -> Result<()> {
    let (factory, host) = global.connect_host().await?;
    if o.output.is_none() {
        host.require_initialised().await?;
    }
    let generated = generate(&host, directives, o.template_schema.into()).await?;
    if let Some(format) = o.output {
        let docs: Vec<Value> = generated
            .iter()
            .flat_map(|g| [g.type_config.clone(), g.crd.clone()])
            .collect();
        return crate::terminal::output::print_objects(&docs, format);
    }
    let ns = host.object(resource_of::<Namespace>(), false, &host.namespace);
    if ns.get().await?.is_none() {
        bail!(
            "KubeFed namespace {:?} does not exist in the host: run kubefedctl init",
            host.namespace
        );
    }
    for g in &generated {
        write_type(&host, g, o.dry_run.mode()).await?;
    }
    crate::cmd::options::print_followers(
        crate::federated_types::follow_new_types(&host, &factory, &generated, o.dry_run.mode())
            .await?,
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
