//! `bloodraven-workload follow --run ID --from SEQ`: prints the run's log from line `SEQ` on,
//! as it grows, and exits 0 after printing the end line. The harness runs it through the
//! API's exec; when the stream breaks it runs it again from the first line it lacks.
//!
//! A log that stops growing without an end line is checked against the daemon: while the run
//! is active, `follow` waits; when the daemon says it is not (or no daemon answers for
//! [`DAEMON_GONE_MAX`]) and no end line came, the run was abandoned: `follow` says so and
//! exits with [`EXIT_ABANDONED`]. (A daemon that restarts closes such a log with an
//! `aborted` end line, [`super::runlog::close_abandoned`].)

use std::io::{Read as _, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::control::{self, Request, RunRef};
use super::lines::{parse_line, seq_of, LineBuffer, RunLine};
use super::runlog;
use crate::error::{Error, Result};

/// The exit code of a `follow` whose run ended without its end line.
pub const EXIT_ABANDONED: i32 = 3;
/// How often the log is read again at its end.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// After this long without a new line, the daemon is asked whether the run is active.
pub const IDLE_CHECK: Duration = Duration::from_secs(2);
/// How long no daemon may answer before a run without an end line counts as abandoned.
pub const DAEMON_GONE_MAX: Duration = Duration::from_secs(30);
/// How long `follow` waits for a run's log to appear.
pub const OPEN_WAIT_MAX: Duration = Duration::from_secs(10);
/// How many bytes are read at once.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// What `follow` needs.
#[derive(Debug, Clone)]
pub struct FollowOptions {
    /// The daemon's state directory.
    pub dir: PathBuf,
    /// The run.
    pub run: String,
    /// The first line to print.
    pub from: u64,
}

/// How `follow` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowEnd {
    /// The end line was printed.
    Ended,
    /// The run is over without an end line; why.
    Abandoned(String),
}

fn read_error(path: &Path, source: std::io::Error) -> Error {
    Error::Read {
        path: path.to_path_buf(),
        source,
    }
}

fn open_log(path: &Path) -> Result<std::fs::File> {
    let deadline = Instant::now() + OPEN_WAIT_MAX;
    loop {
        match std::fs::File::open(path) {
            Ok(file) => return Ok(file),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                if Instant::now() >= deadline {
                    return Err(read_error(path, error));
                }
                std::thread::sleep(POLL_INTERVAL);
            }
            Err(error) => return Err(read_error(path, error)),
        }
    }
}

/// Follows the run's log, writing each line from `options.from` on to `out` (one line each,
/// flushed when the log has nothing more for now), until its end line.
pub fn follow(options: &FollowOptions, out: &mut impl Write) -> Result<FollowEnd> {
    runlog::check_run_id(&options.run).map_err(|reason| Error::Workload {
        action: "follow a run".to_owned(),
        reason,
    })?;
    let path = runlog::run_path(&options.dir, &options.run);
    let socket = runlog::control_socket(&options.dir);
    let mut file = open_log(&path)?;
    let mut buffer = LineBuffer::default();
    let mut chunk = vec![0_u8; READ_CHUNK_BYTES];
    let mut last_line_at = Instant::now();
    let mut daemon_answered_at = Instant::now();
    let mut inactive_seen = false;
    let write_error = |source: std::io::Error| Error::Write {
        path: PathBuf::from("<stdout>"),
        source,
    };
    loop {
        let read = file.read(&mut chunk).map_err(|e| read_error(&path, e))?;
        if read > 0 {
            last_line_at = Instant::now();
            for line in buffer.push(&chunk[..read]) {
                let line = match line {
                    Ok(line) => line,
                    Err(why) => {
                        eprintln!(
                            "bloodraven-workload follow: skipped a line of {}: {why}",
                            path.display()
                        );
                        continue;
                    }
                };
                let Some(seq) = seq_of(&line) else {
                    eprintln!(
                        "bloodraven-workload follow: skipped a line of {} without a seq: {line:.120}",
                        path.display()
                    );
                    continue;
                };
                if seq < options.from {
                    continue;
                }
                writeln!(out, "{line}").map_err(write_error)?;
                if matches!(parse_line(&line), Ok(RunLine::End { .. })) {
                    out.flush().map_err(write_error)?;
                    return Ok(FollowEnd::Ended);
                }
            }
            continue;
        }
        out.flush().map_err(write_error)?;
        if inactive_seen {
            return Ok(FollowEnd::Abandoned(format!(
                "the daemon says run {} is not active, and {} has no end line",
                options.run,
                path.display()
            )));
        }
        if last_line_at.elapsed() >= IDLE_CHECK {
            last_line_at = Instant::now();
            let status = control::call(
                &socket,
                &Request::Status(RunRef {
                    run: options.run.clone(),
                }),
                IDLE_CHECK,
            );
            match status {
                Ok(value) => {
                    daemon_answered_at = Instant::now();
                    if value["active"] != serde_json::Value::Bool(true) {
                        // Read once more: the end line may have been written since.
                        inactive_seen = true;
                        continue;
                    }
                }
                Err(error) if daemon_answered_at.elapsed() >= DAEMON_GONE_MAX => {
                    return Ok(FollowEnd::Abandoned(format!(
                        "no daemon answered for {} s ({error}), and {} has no end line",
                        DAEMON_GONE_MAX.as_secs(),
                        path.display()
                    )));
                }
                Err(_) => {}
            }
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}
