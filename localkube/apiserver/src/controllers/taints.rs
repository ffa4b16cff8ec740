//! NoExecute taint eviction, as the real taint-eviction controller: a pod with a NoExecute
//! taint it does not tolerate is deleted at once; otherwise at the smallest
//! `tolerationSeconds` of the tolerations used, counted from when the taint was noticed
//! (`nil` = forever); removing the taint cancels.

use super::super::cluster::Cluster;
use super::super::meta;
use super::controller::{log_err, record_event, Controller};
use jiff::Timestamp;
use serde_json::Value;
use std::collections::HashMap;

/// Whether a toleration tolerates a taint.
pub fn tolerates(toleration: &Value, taint: &Value) -> bool {
    let effect = meta::str_at(toleration, "/effect");
    if !effect.is_empty() && effect != meta::str_at(taint, "/effect") {
        return false;
    }
    let key = meta::str_at(toleration, "/key");
    let op = meta::str_at(toleration, "/operator");
    if key.is_empty() {
        return op == "Exists";
    }
    if key != meta::str_at(taint, "/key") {
        return false;
    }
    match op {
        "Exists" => true,
        "" | "Equal" => meta::str_at(toleration, "/value") == meta::str_at(taint, "/value"),
        _ => false,
    }
}

/// `None`: some taint is not tolerated. `Some(None)`: tolerated forever.
/// `Some(Some(s))`: tolerated for `s` seconds.
fn toleration_time(taints: &[&Value], tolerations: &[Value]) -> Option<Option<i64>> {
    let mut used = Vec::new();
    for taint in taints {
        let tol = tolerations.iter().find(|tol| tolerates(tol, taint))?;
        used.push(tol);
    }
    let mut min: Option<i64> = None;
    for u in used {
        if let Some(toleration_seconds) = u.get("tolerationSeconds").and_then(Value::as_i64) {
            if toleration_seconds <= 0 {
                return Some(Some(0));
            }
            min = Some(min.map_or(toleration_seconds, |number| number.min(toleration_seconds)));
        }
    }
    Some(min)
}

/// (namespace, name, uid) of a pod.
type PodKey = (String, String, String);

/// The eviction queue: pod (namespace, name, uid) -> (noticed at, evict at).
#[derive(Default)]
pub struct TaintEviction {
    scheduled: HashMap<PodKey, (Timestamp, Timestamp)>,
}

impl Controller for TaintEviction {
    fn name(&self) -> &'static str {
        "taint-eviction"
    }
    fn reconcile(&mut self, cluster: &Cluster, now: Timestamp) {
        let (nodes, _) = cluster.store.list("/nodes", None);
        let taints: HashMap<String, Vec<Value>> = nodes
            .iter()
            .map(|n| {
                let t: Vec<Value> = n
                    .pointer("/spec/taints")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|taint| meta::str_at(taint, "/effect") == "NoExecute")
                    .cloned()
                    .collect();
                (meta::name(n).to_string(), t)
            })
            .collect();
        let (pods, _) = cluster.store.list("/pods", None);
        let mut seen = std::collections::HashSet::new();
        for p in pods
            .iter()
            .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
        {
            let node = meta::str_at(p, "/spec/nodeName");
            let key = (
                meta::namespace(p).to_string(),
                meta::name(p).to_string(),
                meta::uid_of(p).to_string(),
            );
            let node_taints: Vec<&Value> = taints
                .get(node)
                .map(|t| t.iter().collect())
                .unwrap_or_default();
            if node.is_empty() || node_taints.is_empty() {
                self.scheduled.remove(&key);
                continue;
            }
            let tolerations: Vec<Value> = p
                .pointer("/spec/tolerations")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let evict_at = match toleration_time(&node_taints, &tolerations) {
                None => Some(now),
                Some(None) => {
                    self.scheduled.remove(&key);
                    None
                }
                Some(Some(secs)) => {
                    let entry = self
                        .scheduled
                        .entry(key.clone())
                        .or_insert((now, meta::add_seconds(now, secs)));
                    Some(entry.1)
                }
            };
            seen.insert(key.clone());
            if let Some(at) = evict_at {
                if at <= now {
                    tracing::info!(namespace = %key.0, pod = %key.1, node, "evicting pod for an untolerated NoExecute taint");
                    record_event(
                        cluster,
                        p,
                        "Normal",
                        "TaintManagerEviction",
                        &format!("Marking for deletion Pod {}/{}", key.0, key.1),
                        "taint-eviction-controller",
                    );
                    log_err(
                        "taint-eviction",
                        "delete pod",
                        cluster.delete_internal("", "pods", &key.0, &key.1, None),
                    );
                    self.scheduled.remove(&key);
                }
            }
        }
        self.scheduled.retain(|k, _| seen.contains(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn taint_eviction_times_follow_the_real_controller() {
        let taint =
            json!({"key": "bloodraven.shipstream.io/demoted", "value": "g", "effect": "NoExecute"});
        let taints = vec![&taint];
        assert_eq!(
            toleration_time(&taints, &[]),
            None,
            "no toleration: delete now"
        );
        let forever = json!({"key": "bloodraven.shipstream.io/demoted", "operator": "Exists", "effect": "NoExecute"});
        assert_eq!(
            toleration_time(&taints, &[forever]),
            Some(None),
            "nil tolerationSeconds: forever"
        );
        let timed = json!({"key": "bloodraven.shipstream.io/demoted", "operator": "Equal", "value": "g", "tolerationSeconds": 30});
        assert_eq!(toleration_time(&taints, &[timed]), Some(Some(30)));
        let other = json!({"key": "other", "operator": "Exists"});
        assert_eq!(toleration_time(&taints, &[other]), None);
    }
}
