//! Endpoints and EndpointSlices from Service selectors: a pod needs `status.podIP`; an
//! address is ready when the Service publishes not-ready addresses or the pod is Ready and
//! not terminating.

use super::super::meta;
use super::super::ops::Cluster;
use super::super::selector::LabelSelector;
use super::manager::{log_err, Controller};
use super::workloads::pod_ready;
use jiff::Timestamp;
use serde_json::{json, Value};
use std::collections::HashMap;

/// Keeps Endpoints and EndpointSlices.
pub struct EndpointsController;

const MANAGED_BY: &str = "endpointslice-controller.k8s.io";

fn resolve_port(svc_port: &Value, pod: &Value) -> Option<i64> {
    match svc_port.get("targetPort") {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => match s.parse::<i64>() {
            Ok(n) => Some(n),
            Err(_) => pod
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .flat_map(|c| {
                    c.get("ports")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default()
                })
                .find(|p| meta::str_at(p, "/name") == s)
                .and_then(|p| p.get("containerPort").and_then(Value::as_i64)),
        },
        _ => svc_port.get("port").and_then(Value::as_i64),
    }
}

impl Controller for EndpointsController {
    fn name(&self) -> &'static str {
        "endpoints"
    }
    fn reconcile(&mut self, c: &Cluster, _now: Timestamp) {
        let (services, _) = c.store.list("/services", None);
        let (pods, _) = c.store.list("/pods", None);
        let (nodes, _) = c.store.list("/nodes", None);
        let zones: HashMap<&str, &str> = nodes
            .iter()
            .map(|n| {
                (
                    meta::name(n),
                    meta::str_at(n, "/metadata/labels/topology.kubernetes.io~1zone"),
                )
            })
            .collect();
        let mut wanted: std::collections::HashSet<(String, String)> =
            std::collections::HashSet::new();
        for svc in &services {
            let Some(selector) = svc
                .pointer("/spec/selector")
                .filter(|s| s.as_object().map(|m| !m.is_empty()).unwrap_or(false))
            else {
                continue;
            };
            let (ns, name) = (meta::namespace(svc), meta::name(svc));
            wanted.insert((ns.to_string(), name.to_string()));
            let sel = LabelSelector::from_map(selector);
            let publish = svc
                .pointer("/spec/publishNotReadyAddresses")
                .and_then(Value::as_bool)
                == Some(true);
            let svc_ports: Vec<Value> = svc
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let mut groups: Vec<(Vec<Value>, Vec<Value>, Vec<Value>)> = Vec::new();
            let mut slice_eps = Vec::new();
            let mut slice_ports: Option<Vec<Value>> = None;
            for p in pods
                .iter()
                .filter(|p| meta::namespace(p) == ns && sel.matches(p))
            {
                let ip = meta::str_at(p, "/status/podIP");
                if ip.is_empty()
                    || matches!(meta::str_at(p, "/status/phase"), "Succeeded" | "Failed")
                {
                    continue;
                }
                let terminating = p.pointer("/metadata/deletionTimestamp").is_some();
                let serving = pod_ready(p);
                let ready = publish || (serving && !terminating);
                let node = meta::str_at(p, "/spec/nodeName");
                let mut addr = json!({"ip": ip, "targetRef": {"kind": "Pod", "namespace": ns, "name": meta::name(p), "uid": meta::uid_of(p)}});
                if !node.is_empty() {
                    addr["nodeName"] = json!(node);
                }
                let hostname = meta::str_at(p, "/spec/hostname");
                if !hostname.is_empty() && meta::str_at(p, "/spec/subdomain") == name {
                    addr["hostname"] = json!(hostname);
                }
                let ports: Vec<Value> = svc_ports
                    .iter()
                    .filter_map(|sp| {
                        let port = resolve_port(sp, p)?;
                        let mut v = json!({"port": port, "protocol": sp.get("protocol").cloned().unwrap_or(json!("TCP"))});
                        if let Some(n) = sp.get("name").filter(|n| n.as_str().map(|s| !s.is_empty()).unwrap_or(false)) {
                            v["name"] = n.clone();
                        }
                        if let Some(ap) = sp.get("appProtocol") {
                            v["appProtocol"] = ap.clone();
                        }
                        Some(v)
                    })
                    .collect();
                if slice_ports.is_none() {
                    slice_ports = Some(ports.clone());
                }
                let mut ep = json!({"addresses": [ip], "conditions": {"ready": ready, "serving": publish || serving, "terminating": terminating},
                    "targetRef": addr["targetRef"].clone()});
                if !node.is_empty() {
                    ep["nodeName"] = json!(node);
                    if let Some(z) = zones.get(node).filter(|z| !z.is_empty()) {
                        ep["zone"] = json!(z);
                    }
                }
                if let Some(h) = addr.get("hostname") {
                    ep["hostname"] = h.clone();
                }
                slice_eps.push(ep);
                if terminating && !publish {
                    continue;
                }
                match groups.iter_mut().find(|g| g.0 == ports) {
                    Some(g) => {
                        if ready {
                            g.1.push(addr)
                        } else {
                            g.2.push(addr)
                        }
                    }
                    None => groups.push((
                        ports,
                        if ready { vec![addr.clone()] } else { vec![] },
                        if ready { vec![] } else { vec![addr] },
                    )),
                }
            }
            let subsets: Vec<Value> = groups
                .into_iter()
                .map(|(ports, ready, not_ready)| {
                    let mut s = json!({"ports": ports});
                    if !ready.is_empty() {
                        s["addresses"] = json!(ready);
                    }
                    if !not_ready.is_empty() {
                        s["notReadyAddresses"] = json!(not_ready);
                    }
                    s
                })
                .collect();
            let mut labels = svc
                .pointer("/metadata/labels")
                .cloned()
                .filter(Value::is_object)
                .unwrap_or(json!({}));
            labels["endpoints.kubernetes.io/managed-by"] = json!("endpoint-controller");
            match c.store.get("/endpoints", ns, name) {
                None => {
                    let mut ep = json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name, "namespace": ns, "labels": labels}});
                    if !subsets.is_empty() {
                        ep["subsets"] = json!(subsets);
                    }
                    log_err(
                        "endpoints",
                        "create endpoints",
                        c.create_internal("", "endpoints", ns, ep, "endpoint-controller"),
                    );
                }
                Some(_) => {
                    log_err(
                        "endpoints",
                        "update endpoints",
                        c.modify(
                            "",
                            "endpoints",
                            ns,
                            name,
                            None,
                            "endpoint-controller",
                            |e| {
                                let want = if subsets.is_empty() {
                                    None
                                } else {
                                    Some(json!(subsets))
                                };
                                if e.get("subsets").cloned() == want
                                    && e.pointer("/metadata/labels") == Some(&labels)
                                {
                                    return false;
                                }
                                match &want {
                                    Some(s) => e["subsets"] = s.clone(),
                                    None => {
                                        if let Some(m) = e.as_object_mut() {
                                            m.remove("subsets");
                                        }
                                    }
                                }
                                e["metadata"]["labels"] = labels.clone();
                                true
                            },
                        ),
                    );
                }
            }
            let ports = slice_ports.unwrap_or_default();
            let (slices, _) = c.store.list("discovery.k8s.io/endpointslices", Some(ns));
            let existing = slices.iter().find(|s| {
                meta::str_at(s, "/metadata/labels/kubernetes.io~1service-name") == name
                    && meta::str_at(
                        s,
                        "/metadata/labels/endpointslice.kubernetes.io~1managed-by",
                    ) == MANAGED_BY
            });
            match existing {
                None => {
                    let mut slice_labels = svc
                        .pointer("/metadata/labels")
                        .cloned()
                        .filter(Value::is_object)
                        .unwrap_or(json!({}));
                    slice_labels["kubernetes.io/service-name"] = json!(name);
                    slice_labels["endpointslice.kubernetes.io/managed-by"] = json!(MANAGED_BY);
                    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                        "metadata": {"generateName": format!("{name}-"), "namespace": ns, "labels": slice_labels,
                            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name, "uid": meta::uid_of(svc), "controller": true, "blockOwnerDeletion": true}]},
                        "addressType": "IPv4", "endpoints": slice_eps, "ports": ports});
                    log_err(
                        "endpoints",
                        "create endpointslice",
                        c.create_internal(
                            "discovery.k8s.io",
                            "endpointslices",
                            ns,
                            slice,
                            "endpointslice-controller",
                        ),
                    );
                }
                Some(s) => {
                    let sname = meta::name(s).to_string();
                    log_err(
                        "endpoints",
                        "update endpointslice",
                        c.modify(
                            "discovery.k8s.io",
                            "endpointslices",
                            ns,
                            &sname,
                            None,
                            "endpointslice-controller",
                            |o| {
                                if o.get("endpoints") == Some(&json!(slice_eps))
                                    && o.get("ports") == Some(&json!(ports))
                                {
                                    return false;
                                }
                                o["endpoints"] = json!(slice_eps);
                                o["ports"] = json!(ports);
                                true
                            },
                        ),
                    );
                }
            }
        }
        // Endpoints this controller made for Services that are gone or lost their selector.
        let (eps, _) = c.store.list("/endpoints", None);
        for e in eps.iter().filter(|e| {
            meta::str_at(e, "/metadata/labels/endpoints.kubernetes.io~1managed-by")
                == "endpoint-controller"
        }) {
            if !wanted.contains(&(meta::namespace(e).to_string(), meta::name(e).to_string())) {
                log_err(
                    "endpoints",
                    "delete endpoints",
                    c.delete_internal("", "endpoints", meta::namespace(e), meta::name(e), None),
                );
            }
        }
    }
}
