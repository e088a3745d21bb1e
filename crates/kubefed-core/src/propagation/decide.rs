//! The decide step of a reconcile: from what was observed (the host's
//! federated objects, the members' objects) to what each member should get,
//! what the host must hold before member writes (the sync finalizer), and
//! what to tell the user.
//!
//! One function for every mode: the live engine observes, then executes
//! what this decides (`src/sync/live/`); the offline render calls the
//! same step with members that hold nothing (`src/sync/render/`).
//! Upstream's per-key reconcile is `pkg/controller/sync/controller.go`
//! (`reconcile`, `syncToClusters`, `ensureDeletion`).

use crate::run::scope::RunScope;
use crate::run::settings::objects_namespace;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use crate::cluster::membership::Scope;
use crate::outcome::{Failure, Place};
use crate::propagation::action::{Action, ClusterStatus, Decision};
use crate::propagation::deletion::{self, DeletionPlan, SYNC_FINALIZER};
use crate::propagation::desired::TargetType;
use crate::propagation::drift;
use crate::propagation::federated::FederatedObject;
use crate::propagation::member::{self, ManagedLabel, MemberState, SyncSettings};
use crate::propagation::placement::{Cluster, NamespacedPlacement, PlacementError, sync_placement};
use crate::propagation::status::AggregateReason;
use crate::propagation::strategy;
use crate::propagation::version::{member_version, propagated_version_name};
use crate::run::shard;

use crate::describe::{KeyParts, ObjectKey, describe_key, key_of};
use crate::object_text::ObjectText;

/// The federation as one run sees it, the same for every object.
#[derive(Clone, Copy, Debug)]
pub struct Federation<'a> {
    /// The federation's own namespace (a system namespace in members).
    pub kubefed_namespace: &'a str,
    pub scope: Scope,
    pub settings: SyncSettings,
    /// Every registered member, with labels and readiness: placement sees
    /// all of them.
    pub clusters: &'a [Cluster],
    /// What this run covers (`--cluster`, `-n`, `-l`, `--shard`).
    pub run: &'a RunScope,
    /// FederatedNamespaces by namespace.
    pub fed_namespaces: &'a BTreeMap<String, Value>,
    /// The host's namespaces: name → UID (a member that *is* the host
    /// holds the host's own namespace, which is never deleted).
    pub host_namespaces: &'a HashMap<String, String>,
    /// PropagatedVersions and ClusterPropagatedVersions by key.
    pub versions: &'a HashMap<ObjectKey, Value>,
}

impl Federation<'_> {
    /// Whether the run may write to `cluster` (`--cluster`). Placement
    /// still sees every member.
    pub fn touches(&self, cluster: &str) -> bool {
        self.run.touches(cluster)
    }

    /// The one namespace the run reads federated objects from (`-n`, or
    /// a namespace-scoped federation's own); `None`: every namespace.
    pub fn objects_namespace(&self) -> Option<&str> {
        objects_namespace(
            self.scope,
            self.kubefed_namespace,
            self.run.namespace.as_deref(),
        )
    }
}

/// One enabled federated type.
#[derive(Clone, Debug)]
pub struct FederatedType {
    pub target: TargetType,
    /// `FederatedDeployment`.
    pub federated_kind: String,
    /// `deployments`.
    pub target_plural: String,
    pub namespaced: bool,
}

impl FederatedType {
    /// `deployments.apps/v1`, as messages name a target type.
    pub fn target_name(&self) -> String {
        match self.target.group.as_str() {
            "" => format!("{}/{}", self.target_plural, self.target.version),
            g => format!("{}.{g}/{}", self.target_plural, self.target.version),
        }
    }
}

/// What a ready member holds of one type.
#[derive(Clone, Debug)]
pub enum Listing {
    /// Every object of the type in the listed scope, by key.
    Listed(HashMap<ObjectKey, ObjectText>),
    /// The member does not serve the type (404 on its list); the api
    /// versions in which it serves the same resource instead, if any.
    NotServed(Vec<String>),
    /// The list failed for another reason: why.
    Failed(String),
}

/// What the host must do with the sync finalizer before member writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinalizerStep {
    /// Present, or not wanted.
    Keep,
    /// Add it before any member write (upstream `ensureFinalizer`), so
    /// that a run killed after member writes still leaves the federated
    /// object's deletion to reconcile.
    AddFirst,
    /// A system namespace's FederatedNamespace carries it (kubefedctl
    /// before system namespaces were ignored added it): remove it, or
    /// deleting that FederatedNamespace waits for ever.
    RemoveStray,
}

/// Everything decided for one federated object.
#[derive(Clone, Debug)]
pub struct ObjectPlan {
    pub key: ObjectKey,
    /// One decision per touched member.
    pub decisions: Vec<Decision>,
    pub reason: AggregateReason,
    /// The placement (clusters selected).
    pub selected: BTreeSet<String>,
    pub deletion: Option<DeletionPlan>,
    pub pv_name: String,
    pub pv_status: Option<Value>,
    /// Member versions of `Unchanged` decisions (recorded as they are).
    pub unchanged_versions: BTreeMap<String, String>,
    pub finalizer: FinalizerStep,
    /// Status and PropagatedVersion are written after the member phase
    /// (not for ignored objects).
    pub record: bool,
    /// Why placement could not be computed (`ComputePlacementFailed`).
    pub placement_error: Option<String>,
    /// Lines for the report.
    pub failures: Vec<Failure>,
    pub notes: Vec<String>,
    /// Conflicts with another field manager of a member object
    /// (`foreign`), one line each.
    pub warnings: Vec<String>,
    /// Report-only (`strategy`): nothing is written to the members, the
    /// PropagatedVersion's status stays as it was.
    pub report_only: bool,
    /// The first-seen times of its drift as recorded
    /// ([`drift::DRIFT_ANNOTATION`] of its PropagatedVersion).
    pub drift_record: Option<String>,
    /// Its pull members, as their agents reported (`report`): filled by
    /// the host's run after the decide step, empty elsewhere.
    pub pulled: crate::propagation::report::Pulled,
}

impl ObjectPlan {
    /// Its (Cluster)PropagatedVersion's key, borrowed, for looking it up
    /// in a map of [`ObjectKey`]s (`KeyParts`).
    pub fn pv_key(&self) -> (&str, &str) {
        (&self.key.namespace, &self.pv_name)
    }

    fn ignored(key: ObjectKey, pv_name: String) -> ObjectPlan {
        ObjectPlan {
            key,
            decisions: Vec::new(),
            reason: AggregateReason::Success,
            selected: BTreeSet::new(),
            deletion: None,
            pv_name,
            pv_status: None,
            unchanged_versions: BTreeMap::new(),
            finalizer: FinalizerStep::Keep,
            record: false,
            placement_error: None,
            failures: Vec::new(),
            notes: Vec::new(),
            warnings: Vec::new(),
            report_only: false,
            drift_record: None,
            pulled: Default::default(),
        }
    }
}

/// The key a federated object's copy has in a member: the same, without
/// the namespace for a cluster-scoped target (a FederatedNamespace `x/x`
/// is the Namespace `x`). The one rule; the engines ask it.
pub fn member_key(t: &FederatedType, key: &ObjectKey) -> ObjectKey {
    let (namespace, name) = member_key_parts(t, key);
    ObjectKey::new(namespace, name)
}

/// [`member_key`], borrowed: for looking a copy up (`KeyParts`).
pub fn member_key_parts<'k>(t: &FederatedType, key: &'k ObjectKey) -> (&'k str, &'k str) {
    match t.namespaced {
        true => (&key.namespace, &key.name),
        false => ("", &key.name),
    }
}

/// Whether a member object of this type (by its key there) is within
/// `objects_namespace` (`-n`, or a namespace-scoped federation's own):
/// there, cluster-scoped objects other than the namespace itself are out
/// of reach.
pub fn in_reach(t: &FederatedType, member: &ObjectKey, objects_namespace: Option<&str>) -> bool {
    match objects_namespace {
        None => true,
        Some(ns) if t.namespaced => member.namespace == ns,
        Some(ns) => t.target.is_namespace() && member.name == ns,
    }
}

/// The key of the federated object a member object of this type belongs
/// to: a Namespace `x` belongs to the FederatedNamespace `x/x`.
pub fn federated_key(t: &FederatedType, member: &ObjectKey) -> ObjectKey {
    if t.target.is_namespace() {
        ObjectKey::new(member.name.clone(), member.name.clone())
    } else {
        member_key(t, member)
    }
}

/// Orphans are only deleted or unlabelled: no override is chosen for them.
static NO_LABELS: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();

/// The decisions for one federated object (upstream `reconcile` for one
/// key). `members` holds the listing of every ready touched member.
pub fn decide_object(
    fed: &Federation,
    t: &FederatedType,
    obj: &Value,
    members: &BTreeMap<String, Listing>,
) -> ObjectPlan {
    let obj = FederatedObject::new(obj);
    let key = obj.key();
    let what = describe_key(&t.federated_kind, &key);
    let pv_name = propagated_version_name(&t.target.kind, &key.name);
    let is_namespace = t.target.is_namespace();
    if is_namespace && member::is_system_namespace(&key.name, fed.kubefed_namespace) {
        // Upstream `pkg/controller/sync/accessor.go` (`isSystemNamespace`):
        // never adopted, labelled, finalized or deleted; it still places
        // the objects inside the namespace.
        return system_namespace_plan(obj, key, pv_name, &what);
    }
    if is_namespace && !member::federated_namespace_name_is_valid(obj.value()) {
        return invalid_namespace_plan(key, pv_name, &what);
    }
    let strategy = match strategy::Strategy::of(
        &t.target.type_annotations,
        obj.value(),
        fed.settings.adopt_resources,
        fed.settings.report_only,
    ) {
        Ok(s) => s,
        Err(e) => return invalid_strategy_plan(key, pv_name, &what, e),
    };
    let deleting = obj.being_deleted();
    let states = member_states(fed, t, &key, members, deleting);
    let placement = object_placement(fed, t, obj, &key);
    let mut p = ObjectPlan::ignored(key, pv_name);
    p.record = true;
    p.report_only = strategy.reports_only();
    let pv = fed.versions.get(&p.pv_key() as &dyn KeyParts);
    p.pv_status = pv.map(|v| v.get("status").cloned().unwrap_or(Value::Null));
    p.drift_record = pv
        .and_then(|v| {
            v.pointer("/metadata/annotations")?
                .get(drift::DRIFT_ANNOTATION)?
                .as_str()
        })
        .map(str::to_string);
    if deleting && p.report_only {
        // Nothing of a report-only object is deleted in the members: its
        // copies stay as they are, and a finalizer left from an earlier
        // push goes at once.
        p.deletion = Some(DeletionPlan {
            has_finalizer: obj.has_finalizer(SYNC_FINALIZER),
            remove_finalizer: obj.has_finalizer(SYNC_FINALIZER),
            ..DeletionPlan::default()
        });
        return p;
    }
    if deleting {
        plan_deletion(&mut p, obj, placement, &states, &what);
        return p;
    }
    if !obj.has_finalizer(SYNC_FINALIZER) && !p.report_only {
        p.finalizer = FinalizerStep::AddFirst;
    }
    plan_sync(&mut p, fed, t, obj, placement, &states, strategy);
    note_decisions(&mut p, t, &states);
    p
}

/// A system namespace's FederatedNamespace: left alone, but a stray sync finalizer must go.
fn system_namespace_plan(
    obj: FederatedObject,
    key: ObjectKey,
    pv_name: String,
    what: &str,
) -> ObjectPlan {
    let mut p = ObjectPlan::ignored(key, pv_name);
    if obj.has_finalizer(SYNC_FINALIZER) {
        p.finalizer = FinalizerStep::RemoveStray;
    }
    p.notes.push(format!(
        "{what}: ignored: {:?} is a system namespace, never propagated (the objects in it still are)",
        p.key.name
    ));
    p
}

/// An object whose take-over or apply annotation (or its type's) is not
/// one of the names: failed, nothing of it written.
fn invalid_strategy_plan(key: ObjectKey, pv_name: String, what: &str, why: String) -> ObjectPlan {
    let mut p = ObjectPlan::ignored(key, pv_name);
    p.failures.push(Failure::of_federated(what, why));
    p
}

/// A FederatedNamespace not named after its namespace: reported, never reconciled.
fn invalid_namespace_plan(key: ObjectKey, pv_name: String, what: &str) -> ObjectPlan {
    let mut p = ObjectPlan::ignored(key, pv_name);
    p.failures.push(Failure::of_federated(
        what,
        "the name of a federated namespace must match its namespace",
    ));
    p
}

/// Each touched member's view of the object (ready, observed, live copy), as `plan` takes it.
fn member_states<'a>(
    fed: &Federation<'a>,
    t: &FederatedType,
    key: &ObjectKey,
    members: &'a BTreeMap<String, Listing>,
    deleting: bool,
) -> Vec<MemberState<'a>> {
    let is_namespace = t.target.is_namespace();
    let live_key = member_key_parts(t, key);
    fed.clusters
        .iter()
        .filter(|c| fed.touches(&c.name))
        .map(|c| {
            let (live, unobserved) = match members.get(&c.name) {
                _ if !c.ready => (None, None),
                Some(Listing::Listed(objects)) => {
                    let live = objects.get(&live_key as &dyn KeyParts);
                    (live.map(ObjectText::value), None)
                }
                // Nothing of the type can exist there: nothing to delete.
                Some(Listing::NotServed(_)) if deleting => (None, None),
                Some(Listing::NotServed(_)) => (None, Some("the type is not served there")),
                Some(Listing::Failed(why)) => (None, Some(why.as_str())),
                None => (None, Some("not listed")),
            };
            let is_host_namespace = is_namespace
                && live.as_ref().is_some_and(|l| {
                    fed.host_namespaces.get(&key.name).is_some_and(|uid| {
                        l.pointer("/metadata/uid").and_then(Value::as_str) == Some(uid)
                    })
                });
            MemberState {
                cluster: &c.name,
                labels: &c.labels,
                ready: c.ready,
                live,
                is_host_namespace,
                unobserved,
            }
        })
        .collect()
}

/// The object's placement (a namespaced object's depends on its FederatedNamespace too).
fn object_placement(
    fed: &Federation,
    t: &FederatedType,
    obj: FederatedObject,
    key: &ObjectKey,
) -> Result<NamespacedPlacement, PlacementError> {
    let fed_namespace = if t.namespaced {
        fed.fed_namespaces.get(&key.namespace)
    } else {
        None
    };
    sync_placement(
        obj,
        fed_namespace,
        fed.clusters,
        fed.scope,
        t.namespaced && !t.target.is_namespace(),
    )
}

/// Deletion: the placed members' copies go or lose the label; what blocks it is reported.
fn plan_deletion(
    p: &mut ObjectPlan,
    obj: FederatedObject,
    placement: Result<NamespacedPlacement, PlacementError>,
    states: &[MemberState],
    what: &str,
) {
    let placed = placement
        .as_ref()
        .map(|p| p.clusters.clone())
        .unwrap_or_default();
    match deletion::deletion_decisions(obj, &placed, states) {
        Ok(d) => {
            let blocked = d.blocked_by();
            if !blocked.is_empty() {
                p.failures.push(Failure::of_federated(
                    what,
                    format!(
                        "deletion waits for clusters that are not ready or not observed: {}",
                        blocked.join(", ")
                    ),
                ));
            }
            p.decisions = d.decisions.clone();
            p.deletion = Some(d);
        }
        Err(e) => {
            p.record = false;
            p.failures.push(Failure::of_federated(what, e.to_string()));
        }
    }
}

/// No deletion: one sync decision per touched member over the placement, or why there is none.
fn plan_sync(
    p: &mut ObjectPlan,
    fed: &Federation,
    t: &FederatedType,
    obj: FederatedObject,
    placement: Result<NamespacedPlacement, PlacementError>,
    states: &[MemberState],
    strategy: strategy::Strategy,
) {
    let what = &describe_key(&t.federated_kind, &p.key);
    match placement {
        Ok(placement) => {
            if placement.namespace_not_federated {
                p.reason = AggregateReason::NamespaceNotFederated;
            }
            p.decisions = member::sync_decisions(
                obj,
                &t.target,
                &placement.clusters,
                states,
                p.pv_status.as_ref(),
                fed.settings,
                strategy,
            );
            member::hold_on_member_value_failure(
                obj.value(),
                &placement.clusters,
                fed.clusters,
                &mut p.decisions,
            );
            p.selected = placement.clusters;
        }
        Err(e) => {
            p.failures.push(Failure::of_federated(what, e.to_string()));
            p.placement_error = Some(e.to_string());
            p.reason = AggregateReason::ComputePlacementFailed;
        }
    }
}

/// From the decisions: unchanged copies' versions (recorded as is), skipped members' lines.
fn note_decisions(p: &mut ObjectPlan, t: &FederatedType, states: &[MemberState]) {
    for d in &p.decisions {
        // A conflict with another field manager (`foreign`): the update's
        // (or the unchanged copy's) message.
        if let (Action::Update { .. } | Action::Unchanged, Some(ClusterStatus::Ok), Some(m)) =
            (&d.action, d.status, &d.message)
        {
            let what = describe_key(&t.target.kind, &p.key);
            p.warnings.push(format!("{}: {what}: {m}", d.cluster));
        }
        match (&d.action, d.status) {
            (Action::Unchanged, _) => {
                if let Some(live) = states
                    .iter()
                    .find(|s| s.cluster == d.cluster)
                    .and_then(|s| s.live.as_ref())
                {
                    p.unchanged_versions
                        .insert(d.cluster.clone(), member_version(live));
                }
            }
            // Reported once per member and type (see [`decide`]).
            (_, Some(ClusterStatus::ClusterNotReady | ClusterStatus::CachedRetrievalFailed)) => {}
            (Action::Skip, status) => p.failures.push(Failure::of(
                Place::member(&d.cluster),
                describe_key(&t.target.kind, &p.key),
                d.message
                    .clone()
                    .unwrap_or_else(|| status.map(|s| s.as_str().to_string()).unwrap_or_default()),
            )),
            _ => {}
        }
    }
}

/// A labelled member object whose federated object is gone (upstream's
/// "possible orphan"): it loses the managed label.
#[derive(Clone, Debug)]
pub struct Orphan {
    pub decision: Decision,
    pub live: Value,
}

/// The possible orphans of one type in its members' listings, in the
/// run's scope (`fed.run`: none with `-l`, whose members' labelled objects
/// cannot be matched to federated objects that were not listed; only its
/// shard's; with `-n`, only that namespace). `only`: a watch round over
/// some objects looks for orphans among these keys alone (every other
/// member object was not looked at).
pub fn orphans(
    fed: &Federation,
    t: &FederatedType,
    objects: &[Value],
    members: &BTreeMap<String, Listing>,
    only: Option<&BTreeSet<ObjectKey>>,
) -> Vec<Orphan> {
    // `-l` cannot tell; a report-only run writes nothing.
    if fed.run.selector.is_some() || fed.settings.report_only {
        return Vec::new();
    }
    let federated: BTreeSet<ObjectKey> = objects.iter().map(key_of).collect();
    let mut out = Vec::new();
    for (cluster, listing) in members {
        let Listing::Listed(objs) = listing else {
            continue;
        };
        if !fed.touches(cluster) {
            continue;
        }
        let mut keys: Vec<&ObjectKey> = objs.keys().collect();
        keys.sort();
        for k in keys {
            let fed_key = federated_key(t, k);
            if federated.contains(&fed_key)
                || !shard::owned(fed.run.shard, &fed_key)
                || only.is_some_and(|only| !only.contains(&fed_key))
            {
                continue;
            }
            // Parsed only for a copy no federated object accounts for.
            let obj = objs[k].value();
            if member::managed_label(&obj) != ManagedLabel::True {
                continue;
            }
            if t.target.is_namespace()
                && member::is_system_namespace(&k.name, fed.kubefed_namespace)
            {
                continue;
            }
            if !in_reach(t, k, fed.objects_namespace()) {
                continue;
            }
            let state = MemberState {
                cluster,
                labels: &NO_LABELS,
                ready: true,
                live: Some(obj.clone()),
                is_host_namespace: false,
                unobserved: None,
            };
            for decision in deletion::orphan_cleanup_decisions(&[state]).0 {
                out.push(Orphan {
                    decision,
                    live: obj.clone(),
                });
            }
        }
    }
    out
}

/// Why `cluster` cannot hold a type whose target (`plural` in
/// `group`/`version`, as its FederatedTypeConfig names it) it answers 404
/// for. `elsewhere`: the api versions in which the member serves the same
/// resource (its discovery): a version a FederatedTypeConfig made years
/// ago may have been removed (Ingress `extensions/v1beta1` in 1.22, CronJob
/// `batch/v1beta1` in 1.25...). Within the same group, `enable --version`
/// moves the type; without any, the member lacks the resource (a CRD).
pub fn not_served(
    cluster: &str,
    plural: &str,
    group: &str,
    version: &str,
    elsewhere: &[String],
) -> Failure {
    let qualified = |g: &str| match g {
        "" => plural.to_string(),
        g => format!("{plural}.{g}"),
    };
    let target = format!("{}/{version}", qualified(group));
    let at = |why: String| Failure::at(Place::member(cluster), why);
    if elsewhere.is_empty() {
        return at(format!(
            "does not serve {target} (install the CRD in {cluster})"
        ));
    }
    let ftc = qualified(group);
    let mut out = format!(
        "does not serve {target}, the target of FederatedTypeConfig {ftc}; it serves {plural} in {}",
        elsewhere.join(", ")
    );
    // `enable --version` moves a type within its group, and to an
    // equivalent API of another group (the same resource served there).
    let target_gv = match group {
        "" => version.to_string(),
        g => format!("{g}/{version}"),
    };
    let movable = elsewhere.iter().find_map(|av| {
        let (g, v) = av.rsplit_once('/').unwrap_or(("", av.as_str()));
        (g == group || crate::types::lookup::equivalent(plural, &target_gv, av)).then_some((g, v))
    });
    if let Some((g, v)) = movable {
        out.push_str(&format!(
            " (kubefedctl enable {} --version {v} moves the type)",
            qualified(g)
        ));
    }
    at(out)
}

/// Everything decided for one type.
#[derive(Clone, Debug)]
pub struct TypeDecisions {
    /// Aligned with the type's federated objects.
    pub objects: Vec<ObjectPlan>,
    pub orphans: Vec<Orphan>,
    /// One line per member whose objects of this type cannot be seen.
    pub failures: Vec<Failure>,
}

/// The decide step for one type: every federated object, the orphans, and
/// one line per member that does not serve the type or could not list it.
/// `only`: [`orphans`]'.
pub fn decide_type(
    fed: &Federation,
    t: &FederatedType,
    objects: &[Value],
    members: &BTreeMap<String, Listing>,
    only: Option<&BTreeSet<ObjectKey>>,
) -> TypeDecisions {
    let plans = objects
        .iter()
        .map(|o| decide_object(fed, t, o, members))
        .collect();
    complete_type(fed, t, objects, members, only, plans)
}

/// [`decide_type`] once each object has its plan: `plans` are
/// [`decide_object`]'s, in `objects`' order (a caller may compute them on
/// all cores, as each depends on its object alone).
pub fn complete_type(
    fed: &Federation,
    t: &FederatedType,
    objects: &[Value],
    members: &BTreeMap<String, Listing>,
    only: Option<&BTreeSet<ObjectKey>>,
    plans: Vec<ObjectPlan>,
) -> TypeDecisions {
    let mut failures = Vec::new();
    for (cluster, listing) in members {
        let mut failure = match listing {
            Listing::Listed(_) => continue,
            Listing::NotServed(elsewhere) => not_served(
                cluster,
                &t.target_plural,
                &t.target.group,
                &t.target.version,
                elsewhere,
            ),
            Listing::Failed(why) => Failure::at(
                Place::member(cluster),
                format!("listing {}: {why}", t.target_name()),
            ),
        };
        let affected = plans
            .iter()
            .flat_map(|p| &p.decisions)
            .filter(|d| {
                &d.cluster == cluster && d.status == Some(ClusterStatus::CachedRetrievalFailed)
            })
            .count();
        if affected > 0 {
            failure.why = format!(
                "{}; {affected} {} not propagated there",
                failure.why, t.federated_kind
            );
        }
        failures.push(failure);
    }
    TypeDecisions {
        orphans: orphans(fed, t, objects, members, only),
        objects: plans,
        failures,
    }
}

/// The two types the core's unit tests decide over most.
#[cfg(test)]
pub(crate) mod test_types {
    use super::FederatedType;
    use crate::propagation::desired::TargetType;

    pub fn configmaps() -> FederatedType {
        FederatedType {
            target: TargetType::new("", "v1", "ConfigMap"),
            federated_kind: "FederatedConfigMap".into(),
            target_plural: "configmaps".into(),
            namespaced: true,
        }
    }

    pub fn namespaces() -> FederatedType {
        FederatedType {
            target: TargetType::new("", "v1", "Namespace"),
            federated_kind: "FederatedNamespace".into(),
            target_plural: "namespaces".into(),
            namespaced: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_types::{configmaps, namespaces};
    use super::*;
    use crate::run::shard::Shard;
    use serde_json::json;

    const NS: &str = "kube-federation-system";

    struct World {
        clusters: Vec<Cluster>,
        fed_namespaces: BTreeMap<String, Value>,
        host_namespaces: HashMap<String, String>,
        versions: HashMap<ObjectKey, Value>,
        run: RunScope,
    }

    impl World {
        fn new() -> World {
            World {
                clusters: vec![Cluster::new("a", &[], true), Cluster::new("b", &[], true)],
                fed_namespaces: BTreeMap::new(),
                host_namespaces: HashMap::new(),
                versions: HashMap::new(),
                run: RunScope::default(),
            }
        }

        fn federation(&self) -> Federation<'_> {
            Federation {
                kubefed_namespace: NS,
                scope: Scope::Cluster,
                settings: SyncSettings {
                    adopt_resources: true,
                    force_conflicts: false,
                    report_only: false,
                },
                clusters: &self.clusters,
                run: &self.run,
                fed_namespaces: &self.fed_namespaces,
                host_namespaces: &self.host_namespaces,
                versions: &self.versions,
            }
        }
    }

    fn fed_ns(name: &str) -> Value {
        json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedNamespace",
               "metadata": {"name": name, "namespace": name},
               "spec": {"placement": {"clusterSelector": {}}}})
    }

    fn fed_cm(name: &str) -> Value {
        json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedConfigMap",
               "metadata": {"name": name, "namespace": "shop", "finalizers": [SYNC_FINALIZER]},
               "spec": {"template": {"data": {"k": "v"}}, "placement": {"clusterSelector": {}}}})
    }

    fn managed(kind: &str, ns: &str, name: &str) -> Value {
        let mut o = json!({"apiVersion": "v1", "kind": kind,
            "metadata": {"name": name, "resourceVersion": "3", "uid": format!("uid-{name}"),
                         "labels": {"kubefed.io/managed": "true"}}});
        if !ns.is_empty() {
            o["metadata"]["namespace"] = json!(ns);
        }
        o
    }

    fn listed(objs: &[Value]) -> Listing {
        Listing::Listed(
            objs.iter()
                .map(|o| (key_of(o), ObjectText::of(o)))
                .collect(),
        )
    }

    fn both(a: Listing, b: Listing) -> BTreeMap<String, Listing> {
        BTreeMap::from([("a".to_string(), a), ("b".to_string(), b)])
    }

    fn actions(p: &ObjectPlan) -> Vec<(String, &'static str, Option<ClusterStatus>)> {
        p.decisions
            .iter()
            .map(|d| (d.cluster.clone(), d.action.verb(), d.status))
            .collect()
    }

    fn row(
        c: &str,
        a: &'static str,
        s: Option<ClusterStatus>,
    ) -> (String, &'static str, Option<ClusterStatus>) {
        (c.to_string(), a, s)
    }

    #[test]
    fn system_namespaces_are_ignored_entirely() {
        let w = World::new();
        let f = w.federation();
        let member_default = managed("Namespace", "", "default");
        let members = both(listed(&[member_default]), listed(&[]));
        for name in ["default", "kube-system", "kube-public", NS] {
            let mut obj = fed_ns(name);
            obj["metadata"]["finalizers"] = json!([SYNC_FINALIZER, "other"]);
            let p = decide_object(&f, &namespaces(), &obj, &members);
            assert!(p.decisions.is_empty(), "{name}: no member action");
            assert!(!p.record, "{name}: no status");
            assert_eq!(p.finalizer, FinalizerStep::RemoveStray, "{name}");
            assert!(p.notes[0].contains("system namespace"), "{name}");
            // Being deleted: still nothing in members, the stray finalizer goes.
            obj["metadata"]["deletionTimestamp"] = json!("t");
            let p = decide_object(&f, &namespaces(), &obj, &members);
            assert!(p.decisions.is_empty() && p.deletion.is_none(), "{name}");
            assert_eq!(p.finalizer, FinalizerStep::RemoveStray, "{name}");
        }
        // Without our finalizer: nothing at all.
        let p = decide_object(&f, &namespaces(), &fed_ns("default"), &members);
        assert_eq!(p.finalizer, FinalizerStep::Keep);
        // A labelled member `default` without FederatedNamespace is no orphan.
        let t = namespaces();
        let orphans = orphans(&f, &t, &[], &members, None);
        assert!(orphans.is_empty());
        // An ordinary namespace is propagated, finalizer first.
        let p = decide_object(&f, &namespaces(), &fed_ns("shop"), &members);
        assert_eq!(p.finalizer, FinalizerStep::AddFirst);
        assert_eq!(
            actions(&p),
            vec![
                row("a", "create", Some(ClusterStatus::Ok)),
                row("b", "create", Some(ClusterStatus::Ok))
            ]
        );
    }

    #[test]
    fn a_member_serving_another_version_is_told_which() {
        assert_eq!(
            not_served(
                "m2",
                "ingresses",
                "extensions",
                "v1beta1",
                &["networking.k8s.io/v1".into()]
            )
            .to_string(),
            "m2: does not serve ingresses.extensions/v1beta1, the target of FederatedTypeConfig ingresses.extensions; it serves ingresses in networking.k8s.io/v1 (kubefedctl enable ingresses.networking.k8s.io --version v1 moves the type)"
        );
        assert_eq!(
            not_served("m2", "widgets", "a.example", "v1", &["b.example/v1".into()]).to_string(),
            "m2: does not serve widgets.a.example/v1, the target of FederatedTypeConfig widgets.a.example; it serves widgets in b.example/v1",
            "another group's resource of the same name is no move"
        );
        assert_eq!(
            not_served("m2", "cronjobs", "batch", "v1beta1", &["batch/v1".into()]).to_string(),
            "m2: does not serve cronjobs.batch/v1beta1, the target of FederatedTypeConfig cronjobs.batch; it serves cronjobs in batch/v1 (kubefedctl enable cronjobs.batch --version v1 moves the type)"
        );
        assert_eq!(
            not_served("b", "gizmos", "example.com", "v1", &[]).to_string(),
            "b: does not serve gizmos.example.com/v1 (install the CRD in b)"
        );
    }

    #[test]
    fn a_type_a_member_does_not_serve_fails_only_there() {
        let mut w = World::new();
        w.fed_namespaces.insert("shop".into(), fed_ns("shop"));
        let f = w.federation();
        let t = configmaps();
        let members = both(listed(&[]), Listing::NotServed(Vec::new()));
        let objects = [fed_cm("one"), fed_cm("two")];
        let d = decide_type(&f, &t, &objects, &members, None);
        for p in &d.objects {
            assert_eq!(
                actions(p),
                vec![
                    row("a", "create", Some(ClusterStatus::Ok)),
                    row("b", "skip", Some(ClusterStatus::CachedRetrievalFailed)),
                ]
            );
            assert!(p.failures.is_empty(), "reported once per member and type");
        }
        assert_eq!(
            d.failures,
            vec![Failure::at(
                Place::member("b"),
                "does not serve configmaps/v1 (install the CRD in b); 2 FederatedConfigMap not propagated there"
            )]
        );
        // Deleting: nothing of the type can be in b, so b does not block.
        let mut deleting = fed_cm("one");
        deleting["metadata"]["deletionTimestamp"] = json!("t");
        let p = decide_object(&f, &t, &deleting, &members);
        let del = p.deletion.unwrap();
        assert!(del.remove_finalizer && del.blocked_by().is_empty());
        // A list that failed for another reason blocks a deletion.
        let failed = both(listed(&[]), Listing::Failed("500".into()));
        let p = decide_object(&f, &t, &deleting, &failed);
        assert_eq!(p.deletion.unwrap().blocked_by(), vec!["b"]);
        assert!(p.failures[0].why.contains("not observed: b"));
    }

    #[test]
    fn finalizer_first_and_deletion_waits_for_terminating_copies() {
        let mut w = World::new();
        w.fed_namespaces.insert("shop".into(), fed_ns("shop"));
        let f = w.federation();
        let t = configmaps();
        let mut new = fed_cm("new");
        new["metadata"]["finalizers"] = json!([]);
        let p = decide_object(&f, &t, &new, &both(listed(&[]), listed(&[])));
        assert_eq!(p.finalizer, FinalizerStep::AddFirst);
        assert!(p.record);

        let mut deleting = fed_cm("x");
        deleting["metadata"]["deletionTimestamp"] = json!("t");
        let copy = managed("ConfigMap", "shop", "x");
        let mut terminating = copy.clone();
        terminating["metadata"]["deletionTimestamp"] = json!("t");
        let p = decide_object(
            &f,
            &t,
            &deleting,
            &both(listed(&[copy]), listed(&[terminating])),
        );
        assert_eq!(
            p.finalizer,
            FinalizerStep::Keep,
            "never added while deleting"
        );
        assert_eq!(
            actions(&p),
            vec![row("a", "delete", None), row("b", "await", None)]
        );
        assert!(!p.deletion.unwrap().remove_finalizer);
    }

    #[test]
    fn unready_and_untouched_members() {
        let mut w = World::new();
        w.clusters[1].ready = false;
        w.fed_namespaces.insert("shop".into(), fed_ns("shop"));
        let only_a: BTreeSet<String> = ["a".to_string()].into();
        let mut f = w.federation();
        let t = configmaps();
        let members = BTreeMap::from([("a".to_string(), listed(&[]))]);
        let p = decide_object(&f, &t, &fed_cm("x"), &members);
        assert_eq!(
            actions(&p),
            vec![
                row("a", "create", Some(ClusterStatus::Ok)),
                row("b", "skip", Some(ClusterStatus::ClusterNotReady))
            ]
        );
        assert!(p.failures.is_empty(), "unready clusters are reported once");
        let run = RunScope {
            clusters: Some(only_a.clone()),
            ..RunScope::default()
        };
        f.run = &run;
        let p = decide_object(&f, &t, &fed_cm("x"), &members);
        assert_eq!(
            actions(&p),
            vec![row("a", "create", Some(ClusterStatus::Ok))]
        );
        assert_eq!(p.selected.len(), 2, "placement sees every member");
    }

    /// A label one placed member lacks fails the whole object: no member
    /// gets a write, even one the run does not touch decides it.
    #[test]
    fn a_member_value_failing_anywhere_holds_every_write_of_the_object() {
        let mut w = World::new();
        w.clusters = vec![
            Cluster::new("a", &[("region", "eu")], true),
            Cluster::new("b", &[("region", "us")], true),
        ];
        w.fed_namespaces.insert("shop".into(), fed_ns("shop"));
        let t = configmaps();
        let mut obj = fed_cm("x");
        obj["spec"]["overrides"] = json!([{"clusterSelector": {},
            "clusterOverrides": [{"path": "/data/r", "value": "${MEMBER_LABEL:region}"}]}]);
        let copy = managed("ConfigMap", "shop", "x");
        let members = both(listed(&[]), listed(&[copy]));
        let p = decide_object(&w.federation(), &t, &obj, &members);
        assert_eq!(
            actions(&p),
            vec![
                row("a", "create", Some(ClusterStatus::Ok)),
                row("b", "update", Some(ClusterStatus::Ok))
            ]
        );
        let Action::Create(a) = &p.decisions[0].action else {
            unreachable!()
        };
        assert_eq!(a["data"]["r"], "eu");
        w.clusters[1].labels.clear();
        let failed = |p: &ObjectPlan| {
            assert!(
                p.decisions.iter().all(|d| d.action == Action::Skip
                    && d.status == Some(ClusterStatus::ApplyOverridesFailed)),
                "{:?}",
                p.decisions
            );
            assert_eq!(p.failures.len(), p.decisions.len());
            for d in &p.decisions {
                let m = d.message.as_deref().unwrap();
                for want in [
                    "FederatedConfigMap \"shop/x\"",
                    "\"/data/r\"",
                    "member \"b\"",
                    "\"region\"",
                ] {
                    assert!(m.contains(want), "{m}");
                }
            }
        };
        let p = decide_object(&w.federation(), &t, &obj, &members);
        failed(&p);
        assert!(
            p.decisions[0]
                .message
                .as_deref()
                .unwrap()
                .starts_with("not written: ")
        );
        // A run that touches `a` alone still sees `b`'s missing label.
        let run = RunScope {
            clusters: Some(["a".to_string()].into()),
            ..RunScope::default()
        };
        let f = Federation {
            run: &run,
            ..w.federation()
        };
        let p = decide_object(&f, &t, &obj, &members);
        assert_eq!(p.decisions.len(), 1);
        failed(&p);
        // Not placed on `b`: nothing fails.
        obj["spec"]["placement"] = json!({"clusters": [{"name": "a"}]});
        let p = decide_object(&w.federation(), &t, &obj, &members);
        assert_eq!(
            actions(&p),
            vec![
                row("a", "create", Some(ClusterStatus::Ok)),
                row("b", "delete", Some(ClusterStatus::WaitingForRemoval))
            ]
        );
    }

    /// One federated object against one member holding `live`: the cases
    /// the live integration tests run against real clusters.
    #[test]
    fn decide_object_table() {
        use crate::propagation::version::{overrides_version, template_version};
        let mut w = World::new();
        w.clusters.truncate(1);
        w.fed_namespaces.insert("shop".into(), fed_ns("shop"));
        let fed = fed_cm("x");
        let copy = |labels: Value, rv: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "shop",
                   "resourceVersion": rv, "labels": labels}, "data": {"k": "v"}})
        };
        let managed = copy(json!({"kubefed.io/managed": "true"}), "7");
        let recorded = json!({"status": {"templateVersion": template_version(&fed).unwrap(),
            "overridesVersion": overrides_version(&fed).unwrap(),
            "clusterVersions": [{"clusterName": "a", "version": "rv:7"}]}});
        let mut orphaning = fed.clone();
        orphaning["metadata"]["deletionTimestamp"] = json!("t");
        orphaning["metadata"]["annotations"] = json!({"kubefed.io/orphan": "true"});
        let mut deleting = fed.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("t");
        let mut unplaced = fed.clone();
        unplaced["spec"]["placement"] = json!({"clusters": []});
        let mut bad_placement = fed.clone();
        bad_placement["spec"]["placement"] =
            json!({"clusterSelector": {"matchExpressions": [{"key": "k", "operator": "Nope"}]}});
        /// A row: the federated object, the member's copy, the settings
        /// and the decisions wanted (named fields: two of them are bools).
        struct ObjectRow<'a> {
            name: &'a str,
            fed: &'a Value,
            live: Option<Value>,
            adopt: bool,
            /// A PropagatedVersion records the copy's version.
            recorded: bool,
            want: Vec<(String, &'static str, Option<ClusterStatus>)>,
        }
        impl<'a> ObjectRow<'a> {
            /// No copy, adoption on, nothing recorded.
            fn new(fed: &'a Value) -> Self {
                ObjectRow {
                    name: "",
                    fed,
                    live: None,
                    adopt: true,
                    recorded: false,
                    want: Vec::new(),
                }
            }
        }
        let rows = [
            ObjectRow {
                name: "absent: create",
                want: vec![row("a", "create", Some(ClusterStatus::Ok))],
                ..ObjectRow::new(&fed)
            },
            ObjectRow {
                name: "recorded version matches: unchanged",
                live: Some(managed.clone()),
                recorded: true,
                want: vec![row("a", "unchanged", Some(ClusterStatus::Ok))],
                ..ObjectRow::new(&fed)
            },
            ObjectRow {
                name: "no recorded version: update",
                live: Some(managed.clone()),
                want: vec![row("a", "update", Some(ClusterStatus::Ok))],
                ..ObjectRow::new(&fed)
            },
            ObjectRow {
                name: "unlabelled: adopt",
                live: Some(copy(json!({}), "7")),
                want: vec![row("a", "update", Some(ClusterStatus::Ok))],
                ..ObjectRow::new(&fed)
            },
            ObjectRow {
                name: "unlabelled, adoption disabled",
                live: Some(copy(json!({}), "7")),
                adopt: false,
                want: vec![row("a", "skip", Some(ClusterStatus::AlreadyExists))],
                ..ObjectRow::new(&fed)
            },
            ObjectRow {
                name: "managed=false is never touched",
                live: Some(copy(json!({"kubefed.io/managed": "false"}), "7")),
                want: vec![row("a", "skip", Some(ClusterStatus::ManagedLabelFalse))],
                ..ObjectRow::new(&fed)
            },
            ObjectRow {
                name: "no longer placed: delete",
                live: Some(managed.clone()),
                want: vec![row("a", "delete", Some(ClusterStatus::WaitingForRemoval))],
                ..ObjectRow::new(&unplaced)
            },
            ObjectRow {
                name: "no longer placed, unmanaged: left alone",
                live: Some(copy(json!({}), "7")),
                want: vec![row("a", "nothing", None)],
                ..ObjectRow::new(&unplaced)
            },
            ObjectRow {
                name: "invalid placement: nothing",
                live: Some(managed.clone()),
                want: vec![],
                ..ObjectRow::new(&bad_placement)
            },
            ObjectRow {
                name: "deleted: delete",
                live: Some(managed.clone()),
                want: vec![row("a", "delete", None)],
                ..ObjectRow::new(&deleting)
            },
            ObjectRow {
                name: "deleted, orphaning: unlabel",
                live: Some(managed.clone()),
                want: vec![row("a", "unlabel", None)],
                ..ObjectRow::new(&orphaning)
            },
        ];
        for r in rows {
            let name = r.name;
            let mut versions = HashMap::new();
            if r.recorded {
                versions.insert(ObjectKey::new("shop", "configmap-x"), recorded.clone());
            }
            let mut f = w.federation();
            f.versions = &versions;
            f.settings.adopt_resources = r.adopt;
            let members = BTreeMap::from([(
                "a".to_string(),
                listed(&r.live.into_iter().collect::<Vec<_>>()),
            )]);
            let p = decide_object(&f, &configmaps(), r.fed, &members);
            assert_eq!(actions(&p), r.want, "{name}");
            if name.starts_with("invalid") {
                assert_eq!(p.reason, AggregateReason::ComputePlacementFailed, "{name}");
                assert!(
                    p.failures[0].why.contains("clusterSelector"),
                    "{name}: {:?}",
                    p.failures
                );
            }
        }
    }

    #[test]
    fn orphans_respect_the_namespace_limit_and_the_selector() {
        let w = World::new();
        let f = w.federation();
        let t = configmaps();
        let orphan = managed("ConfigMap", "shop", "gone");
        let mut unlabelled = managed("ConfigMap", "shop", "mine");
        unlabelled["metadata"]["labels"] = json!({});
        let members = both(listed(&[orphan, unlabelled]), listed(&[]));
        let found = orphans(&f, &t, &[fed_cm("kept")], &members, None);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].decision.action, Action::RemoveManagedLabel);
        assert_eq!(key_of(&found[0].live).name, "gone");
        let with_selector = RunScope {
            selector: Some("app=web".into()),
            ..RunScope::default()
        };
        let f_selected = Federation {
            run: &with_selector,
            ..f
        };
        assert!(orphans(&f_selected, &t, &[], &members, None).is_empty());
        // A watch round over some keys: only those keys' orphans.
        let gone: BTreeSet<ObjectKey> = [ObjectKey::new("shop", "gone")].into();
        let other: BTreeSet<ObjectKey> = [ObjectKey::new("shop", "kept")].into();
        assert_eq!(orphans(&f, &t, &[], &members, Some(&gone)).len(), 1);
        assert!(orphans(&f, &t, &[], &members, Some(&other)).is_empty());
        // Namespace type under -n: only that namespace itself.
        let ns = namespaces();
        let members = both(
            listed(&[
                managed("Namespace", "", "a1"),
                managed("Namespace", "", "shop"),
            ]),
            listed(&[]),
        );
        let limited = RunScope {
            namespace: Some("shop".into()),
            ..RunScope::default()
        };
        let f_limited = Federation { run: &limited, ..f };
        let found = orphans(&f_limited, &ns, &[], &members, None);
        assert_eq!(found.len(), 1);
        assert_eq!(key_of(&found[0].live).name, "shop");
    }

    #[test]
    fn shards_split_objects_and_orphans_without_overlap_or_gap() {
        let w = World::new();
        let f = w.federation();
        let t = configmaps();
        let in_ns = |ns: &str, name: &str| {
            let mut o = fed_cm(name);
            o["metadata"]["namespace"] = json!(ns);
            o
        };
        let namespaces = ["shop", "team-a", "team-b", "web", "db", "ci", "x1", "x2"];
        let objects: Vec<Value> = namespaces
            .iter()
            .flat_map(|ns| [in_ns(ns, "one"), in_ns(ns, "two")])
            .collect();
        let strays: Vec<Value> = namespaces
            .iter()
            .map(|ns| managed("ConfigMap", ns, "stray"))
            .collect();
        let members = both(listed(&strays), listed(&strays));
        let keys = |d: &TypeDecisions| {
            let objects: BTreeSet<ObjectKey> = d.objects.iter().map(|p| p.key.clone()).collect();
            let orphans: Vec<(String, ObjectKey)> = d
                .orphans
                .iter()
                .map(|o| (o.decision.cluster.clone(), key_of(&o.live)))
                .collect();
            (objects, orphans)
        };
        let whole = keys(&decide_type(&f, &t, &objects, &members, None));
        assert_eq!(whole.0.len(), 16);
        assert_eq!(whole.1.len(), 16, "a stray per namespace and member");
        for count in 1..=4 {
            let (mut objs, mut orphs) = (BTreeSet::new(), Vec::new());
            for index in 0..count {
                let run = RunScope {
                    shard: Some(Shard { index, count }),
                    ..RunScope::default()
                };
                let f = Federation { run: &run, ..f };
                let mine = shard::retain_owned(run.shard, objects.clone());
                let (o, mut r) = keys(&decide_type(&f, &t, &mine, &members, None));
                assert!(objs.is_disjoint(&o), "{index}/{count} overlaps");
                objs.extend(o);
                orphs.append(&mut r);
            }
            orphs.sort();
            let mut want = whole.1.clone();
            want.sort();
            assert_eq!(objs, whole.0, "{count} shards cover every object once");
            assert_eq!(orphs, want, "{count} shards cover every orphan once");
        }
    }
}

/// Properties of the decide step (proptest).
#[cfg(test)]
mod properties {
    use super::*;
    use crate::propagation::version::{merged_status, overrides_version, template_version};
    use proptest::prelude::*;
    use serde_json::json;

    fn federated() -> impl Strategy<Value = Value> {
        (
            proptest::collection::btree_map("[a-z]{1,3}", "[a-z0-9]{0,4}", 0..3),
            proptest::sample::subsequence(vec!["a", "b", "c"], 0..=3),
            proptest::collection::btree_map(proptest::sample::select(vec!["a", "b", "c"]), "[a-z]{0,3}", 0..3),
            any::<bool>(),
        )
            .prop_map(|(data, placed, overrides, finalized)| {
                let overrides: Vec<Value> = overrides
                    .into_iter()
                    .map(|(c, v)| json!({"clusterName": c, "clusterOverrides": [{"path": "/data/o", "value": v}]}))
                    .collect();
                let finalizers = if finalized { json!([SYNC_FINALIZER]) } else { json!([]) };
                json!({"kind": "FederatedConfigMap",
                       "metadata": {"name": "x", "namespace": "shop", "finalizers": finalizers},
                       "spec": {"template": {"data": data},
                                "placement": {"clusters": placed.iter().map(|c| json!({"name": c})).collect::<Vec<_>>()},
                                "overrides": overrides}})
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Members holding exactly what the decide step created, with the
        /// versions recorded: the next decide changes nothing (a converged
        /// federation stays converged), whatever the object and placement.
        #[test]
        fn applying_the_decisions_converges(obj in federated()) {
            let clusters = vec![
                Cluster::new("a", &[], true),
                Cluster::new("b", &[], true),
                Cluster::new("c", &[], true),
            ];
            let fed_namespaces = BTreeMap::from([("shop".to_string(), json!({
                "kind": "FederatedNamespace", "metadata": {"name": "shop", "namespace": "shop"},
                "spec": {"placement": {"clusterSelector": {}}}}))]);
            let host_namespaces = HashMap::new();
            let t = FederatedType {
                target: TargetType::new("", "v1", "ConfigMap"),
                federated_kind: "FederatedConfigMap".into(),
                target_plural: "configmaps".into(),
                namespaced: true,
            };
            let empty = HashMap::new();
            let mut f = Federation {
                kubefed_namespace: "kube-federation-system",
                scope: Scope::Cluster,
                settings: SyncSettings { adopt_resources: true , force_conflicts: false, report_only: false,},
                clusters: &clusters,
                run: &RunScope::default(),
                fed_namespaces: &fed_namespaces,
                host_namespaces: &host_namespaces,
                versions: &empty,
            };
            let nothing: BTreeMap<String, Listing> = clusters
                .iter()
                .map(|c| (c.name.clone(), Listing::Listed(HashMap::new())))
                .collect();
            let first = decide_object(&f, &t, &obj, &nothing);
            // Apply: every create lands with resourceVersion 1.
            let mut members = BTreeMap::new();
            let mut recorded = BTreeMap::new();
            for c in &clusters {
                let mut held = HashMap::new();
                if let Some(Action::Create(o)) = first.decisions.iter().find(|d| d.cluster == c.name).map(|d| &d.action) {
                    let mut live = (**o).clone();
                    live["metadata"]["resourceVersion"] = json!("1");
                    held.insert(key_of(&live), ObjectText::of(&live));
                    recorded.insert(c.name.clone(), "rv:1".to_string());
                }
                members.insert(c.name.clone(), Listing::Listed(held));
            }
            prop_assert_eq!(recorded.len(), first.selected.len());
            let status = merged_status(None, &template_version(&obj).unwrap(), &overrides_version(&obj).unwrap(), &first.selected, &recorded);
            let versions = HashMap::from([(ObjectKey::new("shop", first.pv_name.clone()), json!({"status": status}))]);
            f.versions = &versions;
            let second = decide_object(&f, &t, &obj, &members);
            for d in &second.decisions {
                let expected = if first.selected.contains(&d.cluster) { Action::Unchanged } else { Action::Nothing };
                prop_assert_eq!(&d.action, &expected, "cluster {}", d.cluster);
            }
            prop_assert!(second.failures.is_empty());
        }
    }
}
