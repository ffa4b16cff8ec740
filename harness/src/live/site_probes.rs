//! The site probes (docs/design/harness.md#history-and-checkers): every ~100 ms, one task per
//! site connects to that site's mysqld **by pod IP** (never through a Service) as the workload
//! user (`harness`, who holds only its database's privileges and so is subject to read_only),
//! reads `@@read_only` and `@@hostname`, and writes a canary row into `harness.canary` whose
//! `site` column is the `@@hostname` that committed it. Each probe is one [`Op::SiteProbe`]
//! (invoke and completion, on the sink's one clock), bounded as a whole by
//! [`STATEMENT_TIMEOUT`]; a frozen site delays only its own task. The connection is kept per
//! site and replaced when it breaks or the site's pod IP changes.
//!
//! They run in the workload pod ([`crate::incluster`]), which learns the pod IPs itself from
//! the Kubernetes API ([`crate::incluster::site_pods`]): the harness process dials no pod IP.
//! The split-brain checker ([`crate::check::split_brain`]) judges from what they saw.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bloodraven_api::names;
use bloodraven_mysql::live::{LiveError, LiveMysql};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use super::workload::{client_as, Sink, CANARY_TABLE, CANARY_USER, DATABASE, STATEMENT_TIMEOUT};
use crate::history::event::{EventType, Op, ProbeOutcome, CANARY_ID_BASE};
use crate::scenario::model::Site;

/// Run on each new probe connection ([`CANARY_USER`] holds `BINLOG ADMIN` for it).
pub const NO_BINLOG: &str = "SET SESSION sql_log_bin = 0";

/// How often each site is probed.
pub const SITE_PROBE_PERIOD: Duration = Duration::from_millis(100);

/// The process of a site's probe (`site-probe-iad`).
pub fn process_of(site: Site) -> String {
    format!("site-probe-{site}")
}

/// The canary write of probe `id`: its own table, `site` the `@@hostname` that commits it.
pub fn canary_statement(id: u64) -> String {
    format!(
        "INSERT INTO `{DATABASE}`.`{CANARY_TABLE}` (id, site, at) VALUES ({id}, @@hostname, CURRENT_TIMESTAMP(6))"
    )
}

/// The site whose pod `hostname` names (`mysql-<group>-<site>-0`, what mysqld's `@@hostname`
/// reports), if one of `group`'s.
pub fn site_of_pod_name(group: &str, hostname: &str) -> Option<Site> {
    Site::ALL
        .into_iter()
        .find(|site| hostname == names::pod(group, site.name()))
}

/// Where a site's mysqld is, as the workload pod's watch of the API knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SiteAddress {
    /// Its pod IP (or `host:port`, as [`super::workload::split_host_port`] reads it).
    Known(String),
    /// None known (yet), and why.
    Unknown(String),
}

/// The addresses of every probed site.
pub type SiteAddresses = BTreeMap<Site, SiteAddress>;

/// What the probes of one run need.
#[derive(Debug, Clone)]
pub struct SiteProbeTargets {
    /// The group, whose pod names `@@hostname` is matched against.
    pub group: String,
    /// The sites to probe.
    pub sites: Vec<Site>,
    /// The workload user's password.
    pub password: String,
}

/// Spawns one probe task per site of `targets`, after declaring them as probes of period
/// [`SITE_PROBE_PERIOD`] whose every question is bounded by [`STATEMENT_TIMEOUT`]. Canary ids
/// count from [`CANARY_ID_BASE`] + 1, shared by the sites. Each task ends after its in-flight
/// probe was recorded once `stopped` turns true.
pub fn spawn_site_probes<S: Sink>(
    targets: &SiteProbeTargets,
    addresses: &watch::Receiver<SiteAddresses>,
    sink: &Arc<S>,
    stopped: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let processes: Vec<String> = targets.sites.iter().map(|site| process_of(*site)).collect();
    let names: Vec<&str> = processes.iter().map(String::as_str).collect();
    sink.declare_probes_every(&names, SITE_PROBE_PERIOD, Some(STATEMENT_TIMEOUT));
    let ids = Arc::new(AtomicU64::new(CANARY_ID_BASE + 1));
    targets
        .sites
        .iter()
        .map(|site| {
            let probe = SiteProbe {
                site: *site,
                process: process_of(*site),
                group: targets.group.clone(),
                password: targets.password.clone(),
                held: None,
            };
            tokio::spawn(probe.run(
                addresses.clone(),
                ids.clone(),
                sink.clone(),
                stopped.clone(),
            ))
        })
        .collect()
}

/// A connection kept to one address.
struct Held {
    host: String,
    client: LiveMysql,
    conn: mysql_async::Conn,
}

/// One site's prober and its kept connection.
struct SiteProbe {
    site: Site,
    process: String,
    group: String,
    password: String,
    held: Option<Held>,
}

/// Where a probe failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeStage {
    /// Connecting, or reading `@@read_only` and `@@hostname`: the canary was not sent.
    Before,
    /// The canary write.
    Canary,
}

/// What one probe learned: the completion's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReport {
    /// The site `@@hostname` names.
    pub answered: Option<Site>,
    /// `@@read_only`, when read.
    pub read_only: Option<bool>,
    /// How it ended.
    pub outcome: ProbeOutcome,
    /// The server's error number, when it refused.
    pub error_code: Option<u16>,
    /// The error text.
    pub error: Option<String>,
}

impl ProbeReport {
    /// The completion type of the outcome: `ok` acknowledged, `info` unknown, else `fail`.
    pub fn kind(&self) -> EventType {
        match self.outcome {
            ProbeOutcome::Acknowledged => EventType::Ok,
            ProbeOutcome::Unknown => EventType::Info,
            ProbeOutcome::Refused | ProbeOutcome::Unreachable | ProbeOutcome::NoAddress => {
                EventType::Fail
            }
        }
    }
}

/// How an error at `stage` ends a probe: the server refused (it answered: reachable), the
/// canary's fate is unknown (sent, no answer), or the site was unreachable (nothing sent).
pub fn outcome_of(stage: ProbeStage, error: &LiveError) -> (ProbeOutcome, Option<u16>) {
    match (error.server_code(), stage) {
        (Some(code), ProbeStage::Before | ProbeStage::Canary) => {
            (ProbeOutcome::Refused, Some(code))
        }
        (None, ProbeStage::Canary) => (ProbeOutcome::Unknown, None),
        (None, ProbeStage::Before) => (ProbeOutcome::Unreachable, None),
    }
}

/// The time left until `deadline`.
fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

impl SiteProbe {
    async fn run<S: Sink>(
        mut self,
        addresses: watch::Receiver<SiteAddresses>,
        ids: Arc<AtomicU64>,
        sink: Arc<S>,
        mut stopped: watch::Receiver<bool>,
    ) {
        let mut ticks = tokio::time::interval(SITE_PROBE_PERIOD);
        // A probe that took longer than a period is followed at once, then every period.
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = stopped.changed() => {}
            }
            if *stopped.borrow() {
                return;
            }
            let id = ids.fetch_add(1, Ordering::SeqCst);
            let address = addresses
                .borrow()
                .get(&self.site)
                .cloned()
                .unwrap_or_else(|| {
                    SiteAddress::Unknown("the site is not among those watched".to_owned())
                });
            self.probe_once(id, &address, sink.as_ref()).await;
        }
    }

    /// One probe of canary `id`, recorded as an invoke and a completion.
    async fn probe_once<S: Sink>(&mut self, id: u64, address: &SiteAddress, sink: &S) {
        let pod_ip = match address {
            SiteAddress::Known(host) => Some(host.clone()),
            SiteAddress::Unknown(_) => None,
        };
        let site = self.site;
        let op = |report: Option<&ProbeReport>| Op::SiteProbe {
            site,
            pod_ip: pod_ip.clone(),
            canary_id: id,
            answered: report.and_then(|r| r.answered),
            read_only: report.and_then(|r| r.read_only),
            outcome: report.map(|r| r.outcome),
            error_code: report.and_then(|r| r.error_code),
            error: report.and_then(|r| r.error.clone()),
        };
        sink.invoke(&self.process, op(None));
        let report = match address {
            SiteAddress::Known(host) => self.probe(host, id).await,
            SiteAddress::Unknown(why) => ProbeReport {
                answered: None,
                read_only: None,
                outcome: ProbeOutcome::NoAddress,
                error_code: None,
                error: Some(format!("no pod IP of {} is known: {why}", self.site)),
            },
        };
        sink.complete(&self.process, report.kind(), op(Some(&report)));
    }

    /// Reads the site's state and writes the canary, within [`STATEMENT_TIMEOUT`] in all.
    async fn probe(&mut self, host: &str, id: u64) -> ProbeReport {
        let deadline = Instant::now() + STATEMENT_TIMEOUT;
        let failed = |stage, error: &LiveError, answered, read_only| {
            let (outcome, error_code) = outcome_of(stage, error);
            ProbeReport {
                answered,
                read_only,
                outcome,
                error_code,
                error: Some(error.to_string()),
            }
        };
        let (read_only, hostname) = match self.read_state(host, deadline).await {
            Ok(state) => state,
            Err(error) => {
                self.held = None;
                return failed(ProbeStage::Before, &error, None, None);
            }
        };
        let answered = hostname
            .as_deref()
            .and_then(|name| site_of_pod_name(&self.group, name));
        let Some(held) = self.held.as_mut() else {
            return ProbeReport {
                answered,
                read_only,
                outcome: ProbeOutcome::Unreachable,
                error_code: None,
                error: Some("the connection was gone before the canary".to_owned()),
            };
        };
        let written = held
            .client
            .execute_within(&mut held.conn, &canary_statement(id), left(deadline))
            .await;
        match written {
            Ok(()) => ProbeReport {
                answered,
                read_only,
                outcome: ProbeOutcome::Acknowledged,
                error_code: None,
                error: None,
            },
            Err(error) => {
                // A refusal leaves the connection usable; anything else replaces it.
                if error.server_code().is_none() {
                    self.held = None;
                }
                failed(ProbeStage::Canary, &error, answered, read_only)
            }
        }
    }

    /// `@@read_only` and `@@hostname`, on the kept connection (replaced when it is for another
    /// address, and once when it broke other than by a timeout: a connection the server
    /// closed or killed says nothing about the site) or a new one.
    async fn read_state(
        &mut self,
        host: &str,
        deadline: Instant,
    ) -> Result<(Option<bool>, Option<String>), LiveError> {
        if self.held.as_ref().is_some_and(|held| held.host != host) {
            self.held = None;
        }
        if let Some(held) = self.held.as_mut() {
            match read_on(held, deadline).await {
                Ok(state) => return Ok(state),
                Err(error) if error.is_timeout() => return Err(error),
                Err(_) => self.held = None,
            }
        }
        let client = client_as(host, CANARY_USER, &self.password);
        let mut conn = match tokio::time::timeout(left(deadline), client.connect()).await {
            Ok(connected) => connected?,
            Err(_) => {
                return Err(LiveError::Timeout {
                    what: format!("connect to mysql at {host}"),
                    timeout: STATEMENT_TIMEOUT,
                })
            }
        };
        // The canary is a probe of writability, not data: never in the binary log, so never
        // replicated, never an errant GTID of a site made writable by hand, never counted lost.
        client
            .execute_within(&mut conn, NO_BINLOG, left(deadline))
            .await?;
        let held = self.held.insert(Held {
            host: host.to_owned(),
            client,
            conn,
        });
        read_on(held, deadline).await
    }
}

/// Reads `@@read_only` and `@@hostname` on `held`.
async fn read_on(
    held: &mut Held,
    deadline: Instant,
) -> Result<(Option<bool>, Option<String>), LiveError> {
    let rows = held
        .client
        .rows_within(
            &mut held.conn,
            "SELECT @@read_only AS ro, @@hostname AS h",
            left(deadline),
        )
        .await?;
    let value = |key: &str| rows.first().and_then(|row| row.get(key).cloned().flatten());
    let read_only = value("ro").map(|text| text.trim() != "0");
    Ok((read_only, value("h")))
}

#[cfg(test)]
mod tests {
    use super::*;

    // docs/design/harness.md#history-and-checkers: a site probe's outcome says what was
    // observed. A server's answer (read_only's 1290 above all) is a refusal; an error with the
    // canary in flight leaves it unknown; an error before it was sent means unreachable.
    #[test]
    fn probe_errors_are_told_apart_by_stage_and_server_answer() {
        let timeout = LiveError::Timeout {
            what: "run".to_owned(),
            timeout: STATEMENT_TIMEOUT,
        };
        assert_eq!(
            outcome_of(ProbeStage::Before, &timeout),
            (ProbeOutcome::Unreachable, None)
        );
        assert_eq!(
            outcome_of(ProbeStage::Canary, &timeout),
            (ProbeOutcome::Unknown, None)
        );
        let refused = LiveError::Query {
            statement: canary_statement(CANARY_ID_BASE + 1),
            source: mysql_async::Error::Server(mysql_async::ServerError {
                code: 1290,
                message: "read-only".to_owned(),
                state: "HY000".to_owned(),
            }),
        };
        assert_eq!(
            outcome_of(ProbeStage::Canary, &refused),
            (ProbeOutcome::Refused, Some(1290))
        );
        let report = |outcome| ProbeReport {
            answered: None,
            read_only: None,
            outcome,
            error_code: None,
            error: None,
        };
        assert_eq!(report(ProbeOutcome::Acknowledged).kind(), EventType::Ok);
        assert_eq!(report(ProbeOutcome::Unknown).kind(), EventType::Info);
        assert_eq!(report(ProbeOutcome::Unreachable).kind(), EventType::Fail);
        assert_eq!(report(ProbeOutcome::NoAddress).kind(), EventType::Fail);
    }

    #[test]
    fn canaries_name_their_site_by_the_group_pod_name() {
        assert_eq!(
            site_of_pod_name("playground", "mysql-playground-pdx-0"),
            Some(Site::Pdx)
        );
        assert_eq!(site_of_pod_name("other", "mysql-playground-pdx-0"), None);
        assert_eq!(process_of(Site::Reader), "site-probe-reader");
        assert!(canary_statement(7).starts_with("INSERT INTO `harness`.`canary` (id, site, at)"));
    }
}
