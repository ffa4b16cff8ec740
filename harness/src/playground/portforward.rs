//! A background `kubectl port-forward` whose pid is kept in the state dir, so `down` stops
//! exactly the process `up` started (and only that one).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Bound on waiting for the forwarded port to accept connections.
pub const READY_WAIT_MAX: Duration = Duration::from_secs(20);

/// One forward: `kubectl -n <namespace> port-forward <target> <local>:<remote>`.
#[derive(Debug, Clone)]
pub struct PortForward {
    /// Kubeconfig of the cluster.
    pub kubeconfig: PathBuf,
    /// Namespace.
    pub namespace: String,
    /// `svc/counter`, `pod/x`.
    pub target: String,
    /// Port on 127.0.0.1.
    pub local_port: u16,
    /// Port of the target.
    pub remote_port: u16,
    /// Where the pid and log files go.
    pub state_dir: PathBuf,
}

fn pid_alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

/// Whether `pid` is a `kubectl port-forward` (so a recycled pid is never signalled).
fn is_port_forward(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
        let text = String::from_utf8_lossy(&cmdline);
        text.contains("kubectl") && text.contains("port-forward")
    })
}

impl PortForward {
    fn name(&self) -> String {
        format!("port-forward-{}", self.local_port)
    }

    /// The pid file.
    pub fn pid_file(&self) -> PathBuf {
        self.state_dir.join(format!("{}.pid", self.name()))
    }

    fn running_pid(&self) -> Option<i32> {
        let pid: i32 = std::fs::read_to_string(self.pid_file())
            .ok()?
            .trim()
            .parse()
            .ok()?;
        (pid_alive(pid) && is_port_forward(pid)).then_some(pid)
    }

    /// Starts the forward unless it already runs; waits until the local port accepts.
    pub fn start(&self) -> Result<()> {
        let mut spawned = None;
        if self.running_pid().is_none() {
            let log_path = self.state_dir.join(format!("{}.log", self.name()));
            let log = std::fs::File::create(&log_path).map_err(|e| Error::Cluster {
                action: format!("create {}", log_path.display()),
                reason: e.to_string(),
            })?;
            let err = log.try_clone().map_err(|e| Error::Cluster {
                action: format!("open {}", log_path.display()),
                reason: e.to_string(),
            })?;
            use std::os::unix::process::CommandExt;
            let child = Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .arg("-n")
                .arg(&self.namespace)
                .arg("port-forward")
                .arg("--address=127.0.0.1")
                .arg(&self.target)
                .arg(format!("{}:{}", self.local_port, self.remote_port))
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(err)
                .process_group(0)
                .spawn()
                .map_err(|e| Error::Cluster {
                    action: "start kubectl port-forward".to_owned(),
                    reason: e.to_string(),
                })?;
            std::fs::write(self.pid_file(), child.id().to_string()).map_err(|e| {
                Error::Cluster {
                    action: format!("write {}", self.pid_file().display()),
                    reason: e.to_string(),
                }
            })?;
            spawned = Some(child);
        }
        let deadline = Instant::now() + READY_WAIT_MAX;
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", self.local_port)).is_ok() {
                return Ok(());
            }
            // Right after the fork the child's cmdline is still ours: ask the child itself
            // whether it exited.
            let exited = match spawned.as_mut() {
                Some(child) => child.try_wait().ok().flatten().is_some(),
                None => self.running_pid().is_none(),
            };
            if exited {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(Error::Cluster {
            action: format!("forward 127.0.0.1:{} to {}", self.local_port, self.target),
            reason: format!(
                "not accepting; see {}",
                self.state_dir
                    .join(format!("{}.log", self.name()))
                    .display()
            ),
        })
    }

    /// Stops the forward this state dir started, if it runs.
    pub fn stop(&self) {
        stop_pid_file(&self.pid_file());
    }
}

/// Stops every port-forward whose pid file is in `state_dir`.
pub fn stop_all(state_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(state_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("port-forward-") && name.ends_with(".pid") {
            stop_pid_file(&entry.path());
        }
    }
}

fn stop_pid_file(path: &Path) {
    if let Some(pid) = std::fs::read_to_string(path)
        .ok()
        .and_then(|text| text.trim().parse::<i32>().ok())
    {
        if pid_alive(pid) && is_port_forward(pid) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }
    let _ = std::fs::remove_file(path);
}
