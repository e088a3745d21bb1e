//! `kubefedctl federate TYPE NAME` / `federate -f FILE`: turn existing
//! resources into `Federated<Kind>` resources.
//!
//! As KubeFed's federate (upstream `pkg/kubefedctl/federate/federate.go`
//! and `util.go`), with its faults fixed: `-f` works offline with no
//! kubeconfig at all and knows built-in scopes; `--contents` skips (and
//! reports) types that are not federated instead of aborting, fails on list
//! errors before writing instead of dropping them, skips objects a
//! controller owns, and prints in a stable order; a re-run is idempotent.
//! Objects whose name is not a DNS-1123 subdomain are skipped with a
//! warning in every mode (upstream: only with `--contents`), and federating
//! a system namespace says that reconcile will not propagate it.

use crate::api::DEFAULT_FEDERATED_GROUP;
use crate::api::core::FederatedTypeConfig;
use crate::apply::{ObjectRef, api_error};
use crate::clients::discovery;
use crate::clients::host::Host;
use crate::cmd::options::GlobalOptions;
use crate::core::propagation::compare::overlay;
use crate::core::types::builtin::{builtin, guess_plural};
use crate::core::types::convert::{
    FederatedResource, Federating, Placement, federated_object, federating, invalid_name_warning,
    made_by_cluster, parse_labels, skipped_in_contents, system_namespace_note,
};
use crate::core::types::lookup::{self, ServedResource};
use crate::core::types::typegen::{TemplateSchema, federated_kind, federated_plural};
use crate::federated_types::{DEFAULT_FEDERATED_VERSION, Directive, generate, write_type};
use crate::terminal::output::DocumentFormat;
use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(after_help = "Examples:
  kubefedctl federate deployments web -n demo
  kubefedctl federate namespaces demo --contents --enable-type -s pods
  # Offline: no cluster, no kubeconfig
  kubefedctl federate -f app.yaml > federated.yaml
  kubectl get cm settings -o yaml | kubefedctl federate -f -
  kubefedctl federate configmaps settings --placement-clusters member1,member2")]
pub struct FederateOptions {
    /// The type of the resource (as kubectl names it)
    #[arg(
        value_name = "TYPE",
        required_unless_present = "filename",
        requires = "name",
        conflicts_with = "filename"
    )]
    pub type_name: Option<String>,

    /// The resource to federate
    #[arg(value_name = "NAME", conflicts_with = "filename")]
    pub name: Option<String>,

    /// Namespace of the resource [default: the context's namespace, else default]
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,

    /// Enable the type (and, with --contents, every contained type) when it is not federated yet
    #[arg(short = 't', long, conflicts_with_all = ["output", "filename"])]
    pub enable_type: bool,

    /// With TYPE namespaces: also federate what the namespace contains
    #[arg(short = 'c', long, conflicts_with = "filename")]
    pub contents: bool,

    /// With --contents: types (or whole groups) to leave out, e.g. pods,secrets,apps
    #[arg(short = 's', long, value_name = "NAMES", value_delimiter = ',')]
    pub skip_api_resources: Vec<String>,

    /// Read the resources from FILE (- for stdin) and print their federated form; needs no cluster
    #[arg(short = 'f', long = "filename", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub filename: Option<PathBuf>,

    /// Print the federated resources (yaml or json) instead of creating them
    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    pub output: Option<DocumentFormat>,

    /// Place on these clusters only (default: every cluster)
    #[arg(
        long,
        value_name = "CLUSTERS",
        value_delimiter = ',',
        conflicts_with = "cluster_selector"
    )]
    pub placement_clusters: Vec<String>,

    /// Place on clusters with these labels, e.g. region=eu,tier=web
    #[arg(long, value_name = "LABELS")]
    pub cluster_selector: Option<String>,

    /// Update federated resources that already exist and differ
    #[arg(long)]
    pub overwrite: bool,

    #[command(flatten)]
    pub dry_run: crate::cmd::options::DryRunFlag,
}

impl FederateOptions {
    fn placement(&self) -> Result<Placement> {
        if !self.placement_clusters.is_empty() {
            return Ok(Placement::Clusters(self.placement_clusters.clone()));
        }
        match &self.cluster_selector {
            Some(s) => Ok(Placement::Labels(
                parse_labels(s).map_err(|e| anyhow!("--cluster-selector: {e}"))?,
            )),
            None => Ok(Placement::AllClusters),
        }
    }
}

pub async fn run(global: &GlobalOptions, o: &FederateOptions) -> Result<()> {
    let placement = validate(o).map_err(crate::error::usage_of)?;
    if let Some(path) = &o.filename {
        return federate_file(
            path,
            &placement,
            &global.kubefed_namespace,
            o.output.unwrap_or(DocumentFormat::Yaml),
        );
    }
    federate_live(global, o, &placement).await
}

/// Flag checks that need no cluster, so a bad flag fails before anything is read.
fn validate(o: &FederateOptions) -> Result<Placement> {
    let placement = o.placement()?;
    if o.contents && !is_namespaces(o.type_name.as_deref().unwrap_or("")) {
        bail!("--contents can only be used with type namespaces");
    }
    Ok(placement)
}

fn is_namespaces(t: &str) -> bool {
    matches!(t.to_lowercase().as_str(), "namespaces" | "namespace" | "ns")
}

/// Offline: every object in the file (or stdin), in file order.
fn federate_file(
    path: &PathBuf,
    placement: &Placement,
    kubefed_namespace: &str,
    format: DocumentFormat,
) -> Result<()> {
    let source = path.display().to_string();
    let text = if source == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading stdin")?;
        s
    } else {
        std::fs::read_to_string(path).with_context(|| format!("reading {source}"))?
    };
    let out = federate_documents(
        &text,
        if source == "-" { "stdin" } else { &source },
        placement,
        kubefed_namespace,
    )?;
    for w in &out.warnings {
        tracing::warn!("{w}");
    }
    for n in &out.notes {
        tracing::info!("note: {n}");
    }
    crate::terminal::output::print_objects(&out.objects, format)
}

/// What `federate -f` makes of a YAML stream.
#[derive(Debug, Default)]
pub struct Federated {
    /// The federated objects, in file order.
    pub objects: Vec<Value>,
    /// What did not travel or was skipped (printed as `warning:`).
    pub warnings: Vec<String>,
    /// What to know about the result (printed as `note:`).
    pub notes: Vec<String>,
}

/// The federated form of every object in a YAML stream (`List`s expanded);
/// objects whose name no federated object can carry are skipped.
pub fn federate_documents(
    text: &str,
    source: &str,
    placement: &Placement,
    kubefed_namespace: &str,
) -> Result<Federated> {
    let docs: Vec<Value> =
        crate::yaml::yaml_documents(text).map_err(|e| anyhow!("{source}: invalid YAML: {e}"))?;
    let mut out = Federated::default();
    for (i, doc) in docs.iter().enumerate() {
        let items: Vec<&Value> = if doc["kind"] == "List" {
            doc["items"]
                .as_array()
                .map(|a| a.iter().collect())
                .unwrap_or_default()
        } else {
            vec![doc]
        };
        for obj in items {
            let at = format!("{source}: document {}", i + 1);
            let (Some(api_version), Some(kind)) =
                (obj["apiVersion"].as_str(), obj["kind"].as_str())
            else {
                bail!("{at}: apiVersion and kind are required");
            };
            let group = api_version.split_once('/').map_or("", |(g, _)| g);
            if let Some(why) = crate::core::types::convert::not_federatable(group, kind) {
                bail!("{at}: {kind} ({api_version}) {why}");
            }
            if obj["metadata"]["name"].as_str().is_none_or(str::is_empty) {
                bail!("{at}: {kind} has no metadata.name");
            }
            if let Some(w) = invalid_name_warning(obj) {
                out.warnings.push(format!("{at}: {w}"));
                continue;
            }
            let namespaced = match builtin(api_version, kind) {
                Some(t) => t.namespaced,
                None => {
                    let guess = obj["metadata"]["namespace"].is_string();
                    out.warnings.push(format!(
                        "{at}: {kind} ({api_version}) is not a built-in type; assuming it is {} ({}) because it {} a namespace",
                        if guess { "namespaced" } else { "cluster-scoped" },
                        guess_plural(kind),
                        if guess { "has" } else { "has no" }
                    ));
                    guess
                }
            };
            let fed = FederatedResource {
                group: DEFAULT_FEDERATED_GROUP.into(),
                version: DEFAULT_FEDERATED_VERSION.into(),
                kind: federated_kind(kind),
                plural: federated_plural(
                    &builtin(api_version, kind)
                        .map_or_else(|| guess_plural(kind), |t| t.plural.to_string()),
                ),
                namespaced: namespaced || kind == "Namespace",
            };
            let (fobj, w) = federated_object(obj, &fed, placement);
            out.warnings.extend(w);
            if kind == "Namespace"
                && !api_version.contains('/')
                && let Some(n) = fobj["metadata"]["name"]
                    .as_str()
                    .and_then(|name| system_namespace_note(name, kubefed_namespace))
            {
                out.notes.push(format!("{at}: {n}"));
            }
            out.objects.push(fobj);
        }
    }
    Ok(out)
}

/// Objects to federate, grouped by type, as read from the host.
type Work = Vec<(ServedResource, Vec<Value>)>;

/// What a live run prints or writes: federated objects, and the types to enable before them.
struct Prepared {
    objects: Vec<(FederatedResource, Value)>,
    to_enable: Vec<Directive>,
}

/// Live: reads the objects from the host, federates them, then prints (`-o`) or writes them.
async fn federate_live(
    global: &GlobalOptions,
    o: &FederateOptions,
    placement: &Placement,
) -> Result<()> {
    let (factory, host) = global.connect_host().await?;
    let writing = o.output.is_none();
    if writing {
        host.require_initialised().await?;
    }
    let namespace = match &o.namespace {
        Some(n) => n.clone(),
        None => factory.config(&host.context).await?.default_namespace,
    };
    let served = discovery::served_resources(&host.client, false).await?;
    let work = objects_to_federate(&host, o, &served, &namespace).await?;
    let prepared = federated_forms(&host, o, &work, placement, writing).await?;

    if let Some(format) = o.output {
        let docs: Vec<Value> = prepared.objects.into_iter().map(|(_, v)| v).collect();
        return crate::terminal::output::print_objects(&docs, format);
    }
    write_all(&host, &factory, o, &prepared).await
}

/// What to federate: the named object (unless its name is unusable), then --contents.
async fn objects_to_federate(
    host: &Host,
    o: &FederateOptions,
    served: &[ServedResource],
    namespace: &str,
) -> Result<Work> {
    let type_name = o.type_name.as_deref().expect("clap requires TYPE");
    let name = o.name.as_deref().expect("clap requires NAME");
    let target = lookup::find(served, type_name, None)?;
    if let Some(why) = crate::core::types::convert::not_federatable(&target.group, &target.kind) {
        bail!("{} {why}", target.qualified_name());
    }

    // (resource, objects) to federate, the named object first.
    let first = get_object(host, &target, namespace, name).await?;
    let is_namespace = target.plural == "namespaces" && target.group.is_empty();
    let object_ns = if is_namespace {
        name.to_string()
    } else {
        namespace.to_string()
    };
    if is_namespace && let Some(note) = system_namespace_note(name, &host.namespace) {
        tracing::info!("note: {note}");
    }
    let mut work: Work = match invalid_name_warning(&first) {
        Some(w) => {
            tracing::warn!("{w}");
            Vec::new()
        }
        None => vec![(target.clone(), vec![first])],
    };
    if o.contents {
        work.extend(namespace_contents(host, served, &object_ns, &o.skip_api_resources).await?);
    }
    Ok(work)
}

/// A namespace's contents (but -s), by type and name; any list error fails before a write.
async fn namespace_contents(
    host: &Host,
    served: &[ServedResource],
    object_ns: &str,
    skip: &[String],
) -> Result<Work> {
    let mut list_errors = Vec::new();
    let mut by_type: BTreeMap<String, (ServedResource, Vec<Value>)> = BTreeMap::new();
    let mut controlled = Vec::new();
    for r in served
        .iter()
        .filter(|r| r.preferred && !skipped_in_contents(r, skip))
    {
        let api: Api<DynamicObject> = Api::namespaced_with(
            host.client.clone(),
            object_ns,
            &discovery::api_resource_of(r),
        );
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                let items = federatable_items(r, list.items, &mut controlled)?;
                if !items.is_empty() {
                    by_type.insert(r.qualified_name(), (r.clone(), items));
                }
            }
            Err(e) => list_errors.push(format!(
                "{}: {}",
                r.qualified_name(),
                crate::error::one_line(&api_error(e))
            )),
        }
    }
    if !list_errors.is_empty() {
        bail!(
            "cannot list the contents of namespace {object_ns:?} (nothing was written; skip these with -s): {}",
            list_errors.join("; ")
        );
    }
    if !controlled.is_empty() {
        tracing::info!(
            "note: left out {} object(s) made by controllers or the cluster: {}",
            controlled.len(),
            controlled.join(", ")
        );
    }
    Ok(by_type.into_values().collect())
}

/// Leaves out what controllers made and names no federated object can carry; sorts by name.
fn federatable_items(
    r: &ServedResource,
    listed: Vec<DynamicObject>,
    controlled: &mut Vec<String>,
) -> Result<Vec<Value>> {
    let mut items: Vec<Value> = Vec::new();
    for item in listed {
        let mut v = serde_json::to_value(item)?;
        v["apiVersion"] = Value::String(r.api_version());
        v["kind"] = Value::String(r.kind.clone());
        if made_by_cluster(&v) {
            controlled.push(crate::core::describe::describe(&r.kind, &v));
        } else if let Some(w) = invalid_name_warning(&v) {
            tracing::warn!("{w}");
        } else {
            items.push(v);
        }
    }
    items.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    Ok(items)
}

/// Federated forms need a federated type: types without one fail, or are skipped (--contents).
async fn federated_forms(
    host: &Host,
    o: &FederateOptions,
    work: &Work,
    placement: &Placement,
    writing: bool,
) -> Result<Prepared> {
    // Each type needs its federated type: from its FTC, or enabled now.
    let mut objects: Vec<(FederatedResource, Value)> = Vec::new();
    let mut to_enable: Vec<Directive> = Vec::new();
    let mut unfederated: Vec<String> = Vec::new();
    let ftcs: Api<FederatedTypeConfig> = Api::namespaced(host.client.clone(), &host.namespace);
    for (r, items) in work {
        let Some(fed) = federated_type(&ftcs, r, o, writing, &mut to_enable).await? else {
            unfederated.push(format!(
                "{} ({} object(s))",
                r.qualified_name(),
                items.len()
            ));
            continue;
        };
        for item in items {
            let (obj, warnings) = federated_object(item, &fed, placement);
            for w in warnings {
                tracing::warn!("{w}");
            }
            objects.push((fed.clone(), obj));
        }
    }
    if !unfederated.is_empty() {
        if !o.contents || objects.is_empty() {
            bail!(
                "{} is not federated: run kubefedctl enable {}, or pass --enable-type",
                unfederated.join(", "),
                o.type_name.as_deref().expect("clap requires TYPE")
            );
        }
        tracing::info!(
            "skipped types with no FederatedTypeConfig (enable them, or pass --enable-type): {}",
            unfederated.join(", ")
        );
    }
    Ok(Prepared { objects, to_enable })
}

/// From the type's FTC, else as enabling would make it (queued with -t); None: not federated.
async fn federated_type(
    ftcs: &Api<FederatedTypeConfig>,
    r: &ServedResource,
    o: &FederateOptions,
    writing: bool,
    to_enable: &mut Vec<Directive>,
) -> Result<Option<FederatedResource>> {
    let ftc = ftcs.get_opt(&r.qualified_name()).await.map_err(api_error)?;
    Ok(match ftc {
        Some(ftc) => {
            let f = &ftc.spec.federated_type;
            Some(FederatedResource {
                group: f.group.clone().unwrap_or_default(),
                version: f.version.clone(),
                kind: f.kind.clone(),
                plural: f.plural_name.clone(),
                namespaced: f.scope == "Namespaced",
            })
        }
        None if o.enable_type || !writing => {
            if o.enable_type {
                to_enable.push(Directive {
                    name: r.qualified_name(),
                    target_version: Some(r.version.clone()),
                    federated_group: DEFAULT_FEDERATED_GROUP.into(),
                    federated_version: DEFAULT_FEDERATED_VERSION.into(),
                });
            }
            let names = crate::core::types::typegen::FederatedNames::new(
                r,
                DEFAULT_FEDERATED_GROUP,
                DEFAULT_FEDERATED_VERSION,
            );
            Some(FederatedResource {
                group: names.group,
                version: names.version,
                kind: names.kind,
                plural: names.plural,
                namespaced: names.namespaced,
            })
        }
        None => None,
    })
}

/// Types first (objects need them served), then objects; differing ones fail once all are done.
async fn write_all(
    host: &Host,
    factory: &crate::clients::ClientFactory,
    o: &FederateOptions,
    prepared: &Prepared,
) -> Result<()> {
    let to_enable = &prepared.to_enable;
    if !to_enable.is_empty() {
        let generated = generate(host, to_enable, TemplateSchema::Preserve).await?;
        for g in &generated {
            write_type(host, g, o.dry_run.mode()).await?;
        }
        // As `enable` does: without it least-privilege members could not
        // be written the new types (403 on the next reconcile).
        crate::cmd::options::print_followers(
            crate::federated_types::follow_new_types(host, factory, &generated, o.dry_run.mode())
                .await?,
        )?;
    }
    let mut differing = Vec::new();
    let pending: Vec<String> = to_enable.iter().map(|d| d.name.clone()).collect();
    for (fed, obj) in &prepared.objects {
        // A type enabled in this (dry) run is not served yet: nothing exists.
        let new_type = o.dry_run.mode().is_dry_run()
            && pending
                .iter()
                .any(|p| fed.plural == federated_plural(p.split('.').next().unwrap_or("")));
        let line = write_federated(host, fed, obj, o, new_type).await?;
        match line {
            Ok(l) => println!("{l}"),
            Err(l) => differing.push(l),
        }
    }
    if !differing.is_empty() {
        bail!(
            "{} already federated and different from the target (pass --overwrite to update): {}",
            differing.len(),
            differing.join(", ")
        );
    }
    Ok(())
}

async fn get_object(host: &Host, r: &ServedResource, namespace: &str, name: &str) -> Result<Value> {
    let ar = discovery::api_resource_of(r);
    let api: Api<DynamicObject> = if r.namespaced {
        Api::namespaced_with(host.client.clone(), namespace, &ar)
    } else {
        Api::all_with(host.client.clone(), &ar)
    };
    let qualified = if r.namespaced {
        format!("{namespace}/{name}")
    } else {
        name.to_string()
    };
    let obj = api
        .get_opt(name)
        .await
        .map_err(api_error)?
        .ok_or_else(|| anyhow!("{} {qualified:?} not found", r.kind))?;
    let mut v = serde_json::to_value(obj)?;
    v["apiVersion"] = Value::String(r.api_version());
    v["kind"] = Value::String(r.kind.clone());
    Ok(v)
}

/// Creates, keeps or (with --overwrite) updates one federated object.
/// `Ok(line)` to print, or `Err(name)` when it differs and may not be updated.
async fn write_federated(
    host: &Host,
    fed: &FederatedResource,
    obj: &Value,
    o: &FederateOptions,
    new_type: bool,
) -> Result<std::result::Result<String, String>> {
    let ar = crate::apply::api_resource(&fed.group, &fed.version, &fed.kind, &fed.plural);
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let ns = obj["metadata"]["namespace"].as_str();
    let target = ObjectRef::new("host", &host.client, ar, ns, name);
    let shown = match ns {
        Some(ns) => format!("{} in namespace {ns}", target.short()),
        None => target.short(),
    };
    let live = if new_type { None } else { target.get().await? };
    let verdict = match federating(obj, live.as_ref()) {
        Federating::Create => "created",
        Federating::Unchanged => "unchanged",
        Federating::Differs if o.overwrite => "updated",
        Federating::Differs => return Ok(Err(shown)),
    };
    let mode = o.dry_run.mode();
    if mode.is_dry_run() || verdict == "unchanged" {
        let v = if mode.is_dry_run() && verdict != "unchanged" {
            format!("would be {verdict}")
        } else {
            verdict.to_string()
        };
        return Ok(Ok(format!("{shown} {v}")));
    }
    let api: Api<DynamicObject> = crate::apply::dynamic_api(&host.client, ns, &target.resource);
    match live {
        Some(l) => {
            let body: DynamicObject =
                serde_json::from_value(overlay(&l, &serde_json::json!({"spec": obj["spec"]})))?;
            api.replace(name, &PostParams::default(), &body)
                .await
                .map_err(api_error)
                .with_context(|| format!("updating {shown}"))?;
        }
        None => {
            let body: DynamicObject = serde_json::from_value(obj.clone())?;
            // A type enabled a moment ago may not be served yet.
            let create = || async {
                match api.create(&PostParams::default(), &body).await {
                    Ok(_) => Ok(Some(())),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
                    Err(e) => Err(api_error(e)),
                }
            };
            let created = crate::poll::poll_until(
                Duration::from_secs(10),
                Duration::from_millis(500),
                create,
            )
            .await
            .with_context(|| format!("creating {shown}"))?;
            if created.is_none() {
                bail!("creating {shown}: its type is not served (enabled a moment ago?)");
            }
        }
    }
    Ok(Ok(format!("{shown} {verdict}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FED_NS: &str = "kube-federation-system";

    #[test]
    fn documents_federate_with_built_in_scopes() {
        let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a, namespace: demo}\n  data: {k: v}\n- apiVersion: example.com/v1\n  kind: Gizmo\n  metadata: {name: g}\n";
        let Federated {
            objects: objs,
            warnings,
            notes,
        } = federate_documents(text, "app.yaml", &Placement::AllClusters, FED_NS).unwrap();
        assert!(notes.is_empty());
        let kinds: Vec<&str> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "FederatedDeployment",
                "FederatedConfigMap",
                "FederatedGizmo"
            ]
        );
        assert_eq!(objs[0]["spec"]["template"]["spec"]["replicas"], 2);
        assert_eq!(objs[1]["metadata"]["namespace"], "demo");
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("app.yaml: document 2: Gizmo (example.com/v1) is not a built-in type; assuming it is cluster-scoped"), "{warnings:?}");
    }

    #[test]
    fn bad_documents_name_the_file_and_document() {
        let e = federate_documents(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
            "x.yaml",
            &Placement::AllClusters,
            FED_NS,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "x.yaml: document 1: ConfigMap has no metadata.name");
        let e = federate_documents(
            "metadata: {name: a}\n",
            "-",
            &Placement::AllClusters,
            FED_NS,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "-: document 1: apiVersion and kind are required");
        assert!(
            federate_documents("a: [", "y.yaml", &Placement::AllClusters, FED_NS)
                .unwrap_err()
                .to_string()
                .starts_with("y.yaml: invalid YAML")
        );
    }

    #[test]
    fn documents_skip_names_no_federated_object_can_carry() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: rbac.authorization.k8s.io/v1\n  kind: ClusterRole\n  metadata: {name: 'system:controller:x'}\n- apiVersion: rbac.authorization.k8s.io/v1\n  kind: ClusterRole\n  metadata: {name: view}\n";
        let out = federate_documents(text, "roles.yaml", &Placement::AllClusters, FED_NS).unwrap();
        let names: Vec<&str> = out
            .objects
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["view"]);
        assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
        assert!(
            out.warnings[0].starts_with(
                "roles.yaml: document 1: skipping ClusterRole \"system:controller:x\" because its name does not conform to the DNS-1123 subdomain spec"
            ),
            "{:?}",
            out.warnings
        );
    }

    fn options(type_name: &str) -> FederateOptions {
        FederateOptions {
            type_name: Some(type_name.into()),
            name: Some("x".into()),
            namespace: None,
            enable_type: false,
            contents: false,
            skip_api_resources: Vec::new(),
            filename: None,
            output: None,
            placement_clusters: Vec::new(),
            cluster_selector: None,
            overwrite: false,
            dry_run: Default::default(),
        }
    }

    #[test]
    fn validate_names_the_flag_before_any_cluster() {
        let contents = FederateOptions {
            contents: true,
            ..options("configmaps")
        };
        assert_eq!(
            validate(&contents).unwrap_err().to_string(),
            "--contents can only be used with type namespaces"
        );
        let selector = FederateOptions {
            cluster_selector: Some("region".into()),
            ..options("configmaps")
        };
        assert_eq!(
            validate(&selector).unwrap_err().to_string(),
            "--cluster-selector: invalid label \"region\": expected key=value"
        );
        let ns = FederateOptions {
            contents: true,
            cluster_selector: Some("region=eu".into()),
            ..options("ns")
        };
        assert!(matches!(validate(&ns), Ok(Placement::Labels(_))));
    }

    #[test]
    fn documents_note_system_namespaces() {
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: fed}\n";
        let out = federate_documents(text, "ns.yaml", &Placement::AllClusters, "fed").unwrap();
        assert_eq!(out.objects.len(), 3, "still federated");
        assert_eq!(out.notes.len(), 2, "{:?}", out.notes);
        assert!(
            out.notes[0].starts_with("ns.yaml: document 1: \"default\" is a system namespace"),
            "{:?}",
            out.notes
        );
        assert!(out.notes[1].starts_with("ns.yaml: document 3: \"fed\""));
    }
}
