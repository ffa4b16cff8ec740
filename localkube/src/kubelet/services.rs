//! Service, Endpoints and `DNSEndpoint` objects as the node side's [`ServiceSpec`] and
//! [`ExternalRecord`]s (cluster DNS, ClusterIP addresses and the userspace proxy).

use crate::apiserver::meta;
use crate::node::dns::{EndpointRecord, ExternalRecord, ServicePortRecord, ServiceRecord};
use crate::node::proxy::ServicePortKey;
use crate::node::services::{proxied_endpoints, ServicePortSpec, ServiceSpec};
use crate::node::NodeAgent;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Mutex;

fn arr<'a>(v: &'a Value, p: &str) -> Vec<&'a Value> {
    v.pointer(p)
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

/// A Service with its Endpoints (`None`: no endpoints yet). `None` for ExternalName
/// Services, which have no ClusterIP and no endpoints.
pub fn service_spec(svc: &Value, endpoints: Option<&Value>) -> Option<ServiceSpec> {
    if meta::str_at(svc, "/spec/type") == "ExternalName" {
        return None;
    }
    let ip = meta::str_at(svc, "/spec/clusterIP");
    let cluster_ip = if ip.is_empty() || ip == "None" {
        None
    } else {
        Some(ip.parse().ok()?)
    };
    let ports = arr(svc, "/spec/ports")
        .into_iter()
        .map(|p| ServicePortSpec {
            name: p
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .map(str::to_string),
            protocol: p
                .get("protocol")
                .and_then(Value::as_str)
                .unwrap_or("TCP")
                .to_string(),
            port: p.get("port").and_then(Value::as_u64).unwrap_or(0) as u16,
            target_port: p
                .get("targetPort")
                .and_then(Value::as_u64)
                .map(|n| n as u16),
        })
        .collect();
    let mut eps = Vec::new();
    for subset in endpoints.map(|e| arr(e, "/subsets")).unwrap_or_default() {
        let ports: BTreeMap<String, u16> = arr(subset, "/ports")
            .into_iter()
            .map(|p| {
                (
                    meta::str_at(p, "/name").to_string(),
                    p.get("port").and_then(Value::as_u64).unwrap_or(0) as u16,
                )
            })
            .collect();
        for (list, ready) in [("/addresses", true), ("/notReadyAddresses", false)] {
            for a in arr(subset, list) {
                let Ok(ip) = meta::str_at(a, "/ip").parse() else {
                    continue;
                };
                eps.push(EndpointRecord {
                    ip,
                    hostname: a
                        .get("hostname")
                        .and_then(Value::as_str)
                        .filter(|h| !h.is_empty())
                        .map(str::to_string),
                    ready,
                    ports: ports.clone(),
                });
            }
        }
    }
    Some(ServiceSpec {
        namespace: meta::namespace(svc).to_string(),
        name: meta::name(svc).to_string(),
        cluster_ip,
        ports,
        publish_not_ready_addresses: svc
            .pointer("/spec/publishNotReadyAddresses")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        endpoints: eps,
    })
}

/// The records of a `DNSEndpoint` (`externaldns.k8s.io`), `spec.endpoints[]`.
pub fn dns_endpoint_records(obj: &Value) -> Vec<ExternalRecord> {
    arr(obj, "/spec/endpoints")
        .into_iter()
        .map(|e| ExternalRecord {
            dns_name: meta::str_at(e, "/dnsName")
                .trim_end_matches('.')
                .to_string(),
            record_type: e
                .get("recordType")
                .and_then(Value::as_str)
                .unwrap_or("A")
                .to_string(),
            targets: arr(e, "/targets")
                .into_iter()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect(),
            ttl: e.get("recordTTL").and_then(Value::as_u64).map(|t| t as u32),
        })
        .collect()
}

/// Keeps ClusterIP addresses, proxy listeners and DNS records in step with the API, as
/// [`crate::node::services::Services`] does, but adds each ClusterIP address once (the
/// node side's re-add fails on iproute2 versions that answer "Address already assigned")
/// and skips unchanged Services.
#[derive(Debug, Default)]
pub struct ServiceSync {
    applied: Mutex<BTreeMap<(String, String), ServiceSpec>>,
}

impl ServiceSync {
    /// Applies (creates or updates) a Service.
    pub async fn apply(&self, agent: &NodeAgent, spec: ServiceSpec) -> crate::node::Result<()> {
        let key = (spec.namespace.clone(), spec.name.clone());
        let previous = self.lock().get(&key).cloned();
        if previous.as_ref() == Some(&spec) {
            return Ok(());
        }
        let network = agent.runtime.network();
        let mut wanted = BTreeSet::new();
        if let Some(ip) = spec.cluster_ip {
            if previous.as_ref().and_then(|p| p.cluster_ip) != Some(ip) {
                match network.add_local_address(ip) {
                    Ok(()) => {}
                    Err(crate::node::Error::Ip { message, .. })
                        if message.contains("already assigned") => {}
                    Err(e) => return Err(e),
                }
            }
            for port in spec
                .ports
                .iter()
                .filter(|p| p.protocol.eq_ignore_ascii_case("TCP"))
            {
                let port_key = ServicePortKey {
                    namespace: spec.namespace.clone(),
                    name: spec.name.clone(),
                    port: port.port,
                };
                wanted.insert(port_key.clone());
                let endpoints = proxied_endpoints(&spec, port);
                agent
                    .proxy
                    .set_service_port(port_key, SocketAddr::from((ip, port.port)), endpoints)
                    .await?;
            }
        }
        if let Some(previous) = &previous {
            remove_stale(agent, previous, &wanted, spec.cluster_ip)?;
        }
        agent.dns_records.set_service(
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

    /// Removes a Service (listeners close; established connections stay).
    pub fn remove(
        &self,
        agent: &NodeAgent,
        namespace: &str,
        name: &str,
    ) -> crate::node::Result<()> {
        let previous = self
            .lock()
            .remove(&(namespace.to_string(), name.to_string()));
        if let Some(previous) = previous {
            remove_stale(agent, &previous, &BTreeSet::new(), None)?;
        }
        agent.dns_records.remove_service(namespace, name);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), ServiceSpec>> {
        self.applied
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn remove_stale(
    agent: &NodeAgent,
    previous: &ServiceSpec,
    wanted: &BTreeSet<ServicePortKey>,
    ip_now: Option<Ipv4Addr>,
) -> crate::node::Result<()> {
    for port in &previous.ports {
        let key = ServicePortKey {
            namespace: previous.namespace.clone(),
            name: previous.name.clone(),
            port: port.port,
        };
        if !wanted.contains(&key) {
            agent.proxy.remove_service_port(&key);
        }
    }
    if let Some(ip) = previous.cluster_ip.filter(|ip| Some(*ip) != ip_now) {
        agent.runtime.network().remove_local_address(ip)?;
    }
    Ok(())
}
