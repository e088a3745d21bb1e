//! `kubefedctl export karmada`: the federation as Karmada's objects, read
//! from the live host or from files (`-f`), written as YAML/JSON or into a
//! directory, with a report of every field that was approximated or not
//! mapped (`core::export::karmada` decides; this reads and prints).

use crate::cmd::options::GlobalOptions;
use crate::core::export::karmada::Export;
use crate::core::export::{FindingKind, ObjectReport};
use crate::error::{EXIT_APPROXIMATED, ExitWith};
use crate::sync::karmada;
use crate::terminal::output::{DocumentFormat, on_stdout, print_objects, render as render_doc};
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
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
#[command(mut_arg("namespace", |a| a.help("Only the federated objects and RSPs of this namespace [default: every namespace, as reconcile: the federation is moved whole, not the context's namespace]")))]
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

    #[command(flatten)]
    pub scope: crate::cmd::options::NamespaceScope,

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

pub async fn run(global: &GlobalOptions, o: &ExportOptions) -> Result<()> {
    let ExportTarget::Karmada(k) = &o.target;
    if !k.filename.is_empty() && k.with_tokens {
        return Err(crate::error::usage(
            "--with-tokens reads the host's Secrets: it does not apply to -f",
        ));
    }
    let federation = if k.filename.is_empty() {
        let (_, host) = global.connect_host().await?;
        karmada::read_host(&host, k.scope.or_every(), k.with_tokens).await?
    } else {
        karmada::read_files(&k.filename, k.scope.or_every())?
    };
    let export = federation.export(k.with_tokens);
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
