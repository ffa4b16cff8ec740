//! Starting and stopping a sidecar: the HTTP API and its timers (enforcer, lease, watchdog).

use std::{net::SocketAddr, time::Duration};

use bloodraven_api::auth::Verifier;
use bloodraven_mysql::live::LiveMysql;
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};

use crate::{
    config::{RequestAuth, Settings},
    discovery::Discovery,
    enforcer,
    error::{Error, Result},
    http,
    metrics::Metrics,
    peers,
    state::Shared,
    watchdog,
};

/// Entry point: [`Sidecar::start`].
#[derive(Debug, Clone, Copy)]
pub struct Sidecar;

/// A started sidecar; dropping it stops every task.
#[derive(Debug)]
pub struct RunningSidecar {
    address: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<std::io::Result<()>>>,
    timers: Vec<JoinHandle<()>>,
}

impl Sidecar {
    /// Binds the HTTP API on `settings.listen`, starts the enforcement and lease timers,
    /// and returns at once. mysqld is not touched before the first enforcement tick, which
    /// (with no authority cached) sets it read-only: the startup safety net.
    pub async fn start(settings: Settings) -> Result<RunningSidecar> {
        let listener =
            TcpListener::bind(settings.listen)
                .await
                .map_err(|source| Error::Listen {
                    address: settings.listen,
                    source,
                })?;
        let address = listener.local_addr().map_err(|source| Error::Listen {
            address: settings.listen,
            source,
        })?;
        let discovery = Discovery::new(
            settings.discovery.clone(),
            settings.lease.group(),
            settings.dns_server,
        )?;
        let http_client = reqwest::Client::builder()
            .timeout(settings.peer_timeout)
            .connect_timeout(settings.peer_timeout)
            .no_proxy()
            .build()
            .map_err(|e| Error::HttpClient(e.to_string()))?;
        let mysql = LiveMysql::new(settings.flavor, settings.mysql.clone());
        tracing::info!(
            site = settings.lease.site(),
            group = settings.lease.group(),
            sites = ?settings.lease.sites(),
            lease_duration_ms = settings.lease.duration_ms(),
            tick_ms = u64::try_from(settings.tick.as_millis()).unwrap_or(u64::MAX),
            %address,
            "sidecar starting without authority: mysqld stays read-only until the operator pushes one"
        );
        let verifier = match &settings.auth {
            RequestAuth::Signed { operator, peer } => {
                tracing::info!(
                    site = settings.lease.site(),
                    group = settings.lease.group(),
                    operator_key = %operator.to_hex(),
                    "requests are authenticated: mutations signed by the operator's key, lease requests by the group's peer key"
                );
                Some(Verifier::new(*operator, peer.clone()))
            }
            RequestAuth::InsecureUnauthenticated => {
                tracing::warn!(
                    site = settings.lease.site(),
                    group = settings.lease.group(),
                    "--insecure-allow-unauthenticated: any client that can connect may push authority, fence, promote or repoint (tests only)"
                );
                None
            }
        };
        // A physical restore cut off by a crash is rolled back before anything else runs, and
        // recorded as failed where the job state below is read from (`crate::physical`).
        if let Some(backup) = settings.backup.as_ref() {
            crate::physical::recover(backup);
        }
        let shared = Shared::new(settings, mysql, discovery, http_client, Metrics::new());
        let timers = vec![
            tokio::spawn(enforcer::run(shared.clone())),
            tokio::spawn(peers::run(shared.clone())),
            tokio::spawn(watchdog::run(shared.clone())),
        ];
        let (shutdown, stopped) = oneshot::channel::<()>();
        let router = http::router(shared.clone(), http::Gate::new(shared, verifier));
        let server = tokio::spawn(async move {
            axum::serve(
                listener,
                router.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
        });
        Ok(RunningSidecar {
            address,
            shutdown: Some(shutdown),
            server: Some(server),
            timers,
        })
    }
}

/// How long a graceful HTTP shutdown may take before the server task is aborted.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

impl RunningSidecar {
    /// The address the HTTP API listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops the timers and the HTTP API.
    pub async fn stop(mut self) -> Result<()> {
        for timer in &self.timers {
            timer.abort();
        }
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        match self.server.take() {
            Some(server) => match tokio::time::timeout(SHUTDOWN_GRACE, server).await {
                Ok(Ok(Ok(()))) => Ok(()),
                Ok(Ok(Err(error))) => Err(Error::Serve(error)),
                Ok(Err(_)) | Err(_) => Ok(()),
            },
            None => Ok(()),
        }
    }

    /// Runs until the HTTP server ends (it does not, unless it fails).
    pub async fn wait(mut self) -> Result<()> {
        match self.server.take() {
            Some(server) => match server.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(error)) => Err(Error::Serve(error)),
                Err(join) => Err(Error::Serve(std::io::Error::other(join.to_string()))),
            },
            None => Ok(()),
        }
    }
}

impl Drop for RunningSidecar {
    fn drop(&mut self) {
        for timer in &self.timers {
            timer.abort();
        }
        if let Some(server) = &self.server {
            server.abort();
        }
    }
}

/// Installs JSON logs on stderr (`RUST_LOG` filters, `info` by default).
pub fn init_logging() -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init()
        .map_err(|e| Error::Logging(e.to_string()))
}
