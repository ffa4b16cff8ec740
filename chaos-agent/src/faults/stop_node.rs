//! `stopNode`: the node stops working for the cluster. The agent SIGSTOPs the node's kubelet
//! (counted once every thread of it is seen stopped, as a freeze) and SIGKILLs every process
//! of every container of the pods on its node in the namespaces it may touch (counted once
//! none is left, as a kill); the node then posts nothing, its Lease lapses and it turns
//! NotReady, and its scenario pods are dead with nothing to restart them. The undo SIGCONTs the
//! kubelet (counted once no thread is left stopped), which restarts the pods' containers as
//! their restartPolicy says.
//!
//! What it does not do: cut the node's network. The heal cannot come through `kubectl exec`
//! (the exec stream runs through the kubelet being stopped), so it comes through the API: the
//! agent watches its own Pod for the annotation [`HEAL_ANNOTATION`] naming the fault, which
//! needs its own API traffic; a node cut off for real could be healed only by its dead-man
//! timer (docs/design/harness.md, "The portable path").
//!
//! The order: the request is validated and everything found (the kubelet, the pods) before the
//! answer, which says the fault is scheduled; the agent acts [`ACT_DELAY`] later, so the exec
//! stream that carried the request is done before its kubelet stops, and records what it saw
//! in the fault (`list`).

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::error::{Error, Result};
use crate::faults::freeze::{POLL_INTERVAL, SETTLE_WAIT};
use crate::procfs::{parse_start_ticks, ProcFs, Process};
use crate::signals;

/// The annotation on the agent's own Pod that heals a stop-node: its value is the fault's id.
pub const HEAL_ANNOTATION: &str = "chaos.bloodraven.shipstream.io/heal";
/// How often the agent reads its own Pod while a stop-node stands.
pub const HEAL_POLL: Duration = Duration::from_millis(200);
/// How long after its answer the agent stops the kubelet.
pub const ACT_DELAY: Duration = Duration::from_secs(1);
/// The dead-man timer when the request sets none: the node is healed by itself after it.
pub const HEAL_AFTER_DEFAULT: Duration = Duration::from_secs(600);
/// The longest dead-man timer a request may set.
pub const HEAL_AFTER_MAX: Duration = Duration::from_secs(6 * 3600);
/// The process name of a kubelet.
pub const KUBELET_COMM: &str = "kubelet";
/// The flag by which a kubelet's command line names its node.
pub const HOSTNAME_FLAG: &str = "--hostname-override";

/// A process named `kubelet`, with its command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletCandidate {
    /// Its pid.
    pub pid: i32,
    /// Its arguments (`/proc/<pid>/cmdline`), the program first.
    pub args: Vec<String>,
}

impl KubeletCandidate {
    /// The node its command line names (`--hostname-override=<node>` or
    /// `--hostname-override <node>`), if any.
    pub fn node(&self) -> Option<&str> {
        let mut args = self.args.iter();
        while let Some(arg) = args.next() {
            if let Some(node) = arg
                .strip_prefix(HOSTNAME_FLAG)
                .and_then(|rest| rest.strip_prefix('='))
            {
                return Some(node);
            }
            if arg == HOSTNAME_FLAG {
                return args.next().map(String::as_str);
            }
        }
        None
    }

    fn describe(&self) -> String {
        format!("{} ({})", self.pid, self.args.join(" "))
    }
}

/// Which of the processes named `kubelet` is `node`'s (pure). One kubelet is the node's unless
/// its command line names another node; of several (a PID namespace shared by many nodes, as
/// localkube's), the one whose command line names `node`. None, or more than one, is an error
/// naming what was found.
pub fn choose_kubelet(node: &str, candidates: &[KubeletCandidate]) -> Result<i32, String> {
    let list = |found: &[&KubeletCandidate]| {
        found
            .iter()
            .map(|c| c.describe())
            .collect::<Vec<_>>()
            .join("; ")
    };
    match candidates {
        [] => Err("no process named kubelet runs on this node".to_owned()),
        [one] => match one.node() {
            Some(named) if named != node => Err(format!(
                "the one process named kubelet names node {named:?}, not {node:?}: {}",
                one.describe()
            )),
            _ => Ok(one.pid),
        },
        many => {
            let all: Vec<&KubeletCandidate> = many.iter().collect();
            let ours: Vec<&KubeletCandidate> =
                many.iter().filter(|c| c.node() == Some(node)).collect();
            match ours.as_slice() {
                [one] => Ok(one.pid),
                [] => Err(format!(
                    "{} processes named kubelet, none whose command line names node {node:?} ({HOSTNAME_FLAG}): {}",
                    many.len(),
                    list(&all)
                )),
                several => Err(format!(
                    "{} processes named kubelet name node {node:?}, which one is its kubelet is ambiguous: {}",
                    several.len(),
                    list(several)
                )),
            }
        }
    }
}

/// Whether the heal annotation's value (on the agent's own Pod) asks to heal fault `id`.
pub fn heal_requested(annotation: Option<&str>, id: u64) -> bool {
    annotation.is_some_and(|value| value.trim() == id.to_string())
}

/// The dead-man timer of a request (`healAfterSeconds`): the default when absent; zero and
/// more than [`HEAL_AFTER_MAX`] are refused.
pub fn heal_after(seconds: Option<u64>) -> Result<Duration> {
    match seconds {
        None => Ok(HEAL_AFTER_DEFAULT),
        Some(0) => Err(Error::Request(
            "stopNode.healAfterSeconds: must be at least 1".to_owned(),
        )),
        Some(s) if Duration::from_secs(s) > HEAL_AFTER_MAX => Err(Error::Request(format!(
            "stopNode.healAfterSeconds: at most {} (a node is never left stopped for longer)",
            HEAL_AFTER_MAX.as_secs()
        ))),
        Some(s) => Ok(Duration::from_secs(s)),
    }
}

/// The processes named `kubelet` under `procfs`, with their command lines.
pub fn kubelet_candidates(procfs: &ProcFs) -> Result<Vec<KubeletCandidate>> {
    let entries = std::fs::read_dir(&procfs.root)
        .map_err(Error::io(format!("list {}", procfs.root.display())))?;
    let mut pids: Vec<i32> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|pid: &i32| *pid > 1)
        .collect();
    pids.sort_unstable();
    let mut found = Vec::new();
    for pid in pids {
        if procfs.comm(pid).as_deref() != Some(KUBELET_COMM) || !procfs.is_alive(pid) {
            continue;
        }
        let Ok(raw) = std::fs::read(procfs.root.join(pid.to_string()).join("cmdline")) else {
            continue;
        };
        let args = raw
            .split(|b| *b == 0)
            .filter(|arg| !arg.is_empty())
            .map(|arg| String::from_utf8_lossy(arg).into_owned())
            .collect();
        found.push(KubeletCandidate { pid, args });
    }
    Ok(found)
}

/// The start of `pid` in clock ticks after boot (to recognise it again, not a reused pid).
pub fn start_ticks(procfs: &ProcFs, pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(procfs.root.join(pid.to_string()).join("stat")).ok()?;
    parse_start_ticks(&stat)
}

fn threads_described(procfs: &ProcFs, pid: i32, bad: impl Fn(char) -> bool) -> Vec<String> {
    procfs
        .threads(pid)
        .into_iter()
        .filter(|thread| bad(thread.state.0))
        .map(|thread| {
            format!(
                "{pid}/{} ({}) state {}",
                thread.tid, thread.comm, thread.state.0
            )
        })
        .collect()
}

/// SIGSTOPs the kubelet `pid` until every thread of it is stopped; when they do not all stop,
/// it is continued again and the error says which threads ran on.
pub fn stop_kubelet(procfs: &ProcFs, pid: i32) -> Result<String> {
    let deadline = Instant::now() + SETTLE_WAIT;
    loop {
        if !signals::send(pid, Signal::SIGSTOP)? {
            return Err(Error::NotInEffect(format!(
                "the kubelet (pid {pid}) exited before it could be stopped"
            )));
        }
        let running = threads_described(procfs, pid, |state| {
            !matches!(state, 'T' | 't' | 'Z' | 'X' | 'x')
        });
        if running.is_empty() {
            return Ok(format!(
                "kubelet pid {pid} SIGSTOPped, all {} of its threads seen stopped",
                procfs.threads(pid).len()
            ));
        }
        if Instant::now() >= deadline {
            let _ = signals::send(pid, Signal::SIGCONT);
            return Err(Error::NotInEffect(format!(
                "{}s after SIGSTOP, threads of the kubelet still running: {}",
                SETTLE_WAIT.as_secs(),
                running.join(", ")
            )));
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// SIGCONTs the kubelet `pid` (when it is still the process that was stopped: `ticks` is its
/// start) until no thread of it is left stopped. A kubelet gone since is not stopped.
pub fn continue_kubelet(procfs: &ProcFs, pid: i32, ticks: Option<u64>) -> Result<String> {
    let same = procfs.is_alive(pid) && (ticks.is_none() || start_ticks(procfs, pid) == ticks);
    if !same {
        return Ok(format!(
            "the kubelet (pid {pid}) is gone since: nothing stopped is left (its replacement runs)"
        ));
    }
    let deadline = Instant::now() + SETTLE_WAIT;
    loop {
        signals::send(pid, Signal::SIGCONT)?;
        let stopped = threads_described(procfs, pid, |state| state == 'T');
        if stopped.is_empty() {
            return Ok(format!(
                "kubelet pid {pid} SIGCONTed, none of its {} threads left stopped",
                procfs.threads(pid).len()
            ));
        }
        if Instant::now() >= deadline {
            return Err(Error::UndoNotObserved {
                kind: "stopNode".into(),
                seen: format!(
                    "{}s after SIGCONT, threads of the kubelet still stopped: {}",
                    SETTLE_WAIT.as_secs(),
                    stopped.join(", ")
                ),
            });
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// The live processes under the cgroups of the pods `uids`.
fn pods_processes(procfs: &ProcFs, uids: &[String]) -> Result<Vec<Process>> {
    let mut found = Vec::new();
    for uid in uids {
        found.extend(procfs.pod_processes(uid)?);
    }
    Ok(found)
}

/// SIGKILLs every process under the cgroups of the pods `uids` (their containers as they run
/// now, whatever their ids, the sandbox included) and waits until none is left, as a kill
/// does ([`super::kill::kill_until_gone`]): what it did, or that some outlived the wait (the
/// fault did not take effect).
pub fn kill_pods(procfs: &ProcFs, uids: &[String]) -> Result<String> {
    let targets = pods_processes(procfs, uids)?;
    if targets.is_empty() {
        return Ok("no process of the pods was running".to_owned());
    }
    super::kill::kill_until_gone(targets, "the pods'", || pods_processes(procfs, uids))
        .map(|(_, effect)| effect)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(pid: i32, args: &str) -> KubeletCandidate {
        KubeletCandidate {
            pid,
            args: args.split(' ').map(str::to_owned).collect(),
        }
    }

    // docs/design/harness.md "The portable path", stop-node: the agent stops its own node's
    // kubelet, found by name and, where several share a PID namespace, by the node its
    // command line names; never a guess.
    #[test]
    fn the_kubelet_of_the_node_is_chosen_by_its_command_line() {
        let real = candidate(
            812,
            "/usr/bin/kubelet --config=/var/lib/kubelet/config.yaml --node-ip=172.18.0.3",
        );
        assert_eq!(choose_kubelet("kind-worker", &[real]), Ok(812));
        let localkube = [
            candidate(
                40,
                "/usr/local/bin/localkube kubelet --hostname-override=iad",
            ),
            candidate(
                41,
                "/usr/local/bin/localkube kubelet --hostname-override pdx",
            ),
            candidate(
                42,
                "/usr/local/bin/localkube kubelet --hostname-override=reader",
            ),
        ];
        assert_eq!(choose_kubelet("pdx", &localkube), Ok(41));
        assert_eq!(choose_kubelet("iad", &localkube), Ok(40));
        let none = choose_kubelet("apps", &localkube).unwrap_err();
        assert!(
            none.contains("3 processes named kubelet, none")
                && none.contains("\"apps\"")
                && none.contains("40 (")
                && none.contains("42 ("),
            "{none}"
        );
        let twice = [
            localkube[0].clone(),
            candidate(43, "kubelet --hostname-override=iad"),
        ];
        let ambiguous = choose_kubelet("iad", &twice).unwrap_err();
        assert!(
            ambiguous.contains("ambiguous") && ambiguous.contains("43 (kubelet"),
            "{ambiguous}"
        );
        let other = choose_kubelet("iad", &[localkube[1].clone()]).unwrap_err();
        assert!(other.contains("names node \"pdx\""), "{other}");
        assert_eq!(
            choose_kubelet("iad", &[]).unwrap_err(),
            "no process named kubelet runs on this node"
        );
        // A flag at the end with no value names no node.
        assert_eq!(candidate(9, "kubelet --hostname-override").node(), None);
    }

    // The heal protocol: the annotation on the agent's own Pod names the fault it heals; any
    // other value (another fault's id, an empty one) heals nothing.
    #[test]
    fn only_the_annotation_naming_the_fault_heals_it() {
        assert!(heal_requested(Some("7"), 7));
        assert!(heal_requested(Some(" 7\n"), 7));
        assert!(!heal_requested(Some("6"), 7));
        assert!(!heal_requested(Some(""), 7));
        assert!(!heal_requested(None, 7));
        assert_eq!(heal_after(None).unwrap(), HEAL_AFTER_DEFAULT);
        assert_eq!(heal_after(Some(60)).unwrap(), Duration::from_secs(60));
        assert!(heal_after(Some(0))
            .unwrap_err()
            .to_string()
            .contains("healAfterSeconds"));
        assert!(heal_after(Some(7 * 3600)).is_err());
    }

    #[test]
    fn kubelets_are_found_in_a_fake_proc_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let write = |path: &str, text: &[u8]| {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("50/stat", b"50 (kubelet) S 1 50 50 0 -1");
        write(
            "50/cmdline",
            b"/bin/localkube\0kubelet\0--hostname-override=iad\0",
        );
        write("51/stat", b"51 (kubelet) Z 1 51 51 0 -1");
        write("51/cmdline", b"");
        write("52/stat", b"52 (mysqld) S 1 52 52 0 -1");
        write("52/cmdline", b"mysqld\0--hostname-override=iad\0");
        let found = kubelet_candidates(&ProcFs::new(root)).unwrap();
        assert_eq!(
            found,
            vec![candidate(
                50,
                "/bin/localkube kubelet --hostname-override=iad"
            )]
        );
    }
}
