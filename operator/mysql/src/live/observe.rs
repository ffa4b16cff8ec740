//! Reading a server's state: read-only flags, executed GTIDs, replication, and which run of
//! mysqld this is.

use mysql_async::Conn;

use super::{
    client::LiveMysql,
    error::{LiveError, LiveResult},
    row::column_text,
};
use crate::{parse_replication_rows, Flavor, ReplicationStatus, StatusRow};

/// The read-only flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOnlyState {
    /// `@@read_only`.
    pub read_only: bool,
    /// The flag fencing sets: `@@read_only` on MariaDB, `@@super_read_only` on MySQL. This is
    /// the one that decides whether application users can write.
    pub fenced: bool,
}

/// Identifies one run of mysqld.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerRun {
    /// `@@server_id` (MariaDB) or `@@server_uuid` (MySQL).
    pub server_id: String,
    /// The `Uptime` status variable, in seconds.
    pub uptime_seconds: u64,
    /// When this run started by mysqld's own clock, in whole seconds since the Unix epoch:
    /// `UNIX_TIMESTAMP()` minus `Uptime`, both read on mysqld's clock, so a step of that clock
    /// moves neither this nor the run it names (`Uptime` itself jumps by the step). Two reads
    /// of one run differ by at most a second (two statements across a second boundary).
    pub started_at_unix_seconds: i64,
}

/// Everything observed of one server at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Read-only flags.
    pub read_only: ReadOnlyState,
    /// The executed GTID set as the server prints it (see
    /// [`Dialect::gtid_executed_query`](crate::Dialect::gtid_executed_query)).
    pub gtid_executed: String,
    /// Replication status; `None` when the server is not a replica.
    pub replication: Option<ReplicationStatus>,
    /// Which run of mysqld answered.
    pub server: ServerRun,
}

impl LiveMysql {
    /// Opens a connection and observes the server.
    pub async fn observe(&self) -> LiveResult<Snapshot> {
        let mut conn = self.connect().await?;
        let snapshot = self.observe_on(&mut conn).await;
        drop(conn);
        snapshot
    }

    /// Observes the server over `conn`.
    pub async fn observe_on(&self, conn: &mut Conn) -> LiveResult<Snapshot> {
        let dialect = self.flavor().dialect();
        let read_only = self.read_only_on(conn).await?;
        let gtid_rows = self.rows(conn, dialect.gtid_executed_query()).await?;
        let gtid_executed = single_row(&gtid_rows, "gtid executed")
            .map(|row| column_text(row, "gtid_executed").unwrap_or_default())?;
        let replication_rows = self.rows(conn, dialect.replication_status_query()).await?;
        let replication = parse_replication_rows(self.flavor(), &replication_rows)?;
        let server = self.server_run_on(conn).await?;
        Ok(Snapshot {
            read_only,
            gtid_executed,
            replication,
            server,
        })
    }

    /// Reads the read-only flags over `conn`.
    pub async fn read_only_on(&self, conn: &mut Conn) -> LiveResult<ReadOnlyState> {
        let rows = self
            .rows(conn, self.flavor().dialect().read_only_query())
            .await?;
        let row = single_row(&rows, "read_only")?;
        Ok(ReadOnlyState {
            read_only: flag(row, "read_only")?,
            fenced: flag(row, "fenced")?,
        })
    }

    /// Reads the server identity and uptime over `conn`.
    pub async fn server_run_on(&self, conn: &mut Conn) -> LiveResult<ServerRun> {
        let id_query = match self.flavor() {
            Flavor::MariaDb => "SELECT @@GLOBAL.server_id AS server_id",
            Flavor::MySql => "SELECT @@GLOBAL.server_uuid AS server_id",
        };
        let rows = self.rows(conn, id_query).await?;
        let server_id =
            column_text(single_row(&rows, "server id")?, "server_id").ok_or_else(|| {
                LiveError::Decode {
                    what: "server id".to_owned(),
                    reason: "NULL".to_owned(),
                }
            })?;
        let rows = self.rows(conn, "SHOW GLOBAL STATUS LIKE 'Uptime'").await?;
        let uptime = column_text(single_row(&rows, "uptime")?, "Value").unwrap_or_default();
        let uptime_seconds = uptime.trim().parse().map_err(|_| LiveError::Decode {
            what: "uptime".to_owned(),
            reason: format!("{uptime:?} is not a number of seconds"),
        })?;
        let rows = self
            .rows(conn, "SELECT CAST(UNIX_TIMESTAMP() AS SIGNED) AS now_s")
            .await?;
        let now = column_text(single_row(&rows, "unix timestamp")?, "now_s").unwrap_or_default();
        let now_seconds: i64 = now.trim().parse().map_err(|_| LiveError::Decode {
            what: "unix timestamp".to_owned(),
            reason: format!("{now:?} is not a number of seconds"),
        })?;
        Ok(ServerRun {
            server_id,
            uptime_seconds,
            started_at_unix_seconds: now_seconds
                .saturating_sub(i64::try_from(uptime_seconds).unwrap_or(i64::MAX)),
        })
    }
}

fn single_row<'a>(rows: &'a [StatusRow], what: &str) -> LiveResult<&'a StatusRow> {
    match rows {
        [row] => Ok(row),
        _ => Err(LiveError::Decode {
            what: what.to_owned(),
            reason: format!("expected one row, got {}", rows.len()),
        }),
    }
}

fn flag(row: &StatusRow, column: &str) -> LiveResult<bool> {
    match column_text(row, column).as_deref().map(str::trim) {
        Some("1") | Some("ON") => Ok(true),
        Some("0") | Some("OFF") => Ok(false),
        other => Err(LiveError::Decode {
            what: column.to_owned(),
            reason: format!("expected 0 or 1, got {other:?}"),
        }),
    }
}
