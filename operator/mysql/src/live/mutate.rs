//! Mutations, each followed by a re-read: an error or a timeout is an unknown
//! (docs/design/requirements.md R001.15).

use std::time::Duration;

use super::{
    client::LiveMysql,
    error::{LiveError, LiveResult},
    observe::Snapshot,
    row::column_text,
};
use crate::{GtidSet, ReplicationSource, WaitOutcome};

/// A fact as far as it could be observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed<T> {
    /// Read from the server after the mutation.
    Known(T),
    /// The re-read failed too; the text says why. Nothing may be assumed.
    Unknown(String),
}

impl<T> Observed<T> {
    /// The known value, if any.
    pub fn known(&self) -> Option<&T> {
        match self {
            Observed::Known(value) => Some(value),
            Observed::Unknown(_) => None,
        }
    }
}

/// What a mutation did, as re-read afterwards.
#[derive(Debug)]
pub struct MutationOutcome {
    /// What was attempted, for logs.
    pub what: &'static str,
    /// The error the mutation returned, if any (a timeout included). It does not mean the
    /// mutation did not happen.
    pub error: Option<LiveError>,
    /// Whether the server is now in the state the mutation aimed for, as re-read.
    pub applied: Observed<bool>,
    /// The re-read itself, when it succeeded.
    pub snapshot: Option<Snapshot>,
}

impl MutationOutcome {
    /// Whether the re-read shows the mutation in effect.
    pub fn is_applied(&self) -> bool {
        matches!(self.applied, Observed::Known(true))
    }
}

/// What [`LiveMysql::drain_received`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedDrain {
    /// What had been received when receiving stopped; `None` when nothing was (or the server
    /// is no replica).
    pub retrieved: Option<GtidSet>,
    /// Whether all of it was applied within the timeout.
    pub outcome: WaitOutcome,
}

impl LiveMysql {
    /// Runs `statements` in order on one connection (stopping at the first error), then
    /// re-reads the server on a fresh connection and judges the result with `applied`.
    async fn mutate(
        &self,
        what: &'static str,
        statements: Vec<String>,
        applied: impl Fn(&Snapshot) -> bool,
    ) -> MutationOutcome {
        let error = self.run_all(&statements).await.err();
        if let Some(error) = &error {
            tracing::warn!(mutation = what, %error, "mysql mutation returned an error; re-reading");
        }
        match self.observe().await {
            Ok(snapshot) => MutationOutcome {
                what,
                error,
                applied: Observed::Known(applied(&snapshot)),
                snapshot: Some(snapshot),
            },
            Err(reread) => MutationOutcome {
                what,
                error,
                applied: Observed::Unknown(reread.to_string()),
                snapshot: None,
            },
        }
    }

    async fn run_all(&self, statements: &[String]) -> LiveResult<()> {
        let mut conn = self.connect().await?;
        for statement in statements {
            self.execute_within(&mut conn, statement, self.mutation_timeout())
                .await?;
        }
        Ok(())
    }

    /// Fences: makes the server refuse writes from application users.
    pub async fn fence(&self) -> MutationOutcome {
        let statements = self.flavor().dialect().fence();
        self.mutate("fence", statements, |s| s.read_only.fenced)
            .await
    }

    /// Unfences: makes the server writable.
    pub async fn unfence(&self) -> MutationOutcome {
        let statements = self.flavor().dialect().unfence();
        self.mutate("unfence", statements, |s| {
            !s.read_only.fenced && !s.read_only.read_only
        })
        .await
    }

    /// Stops replication threads.
    pub async fn stop_replication(&self) -> MutationOutcome {
        let statement = self.flavor().dialect().stop_replication();
        self.mutate("stop replication", vec![statement], |s| {
            s.replication
                .as_ref()
                .is_none_or(|r| !r.io_running && !r.sql_running)
        })
        .await
    }

    /// Starts replication threads.
    pub async fn start_replication(&self) -> MutationOutcome {
        let statement = self.flavor().dialect().start_replication();
        self.mutate("start replication", vec![statement], |s| {
            s.replication.as_ref().is_some_and(|r| r.sql_running)
        })
        .await
    }

    /// Stops replication and forgets the source (promotion's detach step; read-only untouched).
    pub async fn detach(&self) -> MutationOutcome {
        let statements = self.flavor().dialect().detach();
        self.mutate("detach replication", statements, |s| {
            s.replication.is_none()
        })
        .await
    }

    /// Points replication at `source` (by its canonical host name) and starts it.
    pub async fn repoint(&self, source: &ReplicationSource) -> MutationOutcome {
        let statements = match self.flavor().dialect().repoint(source) {
            Ok(statements) => statements,
            Err(error) => {
                return MutationOutcome {
                    what: "repoint",
                    error: Some(error.into()),
                    applied: Observed::Unknown("statement was not built".to_owned()),
                    snapshot: None,
                }
            }
        };
        let host = source.host.clone();
        let port = source.port;
        self.mutate("repoint", statements, move |s| {
            s.replication
                .as_ref()
                .is_some_and(|r| r.source_host == host && r.source_port == port && r.sql_running)
        })
        .await
    }

    /// An emergency promotion's drain: makes sure the applier runs, stops receiving (the I/O
    /// thread), and waits until everything received (the retrieved set as re-read after
    /// receiving stopped: MariaDB `Gtid_IO_Pos`, MySQL `Retrieved_Gtid_Set`) is applied, or
    /// `timeout` passes. Replication stays configured; detaching is the caller's next step.
    /// A server that is no replica, or received nothing, has nothing to drain.
    ///
    /// The applier is started before receiving stops, never after: MariaDB in GTID mode
    /// (`MASTER_USE_GTID=slave_pos`) discards the relay log when a replication thread starts
    /// while both are stopped, which would throw away exactly what this drain is for.
    pub async fn drain_received(&self, timeout: Duration) -> LiveResult<ReceivedDrain> {
        let dialect = self.flavor().dialect();
        let mut conn = self.connect().await?;
        let Some(before) = self.observe_on(&mut conn).await?.replication else {
            return Ok(ReceivedDrain {
                retrieved: None,
                outcome: WaitOutcome::Reached,
            });
        };
        if !before.sql_running {
            self.execute_within(&mut conn, &dialect.start_applier(), self.mutation_timeout())
                .await?;
        }
        self.execute_within(
            &mut conn,
            &dialect.stop_receiving(),
            self.mutation_timeout(),
        )
        .await?;
        let retrieved = self
            .observe_on(&mut conn)
            .await?
            .replication
            .and_then(|replication| replication.retrieved_gtid_set)
            .filter(|retrieved| !retrieved.is_empty());
        drop(conn);
        let outcome = match &retrieved {
            None => WaitOutcome::Reached,
            Some(retrieved) => self.wait_for_gtid_set(retrieved, timeout).await?,
        };
        Ok(ReceivedDrain { retrieved, outcome })
    }

    /// Waits until the server has applied `set` or `timeout` passes (server-side wait; the
    /// client waits `timeout` plus the statement timeout).
    pub async fn wait_for_gtid_set(
        &self,
        set: &GtidSet,
        timeout: Duration,
    ) -> LiveResult<WaitOutcome> {
        let dialect = self.flavor().dialect();
        let statement = dialect.wait_for_gtid_set(set, timeout)?;
        let mut conn = self.connect().await?;
        let rows = self
            .rows_within(
                &mut conn,
                &statement,
                timeout.saturating_add(self.options().statement_timeout),
            )
            .await?;
        let value = match rows.as_slice() {
            [row] => column_text(row, "outcome"),
            _ => {
                return Err(LiveError::Decode {
                    what: "gtid wait outcome".to_owned(),
                    reason: format!("expected one row, got {}", rows.len()),
                })
            }
        };
        let parsed = match value {
            None => None,
            Some(text) => Some(text.trim().parse::<i64>().map_err(|_| LiveError::Decode {
                what: "gtid wait outcome".to_owned(),
                reason: format!("{text:?} is not an integer"),
            })?),
        };
        Ok(dialect.wait_outcome(parsed)?)
    }

    /// Kills every client connection except this one, server and replication threads, and
    /// the users in `excluded_users` (the sidecar's own, the replication user). Returns how
    /// many were killed; a connection that ended by itself meanwhile is not counted.
    pub async fn kill_client_connections(&self, excluded_users: &[&str]) -> LiveResult<u64> {
        let dialect = self.flavor().dialect();
        let mut conn = self.connect().await?;
        let rows = self
            .rows(&mut conn, &dialect.client_connections_query(excluded_users))
            .await?;
        let mut killed = 0;
        for row in &rows {
            let Some(id) = column_text(row, "id").and_then(|id| id.trim().parse::<u64>().ok())
            else {
                continue;
            };
            match self.execute(&mut conn, &dialect.kill_connection(id)).await {
                Ok(()) => killed += 1,
                // 1094: unknown thread id, the connection ended by itself.
                Err(error) if error.server_code() == Some(1094) => {}
                Err(error) => return Err(error),
            }
        }
        tracing::info!(killed, "killed client connections");
        Ok(killed)
    }
}
