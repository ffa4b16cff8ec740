//! The scheduler: binds pending pods to nodes honouring nodeName, nodeSelector, required
//! node affinity and NoSchedule/NoExecute taints; the least loaded fitting node wins.

use super::super::meta;
use super::super::ops::Cluster;
use super::super::registry::Subresource;
use super::manager::{log_err, record_event, Controller};
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
                .zip(vals.first().and_then(|v| v.parse::<i64>().ok()))
                .map(|(a, v)| a < v)
                .unwrap_or(false),
            _ => false,
        }
    };
    exprs.iter().all(|e| {
        check(
            e,
            labels
                .and_then(|l| l.get(meta::str_at(e, "/key")))
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
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        {
            return Some(Misfit::Selector);
        }
    }
    if let Some(terms) = pod
        .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array)
    {
        if !terms.iter().any(|t| term_matches(t, node)) {
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
        .filter(|t| matches!(meta::str_at(t, "/effect"), "NoSchedule" | "NoExecute"))
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
    fn reconcile(&mut self, c: &Cluster, _now: Timestamp) {
        let (pods, _) = c.store.list("/pods", None);
        let pending: Vec<&Value> = pods
            .iter()
            .filter(|p| {
                meta::str_at(p, "/spec/nodeName").is_empty()
                    && p.pointer("/metadata/deletionTimestamp").is_none()
            })
            .filter(|p| {
                matches!(
                    meta::str_at(p, "/spec/schedulerName"),
                    "" | "default-scheduler"
                )
            })
            .collect();
        if pending.is_empty() {
            return;
        }
        let (nodes, _) = c.store.list("/nodes", None);
        let mut load: HashMap<String, usize> = HashMap::new();
        for p in &pods {
            *load
                .entry(meta::str_at(p, "/spec/nodeName").to_string())
                .or_default() += 1;
        }
        for p in pending {
            let (ns, name) = (meta::namespace(p).to_string(), meta::name(p).to_string());
            let mut reasons: HashMap<&str, usize> = HashMap::new();
            let fit: Vec<&Value> = nodes
                .iter()
                .filter(|n| match misfit(p, n) {
                    None => true,
                    Some(r) => {
                        *reasons.entry(r).or_default() += 1;
                        false
                    }
                })
                .collect();
            let best = fit.iter().min_by_key(|n| {
                (
                    load.get(meta::name(n)).copied().unwrap_or(0),
                    meta::name(n).to_string(),
                )
            });
            match best {
                Some(n) => {
                    let node = meta::name(n).to_string();
                    *load.entry(node.clone()).or_default() += 1;
                    let now = meta::now();
                    let bound = log_err(
                        "scheduler",
                        "bind",
                        c.modify(
                            "",
                            "pods",
                            &ns,
                            &name,
                            Some(Subresource::Binding),
                            "default-scheduler",
                            |pod| {
                                if !meta::str_at(pod, "/spec/nodeName").is_empty() {
                                    return false;
                                }
                                pod["spec"]["nodeName"] = json!(node);
                                true
                            },
                        ),
                    );
                    if let Some(Some(pod)) = bound.filter(|b| {
                        b.as_ref()
                            .map(|p| meta::str_at(p, "/spec/nodeName") == node)
                            .unwrap_or(false)
                    }) {
                        record_event(
                            c,
                            &pod,
                            "Normal",
                            "Scheduled",
                            &format!("Successfully assigned {ns}/{name} to {node}"),
                            "default-scheduler",
                        );
                    }
                    log_err(
                        "scheduler",
                        "condition",
                        c.modify("", "pods", &ns, &name, Some(Subresource::Status), "default-scheduler", |pod| {
                            set_condition(
                                pod,
                                json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}),
                            )
                        }),
                    );
                }
                None => {
                    let mut parts: Vec<String> =
                        reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
                    parts.sort();
                    let msg = format!(
                        "0/{} nodes are available: {}.",
                        nodes.len(),
                        parts.join(", ")
                    );
                    let now = meta::now();
                    let before = meta::str_at(p, "/metadata/resourceVersion").to_string();
                    let updated = log_err("scheduler", "unschedulable", c.modify("", "pods", &ns, &name, Some(Subresource::Status), "default-scheduler", |pod| {
                        set_condition(pod, json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg, "lastProbeTime": null, "lastTransitionTime": now}))
                    }));
                    if let Some(Some(pod)) = updated.filter(|u| {
                        u.as_ref()
                            .map(|p| meta::str_at(p, "/metadata/resourceVersion") != before)
                            .unwrap_or(false)
                    }) {
                        record_event(
                            c,
                            &pod,
                            "Warning",
                            "FailedScheduling",
                            &msg,
                            "default-scheduler",
                        );
                    }
                }
            }
        }
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
    match conds.iter_mut().find(|c| meta::str_at(c, "/type") == ty) {
        Some(existing) => {
            let same = ["status", "reason", "message"].iter().all(|k| {
                existing.get(*k).unwrap_or(&Value::Null) == cond.get(*k).unwrap_or(&Value::Null)
            });
            if same {
                return false;
            }
            let mut c = cond;
            if existing.get("status") == c.get("status") {
                if let Some(t) = existing.get("lastTransitionTime") {
                    c["lastTransitionTime"] = t.clone();
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
