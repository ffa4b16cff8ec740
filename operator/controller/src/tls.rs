//! The TLS listener on :8443 (rustls, ring provider): certificate and key from PEM files (the
//! mounted escrowTLS Secret). There is no plaintext fallback (docs/design/requirements.md R003.2).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::error::{Error, Result};

/// A rustls server configuration from PEM text.
pub fn server_config(cert_pem: &[u8], key_pem: &[u8]) -> Result<rustls::ServerConfig> {
    let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<std::result::Result<_, _>>()
        .map_err(|error| Error::Tls(format!("parse certificate pem: {error}")))?;
    if certificates.is_empty() {
        return Err(Error::Tls(
            "parse certificate pem: no certificate found".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|error| Error::Tls(format!("parse private key pem: {error}")))?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|error| Error::Tls(error.to_string()))?
    .with_no_client_auth()
    .with_single_cert(certificates, key)
    .map_err(|error| Error::Tls(format!("load certificate and key: {error}")))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// A rustls server configuration from PEM files.
pub fn server_config_from_files(cert_path: &str, key_path: &str) -> Result<rustls::ServerConfig> {
    let read = |path: &str| {
        std::fs::read(path).map_err(|source| Error::ReadFile {
            path: path.to_string(),
            source,
        })
    };
    server_config(&read(cert_path)?, &read(key_path)?)
}

/// Serves `router` over TLS on an already bound listener until `shutdown` flips.
pub async fn serve_listener(
    listener: tokio::net::TcpListener,
    config: rustls::ServerConfig,
    router: Router,
    mut shutdown: watch::Receiver<bool>,
) -> Result<()> {
    let acceptor = TlsAcceptor::from(Arc::new(config));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => return Ok(()),
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "failed to accept a tls connection");
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let stream = match acceptor.accept(stream).await {
                Ok(stream) => stream,
                Err(error) => {
                    tracing::debug!(%peer, %error, "tls handshake failed");
                    return;
                }
            };
            if let Err(error) = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%peer, %error, "tls connection ended with an error");
            }
        });
    }
}

/// Binds `address` and serves `router` over TLS until `shutdown` flips.
pub async fn serve(
    address: SocketAddr,
    config: rustls::ServerConfig,
    router: Router,
    shutdown: watch::Receiver<bool>,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| Error::Serve {
            address: address.to_string(),
            source,
        })?;
    serve_listener(listener, config, router, shutdown).await
}
