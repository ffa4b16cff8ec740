//! The whole node side of one cluster in one value: pod runtime, cluster DNS on the
//! cluster DNS address (port 53), Service proxy, Service wiring and faults.
//!
//! `localkube up` creates one [`NodeAgent`] and translates API objects into
//! [`super::spec::PodSpec`] / [`super::service_wiring::ServiceSpec`]; `localkube down` calls
//! [`NodeAgent::down`] (or, after a crash, [`super::state::cleanup`] on the state dir).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::dns::{ClusterDns, DnsRecords};
use super::error::Result;
use super::faults::Faults;
use super::proxy::ServiceProxy;
use super::runtime::{PodRuntime, RuntimeConfig};
use super::service_wiring::Services;

/// The standard DNS port the cluster DNS listens on.
pub const DNS_PORT: u16 = 53;

/// Everything node-side of one cluster.
#[derive(Debug)]
pub struct NodeAgent {
    /// Pods as processes.
    pub runtime: PodRuntime,
    /// The records the cluster DNS answers from.
    pub dns_records: Arc<DnsRecords>,
    /// The userspace Service proxy.
    pub proxy: Arc<ServiceProxy>,
    /// Service wiring (ClusterIP addresses, proxy, DNS).
    pub services: Services,
    /// Fault injection and the fault log.
    pub faults: Faults,
    dns: ClusterDns,
    state_dir: PathBuf,
}

impl NodeAgent {
    /// Brings up the cluster network, registers `nodes` (in order: node `i` gets pod subnet
    /// `10.(244+c).i.0/24`) and starts the cluster DNS on `dns_ip:53`. Needs root.
    pub async fn up(config: RuntimeConfig, nodes: &[&str]) -> Result<Self> {
        let runtime = PodRuntime::new(config)?;
        for node in nodes {
            runtime.register_node(node)?;
        }
        let dns_records = DnsRecords::new();
        let dns = ClusterDns::serve(
            SocketAddr::from((runtime.naming().dns_ip(), DNS_PORT)),
            dns_records.clone(),
        )
        .await?;
        let proxy = Arc::new(
            ServiceProxy::new(Some(runtime.partitions()))
                .with_client_namespaces(runtime.client_namespaces()),
        );
        let services = Services::new(
            runtime.network().clone(),
            proxy.clone(),
            dns_records.clone(),
        );
        let faults = Faults::new(runtime.clone(), Some(dns_records.clone()));
        let state_dir = runtime.network().state_dir().to_path_buf();
        Ok(Self {
            runtime,
            dns_records,
            proxy,
            services,
            faults,
            dns,
            state_dir,
        })
    }

    /// The cluster DNS address pods use.
    pub fn dns_addr(&self) -> SocketAddr {
        self.dns.addr()
    }

    /// Stops every pod (SIGTERM, SIGKILL after `grace`), reverts active faults, stops DNS and
    /// the proxy, and removes every namespace, link and process recorded in the state dir.
    pub async fn down(self, grace: Duration) -> Result<()> {
        if let Err(err) = self.faults.end_all() {
            tracing::warn!(error = %err, "reverting faults during down");
        }
        self.runtime.shutdown(grace).await;
        self.dns.shutdown().await;
        drop(self.proxy);
        super::state::cleanup(&self.state_dir)
    }
}
