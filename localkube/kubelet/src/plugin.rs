//! [`Kubelet`]: the [`Plugin`] that connects the API server to the node side. Per node it
//! runs one worker per bound pod (start, status, graceful stop, final delete), feeds the
//! cluster DNS and Service proxy from Services, Endpoints and `DNSEndpoint`s, copies
//! container logs to where `pods/log` reads them, keeps Node conditions, and serves the
//! fault control socket ([`super::control`]).

use super::error::{Error, Result};
use super::kubelet_process::{KubeletProcesses, KubeletState};
use super::{log_copy, service_specs, status, translate};
use axum::response::Response;
use futures::future::BoxFuture;
use localkube_apiserver::controllers::record_event;
use localkube_apiserver::node_pods::PODS;
use localkube_apiserver::plugin::StreamRequest;
use localkube_apiserver::registry::Subresource;
use localkube_apiserver::store::{EventType, StoreEvent};
use localkube_apiserver::{meta, ApiError, Cluster, Config, Plugin, PluginContext};
use localkube_runtime::{ClusterNaming, NodeAgent, PodRuntime, PodStatus, RuntimeConfig};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{broadcast, watch, RwLock};

/// How often everything is reconciled against the store (events do the fast path).
const RESYNC: Duration = Duration::from_secs(2);
/// How often a pod worker copies container logs and re-renders volume files.
const LOG_COPY: Duration = Duration::from_millis(250);
/// How often configMap/secret/token volume files are re-rendered (kubelet: about a minute).
const VOLUME_REFRESH: Duration = Duration::from_secs(60);
/// How often a running node renews its Lease in `kube-node-lease` (kubelet: 10 s).
const LEASE_RENEW: Duration = Duration::from_secs(10);
/// `spec.leaseDurationSeconds` of node Leases (kubelet: 40).
const LEASE_SECONDS: u64 = 40;
/// How often the kubelet processes' beats are looked at.
const KUBELET_CHECK: Duration = Duration::from_millis(100);
/// Grace of pods still running when localkube stops.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How long a deleted claim's volume waits for the pods mounting it to go.
const RECLAIM_WAIT_MAX: Duration = Duration::from_secs(120);
/// Image catalog file the harness may write into the state dir.
pub const CATALOG_FILE: &str = "images.yaml";

/// How the kubelet is set up.
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// Where `localkube-pod-exec` and `localkube-mariadb-entrypoint` are.
    pub bin_dir: PathBuf,
    /// An image catalog file whose entries extend the built-in ones (default:
    /// `<state_dir>/images.yaml` when it exists).
    pub catalog: Option<PathBuf>,
    /// Names of the containers whose wall clock the clock-offset fault may step
    /// (`localkube_runtime::clock`; empty: none).
    pub clock_faults: Vec<String>,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self {
            bin_dir: localkube_runtime::default_bin_dir(),
            catalog: None,
            clock_faults: Vec::new(),
        }
    }
}

/// The kubelet plugin (one for all nodes of the cluster).
#[derive(Debug, Clone, Default)]
pub struct Kubelet {
    config: KubeletConfig,
}

impl Kubelet {
    /// A kubelet with `config`.
    pub fn new(config: KubeletConfig) -> Self {
        Self { config }
    }
}

// The state file records the API server's port for the DNS address the node side serves.
const _: () = assert!(
    localkube_apiserver::server::CLUSTER_DNS_PORT == localkube_runtime::node_agent::DNS_PORT
);

/// Prepares a server config to run pods: requires root, creates and canonicalises the
/// state dir (refused with too little free space on its filesystem), removes leftovers of a crashed run, claims the cluster's address slot, sets
/// `service_cidr` to the slot's Service range (ClusterIPs must be local addresses the proxy
/// serves) and `dns_address` to the slot's cluster DNS address, and adds the kubelet plugin.
pub fn prepare(config: &mut Config, kubelet: Kubelet) -> Result<()> {
    localkube_runtime::network::require_root(nix::unistd::geteuid())?;
    std::fs::create_dir_all(&config.state_dir)
        .map_err(Error::io(format!("create {}", config.state_dir.display())))?;
    let dir = std::fs::canonicalize(&config.state_dir)
        .map_err(Error::io(format!("resolve {}", config.state_dir.display())))?;
    localkube_runtime::state::require_free_space(&dir)?;
    if !localkube_runtime::state::read_records(&dir)?.is_empty() {
        localkube_runtime::cleanup(&dir)?;
    }
    let naming = ClusterNaming::claim(&dir)?;
    config.state_dir = dir;
    config.service_cidr = naming.service_range().to_string();
    config.dns_address = Some(naming.dns_ip());
    config.plugins.push(Arc::new(kubelet));
    Ok(())
}

/// What a running kubelet shares with the HTTP handlers (exec, port-forward) and the
/// control socket.
#[derive(Debug)]
pub struct Shared {
    /// The cluster.
    pub cluster: Arc<Cluster>,
    /// The pod runtime of every node.
    pub runtime: PodRuntime,
    /// The node side (services, DNS, faults); `None` once stopped.
    pub agent: RwLock<Option<NodeAgent>>,
    kubernetes_ip: Ipv4Addr,
    nodes: Vec<String>,
    workers: Mutex<HashMap<String, watch::Sender<Option<Arc<Value>>>>>,
    started: Mutex<HashMap<String, String>>,
    stopped_nodes: Mutex<HashSet<String>>,
    copiers: Mutex<HashMap<String, log_copy::Copier>>,
    /// Each node's kubelet process (`None`: no `localkube` binary to run them: every
    /// kubelet is up).
    kubelets: Option<Arc<KubeletProcesses>>,
    /// The nodes whose kubelet is down, as last seen, and how.
    kubelets_down: Mutex<HashMap<String, KubeletState>>,
}

static REGISTRY: Mutex<Vec<(PathBuf, Weak<Shared>)>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The running kubelet of the cluster whose state dir is `state_dir`.
pub fn lookup(state_dir: &Path) -> Option<Arc<Shared>> {
    let mut reg = lock(&REGISTRY);
    reg.retain(|(_, w)| w.strong_count() > 0);
    reg.iter()
        .find(|(p, _)| p == state_dir)
        .and_then(|(_, w)| w.upgrade())
}

impl Plugin for Kubelet {
    fn name(&self) -> &str {
        "kubelet"
    }

    fn runs_pods(&self) -> bool {
        true
    }

    fn serves_streams(&self) -> bool {
        true
    }

    fn serve_stream(
        &self,
        request: StreamRequest,
    ) -> BoxFuture<'static, std::result::Result<Response, ApiError>> {
        Box::pin(super::stream::serve(request))
    }

    fn node_unreachable(&self, cluster: &Cluster, node: &str) -> Option<String> {
        lookup(&cluster.state_dir)?.kubelet_unreachable(node)
    }

    fn run(&self, ctx: PluginContext) -> BoxFuture<'static, ()> {
        let config = self.config.clone();
        Box::pin(async move {
            if let Err(e) = run(config, ctx).await {
                tracing::error!(error = %e, "kubelet stopped");
            }
        })
    }
}

async fn run(config: KubeletConfig, ctx: PluginContext) -> Result<()> {
    let state_dir = ctx.cluster.state_dir.clone();
    let mut rc = RuntimeConfig::new(&state_dir, &config.bin_dir);
    rc.clock_faults = localkube_runtime::ClockFaults::new(&state_dir, config.clock_faults.clone())?;
    if !rc.clock_faults.containers.is_empty() {
        tracing::info!(containers = ?rc.clock_faults.containers, library = ?rc.clock_faults.library, "clock faults: these containers get libfaketime");
    }
    let catalog = config
        .catalog
        .clone()
        .or_else(|| Some(state_dir.join(CATALOG_FILE)).filter(|p| p.exists()));
    if let Some(path) = catalog {
        let extra = localkube_runtime::ImageCatalog::from_file(&path)?;
        rc.catalog.extend(extra);
    }
    let nodes: Vec<&str> = ctx.nodes.iter().map(String::as_str).collect();
    let agent = NodeAgent::up(rc, &nodes).await?;
    let range = agent.runtime.naming().service_range();
    if !range.contains(ctx.kubernetes_service_ip) {
        tracing::warn!(%range, "the API server's Service range is not the node side's; ClusterIPs are unreachable from pods (use kubelet::prepare)");
    }
    let kubelets = match KubeletProcesses::program(&config.bin_dir) {
        Some(program) => {
            let records = agent.runtime.network().state().clone();
            let nodes = ctx.nodes.clone();
            let spawned = tokio::task::spawn_blocking(move || {
                KubeletProcesses::spawn(&program, &nodes, move |pid| {
                    if let Err(e) = records.record_process(pid) {
                        tracing::warn!(pid, error = %e, "could not record the kubelet process");
                    }
                })
            })
            .await;
            match spawned {
                Ok(kubelets) => {
                    let kubelets = Arc::new(kubelets);
                    let gate = Arc::clone(&kubelets);
                    agent
                        .runtime
                        .set_kubelet_gate(localkube_runtime::runtime::KubeletGate(Arc::new(
                            move |node: &str| gate.state(node).is_up(),
                        )));
                    Some(kubelets)
                }
                Err(e) => {
                    tracing::error!(error = %e, "could not start the kubelet processes");
                    None
                }
            }
        }
        None => {
            tracing::warn!(bin_dir = %config.bin_dir.display(), "no localkube binary in the bin dir: the nodes' kubelets have no process (a fault agent cannot stop them)");
            None
        }
    };
    let shared = Arc::new(Shared {
        cluster: ctx.cluster.clone(),
        runtime: agent.runtime.clone(),
        agent: RwLock::new(Some(agent)),
        kubernetes_ip: ctx.kubernetes_service_ip,
        nodes: ctx.nodes.clone(),
        workers: Mutex::new(HashMap::new()),
        started: Mutex::new(HashMap::new()),
        stopped_nodes: Mutex::new(HashSet::new()),
        copiers: Mutex::new(HashMap::new()),
        kubelets,
        kubelets_down: Mutex::new(HashMap::new()),
    });
    lock(&REGISTRY).push((state_dir.clone(), Arc::downgrade(&shared)));
    let control = super::control::serve(shared.clone(), ctx.shutdown.clone())?;
    let result = shared.clone().main_loop(ctx.shutdown.clone()).await;
    control.abort();
    let _ = std::fs::remove_file(super::control::socket_path(&state_dir));
    lock(&shared.workers).clear();
    if let Some(kubelets) = &shared.kubelets {
        kubelets.stop();
    }
    let agent = shared.agent.write().await.take();
    if let Some(agent) = agent {
        agent.down(SHUTDOWN_GRACE).await?;
    }
    lock(&REGISTRY).retain(|(p, _)| p != &state_dir);
    result
}

fn deleting(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

fn key_of(pod: &Value) -> String {
    format!("{}/{}", meta::namespace(pod), meta::name(pod))
}

impl Shared {
    async fn main_loop(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) -> Result<()> {
        let mut store_rx = self.cluster.store.subscribe();
        let mut rt_rx = self.runtime.subscribe();
        self.init_nodes();
        self.resync().await;
        let mut lease = tokio::time::interval(LEASE_RENEW);
        let mut kubelets = tokio::time::interval(KUBELET_CHECK);
        kubelets.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut tick = tokio::time::interval(RESYNC);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                ev = store_rx.recv() => match ev {
                    Ok(ev) => self.on_store(&ev).await,
                    Err(broadcast::error::RecvError::Lagged(_)) => self.resync().await,
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                st = rt_rx.recv() => match st {
                    Ok(st) => self.write_status(&st),
                    Err(broadcast::error::RecvError::Lagged(_)) => self.resync_status(),
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                _ = tick.tick() => self.resync().await,
                _ = lease.tick() => self.renew_leases(),
                _ = kubelets.tick() => self.check_kubelets(),
                _ = shutdown.changed() => break,
            }
            if *shutdown.borrow() {
                break;
            }
        }
        Ok(())
    }

    /// The Node objects get the node side's pod subnets and, as `InternalIP`, the node's
    /// address (its pod gateway in the root namespace), which is also `status.hostIP` of its
    /// pods and the pod IP of its `hostNetwork` pods.
    fn init_nodes(&self) {
        for node in &self.nodes {
            let Ok(index) = self.runtime.node_index(node) else {
                continue;
            };
            let address = self.runtime.naming().gateway(index).to_string();
            let r = self.cluster.modify(
                "",
                "nodes",
                "",
                node,
                Some(Subresource::Status),
                "kubelet",
                |n| {
                    let addresses = json!([{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": node}]);
                    if n.pointer("/status/addresses") == Some(&addresses) {
                        return false;
                    }
                    n["status"]["addresses"] = addresses;
                    true
                },
            );
            if let Err(e) = r {
                tracing::warn!(node, error = %e, "could not set the node's address");
            }
            let cidr = self.runtime.naming().pod_subnet(index).to_string();
            let r = self
                .cluster
                .modify("", "nodes", "", node, None, "kubelet", |n| {
                    if meta::str_at(n, "/spec/podCIDR") == cidr {
                        return false;
                    }
                    n["spec"]["podCIDR"] = json!(cidr);
                    n["spec"]["podCIDRs"] = json!([cidr]);
                    true
                });
            if let Err(e) = r {
                tracing::warn!(node, error = %e, "could not set the node's podCIDR");
            }
        }
        self.node_conditions();
    }

    /// Node Ready condition: True while the node runs and its kubelet is up, Unknown while
    /// it is stopped or its kubelet is down (as the node lifecycle controller sets it once a
    /// kubelet stops posting).
    fn node_conditions(&self) {
        let stopped = lock(&self.stopped_nodes).clone();
        let kubelets_down = lock(&self.kubelets_down).clone();
        for node in &self.nodes {
            let down = stopped.contains(node) || kubelets_down.contains_key(node);
            let (status, reason, message) = if down {
                (
                    "Unknown",
                    "NodeStatusUnknown",
                    "Kubelet stopped posting node status.",
                )
            } else {
                ("True", "KubeletReady", "kubelet is posting ready status")
            };
            let r = self
                .cluster
                .modify("", "nodes", "", node, Some(Subresource::Status), "kubelet", |n| {
                    let conds = n
                        .pointer_mut("/status/conditions")
                        .and_then(Value::as_array_mut);
                    let Some(conds) = conds else { return false };
                    let Some(c) = conds
                        .iter_mut()
                        .find(|c| meta::str_at(c, "/type") == "Ready")
                    else {
                        return false;
                    };
                    if meta::str_at(c, "/status") == status {
                        return false;
                    }
                    let now = meta::now();
                    *c = json!({"type": "Ready", "status": status, "reason": reason, "message": message,
                        "lastHeartbeatTime": now, "lastTransitionTime": now});
                    true
                });
            if let Err(e) = r {
                tracing::warn!(node, error = %e, "could not update the node's Ready condition");
            }
        }
    }

    /// Renews the Lease of every running node, as the kubelet's heartbeat (a stopped node
    /// stops renewing).
    fn renew_leases(&self) {
        let stopped = lock(&self.stopped_nodes).clone();
        let kubelets_down = lock(&self.kubelets_down).clone();
        let running = |n: &&String| !stopped.contains(*n) && !kubelets_down.contains_key(*n);
        for node in self.nodes.iter().filter(running) {
            let now = meta::micro_time(jiff::Timestamp::now());
            let exists = self
                .cluster
                .store
                .get("coordination.k8s.io/leases", "kube-node-lease", node)
                .is_some();
            let r = if exists {
                self.cluster
                    .modify(
                        "coordination.k8s.io",
                        "leases",
                        "kube-node-lease",
                        node,
                        None,
                        "kubelet",
                        |l| {
                            l["spec"]["renewTime"] = json!(now);
                            true
                        },
                    )
                    .map(|_| ())
            } else {
                self.cluster
                    .create_internal(
                        "coordination.k8s.io",
                        "leases",
                        "kube-node-lease",
                        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                            "metadata": {"name": node, "namespace": "kube-node-lease"},
                            "spec": {"holderIdentity": node, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": now}}),
                        "kubelet",
                    )
                    .map(|_| ())
            };
            if let Err(e) = r {
                tracing::debug!(node, error = %e, "could not renew the node lease");
            }
        }
    }

    /// Looks at the kubelet processes' beats; a node whose kubelet went down or came back
    /// gets its Ready condition, its runtime told (nothing starts on a node whose kubelet is
    /// down), and, once back, its pods' statuses and Lease posted again.
    fn check_kubelets(&self) {
        let Some(kubelets) = &self.kubelets else {
            return;
        };
        let mut changed = Vec::new();
        {
            let mut down = lock(&self.kubelets_down);
            for node in &self.nodes {
                let state = kubelets.state(node);
                let before = down.get(node).copied().unwrap_or(KubeletState::Up);
                if state.is_up() != before.is_up() {
                    changed.push((node.clone(), state));
                }
                if state.is_up() {
                    down.remove(node);
                } else {
                    down.insert(node.clone(), state);
                }
            }
        }
        if changed.is_empty() {
            return;
        }
        for (node, state) in &changed {
            tracing::info!(node, ?state, pid = ?kubelets.pid(node), "node's kubelet {}", if state.is_up() { "is up again" } else { "is down" });
            if let Err(e) = self.runtime.set_kubelet_down(node, !state.is_up()) {
                tracing::warn!(node, error = %e, "could not tell the runtime of the node's kubelet");
            }
            if !state.is_up() {
                // The node lifecycle controller's part: its pods are not Ready any more.
                for pod in self.cluster.pods_on_node(node) {
                    let (ns, name) = (meta::namespace(&pod), meta::name(&pod));
                    if let Err(e) = self
                        .cluster
                        .update_pod_status(ns, name, status::node_not_ready)
                    {
                        tracing::debug!(pod = %format!("{ns}/{name}"), error = %e, "could not mark the pod not ready");
                    }
                }
            }
        }
        self.node_conditions();
        if changed.iter().any(|(_, state)| state.is_up()) {
            self.renew_leases();
            self.resync_status();
        }
    }

    /// The pid of `node`'s kubelet process while it runs (`None` too when nodes have none).
    pub fn kubelet_pid(&self, node: &str) -> Option<i32> {
        self.kubelets.as_ref()?.pid(node)
    }

    /// Whether `node`'s kubelet is down.
    fn kubelet_down(&self, node: &str) -> bool {
        lock(&self.kubelets_down).contains_key(node)
    }

    /// What the API server answers for a request to `node`'s kubelet (exec, attach,
    /// port-forward, logs) while it cannot be reached; `None` while it is up.
    pub fn kubelet_unreachable(&self, node: &str) -> Option<String> {
        let state = lock(&self.kubelets_down).get(node).copied()?;
        let ip = self
            .runtime
            .node_index(node)
            .map(|index| self.runtime.naming().gateway(index).to_string())
            .unwrap_or_default();
        state.unreachable(&ip)
    }

    /// The node a pod of the runtime (`ns/name`) runs on, from the store.
    fn node_of(&self, key: &str) -> Option<String> {
        let (ns, name) = key.split_once('/')?;
        let pod = self.cluster.store.get(PODS, ns, name)?;
        Some(meta::str_at(&pod, "/spec/nodeName").to_string())
    }

    /// Marks a node stopped or started (for its Ready condition).
    pub fn set_node_stopped(&self, node: &str, stopped: bool) {
        if stopped {
            lock(&self.stopped_nodes).insert(node.to_string());
        } else {
            lock(&self.stopped_nodes).remove(node);
        }
        self.node_conditions();
    }

    /// A deleted claim's data is deleted too, as a dynamically provisioned volume with
    /// reclaimPolicy Delete (kind's local-path): once none of the pods that mounted the claim
    /// when it was deleted is still in the store, its directory (by the claim's uid) is
    /// removed. A claim created again under the same name is another volume, empty from the
    /// start, whether or not the old one is gone yet (a reinstalled group never opens the old
    /// group's data: the harness's `--reuse` found both). Bounded by [`RECLAIM_WAIT_MAX`]:
    /// a pod that outlives it keeps the old volume on disk.
    fn reclaim_volume(self: &Arc<Self>, claim: &Value) {
        let shared = Arc::clone(self);
        let namespace = meta::namespace(claim).to_string();
        let name = meta::name(claim).to_string();
        let uid = meta::uid_of(claim).to_string();
        let mounting = |pod: &Value| {
            pod.pointer("/spec/volumes")
                .and_then(Value::as_array)
                .is_some_and(|volumes| {
                    volumes
                        .iter()
                        .any(|v| meta::str_at(v, "/persistentVolumeClaim/claimName") == name)
                })
        };
        let (pods, _) = shared.cluster.store.list(PODS, Some(&namespace));
        let users: HashSet<String> = pods
            .iter()
            .filter(|pod| mounting(pod))
            .map(|pod| meta::uid_of(pod).to_string())
            .collect();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + RECLAIM_WAIT_MAX;
            loop {
                let (pods, _) = shared.cluster.store.list(PODS, Some(&namespace));
                let mounted = pods.iter().any(|pod| users.contains(meta::uid_of(pod)));
                if !mounted {
                    let dir = localkube_runtime::volumes::pvc_dir(
                        &shared.cluster.state_dir,
                        &namespace,
                        &name,
                        &uid,
                    );
                    match std::fs::remove_dir_all(&dir) {
                        Ok(()) => {
                            tracing::info!(
                                namespace,
                                claim = name,
                                uid,
                                "deleted claim's volume reclaimed"
                            )
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => {
                            tracing::warn!(namespace, claim = name, uid, error = %e, "could not reclaim the deleted claim's volume")
                        }
                    }
                    // The claim's name directory goes too once no volume of that name is left.
                    if let Some(parent) = dir.parent() {
                        let _ = std::fs::remove_dir(parent);
                    }
                    return;
                }
                if tokio::time::Instant::now() >= deadline {
                    tracing::warn!(
                        namespace,
                        claim = name,
                        uid,
                        "deleted claim still mounted; its volume is kept"
                    );
                    return;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        });
    }

    async fn on_store(self: &Arc<Self>, ev: &StoreEvent) {
        if ev.key == PODS {
            let node = meta::str_at(&ev.object, "/spec/nodeName");
            if self.nodes.iter().any(|n| n == node) {
                let obj = (ev.event_type != EventType::Deleted).then(|| ev.object.clone());
                self.pod_changed(meta::uid_of(&ev.object), obj);
            }
        } else if ev.key == "/persistentvolumeclaims" && ev.event_type == EventType::Deleted {
            self.reclaim_volume(&ev.object);
        } else if ev.key == "/services" || ev.key == "/endpoints" {
            self.sync_service(&ev.namespace, &ev.name).await;
        } else if ev.key.ends_with("/dnsendpoints") {
            let agent = self.agent.read().await;
            if let Some(agent) = agent.as_ref() {
                if ev.event_type == EventType::Deleted {
                    agent
                        .dns_records
                        .remove_dns_endpoint(&ev.namespace, &ev.name);
                } else {
                    agent.dns_records.set_dns_endpoint(
                        &ev.namespace,
                        &ev.name,
                        service_specs::dns_endpoint_records(&ev.object),
                    );
                }
            }
        }
    }

    /// Hands the latest pod object (`None`: gone from the store) to its worker, starting
    /// one for a pod not seen before.
    fn pod_changed(self: &Arc<Self>, uid: &str, obj: Option<Arc<Value>>) {
        let mut workers = lock(&self.workers);
        if let Some(tx) = workers.get(uid) {
            tx.send_if_modified(|cur| {
                let same = match (&*cur, &obj) {
                    (Some(a), Some(b)) => {
                        meta::str_at(a, "/metadata/resourceVersion")
                            == meta::str_at(b, "/metadata/resourceVersion")
                    }
                    (None, None) => true,
                    _ => false,
                };
                if !same {
                    *cur = obj.clone();
                }
                !same
            });
            return;
        }
        let Some(pod) = obj else { return };
        if matches!(meta::str_at(&pod, "/status/phase"), "Succeeded" | "Failed") && !deleting(&pod)
        {
            // Finished before this kubelet started (a restart of localkube): nothing to run.
            return;
        }
        let (tx, rx) = watch::channel(Some(pod));
        workers.insert(uid.to_string(), tx);
        tokio::spawn(self.clone().pod_worker(uid.to_string(), rx));
    }

    async fn resync(self: &Arc<Self>) {
        // Workers that exist before the listing: a pod created after it is not "gone".
        let before: Vec<String> = lock(&self.workers).keys().cloned().collect();
        let mut seen = HashSet::new();
        for node in &self.nodes {
            for pod in self.cluster.pods_on_node(node) {
                let uid = meta::uid_of(&pod).to_string();
                seen.insert(uid.clone());
                self.pod_changed(&uid, Some(Arc::new(pod)));
            }
        }
        let gone: Vec<String> = before.into_iter().filter(|u| !seen.contains(u)).collect();
        for uid in gone {
            self.pod_changed(&uid, None);
        }
        self.resync_status();
        let (svcs, _) = self.cluster.store.list("/services", None);
        for s in &svcs {
            self.sync_service(meta::namespace(s), meta::name(s)).await;
        }
        let agent = self.agent.read().await;
        if let Some(agent) = agent.as_ref() {
            for (key, obj) in self.cluster.store.all_objects() {
                if key.ends_with("/dnsendpoints") {
                    agent.dns_records.set_dns_endpoint(
                        meta::namespace(&obj),
                        meta::name(&obj),
                        service_specs::dns_endpoint_records(&obj),
                    );
                }
            }
        }
    }

    fn resync_status(&self) {
        for key in self.runtime.pods() {
            if let Ok(st) = self.runtime.pod_status(&key) {
                self.write_status(&st);
            }
        }
    }

    /// Applies a Service (with its Endpoints) to DNS, ClusterIP and proxy; removes it when
    /// the Service is gone.
    async fn sync_service(&self, ns: &str, name: &str) {
        let agent = self.agent.read().await;
        let Some(agent) = agent.as_ref() else { return };
        let svc = self.cluster.store.get("/services", ns, name);
        let eps = self.cluster.store.get("/endpoints", ns, name);
        let result = match svc
            .as_ref()
            .and_then(|s| service_specs::service_spec(s, eps.as_ref()))
        {
            Some(spec) => agent.services.apply(spec).await,
            None => agent.services.remove(ns, name),
        };
        if let Err(e) = result {
            tracing::warn!(service = %format!("{ns}/{name}"), error = %e, "could not apply the service");
        }
    }

    /// Writes a runtime status into the Pod that owns it.
    fn write_status(&self, st: &PodStatus) {
        if st.stopped {
            return;
        }
        // A node whose kubelet is down posts nothing; it posts what is then true once back.
        if !lock(&self.kubelets_down).is_empty()
            && self
                .node_of(&st.key)
                .is_some_and(|node| self.kubelet_down(&node))
        {
            return;
        }
        let Some(uid) = lock(&self.started).get(&st.key).cloned() else {
            return;
        };
        // Logs first: a restart shows in the status only once `--previous` can read it.
        if let Some(c) = lock(&self.copiers).get_mut(&st.key) {
            c.copy(st);
        }
        let (ns, name) = st.key.split_once('/').unwrap_or(("", &st.key));
        let r = self
            .cluster
            .update_pod_status(ns, name, |p| meta::uid_of(p) == uid && status::apply(p, st));
        if let Err(e) = r {
            tracing::debug!(pod = %st.key, error = %e, "could not write pod status");
        }
    }

    fn translate(&self, pod: &Value) -> Result<localkube_runtime::PodSpec> {
        let ctx = translate::Context {
            cluster: &self.cluster,
            kubernetes_ip: self.kubernetes_ip,
        };
        translate::pod_spec(&ctx, pod)
    }

    /// One pod's life on its node: start (retrying while its config cannot be resolved),
    /// copy logs, refresh volume files, and on deletion stop it with its grace period and
    /// remove it from the API.
    async fn pod_worker(self: Arc<Self>, uid: String, mut rx: watch::Receiver<Option<Arc<Value>>>) {
        let Some(first) = rx.borrow().clone() else {
            return;
        };
        let key = key_of(&first);
        let (ns, name) = (
            meta::namespace(&first).to_string(),
            meta::name(&first).to_string(),
        );
        // Phase 1: start.
        let mut last_mount_failure: Option<String> = None;
        loop {
            let pod = rx.borrow_and_update().clone();
            let Some(pod) = pod else {
                lock(&self.workers).remove(&uid);
                return;
            };
            let node = meta::str_at(&pod, "/spec/nodeName");
            if self.kubelet_down(node) {
                // Nothing is started, and nothing removed, by a kubelet that is down.
                tokio::select! {
                    r = rx.changed() => if r.is_err() { return },
                    _ = tokio::time::sleep(KUBELET_CHECK) => {}
                }
                continue;
            }
            if deleting(&pod) {
                self.finish(&ns, &name, &uid);
                return;
            }
            let err = match self.translate(&pod) {
                Ok(spec) => match self.runtime.start_pod(spec).await {
                    Ok(_) => {
                        lock(&self.started).insert(key.clone(), uid.clone());
                        if let Ok(st) = self.runtime.pod_status(&key) {
                            self.write_status(&st);
                        }
                        break;
                    }
                    Err(localkube_runtime::Error::PodExists(_)) => None,
                    Err(localkube_runtime::Error::VolumeSetup { volume, message }) => {
                        // As kubelet: the pod waits in ContainerCreating and a FailedMount
                        // event tells why (once per distinct failure, not per retry).
                        let text =
                            format!("MountVolume.SetUp failed for volume \"{volume}\" : {message}");
                        tracing::warn!(pod = %key, error = %text, "pod volume cannot be set up");
                        let r = self.cluster.update_pod_status(&ns, &name, |p| {
                            meta::uid_of(p) == uid && status::volume_setup_failed(p)
                        });
                        if let Err(e) = r {
                            tracing::debug!(pod = %key, error = %e, "could not write pod status");
                        }
                        if last_mount_failure.as_deref() != Some(text.as_str()) {
                            record_event(
                                &self.cluster,
                                &pod,
                                "Warning",
                                "FailedMount",
                                &text,
                                "kubelet",
                            );
                            last_mount_failure = Some(text);
                        }
                        None
                    }
                    Err(e) => Some(e.to_string()),
                },
                Err(e) => Some(e.to_string()),
            };
            if let Some(message) = err {
                tracing::warn!(pod = %key, error = %message, "pod cannot start");
                let r = self.cluster.update_pod_status(&ns, &name, |p| {
                    meta::uid_of(p) == uid && status::config_error(p, &message)
                });
                if let Err(e) = r {
                    tracing::debug!(pod = %key, error = %e, "could not write pod status");
                }
            }
            tokio::select! {
                r = rx.changed() => if r.is_err() { return },
                _ = tokio::time::sleep(RESYNC) => {}
            }
        }
        // Phase 2: running.
        lock(&self.copiers).insert(
            key.clone(),
            log_copy::Copier::new(&self.cluster.state_dir, &ns, &name),
        );
        let mut copy = tokio::time::interval(LOG_COPY);
        let mut refresh = tokio::time::interval(VOLUME_REFRESH);
        refresh.tick().await;
        let final_pod = loop {
            tokio::select! {
                r = rx.changed() => if r.is_err() {
                    // The kubelet stops; the node agent's shutdown stops the pod.
                    return;
                },
                _ = copy.tick() => {
                    if let Ok(st) = self.runtime.pod_status(&key) {
                        if let Some(c) = lock(&self.copiers).get_mut(&key) {
                            c.copy(&st);
                        }
                    }
                    continue;
                }
                _ = refresh.tick() => {
                    self.refresh_volumes(&key, rx.borrow().as_deref());
                    continue;
                }
            }
            let pod = rx.borrow_and_update().clone();
            match pod {
                None => break None,
                Some(p) if deleting(&p) => break Some(p),
                Some(_) => {}
            }
        };
        // A deleted pod is stopped by its kubelet: not while that is down.
        if let Some(node) = final_pod
            .as_deref()
            .map(|p| meta::str_at(p, "/spec/nodeName").to_string())
        {
            while self.kubelet_down(&node) {
                tokio::time::sleep(KUBELET_CHECK).await;
            }
        }
        let grace = final_pod
            .as_deref()
            .map(translate::grace)
            .unwrap_or(Duration::ZERO);
        tracing::info!(pod = %key, ?grace, "stopping pod");
        let stopped = match self.runtime.stop_pod(&key, grace).await {
            Ok(st) => {
                if let Some(mut c) = lock(&self.copiers).remove(&key) {
                    c.copy(&st);
                }
                Some(st)
            }
            Err(e) => {
                tracing::warn!(pod = %key, error = %e, "could not stop pod");
                None
            }
        };
        lock(&self.started).remove(&key);
        lock(&self.copiers).remove(&key);
        if let (Some(_), Some(st)) = (&final_pod, &stopped) {
            let r = self.cluster.update_pod_status(&ns, &name, |pod| {
                meta::uid_of(pod) == uid && status::apply(pod, st)
            });
            if let Err(e) = r {
                tracing::debug!(pod = %key, error = %e, "could not write pod status");
            }
        }
        if final_pod.is_some() {
            self.finish(&ns, &name, &uid);
        } else {
            lock(&self.workers).remove(&uid);
            log_copy::remove(&self.cluster.state_dir, &ns, &name);
        }
    }

    fn finish(&self, ns: &str, name: &str, uid: &str) {
        lock(&self.workers).remove(uid);
        if let Err(e) = self.cluster.finish_pod_deletion(ns, name, uid) {
            tracing::warn!(pod = %format!("{ns}/{name}"), error = %e, "could not remove the pod");
        }
        if self.cluster.store.get(PODS, ns, name).is_none() {
            log_copy::remove(&self.cluster.state_dir, ns, name);
        }
    }

    fn refresh_volumes(&self, key: &str, pod: Option<&Value>) {
        let Some(pod) = pod else { return };
        let ctx = translate::Context {
            cluster: &self.cluster,
            kubernetes_ip: self.kubernetes_ip,
        };
        let Ok(vols) = translate::refreshed_volumes(&ctx, pod) else {
            return;
        };
        for v in vols {
            if let localkube_runtime::VolumeSource::Files(files) = &v.source {
                if let Err(e) = self.runtime.update_volume_files(key, &v.name, files) {
                    tracing::debug!(pod = key, volume = %v.name, error = %e, "could not refresh volume");
                }
            }
        }
    }
}
