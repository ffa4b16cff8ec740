//! The `localkube` command line: `up`, `down`, `status`.

use crate::error::{Error, Result};
use clap::{Parser, Subcommand};
use localkube_apiserver::server::{self, CleanupHook, Config, LocalKube};
use localkube_apiserver::Plugin;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long `up --detach` waits for the server, and `down` for it to exit.
const WAIT_MAX: Duration = Duration::from_secs(30);

/// localkube: a single-machine Kubernetes control plane.
#[derive(Debug, Parser)]
#[command(name = "localkube", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start the control plane; writes DIR/kubeconfig (admin client certificate),
    /// DIR/localkube.json and DIR/admin-token.
    Up {
        /// State dir.
        #[arg(long)]
        state_dir: PathBuf,
        /// Nodes (sites), comma separated; each is labelled topology.kubernetes.io/zone=<name>.
        #[arg(long, value_delimiter = ',', default_value = "iad,pdx,reader")]
        nodes: Vec<String>,
        /// More nodes without a zone label, comma separated (e.g. `apps`, for workloads that
        /// site faults must not take down); they run pods like the others.
        #[arg(long, value_delimiter = ',')]
        zoneless_nodes: Vec<String>,
        /// Run in the background and return once the API is served.
        #[arg(long)]
        detach: bool,
        /// Port on 127.0.0.1 (0: any free port).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Service ClusterIP range.
        #[arg(long, default_value = "10.96.0.0/16")]
        service_cidr: String,
        /// Containers (by name, comma separated, e.g. `mysql`) that get libfaketime, so
        /// `localkube fault clock-offset` can step their wall clock; no other container is
        /// touched (see `runtime::clock`). Needs Debian's libfaketime.
        #[arg(long, value_delimiter = ',')]
        clock_faults: Vec<String>,
    },
    /// Stop the control plane recorded in DIR and remove what it made (objects are kept
    /// unless --purge).
    Down {
        /// State dir.
        #[arg(long)]
        state_dir: PathBuf,
        /// Also remove the stored objects, certificates and tokens.
        #[arg(long)]
        purge: bool,
    },
    /// Inject or revert a fault in the running cluster of DIR (see `kubelet::control`).
    Fault {
        /// State dir.
        #[arg(long)]
        state_dir: PathBuf,
        /// The fault.
        #[command(subcommand)]
        fault: localkube_kubelet::control::FaultCommand,
    },
    /// Tell whether the control plane of DIR runs.
    Status {
        /// State dir.
        #[arg(long)]
        state_dir: PathBuf,
    },
    /// A node's kubelet process, spawned by `up` (see `kubelet::kubelet_process`): it beats
    /// to its parent until stopped; not for people to run.
    #[command(hide = true)]
    Kubelet {
        /// The node (as a real kubelet's command line names it).
        #[arg(long)]
        hostname_override: String,
    },
}

fn alive(pid: u32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
}

/// Runs a parsed command line with the given plugins and cleanup hooks.
pub async fn run(cli: Cli, plugins: Vec<Arc<dyn Plugin>>, cleanup: &[CleanupHook]) -> Result<()> {
    match cli.command {
        Command::Up {
            state_dir,
            nodes,
            zoneless_nodes,
            detach,
            port,
            service_cidr,
            clock_faults,
        } => {
            if let Some((pid, port)) = server::read_state(&state_dir) {
                if alive(pid) && pid != std::process::id() {
                    return Err(Error::Config(format!(
                        "start: localkube already runs for {} (pid {pid}, port {port})",
                        state_dir.display()
                    )));
                }
            }
            let mut config = Config::new(&state_dir);
            config.nodes = nodes;
            config.zoneless_nodes = zoneless_nodes;
            // Refused here, before a background start, rather than only in its log.
            config.all_nodes()?;
            if detach {
                return up_detached(
                    &state_dir,
                    &config.nodes,
                    &config.zoneless_nodes,
                    port,
                    &service_cidr,
                    &clock_faults,
                );
            }
            config.port = port;
            config.service_cidr = service_cidr;
            config.plugins = plugins;
            let kubelet = localkube_kubelet::Kubelet::new(localkube_kubelet::KubeletConfig {
                clock_faults,
                ..localkube_kubelet::KubeletConfig::default()
            });
            localkube_kubelet::prepare(&mut config, kubelet)?;
            let lk = LocalKube::start(config).await?;
            println!(
                "localkube is serving at https://{}; kubeconfig: {}",
                lk.address(),
                lk.kubeconfig_path().display()
            );
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .map_err(|e| Error::io("signal handler", e))?;
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            Ok(lk.shutdown().await?)
        }
        Command::Down { state_dir, purge } => down(&state_dir, purge, cleanup),
        Command::Fault { state_dir, fault } => {
            Ok(localkube_kubelet::control::run_cli(&state_dir, &fault).await?)
        }
        Command::Kubelet { hostname_override } => {
            let code = localkube_kubelet::kubelet_process::run_child(&hostname_override);
            std::process::exit(code)
        }
        Command::Status { state_dir } => {
            match server::read_state(&state_dir) {
                Some((pid, port)) if alive(pid) => println!(
                    "running: pid {pid}, https://127.0.0.1:{port}, kubeconfig {}",
                    state_dir.join(server::KUBECONFIG_FILE).display()
                ),
                Some((pid, _)) => println!(
                    "stopped: pid {pid} is gone (run `localkube down --state-dir {}` to clean up)",
                    state_dir.display()
                ),
                None => println!("stopped"),
            }
            Ok(())
        }
    }
}

fn up_detached(
    state_dir: &Path,
    nodes: &[String],
    zoneless_nodes: &[String],
    port: u16,
    service_cidr: &str,
    clock_faults: &[String],
) -> Result<()> {
    use std::os::unix::process::CommandExt;
    std::fs::create_dir_all(state_dir).map_err(|e| Error::io(state_dir, e))?;
    let exe = std::env::current_exe().map_err(|e| Error::io("current executable", e))?;
    let log_path = state_dir.join("localkube.log");
    let log = std::fs::File::create(&log_path).map_err(|e| Error::io(&log_path, e))?;
    let log2 = log.try_clone().map_err(|e| Error::io(&log_path, e))?;
    let _ = std::fs::remove_file(state_dir.join(server::STATE_FILE));
    let mut command = std::process::Command::new(exe);
    command
        .arg("up")
        .arg("--state-dir")
        .arg(state_dir)
        .arg("--nodes")
        .arg(nodes.join(","));
    if !zoneless_nodes.is_empty() {
        command
            .arg("--zoneless-nodes")
            .arg(zoneless_nodes.join(","));
    }
    if !clock_faults.is_empty() {
        command.arg("--clock-faults").arg(clock_faults.join(","));
    }
    let child = command
        .arg("--port")
        .arg(port.to_string())
        .arg("--service-cidr")
        .arg(service_cidr)
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(log2)
        .process_group(0)
        .spawn()
        .map_err(|e| Error::io("spawn localkube", e))?;
    let deadline = std::time::Instant::now() + WAIT_MAX;
    while std::time::Instant::now() < deadline {
        if let Some((pid, port)) = server::read_state(state_dir) {
            if pid == child.id() {
                println!(
                    "localkube is serving at https://127.0.0.1:{port} (pid {pid}); kubeconfig: {}",
                    state_dir.join(server::KUBECONFIG_FILE).display()
                );
                return Ok(());
            }
        }
        if !alive(child.id()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(Error::Config(format!(
        "start localkube in the background: see {}",
        log_path.display()
    )))
}

/// Stops the process recorded in the state dir (SIGTERM, then SIGKILL), runs the cleanup
/// hooks and removes the kubeconfig and state file (with `purge`: the whole state dir).
pub fn down(state_dir: &Path, purge: bool, cleanup: &[CleanupHook]) -> Result<()> {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    if let Some((pid, _)) = server::read_state(state_dir) {
        if pid != std::process::id() && alive(pid) {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
            let deadline = std::time::Instant::now() + WAIT_MAX;
            while alive(pid) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if alive(pid) {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            }
        }
    }
    let mut failures = Vec::new();
    for hook in cleanup {
        if let Err(e) = hook(state_dir) {
            failures.push(e);
        }
    }
    if let Err(e) = localkube_runtime::cleanup(state_dir) {
        failures.push(e.to_string());
    }
    for f in [server::STATE_FILE, server::KUBECONFIG_FILE, "apiserver.crt"] {
        let _ = std::fs::remove_file(state_dir.join(f));
    }
    if purge {
        let _ = std::fs::remove_dir_all(state_dir);
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Error::Config(format!("clean up: {}", failures.join("; "))))
    }
}
