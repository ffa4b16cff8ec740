//! Checkers over hand-built histories (Jepsen's model), including histories that must fail
//! each checker (harness.md "History and checkers").

mod support;

use bloodraven_harness::check::expectations::{
    check_expectations, ExpectMode, ExpectationResult, MeasureResult,
};
use bloodraven_harness::check::rpo::check_rpo;
use bloodraven_harness::check::split_brain::check_split_brain;
use bloodraven_harness::check::timings::check_timings;
use bloodraven_harness::history::event::{EventType, FailoverKind};
use bloodraven_harness::history::store::History;
use bloodraven_harness::scenario::model::{Quantity, Site};
use proptest::prelude::*;
use support::{emergency, failover, Builder};

// ---- no split brain ----

#[test]
fn split_brain_passes_when_sites_take_turns() {
    let history = emergency(&[], Some(0), true);
    let verdict = check_split_brain(&history);
    assert!(verdict.valid, "{verdict:?}");
    assert!(
        verdict.summary.contains("200 acknowledged writes"),
        "{}",
        verdict.summary
    );
}

#[test]
fn split_brain_fails_on_overlapping_acknowledgements() {
    // iad acknowledges a write in [10.0s, 10.5s] while pdx acknowledges one in [10.2s, 10.3s].
    let history = Builder::default()
        .ok("writer-0", 1, 10_000, 10_500, Site::Iad)
        .ok("writer-1", 2, 10_200, 10_300, Site::Pdx)
        .build();
    let verdict = check_split_brain(&history);
    assert!(!verdict.valid);
    assert!(
        verdict.summary.contains("iad acknowledged write 1")
            && verdict.summary.contains("pdx acknowledged write 2"),
        "{}",
        verdict.summary
    );
}

#[test]
fn split_brain_ignores_unacknowledged_writes_but_flags_unattributed_ones() {
    let history = Builder::default()
        .ok("writer-0", 1, 0, 500, Site::Iad)
        .write("writer-1", 2, 100, 600, EventType::Info, None)
        .write("writer-2", 3, 100, 600, EventType::Fail, None)
        .build();
    assert!(check_split_brain(&history).valid);
    let history = Builder::default()
        .write("writer-0", 9, 0, 10, EventType::Ok, None)
        .build();
    let verdict = check_split_brain(&history);
    assert!(
        !verdict.valid && verdict.summary.contains("without naming its site"),
        "{verdict:?}"
    );
}

#[test]
fn malformed_history_fails_every_checker() {
    let mut history = Builder::default()
        .ok("writer-0", 1, 0, 10, Site::Iad)
        .build();
    let mut duplicate = history.events[0].clone();
    duplicate.mono_ns = 1;
    history.events.insert(1, duplicate); // two invokes of one process
    assert!(!check_split_brain(&history).valid);
    assert!(!check_rpo(&history).1.valid);
    assert!(!check_timings(&history).1.valid);
}

proptest! {
    // Sites that take turns (each epoch ends before the next begins) never split-brain,
    // however the epochs and writes are laid out.
    #[test]
    fn taking_turns_never_split_brains(epochs in proptest::collection::vec((0usize..3, 1u64..20, 1u64..50), 1..12)) {
        let mut builder = Builder::default();
        let mut at = 0;
        let mut id = 0;
        for (site_index, count, latency) in epochs {
            let site = Site::ALL[site_index];
            for _ in 0..count {
                builder = builder.ok("writer-0", id, at, at + latency, site);
                id += 1;
                at += latency + 1;
            }
            at += 100;
        }
        prop_assert!(check_split_brain(&builder.build()).valid);
    }

    // One overlapping acknowledgement from another site anywhere is always found.
    #[test]
    fn any_overlap_is_found(count in 2u64..40, pick in 0u64..40, offset in 1u64..9) {
        let pick = pick % count;
        let mut builder = Builder::default().writes(0, 0, count * 10, 10, 9, Site::Iad);
        let start = pick * 10 + offset.min(8);
        builder = builder.ok("writer-1", 10_000, start, start + 1, Site::Pdx);
        prop_assert!(!check_split_brain(&builder.build()).valid);
    }
}

// ---- RPO ----

#[test]
fn rpo_agrees_exactly_once_exact() {
    let history = emergency(&[97, 98, 99], Some(3), true);
    let (summary, verdict) = check_rpo(&history);
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!((summary.acknowledged, summary.lost), (200, 3));
    assert_eq!(summary.lost_ids, [97, 98, 99]);
    assert_eq!(
        (summary.operator_reported(), summary.exact()),
        (Some(3), true)
    );
}

#[test]
fn rpo_fails_when_the_exact_count_disagrees() {
    let (_, verdict) = check_rpo(&emergency(&[97, 98, 99], Some(2), true));
    assert!(!verdict.valid);
    assert!(
        verdict
            .summary
            .contains("operator reports 2 lost transactions (exact) but 3"),
        "{}",
        verdict.summary
    );
}

#[test]
fn rpo_lower_bound_may_undercount_but_never_overcount() {
    assert!(check_rpo(&emergency(&[97, 98, 99], Some(1), false)).1.valid);
    let (_, verdict) = check_rpo(&emergency(&[99], Some(4), false));
    assert!(
        !verdict.valid && verdict.summary.contains("lower bound 4 exceeds"),
        "{verdict:?}"
    );
}

#[test]
fn rpo_planned_failover_must_lose_nothing() {
    let record = failover(
        FailoverKind::Planned,
        Site::Iad,
        Site::Pdx,
        [5_000, 5_000, 6_000, 7_000],
        Some(0),
        true,
    );
    let base = Builder::default()
        .writes(0, 0, 5_000, 100, 20, Site::Iad)
        .status(8_000, Site::Pdx, 2, Some(record.clone()))
        .writes(100, 8_000, 10_000, 100, 20, Site::Pdx);
    let all: Vec<u64> = (0..50).chain(100..120).collect();
    let (_, verdict) = check_rpo(&base.final_state(12_000, all).build());
    assert!(verdict.valid, "{verdict:?}");
    // The same history with one acknowledged write missing.
    let base = Builder::default()
        .writes(0, 0, 5_000, 100, 20, Site::Iad)
        .status(8_000, Site::Pdx, 2, Some(record))
        .writes(100, 8_000, 10_000, 100, 20, Site::Pdx);
    let missing: Vec<u64> = (0..49).chain(100..120).collect();
    let (summary, verdict) = check_rpo(&base.final_state(12_000, missing).build());
    assert_eq!(summary.lost, 1);
    assert!(
        !verdict.valid
            && verdict
                .findings
                .iter()
                .any(|finding| finding.contains("never lost the primary role")),
        "{verdict:?}"
    );
}

#[test]
fn rpo_fails_without_a_final_state_or_with_a_failed_write_present() {
    let history = Builder::default()
        .ok("writer-0", 1, 0, 10, Site::Iad)
        .build();
    let (summary, verdict) = check_rpo(&history);
    assert!(!summary.final_state_read && !verdict.valid);
    assert!(verdict.summary.contains("no final state"), "{verdict:?}");
    let history = Builder::default()
        .ok("writer-0", 1, 0, 10, Site::Iad)
        .write("writer-0", 2, 20, 30, EventType::Fail, None)
        .write("writer-0", 3, 40, 50, EventType::Info, None)
        .final_state(100, vec![1, 2, 3])
        .build();
    let (summary, verdict) = check_rpo(&history);
    assert_eq!(summary.unknown_present, 1);
    assert!(
        !verdict.valid && verdict.summary.contains("write 2 failed definitely"),
        "{verdict:?}"
    );
}

proptest! {
    // Whatever subset of iad's writes is lost, the measured loss is that subset, and an
    // exact operator count agrees iff it equals it.
    #[test]
    fn rpo_counts_exactly_the_missing_acknowledged_writes(lost in proptest::collection::btree_set(0u64..100, 0..20), delta in 0u64..3) {
        let lost: Vec<u64> = lost.into_iter().collect();
        let count = u64::try_from(lost.len()).unwrap_or(0);
        let (summary, verdict) = check_rpo(&emergency(&lost, Some(count + delta), true));
        prop_assert_eq!(summary.lost, count);
        prop_assert_eq!(verdict.valid, delta == 0);
    }
}

// ---- timings ----

#[test]
fn timings_per_failover_from_fault_to_first_write() {
    let (timings, verdict) = check_timings(&emergency(&[], Some(0), true));
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(timings.len(), 1);
    let timing = &timings[0];
    assert_eq!(
        (timing.from, timing.to, timing.fault.as_deref()),
        (Site::Iad, Site::Pdx, Some("kill"))
    );
    assert_eq!(timing.detected_ms, Some(6_000));
    assert_eq!(timing.fenced_ms, Some(7_000));
    assert_eq!(timing.promoted_ms, Some(8_000));
    assert_eq!(timing.endpoints_switched_ms, Some(9_000));
    assert_eq!(timing.dns_switched_ms, Some(15_000));
    assert_eq!(timing.first_write_ms, Some(10_020));
    assert_eq!(timing.rto_ms(), Some(10_020));
    assert!(
        verdict.summary.contains("iad -> pdx: RTO 10020 ms"),
        "{}",
        verdict.summary
    );
}

#[test]
fn timings_fail_when_promoted_before_fenced_or_without_fencing() {
    let mut record = failover(
        FailoverKind::Emergency,
        Site::Iad,
        Site::Pdx,
        [6_000, 6_000, 8_000, 7_000],
        Some(0),
        true,
    );
    let history = Builder::default()
        .fault("kill", 1_000, None)
        .status(9_000, Site::Pdx, 2, Some(record.clone()))
        .build();
    let (_, verdict) = check_timings(&history);
    assert!(
        !verdict.valid
            && verdict
                .summary
                .contains("promoted is 1000 ms before fenced"),
        "{verdict:?}"
    );
    record.fenced_at = None;
    let history = Builder::default()
        .fault("kill", 1_000, None)
        .status(9_000, Site::Pdx, 2, Some(record))
        .build();
    let (_, verdict) = check_timings(&history);
    assert!(
        !verdict.valid
            && verdict
                .summary
                .contains("without the old primary ever being fenced"),
        "{verdict:?}"
    );
}

#[test]
fn timings_fail_when_a_surface_moves_before_promotion() {
    let record = failover(
        FailoverKind::Emergency,
        Site::Iad,
        Site::Pdx,
        [6_000, 6_000, 7_000, 12_000],
        Some(0),
        true,
    );
    let history = Builder::default()
        .fault("kill", 1_000, None)
        .primary_endpoints(8_000, vec![Site::Pdx])
        .ok("writer-0", 5, 8_100, 8_200, Site::Pdx)
        .status(13_000, Site::Pdx, 2, Some(record))
        .build();
    let (_, verdict) = check_timings(&history);
    assert!(!verdict.valid);
    assert!(
        verdict
            .findings
            .iter()
            .any(|finding| finding.contains("endpoints switched 4000 ms before pdx was promoted")),
        "{verdict:?}"
    );
    assert!(
        verdict
            .findings
            .iter()
            .any(|finding| finding.contains("first write")),
        "{verdict:?}"
    );
}

#[test]
fn timings_fail_when_the_new_primary_never_acknowledges() {
    let record = failover(
        FailoverKind::Emergency,
        Site::Iad,
        Site::Pdx,
        [6_000, 6_000, 7_000, 8_000],
        Some(0),
        true,
    );
    let history = Builder::default()
        .fault("kill", 1_000, None)
        .status(9_000, Site::Pdx, 2, Some(record))
        .write("writer-0", 1, 10_000, 12_000, EventType::Info, None)
        .build();
    let (timings, verdict) = check_timings(&history);
    assert_eq!(timings[0].rto_ms(), None);
    assert!(
        !verdict.valid && verdict.summary.contains("never acknowledged a write"),
        "{verdict:?}"
    );
}

#[test]
fn no_failover_is_valid_for_timings() {
    let (timings, verdict) = check_timings(&History::default());
    assert!(timings.is_empty() && verdict.valid && verdict.summary == "no failover observed");
}

// ---- expectations ----

fn expectation(step: usize, satisfied: bool, time_to_satisfy_ms: Option<u64>) -> ExpectationResult {
    ExpectationResult {
        step,
        name: "group: {\"activeSite\":\"pdx\"}".to_owned(),
        mode: ExpectMode::Within,
        span_ms: 20_000,
        satisfied,
        time_to_satisfy_ms,
        started_ms: 0,
        failure: (!satisfied).then(|| "activeSite: expected \"pdx\", found \"iad\"".to_owned()),
    }
}

#[test]
fn expectations_report_time_to_satisfy_and_the_failing_one() {
    let verdict = check_expectations(
        &[
            expectation(0, true, Some(7_400)),
            expectation(1, true, Some(120)),
        ],
        &[],
    );
    assert!(
        verdict.valid && verdict.summary.contains("slowest within: 7400 ms"),
        "{verdict:?}"
    );
    let verdict = check_expectations(
        &[
            expectation(0, true, Some(7_400)),
            expectation(3, false, None),
        ],
        &[],
    );
    assert!(!verdict.valid);
    assert!(
        verdict.summary.starts_with("step 3: group") && verdict.summary.contains("found \"iad\""),
        "{}",
        verdict.summary
    );
}

// Seed 001: detection costs pollInterval x failureThreshold = 6s; faster is a failure.
#[test]
fn measurements_outside_their_bounds_fail() {
    let measure = |value_ms| MeasureResult {
        step: 5,
        quantity: Quantity::Detection,
        value_ms,
        at_least_ms: Some(6_000),
        at_most_ms: Some(12_000),
    };
    assert!(check_expectations(&[], &[measure(Some(6_400))]).valid);
    let verdict = check_expectations(&[], &[measure(Some(2_000))]);
    assert!(
        !verdict.valid && verdict.summary.contains("less than the 6000 ms floor"),
        "{verdict:?}"
    );
    assert!(!check_expectations(&[], &[measure(Some(13_000))]).valid);
    assert!(!check_expectations(&[], &[measure(None)]).valid);
}
