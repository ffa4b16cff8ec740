//! Recording a history while a scenario runs: thread-safe, clocks read here only.

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use super::event::{Event, EventType, Op};
use super::store::History;

/// Appends events with wall and monotonic times. Shared by the workload, the probes and the
/// nemesis of one scenario.
#[derive(Debug)]
pub struct Recorder {
    start: Instant,
    events: Mutex<Vec<Event>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    /// Starts the monotonic axis now.
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            events: Mutex::new(Vec::new()),
        }
    }

    /// Monotonic nanoseconds since the recorder started (the history's time axis).
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Records an event of `process` now.
    pub fn record(&self, process: &str, kind: EventType, op: Op) {
        let mono_ns = self.now_ns();
        let event = Event {
            process: process.to_owned(),
            kind,
            op,
            wall: jiff::Timestamp::now(),
            mono_ns,
        };
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event);
    }

    /// Records an invocation.
    pub fn invoke(&self, process: &str, op: Op) {
        self.record(process, EventType::Invoke, op);
    }

    /// Records a completion.
    pub fn complete(&self, process: &str, kind: EventType, op: Op) {
        self.record(process, kind, op);
    }

    /// The history so far.
    pub fn snapshot(&self) -> History {
        History::new(
            self.events
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        )
    }
}
