//! The RSP pass of a live reconcile (KubeFed's scheduling controller,
//! `pkg/controller/schedulingpreference`): before anything is decided,
//! each ReplicaSchedulingPreference rewrites its federated object's
//! placement and replicas overrides from what the members run now.

use crate::apply::{api_error_line, dynamic_api};
use crate::clients::members::Member;
use crate::core::describe::{ObjectKey, describe, key_of};
use crate::core::outcome::{Change, Failure, Place};
use crate::core::propagation::decide::Listing;
use crate::core::propagation::member::{ManagedLabel, managed_label};
use crate::core::propagation::placement::Cluster;
use crate::core::scheduling::preference::{
    MemberReplicas, PodAnalysis, Scheduled, analyze_pods, current_and_capacity, observe_member,
    schedule,
};
use crate::sync::run::mode::HostWriter;
use crate::sync::run::observe::{Observation, ObservedType, PodQuery};
use crate::sync::run::report::Report;
use anyhow::{Result, bail};
use kube::api::PostParams;
use serde_json::Value;
use std::collections::BTreeMap;

/// What one member says of an RSP's target.
enum Seen {
    /// Replicas it runs now, and its capacity when pods are stuck.
    Replicas(i64, Option<i64>),
    /// It holds no managed copy.
    Nothing,
    /// It cannot run the type at all (does not serve it).
    CannotHold,
}

/// What the members run of an RSP's target now.
struct ReplicasNow {
    current: BTreeMap<String, i64>,
    capacity: BTreeMap<String, i64>,
    /// The members as scheduling sees them (those that cannot hold the
    /// type count as not ready).
    clusters: Vec<Cluster>,
}

/// Current replicas and capacity per member, as upstream's RSP controller
/// observes them; `None` (with a failure reported) when a member's cannot
/// be known: planning without them could move all of its replicas
/// elsewhere, so the placement is left as it is this run.
fn replicas_now(
    seen: &Observation,
    t: &ObservedType,
    key: &ObjectKey,
    what: &str,
    report: &mut Report,
) -> Option<ReplicasNow> {
    let mut now = ReplicasNow {
        current: BTreeMap::new(),
        capacity: BTreeMap::new(),
        clusters: seen.clusters.clone(),
    };
    let mut unobservable = Vec::new();
    for m in seen.ready_members() {
        match observe(m, &t.members, &seen.rsp_pods, key, what, report) {
            Ok(Seen::Replicas(replicas, cap)) => {
                now.current.insert(m.name.clone(), replicas);
                if let Some(cap) = cap {
                    now.capacity.insert(m.name.clone(), cap);
                }
            }
            Ok(Seen::Nothing) => {}
            // Chosen here: a member that does not serve the type is
            // scheduled over as an unready cluster is (upstream schedules
            // over ready clusters only), so no replicas go where they
            // cannot run.
            Ok(Seen::CannotHold) => {
                if let Some(c) = now.clusters.iter_mut().find(|c| c.name == m.name) {
                    c.ready = false;
                }
            }
            Err(e) => unobservable.push(format!("{}: {e}", m.name)),
        }
    }
    if !unobservable.is_empty() {
        report.failures.push(Failure::at(
            Place::Host,
            format!(
                "replica scheduling of {what} skipped, replicas not observable in {}",
                unobservable.join("; ")
            ),
        ));
        return None;
    }
    Some(now)
}

/// Schedules every observed RSP (`seen.rsps`, read by the observe step
/// with the pods it needs). Returns the number of host writes.
pub async fn schedule_replicas(
    writer: HostWriter<'_>,
    seen: &mut Observation,
    report: &mut Report,
) -> Result<usize> {
    let host = writer.host;
    if !seen.settings.scheduler_preferences {
        report.notes.push(
            "the SchedulerPreferences feature gate is Disabled: ReplicaSchedulingPreferences are not scheduled".into(),
        );
        return Ok(0);
    }
    let mut writes = 0;
    for rsp in std::mem::take(&mut seen.rsps) {
        let target_kind = rsp["spec"]["targetKind"].as_str().unwrap_or("").to_string();
        let Some(ti) = seen
            .types
            .iter()
            .position(|t| t.federated.kind == target_kind)
        else {
            continue;
        };
        let key = key_of(&rsp);
        let Some(idx) = seen.types[ti].objects.iter().position(|f| key_of(f) == key) else {
            continue;
        };
        let what = describe(&target_kind, &rsp);
        let Some(now) = replicas_now(seen, &seen.types[ti], &key, &what, report) else {
            continue;
        };
        let fedns = seen.fed_namespaces.get(&key.namespace);
        let t = &mut seen.types[ti];
        match schedule(
            &rsp,
            &t.objects[idx],
            fedns,
            &now.clusters,
            &now.current,
            &now.capacity,
        ) {
            Ok(Scheduled::Unchanged) => {}
            Ok(Scheduled::Updated(obj)) if writer.plans() => {
                report.changes.push(
                    Change::new(Place::Host, "update", describe(&target_kind, &obj))
                        .because("replica scheduling"),
                );
                t.objects[idx] = obj;
            }
            Ok(Scheduled::Updated(obj)) => {
                let fapi = dynamic_api(&host.client, Some(&key.namespace), &t.federated);
                match fapi
                    .replace(
                        &key.name,
                        &PostParams::default(),
                        &serde_json::from_value(obj)?,
                    )
                    .await
                {
                    Ok(updated) => {
                        t.objects[idx] = serde_json::to_value(updated)?;
                        writes += 1;
                    }
                    Err(e) => report.failures.push(Failure::at(
                        Place::Host,
                        format!("scheduling {what}: {}", api_error_line(e)),
                    )),
                }
            }
            Err(e) => report
                .failures
                .push(Failure::at(Place::Host, e.to_string())),
        }
    }
    Ok(writes)
}

/// One member's replicas of the RSP's target: only a *managed* copy counts
/// (upstream's informer sees only `kubefed.io/managed=true` objects); a
/// settled copy's ready replicas, else its pods (running and ready ones
/// count; pods unschedulable for over 60 s lower the capacity).
fn observe(
    m: &Member,
    listings: &BTreeMap<String, Listing>,
    pods: &BTreeMap<PodQuery, Result<Vec<Value>, String>>,
    key: &ObjectKey,
    what: &str,
    report: &mut Report,
) -> Result<Seen> {
    let obj = match listings.get(&m.name) {
        Some(Listing::Listed(objs)) => objs.get(key).map(|o| o.value()),
        Some(Listing::NotServed(_)) => return Ok(Seen::CannotHold),
        Some(Listing::Failed(why)) => bail!("{why}"),
        None => bail!("not listed"),
    };
    let Some(obj) = obj.filter(|o| managed_label(o) == ManagedLabel::True) else {
        return Ok(Seen::Nothing);
    };
    let state = match observe_member(&obj) {
        Ok(state) => state,
        Err(e) => bail!("{e}"),
    };
    let pods = match &state {
        MemberReplicas::Settled { .. } => PodAnalysis::default(),
        MemberReplicas::NeedsPods { match_labels, .. } => {
            match pods.get(&PodQuery::new(&m.name, &key.namespace, match_labels)) {
                Some(Ok(pods)) => analyze_pods(pods, crate::clock::now_unix()),
                Some(Err(why)) => bail!("{why}"),
                None => bail!("its pods were not listed"),
            }
        }
    };
    if pods.needs_recheck {
        report.warnings.push(format!(
            "{}: some pods of {what} are unschedulable for less than 60 s and do not lower its capacity yet; run again later",
            m.name
        ));
    }
    let (now, cap) = current_and_capacity(&state, &pods);
    Ok(Seen::Replicas(now, cap))
}
