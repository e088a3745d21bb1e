//! Certificates and keys for a test control plane: one CA for everything
//! (apiservers, proxies, clients), and a service-account signing key pair.

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use std::net::{IpAddr, Ipv4Addr};

/// A self-signed CA that issues the serving certificates of the environment.
pub struct Ca {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A PEM certificate and its PKCS#8 PEM private key.
#[derive(Clone, Debug)]
pub struct CertPair {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Ca {
    pub fn new(common_name: &str) -> Result<Ca> {
        let key = KeyPair::generate().context("generating CA key")?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).context("self-signing CA")?;
        Ok(Ca {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A serving certificate for loopback (`127.0.0.1`, `::1`, `localhost`)
    /// plus the given extra DNS names.
    pub fn issue_serving_cert(&self, common_name: &str, dns_names: &[&str]) -> Result<CertPair> {
        let mut names: Vec<String> = vec!["localhost".into()];
        names.extend(dns_names.iter().map(|s| s.to_string()));
        let spec = CertSpec {
            dns_names: names,
            loopback: true,
            ips: Vec::new(),
            validity: None,
        };
        self.issue(&spec, common_name)
    }

    /// A serving certificate saying what `spec` says: to test clients that
    /// must refuse (or, by exception, accept) a wrong name or an expired one.
    pub fn issue_cert(&self, spec: &CertSpec) -> Result<CertPair> {
        self.issue(spec, "testenv-special")
    }

    /// A serving certificate saying what `spec` says, with its own common name.
    pub fn issue_cert_named(&self, common_name: &str, spec: &CertSpec) -> Result<CertPair> {
        self.issue(spec, common_name)
    }

    /// A client certificate for `common_name` (the aggregator's front
    /// proxy: `--proxy-client-cert-file`).
    pub fn issue_client_cert(&self, common_name: &str) -> Result<CertPair> {
        let params = CertificateParams::new(Vec::<String>::new())?;
        self.signed(params, common_name, ExtendedKeyUsagePurpose::ClientAuth)
    }

    fn issue(&self, spec: &CertSpec, common_name: &str) -> Result<CertPair> {
        let mut params = CertificateParams::new(spec.dns_names.clone())?;
        if spec.loopback {
            params
                .subject_alt_names
                .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
            params
                .subject_alt_names
                .push(SanType::IpAddress("::1".parse().expect("valid")));
        }
        for ip in &spec.ips {
            params.subject_alt_names.push(SanType::IpAddress(*ip));
        }
        if let Some(((y0, m0, d0), (y1, m1, d1))) = spec.validity {
            params.not_before = rcgen::date_time_ymd(y0, m0, d0);
            params.not_after = rcgen::date_time_ymd(y1, m1, d1);
        }
        self.signed(params, common_name, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// `params` for `common_name` and `usage`, signed by the CA, with a new key.
    fn signed(
        &self,
        mut params: CertificateParams,
        common_name: &str,
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<CertPair> {
        let key = KeyPair::generate()?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![usage];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(CertPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// A calendar day, `(year, month, day)`.
pub type Day = (i32, u8, u8);

/// What a certificate from [`Ca::issue_cert`] says of itself.
#[derive(Clone, Debug, Default)]
pub struct CertSpec {
    /// DNS subject alternative names.
    pub dns_names: Vec<String>,
    /// Also `127.0.0.1` and `::1` as IP subject alternative names.
    pub loopback: bool,
    /// More IP subject alternative names.
    pub ips: Vec<IpAddr>,
    /// `(notBefore, notAfter)` as `(year, month, day)`; rcgen's default when unset.
    pub validity: Option<(Day, Day)>,
}

/// DER of the first certificate in a PEM text.
pub fn pem_to_der(pem: &str) -> Result<Vec<u8>> {
    use base64::Engine as _;
    let body: String = pem
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN CERTIFICATE"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .context("decoding PEM")
}

/// An ECDSA P-256 key pair for signing service-account tokens
/// (`--service-account-signing-key-file` / `--service-account-key-file`).
pub struct SigningKey {
    pub private_pem: String,
    pub public_pem: String,
}

impl SigningKey {
    pub fn generate() -> Result<SigningKey> {
        let key = KeyPair::generate()?;
        Ok(SigningKey {
            private_pem: key.serialize_pem(),
            public_pem: key.public_key_pem(),
        })
    }
}

/// A random lowercase-hex token of `bytes` random bytes, from the OS.
pub fn random_token(bytes: usize) -> Result<String> {
    use std::io::Read;
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_pem_material() {
        let ca = Ca::new("test-ca").unwrap();
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        let pair = ca.issue_serving_cert("apiserver", &["kubernetes"]).unwrap();
        assert!(pair.cert_pem.contains("BEGIN CERTIFICATE"));
        assert!(pair.key_pem.contains("BEGIN PRIVATE KEY"));
        let sk = SigningKey::generate().unwrap();
        assert!(sk.public_pem.contains("BEGIN PUBLIC KEY"));
        let t1 = random_token(16).unwrap();
        assert_eq!(t1.len(), 32);
        assert_ne!(t1, random_token(16).unwrap());
    }
}
