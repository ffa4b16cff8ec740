//! No split brain: no two sites acknowledged writes in overlapping intervals, and every
//! acknowledged write falls in its site's authority epoch.
//!
//! Each acknowledged write is known to have committed somewhere inside its
//! [invoke, completion] interval. If a write acknowledged by site A and one acknowledged by
//! site B have overlapping intervals, both sites may have been writable at once. The check is
//! sound for a correct system as long as the workload's client timeout is shorter than a
//! failover (the lease wait alone is at least the lease duration), which the workload
//! guarantees.
//!
//! Overlap alone misses alternation: iad acknowledging again after pdx took over, with no
//! two intervals overlapping. So the status snapshots (activeSite, topologyGeneration) and
//! the failovers they report give each site its authority epochs: from the start (the first
//! site) or the failover's `promotedAt`, to the next failover's `fencedAt` (or, lacking
//! operator times, the snapshots around the change), widened by the cross-clock slack. Every
//! acknowledged write's interval must intersect an epoch of its site. Every change of the
//! active site must be an observed failover from the old to the new site with a new
//! topologyGeneration, every observed failover must show as a change, and the generation
//! never goes back.

use std::collections::BTreeMap;

use super::rpo::observed_failovers;
use super::timings::CROSS_CLOCK_SLACK_NS;
use super::verdict::Verdict;
use crate::history::event::{EventType, FailoverRecord, Op};
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
    findings.extend(check_epochs(history, &writes, unattributed.len()));
    let sites = latest
        .keys()
        .map(|site| site.name())
        .collect::<Vec<_>>()
        .join(", ");
    Verdict::from_findings(
        NAME,
        format!(
            "{} acknowledged writes, sites [{sites}] never overlapped, each inside its authority epoch",
            writes.len()
        ),
        findings,
    )
}

/// A site's authority, on the history's monotonic axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epoch {
    /// The active site.
    pub site: Site,
    /// The topologyGeneration it was first seen with.
    pub generation: u64,
    /// The earliest it may have become writable.
    pub start_ns: u64,
    /// The latest it may have stopped being writable (`u64::MAX`: still active).
    pub end_ns: u64,
}

/// A run of status snapshots with the same active site and generation.
struct Run {
    site: Site,
    generation: u64,
    first_ns: u64,
    last_ns: u64,
}

/// The authority epochs the status snapshots show, and the findings about how they changed.
pub fn authority_epochs(history: &History) -> (Vec<Epoch>, Vec<String>) {
    let mut findings = Vec::new();
    let mut runs: Vec<Run> = Vec::new();
    for event in &history.events {
        let Op::Status {
            active_site: Some(site),
            topology_generation,
            ..
        } = &event.op
        else {
            continue;
        };
        if event.kind != EventType::Ok {
            continue;
        }
        match runs.last_mut() {
            Some(run) if run.site == *site && run.generation == *topology_generation => {
                run.last_ns = event.mono_ns;
            }
            _ => runs.push(Run {
                site: *site,
                generation: *topology_generation,
                first_ns: event.mono_ns,
                last_ns: event.mono_ns,
            }),
        }
    }
    let to_mono = |time: Option<jiff::Timestamp>| time.and_then(|at| history.wall_to_mono_ns(at));
    let promoted = |record: &FailoverRecord| {
        to_mono(record.promoted_at)
            .or_else(|| to_mono(record.fenced_at))
            .or_else(|| to_mono(Some(record.started_at)))
            .unwrap_or(0)
    };
    let failovers = observed_failovers(history);
    let first_seen = runs.first().map_or(0, |run| run.first_ns);
    // Failovers promoted before the first snapshot cannot show as a change.
    let mut unmatched: Vec<&FailoverRecord> = failovers
        .iter()
        .filter(|record| promoted(record) + CROSS_CLOCK_SLACK_NS >= first_seen)
        .collect();
    let mut epochs: Vec<Epoch> = Vec::new();
    for (index, run) in runs.iter().enumerate() {
        let Some(previous) = index.checked_sub(1).and_then(|back| runs.get(back)) else {
            epochs.push(Epoch {
                site: run.site,
                generation: run.generation,
                start_ns: 0,
                end_ns: u64::MAX,
            });
            continue;
        };
        if run.generation < previous.generation {
            findings.push(format!(
                "topologyGeneration went back from {} to {} at {:.3}s",
                previous.generation,
                run.generation,
                seconds(run.first_ns)
            ));
        }
        if run.site == previous.site {
            continue;
        }
        if run.generation <= previous.generation {
            findings.push(format!(
                "the active site changed {} -> {} at {:.3}s without a new topologyGeneration ({} -> {})",
                previous.site,
                run.site,
                seconds(run.first_ns),
                previous.generation,
                run.generation
            ));
        }
        let matched = unmatched.iter().position(|record| {
            let at = promoted(record);
            record.from == previous.site
                && record.to == run.site
                && at + CROSS_CLOCK_SLACK_NS >= previous.first_ns
                && at <= run.first_ns + CROSS_CLOCK_SLACK_NS
        });
        let (fence_ns, start_ns) = match matched.map(|position| unmatched.remove(position)) {
            Some(record) => {
                let fence = to_mono(record.fenced_at).unwrap_or_else(|| promoted(record));
                (
                    fence.saturating_add(CROSS_CLOCK_SLACK_NS),
                    promoted(record).saturating_sub(CROSS_CLOCK_SLACK_NS),
                )
            }
            None => {
                findings.push(format!(
                    "the active site changed {} -> {} between {:.3}s and {:.3}s with no observed failover {} -> {}",
                    previous.site,
                    run.site,
                    seconds(previous.last_ns),
                    seconds(run.first_ns),
                    previous.site,
                    run.site
                ));
                (run.first_ns, previous.last_ns)
            }
        };
        if let Some(open) = epochs.last_mut() {
            open.end_ns = fence_ns;
        }
        epochs.push(Epoch {
            site: run.site,
            generation: run.generation,
            start_ns,
            end_ns: u64::MAX,
        });
    }
    for record in unmatched {
        let kind = match record.kind {
            crate::history::event::FailoverKind::Emergency => "emergency",
            crate::history::event::FailoverKind::Planned => "planned",
        };
        findings.push(format!(
            "{kind} failover {} -> {} (promoted at {:.3}s) but the status never showed {} active after {}",
            record.from,
            record.to,
            seconds(promoted(record)),
            record.to,
            record.from
        ));
    }
    (epochs, findings)
}

/// Every acknowledged write must intersect an authority epoch of its site.
fn check_epochs(
    history: &History,
    writes: &[AcknowledgedWrite],
    unattributed: usize,
) -> Vec<String> {
    let (epochs, mut findings) = authority_epochs(history);
    if epochs.is_empty() {
        if !writes.is_empty() || unattributed > 0 {
            findings.push(format!(
                "no group status snapshot was recorded, so the authority epochs of the {} acknowledged writes are unknown",
                writes.len() + unattributed
            ));
        }
        return findings;
    }
    for write in writes {
        let own: Vec<&Epoch> = epochs
            .iter()
            .filter(|epoch| epoch.site == write.site)
            .collect();
        if own.is_empty() {
            findings.push(format!(
                "{} acknowledged write {} in [{:.3}s, {:.3}s], but {} never held authority",
                write.site,
                write.id,
                seconds(write.start_ns),
                seconds(write.end_ns),
                write.site
            ));
            continue;
        }
        let inside = own
            .iter()
            .any(|epoch| write.start_ns <= epoch.end_ns && write.end_ns >= epoch.start_ns);
        if !inside {
            let shown = own
                .iter()
                .map(|epoch| {
                    let end = if epoch.end_ns == u64::MAX {
                        "end".to_owned()
                    } else {
                        format!("{:.3}s", seconds(epoch.end_ns))
                    };
                    format!(
                        "[{:.3}s, {end}] at generation {}",
                        seconds(epoch.start_ns),
                        epoch.generation
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            findings.push(format!(
                "{} acknowledged write {} in [{:.3}s, {:.3}s] outside every {} authority epoch ({shown})",
                write.site,
                write.id,
                seconds(write.start_ns),
                seconds(write.end_ns),
                write.site
            ));
        }
    }
    findings
}

/// Nanoseconds as seconds, for messages.
pub fn seconds(ns: u64) -> f64 {
    // Precision loss is irrelevant for display.
    #[allow(clippy::cast_precision_loss)]
    let value = ns as f64 / 1e9;
    value
}
