//! Scenario expectations and measurements as the runner recorded them.

use serde::{Deserialize, Serialize};

use super::verdict::Verdict;
use crate::scenario::model::Quantity;

/// `within` (becomes true by) or `for` (stays true throughout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExpectMode {
    /// Becomes true by the deadline.
    Within,
    /// Stays true for the whole duration.
    For,
}

/// The outcome of one `expect` step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectationResult {
    /// The step index in the scenario.
    pub step: usize,
    /// The expectation, rendered for humans.
    pub name: String,
    /// within | for.
    pub mode: ExpectMode,
    /// The step's duration in ms.
    pub span_ms: u64,
    /// Whether it held.
    pub satisfied: bool,
    /// For `within`: how long until it became true.
    pub time_to_satisfy_ms: Option<u64>,
    /// When it started, ms after the scenario started.
    pub started_ms: u64,
    /// The last mismatch seen (the reason it failed).
    pub failure: Option<String>,
}

/// The outcome of one `measure` step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeasureResult {
    /// The step index.
    pub step: usize,
    /// What was measured.
    pub quantity: Quantity,
    /// The value, if it could be measured.
    pub value_ms: Option<u64>,
    /// Lower bound.
    pub at_least_ms: Option<u64>,
    /// Upper bound.
    pub at_most_ms: Option<u64>,
}

impl MeasureResult {
    /// Why the measurement fails its bounds, if it does.
    pub fn violation(&self) -> Option<String> {
        let name = self.quantity.name();
        let Some(value) = self.value_ms else {
            return Some(format!("step {}: {name} could not be measured", self.step));
        };
        if let Some(low) = self.at_least_ms.filter(|low| value < *low) {
            return Some(format!(
                "step {}: {name} took {value} ms, less than the {low} ms floor",
                self.step
            ));
        }
        if let Some(high) = self.at_most_ms.filter(|high| value > *high) {
            return Some(format!(
                "step {}: {name} took {value} ms, more than the {high} ms bound",
                self.step
            ));
        }
        None
    }
}

/// Checks that every expectation held and every measurement is within its bounds.
pub fn check_expectations(
    expectations: &[ExpectationResult],
    measures: &[MeasureResult],
) -> Verdict {
    let mut findings: Vec<String> = expectations
        .iter()
        .filter(|result| !result.satisfied)
        .map(|result| {
            let mode = match result.mode {
                ExpectMode::Within => "within",
                ExpectMode::For => "for",
            };
            format!(
                "step {}: {} ({mode} {} ms): {}",
                result.step,
                result.name,
                result.span_ms,
                result.failure.as_deref().unwrap_or("not satisfied")
            )
        })
        .collect();
    findings.extend(measures.iter().filter_map(MeasureResult::violation));
    let slowest = expectations
        .iter()
        .filter_map(|result| result.time_to_satisfy_ms)
        .max();
    Verdict::from_findings(
        "expectations",
        format!(
            "{} expectations held{}, {} measurements in bounds",
            expectations.len(),
            slowest.map_or_else(String::new, |ms| format!(" (slowest within: {ms} ms)")),
            measures.len()
        ),
        findings,
    )
}
