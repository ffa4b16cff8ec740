//! Flags and environment variables, validated into [`Settings`].

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use bloodraven_api::auth::{OperatorVerifyingKey, PeerKey};
use bloodraven_core::lease::LeaseConfig;
use bloodraven_mysql::{live::ConnectOptions, Flavor};
use clap::Parser;

use crate::{
    discovery::PeerQuery,
    error::{Error, Result},
};

/// The sidecar's command line; every flag also reads an environment variable.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "bloodraven-sidecar",
    version,
    about = "Bloodraven's self-fencing sidecar"
)]
pub struct Config {
    /// The MysqlFailoverGroup this sidecar belongs to.
    #[arg(long, env = "BLOODRAVEN_GROUP")]
    pub group: String,
    /// This sidecar's site.
    #[arg(long, env = "BLOODRAVEN_SITE")]
    pub site: String,
    /// Every site of the group, this one included (comma separated). A lease needs a
    /// majority of all of them.
    #[arg(long, env = "BLOODRAVEN_SITES", value_delimiter = ',', required = true)]
    pub sites: Vec<String>,
    /// Address of the HTTP API.
    #[arg(long, env = "BLOODRAVEN_LISTEN", default_value = "0.0.0.0:8086")]
    pub listen: SocketAddr,
    /// Write lease duration in milliseconds (the group's `writeLease.duration`).
    #[arg(long, env = "BLOODRAVEN_LEASE_DURATION_MS", default_value_t = 6000)]
    pub lease_duration_ms: u64,
    /// Enforcement tick in milliseconds; at most, and by default, a third of the lease.
    #[arg(long, env = "BLOODRAVEN_TICK_MS")]
    pub tick_ms: Option<u64>,
    /// SRV name of each site's sidecar port, `{site}` and `{group}` substituted, e.g.
    /// `_sidecar._tcp.mysql-{group}-{site}.bloodraven-playground.svc.cluster.local`.
    #[arg(long, env = "BLOODRAVEN_PEER_SRV", conflicts_with = "peer_host")]
    pub peer_srv: Option<String>,
    /// A-record name of each site's Service, `{site}` and `{group}` substituted, paired with
    /// `--peer-port`, e.g. `mysql-{group}-{site}.bloodraven-playground.svc.cluster.local`.
    #[arg(long, env = "BLOODRAVEN_PEER_HOST")]
    pub peer_host: Option<String>,
    /// Sidecar port paired with `--peer-host`.
    #[arg(long, env = "BLOODRAVEN_PEER_PORT", default_value_t = bloodraven_api::names::PORT_SIDECAR)]
    pub peer_port: u16,
    /// DNS server to query (`ip:port`); the system's resolv.conf when absent.
    #[arg(long, env = "BLOODRAVEN_DNS_SERVER")]
    pub dns_server: Option<SocketAddr>,
    /// Timeout of one peer lease request in milliseconds; at most, and by default, a third of
    /// the lease.
    #[arg(long, env = "BLOODRAVEN_PEER_TIMEOUT_MS")]
    pub peer_timeout_ms: Option<u64>,
    /// MySQL flavor: mariadb or mysql.
    #[arg(long, env = "BLOODRAVEN_MYSQL_FLAVOR", default_value = "mariadb")]
    pub mysql_flavor: Flavor,
    /// Host of the local mysqld.
    #[arg(long, env = "BLOODRAVEN_MYSQL_HOST", default_value = "127.0.0.1")]
    pub mysql_host: String,
    /// Port of the local mysqld.
    #[arg(long, env = "BLOODRAVEN_MYSQL_PORT", default_value_t = bloodraven_api::names::PORT_MYSQL)]
    pub mysql_port: u16,
    /// MySQL user of the sidecar. On MariaDB 10.11 it needs
    /// `bloodraven_mysql::live::sandbox::SIDECAR_PRIVILEGES_MARIADB` (READ_ONLY ADMIN,
    /// REPLICATION SLAVE ADMIN, RELOAD, SLAVE MONITOR, BINLOG MONITOR, REPLICATION CLIENT,
    /// PROCESS, CONNECTION ADMIN), plus global CREATE for `POST /v1/databases`; it never
    /// writes data, and creates a schema only as the writable active site.
    #[arg(long, env = "BLOODRAVEN_MYSQL_USER", default_value = "root")]
    pub mysql_user: String,
    /// Its password.
    #[arg(long, env = "BLOODRAVEN_MYSQL_PASSWORD", hide_env_values = true)]
    pub mysql_password: Option<String>,
    /// A file holding its password (a mounted Secret); wins over `--mysql-password`.
    #[arg(long, env = "BLOODRAVEN_MYSQL_PASSWORD_FILE")]
    pub mysql_password_file: Option<PathBuf>,
    /// Replication user other sites use to replicate from this one.
    #[arg(
        long,
        env = "BLOODRAVEN_REPLICATION_USER",
        default_value = "replication"
    )]
    pub replication_user: String,
    /// Its password.
    #[arg(long, env = "BLOODRAVEN_REPLICATION_PASSWORD", hide_env_values = true)]
    pub replication_password: Option<String>,
    /// A file holding its password; wins over `--replication-password`.
    #[arg(long, env = "BLOODRAVEN_REPLICATION_PASSWORD_FILE")]
    pub replication_password_file: Option<PathBuf>,
    /// Timeout of one MySQL statement in milliseconds (connecting included).
    #[arg(long, env = "BLOODRAVEN_MYSQL_TIMEOUT_MS", default_value_t = 2000)]
    pub mysql_timeout_ms: u64,
    /// mysqld's pid file (`--pid-file` of mysqld, on a volume both containers mount; the pod
    /// shares its process namespace). The watchdog SIGKILLs that pid when mysqld must be
    /// read-only, no lease covers it and it cannot be seen read-only. Without it a frozen
    /// mysqld cannot be stopped from writing when it thaws.
    #[arg(long, env = "BLOODRAVEN_MYSQLD_PID_FILE")]
    pub mysqld_pid_file: Option<PathBuf>,
    /// Directory for named backups (a volume of the pod). Without it the backup, restore and
    /// re-seed endpoints answer 409. The MySQL user then needs what `mariadb-dump` and a
    /// restore need (the pods run the sidecar as `root`).
    #[arg(long, env = "BLOODRAVEN_BACKUP_DIR")]
    pub backup_dir: Option<PathBuf>,
    /// mysqld's data directory as mounted in the sidecar (read-only is enough): with it, and
    /// `mariadb-backup` installed, a backup also holds a prepared physical copy.
    #[arg(long, env = "BLOODRAVEN_MYSQL_DATADIR", requires = "backup_dir")]
    pub mysql_datadir: Option<PathBuf>,
    /// The mark mysqld's restore gate touches while it holds mysqld down
    /// (`bloodraven_api::sidecar::MYSQLD_GATE_SCRIPT`; on a volume both containers mount).
    /// Given only when the `mysql` container starts mysqld through that gate and the data
    /// directory is mounted writable here: it enables restores from the `mariadb-backup` copy
    /// (`crate::physical`). Without it such a restore is refused, saying why.
    #[arg(long, env = "BLOODRAVEN_MYSQLD_GATE_MARK", requires = "mysql_datadir")]
    pub mysqld_gate_mark: Option<PathBuf>,
    /// A file holding the operator's verifying key (hex Ed25519 public key; the mounted Secret
    /// `mysql-<group>-sidecar-keys`). Authority pushes, fence, promote, repoint and database
    /// requests must be signed by the operator's key (docs/design/history.md#issue-10-case-8).
    #[arg(long, env = "BLOODRAVEN_OPERATOR_KEY_FILE", requires = "peer_key_file")]
    pub operator_key_file: Option<PathBuf>,
    /// A file holding the group's peer key (hex, at least 32 bytes; same Secret): lease
    /// requests to and from the other sidecars are signed with it (HMAC-SHA256).
    #[arg(long, env = "BLOODRAVEN_PEER_KEY_FILE", requires = "operator_key_file")]
    pub peer_key_file: Option<PathBuf>,
    /// Serve the API without checking or sending request signatures: any client that can
    /// connect may push authority. For tests only; the operator never renders it. Without it
    /// (and without the key files) the sidecar refuses to start.
    #[arg(
        long,
        env = "BLOODRAVEN_INSECURE_ALLOW_UNAUTHENTICATED",
        conflicts_with_all = ["operator_key_file", "peer_key_file"]
    )]
    pub insecure_allow_unauthenticated: bool,
}

/// How the sidecar authenticates requests ([`bloodraven_api::auth`]).
#[derive(Debug, Clone)]
pub enum RequestAuth {
    /// Mutations must be signed by the operator's key, lease requests by the peer key, and
    /// this sidecar signs its own lease requests with the peer key. The only mode the
    /// operator renders.
    Signed {
        /// The operator's verifying key.
        operator: OperatorVerifyingKey,
        /// The group's peer key.
        peer: PeerKey,
    },
    /// Nothing is checked or signed (`--insecure-allow-unauthenticated`; tests only).
    InsecureUnauthenticated,
}

/// Everything the sidecar runs with, validated.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Group, site, all sites and lease duration.
    pub lease: LeaseConfig,
    /// Address of the HTTP API.
    pub listen: SocketAddr,
    /// Enforcement tick (at most a third of the lease).
    pub tick: Duration,
    /// Timeout of one peer lease request.
    pub peer_timeout: Duration,
    /// How peers are found.
    pub discovery: PeerQuery,
    /// DNS server to query; the system's when `None`.
    pub dns_server: Option<SocketAddr>,
    /// MySQL flavor.
    pub flavor: Flavor,
    /// How to reach the local mysqld.
    pub mysql: ConnectOptions,
    /// Replication credentials used for repointing.
    pub replication_user: String,
    /// Replication password.
    pub replication_password: String,
    /// mysqld's pid file, for the watchdog; `None` disables its kill.
    pub mysqld_pid_file: Option<PathBuf>,
    /// How requests are authenticated.
    pub auth: RequestAuth,
    /// Where and as whom backups, restores and re-seeds run; `None`: not offered.
    pub backup: Option<BackupSettings>,
}

/// What the backup jobs run with (`crate::backup`).
#[derive(Debug, Clone)]
pub struct BackupSettings {
    /// Directory of the named backups.
    pub dir: PathBuf,
    /// mysqld's data directory, for a physical copy with `mariadb-backup`.
    pub datadir: Option<PathBuf>,
    /// The mark of mysqld's restore gate; with it (and `datadir` writable) a restore from
    /// the physical copy is offered (`crate::physical`).
    pub mysqld_gate_mark: Option<PathBuf>,
    /// The MySQL account the dump and the restore use (on every site: a re-seed dumps the
    /// source with it).
    pub mysql: ConnectOptions,
}

impl Settings {
    /// A settings value with the tick and peer timeout derived from the lease (a third).
    pub fn new(
        lease: LeaseConfig,
        listen: SocketAddr,
        discovery: PeerQuery,
        flavor: Flavor,
        mysql: ConnectOptions,
        auth: RequestAuth,
    ) -> Self {
        let third = Duration::from_millis(lease.renew_interval_ms().max(1));
        Self {
            lease,
            listen,
            tick: third,
            peer_timeout: third,
            discovery,
            dns_server: None,
            flavor,
            mysql,
            replication_user: "replication".to_owned(),
            replication_password: String::new(),
            mysqld_pid_file: None,
            auth,
            backup: None,
        }
    }
}

fn read_key<K>(path: &PathBuf, parse: impl FnOnce(&str) -> bloodraven_api::Result<K>) -> Result<K> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
        path: path.display().to_string(),
        source,
    })?;
    parse(&text).map_err(|source| Error::Key {
        path: path.display().to_string(),
        source,
    })
}

/// The request authentication the flags ask for: both key files, or the explicit insecure
/// flag; nothing else starts.
fn request_auth(
    operator_key_file: Option<&PathBuf>,
    peer_key_file: Option<&PathBuf>,
    insecure_allow_unauthenticated: bool,
) -> Result<RequestAuth> {
    match (operator_key_file, peer_key_file, insecure_allow_unauthenticated) {
        (Some(operator), Some(peer), false) => Ok(RequestAuth::Signed {
            operator: read_key(operator, OperatorVerifyingKey::from_hex)?,
            peer: read_key(peer, PeerKey::from_hex)?,
        }),
        (None, None, true) => Ok(RequestAuth::InsecureUnauthenticated),
        (None, None, false) => Err(Error::Config(
            "request signature keys are required: give --operator-key-file and --peer-key-file (the operator mounts Secret mysql-<group>-sidecar-keys), or --insecure-allow-unauthenticated for a test"
                .to_owned(),
        )),
        (Some(_), None, _) | (None, Some(_), _) => Err(Error::Config(
            "--operator-key-file and --peer-key-file go together".to_owned(),
        )),
        (Some(_), Some(_), true) => Err(Error::Config(
            "--insecure-allow-unauthenticated cannot be combined with key files".to_owned(),
        )),
    }
}

fn read_secret(inline: Option<String>, file: Option<&PathBuf>) -> Result<String> {
    match file {
        Some(path) => std::fs::read_to_string(path)
            .map(|s| s.trim_end_matches(['\n', '\r']).to_owned())
            .map_err(|source| Error::ReadFile {
                path: path.display().to_string(),
                source,
            }),
        None => Ok(inline.unwrap_or_default()),
    }
}

impl Config {
    /// Validates the flags into [`Settings`].
    pub fn into_settings(self) -> Result<Settings> {
        let lease = LeaseConfig::new(
            self.group,
            self.site,
            self.sites,
            Duration::from_millis(self.lease_duration_ms),
        )?;
        let third = lease.renew_interval_ms().max(1);
        let tick_ms = self.tick_ms.unwrap_or(third);
        if tick_ms == 0 || tick_ms > third {
            return Err(Error::Config(format!(
                "tick {tick_ms}ms must be between 1ms and a third of the lease ({third}ms)"
            )));
        }
        let peer_timeout_ms = self.peer_timeout_ms.unwrap_or(third);
        if peer_timeout_ms == 0 || peer_timeout_ms > third {
            return Err(Error::Config(format!(
                "peer timeout {peer_timeout_ms}ms must be between 1ms and a third of the lease ({third}ms)"
            )));
        }
        let discovery = match (self.peer_srv, self.peer_host) {
            (Some(name), None) => PeerQuery::Srv { name },
            (None, Some(name)) => PeerQuery::Host {
                name,
                port: self.peer_port,
            },
            (None, None) | (Some(_), Some(_)) => {
                return Err(Error::Config(
                    "exactly one of --peer-srv and --peer-host is required".to_owned(),
                ))
            }
        };
        let auth = request_auth(
            self.operator_key_file.as_ref(),
            self.peer_key_file.as_ref(),
            self.insecure_allow_unauthenticated,
        )?;
        let mysql_timeout = Duration::from_millis(self.mysql_timeout_ms.max(1));
        let mysql = ConnectOptions {
            host: self.mysql_host,
            port: self.mysql_port,
            user: self.mysql_user,
            password: read_secret(self.mysql_password, self.mysql_password_file.as_ref())?,
            connect_timeout: mysql_timeout,
            statement_timeout: mysql_timeout,
        };
        let backup = self.backup_dir.map(|dir| BackupSettings {
            dir,
            datadir: self.mysql_datadir,
            mysqld_gate_mark: self.mysqld_gate_mark,
            mysql: mysql.clone(),
        });
        Ok(Settings {
            backup,
            lease,
            listen: self.listen,
            tick: Duration::from_millis(tick_ms),
            peer_timeout: Duration::from_millis(peer_timeout_ms),
            discovery,
            dns_server: self.dns_server,
            flavor: self.mysql_flavor,
            mysql,
            replication_password: read_secret(
                self.replication_password,
                self.replication_password_file.as_ref(),
            )?,
            replication_user: self.replication_user,
            mysqld_pid_file: self.mysqld_pid_file,
            auth,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Settings> {
        let mut all = vec!["bloodraven-sidecar"];
        all.extend_from_slice(args);
        Config::try_parse_from(all)
            .map_err(|e| Error::Config(e.to_string()))?
            .into_settings()
    }

    #[test]
    fn config_tick_defaults_to_a_third_of_the_lease_and_may_not_exceed_it() {
        let base = [
            "--group",
            "playground",
            "--site",
            "iad",
            "--sites",
            "iad,pdx,reader",
            "--peer-host",
            "mysql-{group}-{site}",
            "--lease-duration-ms",
            "6000",
            "--insecure-allow-unauthenticated",
        ];
        let settings = parse(&base).map_err(|e| e.to_string());
        assert_eq!(
            settings.as_ref().map(|s| s.tick),
            Ok(Duration::from_secs(2))
        );
        assert_eq!(settings.as_ref().map(|s| s.lease.majority()), Ok(2));
        let mut slow = base.to_vec();
        slow.extend(["--tick-ms", "2001"]);
        assert!(matches!(parse(&slow), Err(Error::Config(_))));
    }

    #[test]
    fn config_requires_exactly_one_discovery_mode() {
        let none = ["--group", "g", "--site", "a", "--sites", "a,b,c"];
        assert!(parse(&none).is_err());
        let srv = [
            "--group",
            "g",
            "--site",
            "a",
            "--sites",
            "a,b,c",
            "--peer-srv",
            "_sidecar._tcp.mysql-{group}-{site}",
            "--insecure-allow-unauthenticated",
        ];
        assert!(matches!(
            parse(&srv).map(|s| s.discovery),
            Ok(PeerQuery::Srv { .. })
        ));
    }

    /// docs/design/history.md#issue-10-case-8: without both key files the sidecar does not
    /// start, unless the insecure flag says so explicitly; a key file that does not hold a key
    /// is named.
    #[test]
    fn config_case_8_keys_are_required_unless_explicitly_insecure() {
        let base = [
            "--group",
            "g",
            "--site",
            "a",
            "--sites",
            "a,b,c",
            "--peer-host",
            "mysql-{group}-{site}",
        ];
        let error = parse(&base)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains("--operator-key-file")
                && error.contains("--insecure-allow-unauthenticated"),
            "{error}"
        );
        let dir =
            std::env::temp_dir().join(format!("bloodraven-sidecar-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let operator = dir.join("operator-verifying-key");
        let peer = dir.join("peer-key");
        let verifying = bloodraven_api::auth::OperatorKey::from_seed(&[7; 32])
            .expect("key")
            .verifying_key();
        std::fs::write(&operator, format!("{}\n", verifying.to_hex())).expect("write");
        std::fs::write(&peer, "ab".repeat(32)).expect("write");
        let (operator_text, peer_text) =
            (operator.display().to_string(), peer.display().to_string());
        let mut signed = base.to_vec();
        signed.extend([
            "--operator-key-file",
            &operator_text,
            "--peer-key-file",
            &peer_text,
        ]);
        match parse(&signed).map(|s| s.auth) {
            Ok(RequestAuth::Signed { operator, .. }) => assert_eq!(operator, verifying),
            other => panic!("expected signed, got {other:?}"),
        }
        let mut only_one = base.to_vec();
        only_one.extend(["--operator-key-file", &operator_text]);
        assert!(parse(&only_one).is_err());
        let mut both = signed.clone();
        both.push("--insecure-allow-unauthenticated");
        assert!(parse(&both).is_err(), "insecure conflicts with keys");
        std::fs::write(&peer, "abcd").expect("write");
        let error = parse(&signed)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains(&peer_text) && error.contains("peer key"),
            "{error}"
        );
        let mut insecure = base.to_vec();
        insecure.push("--insecure-allow-unauthenticated");
        assert!(matches!(
            parse(&insecure).map(|s| s.auth),
            Ok(RequestAuth::InsecureUnauthenticated)
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
