//! The agent: the faults it holds (in memory and in `faults.json`), each request's handling
//! (guard, locate, inject, verify, record), the loops that keep a fault on its pods while it
//! stands (a keepDown's container started again, a partition's pod recreated or its peers'
//! addresses changed), and the undo of everything at `cleanup`, at shutdown and, for a
//! previous agent's leftovers, at start.
//!
//! Locking: one lock (the registry) guards the faults and the state file. A start and an
//! `end` hold it while they inject or undo; the follow loops never hold it while they read the
//! API or `/proc` or run nft/iptables, only to copy the fault out and to record what they did.
//! A partition's follower records a namespace in the state file before it puts rules there,
//! and holds the fault's *gate* while it changes rules; `end` and `cleanup` first stop the
//! follower and wait for its gate, so an undo never misses a namespace being cut beside it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cgroup::{cgroup_text_in_pod, cgroup_text_names};
use crate::error::{Error, Result};
use crate::faults::kill::restart::Watch;
use crate::faults::kill::KeepDown;
use crate::faults::partition::follow::{self, Cut, PeerPod, Plan};
use crate::faults::partition::{self, Backend, Peer};
use crate::faults::stop_node::{self, HEAL_ANNOTATION};
use crate::faults::{freeze, kill};
use crate::pod::{check_namespace, Locator};
use crate::procfs::{ProcFs, Process, ScanCache};
use crate::protocol::{
    CleanedUp, Ended, FaultKind, FaultList, FaultStatus, FreezeRequest, KillRequest,
    PartitionRequest, PodRef, Request, Response, Started, StopNodePhase, StopNodeRequest,
};

/// The state file's name in the state directory.
pub const STATE_FILE: &str = "faults.json";
/// How often a keepDown re-reads its pod: the ids of the container the kubelet started again
/// and of the pod's other containers (its thread recognises a restart sooner,
/// [`kill::restart`]).
pub const KEEP_DOWN_REFRESH: Duration = Duration::from_secs(1);
/// How often a partition re-reads its pod and peer pods (as often as a keepDown its pod).
pub const PARTITION_REFRESH: Duration = KEEP_DOWN_REFRESH;

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
    /// Its own Pod (the downward API's `metadata.namespace` and `metadata.name`): where a
    /// stop-node's heal annotation arrives; without it stop-node is refused.
    pub own_pod: Option<PodRef>,
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
    /// A stop-node's pods (uids): every process under their cgroups is killed when it acts,
    /// whichever containers run then (one restarted since the request has another id).
    #[serde(default)]
    pub pod_uids: Vec<String>,
    /// The pod's uid at the start (partition: the first namespace cut; `cuts` has them all,
    /// and an agent that predates `cuts` left only this).
    #[serde(default)]
    pub pod_uid: Option<String>,
    /// The pid whose network namespace was entered at the start.
    #[serde(default)]
    pub netns_pid: Option<i32>,
    /// That namespace (`net:[4026532281]`).
    #[serde(default)]
    pub netns: Option<String>,
    /// The peers a partition is to cut now, canonical (its fixed peers and its peer pods'
    /// addresses, none covered by another); each cut's `peers` are what its rules drop.
    #[serde(default)]
    pub peers: Vec<String>,
    /// A partition's fixed peers (the request's `peers`), canonical.
    #[serde(default)]
    pub fixed_peers: Vec<String>,
    /// A partition's peer pods and their addresses as last read.
    #[serde(default)]
    pub peer_pods: Vec<PeerPod>,
    /// Every network namespace a partition's rules were put in (or were about to be), the
    /// first one included: the undo removes the rules from each.
    #[serde(default)]
    pub cuts: Vec<Cut>,
    /// How often a partition's rules were put in another namespace or changed for new peer
    /// addresses after its start.
    #[serde(default)]
    pub reapplied: u64,
    /// A partition's backend.
    #[serde(default)]
    pub backend: Option<Backend>,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// What was seen at its start.
    pub effect: String,
    /// A stop-node's node.
    #[serde(default)]
    pub node: Option<String>,
    /// A stop-node's kubelet: the process SIGSTOPped (continued by the undo).
    #[serde(default)]
    pub kubelet_pid: Option<i32>,
    /// Its start in clock ticks after boot (so the undo never signals a reused pid).
    #[serde(default)]
    pub kubelet_start_ticks: Option<u64>,
    /// When a stop-node heals by itself (RFC 3339).
    #[serde(default)]
    pub heal_deadline: Option<String>,
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
    follow: Option<Follow>,
    problem: Option<String>,
    stop_node: Option<StopNodeState>,
}

/// A stop-node as it goes (its record holds what the undo needs).
#[derive(Debug, Clone)]
struct StopNodeState {
    phase: StopNodePhase,
    /// When its dead-man timer heals it.
    deadline: std::time::Instant,
    in_effect_at: Option<String>,
    healed_at: Option<String>,
    heal: Option<String>,
}

/// A partition's follower, as the agent holds it.
struct Follow {
    /// Set (under the lock) by `end` and `cleanup`: the follower starts no other step.
    stopping: bool,
    /// Held by the follower while it changes rules; `end` takes it before the undo.
    gate: Arc<tokio::sync::Mutex<()>>,
    /// What went wrong in its last step (a step that goes right clears it).
    problem: Option<String>,
}

impl Follow {
    fn new() -> Follow {
        Follow {
            stopping: false,
            gate: Arc::new(tokio::sync::Mutex::new(())),
            problem: None,
        }
    }
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

/// `ns/a, ns/b`, for messages.
fn peer_pod_names(peer_pods: &[PeerPod]) -> String {
    peer_pods
        .iter()
        .map(|pod| format!("{}/{}", pod.namespace, pod.pod))
        .collect::<Vec<_>>()
        .join(", ")
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
        FaultKind::Partition => undo_partition(procfs, record),
        FaultKind::StopNode => match record.kubelet_pid {
            Some(pid) => stop_node::continue_kubelet(procfs, pid, record.kubelet_start_ticks),
            None => Err(Error::UndoNotObserved {
                kind: "stop-node".into(),
                seen: "its record names no kubelet pid".into(),
            }),
        },
    }
}

/// The namespaces a partition's record names (one written before `cuts` existed: its one).
fn recorded_cuts(record: &FaultRecord) -> Vec<Cut> {
    if !record.cuts.is_empty() {
        return record.cuts.clone();
    }
    match (&record.pod_uid, &record.netns, record.netns_pid) {
        (Some(uid), Some(netns), pid) => vec![Cut {
            pod_uid: uid.clone(),
            netns: netns.clone(),
            pid: pid.unwrap_or(0),
            peers: record.peers.clone(),
            applied_at: record.started_at.clone(),
            pending: false,
            gone: false,
        }],
        _ => Vec::new(),
    }
}

/// `pod ns/p (uid u) net:[...]`, for messages.
fn cut_name(record: &FaultRecord, cut: &Cut) -> String {
    format!(
        "pod {}/{} (uid {}) {}",
        record.namespace, record.pod, cut.pod_uid, cut.netns
    )
}

/// Removes a partition's rules from every namespace it cut. A namespace no process of its
/// pod holds any more is gone with its rules: not a failure, and said so.
fn undo_partition(procfs: &ProcFs, record: &FaultRecord) -> Result<String> {
    let cuts = recorded_cuts(record);
    let Some(backend) = record.backend.filter(|_| !cuts.is_empty()) else {
        return Err(Error::UndoNotObserved {
            kind: "partition".into(),
            seen: "its record has no pod uid, network namespace or backend".into(),
        });
    };
    let mut undone = Vec::new();
    let mut failed = Vec::new();
    for cut in &cuts {
        match heal_cut(procfs, record.id, backend, cut) {
            Ok(effect) => undone.push(format!("{}: {effect}", cut_name(record, cut))),
            Err(error) => failed.push(format!("{}: {error}", cut_name(record, cut))),
        }
    }
    if !failed.is_empty() {
        return Err(Error::UndoNotObserved {
            kind: "partition".into(),
            seen: format!(
                "{} of the {} network namespaces it cut still hold its rules or could not be looked at: {}{}",
                failed.len(),
                cuts.len(),
                failed.join("; "),
                if undone.is_empty() {
                    String::new()
                } else {
                    format!(" (undone in the others: {})", undone.join("; "))
                }
            ),
        });
    }
    Ok(format!(
        "undone in every network namespace it cut ({} {}; {} re-applications while it stood): {}",
        cuts.len(),
        if cuts.len() == 1 {
            "namespace"
        } else {
            "namespaces"
        },
        record.reapplied,
        undone.join("; ")
    ))
}

/// Removes fault `id`'s rules from one namespace it cut.
fn heal_cut(procfs: &ProcFs, id: u64, backend: Backend, cut: &Cut) -> Result<String> {
    let wanted = Some((cut.netns.as_str(), Some(cut.pid)));
    let Some((pid, _)) = netns_holder(procfs, &cut.pod_uid, wanted)? else {
        return Ok(
            "no process of the pod holds it any more: the namespace, and the rules in it, are gone (nothing to remove)"
                .to_owned(),
        );
    };
    match partition::heal(pid, id, backend) {
        Ok(effect) => Ok(effect),
        // Its last process may have left between the look and the removal.
        Err(error)
            if netns_holder(procfs, &cut.pod_uid, Some((cut.netns.as_str(), None)))?.is_none() =>
        {
            Ok(format!(
                "its last process left while the rules were being removed ({error}): the namespace, and the rules in it, are gone"
            ))
        }
        Err(error) => Err(error),
    }
}

/// What a follow step did to the rules (run on a blocking thread, without the lock).
struct Executed {
    cuts: Vec<Cut>,
    reapplied: u64,
    problems: Vec<String>,
}

/// Whether `pid` still runs in `netns`.
fn still_holds(procfs: &ProcFs, pid: i32, netns: &str) -> bool {
    procfs.is_alive(pid) && procfs.netns(pid).ok().as_deref() == Some(netns)
}

/// Carries out a follow step's plan on `cuts` (the recorded ones, then one pending cut per
/// new namespace, from `first_new` on): every change and every new cut is checked by listing
/// the rules back ([`partition::apply`], [`partition::update`]).
fn execute(
    procfs: &ProcFs,
    record: &FaultRecord,
    backend: Backend,
    mut cuts: Vec<Cut>,
    first_new: usize,
    plan: &Plan,
) -> Executed {
    let id = record.id;
    let peers: Vec<String> = plan.peers.iter().map(Peer::to_string).collect();
    let mut reapplied = 0;
    let mut problems = Vec::new();
    for change in &plan.changes {
        let Some(cut) = cuts.get_mut(change.index) else {
            continue;
        };
        let name = cut_name(record, cut);
        // Entered through another process: the same namespace only if the rules are there
        // (a freed namespace's number is soon reused); if they are not, they are put there.
        let present = if change.moved {
            partition::present(change.pid, id, backend)
        } else {
            Ok(true)
        };
        let result = match present {
            Ok(true) if change.diff.is_empty() => Ok(None),
            Ok(true) => partition::update(change.pid, id, backend, &plan.peers)
                .or_else(|error| match partition::present(change.pid, id, backend) {
                    Ok(false) => partition::apply(change.pid, id, backend, &plan.peers),
                    _ => Err(error),
                })
                .map(Some),
            Ok(false) => partition::apply(change.pid, id, backend, &plan.peers).map(Some),
            Err(error) => Err(error),
        };
        match result {
            Ok(effect) => {
                if change.moved {
                    tracing::info!(fault_id = id, netns = %cut.netns, from = cut.pid, to = change.pid, "partition: the process entered left; the namespace is entered through another of the pod's");
                    cut.pid = change.pid;
                }
                if let Some(effect) = effect {
                    tracing::info!(fault_id = id, cut = %name, peers = %change.diff, %effect, "partition: rules changed for the peers' addresses");
                    cut.peers = peers.clone();
                    cut.pending = false;
                    reapplied += 1;
                }
            }
            Err(error) if !still_holds(procfs, change.pid, &cut.netns) => {
                tracing::info!(fault_id = id, cut = %name, %error, "partition: the namespace was left while its rules were changed; the next step looks again");
            }
            Err(error) => {
                problems.push(format!(
                    "change the rules in {name} (pid {}) to drop {} ({}): {error}",
                    change.pid,
                    peers.join(", "),
                    change.diff
                ));
            }
        }
    }
    let mut failed_new = Vec::new();
    for (offset, new) in plan.new.iter().enumerate() {
        let index = first_new + offset;
        let Some(cut) = cuts.get_mut(index) else {
            continue;
        };
        let name = cut_name(record, cut);
        match partition::apply(new.pid, id, backend, &plan.peers) {
            Ok(effect) => {
                tracing::info!(fault_id = id, cut = %name, %effect, "partition: cut a new network namespace of the pod");
                cut.pending = false;
                cut.peers = peers.clone();
                reapplied += 1;
            }
            Err(error) => {
                if still_holds(procfs, new.pid, &new.netns) {
                    problems.push(format!(
                        "cut the new network namespace of {name} (pid {}): {error}",
                        new.pid
                    ));
                }
                // `apply` removed what it put: a namespace seen without the rules is dropped
                // from the record (the next step tries again); one that may hold some stays,
                // for the next step to change and the undo to remove.
                match partition::present(new.pid, id, backend) {
                    Ok(false) => failed_new.push(index),
                    _ => cut.pending = false,
                }
            }
        }
    }
    for index in failed_new.into_iter().rev() {
        cuts.remove(index);
    }
    Executed {
        cuts,
        reapplied,
        problems,
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
                            follow: None,
                            problem: Some(format!(
                                "left by a previous agent, could not be undone: {error}"
                            )),
                            stop_node: None,
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
            Request::StopNode(stop) => self.stop_node(stop).await.map(Response::Started),
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
            pod_uids: Vec::new(),
            pod_uid: None,
            netns_pid: None,
            netns: None,
            peers: Vec::new(),
            fixed_peers: Vec::new(),
            peer_pods: Vec::new(),
            cuts: Vec::new(),
            reapplied: 0,
            backend: None,
            started_at: jiff::Timestamp::now().to_string(),
            effect: String::new(),
            node: None,
            kubelet_pid: None,
            kubelet_start_ticks: None,
            heal_deadline: None,
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
            node: record.node.clone(),
        };
        let id = record.id;
        registry.faults.insert(
            id,
            Active {
                record,
                keep_down,
                follow: None,
                problem: None,
                stop_node: None,
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
        check_namespace(&request.namespace, &self.config.namespaces)?;
        let view = self.locator.pod(&request.namespace, &request.pod).await?;
        let id = view
            .container_target(&request.container, self.config.node.as_deref())?
            .id;
        let mut registry = self.registry.lock().await;
        let ids = vec![id.clone()];
        let (procfs, ids_kill, uid) = (self.procfs.clone(), ids.clone(), view.uid.clone());
        let keep = request.keep_down;
        let (killed, effect, table) = blocking(move || {
            // What identifies the container's processes besides its id (their executables,
            // their network namespace) and the pod's other cgroups, read before the kill.
            let table = if keep {
                procfs.scan(&mut ScanCache::default(), 0, |text| {
                    cgroup_text_in_pod(text, &uid) || cgroup_text_names(text, &ids_kill[0])
                })?
            } else {
                Vec::new()
            };
            let (killed, effect) = kill::kill_once(&procfs, &ids_kill)?;
            Ok((killed, effect, table))
        })
        .await?;
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
            let watch = Watch::at_kill(&view, &request.container, &id, &table);
            let signature = watch.signature();
            let recognised = if signature.is_empty() {
                "nothing read at the kill recognises it (its executables or network namespace unread, or each executable run by another container of the pod too), so it is killed once the pod status names its id (about a second)".to_owned()
            } else {
                format!(
                    "recognised in a new cgroup of the pod by its executable ({}) at the next scan (every {} ms) while the pod's other containers are up, before the pod status names it",
                    signature.join(", "),
                    kill::KEEP_DOWN_INTERVAL.as_millis()
                )
            };
            record.effect = format!(
                "{effect}; keepDown: the agent kills whatever starts in the container until end, and the container started again: {recognised}"
            );
            KeepDown::start(self.procfs.clone(), watch)
        });
        if record.effect.is_empty() {
            record.effect = effect;
        }
        if keep_down.is_some() {
            self.spawn_keep_down_refresh(fault_id, request.clone());
        }
        Ok(self.register(&mut registry, record, keep_down, describe(&killed)))
    }

    /// Keeps a keepDown's view of its pod current: the kubelet starts a killed container
    /// again under a new id, and the pod status, once it names it, is the authority for it
    /// (and for the ids of the pod's other containers, and for the pod made again). The
    /// keepDown's thread does not wait for it to kill a restart it recognises
    /// ([`kill::restart`]).
    fn spawn_keep_down_refresh(self: &Arc<Self>, fault_id: u64, request: KillRequest) {
        let agent = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(KEEP_DOWN_REFRESH).await;
                let Some(agent) = agent.upgrade() else { return };
                let found = agent.locator.pod(&request.namespace, &request.pod).await;
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
                match found.and_then(|view| keep_down.observe(&view, agent.config.node.as_deref()))
                {
                    Ok(new_ids) => {
                        for id in new_ids {
                            tracing::info!(fault_id, container_id = %id, "keepDown: the pod status names the container started again; killing in its new cgroup too");
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
        for peer in &request.peer_pods {
            check_namespace(&peer.namespace, &self.config.namespaces)?;
        }
        if request.peers.is_empty() && request.peer_pods.is_empty() {
            return Err(Error::Request(
                "partition.peers, partition.peerPods: give at least one address or CIDR, or one pod"
                    .to_owned(),
            ));
        }
        let fixed = partition::parse_peers(&request.peers)?;
        let mut peer_pods = Vec::new();
        for peer in &request.peer_pods {
            let view = self.locator.pod(&peer.namespace, &peer.pod).await?;
            let addresses = view.addresses()?;
            let named = PeerPod {
                namespace: peer.namespace.clone(),
                pod: peer.pod.clone(),
                addresses: Vec::new(),
            };
            peer_pods.push(follow::refresh_peer_pod(&named, Some(&addresses)));
        }
        let peers = follow::desired_peers(&fixed, &peer_pods);
        if peers.is_empty() {
            return Err(Error::Partition {
                namespace: request.namespace.clone(),
                pod: request.pod.clone(),
                reason: format!(
                    "no peer address to cut it from: the peer pods ({}) have no IP yet",
                    peer_pod_names(&peer_pods)
                ),
            });
        }
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
        let shown: Vec<String> = peers.iter().map(Peer::to_string).collect();
        record.container_ids = ids.into_iter().map(|id| id.id).collect();
        record.cuts = vec![Cut {
            pod_uid: uid.clone(),
            netns: netns.clone(),
            pid,
            peers: shown.clone(),
            applied_at: record.started_at.clone(),
            pending: false,
            gone: false,
        }];
        record.pod_uid = Some(uid);
        record.netns_pid = Some(pid);
        record.netns = Some(netns);
        record.peers = shown;
        record.fixed_peers = fixed.iter().map(Peer::to_string).collect();
        record.backend = Some(backend);
        record.effect = if peer_pods.is_empty() {
            format!("{effect}; followed until end: a namespace the pod gets (recreated) is cut too")
        } else {
            format!(
                "{effect}; followed until end: a namespace the pod gets (recreated) is cut too, and the rules keep to the addresses of the peer pods {}",
                peer_pod_names(&peer_pods)
            )
        };
        record.peer_pods = peer_pods;
        let started = self.register(&mut registry, record, None, vec![pid]);
        if let Some(active) = registry.faults.get_mut(&fault_id) {
            active.follow = Some(Follow::new());
        }
        drop(registry);
        self.spawn_partition_follower(fault_id, request, fixed, backend);
        Ok(started)
    }

    /// `stopNode`: validates and finds everything (its own node, its kubelet, the pods of its
    /// namespaces on the node, its own Pod readable for the heal), answers that the fault is
    /// scheduled, and acts [`stop_node::ACT_DELAY`] later ([`Self::act_stop_node`]).
    async fn stop_node(self: &Arc<Self>, request: StopNodeRequest) -> Result<Started> {
        let heal_after = stop_node::heal_after(request.heal_after_seconds)?;
        let Some(node) = self.config.node.clone() else {
            return Err(Error::StopNode(
                "refused: the agent was started without --node (NODE_NAME), so it cannot tell its node".to_owned(),
            ));
        };
        if request.node != node {
            return Err(Error::StopNode(format!(
                "refused: node {:?} is not this agent's node {node:?}: ask the agent of that node",
                request.node
            )));
        }
        let Some(own) = self.config.own_pod.clone() else {
            return Err(Error::StopNode(
                "refused: the agent does not know its own Pod (POD_NAMESPACE, POD_NAME), where the heal arrives".to_owned(),
            ));
        };
        // The heal comes through the agent's own Pod: it must be readable before anything
        // is stopped.
        self.locator
            .annotation(&own.namespace, &own.pod, HEAL_ANNOTATION)
            .await?;
        let mut pods = Vec::new();
        for namespace in &self.config.namespaces {
            for view in self.locator.pods_on_node(namespace, &node).await? {
                if view.namespace == own.namespace && view.name == own.pod {
                    continue;
                }
                let ids: Vec<String> = view
                    .containers
                    .iter()
                    .filter_map(|c| c.container_id.as_deref())
                    .map(crate::cgroup::ContainerId::parse)
                    .collect::<Result<Vec<_>>>()?
                    .into_iter()
                    .map(|id| id.id)
                    .collect();
                pods.push((
                    format!("{}/{}", view.namespace, view.name),
                    view.uid.clone(),
                    ids,
                ));
            }
        }
        let procfs = self.procfs.clone();
        let wanted = node.clone();
        let (kubelet, ticks) = blocking(move || {
            let candidates = stop_node::kubelet_candidates(&procfs)?;
            let pid = stop_node::choose_kubelet(&wanted, &candidates).map_err(Error::StopNode)?;
            Ok((pid, stop_node::start_ticks(&procfs, pid)))
        })
        .await?;
        let mut registry = self.registry.lock().await;
        if let Some(active) = registry.faults.values().find(|a| {
            a.stop_node.as_ref().is_some_and(|s| {
                matches!(
                    s.phase,
                    StopNodePhase::Scheduled | StopNodePhase::InEffect | StopNodePhase::HealFailed
                )
            })
        }) {
            return Err(Error::StopNode(format!(
                "refused: this node is stopped already (fault {})",
                active.record.id
            )));
        }
        let fault_id = registry.allocate();
        let deadline = jiff::Timestamp::now()
            .checked_add(jiff::SignedDuration::from_secs(
                i64::try_from(heal_after.as_secs()).unwrap_or(i64::MAX),
            ))
            .map(|t| t.to_string())
            .unwrap_or_default();
        let mut record = Self::new_record(fault_id, FaultKind::StopNode, "", "", None);
        record.node = Some(node.clone());
        record.kubelet_pid = Some(kubelet);
        record.kubelet_start_ticks = ticks;
        record.heal_deadline = Some(deadline.clone());
        record.container_ids = pods.iter().flat_map(|(_, _, ids)| ids.clone()).collect();
        record.pod_uids = pods.iter().map(|(_, uid, _)| uid.clone()).collect();
        let names: Vec<&str> = pods.iter().map(|(name, _, _)| name.as_str()).collect();
        record.effect = format!(
            "scheduled: in {} ms the agent SIGSTOPs the kubelet (pid {kubelet}) and SIGKILLs every process of the containers of the {} pods of {} on node {node} ({}); the pods of other namespaces, the agent's own ({}/{}) among them, are left running; healed by the annotation {HEAL_ANNOTATION}: \"{fault_id}\" on pod {}/{}, by end, or by itself at {deadline}",
            stop_node::ACT_DELAY.as_millis(),
            pods.len(),
            self.config.namespaces.join(", "),
            if names.is_empty() { "none".to_owned() } else { names.join(", ") },
            own.namespace,
            own.pod,
            own.namespace,
            own.pod,
        );
        let started = self.register(&mut registry, record, None, vec![kubelet]);
        if let Some(active) = registry.faults.get_mut(&fault_id) {
            active.stop_node = Some(StopNodeState {
                phase: StopNodePhase::Scheduled,
                deadline: std::time::Instant::now() + heal_after,
                in_effect_at: None,
                healed_at: None,
                heal: None,
            });
        }
        drop(registry);
        let agent = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(stop_node::ACT_DELAY).await;
            let acted = match agent.upgrade() {
                Some(agent) => agent.act_stop_node(fault_id).await,
                None => false,
            };
            if !acted {
                return;
            }
            loop {
                tokio::time::sleep(stop_node::HEAL_POLL).await;
                let Some(agent) = agent.upgrade() else { return };
                if !agent.heal_step(fault_id, &own).await {
                    return;
                }
            }
        });
        Ok(started)
    }

    /// Stops the kubelet, then kills the pods' processes (the kubelet first: it would start
    /// them again), each checked; records the outcome. A kubelet stopped for a kill that
    /// failed is continued again. True when the fault is in effect.
    async fn act_stop_node(&self, id: u64) -> bool {
        let mut registry = self.registry.lock().await;
        let Some(record) = stop_node_record(&registry, id, StopNodePhase::Scheduled) else {
            return false;
        };
        let procfs = self.procfs.clone();
        let result = blocking(move || {
            let pid = record.kubelet_pid.ok_or_else(|| {
                Error::StopNode("its record names no kubelet pid".to_owned())
            })?;
            let stopped = stop_node::stop_kubelet(&procfs, pid)?;
            // By the pods' cgroups, not the container ids of the request: a container the
            // kubelet restarted in between runs under another id (s014 through the agent:
            // iad's containers restarted 0.5 s before the request, the ids listed were the
            // dead ones', and the new mysqld served on). The kubelet is stopped now, so
            // nothing starts again while they are killed.
            let killed = stop_node::kill_pods(&procfs, &record.pod_uids);
            match killed {
                Ok(killed) => Ok(format!("{stopped}; the pods' containers: {killed}")),
                Err(error) => {
                    let undone = stop_node::continue_kubelet(&procfs, pid, record.kubelet_start_ticks);
                    Err(Error::NotInEffect(format!(
                        "the pods' processes were not all killed ({error}); the kubelet was continued again: {}",
                        match undone {
                            Ok(effect) => effect,
                            Err(error) => format!("it could not be: {error}"),
                        }
                    )))
                }
            }
        })
        .await;
        let Some(active) = registry.faults.get_mut(&id) else {
            return false;
        };
        let Some(state) = active.stop_node.as_mut() else {
            return false;
        };
        match result {
            Ok(effect) => {
                tracing::info!(fault_id = id, %effect, "stop-node in effect");
                state.phase = StopNodePhase::InEffect;
                state.in_effect_at = Some(jiff::Timestamp::now().to_string());
                active.record.effect = format!("{}; in effect: {effect}", active.record.effect);
                if let Err(error) = self.persist(&registry) {
                    tracing::warn!(fault_id = id, %error, "stop-node: could not record its effect in the state file");
                }
                true
            }
            Err(error) => {
                tracing::error!(fault_id = id, %error, "stop-node did not take effect");
                state.phase = StopNodePhase::Failed;
                active.problem = Some(error.to_string());
                false
            }
        }
    }

    /// One look for a stop-node's heal: its dead-man timer run out, or the heal annotation
    /// naming it on the agent's own Pod; then the kubelet is continued (checked) and the heal
    /// recorded. False once there is nothing more to watch.
    async fn heal_step(&self, id: u64, own: &PodRef) -> bool {
        let deadline = {
            let registry = self.registry.lock().await;
            match registry.faults.get(&id).and_then(|a| a.stop_node.as_ref()) {
                Some(state) if state.phase == StopNodePhase::InEffect => state.deadline,
                _ => return false,
            }
        };
        let cause = if std::time::Instant::now() >= deadline {
            Some("its dead-man timer ran out".to_owned())
        } else {
            match self
                .locator
                .annotation(&own.namespace, &own.pod, HEAL_ANNOTATION)
                .await
            {
                Ok(value) if stop_node::heal_requested(value.as_deref(), id) => Some(format!(
                    "the annotation {HEAL_ANNOTATION}: \"{id}\" on pod {}/{}",
                    own.namespace, own.pod
                )),
                Ok(_) => None,
                Err(error) => {
                    tracing::debug!(fault_id = id, %error, "stop-node: could not read the agent's own Pod");
                    None
                }
            }
        };
        let Some(cause) = cause else {
            return true;
        };
        let mut registry = self.registry.lock().await;
        let Some(record) = stop_node_record(&registry, id, StopNodePhase::InEffect) else {
            return false;
        };
        let procfs = self.procfs.clone();
        let result = blocking(move || undo(&procfs, &record, None)).await;
        let Some(active) = registry.faults.get_mut(&id) else {
            return false;
        };
        let Some(state) = active.stop_node.as_mut() else {
            return false;
        };
        match result {
            Ok(effect) => {
                tracing::info!(fault_id = id, %cause, %effect, "stop-node healed");
                state.phase = StopNodePhase::Healed;
                state.healed_at = Some(jiff::Timestamp::now().to_string());
                state.heal = Some(format!("healed by {cause}: {effect}"));
            }
            Err(error) => {
                tracing::error!(fault_id = id, %cause, %error, "stop-node: the heal did not take");
                state.phase = StopNodePhase::HealFailed;
                active.problem = Some(format!("heal by {cause} failed: {error}"));
            }
        }
        false
    }

    /// Keeps a partition on its pods until it ends: about once a second, one [`Self::follow_step`].
    fn spawn_partition_follower(
        self: &Arc<Self>,
        fault_id: u64,
        request: PartitionRequest,
        fixed: Vec<Peer>,
        backend: Backend,
    ) {
        let agent = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(PARTITION_REFRESH).await;
                let Some(agent) = agent.upgrade() else { return };
                if !agent.follow_step(fault_id, &request, &fixed, backend).await {
                    tracing::debug!(fault_id, "partition: no longer followed");
                    return;
                }
            }
        });
    }

    /// The uid of the partition's pod as it is now, when it runs on this node; `None` while
    /// it is deleted, not scheduled yet or elsewhere (the last, and a read that fails, are
    /// problems: the pod as it is now is not cut).
    async fn followed_pod(
        &self,
        request: &PartitionRequest,
        problems: &mut Vec<String>,
    ) -> Option<String> {
        let view = match self.locator.pod(&request.namespace, &request.pod).await {
            Ok(view) => view,
            Err(error) => {
                problems.push(format!(
                    "re-read the pod (deleted, not made again yet?): {error}"
                ));
                return None;
            }
        };
        view.node_name.as_ref()?;
        match view.network_target(self.config.node.as_deref()) {
            Ok((uid, _)) => Some(uid),
            Err(error) => {
                problems.push(format!(
                    "pod {}/{} as it is now (uid {}) is not cut: {error}",
                    view.namespace, view.name, view.uid
                ));
                None
            }
        }
    }

    /// One step of a partition's follower: re-read its pods (API, no lock), look at `/proc`
    /// (blocking thread, no lock), decide ([`follow::plan`]), record the namespaces about to
    /// be cut (lock), change the rules (blocking thread, no lock, the fault's gate held), and
    /// record the outcome (lock). False once the fault is ending or gone.
    async fn follow_step(
        &self,
        id: u64,
        request: &PartitionRequest,
        fixed: &[Peer],
        backend: Backend,
    ) -> bool {
        let (cuts, peer_pods) = {
            let registry = self.registry.lock().await;
            match registry.faults.get(&id) {
                Some(active) if active.follow.as_ref().is_some_and(|f| !f.stopping) => {
                    (active.record.cuts.clone(), active.record.peer_pods.clone())
                }
                _ => return false,
            }
        };
        let mut problems = Vec::new();
        let pod_uid = self.followed_pod(request, &mut problems).await;
        let mut refreshed = Vec::with_capacity(peer_pods.len());
        for last in &peer_pods {
            let seen = match self.locator.pod(&last.namespace, &last.pod).await {
                Ok(view) => view.addresses().map_err(|error| error.to_string()),
                Err(error) => Err(format!(
                    "re-read peer pod {}/{} (its last addresses stay cut): {error}",
                    last.namespace, last.pod
                )),
            };
            let seen = seen.map_err(|problem| problems.push(problem)).ok();
            refreshed.push(follow::refresh_peer_pod(last, seen.as_deref()));
        }
        let desired = follow::desired_peers(fixed, &refreshed);
        let (procfs, uid_look, cuts_look) = (self.procfs.clone(), pod_uid.clone(), cuts.clone());
        let seen = blocking(move || follow::look(&procfs, uid_look.as_deref(), &cuts_look)).await;
        let plan = match seen {
            Ok(seen) => follow::plan(&cuts, &desired, &seen),
            Err(error) => {
                problems.push(format!("look for the pod's network namespaces: {error}"));
                self.record_step(id, refreshed, &desired, None, problems)
                    .await;
                return true;
            }
        };
        if plan.is_empty() {
            self.record_step(id, refreshed, &desired, None, problems)
                .await;
            return true;
        }
        // Written ahead: the state file names a namespace before any rule goes in it.
        let (gate, record) = {
            let mut registry = self.registry.lock().await;
            let Some(active) = registry.faults.get_mut(&id) else {
                return false;
            };
            let Some(follow) = active.follow.as_ref().filter(|f| !f.stopping) else {
                return false;
            };
            let Ok(gate) = follow.gate.clone().try_lock_owned() else {
                return true;
            };
            for &index in &plan.gone {
                if let Some(cut) = active.record.cuts.get_mut(index) {
                    tracing::info!(fault_id = id, pod_uid = %cut.pod_uid, netns = %cut.netns, "partition: no process of the pod holds a namespace it cut any more: gone with its rules");
                    cut.gone = true;
                }
            }
            let now = jiff::Timestamp::now().to_string();
            for new in &plan.new {
                active.record.cuts.push(Cut {
                    pod_uid: new.pod_uid.clone(),
                    netns: new.netns.clone(),
                    pid: new.pid,
                    peers: Vec::new(),
                    applied_at: now.clone(),
                    pending: true,
                    gone: false,
                });
            }
            let record = active.record.clone();
            if let Err(error) = self.persist(&registry) {
                problems.push(format!(
                    "record the namespaces about to be cut in the state file: {error}"
                ));
            }
            (gate, record)
        };
        let first_new = record.cuts.len() - plan.new.len();
        let procfs = self.procfs.clone();
        let executed = blocking(move || {
            let cuts = record.cuts.clone();
            Ok(execute(&procfs, &record, backend, cuts, first_new, &plan))
        })
        .await;
        let executed = executed
            .map_err(|error| problems.push(format!("change the partition's rules: {error}")))
            .ok();
        self.record_step(id, refreshed, &desired, executed, problems)
            .await;
        drop(gate);
        true
    }

    /// Records a follow step's outcome: the peer pods' addresses, the peers, the cuts and the
    /// step's problems (none clears the last ones).
    async fn record_step(
        &self,
        id: u64,
        peer_pods: Vec<PeerPod>,
        desired: &[Peer],
        executed: Option<Executed>,
        mut problems: Vec<String>,
    ) {
        let mut registry = self.registry.lock().await;
        let Some(active) = registry.faults.get_mut(&id) else {
            return;
        };
        let peers: Vec<String> = desired.iter().map(Peer::to_string).collect();
        let mut changed = active.record.peer_pods != peer_pods || active.record.peers != peers;
        active.record.peer_pods = peer_pods;
        active.record.peers = peers;
        if let Some(executed) = executed {
            changed = true;
            active.record.cuts = executed.cuts;
            active.record.reapplied += executed.reapplied;
            problems.extend(executed.problems);
        }
        if changed {
            if let Err(error) = self.persist(&registry) {
                problems.push(format!(
                    "record the partition's namespaces in the state file: {error}"
                ));
            }
        }
        let problem = (!problems.is_empty()).then(|| problems.join("; "));
        if let Some(problem) = &problem {
            tracing::warn!(fault_id = id, %problem, "partition: following its pods");
        }
        if let Some(follow) = registry
            .faults
            .get_mut(&id)
            .and_then(|active| active.follow.as_mut())
        {
            follow.problem = problem;
        }
    }

    /// Stops the followers of the faults `ids` (every fault: `None`) and waits until none is
    /// in the middle of a change of rules: after it, an undo sees every namespace cut.
    async fn stop_following(&self, ids: Option<&[u64]>) {
        let gates: Vec<Arc<tokio::sync::Mutex<()>>> = {
            let mut registry = self.registry.lock().await;
            registry
                .faults
                .iter_mut()
                .filter(|(id, _)| ids.is_none_or(|ids| ids.contains(id)))
                .filter_map(|(_, active)| active.follow.as_mut())
                .map(|follow| {
                    follow.stopping = true;
                    follow.gate.clone()
                })
                .collect()
        };
        for gate in gates {
            drop(gate.lock().await);
        }
    }

    /// Ends fault `id`, checking the undo; a fault whose undo fails is kept (with its problem).
    pub async fn end(&self, id: u64) -> Result<Ended> {
        self.stop_following(Some(&[id])).await;
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
        // A stop-node healed already (or never in effect) has nothing left to undo: `end`
        // reports it and forgets it.
        if let Some(state) = &active.stop_node {
            let over = match state.phase {
                StopNodePhase::Healed => Some(format!(
                    "healed at {}: {}",
                    state.healed_at.as_deref().unwrap_or("?"),
                    state.heal.as_deref().unwrap_or("")
                )),
                StopNodePhase::Failed => Some(format!(
                    "it never took effect ({}); what was done was undone then",
                    active.problem.as_deref().unwrap_or("no reason recorded")
                )),
                StopNodePhase::Scheduled | StopNodePhase::InEffect | StopNodePhase::HealFailed => {
                    None
                }
            };
            if let Some(effect) = over {
                tracing::info!(fault_id = id, kind = %active.record.kind, %effect, "fault ended");
                if let Err(error) = self.persist(registry) {
                    tracing::error!(fault_id = id, %error, "fault ended but the state file still lists it");
                }
                return Ok(Ended {
                    id,
                    kind: active.record.kind,
                    effect,
                });
            }
        }
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
                        peer_pods: active.record.peer_pods.clone(),
                        cuts: active.record.cuts.clone(),
                        reapplied: (active.record.kind == FaultKind::Partition)
                            .then_some(active.record.reapplied),
                        started_at: active.record.started_at.clone(),
                        effect: active.record.effect.clone(),
                        kills: status.as_ref().map(|s| s.kills),
                        restarts_caught: status.as_ref().map(|s| s.restarts_caught),
                        restarts_recognised: status.as_ref().map(|s| s.restarts_recognised),
                        longest_restart_alive_ms: status
                            .as_ref()
                            .and_then(|s| s.longest_restart_alive)
                            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                        problem: active
                            .problem
                            .clone()
                            .or_else(|| active.follow.as_ref().and_then(|f| f.problem.clone()))
                            .or_else(|| status.and_then(|s| s.problem)),
                        node: active.record.node.clone(),
                        phase: active.stop_node.as_ref().map(|s| s.phase),
                        in_effect_at: active
                            .stop_node
                            .as_ref()
                            .and_then(|s| s.in_effect_at.clone()),
                        heal_deadline: active.record.heal_deadline.clone(),
                        healed_at: active.stop_node.as_ref().and_then(|s| s.healed_at.clone()),
                        heal: active.stop_node.as_ref().and_then(|s| s.heal.clone()),
                    }
                })
                .collect(),
        }
    }

    /// Undoes every fault; an error names those that could not be undone (they are kept).
    pub async fn cleanup(&self) -> Result<CleanedUp> {
        self.stop_following(None).await;
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

/// The record of stop-node fault `id` while it is in `phase` (another phase, or another kind
/// of fault: none; the fault moved on meanwhile).
fn stop_node_record(registry: &Registry, id: u64, phase: StopNodePhase) -> Option<FaultRecord> {
    let active = registry.faults.get(&id)?;
    (active.stop_node.as_ref().map(|s| s.phase) == Some(phase)).then(|| active.record.clone())
}
#[cfg(test)]
mod tests {
    use super::*;

    // An agent upgraded while a partition stood: the state file of the agent before it names
    // one namespace (podUid, netns, netnsPid) and no `cuts`; its undo must still find it.
    #[test]
    fn a_partition_recorded_before_cuts_existed_is_undone_from_its_one_namespace() {
        let old = r#"{"nextId": 4, "faults": [{"id": 3, "kind": "partition", "namespace": "br",
            "pod": "iad-0", "containerIds": [], "podUid": "1b9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11",
            "netnsPid": 4242, "netns": "net:[4026532281]", "peers": ["10.244.1.7"],
            "backend": "nft", "startedAt": "2026-12-06T06:20:18Z", "effect": "..."}]}"#;
        let state: StateFile = serde_json::from_str(old).unwrap();
        let record = &state.faults[0];
        assert!(record.cuts.is_empty() && record.reapplied == 0);
        let cuts = recorded_cuts(record);
        assert_eq!(cuts.len(), 1);
        assert_eq!(
            (
                cuts[0].pod_uid.as_str(),
                cuts[0].netns.as_str(),
                cuts[0].pid
            ),
            (
                "1b9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11",
                "net:[4026532281]",
                4242
            )
        );
        assert_eq!(
            cut_name(record, &cuts[0]),
            "pod br/iad-0 (uid 1b9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11) net:[4026532281]"
        );
        // A record with cuts undoes those, the first one's fields notwithstanding.
        let mut followed = record.clone();
        followed.cuts = vec![
            cuts[0].clone(),
            Cut {
                pod_uid: "7c2f0e44-93d1-4f5a-8b6e-2d9c1a0f3e77".into(),
                netns: "net:[4026532400]".into(),
                pid: 5100,
                peers: vec![],
                applied_at: String::new(),
                pending: true,
                gone: false,
            },
        ];
        assert_eq!(recorded_cuts(&followed).len(), 2);
        // A record with neither is refused with the reason, not a panic.
        let mut empty = record.clone();
        empty.pod_uid = None;
        let error = undo_partition(&ProcFs::default(), &empty)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("no pod uid, network namespace or backend"),
            "{error}"
        );
    }
}
