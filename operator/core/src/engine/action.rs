//! [`Decision`] and the typed [`Action`]s the shell executes.
//!
//! # Executing a decision
//!
//! The shell (operator or simulator) executes `actions` **in order** and then persists
//! `memory` (status, plus the annotation changes among the actions). The order is the one of
//! docs/design/architecture.md#one-poll: node taints first, then cross-site actions (authority,
//! fencing, promotion, repointing, lease revocation), then pod labels, Services, the
//! DNSEndpoint, annotations, events and metrics.
//!
//! Every action is idempotent, and the shell never interprets an error: a mutation that
//! errored or timed out is an *unknown*, and the next poll's `Observation` re-reads what
//! actually happened (docs/design/requirements.md R001.15). The shell carries on with the
//! remaining actions of the poll; `decide` never emits, in one poll, an action whose safety
//! depends on an earlier one of the same poll having succeeded (a promotion is split across
//! polls for that reason).

use std::collections::BTreeMap;

use bloodraven_api::{
    sidecar::{
        ArchiveRequest, Authority, BackupRequest, FenceRequest, PromoteRequest, RepointRequest,
        ReseedRequest, RestoreRequest,
    },
    DNSEndpointSpec, FailoverKind,
};

use super::memory::{GroupMemory, PodRole, SiteState};
use crate::deploy::RevokeReason;
use crate::time::{Duration, Timestamp};

/// The output of one [`decide`](super::decide) call.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// What to do, in execution order.
    pub actions: Vec<Action>,
    /// The memory to persist (and to pass to the next `decide`).
    pub memory: GroupMemory,
    /// The per-site state transitions of this poll (the taint actions are a function of
    /// these), for logs and the simulator's checkers.
    pub transitions: Vec<SiteTransition>,
}

/// One site changing [`SiteState`] in a poll.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteTransition {
    /// The site.
    pub site: String,
    /// State before this poll.
    pub from: SiteState,
    /// State after this poll.
    pub to: SiteState,
}

/// One thing the shell does.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Put the `bloodraven.shipstream.io/demoted=<group>:NoExecute` taint on `node` (the node
    /// of a demoted read-write site; never a read-only site's). Always first in a decision.
    TaintNode {
        /// The demoted site.
        site: String,
        /// Its pod's node.
        node: String,
    },
    /// Remove the demotion taint of this group from `node` (the site rejoined as a replica).
    UntaintNode {
        /// The site that rejoined.
        site: String,
        /// Its pod's node.
        node: String,
    },
    /// `PUT /v1/authority` on `site`'s sidecar with an authority naming a site. Pushed to every
    /// site on every poll while no move is in flight.
    PushAuthority {
        /// The sidecar to push to.
        site: String,
        /// The authority (`active_site: Some(..)`).
        authority: Authority,
    },
    /// `PUT /v1/authority` on `site`'s sidecar with the "authority is moving" notice
    /// (`active_site: None`, the generation the move will end in, current + 1, since sidecars
    /// accept only a newer generation): from then on it grants no write lease to
    /// anybody and reports how long ago it last granted each site.
    AnnounceAuthorityMove {
        /// The sidecar to notify.
        site: String,
        /// The notice (`active_site: None`).
        authority: Authority,
    },
    /// `POST /v1/fence` on `site`'s sidecar: read_only now, connections killed (planned
    /// failover's Draining).
    Fence {
        /// The site to fence.
        site: String,
        /// The request body.
        request: FenceRequest,
    },
    /// `POST /v1/promote` on `site`'s sidecar: drain the relay log (emergency: everything
    /// already received, receiving stopped first; planned: up to the old primary's GTID set)
    /// and detach replication.
    /// MySQL becomes writable later, through the lease rule, once an authority naming the site
    /// is pushed (a later poll, after the detachment is observed).
    Promote {
        /// The candidate.
        site: String,
        /// The request body.
        request: PromoteRequest,
    },
    /// `POST /v1/repoint` on `site`'s sidecar: replicate from the active site's canonical
    /// internal Service host.
    Repoint {
        /// The site to repoint.
        site: String,
        /// The request body.
        request: RepointRequest,
    },
    /// `POST /v1/backup` on `site`'s sidecar (the active site): a named backup
    /// (`engine::restore`). Repeated every poll until its outcome is observed (idempotent).
    Backup {
        /// The active site.
        site: String,
        /// The request body.
        request: BackupRequest,
    },
    /// `POST /v1/restore` on `site`'s sidecar: load a named backup (only while the site is
    /// fenced; `engine::restore`). Repeated until the job's outcome is observed.
    Restore {
        /// The site restored in place.
        site: String,
        /// The request body.
        request: RestoreRequest,
    },
    /// `POST /v1/reseed` on `site`'s sidecar: replace a replica's data with a dump of the
    /// restored active site and replicate from it. Repeated until the job's outcome is observed.
    Reseed {
        /// The replica.
        site: String,
        /// The request body.
        request: ReseedRequest,
    },
    /// `POST /v1/archive` on `site`'s sidecar: before a rejoin re-seeds a fenced returning
    /// primary, write its errant transactions' binlog events and a full dump of it under
    /// `archives/<name>/` on its backups volume (`engine::rejoin`). Only for a demoted site
    /// under an explicit fence; repeated until the job's outcome is observed.
    Archive {
        /// The returning primary.
        site: String,
        /// The request body.
        request: ArchiveRequest,
    },
    /// Delete the site's pod, conditional on its uid, with `grace` as `gracePeriodSeconds`
    /// (never 0: a force deletion does not wait for the kubelet): the kubelet kills its
    /// containers, a frozen mysqld included. Emitted only for an agentless old primary during
    /// an emergency failover (`engine::agentless`); a pod already gone, or recreated under
    /// another uid, makes it a no-op.
    DeletePod {
        /// The site.
        site: String,
        /// The pod (`mysql-<group>-<site>-0`).
        pod: String,
        /// `metadata.uid` of the pod to delete (a precondition).
        uid: String,
        /// The grace period.
        grace: Duration,
    },
    /// Ordered update (`engine::update`): set the `mysql` image of the site's StatefulSet
    /// template to `image`, then delete the site's pod, conditional on `uid`, with `grace` as
    /// `gracePeriodSeconds` (mysqld shuts down cleanly); the StatefulSet recreates it with the
    /// new image. Never emitted for the active site. A pod already gone, or recreated under
    /// another uid, makes the deletion a no-op; the template is still set.
    RollSite {
        /// The site.
        site: String,
        /// The pod (`mysql-<group>-<site>-0`).
        pod: String,
        /// `metadata.uid` of the pod to delete (a precondition).
        uid: String,
        /// The image to run.
        image: String,
        /// The grace period.
        grace: Duration,
    },
    /// Server-side apply the role and healthy labels on the site's pod.
    SetPodLabels {
        /// The site.
        site: String,
        /// The pod (`mysql-<group>-<site>-0`).
        pod: String,
        /// `shipstream.io/role`.
        role: PodRole,
        /// `shipstream.io/healthy` (`yes` when true).
        healthy: bool,
    },
    /// Server-side apply one of the `2 × sites + 2` Services (desired state, every poll).
    ApplyService(DesiredService),
    /// Server-side apply (field manager `bloodraven`, force) the DNSEndpoint. Emitted only
    /// when the read-back record differs from the desired one, and only for the active site
    /// while the authority is valid.
    ApplyDnsEndpoint {
        /// `bloodraven-<group>`.
        name: String,
        /// The single A record.
        spec: DNSEndpointSpec,
    },
    /// Revoke every deploy lease of the group (`DeployLeases::revoke_all`: tombstones). When
    /// any lease was actually revoked the shell raises one `DeploymentLeaseRevoked` event
    /// ([`EventReason::DeploymentLeaseRevoked`]) on the group naming each one's kind,
    /// operationId and instance, which only it knows.
    RevokeDeployLeases {
        /// `TopologyChanged` (generation bump) or `OperatorRevoked` (annotation).
        reason: RevokeReason,
        /// The group's topology generation after this decision.
        topology_generation: u64,
    },
    /// Change one of the group's annotations.
    Annotate(AnnotationChange),
    /// Emit a Kubernetes Event on the group.
    Event(Event),
    /// Record a metric observation.
    Metric(MetricObservation),
}

/// An annotation write on the group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnnotationChange {
    /// Set `bloodraven.shipstream.io/cooldown-until` (RFC 3339): the second cooldown copy.
    SetCooldownUntil(Timestamp),
    /// Set `bloodraven.shipstream.io/last-failover` to
    /// `"<kind> <from>-><to> <RFC 3339> generation <N>"` (a `FailoverNote`).
    SetLastFailover(String),
    /// Remove `bloodraven.shipstream.io/planned-failover` (the request reached a final phase).
    ClearPlannedFailover,
    /// Remove `bloodraven.shipstream.io/revoke-deployment-leases` (the leases were revoked).
    ClearRevokeDeploymentLeases,
    /// Remove `bloodraven.shipstream.io/backup` (the backup completed or failed).
    ClearBackup,
    /// Remove `bloodraven.shipstream.io/restore` (the restore reached a final phase).
    ClearRestore,
    /// Remove `bloodraven.shipstream.io/rejoin` (the rejoin it named reached a final phase).
    ClearRejoin,
}

/// The four kinds of Service (docs/design/requirements.md R000.2: `2 × len(sites) + 2` objects).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceKind {
    /// `mysql-<group>-<site>`: MySQL + sidecar ports, `publishNotReadyAddresses: true`,
    /// selects the site's pod; the canonical replication source host. Never for applications.
    SiteInternal,
    /// `mysql-<group>-<site>-hl`: headless governing Service of the site's StatefulSet.
    SiteHeadless,
    /// `mysql-<group>-primary`: instance + `role=primary`, not publishNotReady.
    Primary,
    /// `mysql-<group>-replicas`: instance + `role=replica` + `healthy=yes`.
    Replicas,
}

/// A Service as it must exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredService {
    /// Object name.
    pub name: String,
    /// Which of the four kinds.
    pub kind: ServiceKind,
    /// The site of a per-site Service; `None` for the shared ones.
    pub site: Option<String>,
    /// Label selector.
    pub selector: BTreeMap<String, String>,
    /// Ports: `(name, port)`, target port equal to port.
    pub ports: Vec<(String, u16)>,
    /// `spec.publishNotReadyAddresses`.
    pub publish_not_ready_addresses: bool,
    /// `spec.clusterIP: None` (headless).
    pub headless: bool,
}

/// A Kubernetes Event on the group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The catalogued reason.
    pub reason: EventReason,
    /// Human-readable message.
    pub message: String,
}

/// Event type (`Normal` or `Warning`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Expected operation.
    Normal,
    /// Needs attention.
    Warning,
}

/// The catalogue of Events the engine emits (`reason` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventReason {
    /// The first authority was issued (bootstrap).
    AuthorityIssued,
    /// The authority became valid (confirmed writable active site).
    AuthorityValid,
    /// The authority became invalid; shared endpoints shed.
    AuthorityInvalid,
    /// A site reached `failureThreshold` consecutive failed polls.
    SiteFailed,
    /// A failed site answered again.
    SiteRecovered,
    /// A newer authority cached by the sidecars was adopted (memory was stale or lost).
    AuthorityAdopted,
    /// Emergency failover started: the move notice was issued.
    EmergencyFailoverStarted,
    /// The active site failed but the cooldown blocks an emergency failover.
    EmergencyFailoverBlockedByCooldown,
    /// The active site failed and no read-write site qualifies as candidate.
    NoFailoverCandidate,
    /// Waiting for the old site's lease to lapse before promoting.
    AwaitingLeaseExpiry,
    /// The lease wait was skipped by the test-only switch.
    LeaseWaitSkipped,
    /// The old site is known unable to write (lease lapsed, or confirmed read-only/down).
    OldPrimaryFenced,
    /// A candidate replicates from a site holding transactions it lacks before it drains.
    CatchingUp,
    /// A candidate was told to drain and detach.
    Draining,
    /// New authority issued (generation bumped) to the new active site.
    Promoted,
    /// A failover completed (the new active site is confirmed writable).
    FailoverCompleted,
    /// `lastFailover.lostTransactions` became exact.
    LostTransactionsExact,
    /// A returning old primary is kept fenced (errant transactions, or not yet checked).
    ReturningPrimaryFenced,
    /// A demoted site rejoined as a replica (no errant transactions).
    ReturningPrimaryRejoined,
    /// The active site's mysqld restarted; authority re-issued, no failover.
    PrimaryReasserted,
    /// A planned failover request was seen and is being admitted.
    PlannedFailoverAdmitting,
    /// A planned failover was deferred (cooldown or deployment hold).
    PlannedFailoverDeferred,
    /// A planned failover was rejected.
    PlannedFailoverRejected,
    /// A planned failover fenced the old primary (Draining).
    PlannedFailoverDraining,
    /// A planned failover issued the new authority (Promoting).
    PlannedFailoverPromoting,
    /// A planned failover completed with zero lost transactions.
    PlannedFailoverCompleted,
    /// A planned failover was aborted and the old site re-asserted.
    PlannedFailoverAborted,
    /// A deploy lease was revoked (the event name of docs/design/requirements.md R003.20).
    /// Raised by the shell when it executes [`Action::RevokeDeployLeases`], once per revoked
    /// lease; never by `decide`.
    DeploymentLeaseRevoked,
    /// A site's replication was pointed at the active site.
    Repointed,
    /// A site's GTID text could not be parsed (flavor mismatch or garbage).
    GtidUnreadable,
    /// One of the group's annotations that `decide` reads has a value it cannot parse
    /// (`bloodraven.shipstream.io/last-failover` not in the `FailoverNote` format); it is
    /// ignored.
    AnnotationUnreadable,
    /// The `bloodraven.shipstream.io/last-failover` annotation names a failover newer than
    /// memory, but its signature did not verify with the group's operator key (absent, made
    /// with another key, or the text changed after signing); it is not adopted.
    AnnotationUnverified,
    /// The spec is unusable (`MysqlFailoverGroupSpec::validate`); nothing else is decided.
    SpecInvalid,
    /// Sidecars run with lease terms (duration or site set) that differ from each other or
    /// from the spec (their pods predate a spec change): the lease wait counts a majority of
    /// every site set in play and waits out the longest duration.
    LeaseTermsDiffer,
    /// An authority no sidecar vouches for (bootstrap, or every sidecar that answered forgot
    /// it) was not issued: the site it would name lacks transactions another site holds, or
    /// too few sites were readable to tell.
    AuthorityWithheld,
    /// The old active site's sidecar is gone (unreachable, and its kubelet reports it not
    /// ready): its pod is deleted so that the kubelet kills mysqld before the promotion.
    AgentlessPrimaryKilled,
    /// The agentless old primary's pod was not removed in time: the promotion went ahead on
    /// the lease alone.
    AgentlessPrimaryNotKilled,
    /// An authority no sidecar vouched for was issued to the site holding every readable
    /// site's transactions instead of the one memory (or `initialActiveSite`) named.
    AuthorityRecovered,
    /// A named backup of the active site was asked of its sidecar.
    BackupStarted,
    /// A named backup is on the active site's volume.
    BackupCompleted,
    /// A named backup failed (the reason in the message).
    BackupFailed,
    /// A restore in place was requested and is being admitted.
    RestoreAdmitting,
    /// A restore in place was deferred by a live failover-hold.
    RestoreDeferred,
    /// The active site was fenced for a restore in place (`role=fenced`).
    RestoreFencing,
    /// The fenced site's sidecar loads the backup.
    RestoreRestoring,
    /// The restored site was re-promoted (generation bumped, deploy leases revoked).
    RestorePromoted,
    /// Replicas holding transactions the backup lacks are re-seeded.
    RestoreReseeding,
    /// A restore in place completed (what it lost in the message).
    RestoreCompleted,
    /// A restore in place stopped (why, in the message).
    RestoreFailed,
    /// A changed `spec.image` started an ordered update.
    OrderedUpdateStarted,
    /// An ordered update waits behind a live failover-hold or the cooldown (onCooldown: defer).
    OrderedUpdateDeferred,
    /// An ordered update recreates a site with the new image.
    OrderedUpdateRollingSite,
    /// A recreated site runs the new image and is healthy again.
    OrderedUpdateSiteUpdated,
    /// Every replica runs the new image: the update's planned failover starts.
    OrderedUpdateFailingOver,
    /// Every site runs the new image and is healthy.
    OrderedUpdateCompleted,
    /// A step of an ordered update failed; the update stopped (the message says why).
    OrderedUpdateFailed,
    /// The rejoin of a fenced returning primary was requested (annotation or
    /// `spec.returningPrimary.onErrant: rejoin`).
    RejoinRequested,
    /// A rejoin was deferred by a live failover-hold.
    RejoinDeferred,
    /// A rejoin was refused (the message says why); the site is as it was.
    RejoinRefused,
    /// A rejoin fenced the site explicitly and asked its sidecar for the archive (named, with
    /// the errant GTID set, in the message).
    RejoinArchiving,
    /// The archive is complete (its name and GTID set in the message); the site is re-seeded.
    RejoinArchived,
    /// The rejoined site is a replica of the active site again.
    RejoinCompleted,
    /// A rejoin stopped; the site stays fenced and any archive is kept (why, in the message).
    RejoinFailed,
}

impl EventReason {
    /// The reason string (`DeploymentLeaseRevoked`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            EventReason::AuthorityIssued => "AuthorityIssued",
            EventReason::AuthorityValid => "AuthorityValid",
            EventReason::AuthorityInvalid => "AuthorityInvalid",
            EventReason::SiteFailed => "SiteFailed",
            EventReason::SiteRecovered => "SiteRecovered",
            EventReason::AuthorityAdopted => "AuthorityAdopted",
            EventReason::EmergencyFailoverStarted => "EmergencyFailoverStarted",
            EventReason::EmergencyFailoverBlockedByCooldown => "EmergencyFailoverBlockedByCooldown",
            EventReason::NoFailoverCandidate => "NoFailoverCandidate",
            EventReason::AwaitingLeaseExpiry => "AwaitingLeaseExpiry",
            EventReason::LeaseWaitSkipped => "LeaseWaitSkipped",
            EventReason::OldPrimaryFenced => "OldPrimaryFenced",
            EventReason::CatchingUp => "CatchingUp",
            EventReason::Draining => "Draining",
            EventReason::Promoted => "Promoted",
            EventReason::FailoverCompleted => "FailoverCompleted",
            EventReason::LostTransactionsExact => "LostTransactionsExact",
            EventReason::ReturningPrimaryFenced => "ReturningPrimaryFenced",
            EventReason::ReturningPrimaryRejoined => "ReturningPrimaryRejoined",
            EventReason::PrimaryReasserted => "PrimaryReasserted",
            EventReason::PlannedFailoverAdmitting => "PlannedFailoverAdmitting",
            EventReason::PlannedFailoverDeferred => "PlannedFailoverDeferred",
            EventReason::PlannedFailoverRejected => "PlannedFailoverRejected",
            EventReason::PlannedFailoverDraining => "PlannedFailoverDraining",
            EventReason::PlannedFailoverPromoting => "PlannedFailoverPromoting",
            EventReason::PlannedFailoverCompleted => "PlannedFailoverCompleted",
            EventReason::PlannedFailoverAborted => "PlannedFailoverAborted",
            EventReason::DeploymentLeaseRevoked => "DeploymentLeaseRevoked",
            EventReason::Repointed => "Repointed",
            EventReason::GtidUnreadable => "GtidUnreadable",
            EventReason::AnnotationUnreadable => "AnnotationUnreadable",
            EventReason::AnnotationUnverified => "AnnotationUnverified",
            EventReason::SpecInvalid => "SpecInvalid",
            EventReason::LeaseTermsDiffer => "LeaseTermsDiffer",
            EventReason::AuthorityWithheld => "AuthorityWithheld",
            EventReason::AuthorityRecovered => "AuthorityRecovered",
            EventReason::AgentlessPrimaryKilled => "AgentlessPrimaryKilled",
            EventReason::AgentlessPrimaryNotKilled => "AgentlessPrimaryNotKilled",
            EventReason::BackupStarted => "BackupStarted",
            EventReason::BackupCompleted => "BackupCompleted",
            EventReason::BackupFailed => "BackupFailed",
            EventReason::RestoreAdmitting => "RestoreAdmitting",
            EventReason::RestoreDeferred => "RestoreDeferred",
            EventReason::RestoreFencing => "RestoreFencing",
            EventReason::RestoreRestoring => "RestoreRestoring",
            EventReason::RestorePromoted => "RestorePromoted",
            EventReason::RestoreReseeding => "RestoreReseeding",
            EventReason::RestoreCompleted => "RestoreCompleted",
            EventReason::RestoreFailed => "RestoreFailed",
            EventReason::OrderedUpdateStarted => "OrderedUpdateStarted",
            EventReason::OrderedUpdateDeferred => "OrderedUpdateDeferred",
            EventReason::OrderedUpdateRollingSite => "OrderedUpdateRollingSite",
            EventReason::OrderedUpdateSiteUpdated => "OrderedUpdateSiteUpdated",
            EventReason::OrderedUpdateFailingOver => "OrderedUpdateFailingOver",
            EventReason::OrderedUpdateCompleted => "OrderedUpdateCompleted",
            EventReason::OrderedUpdateFailed => "OrderedUpdateFailed",
            EventReason::RejoinRequested => "RejoinRequested",
            EventReason::RejoinDeferred => "RejoinDeferred",
            EventReason::RejoinRefused => "RejoinRefused",
            EventReason::RejoinArchiving => "RejoinArchiving",
            EventReason::RejoinArchived => "RejoinArchived",
            EventReason::RejoinCompleted => "RejoinCompleted",
            EventReason::RejoinFailed => "RejoinFailed",
        }
    }

    /// Normal or Warning.
    pub fn event_type(self) -> EventType {
        match self {
            EventReason::AuthorityIssued
            | EventReason::AuthorityValid
            | EventReason::SiteRecovered
            | EventReason::AuthorityAdopted
            | EventReason::AwaitingLeaseExpiry
            | EventReason::OldPrimaryFenced
            | EventReason::CatchingUp
            | EventReason::Draining
            | EventReason::Promoted
            | EventReason::FailoverCompleted
            | EventReason::LostTransactionsExact
            | EventReason::ReturningPrimaryRejoined
            | EventReason::PrimaryReasserted
            | EventReason::PlannedFailoverAdmitting
            | EventReason::PlannedFailoverDeferred
            | EventReason::PlannedFailoverDraining
            | EventReason::PlannedFailoverPromoting
            | EventReason::PlannedFailoverCompleted
            | EventReason::DeploymentLeaseRevoked
            | EventReason::Repointed
            | EventReason::BackupStarted
            | EventReason::BackupCompleted
            | EventReason::RestoreAdmitting
            | EventReason::RestoreDeferred
            | EventReason::RestoreFencing
            | EventReason::RestoreRestoring
            | EventReason::RestorePromoted
            | EventReason::RestoreReseeding
            | EventReason::RestoreCompleted
            | EventReason::OrderedUpdateStarted
            | EventReason::OrderedUpdateDeferred
            | EventReason::OrderedUpdateRollingSite
            | EventReason::OrderedUpdateSiteUpdated
            | EventReason::OrderedUpdateFailingOver
            | EventReason::OrderedUpdateCompleted
            | EventReason::RejoinRequested
            | EventReason::RejoinDeferred
            | EventReason::RejoinArchiving
            | EventReason::RejoinArchived
            | EventReason::RejoinCompleted => EventType::Normal,
            EventReason::AuthorityInvalid
            | EventReason::SiteFailed
            | EventReason::EmergencyFailoverStarted
            | EventReason::EmergencyFailoverBlockedByCooldown
            | EventReason::NoFailoverCandidate
            | EventReason::LeaseWaitSkipped
            | EventReason::ReturningPrimaryFenced
            | EventReason::PlannedFailoverRejected
            | EventReason::PlannedFailoverAborted
            | EventReason::GtidUnreadable
            | EventReason::AnnotationUnreadable
            | EventReason::AnnotationUnverified
            | EventReason::SpecInvalid
            | EventReason::LeaseTermsDiffer
            | EventReason::AuthorityWithheld
            | EventReason::AuthorityRecovered
            | EventReason::AgentlessPrimaryKilled
            | EventReason::AgentlessPrimaryNotKilled
            | EventReason::BackupFailed
            | EventReason::RestoreFailed
            | EventReason::OrderedUpdateFailed
            | EventReason::RejoinRefused
            | EventReason::RejoinFailed => EventType::Warning,
        }
    }
}

/// A metric observation for the shell's Prometheus registry.
#[derive(Clone, Debug, PartialEq)]
pub enum MetricObservation {
    /// `bloodraven_failovers_total{kind}` += 1 (at completion).
    FailoverCompleted {
        /// emergency or planned.
        kind: FailoverKind,
    },
    /// `bloodraven_failover_duration_seconds` observes `duration` (start to completion).
    FailoverDuration {
        /// emergency or planned.
        kind: FailoverKind,
        /// From `lastFailover.startedAt` to `completedAt`.
        duration: Duration,
    },
    /// `bloodraven_lost_transactions_total` += `count` (when the count becomes exact, by the
    /// difference from what was already counted).
    LostTransactions {
        /// Transactions to add.
        count: u64,
    },
    /// `bloodraven_planned_failovers_deferred_total` += 1 (on entering Deferred).
    PlannedFailoverDeferred,
    /// Replication lag of a site (gauge), when known.
    ReplicationLag {
        /// The site.
        site: String,
        /// `secondsBehindSource`.
        seconds: u64,
    },
}
