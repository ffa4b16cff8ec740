//! Workload liveness: the history proves something only if the workload was writing. A
//! scenario needs an acknowledged write before its first fault (the workload was up when the
//! faults began) and one invoked after its last heal (it came back); without faults, one at
//! all. Otherwise zero writes would pass every other checker.
//!
//! A history with a hole in it proves nothing either: every [`Op::WorkloadGap`] (lines of the
//! in-cluster workload's log that never arrived) is a finding.

use super::split_brain::seconds;
use super::verdict::Verdict;
use crate::history::event::{EventType, FaultPhase, Op};
use crate::history::store::History;

/// Runs the checker.
pub fn check_liveness(history: &History) -> Verdict {
    const NAME: &str = "workload liveness";
    let operations = match history.operations() {
        Ok(operations) => operations,
        Err(malformed) => {
            return Verdict::from_findings(
                NAME,
                String::new(),
                vec![format!("malformed history: {malformed}")],
            )
        }
    };
    // (invoke, completion) of every acknowledged write.
    let acknowledged: Vec<(u64, u64)> = operations
        .iter()
        .filter(|operation| matches!(operation.invoke.op, Op::Write { .. }))
        .filter(|operation| operation.outcome() == EventType::Ok)
        .filter_map(|operation| Some((operation.invoke.mono_ns, operation.end_ns()?)))
        .collect();
    let faults: Vec<(&str, FaultPhase, u64)> = operations
        .iter()
        .filter_map(|operation| match &operation.invoke.op {
            Op::Fault { name, phase, .. } => Some((
                name.as_str(),
                *phase,
                operation.end_ns().unwrap_or(operation.invoke.mono_ns),
            )),
            _ => None,
        })
        .collect();
    let first_fault = operations
        .iter()
        .find_map(|operation| match &operation.invoke.op {
            Op::Fault {
                name,
                phase: FaultPhase::Start,
                ..
            } => Some((name.as_str(), operation.invoke.mono_ns)),
            _ => None,
        });
    // The last heal (a fault's end); with one-shot faults only, the last fault.
    let last_heal = faults
        .iter()
        .rev()
        .find(|(_, phase, _)| *phase == FaultPhase::End)
        .or_else(|| faults.last())
        .map(|(name, _, at)| (*name, *at));
    let mut findings = workload_gaps(history);
    match first_fault {
        None if acknowledged.is_empty() => {
            findings.push("no write was acknowledged at all: the workload never ran".to_owned());
        }
        None => {}
        Some((name, at)) if !acknowledged.iter().any(|(_, end)| *end <= at) => {
            findings.push(format!(
                "no write was acknowledged before the first fault (`{name}` at {:.3}s): the workload was not running when the faults began",
                seconds(at)
            ));
        }
        Some(_) => {}
    }
    if let Some((name, at)) = last_heal {
        if !acknowledged.iter().any(|(start, _)| *start >= at) {
            findings.push(format!(
                "no write was acknowledged after the last heal (`{name}` at {:.3}s): writes never came back",
                seconds(at)
            ));
        }
    }
    Verdict::from_findings(
        NAME,
        format!(
            "{} acknowledged writes, before the first fault and after the last heal",
            acknowledged.len()
        ),
        findings,
    )
}

/// One finding per [`Op::WorkloadGap`] of the history (its completion; an invoke alone is
/// enough, so a gap is never lost to a malformed pairing).
fn workload_gaps(history: &History) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    history
        .events
        .iter()
        .filter_map(|event| match &event.op {
            Op::WorkloadGap {
                run,
                missing,
                missing_count,
                reason,
            } => Some((run, missing, missing_count, reason)),
            _ => None,
        })
        .filter(|key| seen.insert(*key))
        .map(|(run, missing, missing_count, reason)| {
            let which = if missing.is_empty() {
                String::new()
            } else {
                format!(" (seq {missing})")
            };
            format!(
                "the in-cluster workload's log of run `{run}` is incomplete: {missing_count} lines missing{which}: {reason}; the history cannot show what those operations did"
            )
        })
        .collect()
}

/// The longest the workload went without an acknowledged write from the first fault's start
/// until `until_ns`: the widest interval between consecutive write completions, counting
/// the fault's start and `until_ns` as ends (a scenario that wants no failover and only a
/// short fence bounds this, where `write-outage` would measure to a promotion). `None`
/// without a fault or with a malformed history.
pub fn longest_write_gap_ns(history: &History, until_ns: u64) -> Option<u64> {
    let operations = history.operations().ok()?;
    let first_fault = operations
        .iter()
        .find_map(|operation| match &operation.invoke.op {
            Op::Fault {
                phase: FaultPhase::Start,
                ..
            } => Some(operation.end_ns().unwrap_or(operation.invoke.mono_ns)),
            _ => None,
        })?;
    let mut completions: Vec<u64> = operations
        .iter()
        .filter(|operation| matches!(operation.invoke.op, Op::Write { .. }))
        .filter(|operation| operation.outcome() == EventType::Ok)
        .filter_map(|operation| operation.end_ns())
        .filter(|end| *end > first_fault && *end <= until_ns)
        .collect();
    completions.sort_unstable();
    let mut widest = 0;
    let mut previous = first_fault;
    for end in completions.into_iter().chain(std::iter::once(until_ns)) {
        widest = widest.max(end.saturating_sub(previous));
        previous = end;
    }
    Some(widest)
}

#[cfg(test)]
mod gap_tests {
    use super::*;
    use crate::history::event::Event;

    fn event(process: &str, kind: EventType, op: Op, ms: u64) -> Event {
        Event {
            process: process.to_owned(),
            kind,
            op,
            wall: jiff::Timestamp::UNIX_EPOCH,
            mono_ns: ms * 1_000_000,
        }
    }

    fn write(id: u64) -> Op {
        Op::Write {
            id,
            site: None,
            gtid: None,
            error: None,
        }
    }

    fn fault(phase: FaultPhase) -> Op {
        Op::Fault {
            name: "clock-offset".to_owned(),
            phase,
            detail: String::new(),
            sites: Vec::new(),
        }
    }

    #[test]
    fn the_widest_gap_between_acknowledged_writes_after_the_first_fault_counts() {
        let mut events = vec![
            event("writer", EventType::Invoke, write(1), 0),
            event("writer", EventType::Ok, write(1), 10),
            event("nemesis", EventType::Invoke, fault(FaultPhase::Start), 100),
            event("nemesis", EventType::Ok, fault(FaultPhase::Start), 110),
        ];
        // Writes every 200 ms, one failing (a fence), one 1.4 s hole.
        for (id, start, kind) in [
            (2, 150, EventType::Ok),
            (3, 350, EventType::Fail),
            (4, 550, EventType::Ok),
            (5, 1_950, EventType::Ok),
            (6, 2_150, EventType::Ok),
        ] {
            events.push(event("writer", EventType::Invoke, write(id), start));
            events.push(event("writer", kind, write(id), start + 20));
        }
        let history = History::new(events);
        assert_eq!(
            longest_write_gap_ns(&history, 2_300 * 1_000_000),
            Some(1_400 * 1_000_000)
        );
        // Nothing acknowledged since: the gap runs to `until`.
        assert_eq!(
            longest_write_gap_ns(&history, 5_000 * 1_000_000),
            Some((5_000 - 2_170) * 1_000_000)
        );
    }

    // docs/design/harness.md#history-and-checkers: a history with lines of the in-cluster
    // workload's log missing fails the workload liveness checker, even when the writes it did
    // receive would pass.
    #[test]
    fn a_workload_gap_fails_liveness() {
        let recorder = crate::history::recorder::Recorder::new();
        let wall = jiff::Timestamp::UNIX_EPOCH;
        recorder.record_at("writer-0", EventType::Invoke, write(1), wall, 10);
        recorder.record_at("writer-0", EventType::Ok, write(1), wall, 20);
        let healthy = check_liveness(&recorder.snapshot());
        assert!(healthy.valid, "{healthy:?}");
        let gap = Op::WorkloadGap {
            run: "s020-1".to_owned(),
            missing: "5-7".to_owned(),
            missing_count: 3,
            reason: "the follow stream broke twice".to_owned(),
        };
        recorder.invoke("workload-log", gap.clone());
        recorder.complete("workload-log", EventType::Fail, gap);
        let verdict = check_liveness(&recorder.snapshot());
        assert!(!verdict.valid);
        assert_eq!(
            verdict.findings.len(),
            1,
            "one gap, one finding: {verdict:?}"
        );
        assert!(
            verdict
                .summary
                .contains("run `s020-1` is incomplete: 3 lines missing (seq 5-7)"),
            "{}",
            verdict.summary
        );
    }

    #[test]
    fn without_a_fault_there_is_no_gap_to_measure() {
        let history = History::new(vec![
            event("writer", EventType::Invoke, write(1), 0),
            event("writer", EventType::Ok, write(1), 10),
        ]);
        assert_eq!(longest_write_gap_ns(&history, 1_000_000_000), None);
    }
}
