//! Errant and lost transactions: what one server has that another does not, with MariaDB's
//! per-domain linear histories taken into account.

use std::collections::BTreeMap;

use super::intervals::Intervals;
use super::set::GtidSet;
use super::transaction::Source;

/// Transactions on the replica that are not on its source (errant transactions). A replica
/// with any is not a safe rejoin or promotion candidate.
///
/// MySQL: exactly `replica - source`.
///
/// MariaDB: per domain, `replica - source` except that numbers at or below the domain's
/// **agreement point** that the source also holds (under whatever server id) count as
/// shared. The agreement point is the highest sequence number both sets hold with the same
/// server id; in a linear history (MariaDB GTID strict mode) two servers holding the same
/// GTID share everything before it. This keeps real divergence (both wrote N+1 under
/// different server ids: above the agreement point) while ignoring the attribution that a
/// position read from the server cannot know (`@@gtid_binlog_state` credits a whole earlier
/// run to one server). Sets with full attribution (as the simulator builds them with
/// [`GtidSet::insert`]) get the exact difference.
///
/// Limitation: attribution is only as good as the input. Below the agreement point a wrong
/// attribution is forgiven; above it (for example when the sets share no GTID with the same
/// server id at all, as with one position per domain, or when one server id wrote two
/// separate runs after the point) it is reported, which over-reports: a replica is kept
/// fenced rather than rejoined with a hidden divergence.
pub fn errant_transactions(replica: &GtidSet, source: &GtidSet) -> GtidSet {
    history_difference(replica, source)
}

/// Transactions on the old primary that are missing on the new primary (lost by a
/// failover). Same rule as [`errant_transactions`], with the old primary in the replica's
/// place.
pub fn lost_transactions(old_primary: &GtidSet, new_primary: &GtidSet) -> GtidSet {
    history_difference(old_primary, new_primary)
}

/// [`lost_transactions`] across a rewind: `reused` are GTIDs a restore in place discarded,
/// whose numbers the history written since may have reused for other transactions. Two sets
/// holding such a GTID under the same server id do not share the history before it (one of
/// them may be from before the rewind, the other from after), so the agreement point is
/// taken over the other GTIDs only. With the whole rewound range as one agreement (simulator
/// seed 3181 `--all-faults --restore --image-update`: a backup taken before an earlier
/// restore of the same site held the numbers that site reused after it), everything the
/// site wrote since was forgiven and a restore that discarded 324 transactions recorded 0.
pub fn lost_transactions_across_rewind(
    old_primary: &GtidSet,
    new_primary: &GtidSet,
    reused: &GtidSet,
) -> GtidSet {
    difference_with_agreement(
        old_primary,
        new_primary,
        &old_primary.subtract(reused),
        &new_primary.subtract(reused),
    )
}

/// `ours - theirs` with MariaDB's agreement-point rule (see [`errant_transactions`]).
fn history_difference(ours: &GtidSet, theirs: &GtidSet) -> GtidSet {
    difference_with_agreement(ours, theirs, ours, theirs)
}

/// `ours - theirs`, forgiving per MariaDB domain what `theirs` holds (under any server id) at
/// or below the agreement point of `ours_agreeing` and `theirs_agreeing` (subsets of the two
/// whose shared GTIDs vouch for a shared history).
fn difference_with_agreement(
    ours: &GtidSet,
    theirs: &GtidSet,
    ours_agreeing: &GtidSet,
    theirs_agreeing: &GtidSet,
) -> GtidSet {
    let exact = ours.subtract(theirs);
    // Per MariaDB domain: every number `theirs` holds (any server) and the agreement point.
    let mut their_numbers: BTreeMap<u32, Intervals> = BTreeMap::new();
    for (source, intervals) in &theirs.sources {
        if let Source::MariaDb { domain, .. } = source {
            let numbers = their_numbers.entry(*domain).or_default();
            *numbers = numbers.union(intervals);
        }
    }
    let mut agreement: BTreeMap<u32, u64> = BTreeMap::new();
    for (source, intervals) in &ours_agreeing.sources {
        if let (Source::MariaDb { domain, .. }, Some(their_intervals)) =
            (source, theirs_agreeing.sources.get(source))
        {
            if let Some(last) = intervals.intersect(their_intervals).last() {
                let point = agreement.entry(*domain).or_default();
                *point = (*point).max(last);
            }
        }
    }
    let mut result = exact;
    result.sources = result
        .sources
        .into_iter()
        .filter_map(|(source, intervals)| {
            let Source::MariaDb { domain, .. } = source else {
                return Some((source, intervals));
            };
            let (Some(&point), Some(numbers)) =
                (agreement.get(&domain), their_numbers.get(&domain))
            else {
                return Some((source, intervals));
            };
            let mut shared = Intervals::default();
            shared.insert_range(1, point);
            let rest = intervals.subtract(&shared.intersect(numbers));
            (!rest.is_empty()).then_some((source, rest))
        })
        .collect();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Flavor, Gtid};

    fn mariadb(text: &str) -> GtidSet {
        GtidSet::parse(Flavor::MariaDb, text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    // Simulator seed 3181: iad (server 1) was restored to 2693, discarding 2694..2772 of its
    // own, pdx's 2773..3096 and its own 3097..3632; it then wrote 2694..3260 again (reused
    // numbers). Restoring it to a backup taken before that restore (server 1 to 2772, pdx's
    // 2773..3096, server 1 to 3538) discards what it holds under numbers the backup credits to
    // pdx: the agreement point is not the reused 3260.
    #[test]
    fn a_rewind_reused_numbers_are_no_agreement_point() {
        let fenced = mariadb("0-1-3260");
        let backup = backup_set();
        assert_eq!(lost_transactions(&fenced, &backup).count(), 0, "forgiven");
        let reused = earlier_discarded();
        let lost = lost_transactions_across_rewind(&fenced, &backup, &reused);
        assert_eq!(lost.count(), 324);
        assert_eq!(lost, fenced.subtract(&backup));
        // Nothing reused: the usual rule.
        let empty = GtidSet::empty(Flavor::MariaDb);
        assert_eq!(
            lost_transactions_across_rewind(&fenced, &backup, &empty),
            lost_transactions(&fenced, &backup)
        );
    }

    fn backup_set() -> GtidSet {
        let mut set = GtidSet::empty(Flavor::MariaDb);
        for seq in 1..=3538 {
            let server = if (2773..=3096).contains(&seq) { 2 } else { 1 };
            set.insert(Gtid::mariadb(0, server, seq));
        }
        set
    }

    fn earlier_discarded() -> GtidSet {
        let mut set = GtidSet::empty(Flavor::MariaDb);
        for seq in 2694..=3632 {
            let server = if (2773..=3096).contains(&seq) { 2 } else { 1 };
            set.insert(Gtid::mariadb(0, server, seq));
        }
        set
    }

    // docs/design/operator.md#emergency-failover: lostTransactions = old primary's last
    // observed set minus the new primary's; iad (server 1) died at 105 with pdx at 100.
    #[test]
    fn emergency_failover_loses_the_unreplicated_tail() {
        let lost = lost_transactions(&mariadb("0-1-105"), &mariadb("0-1-100"));
        assert_eq!(lost.to_string(), "0-1-101..105");
        assert_eq!(lost.count(), 5);
    }

    // docs/design/operator.md#emergency-failover: lostTransactions is made exact once the old
    // primary's data is readable again, by which time the new primary (server 2) wrote
    // 101..=103 of its own.
    #[test]
    fn lost_transactions_stay_exact_after_the_new_primary_diverged() {
        let old_primary = mariadb("0-1-105");
        let new_primary = mariadb("0-1-100,0-2-103");
        assert_eq!(
            lost_transactions(&old_primary, &new_primary).to_string(),
            "0-1-101..105"
        );
        // The returning primary's errant set is the same five transactions; it must not
        // rejoin as a replica (docs/design/operator.md#returning-primary).
        assert_eq!(errant_transactions(&old_primary, &new_primary).count(), 5);
        // Neither set contains the other: they diverged at 101.
        assert!(!new_primary.contains(&old_primary));
        assert!(!old_primary.contains(&new_primary));
    }

    // Brief: two servers that both wrote seq N+1 under different server ids are not subsets
    // of each other and each holds one errant transaction relative to the other.
    #[test]
    fn divergence_at_the_same_sequence_number_is_errant_both_ways() {
        let pdx = mariadb("0-1-100,0-2-101");
        let iad = mariadb("0-1-101");
        assert_eq!(errant_transactions(&pdx, &iad).to_string(), "0-2-101..101");
        assert_eq!(errant_transactions(&iad, &pdx).to_string(), "0-1-101..101");
        assert_eq!(pdx.count(), iad.count());
        assert!(!pdx.contains(&iad) && !iad.contains(&pdx));
    }

    // A lagging replica has no errant transaction, whatever the source wrote since.
    #[test]
    fn lagging_replica_has_no_errant_transactions() {
        let source = mariadb("0-1-100,0-2-250");
        for replica in ["0-1-100", "0-1-50", "0-1-100,0-2-120", ""] {
            assert!(
                errant_transactions(&mariadb(replica), &source).is_empty(),
                "{replica}"
            );
        }
    }

    // gtid_binlog_state after a failback (iad 1..=100, pdx 101..=200, iad 201..=300) credits
    // 1..=100 to pdx; the agreement point absorbs that for a replica stuck at 150.
    #[test]
    fn failback_attribution_from_binlog_state_is_absorbed_by_the_agreement_point() {
        let primary = mariadb("0-2-200,0-1-300");
        let replica = mariadb("0-1-100,0-2-150");
        assert!(errant_transactions(&replica, &primary).is_empty());
        assert_eq!(lost_transactions(&primary, &replica).count(), 150);
        // The exact difference would report the misattributed prefix.
        assert_eq!(replica.subtract(&primary).count(), 100);
    }

    // Failovers alternating between iad (server 1) and pdx (server 2), read back through
    // gtid_binlog_state: iad 1..=100, pdx 101..=200, iad 201..=300 and dies; pdx had 290,
    // is promoted and writes 291..=295. iad's lost transactions are exactly 291..=300.
    #[test]
    fn alternating_failovers_through_binlog_state_lose_exactly_the_tail() {
        let iad = mariadb("0-2-200,0-1-300");
        let pdx_at_promotion = mariadb("0-2-200,0-1-290");
        let pdx_later = mariadb("0-1-290,0-2-295");
        assert_eq!(
            lost_transactions(&iad, &pdx_at_promotion).to_string(),
            "0-1-291..300"
        );
        let lost = lost_transactions(&iad, &pdx_later);
        assert_eq!(lost.count(), 10);
        assert_eq!(lost.domain_last_seq(0), Some(300));
        assert_eq!(
            errant_transactions(&pdx_later, &iad).to_string(),
            "0-2-291..295"
        );
    }

    // Documented limitation: with no GTID in common (same number and server), the whole
    // domain is reported, erring on the safe side (the replica stays fenced).
    #[test]
    fn no_common_gtid_reports_the_whole_domain() {
        let errant = errant_transactions(&mariadb("0-1-100"), &mariadb("0-2-200,0-1-300"));
        assert_eq!(errant.count(), 100);
    }

    // Sets built transaction by transaction (the simulator) get the exact difference.
    #[test]
    fn fully_attributed_histories_get_the_exact_difference() {
        let mut common = GtidSet::empty(Flavor::MariaDb);
        for seq in 1..=50 {
            common.insert(Gtid::mariadb(0, 1, seq));
        }
        let mut old_primary = common.clone();
        let mut new_primary = common;
        for seq in 51..=60 {
            old_primary.insert(Gtid::mariadb(0, 1, seq));
        }
        for seq in 51..=55 {
            new_primary.insert(Gtid::mariadb(0, 2, seq));
        }
        let lost = lost_transactions(&old_primary, &new_primary);
        assert_eq!(lost, old_primary.subtract(&new_primary));
        assert_eq!(lost.to_string(), "0-1-51..60");
    }

    // Domains are independent: a domain the source never saw is entirely errant.
    #[test]
    fn unknown_domain_is_entirely_errant() {
        let errant = errant_transactions(&mariadb("0-1-100,7-9-3"), &mariadb("0-1-100"));
        assert_eq!(errant.to_string(), "7-9-3");
    }

    // MySQL: errant = exact difference.
    #[test]
    fn mysql_errant_transactions_are_the_exact_difference() {
        let uuid_a = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
        let uuid_b = "4f2a1b2c-0000-11ef-8000-0242ac120002";
        let replica = GtidSet::parse(Flavor::MySql, &format!("{uuid_a}:1-100,{uuid_b}:1-2"));
        let source = GtidSet::parse(Flavor::MySql, &format!("{uuid_a}:1-120"));
        let (Ok(replica), Ok(source)) = (replica, source) else {
            panic!("fixtures parse");
        };
        assert_eq!(
            errant_transactions(&replica, &source).to_string(),
            format!("{uuid_b}:1-2")
        );
        assert!(errant_transactions(&source, &source).is_empty());
    }
}
