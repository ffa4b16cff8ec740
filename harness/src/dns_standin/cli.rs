//! `bloodraven-dns-standin`'s command line (the binary only calls [`main`]).
//!
//! Exit codes: 0 stopped by SIGTERM or SIGINT; 1 failure, with the reason on standard error;
//! 2 a usage error (from clap).

use std::net::SocketAddr;

use clap::Parser;
use tokio::sync::mpsc;

use super::{source, standin};
use crate::error::{Error, Result};

/// The default DNS address: an unprivileged port (the image runs as a non-root user); the
/// Service `bloodraven-dns-standin` maps port 53 to it.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:5353";

/// The in-cluster stand-in for external-dns (docs/design/harness.md#the-portable-path): serves
/// the A records of the DNSEndpoints of one namespace over DNS, as the DNS provider external-dns
/// would publish them to; the ConfigMap `bloodraven-external-dns` (`paused: "true"`) stops it.
#[derive(Debug, Parser)]
#[command(name = "bloodraven-dns-standin", version)]
pub struct Cli {
    /// The address to serve DNS on (UDP and TCP).
    #[arg(long, default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// The namespace whose DNSEndpoints are served and that holds the pause ConfigMap.
    #[arg(long, env = "POD_NAMESPACE", default_value = "bloodraven-playground")]
    pub namespace: String,
}

fn failed(action: &str, reason: impl ToString) -> Error {
    Error::Cluster {
        action: action.to_owned(),
        reason: reason.to_string(),
    }
}

async fn stop_signal() -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|e| failed("listen for SIGTERM", e))?;
    let mut interrupt =
        signal(SignalKind::interrupt()).map_err(|e| failed("listen for SIGINT", e))?;
    tokio::select! {
        _ = terminate.recv() => tracing::info!("SIGTERM: stopping"),
        _ = interrupt.recv() => tracing::info!("SIGINT: stopping"),
    }
    Ok(())
}

/// Watches the cluster (in-cluster config, or the kubeconfig) and serves until a signal.
pub async fn serve(cli: Cli) -> Result<()> {
    let client = kube::Client::try_default()
        .await
        .map_err(|e| failed("connect to the Kubernetes API", e))?;
    let (inputs_tx, inputs) = mpsc::channel(standin::INPUT_QUEUE);
    let endpoints = tokio::spawn(source::watch_endpoints(
        client.clone(),
        cli.namespace.clone(),
        inputs_tx.clone(),
    ));
    let pause = tokio::spawn(source::watch_pause(
        client,
        cli.namespace.clone(),
        inputs_tx,
    ));
    tracing::info!(
        namespace = %cli.namespace,
        configmap = source::PAUSE_CONFIGMAP,
        listen = %cli.listen,
        "external-dns stand-in: watching DNSEndpoints and the pause ConfigMap"
    );
    let outcome = async {
        let stop = stop_signal();
        tokio::pin!(stop);
        let running = tokio::select! {
            running = standin::start(cli.listen, inputs) => running?,
            stopped = &mut stop => return stopped,
        };
        let mut stop_failed = None;
        let served = running
            .serve_until(async {
                if let Err(error) = stop.await {
                    stop_failed = Some(error);
                }
            })
            .await;
        match stop_failed {
            Some(error) => Err(error),
            None => served,
        }
    }
    .await;
    endpoints.abort();
    pause.abort();
    outcome
}

/// Runs a parsed command line; returns the exit code.
pub fn run(cli: Cli) -> i32 {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // hickory-server logs every query at info; the stand-in logs what it applies.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,hickory_server=warn")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let outcome = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| failed("start the async runtime", e))
        .and_then(|runtime| runtime.block_on(serve(cli)));
    match outcome {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("bloodraven-dns-standin: failed to {error}");
            1
        }
    }
}

/// Parses the command line and runs it.
pub fn main() -> std::process::ExitCode {
    let code = run(Cli::parse());
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}
