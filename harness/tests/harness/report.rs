//! Report rendering on synthetic results: well-formed HTML with the expected numbers,
//! results.json, junit.xml, history.jsonl, trend.jsonl and trends.html.

use crate::support::{emergency, epoch};
use bloodraven_harness::check::expectations::{ExpectMode, ExpectationResult, MeasureResult};
use bloodraven_harness::history::store::History;
use bloodraven_harness::report::html::{render_index, render_trends};
use bloodraven_harness::report::junit::render_junit;
use bloodraven_harness::report::results::{RunResults, ScenarioIdentity};
use bloodraven_harness::report::svg::{fault_intervals, write_buckets};
use bloodraven_harness::report::trend::{read_trend, TrendEntry};
use bloodraven_harness::report::write::{render_trends_file, write_report};
use bloodraven_harness::runner::judge::judge;
use bloodraven_harness::scenario::model::Quantity;

/// HTML void elements (no end tag).
const VOID: [&str; 6] = ["meta", "br", "hr", "img", "input", "link"];

/// Checks that every tag is closed in order (a small well-formedness check: maud escapes
/// text, so a stray `<` in data would show up here as an unbalanced tag).
fn assert_well_formed(html: &str) {
    assert!(html.starts_with("<!DOCTYPE html>"), "no doctype");
    let mut stack: Vec<String> = Vec::new();
    let mut rest = html.trim_start_matches("<!DOCTYPE html>");
    while let Some(start) = rest.find('<') {
        let Some(end) = rest[start..].find('>') else {
            panic!("unterminated tag near {}", &rest[start..])
        };
        let tag = &rest[start + 1..start + end];
        rest = &rest[start + end + 1..];
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        assert!(!name.is_empty(), "bad tag <{tag}>");
        if tag.starts_with('/') {
            let open = stack
                .pop()
                .unwrap_or_else(|| panic!("</{name}> closes nothing"));
            assert_eq!(open, name, "</{name}> closes <{open}>");
        } else if !tag.ends_with('/') && !VOID.contains(&name.as_str()) {
            stack.push(name);
        }
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
}

fn sample_run() -> (RunResults, Vec<History>) {
    let passing = emergency(&[97, 98, 99], Some(3), true);
    let failing = emergency(&[97, 98, 99], Some(1), true);
    let expectations = vec![ExpectationResult {
        step: 3,
        name: "group: {\"activeSite\":\"pdx\"}".to_owned(),
        mode: ExpectMode::Within,
        span_ms: 20_000,
        satisfied: true,
        time_to_satisfy_ms: Some(8_250),
        started_ms: 10_000,
        failure: None,
    }];
    let measures = vec![
        MeasureResult {
            step: 6,
            quantity: Quantity::Detection,
            value_ms: Some(6_000),
            at_least_ms: Some(6_000),
            at_most_ms: None,
        },
        MeasureResult {
            step: 7,
            quantity: Quantity::WriteOutage,
            value_ms: Some(10_020),
            at_least_ms: None,
            at_most_ms: Some(30_000),
        },
    ];
    let first = judge(
        ScenarioIdentity {
            id: 20,
            trial: "s020_primary_killed",
            title: "primary SIGKILLed <exact RPO>",
            seed: "bloodraven.md: Emergency failover",
        },
        &passing,
        expectations.clone(),
        measures,
        None,
        51_000,
    );
    let second = judge(
        ScenarioIdentity {
            id: 38,
            trial: "s038_dns_write_denied",
            title: "dns write denied",
            seed: "000_5253a91c46febfcf.txt: Chaos scenario 38",
        },
        &failing,
        expectations,
        Vec::new(),
        None,
        49_000,
    );
    let results = RunResults {
        run_id: "20261130T000000Z".to_owned(),
        started_at: epoch(),
        finished_at: crate::support::wall(120_000),
        backend: "localkube".to_owned(),
        commit: Some("abc1234".to_owned()),
        repeat: 1,
        notes: Vec::new(),
        scenarios: vec![first, second],
    };
    (results, vec![passing, failing])
}

#[test]
fn judge_passes_a_clean_history_and_names_the_failing_checker() {
    let (results, _) = sample_run();
    assert!(
        results.scenarios[0].passed,
        "{:?}",
        results.scenarios[0].failure
    );
    assert_eq!(
        results.scenarios[1]
            .failure
            .as_deref()
            .map(|failure| failure.starts_with("rpo: operator reports 1")),
        Some(true)
    );
    assert_eq!((results.passed(), results.failed()), (1, 1));
}

#[test]
fn index_html_is_self_contained_and_shows_the_numbers() {
    let (results, histories) = sample_run();
    let html = render_index(&results, &histories);
    assert_well_formed(&html);
    for forbidden in ["http://", "https://", "<script", "<link"] {
        let allowed_svg_namespace = html.matches("http://www.w3.org/2000/svg").count();
        if forbidden == "http://" {
            assert_eq!(
                html.matches(forbidden).count(),
                allowed_svg_namespace,
                "network reference in report"
            );
        } else {
            assert!(!html.contains(forbidden), "{forbidden} in report");
        }
    }
    // Summary and per-scenario numbers.
    assert!(html.contains("1 passed") && html.contains("1 failed"));
    assert!(
        html.contains("primary SIGKILLed &lt;exact RPO&gt;"),
        "titles are escaped"
    );
    assert!(html.contains("10020 ms"), "RTO");
    assert!(html.contains("<td class=\"num\">250</td>"), "acknowledged");
    assert!(html.contains("97, 98, 99"), "lost ids");
    assert!(
        html.contains("failing: </strong>rpo: operator reports 1 lost transactions (exact) but 3"),
        "failing checker"
    );
    assert!(html.contains("8250 ms"), "time to satisfy");
    // Timeline: a shaded fault, marked phases, availability buckets, latency points.
    assert!(html.contains("class=\"fault\"") && html.contains(">kill<"));
    assert!(html.contains("class=\"phase\"") && html.contains("first write (RTO) +10020 ms"));
    assert!(html.contains("class=\"up\"") && html.contains("class=\"latency\""));
    // Per-failover RPO rows, then the whole run; links to the history and, when failed,
    // the artifacts.
    assert!(
        html.contains("<td>emergency iad → pdx</td>"),
        "per-failover RPO row"
    );
    assert!(html.contains("<td>whole run</td>"));
    assert!(html.contains("href=\"s020_primary_killed/history.jsonl\""));
    assert_eq!(html.matches("/artifacts/\"").count(), results.failed());
    assert!(
        html.contains("<td>write-outage</td>"),
        "measures named as scenarios spell them"
    );
}

// Follow-up polls put six phases within a second: their numbers stack, never overlap.
#[test]
fn phase_labels_that_would_overlap_go_down_a_row() {
    use bloodraven_harness::check::timings::FailoverTimings;
    use bloodraven_harness::report::svg::{phase_marks, PHASE_LABEL_GAP};
    use bloodraven_harness::scenario::model::Site;
    let timing = FailoverTimings {
        kind: bloodraven_harness::history::event::FailoverKind::Emergency,
        from: Site::Iad,
        to: Site::Pdx,
        fault: Some("kill".to_owned()),
        fault_ns: 10_000_000_000,
        detected_ms: Some(5_400),
        fenced_ms: Some(5_600),
        promoted_ms: Some(5_900),
        endpoints_switched_ms: Some(6_150),
        dns_switched_ms: Some(28_000),
        first_write_ms: Some(6_300),
    };
    let marks = phase_marks(&[timing], 40_000_000_000);
    assert_eq!(marks.len(), 6);
    let rows: Vec<u32> = marks.iter().map(|mark| mark.row).collect();
    assert_eq!(
        rows,
        vec![0, 1, 2, 3, 4, 0],
        "DNS at 28 s is far from the rest"
    );
    for pair in marks.windows(2) {
        assert!(
            pair[1].row != pair[0].row || pair[1].x - pair[0].x >= PHASE_LABEL_GAP,
            "{pair:?}"
        );
    }
    assert_eq!(marks[5].number, 5, "DNS switched is phase 5");
}

#[test]
fn timeline_inputs_pair_faults_and_bucket_writes() {
    let history = emergency(&[], Some(0), true);
    let faults = fault_intervals(&history);
    assert_eq!(faults.len(), 1);
    assert_eq!(
        (faults[0].start_ns, faults[0].end_ns),
        (10_000_000_000, 40_000_000_000)
    );
    let buckets = write_buckets(&history, 1_000_000_000);
    assert_eq!(
        buckets[0],
        (10, 0),
        "ten acknowledged writes in the first second"
    );
    assert_eq!(buckets[12], (0, 1), "the info write completes at 12s");
    assert_eq!(buckets[17], (0, 0), "no write completes during the outage");
    // docs/design/history.md#issue-9: acknowledged writes per site, one timeline row each (split
    // brain at a glance).
    let sites = bloodraven_harness::report::svg::site_buckets(&history, 1_000_000_000);
    let names: Vec<&str> = sites.iter().map(|(site, _)| site.name()).collect();
    assert_eq!(
        names,
        ["iad", "pdx"],
        "rows only for sites that acknowledged"
    );
    assert_eq!(
        sites[0].1[0], 10,
        "iad acknowledged the first second's writes"
    );
    assert_eq!(sites[1].1[0], 0, "pdx none before the failover");
    assert!(sites[1].1.iter().sum::<u64>() > 0, "pdx after it");
}

#[test]
fn junit_names_every_trial_and_the_failure() {
    let (results, _) = sample_run();
    let xml = render_junit(&results).expect("junit");
    assert!(
        xml.contains("<testsuite name=\"bloodraven-harness\" tests=\"2\""),
        "{xml}"
    );
    assert!(xml.contains("failures=\"1\""), "{xml}");
    assert!(
        xml.contains("<testcase name=\"s020_primary_killed\""),
        "{xml}"
    );
    assert!(
        xml.contains("message=\"rpo: operator reports 1 lost transactions (exact) but 3"),
        "{xml}"
    );
}

#[test]
fn report_directory_and_trends_are_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (results, histories) = sample_run();
    let run_dir = write_report(dir.path(), &results, &histories).expect("report");
    for file in [
        "index.html",
        "results.json",
        "junit.xml",
        "s020_primary_killed/history.jsonl",
        "s038_dns_write_denied/history.jsonl",
    ] {
        assert!(run_dir.join(file).is_file(), "{file} missing");
    }
    let json = std::fs::read_to_string(run_dir.join("results.json")).expect("results.json");
    let back: RunResults = serde_json::from_str(&json).expect("results.json parses");
    assert_eq!(back, results);
    let history =
        History::read(&run_dir.join("s020_primary_killed/history.jsonl")).expect("history");
    assert_eq!(history, histories[0]);

    // A second run appends a second trend line.
    let mut second = results.clone();
    second.run_id = "20261201T000000Z".to_owned();
    second.scenarios[1].passed = true;
    write_report(dir.path(), &second, &histories).expect("second report");
    let trend = read_trend(&dir.path().join("trend.jsonl")).expect("trend");
    assert_eq!(trend.len(), 2);
    assert_eq!((trend[0].pass_rate(), trend[1].pass_rate()), (0.5, 1.0));
    assert_eq!(trend[0].scenarios[0].rto_ms, Some(10_020));
    assert_eq!(trend[0].scenarios[0].lost, 3);
    std::fs::remove_file(dir.path().join("trends.html")).expect("remove");
    assert_eq!(
        render_trends_file(dir.path()).expect("re-render"),
        dir.path().join("trends.html")
    );
    let trends = std::fs::read_to_string(dir.path().join("trends.html")).expect("trends.html");
    assert_well_formed(&trends);
    assert!(trends.contains("2 runs") && trends.contains("50%") && trends.contains("100%"));
    // Per scenario over its runs: the result strip names each run, the charts their worst.
    assert!(trends.contains("s038_dns_write_denied"));
    assert!(
        trends.contains("20261130T000000Z: 0 of 1 passed")
            && trends.contains("20261201T000000Z: 1 of 1 passed")
    );
    assert!(
        trends.contains("<td class=\"num flaky\">50%"),
        "s038 passed one of two runs"
    );
    assert!(trends.contains("max 10.0 s"), "s020's RTO");
    assert!(
        trends.contains("lost writes: 2 of 2 runs measured, max 3"),
        "s020 lost 3 in each run"
    );
}

#[test]
fn trends_render_with_no_runs() {
    let html = render_trends(&[]);
    assert_well_formed(&html);
    assert!(html.contains("0 runs"));
    assert_eq!(
        TrendEntry {
            run_id: String::new(),
            started_at: epoch(),
            backend: String::new(),
            scenarios: Vec::new()
        }
        .pass_rate(),
        0.0
    );
}

#[test]
fn history_jsonl_errors_name_the_line() {
    let text = format!(
        "{}\nnot json\n",
        emergency(&[], None, false)
            .to_jsonl()
            .expect("jsonl")
            .lines()
            .next()
            .unwrap_or_default()
    );
    let error = History::from_jsonl(&text, std::path::Path::new("h.jsonl")).expect_err("bad line");
    assert!(
        error.to_string().starts_with("parse h.jsonl line 2:"),
        "{error}"
    );
}

/// Writes the sample report where `BLOODRAVEN_SAMPLE_REPORT_DIR` points, to look at it.
#[test]
fn sample_report_for_humans() {
    let Some(dir) = std::env::var_os("BLOODRAVEN_SAMPLE_REPORT_DIR") else {
        return;
    };
    let (results, histories) = sample_run();
    let run_dir = write_report(std::path::Path::new(&dir), &results, &histories).expect("report");
    assert!(run_dir.join("index.html").is_file());
}

// s038: `deny-rbac` and `kill` start 0.3 s apart and their names were written over each other.
#[test]
fn fault_labels_that_would_overlap_move_right() {
    use bloodraven_harness::report::svg::{fault_label_xs, FaultInterval};
    let fault = |name: &str, start_s: u64| FaultInterval {
        name: name.to_owned(),
        start_ns: start_s * 1_000_000_000,
        end_ns: 40_000_000_000,
    };
    // Paired in end order: kill (healed first) before deny-rbac.
    let faults = [
        fault("kill", 14),
        fault("deny-rbac", 13),
        fault("partition", 30),
    ];
    let xs = fault_label_xs(&faults, 45_000_000_000);
    let (kill, deny, partition) = (xs[0], xs[1], xs[2]);
    assert!(
        kill > deny,
        "kill starts later, so it is labelled after deny-rbac"
    );
    assert!(kill - deny >= 9.0 * 6.0, "no overlap: {deny} then {kill}");
    let alone = fault_label_xs(&faults[2..], 45_000_000_000)[0];
    assert_eq!(
        partition, alone,
        "a fault far from the others stays at its start"
    );
}
