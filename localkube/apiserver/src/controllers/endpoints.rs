//! Endpoints and EndpointSlices from Service selectors: a pod needs `status.podIP`; an
//! address is ready when the Service publishes not-ready addresses or the pod is Ready and
//! not terminating.

use super::super::cluster::Cluster;
use super::super::meta;
use super::super::selector::LabelSelector;
use super::controller::{log_err, Controller};
use super::workloads::pod_ready;
use jiff::Timestamp;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// Keeps Endpoints and EndpointSlices.
pub struct EndpointsController;

const MANAGED_BY: &str = "endpointslice-controller.k8s.io";

fn resolve_port(svc_port: &Value, pod: &Value) -> Option<i64> {
    match svc_port.get("targetPort") {
        Some(Value::Number(number)) => number.as_i64(),
        Some(Value::String(text)) => match text.parse::<i64>() {
            Ok(count) => Some(count),
            Err(_) => pod
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .flat_map(|container| {
                    container
                        .get("ports")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default()
                })
                .find(|p| meta::str_at(p, "/name") == text)
                .and_then(|p| p.get("containerPort").and_then(Value::as_i64)),
        },
        _ => svc_port.get("port").and_then(Value::as_i64),
    }
}

/// What a Service's selected pods give: Endpoints subsets and EndpointSlice endpoints.
#[derive(Default)]
struct Backends {
    /// Addresses grouped by their port list: (ports, ready, not ready).
    groups: Vec<(Vec<Value>, Vec<Value>, Vec<Value>)>,
    /// The EndpointSlice's endpoints, one per pod with an IP (terminating ones too).
    slice_endpoints: Vec<Value>,
    /// The EndpointSlice's ports: those of the first pod.
    slice_ports: Option<Vec<Value>>,
}

impl Controller for EndpointsController {
    fn name(&self) -> &'static str {
        "endpoints"
    }
    fn reconcile(&mut self, cluster: &Cluster, _now: Timestamp) {
        let (services, _) = cluster.store.list("/services", None);
        let (pods, _) = cluster.store.list("/pods", None);
        let (nodes, _) = cluster.store.list("/nodes", None);
        let zones: HashMap<&str, &str> = nodes
            .iter()
            .map(|node| {
                (
                    meta::name(node),
                    meta::str_at(node, "/metadata/labels/topology.kubernetes.io~1zone"),
                )
            })
            .collect();
        let mut wanted: HashSet<(String, String)> = HashSet::new();
        for service in &services {
            let Some(selector) = service.pointer("/spec/selector").filter(|selector| {
                selector
                    .as_object()
                    .map(|map| !map.is_empty())
                    .unwrap_or(false)
            }) else {
                continue;
            };
            let (namespace, name) = (meta::namespace(service), meta::name(service));
            wanted.insert((namespace.to_string(), name.to_string()));
            let backends =
                service_backends(service, &LabelSelector::from_map(selector), &pods, &zones);
            write_endpoints(cluster, service, backends.subsets());
            let ports = backends.slice_ports.unwrap_or_default();
            write_endpoint_slice(cluster, service, backends.slice_endpoints, ports);
        }
        delete_orphans(cluster, &wanted);
    }
}

/// The backends of a Service among `pods`: each selected pod with an IP that has not
/// finished.
fn service_backends(
    service: &Value,
    selector: &LabelSelector,
    pods: &[Value],
    zones: &HashMap<&str, &str>,
) -> Backends {
    let (namespace, name) = (meta::namespace(service), meta::name(service));
    let publish = service
        .pointer("/spec/publishNotReadyAddresses")
        .and_then(Value::as_bool)
        == Some(true);
    let service_ports: Vec<Value> = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut backends = Backends::default();
    for pod in pods
        .iter()
        .filter(|pod| meta::namespace(pod) == namespace && selector.matches(pod))
    {
        let ip = meta::str_at(pod, "/status/podIP");
        if ip.is_empty() || matches!(meta::str_at(pod, "/status/phase"), "Succeeded" | "Failed") {
            continue;
        }
        let terminating = pod.pointer("/metadata/deletionTimestamp").is_some();
        let serving = pod_ready(pod);
        let ready = publish || (serving && !terminating);
        let node = meta::str_at(pod, "/spec/nodeName");
        let mut address = json!({"ip": ip, "targetRef": {"kind": "Pod", "namespace": namespace, "name": meta::name(pod), "uid": meta::uid_of(pod)}});
        if !node.is_empty() {
            address["nodeName"] = json!(node);
        }
        let hostname = meta::str_at(pod, "/spec/hostname");
        if !hostname.is_empty() && meta::str_at(pod, "/spec/subdomain") == name {
            address["hostname"] = json!(hostname);
        }
        let ports = endpoint_ports(&service_ports, pod);
        if backends.slice_ports.is_none() {
            backends.slice_ports = Some(ports.clone());
        }
        let mut endpoint = json!({"addresses": [ip], "conditions": {"ready": ready, "serving": publish || serving, "terminating": terminating},
            "targetRef": address["targetRef"].clone()});
        if !node.is_empty() {
            endpoint["nodeName"] = json!(node);
            if let Some(zone) = zones.get(node).filter(|zone| !zone.is_empty()) {
                endpoint["zone"] = json!(zone);
            }
        }
        if let Some(hostname) = address.get("hostname") {
            endpoint["hostname"] = hostname.clone();
        }
        backends.slice_endpoints.push(endpoint);
        if terminating && !publish {
            continue;
        }
        match backends.groups.iter_mut().find(|group| group.0 == ports) {
            Some(group) => {
                if ready {
                    group.1.push(address)
                } else {
                    group.2.push(address)
                }
            }
            None => backends.groups.push((
                ports,
                if ready { vec![address.clone()] } else { vec![] },
                if ready { vec![] } else { vec![address] },
            )),
        }
    }
    backends
}

/// The ports of a Service resolved against one pod (named target ports by the pod's
/// container ports); a port that does not resolve is left out.
fn endpoint_ports(service_ports: &[Value], pod: &Value) -> Vec<Value> {
    service_ports
        .iter()
        .filter_map(|service_port| {
            let port = resolve_port(service_port, pod)?;
            let mut entry = json!({"port": port, "protocol": service_port.get("protocol").cloned().unwrap_or(json!("TCP"))});
            if let Some(name) = service_port.get("name").filter(|name| {
                name.as_str()
                    .map(|text| !text.is_empty())
                    .unwrap_or(false)
            }) {
                entry["name"] = name.clone();
            }
            if let Some(app_protocol) = service_port.get("appProtocol") {
                entry["appProtocol"] = app_protocol.clone();
            }
            Some(entry)
        })
        .collect()
}

impl Backends {
    /// The Endpoints `subsets`: one per port list, ready and not-ready addresses apart.
    fn subsets(&self) -> Vec<Value> {
        self.groups
            .iter()
            .map(|(ports, ready, not_ready)| {
                let mut subset = json!({"ports": ports});
                if !ready.is_empty() {
                    subset["addresses"] = json!(ready);
                }
                if !not_ready.is_empty() {
                    subset["notReadyAddresses"] = json!(not_ready);
                }
                subset
            })
            .collect()
    }
}

/// Creates or updates the Service's Endpoints (its labels plus `managed-by`).
fn write_endpoints(cluster: &Cluster, service: &Value, subsets: Vec<Value>) {
    let (namespace, name) = (meta::namespace(service), meta::name(service));
    let mut labels = service
        .pointer("/metadata/labels")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or(json!({}));
    labels["endpoints.kubernetes.io/managed-by"] = json!("endpoint-controller");
    if cluster.store.get("/endpoints", namespace, name).is_none() {
        let mut endpoints = json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name, "namespace": namespace, "labels": labels}});
        if !subsets.is_empty() {
            endpoints["subsets"] = json!(subsets);
        }
        let created =
            cluster.create_internal("", "endpoints", namespace, endpoints, "endpoint-controller");
        log_err("endpoints", "create endpoints", created);
        return;
    }
    let want = if subsets.is_empty() {
        None
    } else {
        Some(json!(subsets))
    };
    let update = |endpoints: &mut Value| {
        if endpoints.get("subsets").cloned() == want
            && endpoints.pointer("/metadata/labels") == Some(&labels)
        {
            return false;
        }
        match &want {
            Some(subsets) => endpoints["subsets"] = subsets.clone(),
            None => {
                if let Some(map) = endpoints.as_object_mut() {
                    map.remove("subsets");
                }
            }
        }
        endpoints["metadata"]["labels"] = labels.clone();
        true
    };
    let updated = cluster.modify(
        "",
        "endpoints",
        namespace,
        name,
        None,
        "endpoint-controller",
        update,
    );
    log_err("endpoints", "update endpoints", updated);
}

/// Creates or updates the Service's EndpointSlice (the one labelled with its name and
/// managed by [`MANAGED_BY`]).
fn write_endpoint_slice(
    cluster: &Cluster,
    service: &Value,
    endpoints: Vec<Value>,
    ports: Vec<Value>,
) {
    let (namespace, name) = (meta::namespace(service), meta::name(service));
    let (slices, _) = cluster
        .store
        .list("discovery.k8s.io/endpointslices", Some(namespace));
    let existing = slices.iter().find(|slice| {
        meta::str_at(slice, "/metadata/labels/kubernetes.io~1service-name") == name
            && meta::str_at(
                slice,
                "/metadata/labels/endpointslice.kubernetes.io~1managed-by",
            ) == MANAGED_BY
    });
    let Some(existing) = existing else {
        let mut slice_labels = service
            .pointer("/metadata/labels")
            .cloned()
            .filter(Value::is_object)
            .unwrap_or(json!({}));
        slice_labels["kubernetes.io/service-name"] = json!(name);
        slice_labels["endpointslice.kubernetes.io/managed-by"] = json!(MANAGED_BY);
        let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"generateName": format!("{name}-"), "namespace": namespace, "labels": slice_labels,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name, "uid": meta::uid_of(service), "controller": true, "blockOwnerDeletion": true}]},
            "addressType": "IPv4", "endpoints": endpoints, "ports": ports});
        let created = cluster.create_internal(
            "discovery.k8s.io",
            "endpointslices",
            namespace,
            slice,
            "endpointslice-controller",
        );
        log_err("endpoints", "create endpointslice", created);
        return;
    };
    let slice_name = meta::name(existing).to_string();
    let update = |slice: &mut Value| {
        if slice.get("endpoints") == Some(&json!(endpoints))
            && slice.get("ports") == Some(&json!(ports))
        {
            return false;
        }
        slice["endpoints"] = json!(endpoints);
        slice["ports"] = json!(ports);
        true
    };
    let updated = cluster.modify(
        "discovery.k8s.io",
        "endpointslices",
        namespace,
        &slice_name,
        None,
        "endpointslice-controller",
        update,
    );
    log_err("endpoints", "update endpointslice", updated);
}

/// Deletes the Endpoints this controller made for Services that are gone or lost their
/// selector.
fn delete_orphans(cluster: &Cluster, wanted: &HashSet<(String, String)>) {
    let (all_endpoints, _) = cluster.store.list("/endpoints", None);
    for endpoints in all_endpoints.iter().filter(|endpoints| {
        meta::str_at(
            endpoints,
            "/metadata/labels/endpoints.kubernetes.io~1managed-by",
        ) == "endpoint-controller"
    }) {
        let key = (
            meta::namespace(endpoints).to_string(),
            meta::name(endpoints).to_string(),
        );
        if !wanted.contains(&key) {
            let deleted = cluster.delete_internal(
                "",
                "endpoints",
                meta::namespace(endpoints),
                meta::name(endpoints),
                None,
            );
            log_err("endpoints", "delete endpoints", deleted);
        }
    }
}
