//! The escrow TLS certificate of the operator's :8443 listener (docs/design/requirements.md
//! R003.2: the deploy API is TLS only), made at install with rcgen and never committed: a CA and
//! a server certificate for the operator Service's names, signed by it.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};

use crate::error::{Error, Result};

/// PEMs of a generated certificate.
#[derive(Debug, Clone)]
pub struct Material {
    /// The CA clients trust (`curl --cacert ca.crt`).
    pub ca_pem: String,
    /// The server certificate.
    pub cert_pem: String,
    /// Its key (PKCS#8).
    pub key_pem: String,
}

fn tls_error(e: rcgen::Error) -> Error {
    Error::Cluster {
        action: "generate the escrow TLS certificate".to_owned(),
        reason: e.to_string(),
    }
}

/// The DNS names the operator Service answers to in `namespace`.
pub fn server_names(namespace: &str) -> Vec<String> {
    let service = bloodraven_api::names::OPERATOR_DEPLOYMENT;
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
        format!("{service}.{namespace}"),
        service.to_owned(),
        "localhost".to_owned(),
    ]
}

/// A fresh CA and a server certificate for the operator Service in `namespace`.
pub fn escrow_certificate(namespace: &str) -> Result<Material> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls_error)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "bloodraven escrow CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_key = KeyPair::generate().map_err(tls_error)?;
    let ca = ca_params.self_signed(&ca_key).map_err(tls_error)?;
    let mut params = CertificateParams::new(server_names(namespace)).map_err(tls_error)?;
    params
        .distinguished_name
        .push(DnType::CommonName, format!("bloodraven.{namespace}.svc"));
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().map_err(tls_error)?;
    let cert = params.signed_by(&key, &ca, &ca_key).map_err(tls_error)?;
    Ok(Material {
        ca_pem: ca.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_certificate_names_the_seed_003_host() {
        let material = escrow_certificate("bloodraven").expect("generate");
        assert!(material.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(material.key_pem.contains("PRIVATE KEY"));
        assert!(server_names("bloodraven").contains(&"bloodraven.bloodraven.svc".to_owned()));
        let other = escrow_certificate("bloodraven").expect("generate");
        assert_ne!(material.key_pem, other.key_pem, "a fresh key per install");
    }
}
