//! The localkube backend (the default where no Docker daemon answers): `localkube up` from
//! this workspace's binaries, with the image catalog written first; process, node and network
//! faults through `localkube fault` (or the in-cluster fault agent). The workload and every
//! probe of the cluster's network run in the cluster, as on any backend.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::backend::{Backend, Cluster, ClusterKind};
use crate::error::Result;
use crate::live::faults::LocalkubeDriver;
use crate::live::LiveCluster;
use crate::playground::install::Fixtures;
use crate::playground::localkube::LocalkubeConfig;

/// What `create()` needs.
#[derive(Debug, Clone)]
pub struct LocalkubeBackendConfig {
    /// The workspace root (fixtures).
    pub root: PathBuf,
    /// The directory of the workspace's binaries.
    pub bin_dir: PathBuf,
    /// The state dir of the cluster.
    pub state_dir: PathBuf,
    /// Images mapped to other binaries (`--upgrade-from-bin`, `--upgrade-to-bin`).
    pub image_overrides: Vec<(String, PathBuf)>,
    /// How faults reach the cluster.
    pub fault_driver: crate::backend::FaultDriverKind,
}

/// Creates a localkube cluster per `create()` (or one for the whole run with `--reuse`).
#[derive(Debug, Clone)]
pub struct LocalkubeBackend {
    config: LocalkubeBackendConfig,
}

impl LocalkubeBackend {
    /// A backend with `config`.
    pub fn new(config: LocalkubeBackendConfig) -> Self {
        Self { config }
    }

    fn localkube(&self) -> LocalkubeConfig {
        LocalkubeConfig {
            state_dir: self.config.state_dir.clone(),
            bin_dir: self.config.bin_dir.clone(),
            image_overrides: self.config.image_overrides.clone(),
        }
    }
}

/// What a localkube cluster can do with `driver`: everything through its fault socket (its
/// runtime preloads libfaketime into every container it starts, it stops nodes and its
/// external-dns stand-in), what the agent can through the agent.
pub fn capabilities(
    driver: crate::backend::FaultDriverKind,
) -> std::collections::BTreeSet<crate::scenario::model::Capability> {
    match driver {
        crate::backend::FaultDriverKind::Agent => crate::backend::agent_capabilities(),
        crate::backend::FaultDriverKind::Auto | crate::backend::FaultDriverKind::Native => {
            crate::backend::localkube_capabilities()
        }
    }
}

/// Connects a [`LiveCluster`] to the cluster of `kubeconfig` with the localkube driver, or the
/// in-cluster fault agent (`--fault-driver agent`: the fault socket is never used).
pub fn connect(
    localkube: &LocalkubeConfig,
    root: &Path,
    driver: crate::backend::FaultDriverKind,
) -> Result<LiveCluster> {
    let kubeconfig = localkube.kubeconfig();
    LiveCluster::connect(
        &kubeconfig,
        Fixtures::new(root),
        &localkube.state_dir,
        match driver {
            crate::backend::FaultDriverKind::Agent => crate::live::DriverChoice::Agent,
            crate::backend::FaultDriverKind::Auto | crate::backend::FaultDriverKind::Native => {
                crate::live::DriverChoice::Given(Box::new(LocalkubeDriver {
                    config: localkube.clone(),
                }))
            }
        },
        localkube.bin_dir.clone(),
    )
}

impl Backend for LocalkubeBackend {
    fn kind(&self) -> ClusterKind {
        ClusterKind::Localkube
    }

    fn create(&self) -> Result<Arc<dyn Cluster>> {
        let localkube = self.localkube();
        // A cluster left by a crashed run is stopped and its leftovers removed first.
        if localkube.localkube().is_file() {
            let _ = localkube.down(true);
        }
        localkube.up()?;
        Ok(Arc::new(connect(
            &localkube,
            &self.config.root,
            self.config.fault_driver,
        )?))
    }

    fn teardown(&self, cluster: Arc<dyn Cluster>) -> Result<()> {
        drop(cluster);
        self.localkube().down(true)
    }

    fn capabilities(&self) -> std::collections::BTreeSet<crate::scenario::model::Capability> {
        capabilities(self.config.fault_driver)
    }
}
