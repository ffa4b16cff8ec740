//! `junit.xml` with quick-junit (the library nextest uses for its own JUnit output).

use std::time::Duration;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use super::results::RunResults;
use crate::error::Result;

/// Renders the run as JUnit XML: one test suite, one test case per scenario.
pub fn render_junit(results: &RunResults) -> Result<String> {
    let mut report = Report::new(format!("bloodraven-harness {}", results.run_id));
    let mut suite = TestSuite::new("bloodraven-harness");
    for scenario in &results.scenarios {
        let status = if let Some(reason) = &scenario.skipped {
            let mut status = TestCaseStatus::skipped();
            status.set_message(reason.clone());
            status
        } else if scenario.passed {
            TestCaseStatus::success()
        } else {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status.set_message(scenario.failure.clone().unwrap_or_default());
            let details: Vec<String> = scenario
                .verdicts
                .iter()
                .filter(|verdict| !verdict.valid)
                .flat_map(|verdict| {
                    verdict
                        .findings
                        .iter()
                        .map(move |finding| format!("{}: {finding}", verdict.checker))
                })
                .collect();
            status.set_description(details.join("\n"));
            status
        };
        let mut case = TestCase::new(scenario.dir_name(), status);
        case.set_classname("bloodraven-harness");
        case.set_time(Duration::from_millis(scenario.duration_ms));
        suite.add_test_case(case);
    }
    report.add_test_suite(suite);
    Ok(report.to_string()?)
}
