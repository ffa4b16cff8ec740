//! `bloodraven-counter`: parses flags and runs [`bloodraven_counter::CounterServer`].
//!
//! Exit codes: 0 on SIGINT, 2 on invalid configuration, 1 on a runtime failure.

use std::process::ExitCode;

use bloodraven_counter::{server::init_logging, Config, CounterServer};
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
    let running = match CounterServer::start(settings).await {
        Ok(running) => running,
        Err(error) => {
            tracing::error!(%error, "start counter app");
            return ExitCode::from(1);
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => ExitCode::SUCCESS,
        result = running.wait() => match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                tracing::error!(%error, "counter app stopped");
                ExitCode::from(1)
            }
        },
    }
}
