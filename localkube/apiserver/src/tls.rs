//! The cluster CA, the serving certificate and the admin's client certificate (rcgen),
//! kept in the state dir, and TLS client-certificate authentication as kube-apiserver does
//! it: a client certificate is requested but optional (token clients still work), and the
//! handshake only proves the client holds the key; the chain is verified against the
//! cluster CA afterwards ([`ClientCa::identify`]), so an expired or foreign certificate is a
//! 401 from the API rather than a failed handshake.

use super::auth::{self, ClientCertificate, MASTERS};
use super::error::{Error, Result};
use jiff::{SignedDuration, Timestamp};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use std::path::Path;
use std::sync::Arc;

/// The user of the admin kubeconfig's client certificate (CN), in `system:masters` (O).
pub const ADMIN_USER: &str = "admin";
/// How long an issued admin client certificate is valid (kubeadm's one year); a new one
/// is issued at every start.
const CLIENT_CERT_VALIDITY_DAYS: i64 = 365;

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
    /// The admin's client certificate (CN `admin`, O `system:masters`).
    pub admin_cert_pem: String,
    /// The admin's client key (PKCS#8).
    pub admin_key_pem: String,
}

fn ca_params() -> Result<CertificateParams> {
    let mut certificate_params = CertificateParams::new(Vec::<String>::new())?;
    certificate_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    certificate_params
        .distinguished_name
        .push(DnType::CommonName, "localkube-ca");
    certificate_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    // Fixed validity so that re-deriving the CA from its key gives the same issuer.
    certificate_params.not_before = rcgen::date_time_ymd(2024, 1, 1);
    certificate_params.not_after = rcgen::date_time_ymd(2124, 1, 1);
    Ok(certificate_params)
}

/// The cluster CA of `dir` (created on first use): its certificate as rcgen re-derives it
/// from `ca.key` (to sign with), its key, and `ca.crt` (what clients trust).
pub fn load_ca(dir: &Path) -> Result<(rcgen::Certificate, KeyPair, String)> {
    let key_path = dir.join("ca.key");
    let crt_path = dir.join("ca.crt");
    let ca_key = if key_path.exists() {
        let pem = std::fs::read_to_string(&key_path).map_err(|e| Error::io(&key_path, e))?;
        KeyPair::from_pem(&pem)?
    } else {
        let key_pair = KeyPair::generate()?;
        std::fs::write(&key_path, key_pair.serialize_pem()).map_err(|e| Error::io(&key_path, e))?;
        key_pair
    };
    let ca_cert = ca_params()?.self_signed(&ca_key)?;
    let ca_pem = if crt_path.exists() {
        std::fs::read_to_string(&crt_path).map_err(|e| Error::io(&crt_path, e))?
    } else {
        let pem = ca_cert.pem();
        std::fs::write(&crt_path, &pem).map_err(|error| Error::io(&crt_path, error))?;
        pem
    };
    Ok((ca_cert, ca_key, ca_pem))
}

/// Loads the CA from `dir` (creating it on first use), issues a serving certificate for
/// 127.0.0.1, localhost, the `kubernetes` Service names and `extra_sans`, and the admin's
/// client certificate.
pub fn load_or_create(dir: &Path, extra_sans: &[String]) -> Result<Certs> {
    let (ca_cert, ca_key, ca_pem) = load_ca(dir)?;
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
    let mut certificate_params = CertificateParams::new(sans)?;
    certificate_params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    certificate_params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    certificate_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate()?;
    let cert = certificate_params.signed_by(&key, &ca_cert, &ca_key)?;
    let now = Timestamp::now();
    let (admin_cert_pem, admin_key_pem) = issue_client_cert(
        &ca_cert,
        &ca_key,
        ADMIN_USER,
        &[MASTERS],
        (
            now - SignedDuration::from_hours(1),
            now + SignedDuration::from_hours(24 * CLIENT_CERT_VALIDITY_DAYS),
        ),
    )?;
    let certs = Certs {
        ca_pem,
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        cert_der: cert.der().to_vec(),
        key_der: key.serialize_der(),
        admin_cert_pem,
        admin_key_pem,
    };
    let serving = dir.join("apiserver.crt");
    std::fs::write(&serving, &certs.cert_pem).map_err(|error| Error::io(&serving, error))?;
    Ok(certs)
}

/// Issues a client certificate signed by the CA with CN `user` and one O per group, valid
/// from `validity.0` to `validity.1`; returns (certificate, PKCS#8 key) PEMs.
pub fn issue_client_cert(
    ca_cert: &rcgen::Certificate,
    ca_key: &KeyPair,
    user: &str,
    groups: &[&str],
    validity: (Timestamp, Timestamp),
) -> Result<(String, String)> {
    let mut certificate_params = CertificateParams::new(Vec::<String>::new())?;
    certificate_params
        .distinguished_name
        .push(DnType::CommonName, user);
    // rcgen keeps one value per attribute type: one group (O) at most.
    if let Some(group) = groups.first() {
        certificate_params
            .distinguished_name
            .push(DnType::OrganizationName, *group);
    }
    certificate_params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    certificate_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    // rcgen's times are `time` values: the epoch plus the seconds since.
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    let since_epoch =
        |timestamp: Timestamp| std::time::Duration::from_secs(timestamp.as_second().max(0) as u64);
    certificate_params.not_before = epoch + since_epoch(validity.0);
    certificate_params.not_after = epoch + since_epoch(validity.1);
    let key = KeyPair::generate()?;
    let cert = certificate_params.signed_by(&key, ca_cert, ca_key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The client certificate chain (leaf first) a connection presented in its handshake,
/// handed to each of its requests; [`ClientCa::identify`] judges it per request, so a
/// certificate that expires while the connection is open stops authenticating, as with
/// kube-apiserver's per-request x509 authenticator.
#[derive(Debug, Clone)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

impl PeerCertificates {
    /// The chain of a finished handshake, if the client sent one.
    pub fn of(conn: &rustls::ServerConnection) -> Option<PeerCertificates> {
        let chain = conn.peer_certificates()?;
        let owned = chain
            .iter()
            .map(|certificate_der| certificate_der.clone().into_owned())
            .collect();
        Some(PeerCertificates(Arc::new(owned)))
    }
}

/// The CA that client certificates are verified against.
#[derive(Debug, Clone)]
pub struct ClientCa {
    verifier: Arc<dyn ClientCertVerifier>,
}

impl ClientCa {
    /// The verifier of certificates issued by the CA in `ca_pem`.
    pub fn new(ca_pem: &str) -> Result<ClientCa> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            let cert =
                cert.map_err(|error| Error::Config(format!("read the cluster CA: {error}")))?;
            roots.add(cert)?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|verifier_builder_error| {
                    Error::Config(format!(
                        "build the client certificate verifier: {verifier_builder_error}"
                    ))
                })?;
        Ok(ClientCa { verifier })
    }

    /// Who a connection's client certificate chain says the client is: the chain must
    /// lead to the cluster CA and be valid now; CN is the user, O the groups.
    pub fn identify(&self, chain: Option<&PeerCertificates>) -> ClientCertificate {
        let Some((leaf, intermediates)) =
            chain.and_then(|peer_certificates| peer_certificates.0.split_first())
        else {
            return ClientCertificate::None;
        };
        let verified = self
            .verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now());
        match verified
            .map_err(|error| error.to_string())
            .and_then(|_| auth::user_from_certificate(leaf))
        {
            Ok(user) => ClientCertificate::Valid(user),
            Err(why) => ClientCertificate::Invalid(why),
        }
    }
}

/// Requests a client certificate without requiring one, and accepts any chain in the
/// handshake (checking only the client's signature, i.e. that it holds the key): the chain
/// is judged per request by [`ClientCa::identify`], as kube-apiserver's
/// `RequestClientCert` plus x509 authenticator do.
#[derive(Debug)]
struct RequestClientCert {
    ca: ClientCa,
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }
    fn client_auth_mandatory(&self) -> bool {
        false
    }
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.ca.verifier.root_hint_subjects()
    }
    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> std::result::Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.ca.verifier.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.ca.verifier.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.ca.verifier.supported_verify_schemes()
    }
}

/// The rustls server configuration for the serving certificate (HTTP/2 and HTTP/1.1), with
/// optional client certificates for `ca`.
pub fn server_config(certs: &Certs, ca: &ClientCa) -> Result<rustls::ServerConfig> {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(Arc::new(RequestClientCert { ca: ca.clone() }))
        .with_single_cert(
            vec![CertificateDer::from(certs.cert_der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certs.key_der.clone())),
        )?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}
