//! Reading the render's input: files, directories and stdin, sorted by role.

use super::*;
use crate::core::propagation::placement::Cluster;
use crate::core::types::legacy;
use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Reads YAML/JSON files, directories (recursively, `*.yaml`, `*.yml`,
/// `*.json`, in name order) or `-` (stdin).
pub fn load(paths: &[PathBuf]) -> Result<Inputs> {
    load_with(paths, true)
}

/// [`load`]; directories' subdirectories only when `recursive` (kubectl's
/// `-f DIR` reads one level, `-R` all of them).
pub fn load_with(paths: &[PathBuf], recursive: bool) -> Result<Inputs> {
    let mut inputs = Inputs::default();
    for path in paths {
        for file in files(path, recursive)? {
            let (name, text) = if file.as_os_str() == "-" {
                let mut s = String::new();
                std::io::stdin()
                    .read_to_string(&mut s)
                    .context("reading stdin")?;
                ("stdin".to_string(), s)
            } else {
                let text = std::fs::read_to_string(&file)
                    .with_context(|| format!("reading {}", file.display()))?;
                (file.display().to_string(), text)
            };
            add_documents(&mut inputs, &name, &text)?;
        }
    }
    Ok(inputs)
}

pub(super) fn files(path: &Path, recursive: bool) -> Result<Vec<PathBuf>> {
    if path.as_os_str() == "-" || path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    if !path.is_dir() {
        bail!("{}: no such file or directory", path.display());
    }
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("reading {}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if recursive {
                out.extend(files(&p, true)?);
            }
        } else if p
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            out.push(p);
        }
    }
    Ok(out)
}

/// Sorts the documents of one file into [`Inputs`].
pub fn add_documents(inputs: &mut Inputs, source: &str, text: &str) -> Result<()> {
    let docs: Vec<Value> =
        crate::yaml::yaml_documents(text).map_err(|e| anyhow!("{source}: invalid YAML: {e}"))?;
    for (i, doc) in docs.into_iter().enumerate() {
        let at = format!("{source}: document {}", i + 1);
        let items = match doc {
            Value::Object(mut list) if list.get("kind").is_some_and(|k| k == "List") => {
                match list.remove("items") {
                    Some(Value::Array(items)) => items,
                    _ => Vec::new(),
                }
            }
            doc => vec![doc],
        };
        for obj in items {
            add_object(inputs, &at, obj)?;
        }
    }
    Ok(())
}

/// One object of a document, into the part of the input its kind is
/// for; anything else is an error naming the document.
fn add_object(inputs: &mut Inputs, at: &str, obj: Value) -> Result<()> {
    let (object, notes) = legacy::normalize(obj);
    inputs
        .notes
        .extend(notes.into_iter().map(|n| format!("{at}: {n}")));
    let kind = object["kind"].as_str().unwrap_or("");
    let group = object["apiVersion"]
        .as_str()
        .and_then(|a| a.split_once('/'))
        .map(|(g, _)| g)
        .unwrap_or("");
    if object["metadata"]["name"]
        .as_str()
        .is_none_or(str::is_empty)
    {
        bail!(
            "{at}: {} has no metadata.name",
            if kind.is_empty() { "the object" } else { kind }
        );
    }
    check_names(at, kind, &object)?;
    let member = object["metadata"]["annotations"][CLUSTER_ANNOTATION]
        .as_str()
        .is_some();
    let role = match (group, kind) {
        ("core.kubefed.io", "KubeFedCluster") => &mut inputs.clusters,
        ("multiclusterdns.kubefed.io", "Domain" | "ServiceDNSRecord" | "IngressDNSRecord") => {
            &mut inputs.dns
        }
        ("", "Service") | ("networking.k8s.io", "Ingress") if member => &mut inputs.member_status,
        ("scheduling.kubefed.io", "ReplicaSchedulingPreference") => &mut inputs.rsps,
        ("core.kubefed.io", "KubeFedConfig") => {
            if let Some(first) = &inputs.config {
                bail!(
                    "{at}: a second KubeFedConfig (the first is {})",
                    first.source
                );
            }
            inputs.config = Some(Sourced {
                source: at.to_string(),
                object,
            });
            return Ok(());
        }
        ("core.kubefed.io", "FederatedTypeConfig") => &mut inputs.type_configs,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => &mut inputs.crds,
        ("core.kubefed.io", _) => {
            inputs
                .notes
                .push(format!("{at}: {kind} is not used when rendering; skipped"));
            return Ok(());
        }
        (_, k) if k.starts_with("Federated") && group.ends_with("kubefed.io") => {
            &mut inputs.federated
        }
        _ => bail!(
            "{at}: {kind:?} ({}) is not a federated object, ReplicaSchedulingPreference, KubeFedCluster or CustomResourceDefinition",
            object["apiVersion"].as_str().unwrap_or("no apiVersion")
        ),
    };
    role.push(Sourced {
        source: at.to_string(),
        object,
    });
    Ok(())
}

/// The kind, name and namespace as the API server checks them (every
/// object read here is a custom resource, a Service or an Ingress: a
/// DNS-1123 subdomain name in a DNS-1123 label namespace), so that nothing
/// is rendered, or written under `--output-dir`, for an object a cluster
/// would refuse (`../../x` would leave the output folder).
fn check_names(at: &str, kind: &str, object: &Value) -> Result<()> {
    use crate::core::names::{label_error, subdomain_error};
    let valid_kind = kind.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && kind.chars().all(|c| c.is_ascii_alphanumeric());
    if !valid_kind {
        bail!("{at}: kind {kind:?} is not a valid kind (letters and digits)");
    }
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    if let Some(e) = subdomain_error(name) {
        bail!("{at}: {kind} metadata.name {name:?} is not valid: {e}");
    }
    match &object["metadata"]["namespace"] {
        Value::Null => {}
        Value::String(ns) => {
            if let Some(e) = label_error(ns) {
                bail!("{at}: {kind} {name}: metadata.namespace {ns:?} is not valid: {e}");
            }
        }
        other => bail!("{at}: {kind} {name}: metadata.namespace must be a string, not {other}"),
    }
    Ok(())
}

/// `name` or `name:k=v,k2=v2` from `--cluster`.
pub fn parse_cluster_flag(text: &str) -> Result<Cluster> {
    let (name, labels) = text.split_once(':').unwrap_or((text, ""));
    if let Some(e) = crate::core::names::subdomain_error(name) {
        bail!("--cluster {text:?}: invalid cluster name: {e}");
    }
    let labels = crate::core::types::convert::parse_labels(labels)
        .map_err(|e| anyhow!("--cluster {text:?}: {e}"))?;
    Ok(Cluster {
        name: name.to_string(),
        labels: labels.into_iter().collect(),
        ready: true,
    })
}
