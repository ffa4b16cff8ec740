//! Running the tools the agent shells out to (`nsenter`, `nft`, `iptables`), bounded in time.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How long one command may run before it is killed.
pub const COMMAND_WAIT: Duration = Duration::from_secs(10);

/// The first of `names` found in `PATH` (or the usual sbin directories, which a non-login
/// `PATH` may miss).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// What a command printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Exit status code (-1 when killed by a signal).
    pub code: i32,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
}

impl Output {
    /// Whether it exited 0.
    pub fn success(&self) -> bool {
        self.code == 0
    }
}

/// `program args...` as one line, for messages.
pub fn command_line(program: &str, args: &[String]) -> String {
    std::iter::once(program.to_owned())
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `program args` with `stdin`, waiting at most [`COMMAND_WAIT`]; an error only when it
/// could not run or ran out of time (the caller judges the exit status).
pub fn run(program: &str, args: &[String], stdin: Option<&str>) -> Result<Output> {
    let line = command_line(program, args);
    let fail = |reason: String| Error::Command {
        command: line.clone(),
        reason,
    };
    let mut child = Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| fail(format!("could not start it: {error}")))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .map_err(|error| fail(format!("could not write its input: {error}")))?;
    }
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + COMMAND_WAIT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(fail(format!(
                    "it was still running after {}s and was killed",
                    COMMAND_WAIT.as_secs()
                )));
            }
            Err(error) => return Err(fail(format!("could not wait for it: {error}"))),
        }
    };
    Ok(Output {
        code: status.code().unwrap_or(-1),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// Runs it and requires exit 0; the error carries the exit status and stderr.
pub fn run_ok(program: &str, args: &[String], stdin: Option<&str>) -> Result<String> {
    let output = run(program, args, stdin)?;
    if output.success() {
        return Ok(output.stdout);
    }
    Err(Error::Command {
        command: command_line(program, args),
        reason: format!("exit status {}: {}", output.code, output.stderr.trim()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_report_status_output_and_failures() {
        let out = run(
            "sh",
            &["-c".into(), "cat; echo err >&2; exit 3".into()],
            Some("in"),
        )
        .unwrap();
        assert_eq!(
            out,
            Output {
                code: 3,
                stdout: "in".into(),
                stderr: "err\n".into()
            }
        );
        let error = run_ok("sh", &["-c".into(), "echo nope >&2; exit 2".into()], None)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("run sh -c") && error.contains("exit status 2: nope"),
            "{error}"
        );
        let missing = run("bloodraven-no-such-tool", &[], None)
            .unwrap_err()
            .to_string();
        assert!(missing.contains("could not start it"), "{missing}");
        assert!(find_program("sh").is_some());
        assert!(find_program("bloodraven-no-such-tool").is_none());
    }
}
