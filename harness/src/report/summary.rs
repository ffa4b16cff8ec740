//! The run's summary table, one row per scenario over all its runs (`--repeat N`): result
//! and pass rate, duration, write outage, RPO, and the first line of the first failure. The
//! same rows are printed on stdout at the end of a run and shown at the top of `index.html`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::results::ScenarioResult;

/// One scenario over its runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryRow {
    /// Catalogue id.
    pub id: u16,
    /// Trial name.
    pub trial: String,
    /// How many times it ran.
    pub runs: u32,
    /// How many of those passed.
    pub passes: u32,
    /// Mean wall duration of a run, in ms.
    pub mean_duration_ms: u64,
    /// The worst write outage over the runs, in ms.
    pub worst_write_outage_ms: Option<u64>,
    /// The median write outage over the runs, in ms (the lower middle of an even count).
    pub median_write_outage_ms: Option<u64>,
    /// The worst RTO (fault to the first write on the new primary) over the runs, in ms.
    pub worst_rto_ms: Option<u64>,
    /// The most acknowledged writes lost in one run.
    pub worst_lost: u64,
    /// Whether every run with a failover had the operator's count exact.
    pub all_exact: bool,
    /// Whether some run's final state could not be read (its RPO is unknown).
    pub some_unread: bool,
    /// The first failing run's number and the first line of its reason.
    pub first_failure: Option<(u32, String)>,
    /// Why it did not run (SKIPPED: a capability the backend lacks).
    pub skipped: Option<String>,
}

impl SummaryRow {
    /// passes / runs (0 when it never ran).
    pub fn pass_rate(&self) -> f64 {
        if self.runs == 0 {
            return 0.0;
        }
        f64::from(self.passes) / f64::from(self.runs)
    }

    /// `PASS`, `FAIL`, `FLAKY` (some runs passed, some failed), or `SKIPPED`.
    pub fn verdict(&self) -> &'static str {
        if self.skipped.is_some() {
            "SKIPPED"
        } else if self.passes == self.runs && self.runs > 0 {
            "PASS"
        } else if self.passes == 0 {
            "FAIL"
        } else {
            "FLAKY"
        }
    }

    /// `2/3 (67%)`.
    pub fn pass_rate_text(&self) -> String {
        format!(
            "{}/{} ({:.0}%)",
            self.passes,
            self.runs,
            self.pass_rate() * 100.0
        )
    }

    /// `0 lost`, `3 lost` (the worst run); `, not exact` when some failover's count was a
    /// lower bound; `a final state unread` when some run's RPO could not be judged.
    pub fn rpo_text(&self) -> String {
        if self.some_unread {
            return format!("{} lost, a final state unread", self.worst_lost);
        }
        let exact = if self.all_exact { "" } else { ", not exact" };
        format!("{} lost{exact}", self.worst_lost)
    }

    /// The first failure as `run N: reason` (`run` only when the scenario ran more than once).
    pub fn failure_text(&self) -> String {
        if let Some(reason) = &self.skipped {
            return reason.clone();
        }
        match &self.first_failure {
            None => String::new(),
            Some((attempt, reason)) if self.runs > 1 => format!("run {attempt}: {reason}"),
            Some((_, reason)) => reason.clone(),
        }
    }
}

/// The first line of a failure reason (checkers' reasons can run to several lines).
pub fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("")
}

/// Groups results (every run of every scenario, any order) into one row per scenario, by id.
pub fn summarize(results: &[ScenarioResult]) -> Vec<SummaryRow> {
    let mut by_id: BTreeMap<u16, Vec<&ScenarioResult>> = BTreeMap::new();
    for result in results {
        by_id.entry(result.id).or_default().push(result);
    }
    by_id
        .into_values()
        .map(|mut runs| {
            runs.sort_by_key(|run| run.attempt);
            let skipped = runs.iter().find_map(|run| run.skipped.clone());
            let (id, trial) = (runs[0].id, runs[0].trial.clone());
            runs.retain(|run| run.skipped.is_none());
            let count = u32::try_from(runs.len()).unwrap_or(u32::MAX);
            let passes =
                u32::try_from(runs.iter().filter(|run| run.passed).count()).unwrap_or(u32::MAX);
            let total_ms: u64 = runs.iter().map(|run| run.duration_ms).sum();
            SummaryRow {
                id,
                trial,
                skipped,
                runs: count,
                passes,
                mean_duration_ms: total_ms / u64::from(count.max(1)),
                worst_write_outage_ms: runs.iter().filter_map(|run| run.write_outage_ms).max(),
                median_write_outage_ms: median(
                    runs.iter().filter_map(|run| run.write_outage_ms).collect(),
                ),
                worst_rto_ms: runs.iter().filter_map(|run| run.rto_ms()).max(),
                worst_lost: runs.iter().map(|run| run.rpo.lost).max().unwrap_or(0),
                all_exact: runs
                    .iter()
                    .filter(|run| !run.rpo.failovers.is_empty())
                    .all(|run| run.rpo.exact()),
                some_unread: runs.iter().any(|run| !run.rpo.final_state_read),
                first_failure: runs.iter().find(|run| !run.passed).map(|run| {
                    (
                        run.attempt,
                        first_line(run.failure.as_deref().unwrap_or("failed")).to_owned(),
                    )
                }),
            }
        })
        .collect()
}

/// The median of some values (the lower of the two middle ones for an even count).
pub fn median(mut values: Vec<u64>) -> Option<u64> {
    values.sort_unstable();
    let middle = values.len().checked_sub(1)? / 2;
    values.get(middle).copied()
}

impl SummaryRow {
    /// The write outage as the summary shows it: the one run's, or over several runs the
    /// median and the worst (`p50 1.9 s, max 3.0 s`).
    pub fn write_outage_text(&self) -> String {
        match (
            self.runs,
            self.median_write_outage_ms,
            self.worst_write_outage_ms,
        ) {
            (2.., Some(median), Some(worst)) => {
                format!("p50 {}, max {}", seconds(median), seconds(worst))
            }
            (_, _, worst) => seconds_or_dash(worst),
        }
    }
}

fn seconds(ms: u64) -> String {
    // Display only: a duration in ms fits f64 exactly far beyond any run.
    #[allow(clippy::cast_precision_loss)]
    let s = ms as f64 / 1000.0;
    format!("{s:.1} s")
}

/// A duration in ms as seconds with one decimal, or `—`.
pub fn seconds_or_dash(ms: Option<u64>) -> String {
    ms.map_or_else(|| "—".to_owned(), seconds)
}

/// The rows as an aligned text table (stdout), then one line with the totals. `repeat`
/// adds the pass-rate column.
pub fn render_text(rows: &[SummaryRow], repeat: bool) -> String {
    let mut header = vec!["scenario", "result"];
    if repeat {
        header.push("pass rate");
    }
    header.extend(["duration", "write outage", "RPO", "failure"]);
    let mut table: Vec<Vec<String>> = vec![header.into_iter().map(str::to_owned).collect()];
    for row in rows {
        let mut cells = vec![row.trial.clone(), row.verdict().to_owned()];
        if repeat {
            cells.push(row.pass_rate_text());
        }
        cells.extend([
            seconds(row.mean_duration_ms),
            row.write_outage_text(),
            row.rpo_text(),
            row.failure_text(),
        ]);
        table.push(cells);
    }
    let columns = table[0].len();
    let widths: Vec<usize> = (0..columns)
        .map(|column| {
            table
                .iter()
                .map(|cells| cells[column].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for cells in &table {
        let mut line = String::new();
        for (column, cell) in cells.iter().enumerate() {
            if column + 1 == columns {
                line.push_str(cell);
            } else {
                let pad = widths[column] - cell.chars().count();
                let _ = write!(line, "{cell}{}  ", " ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let runs: u32 = rows.iter().map(|row| row.runs).sum();
    let passes: u32 = rows.iter().map(|row| row.passes).sum();
    let flaky = rows.iter().filter(|row| row.verdict() == "FLAKY").count();
    let failed = rows.iter().filter(|row| row.verdict() == "FAIL").count();
    let skipped = rows.iter().filter(|row| row.skipped.is_some()).count();
    let skipped = if skipped > 0 {
        format!(", {skipped} skipped (not run: a capability the backend lacks)")
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "{} scenarios, {runs} runs: {passes} passed, {} failed; {failed} scenarios failed every run, {flaky} flaky{skipped}",
        rows.len(),
        runs - passes
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::rpo::RpoSummary;

    fn result(id: u16, attempt: u32, passed: bool) -> ScenarioResult {
        ScenarioResult {
            id,
            trial: format!("s{id:03}_x"),
            title: "t".to_owned(),
            seed: String::new(),
            passed,
            skipped: None,
            failure: (!passed)
                .then(|| format!("expectations: step 3 failed (run {attempt})\n  detail")),
            duration_ms: 10_000 * u64::from(attempt),
            attempt,
            write_outage_ms: Some(100 * u64::from(attempt)),
            expectations: Vec::new(),
            measures: Vec::new(),
            verdicts: Vec::new(),
            rpo: RpoSummary {
                final_state_read: true,
                ..RpoSummary::default()
            },
            timings: Vec::new(),
            timing: String::new(),
        }
    }

    // Issue 36: figures over `--repeat N` runs are a median and a worst, measured by the
    // harness (not asserted anywhere).
    #[test]
    fn several_runs_show_the_median_and_the_worst_write_outage() {
        let mut runs: Vec<ScenarioResult> =
            (1..=4).map(|attempt| result(20, attempt, true)).collect();
        runs[0].write_outage_ms = Some(3_000);
        runs[1].write_outage_ms = Some(1_000);
        runs[2].write_outage_ms = Some(2_000);
        runs[3].write_outage_ms = None;
        let rows = summarize(&runs);
        assert_eq!(rows[0].median_write_outage_ms, Some(2_000));
        assert_eq!(rows[0].worst_write_outage_ms, Some(3_000));
        assert_eq!(rows[0].write_outage_text(), "p50 2.0 s, max 3.0 s");
        let one = summarize(&[result(20, 1, true)]);
        assert_eq!(one[0].write_outage_text(), "0.1 s");
        assert_eq!(median(vec![4, 1, 3, 2]), Some(2));
        assert_eq!(median(Vec::new()), None);
    }

    #[test]
    fn runs_of_one_scenario_become_one_row_with_their_pass_rate() {
        let rows = summarize(&[
            result(20, 2, false),
            result(1, 1, true),
            result(20, 1, true),
            result(20, 3, false),
            result(1, 2, true),
        ]);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].id, rows[0].runs, rows[0].passes), (1, 2, 2));
        assert_eq!(rows[0].verdict(), "PASS");
        assert!(rows[0].first_failure.is_none());
        let flaky = &rows[1];
        assert_eq!((flaky.id, flaky.runs, flaky.passes), (20, 3, 1));
        assert_eq!(flaky.verdict(), "FLAKY");
        assert_eq!(flaky.pass_rate_text(), "1/3 (33%)");
        // The earliest failing run, its reason's first line only.
        assert_eq!(
            flaky.first_failure,
            Some((2, "expectations: step 3 failed (run 2)".to_owned()))
        );
        assert_eq!(
            flaky.failure_text(),
            "run 2: expectations: step 3 failed (run 2)"
        );
        assert_eq!(flaky.mean_duration_ms, 20_000);
        assert_eq!(flaky.worst_write_outage_ms, Some(300));
    }

    #[test]
    fn a_scenario_failing_every_run_is_fail_and_one_run_names_no_run_number() {
        let rows = summarize(&[result(38, 1, false)]);
        assert_eq!(rows[0].verdict(), "FAIL");
        assert!((rows[0].pass_rate() - 0.0).abs() < f64::EPSILON);
        assert_eq!(
            rows[0].failure_text(),
            "expectations: step 3 failed (run 1)"
        );
    }

    #[test]
    fn the_worst_rpo_over_runs_is_shown_and_inexactness_is_kept() {
        let mut lossy = result(20, 2, false);
        lossy.rpo.lost = 3;
        let rows = summarize(&[result(20, 1, true), lossy]);
        assert_eq!(rows[0].worst_lost, 3);
        assert_eq!(rows[0].rpo_text(), "3 lost");
        let mut unread = result(20, 3, false);
        unread.rpo.final_state_read = false;
        assert_eq!(
            summarize(&[unread])[0].rpo_text(),
            "0 lost, a final state unread"
        );
    }

    #[test]
    fn the_text_table_is_aligned_and_totals_flaky_and_failed() {
        let rows = summarize(&[
            result(1, 1, true),
            result(1, 2, true),
            result(20, 1, true),
            result(20, 2, false),
            result(38, 1, false),
            result(38, 2, false),
        ]);
        let text = render_text(&rows, true);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert!(
            lines[0].starts_with("scenario  result  pass rate"),
            "{text}"
        );
        assert!(
            lines[2].starts_with("s020_x    FLAKY   1/2 (50%)"),
            "{text}"
        );
        // Columns line up: every row's duration starts where the header's does.
        let column = lines[0].find("duration").expect("duration column");
        for line in &lines[1..4] {
            assert_eq!(&line[column..column + 4], "15.0", "{text}");
        }
        assert!(
            lines[3].ends_with("run 1: expectations: step 3 failed (run 1)"),
            "{text}"
        );
        assert_eq!(
            lines[4],
            "3 scenarios, 6 runs: 3 passed, 3 failed; 1 scenarios failed every run, 1 flaky"
        );
        assert!(!render_text(&rows, false).contains("pass rate"));
    }

    #[test]
    fn first_line_skips_blank_lines() {
        assert_eq!(first_line("\n  rpo: 2 lost\nmore"), "rpo: 2 lost");
        assert_eq!(first_line(""), "");
    }
}
