//! The statements each flavor needs, behind one trait.
//!
//! Every method returns statement text only; executing it (and re-reading state after an
//! error, docs/design/requirements.md R001.15: an error from a mutation is an unknown, so
//! re-read) is the caller's job.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::gtid::Gtid;
use crate::{quote_string, Error, Flavor, GtidSet, Result};

/// The longest replication source host name both flavors accept.
const SOURCE_HOST_LEN_MAX: usize = 255;
/// The longest replication user name both flavors accept.
const SOURCE_USER_LEN_MAX: usize = 80;
/// The longest `SOURCE_PASSWORD` MySQL accepts.
const MYSQL_SOURCE_PASSWORD_LEN_MAX: usize = 32;
/// The shortest wait a MariaDB wait statement asks for (`MASTER_GTID_WAIT` takes fractional
/// seconds; a negative value would mean "forever").
const WAIT_TIMEOUT_MIN: Duration = Duration::from_millis(1);
/// The shortest wait a MySQL wait statement asks for, in whole seconds: MySQL documents the
/// `WAIT_FOR_EXECUTED_GTID_SET` timeout in seconds, so it gets a whole number rounded up, and
/// never 0, whose meaning differs between releases.
const MYSQL_WAIT_TIMEOUT_SECONDS_MIN: u64 = 1;

/// Where a replica replicates from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicationSource {
    /// The source's host: the active site's internal Service name (`mysql-<group>-<site>`,
    /// the canonical replication source host, docs/design/architecture.md#names). Used as given.
    pub host: String,
    /// The source's MySQL port (3306).
    pub port: u16,
    /// Replication user.
    pub user: String,
    /// Replication user's password.
    pub password: String,
    /// Seconds between reconnection attempts (both flavors default to 60, far longer than a
    /// failover should take).
    pub connect_retry_seconds: u32,
}

/// What a wait-for-GTID statement returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum WaitOutcome {
    /// The set was reached.
    Reached,
    /// The timeout expired first.
    TimedOut,
}

/// The statements of one flavor.
pub trait Dialect: Send + Sync {
    /// The flavor these statements are for.
    fn flavor(&self) -> Flavor;

    /// Run once per session before anything else: turns off `NO_BACKSLASH_ESCAPES` so string
    /// literals from [`quote_string`] read back exactly.
    fn session_setup(&self) -> &'static str {
        "SET SESSION sql_mode = REPLACE(@@SESSION.sql_mode, 'NO_BACKSLASH_ESCAPES', '')"
    }

    /// Makes the server refuse writes from every application user (fencing).
    fn fence(&self) -> Vec<String>;

    /// Makes the server writable again.
    fn unfence(&self) -> Vec<String>;

    /// Stops replication threads.
    fn stop_replication(&self) -> String;

    /// Starts replication threads.
    fn start_replication(&self) -> String;

    /// Stops only the receiving (I/O) thread: nothing more arrives from the source, and the
    /// applier goes on applying what was received (an emergency promotion's drain).
    fn stop_receiving(&self) -> String;

    /// Starts only the applier (SQL) thread; a running one is left as it is (a note, not an
    /// error).
    fn start_applier(&self) -> String;

    /// Stops replication and forgets the source configuration (the server is no replica
    /// afterwards), without unfencing.
    fn detach(&self) -> Vec<String>;

    /// Promotion: [`detach`](Self::detach), then [`unfence`](Self::unfence). Drain first with
    /// [`wait_for_gtid_set`](Self::wait_for_gtid_set).
    fn promote(&self) -> Vec<String> {
        let mut statements = self.detach();
        statements.extend(self.unfence());
        statements
    }

    /// Points replication at `source` with GTID auto-positioning and starts it.
    fn repoint(&self, source: &ReplicationSource) -> Result<Vec<String>>;

    /// A `SELECT` returning one integer column `outcome` once `set` has been applied or
    /// `timeout` expired; interpret it with [`wait_outcome`](Self::wait_outcome).
    fn wait_for_gtid_set(&self, set: &GtidSet, timeout: Duration) -> Result<String>;

    /// Interprets the value returned by [`wait_for_gtid_set`](Self::wait_for_gtid_set)'s
    /// statement.
    fn wait_outcome(&self, value: Option<i64>) -> Result<WaitOutcome>;

    /// A `SELECT` returning one row with integer columns `read_only` and `fenced` (the
    /// variable [`fence`](Self::fence) sets: `read_only` on MariaDB, `super_read_only` on
    /// MySQL).
    fn read_only_query(&self) -> &'static str;

    /// The global variable [`fence`](Self::fence) sets, as an expression (`@@GLOBAL.read_only`
    /// on MariaDB, `@@GLOBAL.super_read_only` on MySQL).
    fn fenced_variable(&self) -> &'static str;

    /// A `SELECT` returning one row with the text column `gtid_executed`, to parse with
    /// [`GtidSet::parse`] and this flavor.
    fn gtid_executed_query(&self) -> &'static str;

    /// The statement whose rows [`parse_replication_rows`](crate::parse_replication_rows)
    /// reads.
    fn replication_status_query(&self) -> &'static str;

    /// A `SELECT` listing client connections (columns `id`, `user`, `host`, `db`, `command`,
    /// `time`), leaving out this connection, server threads, replicas' binlog dump threads
    /// and the users in `excluded_users` (the sidecar's own and the replication user).
    fn client_connections_query(&self, excluded_users: &[&str]) -> String {
        let mut query = format!(
            "SELECT ID AS id, USER AS user, HOST AS host, DB AS db, COMMAND AS command, \
             TIME AS time FROM {} WHERE ID <> CONNECTION_ID() \
             AND USER NOT IN ('system user', 'event_scheduler') \
             AND COMMAND NOT IN ('Daemon', 'Binlog Dump', 'Binlog Dump GTID', 'Killed')",
            self.processlist_table()
        );
        if !excluded_users.is_empty() {
            let users: Vec<String> = excluded_users.iter().map(|u| quote_string(u)).collect();
            query.push_str(&format!(" AND USER NOT IN ({})", users.join(", ")));
        }
        query
    }

    /// The process list table [`client_connections_query`](Self::client_connections_query)
    /// reads.
    fn processlist_table(&self) -> &'static str;

    /// Kills one client connection (as listed by
    /// [`client_connections_query`](Self::client_connections_query)).
    fn kill_connection(&self, connection_id: u64) -> String {
        format!("KILL CONNECTION {connection_id}")
    }
}

/// MariaDB 10.11.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MariaDbDialect;

/// MySQL 8.4.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MySqlDialect;

impl Flavor {
    /// This flavor's statements.
    pub fn dialect(self) -> &'static dyn Dialect {
        match self {
            Flavor::MariaDb => &MariaDbDialect,
            Flavor::MySql => &MySqlDialect,
        }
    }
}

/// Checks a replication source's fields against what both flavors accept.
fn validate_source(source: &ReplicationSource) -> Result<()> {
    let invalid = |what: String| Err(Error::InvalidStatementInput(what));
    if source.host.trim().is_empty() || source.host.len() > SOURCE_HOST_LEN_MAX {
        return invalid(format!(
            "source host {:?} must be 1..={SOURCE_HOST_LEN_MAX} bytes",
            source.host
        ));
    }
    if source.user.is_empty() || source.user.len() > SOURCE_USER_LEN_MAX {
        return invalid(format!(
            "source user {:?} must be 1..={SOURCE_USER_LEN_MAX} bytes",
            source.user
        ));
    }
    if source.port == 0 {
        return invalid("source port 0".to_string());
    }
    for (what, value) in [
        ("host", &source.host),
        ("user", &source.user),
        ("password", &source.password),
    ] {
        if value.contains('\0') {
            return invalid(format!("source {what} contains NUL"));
        }
    }
    Ok(())
}

/// A timeout as whole seconds rounded up, at least [`MYSQL_WAIT_TIMEOUT_SECONDS_MIN`].
fn whole_timeout_seconds(timeout: Duration) -> u64 {
    let rounded_up = timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0);
    rounded_up.max(MYSQL_WAIT_TIMEOUT_SECONDS_MIN)
}

/// A timeout as SQL seconds with millisecond precision, at least [`WAIT_TIMEOUT_MIN`].
fn timeout_seconds(timeout: Duration) -> String {
    let millis = timeout.max(WAIT_TIMEOUT_MIN).as_millis();
    format!("{}.{:03}", millis / 1000, millis % 1000)
}

/// The MariaDB position that covers `set`: per domain, the highest sequence number and the
/// server that wrote it (`MASTER_GTID_WAIT` takes a position, one GTID per domain).
fn mariadb_wait_position(set: &GtidSet) -> Result<String> {
    let mut position = Vec::new();
    for domain in set.domains() {
        let Some(last) = set.domain_last_seq(domain) else {
            continue;
        };
        let writers: Vec<u32> = set
            .sources
            .keys()
            .filter_map(|source| match source {
                crate::gtid::Source::MariaDb {
                    domain: d,
                    server_id,
                } if *d == domain => Some(*server_id),
                _ => None,
            })
            .filter(|&server_id| set.contains_gtid(&Gtid::mariadb(domain, server_id, last)))
            .collect();
        match writers[..] {
            [server_id] => position.push(format!("{domain}-{server_id}-{last}")),
            _ => {
                return Err(Error::InvalidStatementInput(format!(
                    "GTID set {set} has no single position in domain {domain} \
                     (servers {writers:?} all wrote sequence number {last})"
                )))
            }
        }
    }
    Ok(position.join(","))
}

impl Dialect for MariaDbDialect {
    fn flavor(&self) -> Flavor {
        Flavor::MariaDb
    }

    /// MariaDB 10.11: `read_only` blocks every user without `READ_ONLY ADMIN`; `SUPER` alone
    /// no longer implies it (on 10.11.19 a SUPER-only user gets ERROR 1227 setting
    /// `read_only`). Application users hold neither ([`crate::grants`] flags both).
    fn fence(&self) -> Vec<String> {
        vec!["SET GLOBAL read_only = ON".to_string()]
    }

    fn unfence(&self) -> Vec<String> {
        vec!["SET GLOBAL read_only = OFF".to_string()]
    }

    fn stop_replication(&self) -> String {
        "STOP SLAVE".to_string()
    }

    fn start_replication(&self) -> String {
        "START SLAVE".to_string()
    }

    fn stop_receiving(&self) -> String {
        "STOP SLAVE IO_THREAD".to_string()
    }

    fn start_applier(&self) -> String {
        "START SLAVE SQL_THREAD".to_string()
    }

    fn detach(&self) -> Vec<String> {
        vec![self.stop_replication(), "RESET SLAVE ALL".to_string()]
    }

    /// Before `CHANGE MASTER`, `gtid_slave_pos` is set to `gtid_current_pos`: a no-op on a
    /// replica, and on a former primary it records its own transactions as applied so that
    /// `MASTER_USE_GTID=slave_pos` does not ask the new source for them again (only servers
    /// with no errant transactions are repointed).
    fn repoint(&self, source: &ReplicationSource) -> Result<Vec<String>> {
        validate_source(source)?;
        Ok(vec![
            self.stop_replication(),
            "SET GLOBAL gtid_slave_pos = @@GLOBAL.gtid_current_pos".to_string(),
            format!(
                "CHANGE MASTER TO MASTER_HOST = {}, MASTER_PORT = {}, MASTER_USER = {}, \
                 MASTER_PASSWORD = {}, MASTER_CONNECT_RETRY = {}, MASTER_USE_GTID = slave_pos",
                quote_string(&source.host),
                source.port,
                quote_string(&source.user),
                quote_string(&source.password),
                source.connect_retry_seconds.max(1),
            ),
            self.start_replication(),
        ])
    }

    /// `MASTER_GTID_WAIT` waits on `gtid_slave_pos` for the set's position (per domain, its
    /// highest GTID): 0 = reached, -1 = timed out. It counts replicated transactions only,
    /// which is what draining a replica's relay log before promotion needs.
    fn wait_for_gtid_set(&self, set: &GtidSet, timeout: Duration) -> Result<String> {
        if set.flavor() != Flavor::MariaDb || set.is_mixed() {
            return Err(Error::FlavorMismatch {
                left: Flavor::MariaDb,
                right: set.flavor(),
            });
        }
        Ok(format!(
            "SELECT MASTER_GTID_WAIT({}, {}) AS outcome",
            quote_string(&mariadb_wait_position(set)?),
            timeout_seconds(timeout)
        ))
    }

    fn wait_outcome(&self, value: Option<i64>) -> Result<WaitOutcome> {
        match value {
            Some(0) => Ok(WaitOutcome::Reached),
            Some(-1) => Ok(WaitOutcome::TimedOut),
            other => Err(Error::InvalidStatementInput(format!(
                "MASTER_GTID_WAIT returned {other:?}, expected 0 or -1"
            ))),
        }
    }

    fn read_only_query(&self) -> &'static str {
        "SELECT @@GLOBAL.read_only AS read_only, @@GLOBAL.read_only AS fenced"
    }

    fn fenced_variable(&self) -> &'static str {
        "@@GLOBAL.read_only"
    }

    /// `@@gtid_binlog_state`, not `@@gtid_binlog_pos` or `@@gtid_current_pos`: those hold one
    /// GTID per domain, so after a failover the new primary's `0-2-103` would attribute
    /// transactions 1..=100, written by server 1, to server 2, and comparing with the old
    /// primary would count its whole history as lost. `gtid_binlog_state` lists the last GTID
    /// of every (domain, server) pair (`0-1-100,0-2-103`), which the MariaDB text form reads
    /// as one linear history. It requires `log_bin` and `log_slave_updates` on every site
    /// (so replicated transactions are in the binlog), which promotion needs anyway.
    fn gtid_executed_query(&self) -> &'static str {
        "SELECT @@GLOBAL.gtid_binlog_state AS gtid_executed"
    }

    fn replication_status_query(&self) -> &'static str {
        "SHOW ALL SLAVES STATUS"
    }

    fn processlist_table(&self) -> &'static str {
        "information_schema.PROCESSLIST"
    }
}

impl Dialect for MySqlDialect {
    fn flavor(&self) -> Flavor {
        Flavor::MySql
    }

    /// MySQL 8.4: `super_read_only` (which implies `read_only`) also blocks users with
    /// `SUPER` or `CONNECTION_ADMIN`.
    fn fence(&self) -> Vec<String> {
        vec!["SET GLOBAL super_read_only = ON".to_string()]
    }

    /// Turning `super_read_only` off leaves `read_only` on, so both are cleared.
    fn unfence(&self) -> Vec<String> {
        vec![
            "SET GLOBAL super_read_only = OFF".to_string(),
            "SET GLOBAL read_only = OFF".to_string(),
        ]
    }

    fn stop_replication(&self) -> String {
        "STOP REPLICA".to_string()
    }

    fn start_replication(&self) -> String {
        "START REPLICA".to_string()
    }

    fn stop_receiving(&self) -> String {
        "STOP REPLICA IO_THREAD".to_string()
    }

    fn start_applier(&self) -> String {
        "START REPLICA SQL_THREAD".to_string()
    }

    fn detach(&self) -> Vec<String> {
        vec![self.stop_replication(), "RESET REPLICA ALL".to_string()]
    }

    /// `GET_SOURCE_PUBLIC_KEY = 1` lets a `caching_sha2_password` replication user connect
    /// without TLS.
    fn repoint(&self, source: &ReplicationSource) -> Result<Vec<String>> {
        validate_source(source)?;
        if source.password.chars().count() > MYSQL_SOURCE_PASSWORD_LEN_MAX {
            return Err(Error::InvalidStatementInput(format!(
                "MySQL source password is longer than {MYSQL_SOURCE_PASSWORD_LEN_MAX} characters"
            )));
        }
        Ok(vec![
            self.stop_replication(),
            format!(
                "CHANGE REPLICATION SOURCE TO SOURCE_HOST = {}, SOURCE_PORT = {}, \
                 SOURCE_USER = {}, SOURCE_PASSWORD = {}, SOURCE_CONNECT_RETRY = {}, \
                 SOURCE_AUTO_POSITION = 1, GET_SOURCE_PUBLIC_KEY = 1",
                quote_string(&source.host),
                source.port,
                quote_string(&source.user),
                quote_string(&source.password),
                source.connect_retry_seconds.max(1),
            ),
            self.start_replication(),
        ])
    }

    /// `WAIT_FOR_EXECUTED_GTID_SET` waits on `gtid_executed`: 0 = reached, 1 = timed out.
    /// The timeout is sent as whole seconds, rounded up, at least 1.
    fn wait_for_gtid_set(&self, set: &GtidSet, timeout: Duration) -> Result<String> {
        if set.flavor() != Flavor::MySql || set.is_mixed() {
            return Err(Error::FlavorMismatch {
                left: Flavor::MySql,
                right: set.flavor(),
            });
        }
        Ok(format!(
            "SELECT WAIT_FOR_EXECUTED_GTID_SET({}, {}) AS outcome",
            quote_string(&set.to_string()),
            whole_timeout_seconds(timeout)
        ))
    }

    fn wait_outcome(&self, value: Option<i64>) -> Result<WaitOutcome> {
        match value {
            Some(0) => Ok(WaitOutcome::Reached),
            Some(1) => Ok(WaitOutcome::TimedOut),
            other => Err(Error::InvalidStatementInput(format!(
                "WAIT_FOR_EXECUTED_GTID_SET returned {other:?}, expected 0 or 1"
            ))),
        }
    }

    fn read_only_query(&self) -> &'static str {
        "SELECT @@GLOBAL.read_only AS read_only, @@GLOBAL.super_read_only AS fenced"
    }

    fn fenced_variable(&self) -> &'static str {
        "@@GLOBAL.super_read_only"
    }

    fn gtid_executed_query(&self) -> &'static str {
        "SELECT @@GLOBAL.gtid_executed AS gtid_executed"
    }

    fn replication_status_query(&self) -> &'static str {
        "SHOW REPLICA STATUS"
    }

    /// `performance_schema.processlist`: `information_schema.PROCESSLIST` is deprecated in
    /// MySQL 8.4.
    fn processlist_table(&self) -> &'static str {
        "performance_schema.processlist"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(password: &str) -> ReplicationSource {
        ReplicationSource {
            host: "mysql-playground-pdx".to_string(),
            port: 3306,
            user: "repl".to_string(),
            password: password.to_string(),
            connect_retry_seconds: 1,
        }
    }

    fn parse(flavor: Flavor, text: &str) -> GtidSet {
        GtidSet::parse(flavor, text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    // docs/design/architecture.md#mysql: fencing is read_only on MariaDB, super_read_only on MySQL.
    #[test]
    fn fence_and_unfence_per_flavor() {
        assert_eq!(MariaDbDialect.fence(), ["SET GLOBAL read_only = ON"]);
        assert_eq!(MariaDbDialect.unfence(), ["SET GLOBAL read_only = OFF"]);
        assert_eq!(MySqlDialect.fence(), ["SET GLOBAL super_read_only = ON"]);
        assert_eq!(
            MySqlDialect.unfence(),
            [
                "SET GLOBAL super_read_only = OFF",
                "SET GLOBAL read_only = OFF"
            ]
        );
        assert_eq!(
            MariaDbDialect.read_only_query(),
            "SELECT @@GLOBAL.read_only AS read_only, @@GLOBAL.read_only AS fenced"
        );
        assert!(MySqlDialect
            .read_only_query()
            .contains("@@GLOBAL.super_read_only AS fenced"));
    }

    // Brief: promote = stop replication, reset replica config, unfence.
    #[test]
    fn promote_stops_resets_then_unfences() {
        assert_eq!(
            MariaDbDialect.promote(),
            [
                "STOP SLAVE",
                "RESET SLAVE ALL",
                "SET GLOBAL read_only = OFF"
            ]
        );
        assert_eq!(
            MySqlDialect.promote(),
            [
                "STOP REPLICA",
                "RESET REPLICA ALL",
                "SET GLOBAL super_read_only = OFF",
                "SET GLOBAL read_only = OFF"
            ]
        );
    }

    // docs/design/history.md#issue-8: an emergency promotion stops receiving, keeps applying,
    // then detaches.
    #[test]
    fn receiving_and_applying_threads_per_flavor() {
        assert_eq!(MariaDbDialect.stop_receiving(), "STOP SLAVE IO_THREAD");
        assert_eq!(MariaDbDialect.start_applier(), "START SLAVE SQL_THREAD");
        assert_eq!(MySqlDialect.stop_receiving(), "STOP REPLICA IO_THREAD");
        assert_eq!(MySqlDialect.start_applier(), "START REPLICA SQL_THREAD");
    }

    // Brief: repoint with GTID auto-position (MariaDB MASTER_USE_GTID=slave_pos), literals
    // escaped (quotes and backslashes).
    #[test]
    fn repoint_uses_gtid_positioning_and_escapes_literals() {
        let statements = MariaDbDialect.repoint(&source(r"p'w\d"));
        assert_eq!(
            statements,
            Ok(vec![
                "STOP SLAVE".to_string(),
                "SET GLOBAL gtid_slave_pos = @@GLOBAL.gtid_current_pos".to_string(),
                "CHANGE MASTER TO MASTER_HOST = 'mysql-playground-pdx', MASTER_PORT = 3306, \
                 MASTER_USER = 'repl', MASTER_PASSWORD = 'p''w\\\\d', MASTER_CONNECT_RETRY = 1, \
                 MASTER_USE_GTID = slave_pos"
                    .to_string(),
                "START SLAVE".to_string(),
            ])
        );
        let statements = MySqlDialect.repoint(&source("x'); DROP USER root; --"));
        assert_eq!(
            statements.as_ref().map(|s| s[1].clone()),
            Ok(
                "CHANGE REPLICATION SOURCE TO SOURCE_HOST = 'mysql-playground-pdx', \
                SOURCE_PORT = 3306, SOURCE_USER = 'repl', \
                SOURCE_PASSWORD = 'x''); DROP USER root; --', SOURCE_CONNECT_RETRY = 1, \
                SOURCE_AUTO_POSITION = 1, GET_SOURCE_PUBLIC_KEY = 1"
                    .to_string()
            )
        );
        assert_eq!(
            statements.map(|s| (s[0].clone(), s[2].clone())),
            Ok(("STOP REPLICA".to_string(), "START REPLICA".to_string()))
        );
    }

    #[test]
    fn repoint_rejects_unusable_sources() {
        let mut empty_host = source("pw");
        empty_host.host = " ".to_string();
        let mut nul_password = source("p\0w");
        nul_password.port = 3306;
        let mut no_port = source("pw");
        no_port.port = 0;
        for dialect in [Flavor::MariaDb.dialect(), Flavor::MySql.dialect()] {
            for bad in [&empty_host, &nul_password, &no_port] {
                assert!(
                    matches!(dialect.repoint(bad), Err(Error::InvalidStatementInput(_))),
                    "{bad:?}"
                );
            }
        }
        let long = source(&"p".repeat(33));
        assert!(MySqlDialect.repoint(&long).is_err());
        assert!(MariaDbDialect.repoint(&long).is_ok());
    }

    // Brief: drain / wait for a GTID set with timeout.
    #[test]
    fn wait_for_gtid_set_per_flavor() {
        let set = parse(Flavor::MariaDb, "0-1-100,0-2-103,1-5-7");
        assert_eq!(
            MariaDbDialect.wait_for_gtid_set(&set, Duration::from_millis(1500)),
            Ok("SELECT MASTER_GTID_WAIT('0-2-103,1-5-7', 1.500) AS outcome".to_string())
        );
        let set = parse(Flavor::MySql, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-57");
        assert_eq!(
            MySqlDialect.wait_for_gtid_set(&set, Duration::ZERO),
            Ok(
                "SELECT WAIT_FOR_EXECUTED_GTID_SET('3e11fa47-71ca-11e1-9e33-c80aa9429562:1-57', \
                1) AS outcome"
                    .to_string()
            )
        );
        assert!(MySqlDialect
            .wait_for_gtid_set(&set, Duration::from_millis(2001))
            .is_ok_and(|statement| statement.ends_with(", 3) AS outcome")));
        assert!(MariaDbDialect
            .wait_for_gtid_set(&GtidSet::empty(Flavor::MariaDb), Duration::ZERO)
            .is_ok_and(|statement| statement == "SELECT MASTER_GTID_WAIT('', 0.001) AS outcome"));
        assert_eq!(
            MySqlDialect.wait_for_gtid_set(&GtidSet::empty(Flavor::MariaDb), Duration::ZERO),
            Err(Error::FlavorMismatch {
                left: Flavor::MySql,
                right: Flavor::MariaDb
            })
        );
        // A diverged set has no single MariaDB position to wait for.
        let diverged = parse(Flavor::MariaDb, "0-1-1..101,0-2-101..101");
        assert!(MariaDbDialect
            .wait_for_gtid_set(&diverged, Duration::from_secs(1))
            .is_err());
        assert_eq!(
            MariaDbDialect.wait_outcome(Some(0)),
            Ok(WaitOutcome::Reached)
        );
        assert_eq!(
            MariaDbDialect.wait_outcome(Some(-1)),
            Ok(WaitOutcome::TimedOut)
        );
        assert!(MariaDbDialect.wait_outcome(None).is_err());
        assert_eq!(
            MySqlDialect.wait_outcome(Some(1)),
            Ok(WaitOutcome::TimedOut)
        );
        assert!(MySqlDialect.wait_outcome(Some(-1)).is_err());
    }

    // Brief: read state queries; MariaDB reads gtid_binlog_state (see its documentation).
    #[test]
    fn state_queries_per_flavor() {
        assert_eq!(
            MariaDbDialect.gtid_executed_query(),
            "SELECT @@GLOBAL.gtid_binlog_state AS gtid_executed"
        );
        assert_eq!(
            MySqlDialect.gtid_executed_query(),
            "SELECT @@GLOBAL.gtid_executed AS gtid_executed"
        );
        assert_eq!(
            MariaDbDialect.replication_status_query(),
            "SHOW ALL SLAVES STATUS"
        );
        assert_eq!(
            MySqlDialect.replication_status_query(),
            "SHOW REPLICA STATUS"
        );
        for flavor in [Flavor::MariaDb, Flavor::MySql] {
            assert_eq!(flavor.dialect().flavor(), flavor);
        }
    }

    // docs/design/operator.md#planned-failover (Draining): connections killed, but not the
    // replicas' binlog dump threads (they must keep draining) nor excluded users.
    #[test]
    fn client_connections_skip_replication_and_excluded_users() {
        let query = MariaDbDialect.client_connections_query(&["bloodraven", "re'pl"]);
        assert!(query.starts_with(
            "SELECT ID AS id, USER AS user, HOST AS host, DB AS db, COMMAND AS command, \
             TIME AS time FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()"
        ));
        assert!(query.contains("'Binlog Dump GTID'"));
        assert!(query.ends_with("AND USER NOT IN ('bloodraven', 're''pl')"));
        assert!(MySqlDialect
            .client_connections_query(&[])
            .contains("FROM performance_schema.processlist"));
        assert_eq!(MySqlDialect.kill_connection(42), "KILL CONNECTION 42");
    }
}
