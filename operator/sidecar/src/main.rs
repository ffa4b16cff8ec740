//! `bloodraven-sidecar`: parses flags and runs [`bloodraven_sidecar::Sidecar`].
//!
//! Exit codes: 0 after SIGTERM/SIGINT, 2 on invalid configuration, 1 on a runtime failure.

use std::process::ExitCode;

use bloodraven_sidecar::{server::init_logging, Config, Sidecar};
use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let config = Config::parse();
    if let Err(error) = init_logging() {
        eprintln!("failed to {error}");
        return ExitCode::from(1);
    }
    let settings = match config.into_settings() {
        Ok(settings) => settings,
        Err(error) => {
            tracing::error!(%error, "invalid configuration");
            return ExitCode::from(2);
        }
    };
    let running = match Sidecar::start(settings).await {
        Ok(running) => running,
        Err(error) => {
            tracing::error!(%error, "start sidecar");
            return ExitCode::from(1);
        }
    };
    let terminated = async {
        #[cfg(unix)]
        {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut sigterm) => {
                    sigterm.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        }
        #[cfg(not(unix))]
        std::future::pending::<()>().await;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminated => {}
    }
    tracing::info!("shutting down");
    match running.stop().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "stop sidecar");
            ExitCode::from(1)
        }
    }
}
