//! History events (Jepsen's model): every client operation is an invoke followed by a
//! completion of the same process, `ok`, `fail` or `info` (outcome unknown).

use serde::{Deserialize, Serialize};

use crate::scenario::model::{SharedService, Site};

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
    /// A snapshot of the group's status.
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
    },
    /// The final read after heal and liveness: every id present on the active site.
    FinalState {
        /// The ids present.
        ids: Vec<u64>,
    },
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
