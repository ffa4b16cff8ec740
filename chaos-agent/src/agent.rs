//! The agent: the faults it holds (in memory and in `faults.json`), each request's handling
//! (guard, locate, inject, verify, record), and the undo of everything at `cleanup`, at
//! shutdown and, for a previous agent's leftovers, at start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::faults::kill::KeepDown;
use crate::faults::partition::{self, Backend, Peer};
use crate::faults::{freeze, kill};
use crate::pod::{check_namespace, Locator};
use crate::procfs::{ProcFs, Process};
use crate::protocol::{
    CleanedUp, Ended, FaultKind, FaultList, FaultStatus, FreezeRequest, KillRequest,
    PartitionRequest, Request, Response, Started,
};

/// The state file's name in the state directory.
pub const STATE_FILE: &str = "faults.json";
/// How often a keepDown re-reads its pod for a container the kubelet started again.
pub const KEEP_DOWN_REFRESH: Duration = Duration::from_secs(1);

/// How the agent was started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConfig {
    /// Where `control.sock` and `faults.json` live.
    pub state_dir: PathBuf,
    /// The namespaces it may act in.
    pub namespaces: Vec<String>,
    /// Its node (pods elsewhere are refused); no check when absent.
    pub node: Option<String>,
    /// The proc filesystem (`/proc`; with `hostPID`, the node's).
    pub proc_root: PathBuf,
}

/// A fault as persisted: enough to undo it without the agent that made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultRecord {
    /// Its id.
    pub id: u64,
    /// Its kind.
    pub kind: FaultKind,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// The container (kill, freeze).
    #[serde(default)]
    pub container: Option<String>,
    /// A kill's keepDown.
    #[serde(default)]
    pub keep_down: bool,
    /// The container ids (bare) whose cgroups were acted on.
    #[serde(default)]
    pub container_ids: Vec<String>,
    /// The pod's uid (partition: to find its network namespace again).
    #[serde(default)]
    pub pod_uid: Option<String>,
    /// The pid whose network namespace was entered.
    #[serde(default)]
    pub netns_pid: Option<i32>,
    /// That namespace (`net:[4026532281]`).
    #[serde(default)]
    pub netns: Option<String>,
    /// A partition's peers, canonical.
    #[serde(default)]
    pub peers: Vec<String>,
    /// A partition's backend.
    #[serde(default)]
    pub backend: Option<Backend>,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// What was seen at its start.
    pub effect: String,
}

/// `faults.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateFile {
    /// The next fault's id (ids are never reused, across restarts too).
    pub next_id: u64,
    /// The faults in effect.
    pub faults: Vec<FaultRecord>,
}

impl StateFile {
    /// Reads it (an absent file is an empty state).
    pub fn load(path: &Path) -> Result<StateFile> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(StateFile::default())
            }
            Err(error) => {
                return Err(Error::State {
                    action: "read".into(),
                    path: path.to_owned(),
                    reason: error.to_string(),
                })
            }
        };
        serde_json::from_str(&text).map_err(|error| Error::State {
            action: "decode".into(),
            path: path.to_owned(),
            reason: error.to_string(),
        })
    }

    /// Writes it atomically (a temporary file renamed over it).
    pub fn save(&self, path: &Path) -> Result<()> {
        let fail = |reason: String| Error::State {
            action: "write".into(),
            path: path.to_owned(),
            reason,
        };
        let text = serde_json::to_string_pretty(self).map_err(|e| fail(e.to_string()))?;
        let temporary = path.with_extension("json.tmp");
        std::fs::write(&temporary, text + "\n").map_err(|e| fail(e.to_string()))?;
        std::fs::rename(&temporary, path).map_err(|e| fail(e.to_string()))
    }
}

struct Active {
    record: FaultRecord,
    keep_down: Option<KeepDown>,
    problem: Option<String>,
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    faults: BTreeMap<u64, Active>,
}

impl Registry {
    fn allocate(&mut self) -> u64 {
        self.next_id = self.next_id.max(1);
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

/// The agent.
pub struct Agent<L> {
    config: AgentConfig,
    locator: Arc<L>,
    procfs: ProcFs,
    registry: tokio::sync::Mutex<Registry>,
}

fn describe(processes: &[Process]) -> Vec<i32> {
    processes.iter().map(|p| p.pid).collect()
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|error| Err(Error::Worker(error.to_string())))
}

/// The process holding the network namespace recorded for a partition (or any non-host one
/// of the pod when none is recorded yet).
fn netns_holder(
    procfs: &ProcFs,
    uid: &str,
    wanted: Option<(&str, Option<i32>)>,
) -> Result<Option<(i32, String)>> {
    if let Some((netns, Some(pid))) = wanted {
        if procfs.netns(pid).ok().as_deref() == Some(netns) && procfs.is_alive(pid) {
            return Ok(Some((pid, netns.to_owned())));
        }
    }
    let host = procfs.netns(1).ok();
    for process in procfs.pod_processes(uid)? {
        let Ok(netns) = procfs.netns(process.pid) else {
            continue;
        };
        let fits = match wanted {
            Some((wanted, _)) => netns == wanted,
            None => Some(&netns) != host.as_ref(),
        };
        if fits {
            return Ok(Some((process.pid, netns)));
        }
    }
    Ok(None)
}

/// Undoes a fault from its record (and its keepDown, when this agent runs it).
fn undo(procfs: &ProcFs, record: &FaultRecord, keep_down: Option<KeepDown>) -> Result<String> {
    match record.kind {
        FaultKind::Kill => match (record.keep_down, keep_down) {
            (_, Some(keep_down)) => keep_down.stop(),
            (true, None) => Ok("nothing to stop: the killing loop of the agent that started it ended with that agent".to_owned()),
            (false, None) => Ok("nothing to undo: a kill without keepDown is over once made".to_owned()),
        },
        FaultKind::Freeze => freeze::thaw(procfs, &record.container_ids),
        FaultKind::Partition => {
            let (Some(uid), Some(netns), Some(backend)) =
                (record.pod_uid.as_deref(), record.netns.as_deref(), record.backend)
            else {
                return Err(Error::UndoNotObserved {
                    kind: "partition".into(),
                    seen: "its record has no pod uid, network namespace or backend".into(),
                });
            };
            match netns_holder(procfs, uid, Some((netns, record.netns_pid)))? {
                Some((pid, _)) => partition::heal(pid, record.id, backend),
                None => Ok(format!(
                    "no process of the pod holds its network namespace {netns} any more: the namespace, and the rules in it, are gone"
                )),
            }
        }
    }
}

impl<L: Locator> Agent<L> {
    /// Starts an agent: undoes every fault left in `faults.json` by a previous agent (those
    /// that cannot be undone are kept, with their problem, for `cleanup`).
    pub async fn start(config: AgentConfig, locator: L) -> Result<Arc<Agent<L>>> {
        std::fs::create_dir_all(&config.state_dir).map_err(Error::io(format!(
            "create the state directory {}",
            config.state_dir.display()
        )))?;
        let procfs = ProcFs::new(config.proc_root.clone());
        let state = StateFile::load(&config.state_dir.join(STATE_FILE))?;
        let mut registry = Registry {
            next_id: state.next_id,
            faults: BTreeMap::new(),
        };
        for record in state.faults {
            registry.next_id = registry.next_id.max(record.id + 1);
            let (procfs_undo, record_undo) = (procfs.clone(), record.clone());
            match blocking(move || undo(&procfs_undo, &record_undo, None)).await {
                Ok(effect) => {
                    tracing::info!(fault_id = record.id, kind = %record.kind, namespace = %record.namespace, pod = %record.pod, %effect, "undid a fault a previous agent left");
                }
                Err(error) => {
                    tracing::error!(fault_id = record.id, kind = %record.kind, %error, "could not undo a fault a previous agent left");
                    registry.faults.insert(
                        record.id,
                        Active {
                            record,
                            keep_down: None,
                            problem: Some(format!(
                                "left by a previous agent, could not be undone: {error}"
                            )),
                        },
                    );
                }
            }
        }
        let agent = Arc::new(Agent {
            config,
            locator: Arc::new(locator),
            procfs,
            registry: tokio::sync::Mutex::new(registry),
        });
        {
            let registry = agent.registry.lock().await;
            agent.persist(&registry)?;
        }
        Ok(agent)
    }

    /// Its configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    fn persist(&self, registry: &Registry) -> Result<()> {
        StateFile {
            next_id: registry.next_id,
            faults: registry.faults.values().map(|a| a.record.clone()).collect(),
        }
        .save(&self.config.state_dir.join(STATE_FILE))
    }

    /// Answers one request.
    pub async fn handle(self: &Arc<Self>, request: Request) -> Response {
        let kind = request.kind();
        let result = match request {
            Request::Kill(kill) => self.kill(kill).await.map(Response::Started),
            Request::Freeze(freeze) => self.freeze(freeze).await.map(Response::Started),
            Request::Partition(partition) => self.partition(partition).await.map(Response::Started),
            Request::End(end) => self.end(end.id).await.map(Response::Ended),
            Request::List(_) => Ok(Response::List(self.list().await)),
            Request::Cleanup(_) => self.cleanup().await.map(Response::CleanedUp),
        };
        match result {
            Ok(response) => response,
            Err(error) => {
                tracing::warn!(request = kind, %error, "request failed");
                Response::from(error)
            }
        }
    }

    fn new_record(
        id: u64,
        kind: FaultKind,
        namespace: &str,
        pod: &str,
        container: Option<&str>,
    ) -> FaultRecord {
        FaultRecord {
            id,
            kind,
            namespace: namespace.to_owned(),
            pod: pod.to_owned(),
            container: container.map(str::to_owned),
            keep_down: false,
            container_ids: Vec::new(),
            pod_uid: None,
            netns_pid: None,
            netns: None,
            peers: Vec::new(),
            backend: None,
            started_at: jiff::Timestamp::now().to_string(),
            effect: String::new(),
        }
    }

    fn register(
        &self,
        registry: &mut Registry,
        record: FaultRecord,
        keep_down: Option<KeepDown>,
        pids: Vec<i32>,
    ) -> Started {
        tracing::info!(fault_id = record.id, kind = %record.kind, namespace = %record.namespace, pod = %record.pod, container = record.container.as_deref().unwrap_or(""), effect = %record.effect, "fault in effect");
        let started = Started {
            id: record.id,
            kind: record.kind,
            effect: record.effect.clone(),
            namespace: record.namespace.clone(),
            pod: record.pod.clone(),
            container: record.container.clone(),
            container_ids: record.container_ids.clone(),
            pids,
        };
        let id = record.id;
        registry.faults.insert(
            id,
            Active {
                record,
                keep_down,
                problem: None,
            },
        );
        // The fault is in effect and held: a state file that cannot be written only matters
        // if this agent crashes, so it is reported in `list` rather than as a failed start.
        if let Err(error) = self.persist(registry) {
            tracing::error!(fault_id = id, %error, "fault in effect but not recorded in the state file");
            if let Some(active) = registry.faults.get_mut(&id) {
                active.problem = Some(format!("not recorded in the state file: {error}"));
            }
        }
        started
    }

    async fn container_id(&self, namespace: &str, pod: &str, container: &str) -> Result<String> {
        check_namespace(namespace, &self.config.namespaces)?;
        let view = self.locator.pod(namespace, pod).await?;
        Ok(view
            .container_target(container, self.config.node.as_deref())?
            .id)
    }

    async fn kill(self: &Arc<Self>, request: KillRequest) -> Result<Started> {
        let id = self
            .container_id(&request.namespace, &request.pod, &request.container)
            .await?;
        let mut registry = self.registry.lock().await;
        let ids = vec![id];
        let (procfs, ids_kill) = (self.procfs.clone(), ids.clone());
        let (killed, effect) = blocking(move || kill::kill_once(&procfs, &ids_kill)).await?;
        let fault_id = registry.allocate();
        let mut record = Self::new_record(
            fault_id,
            FaultKind::Kill,
            &request.namespace,
            &request.pod,
            Some(&request.container),
        );
        record.keep_down = request.keep_down;
        record.container_ids = ids.clone();
        let keep_down = request.keep_down.then(|| {
            record.effect = format!(
                "{effect}; keepDown: the agent kills whatever starts in the container until end"
            );
            KeepDown::start(self.procfs.clone(), ids)
        });
        if record.effect.is_empty() {
            record.effect = effect;
        }
        if keep_down.is_some() {
            self.spawn_keep_down_refresh(fault_id, request.clone());
        }
        Ok(self.register(&mut registry, record, keep_down, describe(&killed)))
    }

    /// Keeps a keepDown's container ids current: the kubelet starts a killed container again
    /// under a new id, and that one must be killed too.
    fn spawn_keep_down_refresh(self: &Arc<Self>, fault_id: u64, request: KillRequest) {
        let agent = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(KEEP_DOWN_REFRESH).await;
                let Some(agent) = agent.upgrade() else { return };
                let found = agent
                    .container_id(&request.namespace, &request.pod, &request.container)
                    .await;
                let registry = agent.registry.lock().await;
                let Some(keep_down) = registry
                    .faults
                    .get(&fault_id)
                    .and_then(|active| active.keep_down.as_ref())
                else {
                    return;
                };
                if keep_down.is_stopping() {
                    return;
                }
                match found {
                    Ok(id) => {
                        if keep_down.add_container_id(&id) {
                            tracing::info!(fault_id, container_id = %id, "keepDown: the container was started again; killing in its new cgroup too");
                        }
                    }
                    Err(error) => {
                        tracing::debug!(fault_id, %error, "keepDown: could not re-read the pod");
                    }
                }
            }
        });
    }

    async fn freeze(self: &Arc<Self>, request: FreezeRequest) -> Result<Started> {
        let id = self
            .container_id(&request.namespace, &request.pod, &request.container)
            .await?;
        let mut registry = self.registry.lock().await;
        let ids = vec![id];
        let (procfs, ids_freeze) = (self.procfs.clone(), ids.clone());
        let (frozen, effect) = blocking(move || freeze::freeze(&procfs, &ids_freeze)).await?;
        let mut record = Self::new_record(
            registry.allocate(),
            FaultKind::Freeze,
            &request.namespace,
            &request.pod,
            Some(&request.container),
        );
        record.container_ids = ids;
        record.effect = effect;
        Ok(self.register(&mut registry, record, None, describe(&frozen)))
    }

    async fn partition(self: &Arc<Self>, request: PartitionRequest) -> Result<Started> {
        check_namespace(&request.namespace, &self.config.namespaces)?;
        let peers = partition::parse_peers(&request.peers)?;
        let view = self.locator.pod(&request.namespace, &request.pod).await?;
        let (uid, ids) = view.network_target(self.config.node.as_deref())?;
        let mut registry = self.registry.lock().await;
        let procfs = self.procfs.clone();
        let holder_uid = uid.clone();
        let (pid, netns) = blocking(move || netns_holder(&procfs, &holder_uid, None))
            .await?
            .ok_or_else(|| Error::PodLookup {
                namespace: request.namespace.clone(),
                pod: request.pod.clone(),
                reason: format!(
                    "found no process of the pod (uid {uid}) under {} outside the node's network namespace",
                    self.procfs.root.display()
                ),
            })?;
        let backend = Backend::detect(&peers)?;
        let fault_id = registry.allocate();
        let peers_apply: Vec<Peer> = peers.clone();
        let effect =
            blocking(move || partition::apply(pid, fault_id, backend, &peers_apply)).await?;
        let mut record = Self::new_record(
            fault_id,
            FaultKind::Partition,
            &request.namespace,
            &request.pod,
            None,
        );
        record.container_ids = ids.into_iter().map(|id| id.id).collect();
        record.pod_uid = Some(uid);
        record.netns_pid = Some(pid);
        record.netns = Some(netns);
        record.peers = peers.iter().map(Peer::to_string).collect();
        record.backend = Some(backend);
        record.effect = effect;
        Ok(self.register(&mut registry, record, None, vec![pid]))
    }

    /// Ends fault `id`, checking the undo; a fault whose undo fails is kept (with its problem).
    pub async fn end(&self, id: u64) -> Result<Ended> {
        let mut registry = self.registry.lock().await;
        self.end_locked(&mut registry, id).await
    }

    async fn end_locked(&self, registry: &mut Registry, id: u64) -> Result<Ended> {
        let Some(mut active) = registry.faults.remove(&id) else {
            let active: Vec<String> = registry.faults.keys().map(u64::to_string).collect();
            return Err(Error::UnknownFault {
                id,
                active: if active.is_empty() {
                    "none".to_owned()
                } else {
                    active.join(", ")
                },
            });
        };
        let (procfs, record, keep_down) = (
            self.procfs.clone(),
            active.record.clone(),
            active.keep_down.take(),
        );
        match blocking(move || undo(&procfs, &record, keep_down)).await {
            Ok(effect) => {
                tracing::info!(fault_id = id, kind = %active.record.kind, namespace = %active.record.namespace, pod = %active.record.pod, %effect, "fault ended");
                // Undone either way; a stale entry is undone again (harmlessly) at next start.
                if let Err(error) = self.persist(registry) {
                    tracing::error!(fault_id = id, %error, "fault ended but the state file still lists it");
                }
                Ok(Ended {
                    id,
                    kind: active.record.kind,
                    effect,
                })
            }
            Err(error) => {
                tracing::error!(fault_id = id, kind = %active.record.kind, %error, "could not end a fault");
                active.problem = Some(format!("end failed: {error}"));
                registry.faults.insert(id, active);
                Err(Error::End {
                    id,
                    source: Box::new(error),
                })
            }
        }
    }

    /// The faults in effect.
    pub async fn list(&self) -> FaultList {
        let registry = self.registry.lock().await;
        FaultList {
            faults: registry
                .faults
                .values()
                .map(|active| {
                    let status = active.keep_down.as_ref().map(KeepDown::status);
                    FaultStatus {
                        id: active.record.id,
                        kind: active.record.kind,
                        namespace: active.record.namespace.clone(),
                        pod: active.record.pod.clone(),
                        container: active.record.container.clone(),
                        keep_down: active.record.keep_down,
                        peers: active.record.peers.clone(),
                        started_at: active.record.started_at.clone(),
                        effect: active.record.effect.clone(),
                        kills: status.as_ref().map(|s| s.kills),
                        problem: active
                            .problem
                            .clone()
                            .or_else(|| status.and_then(|s| s.problem)),
                    }
                })
                .collect(),
        }
    }

    /// Undoes every fault; an error names those that could not be undone (they are kept).
    pub async fn cleanup(&self) -> Result<CleanedUp> {
        let mut registry = self.registry.lock().await;
        let ids: Vec<u64> = registry.faults.keys().copied().collect();
        let mut ended = Vec::new();
        let mut failures = Vec::new();
        for id in ids {
            match self.end_locked(&mut registry, id).await {
                Ok(done) => ended.push(done),
                Err(error) => failures.push(error.to_string()),
            }
        }
        if failures.is_empty() {
            Ok(CleanedUp { ended })
        } else {
            Err(Error::Cleanup(format!(
                "{} undone, {} not: {}",
                ended.len(),
                failures.len(),
                failures.join("; ")
            )))
        }
    }
}
