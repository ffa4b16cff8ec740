//! `index.html` and `trends.html`: single self-contained files (inline CSS and SVG, no
//! script, no network), rendered with maud.

use maud::{html, Markup, PreEscaped, DOCTYPE};

use super::results::{RunResults, ScenarioResult};
use super::svg::{pass_rate_chart, sparkline, timeline};
use super::trend::TrendEntry;
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
        p { span class="pass" { (results.passed()) " passed" } ", " span class="fail" { (results.failed()) " failed" } " of " (results.scenarios.len()) }
        table class="summary" {
            thead { tr { th { "scenario" } th { "title" } th { "result" } th { "RTO" } th { "acked" } th { "lost" } th { "operator" } th { "exact" } th { "duration" } } }
            tbody {
                @for scenario in &results.scenarios {
                    tr {
                        td { a href={"#" (scenario.trial)} { (scenario.trial) } }
                        td { (scenario.title) }
                        td class=(verdict_class(scenario.passed)) { (verdict_word(scenario.passed)) }
                        td class="num" { (ms(scenario.timings.iter().filter_map(|timing| timing.rto_ms()).max())) }
                        td class="num" { (scenario.rpo.acknowledged) }
                        td class="num" { (scenario.rpo.lost) }
                        td class="num" { (scenario.rpo.operator_reported().map_or_else(|| "—".to_owned(), |count| count.to_string())) }
                        td { (if scenario.rpo.exact() { "yes" } else { "no" }) }
                        td class="num" { (format!("{:.1} s", scenario.duration_ms as f64 / 1000.0)) }
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
            (scenario_section(scenario, histories.get(index)))
        }
    };
    page(&format!("Bloodraven chaos run {}", results.run_id), body).into_string()
}

fn scenario_section(scenario: &ScenarioResult, history: Option<&History>) -> Markup {
    html! {
        h2 id=(scenario.trial) {
            (scenario.trial) " — " (scenario.title) " "
            span class=(verdict_class(scenario.passed)) { (verdict_word(scenario.passed)) }
        }
        p class="meta" { "seed: " (scenario.seed) }
        @if let Some(failure) = &scenario.failure {
            div class="failure" { strong { "failing: " } (failure) }
        }
        @if let Some(history) = history {
            @if !history.events.is_empty() {
                (timeline(history, &scenario.timings))
            }
        }
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
            a href={(scenario.trial) "/history.jsonl"} { "history.jsonl" }
            @if !scenario.passed {
                " · " a href={(scenario.trial) "/artifacts/"} { "artifacts" } " (pod logs, events, group, faults)"
            }
        }
        h3 { "RPO" }
        table class="rpo" {
            thead { tr { th { "failover" } th { "acknowledged" } th { "lost" } th { "info lost" } th { "unknown" } th { "operator-reported" } th { "lost GTID set" } th { "exact" } th { "lost ids" } } }
            tbody {
                @for row in &scenario.rpo.failovers {
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
                tr class="total" {
                    td { "whole run" }
                    td class="num" { (scenario.rpo.acknowledged) }
                    td class="num" { (scenario.rpo.lost) }
                    td class="num" { (scenario.rpo.info_lost) }
                    td class="num" { (scenario.rpo.unknown) }
                    td class="num" { (scenario.rpo.operator_reported().map_or_else(|| "—".to_owned(), |count| count.to_string())) }
                    td { "" }
                    td { (if scenario.rpo.exact() { "yes" } else { "no" }) }
                    td { (scenario.rpo.lost_ids.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")) }
                }
            }
        }
        @if let Some(first) = scenario.timings.first() {
            h3 { "Failover phase timings (after the fault)" }
            table class="timings" {
                thead { tr { th { "failover" } th { "fault" } @for (name, _) in first.phases() { th { (name) } } } }
                tbody {
                    @for timing in &scenario.timings {
                        tr {
                            td { (format!("{:?}", timing.kind).to_lowercase()) " " (timing.from) " → " (timing.to) }
                            td { (timing.fault.clone().unwrap_or_else(|| "—".to_owned())) }
                            @for (_, value) in timing.phases() { td class="num" { (signed_ms(value)) } }
                        }
                    }
                }
            }
        }
        @if !scenario.expectations.is_empty() {
            h3 { "Expectations" }
            table class="expectations" {
                thead { tr { th { "step" } th { "expectation" } th { "mode" } th { "result" } th { "time to satisfy" } th { "detail" } } }
                tbody {
                    @for expectation in &scenario.expectations {
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
        @if !scenario.measures.is_empty() {
            h3 { "Measurements" }
            table {
                thead { tr { th { "step" } th { "quantity" } th { "value" } th { "bounds" } } }
                tbody {
                    @for measure in &scenario.measures {
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

/// Renders `trends.html` from `trend.jsonl`'s entries: pass rate per run, then RTO and RPO
/// per scenario across runs.
pub fn render_trends(entries: &[TrendEntry]) -> String {
    let mut trials: Vec<(u16, String)> = entries
        .iter()
        .flat_map(|entry| {
            entry
                .scenarios
                .iter()
                .map(|scenario| (scenario.id, scenario.trial.clone()))
        })
        .collect();
    trials.sort();
    trials.dedup();
    let body = html! {
        h1 { "Bloodraven chaos trends" }
        p class="meta" { (entries.len()) " runs" }
        h2 { "Pass rate" }
        (pass_rate_chart(entries))
        table {
            thead { tr { th { "run" } th { "started" } th { "backend" } th { "pass rate" } } }
            tbody {
                @for entry in entries.iter().rev() {
                    tr {
                        td { (entry.run_id) }
                        td { (entry.started_at) }
                        td { (entry.backend) }
                        td class="num" { (format!("{:.0}%", entry.pass_rate() * 100.0)) }
                    }
                }
            }
        }
        h2 { "Per scenario: result, RTO and lost writes per run (newest last)" }
        table {
            thead { tr { th { "scenario" } th { "RTO (ms)" } th { "lost writes" } @for entry in entries { th { (entry.run_id) } } } }
            tbody {
                @for (id, trial) in &trials {
                    @let runs: Vec<Option<&super::trend::TrendScenario>> = entries.iter().map(|entry| entry.scenarios.iter().find(|scenario| scenario.id == *id)).collect();
                    tr {
                        td { (trial) }
                        td { (sparkline(&runs.iter().map(|run| run.and_then(|scenario| scenario.rto_ms)).collect::<Vec<_>>(), "RTO ms per run")) }
                        td { (sparkline(&runs.iter().map(|run| run.map(|scenario| scenario.lost)).collect::<Vec<_>>(), "lost writes per run")) }
                        @for entry in entries {
                            @match entry.scenarios.iter().find(|scenario| scenario.id == *id) {
                                Some(scenario) => td class=(verdict_class(scenario.passed)) {
                                    (verdict_word(scenario.passed)) br;
                                    span class="meta" { "RTO " (ms(scenario.rto_ms)) br; "lost " (scenario.lost) }
                                },
                                None => td { "—" },
                            }
                        }
                    }
                }
            }
        }
    };
    page("Bloodraven chaos trends", body).into_string()
}
