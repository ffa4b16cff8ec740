//! The cluster backends of the harness (docs/design/harness.md#one-run).

pub mod kind;
pub mod kubeconfig;
pub mod localkube;

use std::sync::Arc;

use crate::backend::{Backend, BackendConfig, Cluster, ClusterKind};
use crate::error::Result;

/// The kind backend behind the [`Backend`] trait: creates the cluster with the kind CLI, then
/// hands the runner the shared [`crate::live::LiveCluster`]. Process, node and network
/// faults on kind are not implemented (they would go through `docker` on the node
/// containers); the kubeconfig backend's [`kubeconfig::NoDriver`] refuses them with a
/// sentence saying so.
#[derive(Debug, Clone)]
pub struct KindClusterBackend {
    kind: kind::KindBackend,
    config: BackendConfig,
}

/// The kind backend for `config`.
pub fn kind_backend(config: &BackendConfig) -> Result<Box<dyn Backend>> {
    Ok(Box::new(KindClusterBackend {
        kind: kind::KindBackend::new(kind::KindConfig::new(&config.root, &config.state_dir)),
        config: config.clone(),
    }))
}

impl Backend for KindClusterBackend {
    fn kind(&self) -> ClusterKind {
        ClusterKind::Kind
    }

    fn create(&self) -> Result<Arc<dyn Cluster>> {
        let kubeconfig = self.kind.create_cluster()?;
        Ok(Arc::new(crate::live::LiveCluster::connect(
            &kubeconfig,
            crate::playground::install::Fixtures::new(&self.config.root),
            &self.config.state_dir,
            match self.config.fault_driver {
                crate::backend::FaultDriverKind::Native => {
                    crate::live::DriverChoice::Given(Box::new(kubeconfig::NoDriver))
                }
                crate::backend::FaultDriverKind::Auto | crate::backend::FaultDriverKind::Agent => {
                    crate::live::DriverChoice::Agent
                }
            },
            self.config.bin_dir.clone(),
        )?))
    }

    fn teardown(&self, cluster: Arc<dyn Cluster>) -> Result<()> {
        drop(cluster);
        self.kind.delete_cluster()
    }
}
