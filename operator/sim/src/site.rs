//! A simulated MySQL site: mysqld's data (GTID executed set, relay log), read_only, replication,
//! and the write deadline the sidecar keeps armed inside it (`bloodraven_mysql::deadline`).
//!
//! Committed transactions are durable: a crash of mysqld loses nothing it had committed, and the
//! relay log survives too. The only data a failover can lose is what replication had not carried.
//!
//! A frozen mysqld (SIGSTOP) executes nothing: no commit, no replication, no `SET GLOBAL`, not
//! even its own deadline event; it resumes on thaw with whatever `read_only` it had. A killed
//! one (SIGKILL, also of a frozen process) is down and restarts read-only.

use crate::clock::{DriftClock, SimTime};
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
    /// mysqld run counter: bumped at every start (events of an older run are dropped, and the
    /// sidecar tells a restart by it).
    pub run: u64,
    /// Whether the process is stopped (SIGSTOP): it executes nothing until thawed or killed.
    pub frozen: bool,
    /// The node's wall clock, which mysqld's `NOW(6)` reads (the write deadline is armed and
    /// checked on it).
    pub clock: DriftClock,
    /// `bloodraven_sidecar.write_deadline.writable_until` on [`Site::clock`]; `None` until the
    /// sidecar first installs the switch (the table and event live in the datadir, so they
    /// survive restarts).
    pub writable_until_millis: Option<u64>,
    /// Client connections' generation: bumped whenever every client connection is dropped
    /// (mysqld stops, or the sidecar kills client connections), so a held connection knows
    /// it was broken.
    pub connection_generation: u64,
}

impl Site {
    /// A fresh site with no data, read-only, not replicating; mysqld's `NOW(6)` reads `clock`.
    pub fn new(name: &'static str, role: SiteRole, server_id: u32, clock: DriftClock) -> Site {
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
            run: 1,
            frozen: false,
            clock,
            writable_until_millis: None,
            connection_generation: 0,
        }
    }

    /// Whether mysqld executes statements now: running and not frozen.
    pub fn answers(&self) -> bool {
        self.mysqld_up && !self.frozen
    }

    /// Whether this site can acknowledge a write right now (a frozen mysqld acknowledges
    /// nothing, whatever its `read_only`).
    pub fn accepts_writes(&self) -> bool {
        self.answers() && !self.read_only
    }

    /// Whether `read_only` is off on a running mysqld, frozen or not: what it would accept
    /// the instant it answers again.
    pub fn writable_if_thawed(&self) -> bool {
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

    /// mysqld crashes or is killed (a frozen one too): nothing committed is lost; every client
    /// connection is dropped; it will restart read-only.
    pub fn crash(&mut self) {
        self.mysqld_up = false;
        self.frozen = false;
        self.read_only = true;
        self.connection_generation += 1;
    }

    /// mysqld starts again at `now`, read-only, replication threads in their configured state.
    pub fn restart(&mut self, now: SimTime) {
        self.mysqld_up = true;
        self.frozen = false;
        self.read_only = true;
        self.started_at = now;
        self.replication_error = None;
        self.run += 1;
    }

    /// The sidecar kills every client connection (its fence's `kill_connections`).
    pub fn kill_client_connections(&mut self) {
        self.connection_generation += 1;
    }

    /// mysqld's `NOW(6)` at true time `now`, in milliseconds of its clock.
    pub fn mysqld_clock_millis(&self, now: SimTime) -> u64 {
        self.clock.read_millis(now)
    }

    /// Installs the write-deadline switch if this datadir has none: the row starts with a
    /// deadline already passed (`install_statements`: a server is never writable on a switch
    /// nobody armed); an existing row is kept (`INSERT IGNORE`).
    pub fn install_write_deadline(&mut self) {
        self.writable_until_millis.get_or_insert(0);
    }

    /// Arms the write deadline `writable_for_millis` after `NOW(6)` (`arm_statement`).
    /// Returns false when mysqld cannot execute it (down or frozen) or the switch is missing.
    pub fn arm_write_deadline(&mut self, now: SimTime, writable_for_millis: u64) -> bool {
        if !self.answers() || self.writable_until_millis.is_none() {
            return false;
        }
        self.writable_until_millis = Some(
            self.mysqld_clock_millis(now)
                .saturating_add(writable_for_millis),
        );
        true
    }

    /// One run of the `fence_at_write_deadline` event at `now`: fences a writable server whose
    /// deadline has passed. Returns whether it set `read_only`. A frozen or stopped mysqld runs
    /// no event; a server without the switch has no event.
    pub fn run_deadline_event(&mut self, now: SimTime) -> bool {
        let Some(until) = self.writable_until_millis else {
            return false;
        };
        if !self.answers() || self.read_only || self.mysqld_clock_millis(now) < until {
            return false;
        }
        self.read_only = true;
        true
    }

    /// Whether the replication threads are running now.
    pub fn replicating(&self) -> bool {
        self.answers()
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
        if !self.answers() {
            return 0;
        }
        let applied = self.relay.count();
        self.executed.union_with(&self.relay);
        self.relay = TxnSet::new();
        self.relay_oldest_commit = None;
        applied
    }

    /// Changing the source (`CHANGE MASTER`) deletes the relay log: returns what it held
    /// unapplied, now gone from this site.
    pub fn discard_relay(&mut self) -> TxnSet {
        self.relay_oldest_commit = None;
        std::mem::take(&mut self.relay)
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

    fn site(name: &'static str, role: SiteRole, server_id: u32) -> Site {
        Site::new(name, role, server_id, DriftClock::new(1_000_000, 0))
    }

    // docs/design/operator.md#authority-sidecars-and-fencing: mysqld always starts read-only; a
    // crash loses nothing committed.
    #[test]
    fn crash_keeps_committed_data_and_restarts_read_only() {
        let mut iad = site("iad", SiteRole::ReadWrite, 1);
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
        let mut iad = site("iad", SiteRole::ReadWrite, 1);
        iad.read_only = false;
        let first = iad.commit();
        let mut pdx = site("pdx", SiteRole::ReadWrite, 2);
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

    // Operator README "Fencing" point 3: the event fences a writable server once the armed
    // deadline has passed on mysqld's clock, never before; an unarmed switch counts as passed.
    #[test]
    fn write_deadline_fences_once_passed_and_never_before() {
        let mut iad = site("iad", SiteRole::ReadWrite, 1);
        iad.read_only = false;
        // No switch installed: no event exists, nothing fences.
        assert!(!iad.run_deadline_event(SimTime(0)));
        assert!(!iad.arm_write_deadline(SimTime(0), 4_900));
        iad.install_write_deadline();
        // Installed with a passed deadline: a writable server nobody armed fences itself.
        assert!(iad.run_deadline_event(SimTime(0)));
        assert!(iad.read_only);
        iad.read_only = false;
        assert!(iad.arm_write_deadline(SimTime(1_000), 4_900));
        assert!(!iad.run_deadline_event(SimTime(5_899)));
        assert!(!iad.read_only);
        assert!(iad.run_deadline_event(SimTime(5_900)));
        assert!(iad.read_only);
        // Installing again keeps the armed row (INSERT IGNORE).
        iad.read_only = false;
        assert!(iad.arm_write_deadline(SimTime(10_000), 4_900));
        iad.install_write_deadline();
        assert!(!iad.run_deadline_event(SimTime(14_000)));
    }

    // docs/design/history.md#issue-10: a frozen mysqld executes nothing, its own deadline event
    // included, and resumes with the read_only it had; a kill ends the freeze and it restarts
    // read-only.
    #[test]
    fn frozen_mysqld_runs_no_event_and_thaws_as_it_was() {
        let mut iad = site("iad", SiteRole::ReadWrite, 1);
        iad.install_write_deadline();
        iad.read_only = false;
        assert!(iad.arm_write_deadline(SimTime(0), 4_900));
        iad.frozen = true;
        assert!(!iad.accepts_writes());
        assert!(iad.writable_if_thawed());
        assert!(
            !iad.arm_write_deadline(SimTime(1_000), 4_900),
            "a frozen server arms nothing"
        );
        assert!(!iad.run_deadline_event(SimTime(60_000)));
        assert!(!iad.read_only);
        iad.frozen = false;
        assert!(iad.accepts_writes(), "thawed with read_only still off");
        assert!(iad.run_deadline_event(SimTime(60_001)));
        iad.read_only = false;
        iad.frozen = true;
        let generation = iad.connection_generation;
        iad.crash();
        assert!(!iad.frozen && iad.read_only && !iad.mysqld_up);
        assert_ne!(
            iad.connection_generation, generation,
            "connections die with mysqld"
        );
        let run = iad.run;
        iad.restart(SimTime(70_000));
        assert!(iad.read_only && iad.run > run);
    }
}
