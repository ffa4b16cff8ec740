//! What the checkers share about a history: the failovers and restores the status snapshots
//! showed, their names in findings, the operator's clock mapped onto the history's monotonic
//! axis and the slack allowed between the two, and times for messages.
//!
//! The one low module of [`crate::check`]: every checker may import it (with
//! [`super::gtid`] and [`super::verdict`]); it imports no checker, so checkers never import
//! each other to share a helper.

use std::collections::BTreeMap;

use crate::history::event::{EventType, FailoverKind, FailoverRecord, Op, RestoreRecord};
use crate::history::store::History;

/// Slack allowed when an operator time is compared with a harness observation: the two
/// clocks are the same machine's and status times have millisecond precision, but the
/// operator stamps a phase when it plans it, not when the harness can see it.
pub const CROSS_CLOCK_SLACK_NS: u64 = 1_000_000_000;

/// The distinct failovers seen in status snapshots (keyed by `startedAt`), each at its latest
/// observation, in order of `startedAt`.
pub fn observed_failovers(history: &History) -> Vec<FailoverRecord> {
    let mut by_start: BTreeMap<jiff::Timestamp, FailoverRecord> = BTreeMap::new();
    for event in &history.events {
        if event.kind != EventType::Ok {
            continue;
        }
        // The gtid-state read after the final state reads the same status, later: the only
        // read of an exact count that arrives after the status poller stopped.
        let record = match &event.op {
            Op::Status {
                last_failover: Some(record),
                ..
            }
            | Op::GtidState {
                last_failover: Some(record),
                ..
            } => record,
            _ => continue,
        };
        by_start.insert(record.started_at, record.clone());
    }
    by_start.into_values().collect()
}

/// The distinct restores in place seen in status snapshots that re-promoted their site (keyed
/// by `requestedAt`), each at its latest observation, in order.
pub fn observed_restores(history: &History) -> Vec<RestoreRecord> {
    let mut by_request: BTreeMap<jiff::Timestamp, RestoreRecord> = BTreeMap::new();
    for event in &history.events {
        if event.kind != EventType::Ok {
            continue;
        }
        if let Op::Status {
            restore: Some(record),
            ..
        } = &event.op
        {
            if record.promoted_at.is_some() {
                by_request.insert(record.requested_at, (**record).clone());
            }
        }
    }
    by_request.into_values().collect()
}

/// A failover's name in findings (`emergency failover iad -> pdx`).
pub fn failover_label(record: &FailoverRecord) -> String {
    format!(
        "{} failover {} -> {}",
        match record.kind {
            FailoverKind::Emergency => "emergency",
            FailoverKind::Planned => "planned",
        },
        record.from,
        record.to
    )
}

/// An operator time (`None`: not stamped) on `history`'s monotonic axis.
pub fn mono_ns(history: &History, time: Option<jiff::Timestamp>) -> Option<u64> {
    time.and_then(|at| history.wall_to_mono_ns(at))
}

/// Nanoseconds as seconds, for messages.
pub fn seconds(ns: u64) -> f64 {
    // Precision loss is irrelevant for display.
    #[allow(clippy::cast_precision_loss)]
    let value = ns as f64 / 1e9;
    value
}
