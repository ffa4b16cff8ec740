//! Signals to processes (through `nix`: the workspace forbids `unsafe`).

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::error::{Error, Result};

/// Sends `signal` to `pid`; `Ok(false)` when the process is already gone.
pub fn send(pid: i32, signal: Signal) -> Result<bool> {
    // Style rule 14: never PID 1, never a process group (pid <= 0 would signal groups).
    if pid <= 1 {
        return Err(Error::Signal {
            signal: signal.as_str().to_owned(),
            pid,
            errno: Errno::EINVAL,
        });
    }
    match kill(Pid::from_raw(pid), signal) {
        Ok(()) => Ok(true),
        Err(Errno::ESRCH) => Ok(false),
        Err(errno) => Err(Error::Signal {
            signal: signal.as_str().to_owned(),
            pid,
            errno,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_and_process_groups_are_never_signalled() {
        for pid in [1, 0, -1, -42] {
            let error = send(pid, Signal::SIGCONT).unwrap_err().to_string();
            assert!(error.contains(&format!("pid {pid}")), "{error}");
        }
    }
}
