//! `reports/trend.jsonl`: one line per run, appended, for the trends page.

use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::results::RunResults;
use super::summary::summarize;
use crate::error::{Error, Result};

/// A scenario's numbers in one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrendScenario {
    /// Catalogue id.
    pub id: u16,
    /// Trial name.
    pub trial: String,
    /// Passed (every run of it, with `--repeat`)?
    pub passed: bool,
    /// The worst RTO over its failovers, in ms.
    pub rto_ms: Option<u64>,
    /// Acknowledged writes lost (the worst run).
    pub lost: u64,
    /// How many times it ran (`--repeat`; absent in older lines: once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<u32>,
    /// How many of those passed (absent in older lines: `passed` says).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passes: Option<u32>,
    /// The longest time without an acknowledged write, in ms (the worst run; absent in
    /// older lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_outage_ms: Option<u64>,
    /// Why it did not run (SKIPPED: runs 0, and no pass rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl TrendScenario {
    /// (passes, runs) in this run of the suite.
    pub fn pass_count(&self) -> (u32, u32) {
        if self.skipped.is_some() {
            return (0, 0);
        }
        let runs = self.runs.unwrap_or(1).max(1);
        let passes = self.passes.unwrap_or(u32::from(self.passed)).min(runs);
        (passes, runs)
    }

    /// passes / runs.
    pub fn pass_rate(&self) -> f64 {
        let (passes, runs) = self.pass_count();
        if runs == 0 {
            return 0.0;
        }
        f64::from(passes) / f64::from(runs)
    }
}

/// One run, as a line of `trend.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrendEntry {
    /// Run id.
    pub run_id: String,
    /// When it started.
    pub started_at: jiff::Timestamp,
    /// Backend.
    pub backend: String,
    /// Scenarios.
    pub scenarios: Vec<TrendScenario>,
}

impl TrendEntry {
    /// Summarizes a run.
    pub fn from_results(results: &RunResults) -> Self {
        Self {
            run_id: results.run_id.clone(),
            started_at: results.started_at,
            backend: results.backend.clone(),
            scenarios: summarize(&results.scenarios)
                .into_iter()
                .map(|row| TrendScenario {
                    id: row.id,
                    passed: row.skipped.is_none() && row.passes == row.runs,
                    rto_ms: row.worst_rto_ms,
                    lost: row.worst_lost,
                    runs: Some(row.runs),
                    passes: Some(row.passes),
                    write_outage_ms: row.worst_write_outage_ms,
                    skipped: row.skipped,
                    trial: row.trial,
                })
                .collect(),
        }
    }

    /// The fraction of scenario runs that passed (0 when none ran).
    pub fn pass_rate(&self) -> f64 {
        let (passes, runs) = self
            .scenarios
            .iter()
            .map(TrendScenario::pass_count)
            .fold((0_u32, 0_u32), |(p, r), (passes, runs)| {
                (p.saturating_add(passes), r.saturating_add(runs))
            });
        if runs == 0 {
            return 0.0;
        }
        f64::from(passes) / f64::from(runs)
    }
}

/// Appends one line to `trend.jsonl`.
pub fn append_trend(path: &Path, entry: &TrendEntry) -> Result<()> {
    let line = serde_json::to_string(entry).map_err(|source| Error::Json {
        what: "trend entry",
        source,
    })?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| Error::Write {
            path: path.to_path_buf(),
            source,
        })?;
    writeln!(file, "{line}").map_err(|source| Error::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads `trend.jsonl` (missing file: no runs yet).
pub fn read_trend(path: &Path) -> Result<Vec<TrendEntry>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| {
            serde_json::from_str(line).map_err(|source| Error::HistoryLine {
                path: path.to_path_buf(),
                line: index + 1,
                source,
            })
        })
        .collect()
}
