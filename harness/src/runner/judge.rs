//! Judging a scenario's run: the checkers run over its history ([`crate::check::run`]) and the
//! result the report renders ([`ScenarioResult`]) is made from what they found.

use crate::check::expectations::{ExpectationResult, MeasureResult};
use crate::check::run::run_checkers;
use crate::history::store::History;
use crate::report::results::{ScenarioIdentity, ScenarioResult};

/// Runs every checker over a scenario's history and decides pass/fail.
pub fn judge(
    identity: ScenarioIdentity<'_>,
    history: &History,
    expectations: Vec<ExpectationResult>,
    measures: Vec<MeasureResult>,
    run_error: Option<String>,
    duration_ms: u64,
) -> ScenarioResult {
    let checks = run_checkers(history, &expectations, &measures);
    ScenarioResult::from_checks(
        identity,
        checks,
        expectations,
        measures,
        run_error,
        duration_ms,
    )
}

/// A scenario the backend could not run, and why: judged over no history, with no verdict
/// kept, neither passed nor failed.
pub fn skipped(identity: ScenarioIdentity<'_>, reason: String) -> ScenarioResult {
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
