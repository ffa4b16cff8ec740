//! Bridges the node runtime's container log files (kubelet's CRI format, in the pod
//! directory) to the files `pods/log` serves ([`localkube_apiserver::log_path`]: plain text,
//! `<container>.log` and `<container>.previous.log`): each file is re-rendered with
//! [`localkube_runtime::cri_logs::render`] whenever its source grows, so `kubectl logs` (`-f`,
//! `--tail`, `-c`, `--previous`) reads exactly what the containers wrote.

use localkube_apiserver::log_path;
use localkube_runtime::cri_logs::{render, LogOptions};
use localkube_runtime::PodStatus;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Copies one pod's container logs.
#[derive(Debug)]
pub struct Copier {
    state_dir: PathBuf,
    namespace: String,
    pod: String,
    sizes: HashMap<PathBuf, u64>,
}

impl Copier {
    /// A copier for pod `namespace/pod`.
    pub fn new(state_dir: &Path, namespace: &str, pod: &str) -> Self {
        Self {
            state_dir: state_dir.to_path_buf(),
            namespace: namespace.to_string(),
            pod: pod.to_string(),
            sizes: HashMap::new(),
        }
    }

    /// Re-renders every container log whose source changed since the last call.
    pub fn copy(&mut self, status: &PodStatus) {
        for c in status
            .container_statuses
            .iter()
            .chain(&status.init_container_statuses)
        {
            for (src, previous) in [(&c.log_path, false), (&c.previous_log_path, true)] {
                let size = std::fs::metadata(src).map(|m| m.len()).ok();
                let Some(size) = size else { continue };
                if self.sizes.get(src) == Some(&size) {
                    continue;
                }
                let dst = log_path(
                    &self.state_dir,
                    &self.namespace,
                    &self.pod,
                    &c.name,
                    previous,
                );
                match copy_one(src, &dst) {
                    Ok(()) => {
                        self.sizes.insert(src.clone(), size);
                    }
                    Err(e) => {
                        tracing::debug!(path = %dst.display(), error = %e, "could not copy container log")
                    }
                }
            }
        }
    }
}

fn copy_one(src: &Path, dst: &Path) -> std::io::Result<()> {
    let text = std::fs::read(src)?;
    let rendered = render(&String::from_utf8_lossy(&text), &LogOptions::default());
    if let Some(dir) = dst.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = dst.with_extension("tmp");
    std::fs::write(&tmp, rendered)?;
    std::fs::rename(&tmp, dst)
}

/// Removes a deleted pod's log files.
pub fn remove(state_dir: &Path, namespace: &str, pod: &str) {
    if let Some(dir) = log_path(state_dir, namespace, pod, "x", false).parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}
