//! Plain input and status structs of the pod runtime. Each field maps 1:1 onto the
//! Kubernetes Pod field named in its doc comment; the caller (the API server side) resolves
//! everything that needs the API (configMap/secret contents, `secretKeyRef`, most
//! `fieldRef`s) before calling [`super::runtime::PodRuntime::start_pod`].

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// `spec.restartPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RestartPolicy {
    /// `Always` (the default).
    #[default]
    Always,
    /// `OnFailure`.
    OnFailure,
    /// `Never`.
    Never,
}

/// What the runtime needs of one Pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodSpec {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `spec.nodeName` (a node registered with the runtime).
    pub node_name: String,
    /// `spec.hostname`, or `metadata.name` when unset.
    pub hostname: String,
    /// `spec.subdomain` (adds `<hostname>.<subdomain>.<ns>.svc.cluster.local` to /etc/hosts).
    pub subdomain: Option<String>,
    /// `spec.restartPolicy`.
    pub restart_policy: RestartPolicy,
    /// `spec.terminationGracePeriodSeconds` (default 30s).
    pub termination_grace_period: Duration,
    /// `spec.initContainers` (run in order, each to success, before `containers`).
    pub init_containers: Vec<ContainerSpec>,
    /// `spec.containers`.
    pub containers: Vec<ContainerSpec>,
    /// `spec.volumes`, with their contents resolved.
    pub volumes: Vec<VolumeSpec>,
    /// `spec.hostNetwork`: the pod gets no network namespace of its own; its containers run
    /// in the root network namespace (where every node's address lives) and its IP is its
    /// node's (`status.podIP` = `status.hostIP`). Its hostname is the machine's (no UTS
    /// namespace of its own), as on a node.
    pub host_network: bool,
    /// `spec.securityContext.fsGroup`: the volumes the node prepares (emptyDir, PVC
    /// directories, rendered files) are group-owned by it, group-writable (rendered files:
    /// group-readable) and their directories setgid, as the kubelet's volume ownership does.
    /// Containers run as root here (`runAsUser` is not honoured), so it matters to what reads
    /// the volumes from outside and to a pod moved to a real cluster.
    pub fs_group: Option<u32>,
}

impl PodSpec {
    /// `namespace/name`, the key the runtime uses.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// `spec.containers[]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ContainerSpec {
    /// `name`.
    pub name: String,
    /// `image` (resolved through the image catalog).
    pub image: String,
    /// `command` (replaces the image's entrypoint; `$(VAR)` expanded).
    pub command: Vec<String>,
    /// `args` (replaces the image's default args; `$(VAR)` expanded).
    pub args: Vec<String>,
    /// `env` (and `envFrom`, flattened by the caller in Kubernetes order).
    pub env: Vec<EnvVar>,
    /// `workingDir`.
    pub working_dir: Option<String>,
    /// `volumeMounts`.
    pub volume_mounts: Vec<VolumeMount>,
    /// `ports`.
    pub ports: Vec<ContainerPort>,
    /// `readinessProbe`.
    pub readiness_probe: Option<Probe>,
    /// `livenessProbe` (failure kills the container; restartPolicy decides the rest).
    pub liveness_probe: Option<Probe>,
    /// `startupProbe` (readiness and liveness wait for it; failure kills the container).
    pub startup_probe: Option<Probe>,
    /// `stdin`: the container's stdin is a pipe that `pods/attach` writes to (else
    /// `/dev/null`).
    pub stdin: bool,
    /// `stdinOnce`: that pipe is closed when the first attach session with stdin ends.
    pub stdin_once: bool,
}

/// `env[]`.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvVar {
    /// `name`.
    pub name: String,
    /// `value` or `valueFrom`.
    pub value: EnvValue,
}

impl EnvVar {
    /// A literal `value`.
    pub fn literal(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value: EnvValue::Literal(value.into()),
        }
    }
}

/// An env value; the runtime resolves the ones only it knows.
#[derive(Debug, Clone, PartialEq)]
pub enum EnvValue {
    /// `value` (with `$(VAR)` references to earlier entries, expanded as Kubernetes does),
    /// or any `valueFrom` the caller resolved.
    Literal(String),
    /// `valueFrom.fieldRef.fieldPath: status.podIP` (and `status.podIPs`).
    PodIp,
    /// `valueFrom.fieldRef.fieldPath: status.hostIP` (the node's gateway address).
    HostIp,
}

/// `volumeMounts[]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VolumeMount {
    /// `name` (a volume of the pod).
    pub name: String,
    /// `mountPath`.
    pub mount_path: String,
    /// `readOnly`.
    pub read_only: bool,
    /// `subPath`.
    pub sub_path: Option<String>,
}

/// `spec.volumes[]`.
#[derive(Debug, Clone, PartialEq)]
pub struct VolumeSpec {
    /// `name`.
    pub name: String,
    /// The volume source.
    pub source: VolumeSource,
}

/// A volume's source.
#[derive(Debug, Clone, PartialEq)]
pub enum VolumeSource {
    /// `emptyDir`: a directory that lives as long as the pod.
    EmptyDir,
    /// `configMap`, `secret`, `downwardAPI` or `projected` (including the service-account
    /// token): files the caller rendered (keys, items and modes applied).
    Files(Vec<VolumeFile>),
    /// `persistentVolumeClaim`: a directory in the state dir, named after the claim and its
    /// uid (one claim's volume), that survives pod deletion.
    PersistentVolumeClaim {
        /// `claimName`.
        claim_name: String,
        /// The uid of the claim it named when the pod started: a claim deleted and created
        /// again under the same name is another volume.
        claim_uid: String,
    },
    /// `hostPath`.
    HostPath {
        /// `path`.
        path: PathBuf,
        /// `type`, checked (or the path created) before the pod starts, as kubelet does.
        kind: HostPathType,
    },
}

/// `hostPath.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HostPathType {
    /// `""` (or unset): no check.
    #[default]
    Unset,
    /// `DirectoryOrCreate`: created (0755) when missing.
    DirectoryOrCreate,
    /// `Directory`: must be a directory.
    Directory,
    /// `FileOrCreate`: created empty (0644) when missing; its directory must exist.
    FileOrCreate,
    /// `File`: must be a regular file.
    File,
    /// `Socket`: must be a UNIX socket.
    Socket,
    /// `CharDevice`: must be a character device.
    CharDevice,
    /// `BlockDevice`: must be a block device.
    BlockDevice,
}

impl HostPathType {
    /// The type a Pod names, or `None` for one Kubernetes does not know.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "" => HostPathType::Unset,
            "DirectoryOrCreate" => HostPathType::DirectoryOrCreate,
            "Directory" => HostPathType::Directory,
            "FileOrCreate" => HostPathType::FileOrCreate,
            "File" => HostPathType::File,
            "Socket" => HostPathType::Socket,
            "CharDevice" => HostPathType::CharDevice,
            "BlockDevice" => HostPathType::BlockDevice,
            _ => return None,
        })
    }
}

/// One file of a rendered volume.
#[derive(Debug, Clone, PartialEq)]
pub struct VolumeFile {
    /// Path relative to the volume root (`items[].path` or the key).
    pub path: String,
    /// The contents.
    pub contents: Vec<u8>,
    /// File mode (`defaultMode`/`items[].mode`, 0o644 by default).
    pub mode: u32,
}

/// `ports[]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ContainerPort {
    /// `name`.
    pub name: Option<String>,
    /// `containerPort`.
    pub container_port: u16,
    /// `protocol` (`TCP` or `UDP`).
    pub protocol: String,
}

/// A probe (`readinessProbe`, `livenessProbe`).
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// The handler.
    pub handler: ProbeHandler,
    /// `initialDelaySeconds`.
    pub initial_delay: Duration,
    /// `periodSeconds` (default 10s).
    pub period: Duration,
    /// `timeoutSeconds` (default 1s).
    pub timeout: Duration,
    /// `successThreshold` (default 1).
    pub success_threshold: u32,
    /// `failureThreshold` (default 3).
    pub failure_threshold: u32,
}

impl Probe {
    /// A probe with Kubernetes' defaults for everything but the handler.
    pub fn new(handler: ProbeHandler) -> Self {
        Self {
            handler,
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(10),
            timeout: Duration::from_secs(1),
            success_threshold: 1,
            failure_threshold: 3,
        }
    }
}

/// A port given by number or by container port name.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbePort {
    /// A number.
    Number(u16),
    /// The `name` of a container port.
    Name(String),
}

/// A probe's handler.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeHandler {
    /// `exec.command`, run in the container's namespaces; exit 0 is success.
    Exec {
        /// The command.
        command: Vec<String>,
    },
    /// `tcpSocket`: a TCP connect to the pod IP (as kubelet, from the node).
    TcpSocket {
        /// `port`.
        port: ProbePort,
    },
    /// `httpGet`: status 200..400 is success.
    HttpGet {
        /// `path`.
        path: String,
        /// `port`.
        port: ProbePort,
        /// `host` (default: the pod IP).
        host: Option<Ipv4Addr>,
    },
}

/// `status.containerStatuses[].state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContainerState {
    /// `waiting`.
    Waiting {
        /// `reason` (ContainerCreating, ErrImagePull, CrashLoopBackOff, PodInitializing).
        reason: String,
        /// `message`.
        message: String,
    },
    /// `running`.
    Running {
        /// `startedAt`.
        started_at: SystemTime,
    },
    /// `terminated`.
    Terminated {
        /// `exitCode` (128+signal when killed by a signal).
        exit_code: i32,
        /// `signal`.
        signal: Option<i32>,
        /// `reason` (Completed, Error, OOMKilled is never produced).
        reason: String,
        /// `startedAt`.
        started_at: SystemTime,
        /// `finishedAt`.
        finished_at: SystemTime,
    },
}

/// `status.containerStatuses[]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerStatus {
    /// `name`.
    pub name: String,
    /// `image`.
    pub image: String,
    /// `state`.
    pub state: ContainerState,
    /// `lastState` (the previous instance's termination).
    pub last_state: Option<ContainerState>,
    /// `restartCount`.
    pub restart_count: u32,
    /// `ready`.
    pub ready: bool,
    /// `started`.
    pub started: bool,
    /// The main process id while running (for faults).
    pub pid: Option<i32>,
    /// The id of the latest instance (64 hex digits; `containerID` is
    /// `containerd://<id>`), from its start on; also the name of its cgroup
    /// ([`super::cgroups`]). `None` before the first start.
    pub container_id: Option<String>,
    /// The id of the instance `last_state` describes.
    pub last_container_id: Option<String>,
    /// The current instance's log file: stdout and stderr in kubelet's CRI format; render
    /// it for `kubectl logs` with [`super::cri_logs::read`].
    pub log_path: PathBuf,
    /// The previous instance's log file (`kubectl logs --previous`), same format.
    pub previous_log_path: PathBuf,
}

/// `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    /// `Pending`.
    Pending,
    /// `Running`.
    Running,
    /// `Succeeded`.
    Succeeded,
    /// `Failed`.
    Failed,
}

/// What `status` of a Pod needs from the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodStatus {
    /// `namespace/name`.
    pub key: String,
    /// `status.podIP`.
    pub pod_ip: Option<Ipv4Addr>,
    /// `status.hostIP` (the node's gateway).
    pub host_ip: Option<Ipv4Addr>,
    /// `status.phase`.
    pub phase: PodPhase,
    /// `status.initContainerStatuses`.
    pub init_container_statuses: Vec<ContainerStatus>,
    /// `status.containerStatuses`.
    pub container_statuses: Vec<ContainerStatus>,
    /// The `Ready` condition: every container ready.
    pub ready: bool,
    /// Whether the pod has been stopped (`stop_pod`) and no longer runs anything.
    pub stopped: bool,
}
