//! The crate's one error enum (style rule 5): each message completes "failed to ..." or, for
//! a refusal, says what was refused and why.

use std::path::PathBuf;

/// What went wrong in the agent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request that did not decode; the message names the field.
    #[error("decode the request: {0}")]
    Request(String),
    /// A request for a pod outside `--namespaces`.
    #[error(
        "refused: namespace {namespace:?} is not one this agent may touch (allowed: {allowed})"
    )]
    NamespaceRefused {
        /// The namespace asked for.
        namespace: String,
        /// The agent's `--namespaces`, comma-separated.
        allowed: String,
    },
    /// A pod scheduled on another node (or on none).
    #[error("refused: pod {namespace}/{pod} runs on node {pod_node:?}, not on this agent's node {agent_node:?}: ask the agent of that node")]
    WrongNode {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
        /// Its `spec.nodeName` ("" when unscheduled).
        pod_node: String,
        /// This agent's `--node`.
        agent_node: String,
    },
    /// No Kubernetes client could be built.
    #[error("build a Kubernetes client from the in-cluster configuration (or $KUBECONFIG): {0}")]
    Client(String),
    /// The pod could not be read from the API.
    #[error("read pod {namespace}/{pod} from the API: {reason}")]
    PodLookup {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
        /// Why.
        reason: String,
    },
    /// The pod has no running container of that name (or no container id for it).
    #[error("find container {container:?} of pod {namespace}/{pod}: {reason}")]
    Container {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
        /// The container asked for.
        container: String,
        /// Why.
        reason: String,
    },
    /// A container id that is not `<runtime>://<id>` with a plausible id.
    #[error("parse container id {raw:?}: {reason}")]
    ContainerId {
        /// The id as the API gave it.
        raw: String,
        /// Why.
        reason: String,
    },
    /// No process of the container was found on this node: the agent never falls back to
    /// another process (style rule 14).
    #[error("find a process of container {container_id} under {proc_root}: none of its cgroups is listed in any /proc/<pid>/cgroup")]
    NoProcesses {
        /// The container's id.
        container_id: String,
        /// The proc root scanned.
        proc_root: PathBuf,
    },
    /// A partition peer that is neither an address nor a CIDR.
    #[error("parse partition peer {peer:?}: {reason}")]
    Peer {
        /// The peer as given.
        peer: String,
        /// Why.
        reason: String,
    },
    /// A partition that cannot be made as asked (no peer address to cut its pod from).
    #[error("partition pod {namespace}/{pod}: {reason}")]
    Partition {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
        /// Why.
        reason: String,
    },
    /// A stop-node that cannot be made as asked (another node, no kubelet found, ...).
    #[error("stop the node: {0}")]
    StopNode(String),
    /// A fault whose effect was not observed after it was injected (it was undone again).
    #[error("the fault did not take effect: {0}")]
    NotInEffect(String),
    /// The undo of a fault was not observed.
    #[error("undo the {kind} fault: {seen}")]
    UndoNotObserved {
        /// Its kind.
        kind: String,
        /// What was seen instead.
        seen: String,
    },
    /// Ending a fault failed (it is kept, so `end` or `cleanup` can try again).
    #[error("end fault {id}: {source}")]
    End {
        /// The fault's id.
        id: u64,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// `end` named a fault the agent does not hold.
    #[error("end fault {id}: the agent holds no fault with that id (active: {active})")]
    UnknownFault {
        /// The id asked for.
        id: u64,
        /// The ids held, comma-separated ("none").
        active: String,
    },
    /// A command (`nsenter`, `nft`, `iptables`) failed.
    #[error("run {command}: {reason}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status and stderr, or why it did not start.
        reason: String,
    },
    /// A file or socket operation failed.
    #[error("{action}: {source}")]
    Io {
        /// What was being done ("read /proc/12/cgroup").
        action: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Signalling a process failed for another reason than its being gone.
    #[error("send {signal} to pid {pid}: {errno}")]
    Signal {
        /// The signal's name.
        signal: String,
        /// The process.
        pid: i32,
        /// The error.
        errno: nix::errno::Errno,
    },
    /// The state file could not be read or written.
    #[error("{action} {path}: {reason}")]
    State {
        /// "read" or "write".
        action: String,
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A worker thread of the agent died.
    #[error("run a fault's worker thread: {0}")]
    Worker(String),
    /// `cleanup` (or shutdown) could not undo some faults.
    #[error("undo every fault: {0}")]
    Cleanup(String),
}

impl Error {
    /// An [`Error::Io`] for `action`.
    pub fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let action = action.into();
        move |source| Error::Io { action, source }
    }
}

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
