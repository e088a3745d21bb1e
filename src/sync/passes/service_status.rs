//! Upstream's status controller for `services`: writes the
//! FederatedServiceStatus of every federated Service a round covers, from
//! the member lists the round already holds (one list of the status
//! objects per type and round; no request for types without it). What to
//! write is `core::service_status`.

use crate::apply::{api_error, dynamic_api};
use crate::core::describe::key_of;
use crate::core::outcome::{Change, Failure, Place};
use crate::core::propagation::decide::Listing;
use crate::core::service_status::{Write, desired, write};
use crate::sync::run::mode::HostWriter;
use crate::sync::run::observe::{Observation, ObservedType, list_all};
use crate::sync::run::report::Report;
use anyhow::{Context, Result};
use kube::api::{DynamicObject, ListParams, PostParams};
use serde_json::Value;
use std::collections::HashMap;

/// Writes (or, on a dry run, plans) the status objects of every type that
/// has one; a failure is the report's, never the round's.
pub async fn write_all(writer: HostWriter<'_>, seen: &Observation, report: &mut Report) {
    // A watch round of other objects lists nothing.
    let due = |t: &&ObservedType| {
        seen.settings
            .writes_service_status(t.service_status.is_some())
            && !t.objects.is_empty()
    };
    for t in seen.types.iter().filter(due) {
        if let Err(e) = write_type(writer, seen, t, report).await {
            report.failures.push(Failure::of(
                Place::Host,
                t.service_status.as_ref().map_or("", |s| s.kind.as_str()),
                crate::error::one_line(&e),
            ));
        }
    }
}

async fn write_type(
    writer: HostWriter<'_>,
    seen: &Observation,
    t: &ObservedType,
    report: &mut Report,
) -> Result<()> {
    let host = writer.host;
    let ar = t.service_status.as_ref().expect("a status type");
    let api = dynamic_api(&host.client, seen.namespace.as_deref(), ar);
    let existing: HashMap<_, Value> = list_all(&api, &ListParams::default())
        .await
        .with_context(|| format!("listing {}", ar.plural))?
        .into_iter()
        .map(|o| (key_of(&o), o))
        .collect();
    let ready: Vec<&str> = (seen.members.iter())
        .filter(|p| p.is_ready())
        .map(|p| p.name())
        .collect();
    for fed in &t.objects {
        if !fed["metadata"]["deletionTimestamp"].is_null() {
            continue; // the host's garbage collector removes its status
        }
        let key = key_of(fed);
        let copies: Vec<(String, Option<Value>)> = ready
            .iter()
            .map(|c| {
                let copy = match t.members.get(*c) {
                    Some(Listing::Listed(objects)) => objects.get(&key).map(|o| o.value()),
                    _ => None,
                };
                (c.to_string(), copy)
            })
            .collect();
        let clusters: Vec<(String, Option<&Value>)> = copies
            .iter()
            .map(|(c, o)| (c.clone(), o.as_ref()))
            .collect();
        let want = desired(fed, &ar.api_version, &ar.kind, &clusters);
        let Some(w) = write(existing.get(&key), want) else {
            continue;
        };
        let (verb, obj) = match w {
            Write::Create(o) => ("create", o),
            Write::Update(o) => ("update", o),
        };
        let what = format!("{} {}/{}", ar.kind, key.namespace, key.name);
        let planned = || Change::new(Place::Host, verb, what.clone());
        let api = dynamic_api(&host.client, Some(&key.namespace), ar);
        let body: DynamicObject = serde_json::from_value(obj)?;
        let request = async {
            let pp = PostParams::default();
            match verb {
                "create" => api.create(&pp, &body).await,
                _ => api.replace(&key.name, &pp, &body).await,
            }
            .map_err(api_error)
        };
        if let Err(e) = writer.write(report, planned, request).await {
            report.failures.push(Failure::at(
                Place::Host,
                format!("{verb} {what}: {}", crate::error::one_line(&e)),
            ));
        }
    }
    Ok(())
}
