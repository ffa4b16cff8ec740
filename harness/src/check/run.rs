//! Running the checkers over one scenario's history: every checker's verdict, in the order the
//! report lists them, with the tables they computed ([`CheckResults`]). The report renders
//! these; it runs nothing.

use super::archive::check_archive;
use super::expectations::{check_expectations, ExpectationResult, MeasureResult};
use super::fleet::check_fleet;
use super::liveness::{check_liveness, write_outage_ms};
use super::lost_set::check_lost_set;
use super::rpo::{check_rpo, RpoSummary};
use super::split_brain::check_split_brain;
use super::survivors::check_survivors;
use super::timings::{check_timings, FailoverTimings};
use super::verdict::Verdict;
use crate::history::store::History;

/// What the checkers found in one scenario's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResults {
    /// Each checker's verdict: expectations, workload liveness, no split brain, rpo, lost-set,
    /// survivors, archive, timings, and in a fleet run the fleet.
    pub verdicts: Vec<Verdict>,
    /// The RPO table.
    pub rpo: RpoSummary,
    /// Phase timings per failover.
    pub timings: Vec<FailoverTimings>,
    /// The longest time the workload went without an acknowledged write, in ms
    /// ([`write_outage_ms`]).
    pub write_outage_ms: Option<u64>,
}

impl CheckResults {
    /// The first reason the scenario failed: `run_error` (a step's), else the first checker
    /// that found something, as `checker: summary`. `None`: everything held.
    pub fn failure(&self, run_error: Option<String>) -> Option<String> {
        run_error.or_else(|| {
            self.verdicts
                .iter()
                .find(|verdict| !verdict.valid)
                .map(|verdict| format!("{}: {}", verdict.checker, verdict.summary))
        })
    }
}

/// Runs every checker over a scenario's history, with the expectations and measurements its
/// steps recorded.
pub fn run_checkers(
    history: &History,
    expectations: &[ExpectationResult],
    measures: &[MeasureResult],
) -> CheckResults {
    let split_brain = check_split_brain(history);
    let (rpo, rpo_verdict) = check_rpo(history);
    let (timings, timings_verdict) = check_timings(history);
    let expectation_verdict = check_expectations(expectations, measures);
    let mut verdicts = vec![
        expectation_verdict,
        check_liveness(history),
        split_brain,
        rpo_verdict,
        check_lost_set(history),
        check_survivors(history),
        check_archive(history),
        timings_verdict,
    ];
    // A fleet run's only (`install.fleet`).
    verdicts.extend(check_fleet(history));
    CheckResults {
        verdicts,
        rpo,
        timings,
        write_outage_ms: write_outage_ms(history),
    }
}
