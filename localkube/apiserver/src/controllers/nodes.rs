//! The scheduler: binds pending pods to nodes honouring nodeName, nodeSelector, required
//! node affinity and NoSchedule/NoExecute taints; the least loaded fitting node wins.

use super::super::cluster::Cluster;
use super::super::meta;
use super::super::registry::Subresource;
use super::controller::{log_err, record_event, Controller};
use super::taints::tolerates;
use jiff::Timestamp;
use serde_json::{json, Value};
use std::collections::HashMap;

/// Binds pods to nodes.
pub struct Scheduler;

fn term_matches(term: &Value, node: &Value) -> bool {
    let labels = node.pointer("/metadata/labels");
    let exprs = term
        .get("matchExpressions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let fields = term
        .get("matchFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let check = |e: &Value, actual: Option<&str>| {
        let vals: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match meta::str_at(e, "/operator") {
            "In" => actual.map(|a| vals.contains(&a)).unwrap_or(false),
            "NotIn" => actual.map(|a| !vals.contains(&a)).unwrap_or(true),
            "Exists" => actual.is_some(),
            "DoesNotExist" => actual.is_none(),
            "Gt" => actual
                .and_then(|a| a.parse::<i64>().ok())
                .zip(vals.first().and_then(|v| v.parse::<i64>().ok()))
                .map(|(a, v)| a > v)
                .unwrap_or(false),
            "Lt" => actual
                .and_then(|a| a.parse::<i64>().ok())
                .zip(vals.first().and_then(|value| value.parse::<i64>().ok()))
                .map(|(a, number)| a < number)
                .unwrap_or(false),
            _ => false,
        }
    };
    exprs.iter().all(|expression| {
        check(
            expression,
            labels
                .and_then(|l| l.get(meta::str_at(expression, "/key")))
                .and_then(Value::as_str),
        )
    }) && fields
        .iter()
        .all(|e| meta::str_at(e, "/key") == "metadata.name" && check(e, Some(meta::name(node))))
        && !(exprs.is_empty() && fields.is_empty())
}

/// Why a node does not fit a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misfit {
    /// The nodeSelector or the required node affinity does not match.
    Selector,
    /// A NoSchedule or NoExecute taint (or `spec.unschedulable`) is not tolerated.
    Taint,
}

impl Misfit {
    /// The scheduler's words for it.
    pub fn reason(self) -> &'static str {
        match self {
            Misfit::Selector => "node(s) didn't match Pod's node affinity/selector",
            Misfit::Taint => "node(s) had untolerated taint",
        }
    }
}

/// Why a node does not fit a pod (`None`: it fits).
pub fn misfit(pod: &Value, node: &Value) -> Option<&'static str> {
    misfit_with(pod, node).map(Misfit::reason)
}

/// As [`misfit`], typed.
pub fn misfit_with(pod: &Value, node: &Value) -> Option<Misfit> {
    if let Some(sel) = pod.pointer("/spec/nodeSelector").and_then(Value::as_object) {
        let labels = node.pointer("/metadata/labels");
        if !sel
            .iter()
            .all(|(key, value)| labels.and_then(|l| l.get(key)) == Some(value))
        {
            return Some(Misfit::Selector);
        }
    }
    if let Some(terms) = pod
        .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array)
    {
        if !terms.iter().any(|term| term_matches(term, node)) {
            return Some(Misfit::Selector);
        }
    }
    let tolerations: Vec<Value> = pod
        .pointer("/spec/tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut taints: Vec<Value> = node
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        taints.push(json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}));
    }
    for t in taints
        .iter()
        .filter(|taint| matches!(meta::str_at(taint, "/effect"), "NoSchedule" | "NoExecute"))
    {
        if !tolerations.iter().any(|tol| tolerates(tol, t)) {
            return Some(Misfit::Taint);
        }
    }
    None
}

impl Controller for Scheduler {
    fn name(&self) -> &'static str {
        "scheduler"
    }
    fn reconcile(&mut self, cluster: &Cluster, _now: Timestamp) {
        let (pods, _) = cluster.store.list("/pods", None);
        let pending: Vec<&Value> = pods
            .iter()
            .filter(|pod| {
                meta::str_at(pod, "/spec/nodeName").is_empty()
                    && pod.pointer("/metadata/deletionTimestamp").is_none()
            })
            .filter(|pod| {
                matches!(
                    meta::str_at(pod, "/spec/schedulerName"),
                    "" | "default-scheduler"
                )
            })
            .collect();
        if pending.is_empty() {
            return;
        }
        let (nodes, _) = cluster.store.list("/nodes", None);
        let mut load: HashMap<String, usize> = HashMap::new();
        for pod in &pods {
            *load
                .entry(meta::str_at(pod, "/spec/nodeName").to_string())
                .or_default() += 1;
        }
        for pod in pending {
            let mut reasons: HashMap<&str, usize> = HashMap::new();
            let fit: Vec<&Value> = nodes
                .iter()
                .filter(|node| match misfit(pod, node) {
                    None => true,
                    Some(reason) => {
                        *reasons.entry(reason).or_default() += 1;
                        false
                    }
                })
                .collect();
            // The fitting node with the fewest pods, by name among equals.
            let best = fit.iter().min_by_key(|node| {
                (
                    load.get(meta::name(node)).copied().unwrap_or(0),
                    meta::name(node).to_string(),
                )
            });
            match best {
                Some(node) => {
                    let node_name = meta::name(node).to_string();
                    *load.entry(node_name.clone()).or_default() += 1;
                    bind(cluster, pod, &node_name);
                }
                None => mark_unschedulable(cluster, pod, &reasons, nodes.len()),
            }
        }
    }
}

/// Writes a pod as the scheduler (`what` names the write in logs); the pod as written,
/// when the write happened and `took_effect` holds of it.
fn write_pod(
    cluster: &Cluster,
    pod: &Value,
    subresource: Subresource,
    what: &str,
    change: impl Fn(&mut Value) -> bool,
    took_effect: impl Fn(&Value) -> bool,
) -> Option<Value> {
    let (namespace, name) = (meta::namespace(pod), meta::name(pod));
    let written = cluster.modify(
        "",
        "pods",
        namespace,
        name,
        Some(subresource),
        "default-scheduler",
        change,
    );
    log_err("scheduler", what, written)
        .flatten()
        .filter(|written| took_effect(written))
}

/// Binds a pod to `node_name` and sets its PodScheduled condition.
fn bind(cluster: &Cluster, pod: &Value, node_name: &str) {
    let (namespace, name) = (meta::namespace(pod), meta::name(pod));
    let now = meta::now();
    let assign = |pod: &mut Value| {
        if !meta::str_at(pod, "/spec/nodeName").is_empty() {
            return false;
        }
        pod["spec"]["nodeName"] = json!(node_name);
        true
    };
    let bound_here = |pod: &Value| meta::str_at(pod, "/spec/nodeName") == node_name;
    if let Some(bound) = write_pod(
        cluster,
        pod,
        Subresource::Binding,
        "bind",
        assign,
        bound_here,
    ) {
        record_event(
            cluster,
            &bound,
            "Normal",
            "Scheduled",
            &format!("Successfully assigned {namespace}/{name} to {node_name}"),
            "default-scheduler",
        );
    }
    let scheduled = |pod: &mut Value| {
        set_condition(
            pod,
            json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}),
        )
    };
    write_pod(
        cluster,
        pod,
        Subresource::Status,
        "condition",
        scheduled,
        |_| true,
    );
}

/// Sets PodScheduled False (Unschedulable) with why no node fits (`reasons`: how many
/// nodes each misfit ruled out), and a FailedScheduling Event when that changed the pod.
fn mark_unschedulable(
    cluster: &Cluster,
    pod: &Value,
    reasons: &HashMap<&str, usize>,
    node_count: usize,
) {
    let mut parts: Vec<String> = reasons
        .iter()
        .map(|(reason, count)| format!("{count} {reason}"))
        .collect();
    parts.sort();
    let message = format!("0/{node_count} nodes are available: {}.", parts.join(", "));
    let now = meta::now();
    let before = meta::str_at(pod, "/metadata/resourceVersion").to_string();
    let unschedulable = |pod: &mut Value| {
        set_condition(
            pod,
            json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message, "lastProbeTime": null, "lastTransitionTime": now}),
        )
    };
    let changed = |pod: &Value| meta::str_at(pod, "/metadata/resourceVersion") != before;
    let status = Subresource::Status;
    if let Some(updated) = write_pod(
        cluster,
        pod,
        status,
        "unschedulable",
        unschedulable,
        changed,
    ) {
        record_event(
            cluster,
            &updated,
            "Warning",
            "FailedScheduling",
            &message,
            "default-scheduler",
        );
    }
}

/// Sets a status condition by type, keeping lastTransitionTime when the status is
/// unchanged; returns whether anything changed.
pub fn set_condition(obj: &mut Value, cond: Value) -> bool {
    if !obj.get("status").map(Value::is_object).unwrap_or(false) {
        obj["status"] = json!({});
    }
    if !obj["status"]
        .get("conditions")
        .map(Value::is_array)
        .unwrap_or(false)
    {
        obj["status"]["conditions"] = json!([]);
    }
    let ty = meta::str_at(&cond, "/type").to_string();
    let Some(conds) = obj["status"]["conditions"].as_array_mut() else {
        return false;
    };
    match conds
        .iter_mut()
        .find(|condition| meta::str_at(condition, "/type") == ty)
    {
        Some(existing) => {
            let same = ["status", "reason", "message"].iter().all(|key| {
                existing.get(*key).unwrap_or(&Value::Null) == cond.get(*key).unwrap_or(&Value::Null)
            });
            if same {
                return false;
            }
            let mut c = cond;
            if existing.get("status") == c.get("status") {
                if let Some(last_transition_time) = existing.get("lastTransitionTime") {
                    c["lastTransitionTime"] = last_transition_time.clone();
                }
            }
            *existing = c;
            true
        }
        None => {
            conds.push(cond);
            true
        }
    }
}
