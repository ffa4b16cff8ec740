//! Which backend a run uses (docs/design/harness.md#one-run, step 1): the default `--cluster`,
//! what every backend needs to create a cluster ([`BackendConfig`]), and the one place the
//! concrete backends are built ([`select_backend`]).

use std::path::{Path, PathBuf};

use super::kind_cluster::kind_backend;
use super::kubeconfig::KubeconfigBackend;
use super::localkube::{LocalkubeBackend, LocalkubeBackendConfig};
use crate::backend::{workspace_root, Backend, ClusterKind, FaultDriverKind};
use crate::error::Result;

/// What the backends need to create a cluster.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// How faults reach the cluster.
    pub fault_driver: FaultDriverKind,
    /// The workspace root (fixtures, kind/, Dockerfiles).
    pub root: PathBuf,
    /// The directory of the workspace's built binaries (localkube, bloodraven, ...).
    pub bin_dir: PathBuf,
    /// The state dir of a cluster the harness creates.
    pub state_dir: PathBuf,
    /// Operator images mapped to other builds (`just upgrade`), localkube only; see
    /// [`crate::playground::localkube::operator_builds`].
    pub image_overrides: Vec<(String, PathBuf)>,
}

impl BackendConfig {
    /// The [`workspace_root`], the running program's directory for binaries, and
    /// `$BLOODRAVEN_HARNESS_STATE_DIR` or `<root>/.localkube-harness`.
    pub fn for_this_checkout() -> Self {
        let root = workspace_root();
        let bin_dir = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf))
            .unwrap_or_default();
        let state_dir = std::env::var_os("BLOODRAVEN_HARNESS_STATE_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join(".localkube-harness"));
        Self {
            fault_driver: FaultDriverKind::Auto,
            root,
            bin_dir,
            state_dir,
            image_overrides: Vec::new(),
        }
    }
}

/// The backend for `kind`.
pub fn select_backend(kind: ClusterKind, config: &BackendConfig) -> Result<Box<dyn Backend>> {
    match kind {
        ClusterKind::Localkube => Ok(Box::new(LocalkubeBackend::new(LocalkubeBackendConfig {
            root: config.root.clone(),
            bin_dir: config.bin_dir.clone(),
            state_dir: config.state_dir.clone(),
            image_overrides: config.image_overrides.clone(),
            fault_driver: config.fault_driver,
        }))),
        ClusterKind::Kubeconfig => Ok(Box::new(KubeconfigBackend::from_env(
            config.root.clone(),
            config.bin_dir.clone(),
            config.fault_driver,
        )?)),
        ClusterKind::Kind => kind_backend(config),
    }
}

/// The default `--cluster`: kind where Docker is present, localkube otherwise
/// (docs/design/harness.md#one-run, step 1).
pub fn default_cluster_kind(docker_present: bool) -> ClusterKind {
    if docker_present {
        ClusterKind::Kind
    } else {
        ClusterKind::Localkube
    }
}
