//! Server-side printing: `meta.k8s.io/v1` Tables for `kubectl get` (`Accept: ...;as=Table`).
//!
//! Each built-in kind's columns are one row of [`KIND_TABLES`]: a column's name, type,
//! priority and the [`Cell`] rule that computes it from an object; [`columns`] and [`cells`]
//! read the same rows, so a column's header and its values cannot drift apart. Custom
//! resources print their CRD's `additionalPrinterColumns`.

use super::meta;
use super::ops::selector_string;
use super::registry::ResourceInfo;
use serde_json::{json, Value};

/// The type a column declares (`columnDefinitions[].type`).
#[derive(Clone, Copy)]
enum ColumnType {
    String,
    Integer,
    Date,
}

impl ColumnType {
    fn as_str(self) -> &'static str {
        match self {
            ColumnType::String => "string",
            ColumnType::Integer => "integer",
            ColumnType::Date => "date",
        }
    }
}

/// How a column's cell is computed from an object.
#[derive(Clone, Copy)]
enum Cell {
    /// `metadata.name`.
    Name,
    /// The age since `metadata.creationTimestamp`.
    Age,
    /// The string at a JSON pointer (empty when absent).
    Text(&'static str),
    /// The string at a JSON pointer, `<none>` when empty.
    TextOrNone(&'static str),
    /// The integer at a JSON pointer (0 when absent).
    Integer(&'static str),
    /// `a/b` of the integers at two JSON pointers (`ready/replicas`).
    Ratio(&'static str, &'static str),
    /// The length of the array at a JSON pointer.
    Length(&'static str),
    /// Always this text.
    Fixed(&'static str),
    /// A rule of its own.
    Computed(fn(&Value) -> Value),
}

/// One column: its header, type and priority (1: shown by `-o wide` only), and its cell.
struct Column {
    name: &'static str,
    column_type: ColumnType,
    priority: i64,
    cell: Cell,
}

const fn column(name: &'static str, column_type: ColumnType, priority: i64, cell: Cell) -> Column {
    Column {
        name,
        column_type,
        priority,
        cell,
    }
}

/// The columns of one or more kinds (`(group, kind)`).
struct KindTable {
    kinds: &'static [(&'static str, &'static str)],
    columns: &'static [Column],
}

use Cell::{Age, Computed, Fixed, Integer, Length, Name, Ratio, Text, TextOrNone};
use ColumnType::{Date, Integer as Int, String as Str};

const NAME: Column = column("Name", Str, 0, Name);
const AGE: Column = column("Age", Str, 0, Age);
const CONTAINERS: Column = column("Containers", Str, 1, Computed(template_containers));
const IMAGES: Column = column("Images", Str, 1, Computed(template_images));
const SELECTOR: Column = column("Selector", Str, 1, Computed(label_selector));

/// The columns `kubectl get` prints for each built-in kind (kube-apiserver's printers).
#[rustfmt::skip]
static KIND_TABLES: &[KindTable] = &[
    KindTable { kinds: &[("", "Pod")], columns: &[
        NAME,
        column("Ready", Str, 0, Computed(pod_ready)),
        column("Status", Str, 0, Computed(pod_status)),
        column("Restarts", Str, 0, Computed(pod_restarts)),
        AGE,
        column("IP", Str, 1, TextOrNone("/status/podIP")),
        column("Node", Str, 1, TextOrNone("/spec/nodeName")),
        column("Nominated Node", Str, 1, Fixed("<none>")),
        column("Readiness Gates", Str, 1, Fixed("<none>")),
    ]},
    KindTable { kinds: &[("apps", "Deployment")], columns: &[
        NAME,
        column("Ready", Str, 0, Ratio("/status/readyReplicas", "/spec/replicas")),
        column("Up-to-date", Int, 0, Integer("/status/updatedReplicas")),
        column("Available", Int, 0, Integer("/status/availableReplicas")),
        AGE, CONTAINERS, IMAGES, SELECTOR,
    ]},
    KindTable { kinds: &[("apps", "DaemonSet")], columns: &[
        NAME,
        column("Desired", Int, 0, Integer("/status/desiredNumberScheduled")),
        column("Current", Int, 0, Integer("/status/currentNumberScheduled")),
        column("Ready", Int, 0, Integer("/status/numberReady")),
        column("Up-to-date", Int, 0, Integer("/status/updatedNumberScheduled")),
        column("Available", Int, 0, Integer("/status/numberAvailable")),
        column("Node Selector", Str, 0, Computed(daemon_set_node_selector)),
        AGE, CONTAINERS, IMAGES, SELECTOR,
    ]},
    KindTable { kinds: &[("apps", "StatefulSet")], columns: &[
        NAME,
        column("Ready", Str, 0, Ratio("/status/readyReplicas", "/spec/replicas")),
        AGE, CONTAINERS, IMAGES,
    ]},
    KindTable { kinds: &[("apps", "ReplicaSet")], columns: &[
        NAME,
        column("Desired", Int, 0, Integer("/spec/replicas")),
        column("Current", Int, 0, Integer("/status/replicas")),
        column("Ready", Int, 0, Integer("/status/readyReplicas")),
        AGE, CONTAINERS, IMAGES, SELECTOR,
    ]},
    KindTable { kinds: &[("apiregistration.k8s.io", "APIService")], columns: &[
        NAME,
        column("Service", Str, 0, Computed(api_service_backend)),
        column("Available", Str, 0, Computed(api_service_available)),
        AGE,
    ]},
    KindTable { kinds: &[("batch", "Job")], columns: &[
        NAME,
        column("Status", Str, 0, Computed(job_status)),
        column("Completions", Str, 0, Computed(job_completions)),
        column("Duration", Str, 0, Computed(job_duration)),
        AGE, CONTAINERS, IMAGES, SELECTOR,
    ]},
    KindTable { kinds: &[("", "Service")], columns: &[
        NAME,
        column("Type", Str, 0, Text("/spec/type")),
        column("Cluster-IP", Str, 0, TextOrNone("/spec/clusterIP")),
        column("External-IP", Str, 0, Fixed("<none>")),
        column("Port(s)", Str, 0, Computed(service_ports)),
        AGE,
        column("Selector", Str, 1, Computed(service_selector)),
    ]},
    KindTable { kinds: &[("", "Node")], columns: &[
        NAME,
        column("Status", Str, 0, Computed(node_status)),
        column("Roles", Str, 0, Fixed("<none>")),
        AGE,
        column("Version", Str, 0, Text("/status/nodeInfo/kubeletVersion")),
        column("Internal-IP", Str, 1, Computed(node_internal_ip)),
    ]},
    KindTable { kinds: &[("", "Namespace")], columns: &[
        NAME, column("Status", Str, 0, Text("/status/phase")), AGE,
    ]},
    KindTable { kinds: &[("coordination.k8s.io", "Lease")], columns: &[
        NAME, column("Holder", Str, 0, Text("/spec/holderIdentity")), AGE,
    ]},
    KindTable { kinds: &[("", "Event"), ("events.k8s.io", "Event")], columns: &[
        column("Last Seen", Str, 0, Computed(event_last_seen)),
        column("Type", Str, 0, Text("/type")),
        column("Reason", Str, 0, Text("/reason")),
        column("Object", Str, 0, Computed(event_object)),
        column("Message", Str, 0, Computed(event_message)),
    ]},
    KindTable { kinds: &[("", "ConfigMap")], columns: &[
        NAME, column("Data", Int, 0, Computed(config_map_data)), AGE,
    ]},
    KindTable { kinds: &[("", "Secret")], columns: &[
        NAME,
        column("Type", Str, 0, Text("/type")),
        column("Data", Int, 0, Computed(secret_data)),
        AGE,
    ]},
    KindTable { kinds: &[("", "Endpoints")], columns: &[
        NAME, column("Endpoints", Str, 0, Computed(endpoints_addresses)), AGE,
    ]},
    KindTable { kinds: &[("", "ServiceAccount")], columns: &[
        NAME, column("Secrets", Int, 0, Length("/secrets")), AGE,
    ]},
    KindTable { kinds: &[("", "PersistentVolumeClaim")], columns: &[
        NAME,
        column("Status", Str, 0, Text("/status/phase")),
        column("Volume", Str, 0, Text("/spec/volumeName")),
        column("Capacity", Str, 0, Text("/status/capacity/storage")),
        column("Access Modes", Str, 0, Computed(claim_access_modes)),
        column("StorageClass", Str, 0, Text("/spec/storageClassName")),
        AGE,
    ]},
    KindTable { kinds: &[("discovery.k8s.io", "EndpointSlice")], columns: &[
        NAME,
        column("AddressType", Str, 0, Text("/addressType")),
        column("Ports", Str, 0, Computed(endpoint_slice_ports)),
        column("Endpoints", Str, 0, Computed(endpoint_slice_addresses)),
        AGE,
    ]},
    KindTable { kinds: &[("apiextensions.k8s.io", "CustomResourceDefinition")], columns: &[
        NAME, column("Created At", Date, 0, Text("/metadata/creationTimestamp")),
    ]},
];

/// The columns of a kind without a row in [`KIND_TABLES`] nor printer columns.
static DEFAULT_COLUMNS: &[Column] = &[NAME, AGE];

/// The built-in columns of `resource`'s kind; `None` for a custom resource.
fn kind_columns(resource: &ResourceInfo) -> Option<&'static [Column]> {
    let kind = (resource.group.as_str(), resource.kind.as_str());
    KIND_TABLES
        .iter()
        .find(|table| table.kinds.contains(&kind))
        .map(|table| table.columns)
}

/// The `additionalPrinterColumns` of a custom resource's CRD, if it has any.
fn printer_columns(resource: &ResourceInfo) -> Option<&[Value]> {
    match &resource.crd {
        Some(crd) if !crd.printer_columns.is_empty() => Some(&crd.printer_columns),
        _ => None,
    }
}

fn column_definition(name: &str, column_type: &str, priority: i64, format: &str) -> Value {
    json!({"name": name, "type": column_type, "format": format, "description": name, "priority": priority})
}

fn columns(resource: &ResourceInfo) -> Vec<Value> {
    let definition = |column: &Column| {
        let format = if matches!(column.cell, Name) {
            "name"
        } else {
            ""
        };
        column_definition(
            column.name,
            column.column_type.as_str(),
            column.priority,
            format,
        )
    };
    if let Some(columns) = kind_columns(resource) {
        return columns.iter().map(definition).collect();
    }
    let Some(printer_columns) = printer_columns(resource) else {
        return DEFAULT_COLUMNS.iter().map(definition).collect();
    };
    let mut definitions = vec![definition(&NAME)];
    for printer_column in printer_columns {
        let column_type = printer_column
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("string");
        let mut definition = column_definition(
            meta::str_at(printer_column, "/name"),
            if column_type == "date" {
                "string"
            } else {
                column_type
            },
            printer_column
                .get("priority")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            meta::str_at(printer_column, "/format"),
        );
        definition["description"] = json!(printer_column
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default());
        definitions.push(definition);
    }
    definitions
}

fn cell(rule: Cell, object: &Value) -> Value {
    match rule {
        Name => json!(meta::name(object)),
        Age => json!(meta::age(object)),
        Text(pointer) => json!(text(object, pointer)),
        TextOrNone(pointer) => json!(or_none(text(object, pointer))),
        Integer(pointer) => json!(integer(object, pointer)),
        Ratio(numerator, denominator) => json!(format!(
            "{}/{}",
            integer(object, numerator),
            integer(object, denominator)
        )),
        Length(pointer) => json!(array(object, pointer).len()),
        Fixed(text) => json!(text),
        Computed(rule) => rule(object),
    }
}

fn cells(resource: &ResourceInfo, object: &Value) -> Vec<Value> {
    if let Some(columns) = kind_columns(resource) {
        return columns
            .iter()
            .map(|column| cell(column.cell, object))
            .collect();
    }
    let Some(printer_columns) = printer_columns(resource) else {
        return DEFAULT_COLUMNS
            .iter()
            .map(|column| cell(column.cell, object))
            .collect();
    };
    let mut row = vec![cell(Name, object)];
    for printer_column in printer_columns {
        row.push(printer_cell(printer_column, object));
    }
    row
}

/// The cell of one `additionalPrinterColumns` entry: its `jsonPath`'s value; a date as an
/// age, a list joined with commas.
fn printer_cell(printer_column: &Value, object: &Value) -> Value {
    let found = json_path(object, meta::str_at(printer_column, "/jsonPath"));
    match (printer_column.get("type").and_then(Value::as_str), &found) {
        (Some("date"), Value::String(time)) => meta::parse_time(time)
            .map(|time| json!(meta::human_duration(meta::seconds_since(time))))
            .unwrap_or(Value::Null),
        (_, Value::Array(items)) => json!(items
            .iter()
            .map(|item| item
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| item.to_string()))
            .collect::<Vec<_>>()
            .join(",")),
        _ => found,
    }
}

/// `Local`, or the `namespace/name` of the Service an APIService proxies to.
fn api_service_backend(object: &Value) -> Value {
    json!(match object.pointer("/spec/service") {
        Some(service) if service.is_object() => {
            format!("{}/{}", text(service, "/namespace"), text(service, "/name"))
        }
        _ => "Local".into(),
    })
}

/// The `Available` condition's status, with its reason when not `True`.
fn api_service_available(object: &Value) -> Value {
    let available = array(object, "/status/conditions")
        .into_iter()
        .find(|condition| text(condition, "/type") == "Available");
    json!(match available {
        Some(condition) if text(condition, "/status") == "True" => "True".into(),
        Some(condition) => format!(
            "{} ({})",
            text(condition, "/status"),
            text(condition, "/reason")
        ),
        None => "Unknown".into(),
    })
}

fn text(object: &Value, pointer: &str) -> String {
    meta::str_at(object, pointer).to_string()
}
fn integer(object: &Value, pointer: &str) -> i64 {
    object.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}
fn array<'a>(object: &'a Value, pointer: &str) -> Vec<&'a Value> {
    object
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(|items| items.iter().collect())
        .unwrap_or_default()
}
fn or_none(text: String) -> String {
    if text.is_empty() {
        "<none>".into()
    } else {
        text
    }
}
/// The `key=value` pairs of the string map at `pointer`, sorted, joined with commas.
fn key_values(object: &Value, pointer: &str) -> String {
    let mut pairs: Vec<String> = object
        .pointer(pointer)
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .map(|(key, value)| format!("{key}={}", value.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    pairs.sort();
    pairs.join(",")
}
/// The number of entries of the object at `key` (0 when absent).
fn entries(object: &Value, key: &str) -> usize {
    object
        .get(key)
        .and_then(Value::as_object)
        .map_or(0, |map| map.len())
}

/// A pod template's field `field` of each container, joined with commas.
fn template_container_fields(object: &Value, field: &str) -> Value {
    json!(array(object, "/spec/template/spec/containers")
        .iter()
        .map(|container| text(container, field))
        .collect::<Vec<_>>()
        .join(","))
}
fn template_containers(object: &Value) -> Value {
    template_container_fields(object, "/name")
}
fn template_images(object: &Value) -> Value {
    template_container_fields(object, "/image")
}
/// `spec.selector` (a label selector) as kubectl prints it.
fn label_selector(object: &Value) -> Value {
    json!(selector_string(
        object.pointer("/spec/selector").unwrap_or(&Value::Null)
    ))
}

fn pod_ready(object: &Value) -> Value {
    let total = array(object, "/spec/containers").len();
    let ready = array(object, "/status/containerStatuses")
        .iter()
        .filter(|status| status.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    json!(format!("{ready}/{total}"))
}

fn pod_restarts(object: &Value) -> Value {
    let restarts: i64 = array(object, "/status/containerStatuses")
        .iter()
        .map(|status| integer(status, "/restartCount"))
        .sum();
    json!(restarts.to_string())
}

fn pod_status(object: &Value) -> Value {
    json!(pod_status_text(object))
}

fn pod_status_text(object: &Value) -> String {
    if object.pointer("/metadata/deletionTimestamp").is_some() {
        return "Terminating".into();
    }
    for status in array(object, "/status/containerStatuses") {
        if let Some(reason) = status
            .pointer("/state/waiting/reason")
            .and_then(Value::as_str)
        {
            return reason.into();
        }
        if let Some(reason) = status
            .pointer("/state/terminated/reason")
            .and_then(Value::as_str)
        {
            return reason.into();
        }
    }
    let reason = text(object, "/status/reason");
    if !reason.is_empty() {
        return reason;
    }
    text(object, "/status/phase")
}

fn daemon_set_node_selector(object: &Value) -> Value {
    json!(or_none(key_values(
        object,
        "/spec/template/spec/nodeSelector"
    )))
}

fn condition_true(object: &Value, condition_type: &str) -> bool {
    array(object, "/status/conditions").iter().any(|condition| {
        text(condition, "/type") == condition_type && text(condition, "/status") == "True"
    })
}

/// The STATUS column of `kubectl get jobs` (printJob): the first that holds of Complete,
/// Failed, Terminating, Suspended, FailureTarget, SuccessCriteriaMet, else Running.
fn job_status(object: &Value) -> Value {
    json!(if condition_true(object, "Complete") {
        "Complete"
    } else if condition_true(object, "Failed") {
        "Failed"
    } else if object.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating"
    } else if condition_true(object, "Suspended") {
        "Suspended"
    } else if condition_true(object, "FailureTarget") {
        "FailureTarget"
    } else if condition_true(object, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    })
}

/// The COMPLETIONS column: `succeeded/completions`, or `n/1 (of parallelism)` without
/// completions.
fn job_completions(object: &Value) -> Value {
    let succeeded = integer(object, "/status/succeeded");
    json!(
        match object.pointer("/spec/completions").and_then(Value::as_i64) {
            Some(completions) => format!("{succeeded}/{completions}"),
            None => match integer(object, "/spec/parallelism") {
                parallelism if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
                _ => format!("{succeeded}/1"),
            },
        }
    )
}

/// The DURATION column: from startTime to completionTime, or to now while running.
fn job_duration(object: &Value) -> Value {
    let time_at = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .and_then(meta::parse_time)
    };
    json!(match (
        time_at("/status/startTime"),
        time_at("/status/completionTime")
    ) {
        (None, _) => String::new(),
        (Some(start), None) => meta::human_duration(meta::seconds_since(start)),
        (Some(start), Some(end)) => meta::human_duration(meta::seconds_between(start, end)),
    })
}

fn service_ports(object: &Value) -> Value {
    let ports: Vec<String> = array(object, "/spec/ports")
        .iter()
        .map(|port| {
            let node_port = integer(port, "/nodePort");
            if node_port > 0 {
                format!(
                    "{}:{}/{}",
                    integer(port, "/port"),
                    node_port,
                    text(port, "/protocol")
                )
            } else {
                format!("{}/{}", integer(port, "/port"), text(port, "/protocol"))
            }
        })
        .collect();
    json!(or_none(ports.join(",")))
}

/// A Service's `spec.selector` (a plain label map) as `key=value` pairs.
fn service_selector(object: &Value) -> Value {
    json!(or_none(key_values(object, "/spec/selector")))
}

fn node_status(object: &Value) -> Value {
    let ready = array(object, "/status/conditions")
        .iter()
        .find(|condition| text(condition, "/type") == "Ready")
        .map(|condition| text(condition, "/status") == "True")
        .unwrap_or(false);
    let mut status = if ready { "Ready" } else { "NotReady" }.to_string();
    if object
        .pointer("/spec/unschedulable")
        .and_then(Value::as_bool)
        == Some(true)
    {
        status.push_str(",SchedulingDisabled");
    }
    json!(status)
}

fn node_internal_ip(object: &Value) -> Value {
    let address = array(object, "/status/addresses")
        .iter()
        .find(|address| text(address, "/type") == "InternalIP")
        .map(|address| text(address, "/address"))
        .unwrap_or_default();
    json!(or_none(address))
}

/// LAST SEEN: the age of the newest of the Event's timestamps that is set.
fn event_last_seen(object: &Value) -> Value {
    let last = [
        "/lastTimestamp",
        "/eventTime",
        "/deprecatedLastTimestamp",
        "/metadata/creationTimestamp",
    ]
    .iter()
    .find_map(|pointer| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .and_then(meta::parse_time)
    })
    .map(|time| meta::human_duration(meta::seconds_since(time)))
    .unwrap_or_else(|| "<unknown>".into());
    json!(last)
}

/// OBJECT: `kind/name` of what the Event is about (`regarding` in `events.k8s.io/v1`,
/// `involvedObject` in `core/v1`).
fn event_object(object: &Value) -> Value {
    let regarding = if object.get("regarding").is_some() {
        "/regarding"
    } else {
        "/involvedObject"
    };
    json!(format!(
        "{}/{}",
        text(object, &format!("{regarding}/kind")).to_lowercase(),
        text(object, &format!("{regarding}/name"))
    ))
}

/// MESSAGE: `note` in `events.k8s.io/v1`, `message` in `core/v1`.
fn event_message(object: &Value) -> Value {
    json!(if object.get("note").is_some() {
        text(object, "/note")
    } else {
        text(object, "/message")
    })
}

fn config_map_data(object: &Value) -> Value {
    json!(entries(object, "data") + entries(object, "binaryData"))
}

fn secret_data(object: &Value) -> Value {
    json!(entries(object, "data"))
}

fn endpoints_addresses(object: &Value) -> Value {
    let mut endpoints = Vec::new();
    for subset in array(object, "/subsets") {
        for address in array(subset, "/addresses") {
            for port in array(subset, "/ports") {
                endpoints.push(format!(
                    "{}:{}",
                    text(address, "/ip"),
                    integer(port, "/port")
                ));
            }
        }
    }
    json!(or_none(endpoints.join(",")))
}

/// ACCESS MODES in kubectl's short form (RWO, ROX, RWX).
fn claim_access_modes(object: &Value) -> Value {
    json!(array(object, "/spec/accessModes")
        .iter()
        .filter_map(|mode| mode.as_str())
        .map(|mode| match mode {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(","))
}

fn endpoint_slice_ports(object: &Value) -> Value {
    let ports: Vec<String> = array(object, "/ports")
        .iter()
        .map(|port| integer(port, "/port").to_string())
        .collect();
    json!(or_none(ports.join(",")))
}

fn endpoint_slice_addresses(object: &Value) -> Value {
    let addresses: Vec<String> = array(object, "/endpoints")
        .iter()
        .flat_map(|endpoint| {
            array(endpoint, "/addresses")
                .into_iter()
                .filter_map(|address| address.as_str().map(String::from))
        })
        .collect();
    json!(or_none(addresses.join(",")))
}

/// A subset of JSONPath, as `additionalPrinterColumns` use it.
fn json_path(obj: &Value, path: &str) -> Value {
    // A subset of JSONPath: `.a.b`, `.a[0].b`, `.a[?(@.k=="v")].b`.
    let mut cur = vec![obj.clone()];
    let mut rest = path.trim_start_matches('.');
    while !rest.is_empty() {
        if let Some(reason) = rest.strip_prefix('[') {
            let Some(end) = reason.find(']') else {
                return Value::Null;
            };
            let inner = &reason[..end];
            rest = reason[end + 1..].trim_start_matches('.');
            let mut next = Vec::new();
            for c in &cur {
                let Some(items) = c.as_array() else { continue };
                if let Some(f) = inner
                    .strip_prefix("?(@.")
                    .and_then(|field| field.strip_suffix(')'))
                {
                    let (k, v) = f.split_once("==").unwrap_or((f, ""));
                    let value = v.trim_matches(|ch| ch == '"' || ch == '\'');
                    next.extend(
                        items
                            .iter()
                            .filter(|i| i.get(k).and_then(Value::as_str) == Some(value))
                            .cloned(),
                    );
                } else if let Ok(index) = inner.parse::<usize>() {
                    next.extend(items.get(index).cloned());
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

fn row(resource: &ResourceInfo, obj: &Value, include: IncludeObject) -> Value {
    let object = match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Metadata => {
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
        }
        IncludeObject::Object => obj.clone(),
    };
    json!({"cells": cells(resource, obj), "object": object})
}

/// A Table of objects.
pub fn table(
    resource: &ResourceInfo,
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
        "rows": objs.iter().map(|object| row(resource, object, include)).collect::<Vec<_>>()});
    if with_columns {
        t["columnDefinitions"] = json!(columns(resource));
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
