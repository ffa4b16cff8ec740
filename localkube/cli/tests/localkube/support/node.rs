//! The node agent's scaffolding (the `node_*` tests drive `localkube::runtime` without the API
//! server): a state dir per cluster whose guard removes it and everything localkube made for
//! it when dropped (also when the test panics), the runtime's config with the
//! `localkube-pod-exec` this build made, and pods of busybox shells.

use std::path::PathBuf;
use std::time::Duration;

use localkube::runtime::{
    cleanup, default_bin_dir, ContainerSpec, ContainerState, ExecOutput, PodRuntime, PodSpec,
    PodStatus, RestartPolicy, RuntimeConfig,
};

/// One cluster's state dir; cleanup on drop.
pub struct ClusterGuard {
    /// `<temp dir>/lk-node-<name>-<pid>`.
    pub dir: PathBuf,
}

impl ClusterGuard {
    /// A fresh state dir `lk-node-<name>-<pid>` (emptied if a crashed run left it).
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("lk-node-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self { dir }
    }

    /// The runtime's config over this dir: kubelet defaults, this build's pod-exec helper.
    pub fn config(&self) -> RuntimeConfig {
        let mut config = RuntimeConfig::new(&self.dir, &default_bin_dir());
        config.pod_exec = pod_exec();
        config
    }
}

impl Drop for ClusterGuard {
    fn drop(&mut self) {
        if let Err(err) = cleanup(&self.dir) {
            eprintln!("cleanup of {} failed: {err}", self.dir.display());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The `localkube-pod-exec` this build made.
pub fn pod_exec() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_localkube-pod-exec"))
}

/// Whether the tests run as root (pods need it; without, most tests return at once).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A pod `default/<name>` on `node` of `containers`: restartPolicy Always, 2 s grace.
pub fn pod(name: &str, node: &str, containers: Vec<ContainerSpec>) -> PodSpec {
    PodSpec {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        node_name: node.into(),
        hostname: name.into(),
        subdomain: None,
        restart_policy: RestartPolicy::Always,
        termination_grace_period: Duration::from_secs(2),
        init_containers: vec![],
        containers,
        volumes: vec![],
        host_network: false,
        fs_group: None,
    }
}

/// A busybox container running `sh -c <script>`.
pub fn shell(name: &str, script: &str) -> ContainerSpec {
    ContainerSpec {
        name: name.into(),
        image: "busybox:1.36".into(),
        command: vec!["sh".into(), "-c".into(), script.into()],
        ..ContainerSpec::default()
    }
}

/// Whether every container of the pod is running.
pub fn running(status: &PodStatus) -> bool {
    status
        .container_statuses
        .iter()
        .all(|c| matches!(c.state, ContainerState::Running { .. }))
}

/// Runs `argv` in `container` of the pod `key` (`namespace/name`), as `kubectl exec` does.
pub async fn exec_in(
    runtime: &PodRuntime,
    key: &str,
    container: &str,
    argv: &[&str],
    timeout: Duration,
) -> ExecOutput {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    runtime
        .exec_in_container(key, container, &argv, timeout)
        .await
        .unwrap()
}

/// A TCP server on port 8080 that greets each connection with `greeting` (a Python
/// expression) and closes it.
pub fn greeting_server(greeting: &str) -> String {
    format!(
        "exec python3 -c '
import socket, os
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((\"0.0.0.0\", 8080)); s.listen(16)
while True:
    c, a = s.accept(); c.sendall(({greeting} + \"\\n\").encode()); c.close()
'"
    )
}
