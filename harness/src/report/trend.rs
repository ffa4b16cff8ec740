//! `reports/trend.jsonl`: one line per run, appended, for the trends page.

use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::results::RunResults;
use crate::error::{Error, Result};

/// A scenario's numbers in one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrendScenario {
    /// Catalogue id.
    pub id: u16,
    /// Trial name.
    pub trial: String,
    /// Passed?
    pub passed: bool,
    /// The worst RTO over its failovers, in ms.
    pub rto_ms: Option<u64>,
    /// Acknowledged writes lost.
    pub lost: u64,
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
            scenarios: results
                .scenarios
                .iter()
                .map(|scenario| TrendScenario {
                    id: scenario.id,
                    trial: scenario.trial.clone(),
                    passed: scenario.passed,
                    rto_ms: scenario
                        .timings
                        .iter()
                        .filter_map(|timings| timings.rto_ms())
                        .max(),
                    lost: scenario.rpo.lost,
                })
                .collect(),
        }
    }

    /// The fraction of scenarios that passed (0 when none ran).
    pub fn pass_rate(&self) -> f64 {
        if self.scenarios.is_empty() {
            return 0.0;
        }
        let passed = self
            .scenarios
            .iter()
            .filter(|scenario| scenario.passed)
            .count();
        // Counts are far below 2^52.
        #[allow(clippy::cast_precision_loss)]
        let rate = passed as f64 / self.scenarios.len() as f64;
        rate
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
