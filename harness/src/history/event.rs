//! History events (Jepsen's model): every client operation is an invoke followed by a
//! completion of the same process, `ok`, `fail` or `info` (outcome unknown).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::scenario::model::{Fault, Partition, SharedService, Site};
use crate::scenario::span::Span;

/// The type of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventType {
    /// The operation started.
    Invoke,
    /// It happened.
    Ok,
    /// It definitely did not happen.
    Fail,
    /// Unknown: a timeout or a lost connection; it may have happened.
    Info,
}

impl EventType {
    /// Whether this is a completion (anything but `invoke`).
    pub const fn is_completion(self) -> bool {
        !matches!(self, EventType::Invoke)
    }
}

/// Whether a fault starts or ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultPhase {
    /// The fault begins (injection).
    Start,
    /// The fault ends (heal, thaw, start-node ...).
    End,
}

/// emergency or planned, as `status.lastFailover.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailoverKind {
    /// The active site failed.
    Emergency,
    /// Requested by annotation or `kubectl bloodraven promote`.
    Planned,
}

/// `status.lastFailover` as observed (times are the operator's wall clock).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailoverRecord {
    /// emergency | planned.
    pub kind: FailoverKind,
    /// The old active site.
    pub from: Site,
    /// The new active site.
    pub to: Site,
    /// When the failover began.
    pub started_at: jiff::Timestamp,
    /// When the failure was detected (emergency).
    #[serde(default)]
    pub detected_at: Option<jiff::Timestamp>,
    /// When the old primary was known fenced.
    #[serde(default)]
    pub fenced_at: Option<jiff::Timestamp>,
    /// When the new primary was made writable.
    #[serde(default)]
    pub promoted_at: Option<jiff::Timestamp>,
    /// When every surface had moved.
    #[serde(default)]
    pub completed_at: Option<jiff::Timestamp>,
    /// Transactions lost, as the operator counts them.
    #[serde(default)]
    pub lost_transactions: Option<u64>,
    /// Those transactions as a GTID set (`lostGtidSet`, the flavor's text form). The RPO
    /// checker compares it, by GTID, with the acknowledged writes lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_gtid_set: Option<String>,
    /// Whether `lost_transactions` is exact (old primary's data read back) or a lower bound.
    #[serde(default)]
    pub exact: bool,
}

/// What an event is about. The invoke carries the request; the completion carries the
/// request again plus what came back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "f", rename_all = "kebab-case")]
pub enum Op {
    /// A write of a unique id through `-primary`; `site` is the site that answered and
    /// `gtid` the transaction it committed as.
    Write {
        /// The unique id written.
        id: u64,
        /// The site whose mysqld acknowledged (completion `ok` only): `@@hostname` read in
        /// the same transaction.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<Site>,
        /// The GTID the write committed as (completion `ok` only), in the flavor's text form:
        /// MariaDB `domain-server_id-seq` (`@@last_gtid`), MySQL `uuid:n` or `uuid:tag:n`
        /// (`session_track_gtids=OWN_GTID`). The RPO checker compares it with the
        /// operator's `lostGtidSet`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        gtid: Option<String>,
        /// The error text (completion `fail`/`info`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A read of the largest written id through a shared Service.
    Read {
        /// `-primary` or `-replicas`.
        via: SharedService,
        /// The site that answered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<Site>,
        /// The largest id seen.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_id: Option<u64>,
    },
    /// A DNS lookup of the group's hostname.
    Dns {
        /// The addresses answered.
        #[serde(default)]
        addresses: Vec<String>,
        /// The site whose internal Service ClusterIP was answered, if one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<Site>,
    },
    /// The ready endpoints of a Service, as sites.
    Endpoints {
        /// `primary`, `replicas`, `<site>`.
        service: String,
        /// The sites behind it.
        #[serde(default)]
        sites: Vec<Site>,
    },
    /// A snapshot of the group's status (see [`Op::status_of_group`]).
    Status {
        /// `status.activeSite`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        active_site: Option<Site>,
        /// `status.topologyGeneration`.
        #[serde(default)]
        topology_generation: u64,
        /// `status.authority` state (Valid | Invalid).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        authority: Option<String>,
        /// `status.lastFailover`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last_failover: Option<FailoverRecord>,
        /// `status.restore` (a restore in place of the active site,
        /// docs/design/history.md#issue-12-part-2).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        restore: Option<Box<RestoreRecord>>,
        /// `spec.pollInterval` in ms, for the detection window of the timings checker.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        poll_interval_ms: Option<u64>,
        /// `spec.failureThreshold`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure_threshold: Option<u32>,
        /// `spec.writeLease.duration` in ms, when the spec sets one (else the lease is
        /// `pollInterval x failureThreshold`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lease_ms: Option<u64>,
    },
    /// The other groups of a fleet run (`install.fleet`), read together: how many groups the
    /// namespace holds and those others whose authority is not Valid (`name: state`).
    Fleet {
        /// Groups in the playground's namespace, the playground included.
        groups: u32,
        /// The other groups whose authority is not Valid.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        not_valid: Vec<String>,
    },
    /// The operator's own cost, from its metrics page (a fleet run): cumulative CPU time,
    /// resident memory, requests to the API server, and its polls' histogram over every group.
    OperatorCost {
        /// `process_cpu_seconds_total`, in ms.
        cpu_ms: u64,
        /// `process_resident_memory_bytes`.
        rss_bytes: u64,
        /// `bloodraven_kube_requests_total`, every method.
        kube_requests: u64,
        /// `bloodraven_group_poll_duration_seconds` over every group: cumulative counts by
        /// upper bound in µs (`u64::MAX` for `+Inf`), so a window's p50 and p99 come from two
        /// scrapes' difference.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        poll_buckets: Vec<(u64, u64)>,
        /// How many groups the operator has polled.
        groups_polled: u32,
    },
    /// A fault's start or end (the nemesis).
    Fault {
        /// The fault kind (`kill`, `deny-rbac`, ...).
        name: String,
        /// Start or end.
        phase: FaultPhase,
        /// The fault's parameters, for humans.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        detail: String,
        /// The sites it acts on ([`fault_sites`]); the timings checker takes the fault that
        /// can trigger a failover from these.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        sites: Vec<Site>,
    },
    /// The final read, after heal and liveness and after the workload stopped and drained:
    /// per site that could be read, every workload id present in its table (a site that
    /// could not be read is absent, never an empty list); and which site committed the rows
    /// the split-brain checker needs, from each row's `site` column (`@@hostname` at commit,
    /// replicated with the row): the writes of unknown outcome and every canary row of the
    /// site probes ([`Op::SiteProbe`]). Histories recorded before these were read lack them.
    FinalState {
        /// Ids present, by site.
        #[serde(default)]
        sites: BTreeMap<Site, Vec<u64>>,
        /// The committing site of each writer id whose write's outcome is unknown (`info`,
        /// or never completed) and which some site holds.
        #[serde(
            default,
            skip_serializing_if = "BTreeMap::is_empty",
            deserialize_with = "ids_by_text"
        )]
        committed: BTreeMap<u64, Site>,
        /// The committing site of every canary row found (`harness.canary`), by canary id.
        #[serde(
            default,
            skip_serializing_if = "BTreeMap::is_empty",
            deserialize_with = "ids_by_text"
        )]
        canaries: BTreeMap<u64, Site>,
    },
    /// After the final read: each readable site's executed GTID set, read directly from its
    /// mysqld (MariaDB `@@gtid_binlog_state`, MySQL `@@gtid_executed`), and the group's
    /// `status.lastFailover` and `activeSite` read right after them, so the operator's
    /// `lostGtidSet` is compared with the harness's own reads of the same moment.
    GtidState {
        /// Executed set, by site read.
        #[serde(default)]
        sites: BTreeMap<Site, String>,
        /// `status.lastFailover`, read after the sets.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last_failover: Option<FailoverRecord>,
        /// `status.activeSite`, read after the sets.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        active_site: Option<Site>,
        /// Why the read failed, when it did (missing evidence is a finding).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// Lines of the in-cluster workload's event log (`runs/<run>.jsonl` in the workload pod,
    /// [`crate::incluster`]) that never reached the history, after the harness followed the
    /// log again from the first missing line: the operations on them are unknown, so the
    /// history cannot prove what the workload saw. Recorded by process `workload-log`, and a
    /// finding of the workload liveness checker ([`crate::check::liveness`]).
    WorkloadGap {
        /// The run's id.
        run: String,
        /// The missing sequence numbers as ranges (`3-7, 12`); empty when they are not known
        /// (the run's log could not be read at all).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        missing: String,
        /// How many lines are missing (or were never written, per the pod).
        missing_count: u64,
        /// Why: the stream broke and following again did not bring them, the pod's daemon
        /// could not write them, the run was aborted, ...
        reason: String,
    },
    /// A prober declares itself (process `probes`, when it starts): these processes each ask
    /// every `period_ms`. A gap of more than three periods between two of their questions
    /// after the first fault is a finding of the workload liveness checker: what they watch
    /// is unknown in it.
    Probing {
        /// The probe processes (`status`, `endpoints-primary`, `dns`, `site-probe-iad`, ...).
        processes: Vec<String>,
        /// Their period, in ms.
        period_ms: u64,
        /// The bound on one question, in ms, when the probe bounds it (the site probes: a
        /// frozen site is asked until this bound, and waiting for it is no hole). Absent: the
        /// gap is counted from one question's start to the next.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer_max_ms: Option<u64>,
    },
    /// A site probe (process `site-probe-<site>`, in the workload pod, every ~100 ms): it
    /// connects to the site's mysqld by pod IP (never through a Service) as the workload user,
    /// who is subject to read_only, reads `@@read_only` and `@@hostname`, and writes canary
    /// `canary_id` into `harness.canary`. The invoke names the site, its pod IP and the
    /// canary; the completion adds what came back. `ok`: the canary was acknowledged; `fail`:
    /// refused, unreachable, or no pod IP known; `info`: sent without an answer. The
    /// split-brain checker ([`crate::check::split_brain`]) takes acknowledgements and denials
    /// from these.
    SiteProbe {
        /// The site probed.
        site: Site,
        /// The pod IP dialled (`None`: none known yet, nothing was asked).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pod_ip: Option<String>,
        /// The canary's id (at least [`CANARY_ID_BASE`], never a writer's id).
        canary_id: u64,
        /// The site that answered, from `@@hostname` (completion only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answered: Option<Site>,
        /// `@@read_only` as read before the canary (completion only; `None`: not read).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        read_only: Option<bool>,
        /// How the probe ended (completion only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<ProbeOutcome>,
        /// The server's error number when it refused (1290: read_only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_code: Option<u16>,
        /// The error text, when there was one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The RPO sealed by a `seal-rpo` step: every workload id present, by surviving site,
    /// when the primary had died and before any promotion.
    Sealed {
        /// Ids present, by site (every named site was read).
        #[serde(default)]
        sites: BTreeMap<Site, Vec<u64>>,
    },
    /// The automatic seal (process `seal`): right after a fault took the active site's
    /// primary away (a kill, freeze, node stop or pod deletion of its mysqld, a partition of
    /// the sites, nodes or peers cutting it off), what every other site held, read by the harness
    /// itself from each mysqld. The survivors checker ([`crate::check::survivors`]) judges
    /// the emergency failover that follows from it. The invoke carries the trigger and the
    /// active site with no sets; the completion is `ok` when every survivor was read, `fail`
    /// (with the sites read so far) when one could not be.
    SurvivorsHeld {
        /// The fault that took the primary away: its kind and parameters (the step's JSON).
        trigger: String,
        /// The active site whose primary the fault took away.
        active: Site,
        /// What each survivor read held, by site.
        #[serde(default)]
        sites: BTreeMap<Site, HeldGtids>,
        /// Survivors that could not be read, with why (never left out silently).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        unread: BTreeMap<Site, String>,
    },
    /// What an `archive` expectation read back (process `archive`, recorded by the runner when
    /// the step ends: `ok` when it was satisfied, `fail` when not): every archive directory on
    /// the site's backups volume, each verified against its own manifest
    /// ([`crate::check::archive::verify_archive`]). The archive checker
    /// ([`crate::check::archive`]) compares the archives written since `since` with the
    /// acknowledged writes lost in the emergency failover that demoted the site.
    ArchiveRead {
        /// The site whose volume was read.
        site: Site,
        /// Archives count from here (the scenario's start, on the harness's clock): an
        /// earlier one is another scenario's, left on a volume a reused cluster kept.
        since: jiff::Timestamp,
        /// What each archive directory held, in name order.
        #[serde(default)]
        archives: Vec<ArchiveRead>,
    },
}

/// One archive directory (`archives/<name>/` on a site's backups volume) as the harness read
/// it back through the site's sidecar container, never as the operator or the sidecar
/// describe it: each file the manifest names is read and hashed by the harness, and the
/// errant-binlog file's GTID event headers are parsed by the harness's own reader.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveRead {
    /// The directory's name.
    pub name: String,
    /// Whether it holds `manifest.json` (written last: without it the archive is partial
    /// and never counts).
    pub manifest: bool,
    /// The manifest's `createdAt` (the sidecar's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<jiff::Timestamp>,
    /// The manifest's `rejoinId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejoin_id: Option<u64>,
    /// The manifest's `errantGtidSet`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errant_gtid_set: Option<String>,
    /// The GTIDs of the GTID event headers in the errant-binlog file, in file order (a
    /// repeated one is listed again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub binlog_gtids: Vec<String>,
    /// Each file the manifest names, with what was read back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<ArchiveFileRead>,
    /// What does not verify: empty when the archive is intact.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// A file an archive's manifest names, and what the harness read back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveFileRead {
    /// Its name in the archive directory.
    pub name: String,
    /// Its role (`errant-binlog`, `dump`).
    pub role: String,
    /// Its size as the manifest says.
    pub bytes: u64,
    /// Its SHA-256 as the manifest says.
    pub sha256: String,
    /// Its size read back (`None`: it could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bytes: Option<u64>,
    /// The SHA-256 of what was read back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_sha256: Option<String>,
}

/// The canary ids of the site probes start here ([`Op::SiteProbe`]): the writers' ids count
/// from 1 and never reach it, so an id names its kind even out of context. Canaries have their
/// own table (`harness.canary`); the RPO checker never sees them.
pub const CANARY_ID_BASE: u64 = 1_000_000_000_000;

/// MySQL's "running with --read-only" error (`ER_OPTION_PREVENTS_STATEMENT`).
pub const ER_READ_ONLY: u16 = 1290;

/// How a site probe ended ([`Op::SiteProbe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProbeOutcome {
    /// The canary was acknowledged (completion `ok`).
    Acknowledged,
    /// The server refused (completion `fail`): `error_code` says why, 1290 for read_only.
    Refused,
    /// The canary was sent and no answer came (a timeout, the connection lost): it may have
    /// committed (completion `info`).
    Unknown,
    /// No connection could be made or kept before the canary was sent: refused, timed out or
    /// lost (completion `fail`). The site is unreachable from where the applications' clients
    /// are.
    Unreachable,
    /// No pod IP of the site was known (completion `fail`): nothing was asked, so nothing was
    /// learned about the site.
    NoAddress,
}

/// What one surviving site held when the primary was taken away, as GTID sets in the
/// flavor's text form (MariaDB positions, `0-1-120`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldGtids {
    /// Applied: MariaDB `@@GLOBAL.gtid_current_pos`.
    pub executed: String,
    /// Received into the relay log: the replication connection's `Gtid_IO_Pos` from `SHOW
    /// ALL SLAVES STATUS` (the union over connections; empty when not replicating).
    pub retrieved: String,
}

/// The sites a fault acts on, as recorded in [`Op::Fault`]: the site of a kill, freeze,
/// thaw, pod deletion, node stop/start, read_only or replication fault or partition. Empty
/// for faults of no site. (An action's are [`crate::scenario::model::Action::sites`].)
pub fn fault_sites(fault: &Fault) -> Vec<Site> {
    match fault {
        Fault::Kill(target) => vec![target.site],
        Fault::Freeze(target) | Fault::Thaw(target) => vec![target.site],
        Fault::ClockOffset(target) => vec![target.site],
        Fault::DeletePod(target) | Fault::StopNode(target) | Fault::StartNode(target) => {
            vec![target.site]
        }
        Fault::Partition(
            Partition::Sites(sites) | Partition::Nodes(sites) | Partition::Peers(sites),
        ) => sites.clone(),
        Fault::SetReadOnly { site, .. } | Fault::ReplicationDelay { site, .. } => vec![*site],
        Fault::KillOperator { .. }
        | Fault::DenyRbac { .. }
        | Fault::ScaleOperator { .. }
        | Fault::StopExternalDns => Vec::new(),
    }
}

/// Reads a map keyed by id as written (JSON object keys are text). Inside [`Op`], an
/// internally tagged enum, serde buffers the map first and then refuses to read its text keys
/// as numbers, so the ids are parsed here (a history re-read by `bloodraven-upgrade` or a report
/// failed on `final-state` without this).
fn ids_by_text<'de, D>(deserializer: D) -> Result<BTreeMap<u64, Site>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::Deserialize as _;
    BTreeMap::<String, Site>::deserialize(deserializer)?
        .into_iter()
        .map(|(id, site)| {
            id.parse::<u64>()
                .map(|id| (id, site))
                .map_err(|_| serde::de::Error::custom(format!("id {id:?} is not a number")))
        })
        .collect()
}

impl Op {
    /// Whether this is a site probe's completion that observed its site not accepting
    /// writes: the canary refused for read_only (1290), `@@read_only` read as 1 (and the canary
    /// not acknowledged), or the site unreachable. A refusal for any other reason, an unknown
    /// outcome and a probe without an address are not.
    pub fn is_denial(&self) -> bool {
        let Op::SiteProbe {
            outcome: Some(outcome),
            read_only,
            error_code,
            ..
        } = self
        else {
            return false;
        };
        match outcome {
            ProbeOutcome::Unreachable => true,
            ProbeOutcome::Refused | ProbeOutcome::Unknown => {
                *error_code == Some(ER_READ_ONLY) || *read_only == Some(true)
            }
            ProbeOutcome::Acknowledged | ProbeOutcome::NoAddress => false,
        }
    }

    /// The `fault` op of a fault's start or end: its kind, its parameters as `detail`, and
    /// [`fault_sites`].
    pub fn fault(fault: &Fault, phase: FaultPhase) -> Op {
        Op::Fault {
            name: fault.kind().to_owned(),
            phase,
            detail: serde_json::to_string(fault).unwrap_or_default(),
            sites: fault_sites(fault),
        }
    }

    /// An `operator-cost` op that says nothing yet: the scrape's invoke, or one that failed.
    pub fn operator_cost_unknown() -> Op {
        Op::OperatorCost {
            cpu_ms: 0,
            rss_bytes: 0,
            kube_requests: 0,
            poll_buckets: Vec::new(),
            groups_polled: 0,
        }
    }

    /// A `fleet` op that says nothing yet: the read's invoke, or a read that failed.
    pub fn fleet_unknown() -> Op {
        Op::Fleet {
            groups: 0,
            not_valid: Vec::new(),
        }
    }

    /// A `status` op that says nothing yet: the read's invoke, or a read that failed.
    pub fn status_unknown() -> Op {
        Op::Status {
            active_site: None,
            topology_generation: 0,
            authority: None,
            last_failover: None,
            restore: None,
            poll_interval_ms: None,
            failure_threshold: None,
            lease_ms: None,
        }
    }

    /// The `status` op of a MysqlFailoverGroup object (its `status` and the `spec` fields
    /// the checkers need).
    pub fn status_of_group(group: &Value) -> Op {
        let status = &group["status"];
        let spec = &group["spec"];
        Op::Status {
            active_site: status["activeSite"].as_str().and_then(Site::from_name),
            topology_generation: status["topologyGeneration"].as_u64().unwrap_or(0),
            authority: status["authority"]["state"].as_str().map(str::to_owned),
            last_failover: FailoverRecord::from_status(&status["lastFailover"]),
            restore: RestoreRecord::from_status(&status["restore"]).map(Box::new),
            poll_interval_ms: spec["pollInterval"]
                .as_str()
                .and_then(|text| Span::parse(text).ok())
                .and_then(|span| u64::try_from(span.duration().as_millis()).ok()),
            failure_threshold: spec["failureThreshold"]
                .as_u64()
                .and_then(|value| u32::try_from(value).ok()),
            lease_ms: spec["writeLease"]["duration"]
                .as_str()
                .and_then(|text| Span::parse(text).ok())
                .and_then(|span| u64::try_from(span.duration().as_millis()).ok()),
        }
    }
}

impl FailoverRecord {
    /// Parses `status.lastFailover` (None when absent or without kind, sites or startedAt).
    pub fn from_status(value: &Value) -> Option<FailoverRecord> {
        let time = |key: &str| {
            value[key]
                .as_str()
                .and_then(|text| text.parse::<jiff::Timestamp>().ok())
        };
        Some(FailoverRecord {
            kind: match value["kind"].as_str()? {
                "planned" => FailoverKind::Planned,
                "emergency" => FailoverKind::Emergency,
                _ => return None,
            },
            from: Site::from_name(value["from"].as_str()?)?,
            to: Site::from_name(value["to"].as_str()?)?,
            started_at: time("startedAt")?,
            detected_at: time("detectedAt"),
            fenced_at: time("fencedAt"),
            promoted_at: time("promotedAt"),
            completed_at: time("completedAt"),
            lost_transactions: value["lostTransactions"].as_u64(),
            lost_gtid_set: value["lostGtidSet"].as_str().map(str::to_owned),
            exact: value["exact"].as_bool().unwrap_or(false),
        })
    }
}

/// A restore in place as the operator reports it (`status.restore`): the active site was
/// fenced, loaded from a backup and re-promoted; what it had committed after the backup is
/// lost, on purpose, and named by `lostGtidSet`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreRecord {
    /// The site restored.
    pub site: Site,
    /// The backup restored from.
    pub backup: String,
    /// The phase (`Completed`, `Failed`, ...).
    pub phase: String,
    /// When the request was first seen.
    pub requested_at: jiff::Timestamp,
    /// When the site was confirmed read-only under the fence.
    #[serde(default)]
    pub fenced_at: Option<jiff::Timestamp>,
    /// When the site was re-promoted.
    #[serde(default)]
    pub promoted_at: Option<jiff::Timestamp>,
    /// `lostTransactions`.
    #[serde(default)]
    pub lost_transactions: Option<u64>,
    /// `lostGtidSet`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_gtid_set: Option<String>,
    /// `exact`.
    #[serde(default)]
    pub exact: bool,
}

impl RestoreRecord {
    /// Parses `status.restore` (None when absent or without site, backup, phase or
    /// requestedAt).
    pub fn from_status(value: &Value) -> Option<RestoreRecord> {
        let time = |key: &str| {
            value[key]
                .as_str()
                .and_then(|text| text.parse::<jiff::Timestamp>().ok())
        };
        Some(RestoreRecord {
            site: Site::from_name(value["site"].as_str()?)?,
            backup: value["backup"].as_str()?.to_owned(),
            phase: value["phase"].as_str()?.to_owned(),
            requested_at: time("requestedAt")?,
            fenced_at: time("fencedAt"),
            promoted_at: time("promotedAt"),
            lost_transactions: value["lostTransactions"].as_u64(),
            lost_gtid_set: value["lostGtidSet"].as_str().map(str::to_owned),
            exact: value["exact"].as_bool().unwrap_or(false),
        })
    }
}

/// One history event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// The logical process (client) that issued it: `writer-0`, `dns`, `nemesis`, ...
    pub process: String,
    /// invoke | ok | fail | info.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// What it is about.
    pub op: Op,
    /// Wall-clock time.
    pub wall: jiff::Timestamp,
    /// Monotonic nanoseconds since the scenario started.
    pub mono_ns: u64,
}
