//! The write deadline on a live server ([`crate::deadline`]).

use std::time::Duration;

use super::{
    client::LiveMysql,
    error::{LiveError, LiveResult},
    row::column_text,
};
use crate::deadline::{
    arm_statement, clock_query, event_scheduler_query, event_scheduler_runs, install_statements,
    remaining_query, ClockReading, NO_BINLOG,
};

/// What [`LiveMysql::arm_write_deadline`] armed, and mysqld's clock read right after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Armed {
    /// How far ahead of mysqld's `NOW(6)` the deadline was set.
    pub writable_for: Duration,
    /// mysqld's clock against the caller's monotonic clock, read on the same connection.
    pub clock: ClockReading,
}

impl LiveMysql {
    /// Installs the write deadline's table and event (idempotent). Fails when the event
    /// scheduler does not run: without it the switch would never fire.
    pub async fn install_write_deadline(&self) -> LiveResult<()> {
        let mut conn = self.connect().await?;
        let rows = self.rows(&mut conn, event_scheduler_query()).await?;
        let scheduler = rows
            .first()
            .and_then(|row| column_text(row, "event_scheduler"))
            .unwrap_or_default();
        if !event_scheduler_runs(scheduler.trim()) {
            return Err(LiveError::Decode {
                what: "@@GLOBAL.event_scheduler".to_owned(),
                reason: format!(
                    "is {scheduler:?}: the write deadline needs the event scheduler on \
                     (start mysqld with --event-scheduler=ON)"
                ),
            });
        }
        for statement in install_statements(self.flavor().dialect()) {
            self.execute_within(&mut conn, &statement, self.mutation_timeout())
                .await?;
        }
        Ok(())
    }

    /// Moves the write deadline to `writable_for()` from now (mysqld's clock). `writable_for`
    /// is asked once the connection is open, just before the statement that arms, so the time
    /// spent connecting does not push the deadline later than meant. Then reads mysqld's clock
    /// between two readings of `monotonic_ms` (the caller's monotonic clock, in milliseconds),
    /// so the caller can tell whether mysqld's clock stepped since its last arm
    /// ([`crate::deadline::clock_step`]). Returns what it armed and that reading.
    pub async fn arm_write_deadline(
        &self,
        writable_for: impl FnOnce() -> Duration,
        monotonic_ms: impl Fn() -> u64,
    ) -> LiveResult<Armed> {
        let mut conn = self.connect().await?;
        self.execute_within(&mut conn, NO_BINLOG, self.mutation_timeout())
            .await?;
        let writable_for = writable_for();
        self.execute_within(
            &mut conn,
            &arm_statement(writable_for),
            self.mutation_timeout(),
        )
        .await?;
        let before_ms = monotonic_ms();
        let rows = self
            .rows_within(&mut conn, clock_query(), self.mutation_timeout())
            .await?;
        let after_ms = monotonic_ms();
        let text = rows
            .first()
            .and_then(|row| column_text(row, "now_us"))
            .unwrap_or_default();
        let mysqld_us = text.trim().parse().map_err(|error| LiveError::Decode {
            what: "mysqld clock now_us".to_owned(),
            reason: format!("{text:?}: {error}"),
        })?;
        Ok(Armed {
            writable_for,
            clock: ClockReading {
                before_ms,
                after_ms,
                mysqld_us,
            },
        })
    }

    /// Milliseconds until the write deadline (negative once passed); `None` when the switch is
    /// not installed.
    pub async fn write_deadline_remaining_ms(&self) -> LiveResult<Option<i64>> {
        let mut conn = self.connect().await?;
        let rows = match self.rows(&mut conn, &remaining_query()).await {
            Ok(rows) => rows,
            // 1146: no such table, 1049: no such database.
            Err(error) if matches!(error.server_code(), Some(1146 | 1049)) => return Ok(None),
            Err(error) => return Err(error),
        };
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let text = column_text(row, "remaining_ms").unwrap_or_default();
        text.trim()
            .parse()
            .map(Some)
            .map_err(|error| LiveError::Decode {
                what: "write deadline remaining_ms".to_owned(),
                reason: format!("{text:?}: {error}"),
            })
    }
}
