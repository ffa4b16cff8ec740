//! Turning live observations and mutation outcomes into wire types.

use bloodraven_api::{
    sidecar::{MutationReport, MysqlObservation, MysqldRun, ReplicationState},
    Timestamp,
};
use bloodraven_mysql::live::{LiveError, MutationOutcome, Snapshot};

/// A successful observation.
pub(crate) fn from_snapshot(snapshot: &Snapshot) -> MysqlObservation {
    let replication = snapshot
        .replication
        .as_ref()
        .map(|status| ReplicationState {
            running: status.io_running && status.sql_running,
            source_host: Some(status.source_host.clone()).filter(|h| !h.is_empty()),
            source_port: Some(status.source_port).filter(|p| *p != 0),
            seconds_behind_source: status.seconds_behind_source,
            last_error: status
                .last_io_error
                .as_ref()
                .or(status.last_sql_error.as_ref())
                .map(|e| format!("{}: {}", e.number, e.message)),
        });
    MysqlObservation {
        reachable: true,
        error: None,
        down: false,
        read_only: Some(snapshot.read_only.fenced),
        gtid_executed: Some(snapshot.gtid_executed.clone()),
        replication,
        mysqld: Some(MysqldRun {
            server_id: snapshot.server.server_id.clone(),
            uptime_seconds: snapshot.server.uptime_seconds,
            // By mysqld's clock, so that a step of it is not taken for a restart.
            started_at: Timestamp::from_unix_millis(
                snapshot.server.started_at_unix_seconds.saturating_mul(1000),
            ),
        }),
    }
}

/// A failed observation: everything unknown.
pub(crate) fn unreachable(error: &LiveError) -> MysqlObservation {
    MysqlObservation {
        reachable: false,
        error: Some(error.to_string()),
        down: error.refused(),
        read_only: None,
        gtid_executed: None,
        replication: None,
        mysqld: None,
    }
}

/// A mutation's outcome as reported on the wire, with the re-read observation.
pub(crate) fn report(outcome: &MutationOutcome) -> MutationReport {
    let observed = match (&outcome.snapshot, &outcome.applied) {
        (Some(snapshot), _) => from_snapshot(snapshot),
        (None, bloodraven_mysql::live::Observed::Unknown(reason)) => MysqlObservation {
            error: Some(reason.clone()),
            ..unreachable_text()
        },
        (None, bloodraven_mysql::live::Observed::Known(_)) => unreachable_text(),
    };
    MutationReport {
        error: outcome.error.as_ref().map(ToString::to_string),
        observed,
    }
}

fn unreachable_text() -> MysqlObservation {
    MysqlObservation {
        reachable: false,
        error: Some("not re-read".to_owned()),
        down: false,
        read_only: None,
        gtid_executed: None,
        replication: None,
        mysqld: None,
    }
}
