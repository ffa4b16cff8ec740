//! The survivors checker over hand-built histories (issue 34 item 2: RPO from the harness's own
//! evidence; docs/design/requirements.md R001.8: the RPO is fixed at the instant the primary
//! died; docs/design/operator.md#emergency-failover: the candidate is the most advanced site,
//! caught up from a survivor holding more, its relay log drained).
//!
//! Every history is [`emergency`]'s: iad acknowledges ids 0..100 (GTIDs `0-1-1..100`, id + 1)
//! every 100 ms until it is killed at 10 s; pdx is promoted at 18 s; the final read on pdx lacks
//! the lost ids. The seal is taken right after the kill unless a test says otherwise.

use bloodraven_harness::check::survivors::check_survivors;
use bloodraven_harness::check::verdict::Verdict;
use bloodraven_harness::history::store::History;
use bloodraven_harness::scenario::model::Site;

use crate::support::{emergency, Builder};

/// [`emergency`] losing `lost`, sealed at `at_ms` with `held` (site, executed, retrieved) and
/// `unread` (site, why).
fn sealed(
    lost: &[u64],
    at_ms: u64,
    held: &[(Site, &str, &str)],
    unread: &[(Site, &str)],
) -> History {
    let reported = u64::try_from(lost.len()).expect("small");
    Builder::from_history(emergency(lost, Some(reported), true))
        .survivors_held(at_ms, Site::Iad, held, unread)
        .build()
}

fn finding<'v>(verdict: &'v Verdict, needle: &str) -> Option<&'v String> {
    verdict.findings.iter().find(|f| f.contains(needle))
}

// What no survivor held is lost, and nothing else: no finding.
#[test]
fn nothing_held_was_lost_is_no_finding() {
    let verdict = check_survivors(&sealed(
        &[97, 98, 99],
        10_100,
        &[
            (Site::Pdx, "0-1-97", "0-1-97"),
            (Site::Reader, "0-1-97", ""),
        ],
        &[],
    ));
    assert!(verdict.valid, "{verdict:?}");
    assert!(
        verdict.summary.contains("pdx held 97, reader held 97")
            && verdict.summary.contains("3 lost"),
        "{}",
        verdict.summary
    );
}

// The summary says how much of what a survivor held it had not applied yet (043: pdx's applier
// stopped, everything it held but 45 writes was in its relay log when iad died).
#[test]
fn the_summary_counts_what_a_survivor_held_in_its_relay_log_only() {
    let verdict = check_survivors(&sealed(
        &[97, 98, 99],
        10_100,
        &[
            (Site::Pdx, "0-1-90", "0-1-97"),
            (Site::Reader, "0-1-97", "0-1-97"),
        ],
        &[],
    ));
    assert!(verdict.valid, "{verdict:?}");
    assert!(
        verdict
            .summary
            .contains("pdx held 97 (7 in its relay log only), reader held 97"),
        "{}",
        verdict.summary
    );
}

// Finding (a): pdx had received 97 and 98 (GTIDs 0-1-98, 0-1-99) into its relay log and they
// are lost: its relay log was dropped.
#[test]
fn a_lost_write_a_survivor_had_retrieved_is_a_finding() {
    let verdict = check_survivors(&sealed(
        &[97, 98, 99],
        10_100,
        &[
            (Site::Pdx, "0-1-97", "0-1-99"),
            (Site::Reader, "0-1-97", "0-1-97"),
        ],
        &[],
    ));
    assert!(!verdict.valid, "{verdict:?}");
    let held = finding(&verdict, "held by pdx").expect("finding (a)");
    assert!(
        held.contains("97 (0-1-98, in its relay log only), 98 (0-1-99, in its relay log only)")
            && !held.contains("99 (0-1-100"),
        "{held}"
    );
    assert!(
        finding(&verdict, "promoted site").is_none(),
        "pdx held the most: {verdict:?}"
    );

    // Only writes invoked before the seal count: sealed at 9.65 s, 97 (invoked at 9.7 s) and 98
    // are not judged, and 96 was not lost.
    let early = check_survivors(&sealed(
        &[97, 98, 99],
        9_650,
        &[
            (Site::Pdx, "0-1-97", "0-1-99"),
            (Site::Reader, "0-1-97", "0-1-97"),
        ],
        &[],
    ));
    assert!(early.valid, "{early:?}");
}

// Finding (b): the promoted site pdx held 96 of iad's writes, the reader 99, and the three only
// the reader held are lost (pdx was not caught up from it).
#[test]
fn a_promoted_site_holding_fewer_than_another_survivor_is_a_finding() {
    let held = [
        (Site::Pdx, "0-1-96", "0-1-96"),
        (Site::Reader, "0-1-99", ""),
    ];
    let verdict = check_survivors(&sealed(&[96, 97, 98, 99], 10_100, &held, &[]));
    assert!(!verdict.valid, "{verdict:?}");
    let fewer = finding(&verdict, "the promoted site pdx held 96").expect("finding (b)");
    assert!(
        fewer.contains("reader held 99, and 3 that only reader held are lost")
            && fewer.contains(": 96, 97, 98"),
        "{fewer}"
    );
    // Caught up from the reader before its promotion: it held fewer at the seal, but lost none
    // of what the reader held, so neither rule fires.
    let caught_up = check_survivors(&sealed(&[99], 10_100, &held, &[]));
    assert!(caught_up.valid, "{caught_up:?}");
}

// A survivor the seal could not read is named, never left out silently.
#[test]
fn a_survivor_left_out_of_the_seal_is_named() {
    let verdict = check_survivors(&sealed(
        &[97, 98, 99],
        10_100,
        &[(Site::Pdx, "0-1-97", "0-1-97")],
        &[(Site::Reader, "the read did not answer within 3000 ms")],
    ));
    assert!(!verdict.valid, "{verdict:?}");
    let named = finding(&verdict, "reader could not be read").expect("named");
    assert!(
        named.contains("missing evidence") && named.contains("3000 ms"),
        "{named}"
    );
}

// No seal (a recorded history from before the automatic seal, or a failover no sealing fault
// caused): nothing new is judged, and the summary says so.
#[test]
fn a_history_without_a_seal_judges_nothing_new() {
    let verdict = check_survivors(&emergency(&[97, 98, 99], Some(3), true));
    assert!(verdict.valid && verdict.findings.is_empty(), "{verdict:?}");
    assert!(
        verdict.summary.contains("not judged"),
        "{}",
        verdict.summary
    );
    // A seal no emergency failover followed is said, not judged.
    let no_failover = Builder::default()
        .status(500, Site::Iad, 1, None)
        .writes(0, 0, 10_000, 100, 20, Site::Iad)
        .fault("kill", &[Site::Iad], 10_000, None)
        .survivors_held(10_100, Site::Iad, &[(Site::Pdx, "0-1-90", "")], &[])
        .final_state(20_000, &[(Site::Iad, (0..100).collect())])
        .build();
    let verdict = check_survivors(&no_failover);
    assert!(verdict.valid, "{verdict:?}");
    assert!(
        verdict
            .summary
            .contains("1 seal of iad followed by no emergency failover"),
        "{}",
        verdict.summary
    );
}

/// `history` with the recorded GTID of write `id`'s acknowledgement taken away (its
/// acknowledgement arrived, the follow-up `@@last_gtid` read did not).
fn without_gtid(mut history: History, id: u64) -> History {
    use bloodraven_harness::history::event::{EventType, Op};
    for event in &mut history.events {
        if let (
            EventType::Ok,
            Op::Write {
                id: write, gtid, ..
            },
        ) = (&event.kind, &mut event.op)
        {
            if *write == id {
                *gtid = None;
            }
        }
    }
    history
}

// s011 (iad's node stopped under load): write 196's acknowledgement arrived and the read of its
// GTID did not. It survived, so there is no loss to judge and no finding; a lost write whose
// GTID was never recorded still is one (whether a survivor held it cannot be told).
#[test]
fn a_surviving_write_needs_no_gtid_and_a_lost_one_does() {
    let held = [
        (Site::Pdx, "0-1-97", "0-1-97"),
        (Site::Reader, "0-1-97", "0-1-97"),
    ];
    let survived = check_survivors(&without_gtid(sealed(&[97, 98, 99], 10_100, &held, &[]), 50));
    assert!(survived.valid, "{survived:?}");
    let lost = check_survivors(&without_gtid(sealed(&[97, 98, 99], 10_100, &held, &[]), 98));
    assert!(!lost.valid, "{lost:?}");
    assert!(
        finding(
            &lost,
            "write 98 acknowledged by iad and lost after heal has no GTID recorded"
        )
        .is_some(),
        "{lost:?}"
    );
}
