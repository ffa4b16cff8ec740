//! `bloodraven`: the operator binary. Parses flags and runs the library.
//!
//! Exit codes: 0 after SIGTERM/SIGINT, 1 when the operator could not start or a listener
//! failed, 2 on bad flags (clap).

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = bloodraven_operator::run::OperatorArgs::parse();
    bloodraven_operator::run::init_tracing();
    match bloodraven_operator::run::run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "bloodraven operator failed");
            std::process::ExitCode::FAILURE
        }
    }
}
