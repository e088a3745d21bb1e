//! The agent's host credential: the kubeconfig join wrote into the member
//! Secret `kubefedctl-agent-host`, whose token (a TokenRequest token of
//! the agent's host ServiceAccount) the agent renews at 80 % of its
//! lifetime with a TokenRequest for itself: the new token is used at once
//! and written back into the member Secret, which the pod's volume
//! follows and a restarted agent reads.

use crate::clients::host::Host;
use crate::clients::kubeconfig::LoadedKubeconfig;
use crate::clients::{ClientFactory, Timeouts};
use crate::core::cluster::pull::{self, AGENT, HOST_SECRET, HOST_SECRET_KEY, report_namespace};
use crate::core::cluster::token::Lifetime;
use anyhow::{Context, Result, anyhow};
use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use std::path::Path;

/// The agent's kubeconfig of the host, as read or last renewed.
pub struct HostCredential {
    kubeconfig: Value,
    source: String,
    context: Option<String>,
    timeouts: Timeouts,
    /// The token's lifetime, read from its claims (`None`: a token that
    /// does not say, which is never renewed).
    pub lifetime: Option<Lifetime>,
    /// `--renew-before`: renewed this long before it expires (`None`: once
    /// 80 % of its lifetime has passed).
    pub renew_before: Option<std::time::Duration>,
}

impl HostCredential {
    /// Reads `path` (`--host-kubeconfig`); `context` in it, or its current.
    pub fn read(path: &Path, context: Option<&str>, timeouts: Timeouts) -> Result<HostCredential> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--host-kubeconfig {}", path.display()))?;
        let kubeconfig = crate::yaml::yaml_documents(&text)
            .map_err(|e| anyhow!("--host-kubeconfig {}: {e}", path.display()))?
            .into_iter()
            .next()
            .ok_or_else(|| anyhow!("--host-kubeconfig {}: empty", path.display()))?;
        let mut credential = HostCredential {
            kubeconfig,
            source: path.display().to_string(),
            context: context.map(str::to_string),
            timeouts,
            lifetime: None,
            renew_before: None,
        };
        credential.lifetime = credential.token().as_deref().and_then(lifetime_of);
        Ok(credential)
    }

    /// The host, reached with this credential, federation in `namespace`.
    pub async fn connect(&self, namespace: &str) -> Result<Host> {
        let config = serde_json::from_value(self.kubeconfig.clone())
            .with_context(|| format!("--host-kubeconfig {}", self.source))?;
        let loaded = LoadedKubeconfig {
            config,
            source: self.source.clone(),
        };
        let factory = ClientFactory::new(loaded, self.timeouts);
        Host::connect(&factory, self.context.as_deref(), namespace).await
    }

    /// The token of the context's user.
    fn token(&self) -> Option<String> {
        let current = self.context.clone().or_else(|| {
            self.kubeconfig["current-context"]
                .as_str()
                .map(str::to_string)
        })?;
        let contexts = self.kubeconfig["contexts"].as_array()?;
        let user =
            contexts.iter().find(|c| c["name"] == current.as_str())?["context"]["user"].as_str()?;
        let users = self.kubeconfig["users"].as_array()?;
        let found = users.iter().find(|u| u["name"] == user)?;
        found["user"]["token"].as_str().map(str::to_string)
    }

    /// `--renew-before`, refused when not shorter than the token's own
    /// lifetime (it would be renewed at every heartbeat).
    pub fn renew_before(&mut self, before: std::time::Duration) -> Result<()> {
        if let Some(life) = self.lifetime
            && before.as_secs() as i64 >= life.ttl_seconds
        {
            return Err(crate::error::usage(format!(
                "--renew-before {}s: not shorter than the host token's lifetime ({}s, --host-kubeconfig {})",
                before.as_secs(),
                life.ttl_seconds,
                self.source
            )));
        }
        self.renew_before = Some(before);
        Ok(())
    }

    /// Renews the token once it is due (`--renew-before` ahead of its
    /// expiry, else at 80 % of its lifetime): a new one of
    /// the same lifetime for the agent's own ServiceAccount, `host` then
    /// reached with it, and the member Secret rewritten. `Ok(false)`: not due.
    pub async fn renew_if_due(
        &mut self,
        host: &mut Host,
        member: &kube::Client,
        cluster: &str,
    ) -> Result<bool> {
        let Some(lifetime) = self.lifetime else {
            return Ok(false);
        };
        let before = self.renew_before.map(|d| d.as_secs() as i64);
        if !lifetime.renewal_due(crate::clock::now_unix(), before) {
            return Ok(false);
        }
        let reports = report_namespace(&host.namespace, cluster);
        let (token, renewed) =
            crate::member_token::issue(&host.client, &reports, AGENT, lifetime.ttl_seconds).await?;
        let kubeconfig = pull::with_token(self.kubeconfig.clone(), &token)
            .ok_or_else(|| anyhow!("--host-kubeconfig {}: no user holds a token", self.source))?;
        let text = serde_json::to_string_pretty(&kubeconfig)?;
        self.kubeconfig = kubeconfig;
        self.lifetime = Some(renewed);
        *host = self.connect(&host.namespace).await?;
        let secrets: Api<Secret> = Api::namespaced(member.clone(), &host.namespace);
        let b64 = base64::engine::general_purpose::STANDARD;
        let patch = json!({"data": {HOST_SECRET_KEY: b64.encode(text)}});
        match secrets
            .patch(HOST_SECRET, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            // An agent run by hand, with a kubeconfig of its own.
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                return Err(crate::apply::api_error(e))
                    .context("writing the renewed token into the member Secret");
            }
        }
        Ok(true)
    }
}

/// A service-account token's lifetime from its claims (`iat`, `exp`); the
/// claims are read, not verified: the host verifies them.
pub fn lifetime_of(token: &str) -> Option<Lifetime> {
    let claims = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(claims.trim_end_matches('='))
        .ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    let (iat, exp) = (claims["iat"].as_i64()?, claims["exp"].as_i64()?);
    Some(Lifetime {
        ttl_seconds: exp - iat,
        expires_at: exp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tokens_lifetime_is_read_from_its_claims() {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let claims = b64.encode(r#"{"iat":1000,"exp":4600,"sub":"system:serviceaccount:x:y"}"#);
        let token = format!("eyJhbGciOiJSUzI1NiJ9.{claims}.signature");
        let life = lifetime_of(&token).unwrap();
        assert_eq!((life.ttl_seconds, life.expires_at), (3600, 4600));
        assert!(!life.rotation_due(3879));
        assert!(life.rotation_due(3880));
        assert!(lifetime_of("not-a-jwt").is_none());
    }
}
