//! `reconcile --dry-run --validate`: every planned create and update is
//! sent to its member as a server-side dry run (`dryRun=All`) with strict
//! field validation (`fieldValidation=Strict`, GA in 1.27), so that a
//! template's misspelt or unknown field, or a value the member's own
//! validation or admission refuses, fails the pull request's plan naming
//! the member, the object and the field, instead of failing the merge.
//! One request per planned change (hence off by default); nothing is
//! written. Servers before 1.25 ignore `fieldValidation` but still run
//! their validation and admission on the dry run.

use crate::apply::api_error_line;
use crate::core::describe::{ObjectKey, describe_key};
use crate::core::outcome::{Change, Failure, Place};
use crate::core::propagation::action::Action;
use crate::sync::run::observe::Observation;
use crate::sync::run::report::Report;
use crate::sync::run::work::Work;
use futures::StreamExt;
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

/// The query of a validating dry run.
const DRY_RUN_STRICT: &str = "dryRun=All&fieldValidation=Strict";

/// Sends each planned create and update of `work` (the pipeline's jobs'
/// member requests) as a validating dry run, at most `concurrency` at
/// once; a refusal becomes one failure of the report (`member: create
/// Deployment shop/web: refused by the member's validation: ...`).
pub async fn validate<'w, 's: 'w>(
    seen: &Observation,
    work: impl Iterator<Item = &'w Work<'s>> + Clone,
    concurrency: usize,
    timeout: Duration,
    report: &mut Report,
) {
    // A dry run of an object in a namespace this plan creates would only
    // say the namespace is not there: such objects are not validated.
    let is_namespace = |w: &&Work| {
        let target = &w.ty.ty.target;
        target.group.is_empty() && target.kind == "Namespace"
    };
    let new_namespaces: BTreeSet<(String, String)> = (work.clone())
        .filter(|w| is_namespace(w) && matches!(w.decision.action, Action::Create(_)))
        .map(|w| (w.decision.cluster.clone(), w.key().name))
        .collect();
    // Nor can a member validate an object of a type it will serve only
    // once a CRD this plan creates is established (`live::crd_first`).
    let type_to_come = |w: &&Work| {
        let name = w.ty.name.to_string();
        seen.types_to_come
            .contains(&(name, w.decision.cluster.clone()))
    };
    let (mut unchecked, mut to_come) = (0, 0);
    let checks: Vec<Check> = work
        .filter(|w| {
            let coming = type_to_come(w);
            to_come += usize::from(coming);
            !coming
        })
        .filter(|w| {
            let in_new = !is_namespace(w)
                && new_namespaces.contains(&(w.decision.cluster.clone(), w.key().namespace));
            unchecked += usize::from(in_new);
            !in_new
        })
        .filter_map(|w| check_of(seen, w))
        .collect();
    let refusals: Vec<Option<Failure>> = futures::stream::iter(checks)
        .map(|c| async move {
            let answer =
                tokio::time::timeout(timeout, send(&c.client, c.method, &c.url, &c.body)).await;
            let why = match answer {
                Ok(Ok(())) => return None,
                Ok(Err(e)) => e,
                Err(_) => format!("no answer within {timeout:?}"),
            };
            Some(Failure::at(
                c.change.place.clone(),
                format!(
                    "{}: refused by the member's validation (server-side dry run): {why}",
                    c.change.what()
                ),
            ))
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let mut refusals: Vec<Failure> = refusals.into_iter().flatten().collect();
    refusals.sort_by_cached_key(ToString::to_string);
    report.failures.extend(refusals);
    if unchecked > 0 {
        report.notes.push(format!(
            "--validate: {unchecked} planned change(s) in namespaces this plan creates not validated (their namespace is not in the member yet)"
        ));
    }
    if to_come > 0 {
        report.notes.push(format!(
            "--validate: {to_come} planned change(s) of types defined by CRDs this plan creates not validated (the member does not serve them yet)"
        ));
    }
}

/// The validating request of one planned create or update (none for
/// other actions, or a member without a client).
fn check_of(seen: &Observation, w: &Work) -> Option<Check> {
    let (method, object) = match &w.decision.action {
        Action::Create(obj) => ("POST", obj.as_ref()),
        Action::Update { object, .. } => ("PUT", object),
        _ => return None,
    };
    let client = (seen.member(&w.decision.cluster)).and_then(|m| m.client.clone().ok())?;
    let t = w.ty;
    let ObjectKey {
        namespace: ns,
        name,
    } = w.key();
    let api = crate::apply::dynamic_api(&client, Some(&ns), &t.target);
    let url = match method {
        "POST" => format!("{}?{DRY_RUN_STRICT}", api.resource_url()),
        _ => format!("{}/{name}?{DRY_RUN_STRICT}", api.resource_url()),
    };
    Some(Check {
        change: Change::new(
            Place::member(&w.decision.cluster),
            w.decision.action.verb(),
            describe_key(&t.ty.target.kind, &w.key()),
        ),
        method,
        url,
        body: object.clone(),
        client,
    })
}

/// One validating request, owned so that the checks run concurrently.
struct Check {
    /// `member1: create Deployment shop/web`.
    change: Change,
    method: &'static str,
    url: String,
    body: Value,
    client: kube::Client,
}

/// One request with a JSON body; the server's refusal as one line.
async fn send(client: &kube::Client, method: &str, url: &str, body: &Value) -> Result<(), String> {
    let request = http::Request::builder()
        .method(method)
        .uri(url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(body).expect("objects serialize"))
        .expect("a valid request");
    client
        .request_text(request)
        .await
        .map(drop)
        .map_err(api_error_line)
}
