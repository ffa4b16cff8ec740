//! Checkers over hand-built histories (Jepsen's model), including histories that must fail
//! each checker (docs/design/harness.md#history-and-checkers).

use crate::support::{emergency, failover, Builder};
use bloodraven_harness::check::expectations::{
    check_expectations, ExpectMode, ExpectationResult, MeasureResult,
};
use bloodraven_harness::check::rpo::check_rpo;
use bloodraven_harness::check::split_brain::check_split_brain;
use bloodraven_harness::check::timings::check_timings;
use bloodraven_harness::check::verdict::Verdict;
use bloodraven_harness::history::event::{
    EventType, FailoverKind, FailoverRecord, Op, ProbeOutcome, RestoreRecord, CANARY_ID_BASE,
};
use bloodraven_harness::history::store::History;
use bloodraven_harness::scenario::model::{Quantity, Site};
use proptest::prelude::*;

// ---- no split brain ----

#[test]
fn split_brain_passes_when_sites_take_turns() {
    let history = emergency(&[], Some(0), true);
    let verdict = check_split_brain(&history);
    assert!(verdict.valid, "{verdict:?}");
    assert!(
        verdict.summary.contains("250 acknowledged writes"),
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
        .status(0, Site::Iad, 1, None)
        .ok("writer-0", 1, 0, 500, Site::Iad)
        .write("writer-1", 2, 100, 600, EventType::Info, None)
        .write("writer-2", 3, 100, 600, EventType::Fail, None)
        .build();
    let verdict = check_split_brain(&history);
    assert!(verdict.valid, "{verdict:?}");
    let history = Builder::default()
        .status(0, Site::Iad, 1, None)
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

/// iad active (generation 1) with writes until 10 s; an emergency failover to pdx (fenced
/// 12 s, promoted 13 s, generation 2) and pdx writes from 14 s to 16 s.
fn alternation() -> Builder {
    let record = failover(
        FailoverKind::Emergency,
        Site::Iad,
        Site::Pdx,
        [10_500, 11_000, 12_000, 13_000],
        Some(0),
        true,
    );
    Builder::default()
        .status(0, Site::Iad, 1, None)
        .status(5_000, Site::Iad, 1, None)
        .fault("kill", &[Site::Iad], 10_000, None)
        .writes(0, 0, 10_000, 100, 20, Site::Iad)
        .status(13_500, Site::Pdx, 2, Some(record))
        .writes(1000, 14_000, 16_000, 100, 20, Site::Pdx)
}

// Jepsen's "no two sites at once" misses a site that takes its turn back without authority:
// iad acknowledging a write after pdx's last one, with no interval overlapping.
#[test]
fn split_brain_catches_non_overlapping_alternation() {
    assert!(check_split_brain(&alternation().build()).valid);
    let history = alternation()
        .ok("writer-1", 500, 16_500, 16_520, Site::Iad)
        .build();
    let verdict = check_split_brain(&history);
    assert!(!verdict.valid, "{verdict:?}");
    assert!(
        verdict.summary.contains(
            "iad acknowledged write 500 in [16.500s, 16.520s] outside every iad authority epoch"
        ),
        "{}",
        verdict.summary
    );
    // Just after the fence (within the cross-clock slack) is not a finding; well after it is.
    let history = alternation()
        .ok("writer-1", 501, 12_500, 12_520, Site::Iad)
        .build();
    assert!(check_split_brain(&history).valid);
    let history = alternation()
        .ok("writer-1", 502, 13_100, 13_120, Site::Iad)
        .build();
    assert!(!check_split_brain(&history).valid);
    // pdx acknowledging long before it was promoted.
    let history = alternation()
        .ok("writer-1", 503, 6_000, 6_010, Site::Pdx)
        .build();
    let verdict = check_split_brain(&history);
    assert!(
        !verdict.valid
            && verdict
                .findings
                .iter()
                .any(|finding| finding.contains("pdx acknowledged write 503")),
        "{verdict:?}"
    );
    // A site that never held authority.
    let history = alternation()
        .ok("writer-1", 504, 15_000, 15_010, Site::Reader)
        .build();
    let verdict = check_split_brain(&history);
    assert!(
        !verdict.valid
            && verdict
                .findings
                .iter()
                .any(|finding| finding.contains("reader never held authority")),
        "{verdict:?}"
    );
}

// The active site may change only through an observed failover from it to the new site,
// with a new topologyGeneration.
#[test]
fn split_brain_site_changes_must_match_observed_failovers() {
    let finds = |history: History, needle: &str| {
        let verdict = check_split_brain(&history);
        assert!(
            !verdict.valid
                && verdict
                    .findings
                    .iter()
                    .any(|finding| finding.contains(needle)),
            "{needle}: {verdict:?}"
        );
    };
    // No failover at all.
    finds(
        Builder::default()
            .status(0, Site::Iad, 1, None)
            .writes(0, 0, 1_000, 100, 20, Site::Iad)
            .status(5_000, Site::Pdx, 2, None)
            .writes(100, 6_000, 7_000, 100, 20, Site::Pdx)
            .build(),
        "active site changed iad -> pdx",
    );
    // A failover to another site.
    let to_reader = failover(
        FailoverKind::Emergency,
        Site::Iad,
        Site::Reader,
        [3_000, 3_000, 4_000, 4_500],
        Some(0),
        true,
    );
    finds(
        Builder::default()
            .status(0, Site::Iad, 1, None)
            .status(5_000, Site::Pdx, 2, Some(to_reader.clone()))
            .build(),
        "no observed failover iad -> pdx",
    );
    // The same generation.
    let to_pdx = failover(
        FailoverKind::Emergency,
        Site::Iad,
        Site::Pdx,
        [3_000, 3_000, 4_000, 4_500],
        Some(0),
        true,
    );
    finds(
        Builder::default()
            .status(0, Site::Iad, 1, None)
            .status(5_000, Site::Pdx, 1, Some(to_pdx.clone()))
            .build(),
        "without a new topologyGeneration",
    );
    // A generation that goes back.
    finds(
        Builder::default()
            .status(0, Site::Iad, 2, None)
            .status(5_000, Site::Iad, 1, None)
            .build(),
        "topologyGeneration went back from 2 to 1",
    );
    // A failover whose site change the status never showed.
    finds(
        Builder::default()
            .status(0, Site::Iad, 1, None)
            .status(5_000, Site::Iad, 1, Some(to_pdx))
            .build(),
        "never showed pdx active",
    );
    // Writes with no status snapshot at all: the epochs are unknown.
    finds(
        Builder::default()
            .writes(0, 0, 1_000, 100, 20, Site::Iad)
            .build(),
        "no group status snapshot",
    );
}

/// Epochs that take turns: each a site and its writes (count, latency), with an emergency
/// failover between sites (fenced 0.5 s after the last write, promoted 0.5 s later, writes
/// 0.5 s after that) and a status snapshot of each epoch.
fn turns(epochs: &[(Site, u64, u64)]) -> (Builder, Vec<(Site, u64, u64)>) {
    let mut builder = Builder::default();
    let mut at = 0;
    let mut id = 0;
    let mut generation = 1;
    let mut previous: Option<Site> = None;
    let mut windows = Vec::new();
    for &(site, count, latency) in epochs {
        if let Some(from) = previous.filter(|from| *from != site) {
            let record = failover(
                FailoverKind::Emergency,
                from,
                site,
                [at, at, at + 500, at + 1_000],
                Some(0),
                true,
            );
            generation += 1;
            builder = builder.status(at + 1_200, site, generation, Some(record));
            at += 1_500;
        } else if previous.is_none() {
            builder = builder.status(0, site, generation, None);
        }
        let start = at;
        for _ in 0..count {
            builder = builder.ok("writer-0", id, at, at + latency, site);
            id += 1;
            at += latency + 1;
        }
        windows.push((site, start, at));
        previous = Some(site);
        at += 100;
    }
    (builder, windows)
}

fn two_sites() -> impl Strategy<Value = Site> {
    prop_oneof![Just(Site::Iad), Just(Site::Pdx)]
}

proptest! {
    // Sites that take turns, each change an observed failover, never split-brain, however
    // the epochs and writes are laid out.
    #[test]
    fn taking_turns_never_split_brains(epochs in proptest::collection::vec((two_sites(), 1u64..20, 1u64..50), 1..12)) {
        let (builder, _) = turns(&epochs);
        let verdict = check_split_brain(&builder.build());
        prop_assert!(verdict.valid, "{:?}", verdict);
    }

    // A write acknowledged by another site in the middle of any epoch is always found, with
    // or without overlap.
    #[test]
    fn a_write_outside_its_epoch_is_always_found(
        epochs in proptest::collection::vec((two_sites(), 1u64..20, 1u64..50), 1..8),
        pick in 0usize..8,
    ) {
        let (builder, windows) = turns(&epochs);
        let (site, start, end) = windows[pick % windows.len()];
        let other = if site == Site::Iad { Site::Pdx } else { Site::Iad };
        let middle = (start + end) / 2;
        let verdict = check_split_brain(&builder.ok("writer-1", 99_999, middle, middle + 1, other).build());
        prop_assert!(!verdict.valid);
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

// ---- no split brain, from the harness's own observations (site probes) ----

/// The finding of `verdict` that contains `needle`, or a panic naming them all.
fn finding_with<'a>(verdict: &'a Verdict, needle: &str) -> &'a str {
    verdict
        .findings
        .iter()
        .find(|finding| finding.contains(needle))
        .unwrap_or_else(|| panic!("no finding contains {needle:?}: {verdict:#?}"))
}

/// A clean emergency failover as the site probes see it: iad acknowledges writes 0..100 and
/// canaries until 10 s and is killed at 10 s (its probes unreachable from 10.05 s); pdx refuses
/// canaries until 14 s and acknowledges them from 14.075 s, and writes 1000..1050 from 14.5 s;
/// the reader refuses throughout. The operator reports the failover promoted at `promoted_ms`
/// (fenced 1 s before), with status snapshots before and after.
fn observed_failover(promoted_ms: u64) -> Builder {
    let record = failover(
        FailoverKind::Emergency,
        Site::Iad,
        Site::Pdx,
        [10_500, 12_000, promoted_ms - 1_000, promoted_ms],
        Some(0),
        true,
    );
    Builder::default()
        .status(0, Site::Iad, 1, None)
        .status(5_000, Site::Iad, 1, None)
        .writes(0, 0, 10_000, 100, 20, Site::Iad)
        .probes(Site::Iad, 0, 50, 10_000, 100, ProbeOutcome::Acknowledged)
        .fault("kill", &[Site::Iad], 10_000, None)
        .probes(
            Site::Iad,
            1_000,
            10_050,
            20_000,
            100,
            ProbeOutcome::Unreachable,
        )
        .probes(Site::Pdx, 2_000, 75, 14_000, 100, ProbeOutcome::Refused)
        .probes(
            Site::Pdx,
            3_000,
            14_075,
            20_000,
            100,
            ProbeOutcome::Acknowledged,
        )
        .probes(Site::Reader, 4_000, 25, 20_000, 100, ProbeOutcome::Refused)
        .status(promoted_ms + 500, Site::Pdx, 2, Some(record))
        .writes(1_000, 14_500, 19_500, 100, 20, Site::Pdx)
}

// docs/design/harness.md#history-and-checkers: iad acknowledges, is seen to stop (unreachable),
// then pdx acknowledges: no split brain. The operator's status no longer decides: its
// promotedAt after pdx's first acknowledgements (a finding of the status epochs, below) is
// not one when the probes saw the handover.
#[test]
fn observed_split_brain_passes_a_clean_failover() {
    let verdict = check_split_brain(&observed_failover(14_000).build());
    assert!(verdict.valid, "{verdict:#?}");
    assert!(
        verdict.summary.starts_with(
            "310 acknowledgements (150 writes, 160 canaries) on 2 sites in 2 epochs, each observed ending before the next began; 440 denials in 600 site probes"
        ),
        "{}",
        verdict.summary
    );
    let late_status = observed_failover(16_000).build();
    assert!(check_split_brain(&late_status).valid);
    let mut without_probes = late_status.clone();
    without_probes
        .events
        .retain(|event| !matches!(event.op, Op::SiteProbe { .. }));
    let verdict = check_split_brain(&without_probes);
    assert!(
        !verdict.valid
            && verdict
                .summary
                .contains("outside every pdx authority epoch"),
        "{verdict:#?}"
    );
}

// Rule 1 (handover): pdx acknowledges before iad was seen to stop. iad's probes acknowledge
// until 10 s and are first unreachable at 11 s; pdx acknowledges canaries from 10.5 s.
#[test]
fn observed_split_brain_finds_a_handover_before_the_old_site_was_denied() {
    let early = || {
        Builder::default()
            .writes(0, 0, 10_000, 100, 20, Site::Iad)
            .probes(Site::Iad, 0, 50, 10_000, 100, ProbeOutcome::Acknowledged)
            .probes(
                Site::Pdx,
                3_000,
                10_500,
                15_000,
                100,
                ProbeOutcome::Acknowledged,
            )
    };
    let verdict = check_split_brain(
        &early()
            .probes(
                Site::Iad,
                1_000,
                11_000,
                15_000,
                100,
                ProbeOutcome::Unreachable,
            )
            .build(),
    );
    assert!(!verdict.valid);
    assert_eq!(
        finding_with(&verdict, "was not observed to stop"),
        "iad was not observed to stop accepting writes (last ack canary 1000000000099 at 9.955s, first refusal at 11.000s: unreachable) before pdx acknowledged canary 1000000003000 at 10.505s"
    );
    assert!(
        verdict.summary.starts_with("iad was not observed to stop"),
        "the handover first: {}",
        verdict.summary
    );
    // iad never seen to stop at all.
    let verdict = check_split_brain(&early().build());
    assert!(
        finding_with(&verdict, "was not observed to stop")
            .contains("(last ack canary 1000000000099 at 9.955s, first refusal: none)"),
        "{verdict:#?}"
    );
}

// Rule 2 (inside another's epoch): iad takes its turn back. Plainly (pdx never seen to stop),
// and where each handover was seen in order but iad's write began while pdx's epoch was open.
#[test]
fn observed_split_brain_finds_alternation() {
    let verdict = check_split_brain(
        &observed_failover(14_000)
            .probe(Site::Iad, 9_000, 16_530, 16_540, ProbeOutcome::Acknowledged)
            .build(),
    );
    assert!(!verdict.valid);
    assert_eq!(
        finding_with(&verdict, "inside pdx's epoch"),
        "iad acknowledged canary 1000000009000 in [16.530s, 16.540s] inside pdx's epoch [14.075s, never seen to end] (46 acknowledgements, canary 1000000003000 to write 1020)"
    );
    // iad's epoch ends at 10.05 s; pdx acknowledges 12.0-13.0 s and is unreachable from 15 s;
    // iad's write invoked at 13.5 s is acknowledged at 15.2 s, after pdx was seen to stop (the
    // handovers are in order) but begun while pdx's epoch was open.
    let verdict = check_split_brain(
        &Builder::default()
            .writes(0, 0, 10_000, 100, 20, Site::Iad)
            .probes(Site::Iad, 0, 10_050, 20_000, 100, ProbeOutcome::Unreachable)
            .probes(
                Site::Pdx,
                1_000,
                12_000,
                13_000,
                100,
                ProbeOutcome::Acknowledged,
            )
            .probes(
                Site::Pdx,
                2_000,
                15_000,
                20_000,
                100,
                ProbeOutcome::Unreachable,
            )
            .ok("writer-1", 500, 13_500, 15_200, Site::Iad)
            .build(),
    );
    assert_eq!(verdict.findings.len(), 1, "{verdict:#?}");
    assert_eq!(
        verdict.findings[0],
        "iad acknowledged write 500 in [13.500s, 15.200s] inside pdx's epoch [12.000s, 15.000s] (10 acknowledgements, canary 1000000001000 to canary 1000000001009)"
    );
}

// A site the scenario itself made writable by hand (013: `set-read-only` false on a replica)
// acknowledges canaries until its sidecar fences it back: the fault made them possible, so they
// are counted, not judged; past the window they are judged like any other acknowledgement.
#[test]
fn observed_split_brain_counts_canaries_of_a_site_made_writable_by_hand() {
    let by_hand = |fenced_back_ms: u64| {
        Builder::default()
            .status(0, Site::Iad, 1, None)
            .writes(0, 0, 20_000, 100, 20, Site::Iad)
            .probes(Site::Iad, 0, 50, 20_000, 100, ProbeOutcome::Acknowledged)
            .probes(Site::Pdx, 1_000, 75, 5_000, 100, ProbeOutcome::Refused)
            .fault_detailed(
                "set-read-only",
                &[Site::Pdx],
                5_000,
                r#"{"set-read-only":{"site":"pdx","value":false}}"#,
            )
            .probes(
                Site::Pdx,
                2_000,
                5_075,
                fenced_back_ms,
                100,
                ProbeOutcome::Acknowledged,
            )
            .probes(
                Site::Pdx,
                3_000,
                fenced_back_ms + 25,
                20_000,
                100,
                ProbeOutcome::Refused,
            )
            .build()
    };
    let verdict = check_split_brain(&by_hand(5_600));
    assert!(verdict.valid, "{verdict:#?}");
    assert!(
        verdict
            .summary
            .contains("; 6 canaries acknowledged by a site the scenario had made writable by hand (set-read-only), counted, not judged"),
        "{}",
        verdict.summary
    );
    // Never fenced back within the window: pdx's canaries past it are judged.
    let verdict = check_split_brain(&by_hand(17_000));
    assert!(!verdict.valid, "{verdict:#?}");
    assert!(
        verdict
            .findings
            .iter()
            .any(|finding| finding
                .contains("before pdx acknowledged canary 1000000002100 at 15.080s")),
        "{verdict:#?}"
    );
}

// Rule 3 (unknown outcome): a write whose outcome is unknown, invoked after iad's epoch
// ended, found committed on iad once pdx took over is a finding, for a writer's write and for
// a canary; committed on the still-active pdx, or invoked while iad's epoch was open, it is
// not.
#[test]
fn observed_split_brain_finds_an_unknown_write_committed_on_the_deposed_site() {
    let history = |committed: &[(u64, Site)], canaries: &[(u64, Site)]| {
        observed_failover(14_000)
            .write("writer-1", 502, 9_500, 11_500, EventType::Info, None)
            .write("writer-1", 500, 11_600, 13_600, EventType::Info, None)
            .write("writer-1", 501, 15_000, 17_000, EventType::Info, None)
            .probe(Site::Iad, 8_000, 12_010, 12_040, ProbeOutcome::Unknown)
            .final_rows(21_000, &[], committed, canaries)
            .build()
    };
    let verdict = check_split_brain(&history(
        &[(500, Site::Iad), (501, Site::Pdx), (502, Site::Iad)],
        &[(CANARY_ID_BASE + 8_000, Site::Iad)],
    ));
    assert_eq!(
        verdict.findings,
        [
            "write 500 of unknown outcome, invoked at 11.600s after iad's epoch ended at 10.050s, was found committed on iad (pdx acknowledged from 14.080s)",
            "canary 1000000008000 of unknown outcome, invoked at 12.010s after iad's epoch ended at 10.050s, was found committed on iad (pdx acknowledged from 14.080s)",
        ],
        "{verdict:#?}"
    );
    let verdict = check_split_brain(&history(
        &[(500, Site::Pdx), (501, Site::Pdx), (502, Site::Iad)],
        &[],
    ));
    assert!(verdict.valid, "{verdict:#?}");
    assert!(
        verdict
            .summary
            .contains("4 of unknown outcome, 3 found committed, none after its site's epoch"),
        "{}",
        verdict.summary
    );
}

// A history without site probes (recorded before they existed, or by a backend that does
// not probe) is judged from the operator's status as before, and says so.
#[test]
fn split_brain_without_site_probes_says_so() {
    let verdict = check_split_brain(&emergency(&[], Some(0), true));
    assert!(verdict.valid, "{verdict:#?}");
    assert!(
        verdict.summary.contains(
            "no site probes in this history, so the epochs are the operator's status (fencedAt + 1 s slack), not observed"
        ),
        "{}",
        verdict.summary
    );
    let verdict = check_split_brain(&observed_failover(14_000).build());
    assert!(
        !verdict.summary.contains("no site probes"),
        "{}",
        verdict.summary
    );
}

// The status keeps its structural checks when the probes decide: a change of the active site
// must be an observed failover with a new generation.
#[test]
fn observed_split_brain_keeps_the_structural_status_checks() {
    let verdict = check_split_brain(
        &observed_failover(14_000)
            .status(19_000, Site::Iad, 3, None)
            .build(),
    );
    assert!(
        !verdict.valid
            && finding_with(&verdict, "no observed failover pdx -> iad")
                .contains("active site changed pdx -> iad"),
        "{verdict:#?}"
    );
}

// The pairwise rule stays beside the epochs: two sites acknowledging in overlapping
// intervals is a finding even where each site's epoch was cut short by a probe that hung
// across it (unreachable after 2 s, invoked before the acknowledgement), which the epoch
// rules cannot see.
#[test]
fn observed_split_brain_keeps_the_pairwise_overlap_rule() {
    let verdict = check_split_brain(
        &Builder::default()
            .probe(Site::Iad, 0, 1_000, 3_000, ProbeOutcome::Unreachable)
            .probe(Site::Pdx, 1, 1_000, 3_000, ProbeOutcome::Unreachable)
            .ok("writer-0", 1, 1_500, 1_600, Site::Pdx)
            .ok("writer-1", 2, 1_550, 1_650, Site::Iad)
            .build(),
    );
    assert_eq!(
        verdict.findings,
        ["pdx acknowledged write 1 in [1.500s, 1.600s] while iad acknowledged write 2 in [1.550s, 1.650s]"],
        "{verdict:#?}"
    );
}

/// Epochs that take turns as the site probes see them: each a site and its writes (count,
/// latency); at each change of site the old one is seen unreachable 100 ms after its last
/// write, and the new one writes 500 ms later. The reader is probed (refused) at the start.
fn observed_turns(epochs: &[(Site, u64, u64)]) -> (Builder, Vec<(Site, u64, u64)>) {
    let mut builder = Builder::default().probe(Site::Reader, 0, 0, 5, ProbeOutcome::Refused);
    let mut at = 0;
    let mut id = 0;
    let mut probe_id = 0;
    let mut previous: Option<Site> = None;
    let mut windows = Vec::new();
    for &(site, count, latency) in epochs {
        if let Some(from) = previous.filter(|from| *from != site) {
            builder = builder.probe(
                from,
                probe_id,
                at + 100,
                at + 105,
                ProbeOutcome::Unreachable,
            );
            probe_id += 1;
            at += 600;
        }
        let start = at;
        for _ in 0..count {
            builder = builder.ok("writer-0", id, at, at + latency, site);
            id += 1;
            at += latency + 1;
        }
        windows.push((site, start, at));
        previous = Some(site);
        at += 100;
    }
    (builder, windows)
}

proptest! {
    // Sites that take turns, each seen to stop before the next acknowledges, never split-brain.
    #[test]
    fn observed_turns_never_split_brain(epochs in proptest::collection::vec((two_sites(), 1u64..20, 1u64..50), 1..12)) {
        let (builder, _) = observed_turns(&epochs);
        let verdict = check_split_brain(&builder.build());
        prop_assert!(verdict.valid, "{:?}", verdict);
    }

    // A write acknowledged by another site in the middle of any observed epoch is always found.
    #[test]
    fn observed_a_write_inside_another_epoch_is_always_found(
        epochs in proptest::collection::vec((two_sites(), 1u64..20, 1u64..50), 1..8),
        pick in 0usize..8,
    ) {
        let (builder, windows) = observed_turns(&epochs);
        let (site, start, end) = windows[pick % windows.len()];
        let other = if site == Site::Iad { Site::Pdx } else { Site::Iad };
        let middle = (start + end) / 2;
        let verdict = check_split_brain(&builder.ok("writer-1", 99_999, middle, middle + 1, other).build());
        prop_assert!(!verdict.valid);
    }
}

// ---- RPO ----

use crate::support::{emergency_with, gtid_of, gtid_set, Reported};
use bloodraven_harness::check::rpo::RpoSummary;

fn lost_lines(verdict: &bloodraven_harness::check::verdict::Verdict, needle: &str) -> bool {
    verdict
        .findings
        .iter()
        .any(|finding| finding.contains(needle))
}

fn exact(writes: &[u64], others: u64) -> Reported {
    Reported {
        writes: writes.to_vec(),
        others,
        exact: true,
    }
}

#[test]
fn rpo_agrees_exactly_once_exact() {
    let history = emergency(&[97, 98, 99], Some(3), true);
    let (summary, verdict) = check_rpo(&history);
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!((summary.acknowledged, summary.lost), (250, 3));
    assert_eq!(summary.lost_ids, [97, 98, 99]);
    assert_eq!(
        (summary.operator_reported(), summary.exact()),
        (Some(3), true)
    );
    assert_eq!(summary.active_site, Some(Site::Pdx));
    assert_eq!(summary.sites_read, [Site::Iad, Site::Pdx, Site::Reader]);
    let row = &summary.failovers[0];
    assert_eq!(
        (
            row.acknowledged,
            row.lost,
            row.operator_lost_writes,
            row.other_transactions
        ),
        (100, 3, 3, Some(0))
    );
}

/// [`emergency`] with a `seal-rpo` at 15 s, while iad is down and before pdx's promotion
/// (18 s), that found `held` of iad's writes on the survivors.
fn sealed(lost_ids: &[u64], held: &[u64]) -> History {
    let mut events = emergency(lost_ids, Some(3), true).events;
    let at = |kind, sites| bloodraven_harness::history::event::Event {
        process: "seal".to_owned(),
        kind,
        op: Op::Sealed { sites },
        wall: crate::support::wall(15_000),
        mono_ns: 15_000_000_000,
    };
    let survivors: std::collections::BTreeMap<Site, Vec<u64>> =
        [(Site::Pdx, held.to_vec()), (Site::Reader, held.to_vec())].into();
    events.push(at(EventType::Invoke, Default::default()));
    events.push(at(EventType::Ok, survivors));
    events.sort_by_key(|event| event.mono_ns);
    History::new(events)
}

// docs/design/requirements.md R001.8 (scenario 011): operator downtime costs write availability,
// never RPO. The writes lost after heal are exactly the ones no survivor held when the RPO was
// sealed.
#[test]
fn rpo_must_be_the_one_sealed_at_the_primarys_death() {
    let held: Vec<u64> = (0..97).collect();
    let (summary, verdict) = check_rpo(&sealed(&[97, 98, 99], &held));
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(summary.lost_ids, [97, 98, 99]);
    // More lost than sealed: a write the survivors held was lost later (the late promotion).
    let (_, verdict) = check_rpo(&sealed(&[96, 97, 98, 99], &held));
    assert!(lost_lines(&verdict, "not the one sealed"), "{verdict:?}");
    assert!(
        lost_lines(&verdict, "lost but held when sealed: 96"),
        "{verdict:?}"
    );
    // Fewer lost than sealed: the seal was not the death's (or a lost write came back).
    let held: Vec<u64> = (0..96).collect();
    let (_, verdict) = check_rpo(&sealed(&[97, 98, 99], &held));
    assert!(
        lost_lines(&verdict, "sealed lost but present after heal: 96"),
        "{verdict:?}"
    );
    // Without a seal the check is not made.
    assert!(check_rpo(&emergency(&[97, 98, 99], Some(3), true)).1.valid);
}

// The exact lostGtidSet must name every acknowledged write lost (by GTID, not by count).
#[test]
fn rpo_fails_when_the_exact_set_misses_a_lost_write() {
    let (_, verdict) = check_rpo(&emergency(&[97, 98, 99], Some(2), true));
    assert!(!verdict.valid);
    assert!(
        verdict
            .summary
            .starts_with("operator reports 2 lost transactions (exact) but 3"),
        "{}",
        verdict.summary
    );
    assert!(
        lost_lines(
            &verdict,
            "write 99 (0-1-100) is lost but missing from the exact lostGtidSet"
        ),
        "{verdict:?}"
    );
    // The same count with the wrong write: the count agrees, the sets do not.
    let history = emergency_with(&[97, 98, 99], &exact(&[96, 97, 98], 0));
    let (_, verdict) = check_rpo(&history);
    assert!(
        lost_lines(&verdict, "names write 96 (0-1-97)") && lost_lines(&verdict, "present on pdx"),
        "{verdict:?}"
    );
    assert!(lost_lines(&verdict, "write 99 (0-1-100)"), "{verdict:?}");
}

// A lower bound may leave writes out but never names a write that survived.
#[test]
fn rpo_lower_bound_never_names_a_surviving_write() {
    let lower = |writes: &[u64]| Reported {
        writes: writes.to_vec(),
        others: 0,
        exact: false,
    };
    assert!(
        check_rpo(&emergency_with(&[97, 98, 99], &lower(&[97])))
            .1
            .valid
    );
    let (_, verdict) = check_rpo(&emergency_with(&[99], &lower(&[98, 99])));
    assert!(
        !verdict.valid && lost_lines(&verdict, "names write 98"),
        "{verdict:?}"
    );
}

// The counter app writes too: its transactions in lostGtidSet are not workload writes.
#[test]
fn rpo_excludes_other_writers_by_gtid() {
    let (summary, verdict) = check_rpo(&emergency_with(&[97, 98, 99], &exact(&[97, 98, 99], 5)));
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(summary.failovers[0].operator_reported, Some(8));
    assert_eq!(summary.failovers[0].other_transactions, Some(5));
    // Lower bound too: a count above the workload's loss is other writers, not a finding.
    let lower = Reported {
        writes: vec![99],
        others: 4,
        exact: false,
    };
    assert!(check_rpo(&emergency_with(&[99], &lower)).1.valid);
}

/// [`emergency_with`], with the info write 500 committed on iad before it died (present in
/// iad's final read, lost with it).
fn info_write_committed_on_iad(reported: &Reported) -> History {
    let mut history = emergency_with(&[97, 98, 99], reported);
    for event in &mut history.events {
        if let Op::FinalState { sites, .. } = &mut event.op {
            if let Some(ids) = sites.get_mut(&Site::Iad) {
                ids.push(500);
            }
        }
    }
    history
}

// An info write may have committed: seen on the old primary and missing on the new one, it
// is lost, and the exact count must include it; with the old primary unread it is unknown.
#[test]
fn rpo_info_writes_bound_the_count_from_both_sides() {
    // Its GTID is unknown to the harness: it is one of the set's other transactions.
    let (summary, verdict) = check_rpo(&info_write_committed_on_iad(&exact(&[97, 98, 99], 1)));
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(
        (summary.lost, summary.info_lost, summary.unknown),
        (3, 1, 0)
    );
    assert_eq!(summary.failovers[0].info_lost, 1);
    let (_, verdict) = check_rpo(&info_write_committed_on_iad(&exact(&[97, 98, 99], 0)));
    assert!(
        !verdict.valid
            && verdict.summary.starts_with(
                "operator reports 3 lost transactions (exact) but 3 acknowledged writes and 1 info write"
            ),
        "{verdict:?}"
    );
    // iad never read again: the info write may or may not have committed there.
    let lower = Reported {
        writes: vec![97, 98, 99],
        others: 1,
        exact: false,
    };
    let (summary, verdict) = check_rpo(&emergency_with(&[97, 98, 99], &lower));
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(
        (summary.lost, summary.info_lost, summary.unknown),
        (3, 0, 1)
    );
    assert_eq!(summary.failovers[0].unknown, 1);
}

// A write iad acknowledged after the operator recorded it fenced, then lost: the fence was
// not one.
#[test]
fn rpo_every_lost_write_was_acknowledged_before_fenced_at() {
    let mut history = emergency_with(&[97, 98, 99, 150], &exact(&[97, 98, 99, 150], 0));
    let late = Builder::default()
        .ok("writer-1", 150, 18_500, 18_520, Site::Iad)
        .build();
    history.events.extend(late.events);
    history.events.sort_by_key(|event| event.mono_ns);
    for event in &mut history.events {
        if let Op::FinalState { sites, .. } = &mut event.op {
            if let Some(ids) = sites.get_mut(&Site::Iad) {
                ids.push(150);
            }
        }
    }
    let (_, verdict) = check_rpo(&history);
    assert!(
        !verdict.valid
            && lost_lines(
                &verdict,
                "write 150 by iad was invoked 1500 ms after iad was fenced"
            ),
        "{verdict:?}"
    );
}

// The old primary is readable again (it is in the final read): the count must be exact.
#[test]
fn rpo_a_readable_old_primary_must_make_the_count_exact() {
    let lower = Reported {
        writes: vec![97, 98, 99],
        others: 0,
        exact: false,
    };
    let mut history = emergency_with(&[97, 98, 99], &lower);
    for event in &mut history.events {
        if let Op::FinalState { sites, .. } = &mut event.op {
            sites.insert(Site::Iad, (0..100).collect());
        }
    }
    let (_, verdict) = check_rpo(&history);
    assert!(
        !verdict.valid && lost_lines(&verdict, "iad was readable again"),
        "{verdict:?}"
    );
}

// The operator's exact count can first be read by the harness's last read, after the status
// poller stopped (s044 with the catch-up's drain broken: `exact` came 2 s after iad healed, the
// step saw it, the gtid-state read recorded it, and the checker, reading status events only,
// said the failover "never became exact").
#[test]
fn rpo_takes_the_exact_count_from_the_last_read_after_the_status_poller_stopped() {
    let reported = exact(&[97, 98, 99], 0);
    let mut history = emergency_with(&[97, 98, 99], &reported);
    let mut record = None;
    for event in &mut history.events {
        if let Op::Status {
            last_failover: Some(failover),
            ..
        } = &mut event.op
        {
            record = Some(failover.clone());
            failover.exact = false;
        }
    }
    let history = Builder::from_history(history)
        .gtid_state(51_000, &[], record)
        .build();
    let (summary, verdict) = check_rpo(&history);
    assert!(verdict.valid, "{verdict:?}");
    assert!(summary.exact(), "{summary:?}");
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
    let base = |record: FailoverRecord| {
        Builder::default()
            .status(100, Site::Iad, 1, None)
            .writes(0, 0, 5_000, 100, 20, Site::Iad)
            .fault("annotate", &[Site::Pdx], 5_000, Some(5_000))
            .status(8_000, Site::Pdx, 2, Some(record))
            .writes(100, 8_000, 10_000, 100, 20, Site::Pdx)
    };
    let all: Vec<u64> = (0..50).chain(100..120).collect();
    let (_, verdict) = check_rpo(
        &base(record.clone())
            .final_state(
                12_000,
                &[(Site::Pdx, all.clone()), (Site::Iad, all.clone())],
            )
            .build(),
    );
    assert!(verdict.valid, "{verdict:?}");
    // The same history with one acknowledged write missing.
    let missing: Vec<u64> = (0..49).chain(100..120).collect();
    let (summary, verdict) = check_rpo(
        &base(record.clone())
            .final_state(12_000, &[(Site::Pdx, missing)])
            .build(),
    );
    assert_eq!(summary.lost, 1);
    assert!(
        !verdict.valid
            && lost_lines(
                &verdict,
                "planned failover iad -> pdx; a planned failover loses nothing"
            ),
        "{verdict:?}"
    );
    // A planned failover whose lostGtidSet is not empty.
    let mut claims = record;
    claims.lost_gtid_set = Some(gtid_set(Site::Iad, &[49], 0));
    claims.lost_transactions = Some(1);
    let (_, verdict) = check_rpo(
        &base(claims)
            .final_state(12_000, &[(Site::Pdx, all)])
            .build(),
    );
    assert!(
        !verdict.valid && lost_lines(&verdict, "a planned failover loses nothing"),
        "{verdict:?}"
    );
}

#[test]
fn rpo_with_no_failover_loses_nothing() {
    let history = Builder::default()
        .status(0, Site::Iad, 1, None)
        .writes(0, 0, 1_000, 100, 20, Site::Iad)
        .final_state(2_000, &[(Site::Iad, (0..9).collect())])
        .build();
    let (_, verdict) = check_rpo(&history);
    assert!(
        !verdict.valid
            && lost_lines(
                &verdict,
                "never lost the primary role in an emergency failover"
            ),
        "{verdict:?}"
    );
}

#[test]
fn rpo_fails_without_a_final_state_or_with_a_failed_write_present() {
    let history = Builder::default()
        .status(0, Site::Iad, 1, None)
        .ok("writer-0", 1, 0, 10, Site::Iad)
        .build();
    let (summary, verdict) = check_rpo(&history);
    assert!(!summary.final_state_read && !verdict.valid);
    assert!(verdict.summary.contains("no final state"), "{verdict:?}");
    // A failed write present anywhere, here only on the reader.
    let history = Builder::default()
        .status(0, Site::Iad, 1, None)
        .ok("writer-0", 1, 0, 10, Site::Iad)
        .write("writer-0", 2, 20, 30, EventType::Fail, None)
        .write("writer-0", 3, 40, 50, EventType::Info, None)
        .final_state(
            100,
            &[(Site::Iad, vec![1, 3]), (Site::Reader, vec![1, 2, 3])],
        )
        .build();
    let (summary, verdict) = check_rpo(&history);
    assert_eq!(summary.unknown_present, 1);
    assert!(
        !verdict.valid
            && lost_lines(
                &verdict,
                "write 2 failed definitely but is present on reader"
            ),
        "{verdict:?}"
    );
}

// Every site is read: a replica holding a write the active site lacks has diverged, and an
// id no writer of this scenario wrote is a leftover of another.
#[test]
fn rpo_finds_divergent_replicas_and_leftover_rows() {
    let history = Builder::default()
        .status(0, Site::Iad, 1, None)
        .writes(0, 0, 1_000, 100, 20, Site::Iad)
        .write("writer-1", 50, 100, 2_000, EventType::Info, None)
        .final_state(
            3_000,
            &[
                (Site::Iad, (0..10).collect()),
                (Site::Reader, (0..10).chain([50, 777]).collect()),
            ],
        )
        .build();
    let (_, verdict) = check_rpo(&history);
    assert!(
        lost_lines(
            &verdict,
            "reader holds 1 write the active site iad lacks (silent divergence): 50"
        ),
        "{verdict:?}"
    );
    assert!(
        lost_lines(
            &verdict,
            "777 is present but no writer of this scenario wrote it"
        ),
        "{verdict:?}"
    );
    // The active site must be among the sites read, and known.
    let history = Builder::default()
        .status(0, Site::Iad, 1, None)
        .writes(0, 0, 1_000, 100, 20, Site::Iad)
        .final_state(3_000, &[(Site::Reader, (0..10).collect())])
        .build();
    let (_, verdict) = check_rpo(&history);
    assert!(
        lost_lines(&verdict, "the active site iad could not be read"),
        "{verdict:?}"
    );
    let history = Builder::default()
        .writes(0, 0, 1_000, 100, 20, Site::Iad)
        .final_state(3_000, &[(Site::Iad, (0..10).collect())])
        .build();
    assert!(lost_lines(&check_rpo(&history).1, "no group status"));
}

// An acknowledged write that recorded no GTID cannot be compared with lostGtidSet.
#[test]
fn rpo_lost_writes_need_their_gtid() {
    let mut history = emergency(&[97, 98, 99], Some(3), true);
    for event in &mut history.events {
        if let Op::Write { id: 99, gtid, .. } = &mut event.op {
            *gtid = None;
        }
    }
    let (_, verdict) = check_rpo(&history);
    assert!(
        !verdict.valid && lost_lines(&verdict, "write 99 is lost but recorded no GTID"),
        "{verdict:?}"
    );
    assert_eq!(gtid_of(Site::Iad, 99), "0-1-100");
}

proptest! {
    // Whatever subset of iad's writes is lost and whatever the operator names (plus any
    // number of other writers' transactions), an exact report passes iff it names exactly
    // the lost writes.
    #[test]
    fn rpo_exact_report_passes_iff_it_names_exactly_the_lost_writes(
        lost in proptest::collection::btree_set(0u64..100, 0..12),
        named in proptest::collection::btree_set(0u64..100, 0..12),
        others in 0u64..4,
        agree in proptest::bool::ANY,
    ) {
        let lost: Vec<u64> = lost.into_iter().collect();
        let named: Vec<u64> = if agree { lost.clone() } else { named.into_iter().collect() };
        let (summary, verdict) = check_rpo(&emergency_with(&lost, &exact(&named, others)));
        prop_assert_eq!(summary.lost, u64::try_from(lost.len()).unwrap_or(0));
        prop_assert_eq!(verdict.valid, named == lost, "{:?}", verdict);
    }
}

#[test]
fn rpo_summary_default_is_empty() {
    assert_eq!(RpoSummary::default().operator_reported(), None);
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

/// An emergency failover iad -> pdx with the phases [started, detected, fenced, promoted]
/// (ms), its snapshot at `promoted + 500` and a pdx write then, after `faults`.
fn failover_after(faults: Builder, phases: [u64; 4]) -> History {
    let record = failover(
        FailoverKind::Emergency,
        Site::Iad,
        Site::Pdx,
        phases,
        Some(0),
        true,
    );
    faults
        .status(0, Site::Iad, 1, None)
        .status(phases[3] + 500, Site::Pdx, 2, Some(record))
        .ok("writer-0", 1, phases[3] + 600, phases[3] + 620, Site::Pdx)
        .build()
}

// The reference is the fault that can trigger the failover (a fault on the old primary),
// at its effective start (when its injection completed), not the latest fault of any kind.
#[test]
fn timings_measure_from_the_effective_start_of_the_triggering_fault() {
    let faults = Builder::default()
        .fault_taking("kill", &[Site::Iad], 9_000, 10_000)
        .fault("deny-rbac", &[], 11_000, None)
        .fault("freeze", &[Site::Reader], 11_200, None);
    let (timings, verdict) =
        check_timings(&failover_after(faults, [11_500, 15_000, 16_000, 17_000]));
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(timings[0].fault.as_deref(), Some("kill"));
    assert_eq!(timings[0].fault_ns, 10_000_000_000);
    assert_eq!(timings[0].detected_ms, Some(5_000));
    // An emergency failover that no fault on iad can have triggered.
    let faults = Builder::default()
        .fault("deny-rbac", &[], 10_000, None)
        .fault("kill", &[Site::Pdx], 10_100, None);
    let (timings, verdict) =
        check_timings(&failover_after(faults, [11_500, 15_000, 16_000, 17_000]));
    assert_eq!(timings[0].fault, None);
    assert!(
        !verdict.valid && verdict.summary.contains("no fault that can trigger it"),
        "{verdict:?}"
    );
}

// A phase before the fault is negative and a finding, not zero.
#[test]
fn timings_negative_phases_are_findings() {
    let faults = Builder::default().fault("kill", &[Site::Iad], 10_000, None);
    let (timings, verdict) = check_timings(&failover_after(faults, [9_400, 9_500, 10_500, 11_000]));
    assert_eq!(timings[0].detected_ms, Some(-500));
    assert!(
        !verdict.valid
            && verdict
                .findings
                .iter()
                .any(|finding| finding
                    .contains("detected -500 ms after the `kill` fault took effect")),
        "{verdict:?}"
    );
}

// Failures are noticed from the first poll after the fault: detection comes between
// (failureThreshold - 1) and failureThreshold poll intervals after it (4 s to 6 s on the
// defaults), give or take a poll in flight (1 s).
#[test]
fn timings_compare_detection_with_the_real_window() {
    let detection = |detected_ms: u64, spec: Option<(u64, u32)>| {
        let record = failover(
            FailoverKind::Emergency,
            Site::Iad,
            Site::Pdx,
            [10_500, 10_000 + detected_ms, 17_000, 18_000],
            Some(0),
            true,
        );
        let history = Builder::default()
            .status_with(0, Site::Iad, 1, None, spec)
            .fault("kill", &[Site::Iad], 10_000, None)
            .status_with(18_500, Site::Pdx, 2, Some(record), spec)
            .ok("writer-0", 1, 18_600, 18_620, Site::Pdx)
            .build();
        check_timings(&history).1
    };
    for ok in [3_500, 4_000, 6_000, 6_900] {
        let verdict = detection(ok, Some((2_000, 3)));
        assert!(verdict.valid, "{ok}: {verdict:?}");
    }
    let verdict = detection(2_000, Some((2_000, 3)));
    assert!(
        !verdict.valid
            && verdict.summary.contains(
                "before the 4000 ms of failureThreshold - 1 = 2 poll intervals of 2000 ms"
            ),
        "{verdict:?}"
    );
    let verdict = detection(7_500, Some((2_000, 3)));
    assert!(
        !verdict.valid
            && verdict
                .summary
                .contains("after the 6000 ms of failureThreshold 3 poll intervals"),
        "{verdict:?}"
    );
    // The group's own spec: pollInterval 1 s, failureThreshold 5 -> 4 s to 5 s.
    assert!(detection(4_500, Some((1_000, 5))).valid);
    assert!(!detection(6_500, Some((1_000, 5))).valid);
    // Without the spec in the snapshots, the defaults (2 s, 3).
    assert!(detection(5_000, None).valid);
    assert!(!detection(1_000, None).valid);
}

// Scenario 037: a primary cut off from its peers alone stays writable until its lease runs
// out, so its failure (and detection) comes up to a lease later than the partition; a
// partition that also cuts the operator off fails it at once.
#[test]
fn timings_detection_window_of_a_peers_partition_adds_the_lease() {
    let judge = |detected_ms: u64, detail: &str| {
        let record = failover(
            FailoverKind::Emergency,
            Site::Iad,
            Site::Pdx,
            [13_500, 10_000 + detected_ms, 21_000, 22_000],
            Some(0),
            true,
        );
        let history = Builder::default()
            .status_with(0, Site::Iad, 1, None, Some((2_000, 3)))
            .fault_detailed("partition", &[Site::Iad], 10_000, detail)
            .status_with(22_500, Site::Pdx, 2, Some(record), Some((2_000, 3)))
            .ok("writer-0", 1, 22_600, 22_620, Site::Pdx)
            .build();
        check_timings(&history).1
    };
    let peers = r#"{"partition":{"peers":["iad"]}}"#;
    let sites = r#"{"partition":{"sites":["iad"]}}"#;
    assert!(judge(9_200, peers).valid, "{:?}", judge(9_200, peers));
    assert!(!judge(9_200, sites).valid);
    assert!(
        !judge(13_500, peers).valid,
        "beyond lease + threshold x interval + slack"
    );
}

// Issue 36: the lease of the window is the spec's `writeLease.duration` when it sets one (a
// profile may set it apart from the detection floor), not always pollInterval x
// failureThreshold.
#[test]
fn timings_detection_window_of_a_peers_partition_adds_the_spec_s_lease() {
    let judge = |detected_ms: u64, lease_ms: Option<u64>| {
        let record = failover(
            FailoverKind::Emergency,
            Site::Iad,
            Site::Pdx,
            [13_500, 10_000 + detected_ms, 28_000, 29_000],
            Some(0),
            true,
        );
        let builder = match lease_ms {
            Some(ms) => Builder::default().lease(ms),
            None => Builder::default(),
        };
        let history = builder
            .status_with(0, Site::Iad, 1, None, Some((2_000, 3)))
            .fault_detailed(
                "partition",
                &[Site::Iad],
                10_000,
                r#"{"partition":{"peers":["iad"]}}"#,
            )
            .status_with(29_500, Site::Pdx, 2, Some(record), Some((2_000, 3)))
            .ok("writer-0", 1, 29_600, 29_620, Site::Pdx)
            .build();
        check_timings(&history).1
    };
    // A 10 s lease: detection up to 6 s + 10 s + the slack after the partition.
    assert!(
        judge(15_500, Some(10_000)).valid,
        "{:?}",
        judge(15_500, Some(10_000))
    );
    assert!(!judge(17_500, Some(10_000)).valid);
    // Without the lease in the snapshots, the detection floor (6 s) stands in for it.
    assert!(!judge(15_500, None).valid);
}

// Scenario 011: the primary dies while the operator is scaled to zero; detection cannot
// start before it returns, so the upper bound counts from the heal, the lower from the fault.
#[test]
fn timings_detection_window_waits_for_the_operator() {
    let judge = |detected_ms: u64, outage: &dyn Fn(Builder) -> Builder| {
        let record = failover(
            FailoverKind::Emergency,
            Site::Iad,
            Site::Pdx,
            [
                41_000,
                detected_ms,
                detected_ms + 1_000,
                detected_ms + 2_000,
            ],
            Some(0),
            true,
        );
        let history = outage(Builder::default().status(0, Site::Iad, 1, None))
            .fault("stop-node", &[Site::Iad], 10_000, None)
            .status(detected_ms + 2_500, Site::Pdx, 2, Some(record))
            .ok(
                "writer-0",
                1,
                detected_ms + 2_600,
                detected_ms + 2_620,
                Site::Pdx,
            )
            .build();
        check_timings(&history).1
    };
    let scaled = |builder: Builder| builder.fault("scale-operator", &[], 5_000, Some(40_000));
    assert!(judge(45_000, &scaled).valid, "{:?}", judge(45_000, &scaled));
    let verdict = judge(50_000, &scaled);
    assert!(
        !verdict.valid && verdict.summary.contains("after the operator came back"),
        "{verdict:?}"
    );
    // Without the outage the same detection is far too late.
    assert!(!judge(45_000, &|builder| builder).valid);
    // A killed operator comes back on its own: no upper bound.
    let killed = |builder: Builder| builder.fault("kill-operator", &[], 9_000, Some(9_000));
    assert!(judge(45_000, &killed).valid);
    // ... but not one killed long before the fault.
    let long_ago = |builder: Builder| builder.fault("kill-operator", &[], 0, Some(0));
    let record = failover(
        FailoverKind::Emergency,
        Site::Iad,
        Site::Pdx,
        [90_500, 100_000, 101_000, 102_000],
        Some(0),
        true,
    );
    let history = long_ago(Builder::default().status(0, Site::Iad, 1, None))
        .fault("stop-node", &[Site::Iad], 90_000, None)
        .status(102_500, Site::Pdx, 2, Some(record))
        .ok("writer-0", 1, 102_600, 102_620, Site::Pdx)
        .build();
    assert!(!check_timings(&history).1.valid);
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
        .fault("kill", &[Site::Iad], 1_000, None)
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
        .fault("kill", &[Site::Iad], 1_000, None)
        .status(9_000, Site::Pdx, 2, Some(record))
        .build();
    let (_, verdict) = check_timings(&history);
    assert!(
        !verdict.valid
            && verdict
                .findings
                .iter()
                .any(|finding| finding.contains("without the old primary ever being fenced")),
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
        .fault("kill", &[Site::Iad], 1_000, None)
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
        .fault("kill", &[Site::Iad], 1_000, None)
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

/// s016 in the conformance run at 2be9af1: a planned failover iad -> pdx, then pdx's node
/// stopped 0.3 s after its promotion (before the primary Service could move to it), and the
/// emergency failover back to iad. The workload's writes after the stop belong to that second
/// failover's tenure, and 0.3 s is too short a tenure to expect a write (the operator confirms
/// the new site and moves the Service within two polls): "pdx never acknowledged a write" was
/// judged on them. The same history with pdx left serving for 6 s and never acknowledging
/// still fails.
#[test]
fn timings_judge_the_new_primary_only_within_its_tenure() {
    let planned = failover(
        FailoverKind::Planned,
        Site::Iad,
        Site::Pdx,
        [1_000, 1_000, 1_700, 2_000],
        Some(0),
        true,
    );
    let back = |stopped: u64| {
        failover(
            FailoverKind::Emergency,
            Site::Pdx,
            Site::Iad,
            [
                stopped + 20_000,
                stopped + 20_000,
                stopped + 40_000,
                stopped + 40_300,
            ],
            Some(0),
            true,
        )
    };
    let history = |stopped: u64| {
        let mut builder = Builder::default()
            .fault("annotate", &[Site::Pdx], 1_000, None)
            .status(2_100, Site::Pdx, 2, Some(planned.clone()))
            .fault("stop-node", &[Site::Pdx], stopped, None);
        let mut id = 1;
        let mut at = 1_000;
        while at < stopped + 40_400 {
            builder = builder.write("writer-0", id, at, at + 100, EventType::Info, None);
            id += 1;
            at += 200;
        }
        builder
            .primary_endpoints(stopped + 40_500, vec![Site::Iad])
            .ok(
                "writer-0",
                id,
                stopped + 40_600,
                stopped + 40_650,
                Site::Iad,
            )
            .status(stopped + 41_000, Site::Iad, 3, Some(back(stopped)))
            .build()
    };
    let (timings, verdict) = check_timings(&history(2_300));
    assert_eq!(timings.len(), 2, "{timings:?}");
    assert!(
        !verdict
            .findings
            .iter()
            .any(|finding| finding.contains("pdx never acknowledged")),
        "{verdict:?}"
    );
    assert_eq!(timings[1].first_write_ms, Some(40_650));
    let (_, verdict) = check_timings(&history(8_000));
    assert!(
        verdict
            .findings
            .iter()
            .any(|finding| finding.contains("planned failover iad -> pdx: the workload kept writing but pdx never acknowledged a write")),
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

// docs/design/requirements.md R001.9: detection costs pollInterval x failureThreshold = 6s; faster
// is a failure.
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

// ---- workload liveness ----

use bloodraven_harness::report::results::ScenarioIdentity;
use bloodraven_harness::runner::judge::judge;

fn judged(history: &History) -> bloodraven_harness::report::results::ScenarioResult {
    judge(
        ScenarioIdentity {
            id: 20,
            trial: "s020_primary_killed",
            title: "t",
            seed: "s",
        },
        history,
        Vec::new(),
        Vec::new(),
        None,
        1_000,
    )
}

// A scenario whose workload never acknowledged a write proves nothing and must not pass.
#[test]
fn a_scenario_with_no_acknowledged_write_fails() {
    assert!(judged(&emergency(&[97, 98, 99], Some(3), true)).passed);
    let record = failover(
        FailoverKind::Emergency,
        Site::Iad,
        Site::Pdx,
        [11_000, 16_000, 17_000, 18_000],
        Some(0),
        true,
    );
    let silent = Builder::default()
        .status(500, Site::Iad, 1, None)
        .fault("kill", &[Site::Iad], 10_000, Some(40_000))
        .status(18_500, Site::Pdx, 2, Some(record))
        .final_state(50_000, &[(Site::Pdx, Vec::new()), (Site::Iad, Vec::new())])
        .build();
    let result = judged(&silent);
    assert!(!result.passed, "{result:?}");
    assert!(
        result.failure.as_deref().is_some_and(|failure| failure
            .starts_with("workload liveness: no write was acknowledged before the first fault")),
        "{:?}",
        result.failure
    );
}

#[test]
fn liveness_needs_a_write_before_the_first_fault_and_after_the_last_heal() {
    use bloodraven_harness::check::liveness::check_liveness;
    assert!(check_liveness(&emergency(&[], Some(0), true)).valid);
    let before_only = Builder::default()
        .writes(0, 0, 1_000, 100, 20, Site::Iad)
        .fault("kill", &[Site::Iad], 2_000, Some(5_000))
        .build();
    let verdict = check_liveness(&before_only);
    assert!(
        !verdict.valid
            && verdict
                .summary
                .contains("after the last heal (`kill` at 5.000s)"),
        "{verdict:?}"
    );
    let after_only = Builder::default()
        .fault("kill", &[Site::Iad], 2_000, Some(5_000))
        .writes(0, 6_000, 7_000, 100, 20, Site::Iad)
        .build();
    assert!(!check_liveness(&after_only).valid);
    // A write in flight across the fault does not count as before it.
    let straddling = Builder::default()
        .ok("writer-0", 1, 1_900, 2_100, Site::Iad)
        .fault("kill", &[Site::Iad], 2_000, Some(5_000))
        .writes(2, 6_000, 7_000, 100, 20, Site::Iad)
        .build();
    assert!(!check_liveness(&straddling).valid);
    // One-shot faults only: after the last of them.
    let one_shot = Builder::default()
        .writes(0, 0, 1_000, 100, 20, Site::Iad)
        .fault("annotate", &[Site::Pdx], 2_000, None)
        .build();
    assert!(!check_liveness(&one_shot).valid);
    // No fault: one acknowledged write at all.
    assert!(!check_liveness(&Builder::default().build()).valid);
    assert!(
        check_liveness(
            &Builder::default()
                .ok("writer-0", 1, 0, 10, Site::Iad)
                .build()
        )
        .valid
    );
    // Failed and unknown writes are not acknowledged.
    let unknown = Builder::default()
        .write("writer-0", 1, 0, 10, EventType::Info, None)
        .write("writer-0", 2, 20, 30, EventType::Fail, None)
        .build();
    assert!(!check_liveness(&unknown).valid);
}

/// A restore in place of iad at 20 s (fenced at 21 s, re-promoted at 24 s): writes 0..=99
/// every 200 ms before it, the backup taken after write 79; iad serves again from 25 s.
/// `named` are the ids whose GTIDs the operator's `lostGtidSet` names.
fn restored(named: &[u64], final_ids: &[u64]) -> History {
    let record = RestoreRecord {
        site: Site::Iad,
        backup: "b1".to_owned(),
        phase: "Completed".to_owned(),
        requested_at: crate::support::wall(20_000),
        fenced_at: Some(crate::support::wall(21_000)),
        promoted_at: Some(crate::support::wall(24_000)),
        lost_transactions: Some(u64::try_from(named.len()).unwrap_or(0)),
        lost_gtid_set: Some(crate::support::gtid_set(Site::Iad, named, 0)),
        exact: true,
    };
    let mut on_iad: Vec<u64> = final_ids.to_vec();
    on_iad.extend(100..110);
    Builder::default()
        .status(0, Site::Iad, 1, None)
        .writes(0, 0, 20_000, 200, 5, Site::Iad)
        .restore_status(24_500, Site::Iad, 2, record)
        .writes(100, 25_000, 27_000, 200, 5, Site::Iad)
        .final_state(
            30_000,
            &[
                (Site::Iad, on_iad.clone()),
                (Site::Pdx, on_iad.clone()),
                (Site::Reader, on_iad),
            ],
        )
        .build()
}

// docs/design/history.md#issue-12-part-2: what a restore in place discards (written after its
// backup, before its fence) is its loss, named exactly by status.restore.lostGtidSet; the checker
// fails a loss the set does not name, and a named write that survived.
#[test]
fn rpo_attributes_a_restores_loss_to_its_lost_gtid_set() {
    let kept: Vec<u64> = (0..80).collect();
    let discarded: Vec<u64> = (80..100).collect();
    let (summary, verdict) = check_rpo(&restored(&discarded, &kept));
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(summary.lost, 20);
    let row = &summary.restores[0];
    assert_eq!((row.lost, row.operator_lost_writes), (20, 20));
    assert!(summary.failovers.is_empty());
    // The run's totals count the restore's report (the summary line and the report's RPO
    // table said "operator reported nothing" and "exact: no" for 052's exact restore).
    assert_eq!(summary.operator_reported(), Some(20));
    assert!(summary.exact());
    assert!(
        verdict.summary.contains("operator reported 20 (exact)"),
        "{verdict:?}"
    );

    let (_, verdict) = check_rpo(&restored(&discarded[1..], &kept));
    assert!(!verdict.valid);
    assert!(
        lost_lines(
            &verdict,
            "write 80 (0-1-81) is lost but missing from the lostGtidSet"
        ),
        "{verdict:?}"
    );

    let mut survived = kept.clone();
    survived.push(80);
    let (_, verdict) = check_rpo(&restored(&discarded, &survived));
    assert!(!verdict.valid);
    assert!(lost_lines(&verdict, "names write 80"), "{verdict:?}");

    // A quick restore: writes on the rewound history, invoked within the cross-clock slack
    // of the fence (21 s), reuse the discarded GTIDs (write 200 gets write 80's). They are
    // not what the set names: the earlier write with that GTID is; one that reuses the
    // number of a discarded transaction no acknowledged write held (the counter app's) is
    // not judged within the slack.
    let mut on_iad = kept.clone();
    on_iad.extend([200, 201, 202]);
    let record = RestoreRecord {
        site: Site::Iad,
        backup: "b1".to_owned(),
        phase: "Completed".to_owned(),
        requested_at: crate::support::wall(20_000),
        fenced_at: Some(crate::support::wall(21_000)),
        promoted_at: Some(crate::support::wall(21_250)),
        lost_transactions: Some(21),
        lost_gtid_set: Some(crate::support::gtid_set(Site::Iad, &discarded, 1)),
        exact: true,
    };
    let quick = Builder::default()
        .status(0, Site::Iad, 1, None)
        .writes(0, 0, 20_000, 200, 5, Site::Iad)
        .restore_status(21_300, Site::Iad, 2, record)
        .raw_write(
            "writer-0",
            200,
            21_400,
            21_410,
            EventType::Ok,
            Some(Site::Iad),
            Some(crate::support::gtid_of(Site::Iad, 80)),
        )
        .raw_write(
            "writer-1",
            201,
            21_500,
            21_510,
            EventType::Ok,
            Some(Site::Iad),
            Some(crate::support::gtid_of(Site::Iad, 81)),
        )
        // The counter app's discarded transaction's number, no acknowledged write's.
        .raw_write(
            "writer-0",
            202,
            21_600,
            21_610,
            EventType::Ok,
            Some(Site::Iad),
            Some("0-1-900001".to_owned()),
        )
        .final_state(
            30_000,
            &[
                (Site::Iad, on_iad.clone()),
                (Site::Pdx, on_iad.clone()),
                (Site::Reader, on_iad),
            ],
        )
        .build();
    let (summary, verdict) = check_rpo(&quick);
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(summary.restores[0].operator_lost_writes, 20);
}

// Missing evidence is a finding: a completed emergency failover without detectedAt, fencedAt
// or promotedAt switched the matching timing checks off without a word.
#[test]
fn timings_a_completed_emergency_failover_without_its_phase_times_is_a_finding() {
    let faults = || Builder::default().fault_taking("kill", &[Site::Iad], 9_000, 10_000);
    let phases = [11_500, 15_000, 16_000, 17_000];
    for strip in ["detectedAt", "fencedAt", "promotedAt"] {
        let mut record = failover(
            FailoverKind::Emergency,
            Site::Iad,
            Site::Pdx,
            phases,
            Some(0),
            true,
        );
        match strip {
            "detectedAt" => record.detected_at = None,
            "fencedAt" => record.fenced_at = None,
            _ => record.promoted_at = None,
        }
        let history = faults()
            .status(0, Site::Iad, 1, None)
            .status(phases[3] + 500, Site::Pdx, 2, Some(record))
            .ok("writer-0", 1, phases[3] + 600, phases[3] + 620, Site::Pdx)
            .build();
        let (_, verdict) = check_timings(&history);
        assert!(
            !verdict.valid
                && verdict.summary.contains("missing evidence")
                && verdict.summary.contains(strip),
            "{strip}: {verdict:?}"
        );
    }
    // With every phase time it passes.
    let (_, verdict) = check_timings(&failover_after(faults(), phases));
    assert!(verdict.valid, "{verdict:?}");
}
