//! `freeze`: SIGSTOP every process of a container, counted only once every thread of every
//! process is seen stopped (`T`/`t` in `/proc/<pid>/task/<tid>/stat`); `end` sends SIGCONT
//! and counts once no thread is left in `T`.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::error::{Error, Result};
use crate::procfs::{ProcFs, Process, Thread};
use crate::signals;

/// How long every thread may take to stop (or to resume).
pub const SETTLE_WAIT: Duration = Duration::from_secs(5);
/// How often the threads' states are looked at.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Threads of `processes` for which `bad` holds, as "pid/tid (comm) state".
fn threads_where(
    procfs: &ProcFs,
    processes: &[Process],
    bad: impl Fn(&Thread) -> bool,
) -> Vec<String> {
    processes
        .iter()
        .flat_map(|process| {
            procfs
                .threads(process.pid)
                .into_iter()
                .filter(&bad)
                .map(move |thread| {
                    format!(
                        "{}/{} ({}) state {}",
                        process.pid, thread.tid, thread.comm, thread.state.0
                    )
                })
        })
        .collect()
}

fn count_threads(procfs: &ProcFs, processes: &[Process]) -> usize {
    processes
        .iter()
        .map(|process| procfs.threads(process.pid).len())
        .sum()
}

/// SIGSTOPs every process of the containers `ids` until every thread is stopped. When they
/// do not all stop, what was stopped is resumed and the error says which threads ran on.
pub fn freeze(procfs: &ProcFs, ids: &[String]) -> Result<(Vec<Process>, String)> {
    let first = procfs.live_container_processes(ids)?;
    if first.is_empty() {
        return Err(Error::NoProcesses {
            container_id: ids.join(","),
            proc_root: procfs.root.clone(),
        });
    }
    let deadline = Instant::now() + SETTLE_WAIT;
    loop {
        // Scanned again each round: a process forked before its parent stopped is stopped too.
        let processes = procfs.live_container_processes(ids)?;
        for process in &processes {
            signals::send(process.pid, Signal::SIGSTOP)?;
        }
        let running = threads_where(procfs, &processes, |thread| {
            !thread.state.is_stopped() && !thread.state.is_dead()
        });
        let rescanned = procfs.live_container_processes(ids)?;
        if running.is_empty() && rescanned == processes {
            let effect = format!(
                "{} processes SIGSTOPped, all {} of their threads seen stopped: {}",
                processes.len(),
                count_threads(procfs, &processes),
                processes
                    .iter()
                    .map(Process::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            return Ok((processes, effect));
        }
        if Instant::now() >= deadline {
            let seen = if running.is_empty() {
                "the container's processes kept changing".to_owned()
            } else {
                format!("threads still running: {}", running.join(", "))
            };
            // Leave nothing half-frozen behind.
            if let Err(error) = thaw(procfs, ids) {
                tracing::warn!(%error, "could not resume a freeze that did not take effect");
            }
            return Err(Error::NotInEffect(format!(
                "{}s after SIGSTOP, {seen}",
                SETTLE_WAIT.as_secs()
            )));
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// SIGCONTs every process of the containers `ids` until no thread is left stopped by a
/// signal. A container with no process left is thawed already.
pub fn thaw(procfs: &ProcFs, ids: &[String]) -> Result<String> {
    let deadline = Instant::now() + SETTLE_WAIT;
    loop {
        let processes = procfs.live_container_processes(ids)?;
        for process in &processes {
            signals::send(process.pid, Signal::SIGCONT)?;
        }
        let stopped = threads_where(procfs, &processes, |thread| {
            thread.state.is_signal_stopped()
        });
        if stopped.is_empty() {
            return Ok(if processes.is_empty() {
                "no process of the container is left to thaw".to_owned()
            } else {
                format!(
                    "{} processes SIGCONTed, none of their {} threads left stopped",
                    processes.len(),
                    count_threads(procfs, &processes)
                )
            });
        }
        if Instant::now() >= deadline {
            return Err(Error::UndoNotObserved {
                kind: "freeze".into(),
                seen: format!(
                    "{}s after SIGCONT, threads still stopped: {}",
                    SETTLE_WAIT.as_secs(),
                    stopped.join(", ")
                ),
            });
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}
