//! [`Observation`]: everything the operator read in one poll, the first input of
//! [`decide`](super::decide).
//!
//! # Contract with the shell (operator and simulator)
//!
//! - One `Observation` per poll, gathered before `decide` runs; nothing in it is a cache.
//! - **Read order:** the shell reads every other site *before* the site that memory names
//!   active (`GroupMemory::active_site`). A replica's GTID set read first is then a subset of
//!   the active site's set read after it, so `replica - active` is exactly the replica's errant
//!   transactions, even under write load.
//! - **Errors are unknowns.** A sidecar that did not answer, answered with a non-2xx status or
//!   timed out is [`SidecarReading::Unreachable`]. After any mutation (an [`Action`]) that
//!   returned an error or timed out, the shell does not guess its outcome: the next
//!   `Observation` re-reads the state, and `decide` only ever acts on what was read
//!   (docs/design/requirements.md R001.15: "The only correct response to a failed or cancelled
//!   mutation is to re-read the state").
//!
//! [`Action`]: super::Action

use bloodraven_api::{
    sidecar::{LeaseTerms, SidecarStatus},
    DNSEndpointSpec,
};

use super::note::{FailoverNoteError, NoteReading};
use crate::deploy::HoldInfo;
use crate::time::{Duration, Timestamp};

/// Everything read in one poll of one `MysqlFailoverGroup`.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    /// `metadata.name` of the `MysqlFailoverGroup` (names every object and the authority).
    pub group: String,
    /// `metadata.namespace` of the group (part of the canonical replication source host).
    pub namespace: String,
    /// One entry per site read this poll, keyed by [`SiteObservation::site`]. A site of the
    /// spec that is missing here is treated as [`SidecarReading::Unreachable`].
    pub sites: Vec<SiteObservation>,
    /// The group's annotations as read this poll.
    pub annotations: GroupAnnotations,
    /// The live failover-hold, if any (from the deploy module's lease store, judged on the
    /// operator's clock). Only planned failover consults it; emergency failover,
    /// returning-primary fencing and primary reassertion never do (docs/design/requirements.md
    /// R003.18).
    pub deploy_hold: Option<HoldInfo>,
    /// The group's `DNSEndpoint` (`bloodraven-<group>`) as read back this poll.
    pub dns: DnsReading,
    /// When the poll began reading (the sidecars' answers are of that instant, give or take
    /// a round trip); `None`: the decision time. Failure streaks are timed on it: a first
    /// failed read that took its whole timeout must not start the streak a timeout late.
    pub polled_at: Option<Timestamp>,
}

/// What was read of one site.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteObservation {
    /// Site name, as in `spec.sites[].name`.
    pub site: String,
    /// The sidecar's `GET /v1/status` answer, or why there is none.
    pub sidecar: SidecarReading,
    /// `spec.nodeName` of the site's pod (`mysql-<group>-<site>-0`); `None` when the pod does
    /// not exist or is not scheduled. The demotion taint is put on this node.
    pub node_name: Option<String>,
    /// `spec.clusterIP` of the site's internal Service (`mysql-<group>-<site>`); `None` when the
    /// Service does not exist yet. The DNS A record points at the active site's.
    pub service_cluster_ip: Option<String>,
    /// How long the sidecar container has been running according to the pod status. A peer
    /// that reports no grant counts towards the lease-wait majority only if it has been up
    /// longer than the wait bound: a restarted sidecar forgot the grants of its previous run.
    /// The pod status lags a container restart, so the uptime the sidecar reports itself
    /// (`SidecarStatus::runtime`) is used whenever it is there; this is only the fallback for
    /// a sidecar too old to report it. `None`: unknown, and such a peer does not count.
    pub sidecar_uptime: Option<Duration>,
    /// The lease terms the site pod's sidecar was created with (its `--sites` and
    /// `--lease-duration-ms` flags), read from the pod object: known even while the sidecar
    /// does not answer, which is when the old active site's terms matter. `None`: no pod, or
    /// the flags are not there.
    pub pod_lease_terms: Option<LeaseTerms>,
    /// The site pod as the API server and its kubelet report it: the agent outside the pod,
    /// which an emergency failover asks to kill an old primary whose sidecar is gone
    /// (docs/design/history.md#issue-10-the-agentless-primary, `engine::agentless`).
    pub pod: PodReading,
}

/// What was read of a site pod (`mysql-<group>-<site>-0`).
#[derive(Clone, Debug, PartialEq, Default)]
pub enum PodReading {
    /// The read failed: nothing is known (never taken as "gone").
    #[default]
    Unknown,
    /// The API server answered that no such pod exists.
    Absent,
    /// The pod exists.
    Present(PodFacts),
}

/// The facts about an existing site pod that the agentless rule reads.
#[derive(Clone, Debug, PartialEq)]
pub struct PodFacts {
    /// `metadata.uid`: the deletion is made conditional on it, so a recreated pod of the same
    /// name is never the one deleted.
    pub uid: String,
    /// `metadata.creationTimestamp` (the API server's clock, whole seconds).
    pub created_at: Timestamp,
    /// `metadata.deletionTimestamp` is set: the kubelet is stopping its containers.
    pub terminating: bool,
    /// The kubelet reports the sidecar container ready (running, and its `/healthz` probe
    /// passing). A crashed, killed or hung sidecar reads `false`, a hung one only once the
    /// readiness probe failed.
    pub sidecar_ready: bool,
    /// The kubelet reports the mysql container running (a frozen process is running; a
    /// crashed one, waiting for its restart, is not, and restarts read-only).
    pub mysql_running: bool,
    /// The image of the pod's `mysql` container (`spec.containers[mysql].image`): what the
    /// ordered update compares with `spec.image` (`engine::update`). `None`: not known.
    pub mysql_image: Option<String>,
    /// The pod's node reports `Ready=True`: its kubelet heartbeats, so it carries out a
    /// deletion. `None`: no node, or the node could not be read.
    pub node_ready: Option<bool>,
}

/// The outcome of reading a site's sidecar.
#[derive(Clone, Debug, PartialEq)]
pub enum SidecarReading {
    /// No usable answer: refused, timed out, non-2xx, or undecodable. Counts as a failed poll.
    Unreachable {
        /// Why, for events and status (a lowercase fragment).
        error: String,
    },
    /// The sidecar answered. `status.mysql.reachable == false` is "MySQL down": also a failed
    /// poll for failure detection.
    Reachable(Box<SidecarStatus>),
}

/// The annotations of the group that `decide` reads.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct GroupAnnotations {
    /// `bloodraven.shipstream.io/planned-failover=<site>`: a planned failover request (written
    /// by a human or `kubectl bloodraven promote`).
    pub planned_failover: Option<String>,
    /// `bloodraven.shipstream.io/revoke-deployment-leases` is present (any value).
    pub revoke_deployment_leases: bool,
    /// `bloodraven.shipstream.io/cooldown-until`: the second persisted copy of the cooldown
    /// end. `None` when absent or unparsable. It can be lost independently of the status copy
    /// (`GroupMemory::cooldown_until`); the later of the two is in force.
    pub cooldown_until: Option<Timestamp>,
    /// `bloodraven.shipstream.io/backup`: the name of a backup to take of the active site.
    pub backup: Option<String>,
    /// `bloodraven.shipstream.io/restore`: the backup to restore the active site from.
    pub restore: Option<String>,
    /// `bloodraven.shipstream.io/rejoin`: the fenced returning primary to rejoin (written by
    /// a human or `kubectl bloodraven rejoin`).
    pub rejoin: Option<String>,
    /// `bloodraven.shipstream.io/last-failover`: the failover last issued, a copy of the
    /// promotion kept apart from the status (`FailoverNote`), with what the shell found of
    /// its signature (`NoteReading`; only a verified note is adopted). `None` when absent; an
    /// error when the value is not the note's format (reported, not used).
    pub last_failover: Option<Result<NoteReading, FailoverNoteError>>,
}

/// The live `DNSEndpoint` as read back this poll.
#[derive(Clone, Debug, PartialEq)]
pub enum DnsReading {
    /// The object does not exist.
    Absent,
    /// The object exists with this spec.
    Present(DNSEndpointSpec),
    /// The read failed (an unknown): `decide` applies the desired record, which is idempotent.
    Unknown {
        /// Why, a lowercase fragment.
        error: String,
    },
}
