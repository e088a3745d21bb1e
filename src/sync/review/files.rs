//! `reconcile -f PATH`: a change under review, read from files. With
//! `--dry-run` its objects take the place of the host's in the observation
//! (`core::propagation::proposal`), so the plan is the change's; without, they are
//! server-side applied to the host (field manager `kubefedctl`) under the
//! run lock before the run propagates them: one command, one credential.

use crate::api::scheduling::ReplicaSchedulingPreference;
use crate::apply::{api_error_line, dynamic_api, resource_of};
use crate::clients::host::Host;
use crate::core::describe::{ObjectKey, describe_federated, key_of};
use crate::core::outcome::{Change, Place};
use crate::core::propagation::field_owners;
use crate::core::propagation::proposal::{self, Proposed};
use crate::sync::render::{self, Sourced};
use crate::sync::run::observe::{Observation, ObservedType, federated_namespaces};
use anyhow::{Result, anyhow, bail};
use kube::api::{ApiResource, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

/// The field manager of every apply.
pub const FIELD_MANAGER: &str = "kubefedctl";

/// The federated objects (FederatedNamespaces included) and RSPs of a
/// change, each with the file and document it came from.
#[derive(Clone, Debug, Default)]
pub struct Proposal {
    /// As read: a namespaced object without a namespace takes `namespace`
    /// once its type is known ([`resolved`]).
    pub federated: Vec<Sourced>,
    /// `-n`: the namespace of namespaced objects that give none.
    pub namespace: Option<String>,
    pub rsps: Vec<Sourced>,
    /// `--prune`: host objects of the files' federated types that the run
    /// selects (`-l`) and the files lack are deleted.
    pub prune: bool,
}

/// Reads `-f` paths. Anything but federated objects and RSPs is an error
/// naming its file and document; so is an RSP without a namespace when
/// `-n` gives none, an object given twice and overrides that cannot be
/// read. Whether a federated object needs a namespace depends on its type
/// (`FederatedClusterRole` is cluster-scoped), known once the host is
/// read ([`resolved`]).
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
        .chain(&inputs.crds)
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
        namespace: namespace.map(str::to_string),
        rsps: inputs.rsps,
        prune,
    };
    for s in p.rsps.iter_mut() {
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

/// The proposal's federated objects as the host will hold them: each of
/// an enabled type (an error naming its file and document otherwise), a
/// namespaced one in its namespace (or `-n`'s), a cluster-scoped one in
/// none. Checked before anything is written.
pub fn resolved(types: &[ObservedType], p: &Proposal) -> Result<Vec<Sourced>> {
    let mut out = Vec::with_capacity(p.federated.len());
    let mut filled = false;
    for s in &p.federated {
        let t = type_of(types, s)?;
        let mut s = s.clone();
        let given = key_of(&s.object).namespace;
        match (t.federated_namespaced, given.is_empty(), &p.namespace) {
            (true, false, _) | (false, true, _) => {}
            (true, true, Some(ns)) => {
                s.object["metadata"]["namespace"] = ns.as_str().into();
                filled = true;
            }
            (true, true, None) => bail!(
                "{}: {} has no metadata.namespace (give one, or -n)",
                s.source,
                describe_federated(&s.object)
            ),
            (false, false, _) => bail!(
                "{}: {} is cluster-scoped: remove its metadata.namespace {given:?}",
                s.source,
                describe_federated(&s.object)
            ),
        }
        out.push(s);
    }
    // `load` checked the objects as read; a namespace given by `-n` may
    // make two of them one.
    if filled {
        render::check_federated(&out)?;
    }
    Ok(out)
}

/// The dry run: the proposal's objects take the place of the host's in
/// `seen` (types the files do not name are left as they are). Returns the
/// change to each host object the proposal creates, updates or prunes.
pub fn overlay(seen: &mut Observation, p: &Proposal, now: &str) -> Result<Vec<Change>> {
    let federated = resolved(&seen.types, p)?;
    let mut lines = Vec::new();
    for t in &mut seen.types {
        let files: Vec<Value> = federated
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
        let namespaces: BTreeSet<String> = files.iter().map(|f| key_of(f).namespace).collect();
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
            lines.push(Change::new(
                Place::Host,
                verb,
                crate::core::describe::describe_key(&t.federated.kind, &key),
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
/// member copies). Returns each host change.
pub async fn apply(
    host: &Host,
    types: &[ObservedType],
    p: &Proposal,
    selector: Option<&str>,
    force_conflicts: bool,
) -> Result<Vec<Change>> {
    let federated = resolved(types, p)?;
    let rsp = resource_of::<ReplicaSchedulingPreference>();
    let mut sourced: Vec<(&Sourced, &ApiResource)> = Vec::new();
    for s in &federated {
        sourced.push((s, &type_of(types, s)?.federated));
    }
    let federated = sourced.len();
    sourced.extend(p.rsps.iter().map(|s| (s, &rsp)));
    let prune_selector = match (p.prune, selector) {
        (false, _) => None,
        (true, Some(sel)) => Some(
            crate::core::propagation::placement::Selector::parse_flag(sel)
                .map_err(|e| anyhow!("-l {sel:?}: {e}"))?,
        ),
        (true, None) => bail!("--prune needs -l SELECTOR"),
    };
    let Proposals {
        mut targets,
        pruned,
        client_side,
    } = proposed(host, sourced, federated, prune_selector.as_ref()).await?;
    // Unchanged objects are not applied: a second run writes nothing.
    targets.retain(|(_, _, what)| *what != Proposed::Unchanged);
    let mut taken_over = Vec::new();
    for (s, ar, _) in &targets {
        let key = (ar.group.clone(), ar.plural.clone(), key_of(&s.object));
        if let Some(owners) = client_side.get(&key) {
            taken_over.push(take_over_client_side_fields(host, ar, s, owners).await?);
        }
    }
    for pass in [Pass::Validate, Pass::Apply] {
        for (s, ar, _) in &targets {
            server_side_apply(host, ar, s, pass, force_conflicts).await?;
        }
    }
    let mut lines = taken_over;
    lines.extend(targets.iter().map(|(s, _, what)| {
        let verb = if *what == Proposed::Create {
            "created"
        } else {
            "configured"
        };
        Change::new(Place::Host, verb, describe_federated(&s.object))
    }));
    lines.extend(prune(host, pruned).await?);
    Ok(lines)
}

/// The files' objects by the list that holds them on the host, (group,
/// plural, namespace): its resource, whether it is a federated type, and
/// the objects.
type FilesByList<'a> = BTreeMap<(String, String, String), (&'a ApiResource, bool, Vec<Value>)>;

/// What applying the files does to the host, as [`proposed`] finds it.
struct Proposals<'s> {
    /// Each object of the files, with what applying it would do.
    targets: Vec<(&'s Sourced, &'s ApiResource, Proposed)>,
    /// With `--prune`: the host objects to delete.
    pruned: Vec<(&'s ApiResource, ObjectKey)>,
    /// Host objects whose fields `kubectl apply` (client-side) owns: their
    /// `managedFields` with those fields ours, and the resourceVersion they
    /// were read at, by (group, plural, key).
    client_side: HashMap<(String, String, ObjectKey), (Vec<Value>, String)>,
}

/// What applying each object would do to the host's, and with `prune`
/// the host objects to delete: one list per type and namespace the files
/// name (not one read per object), decided by the plan's own rule
/// (`core::propagation::proposal::overlay`). The first `federated` of `sourced` are
/// federated objects (only their types are pruned).
async fn proposed<'s>(
    host: &Host,
    sourced: Vec<(&'s Sourced, &'s ApiResource)>,
    federated: usize,
    prune: Option<&crate::core::propagation::placement::Selector>,
) -> Result<Proposals<'s>> {
    // (group, plural, namespace) → the files' objects there.
    let mut groups: FilesByList = BTreeMap::new();
    for (i, (s, ar)) in sourced.iter().enumerate() {
        let ns = key_of(&s.object).namespace;
        groups
            .entry((ar.group.clone(), ar.plural.clone(), ns))
            .or_insert((ar, i < federated, Vec::new()))
            .2
            .push(s.object.clone());
    }
    let mut found: HashMap<(String, String, ObjectKey), Proposed> = HashMap::new();
    let mut pruned = Vec::new();
    let mut client_side = HashMap::new();
    for ((group, plural, ns), (ar, is_federated, files)) in groups {
        let listed = crate::sync::run::observe::list_all(
            &dynamic_api(&host.client, Some(&ns), ar),
            &ListParams::default(),
        )
        .await
        .map_err(|e| anyhow!("reading {plural} in {ns}: {}", crate::error::one_line(&e)))?;
        if let (Some(sel), true) = (prune, is_federated) {
            let selected: Vec<Value> = listed
                .iter()
                .filter(|o| sel.matches(&crate::sync::run::observe::labels_of(o)))
                .cloned()
                .collect();
            let here: BTreeSet<String> = [ns.clone()].into();
            pruned.extend(
                proposal::overlay(selected, &files, Some(&here), "")
                    .1
                    .into_iter()
                    .filter(|(_, w)| *w == Proposed::Prune)
                    .map(|(key, _)| (ar, key)),
            );
        }
        // Only the files' objects are applied, so only theirs are taken over.
        let in_files: BTreeSet<ObjectKey> = files.iter().map(key_of).collect();
        for o in listed.iter().filter(|o| in_files.contains(&key_of(o))) {
            let owners = o["metadata"]["managedFields"].as_array();
            let taken = owners.and_then(|m| {
                field_owners::take_over(m, field_owners::KUBECTL_CLIENT_SIDE_APPLY, FIELD_MANAGER)
            });
            if let Some(managed) = taken {
                let rv = o["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                client_side.insert((group.clone(), plural.clone(), key_of(o)), (managed, rv));
            }
        }
        for (key, what) in proposal::overlay(listed, &files, None, "").1 {
            found.insert((group.clone(), plural.clone(), key), what);
        }
    }
    let targets = sourced
        .into_iter()
        .map(|(s, ar)| {
            let key = (ar.group.clone(), ar.plural.clone(), key_of(&s.object));
            (s, ar, found.get(&key).copied().unwrap_or(Proposed::Create))
        })
        .collect();
    Ok(Proposals {
        targets,
        pruned,
        client_side,
    })
}

/// Takes over the fields `kubectl apply` (client-side) wrote on an object
/// about to be applied, as `kubectl apply --server-side` does once per
/// object (client-go's `csaupgrade`): its `managedFields` rewritten, at
/// the resourceVersion they were read at (a change meanwhile fails it).
/// Nothing else of the object changes; fields of other managers still
/// conflict.
async fn take_over_client_side_fields(
    host: &Host,
    ar: &ApiResource,
    s: &Sourced,
    (managed, rv): &(Vec<Value>, String),
) -> Result<Change> {
    let ObjectKey {
        namespace: ns,
        name,
    } = key_of(&s.object);
    // A merge patch replaces the list whole; the resourceVersion makes it
    // conditional, as upstream's JSON patch does.
    let patch = serde_json::json!({"metadata": {"managedFields": managed, "resourceVersion": rv}});
    dynamic_api(&host.client, Some(&ns), ar)
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| {
            anyhow!(
                "{}: taking over the fields kubectl apply wrote on {}: {}",
                s.source,
                describe_federated(&s.object),
                api_error_line(e)
            )
        })?;
    Ok(Change::new(
        Place::Host,
        "took over the fields kubectl apply (client-side) wrote on",
        describe_federated(&s.object),
    ))
}

/// The two passes over the files: each object sent as a server-side dry
/// run first, so that one the server refuses stops the run before any is
/// written; then each applied.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    Validate,
    Apply,
}

/// One object, applied as `kubectl apply --server-side` would.
async fn server_side_apply(
    host: &Host,
    ar: &ApiResource,
    s: &Sourced,
    pass: Pass,
    force: bool,
) -> Result<()> {
    let ObjectKey {
        namespace: ns,
        name,
    } = key_of(&s.object);
    let api = dynamic_api(&host.client, Some(&ns), ar);
    let mut params = PatchParams::apply(FIELD_MANAGER);
    params.dry_run = pass == Pass::Validate;
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

/// Deletes the host objects `proposed` found to prune (their finalizer
/// keeps them until the run that follows has removed their member copies).
async fn prune(host: &Host, pruned: Vec<(&ApiResource, ObjectKey)>) -> Result<Vec<Change>> {
    let mut lines = Vec::new();
    for (ar, key) in pruned {
        let what = crate::core::describe::describe_key(&ar.kind, &key);
        dynamic_api(&host.client, Some(&key.namespace), ar)
            .delete(&key.name, &DeleteParams::background())
            .await
            .map_err(|e| anyhow!("pruning {what}: {}", api_error_line(e)))?;
        lines.push(Change::new(Place::Host, "deleted (pruned)", what));
    }
    Ok(lines)
}
