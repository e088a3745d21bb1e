//! `kubefedctl status`: where the federation stands — clusters, federated
//! types, and per-cluster propagation of federated objects.
//!
//! Reads only. Cluster readiness comes from each KubeFedCluster's status
//! (written by `reconcile`'s probe, or by a KubeFed controller) or, with
//! `--probe`, from probing every member now, in parallel.

use crate::clients::ClientFactory;
use crate::clients::host::Host;
use crate::cmd::options::GlobalOptions;
use crate::error::ExitWith;
use anyhow::Result;
use clap::{Args, ValueEnum};
use data::{
    IGNORED, check_members, cluster_rows, dns_rows, explain_unlisted, object_rows, type_rows,
};
use std::io::IsTerminal;
use std::time::Duration;
use tables::{clusters_table, dns_table, objects_table, summary, types_table};

mod data;
mod drift;
mod tables;

pub use data::{ClusterPropagation, ClusterRow, ObjectRow, TypeRow};

#[derive(Args, Debug)]
#[command(
    mut_arg("namespace", |a| a.help("Namespace of the federated objects [default: the context's namespace]")),
    mut_arg("all_namespaces", |a| a.help("Federated objects in every namespace"))
)]
#[command(
    after_help = "Without WHAT: the host, every cluster, every type and a summary.

Examples:
  # Clusters, types and a propagation summary
  kubefedctl status
  # Probe every member now
  kubefedctl status clusters --probe
  kubefedctl status types
  # Multi-cluster DNS: Domains, ServiceDNSRecords and IngressDNSRecords
  kubefedctl status dns
  # One row per FederatedDeployment
  kubefedctl status deployments.apps -A
  kubefedctl status configmaps web -n demo -o yaml
  # Each field a member's copy differs at, and since when; as JUnit for CI
  kubefedctl status configmaps -n demo --drift
  kubefedctl status configmaps -A --drift -o junit > drift.xml
  # Exit 5 when anything is not ready or not propagated (a CI gate)
  kubefedctl status --exit-code"
)]
pub struct StatusOptions {
    /// clusters, types, dns, or a federated type by its target's name (deployments.apps, configmaps)
    #[arg(value_name = "WHAT")]
    pub what: Option<String>,

    /// With a type: one federated object
    #[arg(value_name = "NAME")]
    pub name: Option<String>,

    #[command(flatten)]
    pub scope: crate::cmd::options::NamespaceScope,

    /// Output format: wide, json, yaml, name, or junit (with a type: implies --drift) [default: tables]
    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    pub output: Option<StatusFormat>,

    /// Probe every member cluster now instead of reading the recorded status
    #[arg(long)]
    pub probe: bool,

    /// Timeout of each probe
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = crate::cmd::options::parse_duration)]
    pub probe_timeout: Duration,

    /// With a type: check the member clusters themselves (in-sync, drifted, missing, unmanaged)
    #[arg(long)]
    pub live: bool,

    /// With a type: each field a member's copy differs at (path, member's and desired value, first seen); implies --live
    #[arg(long)]
    pub drift: bool,

    /// Exit 5 when a cluster is not ready or an object is not propagated (with --live: not in sync)
    #[arg(long)]
    pub exit_code: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusFormat {
    Wide,
    Json,
    Yaml,
    Name,
    Junit,
}

impl StatusOptions {
    /// Whether the members' copies are compared field by field: `--drift`,
    /// `-o junit`, or `--live` with a document.
    pub fn wants_drift(&self) -> bool {
        self.drift
            || self.output == Some(StatusFormat::Junit)
            || (self.live && matches!(self.output, Some(StatusFormat::Json | StatusFormat::Yaml)))
    }

    /// `--live`, or implied by `--drift` / `-o junit`.
    fn checks_members(&self) -> bool {
        self.live || self.wants_drift()
    }
}

/// What `status` shows, from its first word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum What<'a> {
    /// Host, clusters, types and a one-line summary.
    Overview,
    Clusters,
    Types,
    Dns,
    /// One federated type's objects (FTC name, target plural or kind).
    Type(&'a str),
}

impl<'a> What<'a> {
    pub fn of(word: Option<&'a str>) -> What<'a> {
        match word {
            None => What::Overview,
            Some("clusters") => What::Clusters,
            Some("types") => What::Types,
            Some("dns") => What::Dns,
            Some(t) => What::Type(t),
        }
    }
}

pub async fn run(global: &GlobalOptions, o: &StatusOptions) -> Result<()> {
    status(global, o).await
}

/// How tables look: `-o wide` adds columns; colour only on a terminal, and never with NO_COLOR.
#[derive(Clone, Copy, Debug)]
struct Style {
    wide: bool,
    colour: bool,
}

/// Reads what WHAT names, prints it, and with --exit-code fails when something is unhealthy.
async fn status(global: &GlobalOptions, o: &StatusOptions) -> Result<()> {
    let what = What::of(o.what.as_deref());
    if (o.drift || o.output == Some(StatusFormat::Junit)) && !matches!(what, What::Type(_)) {
        return Err(crate::error::usage(
            "--drift and -o junit need a federated type (kubefedctl status configmaps --drift)",
        ));
    }
    let (factory, host) = global.connect_host().await?;
    host.require_initialised().await?;
    let colour = o.output.is_none()
        && std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none();
    let wide = o.output == Some(StatusFormat::Wide);
    let style = Style { wide, colour };
    let unhealthy = match what {
        What::Overview | What::Clusters | What::Types => {
            let sections = Sections::read(&host, &factory, o, what).await?;
            sections.print(&host, o.output, style).await?;
            sections.unhealthy()
        }
        What::Dns => {
            show_dns(&host, o).await?;
            false
        }
        What::Type(type_name) => show_objects(&host, &factory, o, type_name, style).await?,
    };
    if o.exit_code && unhealthy {
        return Err(ExitWith {
            code: crate::error::EXIT_NOT_READY,
            message: "not everything is ready and propagated".into(),
        }
        .into());
    }
    Ok(())
}

/// The overview, `clusters` or `types`: one reading of the rows their sections show.
struct Sections<'a> {
    what: What<'a>,
    clusters: Vec<ClusterRow>,
    types: Vec<TypeRow>,
}

impl<'a> Sections<'a> {
    /// Reads only the sections WHAT shows: clusters, then types.
    async fn read(
        host: &Host,
        factory: &ClientFactory,
        o: &StatusOptions,
        what: What<'a>,
    ) -> Result<Sections<'a>> {
        let mut sections = Sections {
            what,
            clusters: Vec::new(),
            types: Vec::new(),
        };
        if sections.show_clusters() {
            sections.clusters = cluster_rows(host, factory, o).await?;
        }
        if sections.show_types() {
            sections.types = type_rows(host, o, what == What::Types && o.probe).await?;
        }
        Ok(sections)
    }

    /// `status types` leaves the clusters out.
    fn show_clusters(&self) -> bool {
        self.what != What::Types
    }

    /// `status clusters` leaves the types out.
    fn show_types(&self) -> bool {
        self.what != What::Clusters
    }

    /// For --exit-code: a cluster not ready, or a type's objects not all propagated (or ignored).
    fn unhealthy(&self) -> bool {
        self.clusters.iter().any(|c| c.ready != "True")
            || self
                .types
                .iter()
                .any(|t| t.propagated + t.ignored < t.objects)
    }

    /// One document (json, yaml), resource names, or tables, as -o asks.
    async fn print(&self, host: &Host, output: Option<StatusFormat>, style: Style) -> Result<()> {
        match output {
            Some(StatusFormat::Json) | Some(StatusFormat::Yaml) => {
                let format = if output == Some(StatusFormat::Json) {
                    crate::terminal::output::DocumentFormat::Json
                } else {
                    crate::terminal::output::DocumentFormat::Yaml
                };
                self.print_document(host, format)
            }
            Some(StatusFormat::Name) => {
                for c in &self.clusters {
                    println!("kubefedcluster.core.kubefed.io/{}", c.name);
                }
                for t in &self.types {
                    println!("federatedtypeconfig.core.kubefed.io/{}", t.name);
                }
                Ok(())
            }
            _ => self.print_tables(host, style).await,
        }
    }

    /// Scripts get the host and the shown sections as one document.
    fn print_document(
        &self,
        host: &Host,
        format: crate::terminal::output::DocumentFormat,
    ) -> Result<()> {
        let mut doc = serde_json::Map::new();
        doc.insert(
            "host".into(),
            serde_json::json!({"context": host.context, "namespace": host.namespace}),
        );
        if self.show_clusters() {
            doc.insert("clusters".into(), serde_json::to_value(&self.clusters)?);
        }
        if self.show_types() {
            doc.insert("types".into(), serde_json::to_value(&self.types)?);
        }
        crate::terminal::output::print(&doc, format)
    }

    /// People get tables; the overview adds the host line (its scope is read now) and a summary.
    async fn print_tables(&self, host: &Host, style: Style) -> Result<()> {
        let (show_clusters, show_types) = (self.show_clusters(), self.show_types());
        if self.what == What::Overview {
            let scope = host.scope().await?;
            println!(
                "Host: context {:?}, namespace {}, scope {}\n",
                host.context,
                host.namespace,
                scope.as_str()
            );
        }
        if show_clusters {
            print!(
                "{}",
                clusters_table(&self.clusters, style.wide, style.colour)
            );
        }
        if show_clusters && show_types {
            println!();
        }
        if show_types {
            print!("{}", types_table(&self.types, style.wide));
        }
        if self.what == What::Overview {
            println!("\n{}", summary(&self.clusters, &self.types));
        }
        Ok(())
    }
}

/// `status dns`: never unhealthy, so it only prints.
async fn show_dns(host: &Host, o: &StatusOptions) -> Result<()> {
    let rows = dns_rows(host, o).await?;
    match o.output {
        Some(StatusFormat::Json) => {
            crate::terminal::output::print(&rows, crate::terminal::output::DocumentFormat::Json)?
        }
        Some(StatusFormat::Yaml) => {
            crate::terminal::output::print(&rows, crate::terminal::output::DocumentFormat::Yaml)?
        }
        _ => print!("{}", dns_table(&rows)),
    }
    Ok(())
}

/// One type's objects (with --live, checked in the members); true when not all are propagated.
async fn show_objects(
    host: &Host,
    factory: &ClientFactory,
    o: &StatusOptions,
    type_name: &str,
    style: Style,
) -> Result<bool> {
    let mut unhealthy = false;
    let (ftc, mut rows, namespace) = object_rows(host, factory, o, type_name).await?;
    explain_unlisted(host, o, &ftc, &mut rows).await?;
    if o.checks_members() {
        check_members(host, o, &ftc, namespace.as_deref(), &mut rows).await?;
        // With the fields compared, a copy a run would rewrite to the same
        // fields (its version moved) is not drift.
        let fields = o.drift || o.output == Some(StatusFormat::Junit);
        unhealthy |= (rows.iter().flat_map(|r| &r.clusters)).any(|c| match c.live.as_deref() {
            Some("in-sync") => false,
            Some("drifted") if fields => c.drift.is_some(),
            _ => true,
        });
    }
    unhealthy |= rows
        .iter()
        .any(|r| r.propagation != "True" && r.propagation != IGNORED);
    match o.output {
        Some(StatusFormat::Junit) => print!(
            "{}",
            drift::junit(type_name, &rows, &crate::clock::now_rfc3339())
        ),
        None | Some(StatusFormat::Wide) if o.drift => print!("{}", drift::drift_table(&rows)),
        _ => print_object_rows(&rows, o.output, style)?,
    }
    Ok(unhealthy)
}

/// Objects as json, yaml, names (namespace/name) or a table.
fn print_object_rows(rows: &[ObjectRow], output: Option<StatusFormat>, style: Style) -> Result<()> {
    match output {
        Some(StatusFormat::Json) => {
            crate::terminal::output::print(&rows, crate::terminal::output::DocumentFormat::Json)?
        }
        Some(StatusFormat::Yaml) => {
            crate::terminal::output::print(&rows, crate::terminal::output::DocumentFormat::Yaml)?
        }
        Some(StatusFormat::Name) => {
            for r in rows {
                println!(
                    "{}",
                    if r.namespace.is_empty() {
                        r.name.clone()
                    } else {
                        format!("{}/{}", r.namespace, r.name)
                    }
                );
            }
        }
        _ => {
            print!("{}", objects_table(rows, style.wide, style.colour));
            for r in rows {
                if let Some(rollout) = &r.rollout {
                    println!("rollout of {}/{}: {rollout}", r.namespace, r.name);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::data::placement_text;
    use super::tables::clusters_table;
    use super::*;
    use serde_json::json;

    #[test]
    fn placement_reads_like_kubefed_decides() {
        assert_eq!(
            placement_text(
                &json!({"clusters": [{"name": "a"}, {"name": "b"}], "clusterSelector": {}})
            ),
            "a,b"
        );
        assert_eq!(placement_text(&json!({"clusters": []})), "none");
        assert_eq!(
            placement_text(&json!({"clusterSelector": {}})),
            "all clusters"
        );
        assert_eq!(
            placement_text(&json!({"clusterSelector": {"matchLabels": {"region": "eu"}}})),
            "selector region=eu"
        );
        assert_eq!(placement_text(&json!({})), "none");
    }

    #[test]
    fn sections_show_what_was_asked_and_judge_health() {
        let types = Sections {
            what: What::of(Some("types")),
            clusters: Vec::new(),
            types: vec![TypeRow {
                name: "configmaps".into(),
                federated_kind: "FederatedConfigMap".into(),
                federated_type: "federatedconfigmaps.types.kubefed.io".into(),
                propagation: "Enabled".into(),
                objects: 3,
                propagated: 2,
                ignored: 1,
                members: None,
            }],
        };
        assert!(!types.show_clusters() && types.show_types());
        assert!(!types.unhealthy(), "ignored objects count as done");
        let clusters = Sections {
            what: What::of(Some("clusters")),
            ..types
        };
        assert!(clusters.show_clusters() && !clusters.show_types());
        let overview = Sections {
            what: What::of(None),
            types: vec![TypeRow {
                ignored: 0,
                ..clusters.types[0].clone()
            }],
            clusters: Vec::new(),
        };
        assert!(overview.show_clusters() && overview.show_types());
        assert!(overview.unhealthy(), "one object is not propagated");
    }

    #[test]
    fn tables_without_colour_are_plain_text() {
        let rows = vec![ClusterRow {
            name: "member1".into(),
            ready: "True".into(),
            kubernetes_version: "v1.20.2".into(),
            endpoint: "https://10.0.0.1:6443".into(),
            region: "eu".into(),
            zones: vec!["eu-1a".into()],
            message: String::new(),
            created: String::new(),
            mode: "pull".into(),
            identity: "least".into(),
            token_expires: "never".into(),
            inventory: String::new(),
        }];
        let text = clusters_table(&rows, false, false);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("NAME     READY"), "{text}");
        assert!(
            lines[1].contains("member1")
                && lines[1].contains("True")
                && lines[1].contains("eu/eu-1a"),
            "{text}"
        );
        assert!(!text.contains("IDENTITY"), "wide only");
        let wide = clusters_table(&rows, true, false);
        assert!(
            wide.lines()
                .next()
                .unwrap()
                .contains("MODE  IDENTITY  TOKEN EXPIRES"),
            "{wide}"
        );
        assert!(
            wide.lines()
                .nth(1)
                .unwrap()
                .contains("pull  least     never"),
            "{wide}"
        );
        assert!(!text.contains('\u{1b}'), "no escape codes without colour");
        assert!(
            clusters_table(&rows, false, true).contains('\u{1b}'),
            "colour when asked"
        );
    }
}
