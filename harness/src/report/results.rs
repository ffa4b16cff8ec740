//! `results.json`: the outcome of a run, per scenario, with the checkers' verdicts.

use serde::{Deserialize, Serialize};

use crate::check::expectations::{check_expectations, ExpectationResult, MeasureResult};
use crate::check::liveness::check_liveness;
use crate::check::rpo::{check_rpo, RpoSummary};
use crate::check::split_brain::check_split_brain;
use crate::check::timings::{check_timings, FailoverTimings};
use crate::check::verdict::Verdict;
use crate::history::store::History;

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
}

const fn first_attempt() -> u32 {
    1
}

impl ScenarioResult {
    /// A scenario the backend could not run, and why.
    pub fn skipped(identity: ScenarioIdentity<'_>, reason: String) -> Self {
        let mut result = judge(
            identity,
            &History::new(Vec::new()),
            Vec::new(),
            Vec::new(),
            None,
            0,
        );
        result.passed = false;
        result.verdicts.clear();
        result.skipped = Some(reason);
        result
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

/// Runs every checker over a scenario's history and decides pass/fail.
pub fn judge(
    identity: ScenarioIdentity<'_>,
    history: &History,
    expectations: Vec<ExpectationResult>,
    measures: Vec<MeasureResult>,
    run_error: Option<String>,
    duration_ms: u64,
) -> ScenarioResult {
    let split_brain = check_split_brain(history);
    let (rpo, rpo_verdict) = check_rpo(history);
    let (timings, timings_verdict) = check_timings(history);
    let expectation_verdict = check_expectations(&expectations, &measures);
    let verdicts = vec![
        expectation_verdict,
        check_liveness(history),
        split_brain,
        rpo_verdict,
        crate::check::lost_set::check_lost_set(history),
        crate::check::survivors::check_survivors(history),
        crate::check::archive::check_archive(history),
        timings_verdict,
    ];
    let failure = run_error.or_else(|| {
        verdicts
            .iter()
            .find(|verdict| !verdict.valid)
            .map(|verdict| format!("{}: {}", verdict.checker, verdict.summary))
    });
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
        write_outage_ms: super::summary::write_outage_ms(history),
        expectations,
        measures,
        verdicts,
        rpo,
        timings,
    }
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
