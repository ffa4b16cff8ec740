//! `localkube up|down|status`: see `localkube::cli`.

use clap::Parser;
use localkube::cli::{self, Cli};

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Cli::parse();
    if let Err(e) = cli::run(args, Vec::new(), &[]).await {
        eprintln!("localkube: failed to {e}");
        std::process::exit(1);
    }
}
