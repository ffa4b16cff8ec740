//! Starting the HTTP API and the background poller.

use std::{net::SocketAddr, sync::Arc};

use tokio::{net::TcpListener, task::JoinHandle};

use crate::{
    app::{Counter, Settings},
    error::{Error, Result},
    http,
};

/// Entry point: [`CounterServer::start`].
#[derive(Debug, Clone, Copy)]
pub struct CounterServer;

/// A started counter app; dropping it stops it.
#[derive(Debug)]
pub struct RunningCounter {
    address: SocketAddr,
    counter: Arc<Counter>,
    server: JoinHandle<std::io::Result<()>>,
    poller: JoinHandle<()>,
}

impl CounterServer {
    /// Binds the HTTP API and starts the poller.
    pub async fn start(settings: Settings) -> Result<RunningCounter> {
        let listen = settings.listen;
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|source| Error::Serve {
                address: listen,
                source,
            })?;
        let address = listener.local_addr().map_err(|source| Error::Serve {
            address: listen,
            source,
        })?;
        let counter = Arc::new(Counter::new(settings)?);
        let poll_counter = counter.clone();
        let poller = tokio::spawn(async move {
            let settings = poll_counter.settings();
            let tick = settings
                .write_interval
                .map_or(settings.poll_interval, |every| {
                    every.min(settings.poll_interval)
                });
            let mut interval = tokio::time::interval(tick);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let result = if poll_counter.due_write() {
                    poll_counter.increment().await
                } else {
                    poll_counter.poll().await
                };
                match result {
                    Ok(view) => tracing::info!(
                        value = view.value,
                        db_host = %view.db_host,
                        read_only = view.read_only,
                        "counter poll"
                    ),
                    Err(error) => {
                        tracing::warn!(%error, code = error.server_code(), "counter poll")
                    }
                }
            }
        });
        let router = http::router(counter.clone());
        let server = tokio::spawn(async move { axum::serve(listener, router).await });
        tracing::info!(%address, "counter app listening");
        Ok(RunningCounter {
            address,
            counter,
            server,
            poller,
        })
    }
}

impl RunningCounter {
    /// The address the HTTP API listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The counter behind the API.
    pub fn counter(&self) -> &Counter {
        &self.counter
    }

    /// Runs until the HTTP server fails.
    pub async fn wait(mut self) -> Result<()> {
        let address = self.address;
        let joined = (&mut self.server).await;
        match joined {
            Ok(Ok(())) => Ok(()),
            Ok(Err(source)) => Err(Error::Serve { address, source }),
            Err(join) => Err(Error::Serve {
                address,
                source: std::io::Error::other(join.to_string()),
            }),
        }
    }
}

impl Drop for RunningCounter {
    fn drop(&mut self) {
        self.poller.abort();
        self.server.abort();
    }
}

/// Installs JSON logs on stderr (`RUST_LOG` filters, `info` by default).
pub fn init_logging() -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init()
        .map_err(|e| Error::Logging(e.to_string()))
}
