//! Workload liveness: the history proves something only if the workload was writing. A
//! scenario needs an acknowledged write before its first fault (the workload was up when the
//! faults began) and one invoked after its last heal (it came back); without faults, one at
//! all. Otherwise zero writes would pass every other checker.
//!
//! A history with a hole in it proves nothing either: every [`Op::WorkloadGap`] (lines of the
//! in-cluster workload's log that never arrived) is a finding, and so is a declared probe
//! ([`Op::Probing`]: the group's status, a shared Service's endpoints, the DNS answer, each
//! site's direct probe) that went more than [`PROBE_GAP_PERIODS_MAX`] periods without asking
//! after the first fault: the checkers that judge what it watches would judge a window nobody
//! saw. A site probe waiting on a frozen site within its declared bound is asking.

use super::observed::seconds;
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
    if let Some((_, at)) = first_fault {
        findings.extend(probe_gaps(history, at));
    }
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

/// A declared probe that went longer than this many of its periods without asking leaves a
/// hole.
pub const PROBE_GAP_PERIODS_MAX: u64 = 3;

/// One finding per probe declared by an [`Op::Probing`] whose consecutive questions lie more
/// than [`PROBE_GAP_PERIODS_MAX`] periods apart where the later one comes after `since_ns`
/// (the first fault); the widest gap of each is named. A probe that declared a bound on one
/// question (`answer_max_ms`: the site probes, which wait on a frozen site until it) counts a
/// gap from when its previous question ended, or reached that bound; waiting for an answer
/// within the bound is asking, not a hole.
pub fn probe_gaps(history: &History, since_ns: u64) -> Vec<String> {
    let mut declared: std::collections::BTreeMap<&str, (u64, Option<u64>)> =
        std::collections::BTreeMap::new();
    for event in &history.events {
        if let Op::Probing {
            processes,
            period_ms,
            answer_max_ms,
        } = &event.op
        {
            for process in processes {
                declared.insert(process.as_str(), (*period_ms, *answer_max_ms));
            }
        }
    }
    let mut findings = Vec::new();
    for (probe, (period_ms, answer_max_ms)) in declared {
        let bound_ns = period_ms
            .saturating_mul(PROBE_GAP_PERIODS_MAX)
            .saturating_mul(1_000_000);
        let gaps: Vec<(u64, u64)> = idle_spans(history, probe, answer_max_ms)
            .into_iter()
            .filter(|(from, to)| *to > since_ns && to - from > bound_ns)
            .collect();
        if let Some((from, to)) = gaps.iter().max_by_key(|(from, to)| to - from) {
            findings.push(format!(
                "probe `{probe}` went {:.3}s without asking (from {:.3}s to {:.3}s; {} gaps over {PROBE_GAP_PERIODS_MAX} periods of {period_ms} ms after the first fault): what it watches is unknown there",
                seconds(to - from),
                seconds(*from),
                seconds(*to),
                gaps.len(),
            ));
        }
    }
    findings
}

/// The spans during which `probe` was not asking: from each question's start (or, with a
/// bound on one question, its end, at most that bound after its start) to the next question's
/// start.
fn idle_spans(history: &History, probe: &str, answer_max_ms: Option<u64>) -> Vec<(u64, u64)> {
    // (invoke, completion) of each question, in time order.
    let mut questions: Vec<(u64, Option<u64>)> = Vec::new();
    for event in history.events.iter().filter(|event| event.process == probe) {
        if event.kind == EventType::Invoke {
            questions.push((event.mono_ns, None));
        } else if let Some(last) = questions.last_mut() {
            last.1.get_or_insert(event.mono_ns);
        }
    }
    questions.sort_unstable();
    questions
        .windows(2)
        .map(|pair| {
            let (start, end) = pair[0];
            let waited_ns = match answer_max_ms {
                None => 0,
                Some(max_ms) => {
                    let max_ns = max_ms.saturating_mul(1_000_000);
                    end.map_or(max_ns, |end| end.saturating_sub(start).min(max_ns))
                }
            };
            (start.saturating_add(waited_ns).min(pair[1].0), pair[1].0)
        })
        .collect()
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

/// The longest time, in ms, between two consecutive acknowledged writes of the history
/// (completion times): how long the workload went without a write getting through. `None`
/// with fewer than two acknowledged writes (nothing to measure between).
pub fn write_outage_ms(history: &History) -> Option<u64> {
    let mut acknowledged: Vec<u64> = history
        .events
        .iter()
        .filter(|event| event.kind == EventType::Ok && matches!(event.op, Op::Write { .. }))
        .map(|event| event.mono_ns)
        .collect();
    acknowledged.sort_unstable();
    acknowledged
        .windows(2)
        .map(|pair| pair[1].saturating_sub(pair[0]))
        .max()
        .map(|ns| ns / 1_000_000)
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

    fn write_ok(ms: u64, id: u64) -> Event {
        event("writer-0", EventType::Ok, write(id), ms)
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
    fn a_declared_probe_that_stopped_asking_after_the_first_fault_is_a_finding() {
        let status = |ms: u64| event("status", EventType::Invoke, Op::status_unknown(), ms);
        // Every 200 ms, then a 900 ms hole at 2.0 s, after the fault at 1.0 s.
        let mut events: Vec<Event> = (0..=10).map(|i| status(i * 200)).collect();
        events.extend((0..5).map(|i| status(2_900 + i * 200)));
        // Undeclared: a hand-built history's sparse readings are not a probe's gaps.
        assert!(probe_gaps(&History::new(events.clone()), 1_000_000_000).is_empty());
        events.push(event(
            "probes",
            EventType::Ok,
            Op::Probing {
                processes: vec!["status".to_owned(), "dns".to_owned()],
                period_ms: 200,
                answer_max_ms: None,
            },
            0,
        ));
        let history = History::new(events);
        let findings = probe_gaps(&history, 1_000 * 1_000_000);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert!(
            findings[0].starts_with(
                "probe `status` went 0.900s without asking (from 2.000s to 2.900s; 1 gaps"
            ),
            "{findings:?}"
        );
        // The same hole before the first fault judges nothing; a declared probe that never
        // asked (dns) has no gap between questions.
        assert!(probe_gaps(&history, 3_000 * 1_000_000).is_empty());
    }

    // harness/src/live/site_probes.rs: a site probe asks every 100 ms and waits on a frozen
    // site up to its bound (2 s); that wait is no hole, but a probe idle beyond three periods
    // after its answer (or after the bound) is.
    #[test]
    fn a_probe_waiting_within_its_declared_bound_is_still_asking() {
        let probe = |kind: EventType, ms: u64| {
            event(
                "site-probe-iad",
                kind,
                Op::SiteProbe {
                    site: crate::scenario::model::Site::Iad,
                    pod_ip: None,
                    canary_id: crate::history::event::CANARY_ID_BASE + ms,
                    answered: None,
                    read_only: None,
                    outcome: None,
                    error_code: None,
                    error: None,
                },
                ms,
            )
        };
        let declared = |answer_max_ms| {
            event(
                "probes",
                EventType::Ok,
                Op::Probing {
                    processes: vec!["site-probe-iad".to_owned()],
                    period_ms: 100,
                    answer_max_ms,
                },
                0,
            )
        };
        // Every 100 ms; at 1.0 s one question waits 2 s (a frozen site) and the next asks at
        // once; at 4.0 s one is answered at once and the next asks 0.5 s later.
        let mut events = Vec::new();
        let mut at = 0;
        while at < 6_000 {
            let took = if at == 1_000 { 2_000 } else { 5 };
            events.push(probe(EventType::Invoke, at));
            events.push(probe(EventType::Info, at + took));
            at += if at == 1_000 {
                2_010
            } else if at == 4_010 {
                500
            } else {
                100
            };
        }
        let mut bounded = events.clone();
        bounded.push(declared(Some(2_000)));
        let findings = probe_gaps(&History::new(bounded), 500 * 1_000_000);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert!(
            findings[0].starts_with(
                "probe `site-probe-iad` went 0.495s without asking (from 4.015s to 4.510s; 1 gaps"
            ),
            "{findings:?}"
        );
        // Undeclared bound: the 2 s wait counts as a hole too, as for the other probes.
        events.push(declared(None));
        let findings = probe_gaps(&History::new(events), 500 * 1_000_000);
        assert!(
            findings[0].starts_with(
                "probe `site-probe-iad` went 2.010s without asking (from 1.000s to 3.010s; 2 gaps"
            ),
            "{findings:?}"
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

    #[test]
    fn write_outage_is_the_longest_gap_between_acknowledged_writes() {
        let mut history = History::new(vec![write_ok(0, 1), write_ok(100, 2), write_ok(6_400, 3)]);
        // A failed write in the gap does not shorten it.
        let mut failed = write_ok(3_000, 4);
        failed.kind = EventType::Fail;
        history.events.push(failed);
        history.events.push(write_ok(6_500, 5));
        assert_eq!(write_outage_ms(&history), Some(6_300));
        assert_eq!(write_outage_ms(&History::new(vec![write_ok(5, 1)])), None);
    }
}
