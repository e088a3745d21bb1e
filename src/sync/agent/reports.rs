//! The agent's record step: each object's report of its member into its
//! report namespace on the host (`core::propagation::report`), written
//! only when it says something new, and the reports of objects gone from
//! the host removed.

use crate::apply::{api_error, api_resource, dynamic_api};
use crate::core::describe::ObjectKey;
use crate::core::propagation::decide::{FinalizerStep, ObjectPlan};
use crate::core::propagation::record::WriteBack;
use crate::core::propagation::report::{self as r, Report, Reports};
use crate::sync::live::progress::Answer;
use crate::sync::live::requests::HostRequests;
use anyhow::{Context, Result};
use kube::api::{ApiResource, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The field manager of the agent's reports.
const FIELD_MANAGER: &str = "kubefedctl-agent";

fn reports_resource() -> ApiResource {
    api_resource(r::GROUP, r::VERSION, r::KIND, r::PLURAL)
}

/// Writes one agent's reports, in its report namespace on the host.
pub struct ReportWriter {
    client: kube::Client,
    namespace: String,
    /// The reports as listed when the round began.
    pub existing: Reports,
    /// Reports written this round.
    pub written: AtomicUsize,
}

impl ReportWriter {
    /// The writer of `namespace`, with the reports it holds now.
    pub async fn list(client: &kube::Client, namespace: &str) -> Result<ReportWriter> {
        let api = dynamic_api(client, Some(namespace), &reports_resource());
        let objects = crate::sync::run::observe::list_all(&api, &ListParams::default())
            .await
            .with_context(|| format!("listing the PropagationReports in {namespace}"))?;
        let ns = namespace.to_string();
        Ok(ReportWriter {
            client: client.clone(),
            namespace: namespace.to_string(),
            existing: Reports::of(&objects, |_| ns.clone()),
            written: AtomicUsize::new(0),
        })
    }

    /// Writes `report` unless the host already has it (or it says a copy
    /// was removed that was never reported). Returns the writes made.
    pub async fn write(&self, report: &Report) -> Result<usize> {
        match self
            .existing
            .get(&report.cluster, &report.type_name, &report.key)
        {
            Some(old) if old.says_the_same_as(report) => return Ok(0),
            None if report.removed => return Ok(0),
            _ => {}
        }
        let object = report.to_object(&self.namespace);
        let name = r::name_of(&report.type_name, &report.key);
        let api = dynamic_api(&self.client, Some(&self.namespace), &reports_resource());
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&object),
        )
        .await
        .map_err(api_error)
        .with_context(|| format!("writing PropagationReport {}/{name}", self.namespace))?;
        self.written.fetch_add(1, Ordering::Relaxed);
        Ok(1)
    }

    /// Removes the reports of objects the host no longer has (`observed`:
    /// every type name, object and UID the round read; `namespace`: the
    /// one namespace it read, `-n`). Returns how many.
    pub async fn remove_stale(
        &self,
        observed: &BTreeSet<(String, ObjectKey, String)>,
        namespace: Option<&str>,
    ) -> Result<usize> {
        let api = dynamic_api(&self.client, Some(&self.namespace), &reports_resource());
        let mut removed = 0;
        let in_scope = |r: &&Report| namespace.is_none_or(|ns| r.key.namespace == ns);
        for report in self.existing.iter().filter(in_scope) {
            let key = (
                report.type_name.clone(),
                report.key.clone(),
                report.uid.clone(),
            );
            if observed.contains(&key) {
                continue;
            }
            let name = r::name_of(&report.type_name, &report.key);
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => removed += 1,
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    return Err(api_error(e)).with_context(|| {
                        format!("removing PropagationReport {}/{name}", self.namespace)
                    });
                }
            }
        }
        Ok(removed)
    }
}

impl HostRequests for ReportWriter {
    /// The host's runs add and release the sync finalizer; an agent may not.
    async fn finalizer_first(
        &self,
        _federated: &ApiResource,
        _fed: &Value,
        _step: FinalizerStep,
    ) -> Result<Option<Value>> {
        Ok(None)
    }

    async fn write_back(
        &self,
        _federated: &ApiResource,
        _fed: &Value,
        _plan: &ObjectPlan,
        write: WriteBack,
        _answers: Option<&mut Vec<Answer>>,
    ) -> Result<usize> {
        match &write.report {
            Some(report) => self.write(report).await,
            None => Ok(0),
        }
    }
}
