//! No split brain: no two sites acknowledged writes in overlapping intervals.
//!
//! Each acknowledged write is known to have committed somewhere inside its
//! [invoke, completion] interval. If a write acknowledged by site A and one acknowledged by
//! site B have overlapping intervals, both sites may have been writable at once. The check is
//! sound for a correct system as long as the workload's client timeout is shorter than a
//! failover (the lease wait alone is at least the lease duration), which the workload
//! guarantees.

use std::collections::BTreeMap;

use super::verdict::Verdict;
use crate::history::event::{EventType, Op};
use crate::history::store::History;
use crate::scenario::model::Site;

/// An acknowledged write, attributed to the site that acknowledged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcknowledgedWrite {
    /// The unique id.
    pub id: u64,
    /// The acknowledging site.
    pub site: Site,
    /// Invoke time (monotonic ns).
    pub start_ns: u64,
    /// Completion time (monotonic ns).
    pub end_ns: u64,
}

/// The acknowledged writes of a history, by invoke time. Acknowledged writes that name no
/// site are returned separately by id: they cannot be attributed.
pub fn acknowledged_writes(
    history: &History,
) -> Result<(Vec<AcknowledgedWrite>, Vec<u64>), String> {
    let mut writes = Vec::new();
    let mut unattributed = Vec::new();
    for operation in history.operations()? {
        let (Op::Write { id, .. }, Some(completion)) = (&operation.invoke.op, operation.completion)
        else {
            continue;
        };
        if completion.kind != EventType::Ok {
            continue;
        }
        match completion.op {
            Op::Write {
                site: Some(site), ..
            } => writes.push(AcknowledgedWrite {
                id: *id,
                site,
                start_ns: operation.invoke.mono_ns,
                end_ns: completion.mono_ns,
            }),
            _ => unattributed.push(*id),
        }
    }
    writes.sort_by_key(|write| (write.start_ns, write.end_ns, write.id));
    Ok((writes, unattributed))
}

/// Runs the checker.
pub fn check_split_brain(history: &History) -> Verdict {
    const NAME: &str = "no-split-brain";
    let (writes, unattributed) = match acknowledged_writes(history) {
        Ok(found) => found,
        Err(malformed) => {
            return Verdict::from_findings(
                NAME,
                String::new(),
                vec![format!("malformed history: {malformed}")],
            )
        }
    };
    let mut findings: Vec<String> = unattributed
        .iter()
        .map(|id| format!("write {id} was acknowledged without naming its site"))
        .collect();
    // Per site, the acknowledged write (so far, by invoke order) that completed last.
    let mut latest: BTreeMap<Site, AcknowledgedWrite> = BTreeMap::new();
    for write in &writes {
        for (site, other) in &latest {
            if *site != write.site && other.end_ns > write.start_ns {
                findings.push(format!(
                    "{} acknowledged write {} in [{:.3}s, {:.3}s] while {} acknowledged write {} in [{:.3}s, {:.3}s]",
                    other.site,
                    other.id,
                    seconds(other.start_ns),
                    seconds(other.end_ns),
                    write.site,
                    write.id,
                    seconds(write.start_ns),
                    seconds(write.end_ns),
                ));
            }
        }
        let slot = latest.entry(write.site).or_insert(*write);
        if write.end_ns >= slot.end_ns {
            *slot = *write;
        }
    }
    let sites = latest
        .keys()
        .map(|site| site.name())
        .collect::<Vec<_>>()
        .join(", ");
    Verdict::from_findings(
        NAME,
        format!(
            "{} acknowledged writes, sites [{sites}] never overlapped",
            writes.len()
        ),
        findings,
    )
}

/// Nanoseconds as seconds, for messages.
pub fn seconds(ns: u64) -> f64 {
    // Precision loss is irrelevant for display.
    #[allow(clippy::cast_precision_loss)]
    let value = ns as f64 / 1e9;
    value
}
