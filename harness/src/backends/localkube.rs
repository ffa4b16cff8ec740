//! The localkube backend (the default where no Docker daemon answers): `localkube up` from
//! this workspace's binaries, with the image catalog written first; faults through
//! `localkube fault`; in-cluster addresses are local addresses of this machine's root
//! namespace, so the workload and probes run in the harness itself.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::backend::{Backend, Cluster, ClusterKind};
use crate::error::{Error, Result};
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

/// The cluster DNS address of a localkube state dir: `dnsAddress` of `localkube.json`, or
/// `.0.10:53` of the Service range (as kube-dns), from the kubernetes Service's ClusterIP.
pub fn dns_address(state_dir: &Path, kubernetes_cluster_ip: Option<&str>) -> Option<SocketAddr> {
    let recorded = std::fs::read_to_string(state_dir.join("localkube.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|state| {
            state["dnsAddress"].as_str().and_then(|a| {
                a.parse::<SocketAddr>()
                    .ok()
                    .or_else(|| format!("{a}:53").parse().ok())
            })
        });
    recorded.or_else(|| {
        let ip: std::net::Ipv4Addr = kubernetes_cluster_ip?.parse().ok()?;
        let [a, b, _, _] = ip.octets();
        Some(SocketAddr::from(([a, b, 0, 10], 53)))
    })
}

/// Connects a [`LiveCluster`] to the cluster of `kubeconfig` with the localkube driver.
pub fn connect(localkube: &LocalkubeConfig, root: &Path) -> Result<LiveCluster> {
    let kubeconfig = localkube.kubeconfig();
    let probe = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Cluster {
            action: "start the async runtime".to_owned(),
            reason: e.to_string(),
        })?;
    let kubernetes_ip = probe.block_on(async {
        let client = crate::playground::kube::client(&kubeconfig).await.ok()?;
        let services: kube::Api<k8s_openapi::api::core::v1::Service> =
            kube::Api::namespaced(client, "default");
        services.get("kubernetes").await.ok()?.spec?.cluster_ip
    });
    drop(probe);
    let dns = dns_address(&localkube.state_dir, kubernetes_ip.as_deref());
    LiveCluster::connect(
        &kubeconfig,
        Fixtures::new(root),
        &localkube.state_dir,
        Box::new(LocalkubeDriver {
            config: localkube.clone(),
        }),
        dns,
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
        Ok(Arc::new(connect(&localkube, &self.config.root)?))
    }

    fn teardown(&self, cluster: Arc<dyn Cluster>) -> Result<()> {
        drop(cluster);
        self.localkube().down(true)
    }

    fn capabilities(&self) -> std::collections::BTreeSet<crate::scenario::model::Capability> {
        // The runtime preloads libfaketime into every container it starts.
        [crate::scenario::model::Capability::ClockOffset].into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dns_address_comes_from_the_state_file_else_the_service_range() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            dns_address(dir.path(), Some("10.97.0.1")),
            Some(SocketAddr::from(([10, 97, 0, 10], 53)))
        );
        std::fs::write(
            dir.path().join("localkube.json"),
            r#"{"dnsAddress":"10.98.0.10:53"}"#,
        )
        .expect("write");
        assert_eq!(
            dns_address(dir.path(), Some("10.97.0.1")),
            Some(SocketAddr::from(([10, 98, 0, 10], 53)))
        );
        assert_eq!(dns_address(Path::new("/nonexistent"), None), None);
    }
}
