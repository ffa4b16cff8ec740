//! A scenario's history: pairing invocations with completions, and `history.jsonl`.

use std::io::Write as _;
use std::path::Path;

use super::event::{Event, EventType};
use crate::error::{Error, Result};

/// The histories longer than this many events are refused when read (a bound on memory).
pub const HISTORY_EVENTS_MAX: usize = 5_000_000;

/// An invocation and, if it completed, its completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operation<'a> {
    /// The invoke event.
    pub invoke: &'a Event,
    /// The completion (`None`: still open when the history ended, which counts as `info`).
    pub completion: Option<&'a Event>,
}

impl Operation<'_> {
    /// The completion type; an operation that never completed is `info`.
    pub fn outcome(&self) -> EventType {
        self.completion.map_or(EventType::Info, |event| event.kind)
    }

    /// Monotonic end, if it completed.
    pub fn end_ns(&self) -> Option<u64> {
        self.completion.map(|event| event.mono_ns)
    }
}

/// All events of one scenario, in the order they were recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    /// The events.
    pub events: Vec<Event>,
}

impl History {
    /// Wraps events.
    pub fn new(events: Vec<Event>) -> Self {
        Self { events }
    }

    /// The active site the last successful group status probe read (`None`: none read one).
    pub fn last_active_site(&self) -> Option<crate::scenario::model::Site> {
        self.events.iter().rev().find_map(|event| match &event.op {
            super::event::Op::Status {
                active_site: Some(site),
                ..
            } if event.kind == super::event::EventType::Ok => Some(*site),
            _ => None,
        })
    }

    /// Pairs each invoke with the next completion of the same process. A process may have
    /// one operation open at a time; anything else is a malformed history, named in the error.
    pub fn operations(&self) -> Result<Vec<Operation<'_>>, String> {
        let mut open: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
        let mut operations: Vec<Operation<'_>> = Vec::new();
        for (index, event) in self.events.iter().enumerate() {
            if event.kind.is_completion() {
                let Some(slot) = open.remove(event.process.as_str()) else {
                    return Err(format!(
                        "event {index}: {:?} completion from process `{}` with no open invoke",
                        event.kind, event.process
                    ));
                };
                if let Some(operation) = operations.get_mut(slot) {
                    operation.completion = Some(event);
                }
            } else {
                if open.contains_key(event.process.as_str()) {
                    return Err(format!(
                        "event {index}: process `{}` invokes while its previous operation is open",
                        event.process
                    ));
                }
                open.insert(event.process.as_str(), operations.len());
                operations.push(Operation {
                    invoke: event,
                    completion: None,
                });
            }
        }
        Ok(operations)
    }

    /// Serializes as JSON lines, one event a line.
    pub fn to_jsonl(&self) -> Result<String> {
        let mut out = String::new();
        for event in &self.events {
            let line = serde_json::to_string(event).map_err(|source| Error::Json {
                what: "history event",
                source,
            })?;
            out.push_str(&line);
            out.push('\n');
        }
        Ok(out)
    }

    /// Parses JSON lines; `path` only names the source in errors.
    pub fn from_jsonl(text: &str, path: &Path) -> Result<Self> {
        let mut events = Vec::new();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            if events.len() >= HISTORY_EVENTS_MAX {
                return Err(Error::HistoryLine {
                    path: path.to_path_buf(),
                    line: index + 1,
                    source: serde::de::Error::custom(format!(
                        "more than {HISTORY_EVENTS_MAX} events"
                    )),
                });
            }
            let event = serde_json::from_str(line).map_err(|source| Error::HistoryLine {
                path: path.to_path_buf(),
                line: index + 1,
                source,
            })?;
            events.push(event);
        }
        Ok(Self { events })
    }

    /// Writes `history.jsonl`.
    pub fn write(&self, path: &Path) -> Result<()> {
        let text = self.to_jsonl()?;
        let mut file = std::fs::File::create(path).map_err(|source| Error::Write {
            path: path.to_path_buf(),
            source,
        })?;
        file.write_all(text.as_bytes())
            .map_err(|source| Error::Write {
                path: path.to_path_buf(),
                source,
            })
    }

    /// Reads `history.jsonl`.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_jsonl(&text, path)
    }

    /// Maps an operator wall-clock time onto this history's monotonic axis, using the first
    /// event as the anchor (the harness and the operator share the machine's clock on both
    /// backends, so the skew is the clock's, not the network's).
    pub fn wall_to_mono_ns(&self, wall: jiff::Timestamp) -> Option<u64> {
        let anchor = self.events.first()?;
        let offset = wall.as_nanosecond() - anchor.wall.as_nanosecond();
        let mono = i128::from(anchor.mono_ns) + offset;
        u64::try_from(mono.max(0)).ok()
    }

    /// The monotonic time of the last event.
    pub fn end_ns(&self) -> u64 {
        self.events
            .iter()
            .map(|event| event.mono_ns)
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::event::Op;
    use crate::history::recorder::Recorder;
    use crate::scenario::model::Site;

    // The final read's maps keyed by id round-trip through history.jsonl (inside the
    // internally tagged `Op`, serde refused their text keys as numbers: `bloodraven-upgrade`
    // found the upgrade scenario's history "missing").
    #[test]
    fn the_final_reads_maps_keyed_by_id_round_trip_jsonl() {
        let recorder = Recorder::new();
        let op = Op::FinalState {
            sites: [(Site::Pdx, vec![1, 2])].into_iter().collect(),
            committed: [(7, Site::Iad)].into_iter().collect(),
            canaries: [(1_000_000_000_006, Site::Pdx)].into_iter().collect(),
        };
        recorder.invoke("final", op.clone());
        recorder.complete("final", EventType::Ok, op.clone());
        let history = recorder.snapshot();
        let text = history.to_jsonl().expect("jsonl");
        assert!(text.contains("\"1000000000006\":\"pdx\""), "{text}");
        let read = History::from_jsonl(&text, Path::new("history.jsonl")).expect("read back");
        assert_eq!(read.events.last().map(|event| &event.op), Some(&op));
    }

    // docs/design/harness.md#history-and-checkers: every operation is an invoke and a completion
    // with wall and monotonic times.
    #[test]
    fn recorder_pairs_operations_per_process_and_round_trips_jsonl() {
        let recorder = Recorder::new();
        recorder.invoke(
            "writer-0",
            Op::Write {
                id: 1,
                site: None,
                gtid: None,
                error: None,
            },
        );
        recorder.invoke(
            "writer-1",
            Op::Write {
                id: 2,
                site: None,
                gtid: None,
                error: None,
            },
        );
        recorder.complete(
            "writer-1",
            EventType::Ok,
            Op::Write {
                id: 2,
                site: Some(Site::Iad),
                gtid: None,
                error: None,
            },
        );
        recorder.complete(
            "writer-0",
            EventType::Info,
            Op::Write {
                id: 1,
                site: None,
                gtid: None,
                error: Some("timeout".to_owned()),
            },
        );
        recorder.invoke(
            "writer-0",
            Op::Write {
                id: 3,
                site: None,
                gtid: None,
                error: None,
            },
        );
        let history = recorder.snapshot();
        assert!(history
            .events
            .windows(2)
            .all(|pair| pair[0].mono_ns <= pair[1].mono_ns));
        let operations = history.operations().expect("well formed");
        let outcomes: Vec<(EventType, Option<u64>)> = operations
            .iter()
            .map(|operation| match operation.invoke.op {
                Op::Write { id, .. } => (operation.outcome(), Some(id)),
                _ => (operation.outcome(), None),
            })
            .collect();
        assert_eq!(
            outcomes,
            [
                (EventType::Info, Some(1)),
                (EventType::Ok, Some(2)),
                (EventType::Info, Some(3))
            ]
        );
        assert_eq!(operations[2].end_ns(), None, "still open: counts as info");
        let text = history.to_jsonl().expect("jsonl");
        assert_eq!(text.lines().count(), 5);
        assert!(text.lines().next().is_some_and(
            |line| line.contains("\"type\":\"invoke\"") && line.contains("\"f\":\"write\"")
        ));
        assert_eq!(
            History::from_jsonl(&text, Path::new("h.jsonl")).expect("parse"),
            history
        );
    }

    #[test]
    fn completion_without_invoke_is_malformed() {
        let recorder = Recorder::new();
        recorder.complete(
            "writer-0",
            EventType::Ok,
            Op::Write {
                id: 1,
                site: Some(Site::Iad),
                gtid: None,
                error: None,
            },
        );
        let error = recorder.snapshot().operations().expect_err("malformed");
        assert!(error.contains("no open invoke"), "{error}");
    }

    #[test]
    fn operator_wall_times_map_onto_the_monotonic_axis() {
        let recorder = Recorder::new();
        recorder.invoke(
            "status",
            Op::FinalState {
                sites: std::collections::BTreeMap::new(),
                committed: std::collections::BTreeMap::new(),
                canaries: std::collections::BTreeMap::new(),
            },
        );
        let history = recorder.snapshot();
        let anchor = &history.events[0];
        let later = anchor.wall + jiff::SignedDuration::from_millis(1500);
        assert_eq!(
            history.wall_to_mono_ns(later),
            Some(anchor.mono_ns + 1_500_000_000)
        );
        let long_before = anchor.wall - jiff::SignedDuration::from_secs(3600);
        assert_eq!(
            history.wall_to_mono_ns(long_before),
            Some(0),
            "clamped at the start"
        );
        assert_eq!(History::default().wall_to_mono_ns(later), None);
    }
}
