//! `bloodraven`: the operator binary. Parses flags and runs the library.
//!
//! `bloodraven [FLAGS]` runs the operator; `bloodraven render-install --values FILE` prints the
//! install manifests rendered from a values file (`install::render`) and exits.
//!
//! Exit codes: 0 after SIGTERM/SIGINT (or after printing the manifests), 1 when the operator
//! could not start or a listener failed, 2 on bad flags (clap) or bad values.

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "bloodraven",
    version,
    about = "Bloodraven operator: multi-site MySQL failover groups",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: bloodraven_operator::run::OperatorArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the install manifests (multi-document YAML) rendered from a values file.
    RenderInstall {
        /// Values file (YAML: replicaCount, leaderElection, auxiliary.deployAPI,
        /// auxiliary.escrowTLS, image, ...); `-` reads standard input.
        #[arg(long)]
        values: std::path::PathBuf,
    },
}

fn render_install(path: &std::path::Path) -> Result<String, String> {
    use bloodraven_operator::install;
    let values = if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|e| format!("read values from standard input: {e}"))?;
        install::values_from_str(&text).map_err(|e| format!("standard input: {e}"))?
    } else {
        install::values_from_file(path).map_err(|e| e.to_string())?
    };
    install::render_yaml(&values).map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if let Some(Command::RenderInstall { values }) = cli.command {
        return match render_install(&values) {
            Ok(text) => {
                print!("{text}");
                std::process::ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("bloodraven render-install: {error}");
                std::process::ExitCode::from(2)
            }
        };
    }
    bloodraven_operator::run::init_tracing();
    match bloodraven_operator::run::run(cli.run).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "bloodraven operator failed");
            std::process::ExitCode::FAILURE
        }
    }
}
