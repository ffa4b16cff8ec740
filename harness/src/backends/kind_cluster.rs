//! The kind backend behind the [`Backend`] trait ([`KindClusterBackend`]) and its fault driver
//! ([`KindDriver`]); the kind CLI itself is [`super::kind`].

use std::sync::Arc;

use super::config::BackendConfig;
use super::kind;
use super::kubeconfig;
use crate::backend::{Backend, Cluster, ClusterKind};
use crate::error::Result;

/// The kind backend behind the [`Backend`] trait: creates the cluster with the kind CLI, then
/// hands the runner the shared [`crate::live::LiveCluster`] on the portable path: processes
/// and the network through the in-cluster fault agent, a node's stop and start through
/// `docker` on its container ([`KindDriver`]).
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
                    let nodes = kind::KindNodes::new(self.kind.config().clone());
                    crate::live::DriverChoice::AgentWith(Box::new(move |agent| {
                        Box::new(KindDriver { agent, nodes })
                    }))
                }
            },
            self.config.bin_dir.clone(),
        )?))
    }

    fn teardown(&self, cluster: Arc<dyn Cluster>) -> Result<()> {
        drop(cluster);
        self.kind.delete_cluster()
    }

    fn capabilities(&self) -> std::collections::BTreeSet<crate::scenario::model::Capability> {
        // stop-node is kind's own `docker stop` here ([`KindDriver`]), not the agent's; with
        // the native driver nothing reaches kind's nodes.
        let mut capabilities = crate::backend::agent_capabilities();
        if self.config.fault_driver == crate::backend::FaultDriverKind::Native {
            capabilities.remove(&crate::scenario::model::Capability::StopNode);
        }
        capabilities
    }
}

/// kind's faults: the in-cluster fault agent for processes and the network, `docker stop`
/// for a node (the only fault kind makes outside the API: a node's power is not the
/// cluster's to give).
pub struct KindDriver {
    agent: crate::live::agent::AgentDriver,
    nodes: kind::KindNodes,
}

impl crate::live::faults::FaultDriver for KindDriver {
    fn kill(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        keep_down: bool,
    ) -> Result<crate::live::faults::DriverFault> {
        self.agent.kill(namespace, pod, container, keep_down)
    }

    fn freeze(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Result<crate::live::faults::DriverFault> {
        self.agent.freeze(namespace, pod, container)
    }

    fn stop_node(&self, node: &str) -> Result<crate::live::faults::DriverFault> {
        self.nodes.stop(node)?;
        Ok(crate::live::faults::DriverFault::default())
    }

    fn partition(
        &self,
        side_a: &[String],
        side_b: &[String],
    ) -> Result<crate::live::faults::DriverFault> {
        self.agent.partition(side_a, side_b)
    }

    fn end(
        &self,
        kind: &str,
        fault: &crate::live::faults::DriverFault,
        detail: &str,
    ) -> Result<()> {
        match kind {
            "stop-node" => self.nodes.start(detail),
            _ => self.agent.end(kind, fault, detail),
        }
    }
}
