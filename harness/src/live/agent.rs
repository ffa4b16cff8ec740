//! The in-cluster fault agent's driver (`--fault-driver agent`): kill, freeze and partition
//! through the `bloodraven-chaos-agent` DaemonSet (chaos-agent/README.md), driven with
//! `pods/exec` through the API server only, the same way on every backend. The agent of the
//! target pod's node does the work and checks that it took effect; this driver picks the
//! agent, sends the request and keeps each agent's fault id for the heal.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::Client;
use serde_json::{json, Value};

use super::exec::{exec_collect, ExecTarget};
use super::faults::{DriverFault, FaultDriver};
use crate::error::{Error, Result};

/// The agent's namespace (`fixtures/playground/chaos-agent.yaml`).
pub const AGENT_NAMESPACE: &str = "bloodraven-chaos";
/// The agent's DaemonSet.
pub const AGENT_DAEMONSET: &str = "bloodraven-chaos-agent";
/// The agent pods' label selector.
pub const AGENT_SELECTOR: &str = "app.kubernetes.io/name=bloodraven-chaos-agent";
/// The agent's container.
pub const AGENT_CONTAINER: &str = "agent";
/// The agent's program.
pub const AGENT_BINARY: &str = "bloodraven-chaos-agent";
/// The namespaces whose pods a partition cuts (the agent may touch these only).
pub const PARTITIONED_NAMESPACES: [&str; 2] = [
    crate::playground::install::NAMESPACE,
    crate::playground::install::OPERATOR_NAMESPACE,
];
/// Bound on one request (a kill waits up to 5 s for the processes to go, a freeze for every
/// thread to stop).
const REQUEST_MAX: Duration = Duration::from_secs(60);

fn agent_error(action: impl Into<String>, reason: impl ToString) -> Error {
    Error::Cluster {
        action: action.into(),
        reason: reason.to_string(),
    }
}

/// The agent's answer to one request: its JSON, or the reason it gave (its stdout's
/// `{"error": ...}`, else its stderr, else the exec's status).
pub fn agent_answer(
    stdout: &[u8],
    stderr: &str,
    status: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>,
) -> std::result::Result<Value, String> {
    let text = String::from_utf8_lossy(stdout);
    let answer: Option<Value> = text
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .and_then(|line| serde_json::from_str(line).ok());
    if let Some(error) = answer
        .as_ref()
        .and_then(|answer| answer.get("error"))
        .and_then(Value::as_str)
    {
        return Err(error.to_owned());
    }
    match status {
        Some(status) if status.status.as_deref() == Some("Success") => {
            answer.ok_or_else(|| format!("the agent printed no JSON answer: {:.300}", text.trim()))
        }
        Some(status) => Err(format!(
            "{} {}",
            status.message.as_deref().unwrap_or("the agent failed"),
            stderr.trim()
        )),
        None => Err(format!(
            "the exec reported no status (stdout {:?}, stderr {:?}): the outcome is unknown",
            text.trim(),
            stderr.trim()
        )),
    }
}

/// The requests that cut `side_a`'s pods from `side_b`'s: every pod with an IP on one side
/// gets the other side's pods as peers (`peerPods`: the agent cuts them at their addresses as
/// they are for as long as the partition stands, so a peer made again under another IP stays
/// cut; it also cuts the pod itself again when it is made again under its name on that node).
/// `pods` are (node, namespace, pod, IP) of the pods to cut, host-network pods left out by the
/// caller. Returned as (node, request).
pub fn partition_requests(
    pods: &[(String, String, String, String)],
    side_a: &[String],
    side_b: &[String],
) -> Vec<(String, Value)> {
    let on = |side: &[String]| -> Vec<&(String, String, String, String)> {
        pods.iter()
            .filter(|(node, ..)| side.iter().any(|n| n == node))
            .collect()
    };
    let (a, b) = (on(side_a), on(side_b));
    let mut requests = Vec::new();
    for (mine, theirs) in [(&a, &b), (&b, &a)] {
        let peer_pods: Vec<Value> = theirs
            .iter()
            .map(|(_, namespace, pod, _)| json!({"namespace": namespace, "pod": pod}))
            .collect();
        if peer_pods.is_empty() {
            continue;
        }
        for (node, namespace, pod, _) in mine.iter() {
            requests.push((
                node.clone(),
                json!({"partition": {"namespace": namespace, "pod": pod, "peerPods": peer_pods}}),
            ));
        }
    }
    requests
}

/// Drives the in-cluster fault agent.
pub struct AgentDriver {
    client: Client,
    handle: tokio::runtime::Handle,
}

impl std::fmt::Debug for AgentDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentDriver").finish_non_exhaustive()
    }
}

impl AgentDriver {
    /// A driver over `client`, running its requests on `handle`'s runtime.
    pub fn new(client: Client, handle: tokio::runtime::Handle) -> Self {
        Self { client, handle }
    }

    /// The ready agent pod on `node`.
    async fn agent_on(&self, node: &str) -> Result<String> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), AGENT_NAMESPACE);
        let list = pods
            .list(&ListParams::default().labels(AGENT_SELECTOR))
            .await
            .map_err(|e| agent_error("list the fault agent's pods", e))?;
        list.into_iter()
            .find(|pod| {
                pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
                    && pod.metadata.deletion_timestamp.is_none()
                    && pod.status.as_ref().is_some_and(|status| {
                        status.conditions.iter().flatten().any(|condition| {
                            condition.type_ == "Ready" && condition.status == "True"
                        })
                    })
            })
            .and_then(|pod| pod.metadata.name)
            .ok_or_else(|| {
                agent_error(
                    format!("find the fault agent on node {node}"),
                    format!(
                        "no ready pod of DaemonSet {AGENT_NAMESPACE}/{AGENT_DAEMONSET} runs there"
                    ),
                )
            })
    }

    /// The node `namespace/pod` runs on.
    async fn node_of(&self, namespace: &str, pod: &str) -> Result<String> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        pods.get(pod)
            .await
            .map_err(|e| agent_error(format!("read pod {namespace}/{pod}"), e))?
            .spec
            .and_then(|spec| spec.node_name)
            .ok_or_else(|| {
                agent_error(
                    format!("find the node of {namespace}/{pod}"),
                    "the pod is not scheduled",
                )
            })
    }

    /// Sends `request` to the agent on `node`; its answer.
    async fn request(&self, node: &str, request: &Value) -> Result<Value> {
        let agent = self.agent_on(node).await?;
        let action = format!(
            "ask the fault agent on {node} to {}",
            request
                .as_object()
                .and_then(|o| o.keys().next().cloned())
                .unwrap_or_default()
        );
        let output = exec_collect(
            &self.client,
            ExecTarget {
                namespace: AGENT_NAMESPACE,
                pod: &agent,
                container: AGENT_CONTAINER,
            },
            vec![
                AGENT_BINARY.to_owned(),
                "ctl".to_owned(),
                request.to_string(),
            ],
            None,
            REQUEST_MAX,
        )
        .await
        .map_err(|e| agent_error(&action, e))?;
        agent_answer(&output.stdout, &output.stderr, output.status.as_ref())
            .map_err(|reason| agent_error(action, reason))
    }

    async fn container_fault(
        &self,
        verb: &str,
        namespace: &str,
        pod: &str,
        request: Value,
    ) -> Result<DriverFault> {
        let node = self.node_of(namespace, pod).await?;
        let answer = self.request(&node, &json!({ verb: request })).await?;
        let id = answer["id"].as_u64().ok_or_else(|| {
            agent_error(
                format!("{verb} {namespace}/{pod}"),
                format!("the agent's answer has no fault id: {answer}"),
            )
        })?;
        tracing::info!(verb, namespace, pod, node, id, effect = %answer["effect"], "fault agent: started");
        Ok(DriverFault {
            id: Some(id),
            agent_faults: vec![(node, id)],
        })
    }

    async fn partition_async(&self, side_a: &[String], side_b: &[String]) -> Result<DriverFault> {
        let mut pods = Vec::new();
        for namespace in PARTITIONED_NAMESPACES {
            let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
            let list = api
                .list(&ListParams::default())
                .await
                .map_err(|e| agent_error(format!("list the pods of {namespace}"), e))?;
            for pod in list {
                let host_network = pod
                    .spec
                    .as_ref()
                    .and_then(|spec| spec.host_network)
                    .unwrap_or(false);
                let node = pod.spec.as_ref().and_then(|spec| spec.node_name.clone());
                let ip = pod.status.as_ref().and_then(|status| status.pod_ip.clone());
                if let (false, Some(node), Some(ip), Some(name)) =
                    (host_network, node, ip, pod.metadata.name)
                {
                    pods.push((node, namespace.to_owned(), name, ip));
                }
            }
        }
        let requests = partition_requests(&pods, side_a, side_b);
        if requests.is_empty() {
            return Err(agent_error(
                "partition the sites",
                format!("no pod with an IP on both sides ({side_a:?} | {side_b:?})"),
            ));
        }
        let mut started = DriverFault::default();
        for (node, request) in requests {
            match self.request(&node, &request).await {
                Ok(answer) => match answer["id"].as_u64() {
                    Some(id) => started.agent_faults.push((node, id)),
                    None => {
                        self.end_all(&started).await;
                        return Err(agent_error(
                            "partition the sites",
                            format!("the agent's answer has no fault id: {answer}"),
                        ));
                    }
                },
                Err(error) => {
                    // Half a partition is not the fault asked for: undo what was cut.
                    self.end_all(&started).await;
                    return Err(error);
                }
            }
        }
        tracing::info!(
            parts = started.agent_faults.len(),
            "fault agent: partition in effect"
        );
        Ok(started)
    }

    /// Ends every part of `fault`, each at its agent; the first failure, after trying all.
    async fn end_parts(&self, fault: &DriverFault) -> Result<()> {
        let mut first_error = None;
        for (node, id) in &fault.agent_faults {
            if let Err(error) = self.request(node, &json!({"end": {"id": id}})).await {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    async fn end_all(&self, fault: &DriverFault) {
        if let Err(error) = self.end_parts(fault).await {
            tracing::warn!(%error, "failed to undo part of a fault the agent started");
        }
    }

    /// Undoes every fault of every agent and checks none is left (the uninstall's check):
    /// the faults each agent still listed, by node, as the error.
    pub async fn cleanup_all(&self) -> Result<()> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), AGENT_NAMESPACE);
        let list = match pods
            .list(&ListParams::default().labels(AGENT_SELECTOR))
            .await
        {
            Ok(list) => list,
            // No agent installed: nothing it could have left.
            Err(kube::Error::Api(response)) if response.code == 404 => return Ok(()),
            Err(error) => return Err(agent_error("list the fault agent's pods", error)),
        };
        let mut left: BTreeMap<String, String> = BTreeMap::new();
        for node in list
            .iter()
            .filter_map(|pod| pod.spec.as_ref().and_then(|s| s.node_name.clone()))
        {
            let cleaned = self.request(&node, &json!({"cleanup": {}})).await;
            let listed = self.request(&node, &json!({"list": {}})).await;
            match (cleaned, listed) {
                (Ok(_), Ok(answer)) if answer["faults"].as_array().is_some_and(Vec::is_empty) => {}
                (Ok(_), Ok(answer)) => {
                    left.insert(node, answer["faults"].to_string());
                }
                (Err(error), _) | (_, Err(error)) => {
                    left.insert(node, error.to_string());
                }
            }
        }
        if left.is_empty() {
            Ok(())
        } else {
            Err(agent_error(
                "clean up the fault agent's faults",
                format!("still in effect: {left:?}"),
            ))
        }
    }

    fn block<T>(&self, future: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        self.handle.block_on(future)
    }
}

fn not_through_the_agent(what: &str) -> Error {
    agent_error(
        what,
        "the in-cluster fault agent does not do this yet (it kills, freezes and partitions); run with the native fault driver",
    )
}

impl FaultDriver for AgentDriver {
    fn kill(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        keep_down: bool,
    ) -> Result<DriverFault> {
        self.block(self.container_fault(
            "kill",
            namespace,
            pod,
            json!({"namespace": namespace, "pod": pod, "container": container, "keepDown": keep_down}),
        ))
    }

    fn freeze(&self, namespace: &str, pod: &str, container: &str) -> Result<DriverFault> {
        self.block(self.container_fault(
            "freeze",
            namespace,
            pod,
            json!({"namespace": namespace, "pod": pod, "container": container}),
        ))
    }

    fn stop_node(&self, node: &str) -> Result<DriverFault> {
        Err(not_through_the_agent(&format!("stop node {node}")))
    }

    fn partition(&self, side_a: &[String], side_b: &[String]) -> Result<DriverFault> {
        self.block(self.partition_async(side_a, side_b))
    }

    fn end(&self, kind: &str, fault: &DriverFault, _detail: &str) -> Result<()> {
        match kind {
            "kill" | "freeze" | "partition" => self.block(self.end_parts(fault)),
            other => Err(not_through_the_agent(&format!("end a {other} fault"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

    fn status(word: &str, message: &str) -> Status {
        Status {
            status: Some(word.to_owned()),
            message: Some(message.to_owned()),
            ..Status::default()
        }
    }

    #[test]
    fn the_agents_answer_or_its_reason() {
        let ok = agent_answer(
            b"{\"id\":3,\"kind\":\"freeze\"}\n",
            "",
            Some(&status("Success", "")),
        );
        assert_eq!(ok.expect("ok")["id"], 3);
        let refused = agent_answer(
            b"{\"error\":\"refused: namespace \\\"x\\\" is not one this agent may touch\"}\n",
            "bloodraven-chaos-agent: refused",
            Some(&status(
                "Failure",
                "command terminated with non-zero exit code",
            )),
        )
        .expect_err("refused");
        assert!(refused.starts_with("refused: namespace"), "{refused}");
        let crashed = agent_answer(b"", "panicked", Some(&status("Failure", "exit code 101")))
            .expect_err("crashed");
        assert!(
            crashed.contains("exit code 101") && crashed.contains("panicked"),
            "{crashed}"
        );
        let unknown = agent_answer(b"{\"id\":1}", "", None).expect_err("no status");
        assert!(unknown.contains("outcome is unknown"), "{unknown}");
        let silent = agent_answer(b"", "", Some(&status("Success", ""))).expect_err("no JSON");
        assert!(silent.contains("no JSON answer"), "{silent}");
    }

    #[test]
    fn a_partition_gives_each_side_the_other_sides_pods() {
        let pod = |node: &str, name: &str, ip: &str| {
            (
                node.to_owned(),
                "ns".to_owned(),
                name.to_owned(),
                ip.to_owned(),
            )
        };
        let pods = [
            pod("iad", "db-iad", "10.0.0.2"),
            pod("pdx", "db-pdx", "10.0.1.2"),
            pod("reader", "db-reader", "10.0.2.2"),
            pod("apps", "operator", "10.0.3.2"),
        ];
        let a = ["iad".to_owned()];
        let b = ["pdx".to_owned(), "reader".to_owned()];
        let requests = partition_requests(&pods, &a, &b);
        assert_eq!(requests.len(), 3);
        assert_eq!(requests[0].0, "iad");
        assert_eq!(
            requests[0].1,
            json!({"partition": {"namespace": "ns", "pod": "db-iad", "peerPods": [
                {"namespace": "ns", "pod": "db-pdx"},
                {"namespace": "ns", "pod": "db-reader"}
            ]}})
        );
        assert_eq!(
            requests[1].1["partition"]["peerPods"],
            json!([{"namespace": "ns", "pod": "db-iad"}]),
            "pdx's pod loses iad"
        );
        assert_eq!(requests[2].0, "reader");
        // The apps node is on neither side of a peers partition: its pods keep every site.
        assert!(requests.iter().all(|(node, _)| node != "apps"));
        // A side with no pod: nothing to cut.
        assert!(partition_requests(&pods, &a, &["elsewhere".to_owned()]).is_empty());
    }
}
