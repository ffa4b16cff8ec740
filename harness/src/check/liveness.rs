//! Workload liveness: the history proves something only if the workload was writing. A
//! scenario needs an acknowledged write before its first fault (the workload was up when the
//! faults began) and one invoked after its last heal (it came back); without faults, one at
//! all. Otherwise zero writes would pass every other checker.

use super::split_brain::seconds;
use super::verdict::Verdict;
use crate::history::event::{EventType, FaultPhase, Op};
use crate::history::store::History;

/// Runs the checker.
pub fn check_liveness(history: &History) -> Verdict {
    const NAME: &str = "workload liveness";
    let operations = match history.operations() {
        Ok(operations) => operations,
        Err(malformed) => {
            return Verdict::from_findings(
                NAME,
                String::new(),
                vec![format!("malformed history: {malformed}")],
            )
        }
    };
    // (invoke, completion) of every acknowledged write.
    let acknowledged: Vec<(u64, u64)> = operations
        .iter()
        .filter(|operation| matches!(operation.invoke.op, Op::Write { .. }))
        .filter(|operation| operation.outcome() == EventType::Ok)
        .filter_map(|operation| Some((operation.invoke.mono_ns, operation.end_ns()?)))
        .collect();
    let faults: Vec<(&str, FaultPhase, u64)> = operations
        .iter()
        .filter_map(|operation| match &operation.invoke.op {
            Op::Fault { name, phase, .. } => Some((
                name.as_str(),
                *phase,
                operation.end_ns().unwrap_or(operation.invoke.mono_ns),
            )),
            _ => None,
        })
        .collect();
    let first_fault = operations
        .iter()
        .find_map(|operation| match &operation.invoke.op {
            Op::Fault {
                name,
                phase: FaultPhase::Start,
                ..
            } => Some((name.as_str(), operation.invoke.mono_ns)),
            _ => None,
        });
    // The last heal (a fault's end); with one-shot faults only, the last fault.
    let last_heal = faults
        .iter()
        .rev()
        .find(|(_, phase, _)| *phase == FaultPhase::End)
        .or_else(|| faults.last())
        .map(|(name, _, at)| (*name, *at));
    let mut findings = Vec::new();
    match first_fault {
        None if acknowledged.is_empty() => {
            findings.push("no write was acknowledged at all: the workload never ran".to_owned());
        }
        None => {}
        Some((name, at)) if !acknowledged.iter().any(|(_, end)| *end <= at) => {
            findings.push(format!(
                "no write was acknowledged before the first fault (`{name}` at {:.3}s): the workload was not running when the faults began",
                seconds(at)
            ));
        }
        Some(_) => {}
    }
    if let Some((name, at)) = last_heal {
        if !acknowledged.iter().any(|(start, _)| *start >= at) {
            findings.push(format!(
                "no write was acknowledged after the last heal (`{name}` at {:.3}s): writes never came back",
                seconds(at)
            ));
        }
    }
    Verdict::from_findings(
        NAME,
        format!(
            "{} acknowledged writes, before the first fault and after the last heal",
            acknowledged.len()
        ),
        findings,
    )
}
