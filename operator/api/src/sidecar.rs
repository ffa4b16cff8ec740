//! Wire types of the sidecar HTTP API (port [`crate::names::PORT_SIDECAR`], 8086), shared by the sidecar, the operator and the
//! simulator.
//!
//! The sidecar is the correctness layer: it makes mysqld writable only while it holds (a) an
//! [`Authority`] naming its own site for the current topology generation and (b) an unexpired
//! write lease granted by a majority of all sites' sidecars (itself included; the reader
//! votes). Every body is JSON with camelCase field names.
//!
//! | method | path | request | response |
//! |---|---|---|---|
//! | `GET` | `/v1/status` | - | [`SidecarStatus`] |
//! | `PUT` | `/v1/authority` | [`Authority`] | [`AuthorityResponse`] |
//! | `POST` | `/v1/lease` | [`LeaseRequest`] | [`LeaseResponse`] |
//! | `POST` | `/v1/fence` | [`FenceRequest`] | [`FenceResponse`] |
//! | `POST` | `/v1/promote` | [`PromoteRequest`] | [`PromoteResponse`] |
//! | `POST` | `/v1/repoint` | [`RepointRequest`] | [`RepointResponse`] |
//! | `POST` | `/v1/databases` | [`EnsureDatabaseRequest`] | [`EnsureDatabaseResponse`] |
//! | `POST` | `/v1/backup`, `/v1/restore`, `/v1/reseed`, `/v1/archive` | see [`backup`] | [`JobStatus`] |
//! | `GET` | `/healthz` | - | `ok` |
//! | `GET` | `/metrics` | - | Prometheus text |
//!
//! Errors are answered with a non-2xx status and an [`ErrorBody`]: 409 for a request naming
//! another group, 400 for an unparsable GTID set, 503 when mysqld could not be reached. A
//! refused authority push is not an error: it is answered 200 with its
//! [`AuthorityDecision`]. Mutations (fence, promote, repoint) answer 200 with a
//! [`MutationReport`] even when the statement failed or timed out: the report carries the
//! error and what was re-read afterwards. Ensuring a database is the one write the sidecar
//! makes on the operator's behalf: it is answered 409 unless the site is the writable active
//! site (a fenced site never takes a write), 400 for an invalid name, and 503 when the schema
//! could not be created and was not found afterwards.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Timestamp;

pub mod backup;
pub use backup::{
    backup_name_problem, mysqld_gate_command, ArchiveFile, ArchiveManifest, ArchiveRequest,
    BackupInfo, BackupRequest, JobKind, JobState, JobStatus, ReseedRequest, RestoreRequest,
    ARCHIVES_DIR, ARCHIVE_MANIFEST, MYSQLD_GATE_NAME, MYSQLD_GATE_SCRIPT, PATH_ARCHIVE,
    PATH_BACKUP, PATH_RESEED, PATH_RESTORE, RESTORE_JOURNAL,
};

/// Path of the status endpoint (`GET`).
pub const PATH_STATUS: &str = "/v1/status";
/// Path of the authority push endpoint (`PUT`).
pub const PATH_AUTHORITY: &str = "/v1/authority";
/// Path of the lease endpoint (`POST`), called by the active site's sidecar on its peers.
pub const PATH_LEASE: &str = "/v1/lease";
/// Path of the fence endpoint (`POST`).
pub const PATH_FENCE: &str = "/v1/fence";
/// Path of the promote endpoint (`POST`).
pub const PATH_PROMOTE: &str = "/v1/promote";
/// Path of the repoint endpoint (`POST`).
pub const PATH_REPOINT: &str = "/v1/repoint";
/// Path of the database endpoint (`POST`): ensure a `MysqlDatabase`'s schema exists on the
/// active site.
pub const PATH_DATABASES: &str = "/v1/databases";
/// Path of the liveness endpoint (`GET`).
pub const PATH_HEALTHZ: &str = "/healthz";
/// Path of the Prometheus metrics endpoint (`GET`).
pub const PATH_METRICS: &str = "/metrics";

/// The operator's statement of which site may be writable, pushed to every sidecar on every
/// poll and cached by each sidecar in memory only.
///
/// `active_site: None` is the "authority is moving" notice: from the moment a sidecar caches
/// it, it grants write leases to nobody, so the old active site loses its majority lease and
/// fences itself within one lease duration.
///
/// A sidecar accepts a pushed authority only if it moves forward (see
/// [`Authority::supersedes`]); everything else is refused and the cached one is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Authority {
    /// Name of the `MysqlFailoverGroup` this authority belongs to.
    pub group: String,
    /// The one site allowed to be writable, or `None` while the authority is moving.
    pub active_site: Option<String>,
    /// The group's durable topology generation this authority was issued for.
    pub topology_generation: u64,
    /// When the operator issued this record (wall clock, informational only: no sidecar
    /// decision reads it).
    pub issued_at: Timestamp,
    /// On the "authority is moving" notice (`active_site: None`): the site the move is away
    /// from, so that an operator whose memory lost the move (a status restored from an older
    /// copy) resumes it from the site that really held the authority, and the failover it
    /// records explains the change (simulator seed 28 with `--status-revert`). `None` on an
    /// authority naming a site, and from operators that predate it. No sidecar decision reads
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moving_from: Option<String>,
}

impl Authority {
    /// The monotonic acceptance rule: whether `self`, when pushed, replaces `cached`.
    ///
    /// - With nothing cached, any authority of the sidecar's group is accepted.
    /// - A greater `topology_generation` is always accepted.
    /// - An equal generation is accepted only when the cached record is the "moving" notice
    ///   (`active_site: None`) and the new one names a site: the operator finishing the move it
    ///   announced. Re-pushing the identical record is a no-op that is also reported as
    ///   accepted (see [`AuthorityDecision::Unchanged`]).
    /// - A lower generation, or a different site for the same generation, is refused: a
    ///   stale or conflicting operator (for example a deposed leader) can never move
    ///   authority backwards.
    ///
    /// The group is checked separately by [`Authority::decide_against`].
    pub fn supersedes(&self, cached: Option<&Authority>) -> bool {
        match cached {
            None => true,
            Some(cached) => {
                self.topology_generation > cached.topology_generation
                    || (self.topology_generation == cached.topology_generation
                        && cached.active_site.is_none()
                        && self.active_site.is_some())
            }
        }
    }

    /// Decides what a sidecar of `group` with `cached` does with this pushed authority.
    pub fn decide_against(&self, group: &str, cached: Option<&Authority>) -> AuthorityDecision {
        if self.group != group {
            return AuthorityDecision::RefusedWrongGroup;
        }
        if let Some(cached) = cached {
            if cached.topology_generation == self.topology_generation
                && cached.active_site == self.active_site
            {
                return AuthorityDecision::Unchanged;
            }
        }
        if self.supersedes(cached) {
            AuthorityDecision::Accepted
        } else {
            AuthorityDecision::RefusedStale
        }
    }
}

/// Outcome of pushing an [`Authority`] to a sidecar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AuthorityDecision {
    /// The pushed record replaced the cached one.
    Accepted,
    /// The pushed record equals the cached one (same generation and active site).
    Unchanged,
    /// The pushed record is older than, or conflicts with, the cached one.
    RefusedStale,
    /// The pushed record names another group.
    RefusedWrongGroup,
}

impl AuthorityDecision {
    /// Whether the sidecar now caches what was pushed.
    pub fn is_in_force(self) -> bool {
        match self {
            AuthorityDecision::Accepted | AuthorityDecision::Unchanged => true,
            AuthorityDecision::RefusedStale | AuthorityDecision::RefusedWrongGroup => false,
        }
    }
}

/// Response to `PUT /v1/authority`.
///
/// It carries the grant bookkeeping too, so that an operator announcing a move learns, in the
/// same round trip, how long ago this peer last granted a lease to each site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorityResponse {
    /// What the sidecar did with the pushed record.
    pub decision: AuthorityDecision,
    /// The authority cached after the push.
    pub cached: Option<Authority>,
    /// Per site, milliseconds since this sidecar last granted it a lease, on the sidecar's own
    /// monotonic clock. A site never granted to is absent.
    pub last_granted_ago_ms: BTreeMap<String, u64>,
}

/// A request for a write lease, sent by the sidecar of the site that believes it is active
/// to every peer sidecar every `duration / 3`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseRequest {
    /// The group the requester belongs to.
    pub group: String,
    /// The requesting site.
    pub site: String,
    /// The topology generation of the authority the requester holds.
    pub topology_generation: u64,
}

/// Why a peer refused a write lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LeaseRefusal {
    /// The peer has no cached authority (it started and the operator has not pushed yet).
    NoAuthority,
    /// The request names another group.
    WrongGroup,
    /// The peer's cached authority is the "authority is moving" notice.
    AuthorityMoving,
    /// The peer's cached authority is for another topology generation.
    GenerationMismatch,
    /// The peer's cached authority names another site as active.
    NotActiveSite,
}

impl LeaseRefusal {
    /// A lowercase sentence fragment for logs and responses.
    pub fn describe(self) -> &'static str {
        match self {
            LeaseRefusal::NoAuthority => "no cached authority",
            LeaseRefusal::WrongGroup => "request names another group",
            LeaseRefusal::AuthorityMoving => "authority is moving",
            LeaseRefusal::GenerationMismatch => "topology generation differs from cached authority",
            LeaseRefusal::NotActiveSite => "cached authority names another active site",
        }
    }
}

/// Response to `POST /v1/lease`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseResponse {
    /// Whether the peer granted the lease.
    pub granted: bool,
    /// The lease duration the peer granted, in milliseconds; the requester measures it on its
    /// own monotonic clock from the moment it sent the request. Zero when refused.
    pub duration_ms: u64,
    /// Why the lease was refused; `None` when granted.
    pub reason: Option<LeaseRefusal>,
    /// The topology generation of the answering peer's cached authority; `None` with nothing
    /// cached, and from a sidecar older than this field (it is additive). A requester that
    /// learns of a greater generation than its own stops writing: its authority was
    /// superseded by one it never received (docs/design/history.md#issue-10-case-7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
}

/// Replication as the sidecar observed it on its mysqld.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicationState {
    /// Both the IO and the SQL thread are running.
    pub running: bool,
    /// The configured source host, as reported by the server.
    pub source_host: Option<String>,
    /// The configured source port.
    pub source_port: Option<u16>,
    /// `Seconds_Behind_Master` / `Seconds_Behind_Source`; `None` when the server reports NULL.
    pub seconds_behind_source: Option<u64>,
    /// The last IO or SQL error the server reports, if any.
    pub last_error: Option<String>,
}

/// What identifies one run of mysqld, so the operator sees a restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MysqldRun {
    /// `@@server_uuid` (MySQL) or `@@server_id` rendered as text (MariaDB, which has no
    /// server UUID).
    pub server_id: String,
    /// Seconds since mysqld started (`Uptime`).
    pub uptime_seconds: u64,
    /// Wall-clock start of this run (observation time minus uptime); changes on a restart.
    pub started_at: Timestamp,
}

/// What the sidecar read from its mysqld on its last observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MysqlObservation {
    /// Whether the last observation reached mysqld.
    pub reachable: bool,
    /// The error of the last observation, when it failed.
    pub error: Option<String>,
    /// Whether mysqld is definitely not running: its port refused the connection (nothing
    /// listens). Only this, or `readOnly: true`, lets the operator skip the lease wait of an
    /// emergency failover; a timeout, access denied, a query or decode error is unknown
    /// (`reachable: false`, `down: false`): mysqld may be alive and writable.
    #[serde(default)]
    pub down: bool,
    /// `@@read_only` (MariaDB) / `@@super_read_only` (MySQL); `None` when unknown.
    pub read_only: Option<bool>,
    /// `@@gtid_executed` (MySQL) / `@@gtid_binlog_pos` (MariaDB) as the server prints it.
    pub gtid_executed: Option<String>,
    /// Replication state; `None` when no replication is configured or it is unknown.
    pub replication: Option<ReplicationState>,
    /// The identity of the mysqld run observed.
    pub mysqld: Option<MysqldRun>,
}

/// The lease as the sidecar holds it (meaningful on the active site).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseState {
    /// Whether an unexpired majority lease is held now.
    pub held: bool,
    /// Milliseconds until the held lease expires; zero when not held.
    pub remaining_ms: u64,
}

/// Response to `GET /v1/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SidecarStatus {
    /// The group this sidecar belongs to.
    pub group: String,
    /// The site this sidecar runs in.
    pub site: String,
    /// When this status was assembled (wall clock).
    pub observed_at: Timestamp,
    /// The last observation of mysqld.
    pub mysql: MysqlObservation,
    /// Whether the sidecar currently holds mysqld read-only on purpose (its rules say it must
    /// not be writable, or an explicit fence is in force).
    pub fenced: bool,
    /// The explicit fence, if one is in force (see [`FenceRequest`]).
    pub fence: Option<FenceState>,
    /// The write lease as held by this sidecar.
    pub lease: LeaseState,
    /// The cached authority; `None` until the operator pushes one (startup safety net).
    pub authority: Option<Authority>,
    /// The greatest topology generation this sidecar process knows was issued: its cached
    /// authority's, or a greater one a peer's lease request or answer named (then the cached
    /// authority is superseded and this site stays read-only). `None` from a sidecar older
    /// than this field, or one that knows none. The operator never issues a generation at or
    /// below it for a new authority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_generation: Option<u64>,
    /// The authority of the greatest generation this sidecar process accepted, kept when a
    /// mysqld restart made it forget the cached one (then `authority` is `None`): evidence of
    /// what the operator issued, which the sidecar never acts on. `None` from an older sidecar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_authority: Option<Authority>,
    /// Per site, milliseconds since this sidecar last granted it a lease, on the sidecar's own
    /// monotonic clock. A site never granted to is absent.
    pub last_granted_ago_ms: BTreeMap<String, u64>,
    /// What this sidecar process runs with: its uptime and the lease terms it grants and
    /// requests with. `None` from a sidecar older than this field (it is additive: such a
    /// status still parses).
    #[serde(default)]
    pub runtime: Option<SidecarRuntime>,
    /// The backups on this site's volume, oldest first (additive: absent from an older
    /// sidecar, or one run without a backup directory).
    #[serde(default)]
    pub backups: Vec<BackupInfo>,
    /// The backup job that runs or last finished ([`backup`]).
    #[serde(default)]
    pub job: Option<JobStatus>,
}

/// What one sidecar process runs with, fixed when it started
/// (docs/design/history.md#issue-10-case-4 and #issue-10-case-7).
///
/// A sidecar's lease terms come from the flags its pod was created with, and site pods are
/// never changed in place (StatefulSets are `OnDelete`), so they can differ from today's
/// spec: the operator judges the lease wait by what the sidecars report, not by the spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SidecarRuntime {
    /// Milliseconds since this sidecar process started, on the monotonic clock its grant ages
    /// are measured on. A restarted sidecar forgot the grants of its previous run; the pod's
    /// container start time lags a container restart, this does not.
    pub uptime_ms: u64,
    /// The lease terms this sidecar grants and requests with.
    pub lease: LeaseTerms,
}

/// The lease terms of one sidecar: the duration it grants (and asks for) and the sites whose
/// majority it counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseTerms {
    /// The lease duration, in milliseconds.
    pub duration_ms: u64,
    /// Every site of the group as this sidecar counts them, itself included: it asks these
    /// for a lease and needs a strict majority of them.
    pub sites: Vec<String>,
}

impl LeaseTerms {
    /// Grants needed for a lease under these terms: a strict majority of the sites.
    pub fn majority(&self) -> usize {
        self.sites.len() / 2 + 1
    }
}

/// An explicit fence in force on a sidecar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FenceState {
    /// The topology generation the fence was issued under; it lifts when an authority of a
    /// greater generation is accepted.
    pub topology_generation: u64,
    /// Why the operator fenced this site.
    pub reason: String,
}

/// Request of `POST /v1/fence`: set mysqld read-only now and keep it so until an authority
/// with a greater generation than `topology_generation` is accepted (planned failover's
/// Draining phase, in-place restore).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FenceRequest {
    /// The group; a request for another group is refused.
    pub group: String,
    /// The topology generation the operator fences under.
    pub topology_generation: u64,
    /// Also kill every client connection (not replication threads, not the sidecar's own).
    pub kill_connections: bool,
    /// Why, for logs and status.
    pub reason: String,
}

/// A mutation's outcome as re-read afterwards: an error or timeout is an unknown, never "did
/// not happen" (docs/design/requirements.md R001.15), so the state is always observed again
/// before answering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MutationReport {
    /// The error the mutating statement returned, or that it timed out.
    pub error: Option<String>,
    /// mysqld as re-read after the mutation.
    pub observed: MysqlObservation,
}

/// Response to `POST /v1/fence`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FenceResponse {
    /// The fence now in force.
    pub fence: FenceState,
    /// Setting read-only, re-read.
    pub read_only: MutationReport,
    /// How many client connections were killed; `None` when not asked or unknown.
    pub killed_connections: Option<u64>,
}

/// What a promotion applies before it detaches replication (`POST /v1/promote`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PromoteDrain {
    /// Planned failover: the old primary is fenced but alive, so replication keeps running
    /// until this GTID set (server syntax: the old primary's executed set) is applied. When
    /// the wait times out replication stays attached and the answer says `drained: false`;
    /// the operator asks again.
    UntilGtidSet(String),
    /// Emergency failover: the source is gone, so what the candidate already received is all
    /// that is left of it. Receiving stops (the I/O thread), the applier runs until the
    /// retrieved set (MariaDB `Gtid_IO_Pos`, MySQL `Retrieved_Gtid_Set`) is applied, then
    /// replication is detached, also when the wait times out first (`drained: false`: what was
    /// not applied by then is lost, as it would be without waiting, and the write outage stays
    /// bounded by the request's timeout).
    Received,
}

/// Request of `POST /v1/promote`: apply what [`PromoteDrain`] says, then stop and reset
/// replication. mysqld becomes writable only through the lease rule, once the operator
/// pushes an authority naming this site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromoteRequest {
    /// The group; a request for another group is refused.
    pub group: String,
    /// What to apply before detaching replication.
    pub drain: PromoteDrain,
    /// The bound of the drain's wait, in milliseconds.
    pub timeout_ms: u64,
}

/// Response to `POST /v1/promote`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromoteResponse {
    /// Whether the drain reached its target (the GTID set, or everything received) in time.
    pub drained: bool,
    /// Stopping and resetting replication, re-read (when a [`PromoteDrain::UntilGtidSet`]
    /// drain timed out: the state re-read, replication left attached, and the error).
    pub detach: MutationReport,
}

/// Request of `POST /v1/repoint`: replicate from `source_host:source_port` (the canonical
/// internal Service name of the active site) with GTID auto-positioning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepointRequest {
    /// The group; a request for another group is refused.
    pub group: String,
    /// Canonical host name of the new source.
    pub source_host: String,
    /// MySQL port of the new source.
    pub source_port: u16,
    /// A failover's catch-up (the candidate fetching from a peer what it lacks): first apply
    /// everything this replica already received from its current source, waiting at most
    /// this many milliseconds, and only then change the source. Changing the source discards
    /// the relay log (MariaDB `CHANGE MASTER`, MySQL `CHANGE REPLICATION SOURCE`), and what a
    /// candidate received from a dead primary and had not applied exists nowhere else. When
    /// the wait times out the repoint is not made (the report carries the error; receiving
    /// stays stopped, the source unchanged) and the operator asks again. `None` (an ordinary repoint to a new
    /// active site): the relay log is discarded, as it must be, since what it holds from an
    /// old primary may be missing on the new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_received_ms: Option<u64>,
}

/// Response to `POST /v1/repoint`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepointResponse {
    /// Changing the source and starting replication, re-read.
    pub repoint: MutationReport,
}

/// The longest schema name MySQL and MariaDB accept, in characters.
pub const DATABASE_NAME_CHARS_MAX: usize = 64;

/// Request of `POST /v1/databases`: make sure the SQL schema `database` (a `MysqlDatabase`'s
/// `spec.database`) exists, creating it on this site only if it is the writable active site
/// (its cached authority names it and it holds the majority lease); replication carries it to
/// the other sites.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnsureDatabaseRequest {
    /// The group; a request for another group is refused.
    pub group: String,
    /// The schema name, verbatim (quoted as an identifier by the sidecar).
    pub database: String,
}

impl EnsureDatabaseRequest {
    /// What is wrong with `database`, if anything (checked by the sidecar, answered 400, and
    /// by the operator before it asks).
    pub fn database_problem(&self) -> Option<DatabaseNameProblem> {
        if self.database.is_empty() {
            Some(DatabaseNameProblem::Empty)
        } else if self.database.contains('\0') {
            Some(DatabaseNameProblem::ContainsNul)
        } else if self.database.chars().count() > DATABASE_NAME_CHARS_MAX {
            Some(DatabaseNameProblem::TooLong)
        } else {
            None
        }
    }
}

/// Why a schema name is refused before any statement is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DatabaseNameProblem {
    /// The name is empty.
    Empty,
    /// The name contains NUL, which no server accepts in an identifier.
    ContainsNul,
    /// The name is longer than [`DATABASE_NAME_CHARS_MAX`] characters.
    TooLong,
}

impl DatabaseNameProblem {
    /// A lowercase sentence fragment naming the field, for logs and error bodies.
    pub fn describe(self) -> &'static str {
        match self {
            DatabaseNameProblem::Empty => "field database is empty",
            DatabaseNameProblem::ContainsNul => "field database contains NUL",
            DatabaseNameProblem::TooLong => "field database is longer than 64 characters",
        }
    }
}

/// Whether `POST /v1/databases` created the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DatabaseOutcome {
    /// It was absent and is there now.
    Created,
    /// It was already there; nothing was written.
    AlreadyExisted,
}

/// Response to `POST /v1/databases` (2xx only: the schema exists on this site now).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnsureDatabaseResponse {
    /// The schema, as requested.
    pub database: String,
    /// Whether this request created it.
    pub outcome: DatabaseOutcome,
    /// The site's read-only flag as read on the connection that checked the schema (`false`:
    /// the check ran on the writable active site).
    pub read_only: Option<bool>,
}

/// Body of every non-2xx sidecar response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    /// A lowercase fragment that reads after "failed to".
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authority(active_site: Option<&str>, topology_generation: u64) -> Authority {
        Authority {
            group: "playground".to_owned(),
            active_site: active_site.map(str::to_owned),
            topology_generation,
            issued_at: Timestamp::from_unix_millis(0),
            moving_from: None,
        }
    }

    #[test]
    fn authority_monotonic_rule_accepts_only_forward_moves() {
        let cached = authority(Some("iad"), 4);
        // A greater generation is always accepted.
        assert!(authority(Some("pdx"), 5).supersedes(Some(&cached)));
        assert!(authority(None, 5).supersedes(Some(&cached)));
        // A lower generation never.
        assert!(!authority(Some("iad"), 3).supersedes(Some(&cached)));
        // Same generation, another site: a conflicting operator, refused.
        assert!(!authority(Some("pdx"), 4).supersedes(Some(&cached)));
        // Same generation, moving notice after a named site: refused (moving bumps nothing).
        assert!(!authority(None, 4).supersedes(Some(&cached)));
        // Same generation, named site after the moving notice: the operator finishing its move.
        let moving = authority(None, 4);
        assert!(authority(Some("pdx"), 4).supersedes(Some(&moving)));
        // Nothing cached: accepted (the startup safety net ends here).
        assert!(authority(Some("iad"), 1).supersedes(None));
    }

    #[test]
    fn authority_decision_checks_group_and_reports_unchanged() {
        let cached = authority(Some("iad"), 4);
        assert_eq!(
            authority(Some("iad"), 4).decide_against("playground", Some(&cached)),
            AuthorityDecision::Unchanged
        );
        assert_eq!(
            authority(Some("iad"), 5).decide_against("other", Some(&cached)),
            AuthorityDecision::RefusedWrongGroup
        );
        assert_eq!(
            authority(Some("iad"), 3).decide_against("playground", Some(&cached)),
            AuthorityDecision::RefusedStale
        );
    }

    /// docs/design/operator.md#mysqldatabase (`spec.database`, created on the primary): a name
    /// is refused before any statement when empty, with NUL, or longer than 64 characters (not
    /// bytes).
    #[test]
    fn database_names_are_checked_before_any_statement() {
        let problem = |database: &str| {
            EnsureDatabaseRequest {
                group: "playground".to_owned(),
                database: database.to_owned(),
            }
            .database_problem()
        };
        assert_eq!(problem("counter"), None);
        assert_eq!(problem("we`ird name"), None, "quoting handles backquotes");
        assert_eq!(problem(&"é".repeat(64)), None, "64 characters, 128 bytes");
        assert_eq!(problem(""), Some(DatabaseNameProblem::Empty));
        assert_eq!(problem("a\0b"), Some(DatabaseNameProblem::ContainsNul));
        assert_eq!(problem(&"a".repeat(65)), Some(DatabaseNameProblem::TooLong));
        for problem in [
            DatabaseNameProblem::Empty,
            DatabaseNameProblem::ContainsNul,
            DatabaseNameProblem::TooLong,
        ] {
            assert!(problem.describe().contains("field database"));
        }
        let json = serde_json::to_value(EnsureDatabaseResponse {
            database: "counter".to_owned(),
            outcome: DatabaseOutcome::AlreadyExisted,
            read_only: Some(false),
        })
        .unwrap_or_default();
        assert_eq!(json["outcome"], "alreadyExisted");
        assert_eq!(json["readOnly"], false);
    }

    /// docs/design/history.md#issue-8: the promotion's drain is explicit on the wire: a GTID
    /// set to reach (planned) or everything received (emergency), never "nothing".
    #[test]
    fn promote_request_names_its_drain() {
        let request = |drain| PromoteRequest {
            group: "playground".to_owned(),
            drain,
            timeout_ms: 10_000,
        };
        let json = serde_json::to_value(request(PromoteDrain::Received)).unwrap_or_default();
        assert_eq!(
            json,
            serde_json::json!({"group": "playground", "drain": "received", "timeoutMs": 10_000})
        );
        let json = serde_json::to_value(request(PromoteDrain::UntilGtidSet("0-1-42".into())))
            .unwrap_or_default();
        assert_eq!(json["drain"], serde_json::json!({"untilGtidSet": "0-1-42"}));
        let missing: Result<PromoteRequest, _> =
            serde_json::from_value(serde_json::json!({"group": "playground", "timeoutMs": 1}));
        assert!(missing.is_err(), "a drain is required");
    }

    /// docs/design/history.md#issue-10-case-4: the runtime block is additive; a status from an
    /// older sidecar, which does not send it, still parses (as `None`).
    #[test]
    fn sidecar_status_without_runtime_from_an_older_sidecar_still_parses() {
        let old = serde_json::json!({
            "group": "playground",
            "site": "iad",
            "observedAt": "2026-01-01T00:00:00Z",
            "mysql": {"reachable": true, "error": null, "readOnly": true, "gtidExecuted": "0-1-5",
                      "replication": null, "mysqld": null},
            "fenced": true,
            "fence": null,
            "lease": {"held": false, "remainingMs": 0},
            "authority": null,
            "lastGrantedAgoMs": {}
        });
        let parsed: Result<SidecarStatus, _> = serde_json::from_value(old.clone());
        let status = match parsed {
            Ok(status) => status,
            Err(error) => panic!("an older sidecar's status parses: {error}"),
        };
        assert_eq!(status.runtime, None);
        let mut new = old;
        new["runtime"] = serde_json::json!({
            "uptimeMs": 1500,
            "lease": {"durationMs": 6000, "sites": ["iad", "pdx", "reader"]}
        });
        let parsed: Result<SidecarStatus, _> = serde_json::from_value(new);
        let runtime = parsed.ok().and_then(|status| status.runtime);
        assert_eq!(runtime.as_ref().map(|r| r.uptime_ms), Some(1500));
        assert_eq!(runtime.map(|r| r.lease.majority()), Some(2));
    }

    #[test]
    fn sidecar_wire_types_are_camel_case() {
        let json = serde_json::to_value(LeaseRequest {
            group: "playground".to_owned(),
            site: "iad".to_owned(),
            topology_generation: 7,
        })
        .unwrap_or_default();
        assert_eq!(json["topologyGeneration"], 7);
        let json = serde_json::to_value(authority(None, 2)).unwrap_or_default();
        assert!(json["activeSite"].is_null());
        assert!(json["issuedAt"].is_string());
    }
}
