//! `reconcile --rollout-abort --previous FILE` (issue #57): the previous
//! version of federated objects, read from files and never applied to the
//! host. An object it names whose rollout is aborted is decided from the
//! file's `spec` (template, placement, overrides) in place of the host's,
//! for its member writes only (`live::rollout` checks the hashes and keeps
//! the record, marked aborted, so that the next run does not roll the
//! host's version out again).

use crate::core::describe::{ObjectKey, describe_federated, key_of};
use crate::core::propagation::decide::{self, ObjectPlan};
use crate::sync::render::{self, Sourced};
use crate::sync::run::observe::{Observation, ObservedType};
use anyhow::{Result, bail};
use serde_json::Value;
use std::path::PathBuf;

/// The federated objects of `--previous`, each with its file and document.
#[derive(Clone, Debug, Default)]
pub struct Previous {
    pub objects: Vec<Sourced>,
    /// `-n`: the namespace of objects that give none.
    pub namespace: Option<String>,
    /// The federation's namespace (decide needs it; set once the host is
    /// known).
    pub kubefed_namespace: String,
}

impl Previous {
    /// Reads `--previous` paths (files, directories, `-` for stdin) with
    /// `-f`'s reader (KubeFed's older `*.kubefed.k8s.io` groups accepted).
    /// Anything but federated objects is an error naming its file and
    /// document, and so is an object given twice or no object at all.
    pub fn load(paths: &[PathBuf], recursive: bool, namespace: Option<&str>) -> Result<Previous> {
        let inputs = render::load_with(paths, recursive)?;
        let others = (inputs.clusters.iter())
            .chain(&inputs.rsps)
            .chain(&inputs.dns)
            .chain(&inputs.member_status)
            .chain(&inputs.crds)
            .chain(&inputs.config)
            .chain(&inputs.type_configs);
        if let Some(o) = others.into_iter().next() {
            bail!(
                "--previous {}: {} is not a federated object: only their previous versions can be given",
                o.source,
                o.object["kind"].as_str().unwrap_or("the object")
            );
        }
        if inputs.federated.is_empty() {
            let paths: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            bail!("--previous {}: no federated object in it", paths.join(", "));
        }
        render::check_federated(&inputs.federated)?;
        Ok(Previous {
            objects: inputs.federated,
            namespace: namespace.map(str::to_string),
            kubefed_namespace: String::new(),
        })
    }

    /// These versions in the federation of namespace `kubefed_namespace`.
    pub fn in_federation(self, kubefed_namespace: &str) -> Previous {
        Previous {
            kubefed_namespace: kubefed_namespace.to_string(),
            ..self
        }
    }

    /// The previous version of `fed`, a host object of type `t`: the file
    /// object of the same group, kind, namespace (`-n`'s when it gives
    /// none) and name.
    pub fn of(&self, t: &ObservedType, fed: &Value) -> Option<&Sourced> {
        let key = key_of(fed);
        self.objects
            .iter()
            .find(|s| same_type(t, &s.object) && self.key(t, &s.object).as_ref() == Some(&key))
    }

    /// Where the host holds `obj`; `None` when it is namespaced and gives
    /// no namespace, nor `-n`.
    fn key(&self, t: &ObservedType, obj: &Value) -> Option<ObjectKey> {
        let mut key = key_of(obj);
        if key.namespace.is_empty() && t.federated_namespaced {
            key.namespace = self.namespace.clone()?;
        }
        Some(key)
    }

    /// One note per file object this run has no host object for (another
    /// namespace or type than the run's, or none such).
    pub fn unused(&self, seen: &Observation) -> Vec<String> {
        (self.objects.iter())
            .filter(|s| {
                !seen.types.iter().any(|t| {
                    same_type(t, &s.object)
                        && self
                            .key(t, &s.object)
                            .is_some_and(|k| t.objects.iter().any(|o| key_of(o) == k))
                })
            })
            .map(|s| {
                format!(
                    "--previous {}: {} is not among this run's federated objects; not used",
                    s.source,
                    describe_federated(&s.object)
                )
            })
            .collect()
    }
}

fn same_type(t: &ObservedType, obj: &Value) -> bool {
    let group = (obj["apiVersion"].as_str())
        .and_then(|a| a.split_once('/'))
        .map_or("", |(g, _)| g);
    obj["kind"] == t.federated.kind.as_str() && group == t.federated.group
}

/// The decide step for the host's `fed` as its previous version says:
/// the host's object with the file's `spec`, so that its metadata (name,
/// finalizers, generation) stays the host's.
pub fn decide(
    seen: &Observation,
    t: &ObservedType,
    fed: &Value,
    previous: &Previous,
    file: &Value,
) -> ObjectPlan {
    let mut obj = fed.clone();
    obj["spec"] = file["spec"].clone();
    let federation = crate::sync::live::federation(&previous.kubefed_namespace, seen);
    decide::decide_object(&federation, &t.ty, &obj, &t.members)
}
