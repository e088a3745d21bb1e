//! `kubefedctl export karmada`: the federation as Karmada's objects, read
//! from the live host or from files (`-f`), written as YAML/JSON or into a
//! directory, with a report of every field that was approximated or not
//! mapped (`core::export::karmada` decides; this reads and prints).

use crate::apply::{api_error, api_resource};
use crate::cmd::options::GlobalOptions;
use crate::core::cluster::membership::Scope;
use crate::core::export::karmada::{self, Export, FederatedType, Input};
use crate::core::export::{FindingKind, ObjectReport};
use crate::error::{EXIT_APPROXIMATED, ExitWith};
use crate::sync::live::observe::list_all;
use crate::sync::render;
use crate::terminal::output::{DocumentFormat, on_stdout, print_objects, render as render_doc};
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct ExportOptions {
    #[command(subcommand)]
    pub target: ExportTarget,
}

#[derive(Subcommand, Debug)]
pub enum ExportTarget {
    /// Karmada v1.13's objects: Clusters, resource templates, propagation and override policies
    Karmada(KarmadaOptions),
}

#[derive(Args, Debug)]
#[command(
    after_help = "Reads the host (or -f files), writes nothing there. Each KubeFedCluster
becomes a Push-mode Cluster and a Secret in karmada-cluster (its token only
with --with-tokens), each federated object its resource template with a
(Cluster)PropagationPolicy and (Cluster)OverridePolicy, an RSP static
weights, a FederatedNamespace a Namespace. The report (stderr) names every
field that was approximated or not mapped; then the exit code is 6.

Examples:
  kubefedctl export karmada > karmada.yaml
  kubefedctl export karmada -n shop -o json --report json
  kubefedctl export karmada -f federation/ --output-dir karmada/
  kubefedctl export karmada --with-tokens | kubectl --context karmada apply -f -"
)]
pub struct KarmadaOptions {
    /// Read federated objects, RSPs, KubeFedClusters and FederatedTypeConfigs
    /// from files or directories (- for stdin) instead of the host
    #[arg(
        short = 'f',
        long = "filename",
        visible_alias = "from",
        value_name = "PATH"
    )]
    pub filename: Vec<PathBuf>,

    /// Only the federated objects and RSPs of this namespace [default: every namespace]
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,

    /// Output format of the objects [default: yaml]
    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    pub output: Option<DocumentFormat>,

    /// Write one file per object into this directory (and report.json)
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,

    /// The report on stderr: text lines, or one JSON document
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    pub report: ReportFormat,

    /// Write each member's token into its Cluster Secret (read from the
    /// host's Secret); without it the report says where the token is
    #[arg(long)]
    pub with_tokens: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportFormat {
    Text,
    Json,
}

/// What an export reads, from the host or from files.
#[derive(Default)]
struct Gathered {
    clusters: Vec<Value>,
    secrets: Vec<Value>,
    type_configs: Vec<Value>,
    federated: Vec<Value>,
    rsps: Vec<Value>,
    scope: Option<Scope>,
}

pub async fn run(global: &GlobalOptions, o: &ExportOptions) -> Result<()> {
    let ExportTarget::Karmada(k) = &o.target;
    if !k.filename.is_empty() && k.with_tokens {
        bail!(crate::error::usage(
            "--with-tokens reads the host's Secrets: it does not apply to -f"
        ));
    }
    let gathered = if k.filename.is_empty() {
        read_host(global, k).await?
    } else {
        read_files(&k.filename, k.namespace.as_deref())?
    };
    let types = federated_types(&gathered);
    let export = karmada::export(&Input {
        clusters: &gathered.clusters,
        secrets: &gathered.secrets,
        type_configs: &gathered.type_configs,
        types: &types,
        federated: &gathered.federated,
        rsps: &gathered.rsps,
        scope: gathered.scope.unwrap_or(Scope::Cluster),
        with_tokens: k.with_tokens,
    });
    write(k, &export)?;
    report(k.report, &export)?;
    let inexact = export.reports.iter().filter(|r| r.inexact()).count();
    if inexact > 0 {
        return Err(ExitWith {
            code: EXIT_APPROXIMATED,
            message: format!(
                "{inexact} object(s) approximated or not mapped (see the report); the rest is exact"
            ),
        }
        .into());
    }
    Ok(())
}

/// The FTCs' types, and offline the built-in ones of federated kinds no
/// FTC names.
fn federated_types(g: &Gathered) -> Vec<FederatedType> {
    let mut types: Vec<FederatedType> = g
        .type_configs
        .iter()
        .filter_map(FederatedType::from_ftc)
        .collect();
    for fed in &g.federated {
        let kind = fed["kind"].as_str().unwrap_or("");
        let group = fed["apiVersion"]
            .as_str()
            .and_then(|a| a.split_once('/'))
            .map_or("", |(g, _)| g);
        let known = types
            .iter()
            .any(|t| t.federated_kind == kind && t.federated_group == group);
        if !known && let Some(t) = FederatedType::builtin(group, kind) {
            types.push(t);
        }
    }
    types
}

fn read_files(paths: &[PathBuf], namespace: Option<&str>) -> Result<Gathered> {
    let inputs = render::load(paths)?;
    for n in &inputs.notes {
        tracing::info!("note: {n}");
    }
    let objects = |v: Vec<render::Sourced>| -> Vec<Value> {
        v.into_iter()
            .map(|s| s.object)
            .filter(|o| namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns))
            .collect()
    };
    let scope = match &inputs.config {
        Some(c) => Some(crate::clients::host::settings_of("", Some(&c.object))?.scope),
        None => None,
    };
    Ok(Gathered {
        clusters: inputs.clusters.into_iter().map(|s| s.object).collect(),
        secrets: Vec::new(),
        type_configs: inputs.type_configs.into_iter().map(|s| s.object).collect(),
        federated: objects(inputs.federated),
        rsps: objects(inputs.rsps),
        scope,
    })
}

async fn read_host(global: &GlobalOptions, k: &KarmadaOptions) -> Result<Gathered> {
    let (_, host) = global.connect_host().await?;
    host.require_initialised().await?;
    let scope = host.scope().await?;
    let fed_ns = host.namespace.clone();
    let list = |group: &str, version: &str, kind: &str, plural: &str, ns: Option<&str>| {
        let ar = api_resource(group, version, kind, plural);
        let api: Api<DynamicObject> = match ns {
            Some(ns) => Api::namespaced_with(host.client.clone(), ns, &ar),
            None => Api::all_with(host.client.clone(), &ar),
        };
        async move { list_all(&api, &ListParams::default()).await }
    };
    let clusters = list(
        "core.kubefed.io",
        "v1beta1",
        "KubeFedCluster",
        "kubefedclusters",
        Some(&fed_ns),
    )
    .await?;
    let type_configs = list(
        "core.kubefed.io",
        "v1beta1",
        "FederatedTypeConfig",
        "federatedtypeconfigs",
        Some(&fed_ns),
    )
    .await?;
    let ns = k.namespace.as_deref();
    let mut federated = Vec::new();
    for ftc in &type_configs {
        let f = &ftc["spec"]["federatedType"];
        let s = |key: &str| f[key].as_str().unwrap_or("");
        let objects = list(s("group"), s("version"), s("kind"), s("pluralName"), ns).await;
        match objects {
            Ok(o) => federated.extend(o),
            Err(e) => tracing::warn!(
                "{}: {}",
                ftc["metadata"]["name"].as_str().unwrap_or(""),
                crate::error::one_line(&e)
            ),
        }
    }
    let rsps = match list(
        "scheduling.kubefed.io",
        "v1alpha1",
        "ReplicaSchedulingPreference",
        "replicaschedulingpreferences",
        ns,
    )
    .await
    {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(
                "ReplicaSchedulingPreferences not read: {}",
                crate::error::one_line(&e)
            );
            Vec::new()
        }
    };
    let secrets = if k.with_tokens {
        cluster_secrets(&host.client, &fed_ns, &clusters).await?
    } else {
        Vec::new()
    };
    Ok(Gathered {
        clusters,
        secrets,
        type_configs,
        federated,
        rsps,
        scope: Some(scope),
    })
}

/// The KubeFedClusters' Secrets (`--with-tokens`).
async fn cluster_secrets(
    client: &kube::Client,
    ns: &str,
    clusters: &[Value],
) -> Result<Vec<Value>> {
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), ns);
    let mut out = Vec::new();
    for c in clusters {
        let Some(name) = c["spec"]["secretRef"]["name"].as_str() else {
            continue;
        };
        if let Some(s) = api.get_opt(name).await.map_err(api_error)? {
            out.push(serde_json::to_value(s)?);
        }
    }
    Ok(out)
}

fn write(k: &KarmadaOptions, export: &Export) -> Result<()> {
    let format = k.output.unwrap_or(DocumentFormat::Yaml);
    match &k.output_dir {
        Some(dir) => write_dir(dir, format, export),
        None => on_stdout(print_objects(&export.objects, format)),
    }
}

/// One file per object, `NN-kind-namespace-name.yaml`, numbered in the
/// order to apply them, and `report.json`.
fn write_dir(dir: &Path, format: DocumentFormat, export: &Export) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (i, obj) in export.objects.iter().enumerate() {
        let m = &obj["metadata"];
        let mut name = format!(
            "{:03}-{}",
            i + 1,
            obj["kind"].as_str().unwrap_or("").to_lowercase()
        );
        for part in [&m["namespace"], &m["name"]] {
            if let Some(p) = part.as_str() {
                name.push('-');
                name.push_str(p);
            }
        }
        let path = dir.join(format!("{name}.{}", format.extension()));
        std::fs::write(&path, render_doc(obj, format)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let report = dir.join("report.json");
    std::fs::write(
        &report,
        render_doc(&report_json(export), DocumentFormat::Json)?,
    )
    .with_context(|| format!("writing {}", report.display()))?;
    tracing::info!(
        "wrote {} object(s) and report.json under {}",
        export.objects.len(),
        dir.display()
    );
    Ok(())
}

fn report_json(export: &Export) -> Value {
    json!({
        "exact": !export.inexact(),
        "objects": export.reports,
    })
}

/// The report on stderr: a line per finding under its object, or JSON.
fn report(format: ReportFormat, export: &Export) -> Result<()> {
    let text = match format {
        ReportFormat::Json => render_doc(&report_json(export), DocumentFormat::Json)?,
        ReportFormat::Text => report_text(&export.reports),
    };
    eprint!("{text}");
    Ok(())
}

/// `FederatedDeployment shop/web: approximated: spec.clusters.a.minReplicas: ...`.
pub fn report_text(reports: &[ObjectReport]) -> String {
    let mut out = String::new();
    for r in reports {
        for f in &r.findings {
            let field = if f.field.is_empty() {
                String::new()
            } else {
                format!("{}: ", f.field)
            };
            out.push_str(&format!(
                "{}: {}: {field}{}\n",
                r.object,
                f.kind.as_str(),
                f.message
            ));
        }
    }
    let inexact = reports.iter().filter(|r| r.inexact()).count();
    let notes = reports
        .iter()
        .flat_map(|r| &r.findings)
        .filter(|f| f.kind == FindingKind::Note)
        .count();
    out.push_str(&format!(
        "{} object(s) exported: {} exact, {inexact} approximated or not mapped, {notes} note(s)\n",
        reports.len(),
        reports.len() - inexact
    ));
    out
}
