//! The host cluster: its client and name, whether `kubefedctl init` has run
//! there, and the federation's scope.

use crate::api::KUBEFED_CONFIG_NAME;
use crate::api::core::KubeFedConfig;
use crate::apply::{ObjectRef, resource_of};
use crate::clients::ClientFactory;
use crate::core::cluster::membership::Scope;
use crate::core::run::settings::Settings;
use anyhow::Result;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;

/// The CRD whose presence means the host is initialised.
pub const MARKER_CRD: &str = "kubefedclusters.core.kubefed.io";

#[derive(Clone)]
pub struct Host {
    /// The host's context in the kubeconfig.
    pub context: String,
    pub client: Client,
    pub namespace: String,
}

impl Host {
    /// The host of `context` (the kubeconfig's current one when `None`),
    /// with the federation in `namespace`.
    pub async fn connect(
        factory: &ClientFactory,
        context: Option<&str>,
        namespace: &str,
    ) -> Result<Host> {
        let context = factory.kubeconfig().resolve_context(context)?;
        let client = factory.client(&context).await?;
        Ok(Host {
            context,
            client,
            namespace: namespace.to_string(),
        })
    }

    pub fn object(
        &self,
        resource: kube::api::ApiResource,
        namespaced: bool,
        name: &str,
    ) -> ObjectRef {
        let ns = namespaced.then_some(self.namespace.as_str());
        ObjectRef::new("host", &self.client, resource, ns, name)
    }

    /// The host's FederatedTypeConfigs (none before `init` has installed
    /// their CRD).
    pub async fn type_configs(&self) -> Result<Vec<crate::api::core::FederatedTypeConfig>> {
        let api: kube::Api<crate::api::core::FederatedTypeConfig> =
            kube::Api::namespaced(self.client.clone(), &self.namespace);
        match api.list(&kube::api::ListParams::default()).await {
            Ok(list) => Ok(list.items),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(Vec::new()),
            Err(e) => Err(crate::apply::api_error(e)),
        }
    }

    /// Whether the host has the multi-cluster DNS API (`init --with-dns`).
    pub async fn dns_installed(&self) -> Result<bool> {
        let crd = self.object(
            resource_of::<CustomResourceDefinition>(),
            false,
            "servicednsrecords.multiclusterdns.kubefed.io",
        );
        Ok(crd.get().await?.is_some())
    }

    /// Fails with "host not initialised" when KubeFed's CRDs are missing.
    pub async fn require_initialised(&self) -> Result<()> {
        match self.initialised().await? {
            true => Ok(()),
            false => Err(self.not_initialised()),
        }
    }

    /// [`Self::require_initialised`] for a standby (`--leader-elect`): a host
    /// that does not answer is waited for (every `retry`), one line said
    /// once; a host that answers without KubeFed's CRDs is still an error.
    pub async fn wait_initialised(&self, retry: std::time::Duration) -> Result<()> {
        let mut said = false;
        loop {
            match self.initialised().await {
                Ok(true) => return Ok(()),
                Ok(false) => return Err(self.not_initialised()),
                Err(e) => {
                    if !std::mem::replace(&mut said, true) {
                        tracing::warn!(
                            "the host does not answer ({}); waiting for it (--leader-elect)",
                            crate::error::one_line(&e)
                        );
                    }
                    tokio::time::sleep(retry).await;
                }
            }
        }
    }

    /// Whether KubeFed's CRDs are there (one GET of the marker CRD).
    async fn initialised(&self) -> Result<bool> {
        let crd = self.object(resource_of::<CustomResourceDefinition>(), false, MARKER_CRD);
        Ok(crd.get().await?.is_some())
    }

    fn not_initialised(&self) -> anyhow::Error {
        anyhow::anyhow!(
            "host not initialised: run kubefedctl init (context {:?} has no KubeFed CRDs)",
            self.context
        )
    }

    /// The settings the `kubefed` KubeFedConfig gives (upstream's defaults
    /// when there is none); a malformed one is an error naming its field.
    pub async fn settings(&self) -> Result<Settings> {
        let config = self
            .object(resource_of::<KubeFedConfig>(), true, KUBEFED_CONFIG_NAME)
            .get()
            .await?;
        settings_of(&self.namespace, config.as_ref())
    }

    /// The federation's scope (`settings().scope`).
    pub async fn scope(&self) -> Result<Scope> {
        Ok(self.settings().await?.scope)
    }
}

/// A KubeFedConfig object (None: absent) in `namespace` → its settings, or
/// an error naming the object and the field.
pub fn settings_of(namespace: &str, config: Option<&serde_json::Value>) -> Result<Settings> {
    crate::core::run::settings::settings(config.map(|c| &c["spec"]))
        .map_err(|e| anyhow::anyhow!("KubeFedConfig {namespace}/{KUBEFED_CONFIG_NAME}: {e}"))
}

/// True when `key` names the federated type `f` configures: the FTC's own
/// name, the target's plural or kind, or the federated kind or plural.
pub fn names_federated_type(f: &crate::api::core::FederatedTypeConfig, key: &str) -> bool {
    let key = key.to_lowercase();
    let (t, fed) = (&f.spec.target_type, &f.spec.federated_type);
    f.metadata.name.as_deref() == Some(key.as_str())
        || t.plural_name == key
        || t.kind.to_lowercase() == key
        || fed.kind.to_lowercase() == key
        || fed.plural_name == key
}
