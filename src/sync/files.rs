//! `reconcile -f PATH`: a change under review, read from files. With
//! `--dry-run` its objects take the place of the host's in the observation
//! (`core::proposal`), so the plan is the change's; without, they are
//! server-side applied to the host (field manager `kubefedctl`) under the
//! run lock before the run propagates them: one command, one credential.

use crate::api::scheduling::ReplicaSchedulingPreference;
use crate::apply::{api_error_line, dynamic_api, resource_of};
use crate::core::describe::{describe_federated, key_of};
use crate::core::proposal::{self, Proposed};
use crate::host::Host;
use crate::sync::observe::{Observation, ObservedType, federated_namespaces};
use crate::sync::render::{self, Sourced};
use anyhow::{Result, anyhow, bail};
use kube::api::{ApiResource, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// The field manager of every apply.
pub const FIELD_MANAGER: &str = "kubefedctl";

/// The federated objects (FederatedNamespaces included) and RSPs of a
/// change, each with the file and document it came from.
#[derive(Clone, Debug, Default)]
pub struct Proposal {
    pub federated: Vec<Sourced>,
    pub rsps: Vec<Sourced>,
    /// `--prune`: host objects of the files' federated types that the run
    /// selects (`-l`) and the files lack are deleted.
    pub prune: bool,
}

/// Reads `-f` paths. Anything but federated objects and RSPs is an error
/// naming its file and document; so is an object without a namespace when
/// `-n` gives none, an object given twice and overrides that cannot be read.
pub fn load(
    paths: &[PathBuf],
    recursive: bool,
    namespace: Option<&str>,
    prune: bool,
) -> Result<Proposal> {
    let inputs = render::load_with(paths, recursive)?;
    let others = inputs
        .clusters
        .iter()
        .chain(&inputs.dns)
        .chain(&inputs.member_status)
        .chain(&inputs.config);
    if let Some(o) = others.into_iter().next() {
        bail!(
            "{}: {} cannot be applied with -f: only federated objects, FederatedNamespaces and ReplicaSchedulingPreferences",
            o.source,
            o.object["kind"].as_str().unwrap_or("the object")
        );
    }
    let mut p = Proposal {
        federated: inputs.federated,
        rsps: inputs.rsps,
        prune,
    };
    for s in p.federated.iter_mut().chain(p.rsps.iter_mut()) {
        if s.object["metadata"]["namespace"]
            .as_str()
            .is_none_or(str::is_empty)
        {
            let Some(ns) = namespace else {
                bail!(
                    "{}: {} has no metadata.namespace (give one, or -n)",
                    s.source,
                    describe_federated(&s.object)
                );
            };
            s.object["metadata"]["namespace"] = ns.into();
        }
    }
    render::check_federated(&p.federated)?;
    Ok(p)
}

/// The enabled type of a federated object of the files, by its group and
/// kind; an error naming the file and document when the host has none.
fn type_of<'t>(types: &'t [ObservedType], s: &Sourced) -> Result<&'t ObservedType> {
    let api_version = s.object["apiVersion"].as_str().unwrap_or("");
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    let kind = s.object["kind"].as_str().unwrap_or("");
    types
        .iter()
        .find(|t| t.federated.kind == kind && t.federated.group == group)
        .ok_or_else(|| {
            anyhow!(
                "{}: {kind} ({api_version}) is not a federated type enabled on the host (see kubefedctl status types)",
                s.source
            )
        })
}

/// Checks every federated object of the proposal against the host's
/// enabled types, before anything is written.
pub fn check_types(types: &[ObservedType], p: &Proposal) -> Result<()> {
    for s in &p.federated {
        type_of(types, s)?;
    }
    Ok(())
}

/// The dry run: the proposal's objects take the place of the host's in
/// `seen` (types the files do not name are left as they are). Returns one
/// plan line per host object the change creates, updates or prunes.
pub fn overlay(seen: &mut Observation, p: &Proposal, now: &str) -> Result<Vec<String>> {
    check_types(&seen.types, p)?;
    let mut lines = Vec::new();
    for t in &mut seen.types {
        let files: Vec<Value> = p
            .federated
            .iter()
            .filter(|s| {
                s.object["kind"] == t.federated.kind.as_str()
                    && s.object["apiVersion"]
                        .as_str()
                        .and_then(|a| a.split_once('/'))
                        .is_some_and(|(g, _)| g == t.federated.group)
            })
            .map(|s| s.object.clone())
            .collect();
        if files.is_empty() {
            continue;
        }
        let namespaces: BTreeSet<String> = files.iter().map(|f| key_of(f).0).collect();
        let prune = p.prune.then_some(&namespaces);
        let (objects, what) = proposal::overlay(std::mem::take(&mut t.objects), &files, prune, now);
        t.objects = objects;
        for (key, proposed) in what {
            let verb = match proposed {
                Proposed::Create => "create",
                Proposed::Update => "update",
                Proposed::Prune => "delete (pruned)",
                Proposed::Unchanged => continue,
            };
            lines.push(format!(
                "host: {verb} {}",
                crate::core::describe::describe_key(&t.federated.kind, &key)
            ));
        }
    }
    // The change's FederatedNamespaces take the place of the host's.
    seen.fed_namespaces
        .extend(federated_namespaces(&seen.types));
    for r in &p.rsps {
        let key = key_of(&r.object);
        seen.rsps.retain(|h| key_of(h) != key);
        seen.rsps.push(r.object.clone());
    }
    Ok(lines)
}

/// Server-side applies the proposal to the host: every object once with
/// `dryRun=All` first, so that a conflict or an invalid object writes
/// nothing; then for real; then, with `--prune`, deletes the host objects
/// of the files' types that `selector` selects and the files lack (their
/// finalizer keeps them until the run that follows has removed their
/// member copies). Returns one line per host change.
pub async fn apply(
    host: &Host,
    types: &[ObservedType],
    p: &Proposal,
    selector: Option<&str>,
    force_conflicts: bool,
) -> Result<Vec<String>> {
    check_types(types, p)?;
    let rsp = resource_of::<ReplicaSchedulingPreference>();
    let mut targets: Vec<(&Sourced, &ApiResource, Proposed)> = Vec::new();
    for s in &p.federated {
        let ar = &type_of(types, s)?.federated;
        targets.push((s, ar, proposed(host, ar, s).await?));
    }
    for s in &p.rsps {
        targets.push((s, &rsp, proposed(host, &rsp, s).await?));
    }
    // Unchanged objects are not applied: a second run writes nothing.
    targets.retain(|(_, _, what)| *what != Proposed::Unchanged);
    for dry_run in [true, false] {
        for (s, ar, _) in &targets {
            server_side_apply(host, ar, s, dry_run, force_conflicts).await?;
        }
    }
    let mut lines: Vec<String> = targets
        .iter()
        .map(|(s, _, what)| {
            let verb = if *what == Proposed::Create {
                "created"
            } else {
                "configured"
            };
            format!("host: {verb} {}", describe_federated(&s.object))
        })
        .collect();
    if p.prune {
        lines.extend(prune(host, types, p, selector).await?);
    }
    Ok(lines)
}

/// What applying one object would do to the host's (one read).
async fn proposed(host: &Host, ar: &ApiResource, s: &Sourced) -> Result<Proposed> {
    let (ns, name) = key_of(&s.object);
    let live = dynamic_api(&host.client, Some(&ns), ar)
        .get_opt(&name)
        .await
        .map_err(|e| {
            anyhow!(
                "{}: reading {}: {}",
                s.source,
                describe_federated(&s.object),
                api_error_line(e)
            )
        })?
        .map(|l| serde_json::to_value(l).expect("objects serialize"));
    let (_, what) = proposal::overlay(
        live.into_iter().collect(),
        std::slice::from_ref(&s.object),
        None,
        "",
    );
    Ok(what.first().map_or(Proposed::Create, |(_, w)| *w))
}

/// One object, applied as `kubectl apply --server-side` would.
async fn server_side_apply(
    host: &Host,
    ar: &ApiResource,
    s: &Sourced,
    dry_run: bool,
    force: bool,
) -> Result<()> {
    let (ns, name) = key_of(&s.object);
    let api = dynamic_api(&host.client, Some(&ns), ar);
    let mut params = PatchParams::apply(FIELD_MANAGER);
    params.dry_run = dry_run;
    params.force = force;
    api.patch(&name, &params, &Patch::Apply(&s.object))
        .await
        .map_err(|e| {
            let conflict = matches!(&e, kube::Error::Api(s) if s.code == 409);
            let hint = if conflict {
                " (another field manager owns these fields: change them there, or --force-conflicts)"
            } else {
                ""
            };
            anyhow!(
                "{}: applying {}: {}{hint}",
                s.source,
                describe_federated(&s.object),
                api_error_line(e)
            )
        })?;
    Ok(())
}

/// Deletes the host objects of the files' types that `selector` selects
/// and the files lack.
async fn prune(
    host: &Host,
    types: &[ObservedType],
    p: &Proposal,
    selector: Option<&str>,
) -> Result<Vec<String>> {
    let selector = selector.ok_or_else(|| anyhow!("--prune needs -l SELECTOR"))?;
    let mut lines = Vec::new();
    let mut seen_types: Vec<&ObservedType> = Vec::new();
    for s in &p.federated {
        let t = type_of(types, s)?;
        if !seen_types.iter().any(|x| x.name == t.name) {
            seen_types.push(t);
        }
    }
    for t in seen_types {
        // Only in the namespaces the files name, as kubectl apply --prune.
        let namespaces: BTreeSet<String> = p
            .federated
            .iter()
            .filter(|s| s.object["kind"] == t.federated.kind.as_str())
            .map(|s| key_of(&s.object).0)
            .collect();
        let mut listed = Vec::new();
        for ns in &namespaces {
            let api = dynamic_api(&host.client, Some(ns), &t.federated);
            listed.extend(
                crate::sync::observe::list_all(&api, &ListParams::default().labels(selector))
                    .await?,
            );
        }
        for h in listed {
            let key = key_of(&h);
            if p.federated
                .iter()
                .any(|s| key_of(&s.object) == key && s.object["kind"] == t.federated.kind.as_str())
                || !h["metadata"]["deletionTimestamp"].is_null()
            {
                continue;
            }
            dynamic_api(&host.client, Some(&key.0), &t.federated)
                .delete(&key.1, &DeleteParams::background())
                .await
                .map_err(|e| {
                    anyhow!(
                        "pruning {}: {}",
                        crate::core::describe::describe_key(&t.federated.kind, &key),
                        api_error_line(e)
                    )
                })?;
            lines.push(format!(
                "host: deleted (pruned) {}",
                crate::core::describe::describe_key(&t.federated.kind, &key)
            ));
        }
    }
    Ok(lines)
}
