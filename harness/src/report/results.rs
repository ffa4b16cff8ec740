//! `results.json`: the outcome of a run, per scenario, with the checkers' verdicts as they were
//! given ([`crate::check::run`] runs the checkers, [`crate::runner::judge`] calls it).

use serde::{Deserialize, Serialize};

use crate::check::expectations::{ExpectationResult, MeasureResult};
use crate::check::rpo::RpoSummary;
use crate::check::run::CheckResults;
use crate::check::timings::FailoverTimings;
use crate::check::verdict::Verdict;

/// The outcome of one scenario.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// Catalogue id.
    pub id: u16,
    /// Trial name (`s038_...`).
    pub trial: String,
    /// Title.
    pub title: String,
    /// Seed reference.
    pub seed: String,
    /// Whether everything held.
    pub passed: bool,
    /// Why it did not run on this backend (a capability it `requires:` and the backend
    /// lacks): SKIPPED, neither passed nor failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// The first reason it failed: a step error, the failing expectation, or a checker.
    pub failure: Option<String>,
    /// Wall duration in ms.
    pub duration_ms: u64,
    /// Which run of the scenario this is (1-based; `--repeat N` runs each N times).
    #[serde(default = "first_attempt")]
    pub attempt: u32,
    /// The longest time the workload went without an acknowledged write, in ms (from the
    /// history; `None` when fewer than two writes were acknowledged).
    #[serde(default)]
    pub write_outage_ms: Option<u64>,
    /// The expectations in step order.
    pub expectations: Vec<ExpectationResult>,
    /// The measurements in step order.
    pub measures: Vec<MeasureResult>,
    /// Each checker's verdict.
    pub verdicts: Vec<Verdict>,
    /// The RPO table.
    pub rpo: RpoSummary,
    /// Phase timings per failover.
    pub timings: Vec<FailoverTimings>,
    /// The timing of the group the scenario installed, which its timing bounds resolved
    /// against (`pollInterval 2s x failureThreshold 3 = detection 6s, lease 6s, cooldown
    /// 30s`); empty in results written before it was recorded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub timing: String,
}

const fn first_attempt() -> u32 {
    1
}

impl ScenarioResult {
    /// The result of a scenario from what its checkers found (`checks`), its steps'
    /// expectations and measurements, and the error that ended its steps early, if one.
    pub fn from_checks(
        identity: ScenarioIdentity<'_>,
        checks: CheckResults,
        expectations: Vec<ExpectationResult>,
        measures: Vec<MeasureResult>,
        run_error: Option<String>,
        duration_ms: u64,
    ) -> Self {
        let failure = checks.failure(run_error);
        let CheckResults {
            verdicts,
            rpo,
            timings,
            write_outage_ms,
        } = checks;
        ScenarioResult {
            id: identity.id,
            trial: identity.trial.to_owned(),
            title: identity.title.to_owned(),
            seed: identity.seed.to_owned(),
            passed: failure.is_none(),
            skipped: None,
            failure,
            duration_ms,
            attempt: 1,
            write_outage_ms,
            expectations,
            measures,
            verdicts,
            rpo,
            timings,
            timing: String::new(),
        }
    }

    /// `PASS`, `FAIL` or `SKIPPED`.
    pub fn verdict_word(&self) -> &'static str {
        if self.skipped.is_some() {
            "SKIPPED"
        } else if self.passed {
            "PASS"
        } else {
            "FAIL"
        }
    }

    /// The worst RTO over the scenario's failovers, in ms.
    pub fn rto_ms(&self) -> Option<u64> {
        self.timings
            .iter()
            .filter_map(FailoverTimings::rto_ms)
            .max()
    }

    /// The directory of this run in the report (`<trial>`, `<trial>.run2`, ...), also its
    /// anchor in `index.html`.
    pub fn dir_name(&self) -> String {
        if self.attempt <= 1 {
            self.trial.clone()
        } else {
            format!("{}.run{}", self.trial, self.attempt)
        }
    }
}

/// The identity of a scenario in results.
#[derive(Debug, Clone, Copy)]
pub struct ScenarioIdentity<'a> {
    /// Catalogue id.
    pub id: u16,
    /// Trial name.
    pub trial: &'a str,
    /// Title.
    pub title: &'a str,
    /// Seed reference.
    pub seed: &'a str,
}

/// The whole run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunResults {
    /// The run id (the report directory's name).
    pub run_id: String,
    /// When the run started.
    pub started_at: jiff::Timestamp,
    /// When it finished.
    pub finished_at: jiff::Timestamp,
    /// The `--cluster` backend.
    pub backend: String,
    /// The git commit, when known.
    #[serde(default)]
    pub commit: Option<String>,
    /// Lines shown in a box at the top of `index.html` (`just upgrade`'s verdict).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Runs per scenario (`--repeat`).
    #[serde(default = "first_attempt")]
    pub repeat: u32,
    /// Scenario results, by id, then run.
    pub scenarios: Vec<ScenarioResult>,
}

impl RunResults {
    /// How many scenarios passed.
    pub fn passed(&self) -> usize {
        self.scenarios
            .iter()
            .filter(|scenario| scenario.passed)
            .count()
    }

    /// How many were skipped (a capability the backend lacks).
    pub fn skipped(&self) -> usize {
        self.scenarios
            .iter()
            .filter(|scenario| scenario.skipped.is_some())
            .count()
    }

    /// How many failed.
    pub fn failed(&self) -> usize {
        self.scenarios.len() - self.passed() - self.skipped()
    }
}
