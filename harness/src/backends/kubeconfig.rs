//! The kubeconfig backend: an existing cluster from `$KUBECONFIG`. The harness installs the
//! playground on it and never creates or deletes the cluster. Faults that need processes
//! and nodes go through `localkube fault` when `$KUBECONFIG` is a localkube's (its state dir
//! holds the kubeconfig); on any other cluster they are refused with a sentence saying so.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::backend::{Backend, Cluster, ClusterKind};
use crate::error::{Error, Result};
use crate::live::faults::{DriverFault, FaultDriver};
use crate::playground::localkube::LocalkubeConfig;

/// An existing cluster.
#[derive(Debug, Clone)]
pub struct KubeconfigBackend {
    /// The kubeconfig file.
    pub kubeconfig: PathBuf,
    /// The workspace root.
    pub root: PathBuf,
    /// The workspace's binaries.
    pub bin_dir: PathBuf,
    /// How faults reach the cluster.
    pub fault_driver: crate::backend::FaultDriverKind,
}

impl KubeconfigBackend {
    /// From `$KUBECONFIG`, else `~/.kube/config`.
    pub fn from_env(
        root: PathBuf,
        bin_dir: PathBuf,
        fault_driver: crate::backend::FaultDriverKind,
    ) -> Result<Self> {
        let kubeconfig = std::env::var_os("KUBECONFIG")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".kube/config"))
            })
            .filter(|path| path.is_file())
            .ok_or_else(|| Error::Cluster {
                action: "find a cluster for --cluster kubeconfig".to_owned(),
                reason: "$KUBECONFIG names no file (and ~/.kube/config does not exist)".to_owned(),
            })?;
        Ok(Self {
            kubeconfig,
            root,
            bin_dir,
            fault_driver,
        })
    }
}

/// Whether `kubeconfig` was written by localkube (its state dir holds `localkube.json`).
pub fn localkube_state_dir(kubeconfig: &Path) -> Option<PathBuf> {
    let dir = kubeconfig.parent()?;
    dir.join("localkube.json")
        .is_file()
        .then(|| dir.to_path_buf())
}

/// Refuses process, node and network faults: nothing here can reach them.
#[derive(Debug, Clone, Copy)]
pub struct NoDriver;

fn refused(what: &str) -> Error {
    Error::Cluster {
        action: what.to_owned(),
        reason: "--fault-driver native has no way to reach this cluster's processes, nodes and network (only a localkube's fault socket is native): use --fault-driver agent".to_owned(),
    }
}

impl FaultDriver for NoDriver {
    fn kill(&self, _: &str, _: &str, _: &str, _: bool) -> Result<DriverFault> {
        Err(refused("kill a container"))
    }
    fn freeze(&self, _: &str, _: &str, _: &str) -> Result<DriverFault> {
        Err(refused("freeze a container"))
    }
    fn stop_node(&self, _: &str) -> Result<DriverFault> {
        Err(refused("stop a node"))
    }
    fn partition(&self, _: &[String], _: &[String]) -> Result<DriverFault> {
        Err(refused("partition the sites"))
    }
    fn end(&self, kind: &str, _: &DriverFault, _: &str) -> Result<()> {
        Err(refused(&format!("end a {kind} fault")))
    }
}

impl Backend for KubeconfigBackend {
    fn kind(&self) -> ClusterKind {
        ClusterKind::Kubeconfig
    }

    fn create(&self) -> Result<Arc<dyn Cluster>> {
        if let Some(state_dir) = localkube_state_dir(&self.kubeconfig) {
            let localkube = LocalkubeConfig {
                state_dir,
                bin_dir: self.bin_dir.clone(),
                image_overrides: Vec::new(),
            };
            return Ok(Arc::new(super::localkube::connect(
                &localkube,
                &self.root,
                self.fault_driver,
            )?));
        }
        let out_dir = std::env::temp_dir().join("bloodraven-harness");
        Ok(Arc::new(crate::live::LiveCluster::connect(
            &self.kubeconfig,
            crate::playground::install::Fixtures::new(&self.root),
            &out_dir,
            match self.fault_driver {
                crate::backend::FaultDriverKind::Native => {
                    crate::live::DriverChoice::Given(Box::new(NoDriver))
                }
                crate::backend::FaultDriverKind::Auto | crate::backend::FaultDriverKind::Agent => {
                    crate::live::DriverChoice::Agent
                }
            },
            self.bin_dir.clone(),
        )?))
    }

    fn teardown(&self, cluster: Arc<dyn Cluster>) -> Result<()> {
        // Not ours to delete: remove what the scenarios installed.
        cluster.uninstall()
    }

    fn capabilities(&self) -> std::collections::BTreeSet<crate::scenario::model::Capability> {
        // A localkube's (its state dir holds the kubeconfig) through its fault socket; any
        // other cluster through the agent.
        if localkube_state_dir(&self.kubeconfig).is_some() {
            super::localkube::capabilities(self.fault_driver)
        } else if self.fault_driver == crate::backend::FaultDriverKind::Native {
            // Nothing reaches this cluster's nodes natively.
            std::collections::BTreeSet::new()
        } else {
            crate::backend::agent_capabilities()
        }
    }
}
