//! `ctl`: one request to the agent's socket, its response line on stdout. What
//! `kubectl exec <agent-pod> -- bloodraven-chaos-agent ctl '<json>'` runs.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::protocol::{Request, Response};
use crate::server::socket_path;

/// How long `ctl` waits for the answer (a cleanup of many faults takes a few seconds each).
pub const CTL_WAIT: Duration = Duration::from_secs(300);

/// Sends `request_text` to the agent of `state_dir`; returns its response line. A request
/// that does not decode is refused here, without a connection.
pub fn send(state_dir: &Path, request_text: &str) -> Result<String> {
    let request = Request::parse(request_text)?;
    let path = socket_path(state_dir);
    let io = |action: &str| Error::io(format!("{action} {}", path.display()));
    let mut stream = UnixStream::connect(&path).map_err(io("connect to the agent at"))?;
    stream
        .set_read_timeout(Some(CTL_WAIT))
        .map_err(io("set a timeout on"))?;
    let mut line = serde_json::to_string(&request)
        .map_err(|error| Error::Request(format!("encode the request: {error}")))?;
    line.push('\n');
    stream
        .write_all(line.as_bytes())
        .map_err(io("send the request to"))?;
    stream
        .shutdown(std::net::Shutdown::Write)
        .map_err(io("finish the request to"))?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(io("read the answer from"))?;
    let answer = answer.trim().to_owned();
    if answer.is_empty() {
        return Err(Error::Request(format!(
            "the agent at {} closed the connection without an answer",
            path.display()
        )));
    }
    Ok(answer)
}

/// Runs `ctl`: the line for stdout, the reason for stderr when it failed, and the exit code
/// (0 success, 1 failure).
pub fn run(state_dir: &Path, request_text: &str) -> (String, Option<String>, i32) {
    let line = match send(state_dir, request_text) {
        Ok(line) => line,
        Err(error) => Response::from(error).to_line(),
    };
    let error = serde_json::from_str::<serde_json::Value>(&line)
        .ok()
        .and_then(|value| {
            value
                .get("error")
                .and_then(|e| e.as_str())
                .map(str::to_owned)
        });
    match error {
        Some(reason) => (line, Some(reason), 1),
        None => (line, None, 0),
    }
}
