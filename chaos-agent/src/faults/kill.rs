//! `kill`: SIGKILL every process of a container and see them gone; with `keepDown`, a
//! thread keeps SIGKILLing, until `end`, whatever runs in the container's cgroups and the
//! container started again by the kubelet, recognised in a new cgroup of the pod before the
//! pod status names it ([`restart`] has the rule and why it cannot take another container's
//! process).

pub mod restart;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::cgroup::{cgroup_text_in_pod, cgroup_text_names};
use crate::error::{Error, Result};
use crate::pod::PodView;
use crate::procfs::{ProcFs, Process, ScanCache, Seen};
use crate::signals;
use restart::Watch;

/// How long a kill may take to leave no process of the container.
pub const KILL_WAIT: Duration = Duration::from_secs(5);
/// How often the kill's result is looked at.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// How often a keepDown looks for processes to kill (a scan of the pod's processes: the
/// cgroups of the node's other processes are read once, [`ProcFs::scan`]).
pub const KEEP_DOWN_INTERVAL: Duration = Duration::from_millis(20);
/// How long a process a keepDown killed may stay alive before it is a problem.
pub const KEEP_DOWN_GRACE: Duration = Duration::from_secs(2);

fn describe(processes: &[Process]) -> String {
    processes
        .iter()
        .map(Process::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// SIGKILLs every process of the containers `ids` and waits until none is alive.
/// Returns the processes killed and the effect seen.
pub fn kill_once(procfs: &ProcFs, ids: &[String]) -> Result<(Vec<Process>, String)> {
    let targets = procfs.live_container_processes(ids)?;
    if targets.is_empty() {
        return Err(Error::NoProcesses {
            container_id: ids.join(","),
            proc_root: procfs.root.clone(),
        });
    }
    kill_until_gone(targets, "the container's", || {
        procfs.live_container_processes(ids)
    })
}

/// SIGKILLs `targets`, then looks again with `find` until none of `whose` processes is left,
/// killing what forked between a look and the signal too; bounded by [`KILL_WAIT`]. Returns
/// the processes killed and the effect seen.
pub(crate) fn kill_until_gone(
    targets: Vec<Process>,
    whose: &str,
    find: impl Fn() -> Result<Vec<Process>>,
) -> Result<(Vec<Process>, String)> {
    for process in &targets {
        signals::send(process.pid, Signal::SIGKILL)?;
    }
    let deadline = Instant::now() + KILL_WAIT;
    loop {
        let left = find()?;
        if left.is_empty() {
            let effect = format!(
                "{} processes SIGKILLed, none of {whose} left: {}",
                targets.len(),
                describe(&targets)
            );
            return Ok((targets, effect));
        }
        if Instant::now() >= deadline {
            return Err(Error::NotInEffect(format!(
                "{} of {whose} processes still alive {}s after SIGKILL: {}",
                left.len(),
                KILL_WAIT.as_secs(),
                describe(&left)
            )));
        }
        // A process that forked between the scan and the signal: kill it too.
        for process in &left {
            signals::send(process.pid, Signal::SIGKILL)?;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// What a keepDown has done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeepDownStatus {
    /// Processes SIGKILLed.
    pub kills: u64,
    /// Instances of the container started again (container ids other than the one killed)
    /// in which it SIGKILLed a process.
    pub restarts_caught: u64,
    /// Of those, how many it recognised before the pod status named them.
    pub restarts_recognised: u64,
    /// The longest a process of a restarted instance was seen alive (from the scan that first
    /// saw it in the pod to its SIGKILL; it may have run up to one scan interval before).
    pub longest_restart_alive: Option<Duration>,
    /// The last thing that went wrong (a process that survived, a signal refused).
    pub problem: Option<String>,
}

impl KeepDownStatus {
    /// `3 restarts of the container caught (3 before the pod status named them), the
    /// longest-lived restarted process seen alive 21 ms before its SIGKILL`.
    pub fn restarts(&self) -> String {
        match self.longest_restart_alive {
            Some(longest) if self.restarts_caught > 0 => format!(
                "{} restarts of the container caught ({} before the pod status named them), the longest-lived restarted process seen alive {} ms before its SIGKILL",
                self.restarts_caught,
                self.restarts_recognised,
                longest.as_millis()
            ),
            _ => "no restart of the container seen".to_owned(),
        }
    }
}

/// A running keepDown: a thread that SIGKILLs every process of its container, and of its
/// container started again.
#[derive(Debug)]
pub struct KeepDown {
    watch: Arc<Mutex<Watch>>,
    status: Arc<Mutex<KeepDownStatus>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic inside the loop cannot leave the data half-written (plain assignments).
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl KeepDown {
    /// Starts killing what `watch` says is the container's.
    pub fn start(procfs: ProcFs, watch: Watch) -> KeepDown {
        let watch = Arc::new(Mutex::new(watch));
        let status = Arc::new(Mutex::new(KeepDownStatus::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (watch, status, stop) = (watch.clone(), status.clone(), stop.clone());
            std::thread::Builder::new()
                .name("keep-down".into())
                .spawn(move || keep_down_loop(&procfs, &watch, &status, &stop))
                .ok()
        };
        if thread.is_none() {
            lock(&status).problem = Some("failed to start the killing thread".to_owned());
        }
        KeepDown {
            watch,
            status,
            stop,
            thread,
        }
    }

    /// Takes in the pod as the API shows it now ([`Watch::observe`]): returns the container's
    /// ids new to it (the container the kubelet started again, under a new id). A cgroup
    /// given back (taken for the container, named another's) is the keepDown's problem.
    pub fn observe(&self, view: &PodView, agent_node: Option<&str>) -> Result<Vec<String>> {
        let observed = lock(&self.watch).observe(view, agent_node)?;
        if !observed.given_back.is_empty() {
            let problem = observed.given_back.join("; ");
            tracing::error!(%problem, "keepDown: a cgroup taken for the container was another container's");
            lock(&self.status).problem = Some(problem);
        }
        Ok(observed.new_ids)
    }

    /// The container ids it kills in.
    pub fn container_ids(&self) -> Vec<String> {
        lock(&self.watch).own.iter().cloned().collect()
    }

    /// Its kills and problem so far.
    pub fn status(&self) -> KeepDownStatus {
        let mut status = lock(&self.status).clone();
        if self.thread.as_ref().is_some_and(|t| t.is_finished()) && !self.is_stopping() {
            status.problem = Some("the killing thread ended on its own".to_owned());
        }
        status
    }

    /// Whether [`Self::stop`] was called.
    pub fn is_stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// A handle that tells whether it was stopped (for the task that adds container ids).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Stops killing and checks the thread is gone; returns the effect seen.
    pub fn stop(mut self) -> Result<String> {
        self.stop.store(true, Ordering::SeqCst);
        let Some(thread) = self.thread.take() else {
            return Ok("the killing thread had never started".to_owned());
        };
        if thread.join().is_err() {
            return Err(Error::UndoNotObserved {
                kind: "kill".into(),
                seen: "the killing thread panicked".into(),
            });
        }
        let status = lock(&self.status).clone();
        Ok(format!(
            "the agent stopped killing (thread joined) after {} kills; {}",
            status.kills,
            status.restarts()
        ))
    }
}

impl Drop for KeepDown {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// What the thread keeps between scans.
#[derive(Default)]
struct Tally {
    /// pid -> when it was first SIGKILLed (still alive, so still listed).
    killed: BTreeMap<i32, Instant>,
    /// pid -> when a scan first saw it in the pod (or in the container).
    first_seen: BTreeMap<i32, Instant>,
    /// The restarted instances caught, and those recognised before the status named them.
    caught: BTreeSet<String>,
    recognised: BTreeSet<String>,
    /// The last reason (b) waited, logged once.
    held: Option<String>,
}

fn keep_down_loop(
    procfs: &ProcFs,
    watch: &Mutex<Watch>,
    status: &Mutex<KeepDownStatus>,
    stop: &AtomicBool,
) {
    let mut cache = ScanCache::default();
    let mut tally = Tally::default();
    while !stop.load(Ordering::SeqCst) {
        let (generation, uid, own) = {
            let watch = lock(watch);
            (watch.generation, watch.pod_uid.clone(), watch.own.clone())
        };
        let wanted = |text: &str| {
            uid.as_deref()
                .is_some_and(|uid| cgroup_text_in_pod(text, uid))
                || own.iter().any(|id| cgroup_text_names(text, id))
        };
        match procfs.scan(&mut cache, generation, wanted) {
            Err(error) => lock(status).problem = Some(error.to_string()),
            Ok(table) => keep_down_step(watch, status, &mut tally, &table),
        }
        std::thread::sleep(KEEP_DOWN_INTERVAL);
    }
}

fn count(ids: &BTreeSet<String>) -> u64 {
    u64::try_from(ids.len()).unwrap_or(u64::MAX)
}

/// One scan's worth: decide ([`Watch::judge`]), take the cgroups recognised, SIGKILL, count.
fn keep_down_step(
    watch: &Mutex<Watch>,
    status: &Mutex<KeepDownStatus>,
    tally: &mut Tally,
    table: &[Seen],
) {
    let now = Instant::now();
    tally
        .first_seen
        .retain(|pid, _| table.iter().any(|seen| seen.pid == *pid));
    for seen in table {
        tally.first_seen.entry(seen.pid).or_insert(now);
    }
    tally
        .killed
        .retain(|pid, _| table.iter().any(|seen| seen.pid == *pid && seen.alive));
    let (first_id, judged) = {
        let mut watch = lock(watch);
        watch.learn(table);
        let judged = watch.judge(table);
        for verdict in judged.kill.iter().filter(|verdict| verdict.recognised) {
            watch.adopt(&verdict.container_id);
        }
        (watch.first_id.clone(), judged)
    };
    if judged.held != tally.held {
        if let Some(held) = &judged.held {
            tracing::info!(%held, "keepDown: a restart is not recognised while another container of the pod is not up");
        }
        tally.held = judged.held;
    }
    for verdict in &judged.kill {
        let pid = verdict.pid;
        let comm = table
            .iter()
            .find(|seen| seen.pid == pid)
            .map(|seen| seen.comm.clone())
            .unwrap_or_default();
        match signals::send(pid, Signal::SIGKILL) {
            Ok(true) => {
                let first = *tally.killed.entry(pid).or_insert_with(|| {
                    let killed_at = Instant::now();
                    let mut status = lock(status);
                    status.kills += 1;
                    if verdict.container_id == first_id {
                        tracing::info!(pid, %comm, "keepDown: SIGKILLed a process of the container");
                    } else {
                        let alive = killed_at.saturating_duration_since(
                            tally.first_seen.get(&pid).copied().unwrap_or(killed_at),
                        );
                        tally.caught.insert(verdict.container_id.clone());
                        if verdict.recognised {
                            tally.recognised.insert(verdict.container_id.clone());
                        }
                        status.restarts_caught = count(&tally.caught);
                        status.restarts_recognised = count(&tally.recognised);
                        status.longest_restart_alive =
                            Some(status.longest_restart_alive.map_or(alive, |l| l.max(alive)));
                        tracing::info!(pid, %comm, container_id = %verdict.container_id, recognised = verdict.recognised, alive_ms = u64::try_from(alive.as_millis()).unwrap_or(u64::MAX), "keepDown: SIGKILLed a process of the container started again");
                    }
                    killed_at
                });
                if first.elapsed() > KEEP_DOWN_GRACE {
                    let problem = format!(
                        "process {pid} ({comm}) is still alive {}s after SIGKILL",
                        first.elapsed().as_secs()
                    );
                    tracing::warn!(pid, %problem, "keepDown: could not kill");
                    lock(status).problem = Some(problem);
                }
            }
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(pid, %error, "keepDown: could not kill");
                lock(status).problem = Some(error.to_string());
            }
        }
    }
}
