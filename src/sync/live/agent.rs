//! A pull member's agent's round (`sync::agent`): the one-shot run's
//! decide and execute steps over the agent's own member, exactly what a
//! push run would write to it, with a report in place of the record step
//! (`core::propagation::report`). None of the host-side passes run: the
//! host's own runs schedule RSPs into the federated objects' specs (which
//! the agent reads), write health, Events and DNS.

use super::pipeline::Pipeline;
use super::requests::{Clusters, HostRequests};
use super::{
    Options, RoundOutcome, account, decide_all, jobs, permissions, report_clusters,
    report_decisions, run_settings,
};
use crate::clients::host::Host;
use crate::core::outcome::Failure;
use crate::core::propagation::rollout::policy::ROLLOUT_ANNOTATION;
use crate::sync::live::progress::Progress;
use crate::sync::run::observe::Observation;
use crate::sync::run::report::Report;
use anyhow::Result;

/// One round of the agent of `cluster` over `seen` (its member alone
/// touched); `reports` takes each object's report.
pub async fn round<H: HostRequests>(
    host: &Host,
    seen: &mut Observation,
    o: &Options,
    (reports, cluster): (&H, &str),
    progress: &dyn Progress,
) -> Result<RoundOutcome> {
    run_settings(host, seen, o)?;
    let mut report = Report::default();
    leave_rollouts_to_the_host(seen, &mut report);
    report_clusters(seen, &mut report);
    let decided = decide_all(host, seen);
    report_decisions(&decided, false, &mut report);
    let mut jobs = jobs(&decided, o.wait.is_some(), &mut report);
    permissions::check(seen, &mut jobs, o.selection.timeout, &mut report).await;
    progress.requests(jobs.iter().map(|j| j.work.len() as u64).sum());
    let limits = super::limits(o, seen);
    let clusters = Clusters::of(&seen.members);
    let mut pipeline = Pipeline::new((reports, &clusters), seen, limits, None, progress);
    pipeline.reports_for = Some(cluster.to_string());
    let finished = pipeline.run(jobs).await;
    let objects = account(finished, &mut report);
    crate::parallel::drop_in_background(super::Decided::into_decisions(decided));
    Ok(RoundOutcome {
        report,
        objects,
        served: Vec::new(),
    })
}

/// Objects under a progressive rollout wait: a rollout's waves span
/// members, and its record is the host's to keep (not yet across pull
/// members; issue #68). They are named once per round.
fn leave_rollouts_to_the_host(seen: &mut Observation, report: &mut Report) {
    for t in &mut seen.types {
        t.objects.retain(|fed| {
            let rolling = fed
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(ROLLOUT_ANNOTATION))
                .is_some();
            if rolling {
                let what = crate::core::describe::describe(&t.ty.federated_kind, fed);
                report.failures.push(Failure::of_federated(
                    what,
                    "a progressive rollout over a pull member is not supported yet: left as it is",
                ));
            }
            !rolling
        });
    }
}
