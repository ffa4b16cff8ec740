//! DaemonSets, as kube-controller-manager's daemon controller runs them: one pod on each node
//! that the pod template fits (nodeSelector, required node affinity, taints against the
//! template's tolerations), bound through the scheduler by a node-name affinity term, the
//! controller's default tolerations added (an unschedulable or not-ready node still gets its
//! pod), `controller-revision-hash` and `pod-template-generation` labels, a rolling update
//! that replaces out-of-date pods within `maxUnavailable` (default 1) node by node, OnDelete
//! honoured, and the status `kubectl rollout status daemonset` reads.

use super::super::cluster::Cluster;
use super::super::meta;
use super::controller::{log_err, record_event, Controller};
use super::nodes::{misfit_with, Misfit};
use super::workloads::{
    controlled_by, controller_ref, pod_ready, set_count, template_hash, write_counts_status,
};
use jiff::Timestamp;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Runs DaemonSets.
pub struct DaemonSetController;

/// The label naming the template generation a daemon pod was made from.
pub const POD_TEMPLATE_GENERATION: &str = "pod-template-generation";
/// The label naming the template revision a daemon pod was made from.
pub const CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";

/// The tolerations the daemon controller adds to every daemon pod (k8s.io/kubernetes
/// `pkg/controller/daemon/util.AddOrUpdateDaemonPodTolerations`); with `host_network` also
/// `network-unavailable`.
pub fn default_tolerations(host_network: bool) -> Vec<Value> {
    let mut out = vec![
        json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}),
        json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}),
        json!({"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}),
    ];
    if host_network {
        out.push(json!({"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"}));
    }
    out
}

/// The template's pod spec with the controller's default tolerations added (those the
/// template already has by key and effect are kept as written).
pub fn daemon_pod_spec(ds: &Value) -> Value {
    let mut spec = ds
        .pointer("/spec/template/spec")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or(json!({}));
    let host_network = spec.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    let mut tolerations: Vec<Value> = spec
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for default_toleration in default_tolerations(host_network) {
        let same = |object: &Value| {
            meta::str_at(object, "/key") == meta::str_at(&default_toleration, "/key")
                && meta::str_at(object, "/effect") == meta::str_at(&default_toleration, "/effect")
        };
        if !tolerations.iter().any(same) {
            tolerations.push(default_toleration);
        }
    }
    spec["tolerations"] = json!(tolerations);
    spec
}

/// Whether a daemon pod belongs on `node` (the daemon controller's `NodeShouldRunDaemonPod`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The node fits: it should run a pod.
    Run,
    /// The node no longer fits for scheduling (a NoSchedule taint it does not tolerate), but
    /// a pod already there keeps running.
    KeepIfRunning,
    /// The node does not fit (selector, affinity or an untolerated NoExecute taint): no pod.
    None,
}

/// Decides where a daemon pod with `spec` (from [`daemon_pod_spec`]) belongs: the node
/// selector and required node affinity must match, and every NoSchedule and NoExecute taint
/// be tolerated; a node whose only untolerated taints are NoSchedule keeps a pod it has.
pub fn placement(spec: &Value, node: &Value) -> Placement {
    let pod = json!({"spec": spec});
    match misfit_with(&pod, node) {
        None => Placement::Run,
        Some(Misfit::Selector) => Placement::None,
        Some(Misfit::Taint) => {
            let continues = spec
                .get("tolerations")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let no_execute_tolerated = node
                .pointer("/spec/taints")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|t| meta::str_at(t, "/effect") == "NoExecute")
                .all(|taint| {
                    continues
                        .iter()
                        .any(|tol| super::taints::tolerates(tol, taint))
                });
            if no_execute_tolerated {
                Placement::KeepIfRunning
            } else {
                Placement::None
            }
        }
    }
}

/// `spec.updateStrategy.rollingUpdate.maxUnavailable` resolved against the desired number
/// of pods (an int or a percentage rounded up, as the daemon controller); at least 1 when
/// the strategy would otherwise allow none.
pub fn max_unavailable(ds: &Value, desired: i64) -> i64 {
    let count = match ds.pointer("/spec/updateStrategy/rollingUpdate/maxUnavailable") {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(1),
        Some(Value::String(text)) => match text.strip_suffix('%').map(str::parse::<i64>) {
            Some(Ok(percent)) => (desired * percent + 99) / 100,
            _ => text.parse().unwrap_or(1),
        },
        _ => 1,
    };
    count.max(1)
}

/// The node a daemon pod is for: `spec.nodeName` once bound, else its node-name affinity.
fn target_node(pod: &Value) -> String {
    let bound = meta::str_at(pod, "/spec/nodeName");
    if !bound.is_empty() {
        return bound.to_string();
    }
    pod.pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchFields/0/values/0")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn terminating(p: &Value) -> bool {
    p.pointer("/metadata/deletionTimestamp").is_some()
}

/// The pod the controller creates for `node`.
fn pod_for(ds: &Value, node: &str, revision: &str) -> Value {
    let name = meta::name(ds);
    let mut md = ds
        .pointer("/spec/template/metadata")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or(json!({}));
    if let Some(map) = md.as_object_mut() {
        map.remove("name");
    }
    md["generateName"] = json!(format!("{name}-"));
    md["namespace"] = json!(meta::namespace(ds));
    if !md.get("labels").map(Value::is_object).unwrap_or(false) {
        md["labels"] = json!({});
    }
    md["labels"][CONTROLLER_REVISION_HASH] = json!(revision);
    let generation = ds
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    md["labels"][POD_TEMPLATE_GENERATION] = json!(generation.to_string());
    md["ownerReferences"] = json!([controller_ref(ds)]);
    let mut spec = daemon_pod_spec(ds);
    // As ReplaceDaemonSetPodNodeNameNodeAffinity: the required terms become the one term
    // naming the node; preferred terms stay.
    if !spec.get("affinity").map(Value::is_object).unwrap_or(false) {
        spec["affinity"] = json!({});
    }
    if !spec["affinity"]
        .get("nodeAffinity")
        .map(Value::is_object)
        .unwrap_or(false)
    {
        spec["affinity"]["nodeAffinity"] = json!({});
    }
    spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = json!({
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
    });
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec})
}

impl Controller for DaemonSetController {
    fn name(&self) -> &'static str {
        "daemonset"
    }
    fn reconcile(&mut self, cluster: &Cluster, _now: Timestamp) {
        let (sets, _) = cluster.store.list("apps/daemonsets", None);
        if sets.is_empty() {
            return;
        }
        let (pods, _) = cluster.store.list("/pods", None);
        let (nodes, _) = cluster.store.list("/nodes", None);
        for ds in sets.iter().filter(|set| !terminating(set)) {
            reconcile_daemon_set(cluster, ds, &pods, &nodes);
        }
    }
}

/// One DaemonSet's pass, what its steps share.
struct DaemonPass<'a> {
    cluster: &'a Cluster,
    daemon_set: &'a Value,
    namespace: &'a str,
    /// The template hash up-to-date pods carry as `controller-revision-hash`.
    revision: String,
}

/// The counts of a pass, for the status; `unavailable` (desired nodes without an available
/// pod) is the rolling update's budget too.
#[derive(Default)]
struct DaemonCounts {
    desired: i64,
    current: i64,
    misscheduled: i64,
    ready: i64,
    updated: i64,
    unavailable: i64,
}

/// One pass over a DaemonSet: per node, the pod that should run there is created and the
/// others deleted; pods of missing nodes are deleted; out-of-date pods are rolled; the
/// status is written.
fn reconcile_daemon_set(cluster: &Cluster, daemon_set: &Value, pods: &[Value], nodes: &[Value]) {
    let (namespace, uid) = (meta::namespace(daemon_set), meta::uid_of(daemon_set));
    let pass = DaemonPass {
        cluster,
        daemon_set,
        namespace,
        revision: template_hash(daemon_set.pointer("/spec/template").unwrap_or(&Value::Null)),
    };
    let spec = daemon_pod_spec(daemon_set);
    let mut by_node: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for pod in pods
        .iter()
        .filter(|pod| meta::namespace(pod) == namespace && controlled_by(pod, uid))
    {
        by_node.entry(target_node(pod)).or_default().push(pod);
    }
    let mut counts = DaemonCounts::default();
    // Out-of-date pods that may be replaced, with whether each is available.
    let mut outdated: Vec<(&Value, bool)> = Vec::new();
    for node in nodes {
        let here = by_node.get(meta::name(node)).cloned().unwrap_or_default();
        pass.place(&spec, node, here, &mut counts, &mut outdated);
    }
    // Pods on nodes that are gone (no Node object) are misscheduled and deleted.
    for (node_name, here) in &by_node {
        if nodes.iter().any(|node| meta::name(node) == node_name) || node_name.is_empty() {
            continue;
        }
        for pod in here.iter().filter(|pod| !terminating(pod)) {
            pass.delete(pod, "delete pod of a missing node");
        }
    }
    if meta::str_at(daemon_set, "/spec/updateStrategy/type") != "OnDelete" {
        pass.roll(outdated, &mut counts);
    }
    pass.write_status(&counts);
}

impl DaemonPass<'_> {
    /// Deletes one of its pods (`why` names the write in logs).
    fn delete(&self, pod: &Value, why: &str) {
        let pod_name = meta::name(pod);
        let deleted = self
            .cluster
            .delete_internal("", "pods", self.namespace, pod_name, None);
        if log_err("daemonset", why, deleted).is_some() {
            record_event(
                self.cluster,
                self.daemon_set,
                "Normal",
                "SuccessfulDelete",
                &format!("Deleted pod: {pod_name}"),
                "daemonset-controller",
            );
        }
    }

    /// The pods of one node (`here`): a failed one is deleted (and replaced); where the
    /// node fits, the oldest is kept (or one created) and the others deleted; where it does
    /// not, they are misscheduled and deleted (a new NoSchedule taint keeps a running one).
    fn place<'pod>(
        &self,
        spec: &Value,
        node: &Value,
        mut here: Vec<&'pod Value>,
        counts: &mut DaemonCounts,
        outdated: &mut Vec<(&'pod Value, bool)>,
    ) {
        // A failed daemon pod is deleted and replaced (as the daemon controller does).
        for pod in here
            .iter()
            .filter(|pod| !terminating(pod) && meta::str_at(pod, "/status/phase") == "Failed")
        {
            self.delete(pod, "delete failed pod");
        }
        here.retain(|pod| !terminating(pod) && meta::str_at(pod, "/status/phase") != "Failed");
        here.sort_by_key(|pod| meta::str_at(pod, "/metadata/creationTimestamp").to_string());
        match placement(spec, node) {
            Placement::Run => {}
            // A new NoSchedule taint: the pod there stays, counted as misscheduled (as
            // upstream, whose status counts only nodes that should run a pod as desired).
            Placement::KeepIfRunning => {
                if let Some((_, extra)) = here.split_first() {
                    counts.misscheduled += 1;
                    for pod in extra {
                        self.delete(pod, "delete surplus pod");
                    }
                }
                return;
            }
            Placement::None => {
                if !here.is_empty() {
                    counts.misscheduled += 1;
                }
                for pod in &here {
                    self.delete(pod, "delete pod on a node that does not fit");
                }
                return;
            }
        }
        counts.desired += 1;
        let Some((keep, extra)) = here.split_first() else {
            counts.unavailable += 1;
            let pod = pod_for(self.daemon_set, meta::name(node), &self.revision);
            let created = self.cluster.create_internal(
                "",
                "pods",
                self.namespace,
                pod,
                "daemonset-controller",
            );
            if let Some(created) = log_err("daemonset", "create pod", created) {
                record_event(
                    self.cluster,
                    self.daemon_set,
                    "Normal",
                    "SuccessfulCreate",
                    &format!("Created pod: {}", meta::name(&created)),
                    "daemonset-controller",
                );
            }
            return;
        };
        counts.current += 1;
        for pod in extra {
            self.delete(pod, "delete surplus pod");
        }
        let is_ready = pod_ready(keep);
        if is_ready {
            counts.ready += 1;
        } else {
            counts.unavailable += 1;
        }
        if meta::str_at(keep, "/metadata/labels/controller-revision-hash") == self.revision {
            counts.updated += 1;
        } else {
            outdated.push((keep, is_ready));
        }
    }

    /// Rolling update (maxSurge 0): an unavailable out-of-date pod is replaced at once, an
    /// available one only while fewer than maxUnavailable pods are unavailable.
    fn roll(&self, outdated: Vec<(&Value, bool)>, counts: &mut DaemonCounts) {
        let budget = max_unavailable(self.daemon_set, counts.desired);
        for (pod, available) in outdated {
            if !available {
                self.delete(pod, "replace unavailable out-of-date pod");
            } else if counts.unavailable < budget {
                counts.unavailable += 1;
                self.delete(pod, "replace out-of-date pod");
            }
        }
    }

    fn write_status(&self, counts: &DaemonCounts) {
        let generation = self
            .daemon_set
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        // DaemonSetStatus: the first four counts always, the rest omitempty.
        let mut status = json!({"currentNumberScheduled": counts.current, "numberMisscheduled": counts.misscheduled,
            "desiredNumberScheduled": counts.desired, "numberReady": counts.ready, "observedGeneration": generation});
        set_count(&mut status, "updatedNumberScheduled", counts.updated);
        set_count(&mut status, "numberAvailable", counts.ready);
        set_count(
            &mut status,
            "numberUnavailable",
            (counts.desired - counts.ready).max(0),
        );
        let name = meta::name(self.daemon_set);
        write_counts_status(
            self.cluster,
            "daemonsets",
            self.namespace,
            name,
            "daemonset-controller",
            &status,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, labels: Value, taints: Value, unschedulable: bool) -> Value {
        json!({"metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints, "unschedulable": unschedulable}})
    }

    fn ds(template_spec: Value) -> Value {
        json!({"metadata": {"name": "agent", "namespace": "chaos", "uid": "u1", "generation": 3},
            "spec": {"template": {"metadata": {"labels": {"app": "agent"}}, "spec": template_spec}}})
    }

    // docs/design/localkube.md "What the in-cluster fault agent needs": a DaemonSet pod goes
    // to every node its template fits; a taint it does not tolerate keeps it off, a
    // nodeSelector too, and an unschedulable (cordoned) node still gets it.
    #[test]
    fn placement_follows_selector_taints_and_tolerations() {
        let plain = ds(json!({"containers": [{"name": "a", "image": "i"}]}));
        let spec = daemon_pod_spec(&plain);
        let open = node("a", json!({"zone": "x"}), json!([]), false);
        let cordoned = node("b", json!({}), json!([]), true);
        let no_schedule = node(
            "c",
            json!({}),
            json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]),
            false,
        );
        let no_execute = node(
            "d",
            json!({}),
            json!([{"key": "dedicated", "value": "db", "effect": "NoExecute"}]),
            false,
        );
        let prefer = node(
            "e",
            json!({}),
            json!([{"key": "k", "effect": "PreferNoSchedule"}]),
            false,
        );
        assert_eq!(placement(&spec, &open), Placement::Run);
        assert_eq!(placement(&spec, &cordoned), Placement::Run);
        assert_eq!(placement(&spec, &no_schedule), Placement::KeepIfRunning);
        assert_eq!(placement(&spec, &no_execute), Placement::None);
        assert_eq!(placement(&spec, &prefer), Placement::Run);

        let tolerant = daemon_pod_spec(&ds(json!({
            "containers": [{"name": "a", "image": "i"}],
            "tolerations": [{"key": "dedicated", "operator": "Exists"}]
        })));
        assert_eq!(placement(&tolerant, &no_schedule), Placement::Run);
        assert_eq!(placement(&tolerant, &no_execute), Placement::Run);

        let selective = daemon_pod_spec(&ds(json!({
            "containers": [{"name": "a", "image": "i"}],
            "nodeSelector": {"zone": "x"}
        })));
        assert_eq!(placement(&selective, &open), Placement::Run);
        assert_eq!(placement(&selective, &cordoned), Placement::None);

        let affine = daemon_pod_spec(&ds(json!({
            "containers": [{"name": "a", "image": "i"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["x"]}]}]}}}
        })));
        assert_eq!(placement(&affine, &open), Placement::Run);
        assert_eq!(placement(&affine, &no_execute), Placement::None);
    }

    #[test]
    fn daemon_pods_name_their_node_and_revision() {
        let d = ds(
            json!({"containers": [{"name": "a", "image": "i"}], "hostNetwork": true,
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": []}]}}}}),
        );
        let pod = pod_for(&d, "site-a", "abc");
        assert_eq!(pod["metadata"]["generateName"], "agent-");
        assert_eq!(pod["metadata"]["labels"]["app"], "agent");
        assert_eq!(pod["metadata"]["labels"][CONTROLLER_REVISION_HASH], "abc");
        assert_eq!(pod["metadata"]["labels"][POD_TEMPLATE_GENERATION], "3");
        assert_eq!(pod["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(target_node(&pod), "site-a");
        let tolerations = pod["spec"]["tolerations"].as_array().unwrap();
        assert!(tolerations
            .iter()
            .any(|t| t["key"] == "node.kubernetes.io/unschedulable"));
        assert!(tolerations
            .iter()
            .any(|t| t["key"] == "node.kubernetes.io/network-unavailable"));
    }

    #[test]
    fn max_unavailable_is_one_by_default_and_resolves_percentages() {
        let mut d = ds(json!({}));
        assert_eq!(max_unavailable(&d, 5), 1);
        d["spec"]["updateStrategy"] = json!({"rollingUpdate": {"maxUnavailable": 2}});
        assert_eq!(max_unavailable(&d, 5), 2);
        d["spec"]["updateStrategy"] = json!({"rollingUpdate": {"maxUnavailable": "50%"}});
        assert_eq!(max_unavailable(&d, 5), 3);
        d["spec"]["updateStrategy"] = json!({"rollingUpdate": {"maxUnavailable": 0}});
        assert_eq!(max_unavailable(&d, 5), 1);
    }
}
