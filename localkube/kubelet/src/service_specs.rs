//! Service, Endpoints and `DNSEndpoint` objects as the node side's [`ServiceSpec`] and
//! [`ExternalRecord`]s (cluster DNS, ClusterIP addresses and the userspace proxy).

use localkube_apiserver::meta;
use localkube_runtime::dns::{EndpointRecord, ExternalRecord};
use localkube_runtime::service_wiring::{ServicePortSpec, ServiceSpec};
use serde_json::Value;
use std::collections::BTreeMap;

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
