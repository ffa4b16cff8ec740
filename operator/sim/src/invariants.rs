//! The invariants checked at every step of a run, each violation a [`Finding`] of a
//! [`FindingClass`].
//!
//! The checker keeps its own ground truth (which writes were acknowledged, which site wrote last
//! and what it held, when authority truly moved); it never trusts the operator's memory, which a
//! restart may lose.

use crate::clock::SimTime;
use crate::epochs::{AckedWrite, AuthorityHistory, FailoverTimes, Verdict};
use crate::gtid::{Txn, TxnSet};
use std::collections::BTreeMap;
use std::fmt;

/// A kind of invariant violation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FindingClass {
    /// Split brain as the harness judges it: an acknowledged write outside its site's
    /// authority epoch (from the published status), or two sites' acknowledged writes in
    /// overlapping intervals.
    SplitBrain,
    /// The same (or its effects: two writers at one instant, a loss), where a site involved
    /// had its mysqld frozen with its sidecar down or hung shortly before: the double fault
    /// nothing in the pod can fence (the write deadline runs inside the frozen process, the
    /// watchdog inside the dead or hung one), while its kubelet could reach the API server.
    /// Not inherent: the operator has that kubelet kill the pod before promoting
    /// (`core::engine::agentless`); a finding here is a bug of that rule.
    SplitBrainFrozenAgentless,
    /// The same, where the frozen, agentless site's kubelet was also cut from the API server
    /// at some instant of the freeze: no agent in the pod and none outside it can act, and the
    /// lease rule promotes on the lease (a node cut from the control plane looks exactly like
    /// a partitioned one, whose live sidecar fences it). Inherent to a design whose agents are
    /// the sidecar, mysqld and the kubelet; closing it takes a node watchdog (Patroni's
    /// softdog) or semi-synchronous replication without fallback.
    SplitBrainFrozenAgentlessNodeCut,
    /// Two sites accepted writes at the same instant (mysqld answering, `read_only` off),
    /// whether or not a client wrote.
    TwoWritable,
    /// The published status does not explain how authority moved: an active-site change with
    /// no observed failover or no new generation, a generation going back, or a failover
    /// that never showed (the harness's epoch checks).
    AuthorityUnexplained,
    /// Acknowledged writes were lost by something other than an emergency failover.
    UnexplainedLoss,
    /// `lastFailover.lostTransactions` disagrees with the transactions really lost: more than
    /// lost while `exact=false` (it must be a lower bound), or different once `exact=true`.
    LostMismatch,
    /// A promotion inside the cooldown while a persisted copy of it survived.
    CooldownViolated,
    /// A promotion inside the cooldown after a restart lost both persisted copies
    /// (docs/design/requirements.md R001.10): understood, bounded by the GTID gates, accepted.
    CooldownViolatedRestartStateLost,
    /// After a poll that moved authority, DNS still (or again) targets a non-active site.
    DnsStale,
    /// A live failover-hold changed what an emergency failover would have done.
    HoldDelayedEmergency,
    /// A deploy lease granted under an older topologyGeneration was renewed successfully.
    LeaseNotRevoked,
    /// The world healed and stayed healed, yet no site was writable within the bound.
    NoWritableAfterHeal,
    /// One decision names two different authorities, or labels two pods primary
    /// (docs/design/style.md#4-assertions-for-invariants-result-for-the-world: "two primaries
    /// in one Decision").
    ConflictingDecision,
    /// A restore in place fenced the active site while a failover-hold was live
    /// (docs/design/requirements.md R003.17: it defers behind the hold as a planned failover
    /// does).
    RestoreIgnoredHold,
    /// What a restore discarded differs from what `status.restore` records
    /// (`lostTransactions`, `lostGtidSet`, `exact`).
    RestoreLossMismatch,
    /// An ordered update recreated a site while the one it recreated before was not back
    /// healthy on the new image, or recreated the active site.
    UpdateNotOneAtATime,
    /// A decision started a recreation or a planned failover under a live failover-hold.
    UpdateIgnoredHold,
    /// At the end of the run a healthy group still runs another image than `spec.image`.
    UpdateIncomplete,
    /// An emergency promotion made a site writable without acknowledged writes that site had
    /// itself received since the previous promotion and discarded unapplied (a repoint's
    /// `CHANGE MASTER` deleting its relay log): a loss no dead primary forced.
    RelayDiscarded,
    /// An acknowledged write left every site (executed or in a relay log) without being in
    /// an archive (docs/design/operator.md#returning-primary: "No transaction is thrown away
    /// unless an archive names it"): a write an emergency failover lost, then discarded by a
    /// rejoin's re-seed, must be in the errant set that site's archive holds. What a restore
    /// in place discarded on request is not counted (`RestoreLossMismatch` judges it).
    DiscardedUnarchived,
    /// A site holding errant transactions (transactions the active site lacks) was promoted
    /// by an emergency or planned failover (the candidate or target held transactions the
    /// site it replaced lacked), or was labelled `role=primary`, or `role=replica` healthy
    /// (in a shared Service), while another site was active
    /// (docs/design/operator.md#returning-primary: only a site without errant transactions may
    /// rejoin as a replica).
    ErrantSiteUsed,
    /// A rejoin's archive or re-seed was asked of, or ran on, a site that was or might be
    /// writable: `read_only` off, or its sidecar holding an authority naming it with a lease
    /// that counts (docs/design/operator.md#returning-primary: archived under an explicit
    /// fence with mysqld read-only; the active site is never re-seeded).
    RejoinOnWritable,
    /// The run panicked (an assertion of core's, such as two authorities in one decision, or
    /// of the simulator's): the seed's run ends there, the sweep goes on with the others.
    Panicked,
}

impl FindingClass {
    /// Every class, in table order.
    pub const ALL: [FindingClass; 24] = [
        FindingClass::SplitBrain,
        FindingClass::SplitBrainFrozenAgentless,
        FindingClass::SplitBrainFrozenAgentlessNodeCut,
        FindingClass::TwoWritable,
        FindingClass::AuthorityUnexplained,
        FindingClass::UnexplainedLoss,
        FindingClass::LostMismatch,
        FindingClass::CooldownViolated,
        FindingClass::CooldownViolatedRestartStateLost,
        FindingClass::DnsStale,
        FindingClass::HoldDelayedEmergency,
        FindingClass::LeaseNotRevoked,
        FindingClass::NoWritableAfterHeal,
        FindingClass::ConflictingDecision,
        FindingClass::RestoreIgnoredHold,
        FindingClass::RestoreLossMismatch,
        FindingClass::UpdateNotOneAtATime,
        FindingClass::UpdateIgnoredHold,
        FindingClass::UpdateIncomplete,
        FindingClass::RelayDiscarded,
        FindingClass::DiscardedUnarchived,
        FindingClass::ErrantSiteUsed,
        FindingClass::RejoinOnWritable,
        FindingClass::Panicked,
    ];

    /// Whether the class is an accepted property of the design rather than a bug: only where
    /// no system could avoid it. `CooldownViolated(restart+stateLost)` is that of
    /// docs/design/requirements.md R001.10: with both persisted copies lost, nothing remembers
    /// the cooldown.
    pub fn is_inherent(self) -> bool {
        match self {
            FindingClass::CooldownViolatedRestartStateLost
            | FindingClass::SplitBrainFrozenAgentlessNodeCut => true,
            FindingClass::SplitBrain
            | FindingClass::SplitBrainFrozenAgentless
            | FindingClass::TwoWritable
            | FindingClass::AuthorityUnexplained
            | FindingClass::UnexplainedLoss
            | FindingClass::LostMismatch
            | FindingClass::CooldownViolated
            | FindingClass::DnsStale
            | FindingClass::HoldDelayedEmergency
            | FindingClass::LeaseNotRevoked
            | FindingClass::NoWritableAfterHeal
            | FindingClass::ConflictingDecision
            | FindingClass::RestoreIgnoredHold
            | FindingClass::RestoreLossMismatch
            | FindingClass::UpdateNotOneAtATime
            | FindingClass::UpdateIgnoredHold
            | FindingClass::UpdateIncomplete
            | FindingClass::RelayDiscarded
            | FindingClass::DiscardedUnarchived
            | FindingClass::ErrantSiteUsed
            | FindingClass::RejoinOnWritable
            | FindingClass::Panicked => false,
        }
    }

    /// The class's name as the table prints it.
    pub fn name(self) -> &'static str {
        match self {
            FindingClass::SplitBrain => "SplitBrain",
            FindingClass::SplitBrainFrozenAgentless => "SplitBrain(frozen+agentless)",
            FindingClass::SplitBrainFrozenAgentlessNodeCut => {
                "SplitBrain(frozen+agentless+nodeCut)"
            }
            FindingClass::TwoWritable => "TwoWritable",
            FindingClass::AuthorityUnexplained => "AuthorityUnexplained",
            FindingClass::UnexplainedLoss => "UnexplainedLoss",
            FindingClass::LostMismatch => "LostMismatch",
            FindingClass::CooldownViolated => "CooldownViolated",
            FindingClass::CooldownViolatedRestartStateLost => "CooldownViolated(restart+stateLost)",
            FindingClass::DnsStale => "DnsStale",
            FindingClass::HoldDelayedEmergency => "HoldDelayedEmergency",
            FindingClass::LeaseNotRevoked => "LeaseNotRevoked",
            FindingClass::NoWritableAfterHeal => "NoWritableAfterHeal",
            FindingClass::ConflictingDecision => "ConflictingDecision",
            FindingClass::RestoreIgnoredHold => "RestoreIgnoredHold",
            FindingClass::RestoreLossMismatch => "RestoreLossMismatch",
            FindingClass::UpdateNotOneAtATime => "UpdateNotOneAtATime",
            FindingClass::UpdateIgnoredHold => "UpdateIgnoredHold",
            FindingClass::UpdateIncomplete => "UpdateIncomplete",
            FindingClass::RelayDiscarded => "RelayDiscarded",
            FindingClass::DiscardedUnarchived => "DiscardedUnarchived",
            FindingClass::ErrantSiteUsed => "ErrantSiteUsed",
            FindingClass::RejoinOnWritable => "RejoinOnWritable",
            FindingClass::Panicked => "Panicked",
        }
    }
}

impl fmt::Display for FindingClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One invariant violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What was violated.
    pub class: FindingClass,
    /// When.
    pub at: SimTime,
    /// What the checker saw.
    pub detail: String,
}

/// How an authority move to another site was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromotionKind {
    /// After the active site failed (`Promoted` with `lastFailover.kind: emergency`).
    Emergency,
    /// Requested switchover (`Promoted` with `lastFailover.kind: planned`).
    Planned,
    /// Any other move of the authority to another site (for example a planned failover's
    /// abort re-asserting its old site). It may never lose acknowledged writes.
    Other,
}

/// Ground truth of one emergency failover's loss, to compare with what the operator reports.
#[derive(Debug, Clone)]
struct LossTruth {
    from: usize,
    to: usize,
    /// When the move was decided (true time).
    promoted_at: SimTime,
    /// What this move lost that no earlier move had lost.
    lost: TxnSet,
    /// Everything of the old writer missing on the new one, including what an earlier move
    /// lost (the literal `old - new` of docs/design/operator.md#emergency-failover).
    literal: TxnSet,
    checked_exact: bool,
}

/// Bound for "a writable site after the world healed": the cooldown, detection, the old lease,
/// its drift margin and a promotion all fit in it with room to spare.
pub const LIVENESS_BOUND_MILLIS: u64 = 90_000;

/// Longest GTID set text quoted in a finding.
pub const DETAIL_GTID_CHARS_MAX: usize = 160;

fn quote_set(set: &TxnSet) -> String {
    let text = set.describe();
    if text.len() <= DETAIL_GTID_CHARS_MAX {
        return text;
    }
    let cut: String = text.chars().take(DETAIL_GTID_CHARS_MAX).collect();
    format!("{cut}...")
}

/// Findings recorded per class beyond which further ones are only counted.
pub const FINDINGS_PER_CLASS_MAX: usize = 4;

/// Cross-clock slack of the authority epochs: the operator's status timestamps are off true
/// time by at most its clock skew.
pub const EPOCH_SLACK_MILLIS: u64 = crate::clock::OPERATOR_SKEW_MILLIS_MAX.unsigned_abs();

/// How long before an offending acknowledgement an agentless freeze of its site still counts
/// as its cause: the longest the operator's lease wait and failover take after the old site's
/// agent stopped (detection, lease plus margin, drain) with room to spare.
pub const AGENTLESS_LOOKBACK_MILLIS: u64 = 90_000;

/// The class of a finding that agentless freezes may explain: none (`None`), one whose
/// kubelet was cut at some instant (inherent), or one whose kubelet could have killed it.
fn agentless_class(spans: &[AgentlessSpan]) -> Option<FindingClass> {
    if spans.is_empty() {
        None
    } else if spans.iter().any(|span| span.kubelet_cut) {
        Some(FindingClass::SplitBrainFrozenAgentlessNodeCut)
    } else {
        Some(FindingClass::SplitBrainFrozenAgentless)
    }
}

/// A span in which a site's mysqld was frozen with no live agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AgentlessSpan {
    start: SimTime,
    end: Option<SimTime>,
    kubelet_cut: bool,
}

/// The invariant checker of one run.
#[derive(Debug)]
pub struct Checker {
    site_names: Vec<&'static str>,
    findings: Vec<Finding>,
    counts: BTreeMap<FindingClass, u64>,
    acked: TxnSet,
    writable: Vec<bool>,
    last_writer: Option<(usize, TxnSet)>,
    latest_promotion: Option<(usize, PromotionKind)>,
    last_promotion_at: Option<SimTime>,
    both_copies_lost_since_promotion: bool,
    pending_truth: Option<LossTruth>,
    split_brain_since_promotion: bool,
    already_lost: TxnSet,
    cooldown_millis: u64,
    cooldown_tolerance_millis: u64,
    history: AuthorityHistory,
    /// Per site, the spans in which its mysqld was frozen with no live agent (sidecar down
    /// or hung), closed or still open, and whether its kubelet was cut from the API server at
    /// some instant of the span.
    agentless_freezes: Vec<Vec<AgentlessSpan>>,
    /// Per site, what a repoint deleted from its relay log unapplied since the last time a
    /// site became writable.
    relay_discarded: Vec<TxnSet>,
    /// Every acknowledged write, less what restores discarded on request (the
    /// `DiscardedUnarchived` truth; [`Checker::acked`] forgets what failovers lost).
    acked_ever: TxnSet,
    /// Every errant set an archive job completed (an archive lives on its site's volume:
    /// neither a re-seed nor a crash removes it).
    archived: TxnSet,
}

impl Checker {
    /// A checker for sites named `site_names` and a cooldown of `cooldown_millis`; promotions
    /// earlier than `cooldown_tolerance_millis` before the cooldown's end count as violations
    /// (the tolerance absorbs the operator's bounded clock skew).
    pub fn new(
        site_names: Vec<&'static str>,
        cooldown_millis: u64,
        cooldown_tolerance_millis: u64,
    ) -> Checker {
        let site_count = site_names.len();
        let history = AuthorityHistory::new(site_names.clone(), EPOCH_SLACK_MILLIS);
        Checker {
            site_names,
            findings: Vec::new(),
            counts: BTreeMap::new(),
            acked: TxnSet::new(),
            writable: vec![false; site_count],
            last_writer: None,
            latest_promotion: None,
            last_promotion_at: None,
            both_copies_lost_since_promotion: false,
            pending_truth: None,
            split_brain_since_promotion: false,
            already_lost: TxnSet::new(),
            cooldown_millis,
            cooldown_tolerance_millis,
            history,
            agentless_freezes: vec![Vec::new(); site_count],
            relay_discarded: vec![TxnSet::new(); site_count],
            acked_ever: TxnSet::new(),
            archived: TxnSet::new(),
        }
    }

    /// Records a violation.
    pub fn report(&mut self, class: FindingClass, at: SimTime, detail: String) {
        let count = self.counts.entry(class).or_insert(0);
        *count += 1;
        if *count as usize <= FINDINGS_PER_CLASS_MAX {
            self.findings.push(Finding { class, at, detail });
        }
    }

    /// Every recorded finding, in the order found.
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// How many violations of each class were seen.
    pub fn counts(&self) -> &BTreeMap<FindingClass, u64> {
        &self.counts
    }

    /// A restore in place discarded `discarded` on purpose: those acknowledged writes are
    /// explained (whether the status records exactly them is `RestoreLossMismatch`'s check);
    /// any other acknowledged write missing later is still an `UnexplainedLoss`.
    pub fn explain_restore(&mut self, discarded: &TxnSet) {
        self.acked = self.acked.subtract(discarded);
        self.acked_ever = self.acked_ever.subtract(discarded);
        self.already_lost.union_with(discarded);
        if let Some((_, set)) = self.last_writer.as_mut() {
            *set = set.subtract(discarded);
        }
    }

    /// A repoint of `site` deleted `discarded` from its relay log unapplied.
    pub fn on_relay_discarded(&mut self, site: usize, discarded: &TxnSet) {
        self.relay_discarded[site].union_with(discarded);
    }

    /// An archive job completed: its archive holds the errant set `errant` (and lives on its
    /// site's volume from now on, whatever happens to the site's data).
    pub fn on_archived(&mut self, errant: &TxnSet) {
        self.archived.union_with(errant);
    }

    /// `DiscardedUnarchived`, after something removed data from a site (a re-seed, a restore,
    /// a repoint deleting a relay log): every acknowledged write is still held by some site
    /// (`held`: the union of every site's executed set and relay log) or is in an archive.
    /// `cause` names what removed data. Each write missing is reported once.
    pub fn check_acknowledged_kept(&mut self, now: SimTime, held: &TxnSet, cause: &str) {
        let missing = self.acked_ever.subtract(held).subtract(&self.archived);
        if missing.is_empty() {
            return;
        }
        self.acked_ever = self.acked_ever.subtract(&missing);
        let detail = format!(
            "{} acknowledged writes are held by no site and in no archive after {cause} ({})",
            missing.count(),
            quote_set(&missing)
        );
        self.report(FindingClass::DiscardedUnarchived, now, detail);
    }

    /// `ErrantSiteUsed` for a promotion: `target`, holding `candidate` (executed and relay
    /// log, all of which a promotion applies), was promoted by a failover of `kind` away from
    /// `replaced`, the site of the newest authority, which executed `replaced_executed`. An
    /// emergency candidate or a planned target holds nothing the site it replaces lacks.
    /// Other moves (a restore's re-promotion, an abort, the unvouched rule) are not judged.
    pub fn check_promotion_errant(
        &mut self,
        now: SimTime,
        target: usize,
        kind: PromotionKind,
        candidate: &TxnSet,
        replaced: usize,
        replaced_executed: &TxnSet,
    ) {
        match kind {
            PromotionKind::Emergency | PromotionKind::Planned => {}
            PromotionKind::Other => return,
        }
        let errant = candidate.subtract(replaced_executed);
        if errant.is_empty() {
            return;
        }
        let detail = format!(
            "{kind:?} failover from {} promoted {} holding {} errant transactions ({})",
            self.site_names[replaced],
            self.site_names[target],
            errant.count(),
            quote_set(&errant)
        );
        self.report(FindingClass::ErrantSiteUsed, now, detail);
    }

    /// `ErrantSiteUsed` for a pod label: `site`, labelled `label` (`role=primary`, or
    /// `role=replica` healthy: in a shared Service), executed `executed` while `active`, the
    /// site of the newest authority, executed `active_executed`. A site other than the active
    /// one that serves holds nothing the active site lacks.
    pub fn check_serving_errant(
        &mut self,
        now: SimTime,
        site: usize,
        label: &str,
        executed: &TxnSet,
        active: usize,
        active_executed: &TxnSet,
    ) {
        if site == active {
            return;
        }
        let errant = executed.subtract(active_executed);
        if errant.is_empty() {
            return;
        }
        let detail = format!(
            "{} is labelled {label} holding {} errant transactions against the active site {} ({})",
            self.site_names[site],
            errant.count(),
            self.site_names[active],
            quote_set(&errant)
        );
        self.report(FindingClass::ErrantSiteUsed, now, detail);
    }

    /// `RejoinOnWritable`: a rejoin's `what` (its archive or re-seed, asked for or running) on
    /// `site`, whose mysqld had `read_only` off (`read_only_off`, frozen or not) or whose
    /// sidecar held an authority naming it with a lease that counts (`lease_names_it`).
    pub fn check_rejoin_target(
        &mut self,
        now: SimTime,
        site: usize,
        what: &str,
        read_only_off: bool,
        lease_names_it: bool,
    ) {
        if !read_only_off && !lease_names_it {
            return;
        }
        let why = match (read_only_off, lease_names_it) {
            (true, true) => "read_only off, and its sidecar holds an authority and lease naming it",
            (true, false) => "read_only off",
            (false, _) => "its sidecar holds an authority and lease naming it",
        };
        let detail = format!("{what} on {}: {why}", self.site_names[site]);
        self.report(FindingClass::RejoinOnWritable, now, detail);
    }

    /// A client write sent to `site` at `sent_at` was acknowledged at `acked_at`.
    pub fn on_ack(&mut self, txn: Txn, site: usize, sent_at: SimTime, acked_at: SimTime) {
        self.acked.insert(txn);
        self.acked_ever.insert(txn);
        self.history.on_ack(AckedWrite {
            site,
            sent_at,
            acked_at,
        });
    }

    /// The operator published a status at `now` (see [`AuthorityHistory::on_status`]).
    pub fn on_status(
        &mut self,
        now: SimTime,
        active_site: Option<usize>,
        generation: u64,
        last_failover: Option<FailoverTimes>,
    ) {
        self.history
            .on_status(now, active_site, generation, last_failover);
    }

    /// The store reverted the status (see [`AuthorityHistory::on_store_revert`]).
    pub fn on_store_revert(&mut self) {
        self.history.on_store_revert();
    }

    /// Whether `site`'s mysqld is frozen with no live agent, at `now`, and whether its
    /// kubelet is cut from the API server: opens, marks or closes the span that classifies
    /// split brain on it.
    pub fn on_agentless_freeze(
        &mut self,
        now: SimTime,
        site: usize,
        agentless: bool,
        kubelet_cut: bool,
    ) {
        let spans = &mut self.agentless_freezes[site];
        let open = spans.last().is_some_and(|span| span.end.is_none());
        match (open, agentless) {
            (false, true) => spans.push(AgentlessSpan {
                start: now,
                end: None,
                kubelet_cut,
            }),
            (true, true) => {
                if let Some(last) = spans.last_mut() {
                    last.kubelet_cut |= kubelet_cut;
                }
            }
            (true, false) => {
                if let Some(last) = spans.last_mut() {
                    last.end = Some(now);
                }
            }
            (false, false) => {}
        }
    }

    /// A site's mysqld that was frozen with no live agent resumed with `read_only` off (a thaw
    /// before its sidecar returned): it may commit outside its authority, so what a later
    /// failover lost is no longer defined and is not compared (as after two writers).
    pub fn on_agentless_thaw_writable(&mut self) {
        self.split_brain_since_promotion = true;
        self.pending_truth = None;
    }

    /// `fallback`, or [`FindingClass::SplitBrainFrozenAgentless`] when one of `sites` was
    /// frozen with no live agent within [`AGENTLESS_LOOKBACK_MILLIS`] before `now`: the
    /// instant two-writers check and the loss check then see that split brain's effects.
    fn class_by_cause(
        &self,
        sites: &[usize],
        now: SimTime,
        fallback: FindingClass,
    ) -> FindingClass {
        let since = SimTime(now.as_millis().saturating_sub(AGENTLESS_LOOKBACK_MILLIS));
        let spans: Vec<AgentlessSpan> = sites
            .iter()
            .flat_map(|&site| self.agentless_frozen_within(site, since, now))
            .collect();
        agentless_class(&spans).unwrap_or(fallback)
    }

    /// The spans in which `site`'s mysqld was frozen with no live agent that touch
    /// `from..=to`.
    fn agentless_frozen_within(
        &self,
        site: usize,
        from: SimTime,
        to: SimTime,
    ) -> Vec<AgentlessSpan> {
        self.agentless_freezes[site]
            .iter()
            .filter(|span| span.start <= to && span.end.is_none_or(|end| end >= from))
            .copied()
            .collect()
    }

    /// End of the run: judges the acknowledged writes against the published status as the
    /// harness does, and reports each finding.
    pub fn judge_authority_history(&mut self, now: SimTime) {
        for verdict in self.history.judge() {
            match verdict {
                Verdict::SplitBrain {
                    write,
                    overlapped,
                    detail,
                } => {
                    // A write commits at its acknowledgement; what made it possible is whether
                    // its site was frozen with no agent shortly before (a thaw releases it).
                    let agentless = |checker: &Checker, w: &AckedWrite| {
                        let since = SimTime(
                            w.acked_at
                                .as_millis()
                                .saturating_sub(AGENTLESS_LOOKBACK_MILLIS),
                        );
                        checker.agentless_frozen_within(w.site, since, w.acked_at)
                    };
                    let mut spans = agentless(self, &write);
                    if let Some(other) = overlapped {
                        spans.extend(agentless(self, &other));
                    }
                    let class = agentless_class(&spans).unwrap_or(FindingClass::SplitBrain);
                    self.report(class, write.acked_at, detail);
                }
                Verdict::Inconsistent { at, detail } => {
                    self.report(FindingClass::AuthorityUnexplained, at.min(now), detail);
                }
            }
        }
    }

    /// Acknowledged writes recorded for the split-brain judgement.
    pub fn acked_write_count(&self) -> usize {
        self.history.write_count()
    }

    /// Acknowledged writes not yet lost.
    pub fn acked(&self) -> &TxnSet {
        &self.acked
    }

    /// The operator decided a promotion of `target` (a change of active site).
    pub fn on_promotion(&mut self, now: SimTime, target: usize, kind: PromotionKind) {
        if let Some(previous) = self.last_promotion_at {
            let end = previous.as_millis() + self.cooldown_millis;
            if now.as_millis() + self.cooldown_tolerance_millis < end {
                let detail = format!(
                    "{kind:?} promotion of {} at {now}, cooldown from the promotion at {previous} \
                     runs {} ms more",
                    self.site_names[target],
                    end - now.as_millis()
                );
                let class = if self.both_copies_lost_since_promotion {
                    FindingClass::CooldownViolatedRestartStateLost
                } else {
                    FindingClass::CooldownViolated
                };
                self.report(class, now, detail);
            }
        }
        self.last_promotion_at = Some(now);
        self.latest_promotion = Some((target, kind));
        // The truth of an earlier move must not be compared with this move's report (the same
        // pair of sites may fail over again); the new truth is taken when the target becomes
        // writable.
        self.pending_truth = None;
        self.split_brain_since_promotion = false;
        self.both_copies_lost_since_promotion = false;
    }

    /// When the last promotion was decided.
    pub fn last_promotion_at(&self) -> Option<SimTime> {
        self.last_promotion_at
    }

    /// An operator restart lost both persisted copies of the cooldown.
    pub fn on_both_cooldown_copies_lost(&mut self) {
        self.both_copies_lost_since_promotion = true;
    }

    /// The step's end state of every site: who can acknowledge writes, and what each executed.
    /// Checks TwoWritable and, on every site that just became writable, loss of acknowledged
    /// writes.
    pub fn on_step(&mut self, now: SimTime, accepts_writes: &[bool], executed: &[&TxnSet]) {
        let writer_sites: Vec<usize> = accepts_writes
            .iter()
            .enumerate()
            .filter(|&(_, &w)| w)
            .map(|(i, _)| i)
            .collect();
        if writer_sites.len() > 1 {
            // Two writers: which transactions a later failover "lost" is no longer defined,
            // so that failover's report is not compared (the SplitBrain itself is the finding).
            self.split_brain_since_promotion = true;
            self.pending_truth = None;
            let names: Vec<&str> = writer_sites.iter().map(|&i| self.site_names[i]).collect();
            let class = self.class_by_cause(&writer_sites, now, FindingClass::TwoWritable);
            self.report(
                class,
                now,
                format!("sites {} all accept writes", names.join(", ")),
            );
        }
        for site in 0..accepts_writes.len() {
            let was = self.writable[site];
            let is = accepts_writes[site];
            if was && !is {
                self.last_writer = Some((site, executed[site].clone()));
            }
            if !was && is {
                self.on_became_writable(now, site, executed[site]);
            }
            self.writable[site] = is;
        }
    }

    fn on_became_writable(&mut self, now: SimTime, site: usize, executed: &TxnSet) {
        let lost_acked = self.acked.subtract(executed);
        let discarded = std::mem::take(&mut self.relay_discarded);
        self.relay_discarded = vec![TxnSet::new(); discarded.len()];
        let held_and_discarded = lost_acked.subtract(&lost_acked.subtract(&discarded[site]));
        if !held_and_discarded.is_empty() {
            self.report(
                FindingClass::RelayDiscarded,
                now,
                format!(
                    "{} became writable without {} acknowledged writes it had received and a repoint discarded ({})",
                    self.site_names[site],
                    held_and_discarded.count(),
                    quote_set(&held_and_discarded)
                ),
            );
        }
        let from = self.last_writer.as_ref().map(|(s, _)| *s);
        if let Some((old, old_set)) = &self.last_writer {
            if *old != site {
                // What this move loses: the old writer's transactions missing here, minus
                // those an earlier move already lost (a returning primary keeps them as errant).
                let literal = old_set.subtract(executed);
                let lost = literal.subtract(&self.already_lost);
                self.already_lost.union_with(&lost);
                let emergency = matches!(
                    self.latest_promotion,
                    Some((t, PromotionKind::Emergency)) if t == site
                );
                if emergency && !self.split_brain_since_promotion {
                    self.pending_truth = Some(LossTruth {
                        from: *old,
                        to: site,
                        promoted_at: self.last_promotion_at.unwrap_or(now),
                        lost,
                        literal,
                        checked_exact: false,
                    });
                }
            }
        }
        if lost_acked.is_empty() {
            return;
        }
        let emergency = matches!(
            self.latest_promotion,
            Some((target, PromotionKind::Emergency)) if target == site
        );
        if !emergency {
            let class = self.class_by_cause(&[site], now, FindingClass::UnexplainedLoss);
            self.report(
                class,
                now,
                format!(
                    "{} became writable without {} acknowledged writes ({}), last writer {:?}, \
                     latest promotion {:?}",
                    self.site_names[site],
                    lost_acked.count(),
                    quote_set(&lost_acked),
                    from.map(|s| self.site_names[s]),
                    self.latest_promotion
                ),
            );
        }
        self.acked = self.acked.subtract(&lost_acked);
    }

    /// What the operator's status reports as the last failover's loss; `promoted_at` is the
    /// report's `promotedAt` converted to true time (it identifies the failover: a reverted
    /// status may report an older failover between the same two sites). Returns whether an
    /// exact report was compared with the truth.
    pub fn on_reported_loss(
        &mut self,
        now: SimTime,
        from: usize,
        to: usize,
        promoted_at: Option<SimTime>,
        lost_transactions: u64,
        exact: bool,
    ) -> bool {
        let Some(truth) = self.pending_truth.as_mut() else {
            return false;
        };
        if truth.from != from || truth.to != to || truth.checked_exact {
            return false;
        }
        let same_failover = promoted_at.is_some_and(|at| {
            at.as_millis().abs_diff(truth.promoted_at.as_millis()) <= self.cooldown_tolerance_millis
        });
        if !same_failover {
            return false;
        }
        let really = truth.lost.count();
        let literal = truth.literal.count();
        // Exact: equal to what this move lost, or to the literal `old - new` when the old
        // writer still carried transactions an earlier move had lost. Lower bound: never more.
        let mismatch = if exact {
            lost_transactions != really && lost_transactions != literal
        } else {
            lost_transactions > literal
        };
        if exact {
            truth.checked_exact = true;
        }
        if mismatch {
            let detail = format!(
                "failover {}->{} reports lostTransactions={lost_transactions} exact={exact}, \
                 really lost {really} ({})",
                self.site_names[from],
                self.site_names[to],
                quote_set(&truth.lost)
            );
            self.report(FindingClass::LostMismatch, now, detail);
        }
        exact
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(seq: u64) -> Txn {
        Txn { server_id: 1, seq }
    }

    // TwoWritable: two sites accepting writes at one instant is always a finding.
    #[test]
    fn two_writers_at_one_instant_are_found() {
        let mut checker = Checker::new(vec!["iad", "pdx", "reader"], 30_000, 500);
        let empty = TxnSet::new();
        checker.on_step(SimTime(1), &[true, true, false], &[&empty, &empty, &empty]);
        assert_eq!(checker.counts().get(&FindingClass::TwoWritable), Some(&1));
    }

    // Harness "no split brain", end to end through the checker: a demoted iad acknowledging
    // after pdx's promotion is SplitBrain, or SplitBrain(frozen+agentless) when iad had been
    // frozen with no agent just before.
    #[test]
    fn acknowledged_write_outside_its_epoch_is_classified_by_its_cause() {
        let failover = FailoverTimes {
            from: 0,
            to: 1,
            started_at: Some(SimTime(10_000)),
            fenced_at: Some(SimTime(18_000)),
            promoted_at: Some(SimTime(18_000)),
        };
        let run = |agentless: bool, kubelet_cut: bool| {
            let mut checker = Checker::new(vec!["iad", "pdx", "reader"], 30_000, 500);
            checker.on_status(SimTime(0), Some(0), 1, None);
            checker.on_ack(txn(1), 0, SimTime(5_000), SimTime(5_000));
            if agentless {
                checker.on_agentless_freeze(SimTime(6_000), 0, true, false);
                checker.on_agentless_freeze(SimTime(12_000), 0, true, kubelet_cut);
                checker.on_agentless_freeze(SimTime(25_000), 0, false, false);
            }
            checker.on_status(SimTime(18_000), Some(1), 2, Some(failover));
            checker.on_ack(txn(2), 0, SimTime(25_000), SimTime(25_000));
            checker.judge_authority_history(SimTime(30_000));
            checker.counts().clone()
        };
        let plain = run(false, false);
        assert_eq!(plain.get(&FindingClass::SplitBrain), Some(&1), "{plain:?}");
        let frozen = run(true, false);
        assert_eq!(frozen.get(&FindingClass::SplitBrain), None, "{frozen:?}");
        assert_eq!(
            frozen.get(&FindingClass::SplitBrainFrozenAgentless),
            Some(&1),
            "{frozen:?}"
        );
        // Its kubelet cut from the API server during the freeze: nobody could act.
        let cut = run(true, true);
        assert_eq!(
            cut.get(&FindingClass::SplitBrainFrozenAgentlessNodeCut),
            Some(&1),
            "{cut:?}"
        );
        assert!(FindingClass::SplitBrainFrozenAgentlessNodeCut.is_inherent());
        assert!(!FindingClass::SplitBrainFrozenAgentless.is_inherent());
    }

    // docs/design/operator.md#emergency-failover and #planned-failover: acknowledged writes are
    // lost only by an emergency failover.
    #[test]
    fn loss_without_emergency_promotion_is_unexplained() {
        let mut checker = Checker::new(vec!["iad", "pdx", "reader"], 30_000, 500);
        let mut iad = TxnSet::new();
        iad.insert(txn(1));
        iad.insert(txn(2));
        checker.on_ack(txn(1), 0, SimTime(0), SimTime(0));
        checker.on_ack(txn(2), 0, SimTime(0), SimTime(0));
        let mut pdx = TxnSet::new();
        pdx.insert(txn(1));
        let empty = TxnSet::new();
        checker.on_step(SimTime(1), &[true, false, false], &[&iad, &pdx, &empty]);
        checker.on_step(SimTime(2), &[false, false, false], &[&iad, &pdx, &empty]);
        checker.on_promotion(SimTime(3), 1, PromotionKind::Planned);
        checker.on_step(SimTime(4), &[false, true, false], &[&iad, &pdx, &empty]);
        assert_eq!(
            checker.counts().get(&FindingClass::UnexplainedLoss),
            Some(&1)
        );
    }

    // docs/design/requirements.md R001.8: an emergency failover may lose what replication had
    // not carried, and the exact report must then equal it.
    #[test]
    fn emergency_loss_is_explained_and_exact_report_is_compared() {
        let mut checker = Checker::new(vec!["iad", "pdx", "reader"], 30_000, 500);
        let mut iad = TxnSet::new();
        iad.insert(txn(1));
        iad.insert(txn(2));
        checker.on_ack(txn(2), 0, SimTime(0), SimTime(0));
        let pdx = TxnSet::new();
        let empty = TxnSet::new();
        checker.on_step(SimTime(1), &[true, false, false], &[&iad, &pdx, &empty]);
        checker.on_step(SimTime(2), &[false, false, false], &[&iad, &pdx, &empty]);
        checker.on_promotion(SimTime(3), 1, PromotionKind::Emergency);
        checker.on_step(SimTime(4), &[false, true, false], &[&iad, &pdx, &empty]);
        assert!(checker.counts().is_empty());
        checker.on_reported_loss(SimTime(5), 0, 1, Some(SimTime(3)), 1, false);
        assert!(checker.counts().is_empty());
        checker.on_reported_loss(SimTime(6), 0, 1, Some(SimTime(3)), 1, true);
        assert_eq!(checker.counts().get(&FindingClass::LostMismatch), Some(&1));
    }

    // An emergency loss is explained only when the promoted site never held the write: one it
    // had received and a repoint deleted from its relay log is `RelayDiscarded`.
    #[test]
    fn emergency_loss_of_a_write_the_candidate_received_and_discarded_is_found() {
        for discarded_first in [true, false] {
            let mut checker = Checker::new(vec!["iad", "pdx", "reader"], 30_000, 500);
            let mut iad = TxnSet::new();
            iad.insert(txn(1));
            checker.on_ack(txn(1), 0, SimTime(0), SimTime(0));
            let pdx = TxnSet::new();
            let empty = TxnSet::new();
            checker.on_step(SimTime(1), &[true, false, false], &[&iad, &pdx, &empty]);
            checker.on_step(SimTime(2), &[false, false, false], &[&iad, &pdx, &empty]);
            if discarded_first {
                checker.on_relay_discarded(1, &iad);
            }
            checker.on_promotion(SimTime(3), 1, PromotionKind::Emergency);
            checker.on_step(SimTime(4), &[false, true, false], &[&iad, &pdx, &empty]);
            let found = checker.counts().get(&FindingClass::RelayDiscarded).copied();
            assert_eq!(
                found,
                discarded_first.then_some(1),
                "{:?}",
                checker.findings()
            );
        }
    }

    // docs/design/operator.md#mysqlfailovergroup (lastFailover): a second failover between the
    // same two sites is compared with its own truth, never with the previous one's.
    #[test]
    fn report_of_a_new_failover_is_not_compared_with_the_previous_truth() {
        let mut checker = Checker::new(vec!["iad", "pdx", "reader"], 0, 0);
        let mut iad = TxnSet::new();
        iad.insert(txn(1));
        let mut pdx = TxnSet::new();
        pdx.insert(txn(1));
        let empty = TxnSet::new();
        checker.on_step(SimTime(1), &[true, false, false], &[&iad, &pdx, &empty]);
        checker.on_step(SimTime(2), &[false, false, false], &[&iad, &pdx, &empty]);
        checker.on_promotion(SimTime(3), 1, PromotionKind::Emergency);
        checker.on_step(SimTime(4), &[false, true, false], &[&iad, &pdx, &empty]);
        // A later failover iad->pdx is decided; its lower bound (1) arrives before pdx is
        // writable again and must not be held against the first failover's truth (0).
        checker.on_promotion(SimTime(50), 1, PromotionKind::Emergency);
        assert!(!checker.on_reported_loss(SimTime(51), 0, 1, Some(SimTime(50)), 1, false));
        assert!(checker.counts().is_empty());
    }

    // docs/design/requirements.md R001.10: a promotion inside the cooldown is a bug unless both
    // persisted copies were lost.
    #[test]
    fn cooldown_violation_is_inherent_only_after_both_copies_were_lost() {
        let mut checker = Checker::new(vec!["iad", "pdx", "reader"], 30_000, 500);
        checker.on_promotion(SimTime(1_000), 1, PromotionKind::Emergency);
        checker.on_promotion(SimTime(10_000), 0, PromotionKind::Emergency);
        checker.on_both_cooldown_copies_lost();
        checker.on_promotion(SimTime(20_000), 1, PromotionKind::Emergency);
        checker.on_promotion(SimTime(60_000), 0, PromotionKind::Emergency);
        assert_eq!(
            checker.counts().get(&FindingClass::CooldownViolated),
            Some(&1)
        );
        assert_eq!(
            checker
                .counts()
                .get(&FindingClass::CooldownViolatedRestartStateLost),
            Some(&1)
        );
        assert!(FindingClass::CooldownViolatedRestartStateLost.is_inherent());
        assert!(!FindingClass::CooldownViolated.is_inherent());
    }

    fn set_of(txns: &[(u32, u64)]) -> TxnSet {
        let mut set = TxnSet::new();
        for &(server_id, seq) in txns {
            set.insert(Txn { server_id, seq });
        }
        set
    }

    // docs/design/operator.md#returning-primary: "No transaction is thrown away unless an
    // archive names it". iad's acknowledged 0-1-3, lost by an emergency failover, survives on
    // iad only; a re-seed of iad without an archive of it leaves it nowhere.
    #[test]
    fn an_acknowledged_write_held_nowhere_and_archived_nowhere_is_found() {
        let run = |archived: bool, restored: bool| {
            let mut checker = Checker::new(vec!["iad", "pdx", "reader"], 30_000, 500);
            for seq in 1..=3 {
                checker.on_ack(txn(seq), 0, SimTime(0), SimTime(0));
            }
            // pdx (promoted) and the reader hold 1..2; iad held 1..3 until its re-seed.
            let held = set_of(&[(1, 1), (1, 2)]);
            let mut iad = held.clone();
            iad.insert(txn(3));
            checker.check_acknowledged_kept(SimTime(1), &iad, "nothing");
            assert!(checker.counts().is_empty());
            if archived {
                checker.on_archived(&set_of(&[(1, 3)]));
            }
            if restored {
                checker.explain_restore(&set_of(&[(1, 3)]));
            }
            checker.check_acknowledged_kept(SimTime(2), &held, "the re-seed of iad");
            // Reported once.
            checker.check_acknowledged_kept(SimTime(3), &held, "the re-seed of iad");
            checker
                .counts()
                .get(&FindingClass::DiscardedUnarchived)
                .copied()
        };
        assert_eq!(run(false, false), Some(1));
        assert_eq!(run(true, false), None, "archived: kept");
        assert_eq!(run(false, true), None, "discarded by a restore on request");
        assert!(!FindingClass::DiscardedUnarchived.is_inherent());
    }

    // docs/design/operator.md#emergency-failover ("Candidate: ... no errant transactions") and
    // #returning-primary: iad, demoted holding 0-1-11 that the active pdx lacks, is never
    // promoted by a failover, nor labelled primary or a healthy replica.
    #[test]
    fn a_site_holding_errant_transactions_promoted_or_serving_is_found() {
        let pdx = set_of(&[(1, 10), (2, 11)]);
        let mut iad = set_of(&[(1, 10)]);
        iad.insert(txn(11));
        let mut reader = set_of(&[(1, 10)]);
        reader.insert(Txn {
            server_id: 2,
            seq: 11,
        });
        let mut checker = Checker::new(vec!["iad", "pdx", "reader"], 30_000, 500);
        // A clean candidate, a clean replica, the active site itself, other moves: nothing.
        checker.check_promotion_errant(SimTime(1), 2, PromotionKind::Emergency, &reader, 1, &pdx);
        checker.check_promotion_errant(SimTime(1), 0, PromotionKind::Other, &iad, 1, &pdx);
        checker.check_serving_errant(SimTime(1), 2, "role=replica healthy", &reader, 1, &pdx);
        checker.check_serving_errant(SimTime(1), 1, "role=primary", &pdx, 1, &pdx);
        assert!(checker.counts().is_empty(), "{:?}", checker.findings());
        checker.check_promotion_errant(SimTime(2), 0, PromotionKind::Emergency, &iad, 1, &pdx);
        checker.check_promotion_errant(SimTime(3), 0, PromotionKind::Planned, &iad, 1, &pdx);
        checker.check_serving_errant(SimTime(4), 0, "role=replica healthy", &iad, 1, &pdx);
        checker.check_serving_errant(SimTime(5), 0, "role=primary", &iad, 1, &pdx);
        assert_eq!(
            checker.counts().get(&FindingClass::ErrantSiteUsed),
            Some(&4),
            "{:?}",
            checker.findings()
        );
        assert!(!FindingClass::ErrantSiteUsed.is_inherent());
    }

    // docs/design/operator.md#returning-primary: the archive runs under an explicit fence
    // with mysqld read-only, and the active site is never re-seeded.
    #[test]
    fn a_rejoin_job_on_a_site_that_is_or_might_be_writable_is_found() {
        let mut checker = Checker::new(vec!["iad", "pdx", "reader"], 30_000, 500);
        checker.check_rejoin_target(SimTime(1), 0, "archive asked", false, false);
        assert!(checker.counts().is_empty());
        checker.check_rejoin_target(SimTime(2), 0, "archive running", true, false);
        checker.check_rejoin_target(SimTime(3), 1, "re-seed asked", false, true);
        checker.check_rejoin_target(SimTime(4), 1, "re-seed running", true, true);
        assert_eq!(
            checker.counts().get(&FindingClass::RejoinOnWritable),
            Some(&3)
        );
        assert!(!FindingClass::RejoinOnWritable.is_inherent());
    }
}
