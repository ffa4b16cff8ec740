//! `kubectl-bloodraven`: parses flags and runs the library.
//!
//! Exit codes: 0 on success, 1 when the request failed, 2 on bad flags (clap).

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = kubectl_bloodraven::Cli::parse();
    let outcome = match kubectl_bloodraven::client(cli.context.as_deref()).await {
        Ok(client) => kubectl_bloodraven::run(&cli, client).await,
        Err(error) => Err(error),
    };
    match outcome {
        Ok(text) => {
            print!("{text}");
            std::process::ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: failed to {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
