//! `bloodraven-chaos-agent`: flags, then the library (style rule 9).
//!
//! Exit codes: 0 success; 1 a request failed, was refused or did not take effect (`ctl`), or
//! the agent could not start or could not undo every fault at shutdown (`serve`); 2 bad usage.

use std::path::PathBuf;

use bloodraven_chaos_agent::agent::AgentConfig;
use bloodraven_chaos_agent::protocol::PodRef;
use bloodraven_chaos_agent::{ctl, pod, server};
use clap::{Parser, Subcommand, ValueEnum};

/// Bloodraven's in-cluster fault agent.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Json,
    Plain,
}

#[derive(Subcommand)]
enum Command {
    /// Run the agent (the DaemonSet container's process): a unix socket in the state directory.
    Serve {
        /// Holds control.sock and faults.json (a hostPath, so a restarted agent undoes the
        /// faults a crashed one left).
        #[arg(
            long,
            env = "BLOODRAVEN_CHAOS_AGENT_STATE_DIR",
            default_value = "/var/lib/bloodraven-chaos-agent"
        )]
        state_dir: PathBuf,
        /// The namespaces whose pods the agent may act on, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        namespaces: Vec<String>,
        /// This node's name (the downward API's spec.nodeName): pods elsewhere are refused.
        #[arg(long, env = "NODE_NAME")]
        node: Option<String>,
        /// This agent's own Pod's name (the downward API's metadata.name): a stop-node's heal
        /// arrives as an annotation on it.
        #[arg(long, env = "POD_NAME")]
        pod: Option<String>,
        /// This agent's own Pod's namespace (the downward API's metadata.namespace).
        #[arg(long, env = "POD_NAMESPACE")]
        pod_namespace: Option<String>,
        /// The proc filesystem to scan (the node's, with hostPID).
        #[arg(long, default_value = "/proc")]
        proc_root: PathBuf,
        /// Log lines on stderr as JSON or plain text.
        #[arg(long, value_enum, default_value = "json")]
        log_format: LogFormat,
    },
    /// Send one JSON request to the agent; print its JSON answer.
    Ctl {
        /// The agent's state directory.
        #[arg(
            long,
            env = "BLOODRAVEN_CHAOS_AGENT_STATE_DIR",
            default_value = "/var/lib/bloodraven-chaos-agent"
        )]
        state_dir: PathBuf,
        /// The request, e.g. '{"freeze": {"namespace": "ns", "pod": "p", "container": "c"}}'.
        request: String,
    },
}

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Plain => builder.init(),
    }
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Ctl { state_dir, request } => {
            let (line, error, code) = ctl::run(&state_dir, &request);
            println!("{line}");
            if let Some(reason) = error {
                eprintln!("bloodraven-chaos-agent ctl: {reason}");
            }
            code
        }
        Command::Serve {
            state_dir,
            namespaces,
            node,
            pod,
            pod_namespace,
            proc_root,
            log_format,
        } => {
            init_logs(log_format);
            let namespaces: Vec<String> = namespaces
                .into_iter()
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect();
            if node.is_none() {
                tracing::warn!("no --node (or NODE_NAME): pods are not checked to be on this node");
            }
            let own_pod = match (pod_namespace, pod) {
                (Some(namespace), Some(pod)) => Some(PodRef { namespace, pod }),
                _ => {
                    tracing::warn!("no --pod and --pod-namespace (or POD_NAME, POD_NAMESPACE): stop-node is refused");
                    None
                }
            };
            let config = AgentConfig {
                state_dir,
                namespaces,
                node,
                proc_root,
                own_pod,
            };
            let runtime = match tokio::runtime::Runtime::new() {
                Ok(runtime) => runtime,
                Err(error) => {
                    eprintln!("bloodraven-chaos-agent: failed to start the async runtime: {error}");
                    std::process::exit(1);
                }
            };
            let result = runtime.block_on(async {
                let locator = pod::KubeLocator::try_default().await?;
                server::serve(config, locator).await
            });
            match result {
                Ok(()) => 0,
                Err(error) => {
                    tracing::error!(%error, "the agent failed");
                    eprintln!("bloodraven-chaos-agent serve: {error}");
                    1
                }
            }
        }
    };
    std::process::exit(code);
}
