//! Which backend a run uses (docs/design/harness.md#one-run, step 1): the default `--cluster`,
//! what every backend needs to create a cluster ([`BackendConfig`]), and the one place the
//! concrete backends are built ([`select_backend`]).

pub use super::config::BackendConfig;
use super::kind_cluster::kind_backend;
use super::kubeconfig::KubeconfigBackend;
use super::localkube::{LocalkubeBackend, LocalkubeBackendConfig};
use crate::backend::{Backend, ClusterKind};
use crate::error::Result;

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
