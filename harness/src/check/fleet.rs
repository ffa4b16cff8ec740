//! The fleet checker (a fleet run, `install.fleet`): one operator runs many groups, and a fault
//! in one must leave the others alone. It demands that every read of the other groups found
//! each one's authority Valid (the fleet was all Valid before the steps started), and that the
//! fleet was read at all; its summary is the operator's cost over the run, from the first and
//! the last scrape of its metrics: CPU (share of one core), resident memory, requests to the
//! API server per second, and its polls' p50 and p99 over every group.

use std::collections::BTreeMap;

use super::observed::seconds;
use super::verdict::Verdict;
use crate::history::event::{EventType, Op};
use crate::history::store::History;
use crate::live::fleet::window_quantile_ms;

/// The checker's name.
pub const NAME: &str = "fleet";

/// The fleet checker's verdict, or `None` when the history is not a fleet run's.
pub fn check_fleet(history: &History) -> Option<Verdict> {
    let reads: Vec<(u64, u32, &Vec<String>)> = history
        .events
        .iter()
        .filter(|event| event.kind == EventType::Ok)
        .filter_map(|event| match &event.op {
            Op::Fleet { groups, not_valid } => Some((event.mono_ns, *groups, not_valid)),
            _ => None,
        })
        .collect();
    let costs: Vec<(u64, &Op)> = history
        .events
        .iter()
        .filter(|event| event.kind == EventType::Ok)
        .filter(|event| matches!(event.op, Op::OperatorCost { .. }))
        .map(|event| (event.mono_ns, &event.op))
        .collect();
    if reads.is_empty() && costs.is_empty() {
        return None;
    }
    let findings = findings(&reads);
    let groups = reads
        .iter()
        .map(|(_, groups, _)| *groups)
        .max()
        .unwrap_or(0);
    let cost = cost_summary(&costs);
    let summary = format!(
        "{groups} groups, {} reads of the others, every one Valid; operator: {cost}",
        reads.len(),
    );
    let mut verdict = Verdict::from_findings(NAME, summary, findings);
    if !verdict.valid {
        // The operator's cost is the bench's figure, failed or not.
        verdict.summary = format!("{}; operator: {cost}", verdict.summary);
    }
    Some(verdict)
}

/// One finding per group that was ever read not Valid: when first, and how often.
fn findings(reads: &[(u64, u32, &Vec<String>)]) -> Vec<String> {
    if reads.is_empty() {
        return vec!["the fleet was never read (its watcher recorded nothing)".to_owned()];
    }
    let mut seen: BTreeMap<&str, (u64, &str, usize)> = BTreeMap::new();
    for (at_ns, _, not_valid) in reads {
        for entry in not_valid.iter() {
            let (name, state) = entry.split_once(": ").unwrap_or((entry.as_str(), "?"));
            seen.entry(name)
                .and_modify(|(_, _, count)| *count += 1)
                .or_insert((*at_ns, state, 1));
        }
    }
    seen.into_iter()
        .map(|(name, (first_ns, state, count))| {
            format!(
                "{name}'s authority was {state} at {:.3}s ({count} of {} reads not Valid): a fault in one group reached another",
                seconds(first_ns),
                reads.len()
            )
        })
        .collect()
}

/// One scrape of the operator's cost.
struct Cost<'a> {
    at_ns: u64,
    cpu_ms: u64,
    rss_bytes: u64,
    kube_requests: u64,
    poll_buckets: &'a [(u64, u64)],
    groups_polled: u32,
}

impl<'a> Cost<'a> {
    fn of(at_ns: u64, op: &'a Op) -> Option<Self> {
        match op {
            Op::OperatorCost {
                cpu_ms,
                rss_bytes,
                kube_requests,
                poll_buckets,
                groups_polled,
            } => Some(Self {
                at_ns,
                cpu_ms: *cpu_ms,
                rss_bytes: *rss_bytes,
                kube_requests: *kube_requests,
                poll_buckets,
                groups_polled: *groups_polled,
            }),
            _ => None,
        }
    }
}

/// The operator's cost between its first and last scrape.
fn cost_summary(costs: &[(u64, &Op)]) -> String {
    let all: Vec<Cost<'_>> = costs
        .iter()
        .filter_map(|(at, op)| Cost::of(*at, op))
        .collect();
    let (Some(first), Some(last)) = (all.first(), all.last()) else {
        return "not scraped".to_owned();
    };
    let rss_max = all.iter().map(|cost| cost.rss_bytes).max().unwrap_or(0);
    let window_ms = last.at_ns.saturating_sub(first.at_ns) / 1_000_000;
    if window_ms == 0 {
        return format!("one scrape, RSS {} MiB", rss_max / (1024 * 1024));
    }
    #[allow(clippy::cast_precision_loss)]
    let per_second = |delta: u64| delta as f64 * 1000.0 / window_ms as f64;
    let quantile = |q: f64| {
        window_quantile_ms(first.poll_buckets, last.poll_buckets, q)
            .map_or_else(|| "> 10 s or none".to_owned(), |ms| format!("<= {ms} ms"))
    };
    #[allow(clippy::cast_precision_loss)]
    let seconds = window_ms as f64 / 1000.0;
    format!(
        "CPU {:.1}% of a core, {:.1} API requests/s, RSS max {} MiB, poll p50 {} p99 {} over {} groups, in the {seconds:.0} s between its first and last scrape",
        per_second(last.cpu_ms.saturating_sub(first.cpu_ms)) / 10.0,
        per_second(last.kube_requests.saturating_sub(first.kube_requests)),
        rss_max / (1024 * 1024),
        quantile(0.5),
        quantile(0.99),
        last.groups_polled,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::event::Event;

    fn event(ms: u64, kind: EventType, op: Op) -> Event {
        Event {
            process: "fleet".to_owned(),
            kind,
            op,
            wall: jiff::Timestamp::UNIX_EPOCH,
            mono_ns: ms * 1_000_000,
        }
    }

    fn cost(cpu_ms: u64, kube_requests: u64, rss_bytes: u64) -> Op {
        // Cumulative polls, 100 more per 1,000 ms of CPU: 98 of at most 10 ms, 2 of at most
        // 50 ms, so a window's p50 is 10 ms and its p99 50 ms.
        let scale = cpu_ms / 1_000;
        Op::OperatorCost {
            cpu_ms,
            rss_bytes,
            kube_requests,
            poll_buckets: vec![
                (10_000, 98 * scale),
                (50_000, 100 * scale),
                (u64::MAX, 100 * scale),
            ],
            groups_polled: 10,
        }
    }

    fn read(not_valid: &[&str]) -> Op {
        Op::Fleet {
            groups: 10,
            not_valid: not_valid.iter().map(|name| (*name).to_owned()).collect(),
        }
    }

    #[test]
    fn a_fleet_all_valid_passes_with_the_operator_s_cost() {
        let history = History::new(vec![
            event(0, EventType::Ok, cost(1_000, 100, 50 << 20)),
            event(1_000, EventType::Ok, read(&[])),
            event(2_000, EventType::Ok, read(&[])),
            event(10_000, EventType::Ok, cost(2_000, 600, 60 << 20)),
        ]);
        let verdict = check_fleet(&history).expect("a fleet run");
        assert!(verdict.valid, "{verdict:?}");
        assert_eq!(
            verdict.summary,
            "10 groups, 2 reads of the others, every one Valid; operator: CPU 10.0% of a core, 50.0 API requests/s, RSS max 60 MiB, poll p50 <= 10 ms p99 <= 50 ms over 10 groups, in the 10 s between its first and last scrape"
        );
    }

    /// The watcher's events pair up (an invoke, then its completion), so the other checkers
    /// can read a fleet run's history; a failed scrape counts for nothing.
    #[test]
    fn a_fleet_history_is_well_formed_and_failed_scrapes_are_left_out() {
        let invoke = |ms: u64, op: Op| event(ms, EventType::Invoke, op);
        let mut events = vec![
            invoke(0, Op::operator_cost_unknown()),
            event(5, EventType::Ok, cost(1_000, 100, 50 << 20)),
            invoke(10, Op::fleet_unknown()),
            event(20, EventType::Ok, read(&[])),
            invoke(9_000, Op::operator_cost_unknown()),
            event(9_500, EventType::Fail, Op::operator_cost_unknown()),
        ];
        events[4].process = "operator-cost".to_owned();
        events[5].process = "operator-cost".to_owned();
        events[0].process = "operator-cost".to_owned();
        events[1].process = "operator-cost".to_owned();
        let history = History::new(events);
        assert!(
            history.operations().is_ok(),
            "{:?}",
            history.operations().err()
        );
        let verdict = check_fleet(&history).expect("a fleet run");
        assert!(verdict.valid, "{verdict:?}");
        assert!(
            verdict.summary.contains("one scrape"),
            "{}",
            verdict.summary
        );
    }

    #[test]
    fn another_group_not_valid_is_a_finding() {
        let history = History::new(vec![
            event(1_000, EventType::Ok, read(&[])),
            event(2_000, EventType::Ok, read(&["fleet-03: Invalid"])),
            event(
                3_000,
                EventType::Ok,
                read(&["fleet-03: Invalid", "fleet-07: none"]),
            ),
            event(4_000, EventType::Fail, read(&["fleet-09: Invalid"])),
        ]);
        let verdict = check_fleet(&history).expect("a fleet run");
        assert!(!verdict.valid);
        assert!(
            verdict
                .summary
                .ends_with("(and 1 more); operator: not scraped"),
            "{}",
            verdict.summary
        );
        assert_eq!(
            verdict.findings,
            [
                "fleet-03's authority was Invalid at 2.000s (2 of 3 reads not Valid): a fault in one group reached another",
                "fleet-07's authority was none at 3.000s (1 of 3 reads not Valid): a fault in one group reached another",
            ]
        );
    }

    #[test]
    fn no_fleet_no_verdict_and_a_silent_watcher_is_a_finding() {
        assert_eq!(check_fleet(&History::new(Vec::new())), None);
        let scraped_only = History::new(vec![event(0, EventType::Ok, cost(1, 1, 1))]);
        let verdict = check_fleet(&scraped_only).expect("a fleet run");
        assert!(!verdict.valid);
        assert!(verdict.summary.contains("never read"), "{verdict:?}");
    }
}
