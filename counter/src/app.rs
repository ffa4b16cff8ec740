//! The counter and its database connection, with the configured connection policy.

use std::{
    net::{IpAddr, SocketAddr},
    time::Duration,
};

use bloodraven_mysql::{
    live::{ConnectOptions, LiveMysql},
    quote_identifier, Flavor,
};
use mysql_async::Conn;
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use crate::{
    error::{Error, Result},
    resolve::HostResolver,
    schema,
};

/// MySQL's "running with --read-only" error.
pub const ER_OPTION_PREVENTS_STATEMENT: u16 = 1290;
/// MySQL's "table doesn't exist" error.
pub const ER_NO_SUCH_TABLE: u16 = 1146;

/// How the app treats its database connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "camelCase")]
pub enum Policy {
    /// One connection forever (replaced only when it breaks): after a failover it keeps
    /// talking to the demoted site, and writes get ERROR 1290 (docs/design/requirements.md
    /// R000.20).
    Hold,
    /// Reconnect on ERROR 1290 and when the host name resolves to another address.
    Reconnect,
}

/// What the app runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Address of the HTTP API.
    pub listen: SocketAddr,
    /// Database host (the primary Service).
    pub host: String,
    /// Database port.
    pub port: u16,
    /// Database holding the counter table.
    pub database: String,
    /// App user.
    pub user: String,
    /// Its password.
    pub password: String,
    /// Connection policy.
    pub policy: Policy,
    /// Background poll interval.
    pub poll_interval: Duration,
    /// Background write interval (`None`: writes only on `POST`).
    pub write_interval: Option<Duration>,
    /// DNS server; the system's when `None`.
    pub dns_server: Option<SocketAddr>,
    /// Bound on connecting and on one statement.
    pub timeout: Duration,
    /// MySQL flavor.
    pub flavor: Flavor,
}

/// The body of `GET`/`POST /api/counter`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CounterView {
    /// The counter's value.
    pub value: i64,
    /// The server that answered: its `@@hostname`, on Kubernetes the pod name
    /// (docs/design/requirements.md R001.2: `"dbHost":"mysql-playground-iad-…"`).
    pub db_host: String,
    /// Whether that server is read-only.
    pub read_only: bool,
}

struct Held {
    conn: Conn,
    ip: IpAddr,
    client: LiveMysql,
}

/// The counter app's state.
pub struct Counter {
    settings: Settings,
    resolver: HostResolver,
    held: Mutex<Option<Held>>,
    last_timer_write: std::sync::Mutex<Option<std::time::Instant>>,
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counter")
            .field("host", &self.settings.host)
            .field("policy", &self.settings.policy)
            .finish()
    }
}

impl Counter {
    /// A counter that connects lazily.
    pub fn new(settings: Settings) -> Result<Self> {
        let resolver = HostResolver::new(settings.dns_server)?;
        Ok(Self {
            settings,
            resolver,
            held: Mutex::new(None),
            last_timer_write: std::sync::Mutex::new(None),
        })
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// After ERROR 1146 (the table is missing: the schema was created after this connection
    /// was opened, or the table was dropped), creates the table again on the held connection;
    /// `true` when the caller should retry once.
    async fn recreated_table<T>(&self, held: &mut Option<Held>, result: &Result<T>) -> bool {
        if result.as_ref().err().and_then(Error::server_code) != Some(ER_NO_SUCH_TABLE) {
            return false;
        }
        let Some(held) = held.as_mut() else {
            return false;
        };
        tracing::info!(database = %self.settings.database, "counter table missing: creating it");
        self.prepare(&held.client, &mut held.conn).await;
        true
    }

    /// Whether the background loop should write now (a write interval is set and at least
    /// that long passed since the last timer write); marks the write as taken.
    pub fn due_write(&self) -> bool {
        let Some(every) = self.settings.write_interval else {
            return false;
        };
        let now = std::time::Instant::now();
        let mut last = self
            .last_timer_write
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.is_some_and(|at| now.duration_since(at) < every) {
            return false;
        }
        *last = Some(now);
        true
    }

    /// Reads the counter over the held connection.
    pub async fn read(&self) -> Result<CounterView> {
        let mut held = self.held.lock().await;
        let mut result = self.read_on(&mut held).await;
        if self.recreated_table(&mut held, &result).await {
            result = self.read_on(&mut held).await;
        }
        forget_if_broken(&mut held, &result);
        result
    }

    /// The server-side id of the held connection (`CONNECTION_ID()`, from its handshake),
    /// `None` while none is held.
    pub async fn connection_id(&self) -> Option<u32> {
        self.held.lock().await.as_ref().map(|held| held.conn.id())
    }

    /// Increments the counter. With [`Policy::Reconnect`], an ERROR 1290 drops the
    /// connection, re-resolves the host and retries once.
    pub async fn increment(&self) -> Result<CounterView> {
        let mut held = self.held.lock().await;
        let mut result = self.increment_on(&mut held).await;
        if self.recreated_table(&mut held, &result).await {
            result = self.increment_on(&mut held).await;
        }
        if self.settings.policy == Policy::Reconnect
            && result.as_ref().err().and_then(Error::server_code)
                == Some(ER_OPTION_PREVENTS_STATEMENT)
        {
            tracing::warn!(host = %self.settings.host, "write refused with ERROR 1290: reconnecting");
            *held = None;
            result = self.increment_on(&mut held).await;
        }
        forget_if_broken(&mut held, &result);
        result
    }

    /// One background poll: with [`Policy::Reconnect`], first drops the connection if the
    /// host resolves elsewhere now; then reads.
    pub async fn poll(&self) -> Result<CounterView> {
        if self.settings.policy == Policy::Reconnect {
            match self.resolver.resolve(&self.settings.host).await {
                Ok(ips) => {
                    let mut held = self.held.lock().await;
                    let moved = held.as_ref().is_some_and(|h| !ips.contains(&h.ip));
                    if moved {
                        tracing::info!(host = %self.settings.host, addresses = ?ips, "database host resolves elsewhere: reconnecting");
                        *held = None;
                    }
                }
                Err(error) => tracing::warn!(%error, "resolve database host"),
            }
        }
        self.read().await
    }

    async fn connection<'h>(&self, held: &'h mut Option<Held>) -> Result<&'h mut Held> {
        if held.is_none() {
            *held = Some(self.connect().await?);
        }
        match held.as_mut() {
            Some(held) => Ok(held),
            None => Err(Error::Decode {
                what: "connection".to_owned(),
                reason: "missing right after connecting".to_owned(),
            }),
        }
    }

    async fn connect(&self) -> Result<Held> {
        let ips = self.resolver.resolve(&self.settings.host).await?;
        let mut last_error = None;
        for ip in ips {
            let client = LiveMysql::new(
                self.settings.flavor,
                ConnectOptions {
                    host: ip.to_string(),
                    port: self.settings.port,
                    user: self.settings.user.clone(),
                    password: self.settings.password.clone(),
                    connect_timeout: self.settings.timeout,
                    statement_timeout: self.settings.timeout,
                },
            );
            match client.connect().await {
                Ok(mut conn) => {
                    self.prepare(&client, &mut conn).await;
                    tracing::info!(host = %self.settings.host, address = %ip, policy = ?self.settings.policy, "connected to database");
                    return Ok(Held { conn, ip, client });
                }
                Err(error) => last_error = Some(error),
            }
        }
        Err(match last_error {
            Some(error) => error.into(),
            None => Error::Resolve {
                host: self.settings.host.clone(),
                reason: "no address".to_owned(),
            },
        })
    }

    /// Creates the table if it can (a read-only server refuses: fine) and warns when the
    /// app user holds a privilege that bypasses read_only.
    async fn prepare(&self, client: &LiveMysql, conn: &mut Conn) {
        match schema::create_table(&self.settings.database) {
            Ok(statement) => {
                if let Err(error) = client.execute(conn, &statement).await {
                    tracing::debug!(%error, "create counter table");
                }
            }
            Err(error) => tracing::warn!(%error, "build create table statement"),
        }
        match client.rows(conn, "SHOW GRANTS").await {
            Ok(rows) => {
                let lines: Vec<String> = rows
                    .iter()
                    .filter_map(|row| row.values().next().cloned().flatten())
                    .collect();
                for finding in schema::bypasses(self.settings.flavor, &lines) {
                    tracing::error!(privilege = %finding.privilege, reason = %finding.reason, "app user can bypass read_only: fencing does not protect this app");
                }
            }
            Err(error) => tracing::debug!(%error, "show grants"),
        }
    }

    async fn read_on(&self, held: &mut Option<Held>) -> Result<CounterView> {
        let held = self.connection(held).await?;
        let database = quote_identifier(&self.settings.database)?;
        let table = quote_identifier(schema::TABLE)?;
        let query = format!(
            "SELECT COALESCE((SELECT value FROM {database}.{table} WHERE id = 1), 0) AS value, \
             @@hostname AS db_host, @@GLOBAL.read_only AS read_only"
        );
        let rows = held.client.rows(&mut held.conn, &query).await?;
        let [row] = rows.as_slice() else {
            return Err(Error::Decode {
                what: "counter".to_owned(),
                reason: format!("expected one row, got {}", rows.len()),
            });
        };
        let text = |column: &str| row.get(column).cloned().flatten().unwrap_or_default();
        let value = text("value")
            .trim()
            .parse::<i64>()
            .map_err(|_| Error::Decode {
                what: "counter value".to_owned(),
                reason: format!("{:?} is not an integer", text("value")),
            })?;
        Ok(CounterView {
            value,
            db_host: text("db_host"),
            read_only: text("read_only").trim() == "1",
        })
    }

    async fn increment_on(&self, held: &mut Option<Held>) -> Result<CounterView> {
        let statement = {
            let database = quote_identifier(&self.settings.database)?;
            let table = quote_identifier(schema::TABLE)?;
            format!(
                "INSERT INTO {database}.{table} (id, value) VALUES (1, 1) \
                 ON DUPLICATE KEY UPDATE value = value + 1"
            )
        };
        {
            let connection = self.connection(held).await?;
            connection
                .client
                .execute(&mut connection.conn, &statement)
                .await?;
        }
        self.read_on(held).await
    }
}

/// Drops the connection after an error that is not the server refusing a statement: the
/// connection itself is broken or timed out (both policies replace a dead connection).
fn forget_if_broken<T>(held: &mut Option<Held>, result: &Result<T>) {
    if let Err(error) = result {
        if error.server_code().is_none() {
            *held = None;
        }
    }
}
