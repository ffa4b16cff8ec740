//! The one place that enters namespaces: the `localkube-pod-exec` helper's logic.
//!
//! The runtime spawns `localkube-pod-exec SPEC.json` with stdout/stderr already pointing at
//! the container's log file; the helper (a fresh, single-threaded process, so `setns` and
//! `unshare` apply to the whole process) then
//! 0. writes its own pid to the container's `cgroup.procs` files (its cgroups, named after
//!    the container id: see [`super::cgroups`]), so nothing the container runs is outside,
//! 1. starts its own session (so the container is a process group the runtime can signal),
//! 2. joins the pod's network namespace (none for a `hostNetwork` pod: it stays in the root
//!    one),
//! 3. unshares a mount and a UTS namespace (a `hostNetwork` pod keeps the host's UTS), makes every mount private, sets the hostname,
//! 4. bind-mounts each volume at its mount path (see [`ensure_mount_target`] for mount paths
//!    that do not exist on the host: nothing is ever created on the host file system),
//! 5. and `execve`s the container's program with the container's environment.
//!
//! With `target_pid` set (exec probes, `kubectl exec`) it instead joins that process's
//! network, UTS and mount namespaces and its root. With `controlling_tty` (`kubectl exec
//! -t`) its stdin is a pseudo-terminal, which it makes the new session's controlling
//! terminal before anything else.
//!
//! No `unsafe` is needed: nix's `setns`, `unshare`, `mount`, `chroot` and `execve` are safe
//! wrappers, and doing this in a helper process instead of a `pre_exec` hook keeps the
//! (multi-threaded) runtime free of post-fork code.

use std::ffi::CString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use nix::mount::{mount, MsFlags};
use nix::sched::{setns, unshare, CloneFlags};
use serde::{Deserialize, Serialize};

use super::error::{Error, Result};

/// The PATH used to find a program when the container's env has none (as containerd).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Sends `signal` to the process group of a container whose helper is `pid`, or to `pid`
/// itself while the helper has not yet made its session (it calls `setsid` first, but a
/// stop or kill just after the spawn may come before it: `killpg` then fails with ESRCH and
/// the container would be left running, e.g. through a node's power cut).
pub fn signal_container_group(pid: i32, signal: nix::sys::signal::Signal) -> nix::Result<()> {
    let pid = nix::unistd::Pid::from_raw(pid);
    match nix::sys::signal::killpg(pid, signal) {
        Err(nix::errno::Errno::ESRCH) => nix::sys::signal::kill(pid, signal),
        other => other,
    }
}

/// One bind mount into the container's mount namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindMount {
    /// The host path (file or directory).
    pub source: PathBuf,
    /// The path inside the container.
    pub target: PathBuf,
    /// Remount read-only.
    pub read_only: bool,
}

/// What the helper does, written by the runtime as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecSpec {
    /// The pod's network namespace file (`/run/netns/NAME`).
    pub netns_path: Option<PathBuf>,
    /// Join this running container's namespaces and root instead of building new ones.
    pub target_pid: Option<i32>,
    /// The pod hostname (new UTS namespace).
    pub hostname: Option<String>,
    /// A directory of the container where mount-point shadows are staged.
    pub staging_dir: PathBuf,
    /// Bind mounts, applied in order.
    pub mounts: Vec<BindMount>,
    /// The working directory (default `/`).
    pub working_dir: Option<PathBuf>,
    /// argv; `argv[0]` is looked up in the env's PATH when it has no `/`.
    pub argv: Vec<String>,
    /// The complete environment.
    pub env: Vec<(String, String)>,
    /// Start a new session (process group) first.
    pub new_session: bool,
    /// Delete the spec file once read (one-off execs).
    #[serde(default)]
    pub remove_after_read: bool,
    /// The `cgroup.procs` files of the container's cgroups ([`super::cgroups`]): the helper
    /// writes its own pid to each before anything else, so the program it `execve`s, and
    /// every process that program starts, is in them from its first instruction.
    #[serde(default)]
    pub cgroup_procs: Vec<PathBuf>,
    /// stdin is a pseudo-terminal: make it the controlling terminal (needs `new_session`)
    /// and wait, at most [`TTY_SIZE_WAIT`], for the client's first window size.
    #[serde(default)]
    pub controlling_tty: bool,
}

/// How long a TTY exec waits for its window size before starting the program anyway. The
/// client sends its size (resize channel) right after the upgrade; a program started
/// before it would see 0x0 (real runtimes have that race; `stty size` then prints `0 0`).
pub const TTY_SIZE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
/// Poll interval of that wait.
const TTY_SIZE_POLL: std::time::Duration = std::time::Duration::from_millis(5);

/// Entry point of `localkube-pod-exec SPEC.json`: returns only on failure (the message goes
/// to stderr, i.e. the container log, and the exit code is 127 as a shell's "cannot exec").
pub fn helper_main(spec_path: &Path) -> Result<std::convert::Infallible> {
    let text = fs::read(spec_path).map_err(Error::io("read exec spec", spec_path))?;
    let spec: ExecSpec = serde_json::from_slice(&text)?;
    if spec.remove_after_read {
        fs::remove_file(spec_path).map_err(Error::io("remove exec spec", spec_path))?;
    }
    run(&spec)
}

fn run(spec: &ExecSpec) -> Result<std::convert::Infallible> {
    join_cgroups(&spec.cgroup_procs)?;
    if spec.new_session {
        nix::unistd::setsid().map_err(Error::sys("start a new session"))?;
    }
    if spec.controlling_tty {
        take_controlling_tty()?;
    }
    if let Some(pid) = spec.target_pid {
        // Open every namespace before joining any: after joining the mount namespace,
        // /proc may not be the same.
        let net = open(&format!("/proc/{pid}/ns/net"))?;
        let uts = open(&format!("/proc/{pid}/ns/uts"))?;
        let mnt = open(&format!("/proc/{pid}/ns/mnt"))?;
        let root = open(&format!("/proc/{pid}/root"))?;
        setns(&net, CloneFlags::CLONE_NEWNET)
            .map_err(Error::sys("join the pod network namespace"))?;
        setns(&uts, CloneFlags::CLONE_NEWUTS).map_err(Error::sys("join the pod uts namespace"))?;
        setns(&mnt, CloneFlags::CLONE_NEWNS)
            .map_err(Error::sys("join the container mount namespace"))?;
        nix::unistd::fchdir(&root).map_err(Error::sys("enter the container root"))?;
        nix::unistd::chroot(".").map_err(Error::sys("chroot into the container root"))?;
    } else {
        if let Some(netns) = &spec.netns_path {
            let file = fs::File::open(netns).map_err(Error::io("open network namespace", netns))?;
            setns(&file, CloneFlags::CLONE_NEWNET)
                .map_err(Error::sys("join the pod network namespace"))?;
        }
        // A pod on the host network keeps the host's UTS namespace (and hostname), as on a
        // node; every other pod gets its own, named after the pod.
        let mut namespaces = CloneFlags::CLONE_NEWNS;
        if spec.hostname.is_some() {
            namespaces |= CloneFlags::CLONE_NEWUTS;
        }
        unshare(namespaces).map_err(Error::sys("unshare mount and uts namespaces"))?;
        mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None::<&str>,
        )
        .map_err(Error::sys("make mounts private"))?;
        if let Some(hostname) = &spec.hostname {
            nix::unistd::sethostname(hostname).map_err(Error::sys("set hostname"))?;
        }
        // Sources and the staging dir are opened (O_PATH) before anything is mounted and used
        // through /proc/self/fd: a private dir bound over e.g. /tmp must not hide a state dir
        // under /tmp from the mounts that follow.
        let staging_fd = open_path(&spec.staging_dir)?;
        let staging = fd_path(&staging_fd);
        let sources = spec
            .mounts
            .iter()
            .map(|bind| open_path(&bind.source))
            .collect::<Result<Vec<_>>>()?;
        let mut shadows = 0u32;
        for (bind, source) in spec.mounts.iter().zip(&sources) {
            let is_dir = fd_path(source).is_dir();
            ensure_mount_target(&bind.target, is_dir, &staging, &mut shadows)?;
            mount(
                Some(&fd_path(source)),
                &bind.target,
                None::<&str>,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None::<&str>,
            )
            .map_err(Error::sys(format!(
                "bind {} at {}",
                bind.source.display(),
                bind.target.display()
            )))?;
            if bind.read_only {
                let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
                mount(
                    None::<&str>,
                    &bind.target,
                    None::<&str>,
                    flags,
                    None::<&str>,
                )
                .map_err(Error::sys(format!(
                    "remount {} read-only",
                    bind.target.display()
                )))?;
            }
        }
    }
    let cwd = spec
        .working_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("/"));
    nix::unistd::chdir(&cwd)
        .map_err(Error::sys(format!("change directory to {}", cwd.display())))?;
    exec(&spec.argv, &spec.env)
}

/// Moves this process into each cgroup whose `cgroup.procs` is given (containerd's runtime
/// does the same for a container's init before its program starts).
fn join_cgroups(procs: &[PathBuf]) -> Result<()> {
    let pid = std::process::id().to_string();
    for path in procs {
        fs::write(path, &pid).map_err(Error::io("join container cgroup", path))?;
    }
    Ok(())
}

/// Makes stdin (a pseudo-terminal's slave) the controlling terminal of this session, then
/// waits for a non-zero window size (bounded by [`TTY_SIZE_WAIT`]).
fn take_controlling_tty() -> Result<()> {
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    rustix::process::ioctl_tiocsctty(stdin.as_fd()).map_err(|e| {
        Error::sys("make stdin the controlling terminal")(nix::errno::Errno::from_raw(
            e.raw_os_error(),
        ))
    })?;
    let deadline = std::time::Instant::now() + TTY_SIZE_WAIT;
    while std::time::Instant::now() < deadline {
        match rustix::termios::tcgetwinsize(stdin.as_fd()) {
            Ok(size) if size.ws_row > 0 && size.ws_col > 0 => break,
            Ok(_) => std::thread::sleep(TTY_SIZE_POLL),
            Err(_) => break,
        }
    }
    Ok(())
}

fn open_path(path: &Path) -> Result<std::os::fd::OwnedFd> {
    use nix::fcntl::OFlag;
    nix::fcntl::open(
        path,
        OFlag::O_PATH | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(Error::sys(format!("open {}", path.display())))
}

fn fd_path(fd: &std::os::fd::OwnedFd) -> PathBuf {
    use std::os::fd::AsRawFd;
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

fn open(path: &str) -> Result<fs::File> {
    fs::File::open(path).map_err(Error::io("open namespace", path))
}

/// Finds `program` as a shell would: as given when it has a `/`, else in `path`.
pub fn find_program(program: &str, path: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    path.split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(program))
        .find(|candidate| {
            fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

fn exec(argv: &[String], env: &[(String, String)]) -> Result<std::convert::Infallible> {
    let program = argv
        .first()
        .ok_or_else(|| Error::Invalid("container command: it is empty".into()))?;
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map_or(DEFAULT_PATH, |(_, v)| v.as_str());
    let resolved = find_program(program, path).ok_or_else(|| {
        Error::Invalid(format!(
            "container command: executable \"{program}\" not found in PATH"
        ))
    })?;
    let to_c = |s: &str| {
        CString::new(s)
            .map_err(|_| Error::Invalid(format!("argument {s:?}: it contains a NUL byte")))
    };
    let c_path = to_c(&resolved.to_string_lossy())?;
    let c_argv = argv.iter().map(|a| to_c(a)).collect::<Result<Vec<_>>>()?;
    let c_env = env
        .iter()
        .map(|(k, v)| to_c(&format!("{k}={v}")))
        .collect::<Result<Vec<_>>>()?;
    match nix::unistd::execve(&c_path, &c_argv, &c_env) {
        Err(err) => Err(Error::sys(format!("exec {}", resolved.display()))(err)),
        Ok(never) => match never {},
    }
}

/// Makes `target` exist inside this (private) mount namespace without touching the host:
/// when a path component is missing, the deepest existing ancestor directory is covered by a
/// tmpfs "shadow" that re-binds every entry of the original, and the missing components are
/// created in the tmpfs. When the ancestor is `/` itself the process `chroot`s into the shadow
/// (a mount over `/` would not be visible to this process).
pub fn ensure_mount_target(
    target: &Path,
    is_dir: bool,
    staging: &Path,
    shadows: &mut u32,
) -> Result<()> {
    if target.exists() {
        return Ok(());
    }
    let components: Vec<Component<'_>> = target.components().collect();
    let mut existing = PathBuf::from("/");
    let mut index = 0;
    for (i, component) in components.iter().enumerate() {
        let next = existing.join(component);
        if matches!(component, Component::RootDir) {
            index = i + 1;
            continue;
        }
        if next.exists() {
            existing = next;
            index = i + 1;
        } else {
            break;
        }
    }
    let ancestor =
        fs::canonicalize(&existing).map_err(Error::io("resolve mount path", &existing))?;
    let first_missing = components
        .get(index)
        .map(|c| c.as_os_str().to_os_string())
        .ok_or_else(|| Error::Invalid(format!("mount path {}", target.display())))?;
    *shadows += 1;
    let shadow = staging.join(format!("shadow-{shadows}"));
    fs::create_dir_all(&shadow).map_err(Error::io("create shadow", &shadow))?;
    mount(
        Some("tmpfs"),
        &shadow,
        Some("tmpfs"),
        MsFlags::empty(),
        Some("mode=0755"),
    )
    .map_err(Error::sys(format!(
        "mount shadow tmpfs at {}",
        shadow.display()
    )))?;
    let entries =
        fs::read_dir(&ancestor).map_err(Error::io("list mount path parent", &ancestor))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let source = entry.path();
        let dest = shadow.join(&name);
        let Ok(meta) = fs::symlink_metadata(&source) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            if name == first_missing {
                continue; // a dangling symlink in the way of the target: leave it out
            }
            if let Ok(link) = fs::read_link(&source) {
                std::os::unix::fs::symlink(link, &dest)
                    .map_err(Error::io("copy symlink into shadow", &dest))?;
            }
            continue;
        }
        if meta.is_dir() {
            fs::create_dir(&dest).map_err(Error::io("create shadow entry", &dest))?;
        } else {
            fs::File::create(&dest).map_err(Error::io("create shadow entry", &dest))?;
        }
        mount(
            Some(&source),
            &dest,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(Error::sys(format!("bind {} into shadow", source.display())))?;
    }
    if let Ok(meta) = fs::metadata(&ancestor) {
        let _ = fs::set_permissions(
            &shadow,
            fs::Permissions::from_mode(meta.permissions().mode()),
        );
    }
    if ancestor == Path::new("/") {
        nix::unistd::chroot(&shadow).map_err(Error::sys("chroot into root shadow"))?;
        nix::unistd::chdir("/").map_err(Error::sys("change directory to /"))?;
    } else {
        mount(
            Some(&shadow),
            &ancestor,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(Error::sys(format!(
            "cover {} with its shadow",
            ancestor.display()
        )))?;
    }
    // Re-resolve: the target's parents are now creatable (inside the tmpfs).
    let relative: PathBuf = components[index..].iter().collect();
    let full = ancestor.join(relative);
    if is_dir {
        fs::create_dir_all(&full).map_err(Error::io("create mount point", &full))?;
    } else {
        if let Some(parent) = full.parent() {
            fs::create_dir_all(parent).map_err(Error::io("create mount point parent", parent))?;
        }
        fs::File::create(&full).map_err(Error::io("create mount point", &full))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_program_searches_path_only_for_bare_names() {
        assert_eq!(
            find_program("/no/such", "/usr/bin"),
            Some(PathBuf::from("/no/such"))
        );
        assert!(find_program("sh", DEFAULT_PATH).is_some());
        assert_eq!(find_program("no-such-program-xyz", DEFAULT_PATH), None);
    }
}
