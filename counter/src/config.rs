//! Flags and environment variables.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use bloodraven_mysql::Flavor;
use clap::Parser;

use crate::{
    app::{Policy, Settings},
    error::{Error, Result},
};

/// The counter app's command line; every flag also reads an environment variable.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "bloodraven-counter",
    version,
    about = "Bloodraven's counter demo app"
)]
pub struct Config {
    /// Address of the HTTP API.
    #[arg(long, env = "COUNTER_LISTEN", default_value = "0.0.0.0:8090")]
    pub listen: SocketAddr,
    /// Database host: the group's primary Service (`mysql-<group>-primary`).
    #[arg(
        long,
        env = "COUNTER_DB_HOST",
        default_value = "mysql-playground-primary"
    )]
    pub db_host: String,
    /// Database port.
    #[arg(long, env = "COUNTER_DB_PORT", default_value_t = 3306)]
    pub db_port: u16,
    /// Database (schema) holding the counter table.
    #[arg(long, env = "COUNTER_DATABASE", default_value = "counter")]
    pub database: String,
    /// App user (granted with bloodraven-mysql's grant builder, see `schema`).
    #[arg(long, env = "COUNTER_DB_USER", default_value = "counter")]
    pub db_user: String,
    /// Its password.
    #[arg(long, env = "COUNTER_DB_PASSWORD", hide_env_values = true)]
    pub db_password: Option<String>,
    /// A file holding its password; wins over `--db-password`.
    #[arg(long, env = "COUNTER_DB_PASSWORD_FILE")]
    pub db_password_file: Option<PathBuf>,
    /// Connection policy: `hold` keeps one connection forever (the story of
    /// docs/design/requirements.md R000.20), `reconnect` reconnects on ERROR 1290 and when the
    /// host resolves elsewhere.
    #[arg(long, env = "COUNTER_POLICY", value_enum, default_value = "hold")]
    pub policy: Policy,
    /// Background poll interval in milliseconds.
    #[arg(long, env = "COUNTER_POLL_INTERVAL_MS", default_value_t = 1000)]
    pub poll_interval_ms: u64,
    /// Also increment the counter on a timer, every this many milliseconds (0: only on
    /// `POST /api/counter`). The playground's counter writes on its own so its value climbs.
    #[arg(long, env = "COUNTER_WRITE_INTERVAL_MS", default_value_t = 0)]
    pub write_interval_ms: u64,
    /// DNS server to query (`ip:port`); the system's resolv.conf when absent.
    #[arg(long, env = "COUNTER_DNS_SERVER")]
    pub dns_server: Option<SocketAddr>,
    /// Timeout of connecting and of one statement, in milliseconds.
    #[arg(long, env = "COUNTER_DB_TIMEOUT_MS", default_value_t = 3000)]
    pub db_timeout_ms: u64,
    /// MySQL flavor: mariadb or mysql.
    #[arg(long, env = "COUNTER_DB_FLAVOR", default_value = "mariadb")]
    pub flavor: Flavor,
}

impl Config {
    /// Validates the flags into [`Settings`].
    pub fn into_settings(self) -> Result<Settings> {
        if self.poll_interval_ms == 0 {
            return Err(Error::Config("poll interval must be positive".to_owned()));
        }
        let password = match &self.db_password_file {
            Some(path) => std::fs::read_to_string(path)
                .map(|s| s.trim_end_matches(['\n', '\r']).to_owned())
                .map_err(|source| Error::ReadFile {
                    path: path.display().to_string(),
                    source,
                })?,
            None => self.db_password.clone().unwrap_or_default(),
        };
        Ok(Settings {
            listen: self.listen,
            host: self.db_host,
            port: self.db_port,
            database: self.database,
            user: self.db_user,
            password,
            policy: self.policy,
            poll_interval: Duration::from_millis(self.poll_interval_ms),
            write_interval: (self.write_interval_ms > 0)
                .then(|| Duration::from_millis(self.write_interval_ms)),
            dns_server: self.dns_server,
            timeout: Duration::from_millis(self.db_timeout_ms.max(1)),
            flavor: self.flavor,
        })
    }
}
