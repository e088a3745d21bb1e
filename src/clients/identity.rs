//! Who the requester is, as the API server says (`SelfSubjectReview`,
//! `kubectl auth whoami`): `authentication.k8s.io/v1` from Kubernetes
//! 1.28, `v1beta1` on 1.27, `v1alpha1` where its alpha gate is on (1.26).
//! A server without it (1.20 to 1.25, or 1.26 with the gate off) cannot
//! confirm anyone: the name then comes from the kubeconfig, and says so
//! (`Identity::unconfirmed`), so that an approval recorded with it is not
//! taken for one the server vouched for.

use crate::apply::api_error;
use crate::core::propagation::rollout::Identity;
use anyhow::{Context, Result};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::json;

/// The versions of `selfsubjectreviews` tried, newest first.
const VERSIONS: [&str; 3] = ["v1", "v1beta1", "v1alpha1"];

/// The requester of `client` (whose kubeconfig context is `context`, its
/// `config` as loaded): the API server's answer, else the kubeconfig's.
pub async fn requester(
    client: &kube::Client,
    kubeconfig: &super::kubeconfig::LoadedKubeconfig,
    (context, config): (&str, &kube::Config),
) -> Result<Identity> {
    for version in VERSIONS {
        let ar = ApiResource {
            group: "authentication.k8s.io".into(),
            version: version.into(),
            api_version: format!("authentication.k8s.io/{version}"),
            kind: "SelfSubjectReview".into(),
            plural: "selfsubjectreviews".into(),
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let body: DynamicObject = serde_json::from_value(
            json!({"apiVersion": ar.api_version, "kind": ar.kind, "metadata": {}}),
        )?;
        match api.create(&PostParams::default(), &body).await {
            Ok(review) => {
                let user = review.data["status"]["userInfo"]["username"].as_str();
                let user = user.filter(|u| !u.is_empty()).with_context(|| {
                    format!("SelfSubjectReview ({version}): the API server named no user")
                })?;
                return Ok(Identity {
                    user: user.to_string(),
                    unconfirmed: None,
                });
            }
            Err(kube::Error::Api(s)) if s.code == 404 => continue,
            Err(e) => return Err(api_error(e)).context("asking the API server who we are"),
        }
    }
    Ok(from_kubeconfig(kubeconfig, context, config))
}

/// Without SelfSubjectReview: the common name of the client certificate
/// (the user name the server authenticates it as), else the kubeconfig's
/// basic-auth user name, else the name of the context's user entry.
fn from_kubeconfig(
    kubeconfig: &super::kubeconfig::LoadedKubeconfig,
    context: &str,
    config: &kube::Config,
) -> Identity {
    let no_review = "the API server serves no SelfSubjectReview";
    if let Some(cn) = certificate_name(&config.auth_info) {
        return Identity {
            user: cn,
            unconfirmed: Some(format!("{no_review}; the kubeconfig's client certificate")),
        };
    }
    if let Some(user) = config.auth_info.username.clone() {
        return Identity {
            user,
            unconfirmed: Some(format!("{no_review}; the kubeconfig's username")),
        };
    }
    let entry = kubeconfig.user_of(context).unwrap_or_default();
    Identity {
        user: format!("kubeconfig user {entry}"),
        unconfirmed: Some(format!(
            "{no_review}; the name of context {context}'s user in the kubeconfig"
        )),
    }
}

/// The subject's common name of the kubeconfig's client certificate.
fn certificate_name(auth: &kube::config::AuthInfo) -> Option<String> {
    use base64::Engine;
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let pem = match (&auth.client_certificate_data, &auth.client_certificate) {
        (Some(data), _) => base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .ok()?,
        (None, Some(path)) => std::fs::read(path).ok()?,
        (None, None) => return None,
    };
    let der = CertificateDer::from_pem_slice(&pem).ok()?;
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    let cn = cert.subject().iter_common_name().next()?;
    cn.as_str().ok().map(str::to_string)
}
