//! Judging an expectation against what [`crate::backend::Cluster::observe`] returned: the
//! runner's way into the targets ([`crate::targets`]), each of which judges its own typed
//! observation and documents its shape.

use crate::scenario::model::Expect;
use crate::targets::Observation;

/// At the end of a `for` window: whether what had to change over it did (an `increasing`
/// counter must be above its baseline, docs/design/requirements.md R001.3); `Err` says it did
/// not. Other expectations pass.
pub fn climbed(
    expect: &Expect,
    baseline: Option<&Observation>,
    last: Option<&Observation>,
) -> Result<(), String> {
    expect.target.climbed(baseline, last)
}

/// Whether `observed` satisfies `expect`; `baseline` is the observation before the step's
/// fault or else the first observation of this expectation (for `$changed`/`$unchanged` and
/// `increasing`), `None` on the first poll itself (which is then its own baseline). Events
/// count only when they occurred at or after `since` (to the second: Kubernetes event
/// times have second precision), archives only when written since `since` (the runner passes
/// the scenario's start for them). The error says what differs.
pub fn evaluate(
    expect: &Expect,
    observed: &Observation,
    baseline: Option<&Observation>,
    since: jiff::Timestamp,
) -> Result<(), String> {
    expect
        .target
        .evaluate(observed, baseline, expect.for_.is_some(), since)
}

/// A short human name for an expectation, for reports: its `name`, else its target and what
/// the target's module says of it.
pub fn describe(expect: &Expect) -> String {
    if let Some(name) = &expect.name {
        return name.clone();
    }
    let target = expect.target.name();
    match expect.target.describe() {
        Some(detail) => format!("{target}: {detail}"),
        None => target.to_owned(),
    }
}
