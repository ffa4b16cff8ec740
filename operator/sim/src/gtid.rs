//! Transaction sets of the simulated sites, over `bloodraven-mysql`'s GTID set algebra.
//!
//! The simulator runs the MariaDB flavor: one replication domain, each site writing with its own
//! server id and the domain's next sequence number (one linear history per domain, as MariaDB's
//! strict mode keeps it). Sets are built with `GtidSet::insert`, so every transaction is fully
//! attributed and the set algebra is exact.

use bloodraven_mysql::{Flavor, Gtid, GtidSet};

/// The MariaDB replication domain every simulated write uses.
pub const DOMAIN: u32 = 0;

/// One transaction: written by `server_id` with sequence number `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Txn {
    /// Server id of the site that committed it.
    pub server_id: u32,
    /// Sequence number within the domain.
    pub seq: u64,
}

impl Txn {
    /// The transaction as a MariaDB GTID.
    pub fn gtid(self) -> Gtid {
        Gtid::mariadb(DOMAIN, self.server_id, self.seq)
    }
}

/// A set of transactions (a MariaDB [`GtidSet`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnSet {
    set: GtidSet,
}

impl Default for TxnSet {
    fn default() -> TxnSet {
        TxnSet::new()
    }
}

impl TxnSet {
    /// The empty set.
    pub fn new() -> TxnSet {
        TxnSet {
            set: GtidSet::empty(Flavor::MariaDb),
        }
    }

    /// The set of `set`'s transactions (a MariaDB set, as the operator sends one).
    pub fn from_gtid_set(set: GtidSet) -> TxnSet {
        TxnSet { set }
    }

    /// The underlying GTID set.
    pub fn gtid_set(&self) -> &GtidSet {
        &self.set
    }

    /// Adds one transaction.
    pub fn insert(&mut self, txn: Txn) {
        self.set.insert(txn.gtid());
    }

    /// Whether `txn` is in the set.
    pub fn contains(&self, txn: Txn) -> bool {
        self.set.contains_gtid(&txn.gtid())
    }

    /// Number of transactions.
    pub fn count(&self) -> u64 {
        self.set.count()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Highest sequence number of the domain, zero for the empty set.
    pub fn max_seq(&self) -> u64 {
        self.set.domain_last_seq(DOMAIN).unwrap_or(0)
    }

    /// Adds every transaction of `other`.
    pub fn union_with(&mut self, other: &TxnSet) {
        self.set = self.set.union(&other.set);
    }

    /// The transactions of `self` that are not in `other`.
    pub fn subtract(&self, other: &TxnSet) -> TxnSet {
        TxnSet {
            set: self.set.subtract(&other.set),
        }
    }

    /// Whether every transaction of `self` is in `other`.
    pub fn is_subset_of(&self, other: &TxnSet) -> bool {
        other.set.contains(&self.set)
    }

    /// The server's text form (what `@@gtid_binlog_state` reads back as, range items for
    /// sets that are not one linear prefix).
    pub fn describe(&self) -> String {
        let text = self.set.to_string();
        if text.is_empty() {
            "{}".to_string()
        } else {
            text
        }
    }

    /// The text the sidecar reports as `gtid_executed`.
    pub fn server_text(&self) -> String {
        self.set.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(txns: &[(u32, u64)]) -> TxnSet {
        let mut s = TxnSet::new();
        for &(server_id, seq) in txns {
            s.insert(Txn { server_id, seq });
        }
        s
    }

    // docs/design/operator.md#emergency-failover: lostTransactions = old primary's set minus
    // the new primary's; MariaDB divergence at the same sequence numbers under different server
    // ids.
    #[test]
    fn subtract_counts_unreplicated_tail_and_divergence() {
        let old = set(&[(1, 1), (1, 2), (1, 3), (1, 4)]);
        let new = set(&[(1, 1), (1, 2), (2, 3), (2, 4), (2, 5)]);
        let lost = old.subtract(&new);
        assert_eq!(lost.count(), 2);
        assert!(lost.contains(Txn {
            server_id: 1,
            seq: 4
        }));
        assert!(!lost.contains(Txn {
            server_id: 1,
            seq: 2
        }));
        assert!(set(&[(1, 2)]).is_subset_of(&old));
        assert_eq!(new.max_seq(), 5);
        let text = new.server_text();
        assert_eq!(
            bloodraven_mysql::GtidSet::parse(Flavor::MariaDb, &text)
                .ok()
                .as_ref(),
            Some(new.gtid_set())
        );
    }
}
