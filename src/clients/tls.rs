//! A member client whose TLS verification skips only what the member's
//! `disabledTLSValidations` names (`SubjectName`, `ValidityPeriod`), as
//! KubeFed v0.10's `pkg/controller/util/cluster_util.go`
//! (`CustomizeCertificateValidation`) does: the chain is still verified
//! against the `caBundle`. The rule of what is skipped is `core::cluster::tls`.
//!
//! kube's `ClientBuilder::try_from(Config)` offers no hook for a certificate
//! verifier, so this builds the same stack itself (connector, timeouts,
//! proxy tunnel, base URI, auth and extra headers), for these members only.

use crate::core::cluster::tls::validity_check_time;
use anyhow::{Context, Result};
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::{Connection, HttpConnector, proxy::Tunnel};
use hyper_util::rt::TokioExecutor;
use kube::client::{Body, ClientBuilder, ConfigExt};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_cert_signed_by_trust_anchor, verify_server_name};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::Arc;
use tower::util::BoxService;
use tower::{BoxError, ServiceBuilder, ServiceExt as _};

/// The service a relaxed member client runs on.
pub type MemberService = BoxService<Request<Body>, Response<Incoming>, BoxError>;

/// Verifies the chain against the member's CA, skipping the named checks.
#[derive(Debug)]
struct RelaxedVerifier {
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
    skip_subject_name: bool,
    skip_validity_period: bool,
}

impl ServerCertVerifier for RelaxedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        let at = if self.skip_validity_period {
            let not_before = not_before(end_entity).ok_or(rustls::Error::InvalidCertificate(
                rustls::CertificateError::BadEncoding,
            ))?;
            UnixTime::since_unix_epoch(std::time::Duration::from_secs(
                validity_check_time(not_before).max(0) as u64,
            ))
        } else {
            now
        };
        let algorithms = self.provider.signature_verification_algorithms.all;
        verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            at,
            algorithms,
        )?;
        if !self.skip_subject_name {
            verify_server_name(&cert, server_name)?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A certificate's `notBefore`, in seconds since the Unix epoch.
fn not_before(der: &CertificateDer<'_>) -> Option<i64> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    Some(cert.validity().not_before.timestamp())
}

/// A client builder for a member whose `disabledTLSValidations` skips some
/// checks. `config` holds the member's endpoint, CA, token, proxy and
/// timeouts, as for any member.
pub fn relaxed_client_builder(
    config: &kube::Config,
    skip_subject_name: bool,
    skip_validity_period: bool,
) -> Result<ClientBuilder<MemberService>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for der in config.root_cert.iter().flatten() {
        roots
            .add(CertificateDer::from(der.clone()))
            .context("adding the caBundle's certificate")?;
    }
    if roots.is_empty() {
        // Upstream verifies against the system's roots then; we do not ship
        // them for this path, and a chain nobody can verify is no exception.
        anyhow::bail!(
            "spec.disabledTLSValidations other than \"*\" needs a caBundle to verify the chain against"
        );
    }
    let verifier = RelaxedVerifier {
        roots: Arc::new(roots),
        provider: provider.clone(),
        skip_subject_name,
        skip_validity_period,
    };
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let https = || {
        hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls.clone())
            .https_or_http()
            .enable_http1()
    };
    let service = match &config.proxy_url {
        None => stack(config, https().wrap_connector(http))?,
        Some(proxy) if proxy.scheme_str() == Some("http") => {
            let mut tunnel = Tunnel::new(proxy.clone(), http);
            if let Some(header) = proxy_authorization(proxy) {
                tunnel = tunnel.with_auth(header);
            }
            stack(config, https().wrap_connector(tunnel))?
        }
        Some(proxy) => anyhow::bail!(
            "spec.proxyURL {proxy}: only http:// proxies work with spec.disabledTLSValidations other than \"*\""
        ),
    };
    let namespace = config.default_namespace.clone();
    Ok(ClientBuilder::new(service, namespace))
}

/// The layers kube's own builder puts on a connector: timeouts, base URI,
/// bearer token and extra headers.
fn stack<C>(config: &kube::Config, connector: C) -> Result<MemberService>
where
    C: tower::Service<http::Uri> + Clone + Send + Sync + 'static,
    C::Response: Connection + hyper::rt::Read + hyper::rt::Write + Send + Unpin + 'static,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    let mut connector = TimeoutConnector::new(connector);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    let client: hyper_util::client::legacy::Client<_, Body> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(connector);
    let auth = config.auth_layer().context("the member's credentials")?;
    let headers = config.extra_headers_layer().context("extra headers")?;
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(auth)
        .layer(headers)
        .map_err(BoxError::from)
        .service(client);
    Ok(service.boxed())
}

/// `Proxy-Authorization: Basic …` for a proxy URL with user info.
fn proxy_authorization(proxy: &http::Uri) -> Option<http::HeaderValue> {
    use base64::Engine as _;
    let (userinfo, _) = proxy.authority()?.as_str().split_once('@')?;
    let encoded = base64::engine::general_purpose::STANDARD.encode(userinfo);
    http::HeaderValue::from_str(&format!("Basic {encoded}")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_not_before_from_a_certificate() {
        let ca = testenv::pki::Ca::new("test-ca").unwrap();
        let pair = ca
            .issue_cert(&testenv::pki::CertSpec {
                dns_names: vec!["a.example".into()],
                loopback: false,
                ips: Vec::new(),
                validity: Some(((2020, 1, 2), (2020, 3, 4))),
            })
            .unwrap();
        let der = testenv::pki::pem_to_der(&pair.cert_pem).unwrap();
        // 2020-01-02T00:00:00Z
        assert_eq!(not_before(&CertificateDer::from(der)), Some(1_577_923_200));
        assert_eq!(not_before(&CertificateDer::from(vec![1, 2, 3])), None);
    }

    #[test]
    fn proxy_user_info_becomes_basic_auth() {
        let uri: http::Uri = "http://user:pass@proxy:3128".parse().unwrap();
        assert_eq!(
            proxy_authorization(&uri).unwrap(),
            "Basic dXNlcjpwYXNz" // base64("user:pass")
        );
        let plain: http::Uri = "http://proxy:3128".parse().unwrap();
        assert!(proxy_authorization(&plain).is_none());
    }
}
