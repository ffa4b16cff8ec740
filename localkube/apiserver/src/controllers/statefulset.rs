//! StatefulSets: ordered pods `<name>-<ordinal>` with stable names, hostnames and PVCs from
//! volumeClaimTemplates (retained when pods go), OrderedReady or Parallel management,
//! rolling updates from the highest ordinal, and status.

use super::super::cluster::Cluster;
use super::super::meta;
use super::super::registry::Subresource;
use super::controller::{log_err, record_event, Controller};
use super::workloads::{controlled_by, controller_ref, pod_ready, set_count, template_hash};
use jiff::Timestamp;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Runs StatefulSets.
pub struct StatefulSetController;

fn running_ready(p: &Value) -> bool {
    meta::str_at(p, "/status/phase") == "Running"
        && pod_ready(p)
        && p.pointer("/metadata/deletionTimestamp").is_none()
}

fn pod_for(sts: &Value, ordinal: i64, revision: &str) -> Value {
    let name = meta::name(sts);
    let pod_name = format!("{name}-{ordinal}");
    let template = sts.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let mut md = template
        .get("metadata")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or(json!({}));
    md["name"] = json!(pod_name);
    md["namespace"] = json!(meta::namespace(sts));
    if !md.get("labels").map(Value::is_object).unwrap_or(false) {
        md["labels"] = json!({});
    }
    md["labels"]["statefulset.kubernetes.io/pod-name"] = json!(pod_name);
    md["labels"]["apps.kubernetes.io/pod-index"] = json!(ordinal.to_string());
    md["labels"]["controller-revision-hash"] = json!(revision);
    md["ownerReferences"] = json!([controller_ref(sts)]);
    let mut spec = template.get("spec").cloned().unwrap_or(json!({}));
    spec["hostname"] = json!(pod_name);
    let service = meta::str_at(sts, "/spec/serviceName");
    if !service.is_empty() {
        spec["subdomain"] = json!(service);
    }
    let mut volumes: Vec<Value> = spec
        .get("volumes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for tpl in sts
        .pointer("/spec/volumeClaimTemplates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let vname = meta::name(tpl);
        volumes.retain(|value| meta::str_at(value, "/name") != vname);
        volumes.push(json!({"name": vname, "persistentVolumeClaim": {"claimName": format!("{vname}-{name}-{ordinal}")}}));
    }
    if !volumes.is_empty() {
        spec["volumes"] = json!(volumes);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec})
}

fn ensure_claims(cluster: &Cluster, sts: &Value, ordinal: i64) {
    let (ns, name) = (meta::namespace(sts), meta::name(sts));
    for tpl in sts
        .pointer("/spec/volumeClaimTemplates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let claim = format!("{}-{name}-{ordinal}", meta::name(tpl));
        if cluster
            .store
            .get("/persistentvolumeclaims", ns, &claim)
            .is_some()
        {
            continue;
        }
        let mut labels = tpl
            .pointer("/metadata/labels")
            .cloned()
            .filter(Value::is_object)
            .unwrap_or(json!({}));
        if let Some(map) = sts
            .pointer("/spec/selector/matchLabels")
            .and_then(Value::as_object)
        {
            for (key, value) in map {
                labels[key] = value.clone();
            }
        }
        let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": ns, "labels": labels},
            "spec": tpl.get("spec").cloned().unwrap_or(json!({}))});
        if let Some(created) = log_err(
            "statefulset",
            "create pvc",
            cluster.create_internal(
                "",
                "persistentvolumeclaims",
                ns,
                pvc,
                "statefulset-controller",
            ),
        ) {
            let storage = created
                .pointer("/spec/resources/requests/storage")
                .cloned()
                .unwrap_or(json!("1Gi"));
            let modes = created
                .pointer("/spec/accessModes")
                .cloned()
                .unwrap_or(json!(["ReadWriteOnce"]));
            log_err(
                "statefulset",
                "bind pvc",
                cluster.modify("", "persistentvolumeclaims", ns, &claim, Some(Subresource::Status), "persistentvolume-binder", |p| {
                    p["status"] = json!({"phase": "Bound", "accessModes": modes, "capacity": {"storage": storage}});
                    true
                }),
            );
        }
    }
}

impl Controller for StatefulSetController {
    fn name(&self) -> &'static str {
        "statefulset"
    }
    fn reconcile(&mut self, cluster: &Cluster, _now: Timestamp) {
        let (sets, _) = cluster.store.list("apps/statefulsets", None);
        let (pods, _) = cluster.store.list("/pods", None);
        for stateful_set in sets.iter().filter(|stateful_set| {
            stateful_set
                .pointer("/metadata/deletionTimestamp")
                .is_none()
        }) {
            reconcile_stateful_set(cluster, stateful_set, &pods);
        }
    }
}

/// One StatefulSet's pass, what its steps share.
struct StatefulSetPass<'a> {
    cluster: &'a Cluster,
    stateful_set: &'a Value,
    namespace: &'a str,
    name: &'a str,
    /// `spec.replicas` (1 when absent).
    replicas: i64,
    /// `podManagementPolicy: Parallel` (else OrderedReady: one pod at a time).
    parallel: bool,
    /// `<name>-<template hash>`: the `controller-revision-hash` of up-to-date pods.
    revision: String,
    /// The pods it controls, by ordinal.
    owned: BTreeMap<i64, &'a Value>,
}

/// One pass over a StatefulSet: create missing pods in order, scale down from the
/// highest ordinal, roll one out-of-date pod, write the status.
fn reconcile_stateful_set(cluster: &Cluster, stateful_set: &Value, pods: &[Value]) {
    let (namespace, name, uid) = (
        meta::namespace(stateful_set),
        meta::name(stateful_set),
        meta::uid_of(stateful_set),
    );
    let owned: BTreeMap<i64, &Value> = pods
        .iter()
        .filter(|pod| meta::namespace(pod) == namespace && controlled_by(pod, uid))
        .filter_map(|pod| {
            meta::name(pod)
                .strip_prefix(&format!("{name}-"))
                .and_then(|ordinal| ordinal.parse::<i64>().ok())
                .map(|ordinal| (ordinal, pod))
        })
        .collect();
    let pass = StatefulSetPass {
        cluster,
        stateful_set,
        namespace,
        name,
        replicas: stateful_set
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1),
        parallel: meta::str_at(stateful_set, "/spec/podManagementPolicy") == "Parallel",
        revision: format!(
            "{name}-{}",
            template_hash(
                stateful_set
                    .pointer("/spec/template")
                    .unwrap_or(&Value::Null)
            )
        ),
        owned,
    };
    pass.create_missing();
    let extra = pass.scale_down();
    pass.roll_one(&extra);
    pass.write_status();
}

impl StatefulSetPass<'_> {
    fn record(&self, reason: &str, message: &str) {
        record_event(
            self.cluster,
            self.stateful_set,
            "Normal",
            reason,
            message,
            "statefulset-controller",
        );
    }

    /// Creates missing pods in order (OrderedReady: one, after the ones below it are
    /// running and ready).
    fn create_missing(&self) {
        let name = self.name;
        for ordinal in 0..self.replicas {
            if let Some(pod) = self.owned.get(&ordinal) {
                if !self.parallel && !running_ready(pod) {
                    break;
                }
                continue;
            }
            ensure_claims(self.cluster, self.stateful_set, ordinal);
            let pod = pod_for(self.stateful_set, ordinal, &self.revision);
            let created = self.cluster.create_internal(
                "",
                "pods",
                self.namespace,
                pod,
                "statefulset-controller",
            );
            if log_err("statefulset", "create pod", created).is_some() {
                let message =
                    format!("create Pod {name}-{ordinal} in StatefulSet {name} successful");
                self.record("SuccessfulCreate", &message);
            }
            if !self.parallel {
                break;
            }
        }
    }

    /// Scales down from the highest ordinal (OrderedReady: one at a time, none while one
    /// is terminating); returns the ordinals beyond `replicas`.
    fn scale_down(&self) -> Vec<i64> {
        let name = self.name;
        let terminating = self
            .owned
            .values()
            .any(|pod| pod.pointer("/metadata/deletionTimestamp").is_some());
        let extra: Vec<i64> = self
            .owned
            .keys()
            .copied()
            .filter(|ordinal| *ordinal >= self.replicas)
            .rev()
            .collect();
        for ordinal in &extra {
            if !self.parallel && terminating {
                break;
            }
            let live = self
                .owned
                .get(ordinal)
                .map(|pod| pod.pointer("/metadata/deletionTimestamp").is_none())
                .unwrap_or(false);
            if live {
                let pod_name = format!("{name}-{ordinal}");
                let deleted =
                    self.cluster
                        .delete_internal("", "pods", self.namespace, &pod_name, None);
                if log_err("statefulset", "delete pod", deleted).is_some() {
                    let message =
                        format!("delete Pod {name}-{ordinal} in StatefulSet {name} successful");
                    self.record("SuccessfulDelete", &message);
                }
            }
            if !self.parallel {
                break;
            }
        }
        extra
    }

    /// Rolling update: replaces the highest out-of-date pod at or above the partition once
    /// all are running and ready (not with `OnDelete`, nor while scaling down).
    fn roll_one(&self, extra: &[i64]) {
        let stateful_set = self.stateful_set;
        let partition = stateful_set
            .pointer("/spec/updateStrategy/rollingUpdate/partition")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let on_delete = meta::str_at(stateful_set, "/spec/updateStrategy/type") == "OnDelete";
        let in_range: Vec<(&i64, &&Value)> = self
            .owned
            .iter()
            .filter(|(ordinal, _)| **ordinal < self.replicas)
            .collect();
        if on_delete
            || !extra.is_empty()
            || in_range.len() as i64 != self.replicas
            || !in_range.iter().all(|(_, pod)| running_ready(pod))
        {
            return;
        }
        let out_of_date = in_range.iter().rev().find(|(ordinal, pod)| {
            **ordinal >= partition
                && meta::str_at(pod, "/metadata/labels/controller-revision-hash") != self.revision
        });
        if let Some((ordinal, _)) = out_of_date {
            let pod_name = format!("{}-{ordinal}", self.name);
            let deleted = self
                .cluster
                .delete_internal("", "pods", self.namespace, &pod_name, None);
            log_err("statefulset", "update pod", deleted);
        }
    }

    /// Writes the status: counts of live, ready and up-to-date pods, the revisions.
    fn write_status(&self) {
        let revision = &self.revision;
        let live: Vec<&&Value> = self
            .owned
            .values()
            .filter(|pod| pod.pointer("/metadata/deletionTimestamp").is_none())
            .collect();
        let ready = live.iter().filter(|pod| pod_ready(pod)).count();
        let updated = live
            .iter()
            .filter(|pod| {
                meta::str_at(pod, "/metadata/labels/controller-revision-hash") == revision
            })
            .count();
        let generation = self
            .stateful_set
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let current_revision = if updated == live.len() {
            revision.clone()
        } else {
            meta::str_at(self.stateful_set, "/status/currentRevision").to_string()
        };
        // StatefulSetStatus: `replicas` and `availableReplicas` always; readyReplicas,
        // currentReplicas and updatedReplicas omitempty.
        let mut status = json!({"observedGeneration": generation, "replicas": live.len(), "availableReplicas": ready,
            "currentRevision": if current_revision.is_empty() { revision.clone() } else { current_revision },
            "updateRevision": revision, "collisionCount": 0});
        set_count(&mut status, "readyReplicas", ready as i64);
        set_count(&mut status, "currentReplicas", updated as i64);
        set_count(&mut status, "updatedReplicas", updated as i64);
        let write = |object: &mut Value| {
            if object.get("status") == Some(&status) {
                return false;
            }
            object["status"] = status.clone();
            true
        };
        let written = self.cluster.modify(
            "apps",
            "statefulsets",
            self.namespace,
            self.name,
            Some(Subresource::Status),
            "statefulset-controller",
            write,
        );
        log_err("statefulset", "status", written);
    }
}
