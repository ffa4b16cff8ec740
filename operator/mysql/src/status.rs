//! Replication status: one typed value parsed from one `SHOW ... STATUS` row.
//!
//! MariaDB 10.11 (`SHOW ALL SLAVES STATUS` or `SHOW SLAVE STATUS`) names columns
//! `Master_*`/`Slave_*`; MySQL 8.4 (`SHOW REPLICA STATUS`) names them `Source_*`/`Replica_*`.
//! Both spellings are accepted for either flavor; the flavor decides how GTID columns parse.
//! No row at all means the server is not a replica.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Error, Flavor, GtidSet, Result};

/// One result row: column name -> value (`None` for SQL NULL), as the client returned it.
pub type StatusRow = BTreeMap<String, Option<String>>;

/// State of the replica's I/O (receiver) thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum IoThreadState {
    /// `Yes`: connected to the source and receiving.
    Running,
    /// `Connecting` (or MariaDB's `Preparing`): trying to reach the source.
    Connecting,
    /// `No`: stopped.
    Stopped,
}

/// How the replica positions itself on its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum UsingGtid {
    /// File/position replication (MariaDB `Using_Gtid: No`, MySQL `Auto_Position: 0`).
    No,
    /// MariaDB `MASTER_USE_GTID=current_pos`.
    CurrentPos,
    /// MariaDB `MASTER_USE_GTID=slave_pos` (what [`Dialect::repoint`](crate::Dialect::repoint)
    /// configures).
    SlavePos,
    /// MySQL `SOURCE_AUTO_POSITION=1`.
    AutoPosition,
}

impl UsingGtid {
    /// Whether the replica positions by GTID.
    pub fn is_gtid(self) -> bool {
        !matches!(self, UsingGtid::No)
    }
}

/// The last error of a replication thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicationError {
    /// Server error number (`Last_IO_Errno` / `Last_SQL_Errno`).
    pub number: u32,
    /// Error message.
    pub message: String,
    /// MySQL's `Last_*_Error_Timestamp` (MariaDB has none).
    pub timestamp: Option<String>,
}

/// A replica's replication state, from one status row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicationStatus {
    /// MariaDB `Connection_name` / MySQL `Channel_Name`; `""` is the default channel.
    pub connection_name: String,
    /// I/O thread state.
    pub io_state: IoThreadState,
    /// Whether the I/O thread is running (`Slave_IO_Running`/`Replica_IO_Running` = `Yes`).
    pub io_running: bool,
    /// Whether the SQL (applier) thread is running.
    pub sql_running: bool,
    /// The configured source host, as configured (compare it with
    /// [`same_host`](crate::same_host)).
    pub source_host: String,
    /// The configured source port.
    pub source_port: u16,
    /// The replication user.
    pub source_user: String,
    /// The source's server id, once connected (`0`/missing maps to `None`).
    pub source_server_id: Option<u32>,
    /// `Seconds_Behind_Master` / `Seconds_Behind_Source`; `None` (NULL) when replication is
    /// not running, which is not the same as zero.
    pub seconds_behind_source: Option<u64>,
    /// How the replica positions itself.
    pub using_gtid: UsingGtid,
    /// GTIDs received from the source: MariaDB `Gtid_IO_Pos`, MySQL `Retrieved_Gtid_Set`.
    pub retrieved_gtid_set: Option<GtidSet>,
    /// GTIDs applied: MariaDB `Gtid_Slave_Pos` (only in `SHOW ALL SLAVES STATUS`), MySQL
    /// `Executed_Gtid_Set`.
    pub executed_gtid_set: Option<GtidSet>,
    /// Last I/O thread error, if any.
    pub last_io_error: Option<ReplicationError>,
    /// Last SQL thread error, if any.
    pub last_sql_error: Option<ReplicationError>,
}

impl ReplicationStatus {
    /// Both threads running.
    pub fn replicating(&self) -> bool {
        self.io_running && self.sql_running
    }

    /// Parses one status row of `flavor`.
    pub fn from_row(flavor: Flavor, row: &StatusRow) -> Result<ReplicationStatus> {
        let columns = Columns { row };
        let io_state = match columns.required(&["Slave_IO_Running", "Replica_IO_Running"])? {
            (_, value) if value.eq_ignore_ascii_case("yes") => IoThreadState::Running,
            (_, value)
                if value.eq_ignore_ascii_case("connecting")
                    || value.eq_ignore_ascii_case("preparing") =>
            {
                IoThreadState::Connecting
            }
            (_, value) if value.eq_ignore_ascii_case("no") => IoThreadState::Stopped,
            (column, value) => {
                return Err(Error::StatusColumn {
                    column: column.to_string(),
                    reason: format!("unknown thread state {value:?}"),
                })
            }
        };
        let sql_running = columns.yes_no(&["Slave_SQL_Running", "Replica_SQL_Running"])?;
        let (_, source_host) = columns.required(&["Master_Host", "Source_Host"])?;
        let source_port = columns
            .number(&["Master_Port", "Source_Port"])?
            .ok_or_else(|| Error::StatusColumn {
                column: "Master_Port/Source_Port".to_string(),
                reason: "missing or NULL".to_string(),
            })?;
        let source_server_id = columns
            .number::<u32>(&["Master_Server_Id", "Source_Server_Id"])?
            .filter(|&id| id != 0);
        let using_gtid = match columns.optional(&["Using_Gtid", "Auto_Position"]) {
            None => UsingGtid::No,
            Some((column, value)) => match value.to_ascii_lowercase().as_str() {
                "no" | "0" | "" => UsingGtid::No,
                "current_pos" => UsingGtid::CurrentPos,
                "slave_pos" => UsingGtid::SlavePos,
                "1" => UsingGtid::AutoPosition,
                _ => {
                    return Err(Error::StatusColumn {
                        column: column.to_string(),
                        reason: format!("unknown GTID mode {value:?}"),
                    })
                }
            },
        };
        Ok(ReplicationStatus {
            connection_name: columns
                .optional(&["Connection_name", "Channel_Name"])
                .map(|(_, value)| value.to_string())
                .unwrap_or_default(),
            io_running: io_state == IoThreadState::Running,
            io_state,
            sql_running,
            source_host: source_host.to_string(),
            source_port,
            source_user: columns
                .optional(&["Master_User", "Source_User"])
                .map(|(_, value)| value.to_string())
                .unwrap_or_default(),
            source_server_id,
            seconds_behind_source: columns
                .number(&["Seconds_Behind_Master", "Seconds_Behind_Source"])?,
            using_gtid,
            retrieved_gtid_set: columns.gtid_set(flavor, &["Gtid_IO_Pos", "Retrieved_Gtid_Set"])?,
            executed_gtid_set: columns
                .gtid_set(flavor, &["Gtid_Slave_Pos", "Executed_Gtid_Set"])?,
            last_io_error: columns.error(
                &["Last_IO_Errno"],
                &["Last_IO_Error"],
                &["Last_IO_Error_Timestamp"],
            )?,
            last_sql_error: columns.error(
                &["Last_SQL_Errno"],
                &["Last_SQL_Error"],
                &["Last_SQL_Error_Timestamp"],
            )?,
        })
    }
}

/// Parses the rows of `SHOW ALL SLAVES STATUS` / `SHOW SLAVE STATUS` / `SHOW REPLICA STATUS`.
///
/// No row: not a replica (`Ok(None)`). One row: that channel. Several rows (MariaDB
/// multi-source, MySQL channels): the default channel (empty name), or
/// [`Error::NoDefaultChannel`].
pub fn parse_replication_rows(
    flavor: Flavor,
    rows: &[StatusRow],
) -> Result<Option<ReplicationStatus>> {
    let statuses = rows
        .iter()
        .map(|row| ReplicationStatus::from_row(flavor, row))
        .collect::<Result<Vec<_>>>()?;
    if statuses.len() <= 1 {
        return Ok(statuses.into_iter().next());
    }
    let names: Vec<String> = statuses.iter().map(|s| s.connection_name.clone()).collect();
    statuses
        .into_iter()
        .find(|status| status.connection_name.is_empty())
        .map(Some)
        .ok_or(Error::NoDefaultChannel(names))
}

/// Case-insensitive column access over a row, trying each spelling in turn.
struct Columns<'a> {
    row: &'a StatusRow,
}

impl<'a> Columns<'a> {
    /// The first present, non-NULL value among `names`, with the column name found.
    fn optional(&self, names: &[&'static str]) -> Option<(&'a str, &'a str)> {
        names.iter().find_map(|name| {
            self.row
                .iter()
                .find(|(column, _)| column.eq_ignore_ascii_case(name))
                .and_then(|(column, value)| Some((column.as_str(), value.as_deref()?.trim())))
        })
    }

    fn required(&self, names: &[&'static str]) -> Result<(&'a str, &'a str)> {
        self.optional(names).ok_or_else(|| Error::StatusColumn {
            column: names.join("/"),
            reason: "missing or NULL".to_string(),
        })
    }

    fn yes_no(&self, names: &[&'static str]) -> Result<bool> {
        match self.required(names)? {
            (_, value) if value.eq_ignore_ascii_case("yes") => Ok(true),
            (_, value) if value.eq_ignore_ascii_case("no") => Ok(false),
            (column, value) => Err(Error::StatusColumn {
                column: column.to_string(),
                reason: format!("expected Yes or No, got {value:?}"),
            }),
        }
    }

    /// A decimal number; NULL, missing or empty is `None`.
    fn number<T: std::str::FromStr>(&self, names: &[&'static str]) -> Result<Option<T>> {
        match self.optional(names) {
            None | Some((_, "")) => Ok(None),
            Some((column, value)) => value.parse().map(Some).map_err(|_| Error::StatusColumn {
                column: column.to_string(),
                reason: format!("expected a non-negative number, got {value:?}"),
            }),
        }
    }

    fn gtid_set(&self, flavor: Flavor, names: &[&'static str]) -> Result<Option<GtidSet>> {
        self.optional(names)
            .map(|(column, value)| {
                GtidSet::parse(flavor, value).map_err(|e| Error::StatusColumn {
                    column: column.to_string(),
                    reason: e.to_string(),
                })
            })
            .transpose()
    }

    fn error(
        &self,
        number: &[&'static str],
        message: &[&'static str],
        timestamp: &[&'static str],
    ) -> Result<Option<ReplicationError>> {
        let number: u32 = self.number(number)?.unwrap_or(0);
        let message = self.optional(message).map(|(_, m)| m).unwrap_or_default();
        if number == 0 && message.is_empty() {
            return Ok(None);
        }
        Ok(Some(ReplicationError {
            number,
            message: message.to_string(),
            timestamp: self
                .optional(timestamp)
                .map(|(_, t)| t.to_string())
                .filter(|t| !t.is_empty()),
        }))
    }
}
