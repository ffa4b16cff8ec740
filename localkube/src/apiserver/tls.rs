//! The cluster CA and the serving certificate (rcgen), kept in the state dir.

use super::error::{Error, Result};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use std::path::Path;

/// PEMs of the CA and the serving certificate.
#[derive(Debug, Clone)]
pub struct Certs {
    /// CA certificate (what clients trust).
    pub ca_pem: String,
    /// Serving certificate.
    pub cert_pem: String,
    /// Serving key (PKCS#8).
    pub key_pem: String,
    /// Serving certificate, DER.
    pub cert_der: Vec<u8>,
    /// Serving key, DER.
    pub key_der: Vec<u8>,
}

fn ca_params() -> Result<CertificateParams> {
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(DnType::CommonName, "localkube-ca");
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    // Fixed validity so that re-deriving the CA from its key gives the same issuer.
    p.not_before = rcgen::date_time_ymd(2024, 1, 1);
    p.not_after = rcgen::date_time_ymd(2124, 1, 1);
    Ok(p)
}

/// Loads the CA from `dir` (creating it on first use) and issues a serving certificate for
/// 127.0.0.1, localhost, the `kubernetes` Service names and `extra_sans`.
pub fn load_or_create(dir: &Path, extra_sans: &[String]) -> Result<Certs> {
    let key_path = dir.join("ca.key");
    let crt_path = dir.join("ca.crt");
    let ca_key = if key_path.exists() {
        let pem = std::fs::read_to_string(&key_path).map_err(|e| Error::io(&key_path, e))?;
        KeyPair::from_pem(&pem)?
    } else {
        let k = KeyPair::generate()?;
        std::fs::write(&key_path, k.serialize_pem()).map_err(|e| Error::io(&key_path, e))?;
        k
    };
    let ca_cert = ca_params()?.self_signed(&ca_key)?;
    let ca_pem = if crt_path.exists() {
        std::fs::read_to_string(&crt_path).map_err(|e| Error::io(&crt_path, e))?
    } else {
        let pem = ca_cert.pem();
        std::fs::write(&crt_path, &pem).map_err(|e| Error::io(&crt_path, e))?;
        pem
    };
    let mut sans: Vec<String> = [
        "127.0.0.1",
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    sans.extend(extra_sans.iter().cloned());
    let mut p = CertificateParams::new(sans)?;
    p.distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate()?;
    let cert = p.signed_by(&key, &ca_cert, &ca_key)?;
    let certs = Certs {
        ca_pem,
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        cert_der: cert.der().to_vec(),
        key_der: key.serialize_der(),
    };
    let serving = dir.join("apiserver.crt");
    std::fs::write(&serving, &certs.cert_pem).map_err(|e| Error::io(&serving, e))?;
    Ok(certs)
}

/// The rustls server configuration for the serving certificate (HTTP/2 and HTTP/1.1).
pub fn server_config(certs: &Certs) -> Result<rustls::ServerConfig> {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(certs.cert_der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certs.key_der.clone())),
        )?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}
