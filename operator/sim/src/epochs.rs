//! Split brain judged as the harness judges it (`harness/src/check/split_brain.rs`): from the
//! acknowledged writes, each with its site and its [sent, acknowledged] interval, and from the
//! group status the operator publishes (activeSite, topologyGeneration, lastFailover).
//!
//! 1. **Overlap**: no two sites acknowledged writes in overlapping intervals.
//! 2. **Epochs**: the runs of status snapshots with one (activeSite, topologyGeneration) give
//!    each site its authority epochs: from the start (the first site) or the failover's
//!    `promotedAt`, to the next failover's `fencedAt` (lacking operator times, the snapshots
//!    around the change), widened by a cross-clock slack. Every acknowledged write's interval
//!    must intersect an epoch of its site.
//! 3. **Consistency** of the epochs themselves: every change of the active site is an
//!    observed failover from the old to the new site with a new topologyGeneration, every
//!    observed failover shows as a change, and the generation never goes back.
//!
//! The simulator records the status at every write (a perfect observer), and its operator's
//! timestamps are off true time by at most its clock skew, so the slack is that skew bound
//! rather than the harness's one second.

use crate::clock::SimTime;
use std::collections::BTreeMap;
use std::fmt::Write;

/// An acknowledged write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckedWrite {
    /// The site that acknowledged it.
    pub site: usize,
    /// When the client sent it.
    pub sent_at: SimTime,
    /// When the client was told it committed.
    pub acked_at: SimTime,
}

/// `status.lastFailover` with its times on the simulator's axis (operator wall time minus the
/// run's epoch; off true time by the operator's skew).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailoverTimes {
    /// Old active site.
    pub from: usize,
    /// New active site.
    pub to: usize,
    /// `startedAt` (the key: one record per failover, the last snapshot of it wins).
    pub started_at: Option<SimTime>,
    /// `fencedAt`.
    pub fenced_at: Option<SimTime>,
    /// `promotedAt`.
    pub promoted_at: Option<SimTime>,
}

impl FailoverTimes {
    /// `promotedAt`, else `fencedAt`, else `startedAt`, else the start of the run.
    fn promoted(&self) -> SimTime {
        self.promoted_at
            .or(self.fenced_at)
            .or(self.started_at)
            .unwrap_or_default()
    }
}

/// A run of status snapshots with the same active site and generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    site: usize,
    generation: u64,
    first: SimTime,
    last: SimTime,
}

/// One site's authority, widened by the slack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epoch {
    /// The active site.
    pub site: usize,
    /// The topologyGeneration it was first seen with.
    pub generation: u64,
    /// The earliest it may have become writable.
    pub start: SimTime,
    /// The latest it may have stopped being writable (`None`: still active).
    pub end: Option<SimTime>,
}

impl Epoch {
    fn intersects(&self, write: &AckedWrite) -> bool {
        write.acked_at >= self.start && self.end.is_none_or(|end| write.sent_at <= end)
    }
}

/// What the judge found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// An acknowledged write overlapping another site's, or outside its site's epochs.
    SplitBrain {
        /// The offending write.
        write: AckedWrite,
        /// The other site's write it overlaps, if that is what was wrong.
        overlapped: Option<AckedWrite>,
        /// What was wrong with it.
        detail: String,
    },
    /// The status history itself does not explain how authority moved.
    Inconsistent {
        /// When (the snapshot that showed it).
        at: SimTime,
        /// What.
        detail: String,
    },
}

/// Acknowledged writes and status snapshots of one run.
#[derive(Debug, Clone)]
pub struct AuthorityHistory {
    site_names: Vec<&'static str>,
    slack_millis: u64,
    writes: Vec<AckedWrite>,
    runs: Vec<Run>,
    failovers: BTreeMap<Option<SimTime>, FailoverTimes>,
    /// The greatest generation any recorded snapshot showed.
    max_generation: u64,
    /// After a store revert (`--status-revert`): snapshots below this generation show the
    /// reverted status, not how authority moved, and are left out until the operator
    /// publishes this generation again.
    reverted_below: Option<u64>,
}

impl AuthorityHistory {
    /// An empty history for sites `site_names`; epochs are widened by `slack_millis` on
    /// both ends.
    pub fn new(site_names: Vec<&'static str>, slack_millis: u64) -> AuthorityHistory {
        AuthorityHistory {
            site_names,
            slack_millis,
            writes: Vec::new(),
            runs: Vec::new(),
            failovers: BTreeMap::new(),
            max_generation: 0,
            reverted_below: None,
        }
    }

    /// The store reverted the group's status to an older copy: until a snapshot shows the
    /// greatest generation seen before the revert again, snapshots are the fault's work,
    /// not evidence of how authority moved (the writes of that window are judged against
    /// the epochs around it).
    pub fn on_store_revert(&mut self) {
        if self.max_generation > 0 {
            self.reverted_below = Some(self.max_generation);
        }
    }

    /// A write was acknowledged.
    pub fn on_ack(&mut self, write: AckedWrite) {
        self.writes.push(write);
    }

    /// A status snapshot at `now`: its active site (`None` skips it, as the harness does),
    /// generation and last failover.
    pub fn on_status(
        &mut self,
        now: SimTime,
        active_site: Option<usize>,
        generation: u64,
        last_failover: Option<FailoverTimes>,
    ) {
        if let Some(floor) = self.reverted_below {
            if generation < floor {
                return;
            }
            self.reverted_below = None;
        }
        self.max_generation = self.max_generation.max(generation);
        if let Some(record) = last_failover {
            self.failovers.insert(record.started_at, record);
        }
        let Some(site) = active_site else {
            return;
        };
        match self.runs.last_mut() {
            Some(run) if run.site == site && run.generation == generation => run.last = now,
            _ => self.runs.push(Run {
                site,
                generation,
                first: now,
                last: now,
            }),
        }
    }

    /// Acknowledged writes recorded.
    pub fn write_count(&self) -> usize {
        self.writes.len()
    }

    fn name(&self, site: usize) -> &'static str {
        self.site_names.get(site).copied().unwrap_or("?")
    }

    /// The authority epochs, and the findings about how they changed.
    pub fn epochs(&self) -> (Vec<Epoch>, Vec<Verdict>) {
        let slack = self.slack_millis;
        let mut findings = Vec::new();
        let first_seen = self.runs.first().map_or(SimTime(0), |run| run.first);
        // A failover from a site to itself (core promotes the failed active site when it
        // returns as the best candidate before any other qualifies) moves no authority: the
        // status rightly shows no change of active site for it. The harness would report it as
        // "never showed"; here it is not an inconsistency.
        let mut unmatched: Vec<&FailoverTimes> = self
            .failovers
            .values()
            .filter(|record| record.from != record.to)
            .filter(|record| record.promoted().plus_millis(slack) >= first_seen)
            .collect();
        let mut epochs: Vec<Epoch> = Vec::new();
        for (index, run) in self.runs.iter().enumerate() {
            let Some(previous) = index.checked_sub(1).and_then(|back| self.runs.get(back)) else {
                epochs.push(Epoch {
                    site: run.site,
                    generation: run.generation,
                    start: SimTime(0),
                    end: None,
                });
                continue;
            };
            if run.generation < previous.generation {
                findings.push(Verdict::Inconsistent {
                    at: run.first,
                    detail: format!(
                        "topologyGeneration went back from {} to {} at {}",
                        previous.generation, run.generation, run.first
                    ),
                });
            }
            if run.site == previous.site {
                continue;
            }
            if run.generation <= previous.generation {
                findings.push(Verdict::Inconsistent {
                    at: run.first,
                    detail: format!(
                        "the active site changed {} -> {} at {} without a new topologyGeneration \
                         ({} -> {})",
                        self.name(previous.site),
                        self.name(run.site),
                        run.first,
                        previous.generation,
                        run.generation
                    ),
                });
            }
            let matched = unmatched.iter().position(|record| {
                let at = record.promoted();
                record.from == previous.site
                    && record.to == run.site
                    && at.plus_millis(slack) >= previous.first
                    && at <= run.first.plus_millis(slack)
            });
            let (fence, start) = match matched.map(|position| unmatched.remove(position)) {
                Some(record) => {
                    let fence = record.fenced_at.unwrap_or_else(|| record.promoted());
                    (
                        fence.plus_millis(slack),
                        SimTime(record.promoted().as_millis().saturating_sub(slack)),
                    )
                }
                None => {
                    findings.push(Verdict::Inconsistent {
                        at: run.first,
                        detail: format!(
                            "the active site changed {} -> {} between {} and {} with no observed \
                             failover",
                            self.name(previous.site),
                            self.name(run.site),
                            previous.last,
                            run.first
                        ),
                    });
                    (run.first, previous.last)
                }
            };
            if let Some(open) = epochs.last_mut() {
                open.end = Some(fence);
            }
            epochs.push(Epoch {
                site: run.site,
                generation: run.generation,
                start,
                end: None,
            });
        }
        for record in unmatched {
            findings.push(Verdict::Inconsistent {
                at: record.promoted(),
                detail: format!(
                    "failover {} -> {} (promoted at {}) but the status never showed {} active \
                     after {}",
                    self.name(record.from),
                    self.name(record.to),
                    record.promoted(),
                    self.name(record.to),
                    self.name(record.from)
                ),
            });
        }
        (epochs, findings)
    }

    /// Every finding: overlapping acknowledged writes of two sites, writes outside their
    /// site's epochs, and the epochs' own inconsistencies.
    pub fn judge(&self) -> Vec<Verdict> {
        let mut writes = self.writes.clone();
        writes.sort_by_key(|write| (write.sent_at, write.acked_at, write.site));
        let mut findings = Vec::new();
        // Per site, the acknowledged write (so far, by send order) that completed last.
        let mut latest: BTreeMap<usize, AckedWrite> = BTreeMap::new();
        for write in &writes {
            for (site, other) in &latest {
                if *site != write.site && other.acked_at > write.sent_at {
                    findings.push(Verdict::SplitBrain {
                        write: *write,
                        overlapped: Some(*other),
                        detail: format!(
                            "{} acknowledged a write in [{}, {}] while {} acknowledged one in \
                             [{}, {}]",
                            self.name(other.site),
                            other.sent_at,
                            other.acked_at,
                            self.name(write.site),
                            write.sent_at,
                            write.acked_at
                        ),
                    });
                }
            }
            let slot = latest.entry(write.site).or_insert(*write);
            if write.acked_at >= slot.acked_at {
                *slot = *write;
            }
        }
        let (epochs, inconsistent) = self.epochs();
        for write in &writes {
            let own: Vec<&Epoch> = epochs.iter().filter(|e| e.site == write.site).collect();
            if own.iter().any(|epoch| epoch.intersects(write)) {
                continue;
            }
            let mut shown = String::new();
            for epoch in &own {
                let end = epoch.end.map_or("end".to_string(), |end| end.to_string());
                let _ = write!(
                    shown,
                    " [{}, {end}] at generation {}",
                    epoch.start, epoch.generation
                );
            }
            if own.is_empty() {
                shown.push_str(" none: it never held authority");
            }
            findings.push(Verdict::SplitBrain {
                write: *write,
                overlapped: None,
                detail: format!(
                    "{} acknowledged a write in [{}, {}] outside every {} authority epoch:{shown}",
                    self.name(write.site),
                    write.sent_at,
                    write.acked_at,
                    self.name(write.site)
                ),
            });
        }
        findings.extend(inconsistent);
        findings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IAD: usize = 0;
    const PDX: usize = 1;

    fn write(site: usize, sent_millis: u64, acked_millis: u64) -> AckedWrite {
        AckedWrite {
            site,
            sent_at: SimTime(sent_millis),
            acked_at: SimTime(acked_millis),
        }
    }

    /// iad active at generation 1 until an emergency failover to pdx (fenced at 20 s, promoted
    /// at 20.5 s), status polled every 2 s.
    fn failover_history() -> AuthorityHistory {
        let mut history = AuthorityHistory::new(vec!["iad", "pdx", "reader"], 250);
        for t in (0..=20_000).step_by(2_000) {
            history.on_status(SimTime(t), Some(IAD), 1, None);
        }
        let failover = FailoverTimes {
            from: IAD,
            to: PDX,
            started_at: Some(SimTime(12_000)),
            fenced_at: Some(SimTime(20_000)),
            promoted_at: Some(SimTime(20_500)),
        };
        for t in (20_500..=40_000).step_by(2_000) {
            history.on_status(SimTime(t), Some(PDX), 2, Some(failover));
        }
        history
    }

    fn split_brains(history: &AuthorityHistory) -> Vec<String> {
        history
            .judge()
            .into_iter()
            .map(|verdict| match verdict {
                Verdict::SplitBrain { detail, .. } => detail,
                Verdict::Inconsistent { detail, .. } => format!("inconsistent: {detail}"),
            })
            .collect()
    }

    // Harness "no split brain": iad writes until its fence, pdx from its promotion, a write
    // sent into iad's last moments and acknowledged just before the fence: all inside.
    #[test]
    fn a_correct_failover_history_passes() {
        let mut history = failover_history();
        for t in (100..19_000).step_by(50) {
            history.on_ack(write(IAD, t, t));
        }
        history.on_ack(write(IAD, 19_000, 19_900));
        for t in (20_600..40_000).step_by(50) {
            history.on_ack(write(PDX, t, t));
        }
        assert_eq!(split_brains(&history), Vec::<String>::new());
        let (epochs, _) = history.epochs();
        assert_eq!(epochs.len(), 2);
        assert_eq!(epochs[0].end, Some(SimTime(20_250)));
        assert_eq!(epochs[1].start, SimTime(20_250));
    }

    // Harness "no split brain", epochs: an acknowledged write on iad after its epoch ended
    // (a demoted site writing again, with no pdx write overlapping it) is split brain.
    #[test]
    fn a_write_after_the_epoch_is_split_brain() {
        let mut history = failover_history();
        history.on_ack(write(IAD, 1_000, 1_000));
        history.on_ack(write(PDX, 21_000, 21_000));
        history.on_ack(write(IAD, 30_000, 30_000));
        let found = split_brains(&history);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("outside every iad authority epoch"),
            "{found:?}"
        );
    }

    // Harness "no split brain", overlap (scenario 028): a write sent into iad's freeze before
    // the failover and acknowledged at its thaw after pdx's first write intersects iad's epoch
    // but overlaps pdx's write.
    #[test]
    fn a_write_acknowledged_across_the_promotion_overlaps_the_new_sites() {
        let mut history = failover_history();
        history.on_ack(write(PDX, 21_000, 21_000));
        history.on_ack(write(IAD, 15_000, 25_000));
        let found = split_brains(&history);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("iad acknowledged a write in [  15.000,   25.000] while pdx"),
            "{found:?}"
        );
    }

    // Harness "no split brain", consistency: an active-site change with no observed failover
    // is reported, and its epochs fall back to the snapshots around it.
    #[test]
    fn an_unexplained_change_of_the_active_site_is_inconsistent() {
        let mut history = AuthorityHistory::new(vec!["iad", "pdx", "reader"], 250);
        history.on_status(SimTime(0), Some(IAD), 1, None);
        history.on_status(SimTime(2_000), Some(IAD), 1, None);
        history.on_status(SimTime(4_000), Some(PDX), 1, None);
        let found = split_brains(&history);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|f| f.starts_with("inconsistent")));
        let (epochs, _) = history.epochs();
        assert_eq!(epochs[0].end, Some(SimTime(4_000)));
        assert_eq!(epochs[1].start, SimTime(2_000));
    }
}
