//! Defaulting of built-in kinds on create, as the real API server's defaulters do (the
//! subset clients here read back), and the Service ClusterIP allocator.

use super::meta;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::net::Ipv4Addr;

fn set_default(obj: &mut Value, key: &str, value: Value) {
    if let Some(map) = obj.as_object_mut() {
        if map.get(key).map(Value::is_null).unwrap_or(true) {
            map.insert(key.to_string(), value);
        }
    }
}

fn object_at<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    let map = obj.as_object_mut()?;
    let value = map.entry(key.to_string()).or_insert_with(|| json!({}));
    if !value.is_object() {
        *value = json!({});
    }
    Some(value)
}

fn container_defaults(c: &mut Value) {
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    let image = c
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let latest = !image.contains(':') || image.ends_with(":latest");
    set_default(
        c,
        "imagePullPolicy",
        json!(if latest { "Always" } else { "IfNotPresent" }),
    );
    set_default(c, "resources", json!({}));
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports {
            set_default(port, "protocol", json!("TCP"));
        }
    }
}

/// Defaults of a pod spec (pods and templates).
pub fn pod_spec_defaults(spec: &mut Value) {
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    for key in ["containers", "initContainers"] {
        if let Some(cs) = spec.get_mut(key).and_then(Value::as_array_mut) {
            for container in cs {
                container_defaults(container);
            }
        }
    }
}

fn template_defaults(spec: &mut Value) {
    if let Some(t) = spec.get_mut("template") {
        if let Some(ps) = object_at(t, "spec") {
            pod_spec_defaults(ps);
        }
    }
}

/// A Secret's write-only `stringData` merged into `data` (base64, `stringData` wins) and
/// removed, as kube-apiserver does on every write: clients and volumes only ever see `data`.
pub fn merge_secret_string_data(secret: &mut Value) {
    use base64::Engine;
    let Some(map) = secret.as_object_mut() else {
        return;
    };
    let Some(Value::Object(strings)) = map.remove("stringData") else {
        return;
    };
    let data = map
        .entry("data")
        .or_insert_with(|| Value::Object(Default::default()));
    if !data.is_object() {
        *data = Value::Object(Default::default());
    }
    if let Some(data) = data.as_object_mut() {
        for (key, value) in strings {
            let text = value.as_str().unwrap_or_default();
            data.insert(
                key,
                json!(base64::engine::general_purpose::STANDARD.encode(text)),
            );
        }
    }
}

#[cfg(test)]
mod secret_tests {
    use super::*;

    // kube-apiserver: stringData is write-only and merged into data (the harness's escrow TLS
    // Secret read back with no data before this).
    #[test]
    fn string_data_is_merged_into_data_and_dropped() {
        let mut secret = json!({"kind": "Secret", "data": {"a": "eA==", "b": "eQ=="}, "stringData": {"b": "z", "c": "w"}});
        merge_secret_string_data(&mut secret);
        assert_eq!(
            secret,
            json!({"kind": "Secret", "data": {"a": "eA==", "b": "eg==", "c": "dw=="}})
        );
    }
}

/// The create-time defaults of a built-in kind, one function a kind (kube-apiserver's
/// `SetDefaults_*` as far as clients read them back); a kind without a row has none.
struct KindDefaults {
    group: &'static str,
    kind: &'static str,
    apply: fn(&mut Value),
}

/// The create-time defaults of each built-in kind that has some.
#[rustfmt::skip]
static KIND_DEFAULTS: &[KindDefaults] = &[
    KindDefaults { group: "", kind: "Pod", apply: pod_defaults },
    KindDefaults { group: "apps", kind: "Deployment", apply: deployment_defaults },
    KindDefaults { group: "apps", kind: "ReplicaSet", apply: replica_set_defaults },
    KindDefaults { group: "apps", kind: "DaemonSet", apply: daemon_set_defaults },
    KindDefaults { group: "apps", kind: "StatefulSet", apply: stateful_set_defaults },
    KindDefaults { group: "", kind: "Service", apply: service_defaults },
    KindDefaults { group: "", kind: "Namespace", apply: namespace_defaults },
    KindDefaults { group: "", kind: "PersistentVolumeClaim", apply: claim_defaults },
    KindDefaults { group: "", kind: "Secret", apply: secret_defaults },
    KindDefaults { group: "batch", kind: "Job", apply: job_defaults },
    KindDefaults { group: "", kind: "Node", apply: node_defaults },
];

/// Applies create-time defaults for a built-in kind.
pub fn builtin_defaults(group: &str, kind: &str, obj: &mut Value) {
    if let Some(defaults) = KIND_DEFAULTS
        .iter()
        .find(|defaults| defaults.group == group && defaults.kind == kind)
    {
        (defaults.apply)(obj);
    }
    // MicroTime fields (trap 10).
    for path in [
        "/spec/renewTime",
        "/spec/acquireTime",
        "/eventTime",
        "/series/lastObservedTime",
    ] {
        meta::normalize_micro_time(obj, path);
    }
}

fn pod_defaults(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        pod_spec_defaults(spec);
        let sa = spec
            .get("serviceAccountName")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_string();
        set_default(spec, "serviceAccountName", json!(sa));
        set_default(spec, "serviceAccount", json!(sa));
        set_default(spec, "enableServiceLinks", json!(true));
        set_default(spec, "priority", json!(0));
        set_default(
            spec,
            "tolerations",
            json!([
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ]),
        );
    }
    obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
}

fn deployment_defaults(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        set_default(spec, "replicas", json!(1));
        set_default(spec, "revisionHistoryLimit", json!(10));
        set_default(spec, "progressDeadlineSeconds", json!(600));
        set_default(
            spec,
            "strategy",
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
        );
        template_defaults(spec);
    }
    obj["status"] = json!({});
}

fn replica_set_defaults(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        set_default(spec, "replicas", json!(1));
        template_defaults(spec);
    }
    obj["status"] = json!({"replicas": 0});
}

fn daemon_set_defaults(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        set_default(spec, "revisionHistoryLimit", json!(10));
        set_default(
            spec,
            "updateStrategy",
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
        );
        if let Some(strategy) = object_at(spec, "updateStrategy") {
            set_default(strategy, "type", json!("RollingUpdate"));
            if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
                if let Some(rolling) = object_at(strategy, "rollingUpdate") {
                    set_default(rolling, "maxUnavailable", json!(1));
                    set_default(rolling, "maxSurge", json!(0));
                }
            }
        }
        template_defaults(spec);
    }
    obj["status"] = json!({"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0});
}

fn stateful_set_defaults(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        set_default(spec, "replicas", json!(1));
        set_default(spec, "podManagementPolicy", json!("OrderedReady"));
        set_default(spec, "revisionHistoryLimit", json!(10));
        set_default(
            spec,
            "updateStrategy",
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
        );
        set_default(
            spec,
            "persistentVolumeClaimRetentionPolicy",
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
        );
        template_defaults(spec);
        if let Some(ts) = spec
            .get_mut("volumeClaimTemplates")
            .and_then(Value::as_array_mut)
        {
            for t in ts {
                if let Some(s) = object_at(t, "spec") {
                    set_default(s, "volumeMode", json!("Filesystem"));
                }
                set_default(t, "apiVersion", json!("v1"));
                set_default(t, "kind", json!("PersistentVolumeClaim"));
                set_default(t, "status", json!({"phase": "Pending"}));
            }
        }
    }
    obj["status"] = json!({"replicas": 0, "availableReplicas": 0});
}

fn service_defaults(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        set_default(spec, "type", json!("ClusterIP"));
        set_default(spec, "sessionAffinity", json!("None"));
        set_default(spec, "ipFamilies", json!(["IPv4"]));
        set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
        set_default(spec, "internalTrafficPolicy", json!("Cluster"));
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for p in ports {
                set_default(p, "protocol", json!("TCP"));
                let port = p.get("port").cloned().unwrap_or(Value::Null);
                set_default(p, "targetPort", port);
            }
        }
    }
    obj["status"] = json!({"loadBalancer": {}});
}

fn namespace_defaults(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        set_default(spec, "finalizers", json!(["kubernetes"]));
    }
    obj["status"] = json!({"phase": "Active"});
    let name = meta::name(obj).to_string();
    if let Some(meta) = object_at(obj, "metadata") {
        if let Some(labels) = object_at(meta, "labels") {
            set_default(labels, "kubernetes.io/metadata.name", json!(name));
        }
    }
}

fn claim_defaults(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        set_default(spec, "volumeMode", json!("Filesystem"));
    }
    obj["status"] = json!({"phase": "Pending"});
}

fn secret_defaults(obj: &mut Value) {
    set_default(obj, "type", json!("Opaque"));
}

fn job_defaults(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        template_defaults(spec);
    }
    super::batch::job_defaults(obj);
}

fn node_defaults(obj: &mut Value) {
    if let Some(status) = object_at(obj, "status") {
        set_default(status, "phase", json!("Running"));
    }
}

/// Allocates ClusterIPs from a range.
#[derive(Debug, Clone)]
pub struct IpRange {
    /// First address of the range (the network address).
    pub base: Ipv4Addr,
    /// Prefix length.
    pub prefix: u8,
}

impl IpRange {
    /// Parses `a.b.c.d/n`.
    pub fn parse(cidr: &str) -> Option<IpRange> {
        let (ip, prefix) = cidr.split_once('/')?;
        let base: Ipv4Addr = ip.parse().ok()?;
        let prefix: u8 = prefix.parse().ok()?;
        if !(8..=30).contains(&prefix) {
            return None;
        }
        let mask = u32::MAX << (32 - prefix);
        Some(IpRange {
            base: Ipv4Addr::from(u32::from(base) & mask),
            prefix,
        })
    }
    /// The `n`th address of the range.
    pub fn nth(&self, count: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.base) + count)
    }
    /// Whether an address is in the range.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let mask = u32::MAX << (32 - self.prefix);
        u32::from(ip) & mask == u32::from(self.base)
    }
    /// The first free address after the reserved first one (`.1` is the `kubernetes`
    /// Service).
    pub fn allocate(&self, used: &HashSet<Ipv4Addr>) -> Option<Ipv4Addr> {
        let size = 1u32 << (32 - self.prefix);
        (2..size - 1)
            .map(|count| self.nth(count))
            .find(|ip| !used.contains(ip))
    }
}

/// Defaults an updated pod the way create did, so that an update omitting defaulted fields
/// (a client sending its own copy) compares equal to the stored spec.
pub fn pod_update_defaults(old: &Value, new: &mut Value) {
    let Some(spec) = new.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    pod_spec_defaults(spec);
    for key in [
        "serviceAccountName",
        "serviceAccount",
        "enableServiceLinks",
        "priority",
        "tolerations",
        "nodeName",
        "hostname",
        "subdomain",
    ] {
        if let Some(value) = old.pointer(&format!("/spec/{key}")) {
            set_default(spec, key, value.clone());
        }
    }
}
