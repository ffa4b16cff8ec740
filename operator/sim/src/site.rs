//! A simulated MySQL site: mysqld's data (GTID executed set, relay log), read_only, replication.
//!
//! Committed transactions are durable: a crash of mysqld loses nothing it had committed, and the
//! relay log survives too. The only data a failover can lose is what replication had not carried.

use crate::clock::SimTime;
use crate::gtid::{Txn, TxnSet};

/// Whether a site may ever be promoted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiteRole {
    /// A failover candidate (`role: read-write`).
    ReadWrite,
    /// Never promoted (`role: read-only`), but votes in the sidecar lease majority.
    ReadOnly,
}

/// One site's mysqld.
#[derive(Debug, Clone)]
pub struct Site {
    /// Site name (`iad`, `pdx`, `reader`).
    pub name: &'static str,
    /// Spec role.
    pub role: SiteRole,
    /// MariaDB server id, used in the GTIDs this site commits.
    pub server_id: u32,
    /// Whether mysqld is running.
    pub mysqld_up: bool,
    /// `read_only`; mysqld always starts with it on.
    pub read_only: bool,
    /// Transactions executed (committed) here.
    pub executed: TxnSet,
    /// Transactions received from the source but not yet applied.
    pub relay: TxnSet,
    /// True time the oldest unapplied relay transaction was committed on its origin.
    pub relay_oldest_commit: Option<SimTime>,
    /// Replication source site, if configured.
    pub source: Option<usize>,
    /// Whether the replication threads are configured to run (`START REPLICA` issued).
    pub replication_enabled: bool,
    /// True time the current mysqld run started.
    pub started_at: SimTime,
    /// The replication error that stopped the IO thread, if any (cleared by a repoint or a
    /// restart, which re-evaluate it).
    pub replication_error: Option<String>,
}

impl Site {
    /// A fresh site with no data, read-only, not replicating.
    pub fn new(name: &'static str, role: SiteRole, server_id: u32) -> Site {
        Site {
            name,
            role,
            server_id,
            mysqld_up: true,
            read_only: true,
            executed: TxnSet::new(),
            relay: TxnSet::new(),
            relay_oldest_commit: None,
            source: None,
            replication_enabled: false,
            started_at: SimTime(0),
            replication_error: None,
        }
    }

    /// Whether this site can acknowledge a write right now.
    pub fn accepts_writes(&self) -> bool {
        self.mysqld_up && !self.read_only
    }

    /// Commits one client write and returns its GTID. Callers check [`Site::accepts_writes`].
    pub fn commit(&mut self) -> Txn {
        let txn = Txn {
            server_id: self.server_id,
            seq: self.executed.max_seq().max(self.relay.max_seq()) + 1,
        };
        self.executed.insert(txn);
        txn
    }

    /// mysqld crashes: nothing committed is lost; it will restart read-only.
    pub fn crash(&mut self) {
        self.mysqld_up = false;
        self.read_only = true;
    }

    /// mysqld starts again at `now`, read-only, replication threads in their configured state.
    pub fn restart(&mut self, now: SimTime) {
        self.mysqld_up = true;
        self.read_only = true;
        self.started_at = now;
        self.replication_error = None;
    }

    /// Whether the replication threads are running now.
    pub fn replicating(&self) -> bool {
        self.mysqld_up
            && self.replication_enabled
            && self.source.is_some()
            && self.replication_error.is_none()
    }

    /// Receives from the source every transaction missing here; returns how many arrived.
    ///
    /// A replica holding transactions its source lacks (errant: it diverged, for example a
    /// reader that had more of a dead primary than the promoted site) cannot replicate under
    /// MariaDB's GTID strict mode: the IO thread stops with an error instead.
    pub fn receive_from(&mut self, source_executed: &TxnSet, commit_time: SimTime) -> u64 {
        let errant = self.executed.subtract(source_executed);
        if !errant.is_empty() {
            self.replication_error = Some(format!(
                "replica has {} transactions the source lacks ({}); gtid_strict_mode",
                errant.count(),
                errant.describe()
            ));
            return 0;
        }
        let mut missing = source_executed.subtract(&self.executed);
        missing = missing.subtract(&self.relay);
        let arrived = missing.count();
        if arrived > 0 {
            self.relay.union_with(&missing);
            self.relay_oldest_commit.get_or_insert(commit_time);
        }
        arrived
    }

    /// Applies the whole relay log; returns how many transactions were applied.
    pub fn apply_relay(&mut self) -> u64 {
        if !self.mysqld_up {
            return 0;
        }
        let applied = self.relay.count();
        self.executed.union_with(&self.relay);
        self.relay = TxnSet::new();
        self.relay_oldest_commit = None;
        applied
    }

    /// Replication lag seen by `SHOW REPLICA STATUS`, in whole seconds; None when not replicating.
    pub fn seconds_behind_source(&self, now: SimTime) -> Option<u64> {
        if !self.replicating() {
            return None;
        }
        Some(
            self.relay_oldest_commit
                .map_or(0, |oldest| now.millis_since(oldest) / 1000),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // bloodraven.md: mysqld always starts read-only; a crash loses nothing committed.
    #[test]
    fn crash_keeps_committed_data_and_restarts_read_only() {
        let mut iad = Site::new("iad", SiteRole::ReadWrite, 1);
        iad.read_only = false;
        let txn = iad.commit();
        iad.crash();
        assert!(!iad.accepts_writes());
        iad.restart(SimTime(10));
        assert!(iad.read_only);
        assert!(iad.executed.contains(txn));
    }

    // Relay-log drain: received transactions become executed only when applied.
    #[test]
    fn relay_drain_applies_received_transactions() {
        let mut iad = Site::new("iad", SiteRole::ReadWrite, 1);
        iad.read_only = false;
        let first = iad.commit();
        let mut pdx = Site::new("pdx", SiteRole::ReadWrite, 2);
        pdx.source = Some(0);
        pdx.replication_enabled = true;
        assert_eq!(pdx.receive_from(&iad.executed, SimTime(5)), 1);
        assert!(!pdx.executed.contains(first));
        assert_eq!(pdx.apply_relay(), 1);
        assert!(pdx.executed.contains(first));
        let next = pdx.commit();
        assert_eq!(next.seq, 2);
        // pdx now holds a transaction iad lacks: replicating from iad stops with an error.
        assert_eq!(pdx.receive_from(&iad.executed, SimTime(9)), 0);
        assert!(!pdx.replicating());
        assert!(pdx.replication_error.is_some());
    }
}
