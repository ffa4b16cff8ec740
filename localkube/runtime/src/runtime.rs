//! The pod runtime: pods as supervised processes in per-pod network namespaces.
//!
//! [`PodRuntime`] owns the cluster network and every pod started on any registered node.
//! Each container is supervised by one task: spawn through `localkube-pod-exec`, logs to a
//! file (the previous instance's file kept for `--previous`), probes, restartPolicy with
//! kubelet's back-off (the first restart at once, then 10s doubling to 300s in
//! CrashLoopBackOff, reset once a container ran 10 minutes), SIGTERM then SIGKILL after the
//! grace period on stop. A container killed with [`PodRuntime::kill_and_hold`] stays down
//! (waiting in CrashLoopBackOff, not ready) until [`PodRuntime::release_container`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::process::ChildStdin;
use tokio::sync::{broadcast, watch, Notify};

use super::catalog::{container_argv, CatalogEntry, ImageCatalog};
use super::cgroups::{self, Cgroups};
use super::cri_logs::Stream;
use super::error::{Error, Result};
use super::exec::{signal_container_group, BindMount, ExecSpec, DEFAULT_PATH};
use super::lifecycle::{
    self, status as step, AfterExit, BackOff, BackOffSchedule, ContainerKind, Exited, ProbeRole,
    ProbeStep, ProbeTally, RestartDelay, START_ERROR_EXIT_CODE,
};
use super::naming::ClusterNaming;
use super::network::{ClusterNetwork, SandboxNet};
use super::partition::{Partition, Partitions};
use super::probe::{probe_once, ProbeTarget};
use super::spec::{
    ContainerSpec, ContainerState, ContainerStatus, EnvValue, PodPhase, PodSpec, PodStatus,
};
use super::volumes;

/// Kubelet's container restart back-off after the first restart (which is immediate).
pub const BACKOFF_INITIAL: Duration = Duration::from_secs(10);
/// Kubelet's container restart back-off cap.
pub const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// A container that ran this long restarts without back-off (kubelet: 10 minutes).
pub const BACKOFF_RESET_AFTER: Duration = Duration::from_secs(600);
/// Capacity of the status-change broadcast.
const EVENTS_CAPACITY: usize = 1024;

/// Numbers exec spec files.
static EXEC_SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// What [`PodRuntime::exec_in_container`] collected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// Exit code (128+signal when killed).
    pub exit_code: i32,
    /// stdout.
    pub stdout: Vec<u8>,
    /// stderr.
    pub stderr: Vec<u8>,
}

/// How the runtime is set up.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// The cluster's state directory.
    pub state_dir: PathBuf,
    /// The `localkube-pod-exec` binary.
    pub pod_exec: PathBuf,
    /// The image catalog.
    pub catalog: ImageCatalog,
    /// Restart back-off after the first restart, which is immediate (kubelet: 10s).
    pub backoff_initial: Duration,
    /// Maximum restart back-off (kubelet: 300s).
    pub backoff_max: Duration,
    /// A container that ran this long restarts at once again (kubelet: 10 minutes).
    pub backoff_reset_after: Duration,
    /// Which containers get a per-pod wall-clock offset (`super::clock`; none by default).
    pub clock_faults: super::clock::ClockFaults,
}

impl RuntimeConfig {
    /// Kubelet defaults, binaries (`localkube-pod-exec`, `localkube-mariadb-entrypoint`) from
    /// `bin_dir` and the built-in catalog.
    pub fn new(state_dir: impl Into<PathBuf>, bin_dir: &Path) -> Self {
        Self {
            state_dir: state_dir.into(),
            pod_exec: bin_dir.join("localkube-pod-exec"),
            catalog: ImageCatalog::builtin(bin_dir),
            backoff_initial: BACKOFF_INITIAL,
            backoff_max: BACKOFF_MAX,
            backoff_reset_after: BACKOFF_RESET_AFTER,
            clock_faults: super::clock::ClockFaults::default(),
        }
    }

    /// The restart back-off numbers.
    fn back_off_schedule(&self) -> BackOffSchedule {
        BackOffSchedule {
            initial: self.backoff_initial,
            max: self.backoff_max,
            reset_after: self.backoff_reset_after,
        }
    }
}

/// The directory of this crate's binaries: the running executable's directory (or its
/// parent when running from cargo's `deps/`).
pub fn default_bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.parent().map(Path::to_path_buf).unwrap_or(dir)
    } else {
        dir
    }
}

#[derive(Debug)]
struct NodeState {
    index: u8,
    stopped: watch::Sender<bool>,
    /// Its kubelet is down (its process stopped or gone): nothing is started or restarted
    /// on it, nothing killed (see `localkube_kubelet::kubelet_process`).
    kubelet_down: watch::Sender<bool>,
}

#[derive(Debug)]
struct Pod {
    spec: PodSpec,
    /// The pod's own network namespace; `None` for a `hostNetwork` pod.
    sandbox: Option<SandboxNet>,
    /// `status.podIP`: the sandbox's address, or the node's on the host network.
    pod_ip: Ipv4Addr,
    host_ip: Ipv4Addr,
    /// The id of each container's latest instance (its cgroup's name).
    container_ids: Mutex<HashMap<String, String>>,
    status: watch::Sender<PodStatus>,
    stop: watch::Sender<Option<Duration>>,
    pids: Mutex<HashMap<String, i32>>,
    /// What `pods/attach` reaches of each running container.
    attach_points: Mutex<HashMap<String, AttachPoint>>,
    /// Containers kept down by a fault: not restarted until released.
    held: watch::Sender<BTreeSet<String>>,
    done: Notify,
    finished: watch::Sender<bool>,
}

/// A running container's output tap and stdin pipe.
#[derive(Debug, Clone)]
struct AttachPoint {
    output: broadcast::Sender<(Stream, Vec<u8>)>,
    stdin: Option<Arc<tokio::sync::Mutex<Option<ChildStdin>>>>,
    stdin_once: bool,
}

/// One `pods/attach` session's view of a running container instance: its output from now
/// on (ends when the instance has exited and its output is drained), and its stdin pipe when
/// the container has `stdin: true`.
#[derive(Debug)]
pub struct Attached {
    /// Lines as the container prints them, with their stream.
    pub output: broadcast::Receiver<(Stream, Vec<u8>)>,
    /// The container's stdin (`None` inside once it is closed: `stdinOnce`).
    pub stdin: Option<Arc<tokio::sync::Mutex<Option<ChildStdin>>>>,
    /// `stdinOnce`: close stdin when this session's stdin ends.
    pub stdin_once: bool,
}

/// Output lines an attach session may fall behind before it skips some.
const ATTACH_LINES: usize = 1024;

#[derive(Debug)]
struct Inner {
    config: RuntimeConfig,
    network: Arc<ClusterNetwork>,
    partitions: Arc<Partitions>,
    nodes: Mutex<BTreeMap<String, NodeState>>,
    pods: Mutex<HashMap<String, Arc<Pod>>>,
    events: broadcast::Sender<PodStatus>,
    /// The cluster's container cgroups.
    cgroups: Cgroups,
    /// Whether a node's kubelet works, asked right before a container starts or restarts
    /// ([`PodRuntime::set_kubelet_gate`]); none: always.
    kubelet_gate: std::sync::RwLock<Option<KubeletGate>>,
}

/// Whether the kubelet of the node named works (its process runs and is not stopped), asked
/// synchronously by a container about to start: a kubelet stopped a moment ago must not
/// restart what a fault agent kills right after (s014 through the agent: the periodic check
/// had not seen the stop yet and mysqld came back within milliseconds).
#[derive(Clone)]
pub struct KubeletGate(pub Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl std::fmt::Debug for KubeletGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KubeletGate")
    }
}

/// How often a container waiting for its node's kubelet asks again.
const KUBELET_GATE_POLL: Duration = Duration::from_millis(100);

/// The node agents of one cluster (every registered node) as one runtime.
#[derive(Debug, Clone)]
pub struct PodRuntime {
    inner: Arc<Inner>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl PodRuntime {
    /// Brings the cluster network up (needs root) and returns an empty runtime.
    pub fn new(config: RuntimeConfig) -> Result<Self> {
        super::network::require_root(nix::unistd::geteuid())?;
        if !config.pod_exec.is_file() {
            return Err(Error::Invalid(format!(
                "localkube-pod-exec binary {}: it does not exist (build it with `cargo build -p localkube --bins`)",
                config.pod_exec.display()
            )));
        }
        let network = ClusterNetwork::up(&config.state_dir)?;
        let partitions = Arc::new(Partitions::new(network.naming().clone()));
        let cgroups = Cgroups::detect(&network.naming().prefix);
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                network,
                partitions,
                nodes: Mutex::new(BTreeMap::new()),
                pods: Mutex::new(HashMap::new()),
                events: broadcast::channel(EVENTS_CAPACITY).0,
                cgroups,
                kubelet_gate: std::sync::RwLock::new(None),
            }),
        })
    }

    /// The cluster network (names, ranges, ClusterIP addresses).
    pub fn network(&self) -> &Arc<ClusterNetwork> {
        &self.inner.network
    }

    /// The cluster's names and ranges.
    pub fn naming(&self) -> &ClusterNaming {
        self.inner.network.naming()
    }

    /// The partition table (share it with the Service proxy).
    pub fn partitions(&self) -> Arc<Partitions> {
        self.inner.partitions.clone()
    }

    /// Registers a node (idempotent) and returns its index; its pods get
    /// `10.(244+c).<index>.0/24`.
    pub fn register_node(&self, name: &str) -> Result<u8> {
        let mut nodes = lock(&self.inner.nodes);
        if let Some(node) = nodes.get(name) {
            return Ok(node.index);
        }
        let index = u8::try_from(nodes.len())
            .map_err(|_| Error::TooManyNodes(name.to_string(), super::naming::NODES_MAX))?;
        self.inner.network.ensure_node(index)?;
        nodes.insert(
            name.to_string(),
            NodeState {
                index,
                stopped: watch::channel(false).0,
                kubelet_down: watch::channel(false).0,
            },
        );
        tracing::info!(node = name, index, subnet = %self.naming().pod_subnet(index), "node registered");
        Ok(index)
    }

    /// The index of a registered node.
    pub fn node_index(&self, name: &str) -> Result<u8> {
        lock(&self.inner.nodes)
            .get(name)
            .map(|n| n.index)
            .ok_or_else(|| Error::UnknownNode(name.to_string()))
    }

    /// The node's gateway address (`status.hostIP`).
    pub fn node_ip(&self, name: &str) -> Result<Ipv4Addr> {
        Ok(self.naming().gateway(self.node_index(name)?))
    }

    /// Starts a pod: sandbox, volumes, then containers (init containers first). Returns the
    /// pod IP. Container failures (unknown image, crash) show in the status, not here.
    pub async fn start_pod(&self, spec: PodSpec) -> Result<Ipv4Addr> {
        validate(&spec)?;
        let key = spec.key();
        let (node_index, stopped_rx, kubelet_down_rx) = {
            let nodes = lock(&self.inner.nodes);
            let node = nodes
                .get(&spec.node_name)
                .ok_or_else(|| Error::UnknownNode(spec.node_name.clone()))?;
            (
                node.index,
                node.stopped.subscribe(),
                node.kubelet_down.subscribe(),
            )
        };
        if lock(&self.inner.pods).contains_key(&key) {
            return Err(Error::PodExists(key));
        }
        let host_ip = self.naming().gateway(node_index);
        // A hostNetwork pod stays in the root namespace, where the node's address is.
        let sandbox = if spec.host_network {
            None
        } else {
            let network = self.inner.network.clone();
            let sandbox = tokio::task::spawn_blocking(move || network.create_sandbox(node_index))
                .await
                .map_err(|err| Error::Invalid(format!("sandbox task: {err}")))??;
            for partition in self.inner.partitions.list() {
                self.apply_partition_to(&sandbox, &partition, true)?;
            }
            Some(sandbox)
        };
        let pod_ip = sandbox.as_ref().map_or(host_ip, |s| s.ip);
        let state_dir = self.inner.network.state_dir().to_path_buf();
        if let Err(err) = volumes::materialize(&state_dir, &spec, pod_ip, self.naming().dns_ip()) {
            if let Some(sandbox) = &sandbox {
                let _ = self.inner.network.delete_sandbox(sandbox);
            }
            return Err(err);
        }
        let initial = PodStatus {
            key: key.clone(),
            pod_ip: Some(pod_ip),
            host_ip: Some(host_ip),
            phase: PodPhase::Pending,
            init_container_statuses: spec
                .init_containers
                .iter()
                .map(|c| waiting_status(&state_dir, &spec, c, ContainerKind::Init))
                .collect(),
            container_statuses: spec
                .containers
                .iter()
                .map(|c| waiting_status(&state_dir, &spec, c, ContainerKind::Regular))
                .collect(),
            ready: false,
            stopped: false,
        };
        let pod = Arc::new(Pod {
            spec,
            sandbox,
            pod_ip,
            host_ip,
            container_ids: Mutex::new(HashMap::new()),
            status: watch::channel(initial.clone()).0,
            stop: watch::channel(None).0,
            pids: Mutex::new(HashMap::new()),
            attach_points: Mutex::new(HashMap::new()),
            held: watch::channel(BTreeSet::new()).0,
            done: Notify::new(),
            finished: watch::channel(false).0,
        });
        lock(&self.inner.pods).insert(key.clone(), pod.clone());
        let _ = self.inner.events.send(initial);
        tracing::info!(pod = %key, %pod_ip, node = %pod.spec.node_name, host_network = pod.spec.host_network, "pod starting");
        let inner = self.inner.clone();
        tokio::spawn(run_pod(inner, pod, (stopped_rx, kubelet_down_rx)));
        Ok(pod_ip)
    }

    /// Stops a pod: SIGTERM to every container, SIGKILL after `grace`, then removes its
    /// sandbox and files (PVC directories stay). Returns the final status.
    pub async fn stop_pod(&self, key: &str, grace: Duration) -> Result<PodStatus> {
        let pod = lock(&self.inner.pods)
            .get(key)
            .cloned()
            .ok_or_else(|| Error::UnknownPod(key.to_string()))?;
        pod.stop.send_replace(Some(grace));
        let mut finished = pod.finished.subscribe();
        let _ = finished.wait_for(|done| *done).await;
        lock(&self.inner.pods).remove(key);
        let inner = self.inner.clone();
        let uid = pod.spec.uid.clone();
        let removed = tokio::task::spawn_blocking(move || inner.cgroups.remove_pod(&uid))
            .await
            .map_err(|err| Error::Invalid(format!("cgroup task: {err}")))?;
        if let Err(err) = removed {
            tracing::warn!(pod = key, error = %err, "could not remove the pod's cgroups");
        }
        if let Some(sandbox) = pod.sandbox.clone() {
            let network = self.inner.network.clone();
            tokio::task::spawn_blocking(move || network.delete_sandbox(&sandbox))
                .await
                .map_err(|err| Error::Invalid(format!("sandbox task: {err}")))??;
        }
        let dir = volumes::pod_dir(self.inner.network.state_dir(), &pod.spec);
        if let Err(err) = std::fs::remove_dir_all(&dir) {
            tracing::warn!(pod = key, error = %err, "could not remove pod directory");
        }
        let mut status = pod.status.borrow().clone();
        status.stopped = true;
        status.ready = false;
        pod.status.send_replace(status.clone());
        let _ = self.inner.events.send(status.clone());
        tracing::info!(pod = key, "pod stopped");
        Ok(status)
    }

    /// The current status of a pod.
    pub fn pod_status(&self, key: &str) -> Result<PodStatus> {
        lock(&self.inner.pods)
            .get(key)
            .map(|pod| pod.status.borrow().clone())
            .ok_or_else(|| Error::UnknownPod(key.to_string()))
    }

    /// Keys of every pod the runtime runs.
    pub fn pods(&self) -> Vec<String> {
        let mut keys: Vec<String> = lock(&self.inner.pods).keys().cloned().collect();
        keys.sort();
        keys
    }

    /// Every status change of every pod, as a full status snapshot.
    pub fn subscribe(&self) -> broadcast::Receiver<PodStatus> {
        self.inner.events.subscribe()
    }

    /// Status changes of one pod.
    pub fn watch_pod(&self, key: &str) -> Result<watch::Receiver<PodStatus>> {
        lock(&self.inner.pods)
            .get(key)
            .map(|pod| pod.status.subscribe())
            .ok_or_else(|| Error::UnknownPod(key.to_string()))
    }

    /// Waits until `predicate` holds for the pod's status, or `timeout` passes.
    pub async fn wait_for(
        &self,
        key: &str,
        timeout: Duration,
        predicate: impl Fn(&PodStatus) -> bool,
    ) -> Result<PodStatus> {
        let mut rx = self.watch_pod(key)?;
        let wait = async {
            rx.wait_for(|s| predicate(s))
                .await
                .map(|status| status.clone())
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(status)) => Ok(status),
            _ => Err(Error::Invalid(format!(
                "pod {key} status: condition not reached within {timeout:?}"
            ))),
        }
    }

    /// The main pid of a running container.
    pub fn container_pid(&self, key: &str, container: &str) -> Result<i32> {
        let pod = lock(&self.inner.pods)
            .get(key)
            .cloned()
            .ok_or_else(|| Error::UnknownPod(key.to_string()))?;
        let pid = lock(&pod.pids).get(container).copied();
        pid.ok_or_else(|| Error::NotRunning(format!("{key}/{container}")))
    }

    /// Attaches to a running container (`pods/attach`): its output from now on and, with
    /// `stdin: true`, its stdin.
    pub fn attach(&self, key: &str, container: &str) -> Result<Attached> {
        let pod = lock(&self.inner.pods)
            .get(key)
            .cloned()
            .ok_or_else(|| Error::UnknownPod(key.to_string()))?;
        let point = lock(&pod.attach_points).get(container).cloned();
        let point = point.ok_or_else(|| Error::NotRunning(format!("{key}/{container}")))?;
        Ok(Attached {
            output: point.output.subscribe(),
            stdin: point.stdin,
            stdin_once: point.stdin_once,
        })
    }

    /// The pod's sandbox (netns name and path, IP); a `hostNetwork` pod has none.
    pub fn sandbox(&self, key: &str) -> Result<SandboxNet> {
        let sandbox = lock(&self.inner.pods)
            .get(key)
            .map(|p| p.sandbox.clone())
            .ok_or_else(|| Error::UnknownPod(key.to_string()))?;
        sandbox.ok_or_else(|| {
            Error::Invalid(format!(
                "sandbox of pod {key}: it uses the host network (no network namespace of its own)"
            ))
        })
    }

    /// The id of a container's latest instance (`containerID` without its scheme; also the
    /// name of its cgroups).
    pub fn container_id(&self, key: &str, container: &str) -> Result<String> {
        let pod = lock(&self.inner.pods)
            .get(key)
            .cloned()
            .ok_or_else(|| Error::UnknownPod(key.to_string()))?;
        let id = lock(&pod.container_ids).get(container).cloned();
        id.ok_or_else(|| Error::NotRunning(format!("{key}/{container}")))
    }

    /// The cgroup directories of a container's latest instance, one per hierarchy used.
    pub fn container_cgroups(&self, key: &str, container: &str) -> Result<Vec<PathBuf>> {
        let id = self.container_id(key, container)?;
        let uid = lock(&self.inner.pods)
            .get(key)
            .map(|p| p.spec.uid.clone())
            .ok_or_else(|| Error::UnknownPod(key.to_string()))?;
        Ok(self.inner.cgroups.container_dirs(&uid, &id))
    }

    /// The network namespace of the running pod whose IP is `ip` (a proxied connection from it
    /// is dialled there).
    pub fn netns_of_ip(&self, ip: Ipv4Addr) -> Option<std::path::PathBuf> {
        lock(&self.inner.pods)
            .values()
            .filter_map(|pod| pod.sandbox.as_ref())
            .find(|sandbox| sandbox.ip == ip)
            .map(|sandbox| sandbox.netns_path.clone())
    }

    /// For the Service proxy: pod to pod through a Service is dialled from the client pod's
    /// namespace, so the endpoint sees the client's IP as behind kube-proxy; anything else
    /// (the API server, a host port) from the root namespace.
    pub fn client_namespaces(&self) -> super::proxy::ClientNamespaces {
        let pod_range = self.naming().cluster_pod_range();
        let pods = self.clone();
        std::sync::Arc::new(move |client, endpoint| match (client, endpoint) {
            (std::net::IpAddr::V4(client), std::net::IpAddr::V4(endpoint))
                if pod_range.contains(client) && pod_range.contains(endpoint) =>
            {
                pods.netns_of_ip(client)
            }
            _ => None,
        })
    }

    /// Sends `signal` to a container's process group.
    pub fn signal_container(&self, key: &str, container: &str, signal: Signal) -> Result<i32> {
        let pid = self.container_pid(key, container)?;
        signal_container_group(pid, signal)
            .map_err(Error::sys(format!("send {signal} to {key}/{container}")))?;
        Ok(pid)
    }

    /// Steps the wall clock of pod `key`'s opted-in containers to `offset` from the real
    /// clock (`super::clock`). Fails when the pod has no container that
    /// `RuntimeConfig::clock_faults` names (a clock fault never touches another process).
    /// Returns the offset it had.
    pub fn set_clock_offset(
        &self,
        key: &str,
        offset: super::clock::ClockOffset,
    ) -> Result<super::clock::ClockOffset> {
        let pod = lock(&self.inner.pods)
            .get(key)
            .cloned()
            .ok_or_else(|| Error::UnknownPod(key.to_string()))?;
        let faults = &self.inner.config.clock_faults;
        let opted_in = pod
            .spec
            .containers
            .iter()
            .chain(&pod.spec.init_containers)
            .any(|c| faults.applies_to(&c.name));
        if !opted_in {
            return Err(Error::Invalid(format!(
                "clock offset for {key}: none of its containers gets a fake clock (localkube up \
                 --clock-faults NAME names them; given: {:?}, libfaketime {})",
                faults.containers,
                if faults.library.is_some() {
                    "found"
                } else {
                    "not loaded"
                }
            )));
        }
        let before = faults.offset(key);
        faults.set_offset(key, offset)?;
        Ok(before)
    }

    /// SIGKILLs a running container and keeps it down: it is not restarted until
    /// [`PodRuntime::release_container`] (or the pod stops); meanwhile its status is waiting
    /// in CrashLoopBackOff (the killed instance in `last_state`) and it is not ready, as a
    /// crashlooping container held back. Returns the pid killed.
    pub fn kill_and_hold(&self, key: &str, container: &str) -> Result<i32> {
        let pod = lock(&self.inner.pods)
            .get(key)
            .cloned()
            .ok_or_else(|| Error::UnknownPod(key.to_string()))?;
        let pid = self.container_pid(key, container)?;
        // Held before the kill, so the supervisor sees the hold when the process exits.
        pod.held.send_modify(|held| {
            held.insert(container.to_string());
        });
        if let Err(err) = signal_container_group(pid, Signal::SIGKILL) {
            pod.held.send_modify(|held| {
                held.remove(container);
            });
            return Err(Error::sys(format!("send SIGKILL to {key}/{container}"))(
                err,
            ));
        }
        Ok(pid)
    }

    /// Lets a container kept down by [`PodRuntime::kill_and_hold`] restart (at once, as its
    /// restartPolicy allows). A pod that is gone holds nothing: not an error.
    pub fn release_container(&self, key: &str, container: &str) -> Result<()> {
        let pod = lock(&self.inner.pods).get(key).cloned();
        if let Some(pod) = pod {
            pod.held.send_modify(|held| {
                held.remove(container);
            });
        }
        Ok(())
    }

    /// A command that runs `argv` in a running container's namespaces and root with the
    /// container's environment (as `kubectl exec`); the caller chooses its stdio and spawns
    /// it (e.g. piped for an exec stream). Nothing is left behind once it has started.
    /// With `tty` the caller gives it a pseudo-terminal's slave as stdin, which becomes its
    /// controlling terminal, and `TERM` is `xterm` unless the container sets it (as
    /// containerd does for a TTY exec).
    pub fn exec_command(
        &self,
        key: &str,
        container: &str,
        argv: &[String],
        tty: bool,
    ) -> Result<tokio::process::Command> {
        let pid = self.container_pid(key, container)?;
        let pod = lock(&self.inner.pods)
            .get(key)
            .cloned()
            .ok_or_else(|| Error::UnknownPod(key.to_string()))?;
        let spec = pod
            .spec
            .containers
            .iter()
            .chain(&pod.spec.init_containers)
            .find(|c| c.name == container)
            .cloned();
        let spec = spec.ok_or_else(|| Error::UnknownContainer {
            pod: key.to_string(),
            container: container.to_string(),
        })?;
        let image_env = self
            .inner
            .config
            .catalog
            .resolve(&spec.image)
            .map(|e| e.image_env())
            .unwrap_or_default();
        let mut env = container_env(&pod, &spec, &image_env);
        let clock = self
            .inner
            .config
            .clock_faults
            .env_for(key, &spec.name, &env);
        env.extend(clock);
        if tty && !env.iter().any(|(k, _)| k == "TERM") {
            env.push(("TERM".into(), "xterm".into()));
        }
        // As containerd: an exec'd process is in the container's cgroups.
        let cgroup_procs = self
            .container_cgroups(key, container)
            .unwrap_or_default()
            .into_iter()
            .map(|dir| dir.join("cgroup.procs"))
            .collect();
        let exec = ExecSpec {
            netns_path: None,
            target_pid: Some(pid),
            hostname: None,
            staging_dir: PathBuf::from("/"),
            mounts: Vec::new(),
            working_dir: spec.working_dir.as_ref().map(PathBuf::from),
            argv: argv.to_vec(),
            env,
            new_session: true,
            remove_after_read: true,
            cgroup_procs,
            controlling_tty: tty,
        };
        let dir = volumes::pod_dir(self.inner.network.state_dir(), &pod.spec)
            .join("containers")
            .join(container);
        std::fs::create_dir_all(&dir).map_err(Error::io("create exec dir", &dir))?;
        let sequence = EXEC_SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let spec_path = dir.join(format!("exec-{sequence}.json"));
        std::fs::write(&spec_path, serde_json::to_vec(&exec)?)
            .map_err(Error::io("write exec spec", &spec_path))?;
        let mut command = tokio::process::Command::new(&self.inner.config.pod_exec);
        command.arg(&spec_path).env_clear().kill_on_drop(true);
        Ok(command)
    }

    /// Runs `argv` in a running container (see [`PodRuntime::exec_command`]) without stdin
    /// and collects its output; killed after `timeout`.
    pub async fn exec_in_container(
        &self,
        key: &str,
        container: &str,
        argv: &[String],
        timeout: Duration,
    ) -> Result<ExecOutput> {
        let mut command = self.exec_command(key, container, argv, false)?;
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(Error::io(
                "spawn localkube-pod-exec",
                &self.inner.config.pod_exec,
            ))?;
        match tokio::time::timeout(timeout, child.wait_with_output()).await {
            Ok(Ok(output)) => Ok(ExecOutput {
                exit_code: output
                    .status
                    .code()
                    .unwrap_or_else(|| 128 + output.status.signal().unwrap_or(0)),
                stdout: output.stdout,
                stderr: output.stderr,
            }),
            Ok(Err(err)) => Err(Error::io("wait for exec in", PathBuf::from(key))(err)),
            Err(_) => Err(Error::Invalid(format!(
                "exec in {key}/{container}: it did not finish within {timeout:?}"
            ))),
        }
    }

    /// Replaces the files of a rendered volume (configMap, secret, downwardAPI, projected
    /// token) of a running pod; see [`volumes::update_files`].
    pub fn update_volume_files(
        &self,
        key: &str,
        volume: &str,
        files: &[super::spec::VolumeFile],
    ) -> Result<()> {
        let pod = lock(&self.inner.pods)
            .get(key)
            .cloned()
            .ok_or_else(|| Error::UnknownPod(key.to_string()))?;
        let known =
            pod.spec.volumes.iter().any(|v| {
                v.name == volume && matches!(v.source, super::spec::VolumeSource::Files(_))
            });
        if !known {
            return Err(Error::Invalid(format!(
                "volume {volume} of pod {key}: no rendered volume with that name"
            )));
        }
        volumes::update_files(self.inner.network.state_dir(), &pod.spec, volume, files)
    }

    /// Stops a node: every container of its pods is SIGKILLed (as a power cut) and nothing
    /// restarts until [`PodRuntime::start_node`].
    pub fn stop_node(&self, name: &str) -> Result<()> {
        self.set_node_stopped(name, true)
    }

    /// Sets the check a container asks right before it starts or restarts ([`KubeletGate`]).
    pub fn set_kubelet_gate(&self, gate: KubeletGate) {
        *self
            .inner
            .kubelet_gate
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(gate);
    }

    /// Starts a stopped node: containers restart as their restartPolicy allows.
    pub fn start_node(&self, name: &str) -> Result<()> {
        self.set_node_stopped(name, false)
    }

    /// Marks a node's kubelet down or up: while it is down no container of the node's pods
    /// is started or restarted (the running ones run on, the dead stay dead); once it is up
    /// again they restart as their restartPolicy allows.
    pub fn set_kubelet_down(&self, name: &str, down: bool) -> Result<()> {
        let nodes = lock(&self.inner.nodes);
        let node = nodes
            .get(name)
            .ok_or_else(|| Error::UnknownNode(name.to_string()))?;
        if node.kubelet_down.send_replace(down) != down {
            tracing::info!(node = name, down, "node's kubelet state changed");
        }
        Ok(())
    }

    fn set_node_stopped(&self, name: &str, stopped: bool) -> Result<()> {
        let nodes = lock(&self.inner.nodes);
        let node = nodes
            .get(name)
            .ok_or_else(|| Error::UnknownNode(name.to_string()))?;
        node.stopped.send_replace(stopped);
        tracing::info!(node = name, stopped, "node power state changed");
        Ok(())
    }

    /// Partitions node sets: `prohibit` routes in every pod of each side for the other
    /// side's subnets (new pods get them too), and the proxy refuses crossing connections.
    pub fn partition(&self, side_a: &[&str], side_b: &[&str]) -> Result<Partition> {
        let partition = Partition {
            side_a: side_a
                .iter()
                .map(|n| self.node_index(n))
                .collect::<Result<_>>()?,
            side_b: side_b
                .iter()
                .map(|n| self.node_index(n))
                .collect::<Result<_>>()?,
        };
        self.inner.partitions.add(partition.clone());
        for sandbox in self.all_sandboxes() {
            self.apply_partition_to(&sandbox, &partition, true)?;
        }
        Ok(partition)
    }

    /// Removes a partition made by [`PodRuntime::partition`].
    pub fn heal(&self, partition: &Partition) -> Result<()> {
        self.inner.partitions.remove(partition);
        for sandbox in self.all_sandboxes() {
            self.apply_partition_to(&sandbox, partition, false)?;
        }
        // Another still-active partition may cover the same subnets.
        for other in self.inner.partitions.list() {
            for sandbox in self.all_sandboxes() {
                self.apply_partition_to(&sandbox, &other, true)?;
            }
        }
        Ok(())
    }

    /// The network namespaces of every pod (hostNetwork pods have none: a partition's
    /// routes cannot reach them, as a NetworkPolicy does not on a real cluster).
    fn all_sandboxes(&self) -> Vec<SandboxNet> {
        lock(&self.inner.pods)
            .values()
            .filter_map(|p| p.sandbox.clone())
            .collect()
    }

    fn apply_partition_to(
        &self,
        sandbox: &SandboxNet,
        partition: &Partition,
        blocked: bool,
    ) -> Result<()> {
        let other_side = if partition.side_a.contains(&sandbox.node_index) {
            &partition.side_b
        } else if partition.side_b.contains(&sandbox.node_index) {
            &partition.side_a
        } else {
            return Ok(());
        };
        let subnets: Vec<_> = other_side
            .iter()
            .map(|n| self.naming().pod_subnet(*n))
            .collect();
        self.inner
            .network
            .set_prohibited(sandbox, &subnets, blocked)
    }

    /// Stops every pod (grace `grace`) without touching the network; for an orderly `down`
    /// call this then [`super::state::cleanup`].
    pub async fn shutdown(&self, grace: Duration) {
        for key in self.pods() {
            if let Err(err) = self.stop_pod(&key, grace).await {
                tracing::warn!(pod = %key, error = %err, "stopping pod during shutdown");
            }
        }
    }
}

fn validate(spec: &PodSpec) -> Result<()> {
    if spec.containers.is_empty() {
        return Err(Error::Invalid(format!(
            "pod {}: spec.containers must not be empty",
            spec.key()
        )));
    }
    let mut names = std::collections::BTreeSet::new();
    for c in spec.init_containers.iter().chain(&spec.containers) {
        if c.name.is_empty() || !names.insert(c.name.clone()) {
            return Err(Error::Invalid(format!(
                "pod {}: container name {:?} is empty or duplicated",
                spec.key(),
                c.name
            )));
        }
    }
    if spec.hostname.is_empty() {
        return Err(Error::Invalid(format!(
            "pod {}: hostname must not be empty",
            spec.key()
        )));
    }
    Ok(())
}

fn log_paths(state_dir: &Path, spec: &PodSpec, container: &str) -> (PathBuf, PathBuf) {
    let dir = volumes::pod_dir(state_dir, spec).join("logs");
    (
        dir.join(format!("{container}.log")),
        dir.join(format!("{container}.previous.log")),
    )
}

fn waiting_status(
    state_dir: &Path,
    spec: &PodSpec,
    c: &ContainerSpec,
    kind: ContainerKind,
) -> ContainerStatus {
    let (log_path, previous_log_path) = log_paths(state_dir, spec, &c.name);
    let reason = lifecycle::initial_waiting_reason(kind, !spec.init_containers.is_empty());
    ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone(),
        state: ContainerState::Waiting {
            reason: reason.to_string(),
            message: String::new(),
        },
        last_state: None,
        restart_count: 0,
        ready: false,
        started: false,
        pid: None,
        container_id: None,
        last_container_id: None,
        log_path,
        previous_log_path,
    }
}

impl Pod {
    fn update(
        &self,
        inner: &Inner,
        kind: ContainerKind,
        name: &str,
        change: impl FnOnce(&mut ContainerStatus),
    ) {
        let policy = self.spec.restart_policy;
        self.status.send_modify(|status| {
            lifecycle::update_container(status, policy, kind, name, change);
        });
        let _ = inner.events.send(self.status.borrow().clone());
    }

    fn stopping(&self) -> Option<Duration> {
        *self.stop.borrow()
    }
}

/// A node's power (stopped) and its kubelet's state (down), as a pod's containers watch them.
type NodeWatch = (watch::Receiver<bool>, watch::Receiver<bool>);

async fn run_pod(inner: Arc<Inner>, pod: Arc<Pod>, node: NodeWatch) {
    let mut init_ok = true;
    for container in pod.spec.init_containers.clone() {
        let outcome = supervise(
            inner.clone(),
            pod.clone(),
            container,
            ContainerKind::Init,
            node.clone(),
        )
        .await;
        if outcome != Some(0) {
            init_ok = false;
            break;
        }
    }
    if init_ok && pod.stopping().is_none() {
        let mut tasks = Vec::new();
        for container in pod.spec.containers.clone() {
            tasks.push(tokio::spawn(supervise(
                inner.clone(),
                pod.clone(),
                container,
                ContainerKind::Regular,
                node.clone(),
            )));
        }
        for task in tasks {
            let _ = task.await;
        }
    }
    pod.finished.send_replace(true);
    pod.done.notify_waiters();
}

/// What a container instance's wait ended with.
enum Exit {
    Exited(std::process::ExitStatus),
    WaitFailed,
}

impl Exit {
    /// The exit code and signal the container reports.
    fn code_and_signal(&self) -> (i32, Option<i32>) {
        lifecycle::exit_code_and_signal(match self {
            Exit::Exited(status) => Some((status.code(), status.signal())),
            Exit::WaitFailed => None,
        })
    }
}

/// Supervises one container until it should no longer run; returns the last exit code.
async fn supervise(
    inner: Arc<Inner>,
    pod: Arc<Pod>,
    container: ContainerSpec,
    kind: ContainerKind,
    (node_stopped, kubelet_down): NodeWatch,
) -> Option<i32> {
    let state_dir = inner.network.state_dir().to_path_buf();
    let (log_path, previous_log_path) = log_paths(&state_dir, &pod.spec, &container.name);
    let supervisor = Supervisor {
        key: pod.spec.key(),
        stop_rx: pod.stop.subscribe(),
        held_rx: pod.held.subscribe(),
        node_stopped,
        kubelet_down,
        backoff: BackOff::default(),
        pull_backoff: inner.config.backoff_initial,
        last_exit: None,
        log_path,
        previous_log_path,
        first: true,
        inner,
        pod,
        container,
        kind,
    };
    supervisor.run().await
}

/// One container's supervision: the processes, signals and waits that carry out
/// [`lifecycle`]'s rules.
struct Supervisor {
    inner: Arc<Inner>,
    pod: Arc<Pod>,
    container: ContainerSpec,
    kind: ContainerKind,
    key: String,
    stop_rx: watch::Receiver<Option<Duration>>,
    held_rx: watch::Receiver<BTreeSet<String>>,
    node_stopped: watch::Receiver<bool>,
    /// The node's kubelet is down: start nothing until it is up.
    kubelet_down: watch::Receiver<bool>,
    /// Kubelet's per-container restart back-off.
    backoff: BackOff,
    pull_backoff: Duration,
    last_exit: Option<i32>,
    log_path: PathBuf,
    previous_log_path: PathBuf,
    /// No instance has been spawned yet (the log file is not the previous instance's).
    first: bool,
}

/// One running container instance.
struct Instance {
    child: tokio::process::Child,
    pid: i32,
    /// Its id, and the name of its cgroups.
    container_id: String,
    log_writer: Option<tokio::task::JoinHandle<()>>,
    started_at: SystemTime,
    started_instant: Instant,
    probes: Vec<tokio::task::JoinHandle<()>>,
    liveness_failed: Arc<Notify>,
}

impl Supervisor {
    fn update(&self, change: impl FnOnce(&mut ContainerStatus)) {
        self.pod
            .update(&self.inner, self.kind, &self.container.name, change);
    }

    async fn run(mut self) -> Option<i32> {
        loop {
            if self.pod.stopping().is_some() {
                return self.last_exit;
            }
            // A stopped node runs nothing; wait for it (or for the pod to be stopped).
            if *self.node_stopped.borrow() {
                tokio::select! {
                    _ = node_is(&mut self.node_stopped, false) => {}
                    _ = stop_requested(&mut self.stop_rx) => return self.last_exit,
                }
                continue;
            }
            // A node whose kubelet is down starts nothing (the container waits, dead or
            // not started yet, until its kubelet is back).
            if *self.kubelet_down.borrow() {
                tokio::select! {
                    _ = node_is(&mut self.kubelet_down, false) => {}
                    _ = stop_requested(&mut self.stop_rx) => return self.last_exit,
                }
                continue;
            }
            let gate = self
                .inner
                .kubelet_gate
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            if gate.is_some_and(|gate| !(gate.0)(&self.pod.spec.node_name)) {
                tokio::select! {
                    () = tokio::time::sleep(KUBELET_GATE_POLL) => {}
                    _ = stop_requested(&mut self.stop_rx) => return self.last_exit,
                }
                continue;
            }
            let image = &self.container.image;
            let Some(entry) = self.inner.config.catalog.resolve(image).cloned() else {
                if !self.image_pull_failed().await {
                    return self.last_exit;
                }
                continue;
            };
            let again = match self.start(&entry).await {
                Ok(mut instance) => {
                    let exit = self.wait(&mut instance).await;
                    let (exit_code, started) = self.reap(instance, exit).await;
                    self.after_exit(exit_code, started).await
                }
                Err(err) => self.start_failed(err).await,
            };
            if !again {
                return self.last_exit;
            }
        }
    }

    /// The image is not in the catalog: waiting in ErrImagePull, retried after a doubling
    /// back-off. `false` when the pod was stopped meanwhile.
    async fn image_pull_failed(&mut self) -> bool {
        let (key, name, image) = (&self.key, &self.container.name, &self.container.image);
        let message = format!(
            "image {image:?} is not in the localkube image catalog (add it to the catalog file)"
        );
        tracing::warn!(pod = %key, container = %name, image = %image, "unknown image");
        self.update(|c| step::image_pull_failed(c, message));
        tokio::select! {
            _ = tokio::time::sleep(self.pull_backoff) => {}
            _ = stop_requested(&mut self.stop_rx) => return false,
        }
        let schedule = self.inner.config.back_off_schedule();
        self.pull_backoff = schedule.doubled(self.pull_backoff);
        true
    }

    /// The container could not be started: terminated with StartError, restarted after the
    /// back-off as its policy allows. `false` when it is done.
    async fn start_failed(&mut self, err: Error) -> bool {
        tracing::warn!(pod = %self.key, container = %self.container.name, error = %err, "container failed to start");
        let now = SystemTime::now();
        self.update(|c| step::start_failed(c, now));
        self.last_exit = Some(START_ERROR_EXIT_CODE);
        let policy = self.pod.spec.restart_policy;
        lifecycle::restart_allowed(self.kind, policy, START_ERROR_EXIT_CODE)
            && self.back_off().await
    }

    /// The environment (image's, then the container's, then a fake clock's) and the argv
    /// with `$(VAR)` expanded in command and args.
    fn argv_and_env(&self, entry: &CatalogEntry) -> (Vec<String>, Vec<(String, String)>) {
        let container = &self.container;
        let mut env = container_env(&self.pod, container, &entry.image_env());
        let clock = self
            .inner
            .config
            .clock_faults
            .env_for(&self.key, &container.name, &env);
        env.extend(clock);
        let lookup = |var: &str| {
            env.iter()
                .rev()
                .find(|(k, _)| k == var)
                .map(|(_, v)| v.clone())
        };
        let expand = |list: &[String]| -> Vec<String> {
            list.iter().map(|s| volumes::expand(s, &lookup)).collect()
        };
        let argv = container_argv(entry, &expand(&container.command), &expand(&container.args));
        (entry.in_container_argv(argv), env)
    }

    /// Spawns an instance, makes it reachable (pid, attach) and starts its probes.
    async fn start(&mut self, entry: &CatalogEntry) -> Result<Instance> {
        let (argv, env) = self.argv_and_env(entry);
        let (tap, _) = broadcast::channel(ATTACH_LINES);
        // A new instance, a new id and cgroups of its own, which the helper joins before it
        // execs the container's program.
        let container_id = cgroups::new_container_id();
        let uid = &self.pod.spec.uid;
        let cgroup_procs = self.inner.cgroups.create_container(uid, &container_id)?;
        let spawned = spawn_instance(
            &self.inner,
            &self.pod,
            &self.container,
            entry,
            argv,
            env.clone(),
            (&self.log_path, &self.previous_log_path),
            self.first,
            tap.clone(),
            cgroup_procs.clone(),
        );
        self.first = false;
        let (mut child, log_writer) = match spawned {
            Ok(spawned) => spawned,
            Err(err) => {
                if let Err(removal) = self.inner.cgroups.remove_container(uid, &container_id) {
                    tracing::warn!(pod = %self.key, container = %self.container.name, error = %removal, "could not remove the cgroups of a container that did not start");
                }
                return Err(err);
            }
        };
        let (key, name) = (&self.key, &self.container.name);
        lock(&self.pod.container_ids).insert(name.clone(), container_id.clone());
        let pid = child.id().map_or(0, |p| p as i32);
        if let Err(err) = self.inner.network.state().record_process(pid) {
            tracing::warn!(pod = %key, container = %name, pid, error = %err, "could not record process");
        }
        lock(&self.pod.pids).insert(name.clone(), pid);
        let stdin = child
            .stdin
            .take()
            .map(|w| Arc::new(tokio::sync::Mutex::new(Some(w))));
        let point = AttachPoint {
            output: tap,
            stdin,
            stdin_once: self.container.stdin_once,
        };
        lock(&self.pod.attach_points).insert(name.clone(), point);
        // Running once the helper has become the container's program (its cgroups joined,
        // namespaces entered, volumes mounted), as a runtime reports a container started
        // only after its init: an exec or probe that came earlier would join namespaces the
        // helper has not made yet.
        wait_until_exec(pid, &self.inner.config.pod_exec).await;
        let started_at = SystemTime::now();
        let started_instant = Instant::now();
        tracing::info!(pod = %key, container = %name, pid, container_id = %container_id, "container started");
        let kind = self.kind;
        self.update(|c| step::running(c, kind, started_at, pid, &container_id));
        let liveness_failed = Arc::new(Notify::new());
        let probes = start_probes(
            &self.inner,
            &self.pod,
            &self.container,
            self.kind,
            (pid, cgroup_procs),
            env,
            liveness_failed.clone(),
        );
        Ok(Instance {
            child,
            pid,
            container_id,
            log_writer,
            started_at,
            started_instant,
            probes,
            liveness_failed,
        })
    }

    /// Waits until the instance exits, or ends it: SIGTERM then SIGKILL after the grace
    /// period when the pod stops or a liveness or startup probe fails, SIGKILL when its
    /// node loses power.
    async fn wait(&mut self, instance: &mut Instance) -> Exit {
        let (pid, child) = (instance.pid, &mut instance.child);
        loop {
            tokio::select! {
                status = child.wait() => return match status { Ok(s) => Exit::Exited(s), Err(_) => Exit::WaitFailed },
                _ = stop_requested(&mut self.stop_rx) => {
                    let grace = self.pod.stopping().unwrap_or_default();
                    return terminate(pid, grace, child).await;
                }
                _ = node_is(&mut self.node_stopped, true) => {
                    let _ = signal_container_group(pid, Signal::SIGKILL);
                    return match child.wait().await { Ok(s) => Exit::Exited(s), Err(_) => Exit::WaitFailed };
                }
                _ = instance.liveness_failed.notified() => {
                    // The kubelet kills for a failed probe: not while it is down.
                    if *self.kubelet_down.borrow() {
                        tracing::info!(pod = %self.key, container = %self.container.name, "liveness or startup probe failed while the node's kubelet is down: not killed");
                        continue;
                    }
                    tracing::info!(pod = %self.key, container = %self.container.name, "liveness or startup probe failed, killing container");
                    return terminate(pid, self.pod.spec.termination_grace_period, child).await;
                }
            }
        }
    }

    /// Clears up after an instance that ended and reports its termination. Returns its exit
    /// code and when it started.
    async fn reap(&mut self, instance: Instance, exit: Exit) -> (i32, Instant) {
        let (key, name, pid) = (&self.key, &self.container.name, instance.pid);
        for probe in instance.probes {
            probe.abort();
        }
        // The container's process group goes with its main process (as a cgroup would). Only
        // the group: the main process is reaped, and its pid may already be another's.
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        lock(&self.pod.pids).remove(name);
        // Then whatever is left in its cgroups (a daemon that left the process group), and
        // the cgroups themselves, as a runtime deletes a container's.
        let inner = self.inner.clone();
        let (uid, id) = (self.pod.spec.uid.clone(), instance.container_id.clone());
        let removed =
            tokio::task::spawn_blocking(move || inner.cgroups.remove_container(&uid, &id)).await;
        match removed {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                tracing::warn!(pod = %key, container = %name, error = %err, "could not remove the container's cgroups")
            }
            Err(err) => {
                tracing::warn!(pod = %key, container = %name, error = %err, "cgroup removal task failed")
            }
        }
        // As kubelet: the container is reported terminated only once its output is in the
        // log, so `kubectl logs` right after termination shows the last lines. Bounded: a
        // daemon that escaped the process group may hold the pipes open.
        if let Some(writer) = instance.log_writer {
            let _ = tokio::time::timeout(LOG_DRAIN_TIMEOUT, writer).await;
        }
        // The last sender of the output tap: attach sessions see the end after the output.
        lock(&self.pod.attach_points).remove(name);
        let finished_at = SystemTime::now();
        let (exit_code, signal) = exit.code_and_signal();
        self.last_exit = Some(exit_code);
        tracing::info!(pod = %key, container = %name, pid, exit_code, "container terminated");
        let started_at = instance.started_at;
        self.update(|c| step::terminated(c, (exit_code, signal), started_at, finished_at));
        (exit_code, instance.started_instant)
    }

    /// Carries out [`lifecycle::after_exit`]; `false` when the container is done.
    async fn after_exit(&mut self, exit_code: i32, started: Instant) -> bool {
        let exited = Exited {
            exit_code,
            pod_stopping: self.pod.stopping().is_some(),
            held: self.held_rx.borrow().contains(&self.container.name),
            node_stopped: *self.node_stopped.borrow(),
        };
        match lifecycle::after_exit(self.kind, self.pod.spec.restart_policy, exited) {
            AfterExit::Finish => false,
            AfterExit::HoldUntilReleased => self.hold().await,
            AfterExit::RestartWhenPowered => {
                self.update(step::restarting_now);
                true
            }
            AfterExit::RestartAfterBackOff => {
                let schedule = self.inner.config.back_off_schedule();
                self.backoff.instance_ran(started.elapsed(), &schedule);
                self.back_off().await
            }
        }
    }

    /// Killed and kept down by a fault: held back as in CrashLoopBackOff until released.
    /// `false` when the pod was stopped meanwhile.
    async fn hold(&mut self) -> bool {
        let pod_name = &self.pod.spec.name;
        self.update(|c| step::held_down(c, pod_name));
        let name = &self.container.name;
        tokio::select! {
            _ = self.held_rx.wait_for(|held| !held.contains(name)) => {}
            _ = stop_requested(&mut self.stop_rx) => return false,
        }
        tracing::info!(pod = %self.key, container = %name, "container released, restarting");
        self.update(step::restarting_after_wait);
        true
    }

    /// Restarts after kubelet's back-off ([`BackOff::next_restart`]): at once, or after
    /// waiting in CrashLoopBackOff. `false` when the pod was stopped meanwhile.
    async fn back_off(&mut self) -> bool {
        let schedule = self.inner.config.back_off_schedule();
        let wait = match self.backoff.next_restart(&schedule) {
            RestartDelay::Now => {
                self.update(step::restarting_now);
                return true;
            }
            RestartDelay::After(wait) => wait,
        };
        let pod_name = &self.pod.spec.name;
        self.update(|c| step::backing_off(c, wait, pod_name));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {
                self.update(step::restarting_after_wait);
                true
            }
            _ = stop_requested(&mut self.stop_rx) => false,
        }
    }
}

/// How long a container's helper may take to `execve` the program before the container is
/// reported running anyway.
const EXEC_WAIT_MAX: Duration = Duration::from_secs(5);

/// Waits until process `pid` no longer runs the `helper` binary (it has `execve`d the
/// container's program, or exited), at most [`EXEC_WAIT_MAX`].
async fn wait_until_exec(pid: i32, helper: &Path) {
    let helper = std::fs::canonicalize(helper).unwrap_or_else(|_| helper.to_path_buf());
    let deadline = Instant::now() + EXEC_WAIT_MAX;
    loop {
        let still_helper = std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| {
            exe.to_string_lossy()
                .starts_with(&*helper.to_string_lossy())
        });
        if !still_helper || Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn stop_requested(rx: &mut watch::Receiver<Option<Duration>>) {
    let _ = rx.wait_for(Option::is_some).await;
}

async fn node_is(rx: &mut watch::Receiver<bool>, stopped: bool) {
    let _ = rx.wait_for(|s| *s == stopped).await;
}

/// SIGTERM to the process group, SIGKILL after `grace`.
async fn terminate(pid: i32, grace: Duration, child: &mut tokio::process::Child) -> Exit {
    // As a container runtime does: the stop signal, then SIGKILL once the grace period is
    // over. A frozen (SIGSTOPped) process is never continued: its SIGTERM stays pending and
    // SIGKILL ends it where it stopped. Continuing it would let a frozen, fenced-by-nobody
    // mysqld serve its held connections for the whole grace period
    // (docs/design/history.md#issue-10-the-agentless-primary).
    let _ = signal_container_group(pid, Signal::SIGTERM);
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(Ok(status)) => Exit::Exited(status),
        Ok(Err(_)) => Exit::WaitFailed,
        Err(_) => {
            let _ = signal_container_group(pid, Signal::SIGKILL);
            match child.wait().await {
                Ok(status) => Exit::Exited(status),
                Err(_) => Exit::WaitFailed,
            }
        }
    }
}

/// The binds of the image's host programs at [`super::catalog::IMAGE_PROGRAMS_MOUNT`]
/// ([`CatalogEntry::program_mounts`]; a failure to prepare them is logged, and the container
/// then runs without them, as with a missing binary).
fn image_program_mounts(state_dir: &Path, entry: &CatalogEntry) -> Vec<BindMount> {
    match entry.program_mounts(&state_dir.join("image-programs")) {
        Ok(mounts) => mounts,
        Err(err) => {
            tracing::warn!(image = %entry.image, error = %err, "could not prepare the image's programs");
            Vec::new()
        }
    }
}

fn container_env(
    pod: &Pod,
    container: &ContainerSpec,
    image_env: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), DEFAULT_PATH.into()),
        ("HOSTNAME".into(), pod.spec.hostname.clone()),
        ("HOME".into(), "/root".into()),
    ];
    let set = |env: &mut Vec<(String, String)>, k: String, v: String| {
        env.retain(|(name, _)| *name != k);
        env.push((k, v));
    };
    for (k, v) in image_env {
        set(&mut env, k.clone(), v.clone());
    }
    let mut container_vars: Vec<(String, String)> = Vec::new();
    for var in &container.env {
        let value = match &var.value {
            EnvValue::Literal(text) => {
                let lookup = |name: &str| {
                    container_vars
                        .iter()
                        .rev()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| v.clone())
                };
                volumes::expand(text, &lookup)
            }
            EnvValue::PodIp => pod.pod_ip.to_string(),
            EnvValue::HostIp => pod.host_ip.to_string(),
        };
        container_vars.retain(|(k, _)| *k != var.name);
        container_vars.push((var.name.clone(), value));
    }
    for (k, v) in container_vars {
        set(&mut env, k, v);
    }
    env
}

/// How long a terminated container's log writer may take to drain its pipes before the
/// termination is reported anyway.
const LOG_DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

#[allow(clippy::too_many_arguments)]
fn spawn_instance(
    inner: &Inner,
    pod: &Pod,
    container: &ContainerSpec,
    image: &CatalogEntry,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    (log_path, previous_log_path): (&Path, &Path),
    first: bool,
    tap: broadcast::Sender<(Stream, Vec<u8>)>,
    cgroup_procs: Vec<PathBuf>,
) -> Result<(tokio::process::Child, Option<tokio::task::JoinHandle<()>>)> {
    let state_dir = inner.network.state_dir();
    if let Some(dir) = log_path.parent() {
        std::fs::create_dir_all(dir).map_err(Error::io("create log dir", dir))?;
    }
    if !first && log_path.exists() {
        std::fs::rename(log_path, previous_log_path)
            .map_err(Error::io("keep previous log", previous_log_path))?;
    }
    let mut mounts =
        volumes::container_mounts(state_dir, &pod.spec, container, &image.private_dirs)?;
    mounts.extend(image_program_mounts(state_dir, image));
    mounts.extend(inner.config.clock_faults.mount_for(&container.name));
    let staging = volumes::pod_dir(state_dir, &pod.spec)
        .join("containers")
        .join(&container.name)
        .join("staging");
    std::fs::create_dir_all(&staging).map_err(Error::io("create staging dir", &staging))?;
    let spec = ExecSpec {
        netns_path: pod.sandbox.as_ref().map(|s| s.netns_path.clone()),
        target_pid: None,
        // A hostNetwork pod shares the host's UTS namespace (and hostname), as on a node.
        hostname: (!pod.spec.host_network).then(|| pod.spec.hostname.clone()),
        staging_dir: staging.clone(),
        mounts,
        working_dir: container.working_dir.as_ref().map(PathBuf::from),
        argv,
        env,
        new_session: true,
        remove_after_read: false,
        cgroup_procs,
        controlling_tty: false,
    };
    let spec_path = staging.join("exec.json");
    std::fs::write(&spec_path, serde_json::to_vec(&spec)?)
        .map_err(Error::io("write exec spec", &spec_path))?;
    let mut child = tokio::process::Command::new(&inner.config.pod_exec)
        .arg(&spec_path)
        .stdin(if container.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_clear()
        .spawn()
        .map_err(Error::io(
            "spawn localkube-pod-exec",
            &inner.config.pod_exec,
        ))?;
    let log_writer = match (child.stdout.take(), child.stderr.take()) {
        (Some(stdout), Some(stderr)) => Some(super::cri_logs::spawn_writer(
            stdout, stderr, log_path, tap,
        )?),
        _ => None,
    };
    Ok((child, log_writer))
}

/// Everything a probe loop of one container instance needs.
struct ProbeContext {
    inner: Arc<Inner>,
    pod: Arc<Pod>,
    name: String,
    kind: ContainerKind,
    pid: i32,
    ports: Vec<super::spec::ContainerPort>,
    env: Vec<(String, String)>,
    cgroup_procs: Vec<PathBuf>,
    scratch: PathBuf,
}

impl ProbeContext {
    /// Changes the container's status only while this instance is still the running one
    /// (an aborted probe task may still be finishing a step on another thread).
    fn set(&self, change: impl FnOnce(&mut ContainerStatus)) {
        let pid = self.pid;
        self.pod.update(&self.inner, self.kind, &self.name, |c| {
            if c.pid == Some(pid) {
                change(c);
            }
        });
    }

    /// Runs `probe` in `role` until it decides: Startup returns `true` on success and
    /// `false` at the failure threshold; Liveness returns `false` at the failure threshold;
    /// Readiness never returns (it flips the ready flag).
    async fn run(&self, probe: &super::spec::Probe, role: ProbeRole) -> bool {
        tokio::time::sleep(probe.initial_delay).await;
        let mut tally = ProbeTally::default();
        loop {
            let target = ProbeTarget {
                pod_ip: self.pod.pod_ip,
                pid: self.pid,
                ports: &self.ports,
                env: &self.env,
                cgroup_procs: &self.cgroup_procs,
                helper: &self.inner.config.pod_exec,
                scratch: &self.scratch,
            };
            let ok = probe_once(&probe.handler, &target, probe.timeout).await;
            match tally.record(ok, probe, role) {
                ProbeStep::Done(decided) => return decided,
                ProbeStep::SetReady(ready) => self.set(|c| c.ready = ready),
                ProbeStep::Continue => {}
            }
            tokio::time::sleep(probe.period).await;
        }
    }
}

/// Starts the probes of one container instance as kubelet does: the startup probe first
/// (`started` stays false until it succeeds; reaching its failure threshold kills the
/// container), then readiness (drives `ready`) and liveness (kills the container at its
/// failure threshold) side by side. Without a readiness probe the container is ready once
/// started. The returned task is aborted when the instance ends. An exec probe runs in the
/// instance's (pid's) namespaces and cgroups.
fn start_probes(
    inner: &Arc<Inner>,
    pod: &Arc<Pod>,
    container: &ContainerSpec,
    kind: ContainerKind,
    (pid, cgroup_procs): (i32, Vec<PathBuf>),
    env: Vec<(String, String)>,
    liveness_failed: Arc<Notify>,
) -> Vec<tokio::task::JoinHandle<()>> {
    if kind == ContainerKind::Init {
        return Vec::new();
    }
    let context = ProbeContext {
        inner: inner.clone(),
        pod: pod.clone(),
        name: container.name.clone(),
        kind,
        pid,
        ports: container.ports.clone(),
        env,
        cgroup_procs,
        scratch: volumes::pod_dir(inner.network.state_dir(), &pod.spec)
            .join("containers")
            .join(&container.name),
    };
    let (startup, readiness, liveness) = (
        container.startup_probe.clone(),
        container.readiness_probe.clone(),
        container.liveness_probe.clone(),
    );
    vec![tokio::spawn(async move {
        if let Some(probe) = &startup {
            if !context.run(probe, ProbeRole::Startup).await {
                liveness_failed.notify_one();
                return;
            }
        }
        context.set(|c| step::probe_started(c, readiness.is_some()));
        let ready_loop = async {
            if let Some(probe) = &readiness {
                context.run(probe, ProbeRole::Readiness).await;
            }
        };
        let live_loop = async {
            match &liveness {
                Some(probe) => {
                    context.run(probe, ProbeRole::Liveness).await;
                    liveness_failed.notify_one();
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::join!(ready_loop, live_loop);
    })]
}
