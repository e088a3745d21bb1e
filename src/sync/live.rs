//! Live one-shot reconcile against the host and its members, in four steps:
//!
//! 1. **observe** (`observe.rs`): read the host and list the members, once;
//! 2. **decide** (`core::decide`, pure): what every member should get, and
//!    whether the sync finalizer must go on first;
//! 3. **execute** (`execute.rs`): the sync finalizer first, then the member
//!    requests, bounded and retried;
//! 4. **record** (`core::record` decides, `record.rs` writes): status,
//!    PropagatedVersions and the finalizer's release, as KubeFed writes
//!    them, so a KubeFed controller can take over.
//!
//! The RSP pass (`rsp.rs`) runs between observe and decide, as it rewrites
//! placement and overrides. A run with nothing to do writes nothing.

use crate::core::decide::{
    self, Federation, FinalizerStep, ObjectPlan, RunLimits, TypeDecisions, describe, describe_key,
};
use crate::core::plan::{Action, ClusterStatus};
use crate::core::record::{self as decide_record, MemberResult};
use crate::host::Host;
use crate::members::{Health, Member};
use crate::sync::execute::{self, Limits, Work};
use crate::sync::observe::{self, Observation, Selection};
use crate::sync::record::{self, HOST_WRITES_IN_FLIGHT};
use crate::sync::report::Report;
use anyhow::Result;
use futures::StreamExt;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// What to reconcile and how.
#[derive(Clone, Debug)]
pub struct Options {
    pub selection: Selection,
    pub dry_run: bool,
    /// Requests in flight per member.
    pub concurrency: usize,
    /// Attempts per request (first try included).
    pub attempts: u32,
    /// `--wait`: how long to wait for member copies still terminating.
    pub wait: Option<Duration>,
}

/// A federated object: its type's index and its own.
type ObjectIndex = (usize, usize);

/// Runs one reconcile pass. Errors before any write are returned as `Err`;
/// failures while applying are in the report.
pub async fn reconcile(
    host: &Host,
    o: &Options,
    progress: &indicatif::ProgressBar,
) -> Result<Report> {
    let mut report = Report::default();
    let mut seen = observe::observe(host, &o.selection).await?;
    report_clusters(&seen, &mut report);
    if !o.dry_run {
        report.host_writes +=
            record::write_cluster_health(host, &seen.members, &seen.health).await?;
    }
    report.host_writes += crate::sync::rsp::schedule_replicas(
        host,
        &mut seen,
        o.dry_run,
        o.selection.timeout,
        &mut report,
    )
    .await?;

    let decided = decide_all(host, &seen, o);
    for d in &decided {
        report.failures.extend(d.failures.iter().cloned());
        for p in &d.objects {
            report.failures.extend(p.failures.iter().cloned());
            report.notes.extend(p.notes.iter().cloned());
        }
    }
    if o.dry_run {
        dry_run_plan(&seen, &decided, &mut report);
    } else {
        let refused = finalizers_first(host, &mut seen, &decided, &mut report).await;
        let work = work_items(&seen, &decided, &refused, o.wait.is_some(), &mut report);
        progress.set_length(work.len() as u64);
        let limits = Limits {
            concurrency: o.concurrency,
            timeout: o.selection.timeout,
            attempts: o.attempts,
            settings: seen.settings,
        };
        let mut results =
            execute::execute(&seen.members, &seen.types, work, limits, progress).await;
        if let Some(wait) = o.wait {
            let deadline = Instant::now() + wait;
            execute::wait_for_removal(&seen.members, &seen.types, &mut results, deadline, limits)
                .await;
        }
        let by_object = count_results(results, &mut report);
        record_all(host, &seen, &decided, &refused, by_object, &mut report).await;
    }
    dns(host, &seen, o.dry_run, &mut report).await?;
    Ok(report)
}

/// Every touched member in the summary, and a line for each not ready.
fn report_clusters(seen: &Observation, report: &mut Report) {
    for (m, h) in seen.members.iter().zip(&seen.health) {
        if !seen.touches(&m.name) {
            continue;
        }
        report.cluster(&m.name).ready = h.is_ready();
        let why = match h {
            Health::Ready { .. } => continue,
            Health::NotReady { message }
            | Health::Offline { message }
            | Health::ConfigMalformed { message } => message,
        };
        report.failures.push(format!(
            "{}: cluster not ready ({why}); its objects are marked ClusterNotReady",
            m.name
        ));
    }
    let namespaced = seen.types.iter().any(|t| t.t.namespaced);
    let namespaces = seen.types.iter().any(|t| t.t.target.is_namespace());
    if seen.scope == crate::core::membership::Scope::Cluster && namespaced && !namespaces {
        report.warnings.push(
            "namespaced objects are placed only in namespaces a FederatedNamespace places, and the namespaces type is not enabled (kubefedctl enable namespaces)".into(),
        );
    }
}

/// The decide step over every type.
fn decide_all(host: &Host, seen: &Observation, o: &Options) -> Vec<TypeDecisions> {
    let federation = Federation {
        kubefed_namespace: &host.namespace,
        scope: seen.scope,
        settings: seen.settings,
        clusters: &seen.clusters,
        touched: seen.touched.as_ref(),
        fed_namespaces: &seen.fed_namespaces,
        host_namespaces: &seen.host_namespaces,
        versions: &seen.versions,
    };
    let limits = RunLimits {
        namespace: seen.namespace.as_deref(),
        selector: o.selection.selector.is_some(),
    };
    seen.types
        .iter()
        .map(|t| decide::decide_type(&federation, &t.t, &t.objects, &t.members, limits))
        .collect()
}

/// Member changes a dry run would make, with diffs.
fn dry_run_plan(seen: &Observation, decided: &[TypeDecisions], report: &mut Report) {
    let work = work_items(seen, decided, &BTreeSet::new(), false, report);
    for w in &work {
        let kind = &seen.types[w.type_index].t.target.kind;
        let (verb, desired) = match &w.decision.action {
            Action::Create(obj) => ("create", Some(obj.as_ref())),
            Action::Update { object, .. } => ("update", Some(object)),
            Action::Delete { .. } => ("delete", None),
            _ => ("unlabel", None),
        };
        let r = report.cluster(&w.decision.cluster);
        match verb {
            "create" => r.created += 1,
            "update" => r.updated += 1,
            "delete" => r.deleted += 1,
            _ => {}
        }
        report.plan.push(format!(
            "{}: {verb} {}",
            w.decision.cluster,
            w.describe(kind)
        ));
        if let (Some(live), Some(desired)) = (&w.live, desired) {
            report.diffs.push(crate::sync::diff::unified(
                &describe(kind, desired),
                &w.decision.cluster,
                live,
                desired,
            ));
        }
    }
}

/// The sync finalizer before any member write (and stray ones of ignored
/// system namespaces removed). Returns the objects whose finalizer could
/// not be written: their member work waits for the next run.
async fn finalizers_first(
    host: &Host,
    seen: &mut Observation,
    decided: &[TypeDecisions],
    report: &mut Report,
) -> BTreeSet<ObjectIndex> {
    let steps: Vec<(ObjectIndex, FinalizerStep)> = decided
        .iter()
        .enumerate()
        .flat_map(|(ti, d)| {
            d.objects
                .iter()
                .enumerate()
                .filter(|(_, p)| p.finalizer != FinalizerStep::Keep)
                .map(move |(oi, p)| ((ti, oi), p.finalizer))
        })
        .collect();
    let types = &seen.types;
    let done: Vec<_> = futures::stream::iter(steps)
        .map(|((ti, oi), step)| async move {
            let t = &types[ti];
            let r = record::finalizer_first(host, &t.federated, &t.objects[oi], step).await;
            ((ti, oi), r)
        })
        .buffer_unordered(HOST_WRITES_IN_FLIGHT)
        .collect()
        .await;
    let mut refused = BTreeSet::new();
    for ((ti, oi), r) in done {
        let t = &mut seen.types[ti];
        match r {
            Ok(Some(updated)) => {
                report.host_writes += 1;
                t.objects[oi] = updated;
            }
            Ok(None) => {}
            Err(e) => {
                report.failures.push(format!(
                    "host: {}: {}",
                    describe(&t.federated.kind, &t.objects[oi]),
                    crate::error::one_line(&e)
                ));
                refused.insert((ti, oi));
            }
        }
    }
    refused
}

/// The member requests to make, counting what needs none.
fn work_items(
    seen: &Observation,
    decided: &[TypeDecisions],
    refused: &BTreeSet<ObjectIndex>,
    wait: bool,
    report: &mut Report,
) -> Vec<Work> {
    let mut work = Vec::new();
    for (ti, d) in decided.iter().enumerate() {
        let t = &seen.types[ti];
        for (oi, p) in d.objects.iter().enumerate() {
            if refused.contains(&(ti, oi)) {
                continue;
            }
            for dec in &p.decisions {
                match (&dec.action, dec.status) {
                    (Action::Unchanged, _) => report.cluster(&dec.cluster).unchanged += 1,
                    (Action::Skip, Some(ClusterStatus::ClusterNotReady)) => {}
                    (Action::Skip, _) => report.cluster(&dec.cluster).failed += 1,
                    (Action::Nothing, _) => {}
                    (Action::AwaitRemoval, _) if !wait => {}
                    _ => work.push(Work {
                        type_index: ti,
                        object: Some(oi),
                        decision: dec.clone(),
                        live: live_copy(t, &dec.cluster, p),
                    }),
                }
            }
        }
        for orphan in &d.orphans {
            work.push(Work {
                type_index: ti,
                object: None,
                decision: orphan.decision.clone(),
                live: Some(orphan.live.clone()),
            });
        }
    }
    work
}

/// The member's copy of a federated object, as listed.
fn live_copy(
    t: &observe::ObservedType,
    cluster: &str,
    p: &ObjectPlan,
) -> Option<serde_json::Value> {
    let key = if t.t.namespaced {
        p.key.clone()
    } else {
        (String::new(), p.key.1.clone())
    };
    match t.members.get(cluster)? {
        decide::Listing::Listed(objs) => objs.get(&key).cloned(),
        _ => None,
    }
}

/// Counts results per member and files them per federated object.
fn count_results(
    results: Vec<(Work, MemberResult)>,
    report: &mut Report,
) -> BTreeMap<ObjectIndex, BTreeMap<String, MemberResult>> {
    use crate::core::record::Effect;
    let mut by_object: BTreeMap<ObjectIndex, BTreeMap<String, MemberResult>> = BTreeMap::new();
    for (w, result) in results {
        let r = report.cluster(&w.decision.cluster);
        match &result {
            Ok(done) => match done.effect {
                Effect::Created => r.created += 1,
                Effect::Updated | Effect::Unlabelled => r.updated += 1,
                Effect::Deleted { .. } if w.decision.action == Action::AwaitRemoval => {}
                Effect::Deleted { .. } => r.deleted += 1,
            },
            Err((_, msg)) => {
                r.failed += 1;
                report
                    .failures
                    .push(format!("{}: {msg}", w.decision.cluster));
            }
        }
        if let Some(oi) = w.object {
            by_object
                .entry((w.type_index, oi))
                .or_default()
                .insert(w.decision.cluster.clone(), result);
        }
    }
    by_object
}

/// The record step: status, PropagatedVersion and finalizer release of
/// every federated object, a bounded number at a time (thousands of
/// objects, one host).
async fn record_all(
    host: &Host,
    seen: &Observation,
    decided: &[TypeDecisions],
    refused: &BTreeSet<ObjectIndex>,
    mut by_object: BTreeMap<ObjectIndex, BTreeMap<String, MemberResult>>,
    report: &mut Report,
) {
    let now = crate::clock::now_rfc3339();
    let mut writes = Vec::new();
    for (ti, d) in decided.iter().enumerate() {
        let t = &seen.types[ti];
        for (oi, p) in d.objects.iter().enumerate() {
            if refused.contains(&(ti, oi)) {
                continue;
            }
            let results = by_object.remove(&(ti, oi)).unwrap_or_default();
            let fed = &t.objects[oi];
            let w = decide_record::write_back(
                fed,
                p,
                &results,
                &seen.clusters,
                seen.touched.as_ref(),
                &now,
            );
            for cluster in &w.pending {
                report.pending.push(format!(
                    "{cluster}: {} is still being deleted; {} keeps its finalizer until it is gone (--wait waits; the next run completes the deletion)",
                    describe_key(&t.t.target.kind, &p.key),
                    describe(&t.federated.kind, fed),
                ));
            }
            if w != decide_record::WriteBack::default() {
                writes.push((t, fed, p, w));
            }
        }
    }
    let written: Vec<_> = futures::stream::iter(writes)
        .map(|(t, fed, p, w)| async move {
            let r = record::write_back(host, &t.federated, fed, p, w).await;
            (describe(&t.federated.kind, fed), r)
        })
        .buffer_unordered(HOST_WRITES_IN_FLIGHT)
        .collect()
        .await;
    for (what, result) in written {
        match result {
            Ok(n) => report.host_writes += n,
            Err(e) => report
                .failures
                .push(format!("host: {what}: {}", crate::error::one_line(&e))),
        }
    }
}

/// The multi-cluster DNS pass, when the host has the DNS API.
async fn dns(host: &Host, seen: &Observation, dry_run: bool, report: &mut Report) -> Result<()> {
    if crate::sync::dns::installed(host).await? {
        let members: &[Member] = &seen.members;
        crate::sync::dns::dns_pass(
            host,
            members,
            &seen.health,
            seen.namespace.as_deref(),
            dry_run,
            report,
        )
        .await
    } else {
        report.notes.push("multi-cluster DNS is not installed in the host (kubefedctl init --with-dns): DNS records skipped".into());
        Ok(())
    }
}
