//! A run's event log in the workload pod: `DIR/runs/<run>.jsonl` ([`super::lines`]). The
//! [`RunLog`] is the [`Sink`] the workload's loops record into: each event gets the next
//! `seq`, the pod's wall clock and its monotonic clock since the run started, and is written
//! and flushed as one line before the call returns (a `write(2)` of the whole line, so
//! `follow` never sees half an event unless the process died mid-write).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use super::lines::{Anchor, End, EventLine, LineBuffer, RunLine};
use crate::error::{Error, Result};
use crate::history::event::{EventType, Op};
use crate::live::workload::Sink;

/// The pod's default state directory (an `emptyDir` in the Deployment).
pub const DEFAULT_DIR: &str = "/var/run/bloodraven-workload";
/// The control socket's file name in the state directory.
pub const CONTROL_SOCKET: &str = "control.sock";
/// The directory of the runs' logs in the state directory.
pub const RUNS_DIR: &str = "runs";
/// The longest run id: it names a file.
pub const RUN_ID_BYTES_MAX: usize = 128;

/// The control socket of the daemon serving `dir`.
pub fn control_socket(dir: &Path) -> PathBuf {
    dir.join(CONTROL_SOCKET)
}

/// The log of run `run` in `dir`.
pub fn run_path(dir: &Path, run: &str) -> PathBuf {
    dir.join(RUNS_DIR).join(format!("{run}.jsonl"))
}

/// Checks that a run id can name a file: 1 to [`RUN_ID_BYTES_MAX`] characters among
/// `A-Z a-z 0-9 . _ -`, not starting with a dot.
pub fn check_run_id(run: &str) -> Result<(), String> {
    if run.is_empty() || run.len() > RUN_ID_BYTES_MAX {
        return Err(format!(
            "run id {run:?} must have 1 to {RUN_ID_BYTES_MAX} characters"
        ));
    }
    if run.starts_with('.') {
        return Err(format!("run id {run:?} starts with a dot"));
    }
    match run
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        Some(bad) => Err(format!(
            "run id {run:?} has {bad:?}; only letters, digits, `.`, `_` and `-` are allowed"
        )),
        None => Ok(()),
    }
}

#[derive(Debug)]
struct Writer {
    file: std::fs::File,
    next_seq: u64,
    last_mono_ns: u64,
    unwritten: u64,
    first_error: Option<String>,
    ended: bool,
}

/// A run's log, open for appending.
#[derive(Debug)]
pub struct RunLog {
    run: String,
    path: PathBuf,
    start: Instant,
    writer: Mutex<Writer>,
}

/// What [`RunLog::end`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// Events written.
    pub events: u64,
    /// The end line's seq.
    pub last_seq: u64,
    /// Events that could not be written.
    pub unwritten: u64,
    /// The first write error, if any.
    pub first_error: Option<String>,
}

impl RunLog {
    /// Creates `DIR/runs/<run>.jsonl` (an error if that run already has a log) and writes the
    /// anchor: the pod's wall clock now, monotonic 0.
    pub fn create(dir: &Path, run: &str) -> Result<Self> {
        check_run_id(run).map_err(|reason| Error::Workload {
            action: "start a run".to_owned(),
            reason,
        })?;
        let path = run_path(dir, run);
        let runs = dir.join(RUNS_DIR);
        std::fs::create_dir_all(&runs).map_err(|source| Error::Write {
            path: runs.clone(),
            source,
        })?;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(|source| match source.kind() {
                std::io::ErrorKind::AlreadyExists => Error::Workload {
                    action: format!("start run {run}"),
                    reason: format!(
                        "{} exists: run ids are used once (its log would be mixed with another's)",
                        path.display()
                    ),
                },
                _ => Error::Write {
                    path: path.clone(),
                    source,
                },
            })?;
        let start = Instant::now();
        let anchor = RunLine::Anchor(Anchor {
            wall: jiff::Timestamp::now(),
            mono_ns: 0,
        });
        let mut writer = Writer {
            file,
            next_seq: 1,
            last_mono_ns: 0,
            unwritten: 0,
            first_error: None,
            ended: false,
        };
        write_line(&mut writer.file, &anchor.to_json()).map_err(|source| Error::Write {
            path: path.clone(),
            source,
        })?;
        Ok(Self {
            run: run.to_owned(),
            path,
            start,
            writer: Mutex::new(writer),
        })
    }

    /// The run's id.
    pub fn run(&self) -> &str {
        &self.run
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the end line (once; later calls return the same counts without writing).
    pub fn end(&self, aborted: Option<String>) -> Result<Ended> {
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let last_seq = writer.next_seq;
        let ended = Ended {
            events: last_seq - 1,
            last_seq,
            unwritten: writer.unwritten,
            first_error: writer.first_error.clone(),
        };
        if writer.ended {
            return Ok(ended);
        }
        let aborted = match (aborted, &writer.first_error) {
            (Some(why), _) => Some(why),
            (None, Some(error)) => Some(format!(
                "{} events could not be written, the first: {error}",
                writer.unwritten
            )),
            (None, None) => None,
        };
        let line = RunLine::End {
            seq: last_seq,
            end: End {
                events: ended.events,
                unwritten: ended.unwritten,
                aborted,
            },
        };
        write_line(&mut writer.file, &line.to_json()).map_err(|source| Error::Write {
            path: self.path.clone(),
            source,
        })?;
        writer.ended = true;
        writer.next_seq += 1;
        Ok(ended)
    }
}

impl Sink for RunLog {
    fn record(&self, process: &str, kind: EventType, op: Op) {
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        if writer.ended {
            // A task recording after the end line: counted, so the harness sees the loss.
            writer.unwritten += 1;
            return;
        }
        // Read under the lock: seq order is time order, strictly (two events never share an
        // instant, so the harness's ordering by time keeps an invoke before its completion).
        let elapsed = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mono_ns = elapsed.max(writer.last_mono_ns + 1);
        let line = RunLine::Event(Box::new(EventLine {
            seq: writer.next_seq,
            process: process.to_owned(),
            kind,
            op,
            wall: jiff::Timestamp::now(),
            mono_ns,
        }));
        match write_line(&mut writer.file, &line.to_json()) {
            Ok(()) => {
                writer.next_seq += 1;
                writer.last_mono_ns = mono_ns;
            }
            Err(error) => {
                tracing::error!(run = %self.run, path = %self.path.display(), %error, "failed to write an event");
                writer.unwritten += 1;
                writer
                    .first_error
                    .get_or_insert_with(|| format!("write {}: {error}", self.path.display()));
            }
        }
    }
}

fn write_line(file: &mut std::fs::File, line: &str) -> std::io::Result<()> {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    file.write_all(&bytes)?;
    file.flush()
}

/// What [`close_abandoned`] found in one log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abandoned {
    /// The run.
    pub run: String,
    /// Lines kept (anchor and events).
    pub lines: u64,
    /// Bytes of a cut last line removed.
    pub cut_bytes: usize,
}

/// At the daemon's start: every run log in `dir` without an end line belonged to a daemon
/// that died mid-run. Each is closed with an `aborted` end line (after removing a last line
/// cut mid-write), so `follow` ends and the harness records the run as incomplete.
pub fn close_abandoned(dir: &Path) -> Result<Vec<Abandoned>> {
    let runs = dir.join(RUNS_DIR);
    let entries = match std::fs::read_dir(&runs) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(Error::Read { path: runs, source }),
    };
    let mut closed = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(run) = path
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.strip_suffix(".jsonl"))
            .map(str::to_owned)
        else {
            continue;
        };
        let bytes = std::fs::read(&path).map_err(|source| Error::Read {
            path: path.clone(),
            source,
        })?;
        let mut buffer = LineBuffer::default();
        let lines = buffer.push(&bytes);
        let cut = buffer.into_fragment().map_or(0, |fragment| fragment.len());
        let parsed: Vec<RunLine> = lines
            .iter()
            .filter_map(|line| line.as_ref().ok())
            .filter_map(|line| super::lines::parse_line(line).ok())
            .collect();
        if parsed
            .iter()
            .any(|line| matches!(line, RunLine::End { .. }))
        {
            continue;
        }
        let next_seq = parsed
            .iter()
            .map(RunLine::seq)
            .max()
            .map_or(0, |seq| seq + 1);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|source| Error::Write {
                path: path.clone(),
                source,
            })?;
        file.set_len((bytes.len() - cut) as u64)
            .map_err(|source| Error::Write {
                path: path.clone(),
                source,
            })?;
        drop(file);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|source| Error::Write {
                path: path.clone(),
                source,
            })?;
        let end = RunLine::End {
            seq: next_seq,
            end: End {
                events: next_seq.saturating_sub(1),
                unwritten: 0,
                aborted: Some(format!(
                    "the workload daemon stopped while run {run} was active (found at its restart): operations in flight then never completed{}",
                    if cut > 0 {
                        format!(", and a last line cut mid-write ({cut} bytes) was removed")
                    } else {
                        String::new()
                    }
                )),
            },
        };
        write_line(&mut file, &end.to_json()).map_err(|source| Error::Write {
            path: path.clone(),
            source,
        })?;
        closed.push(Abandoned {
            run,
            lines: next_seq,
            cut_bytes: cut,
        });
    }
    Ok(closed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::event::Op;

    fn write(id: u64) -> Op {
        Op::Write {
            id,
            site: None,
            gtid: None,
            error: None,
        }
    }

    fn read_lines(path: &Path) -> Vec<RunLine> {
        std::fs::read_to_string(path)
            .expect("log")
            .lines()
            .map(|line| super::super::lines::parse_line(line).expect("line"))
            .collect()
    }

    // The log's contract (crate::incluster::lines): anchor at 0, events from 1 without gaps,
    // strictly increasing monotonic times, and the end line counting them.
    #[test]
    fn a_run_log_is_anchored_gapless_and_closed() {
        let dir = tempfile::tempdir().expect("dir");
        let log = RunLog::create(dir.path(), "r1").expect("create");
        for id in 1..=3 {
            log.invoke("writer-0", write(id));
            log.complete("writer-0", EventType::Fail, write(id));
        }
        let ended = log.end(None).expect("end");
        assert_eq!((ended.events, ended.last_seq, ended.unwritten), (6, 7, 0));
        log.invoke("writer-0", write(9));
        assert_eq!(
            log.end(None).expect("again").unwritten,
            1,
            "late event counted"
        );
        let lines = read_lines(log.path());
        assert_eq!(lines.len(), 8);
        assert!(matches!(lines[0], RunLine::Anchor(_)));
        let seqs: Vec<u64> = lines.iter().map(RunLine::seq).collect();
        assert_eq!(seqs, (0..8).collect::<Vec<_>>());
        let monos: Vec<u64> = lines
            .iter()
            .filter_map(|line| match line {
                RunLine::Event(event) => Some(event.mono_ns),
                RunLine::Anchor(_) | RunLine::End { .. } => None,
            })
            .collect();
        assert!(monos.windows(2).all(|pair| pair[0] < pair[1]), "{monos:?}");
        assert!(
            RunLog::create(dir.path(), "r1").is_err(),
            "ids are used once"
        );
        assert!(RunLog::create(dir.path(), "../x").is_err());
    }

    // A daemon that died mid-run leaves a log without an end (maybe with a cut last line): the
    // next daemon closes it as aborted.
    #[test]
    fn an_abandoned_run_is_closed_as_aborted() {
        let dir = tempfile::tempdir().expect("dir");
        let log = RunLog::create(dir.path(), "r2").expect("create");
        log.invoke("writer-0", write(1));
        let path = log.path().to_path_buf();
        drop(log);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        file.write_all(b"{\"seq\":2,\"proc").expect("cut line");
        let closed = close_abandoned(dir.path()).expect("close");
        assert_eq!(
            closed,
            vec![Abandoned {
                run: "r2".to_owned(),
                lines: 2,
                cut_bytes: 14
            }]
        );
        let lines = read_lines(&path);
        match lines.last() {
            Some(RunLine::End { seq: 2, end }) => {
                assert_eq!(end.events, 1);
                assert!(end
                    .aborted
                    .as_deref()
                    .is_some_and(|why| why.contains("cut")));
            }
            other => panic!("no end line: {other:?}"),
        }
        assert!(close_abandoned(dir.path()).expect("again").is_empty());
    }
}
