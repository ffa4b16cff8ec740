//! The invariants checked at every step of a run, each violation a [`Finding`] of a
//! [`FindingClass`].
//!
//! The checker keeps its own ground truth (which writes were acknowledged, which site wrote last
//! and what it held, when authority truly moved); it never trusts the operator's memory, which a
//! restart may lose.

use crate::clock::SimTime;
use crate::gtid::{Txn, TxnSet};
use std::collections::BTreeMap;
use std::fmt;

/// A kind of invariant violation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FindingClass {
    /// Two sites could acknowledge writes at the same instant.
    SplitBrain,
    /// Acknowledged writes were lost by something other than an emergency failover.
    UnexplainedLoss,
    /// `lastFailover.lostTransactions` disagrees with the transactions really lost: more than
    /// lost while `exact=false` (it must be a lower bound), or different once `exact=true`.
    LostMismatch,
    /// A promotion inside the cooldown while a persisted copy of it survived.
    CooldownViolated,
    /// A promotion inside the cooldown after a restart lost both persisted copies (seed 001):
    /// understood, bounded by the GTID gates, accepted.
    CooldownViolatedRestartStateLost,
    /// After a poll that moved authority, DNS still (or again) targets a non-active site.
    DnsStale,
    /// A live failover-hold changed what an emergency failover would have done.
    HoldDelayedEmergency,
    /// A deploy lease granted under an older topologyGeneration was renewed successfully.
    LeaseNotRevoked,
    /// The world healed and stayed healed, yet no site was writable within the bound.
    NoWritableAfterHeal,
    /// One decision names two different authorities, or labels two pods primary (STYLE.md
    /// point 4: "two primaries in one Decision").
    ConflictingDecision,
}

impl FindingClass {
    /// Every class, in table order.
    pub const ALL: [FindingClass; 10] = [
        FindingClass::SplitBrain,
        FindingClass::UnexplainedLoss,
        FindingClass::LostMismatch,
        FindingClass::CooldownViolated,
        FindingClass::CooldownViolatedRestartStateLost,
        FindingClass::DnsStale,
        FindingClass::HoldDelayedEmergency,
        FindingClass::LeaseNotRevoked,
        FindingClass::NoWritableAfterHeal,
        FindingClass::ConflictingDecision,
    ];

    /// Whether the class is an accepted property of the design rather than a bug.
    pub fn is_inherent(self) -> bool {
        match self {
            FindingClass::CooldownViolatedRestartStateLost => true,
            FindingClass::SplitBrain
            | FindingClass::UnexplainedLoss
            | FindingClass::LostMismatch
            | FindingClass::CooldownViolated
            | FindingClass::DnsStale
            | FindingClass::HoldDelayedEmergency
            | FindingClass::LeaseNotRevoked
            | FindingClass::NoWritableAfterHeal
            | FindingClass::ConflictingDecision => false,
        }
    }

    /// The class's name as the table prints it.
    pub fn name(self) -> &'static str {
        match self {
            FindingClass::SplitBrain => "SplitBrain",
            FindingClass::UnexplainedLoss => "UnexplainedLoss",
            FindingClass::LostMismatch => "LostMismatch",
            FindingClass::CooldownViolated => "CooldownViolated",
            FindingClass::CooldownViolatedRestartStateLost => "CooldownViolated(restart+stateLost)",
            FindingClass::DnsStale => "DnsStale",
            FindingClass::HoldDelayedEmergency => "HoldDelayedEmergency",
            FindingClass::LeaseNotRevoked => "LeaseNotRevoked",
            FindingClass::NoWritableAfterHeal => "NoWritableAfterHeal",
            FindingClass::ConflictingDecision => "ConflictingDecision",
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
    /// lost (the literal `old - new` of bloodraven.md).
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

    /// A client write was acknowledged.
    pub fn on_ack(&mut self, txn: Txn) {
        self.acked.insert(txn);
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
    /// Checks SplitBrain and, on every site that just became writable, loss of acknowledged writes.
    pub fn on_step(&mut self, now: SimTime, accepts_writes: &[bool], executed: &[&TxnSet]) {
        let writers: Vec<&str> = accepts_writes
            .iter()
            .enumerate()
            .filter(|&(_, &w)| w)
            .map(|(i, _)| self.site_names[i])
            .collect();
        if writers.len() > 1 {
            // Two writers: which transactions a later failover "lost" is no longer defined,
            // so that failover's report is not compared (the SplitBrain itself is the finding).
            self.split_brain_since_promotion = true;
            self.pending_truth = None;
            self.report(
                FindingClass::SplitBrain,
                now,
                format!("sites {} all accept writes", writers.join(", ")),
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
            self.report(
                FindingClass::UnexplainedLoss,
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

    // SplitBrain: two sites accepting writes at one instant is always a finding.
    #[test]
    fn two_writers_are_split_brain() {
        let mut checker = Checker::new(vec!["iad", "pdx", "reader"], 30_000, 500);
        let empty = TxnSet::new();
        checker.on_step(SimTime(1), &[true, true, false], &[&empty, &empty, &empty]);
        assert_eq!(checker.counts().get(&FindingClass::SplitBrain), Some(&1));
    }

    // bloodraven.md: acknowledged writes are lost only by an emergency failover.
    #[test]
    fn loss_without_emergency_promotion_is_unexplained() {
        let mut checker = Checker::new(vec!["iad", "pdx", "reader"], 30_000, 500);
        let mut iad = TxnSet::new();
        iad.insert(txn(1));
        iad.insert(txn(2));
        checker.on_ack(txn(1));
        checker.on_ack(txn(2));
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

    // Seed 001: an emergency failover may lose what replication had not carried, and the exact
    // report must then equal it.
    #[test]
    fn emergency_loss_is_explained_and_exact_report_is_compared() {
        let mut checker = Checker::new(vec!["iad", "pdx", "reader"], 30_000, 500);
        let mut iad = TxnSet::new();
        iad.insert(txn(1));
        iad.insert(txn(2));
        checker.on_ack(txn(2));
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

    // bloodraven.md lastFailover: a second failover between the same two sites is compared with
    // its own truth, never with the previous one's.
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

    // Seed 001: a promotion inside the cooldown is a bug unless both persisted copies were lost.
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
}
