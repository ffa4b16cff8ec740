//! `POST /v1/databases`: a `MysqlDatabase`'s schema created on the active site
//! (docs/design/operator.md#mysqldatabase: "`spec.database` is an SQL schema, which the
//! operator creates on the primary"). It is the one write the sidecar makes for the operator,
//! so it is taken under the same rule that makes mysqld writable: the cached authority names
//! this site, the majority lease is held, no explicit fence is in force, and mysqld reads
//! writable. Anything else is a refusal (a fenced site never takes a write); replication
//! carries the schema to the other sites.

use std::time::Duration;

use bloodraven_api::sidecar::{DatabaseOutcome, EnsureDatabaseRequest, EnsureDatabaseResponse};
use bloodraven_core::lease::WriteDecision;
use bloodraven_mysql::{quote_identifier, quote_string, StatusRow};

use crate::{
    error::{Error, Result},
    state::Shared,
};

/// `ER_WRONG_DB_NAME`: the server refuses the name itself (for example a trailing space).
const SERVER_CODE_WRONG_DB_NAME: u16 = 1102;

/// Ensures `request.database` exists, creating it only on the writable active site. The check
/// and the statement run under the mutation lock the enforcer takes, so no fence decided
/// meanwhile is overtaken; the statement's client timeout is cut to the lease left. After a
/// failed or timed-out statement the schema is looked for again on a fresh connection (an
/// error is an unknown, docs/design/architecture.md#one-poll).
pub(crate) async fn ensure(
    shared: &Shared,
    request: &EnsureDatabaseRequest,
) -> Result<EnsureDatabaseResponse> {
    if let Some(problem) = request.database_problem() {
        return Err(Error::InvalidDatabase { problem });
    }
    let quoted = quote_identifier(&request.database)?;
    let database = request.database.as_str();
    let _serialised = shared.mutation.lock().await;
    writable_lease_left(shared, database)?;
    let mysql = &shared.mysql;
    let mut conn = mysql.connect().await?;
    let read_only = mysql.read_only_on(&mut conn).await?;
    if read_only.fenced || read_only.read_only {
        return Err(Error::NotWritable {
            database: database.to_owned(),
            site: shared.site().to_owned(),
            reason: "mysqld is read-only".to_owned(),
        });
    }
    let query = exists_query(database);
    if found_in(&mysql.rows(&mut conn, &query).await?, database) {
        tracing::debug!(site = shared.site(), database, "database already exists");
        return Ok(response(database, DatabaseOutcome::AlreadyExisted));
    }
    // The reads took time: decide again on the lease left now.
    let lease_left = writable_lease_left(shared, database)?;
    let timeout = mysql.mutation_timeout().min(lease_left);
    let statement = format!("CREATE DATABASE IF NOT EXISTS {quoted}");
    let created = mysql.execute_within(&mut conn, &statement, timeout).await;
    drop(conn);
    let Err(error) = created else {
        tracing::info!(
            site = shared.site(),
            database,
            "created database on the active site"
        );
        return Ok(response(database, DatabaseOutcome::Created));
    };
    shared.metrics.mysql_error();
    tracing::warn!(site = shared.site(), database, %error, "create database returned an error; re-reading");
    let found = match mysql.connect().await {
        Ok(mut conn) => mysql
            .rows(&mut conn, &query)
            .await
            .map(|rows| found_in(&rows, database)),
        Err(reread) => Err(reread),
    };
    match found {
        Ok(true) => {
            tracing::info!(
                site = shared.site(),
                database,
                "database found after the error: created"
            );
            Ok(response(database, DatabaseOutcome::Created))
        }
        Ok(false) if error.server_code() == Some(SERVER_CODE_WRONG_DB_NAME) => {
            Err(Error::DatabaseNameRefused {
                database: database.to_owned(),
                reason: error.to_string(),
            })
        }
        Ok(false) => Err(Error::EnsureDatabase {
            database: database.to_owned(),
            reason: error.to_string(),
        }),
        Err(reread) => Err(Error::EnsureDatabase {
            database: database.to_owned(),
            reason: format!("{error}; re-read failed too, outcome unknown: {reread}"),
        }),
    }
}

/// The lease left when the write rule makes this site writable now; otherwise the refusal.
fn writable_lease_left(shared: &Shared, database: &str) -> Result<Duration> {
    let now = shared.clock.now();
    let lease = shared.lease();
    match lease.desired(now) {
        WriteDecision::Writable => Ok(Duration::from_millis(lease.lease_remaining_ms(now))),
        WriteDecision::ReadOnly(reason) => Err(Error::NotWritable {
            database: database.to_owned(),
            site: shared.site().to_owned(),
            reason: reason.as_str().to_owned(),
        }),
    }
}

/// The query listing the schemas named like `database`.
fn exists_query(database: &str) -> String {
    format!(
        "SELECT SCHEMA_NAME AS schema_name FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = {}",
        quote_string(database)
    )
}

/// Whether [`exists_query`]'s rows name exactly `database` (compared here, byte for byte: the
/// server's `information_schema` comparison may ignore case).
fn found_in(rows: &[StatusRow], database: &str) -> bool {
    rows.iter()
        .any(|row| row.get("schema_name").and_then(Option::as_deref) == Some(database))
}

/// A success: the check and the statement ran on a connection that read mysqld writable.
fn response(database: &str, outcome: DatabaseOutcome) -> EnsureDatabaseResponse {
    EnsureDatabaseResponse {
        database: database.to_owned(),
        outcome,
        read_only: Some(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str) -> StatusRow {
        [("schema_name".to_owned(), Some(name.to_owned()))]
            .into_iter()
            .collect()
    }

    /// A schema differing only in case is another schema (case-sensitive names on Linux),
    /// and the name is a quoted literal in the query whatever it holds.
    #[test]
    fn only_the_exact_name_counts_as_existing() {
        assert!(found_in(&[row("Counter"), row("counter")], "counter"));
        assert!(!found_in(&[row("Counter")], "counter"));
        assert!(!found_in(&[], "counter"));
        assert!(exists_query("it's").ends_with("SCHEMA_NAME = 'it''s'"));
    }
}
