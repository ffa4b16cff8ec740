//! The state file: every namespace, link, process and host directory the node agent creates
//! is recorded here BEFORE it is created (a process right after spawning, with its start time
//! so a reused pid is never killed), so [`cleanup`] removes everything even after the
//! process that created it was SIGKILLed.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::error::{Error, Result};
use super::ip;
use super::naming::{ClusterNaming, SLOT_REGISTRY_DIR};

/// File name of the state file inside the state directory.
pub const STATE_FILE: &str = "node-state.jsonl";
/// How long cleanup waits for killed processes to disappear.
const PROCESS_EXIT_WAIT_MAX: Duration = Duration::from_secs(5);

/// One thing the node agent created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Resource {
    /// A named network namespace (`/run/netns/NAME`, a bind mount).
    Netns {
        /// Its name.
        name: String,
    },
    /// A link of the root namespace (bridge or veth end).
    Link {
        /// Its name.
        name: String,
    },
    /// A process, leader of its own process group (containers call `setsid`).
    Process {
        /// Its pid.
        pid: i32,
        /// Field 22 of `/proc/PID/stat`, so a reused pid is never signalled.
        start_time: u64,
    },
    /// The cluster slot claimed in the machine-wide registry.
    ClusterSlot {
        /// The registry directory.
        registry: PathBuf,
    },
}

/// The append-only state file of one state directory.
#[derive(Debug)]
pub struct StateFile {
    path: PathBuf,
    file: Mutex<File>,
}

impl StateFile {
    /// Opens (creating) the state file in `state_dir`.
    pub fn open(state_dir: &Path) -> Result<Self> {
        fs::create_dir_all(state_dir).map_err(Error::io("create state dir", state_dir))?;
        let path = state_dir.join(STATE_FILE);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(Error::io("open state file", &path))?;
        Ok(Self {
            path,
            file: Mutex::new(file),
        })
    }

    /// Records `resource` durably (written and synced) before the caller creates it.
    pub fn record(&self, resource: &Resource) -> Result<()> {
        let mut line = serde_json::to_vec(resource)?;
        line.push(b'\n');
        let file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (&*file)
            .write_all(&line)
            .map_err(Error::io("append to state file", &self.path))?;
        file.sync_data()
            .map_err(Error::io("sync state file", &self.path))
    }

    /// Records a process that was just spawned.
    pub fn record_process(&self, pid: i32) -> Result<()> {
        let start_time = process_start_time(pid).unwrap_or(0);
        self.record(&Resource::Process { pid, start_time })
    }
}

/// The free space a cluster needs on its state directory's filesystem: three MariaDB data
/// directories with their binlogs and backups, and the pods' logs. On a full disk MariaDB
/// reports InnoDB "data structure corruption" and the group never bootstraps.
pub const MIN_FREE_BYTES: u64 = 2 << 30;

/// Refuses to start a cluster on a filesystem with less than [`MIN_FREE_BYTES`] free.
pub fn require_free_space(state_dir: &Path) -> Result<()> {
    let stat = nix::sys::statvfs::statvfs(state_dir).map_err(|source| Error::Sys {
        action: format!("read the free space of {}", state_dir.display()),
        source,
    })?;
    let available = stat.blocks_available().saturating_mul(stat.fragment_size());
    check_free_space(state_dir, available, MIN_FREE_BYTES)
}

/// [`require_free_space`]'s rule, given the free bytes.
pub fn check_free_space(state_dir: &Path, available: u64, required: u64) -> Result<()> {
    if available >= required {
        return Ok(());
    }
    Err(Error::LowDiskSpace {
        path: state_dir.to_path_buf(),
        available_mib: available >> 20,
        required_mib: required >> 20,
    })
}

/// Reads everything recorded in `state_dir`'s state file (an absent file is empty).
pub fn read_records(state_dir: &Path) -> Result<Vec<Resource>> {
    let path = state_dir.join(STATE_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(Error::io("read state file", &path)(err)),
    };
    // A torn last line (crash mid-write) is skipped: the resource it named was not created yet.
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect())
}

/// Field 22 (starttime) of `/proc/PID/stat`, or `None` when the process is gone.
pub fn process_start_time(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 2..];
    // after_comm starts at field 3 (state); starttime is field 22.
    after_comm.split_whitespace().nth(19)?.parse().ok()
}

/// The state letter (field 3) and process group (field 5) of a `/proc/PID/stat` or
/// `/proc/PID/task/TID/stat` line; `None` for a line that does not parse.
pub fn stat_state_and_group(stat: &str) -> Option<(char, i32)> {
    let mut fields = stat.get(stat.rfind(')')? + 2..)?.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let group = fields.next()?.parse().ok()?;
    Some((state, group))
}

/// Whether a thread in `state` can still run code: anything but stopped (`T`), traced (`t`),
/// zombie (`Z`) or dead (`X`). A thread in uninterruptible sleep (`D`) counts as running: it
/// finishes its system call before it stops.
pub fn thread_can_run(state: char) -> bool {
    !matches!(state, 'T' | 't' | 'Z' | 'X')
}

/// The threads (tids) of process group `group`'s processes that can still run code.
pub fn running_threads_of_group(group: i32) -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut running = Vec::new();
    for pid in entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
    {
        let in_group = fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| stat_state_and_group(&stat))
            .is_some_and(|(_, g)| g == group);
        if !in_group {
            continue;
        }
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for tid in tasks
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        {
            let can_run = fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat"))
                .ok()
                .and_then(|stat| stat_state_and_group(&stat))
                .is_some_and(|(state, _)| thread_can_run(state));
            if can_run {
                running.push(tid);
            }
        }
    }
    running
}

/// Waits until no thread of process group `group` can run code (after a SIGSTOP to the
/// group: the kernel stops each thread when it next leaves the kernel, so `killpg` returns
/// while some still run and may, e.g., still answer a query). Returns the threads still
/// running when `within` passed (empty: all stopped).
pub fn wait_group_stopped(group: i32, within: Duration) -> Vec<i32> {
    let deadline = Instant::now() + within;
    loop {
        let running = running_threads_of_group(group);
        if running.is_empty() || Instant::now() >= deadline {
            return running;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The inode of a network namespace file (what `/proc/PID/ns/net` links name).
pub fn netns_inode(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).ok().map(|meta| meta.ino())
}

/// Every process whose network namespace is the one with inode `inode`.
pub fn processes_in_netns(inode: u64) -> Vec<i32> {
    let wanted = format!("net:[{inode}]");
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse::<i32>().ok())
        })
        .filter(|pid| {
            fs::read_link(format!("/proc/{pid}/ns/net"))
                .is_ok_and(|link| link.as_os_str() == wanted.as_str())
        })
        .collect()
}

/// SIGKILLs every process inside the network namespace at `path` (containers that escaped
/// their process group, e.g. daemons that called `setsid`) and waits for them to go.
pub fn kill_netns_processes(path: &Path) {
    let Some(inode) = netns_inode(path) else {
        return;
    };
    let deadline = Instant::now() + PROCESS_EXIT_WAIT_MAX;
    loop {
        let pids: Vec<i32> = processes_in_netns(inode)
            .into_iter()
            .filter(|pid| process_alive(*pid, 0))
            .collect();
        if pids.is_empty() || Instant::now() >= deadline {
            return;
        }
        for pid in pids {
            tracing::info!(pid, netns = %path.display(), "killing process left in pod network namespace");
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether the recorded process still lives (same pid and same start time, and not a
/// zombie waiting for its parent to reap it).
pub fn process_alive(pid: i32, start_time: u64) -> bool {
    let zombie = fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rfind(')')
                .and_then(|i| stat.get(i + 2..i + 3).map(|s| s == "Z" || s == "X"))
        })
        .unwrap_or(true);
    !zombie && process_start_time(pid).is_some_and(|now| start_time == 0 || now == start_time)
}

/// Removes everything recorded in `state_dir`'s state file, plus any netns, link or cgroup
/// carrying the state dir's prefix: processes (SIGKILL to their process groups), container
/// cgroups (with the processes still in them), network namespaces, links, the cluster slot. Idempotent; safe after a crash; a state dir that never ran a
/// node agent is a no-op.
pub fn cleanup(state_dir: &Path) -> Result<()> {
    let state_dir = fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
    let records = read_records(&state_dir)?;
    let prefix = format!("{}-", ClusterNaming::prefix_for(&state_dir));
    let mut errors = Vec::new();

    let processes: Vec<(i32, u64)> = records
        .iter()
        .filter_map(|r| match r {
            Resource::Process { pid, start_time } => Some((*pid, *start_time)),
            _ => None,
        })
        .filter(|(pid, start)| *pid > 1 && process_alive(*pid, *start))
        .collect();
    for (pid, _) in &processes {
        tracing::info!(pid, "cleanup: killing recorded process group");
        let _ = killpg(Pid::from_raw(*pid), Signal::SIGKILL);
        let _ = nix::sys::signal::kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    let deadline = Instant::now() + PROCESS_EXIT_WAIT_MAX;
    while processes
        .iter()
        .any(|(pid, start)| process_alive(*pid, *start))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }

    // The cluster's container cgroups (by the prefix alone, so also after a crash): what
    // is still in them is the cluster's and is killed, then they go, deepest first.
    if let Err(err) = super::cgroups::cleanup_root(&ClusterNaming::prefix_for(&state_dir)) {
        errors.push(err);
    }

    let mut netns: Vec<String> = records
        .iter()
        .filter_map(|r| match r {
            Resource::Netns { name } => Some(name.clone()),
            _ => None,
        })
        .collect();
    netns.extend(
        ip::netns_list()?
            .into_iter()
            .filter(|n| n.starts_with(&prefix)),
    );
    netns.sort();
    netns.dedup();
    for name in &netns {
        kill_netns_processes(&Path::new("/run/netns").join(name));
        tracing::info!(netns = %name, "cleanup: deleting network namespace");
        if let Err(err) = ip::ip_ignore_missing(&["netns", "delete", name]) {
            errors.push(err);
        }
    }

    let mut links: Vec<String> = records
        .iter()
        .filter_map(|r| match r {
            Resource::Link { name } => Some(name.clone()),
            _ => None,
        })
        .collect();
    links.extend(
        ip::link_list()?
            .into_iter()
            .filter(|n| n.starts_with(&prefix)),
    );
    links.sort();
    links.dedup();
    // veth ends first (deleting a netns already removed most), the bridge last.
    links.sort_by_key(|name| name.ends_with("-br"));
    for name in &links {
        tracing::info!(link = %name, "cleanup: deleting link");
        if let Err(err) = ip::ip_ignore_missing(&["link", "delete", name]) {
            errors.push(err);
        }
    }

    for record in &records {
        if let Resource::ClusterSlot { registry } = record {
            if let Err(err) = ClusterNaming::release_in(registry, &state_dir) {
                errors.push(err);
            }
        }
    }
    if records.is_empty() {
        ClusterNaming::release_in(Path::new(SLOT_REGISTRY_DIR), &state_dir)?;
    }

    if let Some(err) = errors.into_iter().next() {
        return Err(err);
    }
    let path = state_dir.join(STATE_FILE);
    match fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(Error::io("remove state file", path)(err)),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_cluster_is_refused_on_a_nearly_full_filesystem_with_the_free_space_named() {
        let dir = std::path::Path::new("/var/lib/localkube");
        super::check_free_space(dir, 2 << 30, 2 << 30).expect("exactly enough");
        let refused = super::check_free_space(dir, 237 << 20, 2 << 30)
            .expect_err("237 MiB free is refused")
            .to_string();
        assert!(refused.contains("only 237 MiB free"), "{refused}");
        assert!(refused.contains("/var/lib/localkube"), "{refused}");
        assert!(refused.contains("2048 MiB needed"), "{refused}");
    }

    #[test]
    fn the_free_space_of_an_existing_directory_is_read() {
        let dir = std::env::temp_dir();
        // Whatever this machine has free, reading it works and the rule answers.
        let _ = super::require_free_space(&dir);
        assert!(super::require_free_space(std::path::Path::new("/no/such/dir")).is_err());
    }

    use super::*;

    #[test]
    fn stat_lines_give_state_and_group_even_with_spaces_and_parens_in_comm() {
        let line = "4242 (my (odd) name) T 1 4240 4240 0 -1 4194560 105 0 0 0";
        assert_eq!(stat_state_and_group(line), Some(('T', 4240)));
        assert_eq!(stat_state_and_group("4242 (mysqld) S 1"), None);
        assert_eq!(stat_state_and_group("garbage"), None);
        assert!(thread_can_run('R') && thread_can_run('S') && thread_can_run('D'));
        assert!(!thread_can_run('T') && !thread_can_run('t') && !thread_can_run('Z'));
    }

    // docs/design/localkube.md#shape: `down` finds leftovers by its own state file, also after
    // a crash.
    #[test]
    fn records_survive_a_torn_last_line() {
        let dir = std::env::temp_dir().join(format!("lk-state-{}", std::process::id()));
        let state = StateFile::open(&dir).unwrap();
        state
            .record(&Resource::Netns {
                name: "lkabcd-p1".into(),
            })
            .unwrap();
        state
            .record(&Resource::Link {
                name: "lkabcd-br".into(),
            })
            .unwrap();
        drop(state);
        let mut file = OpenOptions::new()
            .append(true)
            .open(dir.join(STATE_FILE))
            .unwrap();
        file.write_all(b"{\"kind\":\"netns\",\"na").unwrap();
        let records = read_records(&dir).unwrap();
        assert_eq!(
            records,
            vec![
                Resource::Netns {
                    name: "lkabcd-p1".into()
                },
                Resource::Link {
                    name: "lkabcd-br".into()
                }
            ]
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn own_process_start_time_is_readable() {
        let pid = std::process::id() as i32;
        let start = process_start_time(pid).unwrap();
        assert!(process_alive(pid, start));
        assert!(
            !process_alive(pid, start + 1),
            "a different start time is a different process"
        );
    }
}
