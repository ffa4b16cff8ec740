//! The watchdog loop: [`bloodraven_core::lease::Watchdog`]'s verdict, checked every
//! [`CHECK_EVERY`], and the SIGKILL it may call for.
//!
//! It runs beside the enforcer, not inside it: the enforcer's observation of a frozen mysqld
//! hangs until its statement timeout while holding the mutation lock, and the kill must not
//! wait for that. mysqld is found by its pid file on a volume both containers mount (the pod
//! shares one process namespace, `shareProcessNamespace: true`); the pid is killed only if
//! `/proc/<pid>/comm` names mysqld, so a stale pid file reused by another process is left
//! alone.

use std::{path::Path, sync::Arc, time::Duration};

use bloodraven_core::lease::WatchdogVerdict;

use crate::state::Shared;

/// How often the verdict is checked: small against the operator's clock-drift margin (1 s),
/// so a kill lands within a tenth of it after the lease runs out.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(100);

/// Process names a mysqld runs under.
const MYSQLD_NAMES: [&str; 2] = ["mariadbd", "mysqld"];

/// Runs forever.
pub(crate) async fn run(shared: Arc<Shared>) {
    if shared.settings.mysqld_pid_file.is_none() {
        tracing::warn!(
            site = shared.site(),
            "no --mysqld-pid-file: a mysqld that cannot be fenced (frozen) cannot be killed when the lease runs out"
        );
    }
    let mut interval = tokio::time::interval(CHECK_EVERY);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        check(&shared);
    }
}

/// One check: verdict, and the kill it calls for.
pub(crate) fn check(shared: &Shared) {
    let now = shared.clock.now();
    let (desired, remaining_ms) = {
        let lease = shared.lease();
        (lease.desired(now), lease.lease_remaining_ms(now))
    };
    let verdict = shared.watchdog().check(desired, remaining_ms, now);
    let WatchdogVerdict::Kill {
        unconfirmed_ms,
        reason,
    } = verdict
    else {
        return;
    };
    let Some(pid_file) = shared.settings.mysqld_pid_file.as_deref() else {
        return;
    };
    match kill_mysqld(pid_file) {
        Ok(Killed::Pid(pid)) => {
            shared.watchdog().killed();
            shared.metrics.watchdog_killed();
            tracing::error!(
                site = shared.site(),
                pid,
                unconfirmed_ms,
                reason = reason.as_str(),
                "watchdog killed mysqld: it must be read-only, no lease covers it, and it was not seen read-only; it restarts read-only"
            );
            shared.wake_enforcer.notify_one();
        }
        Ok(Killed::NotRunning(why)) => {
            // Nothing runs under that pid: nothing can write. Recorded like a kill, so a
            // missing pid file is not retried every check.
            shared.watchdog().killed();
            tracing::warn!(
                site = shared.site(),
                unconfirmed_ms,
                %why,
                "watchdog found no mysqld to kill"
            );
        }
        Err(error) => tracing::error!(
            site = shared.site(),
            unconfirmed_ms,
            %error,
            "watchdog could not kill mysqld; retrying"
        ),
    }
}

/// What [`kill_mysqld`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Killed {
    /// SIGKILL was sent to this pid.
    Pid(i32),
    /// No mysqld runs under the pid file's pid (or there is no pid file): why.
    NotRunning(String),
}

/// Reads the pid file, checks the process is a mysqld and SIGKILLs it.
pub(crate) fn kill_mysqld(pid_file: &Path) -> Result<Killed, String> {
    let text = match std::fs::read_to_string(pid_file) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Killed::NotRunning(format!(
                "pid file {} does not exist",
                pid_file.display()
            )))
        }
        Err(error) => return Err(format!("read pid file {}: {error}", pid_file.display())),
    };
    let pid: i32 = text.trim().parse().map_err(|error| {
        format!(
            "pid file {}: {:?} is not a pid: {error}",
            pid_file.display(),
            text.trim()
        )
    })?;
    if pid <= 1 {
        return Err(format!(
            "pid file {}: refusing to signal pid {pid}",
            pid_file.display()
        ));
    }
    let comm_path = format!("/proc/{pid}/comm");
    let comm = match std::fs::read_to_string(&comm_path) {
        Ok(comm) => comm.trim().to_owned(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Killed::NotRunning(format!("no process {pid}")))
        }
        Err(error) => return Err(format!("read {comm_path}: {error}")),
    };
    if !MYSQLD_NAMES.contains(&comm.as_str()) {
        return Ok(Killed::NotRunning(format!(
            "process {pid} is {comm:?}, not mysqld (stale pid file)"
        )));
    }
    match nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    ) {
        Ok(()) => Ok(Killed::Pid(pid)),
        Err(nix::errno::Errno::ESRCH) => Ok(Killed::NotRunning(format!("process {pid} exited"))),
        Err(errno) => Err(format!("SIGKILL mysqld pid {pid}: {errno}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "bloodraven-watchdog-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn a_missing_pid_file_or_a_process_that_is_not_mysqld_is_left_alone() {
        let dir = dir();
        let file = dir.join("mysqld.pid");
        assert!(matches!(kill_mysqld(&file), Ok(Killed::NotRunning(_))));
        // This test process is not a mysqld: a stale pid file naming it kills nothing.
        std::fs::write(&file, format!("{}\n", std::process::id())).expect("write");
        let left = kill_mysqld(&file);
        assert!(
            matches!(&left, Ok(Killed::NotRunning(why)) if why.contains("not mysqld")),
            "{left:?}"
        );
        std::fs::write(&file, "garbage").expect("write");
        let error = kill_mysqld(&file).expect_err("not a pid");
        assert!(error.contains("is not a pid"), "{error}");
        std::fs::write(&file, "1").expect("write");
        assert!(kill_mysqld(&file).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
