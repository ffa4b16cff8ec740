//! Reading `/proc` (any proc root, so tests can use a fake tree): which pids are a
//! container's, the state of every thread of a process, a process's network namespace, and
//! the repeated scan a keepDown makes of its pod ([`ProcFs::scan`]).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cgroup;
use crate::error::{Error, Result};

/// A process found in a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// Its pid (in the agent's pid namespace: the host's, with `hostPID`).
    pub pid: i32,
    /// Its command name (`comm`), for messages.
    pub comm: String,
}

impl std::fmt::Display for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.pid, self.comm)
    }
}

/// A scheduler state letter from `/proc/<pid>/task/<tid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskState(pub char);

impl TaskState {
    /// Stopped by a signal (`T`) or by a tracer (`t`).
    pub fn is_stopped(self) -> bool {
        matches!(self.0, 'T' | 't')
    }

    /// Stopped by a signal (`T`): what a thaw must leave none of.
    pub fn is_signal_stopped(self) -> bool {
        self.0 == 'T'
    }

    /// Dead or a zombie (`Z`, `X`, `x`): it runs no code any more, only waits to be reaped.
    pub fn is_dead(self) -> bool {
        matches!(self.0, 'Z' | 'X' | 'x')
    }
}

/// Parses a `stat` line: `tid (comm) S ppid ...`. The comm may hold spaces and parentheses,
/// so the state is the first field after the *last* `)`.
pub fn parse_stat(text: &str) -> Option<(String, TaskState)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    if close < open {
        return None;
    }
    let comm = text[open + 1..close].to_owned();
    let state = text[close + 1..].trim_start().chars().next()?;
    state
        .is_ascii_alphabetic()
        .then_some((comm, TaskState(state)))
}

/// A thread of a process and its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    /// The thread id.
    pub tid: i32,
    /// Its comm.
    pub comm: String,
    /// Its state.
    pub state: TaskState,
}

/// A process as a scan saw it: what a keepDown decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Its pid.
    pub pid: i32,
    /// Its comm, for messages.
    pub comm: String,
    /// Its `/proc/<pid>/cgroup` text.
    pub cgroup: String,
    /// Its executable, as its `exe` link reads (the path inside its own mount namespace, such
    /// as `/usr/sbin/mariadbd`); `None` when it cannot be read.
    pub exe: Option<String>,
    /// Its network namespace (`net:[4026532281]`); `None` when it cannot be read.
    pub netns: Option<String>,
    /// Not a zombie.
    pub alive: bool,
}

/// For how long after a process started a scan re-reads its cgroup at every scan. A runtime
/// starts a container's first process outside the container's cgroup and moves it in at once
/// (runc, crun, `runc exec` alike); an older process is not moved into a pod's cgroup.
pub const SCAN_YOUNG: Duration = Duration::from_secs(5);

/// The start of a process, in clock ticks after boot: the 22nd field of its `stat` line.
pub fn parse_start_ticks(stat: &str) -> Option<u64> {
    let close = stat.rfind(')')?;
    stat[close + 1..].split_whitespace().nth(19)?.parse().ok()
}

/// How long ago a process started: `uptime` is the text of `/proc/uptime` (seconds since
/// boot first), `start_ticks` its start ([`parse_start_ticks`]), `ticks_per_second` the
/// clock's (`sysconf(_SC_CLK_TCK)`).
pub fn process_age(uptime: &str, start_ticks: u64, ticks_per_second: u64) -> Option<Duration> {
    let up = Duration::try_from_secs_f64(uptime.split_whitespace().next()?.parse().ok()?).ok()?;
    let ticks_per_second = ticks_per_second.max(1);
    let started = Duration::from_secs(start_ticks / ticks_per_second)
        + Duration::from_nanos((start_ticks % ticks_per_second) * 1_000_000_000 / ticks_per_second);
    Some(up.saturating_sub(started))
}

/// What [`ProcFs::scan`] remembers between scans, so that a scan every few tens of
/// milliseconds reads only the cgroups of new pids, of young ones ([`SCAN_YOUNG`]) and of
/// those it wants, not those of every process of the node.
#[derive(Debug)]
pub struct ScanCache {
    pids: HashMap<i32, Remembered>,
    young: Duration,
    ticks_per_second: u64,
}

impl Default for ScanCache {
    fn default() -> Self {
        ScanCache::new(SCAN_YOUNG)
    }
}

#[derive(Debug)]
struct Remembered {
    /// Until when its cgroup is read at every scan (`None`: it was old when first listed).
    young_until: Option<Instant>,
    /// Whether its cgroup was wanted, as of the generation read.
    wanted: bool,
    /// The generation of `wanted` (none until the cgroup has been read).
    generation: Option<u64>,
}

impl ScanCache {
    /// A cache that re-reads a pid's cgroup for `young` after the pid is first listed.
    pub fn new(young: Duration) -> ScanCache {
        let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .and_then(|ticks| u64::try_from(ticks).ok())
            .filter(|ticks| *ticks > 0);
        ScanCache {
            pids: HashMap::new(),
            young,
            // Linux's USER_HZ, the unit of `stat` times on every architecture it runs here.
            ticks_per_second: ticks.unwrap_or(100),
        }
    }

    /// How many pids it remembers.
    pub fn len(&self) -> usize {
        self.pids.len()
    }

    /// Whether it remembers none.
    pub fn is_empty(&self) -> bool {
        self.pids.is_empty()
    }
}

/// A proc filesystem rooted at `root` (`/proc` in production).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcFs {
    /// The root.
    pub root: PathBuf,
}

impl Default for ProcFs {
    fn default() -> Self {
        ProcFs {
            root: PathBuf::from("/proc"),
        }
    }
}

fn numeric_entries(dir: &Path) -> Result<Vec<i32>> {
    let entries = std::fs::read_dir(dir).map_err(Error::io(format!("list {}", dir.display())))?;
    let mut ids: Vec<i32> = entries
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|id| *id > 0)
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

impl ProcFs {
    /// A proc filesystem at `root`.
    pub fn new(root: impl Into<PathBuf>) -> ProcFs {
        ProcFs { root: root.into() }
    }

    /// Every process of the containers `ids`, by pid. A process that exits while it is read
    /// is skipped; pid 1 and the agent itself are never returned (style rule 14: the agent
    /// never falls back to PID 1).
    pub fn container_processes(&self, ids: &[String]) -> Result<Vec<Process>> {
        let own_pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        let mut found = Vec::new();
        for pid in numeric_entries(&self.root)? {
            if pid == 1 || pid == own_pid {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(self.root.join(pid.to_string()).join("cgroup"))
            else {
                continue;
            };
            if cgroup::pids_in_containers([(pid, text.as_str())], ids).is_empty() {
                continue;
            }
            found.push(Process {
                pid,
                comm: self.comm(pid).unwrap_or_default(),
            });
        }
        Ok(found)
    }

    /// Every process under the pod `uid`'s cgroup, the sandbox included, that is not a
    /// zombie (same exclusions as [`Self::container_processes`]).
    pub fn pod_processes(&self, uid: &str) -> Result<Vec<Process>> {
        let own_pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        let mut found = Vec::new();
        for pid in numeric_entries(&self.root)? {
            if pid == 1 || pid == own_pid {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(self.root.join(pid.to_string()).join("cgroup"))
            else {
                continue;
            };
            if cgroup::cgroup_text_in_pod(&text, uid) && self.is_alive(pid) {
                found.push(Process {
                    pid,
                    comm: self.comm(pid).unwrap_or_default(),
                });
            }
        }
        Ok(found)
    }

    /// Every process of the containers `ids` that still runs code (not a zombie).
    pub fn live_container_processes(&self, ids: &[String]) -> Result<Vec<Process>> {
        Ok(self
            .container_processes(ids)?
            .into_iter()
            .filter(|process| self.is_alive(process.pid))
            .collect())
    }

    /// Every process whose cgroup text `wanted` accepts, with what a keepDown decides on.
    /// The cgroup of a pid is read at its first scan, at every scan until it is older than
    /// [`SCAN_YOUNG`] (the cache's `young`; its age from its start time in `stat` and
    /// `uptime`, or from this scan when they cannot be read), at every scan while it is wanted, and once more whenever `generation` changes (the
    /// caller changes it when it changes `wanted`); otherwise the cache's answer stands. A
    /// pid that leaves the listing is forgotten, so a number used again is a new process (a
    /// reuse within one scan interval would need the whole pid space to wrap). Pid 1 and the
    /// agent itself are never returned.
    pub fn scan(
        &self,
        cache: &mut ScanCache,
        generation: u64,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<Vec<Seen>> {
        let own_pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        let now = Instant::now();
        let pids = numeric_entries(&self.root)?;
        let listed: HashSet<i32> = pids.iter().copied().collect();
        cache.pids.retain(|pid, _| listed.contains(pid));
        let mut found = Vec::new();
        let mut uptime: Option<Option<String>> = None;
        for pid in pids {
            if pid == 1 || pid == own_pid {
                continue;
            }
            let dir = self.root.join(pid.to_string());
            let (young, ticks_per_second) = (cache.young, cache.ticks_per_second);
            let remembered = cache.pids.entry(pid).or_insert_with(|| {
                // Young for `young` after it started (as long as that cannot be read: after
                // this scan).
                let age = std::fs::read_to_string(dir.join("stat"))
                    .ok()
                    .and_then(|stat| parse_start_ticks(&stat))
                    .and_then(|start| {
                        let uptime = uptime.get_or_insert_with(|| {
                            std::fs::read_to_string(self.root.join("uptime")).ok()
                        });
                        process_age(uptime.as_deref()?, start, ticks_per_second)
                    });
                Remembered {
                    young_until: match age {
                        Some(age) if age >= young => None,
                        age => now.checked_add(young - age.unwrap_or_default()),
                    },
                    wanted: false,
                    generation: None,
                }
            });
            let read = remembered.wanted
                || remembered.generation != Some(generation)
                || remembered.young_until.is_some_and(|until| now < until);
            if !read {
                continue;
            }
            // Unreadable (it exited): read again while it is listed.
            let Ok(cgroup) = std::fs::read_to_string(dir.join("cgroup")) else {
                remembered.generation = None;
                continue;
            };
            remembered.wanted = wanted(&cgroup);
            remembered.generation = Some(generation);
            if !remembered.wanted {
                continue;
            }
            let Some((comm, state)) = std::fs::read_to_string(dir.join("stat"))
                .ok()
                .and_then(|text| parse_stat(&text))
            else {
                continue;
            };
            let link = |name: &str| {
                std::fs::read_link(dir.join(name))
                    .ok()
                    .map(|target| target.to_string_lossy().into_owned())
            };
            found.push(Seen {
                pid,
                comm,
                cgroup,
                exe: link("exe"),
                netns: link("ns/net"),
                alive: !state.is_dead(),
            });
        }
        Ok(found)
    }

    /// A process's comm ("" once it is gone).
    pub fn comm(&self, pid: i32) -> Option<String> {
        let text = std::fs::read_to_string(self.root.join(pid.to_string()).join("stat")).ok()?;
        parse_stat(&text).map(|(comm, _)| comm)
    }

    /// Whether `pid` exists and is not a zombie.
    pub fn is_alive(&self, pid: i32) -> bool {
        std::fs::read_to_string(self.root.join(pid.to_string()).join("stat"))
            .ok()
            .and_then(|text| parse_stat(&text))
            .is_some_and(|(_, state)| !state.is_dead())
    }

    /// Every thread of `pid` and its state (empty once the process is gone).
    pub fn threads(&self, pid: i32) -> Vec<Thread> {
        let task = self.root.join(pid.to_string()).join("task");
        let Ok(tids) = numeric_entries(&task) else {
            return Vec::new();
        };
        tids.into_iter()
            .filter_map(|tid| {
                let text = std::fs::read_to_string(task.join(tid.to_string()).join("stat")).ok()?;
                let (comm, state) = parse_stat(&text)?;
                Some(Thread { tid, comm, state })
            })
            .collect()
    }

    /// The network namespace of `pid`, as its `ns/net` link reads (`net:[4026532281]`).
    pub fn netns(&self, pid: i32) -> Result<String> {
        let link = self.root.join(pid.to_string()).join("ns").join("net");
        let target =
            std::fs::read_link(&link).map_err(Error::io(format!("read {}", link.display())))?;
        Ok(target.to_string_lossy().into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_give_comm_and_state_even_with_parentheses_in_comm() {
        let (comm, state) = parse_stat("1234 (mysqld) S 1 1234 1234 0 -1 4194560").unwrap();
        assert_eq!(comm, "mysqld");
        assert_eq!(state, TaskState('S'));
        let (comm, state) = parse_stat("77 (a (b) c) T 1 2 3").unwrap();
        assert_eq!(comm, "a (b) c");
        assert!(state.is_stopped() && state.is_signal_stopped());
        let (comm, state) = parse_stat("78 (x) R)) ) t 1").unwrap();
        assert_eq!(comm, "x) R)) ");
        assert!(state.is_stopped() && !state.is_signal_stopped());
        let (comm, state) = parse_stat("79 (with space) Z 1").unwrap();
        assert_eq!(comm, "with space");
        assert!(state.is_dead() && !state.is_stopped());
        assert_eq!(parse_stat("80 () R 1").unwrap().0, "");
        assert_eq!(parse_stat(""), None);
        assert_eq!(parse_stat("81 (unterminated R 1"), None);
        assert_eq!(parse_stat("82 (x)"), None);
        assert_eq!(parse_stat("83 (x) 5"), None);
        assert_eq!(parse_stat("84 )x( R"), None);
    }

    const ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    // The scan of a fake /proc tree: the container's processes, and none of its neighbours,
    // the host's init or the agent (docs/design/style.md rule 14).
    #[test]
    fn a_fake_proc_tree_yields_the_containers_processes_and_threads() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let ours = format!("0::/kubepods/pod1/{ID}\n");
        write(root, "1/cgroup", &ours);
        write(root, "1/stat", "1 (init) S 0");
        write(root, "40/cgroup", &ours);
        write(root, "40/stat", "40 (mysqld) S 1");
        write(root, "40/task/40/stat", "40 (mysqld) T 1");
        write(root, "40/task/41/stat", "41 (ib_io (x)) S 1");
        write(
            root,
            "12/cgroup",
            &format!("4:memory:/kubepods/pod1/{ID}\n"),
        );
        write(root, "12/stat", "12 (sleep child) Z 40");
        write(root, "13/cgroup", "0::/kubepods/pod1/other\n");
        write(root, "13/stat", "13 (other) S 1");
        write(root, "self/cgroup", &ours);
        write(root, "notapid/cgroup", &ours);
        std::fs::create_dir_all(root.join("99")).unwrap(); // exited between list and read
        let procfs = ProcFs::new(root);
        let found = procfs.container_processes(&[ID.to_owned()]).unwrap();
        assert_eq!(
            found,
            vec![
                Process {
                    pid: 12,
                    comm: "sleep child".into()
                },
                Process {
                    pid: 40,
                    comm: "mysqld".into()
                },
            ]
        );
        let live = procfs.live_container_processes(&[ID.to_owned()]).unwrap();
        assert_eq!(live.iter().map(|p| p.pid).collect::<Vec<_>>(), vec![40]);
        let threads = procfs.threads(40);
        assert_eq!(threads.len(), 2);
        assert_eq!(threads[1].comm, "ib_io (x)");
        assert_eq!(threads[1].state, TaskState('S'));
        assert!(procfs.threads(99).is_empty());
        assert!(ProcFs::new(root.join("absent"))
            .container_processes(&[ID.to_owned()])
            .unwrap_err()
            .to_string()
            .contains("absent"));
    }

    // A keepDown scans every 20 ms: the cgroups of old processes it does not want are read
    // once (and again when what it wants changes), those of young processes and of those it
    // wants at every scan; a pid that leaves the listing is forgotten.
    #[test]
    fn a_scan_reads_again_only_what_may_have_changed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let pod = "0::/kubepods/podu1/0123456789abcdef\n";
        write(root, "40/cgroup", pod);
        write(root, "40/stat", "40 (mysqld) S 1");
        std::fs::create_dir_all(root.join("40/ns")).unwrap();
        std::os::unix::fs::symlink("/usr/sbin/mysqld", root.join("40/exe")).unwrap();
        std::os::unix::fs::symlink("net:[4026532281]", root.join("40/ns/net")).unwrap();
        write(root, "41/cgroup", "0::/system.slice/containerd.service\n");
        write(root, "41/stat", "41 (runc) S 1");
        write(root, "42/cgroup", pod);
        write(root, "42/stat", "42 (sh) Z 40");
        write(root, "1/cgroup", pod);
        write(root, "1/stat", "1 (init) S 0");
        let procfs = ProcFs::new(root);
        let wanted = |text: &str| text.contains("podu1");
        let mut old = ScanCache::new(Duration::ZERO);
        let seen = procfs.scan(&mut old, 0, wanted).unwrap();
        assert_eq!(
            seen,
            vec![
                Seen {
                    pid: 40,
                    comm: "mysqld".into(),
                    cgroup: pod.into(),
                    exe: Some("/usr/sbin/mysqld".into()),
                    netns: Some("net:[4026532281]".into()),
                    alive: true,
                },
                Seen {
                    pid: 42,
                    comm: "sh".into(),
                    cgroup: pod.into(),
                    exe: None,
                    netns: None,
                    alive: false,
                },
            ]
        );
        assert_eq!(old.len(), 3);
        // 41 moves into the pod: an old process is not read again...
        write(root, "41/cgroup", pod);
        let pids = |seen: Vec<Seen>| seen.iter().map(|s| s.pid).collect::<Vec<_>>();
        assert_eq!(
            pids(procfs.scan(&mut old, 0, wanted).unwrap()),
            vec![40, 42]
        );
        // ...until what is wanted changes; a young one is read at every scan.
        assert_eq!(
            pids(procfs.scan(&mut old, 1, wanted).unwrap()),
            vec![40, 41, 42]
        );
        let mut young = ScanCache::new(Duration::from_secs(60));
        write(root, "41/cgroup", "0::/system.slice/containerd.service\n");
        assert_eq!(
            pids(procfs.scan(&mut young, 0, wanted).unwrap()),
            vec![40, 42]
        );
        write(root, "41/cgroup", pod);
        assert_eq!(
            pids(procfs.scan(&mut young, 0, wanted).unwrap()),
            vec![40, 41, 42]
        );
        // A wanted process is read at every scan: one that left the pod is no longer listed.
        write(root, "40/cgroup", "0::/elsewhere\n");
        assert_eq!(
            pids(procfs.scan(&mut old, 1, wanted).unwrap()),
            vec![41, 42]
        );
        // A pid gone from the listing is forgotten; its number used again is read afresh.
        std::fs::remove_dir_all(root.join("41")).unwrap();
        assert_eq!(pids(procfs.scan(&mut old, 1, wanted).unwrap()), vec![42]);
        assert_eq!(old.len(), 2);
        write(root, "41/cgroup", pod);
        write(root, "41/stat", "41 (mysqld) R 1");
        assert_eq!(
            pids(procfs.scan(&mut old, 1, wanted).unwrap()),
            vec![41, 42]
        );
    }

    // Youth is counted from the process's start, not from the scan that first lists it: the
    // node's processes running when a keepDown starts are old at once (their cgroups read
    // once), one started a moment ago is read at every scan.
    #[test]
    fn a_process_is_young_from_its_start_time() {
        let stat = |pid: i32, start: u64| {
            format!("{pid} (x (y)) S 1 {pid} {pid} 0 -1 4194560 90 0 0 0 3 1 0 0 20 0 1 0 {start} 5865472 196 18446744073709551615")
        };
        assert_eq!(parse_start_ticks(&stat(40, 99_950)), Some(99_950));
        assert_eq!(parse_start_ticks("40 (x) S 1 2 3"), None);
        assert_eq!(
            process_age("1000.00 3987.12\n", 99_950, 100),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            process_age("1000.00 3987.12\n", 150_000, 100),
            Some(Duration::ZERO)
        );
        assert_eq!(process_age("", 1, 100), None);

        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "uptime", "1000.00 3987.12\n");
        let elsewhere = "0::/system.slice/containerd.service\n";
        let pod = "0::/kubepods/podu1/0123456789abcdef\n";
        write(root, "40/cgroup", elsewhere);
        write(root, "40/stat", &stat(40, 1_000));
        write(root, "41/cgroup", elsewhere);
        write(root, "41/stat", &stat(41, 99_950));
        let procfs = ProcFs::new(root);
        let wanted = |text: &str| text.contains("podu1");
        let mut cache = ScanCache::new(Duration::from_secs(5));
        assert!(procfs.scan(&mut cache, 0, wanted).unwrap().is_empty());
        write(root, "40/cgroup", pod);
        write(root, "41/cgroup", pod);
        let seen: Vec<i32> = procfs
            .scan(&mut cache, 0, wanted)
            .unwrap()
            .iter()
            .map(|s| s.pid)
            .collect();
        assert_eq!(seen, vec![41]);
    }

    #[test]
    fn the_real_proc_shows_this_process_running() {
        let procfs = ProcFs::default();
        let pid = i32::try_from(std::process::id()).unwrap();
        assert!(procfs.is_alive(pid));
        assert!(!procfs.threads(pid).is_empty());
        assert!(procfs.netns(pid).unwrap().starts_with("net:["));
        // This test's process started moments ago; the machine's init long before.
        let age = |pid: &str| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            let uptime = std::fs::read_to_string("/proc/uptime").unwrap();
            let ticks = ScanCache::default().ticks_per_second;
            process_age(&uptime, parse_start_ticks(&stat).unwrap(), ticks).unwrap()
        };
        assert!(age("self") < Duration::from_secs(120), "{:?}", age("self"));
        assert!(age("1") >= age("self"));
    }
}
