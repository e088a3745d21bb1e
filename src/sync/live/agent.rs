//! A pull member's agent's round (`sync::agent`): the one-shot run's
//! decide and execute steps over the agent's own member, exactly what a
//! push run would write to it, with a report in place of the record step
//! (`core::propagation::report`). The host's progressive rollouts are
//! followed (`core::propagation::rollout::pull`): an object is applied
//! only once its record admits this member. None of the host-side passes run: the
//! host's own runs schedule RSPs into the federated objects' specs (which
//! the agent reads), write health, Events and DNS.

use super::pipeline::Pipeline;
use super::requests::{Clusters, HostRequests};
use super::{
    Decided, Options, RoundOutcome, account, decide_all, jobs, permissions, report_clusters,
    report_decisions, run_settings,
};
use crate::clients::host::Host;
use crate::core::describe::{FederatedRef, key_of};
use crate::core::propagation::readiness::Readiness;
use crate::core::propagation::rollout::pull::{Admission, admission, hold};
use crate::core::propagation::version::propagated_version_key;
use crate::sync::live::progress::Progress;
use crate::sync::run::observe::Observation;
use crate::sync::run::report::Report;
use anyhow::Result;
use std::collections::HashMap;

/// What the host's rollouts admit of each object to this agent's member
/// (`core::propagation::rollout::pull`), read from the host's
/// PropagatedVersions before the agent's own versions replace them.
pub type Admissions = HashMap<FederatedRef, Admission>;

/// Each object's admission for `cluster` (none kept for `Apply`: the
/// common case, with no rollout).
pub fn admissions(seen: &Observation, cluster: &str) -> Admissions {
    let mut out = HashMap::new();
    for t in &seen.types {
        for fed in &t.objects {
            let key = key_of(fed);
            let pv_key = propagated_version_key(&t.ty.target.kind, &key);
            match admission(fed, seen.versions.get(&pv_key), cluster) {
                Admission::Apply => {}
                a => {
                    out.insert(FederatedRef::sharing(&t.name, key), a);
                }
            }
        }
    }
    out
}

/// One round of the agent of `cluster` over `seen` (its member alone
/// touched); `reports` takes each object's report; `admitted`: what the
/// host's rollouts admit ([`admissions`]).
pub async fn round<H: HostRequests>(
    host: &Host,
    seen: &mut Observation,
    o: &Options,
    (reports, cluster, admitted): (&H, &str, &Admissions),
    progress: &dyn Progress,
) -> Result<RoundOutcome> {
    run_settings(host, seen, o)?;
    let mut report = Report::default();
    report_clusters(seen, &mut report);
    let mut decided = decide_all(host, seen);
    let readiness = follow_rollouts(&mut decided, (cluster, admitted), &mut report);
    report_decisions(&decided, false, &mut report);
    let mut jobs = jobs(&decided, o.wait.is_some(), &mut report);
    permissions::check(seen, &mut jobs, o.selection.timeout, &mut report).await;
    progress.requests(jobs.iter().map(|j| j.work.len() as u64).sum());
    let limits = super::limits(o, seen);
    let clusters = Clusters::of(&seen.members);
    let mut pipeline = Pipeline::new((reports, &clusters), seen, limits, None, progress);
    pipeline.reports_for = Some(cluster.to_string());
    pipeline.report_readiness = readiness;
    let finished = pipeline.run(jobs).await;
    let objects = account(finished, &mut report);
    crate::parallel::drop_in_background(Decided::into_decisions(decided));
    Ok(RoundOutcome {
        report,
        objects,
        served: Vec::new(),
    })
}

/// The host's progressive rollouts, followed: an object whose rollout has
/// not admitted this member keeps its copy as it is (a note names it and
/// why); an admitted one is applied, and its copy's readiness as observed
/// is returned for its report, which the host's next wave waits on.
fn follow_rollouts(
    decided: &mut [Decided<'_>],
    (cluster, admitted): (&str, &Admissions),
    report: &mut Report,
) -> HashMap<FederatedRef, Readiness> {
    let mut readiness = HashMap::new();
    if admitted.is_empty() {
        return readiness;
    }
    for d in decided.iter_mut() {
        let t = d.ty;
        for (fed, p) in d.objects_mut() {
            let object = FederatedRef::sharing(&t.name, key_of(fed));
            match admitted.get(&object) {
                Some(Admission::Hold(why)) if hold(p, cluster) => {
                    let what = crate::core::describe::describe(&t.ty.federated_kind, fed);
                    report
                        .notes
                        .push(format!("{what}: {why}; {cluster}'s copy left as it is"));
                }
                Some(Admission::ApplyReporting) => {
                    let copy = super::rollout::copy_of(t, &p.key, cluster);
                    let r = copy.map_or_else(|| Readiness::Pending("no copy yet".into()), |c| c.0);
                    readiness.insert(object, r);
                }
                _ => {}
            }
        }
    }
    readiness
}
