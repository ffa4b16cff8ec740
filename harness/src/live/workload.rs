//! The workload and probes of one scenario (docs/design/harness.md#history-and-checkers): writers
//! of unique ids through `-primary` (each write records the site that acknowledged it, from the
//! connection's `@@hostname`), readers through `-primary` and `-replicas`, and a DNS probe every
//! ~200 ms. They run in the workload pod ([`crate::incluster`]) beside the site probes
//! ([`super::site_probes`], which share this module's user, client and timeout) and record into
//! its run log, a [`Sink`]; the harness itself only runs the API probes (the group's status and
//! the shared Services' endpoints, [`LiveWorkload::start_api_probes`]) into the scenario's
//! [`Recorder`].
//!
//! The workload's database user (`harness`) holds only its database's privileges (the grant
//! builder of bloodraven-mysql): nothing that bypasses read_only, so a fenced site refuses it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bloodraven_mysql::live::{ConnectOptions, LiveMysql};
use bloodraven_mysql::Flavor;
use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::RData;
use hickory_resolver::TokioResolver;
use kube::Client;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::topology;
use crate::history::event::{EventType, Op};
use crate::history::recorder::Recorder;
use crate::playground::names::group_api;
use crate::scenario::model::{SharedService, Site};

/// The workload's database.
pub const DATABASE: &str = "harness";
/// The workload's table.
pub const TABLE: &str = "writes";
/// The table a held connection (`open-connection` fault) writes its probe row to: not the
/// workload's table, whose every row the RPO checker must find among the writers' ids.
pub const HELD_TABLE: &str = "held_writes";
/// The site probes' table: one canary row per acknowledged probe write, `site` the
/// `@@hostname` that committed it ([`super::site_probes`]).
pub const CANARY_TABLE: &str = "canary";
/// The workload's user.
pub const USER: &str = "harness";
/// The site probes' user ([`super::site_probes`]): it may insert into [`CANARY_TABLE`] only,
/// and holds `BINLOG ADMIN` so that its session writes nothing to the binary log
/// (`sql_log_bin = 0`): a canary that lands on a site made writable by hand (013) or on a
/// deposed primary is seen by the probe and left out of replication, so it never becomes an
/// errant transaction of that site nor a GTID the failover counts as lost. Neither privilege
/// bypasses read_only (`READ_ONLY ADMIN` would): a fenced site refuses it.
pub const CANARY_USER: &str = "harness_canary";
/// Writers running at once.
pub const WRITERS: usize = 2;
/// Pause between two writes of one writer.
pub const WRITE_PAUSE: Duration = Duration::from_millis(100);
/// Pause between two reads of one reader.
pub const READ_PAUSE: Duration = Duration::from_millis(500);
/// Probe period.
pub const PROBE_PERIOD: Duration = Duration::from_millis(200);
/// Bound on connecting and on one statement: beyond it the outcome is `info`.
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a write `send-write` left in flight on a held connection waits for its answer:
/// longer than any outage a scenario provokes, so a frozen server that thaws can still
/// answer it.
pub const SENT_WRITE_WAIT_MAX: Duration = Duration::from_secs(120);

/// MySQL's client error for a connection lost during a query (`CR_SERVER_LOST`).
pub const CR_SERVER_LOST: u16 = 2013;

/// The write on a held connection (`open-connection`, `send-write`): its own table, row `id`
/// (s026: a probe row in the workload's table was an id no writer wrote).
pub fn held_write_statement(id: u64) -> String {
    format!(
        "INSERT INTO `{DATABASE}`.`{HELD_TABLE}` (id, site) VALUES ({id}, @@hostname) ON DUPLICATE KEY UPDATE site = @@hostname, at = CURRENT_TIMESTAMP(6)"
    )
}

/// The error number a held connection's write reports: the server's (1290 = read_only), or
/// [`CR_SERVER_LOST`] when no server answered it (the connection was reset, refused or timed
/// out: mysqld died). Never `null`, which means the write committed.
pub fn write_error_code(error: &bloodraven_mysql::live::LiveError) -> u16 {
    error.server_code().unwrap_or(CR_SERVER_LOST)
}

use crate::history::event::ER_READ_ONLY;

/// Where the workload connects.
#[derive(Debug, Clone)]
pub struct WorkloadTargets {
    /// `-primary`'s host (its Service DNS name, resolved in the pod).
    pub primary: String,
    /// `-replicas`' host.
    pub replicas: String,
    /// The workload user's password.
    pub password: String,
}

/// The statements that set the workload's database, table and user up (run as root on the
/// primary at install).
pub fn setup_statements(password: &str) -> crate::Result<String> {
    let grant = |r: bloodraven_mysql::Result<String>| {
        r.map_err(|e| crate::Error::Cluster {
            action: "build the workload's grants".to_owned(),
            reason: e.to_string(),
        })
    };
    Ok(format!(
        "CREATE DATABASE IF NOT EXISTS `{DATABASE}`;\n\
         CREATE TABLE IF NOT EXISTS `{DATABASE}`.`{TABLE}` (id BIGINT UNSIGNED PRIMARY KEY, site VARCHAR(64) NOT NULL, at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6));\n\
         CREATE TABLE IF NOT EXISTS `{DATABASE}`.`{HELD_TABLE}` (id BIGINT UNSIGNED PRIMARY KEY, site VARCHAR(64) NOT NULL, at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6));\n\
         CREATE TABLE IF NOT EXISTS `{DATABASE}`.`{CANARY_TABLE}` (id BIGINT UNSIGNED PRIMARY KEY, site VARCHAR(64) NOT NULL, at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6));\n\
         {};\n{};\n{};\n\
         GRANT INSERT, SELECT ON `{DATABASE}`.`{CANARY_TABLE}` TO '{CANARY_USER}'@'%';\n\
         GRANT BINLOG ADMIN ON *.* TO '{CANARY_USER}'@'%';\n",
        grant(bloodraven_mysql::grants::create_app_user(USER, "%", password))?,
        grant(bloodraven_mysql::grants::app_user_grant(DATABASE, USER, "%"))?,
        grant(bloodraven_mysql::grants::create_app_user(CANARY_USER, "%", password))?,
    ))
}

/// The process that declares the probes ([`Sink::declare_probes`]).
pub const PROBES_PROCESS: &str = "probes";

/// Where the workload's operations are recorded: the scenario's [`Recorder`] (the workload
/// in the harness) or a run's event log in the workload pod
/// ([`crate::incluster::runlog::RunLog`]). Each call stamps the event with the sink's clocks.
pub trait Sink: Send + Sync + 'static {
    /// Records an event of `process` now.
    fn record(&self, process: &str, kind: EventType, op: Op);

    /// Declares `processes` as probes asking every [`PROBE_PERIOD`] ([`Op::Probing`]).
    fn declare_probes(&self, processes: &[&str]) {
        self.declare_probes_every(processes, PROBE_PERIOD, None);
    }

    /// Declares `processes` as probes asking every `period`, each question bounded by
    /// `answer_max` when given ([`Op::Probing`]; the workload liveness checker holds them to
    /// it).
    fn declare_probes_every(
        &self,
        processes: &[&str],
        period: Duration,
        answer_max: Option<Duration>,
    ) {
        let millis = |duration: Duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        let op = Op::Probing {
            processes: processes.iter().map(|p| (*p).to_owned()).collect(),
            period_ms: millis(period),
            answer_max_ms: answer_max.map(millis),
        };
        self.record(PROBES_PROCESS, EventType::Invoke, op.clone());
        self.record(PROBES_PROCESS, EventType::Ok, op);
    }

    /// Records an invocation.
    fn invoke(&self, process: &str, op: Op) {
        self.record(process, EventType::Invoke, op);
    }

    /// Records a completion.
    fn complete(&self, process: &str, kind: EventType, op: Op) {
        self.record(process, kind, op);
    }
}

impl Sink for Recorder {
    fn record(&self, process: &str, kind: EventType, op: Op) {
        Recorder::record(self, process, kind, op);
    }
}

/// Splits a workload host into its name and port: `10.96.0.7` and
/// `playground-primary.ns.svc.cluster.local` use MySQL's port
/// ([`bloodraven_api::names::PORT_MYSQL`]); `127.0.0.1:3307` and `[::1]:3307` name theirs; a
/// bare IPv6 address keeps the default.
pub fn split_host_port(host: &str) -> Result<(String, u16), String> {
    let default = bloodraven_api::names::PORT_MYSQL;
    if host.is_empty() {
        return Err("the host is empty".to_owned());
    }
    if let Some(rest) = host.strip_prefix('[') {
        let (address, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("host {host:?} opens `[` without closing it"))?;
        return match after.strip_prefix(':') {
            None if after.is_empty() => Ok((address.to_owned(), default)),
            Some(port) => port
                .parse()
                .map(|port| (address.to_owned(), port))
                .map_err(|_| format!("host {host:?} has port {port:?}, not a number 0-65535")),
            None => Err(format!("host {host:?} has {after:?} after `]`")),
        };
    }
    if host.parse::<std::net::Ipv6Addr>().is_ok() {
        return Ok((host.to_owned(), default));
    }
    match host.split_once(':') {
        None => Ok((host.to_owned(), default)),
        Some((name, port)) if !name.is_empty() => port
            .parse()
            .map(|port| (name.to_owned(), port))
            .map_err(|_| format!("host {host:?} has port {port:?}, not a number 0-65535")),
        Some(_) => Err(format!("host {host:?} has no name before its port")),
    }
}

/// The workload user's client for `host` (see [`split_host_port`]; an unreadable host is kept
/// whole, so connecting to it fails and is recorded as any unreachable host is).
pub fn client_for(host: &str, password: &str) -> LiveMysql {
    client_as(host, USER, password)
}

/// [`client_for`] as another of the harness's users ([`CANARY_USER`]).
pub fn client_as(host: &str, user: &str, password: &str) -> LiveMysql {
    let (host, port) = split_host_port(host)
        .unwrap_or_else(|_| (host.to_owned(), bloodraven_api::names::PORT_MYSQL));
    LiveMysql::new(
        Flavor::MariaDb,
        ConnectOptions {
            host,
            port,
            user: user.to_owned(),
            password: password.to_owned(),
            connect_timeout: STATEMENT_TIMEOUT,
            statement_timeout: STATEMENT_TIMEOUT,
        },
    )
}

/// A running workload.
#[derive(Debug)]
pub struct LiveWorkload {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl LiveWorkload {
    /// Only the probes that go through the Kubernetes API (the group's status, the shared
    /// Services' endpoints): the in-cluster workload ([`super::incluster`]) runs the writers,
    /// readers and DNS probe in the workload pod.
    pub fn start_api_probes(client: Client, recorder: Arc<Recorder>) -> Self {
        let (stop, stopped) = watch::channel(false);
        let tasks = vec![tokio::spawn(probe_loop(client, recorder, stopped))];
        Self { stop, tasks }
    }

    /// Stops everything and waits until in-flight operations completed (each is bounded by
    /// [`STATEMENT_TIMEOUT`]).
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Spawns the writers ([`WRITERS`], through `targets.primary`) and the readers (through
/// `-primary` and `-replicas`) on the current runtime, recording into `sink` until `stopped`
/// turns true. Each task ends after its in-flight operation completed and was recorded.
pub fn spawn_clients<S: Sink>(
    targets: &WorkloadTargets,
    sink: &Arc<S>,
    stopped: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let next_id = Arc::new(AtomicU64::new(1));
    let mut tasks = Vec::new();
    for writer in 0..WRITERS {
        tasks.push(tokio::spawn(write_loop(
            format!("writer-{writer}"),
            targets.clone(),
            next_id.clone(),
            sink.clone(),
            stopped.clone(),
        )));
    }
    for via in [SharedService::Primary, SharedService::Replicas] {
        tasks.push(tokio::spawn(read_loop(
            via,
            targets.clone(),
            sink.clone(),
            stopped.clone(),
        )));
    }
    tasks
}

struct Connection {
    client: LiveMysql,
    conn: mysql_async::Conn,
    site: Option<Site>,
}

async fn connect(
    host: &str,
    password: &str,
) -> Result<Connection, bloodraven_mysql::live::LiveError> {
    let client = client_for(host, password);
    let mut conn = client.connect().await?;
    let rows = client.rows(&mut conn, "SELECT @@hostname AS h").await?;
    let site = rows
        .first()
        .and_then(|row| row.get("h").cloned().flatten())
        .and_then(|h| topology::site_of_hostname(&h));
    Ok(Connection { client, conn, site })
}

/// How an error ends a client operation: `fail` when the server refused (it did not
/// happen), `info` when the outcome is unknown (timeout, connection lost).
fn outcome_of(error: &bloodraven_mysql::live::LiveError, sent: bool) -> EventType {
    if error.server_code().is_some() || !sent {
        EventType::Fail
    } else {
        EventType::Info
    }
}

async fn write_loop<S: Sink>(
    process: String,
    targets: WorkloadTargets,
    next_id: Arc<AtomicU64>,
    recorder: Arc<S>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut held: Option<Connection> = None;
    while !*stopped.borrow() {
        let id = next_id.fetch_add(1, Ordering::SeqCst);
        recorder.invoke(
            &process,
            Op::Write {
                id,
                site: None,
                gtid: None,
                error: None,
            },
        );
        if held.is_none() {
            match connect(&targets.primary, &targets.password).await {
                Ok(connection) => held = Some(connection),
                Err(error) => {
                    recorder.complete(
                        &process,
                        EventType::Fail,
                        Op::Write {
                            id,
                            site: None,
                            gtid: None,
                            error: Some(format!("connect: {error}")),
                        },
                    );
                    pause(&mut stopped, WRITE_PAUSE).await;
                    continue;
                }
            }
        }
        let Some(connection) = held.as_mut() else {
            continue;
        };
        let statement =
            format!("INSERT INTO `{DATABASE}`.`{TABLE}` (id, site) VALUES ({id}, @@hostname)");
        match connection
            .client
            .execute(&mut connection.conn, &statement)
            .await
        {
            Ok(()) => {
                // Autocommit: the INSERT's OK is the acknowledgement; @@last_gtid is the GTID
                // this session's last transaction committed as.
                let gtid = connection
                    .client
                    .rows(&mut connection.conn, "SELECT @@last_gtid AS g")
                    .await
                    .ok()
                    .and_then(|rows| rows.first().and_then(|row| row.get("g").cloned().flatten()))
                    .filter(|g| !g.is_empty());
                recorder.complete(
                    &process,
                    EventType::Ok,
                    Op::Write {
                        id,
                        site: connection.site,
                        gtid,
                        error: None,
                    },
                );
            }
            Err(error) => {
                let kind = outcome_of(&error, true);
                let refused = error.server_code() == Some(ER_READ_ONLY);
                recorder.complete(
                    &process,
                    kind,
                    Op::Write {
                        id,
                        site: connection.site,
                        gtid: None,
                        error: Some(error.to_string()),
                    },
                );
                // A refused or broken connection is replaced: the workload follows -primary
                // as an application with a reconnect policy would.
                if refused || kind == EventType::Info || error.server_code().is_none() {
                    held = None;
                }
            }
        }
        pause(&mut stopped, WRITE_PAUSE).await;
    }
}

async fn read_loop<S: Sink>(
    via: SharedService,
    targets: WorkloadTargets,
    recorder: Arc<S>,
    mut stopped: watch::Receiver<bool>,
) {
    let process = match via {
        SharedService::Primary => "reader-primary",
        SharedService::Replicas => "reader-replicas",
    };
    let host = match via {
        SharedService::Primary => targets.primary.clone(),
        SharedService::Replicas => targets.replicas.clone(),
    };
    while !*stopped.borrow() {
        recorder.invoke(
            process,
            Op::Read {
                via,
                site: None,
                max_id: None,
            },
        );
        // A fresh connection per read: each read asks the Service for a current endpoint.
        let result = async {
            let mut connection = connect(&host, &targets.password).await?;
            let rows = connection
                .client
                .rows(
                    &mut connection.conn,
                    &format!("SELECT MAX(id) AS m FROM `{DATABASE}`.`{TABLE}`"),
                )
                .await?;
            let max_id = rows
                .first()
                .and_then(|row| row.get("m").cloned().flatten())
                .and_then(|m| m.parse().ok());
            Ok::<_, bloodraven_mysql::live::LiveError>((connection.site, max_id))
        }
        .await;
        match result {
            Ok((site, max_id)) => {
                recorder.complete(process, EventType::Ok, Op::Read { via, site, max_id })
            }
            Err(_) => recorder.complete(
                process,
                EventType::Fail,
                Op::Read {
                    via,
                    site: None,
                    max_id: None,
                },
            ),
        }
        pause(&mut stopped, READ_PAUSE).await;
    }
}

/// A resolver asking only `server`, without a cache, search domains or retries.
pub fn resolver(server: SocketAddr) -> Option<TokioResolver> {
    let mut udp = ConnectionConfig::udp();
    udp.port = server.port();
    let mut builder = TokioResolver::builder_with_config(
        ResolverConfig::from_parts(
            None,
            Vec::new(),
            vec![NameServerConfig::new(server.ip(), true, vec![udp])],
        ),
        TokioRuntimeProvider::default(),
    );
    builder.options_mut().cache_size = 0;
    builder.options_mut().timeout = Duration::from_millis(500);
    builder.options_mut().attempts = 1;
    builder.build().ok()
}

/// The A answers for `hostname` from `resolver` (empty on NXDOMAIN or an error).
pub async fn lookup(resolver: &TokioResolver, hostname: &str) -> Vec<String> {
    resolver.clear_cache();
    match resolver.ipv4_lookup(hostname).await {
        Ok(lookup) => {
            let mut out: Vec<String> = lookup
                .answers()
                .iter()
                .filter_map(|record| match &record.data {
                    RData::A(a) => Some(a.0.to_string()),
                    _ => None,
                })
                .collect();
            out.sort();
            out
        }
        Err(_) => Vec::new(),
    }
}

/// One DNS probe: `dns` invokes, asks `resolver` for `hostname`'s A answers, and completes
/// `ok` with them (an empty answer on NXDOMAIN or an error) and the site `site_of` names for a
/// single answer. The in-cluster workload passes `|_| None`: the harness names the site when
/// it reads the event ([`crate::live::incluster`]).
pub async fn probe_dns<S: Sink>(
    sink: &S,
    resolver: &TokioResolver,
    hostname: &str,
    site_of: impl FnOnce(&str) -> Option<Site>,
) {
    sink.invoke(
        "dns",
        Op::Dns {
            addresses: Vec::new(),
            site: None,
        },
    );
    let addresses = lookup(resolver, hostname).await;
    let site = match addresses.as_slice() {
        [one] => site_of(one),
        _ => None,
    };
    sink.complete("dns", EventType::Ok, Op::Dns { addresses, site });
}

/// Probes the DNS answer for `hostname` every [`PROBE_PERIOD`] until `stopped`.
pub async fn dns_loop<S: Sink>(
    resolver: TokioResolver,
    hostname: String,
    sink: Arc<S>,
    mut stopped: watch::Receiver<bool>,
) {
    sink.declare_probes(&["dns"]);
    while !*stopped.borrow() {
        probe_dns(sink.as_ref(), &resolver, &hostname, |_| None).await;
        pause(&mut stopped, PROBE_PERIOD).await;
    }
}

/// The API probes: the group's status and the shared Services' endpoints, every
/// [`PROBE_PERIOD`] (the DNS probe runs in the workload pod: [`dns_loop`]).
async fn probe_loop(client: Client, recorder: Arc<Recorder>, mut stopped: watch::Receiver<bool>) {
    let groups = group_api(&client);
    recorder.declare_probes(&["status", "endpoints-primary", "endpoints-replicas"]);
    while !*stopped.borrow() {
        recorder.invoke("status", Op::status_unknown());
        match groups.get(crate::playground::names::GROUP).await {
            Ok(group) => {
                let value = serde_json::to_value(&group).unwrap_or_default();
                recorder.complete("status", EventType::Ok, Op::status_of_group(&value));
            }
            Err(_) => recorder.complete("status", EventType::Fail, Op::status_unknown()),
        }
        for service in ["primary", "replicas"] {
            let process = format!("endpoints-{service}");
            recorder.invoke(
                &process,
                Op::Endpoints {
                    service: service.to_owned(),
                    sites: Vec::new(),
                },
            );
            match topology::endpoint_sites(&client, service).await {
                Ok(sites) => recorder.complete(
                    &process,
                    EventType::Ok,
                    Op::Endpoints {
                        service: service.to_owned(),
                        sites,
                    },
                ),
                Err(_) => recorder.complete(
                    &process,
                    EventType::Fail,
                    Op::Endpoints {
                        service: service.to_owned(),
                        sites: Vec::new(),
                    },
                ),
            }
        }
        pause(&mut stopped, PROBE_PERIOD).await;
    }
}

/// Waits `period`, or less when `stopped` changes.
pub async fn pause(stopped: &mut watch::Receiver<bool>, period: Duration) {
    let _ = tokio::time::timeout(period, stopped.changed()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    // The in-cluster workload names its hosts as Service DNS names (MySQL's port) and tests
    // name a sandbox server's own port (harness/src/incluster).
    #[test]
    fn hosts_split_into_name_and_port() {
        let mysql = bloodraven_api::names::PORT_MYSQL;
        assert_eq!(
            split_host_port("mysql-playground-primary.ns.svc.cluster.local"),
            Ok((
                "mysql-playground-primary.ns.svc.cluster.local".to_owned(),
                mysql
            ))
        );
        assert_eq!(
            split_host_port("127.0.0.1:1"),
            Ok(("127.0.0.1".to_owned(), 1))
        );
        assert_eq!(split_host_port("::1"), Ok(("::1".to_owned(), mysql)));
        assert_eq!(split_host_port("[::1]:3307"), Ok(("::1".to_owned(), 3307)));
        assert!(split_host_port("").is_err());
        assert!(split_host_port("host:port").is_err());
        assert!(split_host_port(":3306").is_err());
        assert!(split_host_port("[::1").is_err());
    }
}
