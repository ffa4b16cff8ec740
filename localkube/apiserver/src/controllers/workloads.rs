//! Deployments -> ReplicaSets -> Pods, with status, observedGeneration and conditions as
//! `kubectl rollout status` and `kubectl wait --for=condition=Available` read them.

use super::super::meta;
use super::super::ops::{Cluster, DeleteOptions};
use super::super::registry::Subresource;
use super::super::selector::LabelSelector;
use super::manager::{log_err, record_event, Controller};
use super::nodes::set_condition;
use jiff::Timestamp;
use serde_json::{json, Value};

const SAFE: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A template hash in the style of `pod-template-hash` (FNV-1a, safe-encoded).
pub fn template_hash(template: &Value) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in template.to_string().bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h.to_string()
        .bytes()
        .map(|b| SAFE[(b as usize) % SAFE.len()] as char)
        .collect()
}

/// An ownerReference to a controller.
pub fn controller_ref(owner: &Value) -> Value {
    json!({"apiVersion": meta::str_at(owner, "/apiVersion"), "kind": meta::str_at(owner, "/kind"), "name": meta::name(owner),
        "uid": meta::uid_of(owner), "controller": true, "blockOwnerDeletion": true})
}

/// Whether `o` is controlled by the object with `uid`.
pub fn controlled_by(o: &Value, uid: &str) -> bool {
    o.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter().any(|r| {
                meta::str_at(r, "/uid") == uid
                    && r.get("controller").and_then(Value::as_bool) == Some(true)
            })
        })
        .unwrap_or(false)
}

/// Whether a pod is Ready.
pub fn pod_ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter().any(|c| {
                meta::str_at(c, "/type") == "Ready" && meta::str_at(c, "/status") == "True"
            })
        })
        .unwrap_or(false)
}

fn int(o: &Value, p: &str) -> i64 {
    o.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

/// Sets a status count that is `omitempty` in k8s.io/api (an int32 serialised only when
/// non-zero): present when non-zero, absent when zero, as the real controllers write it.
pub fn set_count(status: &mut Value, key: &str, n: i64) {
    if n != 0 {
        status[key] = json!(n);
    } else if let Some(m) = status.as_object_mut() {
        m.remove(key);
    }
}

/// Keeps ReplicaSets' pods.
pub struct ReplicaSetController;

impl Controller for ReplicaSetController {
    fn name(&self) -> &'static str {
        "replicaset"
    }
    fn reconcile(&mut self, c: &Cluster, _now: Timestamp) {
        let (sets, _) = c.store.list("apps/replicasets", None);
        let (pods, _) = c.store.list("/pods", None);
        for rs in &sets {
            let (ns, name, uid) = (meta::namespace(rs), meta::name(rs), meta::uid_of(rs));
            let mut owned: Vec<&Value> = pods
                .iter()
                .filter(|p| {
                    meta::namespace(p) == ns
                        && controlled_by(p, uid)
                        && p.pointer("/metadata/deletionTimestamp").is_none()
                })
                .filter(|p| !matches!(meta::str_at(p, "/status/phase"), "Succeeded" | "Failed"))
                .collect();
            let want = int(rs, "/spec/replicas").max(0) as usize;
            if rs.pointer("/metadata/deletionTimestamp").is_none() {
                if owned.len() < want {
                    for _ in owned.len()..want {
                        let t = rs.pointer("/spec/template").cloned().unwrap_or(json!({}));
                        let mut md = t.get("metadata").cloned().unwrap_or(json!({}));
                        md["generateName"] = json!(format!("{name}-"));
                        md["namespace"] = json!(ns);
                        md["ownerReferences"] = json!([controller_ref(rs)]);
                        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": t.get("spec").cloned().unwrap_or(json!({}))});
                        if let Some(created) = log_err(
                            "replicaset",
                            "create pod",
                            c.create_internal("", "pods", ns, pod, "replicaset-controller"),
                        ) {
                            record_event(
                                c,
                                rs,
                                "Normal",
                                "SuccessfulCreate",
                                &format!("Created pod: {}", meta::name(&created)),
                                "replicaset-controller",
                            );
                        }
                    }
                } else if owned.len() > want {
                    owned.sort_by_key(|p| {
                        let rank = if meta::str_at(p, "/spec/nodeName").is_empty() {
                            0
                        } else if meta::str_at(p, "/status/phase") == "Pending" {
                            1
                        } else if !pod_ready(p) {
                            2
                        } else {
                            3
                        };
                        (
                            rank,
                            std::cmp::Reverse(
                                meta::str_at(p, "/metadata/creationTimestamp").to_string(),
                            ),
                        )
                    });
                    for p in owned.iter().take(owned.len() - want) {
                        if log_err(
                            "replicaset",
                            "delete pod",
                            c.delete_internal("", "pods", ns, meta::name(p), None),
                        )
                        .is_some()
                        {
                            record_event(
                                c,
                                rs,
                                "Normal",
                                "SuccessfulDelete",
                                &format!("Deleted pod: {}", meta::name(p)),
                                "replicaset-controller",
                            );
                        }
                    }
                }
            }
            let labels =
                LabelSelector::from_object(rs.pointer("/spec/selector").unwrap_or(&Value::Null));
            let current: Vec<&Value> = pods
                .iter()
                .filter(|p| {
                    meta::namespace(p) == ns
                        && controlled_by(p, uid)
                        && p.pointer("/metadata/deletionTimestamp").is_none()
                })
                .collect();
            let ready = current.iter().filter(|p| pod_ready(p)).count();
            let labeled = current.iter().filter(|p| labels.matches(p)).count();
            // ReplicaSetStatus: `replicas` always, the other counts omitempty.
            let mut status = json!({"replicas": current.len(), "observedGeneration": int(rs, "/metadata/generation")});
            set_count(&mut status, "fullyLabeledReplicas", labeled as i64);
            set_count(&mut status, "readyReplicas", ready as i64);
            set_count(&mut status, "availableReplicas", ready as i64);
            write_counts_status(c, "replicasets", ns, name, "replicaset-controller", &status);
        }
    }
}

/// Rolls Deployments out through ReplicaSets.
pub struct DeploymentController;

fn resolve_percent(v: Option<&Value>, replicas: i64, round_up: bool, default: &str) -> i64 {
    let s = match v {
        Some(Value::Number(n)) => return n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => s.clone(),
        _ => default.to_string(),
    };
    match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
        Some(p) if round_up => (replicas * p + 99) / 100,
        Some(p) => replicas * p / 100,
        None => s.parse().unwrap_or(0),
    }
}

/// maxSurge (rounded up) and maxUnavailable (rounded down) of a RollingUpdate Deployment;
/// both zero means maxUnavailable 1, as in the real controller.
fn surge_and_unavailable(d: &Value, replicas: i64) -> (i64, i64) {
    let surge = resolve_percent(
        d.pointer("/spec/strategy/rollingUpdate/maxSurge"),
        replicas,
        true,
        "25%",
    );
    let unavailable = resolve_percent(
        d.pointer("/spec/strategy/rollingUpdate/maxUnavailable"),
        replicas,
        false,
        "25%",
    );
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

fn max_unavailable(d: &Value, replicas: i64) -> i64 {
    if meta::str_at(d, "/spec/strategy/type") == "Recreate" || replicas == 0 {
        return 0;
    }
    surge_and_unavailable(d, replicas).1.min(replicas)
}

impl Controller for DeploymentController {
    fn name(&self) -> &'static str {
        "deployment"
    }
    fn reconcile(&mut self, c: &Cluster, _now: Timestamp) {
        let (deps, _) = c.store.list("apps/deployments", None);
        for d in deps
            .iter()
            .filter(|d| d.pointer("/metadata/deletionTimestamp").is_none())
        {
            reconcile_deployment(c, d);
        }
    }
}

fn reconcile_deployment(c: &Cluster, d: &Value) {
    let (ns, name, uid) = (meta::namespace(d), meta::name(d), meta::uid_of(d));
    let (sets, _) = c.store.list("apps/replicasets", Some(ns));
    let owned: Vec<&Value> = sets.iter().filter(|rs| controlled_by(rs, uid)).collect();
    let template = d.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let hash = template_hash(&template);
    let desired = d
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let max_rev = owned
        .iter()
        .filter_map(|rs| {
            meta::str_at(
                rs,
                "/metadata/annotations/deployment.kubernetes.io~1revision",
            )
            .parse::<i64>()
            .ok()
        })
        .max()
        .unwrap_or(0);
    let new_rs = owned
        .iter()
        .find(|rs| meta::str_at(rs, "/metadata/labels/pod-template-hash") == hash)
        .map(|v| (*v).clone());
    let recreate = meta::str_at(d, "/spec/strategy/type") == "Recreate";
    let old: Vec<&Value> = owned
        .iter()
        .filter(|rs| meta::str_at(rs, "/metadata/labels/pod-template-hash") != hash)
        .copied()
        .collect();
    let old_pods: i64 = old.iter().map(|rs| int(rs, "/status/replicas")).sum();
    let new_rs = match new_rs {
        Some(rs) => rs,
        None => {
            let mut t = template.clone();
            t["metadata"]["labels"]["pod-template-hash"] = json!(hash);
            let mut labels = template
                .pointer("/metadata/labels")
                .cloned()
                .unwrap_or(json!({}));
            labels["pod-template-hash"] = json!(hash);
            let mut selector = d.pointer("/spec/selector").cloned().unwrap_or(json!({}));
            selector["matchLabels"]["pod-template-hash"] = json!(hash);
            let initial = 0;
            let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": format!("{name}-{hash}"), "namespace": ns, "labels": labels,
                "annotations": {"deployment.kubernetes.io/revision": (max_rev + 1).to_string(), "deployment.kubernetes.io/desired-replicas": desired.to_string(),
                    "deployment.kubernetes.io/max-replicas": desired.to_string()},
                "ownerReferences": [controller_ref(d)]},
                "spec": {"replicas": initial, "selector": selector, "template": t, "minReadySeconds": int(d, "/spec/minReadySeconds")}});
            match c.create_internal("apps", "replicasets", ns, rs, "deployment-controller") {
                Ok(v) => v,
                Err(e) => {
                    log_err::<()>("deployment", "create replicaset", Err(e));
                    return;
                }
            }
        }
    };
    let new_name = meta::name(&new_rs).to_string();
    let new_available = int(&new_rs, "/status/availableReplicas");
    // Scale the new ReplicaSet up (Recreate: once the old pods are gone) and the old ones down.
    let (max_surge, max_unavail) = surge_and_unavailable(d, desired);
    let new_spec = int(&new_rs, "/spec/replicas");
    let all_spec: i64 = owned
        .iter()
        .filter(|rs| meta::name(rs) != meta::name(&new_rs))
        .map(|rs| int(rs, "/spec/replicas"))
        .sum::<i64>()
        + new_spec;
    let new_target = if recreate {
        if old_pods > 0 {
            0
        } else {
            desired
        }
    } else if new_spec >= desired {
        desired
    } else {
        // Rolling update: grow the new ReplicaSet within desired + maxSurge pods.
        let max_total = desired + max_surge;
        if all_spec >= max_total {
            new_spec
        } else {
            (new_spec + max_total - all_spec).min(desired)
        }
    };
    let rev = if meta::str_at(
        &new_rs,
        "/metadata/annotations/deployment.kubernetes.io~1revision",
    )
    .parse::<i64>()
    .unwrap_or(0)
        < max_rev
    {
        max_rev + 1
    } else {
        0
    };
    if new_target != new_spec {
        let verb = if new_target > new_spec { "up" } else { "down" };
        record_event(
            c,
            d,
            "Normal",
            "ScalingReplicaSet",
            &format!("Scaled {verb} replica set {new_name} from {new_spec} to {new_target}"),
            "deployment-controller",
        );
    }
    log_err(
        "deployment",
        "scale new replicaset",
        c.modify(
            "apps",
            "replicasets",
            ns,
            &new_name,
            None,
            "deployment-controller",
            |rs| {
                let mut changed = false;
                if int(rs, "/spec/replicas") != new_target {
                    rs["spec"]["replicas"] = json!(new_target);
                    rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] =
                        json!(desired.to_string());
                    changed = true;
                }
                if rev > 0 {
                    rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] =
                        json!(rev.to_string());
                    changed = true;
                }
                changed
            },
        ),
    );
    // Scale old ReplicaSets down as far as keeping desired - maxUnavailable available pods
    // allows (Recreate: all at once), oldest revision first.
    let old_spec: i64 = old.iter().map(|rs| int(rs, "/spec/replicas")).sum();
    let min_available = desired - max_unavail;
    let new_unavailable = (new_target - new_available).max(0);
    let mut scale_down = if recreate {
        old_spec
    } else {
        (old_spec + new_target - min_available - new_unavailable).clamp(0, old_spec)
    };
    let mut old_sorted = old.clone();
    old_sorted.sort_by_key(|rs| {
        meta::str_at(
            rs,
            "/metadata/annotations/deployment.kubernetes.io~1revision",
        )
        .parse::<i64>()
        .unwrap_or(0)
    });
    for rs in &old_sorted {
        let cur = int(rs, "/spec/replicas");
        let cut = cur.min(scale_down);
        scale_down -= cut;
        let target = cur - cut;
        if target != cur {
            record_event(
                c,
                d,
                "Normal",
                "ScalingReplicaSet",
                &format!(
                    "Scaled down replica set {} from {cur} to {target}",
                    meta::name(rs)
                ),
                "deployment-controller",
            );
            log_err(
                "deployment",
                "scale old replicaset",
                c.modify(
                    "apps",
                    "replicasets",
                    ns,
                    meta::name(rs),
                    None,
                    "deployment-controller",
                    |o| {
                        o["spec"]["replicas"] = json!(target);
                        true
                    },
                ),
            );
        }
    }
    let limit = d
        .pointer("/spec/revisionHistoryLimit")
        .and_then(Value::as_i64)
        .unwrap_or(10)
        .max(0) as usize;
    let mut idle: Vec<&Value> = old
        .iter()
        .filter(|rs| int(rs, "/spec/replicas") == 0 && int(rs, "/status/replicas") == 0)
        .copied()
        .collect();
    if idle.len() > limit {
        idle.sort_by_key(|rs| {
            meta::str_at(
                rs,
                "/metadata/annotations/deployment.kubernetes.io~1revision",
            )
            .parse::<i64>()
            .unwrap_or(0)
        });
        for rs in idle.iter().take(idle.len() - limit) {
            log_err(
                "deployment",
                "prune replicaset",
                c.delete(
                    &match c.resource("apps", "replicasets") {
                        Some(r) => r,
                        None => return,
                    },
                    ns,
                    meta::name(rs),
                    &DeleteOptions::default(),
                ),
            );
        }
    }
    // Status from the ReplicaSets as they are now.
    let (sets, _) = c.store.list("apps/replicasets", Some(ns));
    let owned: Vec<&Value> = sets.iter().filter(|rs| controlled_by(rs, uid)).collect();
    let sum = |p: &str| owned.iter().map(|rs| int(rs, p)).sum::<i64>();
    let (replicas, ready, available) = (
        sum("/status/replicas"),
        sum("/status/readyReplicas"),
        sum("/status/availableReplicas"),
    );
    let updated = owned
        .iter()
        .find(|rs| meta::name(rs) == new_name)
        .map(|rs| int(rs, "/status/replicas"))
        .unwrap_or(0);
    let min_available = desired - max_unavailable(d, desired);
    let now = meta::now();
    let (avail_status, avail_reason, avail_msg) = if available >= min_available {
        (
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        (
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    let complete = updated == desired && replicas == desired && available == desired;
    let (prog_reason, prog_msg) = if complete {
        (
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{new_name}\" has successfully progressed."),
        )
    } else {
        (
            "ReplicaSetUpdated",
            format!("ReplicaSet \"{new_name}\" is progressing."),
        )
    };
    let generation = int(d, "/metadata/generation");
    log_err("deployment", "status", c.modify("apps", "deployments", ns, name, Some(Subresource::Status), "deployment-controller", |o| {
        let before = o.get("status").cloned();
        let mut s = o.get("status").cloned().filter(Value::is_object).unwrap_or(json!({}));
        s["observedGeneration"] = json!(generation);
        // DeploymentStatus: every count is omitempty.
        set_count(&mut s, "replicas", replicas);
        set_count(&mut s, "updatedReplicas", updated);
        set_count(&mut s, "readyReplicas", ready);
        set_count(&mut s, "availableReplicas", available);
        set_count(&mut s, "unavailableReplicas", (desired - available).max(0));
        o["status"] = s;
        set_condition(o, json!({"type": "Available", "status": avail_status, "reason": avail_reason, "message": avail_msg, "lastUpdateTime": now, "lastTransitionTime": now}));
        set_condition(o, json!({"type": "Progressing", "status": "True", "reason": prog_reason, "message": prog_msg, "lastUpdateTime": now, "lastTransitionTime": now}));
        o.get("status").cloned() != before
    }));
}

/// Writes a workload controller's `status` (counts and observedGeneration) to the `apps`
/// object `plural/ns/name` as `manager`, keeping the conditions already there; no write when
/// nothing changed.
pub fn write_counts_status(
    c: &Cluster,
    plural: &str,
    ns: &str,
    name: &str,
    manager: &str,
    status: &Value,
) {
    log_err(
        manager,
        "status",
        c.modify(
            "apps",
            plural,
            ns,
            name,
            Some(Subresource::Status),
            manager,
            |o| {
                let mut s = status.clone();
                if let Some(conds) = o.pointer("/status/conditions") {
                    s["conditions"] = conds.clone();
                }
                if o.get("status") == Some(&s) {
                    return false;
                }
                o["status"] = s;
                true
            },
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_hash_is_stable_and_safe() {
        let t = json!({"spec": {"containers": [{"name": "a", "image": "b"}]}});
        let h = template_hash(&t);
        assert_eq!(h, template_hash(&t));
        assert!(h.bytes().all(|b| SAFE.contains(&b)));
        assert_ne!(h, template_hash(&json!({"spec": {}})));
    }
}
