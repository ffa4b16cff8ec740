//! `kill`: SIGKILL every process of a container and see them gone; with `keepDown`, a
//! thread keeps SIGKILLing whatever appears in the container's cgroups until `end`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::error::{Error, Result};
use crate::procfs::{ProcFs, Process};
use crate::signals;

/// How long a kill may take to leave no process of the container.
pub const KILL_WAIT: Duration = Duration::from_secs(5);
/// How often the kill's result is looked at.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// How often a keepDown looks for processes to kill.
pub const KEEP_DOWN_INTERVAL: Duration = Duration::from_millis(50);
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
    for process in &targets {
        signals::send(process.pid, Signal::SIGKILL)?;
    }
    let deadline = Instant::now() + KILL_WAIT;
    loop {
        let left = procfs.live_container_processes(ids)?;
        if left.is_empty() {
            let effect = format!(
                "{} processes SIGKILLed, none of the container's left: {}",
                targets.len(),
                describe(&targets)
            );
            return Ok((targets, effect));
        }
        if Instant::now() >= deadline {
            return Err(Error::NotInEffect(format!(
                "{} of the container's processes still alive {}s after SIGKILL: {}",
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
    /// The last thing that went wrong (a process that survived, a signal refused).
    pub problem: Option<String>,
}

/// A running keepDown: a thread that SIGKILLs every process of its containers.
#[derive(Debug)]
pub struct KeepDown {
    ids: Arc<Mutex<Vec<String>>>,
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
    /// Starts killing the processes of the containers `ids`.
    pub fn start(procfs: ProcFs, ids: Vec<String>) -> KeepDown {
        let ids = Arc::new(Mutex::new(ids));
        let status = Arc::new(Mutex::new(KeepDownStatus::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (ids, status, stop) = (ids.clone(), status.clone(), stop.clone());
            std::thread::Builder::new()
                .name("keep-down".into())
                .spawn(move || keep_down_loop(&procfs, &ids, &status, &stop))
                .ok()
        };
        if thread.is_none() {
            lock(&status).problem = Some("failed to start the killing thread".to_owned());
        }
        KeepDown {
            ids,
            status,
            stop,
            thread,
        }
    }

    /// Adds a container id (the container the kubelet started again, under a new id).
    pub fn add_container_id(&self, id: &str) -> bool {
        let mut ids = lock(&self.ids);
        if ids.iter().any(|known| known == id) {
            return false;
        }
        ids.push(id.to_owned());
        true
    }

    /// The container ids it kills in.
    pub fn container_ids(&self) -> Vec<String> {
        lock(&self.ids).clone()
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
            "the agent stopped killing (thread joined) after {} kills",
            status.kills
        ))
    }
}

impl Drop for KeepDown {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn keep_down_loop(
    procfs: &ProcFs,
    ids: &Mutex<Vec<String>>,
    status: &Mutex<KeepDownStatus>,
    stop: &AtomicBool,
) {
    // pid -> when it was first SIGKILLed (still alive, so still listed).
    let mut killed: BTreeMap<i32, Instant> = BTreeMap::new();
    while !stop.load(Ordering::SeqCst) {
        let ids_now = lock(ids).clone();
        match procfs.live_container_processes(&ids_now) {
            Err(error) => lock(status).problem = Some(error.to_string()),
            Ok(processes) => {
                killed.retain(|pid, _| processes.iter().any(|p| p.pid == *pid));
                for process in &processes {
                    match signals::send(process.pid, Signal::SIGKILL) {
                        Ok(true) => {
                            let first = *killed.entry(process.pid).or_insert_with(|| {
                                lock(status).kills += 1;
                                tracing::info!(pid = process.pid, comm = %process.comm, "keepDown: SIGKILLed a process of the container");
                                Instant::now()
                            });
                            if first.elapsed() > KEEP_DOWN_GRACE {
                                let problem = format!(
                                    "process {process} is still alive {}s after SIGKILL",
                                    first.elapsed().as_secs()
                                );
                                tracing::warn!(pid = process.pid, %problem, "keepDown: could not kill");
                                lock(status).problem = Some(problem);
                            }
                        }
                        Ok(false) => {}
                        Err(error) => {
                            tracing::warn!(pid = process.pid, %error, "keepDown: could not kill");
                            lock(status).problem = Some(error.to_string());
                        }
                    }
                }
            }
        }
        std::thread::sleep(KEEP_DOWN_INTERVAL);
    }
}
