//! `localkube up|down|status`: see `localkube::cli`.

use clap::Parser;
use localkube::cli::{self, Cli, Command};

fn main() {
    let args = Cli::parse();
    // A node's kubelet process beats on one thread: no async runtime, no log setup.
    if let Command::Kubelet { hostname_override } = &args.command {
        let code = localkube::kubelet::kubelet_process::run_child(hostname_override);
        std::process::exit(code);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("localkube: failed to start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(cli::run(args, Vec::new(), &[])) {
        eprintln!("localkube: failed to {e}");
        std::process::exit(1);
    }
}
