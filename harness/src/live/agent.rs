//! The in-cluster fault agent's driver (`--fault-driver agent`): kill, freeze, partition and
//! stop-node through the `bloodraven-chaos-agent` DaemonSet (chaos-agent/README.md), driven
//! with `pods/exec` through the API server only, the same way on every backend. The agent of the
//! target pod's node does the work and checks that it took effect; this driver picks the
//! agent, sends the request and keeps each agent's fault id for the heal.
//!
//! A stop-node stops the kubelet the exec runs through, so it is checked and healed through the
//! API instead: taken effect once the Node's Ready condition is not True (within
//! [`NODE_NOT_READY_MAX`]), healed by the annotation [`HEAL_ANNOTATION`] on the agent's own Pod,
//! undone once the Node is Ready again and the agent, reached again through exec, reports the
//! heal and lists the fault no more.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};
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
    crate::playground::names::NAMESPACE,
    crate::playground::names::OPERATOR_NAMESPACE,
];
/// Bound on one request (a kill waits up to 5 s for the processes to go, a freeze for every
/// thread to stop).
const REQUEST_MAX: Duration = Duration::from_secs(60);
/// The annotation on the agent's Pod that heals a stop-node (its value: the fault id;
/// chaos-agent's `faults::stop_node::HEAL_ANNOTATION`).
pub const HEAL_ANNOTATION: &str = "chaos.bloodraven.shipstream.io/heal";
/// How long a stopped node may take to be seen NotReady: a real cluster's node lifecycle
/// controller marks it after its node-monitor-grace-period (40 s by default); localkube within
/// about a second.
pub const NODE_NOT_READY_MAX: Duration = Duration::from_secs(60);
/// How long a healed node may take to be Ready again, and its agent to answer through exec.
pub const NODE_READY_MAX: Duration = Duration::from_secs(60);
/// The dead-man timer a stop-node is started with: the node heals by itself after it even
/// if this harness dies.
pub const STOP_NODE_HEAL_AFTER: Duration = Duration::from_secs(600);
/// How often the Node and the agent are looked at while a stop-node starts or heals.
const NODE_POLL: Duration = Duration::from_millis(500);
/// The zone label that names a node's site.
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// A Node's Ready condition's status (`True`, `False`, `Unknown`); `None` when it has none.
pub fn ready_status(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|condition| condition.type_ == "Ready")
        .map(|condition| condition.status.clone())
}

/// The node of `site` among `nodes` (name, zone label): the node named as the site (localkube),
/// else the one node labelled with the site's zone (kind, other clusters). None or several is
/// an error naming what there is.
pub fn node_of_site(
    nodes: &[(String, Option<String>)],
    site: &str,
) -> std::result::Result<String, String> {
    if nodes.iter().any(|(name, _)| name == site) {
        return Ok(site.to_owned());
    }
    let zoned: Vec<&String> = nodes
        .iter()
        .filter(|(_, zone)| zone.as_deref() == Some(site))
        .map(|(name, _)| name)
        .collect();
    match zoned.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(format!(
            "no node is named {site:?} or labelled {ZONE_LABEL}={site} (nodes: {})",
            nodes
                .iter()
                .map(|(name, zone)| format!("{name} ({})", zone.as_deref().unwrap_or("no zone")))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        several => Err(format!(
            "{} nodes are labelled {ZONE_LABEL}={site}: {}; a site's stop-node needs one",
            several.len(),
            several
                .iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Whether the agent's answer to `end` of a stop-node says it was healed (and not, say,
/// undone only now by `end` itself, which is also a heal, reported as such).
pub fn heal_reported(answer: &Value) -> std::result::Result<String, String> {
    match (answer["kind"].as_str(), answer["effect"].as_str()) {
        (Some("stopNode"), Some(effect)) => Ok(effect.to_owned()),
        _ => Err(format!(
            "the agent's answer to end is not a stop-node's: {answer}"
        )),
    }
}

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
        self.agent_pod(node, true).await
    }

    /// The agent pod on `node` (`ready`: only a Ready one; a stopped node's agent is not
    /// seen Ready, but it is where its heal goes).
    async fn agent_pod(&self, node: &str, ready: bool) -> Result<String> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), AGENT_NAMESPACE);
        let list = pods
            .list(&ListParams::default().labels(AGENT_SELECTOR))
            .await
            .map_err(|e| agent_error("list the fault agent's pods", e))?;
        list.into_iter()
            .find(|pod| {
                pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
                    && pod.metadata.deletion_timestamp.is_none()
                    && (!ready
                        || pod.status.as_ref().is_some_and(|status| {
                            status.conditions.iter().flatten().any(|condition| {
                                condition.type_ == "Ready" && condition.status == "True"
                            })
                        }))
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
        self.request_pod(node, &agent, request).await
    }

    /// Sends `request` to the agent pod `agent` (on `node`); its answer.
    async fn request_pod(&self, node: &str, agent: &str, request: &Value) -> Result<Value> {
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
                pod: agent,
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

    /// The node of `site` ([`node_of_site`]).
    async fn site_node(&self, site: &str) -> Result<String> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let list = nodes
            .list(&ListParams::default())
            .await
            .map_err(|e| agent_error("list the nodes", e))?;
        let named: Vec<(String, Option<String>)> = list
            .into_iter()
            .filter_map(|node| {
                let zone = node
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|labels| labels.get(ZONE_LABEL).cloned());
                node.metadata.name.map(|name| (name, zone))
            })
            .collect();
        node_of_site(&named, site)
            .map_err(|reason| agent_error(format!("find the node of site {site}"), reason))
    }

    /// Waits until the Ready condition of `node` is (`want_ready`) or is not True, within
    /// `within`; how long it took, or the last status seen.
    async fn wait_node(
        &self,
        node: &str,
        want_ready: bool,
        within: Duration,
    ) -> std::result::Result<Duration, String> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let start = std::time::Instant::now();
        loop {
            let last = match nodes.get(node).await {
                Ok(seen) => {
                    let status = ready_status(&seen);
                    if (status.as_deref() == Some("True")) == want_ready {
                        return Ok(start.elapsed());
                    }
                    format!("Ready {}", status.as_deref().unwrap_or("absent"))
                }
                Err(error) => format!("could not read the node: {error}"),
            };
            if start.elapsed() >= within {
                return Err(format!("{last} after {}s", within.as_secs()));
            }
            tokio::time::sleep(NODE_POLL).await;
        }
    }

    /// Sets (or, `None`, removes) the heal annotation on the agent pod `agent`.
    async fn annotate_heal(&self, agent: &str, id: Option<u64>) -> Result<()> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), AGENT_NAMESPACE);
        let value = id.map_or(Value::Null, |id| Value::String(id.to_string()));
        pods.patch(
            agent,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {HEAL_ANNOTATION: value}}})),
        )
        .await
        .map(|_| ())
        .map_err(|e| {
            agent_error(
                format!(
                    "annotate the fault agent {AGENT_NAMESPACE}/{agent} with {HEAL_ANNOTATION}"
                ),
                e,
            )
        })
    }

    /// Stops the node of `site` through its agent, then checks the Node is seen NotReady.
    async fn stop_node_async(&self, site: &str) -> Result<DriverFault> {
        let node = self.site_node(site).await?;
        let answer = self
            .request(
                &node,
                &json!({"stopNode": {"node": node, "healAfterSeconds": STOP_NODE_HEAL_AFTER.as_secs()}}),
            )
            .await?;
        let id = answer["id"].as_u64().ok_or_else(|| {
            agent_error(
                format!("stop node {node}"),
                format!("the agent's answer has no fault id: {answer}"),
            )
        })?;
        tracing::info!(node, id, effect = %answer["effect"], "fault agent: stop-node scheduled");
        match self.wait_node(&node, false, NODE_NOT_READY_MAX).await {
            Ok(took) => {
                tracing::info!(
                    node,
                    id,
                    seen_not_ready_after_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
                    "fault agent: stop-node in effect (the node is NotReady)"
                );
                Ok(DriverFault {
                    id: Some(id),
                    agent_faults: vec![(node, id)],
                })
            }
            Err(seen) => {
                // Nothing half-done is left: heal it, and say what the agent saw.
                let agent_saw = match self.heal_stop_node(&node, id).await {
                    Ok(()) => "healed again".to_owned(),
                    Err(error) => format!("and its heal failed too: {error}"),
                };
                Err(agent_error(
                    format!("stop node {node} through the fault agent (fault {id})"),
                    format!("the fault did not take effect: the node's {seen}; {agent_saw}"),
                ))
            }
        }
    }

    /// Heals the stop-node `id` on `node`: the annotation on its agent's Pod, then the Node
    /// Ready again, then the agent's `end` reporting the heal and its `list` no longer holding
    /// the fault. Anything else is "the heal was not undone".
    async fn heal_stop_node(&self, node: &str, id: u64) -> Result<()> {
        let not_undone = |reason: String| {
            agent_error(
                format!("heal the stop of node {node} (fault agent fault {id})"),
                format!("the heal was not undone: {reason}"),
            )
        };
        let agent = self.agent_pod(node, false).await?;
        self.annotate_heal(&agent, Some(id)).await?;
        let took = self
            .wait_node(node, true, NODE_READY_MAX)
            .await
            .map_err(|seen| not_undone(format!("the node's {seen}")))?;
        tracing::info!(
            node,
            id,
            seen_ready_after_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            "fault agent: the healed node is Ready"
        );
        // The kubelet is back: exec reaches the agent again (its pod may take a moment to be
        // seen Ready, so any agent pod of the node is asked, retried within the bound).
        let start = std::time::Instant::now();
        let ended = loop {
            let answer = match self.agent_pod(node, false).await {
                Ok(agent) => {
                    self.request_pod(node, &agent, &json!({"end": {"id": id}}))
                        .await
                }
                Err(error) => Err(error),
            };
            match answer {
                Ok(answer) => break answer,
                Err(error) if start.elapsed() >= NODE_READY_MAX => {
                    return Err(not_undone(format!(
                        "the agent could not be asked to end it: {error}"
                    )));
                }
                Err(error) if error.to_string().contains("holds no fault with that id") => {
                    return Err(not_undone(format!("the agent no longer holds it: {error}")));
                }
                Err(_) => tokio::time::sleep(NODE_POLL).await,
            }
        };
        let effect = heal_reported(&ended).map_err(not_undone)?;
        let listed = self.request_pod(node, &agent, &json!({"list": {}})).await;
        if let Ok(list) = &listed {
            if list["faults"]
                .as_array()
                .is_some_and(|faults| faults.iter().any(|f| f["id"].as_u64() == Some(id)))
            {
                return Err(not_undone(format!(
                    "the agent still lists it: {}",
                    list["faults"]
                )));
            }
        }
        if let Err(error) = self.annotate_heal(&agent, None).await {
            tracing::warn!(%error, "could not remove the heal annotation (harmless: it names an ended fault)");
        }
        tracing::info!(node, id, %effect, "fault agent: stop-node healed");
        Ok(())
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
        "the in-cluster fault agent does not do this (it kills, freezes, partitions and stops nodes); run with the native fault driver",
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
        self.block(self.stop_node_async(node))
    }

    fn partition(&self, side_a: &[String], side_b: &[String]) -> Result<DriverFault> {
        self.block(self.partition_async(side_a, side_b))
    }

    fn end(&self, kind: &str, fault: &DriverFault, _detail: &str) -> Result<()> {
        match kind {
            "kill" | "freeze" | "partition" => self.block(self.end_parts(fault)),
            "stop-node" => self.block(async {
                let mut first_error = None;
                for (node, id) in &fault.agent_faults {
                    if let Err(error) = self.heal_stop_node(node, *id).await {
                        first_error.get_or_insert(error);
                    }
                }
                first_error.map_or(Ok(()), Err)
            }),
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

    // docs/design/harness.md "The portable path": a stop-node counts once the Node is seen
    // NotReady (Ready not True: False, Unknown, or no condition), its heal once it is True.
    #[test]
    fn the_ready_condition_is_read_from_the_node() {
        let node = |conditions: Value| -> Node {
            serde_json::from_value(
                json!({"metadata": {"name": "iad"}, "status": {"conditions": conditions}}),
            )
            .expect("node")
        };
        let ready = node(json!([
            {"type": "MemoryPressure", "status": "False"},
            {"type": "Ready", "status": "True"}
        ]));
        assert_eq!(ready_status(&ready).as_deref(), Some("True"));
        let stopped = node(
            json!([{"type": "Ready", "status": "Unknown", "message": "Kubelet stopped posting node status."}]),
        );
        assert_eq!(ready_status(&stopped).as_deref(), Some("Unknown"));
        assert_eq!(ready_status(&node(json!([]))), None);
        let bare: Node = serde_json::from_value(json!({"metadata": {"name": "x"}})).expect("node");
        assert_eq!(ready_status(&bare), None);
    }

    // A scenario names sites; the agent of the site's node stops it: the node named as the
    // site (localkube) or the one labelled with its zone (kind, other clusters).
    #[test]
    fn a_sites_node_is_found_by_name_or_zone() {
        let n = |name: &str, zone: Option<&str>| (name.to_owned(), zone.map(str::to_owned));
        let localkube = [
            n("iad", Some("iad")),
            n("pdx", Some("pdx")),
            n("apps", None),
        ];
        assert_eq!(node_of_site(&localkube, "pdx"), Ok("pdx".to_owned()));
        let kind = [
            n("bloodraven-control-plane", None),
            n("bloodraven-worker", Some("iad")),
            n("bloodraven-worker2", Some("pdx")),
        ];
        assert_eq!(
            node_of_site(&kind, "pdx"),
            Ok("bloodraven-worker2".to_owned())
        );
        let none = node_of_site(&kind, "reader").unwrap_err();
        assert!(
            none.contains("reader") && none.contains("bloodraven-worker (iad)"),
            "{none}"
        );
        let twice = [n("a", Some("iad")), n("b", Some("iad"))];
        assert!(node_of_site(&twice, "iad").unwrap_err().contains("2 nodes"));
    }

    // The heal is undone only when the agent's end answers for a stop-node.
    #[test]
    fn the_heal_is_read_from_the_agents_end() {
        let healed = json!({"id": 4, "kind": "stopNode", "effect": "healed at 2026-12-06T16:30:00Z: healed by the annotation"});
        assert!(heal_reported(&healed).unwrap().starts_with("healed at"));
        let other = json!({"id": 4, "kind": "kill", "effect": "x"});
        assert!(heal_reported(&other)
            .unwrap_err()
            .contains("not a stop-node's"));
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
