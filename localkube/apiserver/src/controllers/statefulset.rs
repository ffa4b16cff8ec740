//! StatefulSets: ordered pods `<name>-<ordinal>` with stable names, hostnames and PVCs from
//! volumeClaimTemplates (retained when pods go), OrderedReady or Parallel management,
//! rolling updates from the highest ordinal, and status.

use super::super::meta;
use super::super::ops::Cluster;
use super::super::registry::Subresource;
use super::manager::{log_err, record_event, Controller};
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
    let t = sts.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let mut md = t
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
    let mut spec = t.get("spec").cloned().unwrap_or(json!({}));
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
        volumes.retain(|v| meta::str_at(v, "/name") != vname);
        volumes.push(json!({"name": vname, "persistentVolumeClaim": {"claimName": format!("{vname}-{name}-{ordinal}")}}));
    }
    if !volumes.is_empty() {
        spec["volumes"] = json!(volumes);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec})
}

fn ensure_claims(c: &Cluster, sts: &Value, ordinal: i64) {
    let (ns, name) = (meta::namespace(sts), meta::name(sts));
    for tpl in sts
        .pointer("/spec/volumeClaimTemplates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let claim = format!("{}-{name}-{ordinal}", meta::name(tpl));
        if c.store.get("/persistentvolumeclaims", ns, &claim).is_some() {
            continue;
        }
        let mut labels = tpl
            .pointer("/metadata/labels")
            .cloned()
            .filter(Value::is_object)
            .unwrap_or(json!({}));
        if let Some(m) = sts
            .pointer("/spec/selector/matchLabels")
            .and_then(Value::as_object)
        {
            for (k, v) in m {
                labels[k] = v.clone();
            }
        }
        let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": ns, "labels": labels},
            "spec": tpl.get("spec").cloned().unwrap_or(json!({}))});
        if let Some(created) = log_err(
            "statefulset",
            "create pvc",
            c.create_internal(
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
                c.modify("", "persistentvolumeclaims", ns, &claim, Some(Subresource::Status), "persistentvolume-binder", |p| {
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
    fn reconcile(&mut self, c: &Cluster, _now: Timestamp) {
        let (sets, _) = c.store.list("apps/statefulsets", None);
        let (pods, _) = c.store.list("/pods", None);
        for sts in sets
            .iter()
            .filter(|s| s.pointer("/metadata/deletionTimestamp").is_none())
        {
            let (ns, name, uid) = (meta::namespace(sts), meta::name(sts), meta::uid_of(sts));
            let replicas = sts
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            let parallel = meta::str_at(sts, "/spec/podManagementPolicy") == "Parallel";
            let revision = format!(
                "{name}-{}",
                template_hash(sts.pointer("/spec/template").unwrap_or(&Value::Null))
            );
            let owned: BTreeMap<i64, &Value> = pods
                .iter()
                .filter(|p| meta::namespace(p) == ns && controlled_by(p, uid))
                .filter_map(|p| {
                    meta::name(p)
                        .strip_prefix(&format!("{name}-"))
                        .and_then(|o| o.parse::<i64>().ok())
                        .map(|o| (o, p))
                })
                .collect();
            // Create missing pods in order.
            for i in 0..replicas {
                match owned.get(&i) {
                    Some(p) => {
                        if !parallel && !running_ready(p) {
                            break;
                        }
                    }
                    None => {
                        ensure_claims(c, sts, i);
                        if log_err(
                            "statefulset",
                            "create pod",
                            c.create_internal(
                                "",
                                "pods",
                                ns,
                                pod_for(sts, i, &revision),
                                "statefulset-controller",
                            ),
                        )
                        .is_some()
                        {
                            record_event(
                                c,
                                sts,
                                "Normal",
                                "SuccessfulCreate",
                                &format!("create Pod {name}-{i} in StatefulSet {name} successful"),
                                "statefulset-controller",
                            );
                        }
                        if !parallel {
                            break;
                        }
                    }
                }
            }
            // Scale down from the highest ordinal.
            let terminating = owned
                .values()
                .any(|p| p.pointer("/metadata/deletionTimestamp").is_some());
            let extra: Vec<i64> = owned
                .keys()
                .copied()
                .filter(|o| *o >= replicas)
                .rev()
                .collect();
            for o in &extra {
                if !parallel && terminating {
                    break;
                }
                let live = owned
                    .get(o)
                    .map(|p| p.pointer("/metadata/deletionTimestamp").is_none())
                    .unwrap_or(false);
                if live
                    && log_err(
                        "statefulset",
                        "delete pod",
                        c.delete_internal("", "pods", ns, &format!("{name}-{o}"), None),
                    )
                    .is_some()
                {
                    record_event(
                        c,
                        sts,
                        "Normal",
                        "SuccessfulDelete",
                        &format!("delete Pod {name}-{o} in StatefulSet {name} successful"),
                        "statefulset-controller",
                    );
                }
                if !parallel {
                    break;
                }
            }
            // Rolling update: replace the highest out-of-date pod once all are ready.
            let partition = sts
                .pointer("/spec/updateStrategy/rollingUpdate/partition")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let on_delete = meta::str_at(sts, "/spec/updateStrategy/type") == "OnDelete";
            let in_range: Vec<(&i64, &&Value)> =
                owned.iter().filter(|(o, _)| **o < replicas).collect();
            if !on_delete
                && extra.is_empty()
                && in_range.len() as i64 == replicas
                && in_range.iter().all(|(_, p)| running_ready(p))
            {
                if let Some((o, _)) = in_range.iter().rev().find(|(o, p)| {
                    **o >= partition
                        && meta::str_at(p, "/metadata/labels/controller-revision-hash") != revision
                }) {
                    log_err(
                        "statefulset",
                        "update pod",
                        c.delete_internal("", "pods", ns, &format!("{name}-{o}"), None),
                    );
                }
            }
            let live: Vec<&&Value> = owned
                .values()
                .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
                .collect();
            let ready = live.iter().filter(|p| pod_ready(p)).count();
            let updated = live
                .iter()
                .filter(|p| {
                    meta::str_at(p, "/metadata/labels/controller-revision-hash") == revision
                })
                .count();
            let generation = sts
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let current_revision = if updated == live.len() {
                revision.clone()
            } else {
                meta::str_at(sts, "/status/currentRevision").to_string()
            };
            // StatefulSetStatus: `replicas` and `availableReplicas` always; readyReplicas,
            // currentReplicas and updatedReplicas omitempty.
            let mut status = json!({"observedGeneration": generation, "replicas": live.len(), "availableReplicas": ready,
                "currentRevision": if current_revision.is_empty() { revision.clone() } else { current_revision },
                "updateRevision": revision, "collisionCount": 0});
            set_count(&mut status, "readyReplicas", ready as i64);
            set_count(&mut status, "currentReplicas", updated as i64);
            set_count(&mut status, "updatedReplicas", updated as i64);
            log_err(
                "statefulset",
                "status",
                c.modify(
                    "apps",
                    "statefulsets",
                    ns,
                    name,
                    Some(Subresource::Status),
                    "statefulset-controller",
                    |o| {
                        if o.get("status") == Some(&status) {
                            return false;
                        }
                        o["status"] = status.clone();
                        true
                    },
                ),
            );
        }
    }
}
