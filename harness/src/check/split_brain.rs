//! No split brain, judged from what the harness observed itself
//! (docs/design/harness.md#history-and-checkers), never from the operator's word.
//!
//! **Observations, per site.** Acknowledgements: the workload's writes, each attributed to
//! the site whose `@@hostname` answered, and the site probes' canaries acknowledged
//! ([`Op::SiteProbe`], attributed the same way), each with its [invoke, completion] interval.
//! Denials: site probes that saw the site not accepting writes ([`Op::is_denial`]: the canary
//! refused for read_only, `@@read_only` = 1, or the site unreachable), with theirs.
//!
//! **Epochs.** The acknowledgements sorted by completion; an epoch is a maximal run of
//! consecutive acknowledgements on one site. Its span starts at the earliest invoke among them;
//! it ends at the invoke of the first denial seen on that site that completed after the
//! epoch's last acknowledgement ("a site's epoch ends at the first refusal or loss of
//! reachability observed on it"); without one it never ends.
//!
//! **Rules.**
//! 1. *Handover* ([`handover_findings`]): of two consecutive epochs A then B, A's end must come
//!    before B's first acknowledgement completed: A was seen to stop before B was seen to
//!    accept.
//! 2. *Inside another's epoch* ([`inside_findings`]): no acknowledgement on a site may overlap
//!    another site's epoch span: this covers alternation (iad, pdx, then iad again while pdx's
//!    epoch is open). The pairwise rule stays beside it ([`overlap_findings`]): two
//!    acknowledgements of different sites with overlapping intervals mean both sites may have
//!    been writable at once; that is sound for a correct system because the workload's client
//!    timeout is shorter than a failover (the lease wait alone is at least the lease duration).
//! 3. *Unknown outcome* ([`unknown_outcome_findings`]): a write whose outcome is unknown (a
//!    writer's `info`, a canary's `info`, or never completed) that the final read found
//!    committed on site S ([`Op::FinalState`]'s `committed` and `canaries`, from each row's
//!    `site` column) must not have been invoked after the end of S's last epoch that began
//!    before it, when another site's epoch began after that end and S had no later epoch.
//!
//! The group's status only keeps its structural checks ([`authority_epochs`]): each change of
//! the active site is an observed failover with a new topologyGeneration, and the generation
//! never goes back. A history without site probes (recorded before they existed, or by a
//! backend that does not probe) is judged as before, from the operator's authority epochs
//! (`fencedAt` widened by [`CROSS_CLOCK_SLACK_NS`]), and its summary says so.

use std::collections::{BTreeMap, BTreeSet};

use super::observed::{failover_label, mono_ns, observed_failovers, seconds, CROSS_CLOCK_SLACK_NS};
use super::verdict::Verdict;
use crate::history::event::{
    EventType, FailoverRecord, FaultPhase, Op, ProbeOutcome, ER_READ_ONLY,
};
use crate::history::store::History;
use crate::scenario::model::Site;

/// The checker's name.
const NAME: &str = "no-split-brain";

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
    Observations::of(history).map(|observations| writes_of(&observations))
}

/// The workload's acknowledged writes among `observations`, by invoke time, and the ids of
/// those that named no site.
fn writes_of(observations: &Observations) -> (Vec<AcknowledgedWrite>, Vec<u64>) {
    let mut writes: Vec<AcknowledgedWrite> = observations
        .acknowledgements
        .iter()
        .filter_map(|ack| match ack.what {
            Written::Write(id) => Some(AcknowledgedWrite {
                id,
                site: ack.site,
                start_ns: ack.start_ns,
                end_ns: ack.end_ns,
            }),
            Written::Canary(_) => None,
        })
        .collect();
    writes.sort_by_key(|write| (write.start_ns, write.end_ns, write.id));
    let unattributed = observations
        .unattributed
        .iter()
        .filter_map(|what| match what {
            Written::Write(id) => Some(*id),
            Written::Canary(_) => None,
        })
        .collect();
    (writes, unattributed)
}

/// The ids of the workload's writes whose outcome is unknown (`info`, or never completed):
/// the final read records where those committed.
pub fn unknown_outcome_write_ids(history: &History) -> BTreeSet<u64> {
    Observations::of(history)
        .map(|observations| {
            observations
                .unknown
                .iter()
                .filter_map(|unknown| match unknown.what {
                    Written::Write(id) => Some(id),
                    Written::Canary(_) => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What was written: a workload write or a site probe's canary, by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Written {
    /// A writer's write.
    Write(u64),
    /// A site probe's canary.
    Canary(u64),
}

impl std::fmt::Display for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Written::Write(id) => write!(f, "write {id}"),
            Written::Canary(id) => write!(f, "canary {id}"),
        }
    }
}

/// A write or canary a site acknowledged, with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acknowledgement {
    /// What.
    pub what: Written,
    /// The site whose `@@hostname` answered.
    pub site: Site,
    /// Invoke (monotonic ns).
    pub start_ns: u64,
    /// Completion (monotonic ns).
    pub end_ns: u64,
}

/// A site probe that saw its site not accepting writes, with its interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The site.
    pub site: Site,
    /// Invoke (monotonic ns).
    pub start_ns: u64,
    /// Completion (monotonic ns).
    pub end_ns: u64,
    /// What was seen: `unreachable`, `refused (1290)`, `read_only=1`.
    pub seen: &'static str,
}

/// A write or canary of unknown outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unknown {
    /// What.
    pub what: Written,
    /// Invoke (monotonic ns).
    pub start_ns: u64,
}

/// What the workload and the site probes observed, and where the final read found rows.
#[derive(Debug, Clone, Default)]
pub struct Observations {
    /// Every acknowledgement attributed to a site.
    pub acknowledgements: Vec<Acknowledgement>,
    /// Acknowledgements that named no site.
    pub unattributed: Vec<Written>,
    /// Denials by site, in time order.
    pub denials: BTreeMap<Site, Vec<Denial>>,
    /// Writes and canaries of unknown outcome.
    pub unknown: Vec<Unknown>,
    /// Site probes made (invokes), by site.
    pub probes: BTreeMap<Site, usize>,
    /// The committing site of writes of unknown outcome, from the final read.
    pub committed: BTreeMap<u64, Site>,
    /// The committing site of canary rows, from the final read.
    pub canaries: BTreeMap<u64, Site>,
    /// Canaries a site acknowledged while the scenario itself had made it writable by hand
    /// (`set-read-only` with `value: false`, 012 and 013), from the fault until the first
    /// denial the probes saw on it, at most [`BY_HAND_MAX_NS`]: the fault, not the product,
    /// made them possible, so they are counted, not judged.
    pub by_hand: Vec<Acknowledgement>,
}

/// How long after a scenario made a site writable by hand its canaries are attributed to the
/// fault: longer, and they are judged as any acknowledgement (a site left writable).
pub const BY_HAND_MAX_NS: u64 = 10_000_000_000;

/// The windows in which the scenario had made a site writable by hand: from each
/// `set-read-only` fault with `value: false` to the first denial the probes saw on that site
/// after it (at most [`BY_HAND_MAX_NS`]).
fn writable_by_hand(
    history: &History,
    denials: &BTreeMap<Site, Vec<Denial>>,
) -> Vec<(Site, u64, u64)> {
    let mut windows = Vec::new();
    for event in &history.events {
        let Op::Fault {
            name,
            phase: FaultPhase::Start,
            detail,
            sites,
        } = &event.op
        else {
            continue;
        };
        if name != "set-read-only" || !detail.replace(' ', "").contains("\"value\":false") {
            continue;
        }
        for site in sites {
            let limit = event.mono_ns.saturating_add(BY_HAND_MAX_NS);
            let end = denials
                .get(site)
                .and_then(|seen| seen.iter().find(|denial| denial.start_ns >= event.mono_ns))
                .map_or(limit, |denial| denial.start_ns.min(limit));
            windows.push((*site, event.mono_ns, end));
        }
    }
    windows
}

/// What a denial saw, for messages (`None`: not a denial).
fn denial_seen(op: &Op) -> Option<&'static str> {
    let Op::SiteProbe {
        outcome: Some(outcome),
        read_only,
        error_code,
        ..
    } = op
    else {
        return None;
    };
    if !op.is_denial() {
        return None;
    }
    Some(
        match (outcome, *error_code == Some(ER_READ_ONLY), read_only) {
            (ProbeOutcome::Unreachable, _, _) => "unreachable",
            (_, true, _) => "refused (1290)",
            (_, false, _) => "read_only=1",
        },
    )
}

impl Observations {
    /// Gathers the observations of `history` (an error names a malformed pairing).
    pub fn of(history: &History) -> Result<Self, String> {
        let mut found = Observations::default();
        for operation in history.operations()? {
            let start_ns = operation.invoke.mono_ns;
            let completion = operation.completion;
            let acknowledged = operation.outcome() == EventType::Ok;
            let unknown = operation.outcome() == EventType::Info;
            match &operation.invoke.op {
                Op::Write { id, .. } => {
                    let what = Written::Write(*id);
                    let site = completion.and_then(|event| match event.op {
                        Op::Write { site, .. } => site,
                        _ => None,
                    });
                    found.take(
                        what,
                        site,
                        start_ns,
                        completion.map(|c| c.mono_ns),
                        acknowledged,
                        unknown,
                    );
                }
                Op::SiteProbe {
                    site, canary_id, ..
                } => {
                    *found.probes.entry(*site).or_default() += 1;
                    let what = Written::Canary(*canary_id);
                    let answered = completion.and_then(|event| match event.op {
                        Op::SiteProbe { answered, .. } => answered,
                        _ => None,
                    });
                    found.take(
                        what,
                        answered,
                        start_ns,
                        completion.map(|c| c.mono_ns),
                        acknowledged,
                        unknown,
                    );
                    if let Some((event, seen)) =
                        completion.and_then(|event| Some((event, denial_seen(&event.op)?)))
                    {
                        found
                            .denials
                            .entry(answered.unwrap_or(*site))
                            .or_default()
                            .push(Denial {
                                site: answered.unwrap_or(*site),
                                start_ns,
                                end_ns: event.mono_ns,
                                seen,
                            });
                    }
                }
                _ => {}
            }
        }
        for denials in found.denials.values_mut() {
            denials.sort_by_key(|denial| (denial.end_ns, denial.start_ns));
        }
        if let Some((committed, canaries)) = final_committers(history) {
            found.committed = committed;
            found.canaries = canaries;
        }
        let windows = writable_by_hand(history, &found.denials);
        let (by_hand, judged) = std::mem::take(&mut found.acknowledgements)
            .into_iter()
            .partition(|ack| {
                matches!(ack.what, Written::Canary(_))
                    && windows.iter().any(|(site, start, end)| {
                        ack.site == *site && ack.start_ns >= *start && ack.end_ns <= *end
                    })
            });
        found.acknowledgements = judged;
        found.by_hand = by_hand;
        Ok(found)
    }

    /// Files one write or canary by its outcome.
    fn take(
        &mut self,
        what: Written,
        site: Option<Site>,
        start_ns: u64,
        end_ns: Option<u64>,
        acknowledged: bool,
        unknown: bool,
    ) {
        if acknowledged {
            match (site, end_ns) {
                (Some(site), Some(end_ns)) => self.acknowledgements.push(Acknowledgement {
                    what,
                    site,
                    start_ns,
                    end_ns,
                }),
                (None, _) | (_, None) => self.unattributed.push(what),
            }
        } else if unknown {
            self.unknown.push(Unknown { what, start_ns });
        }
    }

    /// Whether the history holds site probes at all.
    pub fn probed(&self) -> bool {
        !self.probes.is_empty()
    }
}

/// The committing sites the last successful final read recorded.
fn final_committers(history: &History) -> Option<(BTreeMap<u64, Site>, BTreeMap<u64, Site>)> {
    history
        .events
        .iter()
        .rev()
        .find_map(|event| match &event.op {
            Op::FinalState {
                committed,
                canaries,
                ..
            } if event.kind == EventType::Ok => Some((committed.clone(), canaries.clone())),
            _ => None,
        })
}

/// A site's epoch as observed: a maximal run of consecutive acknowledgements on it (by
/// completion), and the denial that ended it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedEpoch {
    /// The site.
    pub site: Site,
    /// Its first acknowledgement (by completion).
    pub first: Acknowledgement,
    /// Its last acknowledgement (by completion).
    pub last: Acknowledgement,
    /// The earliest invoke among its acknowledgements: where its span starts.
    pub start_ns: u64,
    /// How many acknowledgements it holds.
    pub count: usize,
    /// The first denial seen on the site that completed after `last` (`None`: none was).
    pub ended_by: Option<Denial>,
}

impl ObservedEpoch {
    /// Where the span ends: the ending denial's invoke (`None`: never seen to end).
    pub fn end_ns(&self) -> Option<u64> {
        self.ended_by.as_ref().map(|denial| denial.start_ns)
    }

    /// `[start, end]` for messages.
    fn span(&self) -> String {
        match self.end_ns() {
            Some(end) => format!("[{:.3}s, {:.3}s]", seconds(self.start_ns), seconds(end)),
            None => format!("[{:.3}s, never seen to end]", seconds(self.start_ns)),
        }
    }
}

/// The observed epochs, in order.
pub fn observed_epochs(observations: &Observations) -> Vec<ObservedEpoch> {
    let mut acknowledgements = observations.acknowledgements.clone();
    acknowledgements.sort_by_key(|ack| (ack.end_ns, ack.start_ns, ack.what));
    let mut epochs: Vec<ObservedEpoch> = Vec::new();
    for ack in acknowledgements {
        match epochs.last_mut() {
            Some(epoch) if epoch.site == ack.site => {
                epoch.last = ack;
                epoch.start_ns = epoch.start_ns.min(ack.start_ns);
                epoch.count += 1;
            }
            _ => epochs.push(ObservedEpoch {
                site: ack.site,
                first: ack,
                last: ack,
                start_ns: ack.start_ns,
                count: 1,
                ended_by: None,
            }),
        }
    }
    for epoch in &mut epochs {
        epoch.ended_by = observations.denials.get(&epoch.site).and_then(|denials| {
            denials
                .iter()
                .find(|denial| denial.end_ns > epoch.last.end_ns)
                .cloned()
        });
    }
    epochs
}

/// Rule 1: of consecutive epochs A then B, A's end came before B's first acknowledgement
/// completed.
pub fn handover_findings(epochs: &[ObservedEpoch]) -> Vec<String> {
    epochs
        .windows(2)
        .filter_map(|pair| {
            let (before, after) = (&pair[0], &pair[1]);
            if before
                .end_ns()
                .is_some_and(|end| end < after.first.end_ns)
            {
                return None;
            }
            let refusal = match &before.ended_by {
                Some(denial) => format!(
                    "first refusal at {:.3}s: {}",
                    seconds(denial.start_ns),
                    denial.seen
                ),
                None => "first refusal: none".to_owned(),
            };
            Some(format!(
                "{} was not observed to stop accepting writes (last ack {} at {:.3}s, {refusal}) before {} acknowledged {} at {:.3}s",
                before.site,
                before.last.what,
                seconds(before.last.end_ns),
                after.site,
                after.first.what,
                seconds(after.first.end_ns),
            ))
        })
        .collect()
}

/// Rule 2: no acknowledgement overlaps another site's epoch span.
pub fn inside_findings(
    acknowledgements: &[Acknowledgement],
    epochs: &[ObservedEpoch],
) -> Vec<String> {
    let mut findings = Vec::new();
    for ack in acknowledgements {
        for epoch in epochs.iter().filter(|epoch| epoch.site != ack.site) {
            let end = epoch.end_ns().unwrap_or(u64::MAX);
            if ack.start_ns <= end && ack.end_ns >= epoch.start_ns {
                findings.push(format!(
                    "{} acknowledged {} in [{:.3}s, {:.3}s] inside {}'s epoch {} ({} acknowledgements, {} to {})",
                    ack.site,
                    ack.what,
                    seconds(ack.start_ns),
                    seconds(ack.end_ns),
                    epoch.site,
                    epoch.span(),
                    epoch.count,
                    epoch.first.what,
                    epoch.last.what,
                ));
            }
        }
    }
    findings
}

/// The pairwise rule: two acknowledgements of different sites with overlapping intervals.
pub fn overlap_findings(acknowledgements: &[Acknowledgement]) -> Vec<String> {
    let mut sorted = acknowledgements.to_vec();
    sorted.sort_by_key(|ack| (ack.start_ns, ack.end_ns, ack.what));
    let mut findings = Vec::new();
    // Per site, the acknowledgement (so far, by invoke order) that completed last.
    let mut latest: BTreeMap<Site, Acknowledgement> = BTreeMap::new();
    for ack in &sorted {
        for (site, other) in &latest {
            if *site != ack.site && other.end_ns > ack.start_ns {
                findings.push(format!(
                    "{} acknowledged {} in [{:.3}s, {:.3}s] while {} acknowledged {} in [{:.3}s, {:.3}s]",
                    other.site,
                    other.what,
                    seconds(other.start_ns),
                    seconds(other.end_ns),
                    ack.site,
                    ack.what,
                    seconds(ack.start_ns),
                    seconds(ack.end_ns),
                ));
            }
        }
        let slot = latest.entry(ack.site).or_insert(*ack);
        if ack.end_ns >= slot.end_ns {
            *slot = *ack;
        }
    }
    findings
}

/// Rule 3: a write of unknown outcome found committed on a site after that site's epoch ended,
/// once another site's epoch had begun and with no later epoch of its own.
pub fn unknown_outcome_findings(
    observations: &Observations,
    epochs: &[ObservedEpoch],
) -> Vec<String> {
    let mut findings = Vec::new();
    for unknown in &observations.unknown {
        let committer = match unknown.what {
            Written::Write(id) => observations.committed.get(&id),
            Written::Canary(id) => observations.canaries.get(&id),
        };
        let Some(&site) = committer else {
            continue;
        };
        // S's last epoch that began before the invoke.
        let Some((index, epoch)) = epochs
            .iter()
            .enumerate()
            .rev()
            .find(|(_, epoch)| epoch.site == site && epoch.start_ns < unknown.start_ns)
        else {
            continue;
        };
        let Some(end) = epoch.end_ns().filter(|end| *end < unknown.start_ns) else {
            continue;
        };
        let later = &epochs[index + 1..];
        if later.iter().any(|epoch| epoch.site == site) {
            continue;
        }
        let Some(next) = later
            .iter()
            .find(|epoch| epoch.site != site && epoch.start_ns > end)
        else {
            continue;
        };
        findings.push(format!(
            "{} of unknown outcome, invoked at {:.3}s after {site}'s epoch ended at {:.3}s, was found committed on {site} ({} acknowledged from {:.3}s)",
            unknown.what,
            seconds(unknown.start_ns),
            seconds(end),
            next.site,
            seconds(next.first.end_ns),
        ));
    }
    findings
}

/// Runs the checker.
pub fn check_split_brain(history: &History) -> Verdict {
    let observations = match Observations::of(history) {
        Ok(found) => found,
        Err(malformed) => {
            return Verdict::from_findings(
                NAME,
                String::new(),
                vec![format!("malformed history: {malformed}")],
            )
        }
    };
    if observations.probed() {
        judge_observed(history, &observations)
    } else {
        judge_by_status(history, &observations)
    }
}

/// The judgement from the harness's own observations (the history has site probes).
fn judge_observed(history: &History, observations: &Observations) -> Verdict {
    let epochs = observed_epochs(observations);
    let mut findings = handover_findings(&epochs);
    findings.extend(inside_findings(&observations.acknowledgements, &epochs));
    findings.extend(unknown_outcome_findings(observations, &epochs));
    findings.extend(overlap_findings(&observations.acknowledgements));
    findings.extend(authority_epochs(history).1);
    findings.extend(
        observations
            .unattributed
            .iter()
            .map(|what| format!("{what} was acknowledged without naming its site")),
    );
    Verdict::from_findings(NAME, observed_summary(observations, &epochs), findings)
}

/// What the observed judgement judged.
fn observed_summary(observations: &Observations, epochs: &[ObservedEpoch]) -> String {
    let acknowledgements = &observations.acknowledgements;
    let canaries = acknowledgements
        .iter()
        .filter(|ack| matches!(ack.what, Written::Canary(_)))
        .count();
    let sites: BTreeSet<Site> = acknowledgements.iter().map(|ack| ack.site).collect();
    let handovers = match epochs.len() {
        0 | 1 => "no handover".to_owned(),
        _ => "each observed ending before the next began".to_owned(),
    };
    let denials: usize = observations.denials.values().map(Vec::len).sum();
    let probes: usize = observations.probes.values().sum();
    let committed = observations
        .unknown
        .iter()
        .filter(|unknown| match unknown.what {
            Written::Write(id) => observations.committed.contains_key(&id),
            Written::Canary(id) => observations.canaries.contains_key(&id),
        })
        .count();
    let by_hand = match observations.by_hand.len() {
        0 => String::new(),
        n => format!(
            "; {n} canaries acknowledged by a site the scenario had made writable by hand (set-read-only), counted, not judged"
        ),
    };
    format!(
        "{} acknowledgements ({} writes, {canaries} canaries) on {} sites in {} epochs, {handovers}; {denials} denials in {probes} site probes; {} of unknown outcome, {committed} found committed, none after its site's epoch{by_hand}",
        acknowledgements.len(),
        acknowledgements.len() - canaries,
        sites.len(),
        epochs.len(),
        observations.unknown.len(),
    )
}

/// The judgement of a history without site probes: the operator's authority epochs decide, as
/// before the probes existed, and the summary says so.
fn judge_by_status(history: &History, observations: &Observations) -> Verdict {
    let (writes, unattributed) = writes_of(observations);
    let mut findings: Vec<String> = unattributed
        .iter()
        .map(|id| format!("write {id} was acknowledged without naming its site"))
        .collect();
    findings.extend(overlap_findings(&observations.acknowledgements));
    findings.extend(check_epochs(history, &writes, unattributed.len()));
    let sites = writes
        .iter()
        .map(|write| write.site)
        .collect::<BTreeSet<_>>()
        .iter()
        .map(|site| site.name())
        .collect::<Vec<_>>()
        .join(", ");
    Verdict::from_findings(
        NAME,
        format!(
            "{} acknowledged writes, sites [{sites}] never overlapped, each inside its authority epoch; no site probes in this history, so the epochs are the operator's status (fencedAt + {} s slack), not observed",
            writes.len(),
            CROSS_CLOCK_SLACK_NS / 1_000_000_000,
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

/// The status snapshots' runs of one active site and generation.
fn status_runs(history: &History) -> Vec<Run> {
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
    runs
}

/// The authority epochs the status snapshots show, and the findings about how they changed
/// (the structural checks: each change of the active site is an observed failover from the
/// old to the new site with a new topologyGeneration, every observed failover shows as a
/// change, and the generation never goes back).
pub fn authority_epochs(history: &History) -> (Vec<Epoch>, Vec<String>) {
    let mut findings = Vec::new();
    let runs = status_runs(history);
    let to_mono = |time: Option<jiff::Timestamp>| mono_ns(history, time);
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
    findings.extend(
        unmatched
            .into_iter()
            .map(|record| unshown_failover(record, promoted(record))),
    );
    (epochs, findings)
}

/// The finding of an observed failover (promoted at `promoted_ns`) that the status never showed
/// as a change of the active site.
fn unshown_failover(record: &FailoverRecord, promoted_ns: u64) -> String {
    format!(
        "{} (promoted at {:.3}s) but the status never showed {} active after {}",
        failover_label(record),
        seconds(promoted_ns),
        record.to,
        record.from
    )
}

/// Every acknowledged write must intersect an authority epoch of its site (the judgement of a
/// history without site probes).
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
