//! Connecting and running statements, each bounded by a timeout.

use std::{fmt, future::Future, time::Duration};

use mysql_async::{prelude::Queryable, Conn, OptsBuilder, Row};

use super::{
    error::{LiveError, LiveResult},
    row::status_row,
};
use crate::{Flavor, StatusRow};

/// Where and how to connect, and how long to wait.
#[derive(Clone, PartialEq, Eq)]
pub struct ConnectOptions {
    /// Host name or IP address of mysqld.
    pub host: String,
    /// TCP port of mysqld.
    pub port: u16,
    /// User name.
    pub user: String,
    /// Password (never printed by `Debug`).
    pub password: String,
    /// Bound on opening a connection (TCP, TLS-less handshake, session setup).
    pub connect_timeout: Duration,
    /// Bound on one statement. A statement that times out may still be applied by the server.
    pub statement_timeout: Duration,
}

impl fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &"***")
            .field("connect_timeout", &self.connect_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .finish()
    }
}

impl ConnectOptions {
    /// `host:port`.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// A client for one mysqld of a known flavor. It opens a fresh connection per operation, so a
/// connection torn down by a timeout never leaks into the next operation.
#[derive(Debug, Clone)]
pub struct LiveMysql {
    flavor: Flavor,
    options: ConnectOptions,
    mutation_timeout: Option<Duration>,
}

impl LiveMysql {
    /// A client for the mysqld at `options`, speaking `flavor`.
    pub fn new(flavor: Flavor, options: ConnectOptions) -> Self {
        Self {
            flavor,
            options,
            mutation_timeout: None,
        }
    }

    /// The same client with a separate bound on mutating statements; the re-read after a
    /// mutation keeps the statement timeout.
    pub fn with_mutation_timeout(mut self, timeout: Duration) -> Self {
        self.mutation_timeout = Some(timeout);
        self
    }

    /// The bound on one mutating statement.
    pub fn mutation_timeout(&self) -> Duration {
        self.mutation_timeout
            .unwrap_or(self.options.statement_timeout)
    }

    /// The flavor.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The connection options.
    pub fn options(&self) -> &ConnectOptions {
        &self.options
    }

    /// Opens a connection and runs the flavor's session setup, within the connect timeout.
    pub async fn connect(&self) -> LiveResult<Conn> {
        let options = &self.options;
        let opts = OptsBuilder::default()
            .ip_or_hostname(options.host.clone())
            .tcp_port(options.port)
            .user(Some(options.user.clone()))
            .pass(Some(options.password.clone()))
            .prefer_socket(false)
            .stmt_cache_size(0);
        let address = options.address();
        let connect = async {
            let mut conn = Conn::new(opts).await.map_err(|source| LiveError::Connect {
                address: address.clone(),
                source,
            })?;
            let setup = self.flavor.dialect().session_setup();
            conn.query_drop(setup)
                .await
                .map_err(|source| LiveError::Query {
                    statement: setup.to_owned(),
                    source,
                })?;
            Ok(conn)
        };
        bounded(
            options.connect_timeout,
            format!("connect to mysql at {address}"),
            connect,
        )
        .await
    }

    /// Runs one statement that returns no rows, within the statement timeout.
    pub async fn execute(&self, conn: &mut Conn, statement: &str) -> LiveResult<()> {
        self.execute_within(conn, statement, self.options.statement_timeout)
            .await
    }

    /// Runs one statement that returns no rows, within `timeout`.
    pub async fn execute_within(
        &self,
        conn: &mut Conn,
        statement: &str,
        timeout: Duration,
    ) -> LiveResult<()> {
        let redacted = LiveError::redacted(statement);
        let run = async {
            conn.query_drop(statement)
                .await
                .map_err(|source| LiveError::Query {
                    statement: redacted.clone(),
                    source,
                })
        };
        bounded(timeout, format!("run {redacted:?}"), run).await
    }

    /// Runs one query and returns its rows as text, within `timeout`.
    pub async fn rows_within(
        &self,
        conn: &mut Conn,
        statement: &str,
        timeout: Duration,
    ) -> LiveResult<Vec<StatusRow>> {
        let redacted = LiveError::redacted(statement);
        let run = async {
            let rows: Vec<Row> =
                conn.query(statement)
                    .await
                    .map_err(|source| LiveError::Query {
                        statement: redacted.clone(),
                        source,
                    })?;
            Ok(rows.iter().map(status_row).collect())
        };
        bounded(timeout, format!("run {redacted:?}"), run).await
    }

    /// Runs one query and returns its rows as text, within the statement timeout.
    pub async fn rows(&self, conn: &mut Conn, statement: &str) -> LiveResult<Vec<StatusRow>> {
        self.rows_within(conn, statement, self.options.statement_timeout)
            .await
    }
}

/// Runs `future` within `timeout`, turning expiry into [`LiveError::Timeout`].
async fn bounded<T>(
    timeout: Duration,
    what: String,
    future: impl Future<Output = LiveResult<T>>,
) -> LiveResult<T> {
    match tokio::time::timeout(timeout, future).await {
        Ok(result) => result,
        Err(_elapsed) => Err(LiveError::Timeout { what, timeout }),
    }
}
