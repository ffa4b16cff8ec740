//! `index.html` and `trends.html`: single self-contained files (inline CSS and SVG, no
//! script, no network), rendered with maud.

use maud::{html, Markup, PreEscaped, DOCTYPE};

use super::results::{RunResults, ScenarioResult};
use super::summary::{seconds_or_dash, summarize, SummaryRow};
use super::svg::{pass_rate_chart, result_strip, sparkline, timeline, TrendUnit};
use super::trend::{TrendEntry, TrendScenario};
use crate::check::expectations::{ExpectationResult, MeasureResult};
use crate::check::rpo::RpoSummary;
use crate::check::timings::FailoverTimings;
use crate::history::store::History;

/// The report stylesheet (`reports/template.css`), inlined into every page.
const STYLE: &str = include_str!("../../../reports/template.css");

fn page(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body { (body) }
        }
    }
}

fn verdict_class(passed: bool) -> &'static str {
    if passed {
        "pass"
    } else {
        "fail"
    }
}

fn verdict_word(passed: bool) -> &'static str {
    if passed {
        "PASS"
    } else {
        "FAIL"
    }
}

fn scenario_class(scenario: &ScenarioResult) -> &'static str {
    if scenario.skipped.is_some() {
        "skipped"
    } else {
        verdict_class(scenario.passed)
    }
}

fn ms(value: Option<u64>) -> String {
    value.map_or_else(|| "—".to_owned(), |ms| format!("{ms} ms"))
}

/// A failover phase: negative when it came before the fault (a finding, shown as is).
fn signed_ms(value: Option<i64>) -> String {
    value.map_or_else(|| "—".to_owned(), |ms| format!("{ms} ms"))
}

/// Renders `index.html` for a run. `histories` pairs with `results.scenarios` by index
/// (a missing history draws no timeline).
pub fn render_index(results: &RunResults, histories: &[History]) -> String {
    let body = html! {
        h1 { "Bloodraven chaos run " (results.run_id) }
        p class="meta" {
            "backend " (results.backend) " · started " (results.started_at) " · finished " (results.finished_at)
            @if let Some(commit) = &results.commit { " · commit " (commit) }
        }
        @if !results.notes.is_empty() {
            div class="note" { @for line in &results.notes { (line) br; } }
        }
        @let rows = summarize(&results.scenarios);
        @let repeat = results.repeat > 1;
        p {
            span class="pass" { (results.passed()) " passed" } ", " span class="fail" { (results.failed()) " failed" }
            @if results.skipped() > 0 { ", " span class="skipped" { (results.skipped()) " skipped" } }
            " of " (results.scenarios.len())
            @if repeat { " runs (" (rows.len()) " scenarios, each run " (results.repeat) " times)" }
        }
        table class="summary" {
            thead { tr {
                th { "scenario" } th { "title" } th { "result" }
                @if repeat { th { "pass rate" } }
                th title="mean over runs" { "duration" }
                th title="the longest time without an acknowledged write (over several runs: the median and the worst run)" { "write outage" }
                th title="fault to the first write on the new primary (worst failover)" { "RTO" }
                th title="acknowledged writes lost (worst run)" { "RPO" }
                th { "failure (first line)" }
            } }
            tbody {
                @for row in &rows {
                    @let title = results.scenarios.iter().find(|scenario| scenario.id == row.id).map(|scenario| scenario.title.as_str()).unwrap_or("");
                    tr {
                        td { a href={"#" (row.trial)} { (row.trial) } }
                        td { (title) }
                        td class=(summary_class(row)) { (row.verdict()) }
                        @if repeat { td class="num" { (row.pass_rate_text()) } }
                        td class="num" { (seconds_or_dash(Some(row.mean_duration_ms))) }
                        td class="num" { (row.write_outage_text()) }
                        td class="num" { (ms(row.worst_rto_ms)) }
                        td class="num" { (row.rpo_text()) }
                        td { (row.failure_text()) }
                    }
                }
            }
        }
        p class="legend" {
            span { span class="swatch" style="background:#d93025;opacity:.3" {} "fault interval" }
            span { span class="swatch" style="background:#34a853" {} "writes ok" }
            span { span class="swatch" style="background:#f9ab00" {} "some writes failed" }
            span { span class="swatch" style="background:#d93025" {} "no write succeeded" }
            span { span class="swatch" style="background:#7627bb" {} "failover phase: 1 detected, 2 fenced, 3 promoted, 4 endpoints switched, 5 DNS switched, 6 first write (RTO)" }
            span { span class="swatch" style="background:#1a73e8" {} "write latency" }
        }
        @for (index, scenario) in results.scenarios.iter().enumerate() {
            (scenario_section(scenario, histories.get(index), results.repeat))
        }
    };
    page(&format!("Bloodraven chaos run {}", results.run_id), body).into_string()
}

fn summary_class(row: &SummaryRow) -> &'static str {
    match row.verdict() {
        "PASS" => "pass",
        "FLAKY" => "flaky",
        "SKIPPED" => "skipped",
        _ => "fail",
    }
}

fn scenario_section(scenario: &ScenarioResult, history: Option<&History>, repeat: u32) -> Markup {
    html! {
        (scenario_heading(scenario, history, repeat))
        (checkers_table(scenario))
        (rpo_table(&scenario.rpo))
        (timings_table(&scenario.timings))
        (expectations_table(&scenario.expectations))
        (measures_table(&scenario.measures))
    }
}

/// The scenario's title, seed, why it was skipped or failed, and its timeline.
fn scenario_heading(scenario: &ScenarioResult, history: Option<&History>, repeat: u32) -> Markup {
    html! {
        h2 id=(scenario.dir_name()) {
            (scenario.trial)
            @if repeat > 1 { " (run " (scenario.attempt) " of " (repeat) ")" }
            " — " (scenario.title) " "
            span class=(scenario_class(scenario)) { (scenario.verdict_word()) }
        }
        p class="meta" { "seed: " (scenario.seed) }
        @if !scenario.timing.is_empty() {
            p class="meta" { "group timing (its bounds resolved against it): " (scenario.timing) }
        }
        @if let Some(reason) = &scenario.skipped {
            div class="skipped-reason" { strong { "skipped: " } (reason) }
        }
        @if let Some(failure) = &scenario.failure {
            div class="failure" { strong { "failing: " } (failure) }
        }
        @if let Some(history) = history {
            @if !history.events.is_empty() {
                (timeline(history, &scenario.timings))
            }
        }
    }
}

/// Each checker's verdict, then the links to the history and the artifacts.
fn checkers_table(scenario: &ScenarioResult) -> Markup {
    html! {
        h3 { "Checkers" }
        table {
            thead { tr { th { "checker" } th { "result" } th { "summary" } } }
            tbody {
                @for verdict in &scenario.verdicts {
                    tr {
                        td { (verdict.checker) }
                        td class=(verdict_class(verdict.valid)) { (verdict_word(verdict.valid)) }
                        td {
                            (verdict.summary)
                            @if verdict.findings.len() > 1 {
                                ul { @for finding in &verdict.findings { li { (finding) } } }
                            }
                        }
                    }
                }
            }
        }
        p class="links" {
            a href={(scenario.dir_name()) "/history.jsonl"} { "history.jsonl" }
            @if !scenario.passed && scenario.skipped.is_none() {
                " · " a href={(scenario.dir_name()) "/artifacts/"} { "artifacts" } " (pod logs, events, group, faults)"
            }
        }
    }
}

/// The RPO table: a row per failover and restore, and the whole run's.
fn rpo_table(rpo: &RpoSummary) -> Markup {
    html! {
        h3 { "RPO" }
        table class="rpo" {
            thead { tr { th { "failover" } th { "acknowledged" } th { "lost" } th { "info lost" } th { "unknown" } th { "operator-reported" } th { "lost GTID set" } th { "exact" } th { "lost ids" } } }
            tbody {
                @for row in &rpo.failovers {
                    tr {
                        td { (format!("{:?}", row.kind).to_lowercase()) " " (row.from) " → " (row.to) }
                        td class="num" { (row.acknowledged) }
                        td class="num" { (row.lost) }
                        td class="num" { (row.info_lost) }
                        td class="num" { (row.unknown) }
                        td class="num" { (row.operator_reported.map_or_else(|| "—".to_owned(), |count| count.to_string())) }
                        td { (row.lost_gtid_set.clone().filter(|set| !set.is_empty()).unwrap_or_else(|| "—".to_owned())) }
                        td { (if row.exact { "yes" } else { "no" }) }
                        td { (row.lost_ids.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")) }
                    }
                }
                @for row in &rpo.restores {
                    tr {
                        td { "restore " (row.site) " from " (row.backup) }
                        td class="num" { "" }
                        td class="num" { (row.lost) }
                        td class="num" { "" }
                        td class="num" { "" }
                        td class="num" { (row.operator_reported.map_or_else(|| "—".to_owned(), |count| count.to_string())) }
                        td { (row.lost_gtid_set.clone().filter(|set| !set.is_empty()).unwrap_or_else(|| "—".to_owned())) }
                        td { (if row.exact { "yes" } else { "no" }) }
                        td { (row.lost_ids.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")) }
                    }
                }
                tr class="total" {
                    td { "whole run" }
                    td class="num" { (rpo.acknowledged) }
                    td class="num" { (rpo.lost) }
                    td class="num" { (rpo.info_lost) }
                    td class="num" { (rpo.unknown) }
                    td class="num" { (rpo.operator_reported().map_or_else(|| "—".to_owned(), |count| count.to_string())) }
                    td { "" }
                    td { (if rpo.exact() { "yes" } else { "no" }) }
                    td { (rpo.lost_ids.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")) }
                }
            }
        }
    }
}

/// The phases of each failover after its fault (nothing without a failover).
fn timings_table(timings: &[FailoverTimings]) -> Markup {
    html! {
        @if let Some(first) = timings.first() {
            h3 { "Failover phase timings (after the fault)" }
            table class="timings" {
                thead { tr { th { "failover" } th { "fault" } @for (name, _) in first.phases() { th { (name) } } } }
                tbody {
                    @for timing in timings {
                        tr {
                            td { (format!("{:?}", timing.kind).to_lowercase()) " " (timing.from) " → " (timing.to) }
                            td { (timing.fault.clone().unwrap_or_else(|| "—".to_owned())) }
                            @for (_, value) in timing.phases() { td class="num" { (signed_ms(value)) } }
                        }
                    }
                }
            }
        }
    }
}

/// The expectations in step order (nothing without one).
fn expectations_table(expectations: &[ExpectationResult]) -> Markup {
    html! {
        @if !expectations.is_empty() {
            h3 { "Expectations" }
            table class="expectations" {
                thead { tr { th { "step" } th { "expectation" } th { "mode" } th { "result" } th { "time to satisfy" } th { "detail" } } }
                tbody {
                    @for expectation in expectations {
                        tr {
                            td class="num" { (expectation.step) }
                            td { (expectation.name) }
                            td { (format!("{:?}", expectation.mode).to_lowercase()) " " (expectation.span_ms) " ms" }
                            td class=(verdict_class(expectation.satisfied)) { (verdict_word(expectation.satisfied)) }
                            td class="num" { (ms(expectation.time_to_satisfy_ms)) }
                            td { (expectation.failure.clone().filter(|_| !expectation.satisfied).unwrap_or_default()) }
                        }
                    }
                }
            }
        }
    }
}

/// The measurements in step order (nothing without one).
fn measures_table(measures: &[MeasureResult]) -> Markup {
    html! {
        @if !measures.is_empty() {
            h3 { "Measurements" }
            table {
                thead { tr { th { "step" } th { "quantity" } th { "value" } th { "bounds" } } }
                tbody {
                    @for measure in measures {
                        tr {
                            td class="num" { (measure.step) }
                            td { (measure.quantity.name()) }
                            td class="num" { (ms(measure.value_ms)) }
                            td { (ms(measure.at_least_ms)) " … " (ms(measure.at_most_ms)) }
                        }
                    }
                }
            }
        }
    }
}

/// One scenario across the runs it appeared in, oldest first.
struct ScenarioTrend<'a> {
    trial: &'a str,
    /// (run id, the scenario's numbers in that run).
    runs: Vec<(&'a str, &'a TrendScenario)>,
}

fn scenario_trends(entries: &[TrendEntry]) -> Vec<ScenarioTrend<'_>> {
    let mut by_id: std::collections::BTreeMap<u16, ScenarioTrend<'_>> =
        std::collections::BTreeMap::new();
    for entry in entries {
        for scenario in &entry.scenarios {
            by_id
                .entry(scenario.id)
                .or_insert_with(|| ScenarioTrend {
                    trial: &scenario.trial,
                    runs: Vec::new(),
                })
                .runs
                .push((&entry.run_id, scenario));
        }
    }
    by_id.into_values().collect()
}

/// The number of suite runs listed under "Runs" (newest first).
pub const TRENDS_RUNS_LISTED: usize = 30;

/// Renders `trends.html` from `trend.jsonl`'s entries: per scenario over the runs it was in
/// (results, pass rate, write outage, RTO, lost writes), then the suite's pass rate per run
/// and the newest runs.
pub fn render_trends(entries: &[TrendEntry]) -> String {
    let trends = scenario_trends(entries);
    let span = entries.first().zip(entries.last()).map(|(first, last)| {
        (
            first.started_at.strftime("%Y-%m-%d %H:%M UTC").to_string(),
            last.started_at.strftime("%Y-%m-%d %H:%M UTC").to_string(),
        )
    });
    let mut backends: Vec<&str> = entries.iter().map(|entry| entry.backend.as_str()).collect();
    backends.sort_unstable();
    backends.dedup();
    let body = html! {
        h1 { "Bloodraven chaos trends" }
        p class="meta" {
            (entries.len()) " runs"
            @if let Some((first, last)) = &span { " from " (first) " to " (last) }
            @if !backends.is_empty() { " · backend " (backends.join(", ")) }
            " · from trend.jsonl, one line per run (`just chaos`, `just conformance`)"
        }
        h2 { "Per scenario, over the runs it was in (oldest left, newest right)" }
        p class="meta" {
            "write outage: the longest time without an acknowledged write; RTO: fault to the first write on the new primary; "
            "lost writes: acknowledged writes missing after heal (RPO). Gaps: not measured in that run (older runs have no write outage)."
        }
        table class="trends" {
            thead { tr {
                th { "scenario" } th { "runs" } th { "pass rate" } th { "result per run (newest " (super::svg::RESULT_STRIP_MAX) ")" }
                th { "write outage" } th { "RTO" } th { "lost writes" } th { "newest" }
            } }
            tbody {
                @for trend in &trends {
                    @let (passes, runs) = trend.runs.iter().map(|(_, scenario)| scenario.pass_count()).fold((0_u32, 0_u32), |(p, r), (passes, runs)| (p + passes, r + runs));
                    @let newest = trend.runs.last();
                    tr {
                        td { (trend.trial) }
                        td class="num" { (runs) }
                        td class={"num " (rate_class(passes, runs))} { (format!("{:.0}%", f64::from(passes) * 100.0 / f64::from(runs.max(1)))) br; span class="meta" { (passes) "/" (runs) } }
                        td { (result_strip(&trend.runs.iter().map(|(run_id, scenario)| { let (p, r) = scenario.pass_count(); ((*run_id).to_owned(), p, r) }).collect::<Vec<_>>())) }
                        td { (sparkline(&trend.runs.iter().map(|(_, scenario)| scenario.write_outage_ms).collect::<Vec<_>>(), "write outage", TrendUnit::Seconds)) }
                        td { (sparkline(&trend.runs.iter().map(|(_, scenario)| scenario.rto_ms).collect::<Vec<_>>(), "RTO", TrendUnit::Seconds)) }
                        td { (sparkline(&trend.runs.iter().map(|(_, scenario)| Some(scenario.lost)).collect::<Vec<_>>(), "lost writes", TrendUnit::Count)) }
                        td {
                            @if let Some((run_id, scenario)) = newest {
                                @if scenario.skipped.is_some() {
                                    span class="skipped" title=(run_id) { "SKIPPED" }
                                } @else {
                                    span class=(verdict_class(scenario.passed)) title=(run_id) { (verdict_word(scenario.passed)) }
                                }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Suite pass rate per run" }
        (pass_rate_chart(entries))
        h3 { "Newest " (TRENDS_RUNS_LISTED.min(entries.len())) " runs" }
        table {
            thead { tr { th { "run" } th { "started" } th { "backend" } th { "scenarios" } th { "pass rate" } } }
            tbody {
                @for entry in entries.iter().rev().take(TRENDS_RUNS_LISTED) {
                    @let (passes, runs) = entry.scenarios.iter().map(TrendScenario::pass_count).fold((0_u32, 0_u32), |(p, r), (passes, runs)| (p + passes, r + runs));
                    tr {
                        td { (entry.run_id) }
                        td { (entry.started_at.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()) }
                        td { (entry.backend) }
                        td { (entry.scenarios.iter().map(|scenario| scenario.trial.as_str()).collect::<Vec<_>>().join(", ")) }
                        td class={"num " (rate_class(passes, runs))} { (format!("{:.0}%", entry.pass_rate() * 100.0)) " (" (passes) "/" (runs) ")" }
                    }
                }
            }
        }
    };
    page("Bloodraven chaos trends", body).into_string()
}

fn rate_class(passes: u32, runs: u32) -> &'static str {
    if passes == runs {
        "pass"
    } else if passes == 0 {
        "fail"
    } else {
        "flaky"
    }
}
