//! The archive checker (docs/design/harness.md, "History and checkers"): a rejoined site's
//! archive, read back and verified by the harness, holds every acknowledged write the failover
//! that demoted it lost. Over hand-built archive contents and histories, including the ones
//! that must fail: a lost write missing from the archive, a checksum that does not match, no
//! manifest.

use std::collections::BTreeMap;

use bloodraven_harness::check::archive::{
    binlog_gtids, check_archive, gtid_marker, judge_observation, verify_archive,
    ArchiveObservation, FileContent,
};
use bloodraven_harness::history::event::{ArchiveRead, EventType, FailoverKind};
use bloodraven_harness::history::store::History;
use bloodraven_harness::scenario::model::Site;

use crate::support::{
    emergency_with, epoch, failover, gtid_of, gtid_set, wall, ArchiveFixture, Builder, Reported,
};

/// The writes the failover of [`emergency_with`] loses: iad's last five.
const LOST: [u64; 5] = [95, 96, 97, 98, 99];

/// The GTIDs of `ids` acknowledged by `site`.
fn gtids(site: Site, ids: &[u64]) -> Vec<String> {
    ids.iter().map(|id| gtid_of(site, *id)).collect()
}

/// GTIDs of `count` transactions of iad's other writers (the counter app), numbered past every
/// workload write as [`gtid_set`] numbers them.
fn others(count: u64) -> Vec<String> {
    (1..=count)
        .map(|n| format!("0-1-{}", 900_000 + n))
        .collect()
}

/// [`emergency_with`] losing [`LOST`], reported exactly, then an archive read of `site` at
/// 45 s (after the failover, before the final read at 50 s) of `archives`.
fn rejoined(site: Site, archives: Vec<ArchiveRead>) -> History {
    let history = emergency_with(
        &LOST,
        &Reported {
            writes: LOST.to_vec(),
            others: 3,
            exact: true,
        },
    );
    Builder::from_history(history)
        .archive_read(45_000, site, epoch(), archives)
        .build()
}

/// An archive of iad written at 40 s holding `gtids`.
fn iad_archive(gtids: &[String]) -> ArchiveFixture {
    ArchiveFixture::holding("rejoin-iad-1767225600", Site::Iad, wall(40_000), gtids)
}

fn lost_and_others() -> Vec<String> {
    let mut all = gtids(Site::Iad, &LOST);
    all.extend(others(3));
    all
}

// The header lines of GTID events, and nothing else: the harness's reader of the errant binlog
// agrees with the lines the sidecar's archive tests use (operator/sidecar/src/archive.rs).
#[test]
fn the_gtids_of_an_errant_binlog_are_its_gtid_event_headers() {
    assert_eq!(
        gtid_marker(
            "#261206 13:03:03 server id 1  end_log_pos 413 CRC32 0x6a3da9ee \tGTID 0-1-5 trans"
        )
        .as_deref(),
        Some("0-1-5")
    );
    assert_eq!(
        gtid_marker("#261206 13:03:04 server id 7  end_log_pos 900 \tGTID 1-7-3 ddl").as_deref(),
        Some("1-7-3")
    );
    for not_one in [
        "#261206 13:02:55 server id 1  end_log_pos 285 CRC32 0x48f73c85 \tGtid list [0-1-4]",
        "#261206 13:03:03 server id 1  end_log_pos 413 \tGTID 0-1-x trans",
        "### @1='\tGTID 0-1-5'",
        "insert into app.t values (5,'#261206 13:03:03 server id 1  end_log_pos 1 \tGTID 0-1-99 trans')",
        "-- bloodraven archive: errant transactions 0-1-9..9",
        "#700101  0:00:00 server id 1  end_log_pos 0 \tRotate to mysql-bin.000001  pos: 4",
    ] {
        assert_eq!(gtid_marker(not_one), None, "{not_one}");
    }
    let text = crate::support::binlog_text(&gtids(Site::Iad, &[4, 5]));
    assert_eq!(binlog_gtids(text.as_bytes()), ["0-1-5", "0-1-6"]);
    // Not UTF-8 in a row image: still read line by line.
    let mut bytes = b"### @2='\xff\xfe'\n".to_vec();
    bytes.extend_from_slice(text.as_bytes());
    assert_eq!(binlog_gtids(&bytes), ["0-1-5", "0-1-6"]);
}

#[test]
fn an_intact_archive_verifies_and_satisfies_the_expectation() {
    let read = iad_archive(&lost_and_others()).read(Site::Iad);
    assert!(read.problems.is_empty(), "{:?}", read.problems);
    assert!(read.manifest);
    assert_eq!(read.binlog_gtids.len(), 8);
    assert_eq!(read.files.len(), 2);
    assert!(read
        .files
        .iter()
        .all(|file| file.read_sha256.as_deref() == Some(file.sha256.as_str())));
    let observation = ArchiveObservation {
        site: Site::Iad,
        archives: vec![read],
    };
    assert_eq!(judge_observation(&observation, epoch()), Ok(()));
    // The observation's JSON shape reads back (what the runner records).
    let value = serde_json::to_value(&observation).expect("json");
    assert!(
        value.pointer("/archives/0/binlogGtids/0").is_some(),
        "{value}"
    );
    let back: ArchiveObservation = serde_json::from_value(value).expect("reads back");
    assert_eq!(back, observation);
}

// Must fail: the bytes read back are not those the manifest describes.
#[test]
fn a_checksum_or_size_that_does_not_match_the_manifest_is_a_problem() {
    let fixture = iad_archive(&lost_and_others()).edit_manifest(|manifest| {
        manifest["files"][1]["sha256"] = "00".repeat(32).into();
    });
    let read = fixture.read(Site::Iad);
    assert!(
        read.problems
            .iter()
            .any(|problem| problem.starts_with("dump.sql: SHA-256 read back")),
        "{:?}",
        read.problems
    );
    let observation = ArchiveObservation {
        site: Site::Iad,
        archives: vec![read.clone()],
    };
    let why = judge_observation(&observation, epoch()).expect_err("does not verify");
    assert!(why.contains("iad's archive does not verify"), "{why}");
    let verdict = check_archive(&rejoined(Site::Iad, vec![read]));
    assert!(!verdict.valid);
    assert!(
        verdict
            .findings
            .iter()
            .any(|finding| finding.contains("SHA-256 read back")),
        "{verdict:?}"
    );

    let mut fixture = iad_archive(&lost_and_others());
    if let Some(FileContent::Bytes(bytes)) = fixture.files.get_mut("errant.binlog.sql") {
        bytes.push(b'\n');
    }
    let read = fixture.read(Site::Iad);
    assert!(
        read.problems
            .iter()
            .any(|problem| problem.contains("bytes read back, the manifest says")),
        "{:?}",
        read.problems
    );
    let fixture = ArchiveFixture {
        files: BTreeMap::new(),
        ..iad_archive(&lost_and_others())
    };
    let read = fixture.read(Site::Iad);
    assert_eq!(read.problems.len(), 2, "{:?}", read.problems);
    let mut fixture = iad_archive(&lost_and_others());
    fixture
        .files
        .insert("dump.sql".to_owned(), FileContent::Missing);
    assert!(fixture
        .read(Site::Iad)
        .problems
        .iter()
        .any(|problem| problem.contains("dump.sql, named by the manifest, is not in the archive")));
}

// Must fail: a directory without manifest.json is a partial archive, which never counts.
#[test]
fn an_archive_without_a_manifest_never_counts() {
    let fixture = ArchiveFixture {
        manifest: None,
        ..iad_archive(&lost_and_others())
    };
    let read = fixture.read(Site::Iad);
    assert!(!read.manifest);
    assert!(read.problems[0].contains("no manifest.json"), "{read:?}");
    let observation = ArchiveObservation {
        site: Site::Iad,
        archives: vec![read.clone()],
    };
    let why = judge_observation(&observation, epoch()).expect_err("partial");
    assert!(
        why.contains("no archive with a manifest") && why.contains("(partial: no manifest.json)"),
        "{why}"
    );
    let verdict = check_archive(&rejoined(Site::Iad, vec![read]));
    assert!(!verdict.valid);
    assert!(
        verdict.summary.contains("no intact archive of iad"),
        "{verdict:?}"
    );
    // No archive at all.
    let empty = ArchiveObservation {
        site: Site::Iad,
        archives: Vec::new(),
    };
    let why = judge_observation(&empty, epoch()).expect_err("none");
    assert!(why.contains("(found: none)"), "{why}");
    // A manifest that does not read, or names another site or directory.
    let garbled = ArchiveFixture {
        manifest: Some(b"{\"name\":".to_vec()),
        ..iad_archive(&lost_and_others())
    };
    assert!(garbled.read(Site::Iad).problems[0].contains("manifest.json does not read"));
    let elsewhere = iad_archive(&lost_and_others()).read(Site::Pdx);
    assert!(
        elsewhere
            .problems
            .iter()
            .any(|problem| problem.contains("names site \"iad\", but it is on pdx's volume")),
        "{:?}",
        elsewhere.problems
    );
}

// A reused cluster's volume may keep another scenario's archive: it is not this one's.
#[test]
fn an_archive_written_before_the_scenario_does_not_count() {
    let old = ArchiveFixture::holding(
        "rejoin-iad-1",
        Site::Iad,
        epoch() - jiff::SignedDuration::from_secs(600),
        &lost_and_others(),
    )
    .read(Site::Iad);
    let observation = ArchiveObservation {
        site: Site::Iad,
        archives: vec![old.clone()],
    };
    let why = judge_observation(&observation, epoch()).expect_err("too old");
    assert!(why.contains("before the scenario"), "{why}");
    let verdict = check_archive(&rejoined(Site::Iad, vec![old]));
    assert!(!verdict.valid, "{verdict:?}");
}

// The errant binlog must hold exactly the manifest's errant set, each transaction once.
#[test]
fn an_errant_binlog_that_is_not_exactly_the_errant_set_is_a_problem() {
    let set = gtid_set(Site::Iad, &LOST, 0);
    let short = ArchiveFixture::new(
        "a",
        Site::Iad,
        wall(40_000),
        &set,
        &gtids(Site::Iad, &LOST[..4]),
    )
    .read(Site::Iad);
    assert!(
        short.problems[0].contains("1 of the errant set missing (0-1-100..100)"),
        "{:?}",
        short.problems
    );
    let mut twice = gtids(Site::Iad, &LOST);
    twice.push(gtid_of(Site::Iad, 95));
    twice.push(gtid_of(Site::Iad, 10));
    let read = ArchiveFixture::new("a", Site::Iad, wall(40_000), &set, &twice).read(Site::Iad);
    assert!(
        read.problems[0].contains("1 not in the errant set (0-1-11..11)")
            && read.problems[0].contains("found twice: 0-1-96"),
        "{:?}",
        read.problems
    );
}

#[test]
fn an_archive_holding_every_lost_write_passes() {
    let read = iad_archive(&lost_and_others()).read(Site::Iad);
    let verdict = check_archive(&rejoined(Site::Iad, vec![read]));
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(
        verdict.summary,
        "iad: 5 of the 5 acknowledged writes lost in the emergency failover iad -> pdx are in rejoin-iad-1767225600, with 3 other errant transactions (writes of unknown outcome, the counter app, other writers)"
    );
}

// Must fail: a lost acknowledged write whose GTID no archive holds was thrown away.
#[test]
fn an_archive_missing_a_lost_write_fails() {
    let mut held = gtids(Site::Iad, &[95, 96, 98, 99]);
    held.extend(others(3));
    let read = iad_archive(&held).read(Site::Iad);
    assert!(
        read.problems.is_empty(),
        "self-consistent: {:?}",
        read.problems
    );
    let verdict = check_archive(&rejoined(Site::Iad, vec![read]));
    assert!(!verdict.valid);
    assert_eq!(
        verdict.findings,
        ["acknowledged write 97 (0-1-98) was lost in the emergency failover iad -> pdx and is in no archive of iad (rejoin-iad-1767225600): thrown away without a copy"]
    );
    // Two archives of the site together hold it: nothing was thrown away.
    let second = ArchiveFixture::holding(
        "rejoin-iad-1767225700",
        Site::Iad,
        wall(42_000),
        &gtids(Site::Iad, &[97]),
    )
    .read(Site::Iad);
    let first = iad_archive(&held).read(Site::Iad);
    let verdict = check_archive(&rejoined(Site::Iad, vec![first, second]));
    assert!(verdict.valid, "{verdict:?}");
}

// Must fail: an archived GTID of an acknowledged write that survived was never errant.
#[test]
fn an_archive_naming_a_write_that_survived_fails() {
    let mut held = lost_and_others();
    held.push(gtid_of(Site::Iad, 50));
    let verdict = check_archive(&rejoined(
        Site::Iad,
        vec![iad_archive(&held).read(Site::Iad)],
    ));
    assert!(!verdict.valid);
    assert!(
        verdict.findings[0].contains(
            "holds 0-1-51, the GTID of acknowledged write 50 by iad, which survived (it is on the active site pdx)"
        ),
        "{verdict:?}"
    );
}

#[test]
fn an_archive_of_a_site_that_was_never_demoted_in_an_emergency_fails() {
    let read = ArchiveFixture::holding("rejoin-pdx-1", Site::Pdx, wall(40_000), &others(2))
        .read(Site::Pdx);
    let verdict = check_archive(&rejoined(Site::Pdx, vec![read]));
    assert!(!verdict.valid);
    assert!(
        verdict.findings[0].contains("no emergency failover away from pdx was observed before it"),
        "{verdict:?}"
    );
}

#[test]
fn a_history_without_an_archive_read_is_not_judged() {
    let history = emergency_with(&LOST, &Reported::default());
    let verdict = check_archive(&history);
    assert!(verdict.valid);
    assert_eq!(verdict.summary, "not judged: no step read an archive");
}

#[test]
fn the_archives_cannot_be_judged_without_a_final_state() {
    let history = Builder::default()
        .status(500, Site::Iad, 1, None)
        .writes(0, 0, 1_000, 100, 20, Site::Iad)
        .archive_read(2_000, Site::Iad, epoch(), Vec::new())
        .build();
    let verdict = check_archive(&history);
    assert!(!verdict.valid);
    assert!(
        verdict.summary.contains("no final state was read"),
        "{verdict:?}"
    );
}

/// Two emergency failovers: iad -> pdx (iad's 95..99 lost), then pdx -> iad (pdx's
/// 1095..1099 lost); archive reads of iad and pdx at 80 and 85 s, before the final read.
fn two_failovers(iad: Vec<ArchiveRead>, pdx: Vec<ArchiveRead>) -> History {
    let mut first = failover(
        FailoverKind::Emergency,
        Site::Iad,
        Site::Pdx,
        [11_000, 16_000, 17_000, 18_000],
        Some(5),
        true,
    );
    first.lost_gtid_set = Some(gtid_set(Site::Iad, &LOST, 0));
    let second = failover(
        FailoverKind::Emergency,
        Site::Pdx,
        Site::Iad,
        [61_000, 66_000, 67_000, 68_000],
        Some(5),
        true,
    );
    let iad_final: Vec<u64> = (0..95).chain(1000..1095).chain(2000..2050).collect();
    let pdx_final: Vec<u64> = (0..95).chain(1000..1100).collect();
    Builder::default()
        .status(500, Site::Iad, 1, None)
        .writes(0, 0, 10_000, 100, 20, Site::Iad)
        .fault("kill", &[Site::Iad], 10_000, Some(40_000))
        .status(18_500, Site::Pdx, 2, Some(first.clone()))
        .writes(1000, 20_000, 30_000, 100, 20, Site::Pdx)
        .status(45_000, Site::Pdx, 2, Some(first))
        .fault("kill", &[Site::Pdx], 60_000, Some(75_000))
        .status(68_500, Site::Iad, 3, Some(second))
        .writes(2000, 70_000, 75_000, 100, 20, Site::Iad)
        .archive_read(80_000, Site::Iad, epoch(), iad)
        .archive_read(85_000, Site::Pdx, epoch(), pdx)
        .final_state(
            90_000,
            &[
                (Site::Iad, iad_final.clone()),
                (Site::Pdx, pdx_final),
                (Site::Reader, iad_final),
            ],
        )
        .build()
}

// Each archive is judged against the failover that demoted its own site.
#[test]
fn each_site_s_archive_is_judged_against_the_failover_that_demoted_it() {
    let pdx_lost = [1095, 1096, 1097, 1098, 1099];
    let iad = iad_archive(&gtids(Site::Iad, &LOST)).read(Site::Iad);
    let pdx = ArchiveFixture::holding(
        "rejoin-pdx-1767225900",
        Site::Pdx,
        wall(78_000),
        &gtids(Site::Pdx, &pdx_lost),
    )
    .read(Site::Pdx);
    let verdict = check_archive(&two_failovers(vec![iad.clone()], vec![pdx]));
    assert!(verdict.valid, "{verdict:?}");
    assert!(
        verdict.summary.contains(
            "iad: 5 of the 5 acknowledged writes lost in the emergency failover iad -> pdx"
        ) && verdict.summary.contains(
            "pdx: 5 of the 5 acknowledged writes lost in the emergency failover pdx -> iad"
        ),
        "{}",
        verdict.summary
    );
    // pdx's archive holding iad's lost writes instead of its own: two kinds of finding.
    let wrong = ArchiveFixture::holding(
        "rejoin-pdx-1767225900",
        Site::Pdx,
        wall(78_000),
        &gtids(Site::Iad, &LOST),
    )
    .read(Site::Pdx);
    let verdict = check_archive(&two_failovers(vec![iad], vec![wrong]));
    assert!(!verdict.valid);
    assert!(
        verdict
            .findings
            .iter()
            .any(|finding| finding.contains("acknowledged write 1095 (0-2-1096) was lost in the emergency failover pdx -> iad and is in no archive of pdx")),
        "{verdict:?}"
    );
    assert!(
        verdict.findings.iter().any(|finding| finding.contains(
            "the GTID of acknowledged write 95 by iad, which was lost in the emergency failover iad -> pdx instead"
        )),
        "{verdict:?}"
    );
}

// A recorded read that does not verify fails the checker on its own, whatever the expectation
// said (a history re-read by `bloodraven-upgrade` or a report is judged the same).
#[test]
fn a_recorded_archive_that_does_not_verify_is_a_finding() {
    let mut fixture = iad_archive(&lost_and_others());
    fixture.files.insert(
        "errant.binlog.sql".to_owned(),
        FileContent::Unreadable("exec failed".to_owned()),
    );
    let read = verify_archive(
        &fixture.name,
        Site::Iad,
        fixture.manifest.as_deref(),
        &fixture.files,
    );
    let verdict = check_archive(&rejoined(Site::Iad, vec![read]));
    assert!(!verdict.valid);
    assert!(
        verdict.findings[0]
            .contains("archive rejoin-iad-1767225600 of iad: errant.binlog.sql could not be read back: exec failed"),
        "{verdict:?}"
    );
}

// Reads the runner recorded as failed (the expectation was not satisfied) are not judged.
#[test]
fn only_satisfied_reads_are_judged() {
    let history = rejoined(
        Site::Iad,
        vec![iad_archive(&lost_and_others()).read(Site::Iad)],
    );
    let events = history
        .events
        .into_iter()
        .map(|mut event| {
            if event.process == "archive" && event.kind == EventType::Ok {
                event.kind = EventType::Fail;
            }
            event
        })
        .collect();
    let verdict = check_archive(&History::new(events));
    assert!(verdict.valid);
    assert!(verdict.summary.starts_with("not judged"), "{verdict:?}");
}
