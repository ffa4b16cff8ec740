//! The control protocol: one JSON request per connection to `control.sock` (the `ctl`
//! argument), one JSON response line back. Requests are single-key enums (style rule 12),
//! camelCase; a failed request is answered `{"error": "..."}`.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::faults::partition::follow::{Cut, PeerPod};

/// A request to the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Request {
    /// SIGKILL every process of a container.
    Kill(KillRequest),
    /// SIGSTOP every process of a container until `end`.
    Freeze(FreezeRequest),
    /// Drop every packet between a pod and the peers until `end`.
    Partition(PartitionRequest),
    /// Stop this node: SIGSTOP its kubelet, SIGKILL its pods' containers (in the agent's
    /// namespaces), until healed through the agent's Pod annotation, `end` or the timer.
    StopNode(StopNodeRequest),
    /// Undo one fault.
    End(EndRequest),
    /// The faults in effect.
    List(ListRequest),
    /// Undo every fault.
    Cleanup(CleanupRequest),
}

/// `{"kill": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KillRequest {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// The container.
    pub container: String,
    /// Keep SIGKILLing whatever starts in the container until `end`.
    pub keep_down: bool,
}

/// `{"freeze": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FreezeRequest {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// The container.
    pub container: String,
}

/// `{"partition": {...}}`: at least one of `peers` and `peerPods`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PartitionRequest {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod (followed by name: a pod recreated under this name on this node is cut too).
    pub pod: String,
    /// Addresses or CIDRs (IPv4 or IPv6) cut off from the pod, both ways.
    #[serde(default)]
    pub peers: Vec<String>,
    /// Pods cut off from the pod, both ways, at their addresses (`status.podIPs`) as they are
    /// for as long as the partition stands.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peer_pods: Vec<PodRef>,
}

/// `{"stopNode": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StopNodeRequest {
    /// The node to stop: this agent's own (another is refused).
    pub node: String,
    /// The dead-man timer: the node is healed by itself after this many seconds (default
    /// 600), so a harness that died never leaves it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heal_after_seconds: Option<u64>,
}

/// A pod named in a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub pod: String,
}

/// `{"end": {"id": N}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EndRequest {
    /// The fault's id, from its start response.
    pub id: u64,
}

/// `{"list": {}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListRequest {}

/// `{"cleanup": {}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CleanupRequest {}

impl Request {
    /// Decodes a request; the error names the field that failed (`kill.keepDown: ...`).
    pub fn parse(text: &str) -> Result<Request> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let request: Request =
            serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
                let path = error.path().to_string();
                let inner = error.into_inner();
                if path.is_empty() || path == "." {
                    Error::Request(inner.to_string())
                } else {
                    Error::Request(format!("{path}: {inner}"))
                }
            })?;
        deserializer
            .end()
            .map_err(|error| Error::Request(format!("trailing characters: {error}")))?;
        Ok(request)
    }

    /// The request's kind, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Request::Kill(_) => "kill",
            Request::Freeze(_) => "freeze",
            Request::Partition(_) => "partition",
            Request::StopNode(_) => "stopNode",
            Request::End(_) => "end",
            Request::List(_) => "list",
            Request::Cleanup(_) => "cleanup",
        }
    }
}

/// The kinds of fault the agent starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FaultKind {
    /// [`KillRequest`].
    Kill,
    /// [`FreezeRequest`].
    Freeze,
    /// [`PartitionRequest`].
    Partition,
    /// [`StopNodeRequest`].
    StopNode,
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FaultKind::Kill => "kill",
            FaultKind::Freeze => "freeze",
            FaultKind::Partition => "partition",
            FaultKind::StopNode => "stop-node",
        })
    }
}

/// The answer to a start request, sent once the fault was seen to take effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Started {
    /// The fault's id, for `end`.
    pub id: u64,
    /// Its kind.
    pub kind: FaultKind,
    /// What was observed ("3 processes SIGKILLed, none left: 12 (mysqld), ...").
    pub effect: String,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// The container (absent for a partition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// The container ids whose cgroups were targeted (a partition: the pod's).
    pub container_ids: Vec<String>,
    /// The processes acted on (a partition: the one whose network namespace was entered; a
    /// stop-node: its kubelet).
    pub pids: Vec<i32>,
    /// A stop-node's node (its namespace and pod are empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// The answer to `end`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ended {
    /// The fault's id.
    pub id: u64,
    /// Its kind.
    pub kind: FaultKind,
    /// What was observed of the undo ("thawed 3 processes, no thread left stopped").
    pub effect: String,
}

/// One fault in effect, in `list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultStatus {
    /// The fault's id.
    pub id: u64,
    /// Its kind.
    pub kind: FaultKind,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// The container (absent for a partition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// A kill's `keepDown`.
    #[serde(default)]
    pub keep_down: bool,
    /// The peers a partition is to cut now (its fixed peers and its peer pods' addresses);
    /// each of `cuts` shows what its rules drop, as last listed back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<String>,
    /// A partition's peer pods and their addresses as last read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peer_pods: Vec<PeerPod>,
    /// The network namespaces a partition's rules were put in, the first one included
    /// (`gone`: no process of the pod holds it any more).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cuts: Vec<Cut>,
    /// How often a partition's rules were put in another namespace of its pod, or changed for
    /// new peer addresses, after its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reapplied: Option<u64>,
    /// When it was started (RFC 3339).
    pub started_at: String,
    /// What was observed at the start.
    pub effect: String,
    /// A keepDown's kills so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kills: Option<u64>,
    /// A keepDown's restarts caught: instances of the container the kubelet started again
    /// (new container ids) in which it SIGKILLed a process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarts_caught: Option<u64>,
    /// Of those, the ones recognised before the pod status named their id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarts_recognised: Option<u64>,
    /// The longest a process of a restarted instance was seen alive before its SIGKILL, in
    /// milliseconds, as the keepDown's thread measured it (from the scan that first saw it
    /// in the pod: it may have run up to one scan interval before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longest_restart_alive_ms: Option<u64>,
    /// What is wrong with it now, if anything (a keepDown that could not kill, a partition
    /// that could not cut its recreated pod or change its peers, a fault left by a previous
    /// agent that could not be undone, a stop-node that did not take effect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// A stop-node's node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// A stop-node's phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<StopNodePhase>,
    /// When a stop-node took effect (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_effect_at: Option<String>,
    /// When a stop-node heals by itself if nothing heals it before (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heal_deadline: Option<String>,
    /// When a stop-node was healed (RFC 3339), and by what.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healed_at: Option<String>,
    /// What was observed of a stop-node's heal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heal: Option<String>,
}

/// Where a stop-node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopNodePhase {
    /// Answered, not acted on yet.
    Scheduled,
    /// The kubelet is stopped and the pods' processes are gone.
    InEffect,
    /// It did not take effect (`problem` says why; what was done was undone).
    Failed,
    /// Healed (through the annotation or the timer); `end` reports and forgets it.
    Healed,
    /// The heal did not take (`problem` says why); `end` tries again.
    HealFailed,
}

/// The answer to `list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultList {
    /// The faults in effect, by id.
    pub faults: Vec<FaultStatus>,
}

/// The answer to `cleanup` when every fault was undone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CleanedUp {
    /// The faults undone.
    pub ended: Vec<Ended>,
}

/// `{"error": "..."}`: a request that failed, was refused or did not take effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorResponse {
    /// The reason.
    pub error: String,
}

/// Any answer, as the agent writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Response {
    /// To a start request.
    Started(Started),
    /// To `end`.
    Ended(Ended),
    /// To `list`.
    List(FaultList),
    /// To `cleanup`.
    CleanedUp(CleanedUp),
    /// To a request that failed.
    Error(ErrorResponse),
}

impl Response {
    /// The response line (no newline).
    pub fn to_line(&self) -> String {
        // The types are plain strings, numbers and vectors: serializing them cannot fail.
        serde_json::to_string(self).unwrap_or_else(|error| {
            format!(
                "{{\"error\":{}}}",
                serde_json::Value::String(format!("encode the response: {error}"))
            )
        })
    }

    /// The error of an error response.
    pub fn error(&self) -> Option<&str> {
        match self {
            Response::Error(ErrorResponse { error }) => Some(error),
            Response::Started(_)
            | Response::Ended(_)
            | Response::List(_)
            | Response::CleanedUp(_) => None,
        }
    }
}

impl From<Error> for Response {
    fn from(error: Error) -> Self {
        Response::Error(ErrorResponse {
            error: error.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The wire shapes the harness's agent driver is written against
    // (docs/design/harness.md "One run", step 3: faults made by an in-cluster agent).
    #[test]
    fn requests_round_trip_in_their_single_key_camel_case_shape() {
        let cases = [
            (
                r#"{"kill":{"namespace":"br","pod":"iad-0","container":"mysql","keepDown":true}}"#,
                Request::Kill(KillRequest {
                    namespace: "br".into(),
                    pod: "iad-0".into(),
                    container: "mysql".into(),
                    keep_down: true,
                }),
            ),
            (
                r#"{"freeze":{"namespace":"br","pod":"iad-0","container":"mysql"}}"#,
                Request::Freeze(FreezeRequest {
                    namespace: "br".into(),
                    pod: "iad-0".into(),
                    container: "mysql".into(),
                }),
            ),
            (
                r#"{"partition":{"namespace":"br","pod":"iad-0","peers":["10.244.1.7","10.96.0.0/16"]}}"#,
                Request::Partition(PartitionRequest {
                    namespace: "br".into(),
                    pod: "iad-0".into(),
                    peers: vec!["10.244.1.7".into(), "10.96.0.0/16".into()],
                    peer_pods: vec![],
                }),
            ),
            (
                r#"{"partition":{"namespace":"br","pod":"iad-0","peers":[],"peerPods":[{"namespace":"br","pod":"pdx-0"}]}}"#,
                Request::Partition(PartitionRequest {
                    namespace: "br".into(),
                    pod: "iad-0".into(),
                    peers: vec![],
                    peer_pods: vec![PodRef {
                        namespace: "br".into(),
                        pod: "pdx-0".into(),
                    }],
                }),
            ),
            (
                r#"{"stopNode":{"node":"iad","healAfterSeconds":120}}"#,
                Request::StopNode(StopNodeRequest {
                    node: "iad".into(),
                    heal_after_seconds: Some(120),
                }),
            ),
            (
                r#"{"stopNode":{"node":"iad"}}"#,
                Request::StopNode(StopNodeRequest {
                    node: "iad".into(),
                    heal_after_seconds: None,
                }),
            ),
            (r#"{"end":{"id":7}}"#, Request::End(EndRequest { id: 7 })),
            (r#"{"list":{}}"#, Request::List(ListRequest {})),
            (r#"{"cleanup":{}}"#, Request::Cleanup(CleanupRequest {})),
        ];
        for (text, request) in cases {
            assert_eq!(Request::parse(text).unwrap(), request, "{text}");
            assert_eq!(serde_json::to_string(&request).unwrap(), text);
        }
    }

    #[test]
    fn bad_requests_name_the_field_that_failed() {
        let error = |text: &str| Request::parse(text).unwrap_err().to_string();
        let wrong_type = error(
            r#"{"kill":{"namespace":"br","pod":"iad-0","container":"mysql","keepDown":"yes"}}"#,
        );
        assert!(
            wrong_type.contains("kill.keepDown") && wrong_type.contains("expected a boolean"),
            "{wrong_type}"
        );
        let missing = error(r#"{"kill":{"namespace":"br","pod":"iad-0","container":"mysql"}}"#);
        assert!(missing.contains("missing field `keepDown`"), "{missing}");
        let unknown_field = error(r#"{"freeze":{"namespace":"br","pod":"p","contianer":"c"}}"#);
        assert!(
            unknown_field.contains("unknown field `contianer`"),
            "{unknown_field}"
        );
        let unknown_kind = error(r#"{"stop":{}}"#);
        assert!(
            unknown_kind.contains("unknown variant `stop`") && unknown_kind.contains("partition"),
            "{unknown_kind}"
        );
        let peer_type = error(r#"{"partition":{"namespace":"br","pod":"p","peers":[1]}}"#);
        assert!(peer_type.contains("partition.peers[0]"), "{peer_type}");
        let peer_pod = error(r#"{"partition":{"namespace":"br","pod":"p","peerPods":["pdx-0"]}}"#);
        assert!(
            peer_pod.contains("partition.peerPods[0]")
                && peer_pod.contains("expected struct PodRef"),
            "{peer_pod}"
        );
        let no_peers = Request::parse(r#"{"partition":{"namespace":"br","pod":"p"}}"#).unwrap();
        assert!(
            matches!(no_peers, Request::Partition(p) if p.peers.is_empty() && p.peer_pods.is_empty())
        );
        let stop_node = error(r#"{"stopNode":{"node":"iad","healAfter":5}}"#);
        assert!(
            stop_node.contains("unknown field `healAfter`"),
            "{stop_node}"
        );
        let no_node = error(r#"{"stopNode":{}}"#);
        assert!(no_node.contains("missing field `node`"), "{no_node}");
        let id_type = error(r#"{"end":{"id":-1}}"#);
        assert!(id_type.contains("end.id"), "{id_type}");
        assert!(error("{").contains("EOF"));
        assert!(error(r#"{"list":{}} x"#).contains("trailing characters"));
        assert!(error("").starts_with("decode the request"));
    }

    #[test]
    fn responses_have_the_documented_shapes() {
        let started = Response::Started(Started {
            id: 3,
            kind: FaultKind::Freeze,
            effect: "stopped".into(),
            namespace: "br".into(),
            pod: "iad-0".into(),
            container: Some("mysql".into()),
            container_ids: vec!["abc".into()],
            pids: vec![12],
            node: None,
        });
        assert_eq!(
            started.to_line(),
            r#"{"id":3,"kind":"freeze","effect":"stopped","namespace":"br","pod":"iad-0","container":"mysql","containerIds":["abc"],"pids":[12]}"#
        );
        let Response::Started(inner) = &started else {
            unreachable!()
        };
        let back: Started = serde_json::from_str(&started.to_line()).unwrap();
        assert_eq!(&back, inner);
        let ended = Response::Ended(Ended {
            id: 3,
            kind: FaultKind::Freeze,
            effect: "thawed".into(),
        });
        assert_eq!(
            ended.to_line(),
            r#"{"id":3,"kind":"freeze","effect":"thawed"}"#
        );
        let list = Response::List(FaultList { faults: vec![] });
        assert_eq!(list.to_line(), r#"{"faults":[]}"#);
        let cleaned = Response::CleanedUp(CleanedUp { ended: vec![] });
        assert_eq!(cleaned.to_line(), r#"{"ended":[]}"#);
        let error = Response::from(Error::NotInEffect("1 thread running".into()));
        assert_eq!(
            error.to_line(),
            r#"{"error":"the fault did not take effect: 1 thread running"}"#
        );
        assert_eq!(
            error.error(),
            Some("the fault did not take effect: 1 thread running")
        );
        assert_eq!(list.error(), None);
    }
}
