//! One call per Service change keeps the three Service mechanisms in step: the ClusterIP as
//! a local address of the root namespace, the proxy's listeners and endpoints, and the DNS
//! records. The caller translates Service + EndpointSlice objects into [`ServiceSpec`].

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use super::dns::{DnsRecords, EndpointRecord, ServicePortRecord, ServiceRecord};
use super::error::Result;
use super::network::ClusterNetwork;
use super::proxy::{ServicePortKey, ServiceProxy};

/// A Service port with its target (`spec.ports[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePortSpec {
    /// `name`.
    pub name: Option<String>,
    /// `protocol` (`TCP` and `UDP` are proxied; every protocol is in DNS).
    pub protocol: String,
    /// `port`.
    pub port: u16,
    /// `targetPort` when it is a number (a named targetPort comes per endpoint in
    /// [`EndpointRecord::ports`]).
    pub target_port: Option<u16>,
}

/// What the node side needs of one Service and its endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceSpec {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.clusterIP` (`None` for headless).
    pub cluster_ip: Option<Ipv4Addr>,
    /// `spec.ports`.
    pub ports: Vec<ServicePortSpec>,
    /// `spec.publishNotReadyAddresses`.
    pub publish_not_ready_addresses: bool,
    /// The endpoints (from EndpointSlices).
    pub endpoints: Vec<EndpointRecord>,
}

/// Applies Service changes to the network, the proxy and DNS.
#[derive(Debug)]
pub struct Services {
    network: Arc<ClusterNetwork>,
    proxy: Arc<ServiceProxy>,
    records: Arc<DnsRecords>,
    applied: Mutex<BTreeMap<(String, String), ServiceSpec>>,
}

impl Services {
    /// Over a cluster network, its proxy and its DNS records.
    pub fn new(
        network: Arc<ClusterNetwork>,
        proxy: Arc<ServiceProxy>,
        records: Arc<DnsRecords>,
    ) -> Self {
        Self {
            network,
            proxy,
            records,
            applied: Mutex::new(BTreeMap::new()),
        }
    }

    /// Creates or updates a Service: ClusterIP address, proxied ports (new connections use
    /// the new endpoints; established ones stay), DNS records.
    pub async fn apply(&self, spec: ServiceSpec) -> Result<()> {
        let key = (spec.namespace.clone(), spec.name.clone());
        let previous = self.lock().get(&key).cloned();
        if previous.as_ref() == Some(&spec) {
            // The kubelet re-applies every Service on each resync: unchanged is a no-op.
            return Ok(());
        }
        let dns_ip = self.network.naming().dns_ip();
        if spec.cluster_ip == Some(dns_ip) {
            // `kube-system/kube-dns`: the cluster DNS listens on its ClusterIP itself (the
            // address is the network's from the start); only its records are set.
        } else if let Some(ip) = spec.cluster_ip {
            self.network.add_local_address(ip)?;
            let mut wanted = BTreeSet::new();
            for port in &spec.ports {
                let port_key = ServicePortKey {
                    namespace: spec.namespace.clone(),
                    name: spec.name.clone(),
                    port: port.port,
                };
                let listen = SocketAddr::from((ip, port.port));
                let endpoints = proxied_endpoints(&spec, port);
                if port.protocol.eq_ignore_ascii_case("TCP") {
                    self.proxy
                        .set_service_port(port_key.clone(), listen, endpoints)
                        .await?;
                } else if port.protocol.eq_ignore_ascii_case("UDP") {
                    self.proxy
                        .set_udp_service_port(port_key.clone(), listen, endpoints)
                        .await?;
                } else {
                    continue;
                }
                wanted.insert((port_key, port.protocol.to_ascii_uppercase()));
            }
            if let Some(previous) = &previous {
                self.remove_stale(previous, &wanted)?;
            }
        } else if let Some(previous) = &previous {
            self.remove_stale(previous, &BTreeSet::new())?;
        }
        self.records.set_service(
            &spec.namespace,
            &spec.name,
            ServiceRecord {
                cluster_ip: spec.cluster_ip,
                ports: spec
                    .ports
                    .iter()
                    .map(|p| ServicePortRecord {
                        name: p.name.clone(),
                        protocol: p.protocol.clone(),
                        port: p.port,
                    })
                    .collect(),
                publish_not_ready_addresses: spec.publish_not_ready_addresses,
                endpoints: spec.endpoints.clone(),
            },
        );
        self.lock().insert(key, spec);
        Ok(())
    }

    /// Deletes a Service (listeners close; established connections are left alone).
    pub fn remove(&self, namespace: &str, name: &str) -> Result<()> {
        let previous = self
            .lock()
            .remove(&(namespace.to_string(), name.to_string()));
        if let Some(previous) = previous {
            self.remove_stale(&previous, &BTreeSet::new())?;
        }
        self.records.remove_service(namespace, name);
        Ok(())
    }

    /// Stops proxying the ports of `previous` that are not `wanted` (key and protocol).
    fn remove_stale(
        &self,
        previous: &ServiceSpec,
        wanted: &BTreeSet<(ServicePortKey, String)>,
    ) -> Result<()> {
        for port in &previous.ports {
            let key = ServicePortKey {
                namespace: previous.namespace.clone(),
                name: previous.name.clone(),
                port: port.port,
            };
            for protocol in ["TCP", "UDP"] {
                if wanted.contains(&(key.clone(), protocol.to_string())) {
                    continue;
                }
                match protocol {
                    "TCP" => self.proxy.remove_service_port(&key),
                    _ => self.proxy.remove_udp_service_port(&key),
                }
            }
        }
        if wanted.is_empty() {
            let dns_ip = self.network.naming().dns_ip();
            if let Some(ip) = previous.cluster_ip.filter(|ip| *ip != dns_ip) {
                self.network.remove_local_address(ip)?;
            }
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), ServiceSpec>> {
        self.applied
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The endpoint addresses the proxy uses for one Service port: ready endpoints (or all with
/// publishNotReadyAddresses), at the endpoint's own port for a named targetPort.
pub fn proxied_endpoints(spec: &ServiceSpec, port: &ServicePortSpec) -> Vec<SocketAddr> {
    spec.endpoints
        .iter()
        .filter(|e| e.ready || spec.publish_not_ready_addresses)
        .filter_map(|e| {
            let target = port
                .name
                .as_ref()
                .and_then(|name| e.ports.get(name).copied())
                .or(port.target_port)
                .or(Some(port.port))?;
            Some(SocketAddr::from((e.ip, target)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxied_endpoints_use_ready_ones_and_their_own_ports() {
        let endpoint = |last: u8, ready: bool, port: Option<u16>| EndpointRecord {
            ip: Ipv4Addr::new(10, 244, 0, last),
            hostname: None,
            ready,
            ports: port.map(|p| ("mysql".to_string(), p)).into_iter().collect(),
        };
        let mut spec = ServiceSpec {
            namespace: "ns".into(),
            name: "mysql".into(),
            cluster_ip: Some(Ipv4Addr::new(10, 96, 0, 20)),
            ports: vec![ServicePortSpec {
                name: Some("mysql".into()),
                protocol: "TCP".into(),
                port: 3306,
                target_port: Some(3307),
            }],
            publish_not_ready_addresses: false,
            endpoints: vec![
                endpoint(2, true, Some(3310)),
                endpoint(3, false, None),
                endpoint(4, true, None),
            ],
        };
        let port = spec.ports[0].clone();
        assert_eq!(
            proxied_endpoints(&spec, &port),
            vec![
                "10.244.0.2:3310".parse().unwrap(),
                "10.244.0.4:3307".parse().unwrap()
            ]
        );
        spec.publish_not_ready_addresses = true;
        assert_eq!(proxied_endpoints(&spec, &port).len(), 3);
    }
}
