//! The node agent's error type.

use std::path::PathBuf;

/// Result of node-agent operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the node agent can fail at. Messages are lowercase fragments that read after
/// "failed to".
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Creating namespaces, links and mounts needs root.
    #[error(
        "start the localkube node agent: creating network namespaces needs root; run as root or use the kind backend instead"
    )]
    NotRoot,
    /// A file or directory operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An `ip` (iproute2) invocation failed.
    #[error("run `ip {args}`: {message}")]
    Ip {
        /// The arguments given to `ip`.
        args: String,
        /// stderr of `ip`, or why it could not run.
        message: String,
    },
    /// A system call failed.
    #[error("{action}: {source}")]
    Sys {
        /// What was being done.
        action: String,
        /// The errno.
        source: nix::Error,
    },
    /// The state directory's filesystem has too little free space for the pods' data (MariaDB
    /// fails on a full disk with misleading corruption errors, so a cluster does not start).
    #[error(
        "start the cluster: only {available_mib} MiB free on the filesystem of {path} (at least {required_mib} MiB needed for the pods' data directories); free some space, e.g. old cargo target directories or reports"
    )]
    LowDiskSpace {
        /// The state directory.
        path: PathBuf,
        /// Free space for an unprivileged writer, MiB.
        available_mib: u64,
        /// The minimum, MiB.
        required_mib: u64,
    },
    /// Every cluster index on this machine is taken.
    #[error("allocate a cluster index: all {0} cluster slots on this machine are in use")]
    NoClusterSlot(usize),
    /// A node's pod subnet index is exhausted.
    #[error("allocate a pod address on node {0}: its /24 subnet is full")]
    SubnetFull(String),
    /// Too many nodes in one cluster.
    #[error("register node {0}: at most {1} nodes per cluster")]
    TooManyNodes(String, usize),
    /// The node is not registered.
    #[error("find node {0}: it is not registered")]
    UnknownNode(String),
    /// The pod is not known to the runtime.
    #[error("find pod {0}: it is not running on this node agent")]
    UnknownPod(String),
    /// The pod is already running.
    #[error("start pod {0}: a pod with this namespace/name is already running")]
    PodExists(String),
    /// The container is not known.
    #[error("find container {container} in pod {pod}: no such container")]
    UnknownContainer {
        /// The pod key.
        pod: String,
        /// The container name.
        container: String,
    },
    /// The container has no running process.
    #[error("signal container {0}: it has no running process")]
    NotRunning(String),
    /// A frozen container's threads did not all stop (the freeze was undone).
    #[error(
        "freeze {target}: threads {running:?} of process group {group} still ran {waited:?} after \
         SIGSTOP (thawed again)"
    )]
    NotStopped {
        /// The pod key and container.
        target: String,
        /// The container's process group.
        group: i32,
        /// The threads that could still run.
        running: Vec<i32>,
        /// How long the freeze waited.
        waited: std::time::Duration,
    },
    /// A volume could not be set up for the pod (kubelet's `MountVolume.SetUp failed`).
    #[error("set up volume \"{volume}\": {message}")]
    VolumeSetup {
        /// The volume's name.
        volume: String,
        /// What is wrong, in kubelet's words (e.g. `hostPath type check failed: /x is not a
        /// directory`).
        message: String,
    },
    /// The spec given is not valid.
    #[error("validate {0}")]
    Invalid(String),
    /// The image catalog could not be read.
    #[error("parse image catalog {path}: {source}")]
    Catalog {
        /// The catalog file.
        path: PathBuf,
        /// The YAML error.
        source: serde_yaml::Error,
    },
    /// A state record could not be encoded or decoded.
    #[error("encode state record: {0}")]
    StateEncoding(#[from] serde_json::Error),
    /// The DNS server could not bind or serve.
    #[error("serve dns on {addr}: {source}")]
    Dns {
        /// The address.
        addr: std::net::SocketAddr,
        /// The error.
        source: std::io::Error,
    },
    /// The proxy could not bind.
    #[error("listen for service {service} on {addr}: {source}")]
    ProxyBind {
        /// The service key.
        service: String,
        /// The address.
        addr: std::net::SocketAddr,
        /// The error.
        source: std::io::Error,
    },
}

impl Error {
    /// Wraps an I/O error with what was being done to which path.
    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io {
            action,
            path,
            source,
        }
    }

    /// Wraps an errno with what was being done.
    pub fn sys(action: impl Into<String>) -> impl FnOnce(nix::Error) -> Error {
        let action = action.into();
        move |source| Error::Sys { action, source }
    }
}
