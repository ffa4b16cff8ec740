//! RPO: lost = acknowledged writes missing from the final state after heal, compared with
//! the operator's `status.lastFailover.lostTransactions` (seed 001: RPO is fixed at the
//! instant the primary died; bloodraven.md: a lower bound until `exact=true`, then exact).
//!
//! The comparison assumes the harness workload is the only writer while faults run, so one
//! lost transaction is one lost write.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::split_brain::acknowledged_writes;
use super::verdict::Verdict;
use crate::history::event::{EventType, FailoverKind, FailoverRecord, Op};
use crate::history::store::History;
use crate::scenario::model::Site;

/// How many lost ids the report lists.
pub const LOST_IDS_LISTED_MAX: usize = 20;

/// One failover as the operator reported it, with the writes lost from its old primary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpoRow {
    /// emergency | planned.
    pub kind: FailoverKind,
    /// Old active site.
    pub from: Site,
    /// New active site.
    pub to: Site,
    /// The operator's `lostTransactions` (latest observation of this failover).
    pub operator_reported: Option<u64>,
    /// The operator's `exact`.
    pub exact: bool,
}

/// The RPO table of one scenario.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpoSummary {
    /// Writes acknowledged (`ok`).
    pub acknowledged: u64,
    /// Acknowledged writes missing from the final state.
    pub lost: u64,
    /// The first lost ids.
    pub lost_ids: Vec<u64>,
    /// Writes with unknown outcome (`info`) found in the final state (allowed).
    pub unknown_present: u64,
    /// Whether a final state was read at all.
    pub final_state_read: bool,
    /// The failovers observed, in order.
    pub failovers: Vec<RpoRow>,
}

impl RpoSummary {
    /// The operator's total over all failovers (None when no failover reported a count).
    pub fn operator_reported(&self) -> Option<u64> {
        let counts: Vec<u64> = self
            .failovers
            .iter()
            .filter_map(|row| row.operator_reported)
            .collect();
        if counts.is_empty() {
            None
        } else {
            Some(counts.iter().sum())
        }
    }

    /// Whether every failover's count is exact.
    pub fn exact(&self) -> bool {
        !self.failovers.is_empty() && self.failovers.iter().all(|row| row.exact)
    }
}

/// The distinct failovers seen in status snapshots (keyed by `startedAt`), each at its latest
/// observation, in order of `startedAt`.
pub fn observed_failovers(history: &History) -> Vec<FailoverRecord> {
    let mut by_start: BTreeMap<jiff::Timestamp, FailoverRecord> = BTreeMap::new();
    for event in &history.events {
        if event.kind != EventType::Ok {
            continue;
        }
        if let Op::Status {
            last_failover: Some(record),
            ..
        } = &event.op
        {
            by_start.insert(record.started_at, record.clone());
        }
    }
    by_start.into_values().collect()
}

/// Computes the RPO table and checks it.
pub fn check_rpo(history: &History) -> (RpoSummary, Verdict) {
    const NAME: &str = "rpo";
    let (writes, _) = match acknowledged_writes(history) {
        Ok(found) => found,
        Err(malformed) => {
            return (
                RpoSummary::default(),
                Verdict::from_findings(
                    NAME,
                    String::new(),
                    vec![format!("malformed history: {malformed}")],
                ),
            )
        }
    };
    let final_ids: Option<BTreeSet<u64>> =
        history
            .events
            .iter()
            .rev()
            .find_map(|event| match &event.op {
                Op::FinalState { ids } if event.kind == EventType::Ok => {
                    Some(ids.iter().copied().collect())
                }
                _ => None,
            });
    let failovers = observed_failovers(history);
    let mut summary = RpoSummary {
        acknowledged: u64::try_from(writes.len()).unwrap_or(u64::MAX),
        final_state_read: final_ids.is_some(),
        failovers: failovers
            .iter()
            .map(|record| RpoRow {
                kind: record.kind,
                from: record.from,
                to: record.to,
                operator_reported: record.lost_transactions,
                exact: record.exact,
            })
            .collect(),
        ..RpoSummary::default()
    };
    let Some(final_ids) = final_ids else {
        return (
            summary,
            Verdict::from_findings(
                NAME,
                String::new(),
                vec!["no final state was read, so the RPO is unknown".to_owned()],
            ),
        );
    };
    let mut findings = Vec::new();
    let lost: Vec<_> = writes
        .iter()
        .filter(|write| !final_ids.contains(&write.id))
        .collect();
    summary.lost = u64::try_from(lost.len()).unwrap_or(u64::MAX);
    summary.lost_ids = lost
        .iter()
        .map(|write| write.id)
        .take(LOST_IDS_LISTED_MAX)
        .collect();

    // Definite failures must not be present; unknown outcomes may be.
    if let Ok(operations) = history.operations() {
        for operation in operations {
            if let Op::Write { id, .. } = operation.invoke.op {
                match operation.outcome() {
                    EventType::Fail if final_ids.contains(&id) => {
                        findings.push(format!(
                            "write {id} failed definitely but is present in the final state"
                        ));
                    }
                    EventType::Info if final_ids.contains(&id) => summary.unknown_present += 1,
                    EventType::Invoke | EventType::Ok | EventType::Fail | EventType::Info => {}
                }
            }
        }
    }

    let emergency_sources: BTreeSet<Site> = failovers
        .iter()
        .filter(|record| record.kind == FailoverKind::Emergency)
        .map(|record| record.from)
        .collect();
    for write in &lost {
        if !emergency_sources.contains(&write.site) {
            findings.push(format!(
                "acknowledged write {} (by {}) is lost, and {} never lost the primary role in an emergency failover",
                write.id, write.site, write.site
            ));
        }
    }
    for record in failovers
        .iter()
        .filter(|record| record.kind == FailoverKind::Planned)
    {
        if record.lost_transactions.is_some_and(|count| count > 0) {
            findings.push(format!(
                "planned failover {} -> {} reports {} lost transactions; a planned failover loses nothing",
                record.from,
                record.to,
                record.lost_transactions.unwrap_or_default()
            ));
        }
    }
    if let Some(reported) = summary.operator_reported() {
        if summary.exact() && reported != summary.lost {
            findings.push(format!(
                "operator reports {reported} lost transactions (exact) but {} acknowledged writes are lost",
                summary.lost
            ));
        }
        if !summary.exact() && reported > summary.lost {
            findings.push(format!(
                "operator's lower bound {reported} exceeds the {} acknowledged writes lost",
                summary.lost
            ));
        }
    } else if summary.lost > 0 && !failovers.is_empty() {
        findings.push(format!(
            "{} acknowledged writes are lost and the operator reported no count",
            summary.lost
        ));
    }
    let ok = format!(
        "{} acknowledged, {} lost, operator reported {}{}",
        summary.acknowledged,
        summary.lost,
        summary
            .operator_reported()
            .map_or_else(|| "nothing".to_owned(), |count| count.to_string()),
        if summary.exact() { " (exact)" } else { "" }
    );
    let verdict = Verdict::from_findings(NAME, ok, findings);
    (summary, verdict)
}
