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
/// Limitation: when the two sets share no GTID with the same server id in a domain, the
/// whole domain of `replica` is reported, which over-reports only if the inputs attributed
/// the shared prefix to different servers (a reading limited to one position per domain).
pub fn errant_transactions(replica: &GtidSet, source: &GtidSet) -> GtidSet {
    history_difference(replica, source)
}

/// Transactions on the old primary that are missing on the new primary (lost by a
/// failover). Same rule as [`errant_transactions`], with the old primary in the replica's
/// place.
pub fn lost_transactions(old_primary: &GtidSet, new_primary: &GtidSet) -> GtidSet {
    history_difference(old_primary, new_primary)
}

/// `ours - theirs` with MariaDB's agreement-point rule (see [`errant_transactions`]).
fn history_difference(ours: &GtidSet, theirs: &GtidSet) -> GtidSet {
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
    for (source, intervals) in &ours.sources {
        if let (Source::MariaDb { domain, .. }, Some(their_intervals)) =
            (source, theirs.sources.get(source))
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
