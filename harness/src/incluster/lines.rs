//! The lines of a run's log, `runs/<run>.jsonl` (one JSON object a line, `seq` from 0
//! without gaps):
//!
//! ```text
//! {"seq":0,"anchor":{"wall":"2026-12-01T10:00:00.000000001Z","monoNs":0}}
//! {"seq":1,"process":"writer-0","type":"invoke","op":{"f":"write","id":1},"wall":"...","monoNs":1200}
//! ...
//! {"seq":N+1,"end":{"events":N,"unwritten":0}}
//! ```
//!
//! The anchor is the pod's wall clock when its monotonic clock read 0 (the run's start); every
//! event carries both clocks; the end line closes the run after its last in-flight operation
//! completed. Parsing is pure; a line that does not parse names why.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::history::event::{EventType, Op};

/// The first line of a run: where the pod's monotonic clock (`monoNs`) meets its wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Anchor {
    /// The pod's wall clock at the run's start.
    pub wall: jiff::Timestamp,
    /// Always 0: the run's monotonic clock starts here.
    pub mono_ns: u64,
}

/// One event of the run, on the pod's clocks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventLine {
    /// Its line's sequence number.
    pub seq: u64,
    /// The process (`writer-0`, `reader-primary`, `dns`, ...).
    pub process: String,
    /// invoke | ok | fail | info.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// What it is about (the history's [`Op`]).
    pub op: Op,
    /// The pod's wall clock.
    pub wall: jiff::Timestamp,
    /// The pod's monotonic clock since the run started, strictly increasing with `seq`.
    pub mono_ns: u64,
}

/// The last line of a run, written once every in-flight operation completed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct End {
    /// Events written (the lines between the anchor and this one).
    pub events: u64,
    /// Events the daemon failed to write (a full disk, ...): each is missing from the log.
    #[serde(default)]
    pub unwritten: u64,
    /// Why the run ended other than by `stop` (the daemon was terminated or restarted), or
    /// why events went unwritten.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted: Option<String>,
}

/// A line of a run's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunLine {
    /// Line 0.
    Anchor(Anchor),
    /// An event (boxed: it is most of a line's size).
    Event(Box<EventLine>),
    /// The last line, with its seq.
    End {
        /// Its sequence number (events + 1).
        seq: u64,
        /// What it says.
        end: End,
    },
}

impl RunLine {
    /// The line's sequence number.
    pub fn seq(&self) -> u64 {
        match self {
            RunLine::Anchor(_) => 0,
            RunLine::Event(event) => event.seq,
            RunLine::End { seq, .. } => *seq,
        }
    }

    /// The line as written to the log (no newline).
    pub fn to_json(&self) -> String {
        let value = match self {
            RunLine::Anchor(anchor) => serde_json::json!({"seq": 0, "anchor": anchor}),
            RunLine::Event(event) => serde_json::to_value(event).unwrap_or(Value::Null),
            RunLine::End { seq, end } => serde_json::json!({"seq": seq, "end": end}),
        };
        value.to_string()
    }
}

/// Parses one line of a run's log (without its newline).
pub fn parse_line(line: &str) -> Result<RunLine, String> {
    let value: Value =
        serde_json::from_str(line).map_err(|e| format!("not a JSON object ({e}): {line:.120}"))?;
    let seq = value
        .get("seq")
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("no `seq` number: {line:.120}"))?;
    if let Some(anchor) = value.get("anchor") {
        if seq != 0 {
            return Err(format!("an anchor at seq {seq}, not 0"));
        }
        return serde_json::from_value(anchor.clone())
            .map(RunLine::Anchor)
            .map_err(|e| format!("line {seq}: bad anchor: {e}"));
    }
    if let Some(end) = value.get("end") {
        return serde_json::from_value(end.clone())
            .map(|end| RunLine::End { seq, end })
            .map_err(|e| format!("line {seq}: bad end: {e}"));
    }
    if seq == 0 {
        return Err("line 0 is not the anchor".to_owned());
    }
    serde_json::from_value(value)
        .map(|event| RunLine::Event(Box::new(event)))
        .map_err(|e| format!("line {seq}: bad event: {e}"))
}

/// The `seq` of a line, read without parsing the rest (`follow` skips lines before `--from`).
pub fn seq_of(line: &str) -> Option<u64> {
    #[derive(Deserialize)]
    struct Seq {
        seq: u64,
    }
    serde_json::from_str::<Seq>(line).ok().map(|s| s.seq)
}

/// Splits a byte stream into lines: bytes up to each newline are a line; what follows the
/// last newline waits for more. A stream that breaks mid-line leaves that fragment
/// unreturned ([`LineBuffer::into_fragment`]), so its line counts as missing, never as a
/// truncated event.
#[derive(Debug, Default)]
pub struct LineBuffer {
    partial: Vec<u8>,
}

/// The longest line accepted: far above any event (an op is a few hundred bytes).
pub const LINE_BYTES_MAX: usize = 1 << 20;

impl LineBuffer {
    /// Appends `bytes`, returning the lines they completed (lossy UTF-8; a line longer than
    /// [`LINE_BYTES_MAX`] is returned as an error in its place).
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Result<String, String>> {
        let mut out = Vec::new();
        for chunk in bytes.split_inclusive(|byte| *byte == b'\n') {
            if let Some(line) = chunk.strip_suffix(b"\n") {
                self.partial.extend_from_slice(line);
                let whole = std::mem::take(&mut self.partial);
                if whole.len() > LINE_BYTES_MAX {
                    out.push(Err(format!(
                        "a line of {} bytes, more than {LINE_BYTES_MAX}",
                        whole.len()
                    )));
                } else {
                    out.push(Ok(String::from_utf8_lossy(&whole).into_owned()));
                }
            } else {
                self.partial.extend_from_slice(chunk);
                if self.partial.len() > LINE_BYTES_MAX {
                    // Keep only a marker that the line is over-long: its end is discarded too.
                    self.partial.truncate(LINE_BYTES_MAX + 1);
                }
            }
        }
        out
    }

    /// What followed the last newline when the stream ended: a line cut short.
    pub fn into_fragment(self) -> Option<String> {
        (!self.partial.is_empty()).then(|| String::from_utf8_lossy(&self.partial).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64) -> RunLine {
        RunLine::Event(Box::new(EventLine {
            seq,
            process: "writer-0".to_owned(),
            kind: EventType::Invoke,
            op: Op::Write {
                id: seq,
                site: None,
                gtid: None,
                error: None,
            },
            wall: jiff::Timestamp::UNIX_EPOCH,
            mono_ns: seq * 10,
        }))
    }

    // The log's line format (module docs): each kind of line round-trips, with `monoNs` and
    // `type` spelled as the pod writes them.
    #[test]
    fn lines_round_trip() {
        let anchor = RunLine::Anchor(Anchor {
            wall: jiff::Timestamp::UNIX_EPOCH,
            mono_ns: 0,
        });
        let end = RunLine::End {
            seq: 2,
            end: End {
                events: 1,
                unwritten: 0,
                aborted: None,
            },
        };
        for line in [anchor, event(1), end] {
            let text = line.to_json();
            assert_eq!(parse_line(&text), Ok(line.clone()), "{text}");
            assert_eq!(seq_of(&text), Some(line.seq()));
        }
        let text = event(1).to_json();
        assert!(text.contains("\"monoNs\":10") && text.contains("\"type\":\"invoke\""));
    }

    #[test]
    fn bad_lines_say_why() {
        assert!(parse_line("{\"seq\":").is_err());
        assert!(parse_line("{\"process\":\"x\"}")
            .expect_err("no seq")
            .contains("seq"));
        assert!(parse_line(
            "{\"seq\":3,\"anchor\":{\"wall\":\"1970-01-01T00:00:00Z\",\"monoNs\":0}}"
        )
        .expect_err("anchor not first")
        .contains("not 0"));
        assert!(parse_line("{\"seq\":4,\"process\":\"x\"}")
            .expect_err("bad event")
            .contains("line 4"));
    }

    // A stream that breaks mid-line: the cut line is not returned; the lines before it are.
    #[test]
    fn a_stream_cut_mid_line_keeps_the_fragment_apart() {
        let one = event(1).to_json();
        let two = event(2).to_json();
        let mut buffer = LineBuffer::default();
        let stream = format!("{one}\n{two}");
        let (first, second) = stream.as_bytes().split_at(one.len() / 2);
        assert!(buffer.push(first).is_empty());
        let lines = buffer.push(&second[..second.len() - 5]);
        assert_eq!(lines, vec![Ok(one)]);
        let fragment = buffer.into_fragment().expect("the cut line");
        assert!(parse_line(&fragment).is_err(), "a fragment is not an event");
    }
}
