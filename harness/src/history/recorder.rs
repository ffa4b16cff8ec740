//! Recording a history while a scenario runs: thread-safe, clocks read here only (events the
//! in-cluster workload recorded on its pod's clocks arrive through [`Recorder::record_at`]).

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use super::event::{Event, EventType, Op};
use super::store::History;

/// Appends events with wall and monotonic times. Shared by the workload, the probes and the
/// nemesis of one scenario.
#[derive(Debug)]
pub struct Recorder {
    start: Instant,
    /// The wall-clock time read together with `start`: where wall times from elsewhere (the
    /// workload pod's) meet the monotonic axis.
    start_wall: jiff::Timestamp,
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
            start_wall: jiff::Timestamp::now(),
            events: Mutex::new(Vec::new()),
        }
    }

    /// Monotonic nanoseconds since the recorder started (the history's time axis).
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Where the wall-clock time `wall` falls on the monotonic axis, in nanoseconds: negative
    /// before the recorder started. Read once per clock source (the in-cluster workload maps
    /// its run's anchor with it) so that intervals measured on that source's own monotonic
    /// clock are kept as they are.
    pub fn mono_at_wall(&self, wall: jiff::Timestamp) -> i128 {
        wall.as_nanosecond() - self.start_wall.as_nanosecond()
    }

    /// Records an event of `process` now.
    pub fn record(&self, process: &str, kind: EventType, op: Op) {
        let mono_ns = self.now_ns();
        self.record_at(process, kind, op, jiff::Timestamp::now(), mono_ns);
    }

    /// Records an event that happened elsewhere at `wall` (that clock's reading) and `mono_ns`
    /// on this recorder's axis. It may arrive after later events: [`Recorder::snapshot`]
    /// orders by `mono_ns`.
    pub fn record_at(
        &self,
        process: &str,
        kind: EventType,
        op: Op,
        wall: jiff::Timestamp,
        mono_ns: u64,
    ) {
        let event = Event {
            process: process.to_owned(),
            kind,
            op,
            wall,
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

    /// The history so far, ordered by monotonic time (a stable sort: events of equal time
    /// keep the order they were recorded in, so an invoke stays before its completion).
    /// Events recorded late ([`Recorder::record_at`]) take their place on the axis; the
    /// checkers read the history in this order.
    pub fn snapshot(&self) -> History {
        let mut events = self
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        events.sort_by_key(|event| event.mono_ns);
        History::new(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::model::SharedService;

    fn read(max_id: Option<u64>) -> Op {
        Op::Read {
            via: SharedService::Primary,
            site: None,
            max_id,
        }
    }

    // docs/design/harness.md#history-and-checkers: the in-cluster workload's events arrive
    // after the harness's own; the history the checkers read is ordered by monotonic time, and
    // an invoke and completion recorded at the same instant keep their order.
    #[test]
    fn late_events_take_their_place_on_the_monotonic_axis() {
        let recorder = Recorder::new();
        let wall = jiff::Timestamp::UNIX_EPOCH;
        recorder.record_at("nemesis", EventType::Invoke, read(None), wall, 500);
        recorder.record_at("nemesis", EventType::Ok, read(None), wall, 600);
        recorder.record_at("reader", EventType::Invoke, read(None), wall, 100);
        recorder.record_at("reader", EventType::Ok, read(Some(7)), wall, 100);
        let history = recorder.snapshot();
        let order: Vec<(&str, u64)> = history
            .events
            .iter()
            .map(|event| (event.process.as_str(), event.mono_ns))
            .collect();
        assert_eq!(
            order,
            [
                ("reader", 100),
                ("reader", 100),
                ("nemesis", 500),
                ("nemesis", 600)
            ]
        );
        assert_eq!(
            history.events[0].kind,
            EventType::Invoke,
            "stable: invoke first"
        );
        let operations = history.operations().expect("well formed");
        assert_eq!(operations.len(), 2);
    }

    #[test]
    fn a_wall_time_maps_onto_the_axis_through_the_start_wall() {
        let recorder = Recorder::new();
        let later = recorder.start_wall + jiff::SignedDuration::from_millis(250);
        assert_eq!(recorder.mono_at_wall(later), 250_000_000);
        let before = recorder.start_wall - jiff::SignedDuration::from_secs(1);
        assert_eq!(recorder.mono_at_wall(before), -1_000_000_000);
    }
}
