//! A one-shot run whose federated CRDs define other types it propagates
//! (`core::propagation::crd_first`), in two rounds: the CRD types first;
//! then, where a member did not serve a type its CRD defines, the wait for
//! that CRD to be `Established` there (within `--timeout`) and the type
//! listed again; then every other type. One run converges where KubeFed
//! needed a second (kubefed#774).
//!
//! A dry run cannot wait for what it does not create: a type whose CRD the
//! plan creates in a member is planned there as if the member held none of
//! its objects, and `--validate` leaves those creates out.

use crate::apply::resource_of;
use crate::clients::host::Host;
use crate::core::describe::{ObjectKey, describe_key, key_of};
use crate::core::outcome::Place;
use crate::core::propagation::crd_first::{self, CRD_KIND, Phases, Target};
use crate::core::propagation::decide::Listing;
use crate::sync::live::progress::Progress;
use crate::sync::live::{Options, Passes, RoundOutcome, round};
use crate::sync::run::observe::{self, Observation, ObservedType};
use crate::sync::run::report::Report;
use anyhow::Result;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The run's phases, when a federated CRD defines one of its other types.
pub fn phases(seen: &Observation) -> Option<Phases> {
    let targets: Vec<Target> = seen.types.iter().map(target).collect();
    let crds: BTreeSet<String> = seen
        .types
        .iter()
        .filter(|t| target(t).defines_types())
        .flat_map(|t| t.objects.iter().map(|o| key_of(o).name))
        .collect();
    crd_first::phases(&targets, &crds)
}

/// A type as `core::propagation::crd_first` sees it.
pub fn target(t: &ObservedType) -> Target<'_> {
    Target {
        group: &t.target.group,
        kind: &t.target.kind,
        plural: &t.target.plural,
    }
}

/// The two rounds of a run (or of a watch round), as one outcome.
pub async fn round_in_phases(
    host: &Host,
    seen: &mut Observation,
    o: &Options,
    passes: Passes,
    phases: Phases,
    progress: &dyn Progress,
) -> Result<RoundOutcome> {
    let mut types: Vec<Option<ObservedType>> = std::mem::take(&mut seen.types)
        .into_iter()
        .map(Some)
        .collect();
    let awaited: Vec<(String, String)> = phases
        .awaits
        .iter()
        .filter_map(|(&i, crd)| Some((types[i].as_ref()?.name.to_string(), crd.clone())))
        .collect();
    let mut take = |indices: &[usize], seen: &mut Observation| {
        seen.types = indices.iter().filter_map(|&i| types[i].take()).collect();
    };

    // The CRDs alone: no RSP targets them, and DNS waits for the rest.
    take(&phases.first, seen);
    let rsps = std::mem::take(&mut seen.rsps);
    let first_passes = Passes {
        dns: false,
        ..passes
    };
    let mut outcome = round(host, seen, o, first_passes, progress).await?;
    seen.rsps = rsps;
    seen.host_plan.clear();

    let crds = std::mem::take(&mut seen.types);
    crate::parallel::drop_in_background(crds);
    take(&phases.then, seen);
    for (type_name, crd) in &awaited {
        let served = catch_up(seen, type_name, crd, o, &outcome.report).await;
        outcome
            .served
            .extend(served.into_iter().map(|c| (c, type_name.clone())));
    }
    let then_passes = Passes {
        cluster_health: false,
        ..passes
    };
    let then = round(host, seen, o, then_passes, progress).await?;
    outcome.report.absorb(then.report);
    outcome.objects.extend(then.objects);
    Ok(outcome)
}

/// Where a member did not serve `type_name`: a live run waits for `crd`
/// to be `Established` there and lists the type again; a dry run whose
/// plan creates `crd` there plans the type as holding nothing yet.
/// Returns the members that serve it now.
async fn catch_up(
    seen: &mut Observation,
    type_name: &str,
    crd: &str,
    o: &Options,
    first: &Report,
) -> Vec<String> {
    let mut served = Vec::new();
    let Some(ti) = seen.types.iter().position(|t| *t.name == *type_name) else {
        return served;
    };
    let unserved: Vec<String> = seen.types[ti]
        .members
        .iter()
        .filter(|(_, l)| matches!(l, Listing::NotServed(_)))
        .map(|(m, _)| m.clone())
        .collect();
    let created = describe_key(CRD_KIND, &ObjectKey::new("", crd));
    let until = Instant::now() + o.selection.timeout;
    for cluster in unserved {
        if o.mode.plans() {
            let planned = first.changes.iter().any(|c| {
                c.place == Place::member(cluster.as_str())
                    && c.verb == "create"
                    && c.object == created
            });
            if planned {
                let t = &mut seen.types[ti];
                t.members
                    .insert(cluster.clone(), Listing::Listed(Default::default()));
                seen.types_to_come
                    .insert((type_name.to_string(), cluster.clone()));
            }
            continue;
        }
        if let Some(listing) =
            served_once_established(seen, &seen.types[ti], &cluster, crd, until, &o.selection).await
        {
            seen.types[ti].members.insert(cluster.clone(), listing);
            served.push(cluster);
        }
    }
    served
}

/// The type's listing in `cluster` once `crd` is `Established` there and
/// the type is served; `None` when the CRD is not there (not placed, or its
/// propagation failed: the first round said so) or time ran out.
async fn served_once_established(
    seen: &Observation,
    t: &ObservedType,
    cluster: &str,
    crd: &str,
    until: Instant,
    selection: &observe::Selection,
) -> Option<Listing> {
    let timeout = selection.timeout;
    let client = (seen.member(cluster)).and_then(|m| m.client.clone().ok())?;
    let ns = seen.namespace.as_deref().filter(|_| t.ty.namespaced);
    let crds = resource_of::<CustomResourceDefinition>();
    let api = crate::apply::dynamic_api(&client, None, &crds);
    let left = until.saturating_duration_since(Instant::now());
    let check = || async {
        let Some(live) = api.get_opt(crd).await? else {
            // Nothing to wait for: the type stays unserved.
            return Ok(Some(None));
        };
        let live = serde_json::to_value(live)?;
        if !crd_first::established(&live) {
            return Ok(None);
        }
        // Established, yet the handler may lag a moment behind.
        match observe::list_member(
            &client,
            ns,
            &t.target,
            cluster,
            timeout,
            selection.whole_copies,
        )
        .await
        {
            Listing::NotServed(_) => Ok(None),
            listing => Ok(Some(Some(listing))),
        }
    };
    crate::poll::poll_until(left, Duration::from_millis(200), check)
        .await
        .ok()
        .flatten()
        .flatten()
}
