//! Each node's kubelet as a process of its own (docs/design/localkube.md, "Each node's kubelet
//! is a process"). localkube's kubelets run inside the one localkube process, so a fault agent
//! on a node would find nothing to stop. At start localkube spawns, per node, a child of the
//! `localkube` binary (`localkube kubelet --hostname-override=<node>`, its comm set to
//! `kubelet`) that writes a heartbeat byte to a pipe every [`HEARTBEAT_INTERVAL`]; the
//! in-process kubelet of that node works only while its process runs. A child that is stopped
//! (SIGSTOP: its scheduler state `T`, read from `/proc`, so at once and whatever the machine's
//! load) or gone, or one that has not beaten for [`HEARTBEAT_MISSED_AFTER`] (hung), makes its
//! node's kubelet down: no Lease
//! renewal, Ready Unknown, no container restart, no pod status, exec/attach/logs/port-forward
//! refused; nothing is killed. A child that exits is started again after [`RESTART_DELAY`],
//! as systemd restarts a kubelet; a stopped one stays stopped until SIGCONT.
//!
//! The child dies with the thread that spawned it (`PR_SET_PDEATHSIG`: that thread lives as
//! long as the supervision) and when its pipe's reader is gone; its pid is recorded in the
//! state dir's records, so `localkube down` kills it after a crash of localkube too.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The hidden subcommand of the `localkube` binary that is a node's kubelet process.
pub const SUBCOMMAND: &str = "kubelet";
/// The flag naming the node, as a real kubelet's command line names it.
pub const HOSTNAME_FLAG: &str = "--hostname-override";
/// The process name (`comm`) of a kubelet process.
pub const PROCESS_NAME: &str = "kubelet";
/// How often a kubelet process beats.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(100);
/// How long a running (not stopped) kubelet process may go without a beat before its node's
/// kubelet counts as hung. Generous on purpose: a stopped process is seen from its scheduler
/// state at once, and a busy machine must not make a node NotReady (a beat gap of a second
/// on two loaded cores is no fault anyone injected).
pub const HEARTBEAT_MISSED_AFTER: Duration = Duration::from_secs(10);
/// How long localkube's start waits for every kubelet process's first beat.
pub const FIRST_BEAT_WAIT: Duration = Duration::from_secs(5);
/// How long after a kubelet process exits it is started again.
pub const RESTART_DELAY: Duration = Duration::from_secs(1);

/// A node's kubelet as its process shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeletState {
    /// Beating.
    Up,
    /// Its process runs but does not beat (stopped): as an API server dialing a kubelet
    /// that accepts no connection, a timeout.
    Silent,
    /// Its process is gone (to be started again): connection refused.
    Exited,
}

impl KubeletState {
    /// Whether the node's kubelet works.
    pub fn is_up(self) -> bool {
        match self {
            KubeletState::Up => true,
            KubeletState::Silent | KubeletState::Exited => false,
        }
    }

    /// What an API server answers for a request it must proxy to this node's kubelet, as
    /// kube-apiserver words a failure to reach the kubelet's port (`error dialing backend`),
    /// `None` when it is up.
    pub fn unreachable(self, node_ip: &str) -> Option<String> {
        match self {
            KubeletState::Up => None,
            KubeletState::Silent => Some(format!(
                "error dialing backend: dial tcp {node_ip}:10250: i/o timeout"
            )),
            KubeletState::Exited => Some(format!(
                "error dialing backend: dial tcp {node_ip}:10250: connect: connection refused"
            )),
        }
    }
}

/// The state of a node's kubelet from its last beat, whether its process runs and its
/// scheduler state letter (`/proc/PID/stat` field 3; `None`: unread) (pure: `now` is an input).
pub fn judge(
    last_beat: Option<Instant>,
    running: bool,
    sched: Option<char>,
    now: Instant,
) -> KubeletState {
    if !running {
        return KubeletState::Exited;
    }
    if sched.is_some_and(|state| !localkube_runtime::state::thread_can_run(state)) {
        return KubeletState::Silent;
    }
    match last_beat {
        Some(beat) if now.saturating_duration_since(beat) < HEARTBEAT_MISSED_AFTER => {
            KubeletState::Up
        }
        _ => KubeletState::Silent,
    }
}

/// The argv (after the program) of node `node`'s kubelet process.
pub fn child_args(node: &str) -> Vec<String> {
    vec![SUBCOMMAND.to_owned(), format!("{HOSTNAME_FLAG}={node}")]
}

/// The body of a kubelet process (`localkube kubelet --hostname-override=<node>`): names
/// itself `kubelet`, dies with its parent, and beats on stdout until the pipe is gone.
/// Returns the exit code.
pub fn run_child(node: &str) -> i32 {
    let name = std::ffi::CString::new(PROCESS_NAME).unwrap_or_default();
    if let Err(errno) = nix::sys::prctl::set_name(&name) {
        eprintln!("kubelet {node}: failed to set the process name: {errno}");
    }
    if let Err(errno) = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL) {
        eprintln!("kubelet {node}: failed to die with its parent: {errno}");
        return 1;
    }
    let mut out = std::io::stdout().lock();
    loop {
        // The reader gone (localkube exited, SIGPIPE is ignored by Rust programs): exit.
        if out.write_all(b".").and_then(|()| out.flush()).is_err() {
            return 0;
        }
        std::thread::sleep(HEARTBEAT_INTERVAL);
    }
}

/// One node's supervision, as the kubelet reads it.
#[derive(Debug)]
struct Beat {
    last: Mutex<Option<Instant>>,
    /// The running child's pid (0: none).
    pid: AtomicI32,
}

/// The kubelet processes of a cluster's nodes.
#[derive(Debug)]
pub struct KubeletProcesses {
    beats: BTreeMap<String, Arc<Beat>>,
    stop: Arc<AtomicBool>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl KubeletProcesses {
    /// The program the kubelet processes run: `localkube` in `bin_dir`, when it is there.
    pub fn program(bin_dir: &Path) -> Option<PathBuf> {
        Some(bin_dir.join("localkube")).filter(|p| p.is_file())
    }

    /// Starts one kubelet process per node (each supervised by a thread of its own);
    /// `record` is given each child's pid as it starts (the state dir's records).
    pub fn spawn(
        program: &Path,
        nodes: &[String],
        record: impl Fn(i32) + Send + Sync + 'static,
    ) -> KubeletProcesses {
        let stop = Arc::new(AtomicBool::new(false));
        let record = Arc::new(record);
        let mut beats = BTreeMap::new();
        let mut threads = Vec::new();
        for node in nodes {
            let beat = Arc::new(Beat {
                last: Mutex::new(None),
                pid: AtomicI32::new(0),
            });
            beats.insert(node.clone(), beat.clone());
            let (program, node, stop, record) = (
                program.to_path_buf(),
                node.clone(),
                stop.clone(),
                record.clone(),
            );
            let spawned = std::thread::Builder::new()
                .name(format!("kubelet-{node}"))
                .spawn(move || supervise(&program, &node, &beat, &stop, &*record));
            match spawned {
                Ok(thread) => threads.push(thread),
                Err(error) => {
                    tracing::error!(%error, "could not start a kubelet process's supervisor")
                }
            }
        }
        let processes = KubeletProcesses {
            beats,
            stop,
            threads: Mutex::new(threads),
        };
        // Up from the start: each process's first beat, within a bound.
        let deadline = Instant::now() + FIRST_BEAT_WAIT;
        while Instant::now() < deadline && processes.beats.values().any(|b| lock(&b.last).is_none())
        {
            std::thread::sleep(HEARTBEAT_INTERVAL / 4);
        }
        processes
    }

    /// The state of `node`'s kubelet now (a node without a process is always up).
    pub fn state(&self, node: &str) -> KubeletState {
        let Some(beat) = self.beats.get(node) else {
            return KubeletState::Up;
        };
        let pid = beat.pid.load(Ordering::SeqCst);
        let sched = (pid > 0)
            .then(|| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
            .flatten()
            .and_then(|stat| localkube_runtime::state::stat_state_and_group(&stat))
            .map(|(state, _)| state);
        judge(*lock(&beat.last), pid > 0, sched, Instant::now())
    }

    /// The pid of `node`'s kubelet process, while it runs.
    pub fn pid(&self, node: &str) -> Option<i32> {
        self.beats
            .get(node)
            .map(|b| b.pid.load(Ordering::SeqCst))
            .filter(|pid| *pid > 0)
    }

    /// Kills every kubelet process and waits for their supervisors.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        for beat in self.beats.values() {
            let pid = beat.pid.load(Ordering::SeqCst);
            if pid > 1 {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        for thread in lock(&self.threads).drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for KubeletProcesses {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs `node`'s kubelet process until `stop`, starting it again [`RESTART_DELAY`] after it
/// exits.
fn supervise(
    program: &Path,
    node: &str,
    beat: &Beat,
    stop: &AtomicBool,
    record: &(dyn Fn(i32) + Send + Sync),
) {
    while !stop.load(Ordering::SeqCst) {
        let child = std::process::Command::new(program)
            .args(child_args(node))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn();
        let mut child = match child {
            Ok(child) => child,
            Err(error) => {
                tracing::error!(node, program = %program.display(), %error, "could not start the kubelet process");
                std::thread::sleep(RESTART_DELAY);
                continue;
            }
        };
        let pid = i32::try_from(child.id()).unwrap_or(0);
        record(pid);
        beat.pid.store(pid, Ordering::SeqCst);
        tracing::info!(node, pid, "kubelet process started");
        if let Some(mut out) = child.stdout.take() {
            let mut buf = [0u8; 64];
            loop {
                match out.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => *lock(&beat.last) = Some(Instant::now()),
                }
            }
        }
        let status = child.wait();
        beat.pid.store(0, Ordering::SeqCst);
        if stop.load(Ordering::SeqCst) {
            return;
        }
        tracing::warn!(node, pid, status = ?status.ok(), "kubelet process exited; starting it again");
        std::thread::sleep(RESTART_DELAY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // docs/design/localkube.md "Each node's kubelet is a process": a node's kubelet is down
    // once its process is stopped or gone, or has not beaten for ten seconds (hung).
    #[test]
    fn a_kubelet_is_up_only_while_its_process_beats() {
        let now = Instant::now();
        let recent = now.checked_sub(Duration::from_millis(300)).unwrap();
        let late = now.checked_sub(Duration::from_millis(2500)).unwrap();
        let old = now.checked_sub(Duration::from_secs(11)).unwrap();
        assert_eq!(judge(Some(recent), true, Some('S'), now), KubeletState::Up);
        // A beat late by seconds on a loaded machine is no fault: the process runs.
        assert_eq!(judge(Some(late), true, Some('R'), now), KubeletState::Up);
        // Stopped: down at once, however recent its last beat.
        assert_eq!(
            judge(Some(recent), true, Some('T'), now),
            KubeletState::Silent
        );
        assert_eq!(judge(Some(old), true, Some('S'), now), KubeletState::Silent);
        assert_eq!(judge(None, true, None, now), KubeletState::Silent);
        assert_eq!(judge(Some(recent), false, None, now), KubeletState::Exited);
        assert!(KubeletState::Up.is_up() && !KubeletState::Silent.is_up());
        assert_eq!(KubeletState::Up.unreachable("10.0.0.1"), None);
        assert_eq!(
            KubeletState::Silent.unreachable("10.0.0.1").unwrap(),
            "error dialing backend: dial tcp 10.0.0.1:10250: i/o timeout"
        );
        assert!(KubeletState::Exited
            .unreachable("10.0.0.1")
            .unwrap()
            .ends_with("connection refused"));
    }

    // The command line a fault agent finds a node's kubelet by (chaos-agent's stop-node).
    #[test]
    fn the_command_line_names_the_node_as_a_kubelets_does() {
        assert_eq!(child_args("iad"), ["kubelet", "--hostname-override=iad"]);
    }
}
