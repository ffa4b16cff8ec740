//! `bloodraven-workload`'s command line (the binary only calls [`main`]).
//!
//! Exit codes: 0 success; 1 failure, with the reason on standard error; 2 a usage error (from
//! clap); 3 ([`super::follow::EXIT_ABANDONED`]) `follow`'s run ended without its end line.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use super::{control, daemon, follow, oneshot, resolv, runlog};
use crate::error::{Error, Result};

/// The in-cluster workload of bloodraven-harness (docs/design/harness.md#one-run).
#[derive(Debug, Parser)]
#[command(name = "bloodraven-workload", version)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The pod's process: listens on DIR/control.sock (no TCP port), runs the workload.
    Serve {
        /// The state directory (control socket, run logs).
        #[arg(long, default_value = runlog::DEFAULT_DIR)]
        dir: PathBuf,
        /// Whose first nameserver the DNS probe asks.
        #[arg(long, default_value = resolv::RESOLV_CONF)]
        resolv_conf: PathBuf,
    },
    /// Sends one request to the daemon and prints its result as one JSON line.
    Ctl {
        /// The daemon's state directory.
        #[arg(long, default_value = runlog::DEFAULT_DIR)]
        dir: PathBuf,
        /// The request, e.g. '{"stop": {"run": "r1"}}'.
        request: String,
    },
    /// Prints a run's log from line SEQ on, following it until its end line.
    Follow {
        /// The daemon's state directory.
        #[arg(long, default_value = runlog::DEFAULT_DIR)]
        dir: PathBuf,
        /// The run.
        #[arg(long)]
        run: String,
        /// The first line to print.
        #[arg(long, default_value_t = 0)]
        from: u64,
    },
    /// Prints the sorted A answers for a name as a JSON array (empty on NXDOMAIN).
    Dns {
        /// The name.
        #[arg(long)]
        name: String,
        /// The DNS server (IP or IP:PORT); default: the first nameserver of --resolv-conf.
        #[arg(long, value_parser = oneshot::parse_server)]
        server: Option<std::net::SocketAddr>,
        /// The resolver configuration.
        #[arg(long, default_value = resolv::RESOLV_CONF)]
        resolv_conf: PathBuf,
    },
    /// Sends one HTTP request; prints {"status", "headers", "body"}.
    Http {
        /// The method.
        #[arg(long, value_enum)]
        method: oneshot::HttpMethod,
        /// The URL.
        #[arg(long)]
        url: String,
        /// PEM CA certificates to trust (`-`: standard input).
        #[arg(long)]
        ca_file: Option<PathBuf>,
        /// PEM CA certificates to trust, given inline.
        #[arg(long)]
        ca_pem: Option<String>,
        /// The bearer token's file (`-`: standard input).
        #[arg(long, conflicts_with = "bearer_env")]
        bearer_file: Option<PathBuf>,
        /// The environment variable holding the bearer token.
        #[arg(long)]
        bearer_env: Option<String>,
        /// A header, `Name: value` (repeatable).
        #[arg(long = "header", value_parser = oneshot::parse_header)]
        headers: Vec<(String, String)>,
        /// The body's file (`-`: standard input).
        #[arg(long, conflicts_with = "body")]
        body_file: Option<PathBuf>,
        /// The body itself.
        #[arg(long)]
        body: Option<String>,
        /// Resolve HOST:PORT to IP (`host:port:ip`, repeatable), as curl's --resolve.
        #[arg(long, value_parser = oneshot::parse_resolve)]
        resolve: Vec<(String, std::net::SocketAddr)>,
        /// The bound on the whole request, in ms.
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
    },
}

fn runtime(threads: Option<usize>) -> Result<tokio::runtime::Runtime> {
    let mut builder = match threads {
        Some(threads) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(threads);
            builder
        }
        None => tokio::runtime::Builder::new_current_thread(),
    };
    builder.enable_all().build().map_err(|e| Error::Workload {
        action: "start the async runtime".to_owned(),
        reason: e.to_string(),
    })
}

fn print_json(value: &impl serde::Serialize) -> Result<()> {
    let text = serde_json::to_string(value).map_err(|source| Error::Json {
        what: "the answer",
        source,
    })?;
    println!("{text}");
    Ok(())
}

/// Runs a parsed command line; returns the exit code.
pub fn run(cli: Cli) -> i32 {
    let outcome = match cli.command {
        Command::Serve { dir, resolv_conf } => {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env()
                        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
                )
                .with_writer(std::io::stderr)
                .try_init();
            runtime(Some(2)).and_then(|runtime| {
                runtime.block_on(daemon::serve(daemon::ServeOptions { dir, resolv_conf }))
            })
        }
        Command::Ctl { dir, request } => control::parse_request(&request)
            .map_err(|reason| Error::Workload {
                action: "read the request".to_owned(),
                reason,
            })
            .and_then(|request| {
                control::call(
                    &runlog::control_socket(&dir),
                    &request,
                    control::CALL_TIMEOUT,
                )
            })
            .and_then(|value| print_json(&value)),
        Command::Follow { dir, run, from } => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            match follow::follow(&follow::FollowOptions { dir, run, from }, &mut out) {
                Ok(follow::FollowEnd::Ended) => Ok(()),
                Ok(follow::FollowEnd::Abandoned(why)) => {
                    eprintln!("bloodraven-workload: the run ended without its end line: {why}");
                    return follow::EXIT_ABANDONED;
                }
                Err(error) => Err(error),
            }
        }
        Command::Dns {
            name,
            server,
            resolv_conf,
        } => runtime(None)
            .and_then(|runtime| runtime.block_on(oneshot::dns(&name, server, &resolv_conf)))
            .and_then(|addresses| print_json(&addresses)),
        Command::Http {
            method,
            url,
            ca_file,
            ca_pem,
            bearer_file,
            bearer_env,
            headers,
            body_file,
            body,
            resolve,
            timeout_ms,
        } => {
            let request = oneshot::HttpRequest {
                method,
                url,
                ca_file,
                ca_pem,
                bearer: bearer_file
                    .map(oneshot::Bearer::File)
                    .or(bearer_env.map(oneshot::Bearer::Env)),
                headers,
                body: body_file
                    .map(oneshot::Body::File)
                    .or(body.map(oneshot::Body::Text)),
                resolve,
                timeout: Duration::from_millis(timeout_ms),
            };
            runtime(None)
                .and_then(|runtime| runtime.block_on(oneshot::http(&request)))
                .and_then(|answer| print_json(&answer))
        }
    };
    match outcome {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("bloodraven-workload: failed to {error}");
            1
        }
    }
}

/// Parses the process's arguments and runs them.
pub fn main() -> std::process::ExitCode {
    let code = run(Cli::parse());
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}
