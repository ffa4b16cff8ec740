//! Container ids and container cgroups, laid out as containerd with the cgroupfs driver lays
//! them out, so that a fault agent finds a container's processes from the host as it would
//! on a real node: `containerID` is `containerd://<64 hex>`, and every process of the
//! container (children included: they inherit it) is in the cgroup
//!
//! ```text
//! <hierarchy mount>/localkube-<cluster prefix>/kubepods/pod<pod uid>/<container id>
//! ```
//!
//! in each hierarchy used, so its `/proc/<pid>/cgroup` lines end in `/<container id>`.
//!
//! Hierarchies used ([`Hierarchy::wanted`]): on cgroup v1 the ones carrying the `pids` or
//! `freezer` controller and the named `name=systemd` one; any cgroup v2 (unified) mount too,
//! which is the only one on a pure v2 host. Other v1 controllers (cpu, memory, ...) are left
//! alone: localkube sets no resource limits, and moving processes out of the memory cgroup
//! localkube itself runs in would escape its accounting. The root directory carries the
//! cluster's prefix ([`super::naming::ClusterNaming::prefix`]), so clusters never share a
//! cgroup, and [`cleanup_root`] (called by `localkube down`, also after a crash) finds what
//! a cluster left behind by that name alone.
//!
//! Placement happens in `localkube-pod-exec` (see [`super::exec`]): the helper writes its
//! own pid to each `cgroup.procs` before it `execve`s the container's program, so nothing
//! the container runs starts outside its cgroup.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use sha2::{Digest, Sha256};

use super::error::{Error, Result};

/// Where the kernel lists the mounts of this process.
pub const MOUNTINFO: &str = "/proc/self/mountinfo";
/// The scheme of every `containerID`, as a containerd node reports it.
pub const CONTAINER_ID_SCHEME: &str = "containerd://";
/// The directory under a cluster's root that holds the pods (as kubelet's cgroupfs driver).
pub const KUBEPODS: &str = "kubepods";
/// How long removing a cgroup waits for the processes it killed to leave.
pub const REMOVE_WAIT_MAX: Duration = Duration::from_secs(5);
/// The poll interval of that wait.
const REMOVE_POLL: Duration = Duration::from_millis(10);

/// One mounted cgroup hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// Where it is mounted (`/sys/fs/cgroup/pids`, or `/sys/fs/cgroup` for v2).
    pub mount: PathBuf,
    /// The v1 controllers and names (`pids`, `name=systemd`); empty for v2.
    pub controllers: Vec<String>,
    /// Whether it is a cgroup v2 (unified) hierarchy.
    pub unified: bool,
}

impl Hierarchy {
    /// Whether containers get a cgroup in this hierarchy: v2, or v1 with `pids`, `freezer`
    /// or `name=systemd`.
    pub fn wanted(&self) -> bool {
        self.unified
            || self
                .controllers
                .iter()
                .any(|c| matches!(c.as_str(), "pids" | "freezer" | "name=systemd"))
    }
}

/// The cgroup hierarchies in a `/proc/self/mountinfo` text, each once (the first mount of a
/// hierarchy wins), in the order mounted. Lines that do not parse are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<Hierarchy> {
    let mut out: Vec<Hierarchy> = Vec::new();
    for line in text.lines() {
        let Some((before, after)) = line.split_once(" - ") else {
            continue;
        };
        let Some(mount) = before.split_whitespace().nth(4) else {
            continue;
        };
        let mut tail = after.split_whitespace();
        let (Some(fstype), Some(_source), Some(options)) = (tail.next(), tail.next(), tail.next())
        else {
            continue;
        };
        let hierarchy = match fstype {
            "cgroup2" => Hierarchy {
                mount: PathBuf::from(unescape_mount_path(mount)),
                controllers: Vec::new(),
                unified: true,
            },
            "cgroup" => {
                let mut controllers: Vec<String> = options
                    .split(',')
                    .filter(|o| !matches!(*o, "rw" | "ro") && !o.contains("release_agent"))
                    .filter(|o| {
                        o.starts_with("name=")
                            || !o.contains('=') && !matches!(*o, "noprefix" | "clone_children")
                    })
                    .map(str::to_string)
                    .collect();
                controllers.sort();
                Hierarchy {
                    mount: PathBuf::from(unescape_mount_path(mount)),
                    controllers,
                    unified: false,
                }
            }
            _ => continue,
        };
        let seen = out
            .iter()
            .any(|h| h.unified == hierarchy.unified && h.controllers == hierarchy.controllers);
        if !seen {
            out.push(hierarchy);
        }
    }
    out
}

/// mountinfo escapes space, tab, newline and backslash as octal (`\040`).
fn unescape_mount_path(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'\\')
            .then(|| bytes.get(i + 1..i + 4))
            .flatten()
            .filter(|digits| digits.iter().all(|d| (b'0'..=b'7').contains(d)))
            .and_then(|digits| std::str::from_utf8(digits).ok())
            .and_then(|digits| u8::from_str_radix(digits, 8).ok());
        match escaped {
            Some(b) => {
                out.push(b);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The name of a cluster's root cgroup directory: `localkube-<prefix>`.
pub fn root_name(cluster_prefix: &str) -> String {
    format!("localkube-{cluster_prefix}")
}

/// `<root>/kubepods/pod<uid>`, relative to a hierarchy's mount.
pub fn pod_relative(cluster_prefix: &str, pod_uid: &str) -> PathBuf {
    Path::new(&root_name(cluster_prefix))
        .join(KUBEPODS)
        .join(format!("pod{pod_uid}"))
}

/// `<root>/kubepods/pod<uid>/<container id>`, relative to a hierarchy's mount.
pub fn container_relative(cluster_prefix: &str, pod_uid: &str, container_id: &str) -> PathBuf {
    pod_relative(cluster_prefix, pod_uid).join(container_id)
}

/// Whether `id` is a container id as containerd makes them: 64 lowercase hex digits.
pub fn is_container_id(id: &str) -> bool {
    id.len() == 64
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `containerd://<id>`, the `containerID` of a container status.
pub fn container_id_uri(id: &str) -> String {
    format!("{CONTAINER_ID_SCHEME}{id}")
}

/// A fresh container id: 32 random bytes (from `/dev/urandom`) as 64 lowercase hex digits.
/// Should the random source fail, a SHA-256 of the time, pid and a counter stands in (ids
/// must differ, they need not be secret).
pub fn new_container_id() -> String {
    static SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut bytes = [0u8; 32];
    let random = fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if random.is_err() {
        let mut hasher = Sha256::new();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        hasher.update(nanos.to_le_bytes());
        hasher.update(std::process::id().to_le_bytes());
        hasher.update(
            SEQUENCE
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                .to_le_bytes(),
        );
        bytes.copy_from_slice(&hasher.finalize());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The cgroups of one cluster: the hierarchies used and the cluster's prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroups {
    prefix: String,
    hierarchies: Vec<Hierarchy>,
}

impl Cgroups {
    /// Finds the hierarchies this machine mounts (see [`Hierarchy::wanted`]) and creates the
    /// cluster's root directory in each; a hierarchy where that fails (read-only, absent) is
    /// left out with a warning. No hierarchy at all is not an error: containers then run
    /// without cgroups (their ids are still reported).
    pub fn detect(cluster_prefix: &str) -> Self {
        let text = fs::read_to_string(MOUNTINFO).unwrap_or_default();
        let mut hierarchies = Vec::new();
        for h in parse_mountinfo(&text).into_iter().filter(Hierarchy::wanted) {
            let root = h.mount.join(root_name(cluster_prefix)).join(KUBEPODS);
            match fs::create_dir_all(&root) {
                Ok(()) => hierarchies.push(h),
                Err(err) => {
                    tracing::warn!(hierarchy = %h.mount.display(), error = %err, "cannot create container cgroups in this hierarchy; leaving it out")
                }
            }
        }
        if hierarchies.is_empty() {
            tracing::warn!(
                "no writable cgroup hierarchy (pids, freezer, name=systemd or v2): containers run without cgroups of their own"
            );
        }
        Self {
            prefix: cluster_prefix.to_string(),
            hierarchies,
        }
    }

    /// The hierarchies in use.
    pub fn hierarchies(&self) -> &[Hierarchy] {
        &self.hierarchies
    }

    /// The container's cgroup directory in every hierarchy in use.
    pub fn container_dirs(&self, pod_uid: &str, container_id: &str) -> Vec<PathBuf> {
        let rel = container_relative(&self.prefix, pod_uid, container_id);
        self.hierarchies
            .iter()
            .map(|h| h.mount.join(&rel))
            .collect()
    }

    /// Creates the container's cgroups; returns the `cgroup.procs` files the container's
    /// first process writes itself to.
    pub fn create_container(&self, pod_uid: &str, container_id: &str) -> Result<Vec<PathBuf>> {
        let mut procs = Vec::new();
        let pod = pod_relative(&self.prefix, pod_uid);
        for h in &self.hierarchies {
            // The cluster's root is made once, at start: a container starting while the
            // cluster is being taken down must not bring it back.
            let kubepods = h.mount.join(root_name(&self.prefix)).join(KUBEPODS);
            if !kubepods.is_dir() {
                return Err(Error::Invalid(format!(
                    "container cgroup under {}: the cluster's cgroup root is gone (localkube down?)",
                    kubepods.display()
                )));
            }
            let pod_dir = h.mount.join(&pod);
            fs::create_dir_all(&pod_dir).map_err(Error::io("create pod cgroup", &pod_dir))?;
            let dir = pod_dir.join(container_id);
            fs::create_dir(&dir).map_err(Error::io("create container cgroup", &dir))?;
            procs.push(dir.join("cgroup.procs"));
        }
        Ok(procs)
    }

    /// Kills whatever is left in the container's cgroups and removes them.
    pub fn remove_container(&self, pod_uid: &str, container_id: &str) -> Result<()> {
        let mut first_error = None;
        for dir in self.container_dirs(pod_uid, container_id) {
            if let Err(err) = remove_tree(&dir) {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Removes the pod's cgroups (containers' included, their processes killed).
    pub fn remove_pod(&self, pod_uid: &str) -> Result<()> {
        let rel = pod_relative(&self.prefix, pod_uid);
        let mut first_error = None;
        for h in &self.hierarchies {
            if let Err(err) = remove_tree(&h.mount.join(&rel)) {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// The pids in a cgroup directory's `cgroup.procs` (none when it is gone).
pub fn procs_of(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .map(|text| text.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Removes a cgroup directory and everything below it, deepest first: the processes still
/// in a cgroup are SIGKILLed (they are the cluster's own) and waited for, at most
/// [`REMOVE_WAIT_MAX`] per directory. A directory that is already gone is not an error.
pub fn remove_tree(dir: &Path) -> Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(Error::io("list cgroup", dir)(err)),
    };
    let mut first_error = None;
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            if let Err(err) = remove_tree(&entry.path()) {
                first_error.get_or_insert(err);
            }
        }
    }
    if let Some(err) = first_error {
        return Err(err);
    }
    let deadline = Instant::now() + REMOVE_WAIT_MAX;
    loop {
        let pids = procs_of(dir);
        for pid in &pids {
            tracing::info!(pid, cgroup = %dir.display(), "killing process left in a container cgroup");
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(err) if Instant::now() >= deadline => {
                return Err(Error::io("remove cgroup", dir)(err));
            }
            Err(_) => std::thread::sleep(REMOVE_POLL),
        }
    }
}

/// Removes every cgroup of the cluster with `cluster_prefix` in every mounted hierarchy
/// (used or not: a hierarchy may have been writable when the cluster ran), killing the
/// processes still in them. Idempotent; what `localkube down` runs, also after a crash.
pub fn cleanup_root(cluster_prefix: &str) -> Result<()> {
    let text = fs::read_to_string(MOUNTINFO).map_err(Error::io("read", MOUNTINFO))?;
    let mut first_error = None;
    for h in parse_mountinfo(&text) {
        let root = h.mount.join(root_name(cluster_prefix));
        if !root.exists() {
            continue;
        }
        tracing::info!(cgroup = %root.display(), "cleanup: removing the cluster's cgroups");
        if let Err(err) = remove_tree(&root) {
            first_error.get_or_insert(err);
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
25 30 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
27 25 0:25 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
30 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,cpu,cpuacct
31 25 0:29 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,pids
32 25 0:30 / /sys/fs/cgroup/freezer rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,freezer
33 25 0:31 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,memory
34 25 0:29 / /mnt/pids\\040again rw,relatime - cgroup cgroup rw,pids
35 25 0:32 / /proc rw - proc proc rw
";

    // docs/design/localkube.md "What the in-cluster fault agent needs": containers get a
    // cgroup in the pids, freezer and name=systemd hierarchies (v1) and in a v2 one.
    #[test]
    fn mountinfo_gives_each_hierarchy_once_and_the_wanted_ones() {
        let all = parse_mountinfo(HYBRID);
        let mounts: Vec<&str> = all.iter().map(|h| h.mount.to_str().unwrap()).collect();
        assert_eq!(
            mounts,
            vec![
                "/sys/fs/cgroup/unified",
                "/sys/fs/cgroup/systemd",
                "/sys/fs/cgroup/cpu,cpuacct",
                "/sys/fs/cgroup/pids",
                "/sys/fs/cgroup/freezer",
                "/sys/fs/cgroup/memory",
            ]
        );
        assert_eq!(all[1].controllers, vec!["name=systemd", "xattr"]);
        assert_eq!(all[2].controllers, vec!["cpu", "cpuacct"]);
        let wanted: Vec<&str> = all
            .iter()
            .filter(|h| h.wanted())
            .map(|h| h.mount.to_str().unwrap())
            .collect();
        assert_eq!(
            wanted,
            vec![
                "/sys/fs/cgroup/unified",
                "/sys/fs/cgroup/systemd",
                "/sys/fs/cgroup/pids",
                "/sys/fs/cgroup/freezer",
            ]
        );
        let v2 = parse_mountinfo(
            "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
        );
        assert_eq!(
            v2,
            vec![Hierarchy {
                mount: "/sys/fs/cgroup".into(),
                controllers: vec![],
                unified: true
            }]
        );
        assert!(parse_mountinfo("garbage\n - \n").is_empty());
        assert_eq!(unescape_mount_path("/a\\040b"), "/a b");
        assert_eq!(unescape_mount_path("/trailing\\04"), "/trailing\\04");
    }

    // Containerd's cgroupfs layout, under the cluster's own root so clusters never collide.
    #[test]
    fn container_cgroups_are_named_after_the_cluster_pod_and_container() {
        let id = "a".repeat(64);
        assert_eq!(
            container_relative("lk1a2b", "0f-uid", &id),
            PathBuf::from(format!("localkube-lk1a2b/kubepods/pod0f-uid/{id}"))
        );
        assert_ne!(
            container_relative("lk1a2b", "u", &id),
            container_relative("lkffff", "u", &id)
        );
        let cgroups = Cgroups {
            prefix: "lk1a2b".into(),
            hierarchies: parse_mountinfo(HYBRID)
                .into_iter()
                .filter(Hierarchy::wanted)
                .collect(),
        };
        let dirs = cgroups.container_dirs("u", &id);
        assert_eq!(dirs.len(), 4);
        assert!(dirs.iter().all(|d| d.ends_with(&id)));
        assert_eq!(
            dirs[2],
            PathBuf::from(format!(
                "/sys/fs/cgroup/pids/localkube-lk1a2b/kubepods/podu/{id}"
            ))
        );
    }

    #[test]
    fn container_ids_are_64_lowercase_hex_and_fresh() {
        let a = new_container_id();
        let b = new_container_id();
        assert!(is_container_id(&a), "{a}");
        assert_ne!(a, b);
        assert_eq!(container_id_uri(&a), format!("containerd://{a}"));
        assert!(!is_container_id(&a.to_uppercase()));
        assert!(!is_container_id("abc"));
        assert!(!is_container_id(&"g".repeat(64)));
    }
}
