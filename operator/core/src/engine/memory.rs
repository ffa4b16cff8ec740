//! [`GroupMemory`]: what the operator remembers between polls, the second input of
//! [`decide`](super::decide) and half of its output.
//!
//! Almost all of it is persisted in the group's status (see each field); what is not
//! (marked *volatile*) is recovered or safely re-derived after an operator restart:
//!
//! - an emergency failover in flight is recovered from the sidecars' cached "authority is
//!   moving" notice (the lease wait restarts from the recovery poll, which is conservative);
//! - a newer authority than memory knows (a status write that failed after a promotion) is
//!   adopted from the sidecars' cached authority with the highest generation.
//!
//! The last promotion is also noted apart from the status, in the annotation
//! `bloodraven.shipstream.io/last-failover` (`FailoverNote`: kind, sites, `promotedAt` and the
//! generation issued). A status reverted to a copy from before that promotion resumes memory
//! from before it; the note then names a generation above memory's, and memory adopts its
//! authority and the cooldown it started (`detection::adopt_noted_failover`) before it
//! consults the sidecars. `status.lastFailover` keeps the older record (the note carries
//! neither the failover's other times nor its loss).
//!
//! The anti-flap cooldown is persisted twice: [`GroupMemory::cooldown_until`] is the status
//! copy, and the annotation `bloodraven.shipstream.io/cooldown-until` is the other (read back as
//! [`GroupAnnotations::cooldown_until`], written by
//! [`AnnotationChange::SetCooldownUntil`]). Either can be lost independently; the later one is
//! in force. Losing both across a restart lets a restarted operator promote early: the
//! simulator's inherent finding `CooldownViolated(restart+stateLost)`
//! (docs/design/requirements.md R001.10). `decide` cannot know, by construction.
//!
//! [`GroupAnnotations::cooldown_until`]: super::GroupAnnotations::cooldown_until
//! [`AnnotationChange::SetCooldownUntil`]: super::AnnotationChange::SetCooldownUntil

use bloodraven_api::{
    Admission, Condition, LastFailover, MysqlFailoverGroupSpec, PlannedFailoverPhase,
};
use bloodraven_mysql::GtidSet;

use crate::time::Timestamp;

/// The operator's memory of one group.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupMemory {
    /// The site the authority names active (`status.activeSite`). During an authority move
    /// it is still the old site until the promotion is issued.
    pub active_site: String,
    /// `status.topologyGeneration`: increments on every authoritative change of active site
    /// (bootstrap, emergency and planned promotion). Every bump revokes every deploy lease
    /// with `TopologyChanged` (docs/design/requirements.md R003.20). `0`: no authority was ever
    /// issued.
    pub topology_generation: u64,
    /// A generation a sidecar reports was issued, above `topology_generation`, whose authority
    /// memory could not adopt (no sidecar that answers caches it: a reverted status, say): its
    /// holder is unknown, so memory keeps naming the authority it did issue and issues nothing
    /// at or below this one ([`GroupMemory::next_generation`]). `0`: none. *Volatile*: the
    /// sidecars report it again after a restart.
    pub unadopted_generation: u64,
    /// When the authority `(active_site, topology_generation)` was first issued; the
    /// `issuedAt` pushed to the sidecars. *Volatile*: re-stamped after a restart.
    pub authority_issued_at: Option<Timestamp>,
    /// `status.authority`: whether there is a confirmed writable active site.
    pub authority: AuthorityValidity,
    /// When the authority last turned invalid (`None` while it is valid): polls follow up
    /// while it stays invalid ([`super::cadence`]). *Volatile*: a restart starts the count again.
    pub authority_invalid_since: Option<Timestamp>,
    /// Per-site memory, one per `spec.sites[]`, in spec order (`status.sites[]`).
    pub sites: Vec<SiteMemory>,
    /// `status.cooldownUntil`: the status copy of the anti-flap cooldown end (see the module
    /// docs for the annotation copy).
    pub cooldown_until: Option<Timestamp>,
    /// `status.plannedFailover`: the planned failover in flight or last finished.
    pub planned_failover: Option<PlannedFailover>,
    /// The emergency failover in flight. *Volatile*, recovered from the sidecars' cached
    /// move notice after a restart.
    pub emergency_failover: Option<EmergencyFailover>,
    /// `status.orderedUpdate`: the ordered update in flight or last finished (`engine::update`).
    pub ordered_update: Option<super::update::OrderedUpdate>,
    /// `status.lastFailover`: written when a promotion is issued, completed when the new
    /// active site is confirmed writable, made exact when the old primary is readable again.
    pub last_failover: Option<LastFailover>,
    /// `status.conditions` (`Ready`, `Degraded`, `FailoverInProgress`, `Stable`), derived by
    /// every `decide` from the rest of this memory; kept here so a condition whose status
    /// does not flip keeps its `lastTransitionTime`.
    pub conditions: Vec<Condition>,
    /// `status.restore`: the restore in place in flight or last finished
    /// (`engine::restore`).
    pub restore: Option<super::restore::RestoreMemory>,
    /// `status.lastBackup`: the last named backup requested.
    pub last_backup: Option<bloodraven_api::BackupStatus>,
}

impl GroupMemory {
    /// The generation the next authority (or move notice) is issued at: above memory's own
    /// and above every generation a sidecar reported issued that memory could not adopt.
    pub fn next_generation(&self) -> u64 {
        self.topology_generation.max(self.unadopted_generation) + 1
    }

    /// Moves memory to [`GroupMemory::next_generation`]: an authority is being issued now.
    pub fn advance_generation(&mut self) {
        self.take_generation(self.next_generation());
    }

    /// Memory's generation becomes `generation` (issued or adopted); an unadopted generation
    /// it reaches is no longer a floor above it.
    pub fn take_generation(&mut self, generation: u64) {
        self.topology_generation = generation;
        if self.unadopted_generation <= generation {
            self.unadopted_generation = 0;
        }
    }

    /// The memory of a group never polled: the spec's initial active site, generation 0 (no
    /// authority issued yet), every site a replica except the initial active one.
    pub fn initial(spec: &MysqlFailoverGroupSpec) -> GroupMemory {
        GroupMemory {
            active_site: spec.initial_active_site.clone(),
            topology_generation: 0,
            unadopted_generation: 0,
            authority_issued_at: None,
            authority: AuthorityValidity::Invalid(InvalidReason::NotIssued),
            authority_invalid_since: None,
            sites: spec
                .sites
                .iter()
                .map(|site| {
                    let state = if site.name == spec.initial_active_site {
                        SiteState::Active
                    } else {
                        SiteState::Replica
                    };
                    SiteMemory::new(&site.name, state)
                })
                .collect(),
            cooldown_until: None,
            planned_failover: None,
            emergency_failover: None,
            ordered_update: None,
            last_failover: None,
            conditions: Vec::new(),
            restore: None,
            last_backup: None,
        }
    }

    /// The memory of the named site.
    pub fn site(&self, name: &str) -> Option<&SiteMemory> {
        self.sites.iter().find(|site| site.site == name)
    }

    /// The memory of the named site, mutable.
    pub fn site_mut(&mut self, name: &str) -> Option<&mut SiteMemory> {
        self.sites.iter_mut().find(|site| site.site == name)
    }
}

/// `status.authority`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthorityValidity {
    /// The active site was observed writable, holding its lease, with the current authority
    /// cached, and no authority move is in flight. Only then is any pod `role=primary` and
    /// any replica `healthy=yes`.
    Valid,
    /// No confirmed writable active site: no pod is primary, no replica is healthy, both
    /// shared Services select nothing, on purpose (docs/design/requirements.md R000.10).
    Invalid(InvalidReason),
}

impl AuthorityValidity {
    /// Whether the authority is valid.
    pub fn is_valid(&self) -> bool {
        match self {
            AuthorityValidity::Valid => true,
            AuthorityValidity::Invalid(_) => false,
        }
    }
}

/// Why the authority is invalid (`status.authority.reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvalidReason {
    /// No authority was ever issued (bootstrap), or it was issued and not yet confirmed.
    NotIssued,
    /// The active site's sidecar did not answer this poll.
    ActiveUnreachable,
    /// The active site's MySQL is down.
    ActiveMysqlDown,
    /// The active site's MySQL is read-only (restarted, self-fenced, or not yet leased).
    ActiveNotWritable,
    /// The active site's sidecar holds no write lease.
    ActiveLeaseNotHeld,
    /// The active site's sidecar caches another authority than the one issued.
    ActiveAuthorityMismatch,
    /// An authority move (emergency or planned failover) is in flight.
    Moving,
}

impl InvalidReason {
    /// The CamelCase reason written to `status.authority.reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            InvalidReason::NotIssued => "NotIssued",
            InvalidReason::ActiveUnreachable => "ActiveUnreachable",
            InvalidReason::ActiveMysqlDown => "ActiveMysqlDown",
            InvalidReason::ActiveNotWritable => "ActiveNotWritable",
            InvalidReason::ActiveLeaseNotHeld => "ActiveLeaseNotHeld",
            InvalidReason::ActiveAuthorityMismatch => "ActiveAuthorityMismatch",
            InvalidReason::Moving => "Moving",
        }
    }
}

/// The lifecycle state of one site. The node taint is a pure function of a transition
/// between these (see `SiteTransition`), never of anything else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SiteState {
    /// Named active by the authority (`GroupMemory::active_site`).
    Active,
    /// Follows the active site (or waits to): `role=replica`.
    Replica,
    /// A former active read-write site that lost the authority (emergency or planned
    /// failover): `role=fenced`, never a source, its node tainted `NoExecute`. It rejoins as a
    /// replica only with no errant transactions.
    Demoted,
}

impl SiteState {
    /// Lowercase name, for events.
    pub fn as_str(self) -> &'static str {
        match self {
            SiteState::Active => "active",
            SiteState::Replica => "replica",
            SiteState::Demoted => "demoted",
        }
    }
}

/// Failure detection of one site, derived from consecutive failed polls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detection {
    /// The last poll reached the sidecar and MySQL.
    Up,
    /// Failed polls, fewer than `failureThreshold` or within the detection floor.
    Suspect,
    /// `failureThreshold` consecutive failed polls spanning at least the detection floor
    /// (`pollInterval × failureThreshold`).
    Failed,
}

/// The memory of one site (`status.sites[]`).
#[derive(Clone, Debug, PartialEq)]
pub struct SiteMemory {
    /// Site name.
    pub site: String,
    /// Lifecycle state (derivable from `status.activeSite` and `status.sites[].role`).
    pub state: SiteState,
    /// Failure detection state.
    pub detection: Detection,
    /// `consecutiveFailures`: consecutive failed polls (sidecar unreachable or MySQL down; for
    /// the active site after bootstrap, also not writable).
    pub consecutive_failures: u32,
    /// The first failed poll of the current failure streak. *Volatile*.
    pub failing_since: Option<Timestamp>,
    /// When the current failure streak was detected (`Detection::Failed`). *Volatile*.
    pub failed_at: Option<Timestamp>,
    /// The first read of the current run of reads that did not reach the sidecar at all (a
    /// hang shows at its kubelet only a probe window later: `engine::agentless`). *Volatile*:
    /// a restarted operator counts again, which only waits longer.
    pub sidecar_unreachable_since: Option<Timestamp>,
    /// `lastSeen`: time of the last poll that reached the sidecar and MySQL.
    pub last_seen: Option<Timestamp>,
    /// `gtidExecuted`: the last GTID set read (kept while the site is unreachable: for the old
    /// primary it is the lower-bound basis of `lastFailover.lostTransactions`).
    pub gtid_executed: Option<GtidSet>,
    /// `errantGtidSet`: transactions this site has that its source (the active site) does
    /// not, from the last poll that read both; for a demoted old primary, what it has that the
    /// new primary lacks. `None`: never computed.
    pub errant: Option<GtidSet>,
    /// Start of the mysqld run last seen (`MysqldRun::started_at`); a change is a restart.
    /// *Volatile*.
    pub mysqld_started_at: Option<Timestamp>,
    /// `reachable`: sidecar and MySQL answered the last poll.
    pub reachable: bool,
    /// `writable`: MySQL was read writable.
    pub writable: bool,
    /// `fenced`: the sidecar reported MySQL fenced.
    pub fenced: bool,
    /// `replicating`: both replication threads running.
    pub replicating: bool,
    /// `sourceHost`: the replication source host MySQL reported.
    pub source_host: Option<String>,
    /// `secondsBehindSource`.
    pub seconds_behind_source: Option<u64>,
    /// `healthy`: the `shipstream.io/healthy` label last decided.
    pub healthy: bool,
    /// `role`: the `shipstream.io/role` label last decided.
    pub role: PodRole,
    /// `rejoin`: the rejoin of this site (a returning primary with errant transactions) in
    /// flight or last finished (`engine::rejoin`).
    pub rejoin: Option<super::rejoin::RejoinMemory>,
}

impl SiteMemory {
    /// A site never observed, in `state`.
    pub fn new(site: &str, state: SiteState) -> SiteMemory {
        SiteMemory {
            site: site.to_string(),
            state,
            detection: Detection::Up,
            consecutive_failures: 0,
            failing_since: None,
            failed_at: None,
            sidecar_unreachable_since: None,
            last_seen: None,
            gtid_executed: None,
            errant: None,
            mysqld_started_at: None,
            reachable: false,
            writable: false,
            fenced: false,
            replicating: false,
            source_host: None,
            seconds_behind_source: None,
            healthy: false,
            role: PodRole::Replica,
            rejoin: None,
        }
    }
}

/// The value of the `shipstream.io/role` pod label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodRole {
    /// `primary`: only the active site's pod, only while the authority is valid.
    Primary,
    /// `replica`: every other serving site (and the active site while authority is invalid).
    Replica,
    /// `fenced`: a demoted old primary, or the old primary during planned failover's Draining.
    Fenced,
}

impl PodRole {
    /// The label value (`primary`, `replica`, `fenced`).
    pub fn as_str(self) -> &'static str {
        match self {
            PodRole::Primary => bloodraven_api::names::ROLE_PRIMARY,
            PodRole::Replica => bloodraven_api::names::ROLE_REPLICA,
            PodRole::Fenced => bloodraven_api::names::ROLE_FENCED,
        }
    }
}

/// `status.plannedFailover` plus what `decide` needs to run it.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedFailover {
    /// The requested site (the annotation's value).
    pub target: String,
    /// The active site when the request was admitted (the one being drained).
    pub from: String,
    /// The phase (`Admitting -> (Deferred) -> Draining -> Promoting -> Completed`, or
    /// `Rejected`).
    pub phase: PlannedFailoverPhase,
    /// Admission detail: deferReason, retryTime, message.
    pub admission: Admission,
    /// When the request was first seen.
    pub requested_at: Timestamp,
    /// When the current phase was entered (bounds the Admitting and Draining waits; entering
    /// Deferred or re-entering Admitting restarts it; the Draining entry is the admission,
    /// `lastFailover.startedAt`).
    pub phase_since: Timestamp,
    /// When the old primary was first confirmed read-only in Draining
    /// (`lastFailover.fencedAt`). *Volatile*.
    pub fenced_at: Option<Timestamp>,
    /// Whether, after a terminal phase, a poll saw the annotation gone. Until then the same
    /// annotation value is the request already handled (its removal may have failed), not a
    /// new one.
    pub annotation_cleared: bool,
}

/// An emergency failover in flight.
#[derive(Clone, Debug, PartialEq)]
pub struct EmergencyFailover {
    /// The failed active site.
    pub from: String,
    /// Where it is.
    pub phase: EmergencyPhase,
    /// When the "authority is moving" notice was first issued; the lease wait is judged
    /// against the peers' reports, not this, but it bounds the wait in events.
    pub announced_at: Timestamp,
    /// The first failed poll of the old active site (`lastFailover.startedAt`).
    pub started_at: Timestamp,
    /// When the failure was detected (`lastFailover.detectedAt`).
    pub detected_at: Timestamp,
    /// When the old site was known unable to write (`lastFailover.fencedAt`).
    pub fenced_at: Option<Timestamp>,
    /// `from` is memory's guess, not the site the newest authority named (memory lost that
    /// authority: a reverted status): `from` confirmed read-only then proves nothing about the
    /// site that may hold a lease, so only the lease wait ends this move.
    pub holder_unknown: bool,
}

/// Phases of an emergency failover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EmergencyPhase {
    /// The move notice is out; waiting until the old site cannot be writable: a majority of
    /// sidecars report their last grant to it older than lease duration + clock-drift margin,
    /// or its own sidecar confirms MySQL read-only or down. This wait has no time bound on
    /// purpose: it ends on evidence only, and a bound that promoted anyway would be the
    /// split brain it prevents. It also waits here while no candidate qualifies.
    AwaitingLeaseExpiry,
    /// The candidate lacks transactions another site that is up holds (the old primary shipped
    /// its last transactions to the reader and not to the candidate before it stopped): the
    /// candidate replicates from that site until it holds them all, for at most
    /// `DRAIN_POLLS_MAX` polls, then drains. Promoting it without them would leave that
    /// site with transactions the new primary lacks: errant, fenced, and a write the new
    /// history silently dropped.
    CatchingUp {
        /// The candidate.
        to: String,
        /// The site it replicates from meanwhile.
        source: String,
        /// Polls spent catching up.
        polls: u32,
    },
    /// The candidate is draining its relay log and detaching replication (`Promote`); waiting
    /// to observe it detached.
    Draining {
        /// The candidate.
        to: String,
        /// Polls spent draining this candidate (bounded by `DRAIN_POLLS_MAX`).
        polls: u32,
    },
    /// The authority names the new site (generation bumped); waiting to observe it writable.
    Promoting {
        /// The new active site.
        to: String,
    },
}
