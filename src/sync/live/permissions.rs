//! Before a one-shot run writes anything (and in its `--dry-run`), each
//! member with planned changes is asked once what its identity may do (a
//! SelfSubjectRulesReview, counted with the member's other requests). A
//! planned change the identity may not make is dropped and named with the
//! command that fixes it, so that a least-privilege member whose role lags
//! behind the types (docs/security.md) fails at once, visibly, and no
//! other member is held back. A member whose authorizer cannot say
//! (`incomplete`, or no answer) is not checked: its requests report what
//! it refuses, as any refused request is.

use crate::core::cluster::rbac::missing;
use crate::core::outcome::{Failure, Place};
use crate::core::propagation::action::Action;
use crate::sync::live::pipeline::Job;
use crate::sync::run::observe::Observation;
use crate::sync::run::report::Report;
use k8s_openapi::api::authorization::v1::{SelfSubjectRulesReview, SelfSubjectRulesReviewSpec};
use kube::api::{Api, PostParams};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// The RBAC verb a planned member request takes.
fn verb(action: &Action) -> Option<&'static str> {
    match action {
        Action::Create(_) => Some("create"),
        Action::Update { .. } => Some("update"),
        Action::Delete { .. } => Some("delete"),
        Action::RemoveManagedLabel => Some("patch"),
        Action::AwaitRemoval => Some("get"),
        Action::Unchanged | Action::Nothing | Action::Skip | Action::Report(_) => None,
    }
}

/// Drops from `jobs` every planned change a member's identity may not
/// make; one failure per member, verb and resource, with how many changes
/// it holds back.
pub async fn check(
    seen: &Observation,
    jobs: &mut [Job<'_>],
    timeout: Duration,
    report: &mut Report,
) {
    let rules = member_rules(seen, jobs, timeout).await;
    // (member, verb, group, plural) → changes held back.
    let mut refused: BTreeMap<(String, &str, String, String), usize> = BTreeMap::new();
    for job in jobs.iter_mut() {
        job.work.retain(|w| {
            let Some(rules) = rules.get(&w.decision.cluster) else {
                return true;
            };
            let Some(verb) = verb(&w.decision.action) else {
                return true;
            };
            let target = &w.ty.target;
            if missing(
                rules,
                [(target.group.as_str(), target.plural.as_str(), verb)],
            )
            .is_none()
            {
                return true;
            }
            let key = (
                w.decision.cluster.clone(),
                verb,
                target.group.clone(),
                target.plural.clone(),
            );
            *refused.entry(key).or_default() += 1;
            false
        });
    }
    for ((cluster, verb, group, plural), count) in refused {
        report.cluster(&cluster).failed += count;
        let resource = match group.as_str() {
            "" => plural,
            g => format!("{plural}.{g}"),
        };
        report.failures.push(Failure::at(
            Place::member(&cluster),
            format!(
                "not allowed to {verb} {resource} ({count} planned change(s) not made): run kubefedctl join {cluster} --rbac least --error-on-existing=false"
            ),
        ));
    }
}

/// What each member with planned changes may do, as its
/// SelfSubjectRulesReview says (RBAC rule objects); members that could not
/// say are left out.
async fn member_rules(
    seen: &Observation,
    jobs: &[Job<'_>],
    timeout: Duration,
) -> BTreeMap<String, Vec<Value>> {
    // A namespace of each member's planned changes: rules bound cluster-wide
    // (a least-privilege ClusterRole) show in any; a namespace-scoped
    // federation's Role in its own.
    let mut namespaces: BTreeMap<&str, String> = BTreeMap::new();
    for w in jobs.iter().flat_map(|j| &j.work) {
        if verb(&w.decision.action).is_none() {
            continue;
        }
        let ns = w.key().namespace;
        let slot = namespaces.entry(w.decision.cluster.as_str()).or_default();
        if slot.is_empty() {
            *slot = ns;
        }
    }
    let reviews = namespaces.into_iter().filter_map(|(cluster, ns)| {
        let client = seen.member(cluster)?.client.clone().ok()?;
        let ns = match (ns.as_str(), seen.namespace.as_deref()) {
            (_, Some(own)) => own.to_string(),
            ("", None) => "default".to_string(),
            (ns, None) => ns.to_string(),
        };
        Some(async move { (cluster.to_string(), review(client, ns, timeout).await) })
    });
    futures::future::join_all(reviews)
        .await
        .into_iter()
        .filter_map(|(cluster, rules)| Some((cluster, rules?)))
        .collect()
}

/// One SelfSubjectRulesReview; `None` when the authorizer cannot say.
async fn review(client: kube::Client, namespace: String, timeout: Duration) -> Option<Vec<Value>> {
    let api: Api<SelfSubjectRulesReview> = Api::all(client);
    let ask = SelfSubjectRulesReview {
        spec: SelfSubjectRulesReviewSpec {
            namespace: Some(namespace),
        },
        ..Default::default()
    };
    let answer = tokio::time::timeout(timeout, api.create(&PostParams::default(), &ask))
        .await
        .ok()?
        .ok()?;
    let status = answer.status?;
    if status.incomplete {
        return None;
    }
    Some(
        status
            .resource_rules
            .iter()
            .filter(|r| r.resource_names.as_ref().is_none_or(Vec::is_empty))
            .filter_map(|r| serde_json::to_value(r).ok())
            .collect(),
    )
}
