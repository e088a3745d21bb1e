//! The FederatedTypeConfigs' status, as KubeFed's running controller writes
//! it: `Running` for the types the watch propagates while it leads, all
//! `NotRunning` when it stops. Its own file because it is the one host
//! write that belongs to neither the rounds nor the members' health.

use super::Controller;
use crate::sync::run::observe;

impl Controller<'_> {
    /// Each FederatedTypeConfig's status as a running controller writes it
    /// (`Running` for the types this watch propagates; all `NotRunning`
    /// when it stops), only where it changes. A failed write is reported
    /// and tried again at the next rebuild.
    pub(super) async fn write_type_statuses(&mut self, running: bool) {
        if self.runner.suspended() || !self.writes_cluster_state() {
            return;
        }
        let api: kube::Api<crate::api::core::FederatedTypeConfig> =
            kube::Api::namespaced(self.shared.host.client.clone(), &self.shared.host.namespace);
        for (name, ftc) in &self.intake.cache.ftcs {
            let current = serde_json::to_value(&ftc.status).unwrap_or_default();
            let generation = ftc.metadata.generation.unwrap_or(0);
            let status_controller = (self.intake.cache.settings)
                .writes_service_status(observe::service_status_type(ftc).is_some());
            let Some(status) = crate::core::types::typegen::ftc_status(
                &current,
                generation,
                running && ftc.spec.is_enabled(),
                status_controller,
            ) else {
                continue;
            };
            let patch = kube::api::Patch::Merge(serde_json::json!({ "status": status }));
            if let Err(e) = api
                .patch_status(name, &kube::api::PatchParams::default(), &patch)
                .await
            {
                tracing::warn!(
                    "FederatedTypeConfig {name}: writing its status: {}",
                    crate::apply::api_error_line(e)
                );
            }
        }
    }
}
