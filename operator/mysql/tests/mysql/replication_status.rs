//! Replication status parsing against recorded server output of both flavors (brief:
//! MariaDB 10.11 `SHOW ALL SLAVES STATUS`/`SHOW SLAVE STATUS`, MySQL 8.4
//! `SHOW REPLICA STATUS`; no row = not a replica). Fixtures: `tests/fixtures/README.md`.

use bloodraven_mysql::{
    parse_replication_rows, same_host, Error, Flavor, GtidSet, IoThreadState, ReplicationStatus,
    StatusRow, UsingGtid,
};

const NAMESPACE: &str = "bloodraven-playground";

/// Reads the `\G` vertical format into rows (`NULL` -> `None`; lines that are not
/// `Column: value` continue the previous value).
fn vertical_rows(text: &str) -> Vec<StatusRow> {
    let mut rows: Vec<StatusRow> = Vec::new();
    let mut last_column: Option<String> = None;
    for line in text.lines() {
        if line.starts_with("***") {
            rows.push(StatusRow::new());
            last_column = None;
            continue;
        }
        let Some(row) = rows.last_mut() else {
            continue;
        };
        let trimmed = line.trim_start();
        let column = trimmed
            .split_once(':')
            .filter(|(name, _)| {
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
            .filter(|(name, _)| name.starts_with(|c: char| c.is_ascii_alphabetic()));
        match (column, &last_column) {
            (Some((name, value)), _) => {
                let value = value.strip_prefix(' ').unwrap_or(value);
                let value = (value != "NULL").then(|| value.to_string());
                row.insert(name.to_string(), value);
                last_column = Some(name.to_string());
            }
            (None, Some(previous)) => {
                if let Some(Some(value)) = row.get_mut(previous) {
                    value.push('\n');
                    value.push_str(line);
                }
            }
            (None, None) => {}
        }
    }
    rows
}

/// This checkout's `tests/fixtures`, read at run time (cargo sets `CARGO_MANIFEST_DIR` for
/// the test process): a test binary reused from a target directory shared with a checkout
/// elsewhere (CI's clone) must read this one's.
fn fixtures_dir() -> String {
    let root = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    format!("{root}/tests/fixtures")
}

fn fixture(name: &str) -> Vec<StatusRow> {
    let path = format!("{}/{name}", fixtures_dir());
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    vertical_rows(&text)
}

fn status(flavor: Flavor, name: &str) -> ReplicationStatus {
    match parse_replication_rows(flavor, &fixture(name)) {
        Ok(Some(status)) => status,
        other => panic!("{name}: {other:?}"),
    }
}

fn set(flavor: Flavor, text: &str) -> Option<GtidSet> {
    Some(GtidSet::parse(flavor, text).unwrap_or_else(|e| panic!("{text}: {e}")))
}

// The reader conjuncts of docs/design/requirements.md R000.7 read from this row: replicating,
// secondsBehindSource non-nil, source host canonically equal to the active site's internal
// Service.
#[test]
fn mariadb_all_slaves_status_running_replica() {
    let status = status(Flavor::MariaDb, "mariadb-10.11-all-slaves-running.txt");
    assert!(status.replicating());
    assert_eq!(status.io_state, IoThreadState::Running);
    assert_eq!(status.connection_name, "");
    assert_eq!(status.source_port, 3306);
    assert_eq!(status.source_user, "repl");
    assert_eq!(status.source_server_id, Some(1));
    assert_eq!(status.seconds_behind_source, Some(0));
    assert_eq!(status.using_gtid, UsingGtid::SlavePos);
    assert_eq!(status.retrieved_gtid_set, set(Flavor::MariaDb, "0-1-1042"));
    assert_eq!(status.executed_gtid_set, set(Flavor::MariaDb, "0-1-1042"));
    assert_eq!((status.last_io_error, status.last_sql_error), (None, None));
    assert!(same_host(
        &status.source_host,
        "mysql-playground-iad",
        NAMESPACE
    ));
}

// docs/design/requirements.md R000.7: secondsBehindSource must be non-nil; NULL is not zero.
#[test]
fn mariadb_slave_status_connecting_has_no_lag_and_an_io_error() {
    let status = status(Flavor::MariaDb, "mariadb-10.11-slave-io-connecting.txt");
    assert!(!status.replicating());
    assert!(!status.io_running && status.sql_running);
    assert_eq!(status.io_state, IoThreadState::Connecting);
    assert_eq!(status.seconds_behind_source, None);
    assert_eq!(status.source_server_id, None);
    // Plain SHOW SLAVE STATUS has no Gtid_Slave_Pos column.
    assert_eq!(status.executed_gtid_set, None);
    let error = status
        .last_io_error
        .unwrap_or_else(|| panic!("IO error expected"));
    assert_eq!(error.number, 2003);
    assert!(error.message.contains("Connection refused"));
    assert_eq!(error.timestamp, None);
    assert!(same_host(
        &status.source_host,
        "mysql-playground-pdx.bloodraven-playground.svc.cluster.local",
        NAMESPACE
    ));
    assert!(!same_host(
        &status.source_host,
        "mysql-playground-iad",
        NAMESPACE
    ));
}

#[test]
fn mariadb_sql_thread_error_is_reported_with_current_pos() {
    let status = status(Flavor::MariaDb, "mariadb-10.11-all-slaves-sql-error.txt");
    assert!(status.io_running && !status.sql_running && !status.replicating());
    assert_eq!(status.using_gtid, UsingGtid::CurrentPos);
    assert_eq!(status.seconds_behind_source, None);
    let error = status
        .last_sql_error
        .unwrap_or_else(|| panic!("SQL error expected"));
    assert_eq!(error.number, 1062);
    assert!(error.message.contains("Duplicate entry '1'"));
    // Received but not applied: 1043..=1045.
    let (Some(retrieved), Some(executed)) = (status.retrieved_gtid_set, status.executed_gtid_set)
    else {
        panic!("both GTID columns are present");
    };
    assert_eq!(retrieved.subtract(&executed).to_string(), "0-1-1043..1045");
    // Trailing dot is the fully-qualified spelling of the same Service.
    assert!(same_host(
        &status.source_host,
        "mysql-playground-iad",
        NAMESPACE
    ));
}

// Bloodraven uses the default connection of a multi-source MariaDB replica.
#[test]
fn mariadb_multi_source_picks_the_default_connection() {
    let status = status(Flavor::MariaDb, "mariadb-10.11-all-slaves-multi-source.txt");
    assert_eq!(status.connection_name, "");
    assert!(same_host(
        &status.source_host,
        "mysql-playground-iad",
        NAMESPACE
    ));
    assert_eq!(
        status.executed_gtid_set,
        set(Flavor::MariaDb, "0-1-1042,5-40-77")
    );
    // Without the default connection there is nothing to pick.
    let rows = fixture("mariadb-10.11-all-slaves-multi-source.txt");
    assert_eq!(
        parse_replication_rows(Flavor::MariaDb, &rows[..1]).map(|s| s.map(|s| s.connection_name)),
        Ok(Some("legacy".to_string()))
    );
    let mut two_named = rows.clone();
    two_named[1].insert("Connection_name".to_string(), Some("other".to_string()));
    assert_eq!(
        parse_replication_rows(Flavor::MariaDb, &two_named),
        Err(Error::NoDefaultChannel(vec![
            "legacy".to_string(),
            "other".to_string()
        ]))
    );
}

#[test]
fn mysql_replica_status_running_with_multi_line_executed_set() {
    let status = status(Flavor::MySql, "mysql-8.4-replica-running.txt");
    assert!(status.replicating());
    assert_eq!(status.seconds_behind_source, Some(2));
    assert_eq!(status.using_gtid, UsingGtid::AutoPosition);
    assert!(status.using_gtid.is_gtid());
    assert_eq!(status.source_server_id, Some(1));
    assert_eq!(
        status.executed_gtid_set.as_ref().map(GtidSet::count),
        Some(55 + 3)
    );
    assert_eq!(
        status.retrieved_gtid_set,
        set(Flavor::MySql, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-57")
    );
    assert!(same_host(
        &status.source_host,
        "mysql-playground-iad",
        NAMESPACE
    ));
}

// docs/design/requirements.md R000.7: a source host that is not the active site's Service fails
// the conjunct.
#[test]
fn mysql_replica_io_error_with_timestamp_and_wrong_host() {
    let status = status(Flavor::MySql, "mysql-8.4-replica-io-error.txt");
    assert_eq!(status.io_state, IoThreadState::Connecting);
    assert_eq!(status.seconds_behind_source, None);
    assert_eq!(
        status.retrieved_gtid_set,
        Some(GtidSet::empty(Flavor::MySql))
    );
    let error = status
        .last_io_error
        .unwrap_or_else(|| panic!("IO error expected"));
    assert_eq!(error.number, 2005);
    assert_eq!(error.timestamp.as_deref(), Some("241130 03:12:45"));
    assert!(!same_host(
        &status.source_host,
        "mysql-playground-iad",
        NAMESPACE
    ));
}

// Brief: "no row" = not a replica.
#[test]
fn no_row_means_not_a_replica() {
    for flavor in [Flavor::MariaDb, Flavor::MySql] {
        assert_eq!(parse_replication_rows(flavor, &[]), Ok(None));
    }
}

#[test]
fn missing_or_malformed_columns_are_errors_naming_the_column() {
    let mut rows = fixture("mysql-8.4-replica-running.txt");
    rows[0].remove("Replica_IO_Running");
    assert!(matches!(
        parse_replication_rows(Flavor::MySql, &rows),
        Err(Error::StatusColumn { column, .. }) if column.contains("Replica_IO_Running")
    ));
    let mut rows = fixture("mysql-8.4-replica-running.txt");
    rows[0].insert("Seconds_Behind_Source".to_string(), Some("-1".to_string()));
    assert!(matches!(
        parse_replication_rows(Flavor::MySql, &rows),
        Err(Error::StatusColumn { column, .. }) if column == "Seconds_Behind_Source"
    ));
    let mut rows = fixture("mariadb-10.11-all-slaves-running.txt");
    rows[0].insert("Slave_SQL_Running".to_string(), Some("Maybe".to_string()));
    assert!(matches!(
        parse_replication_rows(Flavor::MariaDb, &rows),
        Err(Error::StatusColumn { column, .. }) if column == "Slave_SQL_Running"
    ));
    // A MariaDB row read as MySQL fails on the GTID column, naming it.
    let rows = fixture("mariadb-10.11-all-slaves-running.txt");
    assert!(matches!(
        parse_replication_rows(Flavor::MySql, &rows),
        Err(Error::StatusColumn { column, .. }) if column == "Gtid_IO_Pos"
    ));
}

// Recorded MariaDB 10.11.19: a replica repointed with Dialect::repoint, running.
#[test]
fn recorded_mariadb_running_replica() {
    let status = status(Flavor::MariaDb, "mariadb-10.11.19-recorded-running.txt");
    assert!(status.replicating());
    assert_eq!(
        (status.source_host.as_str(), status.source_port),
        ("127.0.0.1", 33062)
    );
    assert_eq!(status.using_gtid, UsingGtid::SlavePos);
    assert_eq!(status.seconds_behind_source, Some(0));
    assert_eq!(status.source_server_id, Some(2));
    assert_eq!(status.executed_gtid_set, set(Flavor::MariaDb, "0-2-12"));
}

// Recorded MariaDB 10.11.19: the old primary repointed to the new one after both wrote
// (docs/design/operator.md#returning-primary: it must not rejoin). MariaDB refuses with 1236
// and the IO thread stops; the row says so.
#[test]
fn recorded_mariadb_diverged_old_primary_reports_error_1236() {
    let status = status(Flavor::MariaDb, "mariadb-10.11.19-recorded-diverged.txt");
    assert_eq!(status.io_state, IoThreadState::Stopped);
    assert!(!status.replicating());
    assert_eq!(status.seconds_behind_source, None);
    let error = status
        .last_io_error
        .unwrap_or_else(|| panic!("IO error expected"));
    assert_eq!(error.number, 1236);
    assert!(error
        .message
        .contains("GTID 0-1-14, which is not in the master's binlog"));
}

/// `name=value` lines of the recorded emergency failover fixture.
fn recorded_variable(name: &str) -> GtidSet {
    recorded_in("mariadb-10.11.19-recorded-failover.txt", name)
}

/// `name=value` lines of a recorded GTID variables fixture.
fn recorded_in(file: &str, name: &str) -> GtidSet {
    let path = format!("{}/{file}", fixtures_dir());
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let value = text
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("{name} not recorded"));
    GtidSet::parse(Flavor::MariaDb, value).unwrap_or_else(|e| panic!("{name}: {e}"))
}

// docs/design/operator.md#emergency-failover (lostTransactions, exact once the old primary is
// readable) and returning primary (errant set), on recorded MariaDB 10.11.19 values: the
// gtid_binlog_state the Dialect reads gives the exact five transactions; the one-position
// variables cannot tell.
#[test]
fn recorded_mariadb_failover_lost_and_errant_sets() {
    let old_primary = recorded_variable("old_primary.gtid_binlog_state");
    let new_primary = recorded_variable("new_primary.gtid_binlog_state");
    let lost = bloodraven_mysql::lost_transactions(&old_primary, &new_primary);
    assert_eq!(lost.to_string(), "0-1-10..14");
    assert_eq!(
        bloodraven_mysql::errant_transactions(&new_primary, &old_primary).to_string(),
        "0-2-10..12"
    );
    // At promotion time the new primary's set was its slave position.
    let at_promotion = recorded_variable("new_primary.gtid_slave_pos");
    assert_eq!(
        bloodraven_mysql::lost_transactions(&old_primary, &at_promotion),
        lost
    );
    // gtid_binlog_pos / gtid_current_pos credit the whole domain to server 2: everything
    // on the old primary would look lost. This is why the Dialect reads gtid_binlog_state.
    for variable in [
        "new_primary.gtid_binlog_pos",
        "new_primary.gtid_current_pos",
    ] {
        let one_position = recorded_variable(variable);
        assert_eq!(
            bloodraven_mysql::lost_transactions(&old_primary, &one_position).count(),
            14,
            "{variable}"
        );
    }
}

// docs/design/operator.md#planned-failover: zero lost transactions; the old primary rejoins as a
// replica of the new one (recorded MariaDB 10.11.19, repoint without re-applying its own
// transactions).
#[test]
fn recorded_mariadb_planned_failover_loses_nothing_and_rejoins() {
    let file = "mariadb-10.11.19-recorded-planned-failover.txt";
    let a_before = recorded_in(file, "a.before.gtid_binlog_state");
    let a_after = recorded_in(file, "a.after.gtid_binlog_state");
    let b_after = recorded_in(file, "b.after.gtid_binlog_state");
    assert!(bloodraven_mysql::lost_transactions(&a_before, &b_after).is_empty());
    assert!(bloodraven_mysql::errant_transactions(&a_before, &b_after).is_empty());
    assert_eq!(a_after, b_after);
    assert_eq!(b_after.subtract(&a_before).to_string(), "0-4-6..8");
    assert_eq!(
        recorded_in(file, "a.after.gtid_slave_pos"),
        recorded_in(file, "a.after.gtid_current_pos")
    );
}

proptest::proptest! {
    // Brief: no panics on bad input. Any value in any column gives a status or an error.
    #[test]
    fn status_parsing_never_panics_on_arbitrary_values(
        values in proptest::collection::vec(proptest::option::of(".{0,40}"), 10),
        flavor_is_mariadb in proptest::bool::ANY,
    ) {
        let flavor = if flavor_is_mariadb { Flavor::MariaDb } else { Flavor::MySql };
        let columns = [
            "Slave_IO_Running", "Replica_SQL_Running", "Master_Host", "Source_Port",
            "Seconds_Behind_Master", "Using_Gtid", "Gtid_IO_Pos", "Executed_Gtid_Set",
            "Last_IO_Errno", "Channel_Name",
        ];
        let row: StatusRow = columns
            .iter()
            .zip(values)
            .map(|(column, value)| (column.to_string(), value))
            .collect();
        let _ = parse_replication_rows(flavor, &[row.clone(), row]);
    }
}
