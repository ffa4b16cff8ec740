//! `bloodraven-playground`: `just up` / `just down`. Parses flags and calls
//! `bloodraven_harness::playground::up`.
//!
//! Exit codes: 0 on success, 1 when a step failed (the message says which and why), 2 on bad
//! flags.

use std::path::PathBuf;

use bloodraven_harness::playground::localkube::LocalkubeConfig;
use bloodraven_harness::playground::up::Playground;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "bloodraven-playground",
    about = "The live playground on localkube"
)]
struct Cli {
    /// Workspace root, holding fixtures/ (default: the nearest ancestor of the current
    /// directory that holds fixtures/crds and scenarios/).
    #[arg(long, env = bloodraven_harness::backend::ROOT_ENV)]
    root: Option<PathBuf>,
    /// localkube's state dir (default: $LOCALKUBE_STATE_DIR, else <root>/.localkube).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Directory of the workspace's binaries (default: this program's own directory).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// No progress lines on stderr (also `BLOODRAVEN_QUIET=1`).
    #[arg(long, short)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start localkube, install CRDs, operator, playground and counter; wait until Valid.
    Up,
    /// Stop the port-forwards and localkube; remove everything they made.
    Down,
    /// Install on the running cluster only.
    Install,
    /// Remove the playground from the running cluster.
    Uninstall,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    bloodraven_harness::progress::enable(
        "playground",
        cli.quiet || bloodraven_harness::progress::quiet_from_env(),
    );
    let root = match cli.root {
        Some(root) => std::fs::canonicalize(&root).unwrap_or(root),
        None => bloodraven_harness::backend::workspace_root(),
    };
    let bin_dir = cli.bin_dir.unwrap_or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(PathBuf::from))
            .unwrap_or_default()
    });
    let state_dir = cli
        .state_dir
        .unwrap_or_else(|| Playground::default_state_dir(&root));
    let playground = Playground {
        root,
        localkube: LocalkubeConfig {
            state_dir,
            bin_dir,
            image_overrides: Vec::new(),
        },
    };
    let result = match cli.command {
        Command::Up => playground.up(),
        Command::Down => playground.down(),
        Command::Install => playground.install(),
        Command::Uninstall => playground.uninstall(),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bloodraven-playground: failed to {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
