//! Server-side printing: `meta.k8s.io/v1` Tables for `kubectl get` (`Accept: ...;as=Table`).

use super::meta;
use super::registry::ResourceInfo;
use serde_json::{json, Value};

fn col(name: &str, ty: &str, priority: i64, format: &str) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": name, "priority": priority})
}

fn columns(r: &ResourceInfo) -> Vec<Value> {
    let name = col("Name", "string", 0, "name");
    let age = col("Age", "string", 0, "");
    match (r.group.as_str(), r.kind.as_str()) {
        ("", "Pod") => vec![
            name,
            col("Ready", "string", 0, ""),
            col("Status", "string", 0, ""),
            col("Restarts", "string", 0, ""),
            age,
            col("IP", "string", 1, ""),
            col("Node", "string", 1, ""),
            col("Nominated Node", "string", 1, ""),
            col("Readiness Gates", "string", 1, ""),
        ],
        ("apps", "Deployment") => vec![
            name,
            col("Ready", "string", 0, ""),
            col("Up-to-date", "integer", 0, ""),
            col("Available", "integer", 0, ""),
            age,
            col("Containers", "string", 1, ""),
            col("Images", "string", 1, ""),
            col("Selector", "string", 1, ""),
        ],
        ("apps", "DaemonSet") => vec![
            name,
            col("Desired", "integer", 0, ""),
            col("Current", "integer", 0, ""),
            col("Ready", "integer", 0, ""),
            col("Up-to-date", "integer", 0, ""),
            col("Available", "integer", 0, ""),
            col("Node Selector", "string", 0, ""),
            age,
            col("Containers", "string", 1, ""),
            col("Images", "string", 1, ""),
            col("Selector", "string", 1, ""),
        ],
        ("apps", "StatefulSet") => vec![
            name,
            col("Ready", "string", 0, ""),
            age,
            col("Containers", "string", 1, ""),
            col("Images", "string", 1, ""),
        ],
        ("apps", "ReplicaSet") => vec![
            name,
            col("Desired", "integer", 0, ""),
            col("Current", "integer", 0, ""),
            col("Ready", "integer", 0, ""),
            age,
            col("Containers", "string", 1, ""),
            col("Images", "string", 1, ""),
            col("Selector", "string", 1, ""),
        ],
        ("apiregistration.k8s.io", "APIService") => vec![
            name,
            col("Service", "string", 0, ""),
            col("Available", "string", 0, ""),
            age,
        ],
        ("batch", "Job") => vec![
            name,
            col("Status", "string", 0, ""),
            col("Completions", "string", 0, ""),
            col("Duration", "string", 0, ""),
            age,
            col("Containers", "string", 1, ""),
            col("Images", "string", 1, ""),
            col("Selector", "string", 1, ""),
        ],
        ("", "Service") => vec![
            name,
            col("Type", "string", 0, ""),
            col("Cluster-IP", "string", 0, ""),
            col("External-IP", "string", 0, ""),
            col("Port(s)", "string", 0, ""),
            age,
            col("Selector", "string", 1, ""),
        ],
        ("", "Node") => vec![
            name,
            col("Status", "string", 0, ""),
            col("Roles", "string", 0, ""),
            age,
            col("Version", "string", 0, ""),
            col("Internal-IP", "string", 1, ""),
        ],
        ("", "Namespace") => vec![name, col("Status", "string", 0, ""), age],
        ("coordination.k8s.io", "Lease") => vec![name, col("Holder", "string", 0, ""), age],
        ("", "Event") | ("events.k8s.io", "Event") => vec![
            col("Last Seen", "string", 0, ""),
            col("Type", "string", 0, ""),
            col("Reason", "string", 0, ""),
            col("Object", "string", 0, ""),
            col("Message", "string", 0, ""),
        ],
        ("", "ConfigMap") => vec![name, col("Data", "integer", 0, ""), age],
        ("", "Secret") => vec![
            name,
            col("Type", "string", 0, ""),
            col("Data", "integer", 0, ""),
            age,
        ],
        ("", "Endpoints") => vec![name, col("Endpoints", "string", 0, ""), age],
        ("", "ServiceAccount") => vec![name, col("Secrets", "integer", 0, ""), age],
        ("", "PersistentVolumeClaim") => vec![
            name,
            col("Status", "string", 0, ""),
            col("Volume", "string", 0, ""),
            col("Capacity", "string", 0, ""),
            col("Access Modes", "string", 0, ""),
            col("StorageClass", "string", 0, ""),
            age,
        ],
        ("discovery.k8s.io", "EndpointSlice") => vec![
            name,
            col("AddressType", "string", 0, ""),
            col("Ports", "string", 0, ""),
            col("Endpoints", "string", 0, ""),
            age,
        ],
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            vec![name, col("Created At", "date", 0, "")]
        }
        _ => match &r.crd {
            Some(c) if !c.printer_columns.is_empty() => {
                let mut v = vec![name];
                for pc in &c.printer_columns {
                    let ty = pc.get("type").and_then(Value::as_str).unwrap_or("string");
                    let mut d = col(
                        meta::str_at(pc, "/name"),
                        if ty == "date" { "string" } else { ty },
                        pc.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        meta::str_at(pc, "/format"),
                    );
                    d["description"] = json!(pc
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default());
                    v.push(d);
                }
                v
            }
            _ => vec![name, age],
        },
    }
}

/// `Local`, or the `namespace/name` of the Service an APIService proxies to.
fn api_service_backend(obj: &Value) -> String {
    match obj.pointer("/spec/service") {
        Some(svc) if svc.is_object() => format!("{}/{}", s(svc, "/namespace"), s(svc, "/name")),
        _ => "Local".into(),
    }
}

/// The `Available` condition's status, with its reason when not `True`.
fn api_service_available(obj: &Value) -> String {
    let available = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| s(c, "/type") == "Available"));
    match available {
        Some(c) if s(c, "/status") == "True" => "True".into(),
        Some(c) => format!("{} ({})", s(c, "/status"), s(c, "/reason")),
        None => "Unknown".into(),
    }
}

fn s(obj: &Value, p: &str) -> String {
    meta::str_at(obj, p).to_string()
}
fn n(obj: &Value, p: &str) -> i64 {
    obj.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}
fn arr<'a>(obj: &'a Value, p: &str) -> Vec<&'a Value> {
    obj.pointer(p)
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}
fn or_none(v: String) -> String {
    if v.is_empty() {
        "<none>".into()
    } else {
        v
    }
}

fn containers_images(obj: &Value, p: &str) -> (String, String) {
    let cs = arr(obj, p);
    (
        cs.iter()
            .map(|c| s(c, "/name"))
            .collect::<Vec<_>>()
            .join(","),
        cs.iter()
            .map(|c| s(c, "/image"))
            .collect::<Vec<_>>()
            .join(","),
    )
}

fn pod_status(obj: &Value) -> String {
    if obj.pointer("/metadata/deletionTimestamp").is_some() {
        return "Terminating".into();
    }
    for cs in arr(obj, "/status/containerStatuses") {
        if let Some(r) = cs.pointer("/state/waiting/reason").and_then(Value::as_str) {
            return r.into();
        }
        if let Some(r) = cs
            .pointer("/state/terminated/reason")
            .and_then(Value::as_str)
        {
            return r.into();
        }
    }
    let reason = s(obj, "/status/reason");
    if !reason.is_empty() {
        return reason;
    }
    s(obj, "/status/phase")
}

fn condition_true(obj: &Value, ty: &str) -> bool {
    arr(obj, "/status/conditions")
        .iter()
        .any(|c| s(c, "/type") == ty && s(c, "/status") == "True")
}

/// The STATUS column of `kubectl get jobs` (printJob): the first that holds of Complete,
/// Failed, Terminating, Suspended, FailureTarget, SuccessCriteriaMet, else Running.
fn job_status(obj: &Value) -> &'static str {
    if condition_true(obj, "Complete") {
        "Complete"
    } else if condition_true(obj, "Failed") {
        "Failed"
    } else if obj.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating"
    } else if condition_true(obj, "Suspended") {
        "Suspended"
    } else if condition_true(obj, "FailureTarget") {
        "FailureTarget"
    } else if condition_true(obj, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    }
}

/// The COMPLETIONS column: `succeeded/completions`, or `n/1 (of parallelism)` without
/// completions.
fn job_completions(obj: &Value) -> String {
    let succeeded = n(obj, "/status/succeeded");
    match obj.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match n(obj, "/spec/parallelism") {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    }
}

/// The DURATION column: from startTime to completionTime, or to now while running.
fn job_duration(obj: &Value) -> String {
    let at = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .and_then(meta::parse_time)
    };
    match (at("/status/startTime"), at("/status/completionTime")) {
        (None, _) => String::new(),
        (Some(start), None) => meta::human_duration(meta::seconds_since(start)),
        (Some(start), Some(end)) => meta::human_duration(meta::seconds_between(start, end)),
    }
}

fn json_path(obj: &Value, path: &str) -> Value {
    // A subset of JSONPath: `.a.b`, `.a[0].b`, `.a[?(@.k=="v")].b`.
    let mut cur = vec![obj.clone()];
    let mut rest = path.trim_start_matches('.');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else {
                return Value::Null;
            };
            let inner = &r[..end];
            rest = r[end + 1..].trim_start_matches('.');
            let mut next = Vec::new();
            for c in &cur {
                let Some(items) = c.as_array() else { continue };
                if let Some(f) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                    let (k, v) = f.split_once("==").unwrap_or((f, ""));
                    let v = v.trim_matches(|ch| ch == '"' || ch == '\'');
                    next.extend(
                        items
                            .iter()
                            .filter(|i| i.get(k).and_then(Value::as_str) == Some(v))
                            .cloned(),
                    );
                } else if let Ok(i) = inner.parse::<usize>() {
                    next.extend(items.get(i).cloned());
                } else if inner == "*" {
                    next.extend(items.iter().cloned());
                }
            }
            cur = next;
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            let key = &rest[..end];
            rest = rest[end..].trim_start_matches('.');
            cur = cur.iter().filter_map(|c| c.get(key).cloned()).collect();
        }
    }
    match cur.len() {
        0 => Value::Null,
        1 => cur.remove(0),
        _ => Value::Array(cur),
    }
}

fn cells(r: &ResourceInfo, obj: &Value) -> Vec<Value> {
    let name = json!(meta::name(obj));
    let age = json!(meta::age(obj));
    match (r.group.as_str(), r.kind.as_str()) {
        ("", "Pod") => {
            let statuses = arr(obj, "/status/containerStatuses");
            let total = arr(obj, "/spec/containers").len();
            let ready = statuses
                .iter()
                .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
                .count();
            let restarts: i64 = statuses.iter().map(|c| n(c, "/restartCount")).sum();
            vec![
                name,
                json!(format!("{ready}/{total}")),
                json!(pod_status(obj)),
                json!(restarts.to_string()),
                age,
                json!(or_none(s(obj, "/status/podIP"))),
                json!(or_none(s(obj, "/spec/nodeName"))),
                json!("<none>"),
                json!("<none>"),
            ]
        }
        ("apps", "Deployment") => {
            let (c, i) = containers_images(obj, "/spec/template/spec/containers");
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    n(obj, "/status/readyReplicas"),
                    n(obj, "/spec/replicas")
                )),
                json!(n(obj, "/status/updatedReplicas")),
                json!(n(obj, "/status/availableReplicas")),
                age,
                json!(c),
                json!(i),
                json!(super::ops::selector_string(
                    obj.pointer("/spec/selector").unwrap_or(&Value::Null)
                )),
            ]
        }
        ("apps", "DaemonSet") => {
            let (c, i) = containers_images(obj, "/spec/template/spec/containers");
            let mut selector: Vec<String> = obj
                .pointer("/spec/template/spec/nodeSelector")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect()
                })
                .unwrap_or_default();
            selector.sort();
            vec![
                name,
                json!(n(obj, "/status/desiredNumberScheduled")),
                json!(n(obj, "/status/currentNumberScheduled")),
                json!(n(obj, "/status/numberReady")),
                json!(n(obj, "/status/updatedNumberScheduled")),
                json!(n(obj, "/status/numberAvailable")),
                json!(if selector.is_empty() {
                    "<none>".to_string()
                } else {
                    selector.join(",")
                }),
                age,
                json!(c),
                json!(i),
                json!(super::ops::selector_string(
                    obj.pointer("/spec/selector").unwrap_or(&Value::Null)
                )),
            ]
        }
        ("apps", "StatefulSet") => {
            let (c, i) = containers_images(obj, "/spec/template/spec/containers");
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    n(obj, "/status/readyReplicas"),
                    n(obj, "/spec/replicas")
                )),
                age,
                json!(c),
                json!(i),
            ]
        }
        ("apps", "ReplicaSet") => {
            let (c, i) = containers_images(obj, "/spec/template/spec/containers");
            vec![
                name,
                json!(n(obj, "/spec/replicas")),
                json!(n(obj, "/status/replicas")),
                json!(n(obj, "/status/readyReplicas")),
                age,
                json!(c),
                json!(i),
                json!(super::ops::selector_string(
                    obj.pointer("/spec/selector").unwrap_or(&Value::Null)
                )),
            ]
        }
        ("apiregistration.k8s.io", "APIService") => vec![
            name,
            json!(api_service_backend(obj)),
            json!(api_service_available(obj)),
            age,
        ],
        ("batch", "Job") => {
            let (c, i) = containers_images(obj, "/spec/template/spec/containers");
            vec![
                name,
                json!(job_status(obj)),
                json!(job_completions(obj)),
                json!(job_duration(obj)),
                age,
                json!(c),
                json!(i),
                json!(super::ops::selector_string(
                    obj.pointer("/spec/selector").unwrap_or(&Value::Null)
                )),
            ]
        }
        ("", "Service") => {
            let ports: Vec<String> = arr(obj, "/spec/ports")
                .iter()
                .map(|p| {
                    let np = n(p, "/nodePort");
                    if np > 0 {
                        format!("{}:{}/{}", n(p, "/port"), np, s(p, "/protocol"))
                    } else {
                        format!("{}/{}", n(p, "/port"), s(p, "/protocol"))
                    }
                })
                .collect();
            let sel: Vec<String> = obj
                .pointer("/spec/selector")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect()
                })
                .unwrap_or_default();
            vec![
                name,
                json!(s(obj, "/spec/type")),
                json!(or_none(s(obj, "/spec/clusterIP"))),
                json!("<none>"),
                json!(or_none(ports.join(","))),
                age,
                json!(or_none(sel.join(","))),
            ]
        }
        ("", "Node") => {
            let ready = arr(obj, "/status/conditions")
                .iter()
                .find(|c| s(c, "/type") == "Ready")
                .map(|c| s(c, "/status") == "True")
                .unwrap_or(false);
            let mut status = if ready {
                "Ready".to_string()
            } else {
                "NotReady".to_string()
            };
            if obj.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
                status.push_str(",SchedulingDisabled");
            }
            let ip = arr(obj, "/status/addresses")
                .iter()
                .find(|a| s(a, "/type") == "InternalIP")
                .map(|a| s(a, "/address"))
                .unwrap_or_default();
            vec![
                name,
                json!(status),
                json!("<none>"),
                age,
                json!(s(obj, "/status/nodeInfo/kubeletVersion")),
                json!(or_none(ip)),
            ]
        }
        ("", "Namespace") => vec![name, json!(s(obj, "/status/phase")), age],
        ("coordination.k8s.io", "Lease") => vec![name, json!(s(obj, "/spec/holderIdentity")), age],
        ("", "Event") | ("events.k8s.io", "Event") => {
            let last = [
                "/lastTimestamp",
                "/eventTime",
                "/deprecatedLastTimestamp",
                "/metadata/creationTimestamp",
            ]
            .iter()
            .find_map(|p| {
                obj.pointer(p)
                    .and_then(Value::as_str)
                    .and_then(meta::parse_time)
            })
            .map(|t| meta::human_duration(meta::seconds_since(t)))
            .unwrap_or_else(|| "<unknown>".into());
            let io = if obj.get("regarding").is_some() {
                "/regarding"
            } else {
                "/involvedObject"
            };
            let msg = if obj.get("note").is_some() {
                s(obj, "/note")
            } else {
                s(obj, "/message")
            };
            vec![
                json!(last),
                json!(s(obj, "/type")),
                json!(s(obj, "/reason")),
                json!(format!(
                    "{}/{}",
                    s(obj, &format!("{io}/kind")).to_lowercase(),
                    s(obj, &format!("{io}/name"))
                )),
                json!(msg),
            ]
        }
        ("", "ConfigMap") => {
            let count = obj
                .get("data")
                .and_then(Value::as_object)
                .map(|m| m.len())
                .unwrap_or(0)
                + obj
                    .get("binaryData")
                    .and_then(Value::as_object)
                    .map(|m| m.len())
                    .unwrap_or(0);
            vec![name, json!(count), age]
        }
        ("", "Secret") => vec![
            name,
            json!(s(obj, "/type")),
            json!(obj
                .get("data")
                .and_then(Value::as_object)
                .map(|m| m.len())
                .unwrap_or(0)),
            age,
        ],
        ("", "Endpoints") => {
            let mut eps = Vec::new();
            for sub in arr(obj, "/subsets") {
                for a in arr(sub, "/addresses") {
                    for p in arr(sub, "/ports") {
                        eps.push(format!("{}:{}", s(a, "/ip"), n(p, "/port")));
                    }
                }
            }
            vec![name, json!(or_none(eps.join(","))), age]
        }
        ("", "ServiceAccount") => vec![name, json!(arr(obj, "/secrets").len()), age],
        ("", "PersistentVolumeClaim") => vec![
            name,
            json!(s(obj, "/status/phase")),
            json!(s(obj, "/spec/volumeName")),
            json!(s(obj, "/status/capacity/storage")),
            json!(arr(obj, "/spec/accessModes")
                .iter()
                .filter_map(|m| m.as_str())
                .map(|m| match m {
                    "ReadWriteOnce" => "RWO",
                    "ReadOnlyMany" => "ROX",
                    "ReadWriteMany" => "RWX",
                    o => o,
                })
                .collect::<Vec<_>>()
                .join(",")),
            json!(s(obj, "/spec/storageClassName")),
            age,
        ],
        ("discovery.k8s.io", "EndpointSlice") => {
            let ports: Vec<String> = arr(obj, "/ports")
                .iter()
                .map(|p| n(p, "/port").to_string())
                .collect();
            let eps: Vec<String> = arr(obj, "/endpoints")
                .iter()
                .flat_map(|e| {
                    arr(e, "/addresses")
                        .into_iter()
                        .filter_map(|a| a.as_str().map(String::from))
                })
                .collect();
            vec![
                name,
                json!(s(obj, "/addressType")),
                json!(or_none(ports.join(","))),
                json!(or_none(eps.join(","))),
                age,
            ]
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            vec![name, json!(s(obj, "/metadata/creationTimestamp"))]
        }
        _ => match &r.crd {
            Some(c) if !c.printer_columns.is_empty() => {
                let mut v = vec![name];
                for pc in &c.printer_columns {
                    let val = json_path(obj, meta::str_at(pc, "/jsonPath"));
                    let cell = match (pc.get("type").and_then(Value::as_str), &val) {
                        (Some("date"), Value::String(t)) => meta::parse_time(t)
                            .map(|t| json!(meta::human_duration(meta::seconds_since(t))))
                            .unwrap_or(Value::Null),
                        (_, Value::Array(a)) => json!(a
                            .iter()
                            .map(|x| x
                                .as_str()
                                .map(String::from)
                                .unwrap_or_else(|| x.to_string()))
                            .collect::<Vec<_>>()
                            .join(",")),
                        _ => val,
                    };
                    v.push(cell);
                }
                v
            }
            _ => vec![name, age],
        },
    }
}

/// `includeObject` of a Table request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object in rows.
    None,
    /// PartialObjectMetadata (the default).
    Metadata,
    /// The full object.
    Object,
}

fn row(r: &ResourceInfo, obj: &Value, include: IncludeObject) -> Value {
    let object = match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Metadata => {
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
        }
        IncludeObject::Object => obj.clone(),
    };
    json!({"cells": cells(r, obj), "object": object})
}

/// A Table of objects.
pub fn table(
    r: &ResourceInfo,
    objs: &[Value],
    rv: &str,
    cont: Option<&str>,
    include: IncludeObject,
    with_columns: bool,
) -> Value {
    let mut metadata = json!({"resourceVersion": rv});
    if let Some(c) = cont {
        metadata["continue"] = json!(c);
    }
    let mut t = json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata,
        "rows": objs.iter().map(|o| row(r, o, include)).collect::<Vec<_>>()});
    if with_columns {
        t["columnDefinitions"] = json!(columns(r));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_printer_columns_follow_json_paths() {
        let obj = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}], "sites": [{"name": "iad"}]}});
        assert_eq!(
            json_path(&obj, ".status.conditions[?(@.type==\"Ready\")].status"),
            json!("True")
        );
        assert_eq!(json_path(&obj, ".status.sites[0].name"), json!("iad"));
        assert_eq!(json_path(&obj, ".spec.missing"), Value::Null);
    }
}
