//! A checker's verdict.

use serde::{Deserialize, Serialize};

/// How many individual findings a verdict lists (the count is always complete).
pub const FINDINGS_LISTED_MAX: usize = 10;

/// The result of one checker over one history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// The checker's name (`no-split-brain`, `rpo`, `timings`, `expectations`).
    pub checker: String,
    /// Whether the history passed.
    pub valid: bool,
    /// One line for the report.
    pub summary: String,
    /// The first findings, at most [`FINDINGS_LISTED_MAX`].
    #[serde(default)]
    pub findings: Vec<String>,
}

impl Verdict {
    /// A verdict from findings: valid when there are none.
    pub fn from_findings(checker: &str, ok_summary: String, findings: Vec<String>) -> Self {
        let count = findings.len();
        let valid = count == 0;
        let summary = if valid {
            ok_summary
        } else {
            let first = findings.first().cloned().unwrap_or_default();
            if count == 1 {
                first
            } else {
                format!("{first} (and {} more)", count - 1)
            }
        };
        Self {
            checker: checker.to_owned(),
            valid,
            summary,
            findings: findings.into_iter().take(FINDINGS_LISTED_MAX).collect(),
        }
    }
}
