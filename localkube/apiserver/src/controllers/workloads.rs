//! Deployments -> ReplicaSets -> Pods, with status, observedGeneration and conditions as
//! `kubectl rollout status` and `kubectl wait --for=condition=Available` read them.

use super::super::cluster::{Cluster, DeleteOptions};
use super::super::meta;
use super::super::registry::Subresource;
use super::super::selector::LabelSelector;
use super::controller::{log_err, record_event, Controller};
use super::nodes::set_condition;
use jiff::Timestamp;
use serde_json::{json, Value};

const SAFE: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A template hash in the style of `pod-template-hash` (FNV-1a, safe-encoded).
pub fn template_hash(template: &Value) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for b in template.to_string().bytes() {
        hash ^= b as u32;
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash.to_string()
        .bytes()
        .map(|byte| SAFE[(byte as usize) % SAFE.len()] as char)
        .collect()
}

/// An ownerReference to a controller.
pub fn controller_ref(owner: &Value) -> Value {
    json!({"apiVersion": meta::str_at(owner, "/apiVersion"), "kind": meta::str_at(owner, "/kind"), "name": meta::name(owner),
        "uid": meta::uid_of(owner), "controller": true, "blockOwnerDeletion": true})
}

/// Whether `o` is controlled by the object with `uid`.
pub fn controlled_by(object: &Value, uid: &str) -> bool {
    object
        .pointer("/metadata/ownerReferences")
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

fn int(object: &Value, path: &str) -> i64 {
    object.pointer(path).and_then(Value::as_i64).unwrap_or(0)
}

/// Sets a status count that is `omitempty` in k8s.io/api (an int32 serialised only when
/// non-zero): present when non-zero, absent when zero, as the real controllers write it.
pub fn set_count(status: &mut Value, key: &str, count: i64) {
    if count != 0 {
        status[key] = json!(count);
    } else if let Some(map) = status.as_object_mut() {
        map.remove(key);
    }
}

/// Keeps ReplicaSets' pods.
pub struct ReplicaSetController;

impl Controller for ReplicaSetController {
    fn name(&self) -> &'static str {
        "replicaset"
    }
    fn reconcile(&mut self, cluster: &Cluster, _now: Timestamp) {
        let (sets, _) = cluster.store.list("apps/replicasets", None);
        let (pods, _) = cluster.store.list("/pods", None);
        for replica_set in &sets {
            reconcile_replica_set(cluster, replica_set, &pods);
        }
    }
}

/// One pass over a ReplicaSet: as many live pods as `spec.replicas` (unless it is being
/// deleted), then its status.
fn reconcile_replica_set(cluster: &Cluster, replica_set: &Value, pods: &[Value]) {
    let (namespace, name, uid) = (
        meta::namespace(replica_set),
        meta::name(replica_set),
        meta::uid_of(replica_set),
    );
    let current: Vec<&Value> = pods
        .iter()
        .filter(|pod| {
            meta::namespace(pod) == namespace
                && controlled_by(pod, uid)
                && pod.pointer("/metadata/deletionTimestamp").is_none()
        })
        .collect();
    let owned: Vec<&Value> = current
        .iter()
        .copied()
        .filter(|pod| !matches!(meta::str_at(pod, "/status/phase"), "Succeeded" | "Failed"))
        .collect();
    let want = int(replica_set, "/spec/replicas").max(0) as usize;
    if replica_set.pointer("/metadata/deletionTimestamp").is_none() {
        if owned.len() < want {
            create_pods(cluster, replica_set, want - owned.len());
        } else if owned.len() > want {
            delete_surplus(cluster, replica_set, owned, want);
        }
    }
    let labels = LabelSelector::from_object(
        replica_set
            .pointer("/spec/selector")
            .unwrap_or(&Value::Null),
    );
    let ready = current.iter().filter(|pod| pod_ready(pod)).count();
    let labeled = current.iter().filter(|pod| labels.matches(pod)).count();
    // ReplicaSetStatus: `replicas` always, the other counts omitempty.
    let mut status = json!({"replicas": current.len(), "observedGeneration": int(replica_set, "/metadata/generation")});
    set_count(&mut status, "fullyLabeledReplicas", labeled as i64);
    set_count(&mut status, "readyReplicas", ready as i64);
    set_count(&mut status, "availableReplicas", ready as i64);
    write_counts_status(
        cluster,
        "replicasets",
        namespace,
        name,
        "replicaset-controller",
        &status,
    );
}

/// Creates `count` pods from a ReplicaSet's template.
fn create_pods(cluster: &Cluster, replica_set: &Value, count: usize) {
    let (namespace, name) = (meta::namespace(replica_set), meta::name(replica_set));
    for _ in 0..count {
        let template = replica_set
            .pointer("/spec/template")
            .cloned()
            .unwrap_or(json!({}));
        let mut metadata = template.get("metadata").cloned().unwrap_or(json!({}));
        metadata["generateName"] = json!(format!("{name}-"));
        metadata["namespace"] = json!(namespace);
        metadata["ownerReferences"] = json!([controller_ref(replica_set)]);
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template.get("spec").cloned().unwrap_or(json!({}))});
        let created = cluster.create_internal("", "pods", namespace, pod, "replicaset-controller");
        if let Some(created) = log_err("replicaset", "create pod", created) {
            record_event(
                cluster,
                replica_set,
                "Normal",
                "SuccessfulCreate",
                &format!("Created pod: {}", meta::name(&created)),
                "replicaset-controller",
            );
        }
    }
}

/// Deletes the pods beyond `want`, the least useful first: unscheduled, pending, not
/// ready, then the newest.
fn delete_surplus(cluster: &Cluster, replica_set: &Value, mut owned: Vec<&Value>, want: usize) {
    let namespace = meta::namespace(replica_set);
    owned.sort_by_key(|pod| {
        let rank = if meta::str_at(pod, "/spec/nodeName").is_empty() {
            0
        } else if meta::str_at(pod, "/status/phase") == "Pending" {
            1
        } else if !pod_ready(pod) {
            2
        } else {
            3
        };
        (
            rank,
            std::cmp::Reverse(meta::str_at(pod, "/metadata/creationTimestamp").to_string()),
        )
    });
    for pod in owned.iter().take(owned.len() - want) {
        let deleted = cluster.delete_internal("", "pods", namespace, meta::name(pod), None);
        if log_err("replicaset", "delete pod", deleted).is_some() {
            record_event(
                cluster,
                replica_set,
                "Normal",
                "SuccessfulDelete",
                &format!("Deleted pod: {}", meta::name(pod)),
                "replicaset-controller",
            );
        }
    }
}

/// Rolls Deployments out through ReplicaSets.
pub struct DeploymentController;

fn resolve_percent(value: Option<&Value>, replicas: i64, round_up: bool, default: &str) -> i64 {
    let text = match value {
        Some(Value::Number(number)) => return number.as_i64().unwrap_or(0),
        Some(Value::String(text)) => text.clone(),
        _ => default.to_string(),
    };
    match text
        .strip_suffix('%')
        .and_then(|percent| percent.parse::<i64>().ok())
    {
        Some(percent) if round_up => (replicas * percent + 99) / 100,
        Some(percent) => replicas * percent / 100,
        None => text.parse().unwrap_or(0),
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
    fn reconcile(&mut self, cluster: &Cluster, _now: Timestamp) {
        let (deps, _) = cluster.store.list("apps/deployments", None);
        for d in deps
            .iter()
            .filter(|deployment| deployment.pointer("/metadata/deletionTimestamp").is_none())
        {
            reconcile_deployment(cluster, d);
        }
    }
}

const REVISION_ANNOTATION: &str = "/metadata/annotations/deployment.kubernetes.io~1revision";
const MANAGER: &str = "deployment-controller";

/// The `deployment.kubernetes.io/revision` of a ReplicaSet (0 when absent).
fn revision(replica_set: &Value) -> i64 {
    meta::str_at(replica_set, REVISION_ANNOTATION)
        .parse::<i64>()
        .unwrap_or(0)
}

/// One Deployment's rollout pass: what the steps of [`reconcile_deployment`] share.
struct Rollout<'a> {
    cluster: &'a Cluster,
    deployment: &'a Value,
    namespace: &'a str,
    /// `spec.replicas` (1 when absent).
    desired: i64,
    /// The template hash the new ReplicaSet carries as `pod-template-hash`.
    hash: String,
    /// `spec.strategy.type` is Recreate.
    recreate: bool,
}

/// One pass over a Deployment: find or create the ReplicaSet of its template, scale it
/// up and the old ones down, prune idle old ones beyond `revisionHistoryLimit`, and write
/// the status.
fn reconcile_deployment(cluster: &Cluster, deployment: &Value) {
    let template = deployment
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(json!({}));
    let rollout = Rollout {
        cluster,
        deployment,
        namespace: meta::namespace(deployment),
        desired: deployment
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1),
        hash: template_hash(&template),
        recreate: meta::str_at(deployment, "/spec/strategy/type") == "Recreate",
    };
    let sets = rollout.replica_sets();
    let owned: Vec<&Value> = sets.iter().collect();
    let revision_max = owned
        .iter()
        .map(|replica_set| revision(replica_set))
        .max()
        .unwrap_or(0);
    let existing = owned
        .iter()
        .find(|replica_set| rollout.is_new(replica_set))
        .map(|replica_set| (*replica_set).clone());
    let old: Vec<&Value> = owned
        .iter()
        .filter(|replica_set| !rollout.is_new(replica_set))
        .copied()
        .collect();
    let new_replica_set = match existing {
        Some(replica_set) => replica_set,
        None => match rollout.create_replica_set(&template, revision_max) {
            Some(created) => created,
            None => return,
        },
    };
    let new_target = rollout.scale_new(&new_replica_set, &owned, &old, revision_max);
    rollout.scale_old_down(&new_replica_set, &old, new_target);
    if !rollout.prune_idle(&old) {
        return;
    }
    rollout.write_status(meta::name(&new_replica_set));
}

impl Rollout<'_> {
    /// The ReplicaSets this Deployment controls, as they are now.
    fn replica_sets(&self) -> Vec<Value> {
        let uid = meta::uid_of(self.deployment);
        let (sets, _) = self
            .cluster
            .store
            .list("apps/replicasets", Some(self.namespace));
        sets.into_iter()
            .filter(|replica_set| controlled_by(replica_set, uid))
            .collect()
    }

    /// Whether a ReplicaSet runs the current template.
    fn is_new(&self, replica_set: &Value) -> bool {
        meta::str_at(replica_set, "/metadata/labels/pod-template-hash") == self.hash
    }

    /// Creates the ReplicaSet of the current template, at 0 replicas; `None` when the
    /// write failed (logged).
    fn create_replica_set(&self, template: &Value, revision_max: i64) -> Option<Value> {
        let (hash, desired) = (&self.hash, self.desired);
        let mut pod_template = template.clone();
        pod_template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
        let mut labels = template
            .pointer("/metadata/labels")
            .cloned()
            .unwrap_or(json!({}));
        labels["pod-template-hash"] = json!(hash);
        let mut selector = self
            .deployment
            .pointer("/spec/selector")
            .cloned()
            .unwrap_or(json!({}));
        selector["matchLabels"]["pod-template-hash"] = json!(hash);
        let initial = 0;
        let name = meta::name(self.deployment);
        let replica_set = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": format!("{name}-{hash}"), "namespace": self.namespace, "labels": labels,
            "annotations": {"deployment.kubernetes.io/revision": (revision_max + 1).to_string(), "deployment.kubernetes.io/desired-replicas": desired.to_string(),
                "deployment.kubernetes.io/max-replicas": desired.to_string()},
            "ownerReferences": [controller_ref(self.deployment)]},
            "spec": {"replicas": initial, "selector": selector, "template": pod_template, "minReadySeconds": int(self.deployment, "/spec/minReadySeconds")}});
        let created = self.cluster.create_internal(
            "apps",
            "replicasets",
            self.namespace,
            replica_set,
            MANAGER,
        );
        log_err("deployment", "create replicaset", created)
    }

    /// Scales the new ReplicaSet up (Recreate: once the old pods are gone; RollingUpdate:
    /// within desired + maxSurge pods) and moves its revision past the old ones; returns
    /// its target replicas.
    fn scale_new(
        &self,
        new_replica_set: &Value,
        owned: &[&Value],
        old: &[&Value],
        revision_max: i64,
    ) -> i64 {
        let desired = self.desired;
        let new_name = meta::name(new_replica_set).to_string();
        let old_pods: i64 = old
            .iter()
            .map(|replica_set| int(replica_set, "/status/replicas"))
            .sum();
        let (max_surge, _) = surge_and_unavailable(self.deployment, desired);
        let new_spec = int(new_replica_set, "/spec/replicas");
        let all_spec: i64 = owned
            .iter()
            .filter(|replica_set| meta::name(replica_set) != new_name)
            .map(|replica_set| int(replica_set, "/spec/replicas"))
            .sum::<i64>()
            + new_spec;
        let new_target = if self.recreate {
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
        let new_revision = if revision(new_replica_set) < revision_max {
            revision_max + 1
        } else {
            0
        };
        if new_target != new_spec {
            let verb = if new_target > new_spec { "up" } else { "down" };
            record_event(
                self.cluster,
                self.deployment,
                "Normal",
                "ScalingReplicaSet",
                &format!("Scaled {verb} replica set {new_name} from {new_spec} to {new_target}"),
                MANAGER,
            );
        }
        let scale = |replica_set: &mut Value| {
            let mut changed = false;
            if int(replica_set, "/spec/replicas") != new_target {
                replica_set["spec"]["replicas"] = json!(new_target);
                replica_set["metadata"]["annotations"]
                    ["deployment.kubernetes.io/desired-replicas"] = json!(desired.to_string());
                changed = true;
            }
            if new_revision > 0 {
                replica_set["metadata"]["annotations"]["deployment.kubernetes.io/revision"] =
                    json!(new_revision.to_string());
                changed = true;
            }
            changed
        };
        let written = self.cluster.modify(
            "apps",
            "replicasets",
            self.namespace,
            &new_name,
            None,
            MANAGER,
            scale,
        );
        log_err("deployment", "scale new replicaset", written);
        new_target
    }

    /// Scales old ReplicaSets down as far as keeping desired - maxUnavailable available
    /// pods allows (Recreate: all at once), oldest revision first.
    fn scale_old_down(&self, new_replica_set: &Value, old: &[&Value], new_target: i64) {
        let (_, max_unavailable) = surge_and_unavailable(self.deployment, self.desired);
        let new_available = int(new_replica_set, "/status/availableReplicas");
        let old_spec: i64 = old
            .iter()
            .map(|replica_set| int(replica_set, "/spec/replicas"))
            .sum();
        let min_available = self.desired - max_unavailable;
        let new_unavailable = (new_target - new_available).max(0);
        let mut scale_down = if self.recreate {
            old_spec
        } else {
            (old_spec + new_target - min_available - new_unavailable).clamp(0, old_spec)
        };
        let mut old_sorted = old.to_vec();
        old_sorted.sort_by_key(|replica_set| revision(replica_set));
        for replica_set in &old_sorted {
            let current = int(replica_set, "/spec/replicas");
            let cut = current.min(scale_down);
            scale_down -= cut;
            let target = current - cut;
            if target == current {
                continue;
            }
            record_event(
                self.cluster,
                self.deployment,
                "Normal",
                "ScalingReplicaSet",
                &format!(
                    "Scaled down replica set {} from {current} to {target}",
                    meta::name(replica_set)
                ),
                MANAGER,
            );
            let written = self.cluster.modify(
                "apps",
                "replicasets",
                self.namespace,
                meta::name(replica_set),
                None,
                MANAGER,
                |object| {
                    object["spec"]["replicas"] = json!(target);
                    true
                },
            );
            log_err("deployment", "scale old replicaset", written);
        }
    }

    /// Deletes the oldest idle old ReplicaSets beyond `revisionHistoryLimit` (10); false
    /// when ReplicaSets are not served (the pass ends there).
    fn prune_idle(&self, old: &[&Value]) -> bool {
        let limit = self
            .deployment
            .pointer("/spec/revisionHistoryLimit")
            .and_then(Value::as_i64)
            .unwrap_or(10)
            .max(0) as usize;
        let mut idle: Vec<&Value> = old
            .iter()
            .filter(|replica_set| {
                int(replica_set, "/spec/replicas") == 0 && int(replica_set, "/status/replicas") == 0
            })
            .copied()
            .collect();
        if idle.len() <= limit {
            return true;
        }
        idle.sort_by_key(|replica_set| revision(replica_set));
        for replica_set in idle.iter().take(idle.len() - limit) {
            let Some(resource) = self.cluster.resource("apps", "replicasets") else {
                return false;
            };
            let deleted = self.cluster.delete(
                &resource,
                self.namespace,
                meta::name(replica_set),
                &DeleteOptions::default(),
            );
            log_err("deployment", "prune replicaset", deleted);
        }
        true
    }

    /// Writes the status from the ReplicaSets as they are now: the counts,
    /// observedGeneration, and the Available and Progressing conditions.
    fn write_status(&self, new_name: &str) {
        let desired = self.desired;
        let sets = self.replica_sets();
        let sum = |pointer: &str| {
            sets.iter()
                .map(|replica_set| int(replica_set, pointer))
                .sum::<i64>()
        };
        let (replicas, ready, available) = (
            sum("/status/replicas"),
            sum("/status/readyReplicas"),
            sum("/status/availableReplicas"),
        );
        let updated = sets
            .iter()
            .find(|replica_set| meta::name(replica_set) == new_name)
            .map(|replica_set| int(replica_set, "/status/replicas"))
            .unwrap_or(0);
        let min_available = desired - max_unavailable(self.deployment, desired);
        let now = meta::now();
        let (available_status, available_reason, available_message) = if available >= min_available
        {
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
        let (progress_reason, progress_message) = if complete {
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
        let generation = int(self.deployment, "/metadata/generation");
        let name = meta::name(self.deployment);
        let write = |object: &mut Value| {
            let before = object.get("status").cloned();
            let mut status = object
                .get("status")
                .cloned()
                .filter(Value::is_object)
                .unwrap_or(json!({}));
            status["observedGeneration"] = json!(generation);
            // DeploymentStatus: every count is omitempty.
            set_count(&mut status, "replicas", replicas);
            set_count(&mut status, "updatedReplicas", updated);
            set_count(&mut status, "readyReplicas", ready);
            set_count(&mut status, "availableReplicas", available);
            set_count(
                &mut status,
                "unavailableReplicas",
                (desired - available).max(0),
            );
            object["status"] = status;
            set_condition(
                object,
                json!({"type": "Available", "status": available_status, "reason": available_reason, "message": available_message, "lastUpdateTime": now, "lastTransitionTime": now}),
            );
            set_condition(
                object,
                json!({"type": "Progressing", "status": "True", "reason": progress_reason, "message": progress_message, "lastUpdateTime": now, "lastTransitionTime": now}),
            );
            object.get("status").cloned() != before
        };
        let written = self.cluster.modify(
            "apps",
            "deployments",
            self.namespace,
            name,
            Some(Subresource::Status),
            MANAGER,
            write,
        );
        log_err("deployment", "status", written);
    }
}

/// Writes a workload controller's `status` (counts and observedGeneration) to the `apps`
/// object `plural/ns/name` as `manager`, keeping the conditions already there; no write when
/// nothing changed.
pub fn write_counts_status(
    cluster: &Cluster,
    plural: &str,
    ns: &str,
    name: &str,
    manager: &str,
    status: &Value,
) {
    log_err(
        manager,
        "status",
        cluster.modify(
            "apps",
            plural,
            ns,
            name,
            Some(Subresource::Status),
            manager,
            |object| {
                let mut s = status.clone();
                if let Some(conds) = object.pointer("/status/conditions") {
                    s["conditions"] = conds.clone();
                }
                if object.get("status") == Some(&s) {
                    return false;
                }
                object["status"] = s;
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
        let header = template_hash(&t);
        assert_eq!(header, template_hash(&t));
        assert!(header.bytes().all(|byte| SAFE.contains(&byte)));
        assert_ne!(header, template_hash(&json!({"spec": {}})));
    }
}
