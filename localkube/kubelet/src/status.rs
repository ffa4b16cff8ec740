//! The runtime's [`PodStatus`] as a Pod's `status`: phase, IPs, startTime, the conditions
//! PodScheduled/Initialized/ContainersReady/Ready, and container statuses with state,
//! lastState, ready, started, restartCount and exit codes.

use localkube_apiserver::meta;
use localkube_runtime::cgroups::container_id_uri;
use localkube_runtime::{ContainerState, ContainerStatus, PodPhase, PodStatus};
use serde_json::{json, Value};
use std::time::SystemTime;

fn time(t: SystemTime) -> String {
    jiff::Timestamp::try_from(t)
        .map(meta::time)
        .unwrap_or_default()
}

/// A container state; a terminated one names the instance's `containerID` (`id`).
fn state(s: &ContainerState, id: Option<&str>) -> Value {
    match s {
        ContainerState::Waiting { reason, message } => {
            let mut w = json!({"reason": reason});
            if !message.is_empty() {
                w["message"] = json!(message);
            }
            json!({"waiting": w})
        }
        ContainerState::Running { started_at } => {
            json!({"running": {"startedAt": time(*started_at)}})
        }
        ContainerState::Terminated {
            exit_code,
            signal,
            reason,
            started_at,
            finished_at,
        } => {
            let mut t = json!({"exitCode": exit_code, "reason": reason,
                "startedAt": time(*started_at), "finishedAt": time(*finished_at)});
            if let Some(sig) = signal {
                t["signal"] = json!(sig);
            }
            if let Some(id) = id {
                t["containerID"] = json!(container_id_uri(id));
            }
            json!({"terminated": t})
        }
    }
}

/// A container's status: `containerID` is the latest instance's (`containerd://<64 hex>`,
/// kept while it waits to restart, as kubelet reports it), absent before the first start.
fn container_status(c: &ContainerStatus) -> Value {
    let mut v = json!({
        "name": c.name,
        "image": c.image,
        "imageID": format!("localkube://{}", c.image),
        "ready": c.ready,
        "started": c.started,
        "restartCount": c.restart_count,
        "state": state(&c.state, c.container_id.as_deref()),
        "lastState": c.last_state.as_ref().map(|s| state(s, c.last_container_id.as_deref())).unwrap_or_else(|| json!({})),
    });
    if let Some(id) = &c.container_id {
        v["containerID"] = json!(container_id_uri(id));
    }
    v
}

fn phase(p: PodPhase) -> &'static str {
    match p {
        PodPhase::Pending => "Pending",
        PodPhase::Running => "Running",
        PodPhase::Succeeded => "Succeeded",
        PodPhase::Failed => "Failed",
    }
}

/// Sets a condition, keeping its lastTransitionTime while its status stays the same.
fn set_condition(conds: &mut Vec<Value>, ty: &str, ok: bool, reason: Option<&str>) {
    let status = if ok { "True" } else { "False" };
    if let Some(c) = conds.iter_mut().find(|c| meta::str_at(c, "/type") == ty) {
        if meta::str_at(c, "/status") != status {
            c["status"] = json!(status);
            c["lastTransitionTime"] = json!(meta::now());
        }
        match reason {
            Some(r) => c["reason"] = json!(r),
            None => {
                if let Some(o) = c.as_object_mut() {
                    o.remove("reason");
                }
            }
        }
        return;
    }
    let mut c = json!({"type": ty, "status": status, "lastProbeTime": null, "lastTransitionTime": meta::now()});
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    conds.push(c);
}

/// Writes the runtime's status into a Pod; returns whether anything changed.
pub fn apply(pod: &mut Value, s: &PodStatus) -> bool {
    let before = pod.get("status").cloned().unwrap_or(Value::Null);
    let mut st = before.clone();
    if !st.is_object() {
        st = json!({});
    }
    st["phase"] = json!(phase(s.phase));
    if let Some(ip) = s.pod_ip {
        st["podIP"] = json!(ip.to_string());
        st["podIPs"] = json!([{"ip": ip.to_string()}]);
    }
    if let Some(ip) = s.host_ip {
        st["hostIP"] = json!(ip.to_string());
        st["hostIPs"] = json!([{"ip": ip.to_string()}]);
    }
    if st.get("startTime").is_none() {
        st["startTime"] = json!(meta::now());
    }
    st["qosClass"] = json!("BestEffort");
    let initialized = s
        .init_container_statuses
        .iter()
        .all(|c| matches!(&c.state, ContainerState::Terminated { exit_code: 0, .. }));
    let containers_ready = s.ready && !s.stopped;
    let mut conds: Vec<Value> = st
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let done = matches!(s.phase, PodPhase::Succeeded | PodPhase::Failed);
    let not_ready = (!containers_ready).then_some(if done {
        "PodCompleted"
    } else {
        "ContainersNotReady"
    });
    set_condition(&mut conds, "PodReadyToStartContainers", !s.stopped, None);
    set_condition(
        &mut conds,
        "Initialized",
        initialized,
        (!initialized).then_some("ContainersNotInitialized"),
    );
    set_condition(&mut conds, "Ready", containers_ready, not_ready);
    set_condition(&mut conds, "ContainersReady", containers_ready, not_ready);
    set_condition(&mut conds, "PodScheduled", true, None);
    st["conditions"] = json!(conds);
    st["containerStatuses"] = json!(s
        .container_statuses
        .iter()
        .map(container_status)
        .collect::<Vec<_>>());
    if !s.init_container_statuses.is_empty() {
        st["initContainerStatuses"] = json!(s
            .init_container_statuses
            .iter()
            .map(container_status)
            .collect::<Vec<_>>());
    }
    if let Some(o) = st.as_object_mut() {
        o.remove("reason");
        o.remove("message");
    }
    // Timestamps of unchanged conditions are kept, so this compares content.
    if st == before {
        return false;
    }
    pod["status"] = st;
    true
}

/// A pod whose containers could not be configured (`CreateContainerConfigError`): Pending,
/// each container waiting with the reason and message.
pub fn config_error(pod: &mut Value, message: &str) -> bool {
    waiting(pod, "CreateContainerConfigError", Some(message))
}

/// A pod whose volumes could not be set up: Pending, each container waiting in
/// `ContainerCreating` without a message (kubelet tells why in a FailedMount event).
pub fn volume_setup_failed(pod: &mut Value) -> bool {
    waiting(pod, "ContainerCreating", None)
}

/// Pending, each container waiting with `reason` (and `message`).
fn waiting(pod: &mut Value, reason: &str, message: Option<&str>) -> bool {
    let names: Vec<(String, String)> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| {
                    (
                        meta::str_at(c, "/name").to_string(),
                        meta::str_at(c, "/image").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let mut state = json!({"reason": reason});
    if let Some(message) = message {
        state["message"] = json!(message);
    }
    let statuses: Vec<Value> = names
        .iter()
        .map(|(n, i)| json!({"name": n, "image": i, "imageID": "", "ready": false, "started": false, "restartCount": 0,
            "state": {"waiting": state}, "lastState": {}}))
        .collect();
    let before = pod.get("status").cloned().unwrap_or(Value::Null);
    let mut st = if before.is_object() {
        before.clone()
    } else {
        json!({})
    };
    st["phase"] = json!("Pending");
    st["containerStatuses"] = json!(statuses);
    let mut conds: Vec<Value> = st
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    set_condition(&mut conds, "Ready", false, Some("ContainersNotReady"));
    set_condition(
        &mut conds,
        "ContainersReady",
        false,
        Some("ContainersNotReady"),
    );
    set_condition(&mut conds, "PodScheduled", true, None);
    st["conditions"] = json!(conds);
    if st == before {
        return false;
    }
    pod["status"] = st;
    true
}

/// Marks a pod of a node whose kubelet stopped posting not Ready, as the node lifecycle
/// controller does once the node is NotReady: Ready False (reason `NodeNotReady`), the rest as
/// last posted. Returns whether anything changed.
pub fn node_not_ready(pod: &mut Value) -> bool {
    let Some(conds) = pod
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let ready = conds
        .iter()
        .any(|c| meta::str_at(c, "/type") == "Ready" && meta::str_at(c, "/status") == "True");
    if !ready {
        return false;
    }
    set_condition(conds, "Ready", false, Some("NodeNotReady"));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    // docs/design/localkube.md "Each node's kubelet is a process": the pods of a node whose
    // kubelet stopped posting are marked not Ready (as the node lifecycle controller marks
    // them), their other conditions and container statuses as last posted.
    #[test]
    fn a_pod_of_a_node_not_ready_is_marked_not_ready_once() {
        let mut pod = json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "PodScheduled", "status": "True"}
        ], "containerStatuses": [{"name": "main", "ready": true}]}});
        assert!(node_not_ready(&mut pod));
        let conds = &pod["status"]["conditions"];
        assert_eq!(conds[0]["status"], "False");
        assert_eq!(conds[0]["reason"], "NodeNotReady");
        assert_eq!(conds[1]["status"], "True");
        assert_eq!(pod["status"]["containerStatuses"][0]["ready"], true);
        assert!(!node_not_ready(&mut pod), "marked once");
        assert!(!node_not_ready(&mut json!({"status": {}})));
    }
}
